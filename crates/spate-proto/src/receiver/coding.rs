//! Coding on the receiver's side: copies of KEEP chunks, REPAIR packets, rebuilt chunks
//! (`docs/spec.md` §4.9, §6.9; the bookkeeping is `coding/store.rs`).
//!
//! > §4.9: A receiver drops a REPAIR — without acknowledging it — before the sender's address
//! > is validated, in a session where it did not set CODING, when the block does not lie inside
//! > the object (every one of its K chunks must start before the object's end), or when the
//! > symbol is not exactly one chunk size long. Otherwise it acknowledges the packet like DATA
//! > and counts its bytes in Bytes Received.
//!
//! Rebuilt chunks are handed to the application through [`Receiver::poll_rebuilt`], exactly
//! like the bytes of a DATA packet: written at their offset, counted once.

use std::collections::VecDeque;

use super::{DataChunk, Receiver};
use crate::coding::{RebuildDone, RebuildJob, RebuiltChunk, Store, StoreStats, KEEP_BUDGET};
use crate::event::DropReason;
use crate::time::Instant;
use crate::wire::{Data, Rebuilt, Repair, DATA_OVERHEAD};

/// Reports that list a rebuilt block: as many as repeat a range (§6.5), so the loss of a few
/// reports loses nothing.
const LISTED_IN_REPORTS: u8 = super::report::REPEAT as u8;

/// The receiver's coding state.
#[derive(Debug, Default)]
pub(super) struct Coding {
    store: Option<Store>,
    /// Most bytes of copies and symbols to keep; `None`: [`KEEP_BUDGET`].
    budget: Option<u64>,
    /// Rebuilt bytes the application has not taken yet.
    rebuilt: VecDeque<RebuiltChunk>,
    /// Rebuilds handed out to the driver (`rebuild_elsewhere`), not yet taken.
    jobs: VecDeque<RebuildJob>,
    /// Rebuilt blocks still to be listed in reports, with the reports left for each.
    to_report: VecDeque<((u32, u32), u8)>,
}

impl Receiver {
    /// Bytes per chunk in this session (§4.3).
    fn chunk_size(&self) -> usize {
        self.datagram - DATA_OVERHEAD - self.cfg.overhead.tag
    }

    /// Whether this session takes REPAIR (ACCEPT flag CODING): configured, and a chunk size
    /// the code can make symbols of (even).
    pub(super) fn coding_accepted(&self) -> bool {
        self.cfg.coding && self.chunk_size() % 2 == 0
    }

    fn store(&mut self) -> &mut Store {
        let chunk = self.chunk_size();
        let budget = self.coding.budget.unwrap_or(KEEP_BUDGET);
        self.coding
            .store
            .get_or_insert_with(|| Store::new(chunk, budget))
    }

    /// Keep at most `bytes` of chunk copies and symbols for coding (default and most useful:
    /// [`KEEP_BUDGET`], what a sender may have outstanding). A server with many sessions
    /// shares a pool among them; a session kept below the sender's bound drops copies, which
    /// costs that sender retransmissions, never correctness.
    pub fn set_coding_budget(&mut self, bytes: u64) {
        self.coding.budget = Some(bytes);
        if let Some(s) = self.coding.store.as_mut() {
            s.set_budget(bytes);
        }
    }

    /// Counters of coding.
    pub fn coding_stats(&self) -> StoreStats {
        self.coding
            .store
            .as_ref()
            .map(|s| s.stats)
            .unwrap_or_default()
    }

    /// Bytes kept for coding now: copies of KEEP chunks and repair symbols (at most
    /// [`KEEP_BUDGET`]).
    pub fn coding_bytes(&self) -> u64 {
        self.coding.store.as_ref().map_or(0, Store::bytes)
    }

    /// Bytes rebuilt from repair symbols, to be written like DATA. Call after every
    /// `handle_*` call until it returns `None`.
    pub fn poll_rebuilt(&mut self) -> Option<RebuiltChunk> {
        self.coding.rebuilt.pop_front()
    }

    /// A DATA packet flagged KEEP passed its checks: keep a copy of its chunk.
    pub(super) fn keep_copy(&mut self, d: &Data<'_>) {
        if !(d.flags.keep && d.object != 0 && self.coding_accepted()) {
            return;
        }
        if let Some(block) = self.store().keep(d.object, d.offset, d.payload) {
            self.rebuild(block);
        }
    }

    pub(super) fn on_repair(
        &mut self,
        now: Instant,
        pn: u64,
        len: usize,
        r: &Repair<'_>,
    ) -> Result<Option<DataChunk>, DropReason> {
        if !self.validation.ever {
            return Err(DropReason::Unexpected(
                "REPAIR before the address is validated",
            ));
        }
        if !self.coding_accepted() {
            return Err(DropReason::Unexpected("REPAIR in a session without coding"));
        }
        let cs = self.chunk_size() as u64;
        let size = self.sizes.get(r.object as usize).copied();
        let last = u64::from(r.first_chunk) + u64::from(r.count) - 1;
        let inside = size.is_some_and(|s| last * cs < s);
        if !inside || r.symbol.len() as u64 != cs {
            return Err(DropReason::OutOfBounds {
                object: r.object,
                offset: u64::from(r.first_chunk) * cs,
                len: r.symbol.len(),
            });
        }
        self.bytes_received += (len + self.cfg.overhead.tag) as u64;
        if !self.on_packet(now, pn, false) {
            return Ok(None);
        }
        let o = r.object as usize;
        let start = u64::from(r.first_chunk) * cs;
        let end = ((last + 1) * cs).min(self.sizes[o]);
        let held = self.received[o].contains_range(start..end);
        let ready = self
            .store()
            .symbol(r.object, r.first_chunk, r.count, r.index, r.symbol, held);
        if let Some(block) = ready {
            self.rebuild(block);
        }
        Ok(None)
    }

    /// A block's kept chunks and symbols suffice: rebuild it here, or hand the work out
    /// ([`ReceiverConfig::rebuild_elsewhere`](crate::ReceiverConfig::rebuild_elsewhere)).
    fn rebuild(&mut self, (object, first): (u32, u32)) {
        let Some(&object_len) = self.sizes.get(object as usize) else {
            return;
        };
        let Some(job) = self.store().take(object, first, object_len) else {
            return;
        };
        if self.cfg.rebuild_elsewhere {
            self.coding.jobs.push_back(job);
        } else {
            self.finish_rebuild(job.run());
        }
    }

    /// Work for another thread: a block to rebuild ([`RebuildJob::run`]), whose result goes
    /// back to [`finish_rebuild`](Self::finish_rebuild). Only with
    /// [`ReceiverConfig::rebuild_elsewhere`](crate::ReceiverConfig::rebuild_elsewhere); call
    /// after every `handle_*` call until it returns `None`.
    pub fn poll_rebuild_job(&mut self) -> Option<RebuildJob> {
        self.coding.jobs.pop_front()
    }

    /// A rebuild is done: take the chunks the block lacked as if DATA had brought them
    /// (then [`poll_rebuilt`](Self::poll_rebuilt) hands them out), and list the block in the
    /// next reports. A result for a block this session did not hand out changes nothing.
    pub fn finish_rebuild(&mut self, done: RebuildDone) {
        let Some(store) = self.coding.store.as_mut() else {
            return;
        };
        if !store.is_rebuilding(done.block()) {
            return;
        }
        store.finish(&done);
        let (object, first) = done.block();
        let Some(chunks) = done.into_chunks() else {
            return;
        };
        let o = object as usize;
        for c in chunks {
            let end = c.offset + c.bytes.len() as u64;
            let (new, content_new) = self.mark_received(o, c.offset..end);
            if new == 0 {
                continue;
            }
            self.stats.delivered_bytes += content_new;
            self.flow.received += new;
            self.coding.rebuilt.push_back(c);
        }
        if self.coding.to_report.len() == Rebuilt::CAPACITY {
            self.coding.to_report.pop_front();
        }
        self.coding
            .to_report
            .push_back(((object, first), LISTED_IN_REPORTS));
        self.on_file_data_resume();
        self.after_object_bytes(object);
    }

    /// The Keep Limit of the next report (§6.9): the coding budget, when it is below what a
    /// sender may otherwise have outstanding.
    pub(super) fn keep_limit(&self) -> Option<u64> {
        self.coding
            .budget
            .filter(|&b| b < KEEP_BUDGET && self.coding_accepted())
    }

    /// The Rebuilt Blocks of the next report; each block is listed in up to 8 reports.
    pub(super) fn take_rebuilt(&mut self) -> Rebuilt {
        let mut out = Rebuilt::default();
        for ((object, first), left) in self.coding.to_report.iter_mut() {
            out.push(*object, *first);
            *left -= 1;
        }
        self.coding.to_report.retain(|(_, left)| *left > 0);
        out
    }

    /// Copies before the watermark can serve no block: forget them.
    pub(super) fn forget_held_copies(&mut self) {
        let (object, offset) = self.watermark;
        if let Some(s) = self.coding.store.as_mut() {
            s.forget_below(object, offset);
        }
    }
}
