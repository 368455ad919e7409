//! The `fixed` policy: send at the configured rate, whatever happens.
//!
//! Useful on a dedicated link whose capacity is known, and as a baseline in the lab. It is
//! unfair by design: it does not yield to other traffic and, set above the bottleneck's
//! capacity, it overflows the queue and turns the excess into loss that must be retransmitted.
//! The sender still bounds the data in flight (spec §7.2), so a dead path does not swallow an
//! unbounded amount of data.

use core::time::Duration;

use super::{RateControl, RateSample};
use crate::time::Instant;

/// Constant-rate controller.
#[derive(Debug, Clone)]
pub struct Fixed {
    rate_bps: u64,
}

impl Fixed {
    /// Send at `rate_bps` bits per second.
    pub fn new(rate_bps: u64) -> Self {
        Fixed { rate_bps }
    }
}

impl RateControl for Fixed {
    fn pacing_rate(&self) -> u64 {
        self.rate_bps
    }
    fn on_sent(&mut self, _now: Instant, _wire_bytes: u64, _unused: Duration) {}
    fn on_feedback(&mut self, _now: Instant, _sample: &RateSample) {}
    fn on_path_silent(&mut self, _now: Instant) {}
    fn on_path_restored(&mut self, _now: Instant) {}
    fn mode(&self) -> super::RateMode {
        super::RateMode::Fixed
    }
}
