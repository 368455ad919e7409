//! Write buffers between two uses, shared by every session of a writer pool.
//!
//! A buffer goes round: the network thread fills it with a session's bytes, the session's
//! writer writes it, and it comes back here for the network thread to fill again. Allocating
//! each buffer anew costs more than the write it carries: the allocator hands a 1 MiB buffer
//! out from fresh `mmap`ed pages, so each use pays 256 page faults, the kernel zeroing every
//! page, and an `munmap` with its TLB flush. Measured (`spate-lab bench-end` pair, a 2 GiB file
//! to ext4 with `--direct-io`, session 48): with a session keeping at most 1 MiB of spares, 931
//! of the 2048 block buffers were new, and allocating them was 22 % of the receiver's CPU
//! samples — the writer falls behind in bursts, its queue swings by up to 60 MiB, and the
//! buffers that came back together were freed together.
//!
//! **Bound.** Kept buffers are memory no queue counts, so they are bounded twice: at most
//! [`SPARE_BYTES`] in all, and never more than the pool's queues leave of [`POOL_BYTES`] when a
//! buffer comes back — so spare and queued bytes together stay within the pool's bound (a
//! buffer taken for new bytes moves from one count to the other). Pool-wide, not per session:
//! a session whose queue once filled keeps nothing to itself, and 64 sessions hold no more
//! than one.
//!
//! Two sizes circulate (256 KiB buffers for writes through the page cache, 1 MiB + 4 KiB for
//! direct I/O, `direct.rs`), and only those are kept; a request that finds none of its size
//! drops one of the other, so a pool switching between them does not keep dead weight.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::pool::{lock, POOL_BYTES};

/// The sizes of the network thread's coalescing buffers: the only ones kept. (The copies
/// `Sink::flush` makes of sparse buffers are sized to their bytes, which no request matches.)
const SIZES: [usize; 2] = [
    super::WRITE_BUF,
    super::direct::BLOCK_BYTES + super::direct::ALIGN,
];
/// Spare write buffers a pool keeps, bytes: 64 MiB, one session's queue ([`super::LANE_BYTES`]),
/// so that a writer's queue swinging from full to empty and back allocates nothing.
pub const SPARE_BYTES: usize = 64 << 20;

/// The pool's spare write buffers.
#[derive(Default)]
pub struct Spares {
    buffers: Mutex<Vec<Vec<u8>>>,
    /// Bytes of the buffers kept (their lengths).
    bytes: AtomicUsize,
}

impl Spares {
    /// A kept buffer of exactly `len` bytes, if there is one. Its bytes are those of its last
    /// use: the caller overwrites what it uses.
    pub fn take(&self, len: usize) -> Option<Vec<u8>> {
        let mut b = lock(&self.buffers);
        let found = match b.iter().rposition(|v| v.len() == len) {
            Some(i) => Some(b.swap_remove(i)),
            None => {
                // None of this size: one of the other goes, as it may be dead weight.
                if let Some(v) = b.pop() {
                    self.bytes.fetch_sub(v.len(), Ordering::Relaxed);
                }
                None
            }
        };
        if let Some(v) = &found {
            self.bytes.fetch_sub(v.len(), Ordering::Relaxed);
        }
        found
    }

    /// Keep `buf` for another use if the bounds allow, with `queued` bytes in the pool's
    /// queues now; else free it.
    pub fn give(&self, buf: Vec<u8>, queued: usize) {
        if !SIZES.contains(&buf.len()) {
            return;
        }
        let mut b = lock(&self.buffers);
        let after = self.bytes.load(Ordering::Relaxed) + buf.len();
        if after <= SPARE_BYTES && after + queued <= POOL_BYTES {
            self.bytes.store(after, Ordering::Relaxed);
            b.push(buf);
        }
    }

    /// Bytes kept now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_by_size_within_both_bounds() {
        let [small, large] = SIZES;
        let s = Spares::default();
        s.give(vec![1; 1400], 0);
        s.give(vec![1; 200 << 10], 0);
        assert_eq!(s.bytes(), 0, "a buffer of another size is kept");
        s.give(vec![1; small], 0);
        s.give(vec![2; small], 0);
        assert_eq!(s.bytes(), 2 * small);
        assert_eq!(s.take(small).map(|v| v.len()), Some(small));
        // Another size finds none and drops the one left of the other.
        assert!(s.take(large).is_none());
        assert_eq!(s.bytes(), 0);

        for _ in 0..SPARE_BYTES / large + 4 {
            s.give(vec![0; large], 0);
        }
        assert!(s.bytes() <= SPARE_BYTES, "kept beyond SPARE_BYTES");
        assert!(
            s.bytes() + large > SPARE_BYTES,
            "kept less than SPARE_BYTES"
        );

        let s = Spares::default();
        s.give(vec![0; large], POOL_BYTES - large + 1);
        assert_eq!(s.bytes(), 0, "kept beyond the pool's bound");
        s.give(vec![0; large], POOL_BYTES - large);
        assert_eq!(s.bytes(), large);
    }
}
