//! FEEDBACK: the receiver's report (`docs/spec.md` §4.5).
//!
//! ```text
//! FEEDBACK body:
//!   Largest Received (varint)        highest packet number received from the sender
//!   Ack Delay (varint)               µs between receiving Largest and sending this packet
//!   Receive Time (varint)            µs on the receiver's clock when Largest arrived
//!   Bytes Received (varint)          datagram bytes of all DATA received so far (cumulative)
//!   First Missing Object (varint)    } the receiver holds every byte of every object before
//!   First Missing Offset (varint)    } this position (object, offset); Object Count + 1 when done
//!   Range Count (varint)             number of (Gap, Length) pairs that follow First Range
//!   First Range (varint)             packets Largest − First Range ..= Largest were received
//!   { Gap (varint), Length (varint) } × Range Count
//!   Extensions (..)                  { Type (varint), Length (varint), Value (Length bytes) } ×
//!                                    until the end; type 1: Write Limit (a varint);
//!                                    type 2: Rebuilt Blocks ({Object, First Chunk} varints);
//!                                    type 3: Keep Limit (a varint)
//! FEEDBACK flags (header bits 4–7):
//!   0x1 COMPLETE   the receiver holds every byte of every object
//! ```
//!
//! > §4.5: Ranges are listed from the highest packet numbers down and use the arithmetic of
//! > RFC 9000 §19.3.1: after a range whose smallest packet number is `s`, the next range's
//! > largest is `s − Gap − 2` and its smallest is that value minus Length. Packet numbers inside
//! > the span covered by the listed ranges that fall between ranges were not received; packet
//! > numbers below the lowest range are not reported on (the receiver omits old ranges it has
//! > already reported several times).
//!
//! > §4.5: Extensions follow the last range, each a Type, a Length and Length bytes of Value;
//! > a sender skips types it does not know, and ignores the rest of the packet from a field
//! > that does not fit. Type 1, **Write Limit**, is a varint: the data bytes (§7.4) the sender
//! > may have sent in this session, at most.

use super::header::MAX_PACKET_NUMBER;
use super::WireError;
use crate::codec::{Reader, Writer};

/// FEEDBACK flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeedbackFlags {
    /// The receiver holds all data.
    pub complete: bool,
    /// The receiver has seen this session's token in a PING from the address it sends this
    /// report to (spec §4.8). Without it the sender sends a PING.
    pub validated: bool,
}

impl FeedbackFlags {
    /// The 4-bit header field.
    pub fn bits(self) -> u8 {
        u8::from(self.complete) | u8::from(self.validated) << 1
    }
    /// From the 4-bit header field; unknown bits are ignored.
    pub fn from_bits(bits: u8) -> Self {
        FeedbackFlags {
            complete: bits & 1 != 0,
            validated: bits & 2 != 0,
        }
    }
}

/// Everything in a FEEDBACK body except the ranges; used for encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeedbackRepr {
    /// Header flags.
    pub flags: FeedbackFlags,
    /// µs between receiving the largest packet and sending the report.
    pub ack_delay_us: u64,
    /// Receiver clock (µs) when the largest packet arrived.
    pub recv_time_us: u64,
    /// Cumulative DATA datagram bytes received.
    pub bytes_received: u64,
    /// Object part of the first byte the receiver lacks.
    pub first_missing_object: u32,
    /// Offset part of the first byte the receiver lacks.
    pub first_missing_offset: u64,
    /// Extension type 1: how many data bytes the sender may have sent in this session, at
    /// most (receiver flow control, spec §4.5); `None` when the receiver sets no limit.
    pub write_limit: Option<u64>,
    /// Extension type 2: coded blocks the receiver rebuilt recently (spec §6.9).
    pub rebuilt: Rebuilt,
    /// Extension type 3: the chunk bytes of coded blocks the receiver can keep, when less
    /// than the 128 MiB a sender may otherwise have outstanding (spec §6.9).
    pub keep_limit: Option<u64>,
}

/// Extension type of the Write Limit (spec §4.5).
pub const EXT_WRITE_LIMIT: u64 = 1;

/// Extension type of Rebuilt Blocks (spec §4.5, §6.9).
pub const EXT_REBUILT: u64 = 2;

/// Extension type of the Keep Limit (spec §4.5, §6.9).
pub const EXT_KEEP_LIMIT: u64 = 3;

/// Blocks a report lists as rebuilt: (object, first chunk) pairs, at most
/// [`Rebuilt::CAPACITY`] (a receiver lists its most recent ones; older ones are covered by the
/// watermark or listed in earlier reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rebuilt {
    len: usize,
    blocks: [(u32, u32); Rebuilt::CAPACITY],
}

impl Rebuilt {
    /// Most blocks one report lists (spec §6.9): 8 pairs take at most 96 bytes.
    pub const CAPACITY: usize = 8;

    /// Add a block; false (and nothing added) when full.
    pub fn push(&mut self, object: u32, first_chunk: u32) -> bool {
        if self.len == Self::CAPACITY {
            return false;
        }
        self.blocks[self.len] = (object, first_chunk);
        self.len += 1;
        true
    }

    /// The listed blocks.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.blocks[..self.len].iter().copied()
    }

    /// True when no block is listed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn value_len(&self) -> usize {
        self.iter()
            .map(|(o, c)| {
                crate::codec::varint_len(u64::from(o)) + crate::codec::varint_len(u64::from(c))
            })
            .sum()
    }
}

impl FeedbackRepr {
    /// Bytes the extensions take after the ranges.
    fn extensions_len(&self) -> usize {
        let ext = |ty: u64, n: usize| {
            crate::codec::varint_len(ty) + crate::codec::varint_len(n as u64) + n
        };
        let limit = self
            .write_limit
            .map_or(0, |l| ext(EXT_WRITE_LIMIT, crate::codec::varint_len(l)));
        let rebuilt = if self.rebuilt.is_empty() {
            0
        } else {
            ext(EXT_REBUILT, self.rebuilt.value_len())
        };
        let keep = self
            .keep_limit
            .map_or(0, |l| ext(EXT_KEEP_LIMIT, crate::codec::varint_len(l)));
        limit + rebuilt + keep
    }

    /// Write the body with as many of `ranges` as fit; returns how many were written.
    ///
    /// `ranges` are inclusive `(smallest, largest)` pairs, strictly descending and separated by
    /// at least one missing packet number; the first one is required.
    pub fn encode(
        &self,
        w: &mut Writer<'_>,
        mut ranges: impl Iterator<Item = (u64, u64)>,
    ) -> Result<usize, WireError> {
        let (lo, hi) = ranges
            .next()
            .ok_or(WireError::Invalid("feedback without ranges"))?;
        if lo > hi || hi > MAX_PACKET_NUMBER {
            return Err(WireError::Invalid("bad first range"));
        }
        w.varint(hi)?;
        w.varint(self.ack_delay_us)?;
        w.varint(self.recv_time_us)?;
        w.varint(self.bytes_received)?;
        w.varint(u64::from(self.first_missing_object))?;
        w.varint(self.first_missing_offset)?;
        // Range Count is written last, in a fixed two-byte varint form so that it can be filled in
        // after we know how many ranges fit.
        let count_at = w.len();
        w.u16(0x4000)?;
        w.varint(hi - lo)?;
        let ext = self.extensions_len();
        if w.remaining() < ext {
            return Err(WireError::Invalid("no room for the extensions"));
        }
        let mut count: u64 = 0;
        let mut prev_lo = lo;
        for (lo, hi) in ranges {
            if count == 0x3fff {
                break;
            }
            if hi + 2 > prev_lo || lo > hi {
                return Err(WireError::Invalid("ranges not descending and disjoint"));
            }
            let gap = prev_lo - hi - 2;
            let len = hi - lo;
            let need = crate::codec::varint_len(gap) + crate::codec::varint_len(len) + ext;
            if w.remaining() < need {
                break;
            }
            w.varint(gap)?;
            w.varint(len)?;
            count += 1;
            prev_lo = lo;
        }
        w.patch_u16(count_at, 0x4000 | count as u16);
        if let Some(limit) = self.write_limit {
            w.varint(EXT_WRITE_LIMIT)?;
            w.varint(crate::codec::varint_len(limit) as u64)?;
            w.varint(limit)?;
        }
        if !self.rebuilt.is_empty() {
            w.varint(EXT_REBUILT)?;
            w.varint(self.rebuilt.value_len() as u64)?;
            for (o, c) in self.rebuilt.iter() {
                w.varint(u64::from(o))?;
                w.varint(u64::from(c))?;
            }
        }
        if let Some(limit) = self.keep_limit {
            w.varint(EXT_KEEP_LIMIT)?;
            w.varint(crate::codec::varint_len(limit) as u64)?;
            w.varint(limit)?;
        }
        Ok(count as usize + 1)
    }
}

/// A parsed FEEDBACK body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feedback<'a> {
    /// Fields other than the ranges.
    pub repr: FeedbackRepr,
    /// The received ranges.
    pub ranges: AckRanges<'a>,
}

impl<'a> Feedback<'a> {
    /// Parse and validate a body (header flags are applied by the caller).
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let largest = r.varint()?;
        if largest > MAX_PACKET_NUMBER {
            return Err(WireError::Invalid("largest received exceeds 48 bits"));
        }
        let ack_delay_us = r.varint()?;
        let recv_time_us = r.varint()?;
        let bytes_received = r.varint()?;
        let first_missing_object = r.varint_u32()?;
        let first_missing_offset = r.varint()?;
        let count = r.varint()?;
        let first_range = r.varint()?;
        if first_range > largest {
            return Err(WireError::Invalid("first range below packet number zero"));
        }
        let start = r.position();
        let mut prev_lo = largest - first_range;
        for _ in 0..count {
            let gap = r.varint()?;
            let len = r.varint()?;
            let hi = prev_lo
                .checked_sub(gap)
                .and_then(|v| v.checked_sub(2))
                .ok_or(WireError::Invalid("range below packet number zero"))?;
            prev_lo = hi
                .checked_sub(len)
                .ok_or(WireError::Invalid("range below packet number zero"))?;
        }
        let bytes = r.slice(start, r.position());
        let (write_limit, rebuilt, keep_limit) = decode_extensions(r.rest());
        let ranges = AckRanges {
            largest,
            first_range,
            count,
            bytes,
        };
        Ok(Feedback {
            repr: FeedbackRepr {
                flags: FeedbackFlags::default(),
                ack_delay_us,
                recv_time_us,
                bytes_received,
                first_missing_object,
                first_missing_offset,
                write_limit,
                rebuilt,
                keep_limit,
            },
            ranges,
        })
    }

    /// Largest packet number received.
    pub fn largest(&self) -> u64 {
        self.ranges.largest
    }
}

/// The extensions after the ranges (§4.5): the Write Limit and the Rebuilt Blocks, if there.
/// Unknown types are skipped; from a field that does not fit (or a known type whose Value does
/// not have its form) the rest is ignored, never the report.
fn decode_extensions(bytes: &[u8]) -> (Option<u64>, Rebuilt, Option<u64>) {
    let mut r = Reader::new(bytes);
    let mut limit = None;
    let mut rebuilt = Rebuilt::default();
    let mut keep = None;
    while r.remaining() > 0 {
        let (Ok(ty), Ok(len)) = (r.varint(), r.varint()) else {
            break;
        };
        let Ok(value) = usize::try_from(len)
            .map_err(|_| ())
            .and_then(|n| r.bytes(n).map_err(|_| ()))
        else {
            break;
        };
        if ty == EXT_WRITE_LIMIT || ty == EXT_KEEP_LIMIT {
            let mut v = Reader::new(value);
            match v.varint() {
                Ok(l) if v.remaining() == 0 && ty == EXT_WRITE_LIMIT => limit = Some(l),
                Ok(l) if v.remaining() == 0 => keep = Some(l),
                _ => break,
            }
        } else if ty == EXT_REBUILT {
            match decode_rebuilt(value) {
                Some(b) => rebuilt = b,
                None => break,
            }
        }
    }
    (limit, rebuilt, keep)
}

/// A Rebuilt Blocks Value: whole (Object, First Chunk) pairs of varints, each fitting 32 bits,
/// at most [`Rebuilt::CAPACITY`] of them.
fn decode_rebuilt(value: &[u8]) -> Option<Rebuilt> {
    let mut v = Reader::new(value);
    let mut out = Rebuilt::default();
    while v.remaining() > 0 {
        let object = v.varint_u32().ok()?;
        let chunk = v.varint_u32().ok()?;
        if !out.push(object, chunk) {
            return None;
        }
    }
    Some(out)
}

/// Validated received ranges, iterated from the highest packet numbers down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckRanges<'a> {
    largest: u64,
    first_range: u64,
    count: u64,
    bytes: &'a [u8],
}

impl<'a> AckRanges<'a> {
    /// Iterate inclusive `(smallest, largest)` ranges, highest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + 'a {
        let mut r = Reader::new(self.bytes);
        let mut next = Some((self.largest - self.first_range, self.largest));
        let mut left = self.count;
        core::iter::from_fn(move || {
            let out = next?;
            next = None;
            if left > 0 {
                left -= 1;
                // Validated at decode time; a failure here cannot happen, and ends iteration.
                if let (Ok(gap), Ok(len)) = (r.varint(), r.varint()) {
                    let hi = out.0.saturating_sub(gap).saturating_sub(2);
                    next = Some((hi.saturating_sub(len), hi));
                }
            }
            Some(out)
        })
    }

    /// Smallest packet number covered by the report.
    pub fn smallest(&self) -> u64 {
        self.iter().last().map_or(self.largest, |(lo, _)| lo)
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.count as usize + 1
    }

    /// Always false: a report has at least one range.
    pub fn is_empty(&self) -> bool {
        false
    }
}
