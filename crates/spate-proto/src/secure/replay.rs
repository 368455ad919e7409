//! Which packet numbers were already opened (`docs/spec.md` §9.4).
//!
//! > §9.4: A receiver of sealed packets MUST drop a packet whose number it already opened, and
//! > a packet more than 2^16 numbers below the highest it opened.
//!
//! A sliding bitmap (RFC 6479's scheme, as IPsec and WireGuard use): bit `pn mod W` of a ring of
//! W = 2^16 bits says whether `pn` was opened, for the W numbers up to the highest one. 8 KiB per
//! direction; 2^16 packets is 96 MB in flight at 1472 bytes, 80 ms at 10 Gbit/s — more than the
//! reordering any path shows. An older packet is dropped even if new: the sender has declared
//! it lost long before and repeated its bytes under a new number.

/// Window size in packet numbers.
pub const WINDOW: u64 = 1 << 16;

const WORDS: usize = (WINDOW / 64) as usize;

/// The sliding window.
pub(crate) struct ReplayWindow {
    /// One more than the highest number marked; 0 before any.
    top: u64,
    bits: Box<[u64; WORDS]>,
}

impl ReplayWindow {
    pub(crate) fn new() -> ReplayWindow {
        ReplayWindow {
            top: 0,
            bits: Box::new([0; WORDS]),
        }
    }

    fn bit(pn: u64) -> (usize, u64) {
        let i = pn % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// True if `pn` may be new (not opened before and not too old). Cheap: checked before the
    /// AEAD, and again (by [`mark`](Self::mark)) after it.
    pub(crate) fn is_fresh(&self, pn: u64) -> bool {
        if pn >= self.top {
            return true;
        }
        if self.top - pn > WINDOW {
            return false;
        }
        let (w, m) = Self::bit(pn);
        self.bits[w] & m == 0
    }

    /// Record `pn` as opened; false if it was not fresh (a replay).
    pub(crate) fn mark(&mut self, pn: u64) -> bool {
        if !self.is_fresh(pn) {
            return false;
        }
        if pn >= self.top {
            // Clear the bits of the numbers the window slides over.
            if pn - self.top >= WINDOW {
                self.bits.fill(0);
            } else {
                for n in self.top..pn {
                    let (w, m) = Self::bit(n);
                    self.bits[w] &= !m;
                }
            }
            self.top = pn + 1;
        }
        let (w, m) = Self::bit(pn);
        self.bits[w] |= m;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn replays_and_old_numbers_are_refused() {
        let mut r = ReplayWindow::new();
        assert!(r.mark(5));
        assert!(!r.mark(5));
        assert!(r.mark(3), "reordered, still new");
        assert!(!r.mark(3));
        assert!(r.mark(WINDOW + 10));
        assert!(!r.is_fresh(9), "more than the window below the highest");
        assert!(r.mark(11));
        assert!(r.mark(3 * WINDOW));
        assert!(!r.mark(3 * WINDOW));
        assert!(r.mark(3 * WINDOW - 1));
    }

    proptest! {
        /// Against a model that remembers every number: the window refuses every replay, and
        /// accepts every new number within the window.
        #[test]
        fn matches_a_model(pns in proptest::collection::vec(0u64..300_000, 1..400)) {
            let mut r = ReplayWindow::new();
            let mut seen = std::collections::BTreeSet::new();
            let mut top = 0u64;
            for pn in pns {
                let fresh = !seen.contains(&pn) && (pn >= top || top - pn <= WINDOW);
                prop_assert_eq!(r.mark(pn), fresh, "pn {}", pn);
                if fresh {
                    seen.insert(pn);
                    top = top.max(pn + 1);
                }
            }
        }
    }
}
