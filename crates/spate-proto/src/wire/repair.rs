//! REPAIR: a coded symbol over a block of chunks (`docs/spec.md` §4.9, §6.9).
//!
//! ```text
//! REPAIR body:
//!   Object (32)        the object the block's chunks belong to (≥ 1)
//!   First Chunk (32)   index of the block's first chunk (its offset / chunk size)
//!   Count (16)         K, the block's chunks: First Chunk .. First Chunk + K (1..=4096)
//!   Index (16)         which repair symbol of the block (< R(K), spec §6.9)
//!   Symbol (..)        the repair symbol: exactly one chunk size long
//! ```
//!
//! > §4.9: The fields take 12 bytes, as DATA's Object and Offset do, so a REPAIR is exactly as
//! > long as a full DATA packet of the session.

use super::WireError;
use crate::codec::{Reader, Writer};

/// Most chunks in one block (spec §6.9). 4096 chunks (5.9 MB at 1432 bytes) keep one decode
/// to a millisecond or two, and bound what a receiver must keep before it knows where a block
/// starts: copies more than 4096 chunks behind its watermark belong to blocks it holds.
pub const MAX_BLOCK_CHUNKS: u32 = 4096;

/// Bytes of REPAIR fields before the symbol (the same as DATA's Object and Offset).
pub const REPAIR_FIELDS: usize = 12;

/// REPAIR body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair<'a> {
    /// Object number (≥ 1: the manifest is never coded).
    pub object: u32,
    /// Index of the block's first chunk within the object.
    pub first_chunk: u32,
    /// Chunks in the block.
    pub count: u32,
    /// Which repair symbol.
    pub index: u32,
    /// The symbol.
    pub symbol: &'a [u8],
}

impl<'a> Repair<'a> {
    /// Parse a body. Checks what the packet alone can show: an object other than the
    /// manifest, a block size within the code's limit, an index below the block's repair
    /// capacity, and a symbol. Whether the block lies inside the object is the receiver's
    /// check (it knows the sizes).
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let object = r.u32()?;
        let first_chunk = r.u32()?;
        let count = u32::from(r.u16()?);
        let index = u32::from(r.u16()?);
        let symbol = r.rest();
        if object == 0 {
            return Err(WireError::Invalid("REPAIR for the manifest"));
        }
        if count == 0 || count > MAX_BLOCK_CHUNKS {
            return Err(WireError::Invalid(
                "REPAIR block of 0 or more than 4096 chunks",
            ));
        }
        if index >= crate::coding::repair_capacity(count) {
            return Err(WireError::Invalid(
                "REPAIR index beyond the block's capacity",
            ));
        }
        if symbol.is_empty() || symbol.len() % 2 != 0 {
            return Err(WireError::Invalid("REPAIR symbol empty or of odd length"));
        }
        Ok(Repair {
            object,
            first_chunk,
            count,
            index,
            symbol,
        })
    }

    /// Write the fields; the caller writes the symbol after them.
    pub fn encode_fields(
        object: u32,
        first_chunk: u32,
        count: u32,
        index: u32,
        w: &mut Writer<'_>,
    ) -> Result<(), WireError> {
        if count == 0 || count > MAX_BLOCK_CHUNKS || index >= crate::coding::repair_capacity(count)
        {
            return Err(WireError::Invalid("REPAIR block or index out of range"));
        }
        w.u32(object)?;
        w.u32(first_chunk)?;
        // count ≤ 4096 and index < 256: both fit 16 bits.
        w.u16(count as u16)?;
        w.u16(index as u16)
    }
}
