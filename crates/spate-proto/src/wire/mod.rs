//! The Spate v1 wire format (`docs/spec.md` §3–§4).
//!
//! Each packet type has a plain representation (`Hello`, `Data`, …) with an `encode` method that
//! writes into a caller-supplied buffer, and [`parse`] turns received bytes into a [`Parsed`]
//! packet that borrows from them. Parsing validates every field before returning, so code that
//! acts on a `Parsed` never meets a malformed value; it never panics on any input (see the
//! `parse_never_panics` property test and the fuzz targets in `fuzz/`).
//!
//! | file | packets |
//! |---|---|
//! | `header.rs` | the 12-byte header every packet starts with |
//! | `hello.rs` | HELLO, ACCEPT (handshake) |
//! | `data.rs` | DATA, PING |
//! | `feedback.rs` | FEEDBACK (received ranges, timestamps, watermark) |
//! | `close.rs` | CLOSE |
//! | `have.rs` | HAVE (bytes a resuming receiver holds) |
//! | `repair.rs` | REPAIR (a coded symbol over a block of chunks) |

mod close;
mod data;
mod feedback;
mod have;
mod header;
mod hello;
mod repair;

pub use close::{Close, CloseCode};
pub use data::{Data, DataFlags, Ping, DATA_OVERHEAD};
pub use feedback::{AckRanges, Feedback, FeedbackFlags, FeedbackRepr, Rebuilt};
pub use have::{Have, HaveEntry};
pub use header::{Header, PacketType, HEADER_LEN, MAX_PACKET_NUMBER, VERSION};
pub use hello::{
    Accept, Hello, ACCEPT_CODING, ACCEPT_RESUME, CIPHER_NONE, HELLO_GET, HELLO_RESUME, HELLO_VERIFY,
};
pub use repair::{Repair, MAX_BLOCK_CHUNKS, REPAIR_FIELDS};

use crate::codec::Reader;

/// Bytes of IPv4 + UDP header that accompany every datagram on the wire. Rates and link
/// capacities in Spate count these bytes too, so that "950 Mbit/s" means the same thing to the
/// pacer and to the bottleneck.
pub const IP_UDP_OVERHEAD: usize = 28;

/// The smallest datagram size an implementation must support (bytes of UDP payload). Chosen as
/// the IPv6 minimum MTU (1280) minus IPv6 and UDP headers, so a Spate packet is never fragmented.
pub const MIN_DATAGRAM: usize = 1232;

/// The largest datagram size Spate uses (bytes of UDP payload): the UDP maximum for IPv4.
pub const MAX_DATAGRAM: usize = 65_507;

/// Why bytes could not be parsed or a packet could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The packet ended before a field was complete.
    #[error("packet truncated")]
    Truncated,
    /// The output buffer cannot hold the packet.
    #[error("output buffer too small")]
    BufferTooSmall,
    /// The version byte is not one this implementation speaks.
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    /// The packet type is not defined in this version (receivers drop such packets).
    #[error("unknown packet type {0}")]
    UnknownType(u8),
    /// A field holds a value the specification forbids.
    #[error("invalid field: {0}")]
    Invalid(&'static str),
}

/// A packet body, borrowing from the datagram it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet<'a> {
    /// Session request from the sender.
    Hello(Hello<'a>),
    /// The receiver's acceptance.
    Accept(Accept),
    /// File or manifest bytes.
    Data(Data<'a>),
    /// A request for immediate feedback, carrying the ACCEPT's token.
    Ping(Ping),
    /// Receiver report.
    Feedback(Feedback<'a>),
    /// End of session.
    Close(Close<'a>),
    /// Bytes a resuming receiver already holds.
    Have(Have<'a>),
    /// A coded repair symbol.
    Repair(Repair<'a>),
}

/// A parsed datagram: its header and its validated body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The common header.
    pub header: Header,
    /// The body.
    pub packet: Packet<'a>,
}

/// Parse one datagram. Never panics; every error leaves the caller's state untouched.
pub fn parse(datagram: &[u8]) -> Result<Parsed<'_>, WireError> {
    let mut r = Reader::new(datagram);
    let header = Header::decode(&mut r)?;
    let packet = match header.ty {
        PacketType::Hello => Packet::Hello(Hello::decode(&mut r)?),
        PacketType::Accept => Packet::Accept(Accept::decode(&mut r)?),
        PacketType::Data => Packet::Data(Data::decode(header.flags, &mut r)?),
        PacketType::Ping => Packet::Ping(Ping::decode(&mut r)?),
        PacketType::Feedback => Packet::Feedback(Feedback::decode(&mut r)?),
        PacketType::Close => Packet::Close(Close::decode(&mut r)?),
        PacketType::Have => Packet::Have(Have::decode(&mut r)?),
        PacketType::Repair => Packet::Repair(Repair::decode(&mut r)?),
    };
    Ok(Parsed { header, packet })
}

#[cfg(test)]
mod tests;
