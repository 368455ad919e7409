//! The probes a delay-based flow runs from a settled queue (`mod.rs`: "Stale floors", "Drains
//! keep floors true", "Alone, a shorter queue"), and the drain of what growth overshot
//! (`overshoot.rs`): what each is for, its two rate factors, and what the controller records
//! while one is under way. `Delay::probe_step`
//! starts them, holds the rate while they run and reads their verdicts.

use core::time::Duration;

use super::drained::DrainReadings;
use super::{DRAIN_GAIN, PROBE_GAIN};
use crate::time::Instant;

/// What a probe is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProbeKind {
    /// Is the delay floor stale? +gain, then −gain.
    Stale,
    /// Let the queue empty so every flow's delay floor sees the path's true minimum: half
    /// rate for twice the queueing delay (removes this flow's queued data), then 1.5× for as
    /// long (puts it back).
    Drain,
    /// Growth overshot (`overshoot.rs`): half rate until what is in flight beyond the path's
    /// pipe has left, then the rate measured; no refill.
    Overshoot,
}

impl ProbeKind {
    /// Rate factors for the first and second half RTT.
    pub(super) fn gains(self) -> (f64, f64) {
        match self {
            ProbeKind::Stale => (1.0 + PROBE_GAIN, 1.0 - PROBE_GAIN),
            ProbeKind::Drain => (DRAIN_GAIN, 2.0 - DRAIN_GAIN),
            ProbeKind::Overshoot => (DRAIN_GAIN, 1.0),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Probe {
    /// Not probing; next probe not before this time.
    Idle { next: Instant },
    /// Sending at `gains.0` × the rate from `start` for `half` an RTT, then at `gains.1` for as
    /// long, then measuring; `gain` is the current rate factor; `d0`: delivery before; `q`:
    /// the queue before and as reported about the probe's packets.
    Up {
        kind: ProbeKind,
        start: Instant,
        half: Duration,
        gains: (f64, f64),
        gain: f64,
        q: DrainReadings,
        d0: f64,
        q_max: f64,
        d_max: f64,
        /// A drain whose outcome decides the mode.
        judged: bool,
        /// A judged drain at a grid instant: it confirms a suspected competitor or drops the
        /// suspicion (`drained.rs`).
        confirms: bool,
        /// This flow reported loss about the probe's packets.
        lost: bool,
        /// The RTT when the probe started. Reports about the first half arrive by `rtt0 +
        /// half`; the RTT read later includes the rise the second half causes, and windows
        /// timed by it stretch into that rise.
        rtt0: Duration,
        /// Started while the queue stood still with `PINNED_LOSS` lost (`Delay::pinned`,
        /// however briefly: steering has held it settled for 2 RTTs), or in a buffer still
        /// counted as held full (`Delay::held_full`): the queue it was found full at, seconds.
        pinned: Option<f64>,
    },
}
