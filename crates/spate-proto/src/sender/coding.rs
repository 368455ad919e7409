//! Coding on the sender's side: building blocks from the chunks as they are sent, encoding
//! them, sending their repair symbols, and taking the receiver's word for rebuilt blocks
//! (`docs/spec.md` §6.9; which blocks and how many symbols is `coding/plan.rs`).
//!
//! > §6.9: A sender sends REPAIR only in a session whose ACCEPT set CODING and whose chunk size
//! > is even. The chunks of a block are consecutive chunks of one object, each sent (the first
//! > time and every time again) as DATA flagged KEEP; the block's symbols follow its last
//! > chunk. A block listed in a report's Rebuilt Blocks is held, every byte of it.

use core::time::Duration;

use super::Sender;
use crate::cc::RateControl;
use crate::coding::plan::{block_time, CodedBlock, OpenBlock, PendingSymbol, MAX_CHUNKS};
use crate::recovery::{Chunk, SentKind};
use crate::time::Instant;

impl Sender {
    /// Whether new chunk `c`, about to be sent, goes into a coded block (DATA flag KEEP).
    pub(super) fn code_chunk(&mut self, now: Instant, c: Chunk) -> bool {
        if !self.coder.active || c.object == 0 {
            return false;
        }
        let cs = self.chunk_payload();
        let Ok(index) = u32::try_from(c.offset / cs) else {
            return false;
        };
        if index > u32::MAX - MAX_CHUNKS {
            return false;
        }
        let max_time = block_time(self.rtt.smoothed());
        if let Some(b) = self.coder.open {
            let joins = b.object == c.object
                && b.first + self.coder.open_count() == index
                && now.saturating_since(b.started) < max_time;
            if !joins {
                self.close_block(now);
            }
        }
        if self.coder.outstanding + cs > self.coder.keep_limit {
            self.close_block(now);
            return false;
        }
        if self.coder.open.is_none() {
            let horizon = self.loss_horizon(now);
            let wire = (self.datagram + crate::wire::IP_UDP_OVERHEAD) as f64 * 8.0;
            let packets = horizon.as_secs_f64() * self.cc.pacing_rate() as f64 / wire;
            if !self.coder.wants_block(self.time_left(), horizon, packets) {
                return false;
            }
            self.coder.open = Some(OpenBlock {
                object: c.object,
                first: index,
                started: now,
            });
            // Known from its first chunk on, so that every acknowledgement and loss of its
            // chunks is counted (on a short path they come back before the block closes).
            self.coder
                .blocks
                .insert((c.object, index), CodedBlock::open());
        }
        let Some(b) = self.coder.open else {
            return false;
        };
        let Some(cb) = self.coder.blocks.get_mut(&(b.object, b.first)) else {
            self.coder.open = None;
            return false;
        };
        cb.count += 1;
        let count = cb.count;
        self.coder.outstanding += cs;
        if count == MAX_CHUNKS || c.end() == self.sizes[c.object as usize] {
            self.close_block(now);
        }
        true
    }

    /// Whether chunk `c` lies in a coded block not yet known held: its retransmissions are
    /// flagged KEEP too, so the receiver's copy can serve the block.
    pub(super) fn in_coded_block(&self, c: Chunk) -> bool {
        let cs = self.chunk_payload();
        let Ok(index) = u32::try_from(c.offset / cs) else {
            return false;
        };
        self.coder.block_key(c.object, index).is_some()
    }

    /// Close the open block when no chunk will join it: all new data is sent, or its time is
    /// up (the source or the receiver's Write Limit holds new data back).
    pub(super) fn close_idle_block(&mut self, now: Instant) {
        let Some(b) = self.coder.open else {
            return;
        };
        let done = self.cursor >= self.data_end;
        if done || now.saturating_since(b.started) >= block_time(self.rtt.smoothed()) {
            self.close_block(now);
        }
    }

    /// How long a loss takes to be found: the RTT plus the reordering window (§6.2).
    fn loss_horizon(&mut self, now: Instant) -> Duration {
        let rtt = self
            .rtt
            .latest()
            .max(self.rtt.min())
            .max(self.rtt.smoothed());
        rtt + self.reorder.window(now, self.rtt.min())
    }

    /// Sending time of the new data still to send, at the current rate.
    fn time_left(&self) -> Duration {
        let left = self
            .data_bytes
            .saturating_sub(self.stats.new_bytes_sent + self.stats.resumed_bytes);
        let rate = self.cc.pacing_rate().max(1);
        Duration::from_secs_f64(left as f64 * 8.0 / rate as f64)
    }

    /// Encode the open block and queue its symbols.
    fn close_block(&mut self, now: Instant) {
        let count = self.coder.open_count();
        let Some(b) = self.coder.open.take() else {
            return;
        };
        let cs = self.chunk_payload();
        let bytes = u64::from(count) * cs;
        let last = self.time_left() <= self.loss_horizon(now);
        let m = self.coder.symbols_for(count, last);
        let size = self.sizes[b.object as usize];
        let mut chunks = Vec::with_capacity(count as usize);
        for i in 0..count {
            let offset = u64::from(b.first + i) * cs;
            let len = cs.min(size - offset) as u32;
            let mut v = vec![0u8; cs as usize];
            let chunk = Chunk {
                object: b.object,
                offset,
                len,
            };
            if !self.buffer.copy(chunk, &mut v[..len as usize]) {
                // Acknowledged and released already: no repair is needed for what arrived,
                // but the block cannot be encoded without it.
                self.coder.stats.abandoned_blocks += 1;
                chunks.clear();
                break;
            }
            chunks.push(v);
        }
        // All R(K) symbols now, while the chunks are at hand: the first M go at once, the
        // rest serve the block's deficit later (`top_up`).
        let symbols = match (m, chunks.is_empty()) {
            (0, _) | (_, true) => Vec::new(),
            _ => crate::coding::encode(&chunks, usize::MAX).unwrap_or_default(),
        };
        let key = (b.object, b.first);
        if symbols.is_empty() {
            // Not coded after all: what it lost goes back to retransmission.
            self.exhaust(b.object, b.first);
            if let Some(cb) = self.coder.blocks.remove(&key) {
                if !cb.released {
                    self.coder.outstanding -= bytes;
                }
            }
            return;
        }
        self.coder.stats.blocks += 1;
        let Some(cb) = self.coder.blocks.get_mut(&key) else {
            // Wholly delivered while it was open: nothing to repair.
            return;
        };
        cb.symbols = symbols;
        cb.closed_at = Some(now);
        self.queue_symbols(b.object, b.first, m as u32);
    }

    /// Queue the next `n` symbols of a block (fewer if its symbols run out).
    fn queue_symbols(&mut self, object: u32, first: u32, n: u32) {
        let Some(b) = self.coder.blocks.get_mut(&(object, first)) else {
            return;
        };
        let end = (b.next + n).min(b.symbols.len() as u32);
        for index in b.next..end {
            self.coder.pending.push_back(PendingSymbol {
                object,
                first,
                index,
            });
        }
        b.next = end;
    }

    /// An acknowledged packet of a coded block: one more of its K packets arrived.
    pub(super) fn on_coded_ack(&mut self, kind: SentKind) {
        if self.coder.blocks.is_empty() {
            return;
        }
        let cs = self.chunk_payload();
        let block = match kind {
            SentKind::Repair { object, first } => {
                let mut b = self.coder.blocks.get_mut(&(object, first));
                if let Some(b) = b.as_deref_mut() {
                    b.symbols_acked += 1;
                }
                b
            }
            SentKind::Data { chunk, .. } => {
                let index = (chunk.offset / cs) as u32;
                let mut b = self.coder.block_of(chunk.object, index);
                if let Some(b) = b.as_deref_mut() {
                    b.chunks_acked += 1;
                }
                b
            }
            SentKind::Control => None,
        };
        // §6.9: the budget counts blocks fewer than K of whose packets are known to have
        // arrived; with K in, the receiver has rebuilt the block and keeps nothing for it.
        if let Some(b) =
            block.filter(|b| !b.released && b.closed_at.is_some() && b.arrived_enough())
        {
            b.released = true;
            self.coder.outstanding -= u64::from(b.count) * cs;
        }
    }

    /// A lost packet of a coded block. True when the block's symbols will make up for it (a
    /// lost chunk is then not retransmitted).
    pub(super) fn on_coded_loss(&mut self, kind: SentKind) -> bool {
        if self.coder.blocks.is_empty() {
            return false;
        }
        match kind {
            SentKind::Repair { object, first } => {
                if let Some(b) = self.coder.blocks.get_mut(&(object, first)) {
                    b.symbols_lost += 1;
                }
                true
            }
            SentKind::Data { chunk, .. } => {
                let index = (chunk.offset / self.chunk_payload()) as u32;
                match self.coder.block_of(chunk.object, index) {
                    Some(b) => {
                        b.chunks_lost += 1;
                        !b.exhausted
                    }
                    None => false,
                }
            }
            SentKind::Control => false,
        }
    }

    /// After a report: give each coded block with a deficit the symbols it lacks; a block
    /// whose symbols ran out goes back to retransmission of what it still misses.
    pub(super) fn top_up_blocks(&mut self, now: Instant) {
        if self.coder.blocks.is_empty() {
            return;
        }
        let p = self.coder.planning_loss();
        // However the counts went, a block not held long after it closed (several
        // loss-finding horizons, at least 200 ms) goes back to retransmission: the transfer
        // never waits on coding.
        let stall = (self.loss_horizon(now) * 4).max(core::time::Duration::from_millis(200));
        let stalled: Vec<(u32, u32)> = self
            .coder
            .blocks
            .iter()
            .filter(|(_, b)| {
                !b.exhausted && b.closed_at.is_some_and(|t| now.saturating_since(t) > stall)
            })
            .map(|(k, _)| *k)
            .collect();
        for (object, first) in stalled {
            self.exhaust(object, first);
        }
        let last = self.cursor >= self.data_end;
        let mut wants = Vec::new();
        for (&key, b) in &self.coder.blocks {
            if b.exhausted || b.closed_at.is_none() || !b.chunks_judged() {
                continue;
            }
            let d = b.deficit(p);
            // Settled and not rebuilt: the receiver lacks something the counts do not show
            // (a copy it could not keep): one more symbol each time, until the block is
            // held or its symbols run out.
            let d = if b.settled() { d.max(1.0) } else { d };
            if d > 0.0 {
                let queued = self
                    .coder
                    .pending
                    .iter()
                    .filter(|q| (q.object, q.first) == key)
                    .count() as f64;
                if d > queued {
                    wants.push((key, self.coder.top_up(d - queued, last)));
                }
            }
        }
        for ((object, first), n) in wants {
            let left = self
                .coder
                .blocks
                .get(&(object, first))
                .map_or(0, |b| b.symbols.len() as u32 - b.next);
            if left == 0 {
                self.exhaust(object, first);
            } else {
                self.queue_symbols(object, first, n);
            }
        }
    }

    /// A block's symbols are used up: retransmit its chunks not known delivered.
    fn exhaust(&mut self, object: u32, first: u32) {
        let Some(b) = self.coder.blocks.get_mut(&(object, first)) else {
            return;
        };
        b.exhausted = true;
        let count = b.count;
        let cs = self.chunk_payload();
        let size = self.sizes[object as usize];
        for i in 0..count {
            let offset = u64::from(first + i) * cs;
            let c = Chunk {
                object,
                offset,
                len: cs.min(size - offset) as u32,
            };
            if !self.delivered[object as usize].contains_range(c.offset..c.end()) {
                self.retransmit.push_back(c);
            }
        }
    }

    /// The receiver rebuilt these blocks (FEEDBACK Rebuilt Blocks): their bytes are delivered.
    /// Blocks this sender did not code are ignored.
    pub(super) fn on_rebuilt(&mut self, blocks: impl Iterator<Item = (u32, u32)>) {
        let cs = self.chunk_payload();
        for (object, first) in blocks {
            let Some(count) = self.coder.blocks.get(&(object, first)).map(|b| b.count) else {
                continue;
            };
            self.coder.stats.rebuilt_blocks += 1;
            let start = u64::from(first) * cs;
            let end = u64::from(first + count) * cs;
            self.mark_delivered(object, start..end);
        }
    }

    /// Forget coded blocks that are wholly delivered, and symbols no longer needed.
    pub(super) fn forget_held_blocks(&mut self) {
        if self.coder.blocks.is_empty() {
            return;
        }
        let cs = self.chunk_payload();
        let (delivered, sizes) = (&self.delivered, &self.sizes);
        let open = self.coder.open.map(|b| (b.object, b.first));
        let mut freed = 0;
        self.coder.blocks.retain(|&(object, first), b| {
            if open == Some((object, first)) {
                return true;
            }
            let count = b.count;
            let o = object as usize;
            let start = u64::from(first) * cs;
            let end = (u64::from(first + count) * cs).min(sizes[o]);
            let held = delivered[o].contains_range(start..end);
            if held && !b.released {
                freed += u64::from(count) * cs;
            }
            !held
        });
        self.coder.outstanding -= freed;
        let blocks = &self.coder.blocks;
        self.coder
            .pending
            .retain(|p| blocks.contains_key(&(p.object, p.first)));
    }
}
