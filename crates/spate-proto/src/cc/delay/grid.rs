//! The drain grid: flows that read one clock drain together, whenever they started.
//!
//! # In a nutshell
//!
//! ```text
//! grid   the instants k · 8 s of UTC (Unix time); a session places them on its own clock
//!        from `RateConfig::epoch_utc_ns`, the UTC time of its Instant::ZERO
//! due    the first report at or after a grid instant, if the flow's delay floor is at least
//!        1 s old; a younger floor lets that instant pass (it was just taken)
//! ```
//!
//! A flow's delay floor is the one-way delay it saw with an empty queue. A flow that joins
//! while others hold their α queued never sees that queue empty: its floor holds the others'
//! queue, it reads its own queue as shorter than it is and takes more than its share (two
//! fair flows joining 10 s apart at 1 Gbit/s, 120 ms: Jain 0.82). The drains are what
//! repair it. A drain (half rate for about twice the queueing delay it reads, `start.rs`)
//! removes this flow's part of the queue, and the queue empties only if every flow drains at
//! once. Before the grid, a flow drained when its floor was 8 s old ([`super::DRAIN_AFTER`]),
//! which lines the drains up only for flows whose floors were taken together; flows that
//! joined seconds apart drained one at a time, and the latecomer kept its stale floor.
//!
//! On the grid every flow drains at the same instants; the first grid drain after a flow
//! joins empties the queue, and from then on every floor is the path's. The period is
//! `DRAIN_AFTER`: a floor refreshed by one grid drain is 8 s old at the next, and never
//! older than 9 s (a floor less than [`SLOT_MIN_AGE`] old at an instant waits for the next,
//! which comes before the floor's 10 s window expires). Drains that do not see the floor are
//! still repeated at once, by floor age, as before.
//!
//! Flows of different hosts line up as well as their clocks do: NTP keeps hosts within a few
//! milliseconds, less than the slow half of a drain (one RTT, up to 2 × the queue). A host
//! whose clock is off drains at its own instants, as every flow did before the grid. The
//! simulator's flows read one virtual clock (`epoch_utc_ns` 0).
//!
//! A flow on the grid that has not found itself alone drains for at least 2.5 times the queue
//! it reads instead of twice the queue plus 2 ms ([`super::DRAIN_MARGIN_QUEUE`]): flows start
//! their drains at their first report after the instant, up to a report gap apart, and a drain
//! of exactly twice the queue empties it only if all start at once. A flow's first drain is
//! stretched to cover the others' queue (`FIRST_DRAIN_ALPHAS` in `mod.rs`).
//!
//! Measured (simulator, `fair`, 2 or 4 flows joining 1, 3 or 10 s apart at 100 Mbit/s and
//! 1 Gbit/s, RTT 20, 50 and 120 ms, 40 s after the last joins; 36 runs, the grid at four
//! placements on the simulated clock): mean queue p50 13.67 → 9.58–10.67 ms, p95 18.86 →
//! 14.36–15.98 ms, Jain 0.9765 → 0.9736–0.9786, utilization 0.9585 → 0.9581–0.9583. At
//! 100 Mbit/s with every start shifted eight ways (144 runs): queue p50 24.0 → 18.0 ms, Jain
//! 0.9960 → 0.9947, runs below 0.95 0 → 2 (`docs/design.md`, "Session 54"). Where the
//! instants fall among the joins decides single runs, so tests judge the grid over several
//! placements (`utc_start_s` in a scenario).
//!
//! A flow that may compete (`--compete`) drains on the grid in the delay mode too, even when
//! not steady, and the grid is where it confirms a competitor (`drained.rs`, "Suspect, then
//! confirm"): at an instant every Spate flow drains and their queue empties, a competitor's
//! does not. Its competitive mode drains by its own clock (`COMPETE_DRAIN_EVERY`).

use core::time::Duration;

use crate::time::Instant;

/// Period of the grid: that of the drains themselves ([`super::DRAIN_AFTER`]).
pub(super) const DRAIN_SLOT: Duration = super::DRAIN_AFTER;

/// A grid instant passes a flow whose floor is younger than this: a floor refreshed less
/// than a second ago was taken at an empty queue (a grid drain's, or start-up's).
pub(super) const SLOT_MIN_AGE: Duration = Duration::from_secs(1);

/// Where the grid lies on a session's clock, and the next instant due.
#[derive(Debug, Clone)]
pub(super) struct DrainGrid {
    /// The session's `Instant::ZERO` past the last grid instant before it, nanoseconds.
    offset: u64,
    /// The next grid instant on the session's clock.
    next: Instant,
    /// No drain has started yet.
    first: bool,
}

impl DrainGrid {
    /// The grid of a session whose `Instant::ZERO` is `epoch_utc_ns` nanoseconds of UTC.
    pub(super) fn new(epoch_utc_ns: u64) -> Self {
        DrainGrid {
            offset: epoch_utc_ns % period(),
            next: Instant::ZERO,
            first: true,
        }
    }

    /// Whether a drain falls due at `now` for a delay floor `floor_age` old. It stays due
    /// until [`DrainGrid::started`]: a flow that cannot drain at once (not steady) drains at
    /// its first chance.
    pub(super) fn due(&mut self, now: Instant, floor_age: Duration) -> bool {
        if now < self.next {
            return false;
        }
        if floor_age >= SLOT_MIN_AGE {
            return true;
        }
        self.next = self.after(now);
        false
    }

    /// A drain started at `now`: the next is due at the next grid instant.
    pub(super) fn started(&mut self, now: Instant) {
        self.next = self.after(now);
        self.first = false;
    }

    /// How long after the instant due `now` is (zero before it).
    pub(super) fn late(&self, now: Instant) -> Duration {
        now.saturating_since(self.next)
    }

    /// No drain has started yet.
    pub(super) fn first(&self) -> bool {
        self.first
    }

    /// The first grid instant after `now`, on the session's clock.
    fn after(&self, now: Instant) -> Instant {
        let p = period();
        let shared = now.as_nanos().saturating_add(self.offset);
        let next = (shared / p).saturating_add(1).saturating_mul(p);
        Instant::from_nanos(next.saturating_sub(self.offset))
    }
}

/// [`DRAIN_SLOT`] in nanoseconds.
fn period() -> u64 {
    DRAIN_SLOT.as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn at(secs: f64) -> Instant {
        Instant::from_nanos((secs * 1e9) as u64)
    }

    #[test]
    fn instants_fall_on_multiples_of_the_period_of_the_shared_clock() {
        // Instant::ZERO is UTC 1 000 003 s: the grid's instants are at 5, 13, 21 s.
        let mut g = DrainGrid::new(1_000_003 * S);
        assert!(!g.due(at(0.5), Duration::from_secs(0)));
        assert_eq!(g.next, at(5.0));
        assert!(!g.due(at(4.999), Duration::from_secs(4)));
        assert!(g.due(at(5.0), Duration::from_secs(4)));
        // Still due until a drain starts.
        assert!(g.due(at(5.3), Duration::from_secs(4)));
        g.started(at(5.3));
        assert_eq!(g.next, at(13.0));
        assert!(!g.due(at(12.9), Duration::from_secs(9)));
        assert!(g.due(at(13.0), Duration::from_secs(8)));
    }

    #[test]
    fn two_sessions_of_different_starts_share_the_instants() {
        // One clock started at UTC 100.25 s, the other at 103.5 s: both drain at UTC 104 s.
        let mut a = DrainGrid::new(100 * S + S / 4);
        let mut b = DrainGrid::new(103 * S + S / 2);
        a.started(at(0.1));
        b.started(at(0.1));
        assert_eq!(a.next, at(3.75));
        assert_eq!(b.next, at(0.5));
        assert_eq!(a.next.as_nanos() + 100 * S + S / 4, 104 * S);
        assert_eq!(b.next.as_nanos() + 103 * S + S / 2, 104 * S);
    }

    #[test]
    fn a_floor_just_taken_lets_the_instant_pass() {
        let mut g = DrainGrid::new(0);
        g.started(at(0.0));
        assert!(!g.due(at(8.01), Duration::from_millis(999)));
        // The next instant, 8 s on: due however old the floor.
        assert!(!g.due(at(15.9), Duration::from_secs(8)));
        assert!(g.due(at(16.0), Duration::from_secs(8)));
    }

    #[test]
    fn the_far_end_of_the_clock_saturates() {
        let mut g = DrainGrid::new(u64::MAX);
        g.started(Instant::MAX);
        assert!(g.next <= Instant::MAX);
        assert!(!g.due(Instant::ZERO, Duration::ZERO));
    }
}
