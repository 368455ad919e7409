//! Path phases: what the path is like from one moment until the next phase begins.

use core::time::Duration;

use spate_proto::Instant;

/// The path's properties during one phase. Delay and loss apply to both directions; the rate
/// and queue are those of the bottleneck, in each direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// When the phase begins (from the start of the run).
    pub at: Duration,
    /// Bottleneck capacity, bits per second of IP packets.
    pub rate_bps: u64,
    /// Base round-trip time, split evenly between the two directions.
    pub rtt: Duration,
    /// Average loss probability per packet, each direction.
    pub loss: f64,
    /// Drop-tail buffer, as queueing time at this phase's rate.
    pub queue: Duration,
    /// Mean loss burst length in packets (Gilbert–Elliott); ≤ 1 means independent loss.
    pub burst_loss_len: f64,
    /// Fraction of packets delayed by `reorder_delay` extra.
    pub reorder: f64,
    /// Extra delay of reordered packets.
    pub reorder_delay: Duration,
    /// Fraction of packets delivered twice.
    pub duplicate: f64,
    /// The path delivers nothing for this long from the phase start.
    pub outage: Duration,
    /// Length of each stall: the path holds what would arrive for this long, then delivers
    /// it at once, in order (0: no stalls). See [`crate::link`].
    pub stall: Duration,
    /// Mean time between the starts of stalls (exponentially distributed).
    pub stall_every: Duration,
}

impl Phase {
    /// A clean phase: rate and RTT, queue of one RTT, nothing else.
    pub fn clean(at: Duration, rate_bps: u64, rtt: Duration) -> Self {
        Phase {
            at,
            rate_bps,
            rtt,
            loss: 0.0,
            queue: rtt,
            burst_loss_len: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
            outage: Duration::ZERO,
            stall: Duration::ZERO,
            stall_every: Duration::ZERO,
        }
    }

    /// True if this phase has stalls.
    pub fn stalls(&self) -> bool {
        self.stall > Duration::ZERO && self.stall_every > Duration::ZERO
    }

    /// True if `t` falls in this phase's outage window.
    pub fn in_outage(&self, t: Instant) -> bool {
        let start = Instant::ZERO + self.at;
        self.outage > Duration::ZERO && t >= start && t < start + self.outage
    }
}

/// Why a schedule is invalid; `phase` is the index in the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    /// Offending phase.
    pub phase: usize,
    /// Offending field.
    pub field: &'static str,
    /// What is wrong.
    pub why: String,
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "phase {}: `{}` {}", self.phase + 1, self.field, self.why)
    }
}

impl std::error::Error for ScheduleError {}

/// A validated list of phases, the first starting at zero, strictly increasing.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    phases: Vec<Phase>,
}

impl Schedule {
    /// Validate and wrap phases.
    pub fn new(phases: Vec<Phase>) -> Result<Self, ScheduleError> {
        let err = |phase, field, why: &str| {
            Err(ScheduleError {
                phase,
                field,
                why: why.to_owned(),
            })
        };
        if phases.is_empty() {
            return err(0, "phase", "at least one phase is required");
        }
        for (i, p) in phases.iter().enumerate() {
            if i == 0 && p.at != Duration::ZERO {
                return err(i, "at_s", "of the first phase must be 0");
            }
            if i > 0 && p.at <= phases[i - 1].at {
                return err(i, "at_s", "must be later than the previous phase's");
            }
            if p.rate_bps == 0 {
                return err(i, "rate_mbps", "must be greater than 0");
            }
            for (field, v) in [
                ("loss", p.loss),
                ("reorder", p.reorder),
                ("duplicate", p.duplicate),
            ] {
                if !(0.0..=1.0).contains(&v) {
                    return err(
                        i,
                        field,
                        "must be between 0 and 1 (a fraction, not a percentage)",
                    );
                }
            }
            if !(p.burst_loss_len.is_finite() && p.burst_loss_len >= 0.0) {
                return err(i, "burst_loss_len", "must be 0 or a mean burst length ≥ 1");
            }
        }
        Ok(Schedule { phases })
    }

    /// The phases.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// Index of the phase in force at `t`.
    pub fn index_at(&self, t: Instant) -> usize {
        let d = Duration::from_nanos(t.as_nanos());
        self.phases.partition_point(|p| p.at <= d).saturating_sub(1)
    }

    /// Start time of phase `i + 1`, if any.
    pub fn next_start(&self, i: usize) -> Option<Instant> {
        self.phases.get(i + 1).map(|p| Instant::ZERO + p.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_validation() {
        let ms = Duration::from_millis;
        let s = Schedule::new(vec![
            Phase::clean(ms(0), 100, ms(10)),
            Phase::clean(ms(500), 200, ms(10)),
        ])
        .unwrap();
        assert_eq!(s.index_at(Instant::from_millis(499)), 0);
        assert_eq!(s.index_at(Instant::from_millis(500)), 1);
        assert_eq!(s.next_start(0), Some(Instant::from_millis(500)));
        let bad = Schedule::new(vec![Phase {
            loss: 6.0,
            ..Phase::clean(ms(0), 1, ms(1))
        }]);
        assert_eq!(bad.unwrap_err().field, "loss");
    }
}
