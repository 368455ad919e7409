//! The receiver's side of coding: copies of KEEP chunks, repair symbols, and rebuilding
//! (`docs/spec.md` §6.9).
//!
//! > §6.9: A receiver that set CODING keeps a copy of every DATA payload flagged KEEP (a
//! > whole chunk) until the block it belongs to is held. When, for a block, the kept chunks
//! > plus the distinct repair symbols number at least K, it rebuilds the block's missing
//! > chunks, hands their bytes to its application as if DATA had brought them, and lists the
//! > block in its next reports (Rebuilt Blocks). Memory for copies and symbols is bounded by
//! > 64 MiB per session; beyond it, copies and symbols are dropped (the sender then repairs
//! > by retransmission).
//!
//! Everything here is bounded by what arrived, never by what a packet claims: a block's
//! entry exists only once one of its symbols arrived, and the bytes kept (copies and symbols)
//! never pass [`KEEP_BUDGET`](super::KEEP_BUDGET). Rebuilding a block costs one decode of K
//! shards, done once, after K shards arrived.

use std::collections::{BTreeMap, BTreeSet};

use super::rebuild::{RebuildDone, RebuildJob};

/// Chunk bytes rebuilt from repair symbols, for the application to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuiltChunk {
    /// Object number.
    pub object: u32,
    /// Offset of the bytes in the object.
    pub offset: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Counters of the receiver's coding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// REPAIR packets taken (well-formed, inside an object, after validation).
    pub symbols_received: u64,
    /// Symbols that arrived for a block already held or rebuilt, or beyond what rebuilt it.
    pub useless_symbols: u64,
    /// Blocks rebuilt.
    pub rebuilt_blocks: u64,
    /// Chunks rebuilt that had not arrived as DATA.
    pub rebuilt_chunks: u64,
    /// Copies or symbols not kept because the session's budget was full.
    pub over_budget: u64,
}

#[derive(Debug)]
struct Block {
    count: u32,
    symbols: Vec<(usize, Vec<u8>)>,
}

/// Kept chunks and symbols of one session.
#[derive(Debug)]
pub struct Store {
    /// Chunk size of the session (the symbol length).
    chunk: usize,
    kept: BTreeMap<(u32, u32), Vec<u8>>,
    blocks: BTreeMap<(u32, u32), Block>,
    /// Blocks taken out to be rebuilt and not finished yet.
    rebuilding: BTreeSet<(u32, u32)>,
    bytes: u64,
    budget: u64,
    /// Counters.
    pub stats: StoreStats,
}

impl Store {
    /// A store for chunks of `chunk` bytes, keeping at most `budget` bytes.
    pub fn new(chunk: usize, budget: u64) -> Store {
        Store {
            chunk,
            kept: BTreeMap::new(),
            blocks: BTreeMap::new(),
            rebuilding: BTreeSet::new(),
            bytes: 0,
            budget,
            stats: StoreStats::default(),
        }
    }

    /// Keep at most `budget` bytes from now on (what is held beyond it is not dropped: it goes
    /// as blocks are rebuilt or held).
    pub fn set_budget(&mut self, budget: u64) {
        self.budget = budget;
    }

    /// Bytes held now (copies and symbols).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Keep a copy of a KEEP chunk at `offset` of `object` (a chunk boundary; other offsets are
    /// ignored). Returns true if the chunk now completes a block that can be rebuilt.
    pub fn keep(&mut self, object: u32, offset: u64, bytes: &[u8]) -> Option<(u32, u32)> {
        let index = self.index(offset)?;
        if bytes.len() > self.chunk || self.kept.contains_key(&(object, index)) {
            return None;
        }
        if self.bytes + bytes.len() as u64 > self.budget {
            self.stats.over_budget += 1;
            return None;
        }
        self.bytes += bytes.len() as u64;
        self.kept.insert((object, index), bytes.to_vec());
        // A symbol may have arrived before this chunk (reordering): is its block ready now?
        let (&(o, first), b) = self.blocks.range(..=(object, index)).next_back()?;
        (o == object && index < first + b.count && self.ready(o, first)).then_some((o, first))
    }

    fn index(&self, offset: u64) -> Option<u32> {
        let c = self.chunk as u64;
        (c > 0 && offset % c == 0).then(|| u32::try_from(offset / c).ok())?
    }

    fn kept_in(&self, object: u32, first: u32, count: u32) -> usize {
        let end = first.saturating_add(count);
        self.kept.range((object, first)..(object, end)).count()
    }

    fn ready(&self, object: u32, first: u32) -> bool {
        self.blocks.get(&(object, first)).is_some_and(|b| {
            self.kept_in(object, first, b.count) + b.symbols.len() >= b.count as usize
        })
    }

    /// Take repair symbol `index` of the block of `count` chunks from chunk `first` of
    /// `object`. `all_held` says whether every chunk of the block is already held (by DATA
    /// or an earlier rebuild). Returns the block's key when it can now be rebuilt.
    pub fn symbol(
        &mut self,
        object: u32,
        first: u32,
        count: u32,
        index: u32,
        symbol: &[u8],
        all_held: bool,
    ) -> Option<(u32, u32)> {
        self.stats.symbols_received += 1;
        if symbol.len() != self.chunk {
            self.stats.useless_symbols += 1;
            return None;
        }
        if all_held || self.rebuilding.contains(&(object, first)) {
            self.stats.useless_symbols += 1;
            if all_held {
                self.forget_block(object, first, count);
            }
            return None;
        }
        let index = index as usize;
        // A block is defined by its first chunk and count; a symbol that disagrees is not of
        // this block (a confused or hostile sender), and one already kept adds nothing.
        let unwanted = self
            .blocks
            .get(&(object, first))
            .is_some_and(|b| b.count != count || b.symbols.iter().any(|(i, _)| *i == index));
        if unwanted {
            self.stats.useless_symbols += 1;
            return None;
        }
        if self.bytes + symbol.len() as u64 > self.budget {
            self.stats.over_budget += 1;
            return None;
        }
        self.bytes += symbol.len() as u64;
        self.blocks
            .entry((object, first))
            .or_insert_with(|| Block {
                count,
                symbols: Vec::new(),
            })
            .symbols
            .push((index, symbol.to_vec()));
        self.ready(object, first).then_some((object, first))
    }

    /// Take block `(object, first)` out to be rebuilt: its kept chunks (padded) and symbols,
    /// owned by the job. Its bytes stay counted until [`finish`](Self::finish), and symbols
    /// that arrive for it meanwhile are not kept.
    pub fn take(&mut self, object: u32, first: u32, object_len: u64) -> Option<RebuildJob> {
        let block = self.blocks.remove(&(object, first))?;
        let count = block.count;
        let mut bytes: u64 = block.symbols.iter().map(|(_, s)| s.len() as u64).sum();
        let mut have = Vec::new();
        for (i, mut v) in self.remove_copies(object, first, count) {
            bytes += v.len() as u64;
            v.resize(self.chunk, 0);
            have.push(((i - first) as usize, v));
        }
        self.rebuilding.insert((object, first));
        Some(RebuildJob {
            object,
            first,
            count,
            chunk: self.chunk,
            object_len,
            have,
            symbols: block.symbols,
            bytes,
        })
    }

    /// Whether block `key` was taken out to be rebuilt and is not finished.
    pub fn is_rebuilding(&self, key: (u32, u32)) -> bool {
        self.rebuilding.contains(&key)
    }

    /// A job taken from this store is done: release its bytes and count what it rebuilt.
    pub fn finish(&mut self, done: &RebuildDone) {
        if self.rebuilding.remove(&done.block()) {
            self.bytes = self.bytes.saturating_sub(done.bytes);
            if let Some(chunks) = &done.chunks {
                self.stats.rebuilt_blocks += 1;
                self.stats.rebuilt_chunks += chunks.len() as u64;
            }
        }
    }

    /// Forget a block's symbols and the copies of its chunks.
    fn forget_block(&mut self, object: u32, first: u32, count: u32) {
        if let Some(b) = self.blocks.remove(&(object, first)) {
            for (_, s) in b.symbols {
                self.bytes -= s.len() as u64;
            }
        }
        for (_, v) in self.remove_copies(object, first, count) {
            self.bytes -= v.len() as u64;
        }
    }

    /// Take the copies of chunks `first .. first + count` of `object` out of the store (their
    /// bytes are still counted: the caller releases or hands them on), with their indices.
    fn remove_copies(&mut self, object: u32, first: u32, count: u32) -> Vec<(u32, Vec<u8>)> {
        let end = first.saturating_add(count);
        let keys: Vec<(u32, u32)> = self
            .kept
            .range((object, first)..(object, end))
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter()
            .filter_map(|k| Some((k.1, self.kept.remove(&k)?)))
            .collect()
    }

    /// Forget copies and blocks that lie wholly before the watermark `(object, offset)`. A held
    /// chunk's copy still serves its block, whose other chunks may be missing; but a block has
    /// at most 4096 chunks, so a chunk 4096 or more chunks behind the watermark (or in an
    /// earlier object) is in a block wholly held.
    pub fn forget_below(&mut self, object: u32, offset: u64) {
        let c = self.chunk as u64;
        if c == 0 {
            return;
        }
        let held = u32::try_from(offset / c).unwrap_or(u32::MAX);
        let limit = (object, held.saturating_sub(crate::wire::MAX_BLOCK_CHUNKS));
        while let Some((&k, _)) = self.kept.first_key_value() {
            if k >= limit {
                break;
            }
            if let Some(v) = self.kept.remove(&k) {
                self.bytes -= v.len() as u64;
            }
        }
        while let Some((&(o, first), b)) = self.blocks.first_key_value() {
            let end = u64::from(first) + u64::from(b.count);
            let before = o < object || (o == object && end * c <= offset);
            if !before {
                break;
            }
            if let Some(b) = self.blocks.remove(&(o, first)) {
                for (_, s) in b.symbols {
                    self.bytes -= s.len() as u64;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(k: usize, len: usize) -> Vec<Vec<u8>> {
        (0..k)
            .map(|i| (0..len).map(|j| (i * 31 + j) as u8).collect())
            .collect()
    }

    #[test]
    fn a_block_missing_two_chunks_is_rebuilt_from_two_symbols() {
        let c = 64;
        let data = chunks(10, c);
        // The object is 10 chunks less 20 bytes: the last chunk is short.
        let object_len = (10 * c - 20) as u64;
        let mut padded = data.clone();
        padded[9][c - 20..].fill(0);
        let symbols = crate::coding::encode(&padded, 3).unwrap();
        let mut s = Store::new(c, 1 << 20);
        for i in (0..10).filter(|i| ![2, 9].contains(i)) {
            let len = if i == 9 { c - 20 } else { c };
            assert_eq!(s.keep(7, (i * c) as u64, &padded[i][..len]), None);
        }
        assert_eq!(s.symbol(7, 0, 10, 1, &symbols[1], false), None);
        assert_eq!(s.symbol(7, 0, 10, 1, &symbols[1], false), None, "duplicate");
        assert_eq!(s.stats.useless_symbols, 1);
        let key = s.symbol(7, 0, 10, 0, &symbols[0], false).unwrap();
        let job = s.take(key.0, key.1, object_len).unwrap();
        // Taken out: a late symbol of the block is not kept.
        assert_eq!(s.symbol(7, 0, 10, 2, &symbols[2], false), None);
        let done = job.run();
        s.finish(&done);
        let got = done.chunks.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].offset, 2 * c as u64);
        assert_eq!(got[0].bytes, data[2]);
        assert_eq!(got[1].offset, 9 * c as u64);
        assert_eq!(got[1].bytes, data[9][..c - 20]);
        assert_eq!(s.bytes(), 0, "everything of the block is forgotten");
        assert_eq!((s.stats.rebuilt_blocks, s.stats.rebuilt_chunks), (1, 2));
    }

    #[test]
    fn memory_stays_within_the_budget_whatever_arrives() {
        let mut s = Store::new(100, 1000);
        for i in 0..50u64 {
            let _ = s.keep(1, i * 100, &[1; 100]);
            let _ = s.symbol(2, i as u32, 4, 0, &[0; 100], false);
        }
        assert!(s.bytes() <= 1000);
        assert!(s.stats.over_budget > 0);
        s.forget_below(3, 0);
        assert_eq!(s.bytes(), 0);
    }

    #[test]
    fn copies_near_the_watermark_stay_for_their_block() {
        let mut s = Store::new(10, 1 << 30);
        for i in 0..5000u64 {
            let _ = s.keep(1, i * 10, &[1; 10]);
        }
        // Everything below chunk 4500 is held; blocks have at most 4096 chunks, so only the
        // copies below chunk 404 are surely in held blocks.
        s.forget_below(1, 45_000);
        assert_eq!(s.bytes(), (5000 - 404) * 10);
    }

    #[test]
    fn wrong_sizes_and_conflicting_blocks_are_dropped() {
        let mut s = Store::new(100, 1 << 20);
        assert_eq!(s.keep(1, 50, &[0; 100]), None, "not a chunk boundary");
        assert_eq!(s.bytes(), 0);
        let _ = s.symbol(1, 0, 4, 0, &[0; 99], false);
        let _ = s.symbol(1, 0, 4, 0, &[0; 100], false);
        let _ = s.symbol(1, 0, 5, 1, &[0; 100], false);
        assert_eq!(s.stats.useless_symbols, 2);
        assert_eq!(s.bytes(), 100);
    }
}
