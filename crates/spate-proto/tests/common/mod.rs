//! What the protocol's integration tests share: a source whose bytes are a function of where
//! they are, so that any chunk can be checked where it lands.
//!
//! Each file under `tests/` is its own crate and uses part of this module.
#![allow(dead_code)]

use spate_proto::Source;

/// The byte at `offset` of object `object`. Never zero, so that a chunk filled with zeros (a
/// hole written as data) shows.
pub fn byte_at(object: u32, offset: u64) -> u8 {
    (offset.wrapping_mul(31) ^ u64::from(object).wrapping_mul(0x9e37)) as u8 | 1
}

/// Object bytes by [`byte_at`], at most `chunk` per request: an odd size, so that chunks
/// straddle blocks. With `stall_every` > 0, every that many-th request finds nothing ready
/// (a disk slower than the link).
#[derive(Debug, Clone)]
pub struct Pattern {
    chunk: u64,
    stall_every: u64,
    calls: u64,
}

impl Pattern {
    /// Chunks of at most `chunk` bytes, always ready.
    pub fn new(chunk: u64) -> Self {
        Pattern::stalling(chunk, 0)
    }

    /// Chunks of at most `chunk` bytes; every `every`-th request finds nothing ready.
    pub fn stalling(chunk: u64, every: u64) -> Self {
        Pattern {
            chunk,
            stall_every: every,
            calls: 0,
        }
    }
}

impl Source for Pattern {
    fn next(&mut self, object: u32, offset: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
        self.calls += 1;
        if self.stall_every > 0 && self.calls % self.stall_every == 0 {
            return Ok(None);
        }
        let n = max.min(self.chunk);
        Ok(Some(
            (offset..offset + n).map(|o| byte_at(object, o)).collect(),
        ))
    }
}
