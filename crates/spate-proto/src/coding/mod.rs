//! Coding: repair symbols that rebuild lost chunks without a round trip (`docs/spec.md` §4.9,
//! §6.9).
//!
//! In a nutshell: the sender groups consecutive chunks of one object into a **block** of K
//! chunks, sends them as ordinary DATA flagged KEEP, and after the block M **repair symbols**
//! (REPAIR packets). The code is a systematic Reed–Solomon code over GF(2^16) (Leopard-RS's
//! additive-FFT construction, via the `reed-solomon-simd` crate): any K of the block's K + M
//! packets rebuild all K chunks, so a receiver that lost up to M of them rebuilds the rest at
//! once, without asking. The receiver keeps a copy of each KEEP chunk until its block is held
//! and reports rebuilt blocks in FEEDBACK (extension type 2), so the sender does not resend
//! what a repair already restored. Losses are still losses: the packets stay unacknowledged and
//! rate control sees them.
//!
//! Which blocks are coded, and how many symbols each gets, is the sender's choice
//! (`plan.rs`); the receiver's side is `store.rs`.
//!
//! **Why this code.** Measured on this machine (1432-byte symbols, % of a core per Gbit/s):
//! `reed-solomon-simd` encodes at 1.4–2.6 and decodes at 16–62 (a fixed FFT per block, whatever
//! was lost); `raptorq` (RFC 6330) encodes at 34–43 and decodes at 28–32. Encoding runs for every
//! coded block, decoding only for blocks that lost something, and blocks here are only the tail
//! of a transfer: RS wins. A sliding-window code (RFC 8681) would decode only what was lost but
//! no maintained crate implements one, and the block code's MDS property (any K of K + M) is
//! what lets a sender compute exactly how many symbols a block's losses need.
//!
//! **The repair capacity R(K).** The code's symbols depend on how many recovery symbols the
//! block was encoded with (rounded up to a power of two), so both ends must agree on it without
//! a field: `R(K) = next power of two ≥ max(16, ⌈K / 16⌉)`. A block can thus carry at least
//! 6.25 % (and at least 16) repair symbols: three times the 2 % loss Spate is built for, what
//! a 1 % path with bursts of 20 needs at the end (~150 of a 3840-chunk block's 256), and for
//! the small blocks of slow paths room for a queue's overflow (4 was too few: blocks of 40
//! chunks losing 9 % to a full queue ran out and fell back to retransmission). A
//! quarter of K was tried first: the code then works on twice the shards for large blocks, and
//! encoding (7.6 → 4.1 % of a core per Gbit/s) and rebuilding (26 → 13 %) cost twice as much.

pub(crate) mod plan;
mod rebuild;
mod store;

pub(crate) use plan::Coder;
pub use plan::{CodingStats, Fec};
pub use rebuild::{RebuildDone, RebuildJob};
pub(crate) use store::Store;
pub use store::{RebuiltChunk, StoreStats};

/// Most bytes of chunks one session may have in coded blocks of which fewer than K packets are
/// known to have arrived (spec §6.9): the sender never exceeds it, and a receiver that sets
/// CODING should keep that much. What a receiver holds is about one bandwidth-delay product
/// of coded data (the blocks in flight) plus the blocks waiting for more symbols: 128 MiB
/// covers 1 Gbit/s at 400 ms twice, and 10 Gbit/s at 46 ms with room for the blocks that lost
/// more than their first symbols made up for. Longer or faster paths code only as much of
/// their tail as fits.
pub const KEEP_BUDGET: u64 = 128 << 20;

/// Repair symbols a block of `count` chunks is encoded with: R(K) of spec §6.9.
pub const fn repair_capacity(count: u32) -> u32 {
    let need = if count.div_ceil(16) > 16 {
        count.div_ceil(16)
    } else {
        16
    };
    need.next_power_of_two()
}

/// Why a block could not be encoded or rebuilt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeError(pub String);

/// The first `m` repair symbols of a block whose chunks are `chunks` (each `symbol_len` bytes,
/// the last ones zero-padded by the caller).
pub fn encode(chunks: &[Vec<u8>], m: usize) -> Result<Vec<Vec<u8>>, CodeError> {
    let k = chunks.len();
    let r = repair_capacity(k as u32) as usize;
    let all = reed_solomon_simd::encode(k, r, chunks).map_err(|e| CodeError(e.to_string()))?;
    Ok(all.into_iter().take(m.min(r)).collect())
}

/// Rebuild the chunks of a block of `count` chunks that are missing from `have` (index within
/// the block, bytes) using `symbols` (repair index, bytes): needs `have.len() + symbols.len() ≥
/// count`. Returns the rebuilt chunks by index.
pub fn decode<'a>(
    count: u32,
    have: impl IntoIterator<Item = (usize, &'a [u8])>,
    symbols: impl IntoIterator<Item = (usize, &'a [u8])>,
) -> Result<Vec<(usize, Vec<u8>)>, CodeError> {
    let r = repair_capacity(count) as usize;
    let out = reed_solomon_simd::decode(count as usize, r, have, symbols)
        .map_err(|e| CodeError(e.to_string()))?;
    let mut v: Vec<(usize, Vec<u8>)> = out.into_iter().collect();
    v.sort_by_key(|(i, _)| *i);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_a_power_of_two_of_at_least_a_sixteenth() {
        assert_eq!(repair_capacity(1), 16);
        assert_eq!(repair_capacity(256), 16);
        assert_eq!(repair_capacity(257), 32);
        assert_eq!(repair_capacity(1000), 64);
        assert_eq!(repair_capacity(3840), 256);
        assert_eq!(repair_capacity(4096), 256);
    }

    #[test]
    fn any_k_of_k_plus_m_rebuild_the_block() {
        let k = 100;
        let chunks: Vec<Vec<u8>> = (0..k)
            .map(|i| (0..64).map(|j| (i * 7 + j * 13) as u8).collect())
            .collect();
        let symbols = encode(&chunks, 6).unwrap();
        assert_eq!(symbols.len(), 6);
        // Lose chunks 3, 17, 18, 40 and 99, and symbol 1; five symbols make up for them.
        let lost = [3, 17, 18, 40, 99];
        let have = (0..k)
            .filter(|i| !lost.contains(i))
            .map(|i| (i, chunks[i].as_slice()));
        let sy = [0, 2, 3, 4, 5].map(|i| (i, symbols[i].as_slice()));
        let got = decode(k as u32, have, sy).unwrap();
        let idx: Vec<usize> = got.iter().map(|(i, _)| *i).collect();
        assert!(lost.iter().all(|l| idx.contains(l)), "{idx:?}");
        for (i, bytes) in got {
            assert_eq!(bytes, chunks[i], "chunk {i}");
        }
    }

    #[test]
    fn too_few_symbols_is_an_error_not_a_panic() {
        let chunks: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; 32]).collect();
        let symbols = encode(&chunks, 1).unwrap();
        let have = (2..10).map(|i| (i, chunks[i].as_slice()));
        assert!(decode(10, have, [(0, symbols[0].as_slice())]).is_err());
    }
}
