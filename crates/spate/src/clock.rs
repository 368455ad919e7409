//! The only place the driver reads the clock: OS monotonic time as the core's [`Instant`]
//! (nanoseconds since the clock was made).

use std::sync::OnceLock;

use spate_proto::Instant;

static PROCESS_START: OnceLock<std::time::Instant> = OnceLock::new();

/// When this process started, as far as the driver knows: the first call (the `spate`
/// command makes it first thing in `main`; a library user's first send otherwise). What
/// "first packet within 100 ms of start" is measured from.
pub fn process_start() -> std::time::Instant {
    *PROCESS_START.get_or_init(std::time::Instant::now)
}

/// User + system CPU seconds from `getrusage(who)`: `libc::RUSAGE_SELF` (the process) or
/// `libc::RUSAGE_THREAD` (the calling thread); 0 if the call fails. For reports (a thread's
/// share of a transfer's CPU), never for protocol decisions.
pub fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return 0.0;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Monotonic time since creation, in the protocol core's units.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: std::time::Instant,
    /// UTC at `start`, nanoseconds since the Unix epoch (0 if the system clock reads before it).
    start_utc_ns: u64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        let start = std::time::Instant::now();
        let utc = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Clock {
            start,
            start_utc_ns: utc.as_nanos().min(u128::from(u64::MAX)) as u64,
        }
    }

    /// UTC, in nanoseconds since the Unix epoch, of this clock's `Instant::ZERO`: where the
    /// core's drain grid lies (`RateConfig::epoch_utc_ns`), so that senders on hosts whose
    /// clocks agree drain together.
    pub fn epoch_utc_ns(&self) -> u64 {
        self.start_utc_ns
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_is_the_system_clock_at_the_start() {
        let c = Clock::new();
        let utc = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let back = utc - c.now().as_nanos();
        // The two clocks were read a moment apart; a second covers a slow machine.
        assert!(back.abs_diff(c.epoch_utc_ns()) < 1_000_000_000);
        assert!(c.epoch_utc_ns() > 1_700_000_000 * 1_000_000_000);
    }
}
