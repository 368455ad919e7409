//! The adaptive reordering window (`docs/spec.md` §6.3).
//!
//! In a nutshell: a packet is declared lost when a packet sent after it has been acknowledged
//! and `rtt + window` has passed since it was sent. The window is measured in time, not in
//! packets, because the reordering *delay* of a path does not grow with the sending rate while
//! the reordering *extent* in packets does (Aalto 2017, see `SEEDS.md` §4).
//!
//! ```text
//! window = clamp( max(min_rtt / 4, 2 · observed), 1 ms, 1 s )
//! observed = largest reordering delay seen recently, where a sample is
//!   - the send-time distance by which a packet was overtaken, when it is acknowledged after a
//!     packet sent later was acknowledged in an earlier report, or
//!   - how late a packet arrived after it had been declared lost (a spurious retransmission),
//!     which also doubles the current window at once.
//! observed halves every 10 s without a larger sample.
//! ```
//!
//! Constants: `min_rtt / 4` is RACK's starting window (RFC 8985 §6.2); the factor 2 leaves room
//! for the feedback interval and jitter on top of the measured delay; 1 ms keeps timer churn
//! bounded on sub-millisecond paths; 1 s caps how long a real loss can go unrepaired; 10 s decay
//! lets the window shrink back after a transient reordering burst. Waiting longer costs a bulk
//! transfer little, since data is written at its offset and nothing waits for order, so the
//! window errs on the long side.

use core::time::Duration;

use crate::time::Instant;

/// Smallest window.
pub const MIN_WINDOW: Duration = Duration::from_millis(1);
/// Largest window.
pub const MAX_WINDOW: Duration = Duration::from_secs(1);
/// How often the observed reordering delay halves without new, larger samples.
pub const DECAY_PERIOD: Duration = Duration::from_secs(10);

/// Adaptive reordering window state.
#[derive(Debug, Clone, Default)]
pub struct ReorderWindow {
    observed: Duration,
    decay_at: Instant,
    boost: Duration,
}

impl ReorderWindow {
    /// A fresh window with no reordering observed.
    pub fn new() -> Self {
        Self::default()
    }

    fn decay(&mut self, now: Instant) {
        while now >= self.decay_at + DECAY_PERIOD && self.observed > Duration::ZERO {
            self.observed /= 2;
            self.boost /= 2;
            self.decay_at += DECAY_PERIOD;
        }
        if now >= self.decay_at + DECAY_PERIOD {
            self.decay_at = now;
        }
    }

    /// A packet was overtaken by one sent `delay` after it.
    pub fn on_reorder(&mut self, now: Instant, delay: Duration) {
        self.decay(now);
        if delay > self.observed {
            self.observed = delay;
            self.decay_at = now;
        }
    }

    /// A packet declared lost arrived after all; it arrived `late` after it was expected.
    pub fn on_spurious(&mut self, now: Instant, late: Duration, current: Duration) {
        self.on_reorder(now, late);
        self.boost = self.boost.max(current * 2);
        self.decay_at = now;
    }

    /// The window to use now.
    pub fn window(&mut self, now: Instant, min_rtt: Duration) -> Duration {
        self.decay(now);
        (min_rtt / 4)
            .max(self.observed * 2)
            .max(self.boost)
            .clamp(MIN_WINDOW, MAX_WINDOW)
    }

    /// Largest reordering delay currently remembered.
    pub fn observed(&self) -> Duration {
        self.observed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_a_quarter_rtt_and_grows_with_reordering() {
        let mut w = ReorderWindow::new();
        let t = Instant::from_millis(100);
        assert_eq!(
            w.window(t, Duration::from_millis(40)),
            Duration::from_millis(10)
        );
        w.on_reorder(t, Duration::from_millis(12));
        assert_eq!(
            w.window(t, Duration::from_millis(40)),
            Duration::from_millis(24)
        );
        // Decays: after 10 s the observed delay halves.
        let later = t + Duration::from_secs(10);
        assert_eq!(
            w.window(later, Duration::from_millis(40)),
            Duration::from_millis(12)
        );
    }

    #[test]
    fn spurious_loss_doubles_window() {
        let mut w = ReorderWindow::new();
        let t = Instant::from_millis(1);
        let cur = w.window(t, Duration::from_millis(8));
        w.on_spurious(t, Duration::from_micros(100), cur);
        assert_eq!(w.window(t, Duration::from_millis(8)), cur * 2);
    }

    #[test]
    fn bounded() {
        let mut w = ReorderWindow::new();
        assert_eq!(w.window(Instant::ZERO, Duration::ZERO), MIN_WINDOW);
        w.on_reorder(Instant::ZERO, Duration::from_secs(60));
        assert_eq!(w.window(Instant::ZERO, Duration::ZERO), MAX_WINDOW);
    }
}
