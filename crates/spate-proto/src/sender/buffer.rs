//! The send buffer: object bytes held from when the source hands them over until every byte of
//! their block is acknowledged (`docs/spec.md` §11.1).
//!
//! The session owns the data it has in flight, so a retransmission or a probe copies from
//! memory and never waits for a disk on the network thread. New data comes from the
//! application's [`Source`] in stream order — object 1 from offset 0 to its end, then object 2,
//! … (empty objects have no bytes) — each byte once, in blocks of whatever size the source
//! likes, skipping ahead over whole chunks the receiver already holds (a resume's HAVE). The
//! source may have nothing ready ("starved"): the session then sends what else it has
//! (retransmissions, probes) and asks again on the next `poll_transmit`.
//!
//! Two bounds keep the buffer small:
//! - **Look-ahead**: the session asks for more only while less than [`LOOKAHEAD`] bytes wait
//!   ahead of its send cursor; reading far ahead is the driver's job, on its own thread.
//! - **Budget** ([`SenderConfig::send_buffer`](crate::SenderConfig::send_buffer)): when the
//!   blocks held reach it — what is in flight, and what losses not yet repaired reach into
//!   (below) — new data waits; retransmissions go on.
//!
//! Blocks are released once every chunk reaching into them is acknowledged, and their buffers
//! go back to the source for reuse. Front first; and when the blocks held reach half the budget
//! and the front is still pinned, every block behind it is looked at too (once per change in
//! what was delivered): one wholly delivered goes, and one with at most a quarter of its bytes
//! still undelivered is **compacted** — cut down to copies of its undelivered chunks. Otherwise
//! one lost packet waiting for its retransmission held everything sent after it: at 10 Gbit/s,
//! 74 ms and 0.06 % random loss a 512 MiB budget (and a 1 GiB one) filled within seconds, new
//! data stopped, and the flow's rate collapsed (FASP scenario 2 at full scale: utilization 0.41
//! after the step to 10 Gbit/s, against 0.95 before the session owned its data).

use core::cell::Cell;
use core::ops::Range;
use std::collections::VecDeque;
use std::sync::Arc;

use super::Source;
use crate::ranges::RangeSet;
use crate::recovery::Chunk;

/// Bytes buffered ahead of the send cursor before the session stops asking its source: 4 MiB,
/// 3.4 ms at 10 Gbit/s — more than one batch of datagrams at any rate, while the driver's own
/// read-ahead (the reference: 32 MiB on a reader thread) absorbs the disk's hiccups.
pub(crate) const LOOKAHEAD: u64 = 4 << 20;

/// Released buffers kept for the source to reuse.
const SPENT_KEPT: usize = 64;

/// Blocks behind a pinned front are looked at once the blocks held reach this fraction of the
/// budget: below it, holding them costs nothing, and looking costs a range query per block.
const COMPACT_FROM: f64 = 0.5;
/// A block is compacted when at most this fraction of its bytes is still undelivered: copying
/// a quarter to free three quarters, never a block that is mostly in flight.
const COMPACT_BELOW: f64 = 0.25;

#[derive(Debug)]
struct Block {
    object: u32,
    offset: u64,
    /// Shared with the sealers of packets whose payload is encrypted from it
    /// (`deferred.rs`), which may run after the block left.
    data: Arc<Vec<u8>>,
}

impl Block {
    fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

/// See the module documentation.
#[derive(Debug)]
pub(super) struct SendBuffer {
    blocks: VecDeque<Block>,
    /// Bytes in `blocks`.
    held: u64,
    budget: u64,
    /// The next stream position to ask the source for: everything before it was handed over.
    next: (u32, u64),
    /// Buffers of released blocks, for [`Source::recycle`].
    spent: Vec<Vec<u8>>,
    /// Bytes taken from the source.
    taken: u64,
    /// The delivered count at the last look behind the front (see the module doc).
    looked_at: Option<u64>,
    /// The block the last lookup found. Lookups come near one another — new data at the back,
    /// each chunk twice (writing its packet, then sealing it) — so it and the next are tried
    /// before a binary search over every block held (1 % of the sender's CPU samples).
    hint: Cell<usize>,
}

impl SendBuffer {
    pub fn new(budget: u64) -> Self {
        SendBuffer {
            blocks: VecDeque::new(),
            held: 0,
            budget,
            next: (1, 0),
            spent: Vec::new(),
            taken: 0,
            looked_at: None,
            hint: Cell::new(0),
        }
    }

    /// Bytes taken from the source so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Bytes held.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// The budget is used up: new data waits for acknowledgements.
    pub fn full(&self) -> bool {
        self.held >= self.budget
    }

    /// True if every byte of `object` below `end` was handed over by the source.
    pub fn has(&self, object: u32, end: u64) -> bool {
        self.next.0 > object || (self.next.0 == object && self.next.1 >= end)
    }

    /// Ask `source` for bytes until [`LOOKAHEAD`] bytes wait ahead of `cursor`, the budget is
    /// used, the source has none ready, or every object (`sizes`, index 0 the manifest, not
    /// from the source) was handed over. Whole chunks (`payload` bytes from each object's
    /// start) that are all in `delivered` are never asked for: nothing of them will be sent.
    pub fn fill(
        &mut self,
        cursor: (u32, u64),
        sizes: &[u64],
        delivered: &[RangeSet],
        payload: u64,
        source: &mut impl Source,
    ) -> Result<(), (u32, u64, String)> {
        let payload = payload.max(1);
        for b in self.spent.drain(..) {
            source.recycle(b);
        }
        loop {
            let (object, offset) = self.next;
            let Some(&size) = sizes.get(object as usize) else {
                return Ok(()); // every object handed over
            };
            if offset >= size {
                self.next = (object + 1, 0);
                continue;
            }
            if let Some(d) = delivered.get(object as usize) {
                // From the start of the chunk `offset` falls in: a chunk begun in an earlier
                // block is sent whole if any of it is missing, held bytes after `offset`
                // included.
                let gap = d.first_gap_from(offset / payload * payload);
                let to = if gap >= size {
                    size
                } else {
                    gap / payload * payload
                };
                if to > offset {
                    self.next = (object, to);
                    continue;
                }
            }
            if self.full() || self.ahead_of(cursor, sizes) >= LOOKAHEAD {
                return Ok(());
            }
            let max = size - offset;
            match source.next(object, offset, max) {
                Ok(None) => return Ok(()),
                Ok(Some(data)) if data.is_empty() || data.len() as u64 > max => {
                    let why = format!(
                        "the source handed over {} bytes where 1 to {max} were asked for",
                        data.len()
                    );
                    return Err((object, offset, why));
                }
                Ok(Some(data)) => {
                    let n = data.len() as u64;
                    self.blocks.push_back(Block {
                        object,
                        offset,
                        data: Arc::new(data),
                    });
                    self.held += n;
                    self.taken += n;
                    self.next.1 += n;
                }
                Err(why) => return Err((object, offset, why)),
            }
        }
    }

    /// Bytes handed over at or after `cursor` (an upper bound when the cursor skipped ahead).
    fn ahead_of(&self, cursor: (u32, u64), sizes: &[u64]) -> u64 {
        if self.next <= cursor {
            return 0;
        }
        if self.next.0 == cursor.0 {
            return self.next.1 - cursor.1;
        }
        // The cursor's object is handed over to its end; count the rest of it and whole
        // objects after it (few: look-ahead spans at most LOOKAHEAD bytes of them).
        let mut n = sizes
            .get(cursor.0 as usize)
            .map_or(0, |&s| s.saturating_sub(cursor.1));
        for o in cursor.0 as usize + 1..self.next.0 as usize {
            n = n.saturating_add(sizes.get(o).copied().unwrap_or(0));
            if n >= LOOKAHEAD {
                return n;
            }
        }
        n.saturating_add(self.next.1)
    }

    /// The bytes of `chunk` where they are held, if one block holds them all (every chunk but
    /// the one that straddles two blocks read from the source).
    pub fn slice(&self, chunk: Chunk) -> Option<&[u8]> {
        self.locate(chunk).map(|(b, r)| &b.data[r])
    }

    /// The block holding all of `chunk`, shared, and where in it the chunk is (see
    /// [`slice`](Self::slice)).
    pub fn shared(&self, chunk: Chunk) -> Option<(Arc<Vec<u8>>, Range<usize>)> {
        self.locate(chunk).map(|(b, r)| (Arc::clone(&b.data), r))
    }

    /// The block holding all of `chunk`, and where in it the chunk is.
    fn locate(&self, chunk: Chunk) -> Option<(&Block, Range<usize>)> {
        let b = self.blocks.get(self.first_block(chunk))?;
        if b.object != chunk.object || b.offset > chunk.offset {
            return None;
        }
        let from = usize::try_from(chunk.offset - b.offset).ok()?;
        let range = from..from.checked_add(chunk.len as usize)?;
        (range.end <= b.data.len()).then_some((b, range))
    }

    /// Copy the bytes of `chunk` into `dst` (its length). False if they are not all held,
    /// which the session's bookkeeping rules out: a chunk not yet acknowledged keeps its
    /// blocks.
    pub fn copy(&self, chunk: Chunk, dst: &mut [u8]) -> bool {
        let mut i = self.first_block(chunk);
        let mut at = chunk.offset;
        let mut out = 0;
        while out < dst.len() {
            let Some(b) = self.blocks.get(i) else {
                return false;
            };
            if b.object != chunk.object || b.offset > at || b.end() <= at {
                return false;
            }
            let from = (at - b.offset) as usize;
            let n = (dst.len() - out).min(b.data.len() - from);
            dst[out..out + n].copy_from_slice(&b.data[from..from + n]);
            out += n;
            at += n as u64;
            i += 1;
        }
        true
    }

    /// The index of the first block that may hold the start of `chunk`.
    fn first_block(&self, chunk: Chunk) -> usize {
        let holds = |i: usize| {
            self.blocks.get(i).is_some_and(|b| {
                b.object == chunk.object && b.offset <= chunk.offset && chunk.offset < b.end()
            })
        };
        let h = self.hint.get();
        // Blocks are in order and do not overlap: the one holding the start is the first
        // that ends after it.
        let i = if holds(h) {
            h
        } else if holds(h + 1) {
            h + 1
        } else {
            let key = (chunk.object, chunk.offset);
            self.blocks.partition_point(|b| (b.object, b.end()) <= key)
        };
        self.hint.set(i);
        i
    }

    /// Release the blocks whose every chunk is in `delivered` (per object), and compact those
    /// mostly delivered (see the module doc). Chunks are `payload` bytes from each object's
    /// start (the last shorter: `sizes`); a chunk is sent whole even when a resume's HAVE
    /// vouched for part of it, so a block goes only when the chunks reaching into it are
    /// delivered too — not just its own bytes. `delivered_bytes` counts what was delivered: a
    /// look behind the front is taken only when it moved since the last one.
    pub fn release(
        &mut self,
        delivered: &[RangeSet],
        sizes: &[u64],
        payload: u64,
        delivered_bytes: u64,
    ) {
        let payload = payload.max(1);
        while let Some(b) = self.blocks.front() {
            if !all_delivered(b, delivered, sizes, payload) {
                break;
            }
            let b = self.blocks.pop_front().expect("front exists");
            self.retire(b);
        }
        if self.blocks.is_empty()
            || (self.held as f64) < COMPACT_FROM * self.budget as f64
            || self.looked_at == Some(delivered_bytes)
        {
            return;
        }
        self.looked_at = Some(delivered_bytes);
        let blocks = core::mem::take(&mut self.blocks);
        for b in blocks {
            let keep = undelivered(&b, delivered, sizes, payload);
            let kept: u64 = keep.iter().map(|r| r.end - r.start).sum();
            if kept as f64 > COMPACT_BELOW * b.data.len() as f64 {
                self.blocks.push_back(b);
                continue;
            }
            for r in keep {
                let from = (r.start - b.offset) as usize;
                let to = (r.end - b.offset) as usize;
                self.held += (to - from) as u64;
                self.blocks.push_back(Block {
                    object: b.object,
                    offset: r.start,
                    data: Arc::new(b.data[from..to].to_vec()),
                });
            }
            self.retire(b);
        }
    }

    /// A block leaves: its bytes no longer count, its buffer may be reused.
    fn retire(&mut self, b: Block) {
        self.held -= b.data.len() as u64;
        // A block a sealer still reads goes when the sealer is done with it.
        if let (true, Ok(data)) = (self.spent.len() < SPENT_KEPT, Arc::try_unwrap(b.data)) {
            self.spent.push(data);
        }
    }
}

/// Whether every chunk reaching into block `b` is in `delivered`.
fn all_delivered(b: &Block, delivered: &[RangeSet], sizes: &[u64], payload: u64) -> bool {
    let (from, to) = chunk_span(b, sizes, payload);
    delivered
        .get(b.object as usize)
        .is_some_and(|d| d.contains_range(from..to))
}

/// From the start of the chunk block `b` begins in to the end of the chunk it ends in.
fn chunk_span(b: &Block, sizes: &[u64], payload: u64) -> (u64, u64) {
    let size = sizes.get(b.object as usize).copied().unwrap_or(0);
    let from = b.offset / payload * payload;
    let to = b.end().div_ceil(payload).saturating_mul(payload).min(size);
    (from, to.max(b.end()))
}

/// The parts of block `b` that chunks not wholly in `delivered` reach into, in order: what a
/// retransmission may still need. Empty when the block may go.
fn undelivered(
    b: &Block,
    delivered: &[RangeSet],
    sizes: &[u64],
    payload: u64,
) -> Vec<core::ops::Range<u64>> {
    let (from, to) = chunk_span(b, sizes, payload);
    let Some(d) = delivered.get(b.object as usize) else {
        return core::iter::once(b.offset..b.end()).collect();
    };
    let mut out: Vec<core::ops::Range<u64>> = Vec::new();
    let mut at = from;
    let gap = |start: u64, end: u64, out: &mut Vec<core::ops::Range<u64>>| {
        // Whole chunks around the gap, clipped to the block.
        let s = (start / payload * payload).max(b.offset);
        let e = end.div_ceil(payload).saturating_mul(payload).min(b.end());
        if s >= e {
            return;
        }
        match out.last_mut() {
            Some(last) if last.end >= s => last.end = last.end.max(e),
            _ => out.push(s..e),
        }
    };
    for r in d.iter_within(from..to) {
        if r.start > at {
            gap(at, r.start, &mut out);
        }
        at = at.max(r.end);
    }
    if at < to {
        gap(at, to, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands over `step` bytes at a time of a counting pattern; `None` every `stall`-th call.
    struct Counting {
        step: u64,
        calls: u32,
        stall: u32,
    }

    impl Source for Counting {
        fn next(&mut self, object: u32, offset: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
            self.calls += 1;
            if self.stall > 0 && self.calls % self.stall == 0 {
                return Ok(None);
            }
            let n = max.min(self.step);
            Ok(Some(
                (offset..offset + n)
                    .map(|i| (i as u8) ^ (object as u8))
                    .collect(),
            ))
        }
    }

    fn chunk(object: u32, offset: u64, len: u32) -> Chunk {
        Chunk {
            object,
            offset,
            len,
        }
    }

    #[test]
    fn copies_across_blocks_and_objects_in_order() {
        let sizes = [10, 1000, 0, 700];
        let mut b = SendBuffer::new(1 << 20);
        let mut src = Counting {
            step: 300,
            calls: 0,
            stall: 0,
        };
        b.fill((0, 0), &sizes, &[], 1448, &mut src).unwrap();
        assert!(b.has(3, 700));
        assert_eq!(b.taken(), 1700);
        let mut dst = vec![0u8; 500];
        assert!(b.copy(chunk(1, 250, 500), &mut dst));
        let want: Vec<u8> = (250..750u64).map(|i| (i as u8) ^ 1).collect();
        assert_eq!(dst, want);
        let mut dst = vec![0u8; 100];
        assert!(b.copy(chunk(3, 600, 100), &mut dst));
        assert!(
            !b.copy(chunk(3, 650, 100), &mut dst),
            "past the object's end"
        );
        assert!(!b.copy(chunk(2, 0, 1), &mut dst[..1]), "an empty object");
    }

    #[test]
    fn a_starved_source_is_asked_again_and_nothing_is_skipped() {
        let sizes = [0, 5000];
        let mut b = SendBuffer::new(1 << 20);
        let mut src = Counting {
            step: 700,
            calls: 0,
            stall: 3,
        };
        let mut rounds = 0;
        while !b.has(1, 5000) {
            b.fill((1, 0), &sizes, &[], 1448, &mut src).unwrap();
            rounds += 1;
            assert!(rounds < 100);
        }
        assert!(rounds > 1, "the stalls were seen");
        let mut dst = vec![0u8; 5000];
        assert!(b.copy(chunk(1, 0, 5000), &mut dst));
        assert!(dst.iter().enumerate().all(|(i, &x)| x == (i as u8) ^ 1));
    }

    #[test]
    fn the_budget_and_lookahead_bound_what_is_held_and_release_frees_it() {
        let sizes = [0, 64 << 20];
        let mut b = SendBuffer::new(6 << 20);
        let mut src = Counting {
            step: 1 << 20,
            calls: 0,
            stall: 0,
        };
        b.fill((1, 0), &sizes, &[], 1448, &mut src).unwrap();
        assert_eq!(b.held(), LOOKAHEAD, "look-ahead from the cursor");
        b.fill((1, 4 << 20), &sizes, &[], 1448, &mut src).unwrap();
        assert_eq!(b.held(), 6 << 20, "then the budget");
        assert!(b.full());
        let mut delivered = vec![RangeSet::new(), RangeSet::new()];
        delivered[1].insert(1 << 20..3 << 20);
        b.release(&delivered, &sizes, 1 << 20, 0);
        assert_eq!(
            b.held(),
            4 << 20,
            "at the budget, what was delivered behind a hole at the front goes"
        );
        delivered[1].insert(0..1 << 20);
        b.release(&delivered, &sizes, 1 << 20, 0);
        assert_eq!(b.held(), 3 << 20);
        b.fill((1, 6 << 20), &sizes, &[], 1448, &mut src).unwrap();
        assert_eq!(b.held(), 6 << 20);
    }

    /// One chunk lost in the first block: under budget pressure the block is cut down to
    /// that chunk and everything delivered after it goes; the chunk's bytes stay exact.
    #[test]
    fn a_lost_chunk_no_longer_pins_what_was_sent_after_it() {
        let sizes = [0, 8 << 20];
        let mut b = SendBuffer::new(8 << 20);
        let mut src = Counting {
            step: 1 << 20,
            calls: 0,
            stall: 0,
        };
        for at in 0..8u64 {
            b.fill((1, at << 20), &sizes, &[], 1448, &mut src).unwrap();
        }
        assert_eq!(b.held(), 8 << 20);
        let lost = chunk(1, 1448 * 100, 1448);
        let mut delivered = vec![RangeSet::new(), RangeSet::new()];
        delivered[1].insert(0..lost.offset);
        delivered[1].insert(lost.end()..6 << 20);
        b.release(&delivered, &sizes, 1448, 1);
        // The chunk across 6 MiB is not wholly delivered: its part in block 5 stays too.
        let across = (6 << 20) / 1448 * 1448 + 1448 - (6 << 20);
        let kept = 1448 + (1448 - across) + (2 << 20);
        assert_eq!(
            b.held(),
            kept,
            "the lost chunk and the two blocks in flight"
        );
        let mut dst = vec![0u8; 1448];
        assert!(b.copy(lost, &mut dst));
        let want: Vec<u8> = (lost.offset..lost.end()).map(|i| (i as u8) ^ 1).collect();
        assert_eq!(dst, want);
        let in_flight = chunk(1, 7 << 20, 1448);
        assert!(b.copy(in_flight, &mut dst), "blocks in flight are whole");
        // Nothing new delivered: no second look (and nothing to change).
        b.release(&delivered, &sizes, 1448, 1);
        assert_eq!(b.held(), kept);
        delivered[1].insert(lost.offset..lost.end());
        b.release(&delivered, &sizes, 1448, 2);
        assert_eq!(b.held(), kept - 1448);
    }

    /// Below half the budget nothing is copied, and a block mostly undelivered (in flight)
    /// is never compacted.
    #[test]
    fn compaction_waits_for_pressure_and_for_mostly_delivered_blocks() {
        let sizes = [0, 4 << 20];
        let mut src = Counting {
            step: 1 << 20,
            calls: 0,
            stall: 0,
        };
        let mut b = SendBuffer::new(64 << 20);
        b.fill((1, 0), &sizes, &[], 1448, &mut src).unwrap();
        let mut delivered = vec![RangeSet::new(), RangeSet::new()];
        delivered[1].insert(1448..4 << 20);
        b.release(&delivered, &sizes, 1448, 1);
        assert_eq!(b.held(), 4 << 20, "no pressure: the front pins the rest");
        let mut b = SendBuffer::new(4 << 20);
        b.fill((1, 0), &sizes, &[], 1448, &mut src).unwrap();
        let mut delivered = vec![RangeSet::new(), RangeSet::new()];
        // Block 0: a lost chunk at its start. Block 1: half delivered. Blocks 2-3: all.
        delivered[1].insert(1448..(1 << 20) + (1 << 19));
        delivered[1].insert(2 << 20..4 << 20);
        b.release(&delivered, &sizes, 1448, 1);
        // Block 2 keeps its part of the chunk that reaches across 2 MiB from block 1.
        let across = (2 << 20) / 1448 * 1448 + 1448 - (2 << 20);
        assert_eq!(b.held(), 1448 + (1 << 20) + across, "block 1 kept whole");
    }

    /// A resume's HAVE vouches for whole 1 MiB blocks, but chunks straddle them: a chunk
    /// partly held is sent whole, so the block holding its first bytes stays.
    #[test]
    fn a_block_stays_while_a_chunk_reaching_into_it_is_not_delivered() {
        let sizes = [0, 4 << 20];
        let mut b = SendBuffer::new(64 << 20);
        let mut src = Counting {
            step: 1 << 20,
            calls: 0,
            stall: 0,
        };
        b.fill((1, 0), &sizes, &[], 1448, &mut src).unwrap();
        let mut delivered = vec![RangeSet::new(), RangeSet::new()];
        delivered[1].insert(0..1 << 20);
        b.release(&delivered, &sizes, 1448, 0);
        assert_eq!(b.held(), 4 << 20, "the chunk across 1 MiB is not delivered");
        let straddling = chunk(1, (1 << 20) / 1448 * 1448, 1448);
        let mut dst = vec![0u8; 1448];
        assert!(b.copy(straddling, &mut dst));
        delivered[1].insert(0..straddling.end());
        b.release(&delivered, &sizes, 1448, 0);
        assert_eq!(b.held(), 3 << 20);
    }

    /// Chunks a resume's HAVE covers whole are never asked for; a chunk it covers in part is
    /// (it is sent whole).
    #[test]
    fn chunks_the_receiver_holds_whole_are_skipped() {
        struct Log(Vec<(u32, u64)>);
        impl Source for Log {
            fn next(&mut self, o: u32, off: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
                self.0.push((o, off));
                Ok(Some(vec![0; max.min(1000) as usize]))
            }
        }
        let sizes = [0, 10_000, 3_000, 5_000];
        let mut delivered = vec![RangeSet::new(); 4];
        delivered[1].insert(0..4_500); // chunks 0..4 of 1000 whole, chunk 4 in part
        delivered[2].insert(0..3_000); // all of it
        delivered[3].insert(2_000..5_000); // the tail
        let mut b = SendBuffer::new(1 << 20);
        let mut src = Log(Vec::new());
        b.fill((1, 0), &sizes, &delivered, 1000, &mut src).unwrap();
        assert_eq!(
            src.0,
            [
                (1, 4000),
                (1, 5000),
                (1, 6000),
                (1, 7000),
                (1, 8000),
                (1, 9000),
                (3, 0),
                (3, 1000)
            ]
        );
        assert!(b.has(3, 5_000));

        // Blocks that end inside a chunk: the chunk's held rest is still asked for.
        struct Odd(Vec<(u32, u64)>);
        impl Source for Odd {
            fn next(&mut self, o: u32, off: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
                self.0.push((o, off));
                Ok(Some(vec![0; max.min(700) as usize]))
            }
        }
        let sizes = [0, 10_000];
        let mut delivered = vec![RangeSet::new(); 2];
        delivered[1].insert(0..1_000);
        delivered[1].insert(1_500..10_000);
        let mut b = SendBuffer::new(1 << 20);
        let mut src = Odd(Vec::new());
        b.fill((1, 0), &sizes, &delivered, 1000, &mut src).unwrap();
        assert_eq!(src.0, [(1, 1000), (1, 1700)]);
        let mut dst = vec![0u8; 1000];
        assert!(
            b.copy(chunk(1, 1000, 1000), &mut dst),
            "the chunk across the hole"
        );
    }

    /// A source of `block`-byte pieces (the last of an object shorter).
    struct Blocks(u64);
    impl Source for Blocks {
        fn next(&mut self, _: u32, _: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
            Ok(Some(vec![0; max.min(self.0) as usize]))
        }
    }

    proptest::proptest! {
        /// Whatever the receiver holds, whatever the source's block size: every chunk not
        /// delivered whole can be copied from the buffer once it has filled past it.
        #[test]
        fn every_chunk_still_to_send_is_buffered(
            size in 1u64..60_000,
            payload in 1u64..3_000,
            block in 1u64..5_000,
            held in proptest::collection::vec((0u64..60_000, 1u64..9_000), 0..8),
        ) {
            let sizes = [0, size];
            let mut delivered = vec![RangeSet::new(); 2];
            for (start, len) in held {
                delivered[1].insert(start.min(size)..(start + len).min(size));
            }
            let mut b = SendBuffer::new(1 << 30);
            b.fill((1, 0), &sizes, &delivered, payload, &mut Blocks(block)).unwrap();
            proptest::prop_assert!(b.has(1, size));
            let mut at = 0;
            while at < size {
                let c = chunk(1, at, payload.min(size - at) as u32);
                if !delivered[1].contains_range(c.offset..c.end()) {
                    let mut dst = vec![0u8; c.len as usize];
                    proptest::prop_assert!(b.copy(c, &mut dst), "chunk at {}", at);
                }
                at = c.end();
            }
        }
    }

    #[test]
    fn a_source_that_breaks_its_contract_is_an_error() {
        struct TooMuch;
        impl Source for TooMuch {
            fn next(&mut self, _: u32, _: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
                Ok(Some(vec![0; max as usize + 1]))
            }
        }
        let mut b = SendBuffer::new(1 << 20);
        let e = b
            .fill((0, 0), &[0, 10], &[], 1448, &mut TooMuch)
            .unwrap_err();
        assert_eq!((e.0, e.1), (1, 0));
    }
}
