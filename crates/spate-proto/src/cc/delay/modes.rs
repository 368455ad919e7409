//! The two modes of a flow that may compete (`mod.rs`, "Modes"): the state that decides
//! between them, and the competitive mode's step.
//!
//! The delay mode is the module's law (`mod.rs`); the competitive mode runs a paced CUBIC
//! window or BBR's own law (`compete.rs`, `follow.rs`). A flow enters the competitive mode
//! when a judged drain leaves the queue standing and a drain at the next grid instant
//! confirms it (or at once, in the cases `drained.rs` lists), and leaves it when two judged
//! drains in a row empty it (`drained.rs`); `start.rs` decides which drains are judged. This
//! file keeps the constants of those decisions, the deepest queues they compare with, and the
//! watch for BBR's ProbeRTT (`dips.rs`) that makes the mode follow BBR's law.

use core::time::Duration;

use super::compete::Compete;
use super::filters::WindowedMax;
use super::{Delay, Probe, RateSample};
use crate::time::Instant;

/// Judged drains in a row that must empty the queue before a competing flow returns to the
/// delay mode: one may just meet the trough after the competitor's cut.
pub(super) const DRAINS_TO_LEAVE: u32 = 2;
/// Window of the deepest recent queue, which a flow entering competitive mode takes for the
/// buffer's size until it sees a deeper one: a CUBIC competitor overflows it every epoch
/// (8–10 s at 100 Mbit/s, 50 ms).
pub(super) const QUEUE_PEAK_WINDOW: Duration = Duration::from_secs(10);
/// BBR recognised this recently (three of its ProbeRTT periods) is still there: a flow that
/// enters competitive mode follows its law from the start.
pub(super) const BBR_SEEN_FOR: Duration = Duration::from_secs(36);
/// Drains are judged at most this often: a drain that does not see the delay floor is
/// repeated at once, and the repeats start from the little queue the first one left.
pub(super) const JUDGE_EVERY: Duration = Duration::from_secs(4);
/// A judged drain holds the queue empty this long, seconds: two report gaps, so that a report
/// sees it empty (with 2 ms, one report in five did, and 1 % random loss with a crippled
/// competitor looked like a standing queue).
pub(super) const JUDGED_MARGIN: f64 = 0.020;
/// A drain is judged only when it starts from a queue of at least this, seconds: drains that
/// follow each other (until the delay floor is seen again) start from the little the first
/// one left.
pub(super) const JUDGED_FROM: f64 = 0.002;
/// Window of the deepest queue a drain's bottom is compared with (`drained.rs`), longer than
/// the floor's window: the first judged drain after a handover comes when the floor is
/// [`DRAIN_AFTER`](super::DRAIN_AFTER) old, up to 13 s after the step (in the emulator,
/// 12.7 s), and the step's queue must still be in view then.
pub(super) const BOTTOM_PEAK_WINDOW: Duration = Duration::from_secs(30);
/// Competitive mode drains this often to see whether the competitor is still there.
pub(super) const COMPETE_DRAIN_EVERY: Duration = Duration::from_secs(8);
/// A drain at a grid instant is judged only when it starts within this of the instant
/// (`grid.rs`): flows start their grid drains at their first report after it, a report gap
/// (10 ms) apart at most, so a drain this late is not one the other Spate flows share, and
/// their queue would stand through it.
pub(super) const GRID_JUDGED_LATE: Duration = Duration::from_millis(25);
/// A standing drain enters the competitive mode at once, without waiting for a grid drain to
/// confirm it, when the queue left at its bottom holds this many of the flow's α at the
/// path's capacity. Spate flows each hold α, and a drain that missed theirs leaves about
/// that much per flow; a buffer-filling competitor holds up to its buffer (1×BDP at
/// 100 Mbit/s, 50 ms: 8 α). With 4, `fair` and `high` kept within their bounds next to TCP in
/// 172 of 192 runs of `tcp-robustness.sh` (8 α: 167; without this: 162), for one more run of
/// 36 with a false entry in the Spate-only grid (3 against 2; `experiments/s68-confirm`).
pub(super) const RESIDUE_ENTERS: f64 = 4.0;
/// A delay-mode drain's reading of the path's capacity is remembered this long, seconds: a
/// flow whose entering drain read none enters from it (the queue it removed was too small to
/// measure, `JUDGED_FROM / 4`).
pub(super) const READING_KEPT: Duration = Duration::from_secs(30);

/// Window of the peak delivery rate, one of the two capacity estimates a flow entering
/// competitive mode starts its share from (the other is the drain's).
pub(super) const PEAK_WINDOW: Duration = Duration::from_secs(30);

/// A judged drain in the delay mode left the queue standing: the flow suspects a
/// buffer-filling competitor and confirms it at the next grid instant (`drained.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Suspicion {
    /// The capacity the drain read from the queue it removed, bits/s: the entry's reading if
    /// the confirming drain reads none.
    pub(super) by_removal: Option<f64>,
    /// The delay floor when it was raised, µs: held until it is confirmed or dropped, not
    /// left to expire into the competitor's standing queue.
    pub(super) floor: i64,
}

/// Which way the controller shares the bottleneck.
#[derive(Debug, Clone)]
// One controller per session: the variant size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Mode {
    /// Hold α queued (the module's law).
    Delay,
    /// A buffer-filling competitor holds the queue: a paced window competes on its terms.
    Competitive {
        law: Compete,
        /// The delay floor when the mode began: not left to expire, since the competitor's
        /// queue never empties and an expired floor would take it in.
        floor: i64,
        /// When the next drain is due (drains come by the clock: the floor does not age).
        next_drain: Instant,
    },
}

/// The deepest queue, seconds, that a window of delay levels (floor plus queue, µs) has seen,
/// read from the delay floor `floor` (µs) in force now.
pub(super) fn depth(levels: &mut WindowedMax, now: Instant, floor: i64) -> f64 {
    levels
        .get(now)
        .map_or(0.0, |l| l.saturating_sub(floor).max(0) as f64 / 1e6)
}

impl Delay {
    /// Recognise BBR by its ProbeRTT (`dips.rs`); a competing flow that does then follows
    /// BBR's law for the rest of its competitive mode.
    /// `floor`: the one-way delay floor q is measured from, µs.
    fn watch_for_bbr(&mut self, now: Instant, q: f64, rtt: Duration, floor: i64) {
        if matches!(self.probe, Probe::Up { .. }) {
            self.own_until = now + rtt * 2;
        }
        let deepest = depth(&mut self.level_peak, now, floor);
        // In the delay mode this flow holds its own target in the queue; under a competitive
        // law it holds whatever the window puts there.
        let own_target = if self.is_competing() {
            f64::INFINITY
        } else {
            self.own_target()
        };
        if self
            .dips
            .on_report(now, q, deepest, floor, now < self.own_until, own_target)
        {
            self.bbr_seen = Some(now);
        }
        let recent = self
            .bbr_seen
            .is_some_and(|t| now.saturating_since(t) < BBR_SEEN_FOR);
        if recent {
            self.refresh_seed_limit(now);
            if let Mode::Competitive { law, .. } = &mut self.mode {
                law.set_rate_based(now);
            }
        }
    }

    /// Give a competing law that follows no rate-based competitor yet the limit BBR's law
    /// would start from now (`capacity.rs`, "Seeding BBR's law"). Once the law is seeded
    /// (`Compete::set_rate_based`) the limit is never read again, so it is not recomputed.
    fn refresh_seed_limit(&mut self, now: Instant) {
        if let Mode::Competitive { law, .. } = &mut self.mode {
            if !law.rate_based() {
                let peak = self.peak_delivery.get(now).unwrap_or(0) as f64;
                law.set_seed_limit(self.capacity.seed_limit(now, peak, self.compete_as));
            }
        }
    }

    /// Keep the deepest delay levels (`QUEUE_PEAK_WINDOW`, `BOTTOM_PEAK_WINDOW`) and watch
    /// for BBR: every report of a flow that may compete, in either mode.
    pub(super) fn watch_levels(&mut self, now: Instant, q: f64, rtt: Duration, floor: i64) {
        let level = floor.saturating_add((q * 1e6) as i64);
        self.level_peak.push(now, level);
        self.level_peak_long.push(now, level);
        self.watch_for_bbr(now, q, rtt, floor);
    }

    /// One report in the competitive mode: the law sets the rate, within a fair share of the
    /// capacity the mode's drains measured (`capacity.rs`). `queue`: the queueing delay,
    /// seconds, and the delay floor it was read from, µs; `d`: the delivery rate, bits/s.
    pub(super) fn compete_step(
        &mut self,
        now: Instant,
        s: &RateSample,
        queue: (f64, i64),
        rtt: Duration,
        d: Option<f64>,
    ) {
        // Set before the report: the law's own rhythm may seed BBR's law within `on_report`.
        self.refresh_seed_limit(now);
        if let Mode::Competitive { law, .. } = &mut self.mode {
            let srtt = s.srtt.as_secs_f64();
            self.capacity.on_queue(now, queue.0, srtt);
            law.set_cap(self.capacity.cap(now, self.compete_as));
            self.rate = law.on_report(now, queue, s.srtt, rtt, s.lost_bytes > 0, d);
            // BBR recognised by the rhythm of the law's events counts as by its
            // dips: for the next spells of the mode too.
            if let Some(t) = law.rhythm_seen() {
                self.bbr_seen = self.bbr_seen.max(Some(t));
            }
        }
        self.last_steered = d.unwrap_or(self.last_steered);
        self.unsettle();
    }

    /// Whether the flow is in the competitive mode.
    pub(super) fn is_competing(&self) -> bool {
        matches!(self.mode, Mode::Competitive { .. })
    }
}
