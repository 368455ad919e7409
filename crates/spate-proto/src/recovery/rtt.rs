//! Round-trip time estimation (`docs/spec.md` §6.1).
//!
//! In a nutshell (RFC 9002 §5, which independent implementers know):
//!
//! ```text
//! adjusted = latest − ack_delay   if that is not below min_rtt, else latest
//! srtt     = 7/8 · srtt + 1/8 · adjusted
//! rttvar   = 3/4 · rttvar + 1/4 · |srtt − adjusted|
//! ```
//!
//! `min_rtt` is a windowed minimum: a sample older than [`MIN_RTT_WINDOW`] is replaced by the
//! next sample, so after a handover to a longer path the minimum follows within 10 s rather than
//! staying stale for the rest of the session.

use core::time::Duration;

use crate::time::Instant;

/// How long a minimum-RTT sample stays valid (10 s: long enough to see through the queueing a
/// transfer itself causes, short enough to follow a path change, as in BBR's min-RTT filter).
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);

/// RTT state of one session.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    latest: Duration,
    smoothed: Option<Duration>,
    var: Duration,
    min: Duration,
    min_at: Instant,
    initial: Duration,
}

impl RttEstimator {
    /// Before any sample, [`smoothed`](Self::smoothed) is `initial`.
    pub fn new(initial: Duration) -> Self {
        RttEstimator {
            latest: initial,
            smoothed: None,
            var: initial / 2,
            min: Duration::MAX,
            min_at: Instant::ZERO,
            initial,
        }
    }

    /// Add a sample: `latest` from send to feedback, `ack_delay` as reported by the receiver.
    pub fn update(&mut self, now: Instant, latest: Duration, ack_delay: Duration) {
        self.latest = latest;
        if latest <= self.min || now.saturating_since(self.min_at) > MIN_RTT_WINDOW {
            self.min = latest;
            self.min_at = now;
        }
        let adjusted = match latest.checked_sub(ack_delay) {
            Some(a) if a >= self.min => a,
            _ => latest,
        };
        match self.smoothed {
            None => {
                self.smoothed = Some(adjusted);
                self.var = adjusted / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(adjusted);
                self.var = (self.var * 3 + diff) / 4;
                self.smoothed = Some((s * 7 + adjusted) / 8);
            }
        }
    }

    /// Smoothed RTT (the initial guess before any sample).
    pub fn smoothed(&self) -> Duration {
        self.smoothed.unwrap_or(self.initial)
    }

    /// True once a sample arrived.
    pub fn has_sample(&self) -> bool {
        self.smoothed.is_some()
    }

    /// Most recent sample.
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// RTT variation.
    pub fn var(&self) -> Duration {
        self.var
    }

    /// Windowed minimum (the smoothed value before any sample).
    pub fn min(&self) -> Duration {
        if self.min == Duration::MAX {
            self.smoothed()
        } else {
            self.min
        }
    }

    /// Probe timeout: how long to wait for feedback before probing (RFC 9002 §6.2.1), where
    /// `max_ack_delay` is the receiver's feedback interval.
    pub fn pto(&self, max_ack_delay: Duration) -> Duration {
        self.smoothed() + (self.var * 4).max(Duration::from_millis(1)) + max_ack_delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_and_subtracts_ack_delay() {
        let mut r = RttEstimator::new(Duration::from_millis(500));
        assert_eq!(r.smoothed(), Duration::from_millis(500));
        r.update(Instant::ZERO, Duration::from_millis(100), Duration::ZERO);
        for i in 1..100 {
            r.update(
                Instant::from_millis(i * 10),
                Duration::from_millis(110),
                Duration::from_millis(10),
            );
        }
        assert_eq!(r.smoothed(), Duration::from_millis(100));
        assert_eq!(r.min(), Duration::from_millis(100));
        // Ack delay never takes a sample below the minimum (RFC 9002 §5.3).
        r.update(
            Instant::from_millis(1000),
            Duration::from_millis(104),
            Duration::from_millis(50),
        );
        assert!(r.smoothed() > Duration::from_millis(100));
    }

    #[test]
    fn stale_minimum_is_replaced_after_the_window() {
        let mut r = RttEstimator::new(Duration::from_millis(100));
        r.update(Instant::ZERO, Duration::from_millis(20), Duration::ZERO);
        r.update(
            Instant::from_millis(5_000),
            Duration::from_millis(92),
            Duration::ZERO,
        );
        assert_eq!(r.min(), Duration::from_millis(20));
        r.update(
            Instant::from_millis(10_001),
            Duration::from_millis(92),
            Duration::ZERO,
        );
        assert_eq!(r.min(), Duration::from_millis(92));
    }
}
