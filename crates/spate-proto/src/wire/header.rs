//! The common header (`docs/spec.md` §3.1).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    | Flags | Type  |      Session ID (32) ...      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  ... Session ID               |   Packet Number (48) ...      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  ... Packet Number                            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! > §3.1: The packet number is assigned by the sender of the packet, starts at 0 for each
//! > direction of a session and increases by one for every packet sent. A packet number is never
//! > used twice in one direction, not even for a retransmission.

use super::WireError;
use crate::codec::{Reader, Writer};

/// The protocol version this implementation speaks.
pub const VERSION: u8 = 1;

/// Length of the common header in bytes.
pub const HEADER_LEN: usize = 12;

/// Largest packet number (48 bits). A session that would exceed it closes.
pub const MAX_PACKET_NUMBER: u64 = (1 << 48) - 1;

/// Packet types (the low four bits of byte 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// Sender → receiver: open a session.
    Hello = 1,
    /// Receiver → sender: session accepted.
    Accept = 2,
    /// Sender → receiver: bytes of an object.
    Data = 3,
    /// Sender → receiver: please send feedback now.
    Ping = 4,
    /// Receiver → sender: what arrived.
    Feedback = 5,
    /// Either direction: the session ends.
    Close = 6,
    /// Sender → receiver: a coded repair symbol over a block of chunks.
    Repair = 7,
    /// Receiver → sender: bytes it already holds from an earlier session (resume).
    Have = 8,
}

impl PacketType {
    fn from_nibble(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            1 => PacketType::Hello,
            2 => PacketType::Accept,
            3 => PacketType::Data,
            4 => PacketType::Ping,
            5 => PacketType::Feedback,
            6 => PacketType::Close,
            7 => PacketType::Repair,
            8 => PacketType::Have,
            // 0 and 9–15 are unassigned here (9–11 are the stateless packets of spec §9).
            other => return Err(WireError::UnknownType(other)),
        })
    }
}

/// The common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Packet type.
    pub ty: PacketType,
    /// Type-specific flags (the high four bits of byte 1).
    pub flags: u8,
    /// Session identifier chosen by the sender.
    pub session: u32,
    /// Packet number (48 bits).
    pub pn: u64,
}

impl Header {
    /// The header of a datagram, validated (the body is not looked at): what a driver needs
    /// to route a datagram to its session.
    pub fn peek(datagram: &[u8]) -> Result<Self, WireError> {
        Self::decode(&mut Reader::new(datagram))
    }

    /// Read and validate a header.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let version = r.u8()?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        let tf = r.u8()?;
        let ty = PacketType::from_nibble(tf & 0x0f)?;
        let session = r.u32()?;
        let pn = r.u48()?;
        Ok(Header {
            ty,
            flags: tf >> 4,
            session,
            pn,
        })
    }

    /// Write the header.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        if self.flags > 0x0f {
            return Err(WireError::Invalid("flags exceed 4 bits"));
        }
        w.u8(VERSION)?;
        w.u8((self.flags << 4) | self.ty as u8)?;
        w.u32(self.session)?;
        w.u48(self.pn)
    }
}
