//! DATA and PING (`docs/spec.md` §4.3–§4.4).
//!
//! ```text
//! DATA body:
//!   Object (32)       0 = the manifest, 1..=N = manifest entries in order
//!   Offset (64)       byte offset of the payload within the object
//!   Payload (..)      at least one byte, up to the end of the datagram
//! DATA flags (header bits 4–7):
//!   0x1 RETRANSMISSION   the payload was sent before in another packet
//!   0x2 PROBE            the receiver should send FEEDBACK at once
//!   0x4 KEEP             the chunk belongs to a coded block: keep a copy (§6.9)
//! PING body:
//!   Token (64)        the Token of the receiver's ACCEPT
//!   Padding (..)      ignored
//! ```
//!
//! > §4.4: A PING carries the Token of the ACCEPT. A receiver drops a PING whose Token differs
//! > from the one it sent; one that matches proves that the sender receives at the address it
//! > sends from (§4.8).
//!
//! > §4.3: The payload length is implied by the datagram length. `Offset + length` must not
//! > exceed the object's size as given in the manifest; a receiver drops (and does not
//! > acknowledge) a DATA packet that violates this.

use super::header::HEADER_LEN;
use super::WireError;
use crate::codec::{Reader, Writer};

/// Header plus DATA fields: bytes of a DATA packet that are not payload.
pub const DATA_OVERHEAD: usize = HEADER_LEN + 12;

/// DATA flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataFlags {
    /// The payload was sent before in another packet.
    pub retransmission: bool,
    /// Ask for immediate feedback.
    pub probe: bool,
    /// The chunk belongs to a block REPAIR packets will code: a receiver that accepted
    /// coding keeps a copy until the block is held (spec §6.9).
    pub keep: bool,
}

impl DataFlags {
    const RETRANSMISSION: u8 = 0x1;
    const PROBE: u8 = 0x2;
    const KEEP: u8 = 0x4;

    /// The 4-bit header flag field.
    pub fn bits(self) -> u8 {
        (if self.retransmission {
            Self::RETRANSMISSION
        } else {
            0
        }) | (if self.probe { Self::PROBE } else { 0 })
            | (if self.keep { Self::KEEP } else { 0 })
    }

    /// From the 4-bit header flag field (unknown bits are ignored, spec §3.1).
    pub fn from_bits(bits: u8) -> Self {
        DataFlags {
            retransmission: bits & Self::RETRANSMISSION != 0,
            probe: bits & Self::PROBE != 0,
            keep: bits & Self::KEEP != 0,
        }
    }
}

/// DATA body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data<'a> {
    /// Flags from the header.
    pub flags: DataFlags,
    /// Object number.
    pub object: u32,
    /// Offset within the object.
    pub offset: u64,
    /// The bytes.
    pub payload: &'a [u8],
}

impl<'a> Data<'a> {
    /// Parse a body.
    pub fn decode(flags: u8, r: &mut Reader<'a>) -> Result<Self, WireError> {
        let object = r.u32()?;
        let offset = r.u64()?;
        let payload = r.rest();
        if payload.is_empty() {
            return Err(WireError::Invalid("empty DATA payload"));
        }
        if offset.checked_add(payload.len() as u64).is_none() {
            return Err(WireError::Invalid("DATA offset + length overflows"));
        }
        Ok(Data {
            flags: DataFlags::from_bits(flags),
            object,
            offset,
            payload,
        })
    }

    /// Write the object and offset fields; the caller writes the payload after them.
    pub fn encode_fields(object: u32, offset: u64, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u32(object)?;
        w.u64(offset)
    }
}

/// PING body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// The Token of the receiver's ACCEPT (spec §4.2, §4.8).
    pub token: u64,
}

impl Ping {
    /// Parse a body (bytes after the token are padding).
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Ping { token: r.u64()? })
    }

    /// Write the body.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u64(self.token)
    }
}
