//! A flow's share of the bottleneck, as its stale probes measure it, and how alone that makes
//! the flow (the module documentation's "Alone, a shorter queue").
//!
//! ```text
//! sample x       r/C read by one stale probe, clamped to [0, SHARE_MAX]
//! smoothed s     s ← s + SHARE_GAIN·(x − s), the first sample taken as it is
//! outlier        |x − s| > SHARE_OUTLIER: held; the next sample counts both if it is as far
//!                on the same side, and drops the held one otherwise
//! alone weight   0 below ALONE_SHARE.0, 1 above ALONE_SHARE.1, linear between
//! ```
//!
//! When the share is forgotten (a lasting dip in delivery, an outage) and what lowers α with
//! it are the controller's (`mod.rs`); this file only keeps the estimate.

/// Measured share below which the flow aims at α, and above which at `ALONE_QUEUE`
/// (linear between). One flow alone measures 0.83–1.03 (the queue it reads before the bump
/// is the lowest of an RTT, so noise lowers it); four flows of a quarter each 0.13–0.66.
pub(super) const ALONE_SHARE: (f64, f64) = (0.7, 0.85);
/// A share sample's weight in the smoothed share.
const SHARE_GAIN: f64 = 0.5;
/// A share sample further than this from the smoothed share waits for the next sample to
/// agree ([`Share::update`]). Lone flows read 0.8–1.0, two equal flows 0.5 each: one stray
/// sample cannot move a flow between alone and sharing, two in a row can.
const SHARE_OUTLIER: f64 = 0.35;
/// Samples are clamped to this: a rise the bump cannot explain alone is someone else's.
pub(super) const SHARE_MAX: f64 = 1.5;

/// A flow's share of the bottleneck, as its stale probes measured it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Share {
    /// Samples of `r/C`, smoothed.
    pub(super) smoothed: f64,
    /// Delivery rate, bits/s, before the latest probe that took a sample (counted or held).
    pub(super) delivery: f64,
    /// A sample more than [`SHARE_OUTLIER`] from `smoothed`, waiting for the next to agree.
    held: Option<f64>,
}

impl Share {
    /// An estimate of `smoothed`, with no sample held.
    pub(super) fn new(smoothed: f64, delivery: f64) -> Share {
        Share {
            smoothed,
            delivery,
            held: None,
        }
    }

    /// Folds in sample `x`, taken by a probe that started from delivery `delivery` (what later
    /// dips are measured against, whether or not the sample counts). A sample far from the
    /// estimate counts only once the next one is far on the same side: one probe that met a
    /// stall's burst read a lone flow's share as 0 and sent it back to α for most of a run
    /// (docs/design.md, "Session 53").
    pub(super) fn update(self, x: f64, delivery: f64) -> Share {
        let step = |s: f64, x: f64| s + SHARE_GAIN * (x - s);
        let off = x - self.smoothed;
        if off.abs() <= SHARE_OUTLIER {
            return Share::new(step(self.smoothed, x), delivery);
        }
        match self.held {
            Some(h) if (h - self.smoothed).signum() == off.signum() => {
                Share::new(step(step(self.smoothed, h), x), delivery)
            }
            _ => Share {
                held: Some(x),
                delivery,
                ..self
            },
        }
    }

    /// Alone by the smoothed share, at least at the bottom of [`ALONE_SHARE`]'s ramp.
    pub(super) fn alone(&self) -> bool {
        self.smoothed >= ALONE_SHARE.0
    }
}

/// How far a flow with smoothed share `share` counts as alone: 0 (aims at α) to 1.
pub(super) fn alone_weight(share: Option<f64>) -> f64 {
    let (lo, hi) = ALONE_SHARE;
    share.map_or(0.0, |s| ((s - lo) / (hi - lo)).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stray_share_sample_moves_nothing_and_two_in_a_row_do() {
        let alone = Share::new(0.9, 100e6);
        // A stall's burst reads a lone flow's share as 0: held, the estimate unchanged; dips
        // are measured from the latest probe's delivery.
        let held = alone.update(0.0, 90e6);
        assert_eq!(held.smoothed, 0.9);
        assert_eq!(held.delivery, 90e6);
        // The next probe reads it alone again: the stray sample is dropped.
        let back = held.update(0.88, 100e6);
        assert!((back.smoothed - 0.89).abs() < 1e-9);
        assert!(back.held.is_none());
        // A stray sample on the other side confirms nothing.
        let other = held.update(1.5, 100e6);
        assert_eq!(other.smoothed, 0.9);
        assert_eq!(other.held, Some(1.5));
        // Two in a row: others came, and both count.
        let shared = held.update(0.1, 50e6);
        assert!(shared.smoothed < ALONE_SHARE.0, "{}", shared.smoothed);
        assert_eq!(shared.delivery, 50e6);
        // Small moves count at once.
        assert!((alone.update(0.7, 80e6).smoothed - 0.8).abs() < 1e-9);
    }
}
