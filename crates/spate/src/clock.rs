//! The only place the driver reads the clock: OS monotonic time as the core's [`Instant`]
//! (nanoseconds since the clock was made).

use spate_proto::Instant;

/// Monotonic time since creation, in the protocol core's units.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Clock {
            start: std::time::Instant::now(),
        }
    }

    /// Now.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64)
    }

    /// How long from now until `t` (zero if past).
    pub fn until(&self, t: Instant) -> std::time::Duration {
        t.saturating_since(self.now())
    }
}
