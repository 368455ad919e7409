//! Draining what growth overshot (`mod.rs`, "Find capacity fast").
//!
//! Growth learns that it passed capacity one loop late: the queue it builds reaches the
//! receiver, and its report the sender, about an RTT after the rate crossed capacity, and by
//! then the rate has grown by up to `2^g` (one doubling per RTT at full speed). Start-up from
//! 10 Mbit/s to 1 Gbit/s at 400 ms RTT had paced 2 Gbit/s when the first queue was reported,
//! and the queue peaked at 195 ms. Steering alone then removes it over its horizon
//! `T = 2·(rtt + 10 ms)`, reading a queue that is itself one loop old: at 250 Mbit/s, 200 ms a
//! peak of 99 ms took a whole second to drain, and start-up's queue made most of a 30-second
//! run's 99th percentile (83 ms; 192 ms at 400 ms).
//!
//! The sender need not wait for the queue to be reported: it knows what it sent. Every packet
//! sent since the one the latest report acknowledged (`latest RTT sample` ago) is in flight,
//! and the path holds `D'·min_rtt` of them (`D'` the delivery rate credited for random loss,
//! what steering calls the path's rate); the rest is queued or on its way to the queue. So
//! at the first steering step after growth the flow counts the bits it put on the wire over
//! the latest RTT sample ([`BitTally`](super::BitTally) `wire`, marked every report and read
//! between marks as sent evenly), and if they exceed the pipe by more than [`OVERSHOOT`] of
//! its α it drains them: its rate becomes `D'`, and it sends at half that
//! (`DRAIN_GAIN`) until what is in flight fits the pipe plus α again — BBR's Drain,
//! ended by the same in-flight test, with the pipe read from the latest credited delivery
//! (the followed rate below lags it). As in every probe the rate is then held for two RTTs
//! (their reports describe the drain, not the path), except that it follows delivery up to
//! what was sent a loop earlier: at the first steering step the delivery window still held
//! packets from before the link was full (214 Mbit/s read on a 248 Mbit/s path).
//!
//! A path that stalls also holds packets in flight, and a flow that grew just before a stall
//! would take them for an overshoot; its delivery has fallen behind what it sent, where a link
//! that growth overfilled delivers all it can. The drain starts only while delivery is at least
//! [`OVERSHOOT_KEEP_UP`] of what was sent a loop earlier (1 Gbit/s with 25 ms stalls every
//! 0.5 s: 41 218 packets dropped without the test — the drain's followed rate took a stall's
//! burst for capacity — none with it).
//!
//! Measured (`spate-lab sim`, against the commit before): the WAN grid's queue p99 at
//! 200 ms 81–97 → 6–12 ms, at 400 ms 176–192 → 72–80 ms (the rise before the first report,
//! which only a slower start-up would lower), p95 at 400 ms 43–63 → 2–4 ms, goodput
//! unchanged or up to 0.6 % higher. Flows that may compete keep the steering they were tuned
//! with: draining their start-up moved the drains that detect a competitor, and two tests of
//! sharing with BBR failed.

use core::time::Duration;

use super::drained::DrainReadings;
use super::probe::{Probe, ProbeKind};
use super::{Delay, DRAIN_GAIN};
use crate::time::Instant;

/// Bits in flight beyond the pipe, in multiples of this flow's α, that make the first steering
/// step after growth a drain. Steering removes a few α gently by itself; start-up leaves tens
/// (250 Mbit/s, 200 ms: 60 α), and a regrowth that overshot by a few α is steering's.
pub(super) const OVERSHOOT: f64 = 4.0;
/// ... and only while delivery is at least this fraction of what was sent a loop earlier: a
/// link that growth overfilled delivers what it can (at 1 % random loss, 99 %), a path that
/// stalls or holds packets falls behind.
pub(super) const OVERSHOOT_KEEP_UP: f64 = 0.8;

/// What the controller knows at a steering step, for the overshoot drain.
pub(super) struct Step {
    pub now: Instant,
    /// The latest RTT sample (the acknowledged packet was sent this long ago).
    pub latest: Duration,
    /// The RTT in the loop (`min_rtt + q`).
    pub rtt: Duration,
    /// `min_rtt`, seconds.
    pub base: f64,
    /// The queueing delay `q`, seconds.
    pub q: f64,
    /// The rate the packets delivered in the window were sent at (`None` in the first RTTs).
    pub then: Option<f64>,
    /// Of which the sender left this much unused, bits/s.
    pub unused: f64,
}

impl Delay {
    /// Bits sent since `latest` ago beyond the pipe at `path` bits/s and α: positive while
    /// more is in flight than the path holds with this flow's target queued.
    fn beyond_pipe(&self, now: Instant, latest: Duration, path: f64, base: f64) -> f64 {
        let in_flight = self.wire.since(now.saturating_sub(latest)).unwrap_or(0.0);
        in_flight - path * base - self.alpha()
    }

    /// At the first steering step after growth, with delivery `d` and the path's rate as
    /// steering reads it, `path` (`D'` plus unused pace), bits/s: start a drain if growth
    /// overshot. (Never called while a probe runs: steering does not run then.)
    pub(super) fn drain_overshoot(&mut self, s: &Step, d: f64, path: f64) {
        if self.compete_as > 0.0 {
            return;
        }
        let kept_up = s
            .then
            .is_some_and(|t| d >= OVERSHOOT_KEEP_UP * (t - s.unused));
        let excess = self.beyond_pipe(s.now, s.latest, path, s.base);
        if !kept_up || excess <= OVERSHOOT * self.alpha() {
            return;
        }
        self.rate = path;
        // At half rate the queue loses half the path's rate: an upper bound, since the
        // in-flight test (`during_overshoot`) ends the slow half once what is in flight fits.
        let half = (excess / (path * (1.0 - DRAIN_GAIN))).min(2.0 * s.base);
        self.probe = Probe::Up {
            kind: ProbeKind::Overshoot,
            start: s.now,
            half: Duration::from_secs_f64(half),
            gains: ProbeKind::Overshoot.gains(),
            gain: DRAIN_GAIN,
            q: DrainReadings::before(s.q),
            d0: d,
            q_max: s.q,
            d_max: 0.0,
            judged: false,
            confirms: false,
            lost: false,
            pinned: None,
            rtt0: s.rtt,
        };
    }

    /// During an overshoot drain, with delivery `d`: follow it up (never above what was sent a
    /// loop earlier), and end the slow half once what is in flight fits the pipe and α.
    pub(super) fn during_overshoot(&mut self, s: &Step, d: f64) {
        let Probe::Up {
            kind: ProbeKind::Overshoot,
            start,
            ..
        } = self.probe
        else {
            return;
        };
        let credited = d / (1.0 - self.loss.fraction());
        self.rate = self.rate.max(s.then.map_or(credited, |t| credited.min(t)));
        let age = s.now.saturating_since(start);
        // The pipe holds what the path delivers, whatever cap the followed rate keeps: read
        // from the capped rate (861 Mbit/s at the drain's start, on a 1 Gbit/s path at
        // 400 ms), it ended the drain a report late, and the link went idle for 68 ms instead
        // of 22 (`checks/lossy-long-fair`; time to adapt 4.0 s instead of 3.2).
        let pipe = self.rate.max(credited);
        let fits = self.beyond_pipe(s.now, s.latest, pipe, s.base) <= 0.0;
        if let Probe::Up { half, .. } = &mut self.probe {
            if age < *half && fits {
                *half = age;
            }
        }
    }
}
