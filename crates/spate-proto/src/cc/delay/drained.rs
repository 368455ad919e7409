//! How a judged drain left the queue (`mod.rs`, "Modes"): emptied (nobody else holds a
//! queue), bottomed out (this flow's own data left and what stays does not move: a delay floor
//! left stale by a longer path), or standing (someone else's queue: a competitor).
//!
//! A drain sends at half rate for its slow half; the controller records the queue before it
//! and, from one RTT after its start, the lowest reading, the lowest over the first
//! [`FLAT_AFTER`] of the slow half and the highest over the rest ([`DrainReadings`]).
//! [`Drained::judge`] turns those readings into the verdict that decides the mode, and
//! `Delay::after_drain` acts on it.
//!
//! # Suspect, then confirm
//!
//! ```text
//! standing drain, delay mode    suspect: hold the floor, start nothing until the next
//!                               grid instant, then drain (judged from any queue ≥ 2 ms)
//! that grid drain standing      enter the competitive mode
//! ... emptied or bottomed       drop the suspicion (also: a queue under 2 ms to judge)
//! enter at once instead         a judged grid drain that stands; a standing drain after
//!                               a judged grid drain that stood; a standing drain whose
//!                               bottom holds 4 α at the capacity (RESIDUE_ENTERS)
//! ```
//!
//! A drain that misses the other Spate flows' drains leaves their queue standing, and reads
//! like a competitor's: with every flow entering at its first standing drain, 19 of the 36
//! runs of Spate flows alone in `experiments/s51-drain-grid/spate-grid.sh` had a flow
//! competing (1240 flow-seconds, Jain 0.936 against 0.975). At a grid instant every Spate
//! flow drains and their queue empties; a buffer-filling competitor's does not. So a
//! standing drain off the grid only raises a suspicion, and the drain at the next grid
//! instant decides: 3 runs, 139 flow-seconds, Jain 0.977 (`docs/design.md`, "Session 68";
//! over five placements of the grid 2–10 runs, mean Jain 0.961). While suspecting, the flow
//! holds its delay floor (it would expire into the competitor's queue by the instant) and
//! starts no probe, so that its drain at the instant starts from a settled queue.
//!
//! Waiting costs up to a grid period of entry next to TCP, which runs that must converge
//! within 60 s pay: the fast paths above win most of it back (`tcp-robustness.sh`, 192 runs:
//! 172 within bounds, 174 entering at once; at 180 s 188 against 184).

use core::time::Duration;

use super::capacity::Capacity;
use super::compete::Compete;
use super::{
    depth, Delay, Mode, Suspicion, COMPETE_DRAIN_EVERY, DRAINS_TO_LEAVE, JUDGE_EVERY, READING_KEPT,
    RESIDUE_ENTERS, STALE_QUEUE_NOISE,
};
use crate::time::Instant;

/// The queue's fall at a drain's start is read over this fraction of the queueing delay the
/// drain started from: this flow's own part of the queue, `s·q0`, lasts `2·q0` at half rate,
/// and the competitor may answer the drain from about `q0` on (`capacity.rs`)...
const FALL_SPAN: f64 = 0.5;
/// ...or over this long, seconds, if that is longer: a few report gaps.
const FALL_SPAN_MIN: f64 = 0.02;

/// A drain empties the queue when the queueing delay falls below this fraction of what it was
/// in the RTT before...
const EMPTIED_FRACTION: f64 = 0.25;
/// A judged drain's queue "bottomed out" when, after this fraction of the slow half, it
/// neither fell further nor rose by more than [`FLAT_FALL`] of its whole fall (or
/// [`STALE_QUEUE_NOISE`], or a packet's time). The slow half lasts `2q + 20 ms`, and this
/// flow's own part of `q` leaves in about twice its own part at half rate, so alone on a
/// path that got longer (a phantom queue `q − q_own`) the queue bottoms out before 60 % of
/// the half and stays there; next to a standing queue it falls to the end, or rises where
/// the competitor grows into it (BBR's probing phase).
pub(super) const FLAT_AFTER: f64 = 0.6;
/// See [`FLAT_AFTER`]: a tenth of the fall leaves room for the delay filter's lag and noise.
const FLAT_FALL: f64 = 0.1;
/// ... and only when the queue fell by at most this multiple of this flow's own target,
/// `8α / rate`, and never rose above where it started: alone, its own part is all there is
/// to fall, and with a phantom under it the flow holds less than that — nothing at all when
/// the phantom exceeds its target (FASP scenario 1 after the step: 9.1 ms of phantom, a
/// 6.1 ms target, a drain that moved nothing). A queue that fell far more (the competitor's
/// cut during the drain) or rose (the competitor growing into the buffer) says nothing about
/// the floor.
const OWN_FALL: f64 = 2.0;
/// ... and only when that bottom lies at most this fraction of the deepest queue of the last
/// [`BOTTOM_PEAK_WINDOW`](super::BOTTOM_PEAK_WINDOW). A drop-tail buffer held full by a
/// competitor that does not yield (kernel BBR in a 1×BDP buffer, whose in-flight cap is twice the BDP) also stops falling
/// once this flow's part has left, but near the top of what the buffer ever held; a stale
/// floor's phantom lies well below the queue that the step to the slower, longer path built
/// (session 26: without this, `fair` next to kernel BBR in 1×BDP fell from 47–49 % to 23–28 %,
/// because entry came late and missed the ProbeRTTs `dips.rs` recognises BBR by).
const BOTTOM_BELOW_PEAK: f64 = 0.5;

/// How a judged drain left the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drained {
    /// Below [`EMPTIED_FRACTION`] of where it started: nobody else holds a queue.
    Emptied,
    /// Standing, but it stopped falling early in the slow half ([`FLAT_AFTER`]): this flow's
    /// own data ran out and what stayed does not move — a delay floor from a shorter path.
    Bottomed,
    /// Standing and still falling at the end of the slow half, or held near the top of the
    /// buffer: someone else's queue.
    Standing,
}

/// What a judged drain found, for `Delay::after_drain`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct DrainEnd {
    /// How it left the queue.
    pub(super) outcome: Drained,
    /// The path's capacity by the bits it removed over how far the queue fell, bits/s.
    pub(super) by_removal: Option<f64>,
    /// This flow's share of the bottleneck by how fast the queue fell at its start.
    pub(super) share_by_fall: Option<f64>,
    /// The lowest queue it saw, seconds.
    pub(super) bottom: f64,
    /// A judged grid drain: it decides a suspicion (module doc).
    pub(super) confirms: bool,
}

/// The queueing delays, seconds, a probe saw before it and from one RTT after its start on
/// (a drain's outcome is judged from them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct DrainReadings {
    /// The lowest queue of the RTT before the drain.
    pub(super) q0: f64,
    /// The lowest during the drain.
    pub(super) q_min: f64,
    /// The lowest about the first [`FLAT_AFTER`] of the slow half...
    pub(super) q_early: f64,
    /// ...and the highest about the rest of it.
    pub(super) q_late_max: f64,
    /// The first reading from one RTT after the start: (seconds after that RTT, queue)...
    pub(super) fall_from: Option<(f64, f64)>,
    /// ...and the last within [`FALL_SPAN`] of the queue's time after it.
    pub(super) fall_to: Option<(f64, f64)>,
}

impl DrainReadings {
    /// Nothing read yet about a probe that starts from the queue `q0`.
    pub(super) fn before(q0: f64) -> Self {
        DrainReadings {
            q0,
            q_min: f64::MAX,
            q_early: f64::MAX,
            q_late_max: f64::MIN,
            fall_from: None,
            fall_to: None,
        }
    }

    /// A reading `after` seconds into the readings (one RTT after the probe's start) of a
    /// probe whose slow half lasts `half` seconds: noted while the queue's fall at the start
    /// shows this flow's share ([`Self::share_by_fall`]).
    pub(super) fn note_fall(&mut self, after: f64, q: f64, half: f64) {
        let span = (FALL_SPAN * self.q0).max(FALL_SPAN_MIN).min(half / 2.0);
        match self.fall_from {
            None => self.fall_from = Some((after, q)),
            Some(_) if after <= span => self.fall_to = Some((after, q)),
            Some(_) => {}
        }
    }

    /// This flow's share of the bottleneck, its rate over the capacity, from how fast the
    /// queue fell at the start of a slow half that sent `gain` of the rate (`capacity.rs`
    /// derives it): `(1 − gain)·s = F / (Δy + F)` for a fall `F` over `Δy` of report time.
    pub(super) fn share_by_fall(&self, gain: f64) -> Option<f64> {
        let ((y0, q0), (y1, q1)) = (self.fall_from?, self.fall_to?);
        let (dy, fall) = (y1 - y0, q0 - q1);
        (dy > 0.0 && fall > 0.0 && gain < 1.0).then(|| fall / (dy + fall) / (1.0 - gain))
    }

    /// How far the queue fell below where it was before.
    pub(super) fn fell(&self) -> f64 {
        self.q0 - self.q_min.min(self.q0)
    }
}

impl Drained {
    /// What a judged drain's `readings` say, for a flow whose own target is `own` seconds of
    /// queue (`8α / rate`), whose deepest queue of the last [`BOTTOM_PEAK_WINDOW`](super::BOTTOM_PEAK_WINDOW) was
    /// `deepest` seconds and one of whose packets lasts `packet` seconds at its rate.
    pub(super) fn judge(r: DrainReadings, own: f64, deepest: f64, packet: f64) -> Drained {
        let fell = r.fell();
        // Next to someone else's standing queue, the queue falls by what this flow holds back
        // for the whole slow half; a queue that stopped falling early ran out of this flow's
        // data, and what stays is not a queue — unless it stays near the top of the buffer.
        // Readings move by a packet's time at the bottleneck (`packet`: 1.2 ms at 10 Mbit/s)
        // without anything queueing.
        let still = STALE_QUEUE_NOISE.max(FLAT_FALL * fell).max(packet);
        let flat = r.q_early - r.q_min <= still && r.q_late_max - r.q_min <= still;
        let own_fall = r.q_min <= r.q0 + still && fell <= own * OWN_FALL;
        let below_peak = r.q_min <= deepest * BOTTOM_BELOW_PEAK;
        if r.q_min <= r.q0 * EMPTIED_FRACTION {
            Drained::Emptied
        } else if flat && own_fall && below_peak {
            Drained::Bottomed
        } else {
            Drained::Standing
        }
    }
}

impl Delay {
    /// A drain ended: a queue it could not empty belongs to someone who does not yield, once
    /// a drain at a grid instant has confirmed it (module doc).
    pub(super) fn after_drain(
        &mut self,
        now: Instant,
        end: DrainEnd,
        srtt: Duration,
        q: f64,
        floor: i64,
    ) {
        let competing = self.is_competing();
        let (outcome, mut by_removal) = (end.outcome, end.by_removal);
        if !competing && self.compete_as > 0.0 {
            if end.confirms {
                self.grid_stood = outcome == Drained::Standing;
                let suspicion = self.suspect.take();
                if outcome != Drained::Standing {
                    return;
                }
                by_removal = by_removal.or(suspicion.and_then(|s| s.by_removal));
            } else if outcome == Drained::Standing
                && !self.grid_stood
                && !self.residue_enters(now, &end)
            {
                self.suspect.get_or_insert(Suspicion { by_removal, floor });
                return;
            }
        }
        match outcome {
            // A delay floor the path left behind (a handover to a longer path): not a
            // competitor, and nothing to judge until the floor has aged out. Within
            // competitive mode a bottomed drain is still a standing queue, as before.
            Drained::Bottomed if !competing => return,
            Drained::Bottomed | Drained::Standing => {}
            Drained::Emptied => {
                self.emptied_drains += 1;
                if let Mode::Competitive { next_drain, .. } = &mut self.mode {
                    if self.emptied_drains >= DRAINS_TO_LEAVE {
                        self.mode = Mode::Delay;
                    } else {
                        // Confirm soon: one drain may just have met the competitor's trough.
                        *next_drain = now + JUDGE_EVERY;
                    }
                }
                return;
            }
        }
        self.emptied_drains = 0;
        if let Mode::Competitive { next_drain, .. } = &mut self.mode {
            *next_drain = now + COMPETE_DRAIN_EVERY;
        } else if self.compete_as > 0.0 {
            // Start from the share of one competitor's worth (the common case); with more
            // competitors the window law brings it down, cut by cut.
            let n = self.compete_as;
            let peak = self.peak_delivery.get(now).unwrap_or(0) as f64;
            let capacity = Capacity::at_entry(self.rate, by_removal, end.share_by_fall).or(self
                .drain_reading
                .filter(|&(t, _)| now.saturating_since(t) <= READING_KEPT)
                .map(|(_, c)| c));
            let share = Capacity::entry_share(capacity, peak, n);
            // The deepest queue of the last seconds: the buffer, if the competitor has
            // overflowed it since.
            let deepest = depth(&mut self.level_peak, now, floor);
            self.mode = Mode::Competitive {
                law: Compete::new(
                    now,
                    n,
                    self.rate.max(share.min(self.cap)),
                    srtt,
                    self.packet_bits,
                    (q.max(deepest), floor),
                ),
                floor,
                next_drain: now + COMPETE_DRAIN_EVERY,
            };
        }
    }

    /// Whether a standing drain's `end` left so much queue at its bottom that no Spate flow's
    /// α explains it ([`RESIDUE_ENTERS`]), read at the capacity the drain measured or the
    /// flow's peak delivery, whichever is larger.
    fn residue_enters(&mut self, now: Instant, end: &DrainEnd) -> bool {
        let peak = self.peak_delivery.get(now).unwrap_or(0) as f64;
        let capacity = end.by_removal.unwrap_or(0.0).max(peak);
        end.bottom * capacity >= RESIDUE_ENTERS * self.alpha_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drain at half rate from a 100 ms queue of which this flow sends `share`: the queue
    /// seen by its packets falls at `share/2` per second of sending, and the reports of it
    /// come closer together by that fall; one every 5 ms for 200 ms.
    fn readings(share: f64) -> DrainReadings {
        let mut r = DrainReadings::before(0.1);
        for i in 0..40 {
            let y = f64::from(i) * 0.005;
            // Report time y = x − fall(x) for sending time x, fall(x) = share/2 · x.
            let x = y / (1.0 - share / 2.0);
            r.note_fall(y, 0.1 - share / 2.0 * x, 0.22);
        }
        r
    }

    #[test]
    fn the_fall_at_a_drains_start_reads_the_flows_share() {
        for share in [0.1, 0.5, 0.9] {
            let s = readings(share).share_by_fall(0.5).expect("no reading");
            assert!((s - share).abs() < 1e-9, "{share}: {s}");
        }
        // Read over the first 50 ms (half the queue's 100 ms), not the whole probe.
        assert_eq!(readings(0.5).fall_to.map(|(y, _)| y), Some(0.05));
    }

    /// A judged drain's end: `outcome`, a 100 Mbit/s reading, a queue of `bottom` seconds
    /// left, deciding a suspicion if `confirms`.
    fn end(outcome: Drained, bottom: f64, confirms: bool) -> DrainEnd {
        DrainEnd {
            outcome,
            by_removal: Some(100e6),
            share_by_fall: None,
            bottom,
            confirms,
        }
    }

    /// A `fair` flow at 50 Mbit/s that may compete, and a drain's end for it at `secs`.
    fn fair() -> Delay {
        let mut c = Delay::new(75_000, 0, 0).competing_as(1.0);
        c.rate = 50e6;
        c
    }

    fn drained(c: &mut Delay, secs: u64, end: DrainEnd) {
        let t = Instant::from_millis(secs * 1000);
        c.after_drain(t, end, Duration::from_millis(50), 0.01, 25_000);
    }

    // α is 600 000 bits: at 100 Mbit/s 6 ms of queue, so 4 α is 24 ms.
    const SMALL: f64 = 0.005;

    #[test]
    fn a_standing_drain_is_a_suspicion_until_a_grid_drain_confirms_it() {
        let mut c = fair();
        drained(&mut c, 10, end(Drained::Standing, SMALL, false));
        assert!(!c.is_competing());
        assert_eq!(c.suspect.map(|s| s.floor), Some(25_000));
        // A second standing drain before the instant keeps the first suspicion.
        drained(&mut c, 12, end(Drained::Standing, SMALL, false));
        assert!(!c.is_competing());
        drained(&mut c, 16, end(Drained::Standing, SMALL, true));
        assert!(c.is_competing());
        assert_eq!(c.suspect, None);
    }

    #[test]
    fn a_grid_drain_that_empties_the_queue_drops_the_suspicion() {
        for outcome in [Drained::Emptied, Drained::Bottomed] {
            let mut c = fair();
            drained(&mut c, 10, end(Drained::Standing, SMALL, false));
            drained(&mut c, 16, end(outcome, SMALL, true));
            assert!(!c.is_competing(), "{outcome:?}");
            assert_eq!(c.suspect, None);
            // And the next standing drain is a suspicion again, not an entry.
            drained(&mut c, 20, end(Drained::Standing, SMALL, false));
            assert!(!c.is_competing(), "{outcome:?}");
            assert!(c.suspect.is_some());
        }
    }

    #[test]
    fn some_standing_drains_enter_at_once() {
        // A judged grid drain needs no confirmation.
        let mut c = fair();
        drained(&mut c, 16, end(Drained::Standing, SMALL, true));
        assert!(c.is_competing());
        // Nor a standing drain after a judged grid drain that stood.
        let mut c = fair();
        c.grid_stood = true;
        drained(&mut c, 10, end(Drained::Standing, SMALL, false));
        assert!(c.is_competing());
        // Nor one that left more than 4 α standing (24 ms at 100 Mbit/s), but 4 α is needed.
        let mut c = fair();
        drained(&mut c, 10, end(Drained::Standing, 0.023, false));
        assert!(!c.is_competing());
        let mut c = fair();
        drained(&mut c, 10, end(Drained::Standing, 0.025, false));
        assert!(c.is_competing());
    }

    #[test]
    fn a_flow_that_may_not_compete_suspects_nothing() {
        let mut c = Delay::new(75_000, 0, 0);
        drained(&mut c, 10, end(Drained::Standing, 0.1, true));
        assert!(!c.is_competing());
        assert_eq!(c.suspect, None);
    }

    #[test]
    fn no_fall_no_share() {
        let mut r = DrainReadings::before(0.1);
        assert_eq!(r.share_by_fall(0.5), None);
        r.note_fall(0.0, 0.1, 0.22);
        r.note_fall(0.02, 0.101, 0.22);
        assert_eq!(r.share_by_fall(0.5), None);
        assert_eq!(r.share_by_fall(1.0), None);
    }
}
