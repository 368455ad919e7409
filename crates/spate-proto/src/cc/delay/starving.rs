//! Found starving a loss-based competitor: a flow whose α does not fit in the buffer keeps
//! its aim below the buffer instead (the module documentation's "A buffer shorter than α",
//! its last paragraph).
//!
//! ```text
//! alone run   stale probes from a full buffer in a row whose share sample read
//!             ≥ STARVED_SHARE, each from a delivery within STARVED_STEADY of the first's
//!             (samples from a buffer not full are skipped)
//! armed       a probe from a buffer this flow held full finds it alone (the ceiling is set),
//!             the run is ≥ STARVED_RUN, and the share was forgotten for a dip in delivery
//!             within STARVED_WITHIN
//! bound       α ≤ CEILING_FRACTION · q_full · d0     (q_full: where the buffer overflowed,
//!                                                    d0: delivery alone, about capacity)
//! disarmed    an outage, or delivery above STARVED_GROWTH · d0 (the path got faster)
//! ```
//!
//! At 10–20 Mbit/s and 10–40 ms α (75 000 bytes) is 30–60 ms of queue at a fair share, as
//! deep as a one-BDP buffer or deeper. Steering pushes for ever towards a queue the buffer
//! cannot hold, the overflow takes a loss-based competitor's packets as well as this flow's,
//! and the competitor cuts while this flow, which takes overflow for what it is only when the
//! buffer is held full, does not. The cycle in the simulator (`experiments/s59-small-bdp/`):
//! the competitor starves, this flow's probes find it alone (a share of 1.00, and a ceiling
//! under the buffer), it aims low, the competitor regrows, this flow's delivery dips, the
//! share is forgotten, the flow aims at α again and starves the competitor. `fair` took
//! 86–99.5 % from one CUBIC flow on the 10 Mbit/s paths.
//!
//! Flows that share a buffer by the same law never see that cycle for long: held full, each
//! pays for its overflow (`OVERFLOW_CHARGE`) and none leaves, so a probe rarely reads one of
//! them alone, seldom three times in a row (their samples in `scripts/shallow-grid.sh`'s runs
//! wander between 0 and 1.1), and then from whatever share it holds, not from one delivery. A
//! competitor that is gone whenever this flow looks, and back whenever it aims low, is one that
//! backs off from loss. The bound is then a fixed number of bits, as α is — the buffer at the
//! capacity this flow measured alone — not a fraction of this flow's own rate: with a bound
//! proportional to the flow's rate, flows that shared a shallow buffer kept whatever shares they
//! had (Jain below 0.9 in 25 of 64 runs of that grid instead of 2), since α's sameness is what
//! equalises them.
//!
//! Measured (simulator, `experiments/s59-small-bdp/`, 18 paths of 10–50 Mbit/s, 10–40 ms,
//! 1 and 4 BDP, `fair` joining CUBIC 10 s late): `fair`'s share 0.80 → 0.63 on average, and
//! above 70 % on 6 paths instead of 12; 10 Mbit/s, 20 ms, 1 BDP 95 → 37 % (emulator, kernel
//! CUBIC: 97 → 59 and 67 %). Where the cycle never runs three times (10 Mbit/s, 40 ms, 4 BDP: 86 %)
//! nothing changes. Flows that may compete arm too (a probe that lost packets and raised the
//! queue too little counts as from a full buffer for them as well): with `compete = true`
//! `fair` is above 70 % on 4 of those paths instead of 11, and below 30 % on one (29.5 %).
//! Untouched: `low` (its α/16 fits); every scenario under `scenarios/`, `scripts/shallow-grid.sh`,
//! the Spate-only grid, the 256 runs of `scripts/tcp-matrix.sh` and `scripts/tcp-robustness.sh`
//! (byte-identical or the same counts). The buffer is read from the flow's delay floor, which a
//! competitor's standing queue can make stale: the bound is then smaller than the buffer's half,
//! and the flow yields more (10 Mbit/s, 20 ms: the queue read 6.4 ms of a 20 ms buffer).

use core::time::Duration;

use crate::time::Instant;

/// A share sample at least this high counts towards the alone run: a competitor that has
/// left gives this flow all of its bump's delivery (1.00 in every sample of the cycle above).
const STARVED_SHARE: f64 = 0.97;
/// Alone readings in a row before the flow counts as starving a competitor: one or two
/// happen between flows that share by the same law. Armed by one, the bound took 24 of the
/// 64 runs of `scripts/shallow-grid.sh` below Jain 0.9 (2 without it); by three, 3 or 4;
/// by three from the same delivery ([`STARVED_STEADY`]), none moved.
const STARVED_RUN: u32 = 3;
/// The alone readings of a run come from the same delivery, within this fraction: a competitor
/// that has left leaves this flow the whole link each time (10.0 Mbit/s in each of the cycle's
/// samples on a 10 Mbit/s link), where flows that share by the same law and read one another
/// alone do so from whatever share each holds (25.6, 29.2, 34.5 Mbit/s of 50 in one run).
const STARVED_STEADY: f64 = 0.05;
/// The dip that made the flow forget its share must lie at most this far back: the
/// competitor came back within it.
const STARVED_WITHIN: Duration = Duration::from_secs(30);
/// Delivery above this multiple of the capacity the bound was measured at means a faster
/// path: the bound, in bits of that path's buffer, no longer describes it. (A stall's burst
/// can read as one too; the flow then arms again after three more readings.)
const STARVED_GROWTH: f64 = 1.25;

/// The bound on α a flow keeps once it has found itself starving a loss-based competitor.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Starving {
    /// Share samples from a full buffer in a row that read the flow alone
    /// (≥ [`STARVED_SHARE`]) from the same delivery, and that delivery (the first's, bits/s;
    /// the others within [`STARVED_STEADY`] of it).
    run: (u32, f64),
    /// When the share was last forgotten while a ceiling was known.
    forgot_at: Option<Instant>,
    /// Bits the buffer held where it overflowed, at the capacity measured alone, and that
    /// capacity (bits/s); `Some` once armed.
    bound: Option<(f64, f64)>,
}

impl Starving {
    /// A stale probe's share sample `x`, taken from delivery `d0` bits/s, from a `full`
    /// buffer or not. Only samples from a full buffer count: in between, under its ceiling,
    /// the flow reads the competitor that came back (0.47–0.85 at 10 Mbit/s, 40 ms).
    pub(super) fn on_sample(&mut self, x: f64, d0: f64, full: bool) {
        if !full {
            return;
        }
        let (n, first) = self.run;
        self.run = if x < STARVED_SHARE {
            (0, 0.0)
        } else if n > 0 && (d0 - first).abs() <= STARVED_STEADY * first {
            (n + 1, first)
        } else {
            (1, d0)
        };
    }

    /// The share (and with it the ceiling, if `had_ceiling`) was forgotten for a dip.
    pub(super) fn on_forget(&mut self, now: Instant, had_ceiling: bool) {
        if had_ceiling {
            self.forgot_at = Some(now);
        }
    }

    /// A probe from a buffer this flow held full found it alone: the buffer overflowed at
    /// `q_full` seconds of queue while `capacity` bits/s were delivered to this flow.
    pub(super) fn on_alone_in_full_buffer(&mut self, now: Instant, q_full: f64, capacity: f64) {
        let armed = self.run.0 >= STARVED_RUN
            && self
                .forgot_at
                .is_some_and(|t| now.saturating_since(t) <= STARVED_WITHIN);
        if armed {
            self.bound = Some((super::CEILING_FRACTION * q_full * capacity, capacity));
        }
    }

    /// Delivery `d` bits/s: a path faster than the one measured disarms.
    pub(super) fn on_delivery(&mut self, d: f64) {
        if self.bound.is_some_and(|(_, c)| d > STARVED_GROWTH * c) {
            *self = Starving::default();
        }
    }

    /// The path may have changed (an outage): forget everything.
    pub(super) fn clear(&mut self) {
        *self = Starving::default();
    }

    /// α `alpha` bits, bounded once armed.
    pub(super) fn bound(&self, alpha: f64) -> f64 {
        self.bound.map_or(alpha, |(bits, _)| alpha.min(bits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn three_alone_readings_around_a_forgotten_share_arm_the_bound() {
        let t0 = Instant::ZERO;
        let mut s = Starving::default();
        // Alone in a full buffer without a dip before: nothing is learnt.
        s.on_sample(1.0, 10e6, true);
        s.on_alone_in_full_buffer(t0 + S, 0.02, 10e6);
        assert_eq!(s.bound(600e3), 600e3);
        // The share is forgotten (the competitor came back), then two more alone readings.
        s.on_forget(t0 + 2 * S, true);
        s.on_sample(1.0, 10e6, true);
        s.on_alone_in_full_buffer(t0 + 3 * S, 0.02, 10e6);
        assert_eq!(s.bound(600e3), 600e3, "two in a row are not enough");
        // A reading under the ceiling, not from a full buffer, neither counts nor breaks the run.
        s.on_sample(0.6, 7e6, false);
        s.on_sample(1.0, 9.8e6, true);
        s.on_alone_in_full_buffer(t0 + 4 * S, 0.02, 9.8e6);
        // Half of a 20 ms buffer at 9.8 Mbit/s: 98 kbit.
        assert!((s.bound(600e3) - 98e3).abs() < 1.0, "{}", s.bound(600e3));
        assert_eq!(s.bound(50e3), 50e3, "never above α");
        // A faster path disarms; so does an outage.
        s.on_delivery(12e6);
        assert!(s.bound(600e3) < 600e3);
        s.on_delivery(12.5e6);
        assert_eq!(s.bound(600e3), 600e3);
        for _ in 0..3 {
            s.on_sample(1.0, 10e6, true);
        }
        s.on_forget(t0 + 5 * S, true);
        s.on_alone_in_full_buffer(t0 + 6 * S, 0.02, 10e6);
        assert!(s.bound(600e3) < 600e3);
        s.clear();
        assert_eq!(s.bound(600e3), 600e3);
    }

    #[test]
    fn readings_that_wander_or_a_dip_long_ago_do_not_arm() {
        let t0 = Instant::ZERO;
        let mut s = Starving::default();
        s.on_forget(t0, true);
        // Flows sharing by the same law: samples wander, and so does the delivery they come
        // from (one run of 50 Mbit/s: 25.6, 29.2, 34.5).
        for (x, d0) in [
            (1.0, 10e6),
            (0.95, 10e6),
            (1.1, 10e6),
            (0.4, 10e6),
            (1.0, 10e6),
        ] {
            s.on_sample(x, d0, true);
            s.on_alone_in_full_buffer(t0 + S, 0.02, d0);
        }
        for d0 in [25.6e6, 29.2e6, 34.5e6] {
            s.on_sample(1.0, d0, true);
            s.on_alone_in_full_buffer(t0 + S, 0.01, d0);
        }
        assert_eq!(s.bound(600e3), 600e3);
        // Three in a row from the same delivery, but the dip was 40 s before.
        for _ in 0..3 {
            s.on_sample(1.0, 10e6, true);
        }
        s.on_alone_in_full_buffer(t0 + 40 * S, 0.02, 10e6);
        assert_eq!(s.bound(600e3), 600e3);
        // A dip without a ceiling known says nothing about the buffer.
        let mut s = Starving::default();
        s.on_forget(t0, false);
        for _ in 0..3 {
            s.on_sample(1.0, 10e6, true);
        }
        s.on_alone_in_full_buffer(t0 + S, 0.02, 10e6);
        assert_eq!(s.bound(600e3), 600e3);
    }
}
