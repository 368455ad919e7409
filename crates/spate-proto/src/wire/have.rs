//! HAVE (`docs/spec.md` §4.7): what a resuming receiver already holds.
//!
//! ```text
//! HAVE body:
//!   Entry Count (varint)
//!   Entry × Entry Count:
//!     Object Delta (varint)   object = previous entry's last object + delta (first: 0 + delta)
//!     Whole (varint)          n > 0: objects object..object+n−1 are held entirely
//!                             0: one byte range of `object` follows
//!     [Offset (varint)]       if Whole = 0
//!     [Length (varint)]       if Whole = 0; at least 1
//! ```
//!
//! > §4.7: Objects never decrease from one entry to the next, every object is at least 1, and
//! > the body ends exactly after the last entry. The sender checks objects and ranges against
//! > the manifest and drops a HAVE that names anything outside it.
//!
//! A body is validated whole by [`Have::decode`]; [`Have::entries`] then walks it again and
//! cannot fail.

use super::WireError;
use crate::codec::{varint_len, Reader, Writer};

/// One entry of a HAVE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaveEntry {
    /// Objects `first..first + count` are held entirely.
    Whole {
        /// First object.
        first: u32,
        /// Number of objects (at least 1).
        count: u32,
    },
    /// Bytes `offset..offset + len` of `object` are held.
    Range {
        /// Object.
        object: u32,
        /// First byte.
        offset: u64,
        /// Length (at least 1).
        len: u64,
    },
}

impl HaveEntry {
    /// The first object the entry names.
    pub fn object(&self) -> u32 {
        match *self {
            HaveEntry::Whole { first, .. } => first,
            HaveEntry::Range { object, .. } => object,
        }
    }

    /// The last object the entry names.
    fn last(&self) -> u32 {
        match *self {
            // Decoding checked that the last object fits; `first + count` alone may not
            // (it is 2^32 for a run that ends at the last object number).
            HaveEntry::Whole { first, count } => first + (count.max(1) - 1),
            HaveEntry::Range { object, .. } => object,
        }
    }

    /// Encoded size after an entry whose last object is `prev`.
    pub fn encoded_len(&self, prev: u32) -> usize {
        let delta = u64::from(self.object().saturating_sub(prev));
        varint_len(delta)
            + match *self {
                HaveEntry::Whole { count, .. } => varint_len(u64::from(count)),
                HaveEntry::Range { offset, len, .. } => 1 + varint_len(offset) + varint_len(len),
            }
    }
}

/// A validated HAVE body, borrowing from the datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Have<'a> {
    count: u64,
    body: &'a [u8],
}

impl<'a> Have<'a> {
    /// Parse and validate a body.
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let count = r.varint()?;
        let body = r.rest();
        let mut it = Entries::new(count, body);
        for _ in 0..count {
            it.next_checked()?;
        }
        if it.r.remaining() != 0 {
            return Err(WireError::Invalid("bytes after the last HAVE entry"));
        }
        Ok(Have { count, body })
    }

    /// The entries, in order.
    pub fn entries(&self) -> impl Iterator<Item = HaveEntry> + 'a {
        let mut it = Entries::new(self.count, self.body);
        core::iter::from_fn(move || it.next_checked().ok())
    }

    /// Write a body holding `entries`, which must be in object order (each entry's object at
    /// least the previous entry's last object) and name objects from 1.
    pub fn encode(entries: &[HaveEntry], w: &mut Writer<'_>) -> Result<(), WireError> {
        w.varint(entries.len() as u64)?;
        let mut prev = 0u32;
        for e in entries {
            let delta = e
                .object()
                .checked_sub(prev)
                .filter(|_| e.object() >= 1)
                .ok_or(WireError::Invalid("HAVE entries out of order"))?;
            w.varint(u64::from(delta))?;
            match *e {
                HaveEntry::Whole { count, .. } => {
                    if count == 0 {
                        return Err(WireError::Invalid("HAVE entry of zero objects"));
                    }
                    w.varint(u64::from(count))?;
                }
                HaveEntry::Range { offset, len, .. } => {
                    if len == 0 || offset.checked_add(len).is_none() {
                        return Err(WireError::Invalid("HAVE range empty or overflowing"));
                    }
                    w.varint(0)?;
                    w.varint(offset)?;
                    w.varint(len)?;
                }
            }
            prev = e.last();
        }
        Ok(())
    }
}

struct Entries<'a> {
    left: u64,
    prev: u32,
    r: Reader<'a>,
}

impl<'a> Entries<'a> {
    fn new(count: u64, body: &'a [u8]) -> Self {
        Entries {
            left: count,
            prev: 0,
            r: Reader::new(body),
        }
    }

    fn next_checked(&mut self) -> Result<HaveEntry, WireError> {
        if self.left == 0 {
            return Err(WireError::Truncated);
        }
        self.left -= 1;
        let too_far = WireError::Invalid("HAVE object beyond 2^32 − 1");
        let object = u64::from(self.prev) + self.r.varint()?;
        let object = u32::try_from(object).map_err(|_| too_far)?;
        if object == 0 {
            return Err(WireError::Invalid("HAVE names object 0"));
        }
        let whole = self.r.varint()?;
        let e = if whole > 0 {
            let last = u64::from(object) + whole - 1;
            u32::try_from(last).map_err(|_| too_far)?;
            HaveEntry::Whole {
                first: object,
                count: u32::try_from(whole).map_err(|_| too_far)?,
            }
        } else {
            let offset = self.r.varint()?;
            let len = self.r.varint()?;
            if len == 0 || offset.checked_add(len).is_none() {
                return Err(WireError::Invalid("HAVE range empty or overflowing"));
            }
            HaveEntry::Range {
                object,
                offset,
                len,
            }
        };
        self.prev = e.last();
        Ok(e)
    }
}
