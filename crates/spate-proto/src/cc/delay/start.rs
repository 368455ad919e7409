//! Starting a probe: which kind falls due (a drain, on the grid or by the floor's age, or a
//! stale probe), and its shape — how long its first half lasts, its two rates, and what it
//! will be measured against. What a probe does once under way, and what it concludes, is
//! `mod.rs`'s `probe_step`; the kinds and their gains are `probe.rs`.
//!
//! A drain sends at half rate for twice the queueing delay the flow reads plus a margin
//! ([`DRAIN_MARGIN`], or [`DRAIN_MARGIN_QUEUE`] of the queue for a flow on the grid that has
//! not found itself alone), then 1.5× as long above its rate, so its own queue leaves and
//! returns; a stale probe sends 15 % faster for half an RTT, then as much slower.

use core::time::Duration;

use super::probe::{Probe, ProbeKind};
use super::share::alone_weight;
use super::{
    delivery_window, Delay, DrainReadings, Mode, BUMP_PACKETS, DRAIN_AFTER, DRAIN_MARGIN,
    DRAIN_MARGIN_QUEUE, DRAIN_MAX_HALF, FIRST_DRAIN_ALPHAS, FULL_STABLE, FULL_STABLE_WINDOWS,
    GRID_JUDGED_LATE, JUDGED_FROM, JUDGED_MARGIN, JUDGE_EVERY, PROBE_BUMP, PROBE_GAIN,
};
use crate::time::Instant;

impl Delay {
    /// Start a probe if one is due at `now` (the last ended or was put off until `next`):
    /// `q` is the queueing delay read now, seconds, `d` the delivery rate, bits/s, and
    /// `may_start` whether the flow is settled enough to measure anything (steady, or
    /// competing).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_probe(
        &mut self,
        now: Instant,
        rtt: Duration,
        q: f64,
        d: Option<f64>,
        may_start: bool,
        alpha_now: f64,
        next: Instant,
    ) {
        let floor_age = self.base_owd.age(now).unwrap_or_default();
        let competing = self.is_competing();
        // Whether this drain falls at a grid instant (`grid.rs`).
        let mut on_grid = false;
        let kind = if let Mode::Competitive { next_drain, .. } = self.mode {
            if now < next_drain {
                return;
            }
            ProbeKind::Drain
        } else if self.suspect.is_some() {
            // A suspected competitor is confirmed at the next grid instant, whatever the
            // floor's age; until then the flow starts nothing else (`drained.rs`).
            if !self.grid.due(now, Duration::MAX) {
                return;
            }
            on_grid = true;
            ProbeKind::Drain
        } else {
            on_grid = self.grid.due(now, floor_age);
            if floor_age >= DRAIN_AFTER || on_grid {
                ProbeKind::Drain
            } else if now >= next {
                ProbeKind::Stale
            } else {
                return;
            }
        };
        // A flow that may compete drains at a grid instant even when it is not steady: the
        // other Spate flows drain then, and a drain later would leave their queue standing.
        let confirming = self.suspect.is_some() && on_grid;
        let may_start = may_start || confirming || (on_grid && self.compete_as > 0.0);
        let (true, Some(d0)) = (may_start, d) else {
            return;
        };
        let q0 = self.queue_over_rtt(now, q);
        // Only a flow that may compete judges its drains (and holds the queue empty
        // a little longer for it); the others take a margin for the flows draining with
        // them unless they are alone ([`DRAIN_MARGIN_QUEUE`]). A drain that confirms a
        // suspicion is judged whenever it starts from a queue; of the other grid drains only
        // those that start on time and are not the flow's first ([`GRID_JUDGED_LATE`]):
        // a first drain's floor may hold the others' queue, and a late one drains alone.
        let judged = self.compete_as > 0.0
            && kind == ProbeKind::Drain
            && q0 >= JUDGED_FROM
            && (confirming
                || (self
                    .last_judged
                    .is_none_or(|t| now.saturating_since(t) >= JUDGE_EVERY)
                    && (!on_grid
                        || (!self.grid.first() && self.grid.late(now) <= GRID_JUDGED_LATE))));
        if judged {
            self.last_judged = Some(now);
        }
        // A judged grid drain decides a suspicion, whether one was raised or not; a
        // confirming drain that cannot be judged (the queue is gone) drops it.
        let confirms = judged && on_grid;
        if confirming && !judged {
            self.suspect = None;
        }

        let margin = if judged {
            JUDGED_MARGIN
        } else if !competing && !self.share.is_some_and(|s| s.alone()) {
            DRAIN_MARGIN.max(DRAIN_MARGIN_QUEUE * q)
        } else {
            DRAIN_MARGIN
        };
        // A flow's first drain lasts as long as the others' may, unless its probes
        // have shown it alone (the competitive mode's drains are its own). A latecomer's
        // floor holds the others' queue, so its own reads short (`grid.rs`). n flows that
        // share equally hold n·α = α/(C/n) seconds, this flow's α at its fair rate; a
        // latecomer runs at up to twice that rate, hence 4α/rate for twice the queue, up
        // to an RTT.
        let stretch = (kind == ProbeKind::Drain
            && !competing
            && self.grid.first()
            && alone_weight(self.share.map(|s| s.smoothed)) < 1.0)
            .then(|| {
                (FIRST_DRAIN_ALPHAS * alpha_now / self.rate)
                    .min(rtt.as_secs_f64().max(DRAIN_MAX_HALF))
            })
            .filter(|&others| others > 2.0 * q);
        if kind == ProbeKind::Drain {
            self.grid.started(now);
        }
        let mut gains = kind.gains();
        let mut half = match (kind, stretch) {
            (_, Some(others)) => {
                // Not refilled: a lone flow's refill after so long a drain is a bump.
                gains.1 = 1.0;
                Duration::from_secs_f64(others + margin)
            }
            (ProbeKind::Stale, None) => rtt / 2,
            // Not capped at rtt/2: at RTT ≈ 0 that left a 50 µs dip, which removed
            // nothing from a 1 ms queue, and the floor crept up under it.
            // (Only `overshoot.rs` starts the third kind.)
            (ProbeKind::Drain | ProbeKind::Overshoot, None) => Duration::from_secs_f64(
                (2.0 * q + margin).min(rtt.as_secs_f64().max(DRAIN_MAX_HALF) + margin),
            ),
        };
        // A flow that may compete keeps to the moment's evidence (the competitive
        // mode's own tests were tuned with it); the others count a buffer as full as
        // long as `held_full` does.
        let pinned = if self.compete_as > 0.0 {
            self.pinned.map(|(_, _, hi)| hi)
        } else {
            self.held_full.map(|(_, at)| at)
        };
        if kind == ProbeKind::Stale && pinned.is_some() && self.compete_as == 0.0 {
            // Start-up's overflow is no full buffer's steady state: its delivery still
            // moves (a flow next to 5 Mbit/s that did not yield measured 0.96 and
            // 0.80), and the share is measured against it.
            let w = delivery_window(rtt);
            let (Some(short), Some(long)) = (
                self.delivery.rate(w),
                self.delivery.rate(w * FULL_STABLE_WINDOWS),
            ) else {
                return;
            };
            if (short as f64 / long.max(1) as f64 - 1.0).abs() > FULL_STABLE {
                return;
            }
            // From a buffer held full the stale probe measures the share by delivery
            // alone, over the delivery window: a bump shorter than that window (half
            // of a 20 ms RTT against 20 ms) is diluted by the rates around it, and a
            // sharing flow read as nearly alone (0.85 for a true half). So the bump
            // outlasts the window by a report gap, and nothing is paid back: a full
            // buffer lost the bump's excess instead of queueing it.
            gains.1 = 1.0;
            half = half.max(w + Duration::from_secs_f64(self.report_gap));
        }
        // On a long, fast path the bump is lower (PROBE_BUMP).
        if kind == ProbeKind::Stale && pinned.is_none() && self.compete_as == 0.0 {
            let bump = PROBE_BUMP.max(BUMP_PACKETS * self.packet_bits / self.rate);
            let g = (bump / half.as_secs_f64().max(1e-6)).min(PROBE_GAIN);
            gains = (1.0 + g, 1.0 - g);
        }
        // A flow held at a full buffer sends more than the path delivers (the excess
        // is lost: 16.4 Mbit/s into 10): half its rate would hardly drain the queue,
        // so its drain halves what is delivered.
        if kind == ProbeKind::Drain && pinned.is_some() {
            gains.0 *= (d0 / self.rate).min(1.0);
        }
        if let Mode::Competitive { law, .. } = &mut self.mode {
            // Its queue falls and returns until about 2 RTTs after the drain's end.
            law.quiet_until(now + half * 2 + rtt * 4);
            // A drain under CUBIC's law does not refill: the fast half overflowed the
            // buffer while the law's events were suspended for the drain, and the
            // competitor took every loss (`compete.rs`). BBR does not cut on loss.
            if !law.rate_based() {
                gains.1 = 1.0;
            }
        }
        self.probe = Probe::Up {
            kind,
            start: now,
            half,
            gains,
            gain: gains.0,
            q: DrainReadings::before(q0),
            d0,
            q_max: q,
            d_max: 0.0,
            judged,
            confirms,
            lost: false,
            pinned,
            rtt0: rtt,
        };
    }
}
