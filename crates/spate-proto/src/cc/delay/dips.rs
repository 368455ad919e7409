//! Recognising BBR by its ProbeRTT: the queue empties for a moment every ten seconds.
//!
//! # In a nutshell
//!
//! ```text
//! empty  q < max(1 ms, 5 % of the deepest queue of the last 10 s), and in the delay mode
//!        q < half this flow's own target `8α/rate` (the queue it holds), unless this flow made it
//!        empty: its probes and drains, and two RTTs after them (then nothing counts until
//!        the queue has filled again) — but a queue still empty when that time ends, having
//!        been empty since the probe, is someone else's: its dip began when it emptied;
//!        and a dip under way when a probe of this flow begins ends there
//! dip    an empty queue that lasts ≥ 100 ms
//! BBR    two dips 9–12 s apart, at the same delay floor (within 50 µs)
//! ```
//!
//! BBR (v1, Linux) refreshes its minimum RTT by sending 4 packets for 200 ms and a round trip
//! whenever it has not seen a lower RTT for 10 s, so a queue it holds empties every 10 s plus
//! the time that takes (next to Spate in the simulator: dips 10.2–11.5 s apart, 0.14–0.4 s
//! long). Loss-based TCP never empties its queue while it has data, except after a timeout.
//!
//! The floor matters. A flow that joined while CUBIC held a standing queue took part of that
//! queue into its delay floor; each CUBIC cut then drops the queue below the floor, which reads
//! as empty, and CUBIC's period at these paths is close to 10 s: without a condition on the
//! floor, `fair` joining CUBIC took it for BBR in runs of four of the six rows of
//! `scripts/tcp-robustness.sh` (180 s). Each such cut leaves the queue at a different low,
//! and the floor follows it; BBR's second ProbeRTT empties the queue to the floor its first
//! one set. (Requiring the floor not to move *during* the dip was too strict: the floor's 10 s
//! window expires just before BBR's next ProbeRTT, so it rises and falls back around every
//! dip, and three runs of 48 never recognised BBR.) With the rule, 1 run of the 48 around
//! `scenarios/tcp` (`fair` and `high` joining CUBIC, 180 s) took CUBIC for BBR; since a dip
//! may begin during the flow's own probe, so does `fair` joining 15 s late in a 4×BDP buffer
//! at 70 ms (`docs/results/tcp/README.md`).
//!
//! What it misses: a BBR flow whose queue never empties because something else holds one (in
//! a 4×BDP buffer next to this flow's CUBIC-like window BBR's ProbeRTT removes only its own
//! part), which is why dips are watched from the flow's start, before competitive mode holds
//! a queue (in a 1×BDP buffer, where BBR's gain cycle overflows it, `compete.rs` recognises
//! BBR by the rhythm of its cycles instead); and BBR versions with other ProbeRTT schedules
//! (v2 and v3 probe every 5 s, down to half their window, not to 4 packets).

use core::time::Duration;

use crate::time::Instant;

/// The queue counts as empty below this fraction of the deepest queue...
const EMPTY_FRACTION: f64 = 0.05;
/// ...or below this, seconds, whichever is more.
const EMPTY_LEVEL: f64 = 0.001;
/// ...and below this fraction of this flow's own target in the delay mode, where it holds that
/// much queue itself. At 1 Gbit/s the target is 0.6 ms, under [`EMPTY_LEVEL`]: a flow alone
/// there read its own queue as empty, and the moments it rose above 1 ms as the ends of dips.
const OWN_EMPTY: f64 = 0.5;
/// An empty queue lasting this long is a dip. BBR's ProbeRTT holds back for 200 ms and a
/// round trip; the dips measured next to it lasted 0.14–0.37 s.
const DIP_MIN: Duration = Duration::from_millis(100);
/// Two dips this far apart, seconds, are BBR's ProbeRTT (measured 10.2–11.5 s).
const PERIOD: (f64, f64) = (9.0, 12.0);
/// Two floors within this many µs are the same (timestamps are µs).
const FLOOR_NOISE_US: i64 = 50;

/// Watches the queue for BBR's dips.
#[derive(Debug, Clone, Default)]
pub struct Dips {
    /// Since when the queue has been empty.
    empty_since: Option<Instant>,
    /// When the last dip began.
    last: Option<Instant>,
    /// The queue was last made empty by this flow: no dip until it fills again.
    own: bool,
    /// Since when the queue has been empty while this flow's probe might explain it.
    own_empty_since: Option<Instant>,
    /// The delay floor q was measured from at the end of the last dip, µs.
    last_floor: Option<i64>,
}

impl Dips {
    /// A report: queueing delay `q` and the deepest of the last seconds `deepest` (s), the
    /// delay floor q is measured from (`floor`, µs); `own` when this flow's own probe or drain
    /// may explain an empty queue. Returns whether this report ends a dip that makes two
    /// [`PERIOD`] apart, both at the same floor.
    /// `own_target` is this flow's own queue target in seconds (`8α / rate`) while it holds
    /// one (the delay mode), infinite otherwise.
    pub fn on_report(
        &mut self,
        now: Instant,
        q: f64,
        deepest: f64,
        floor: i64,
        own: bool,
        own_target: f64,
    ) -> bool {
        let empty = q
            < (EMPTY_FRACTION * deepest)
                .max(EMPTY_LEVEL)
                .min(OWN_EMPTY * own_target);
        if own {
            // A dip already under way when this flow's probe or drain begins is someone
            // else's: it ends here, as long as it has lasted. Competitive mode drains every
            // 8 s and BBR's ProbeRTT comes every 10.3 s, so now and then a drain starts
            // inside a ProbeRTT; it used to swallow the dip, and recognition waited for the
            // next pair of dips, 10–20 s later.
            // (A dip is open only while the queue is not this flow's doing.)
            let dip = self.empty_since.take();
            // Until the queue fills again, its emptiness may be this flow's doing.
            self.own = true;
            self.own_empty_since = if empty {
                self.own_empty_since.or(Some(now))
            } else {
                None
            };
            return dip.is_some_and(|since| self.dip_ended(now, since, floor));
        }
        if !empty {
            self.own = false;
            self.own_empty_since = None;
        } else if let (true, Some(since)) = (self.own, self.own_empty_since.take()) {
            // By two RTTs after this flow's probe a queue it emptied has filled again. Still
            // empty since the probe: someone else holds it empty (BBR's ProbeRTT began while
            // the probe was under way, 0.6 s after a flow joined it in the emulator, and
            // recognition waited for two more, 22 s).
            self.own = false;
            self.empty_since = Some(since);
            return false;
        }
        match (empty, self.empty_since) {
            (true, None) => {
                if !self.own {
                    self.empty_since = Some(now);
                }
                false
            }
            (false, Some(since)) => {
                self.empty_since = None;
                self.dip_ended(now, since, floor)
            }
            _ => false,
        }
    }

    /// The queue, empty since `since`, stopped being empty (or this flow's own probe began)
    /// at `now`, measured from the delay floor `floor` (µs): whether that makes a dip
    /// [`PERIOD`] after the last, at the same floor.
    fn dip_ended(&mut self, now: Instant, since: Instant, floor: i64) -> bool {
        if now.saturating_since(since) < DIP_MIN {
            return false;
        }
        let same_floor = self
            .last_floor
            .is_some_and(|f| (floor - f).abs() <= FLOOR_NOISE_US);
        self.last_floor = Some(floor);
        let gap = self
            .last
            .map(|last| since.saturating_since(last).as_secs_f64());
        self.last = Some(since);
        same_floor && gap.is_some_and(|g| (PERIOD.0..=PERIOD.1).contains(&g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports every 10 ms for `secs`: the queue at 30 ms, empty for `dip` seconds every
    /// `every` seconds. Returns when BBR was first recognised.
    fn run(every: f64, dip: f64, secs: f64) -> Option<f64> {
        let mut d = Dips::default();
        for i in 0..(secs / 0.01) as u64 {
            let t = i as f64 * 0.01;
            let phase = (t + 5.0) % every;
            let q = if phase < dip { 0.0 } else { 0.030 };
            let now = Instant::ZERO + Duration::from_secs_f64(t);
            if d.on_report(now, q, 0.050, 0, false, f64::INFINITY) {
                return Some(t);
            }
        }
        None
    }

    #[test]
    fn probe_rtt_every_ten_seconds_is_recognised_at_the_second_dip() {
        let t = run(10.3, 0.3, 30.0).expect("not recognised");
        assert!((15.0..16.0).contains(&t), "{t}");
    }

    #[test]
    fn other_rhythms_are_not() {
        // Timeouts of a starved loss-based flow, 30 s apart; dips too short to be ProbeRTT.
        assert_eq!(run(30.0, 0.3, 100.0), None);
        assert_eq!(run(10.3, 0.05, 60.0), None);
    }

    /// A standing queue's lows seen as empty, every 10.3 s, each at a new floor (a flow that
    /// took part of a CUBIC flow's standing queue into its floor, cut after cut).
    #[test]
    fn dips_at_different_floors_are_not_bbr() {
        let mut d = Dips::default();
        for i in 0..6000u64 {
            let t = i as f64 * 0.01;
            let k = (t / 10.3) as i64;
            let q = if t % 10.3 < 0.3 { 0.0 } else { 0.030 };
            let now = Instant::ZERO + Duration::from_secs_f64(t);
            assert!(
                !d.on_report(now, q, 0.05, -800 * k, false, f64::INFINITY),
                "{t}"
            );
        }
    }

    /// ProbeRTT dips of 300 ms every 10.3 s (the first at 5 s) under a 30 ms queue, reports
    /// every 10 ms for 30 s, this flow's probe or drain under way when `own(t, phase)` (s):
    /// when BBR was recognised.
    fn recognised_with_own(own: impl Fn(f64, f64) -> bool) -> Option<f64> {
        let mut d = Dips::default();
        (0..3000u64).map(|i| i as f64 * 0.01).find(|&t| {
            let phase = (t + 5.0) % 10.3;
            let q = if phase < 0.3 { 0.0 } else { 0.030 };
            let now = Instant::ZERO + Duration::from_secs_f64(t);
            d.on_report(now, q, 0.050, 0, own(t, phase), f64::INFINITY)
        })
    }

    /// BBR's ProbeRTT that begins while this flow probes: the queue is still empty when the
    /// probe's time is over, so the dip is BBR's and counts from when the queue emptied.
    #[test]
    fn a_probe_rtt_that_began_during_this_flows_probe_still_counts() {
        // This flow's probe starts 50 ms before the first dip and its time ends 0.15 s into it.
        let t = recognised_with_own(|t, _| (5.25..5.45).contains(&t)).expect("not recognised");
        assert!((15.0..16.0).contains(&t), "{t}");
    }

    /// A flow alone on a fast path holds its own target, 0.6 ms at 1 Gbit/s, below the 1 ms
    /// level; its floor does not move. Brief rises every 10.3 s (noise, another flow's
    /// burst) end what looked like dips at one floor: that is not BBR (session 29: FASP
    /// scenario 1 at 1/10 with `compete = true` took itself for BBR at 10.9 s, and after
    /// the step to 10 Mbit/s followed BBR's law for the rest of the run).
    #[test]
    fn a_queue_this_flow_holds_itself_is_not_empty() {
        let recognised = |own_target: f64| {
            let mut d = Dips::default();
            (0..4000u64).any(|i| {
                let t = i as f64 * 0.01;
                let q = if t % 10.3 < 0.2 { 0.003 } else { 0.0006 };
                let now = Instant::ZERO + Duration::from_secs_f64(t);
                d.on_report(now, q, 0.004, 0, false, own_target)
            })
        };
        // Without a target of its own (competitive mode) the same readings are dips...
        assert!(recognised(f64::INFINITY));
        // ...but in the delay mode this flow holds that queue itself.
        assert!(!recognised(0.0006));
    }

    /// This flow's drain that begins inside BBR's ProbeRTT (150 ms into each 300 ms dip, its
    /// time lasting 400 ms): the dip so far still counts, ended where the drain began.
    #[test]
    fn a_drain_that_begins_inside_a_probe_rtt_does_not_hide_it() {
        let own = |_, phase| (0.15..0.55).contains(&phase);
        let t = recognised_with_own(own).expect("not recognised");
        assert!((15.0..16.0).contains(&t), "{t}");
    }

    #[test]
    fn an_empty_queue_of_this_flows_making_does_not_count() {
        // Every 10.3 s this flow drains and the queue reads empty for 300 ms from then; it
        // has filled again before the probe's time (the probe and two RTTs after it, here
        // 400 ms) is over.
        let mut d = Dips::default();
        for i in 0..6000u64 {
            let t = i as f64 * 0.01;
            let phase = t % 10.3;
            let q = if phase < 0.3 { 0.0 } else { 0.030 };
            let now = Instant::ZERO + Duration::from_secs_f64(t);
            assert!(
                !d.on_report(now, q, 0.05, 0, phase < 0.4, f64::INFINITY),
                "{t}"
            );
        }
    }
}
