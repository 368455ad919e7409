//! Resuming: waiting for the receiver's HAVE and skipping what it holds (`docs/spec.md` §8.3).
//!
//! > §8.3: A sender that set RESUME in HELLO and got RESUME in ACCEPT sends no file data until
//! > a HAVE arrives; meanwhile, once the manifest is acknowledged, it sends PING every 200 ms
//! > (each answered by FEEDBACK, and by the HAVE once the receiver has it). The bytes a HAVE
//! > lists count as delivered and are never sent; a HAVE naming an object or byte beyond the
//! > manifest is dropped whole. Later HAVEs are ignored.
//!
//! Chunks keep their fixed boundaries (multiples of the chunk size from offset 0): a chunk is
//! skipped only if every byte of it is held, so a partly held chunk is sent whole.

use super::Sender;
use crate::event::DropReason;
use crate::wire::{Have, HaveEntry, WireError};

impl Sender {
    pub(super) fn on_have(&mut self, have: &Have<'_>) -> Result<(), DropReason> {
        if !self.have_pending {
            return Ok(()); // a repeat: the first one was applied
        }
        let n = self.sizes.len() as u64;
        let fits = have.entries().all(|e| match e {
            HaveEntry::Whole { first, count } => u64::from(first) + u64::from(count) <= n,
            HaveEntry::Range {
                object,
                offset,
                len,
            } => self
                .sizes
                .get(object as usize)
                .is_some_and(|&size| offset + len <= size),
        });
        if !fits {
            return Err(WireError::Invalid("HAVE names bytes outside the manifest").into());
        }
        for e in have.entries() {
            match e {
                HaveEntry::Whole { first, count } => {
                    for o in first..first + count {
                        self.mark_delivered(o, 0..self.sizes[o as usize]);
                    }
                }
                HaveEntry::Range {
                    object,
                    offset,
                    len,
                } => self.mark_delivered(object, offset..offset + len),
            }
        }
        self.have_pending = false;
        self.skip_held();
        self.check_complete();
        Ok(())
    }

    /// Move the new-data cursor past chunks the receiver holds entirely.
    pub(super) fn skip_held(&mut self) {
        let payload = self.chunk_payload();
        while let Some(&size) = self.sizes.get(self.cursor.0 as usize) {
            let (object, offset) = self.cursor;
            if offset >= size {
                self.cursor = (object + 1, 0);
                continue;
            }
            if object == 0 {
                return; // the manifest is sent whole
            }
            let end = (offset + payload).min(size);
            if !self.delivered[object as usize].contains_range(offset..end) {
                return;
            }
            self.cursor.1 = end;
        }
    }
}
