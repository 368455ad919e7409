//! Competitive mode: how a `fair` or `high` flow shares a bottleneck with loss-based TCP
//! (and, once `dips.rs` has recognised BBR, with BBR: then the rate is `follow.rs`'s).
//!
//! # In a nutshell
//!
//! ```text
//! event   the competitor cut: the queue falls by more than `fall` within 3 RTTs of being
//!         full (q ≥ q_full − slack; slack = max(2 ms, q_full/10)),
//!             fall = max(slack + 2 ms, min(2·slack, (base + q_full)/10)),
//!         or this flow's loss with the queue full; one event per episode (4 RTTs, and the
//!         queue must fall by `fall` before the next), except this flow's loss after 15 RTTs
//!         of a queue that stayed full (nobody else cuts: this flow cuts alone)
//! q_full  the deepest delay level (floor + queue) seen in the last max(20 s, 3·T), less the
//!         floor now: the buffer's size once it has overflowed, however the floor moved since;
//!         base: the path's RTT without queue
//! T       seconds between the last overflows (mean of the last 2 intervals; none before
//!         the second)
//! W(t)    a CUBIC window in packets, t = time since the last event (RFC 9438):
//!             W(t) = N·C·(t − K)³ + W_max,   K = ∛((W_max − W(0)) / (N·C)),  C = 0.4,
//!         β = 0.7 `fair` (CUBIC's), 0.8 `high`
//! event:  W_max ← max(W or W·(1 + β)/2 by fast convergence, min(N·C·T³/(1 − β), 2·W)),
//!         W ← β·W   (every event cuts)
//! rate    = W · packet / srtt;  W ≤ 1.25·D·srtt (not grown past what the path carries)
//!         from 2 RTTs after entering;  N = 1 `fair`, 2 `high`
//! cap     rate ≤ (N/(N + 1) + 0.02) · C, C the capacity the drains measured, under either
//!         law (`capacity.rs`; the controller keeps it across the mode's spells)
//! BBR     once recognised, BBR's law (`follow.rs`), its bandwidth filter seeded with the
//!         rate the mode was entered with, at most a fair share of the capacity estimate or
//!         of the peak delivery (`capacity.rs`); recognised by the controller (`dips.rs`) or here:
//!         5 cuts or overflows in a row each within 20 smoothed RTTs of the last
//! ```
//!
//! Against a buffer-filler every flow's share is its share of the queue, and the competitor
//! grows its share until the buffer overflows, then cuts. A flow that does the same on the
//! same signal gets what another such flow would: this one follows CUBIC's window (the
//! kernel's default), cut when the competitor cuts.
//!
//! Two things it cannot copy from the competitor and does otherwise:
//! * **The signal.** The competitor's losses are not this flow's: its paced packets find room
//!   between the competitor's bursts, and the bursts take the drops (in the simulator a paced
//!   flow lost nothing at overflows a CUBIC flow lost packets at). The flow sees the cut
//!   itself, as the queue falling from full. Random loss, with the queue anywhere, is ignored:
//!   at 2 % random loss CUBIC collapses, the queue drains, and the flow returns to the delay
//!   mode.
//! * **Convergence.** Two CUBIC flows converge over several epochs (8–10 s each at 100 Mbit/s
//!   and 50 ms), and the later one starts far behind. But every CUBIC flow that is cut every T
//!   seconds and has converged has `K = T`, so `W_max = C·T³/(1 − β)`, whatever its history:
//!   at each event this flow aims its plateau at least at that maximum (at most twice its
//!   window), and climbs back towards it faster than from its own last window. It still cuts
//!   at every event, as TCP does at every loss episode: a flow that skipped the cut while
//!   the competitor took it (as an earlier version did whenever its window was below β times
//!   the converged maximum; `docs/design.md`) raised its share at every mistimed event.
//!   A competitor still above it is cut back by its own fast convergence.
//!
//! What the competitor sees of this flow matters as much. Its drains (every 8 s in this mode,
//! to notice the competitor leaving) do not refill: in the delay mode a drain's slow half is
//! followed by a fast one, rate-neutral, but here the fast half overflowed the buffer while
//! this flow's events were suspended for its own drain, and the competitor took every one of
//! those losses (`fair` held 72–77 % of a 4×BDP buffer it joined together with CUBIC).
//!
//! So does how its packets arrive. While it follows BBR's law the sender sends each datagram
//! on its own, when due, instead of in the driver's UDP GSO batches (spec §7.1,
//! `RateMode::batches`): at a buffer the competitor keeps overflowing, a batch's datagrams
//! after the first find it full more often than paced ones, and BBR's law, whose rate follows
//! its own delivery, settles lower. Next to kernel BBR in 1×BDP the batching flow lost about
//! 12 % of what it sent and took 49–57 % (`high`) where the simulator's paced one took 61–64.
//! The CUBIC window law keeps its batches: it cuts once per overflow episode whatever it lost
//! in it, and sent singly it gained nothing (the simulator with the driver's batches modelled:
//! 17 of the matrix's 128 CUBIC runs outside the bounds sent singly, 8 with batches;
//! `docs/design.md`, "Session 64").
//!
//! `high` follows N = 2 flows' window (as MulTCP does for Reno), and cuts by less: β = 0.8.
//! With cuts in step with the competitor's every T seconds, the converged plateaus stand in
//! the ratio N·(1 − 0.7)/(1 − β): 2 at CUBIC's own β, a share of 2/3 — in theory. Measured,
//! `high` fell short of it where it competed longest, in a 1×BDP buffer (the converged
//! plateau is not reached within a 60 s run, and periods read short from a mode's first
//! events): in the simulator 58 % on average joining CUBIC together (`scripts/tcp-matrix.sh`;
//! 6 of 16 runs below 55 %), and in the emulator 44.2 % joining kernel CUBIC together and
//! 54.3 % joining it late. At β = 0.8 the ratio is 3 in theory (75 %), which the cap (below)
//! holds at 69 % of the measured capacity; measured, 61 % on average there, and 12 of 13
//! emulator runs of the four CUBIC points took 59.8–68.1 % (the other, 53.8 %, left the mode
//! for 12 s on a floor that had taken in CUBIC's queue; `docs/design.md`, "Session 66").
//! MulTCP's own decrease for two flows, 0.85, put `high` at 80–95 % in deep buffers.
//!
//! Neither law takes more than one competitor's fair share of the capacity its drains
//! measured (`capacity.rs`): each copies a competitor, and next to one that does not behave
//! as the law assumes (kernel BBR in a deep buffer, not yet recognised) it took up to 89 %.
//!
//! BBR does not cut on loss, and its gain cycle drops the queue from full every eight RTTs:
//! events that are not cuts. A competitor recognised as BBR (the controller's `dips.rs`) is
//! followed on its own terms instead, for the rest of the mode (`follow.rs`); the events are
//! still tracked but no longer move the window. BBR's law starts from the rate the mode was
//! entered with (its bandwidth filter seeded with it): by the time BBR is recognised, BBR's
//! gain cycles have often cut the CUBIC window again and again (in a 1×BDP buffer down to
//! 8–15 Mbit/s), and BBR's law, converging as two BBR flows do, took most of the rest of the
//! run to climb back. Session 56 found that the seed put `fair` and `high` above their bounds
//! next to BBR in 4×BDP (0.638 and 0.803): BBR, next to a flow that starts high in a deep
//! buffer, settles low. Under the cap, kept across the mode's spells, they hold (0.473 and
//! 0.733), and `scripts/tcp-matrix.sh` has 39 runs of 256 outside the bounds instead of 48.
//!
//! **BBR's gain cycle, taken for cuts.** `dips.rs` needs two ProbeRTTs that empty the queue,
//! and in a 1×BDP buffer this flow's CUBIC window holds part of the queue through them: BBR
//! was recognised 20–40 s into the mode, or not at all, and 23 of the 39 runs outside the
//! bounds were such runs. Meanwhile the law sees "cuts" every 1–1.7 s (the gain cycle's
//! overflow and drain; the episode rule lets through at most one per 4 RTTs). A loss-based
//! competitor cannot cut that often: having cut a window of `W` packets to 0.7·W it needs
//! `K = ∛(0.3·W / 0.4)` seconds to regrow it (RFC 9438; 6.7 s for W = 400, half the
//! 100 Mbit/s, 100 ms path), or 0.3·W / 0.53 RTTs in the Reno-friendly region, and its
//! queue is not full again before that. Both exceed 20 RTTs for any window above ~35
//! packets. Five events in a row, each within 20 RTTs of the last, are therefore taken for a
//! rate-based competitor's gain cycle. Next to the CUBIC model, 56 runs of the matrix's
//! CUBIC points (`fair` and `high`, 1×BDP and 4×BDP, shifted 0–1.5 s) had at most two such
//! intervals in a row: this flow's own overflow and a CUBIC cut can come close together, two
//! CUBIC cuts cannot. Next to BBR in 1×BDP runs of 4–9 were the rule. With this rule the
//! matrix has 29 runs outside instead of 39 (the BBR 1×BDP points 23 → 13), and its 128 CUBIC
//! runs are unchanged. Below ~35 packets per competitor (paths of a few Mbit/s and ms) a
//! CUBIC competitor could cycle this fast, and this flow would then follow BBR's law under
//! the same cap; on 18 paths of 10–50 Mbit/s and 10–40 ms none took CUBIC for BBR
//! (`experiments/s58-rhythm/small-bdp/`).

use core::time::Duration;
use std::collections::VecDeque;

use super::filters::WindowedMax;
use super::follow::Follow;
use crate::time::Instant;

/// CUBIC's constant C, packets/s³.
const C_CUBIC: f64 = 0.4;
/// CUBIC's multiplicative decrease: the CUBIC law's for `fair`.
const BETA: f64 = 0.7;
/// The CUBIC law's decrease for `high` (more than one flow's worth; module doc).
const BETA_HIGH: f64 = 0.8;
/// The queue counts as full within this fraction of the deepest queue seen...
const FULL_FRACTION: f64 = 0.1;
/// ...or within this many seconds of it, whichever is more (measurement noise: the delay
/// filter's minimum over three reports reads a little below the true queue).
const FULL_SLACK: f64 = 0.002;
/// A competitor's cut shows as the queue falling this many slacks below full (with the 10 %
/// slack: below 80 % of the deepest queue)...
const DROP_SLACKS: f64 = 2.0;
/// ...or by this fraction of the whole window in time (base RTT + q_full), if that is less,
/// but always by more than the slack plus [`FULL_SLACK`]. A CUBIC competitor holding a share
/// `s` of the flows' windows cuts `0.3·s` of that time: 10 % is a competitor at one third.
/// With the slacks alone, one at a half cut 19 % of a 4×BDP buffer, not 20: its cuts went
/// unseen, this flow cut only for its own losses, and took 61–72 % of the link.
const FALL_OF_WINDOW: f64 = 0.1;
/// The queue falling within this many RTTs of being full is a cut in answer to the overflow:
/// the competitor learns of its loss an RTT later and its window takes up to another RTT to
/// drain from the queue.
const OVERFLOW_WINDOW_RTTS: f64 = 3.0;
/// This flow's loss with the queue full for this long without a break, RTTs, is an event even
/// in an episode that never ended (the queue never fell): nobody else is cutting, so this
/// flow is what keeps it full. Not without the loss: a CUBIC competitor sits on its plateau,
/// just below its last maximum, for seconds, and a queue within the slack of full for
/// 15 RTTs there cut this flow alone, again and again (1×BDP: 11–25 % instead of a half).
/// This flow's own drains do not restart the count.
const STILL_FULL_RTTS: f64 = 15.0;
/// Events closer than this many RTTs are one overflow episode.
const EPISODE_RTTS: f64 = 4.0;
/// The plateau is raised to the converged curve's maximum at most up to this multiple of the
/// window at the event: a missed event makes one period look twice as long and the target
/// eight times as high. The window itself is always cut (β): the plateau only sets how fast
/// it climbs back.
const MAX_JUMP: f64 = 2.0;
/// Intervals between events averaged into T.
const PERIODS: usize = 2;
/// The rate is at most this multiple of what the receiver saw delivered (RFC 5348 limits TFRC
/// to 2·X_recv): a rate the path does not carry only fills the buffer.
const MAX_OVER_DELIVERED: f64 = 1.25;

/// Events this close together, smoothed RTTs, are quicker than a loss-based competitor can
/// regrow what it cut (the module doc, "BBR's gain cycle")...
const RHYTHM_RTTS: f64 = 20.0;
/// ...and this many such intervals in a row (five events) are a rate-based competitor's gain
/// cycle. Next to the CUBIC model no run of the matrix had more than two.
const RHYTHM_RUN: u32 = 4;

/// The deepest queue is the deepest of at least this long...
const DEEPEST_WINDOW: Duration = Duration::from_secs(20);
/// ...or of this many periods between events, whichever is longer. Not of the whole mode: the
/// queue this flow measures moves with its delay floor, and one reading deeper than the
/// buffer (a floor that was lower for a while) made the full buffer look 15 % short of full
/// for good — no event, so no cut, ever again: a `high` flow then held the buffer full at
/// 1.25 × capacity and starved CUBIC into repeated timeouts for the rest of the run
/// (`scripts/tcp-robustness.sh`, 4×BDP, 70 ms, joining after 15 s, 180 s).
const DEEPEST_PERIODS: f64 = 3.0;

/// The delay level of queue `q` (s) over the floor `floor` (µs), µs.
fn level(q: f64, floor: i64) -> i64 {
    floor.saturating_add((q * 1e6) as i64)
}

/// The state of competitive mode.
#[derive(Debug, Clone)]
pub struct Compete {
    /// Flows' worth this one competes as (1 `fair`, 2 `high`).
    n: f64,
    /// Bits per packet.
    packet_bits: f64,
    /// Window, packets, at the last report.
    w: f64,
    /// The curve's plateau, packets.
    w_max: f64,
    /// The window at the last event, packets (fast convergence compares against it).
    w_last: f64,
    /// Seconds from the epoch's start to the plateau.
    k: f64,
    /// Start of the current epoch (the last event, or entering the mode).
    epoch: Instant,
    /// The last intervals between events, seconds, newest first.
    periods: VecDeque<f64>,
    last_event: Option<Instant>,
    /// When the queue was last seen full (cleared by an event).
    full_at: Option<Instant>,
    /// Since when it has been full at its deepest without a break, and how deep that was
    /// (the delay level, s, as in `deepest`).
    full_since: Option<(Instant, f64)>,
    /// The last event that was an overflow (not this flow cutting alone): periods run
    /// between these.
    last_overflow: Option<Instant>,
    /// Delay levels seen, µs: the one-way delay on the feedback's clock (the delay floor
    /// plus the queue), not the queue. Their maximum over [`DEEPEST_WINDOW`] or
    /// [`DEEPEST_PERIODS`], less the floor now, is `q_full`, the full buffer. Kept as levels
    /// because the floor moves: a queue kept as measured then read a full buffer as 84 ms
    /// while the floor was one value and as 68 ms once it had risen by 16 ms — short of full
    /// by more than the slack for good, so no event, no cut, for 21 s of overflows (emulator,
    /// `fair` joining kernel CUBIC in a 4×BDP buffer: 66–68 % of the link). The level is on
    /// the two ends' clocks: a drift of 50 ppm between them moves it 1 ms in 20 s, inside
    /// [`FULL_SLACK`].
    deepest: WindowedMax,
    /// No events before this: the queue still shows this flow's own drain.
    quiet_until: Instant,
    /// The window is not capped by what the path delivered before this: two RTTs after
    /// entering. The mode is entered from a judged drain, at an estimate of a fair share; the
    /// deliveries of the first RTTs still show the drain's half rate and the delay mode's
    /// yielding, not the rate entered with. Capped at once, a flow joining CUBIC late in a
    /// 4×BDP buffer fell from the 48 Mbit/s it entered with to 1.25 × the 15 it had been
    /// getting, and the competitor's next cut, 0.5 s later, set its plateau there: 14 s at
    /// 17 Mbit/s, 39.5 % of the fairness window (simulator, `scenarios/tcp`); uncapped for
    /// two RTTs, 55.1 %.
    validate_from: Instant,
    /// The queue has fallen from full since the last event (or there was none).
    armed: bool,
    /// The competitor is rate-based (BBR, recognised by `dips.rs`): it does not cut on loss,
    /// and this flow follows its law. Kept for the rest of the mode.
    rate_based: bool,
    /// The law followed then (`follow.rs`).
    follow: Follow,
    /// The most this flow takes, bits/s: a fair share of the capacity the drains measured
    /// (`capacity.rs`; unbounded without a measurement).
    cap: f64,
    /// The most BBR's law starts from, bits/s (`capacity.rs`, "Seeding BBR's law").
    seed_limit: f64,
    /// The rate the mode was entered with, bits/s: one competitor's fair share of what this
    /// flow measured the path to carry (`drained.rs`, `capacity.rs`, "Entering").
    entered: f64,
    /// Intervals in a row between the CUBIC law's events shorter than [`RHYTHM_RTTS`].
    quick: u32,
    /// When the events' rhythm showed a rate-based competitor (see [`RHYTHM_RUN`]).
    rhythm_seen: Option<Instant>,
}

impl Compete {
    /// Enter competitive mode at `now`, sending at `rate` (bits/s) with smoothed RTT `srtt`;
    /// `q` is the queueing delay now (s), measured from the delay floor `floor` (µs).
    pub fn new(
        now: Instant,
        n: f64,
        rate: f64,
        srtt: Duration,
        packet_bits: f64,
        (q, floor): (f64, i64),
    ) -> Self {
        let w = (rate * srtt.as_secs_f64() / packet_bits).max(2.0);
        Compete {
            n,
            packet_bits,
            w,
            // The curve starts at its plateau: probing upward from the rate entered with.
            w_max: w,
            w_last: w,
            k: 0.0,
            epoch: now,
            periods: VecDeque::with_capacity(PERIODS),
            last_event: None,
            full_at: None,
            full_since: None,
            last_overflow: None,
            deepest: {
                let mut m = WindowedMax::new(DEEPEST_WINDOW);
                m.push(now, level(q, floor));
                m
            },
            // The rate has just changed: the next RTTs' queue shows the change, not a cut.
            quiet_until: now + srtt * 2,
            validate_from: now + srtt * 2,
            armed: true,
            rate_based: false,
            follow: Follow::new(now, srtt, n),
            cap: f64::INFINITY,
            seed_limit: f64::INFINITY,
            entered: rate,
            quick: 0,
            rhythm_seen: None,
        }
    }

    /// This flow is draining until `until`: the queue's fall and return until then are its
    /// own doing, not a competitor's cut.
    pub fn quiet_until(&mut self, until: Instant) {
        self.quiet_until = self.quiet_until.max(until);
        self.full_at = None;
    }

    /// Take at most `cap` bits/s from now on (`capacity.rs`).
    pub fn set_cap(&mut self, cap: f64) {
        self.cap = cap;
    }

    /// Start BBR's law from at most `limit` bits/s (`capacity.rs`, "Seeding BBR's law").
    pub fn set_seed_limit(&mut self, limit: f64) {
        self.seed_limit = limit;
    }

    /// The competitor is rate-based: follow its law from now on, its bandwidth filter
    /// starting from the rate the mode was entered with, at most the seed limit (see the
    /// module doc).
    pub fn set_rate_based(&mut self, now: Instant) {
        if !self.rate_based {
            self.follow.seed(now, self.entered.min(self.seed_limit));
        }
        self.rate_based = true;
    }

    /// Whether this flow follows a rate-based competitor's law.
    pub fn rate_based(&self) -> bool {
        self.rate_based
    }

    /// The multiplicative decrease at an event: [`BETA_HIGH`] for more than one flow's worth,
    /// CUBIC's [`BETA`] otherwise.
    fn beta(&self) -> f64 {
        if self.n > 1.0 {
            BETA_HIGH
        } else {
            BETA
        }
    }

    /// When the rhythm of the events showed a rate-based competitor, if it did: BBR's gain
    /// cycle, taken for cuts (see the module doc).
    pub fn rhythm_seen(&self) -> Option<Instant> {
        self.rhythm_seen
    }

    /// A cut or an overflow at `now` under the CUBIC law: counts the events that come sooner
    /// than a loss-based competitor could have regrown its cut (module doc, "BBR's gain
    /// cycle"), and after [`RHYTHM_RUN`] such intervals in a row follows BBR's law.
    fn note_rhythm(&mut self, now: Instant, rtt: f64) {
        let quick = self
            .last_event
            .is_some_and(|t| now.saturating_since(t).as_secs_f64() < RHYTHM_RTTS * rtt);
        self.quick = if quick { self.quick + 1 } else { 0 };
        if self.quick >= RHYTHM_RUN {
            self.rhythm_seen = Some(now);
            self.set_rate_based(now);
        }
    }

    /// An event at `now` begins an overflow episode: the next event needs the queue to fall
    /// and fill again (or this flow's loss after [`STILL_FULL_RTTS`] of a queue that stayed
    /// full).
    fn episode_begins(&mut self, now: Instant) {
        self.last_event = Some(now);
        self.armed = false;
        self.full_at = None;
        self.full_since = None;
    }

    /// Whether this report shows an event (see the module doc), and if so whether this flow
    /// cuts alone (a queue stuck full: no period is measured).
    /// `q`: queueing delay measured from the delay floor `floor` (µs), `base`: the path's RTT
    /// without queue, `rtt`: smoothed RTT (s).
    fn event(
        &mut self,
        now: Instant,
        (q, floor): (f64, i64),
        rtt: f64,
        base: f64,
        lost: bool,
    ) -> Option<bool> {
        let age =
            |t: Option<Instant>| t.map_or(f64::MAX, |t| now.saturating_since(t).as_secs_f64());
        let level_now = level(q, floor);
        self.deepest.push(now, level_now);
        let full_us = self.deepest.get(now).unwrap_or(level_now);
        let q_full = (full_us.saturating_sub(floor) as f64 / 1e6).max(q);
        let full_level = full_us as f64 / 1e6;
        // Still filling (by more than measurement noise since it became full): not stuck.
        if self
            .full_since
            .is_some_and(|(_, at)| full_level > at + FULL_SLACK)
        {
            self.full_since = Some((now, full_level));
        }
        let slack = (q_full * FULL_FRACTION).max(FULL_SLACK);
        if q >= q_full - slack {
            self.full_at = Some(now);
            self.full_since.get_or_insert((now, full_level));
        } else {
            self.full_since = None;
        }
        // One event per overflow episode: this flow's loss, the competitor's cut and the
        // queue's fall that follows are the same overflow (TCP reduces once per recovery).
        // After an event the queue must fall below the cut level and fill again first.
        let fall =
            (slack + FULL_SLACK).max((DROP_SLACKS * slack).min(FALL_OF_WINDOW * (base + q_full)));
        let fallen = q < q_full - fall;
        let armed = self.armed;
        if !self.armed && fallen {
            self.armed = true;
            self.full_at = None;
        }
        if now < self.quiet_until || age(self.last_event) < EPISODE_RTTS * rtt {
            return None;
        }
        let cut = armed && fallen && age(self.full_at) <= OVERFLOW_WINDOW_RTTS * rtt;
        // This flow's own loss with the queue full is the overflow too.
        let overflow = armed && lost && age(self.full_at) <= rtt;
        let stuck = lost
            && self.full_since.is_some()
            && age(self.full_since.map(|(t, _)| t)) >= STILL_FULL_RTTS * rtt
            && age(self.last_event) >= STILL_FULL_RTTS * rtt;
        (cut || overflow || stuck).then_some(stuck)
    }

    /// An overflow at `now` ends an epoch: the mean of the last [`PERIODS`] epochs, seconds
    /// (none before the second overflow of the mode). The full level is then the deepest queue
    /// of at least [`DEEPEST_PERIODS`] of them.
    fn epoch_ended(&mut self, now: Instant) -> Option<f64> {
        let last = self.last_overflow.replace(now)?;
        if self.periods.len() == PERIODS {
            self.periods.pop_back();
        }
        self.periods
            .push_front(now.saturating_since(last).as_secs_f64());
        let t = self.periods.iter().sum::<f64>() / self.periods.len() as f64;
        self.deepest
            .set_window(DEEPEST_WINDOW.max(Duration::from_secs_f64(DEEPEST_PERIODS * t)));
        Some(t)
    }

    /// A report: queueing delay `q` (s) and the delay floor it is measured from (µs), smoothed
    /// RTT, the RTT now (the path's minimum plus `q`), whether it reported loss, the delivery
    /// rate `delivered` (bits/s). Returns the rate to pace at.
    pub fn on_report(
        &mut self,
        now: Instant,
        (q, floor): (f64, i64),
        srtt: Duration,
        rtt_now: Duration,
        lost: bool,
        delivered: Option<f64>,
    ) -> f64 {
        let rtt = srtt.as_secs_f64().max(1e-4);
        let nc = self.n * C_CUBIC;
        let beta = self.beta();
        self.follow
            .observe(now, rtt, q, rtt_now, delivered, self.rate_based);
        let base = (rtt_now.as_secs_f64() - q).max(0.0);
        let event = self.event(now, (q, floor), rtt, base, lost);
        if self.rate_based {
            if event.is_some() {
                self.episode_begins(now);
            }
            let fallback = self.w * self.packet_bits / rtt;
            let rate = self
                .follow
                .rate(now, rtt, self.packet_bits, fallback)
                .min(self.cap);
            self.w = (rate * rtt / self.packet_bits).max(2.0);
            return rate;
        }
        if event == Some(false) {
            self.note_rhythm(now, rtt);
        }
        match event {
            Some(stuck) => {
                let w = self.w;
                // Fast convergence: a flow cut below its window at the last cut lowers its
                // plateau (RFC 9438 §4.7).
                let mut plateau = if w < self.w_last {
                    w * (1.0 + beta) / 2.0
                } else {
                    w
                };
                self.w_last = w;
                if !stuck {
                    // An epoch just ended: a converged CUBIC flow cut every T seconds peaks at
                    // C·T³/(1 − β). The time from entering the mode to the first overflow is
                    // a part of an epoch, not one: T is measured from the second.
                    if let Some(t) = self.epoch_ended(now) {
                        let target = (nc * t.powi(3) / (1.0 - beta)).min(MAX_JUMP * w);
                        plateau = plateau.max(target);
                    }
                }
                self.w_max = plateau;
                // Every event cuts, as TCP does on every loss episode; the plateau is where
                // the curve flattens (RFC 9438's K for a window that starts at β·W, not at
                // β·W_max).
                self.w = (w * beta).max(2.0);
                self.k = ((self.w_max - self.w).max(0.0) / nc).cbrt();
                self.epoch = now;
                self.episode_begins(now);
            }
            None => {
                let t = now.saturating_since(self.epoch).as_secs_f64();
                self.w = (nc * (t - self.k).powi(3) + self.w_max).max(2.0);
            }
        }
        if let Some(d) = delivered.filter(|_| now >= self.validate_from) {
            // Window validation (as RFC 7661 for TCP): a window the path does not carry is
            // not grown, or a later cut would cut only the excess and change nothing.
            let carried = MAX_OVER_DELIVERED * d * rtt / self.packet_bits;
            self.w = self.w.min(carried.max(2.0));
        }
        // Nor more than a fair share of the bottleneck, whatever the competitor leaves.
        let fair = self.cap * rtt / self.packet_bits;
        self.w = self.w.min(fair.max(2.0));
        self.w * self.packet_bits / rtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKET: f64 = 12_000.0;

    #[test]
    fn the_rate_entered_with_is_kept_at_first() {
        let srtt = Duration::from_millis(100);
        let mut c = Compete::new(Instant::ZERO, 1.0, 40e6, srtt, PACKET, (0.05, 0));
        let r = c.on_report(Instant::ZERO, (0.05, 0), srtt, srtt, false, None);
        assert!((r / 40e6 - 1.0).abs() < 0.01, "{r}");
    }

    /// The rate entered with is a share estimate above what the flow got while it yielded
    /// and drained: delivery caps the window only two RTTs later, when it can show the new rate.
    #[test]
    fn delivery_caps_the_window_only_once_it_can_show_the_rate_entered_with() {
        let srtt = Duration::from_millis(100);
        let mut c = Compete::new(Instant::ZERO, 1.0, 40e6, srtt, PACKET, (0.05, 0));
        let mut t = Instant::ZERO;
        let mut rates = Vec::new();
        for _ in 0..30 {
            t += Duration::from_millis(10);
            rates.push(c.on_report(t, (0.05, 0), srtt, srtt, false, Some(10e6)));
        }
        // Before two RTTs (200 ms): the rate entered with.
        assert!(rates[..19].iter().all(|r| *r > 39e6), "{rates:?}");
        // After: at most 1.25 × what was delivered.
        assert!(rates[20..].iter().all(|r| *r <= 12.5e6 + 1.0), "{rates:?}");
    }

    /// Reports every 10 ms for `secs`: the queue at 50 ms, full (100 ms) for the reports of
    /// one RTT every `every` seconds and then falling to 60 ms (a competitor's cut).
    fn drive(c: &mut Compete, t: &mut Instant, secs: f64, every: f64, loss: bool) -> f64 {
        let srtt = Duration::from_millis(100);
        let mut rate = 0.0;
        let steps = (secs / 0.01) as u64;
        let period = if every > 0.0 {
            (every / 0.01) as u64
        } else {
            u64::MAX
        };
        for i in 0..steps {
            *t += Duration::from_millis(10);
            let phase = i % period;
            let q = if every > 0.0 && phase < 10 {
                0.1
            } else if every > 0.0 && phase < 15 {
                0.06
            } else {
                0.08
            };
            rate = c.on_report(*t, (q, 0), srtt, srtt, loss, None);
        }
        rate
    }

    #[test]
    fn random_loss_is_not_an_event() {
        // Loss in every report, but the queue never near its deepest: no events, and the
        // window probes upward as CUBIC's does.
        let srtt = Duration::from_millis(100);
        let mut c = Compete::new(Instant::ZERO, 1.0, 40e6, srtt, PACKET, (0.1, 0));
        let mut t = Instant::ZERO;
        let rate = drive(&mut c, &mut t, 5.0, 0.0, true);
        assert!(rate > 40e6, "{rate}");
    }

    #[test]
    fn cuts_every_t_seconds_put_the_window_on_cubics_converged_curve() {
        let srtt = Duration::from_millis(100);
        // Entering far below: after some epochs of 4 s the window peaks at 0.4·64/0.3 ≈ 85
        // packets, as a CUBIC flow cut every 4 s does.
        let mut c = Compete::new(Instant::ZERO, 1.0, 1e6, srtt, PACKET, (0.1, 0));
        let mut t = Instant::ZERO;
        drive(&mut c, &mut t, 40.05, 4.0, false);
        let expect = C_CUBIC * 64.0 / (1.0 - BETA);
        assert!(
            (c.w_max / expect - 1.0).abs() < 0.1,
            "{} vs {expect}",
            c.w_max
        );
        // `high` follows two flows' window and cuts by less: N·(1 − 0.7)/(1 − 0.8) = 3 times
        // the plateau.
        let mut h = Compete::new(Instant::ZERO, 2.0, 1e6, srtt, PACKET, (0.1, 0));
        let mut t = Instant::ZERO;
        drive(&mut h, &mut t, 40.05, 4.0, false);
        let ratio = 2.0 * (1.0 - BETA) / (1.0 - BETA_HIGH);
        assert!(
            (h.w_max / c.w_max / ratio - 1.0).abs() < 0.1,
            "{} vs {}",
            h.w_max,
            c.w_max
        );
    }

    /// One reading deeper than the buffer (a delay floor that was lower for a while) must
    /// not make the full buffer look short of full for good: once it is older than the
    /// window, the buffer is full again, and this flow's losses there are events.
    #[test]
    fn a_reading_deeper_than_the_buffer_is_forgotten() {
        let srtt = Duration::from_millis(100);
        let mut c = Compete::new(Instant::ZERO, 1.0, 80e6, srtt, PACKET, (0.118, 0));
        let mut t = Instant::ZERO;
        let mut first = None;
        for i in 0..3000 {
            t += Duration::from_millis(10);
            c.on_report(t, (0.101, 0), srtt, srtt, true, None);
            if c.last_event.is_some() && first.is_none() {
                first = Some(i);
            }
        }
        let first = first.expect("no event in 30 s of loss at a full buffer");
        // Not before the deep reading left the window (20 s).
        assert!(first >= 1990, "{first}");
    }

    /// The delay floor moves (a window expires, a drain finds a lower minimum): the full
    /// buffer is the same delay level, read as a shorter queue. It must still be full.
    #[test]
    fn a_floor_that_rises_does_not_hide_the_full_buffer() {
        let srtt = Duration::from_millis(100);
        let mut c = Compete::new(Instant::ZERO, 1.0, 40e6, srtt, PACKET, (0.1, 0));
        let mut t = Instant::ZERO;
        let mut events_after = 0;
        // Overflows every 4 s (full for 100 ms with this flow's loss, then a cut to 60 ms);
        // after 12 s the floor rises by 16 ms and every reading falls by as much.
        for i in 0..2400 {
            t += Duration::from_millis(10);
            let phase = i % 400;
            let level = if phase < 10 {
                0.1
            } else if phase < 15 {
                0.06
            } else {
                0.08
            };
            let risen = i >= 1200;
            let floor = if risen { 16_000 } else { 0 };
            let q = level - floor as f64 / 1e6;
            let before = c.last_event;
            c.on_report(t, (q, floor), srtt, srtt, phase < 10, None);
            events_after += usize::from(risen && c.last_event != before);
        }
        // Overflows at 16, 20 and 24 s: each is an event.
        assert_eq!(events_after, 3);
    }

    /// BBR's gain cycle drops the queue from full every few RTTs: events the window law cuts
    /// for each time, and the rate-based law does not. (Every 2.5 s here, 25 RTTs: too slow
    /// for the rhythm to recognise, so the window law keeps cutting.)
    #[test]
    fn a_rate_based_competitor_is_followed_not_cut_for() {
        let srtt = Duration::from_millis(100);
        let run = |rate_based: bool| {
            let mut c = Compete::new(Instant::ZERO, 1.0, 40e6, srtt, PACKET, (0.1, 0));
            if rate_based {
                c.set_rate_based(Instant::ZERO);
            }
            let mut t = Instant::ZERO;
            let mut rates = Vec::new();
            for i in 0..1000 {
                t += Duration::from_millis(10);
                let q = if i % 250 < 10 { 0.1 } else { 0.06 };
                rates.push(c.on_report(t, (q, 0), srtt, srtt, false, Some(40e6)));
            }
            assert!(c.last_event.is_some(), "no events seen");
            rates[500..].iter().sum::<f64>() / 500.0
        };
        let followed = run(true);
        assert!((followed / (0.96 * 40e6) - 1.0).abs() < 0.05, "{followed}");
        let cut = run(false);
        assert!(cut < 0.7 * followed, "{cut} {followed}");
    }

    /// Events every `every` seconds (the queue full for 100 ms, then fallen), srtt 100 ms,
    /// for `secs`: when the rhythm showed a rate-based competitor, if it did.
    fn rhythm(every: f64, secs: f64) -> Option<Instant> {
        let srtt = Duration::from_millis(100);
        let mut c = Compete::new(Instant::ZERO, 1.0, 40e6, srtt, PACKET, (0.1, 0));
        let mut t = Instant::ZERO;
        drive(&mut c, &mut t, secs, every, false);
        assert!(c.last_event.is_some(), "no events seen");
        assert_eq!(c.rate_based(), c.rhythm_seen().is_some());
        c.rhythm_seen()
    }

    /// Cuts every second (BBR's gain cycles at 50 ms) come sooner than a loss-based
    /// competitor could regrow what it cut: after five of them, BBR's law; cuts every 2.5 s
    /// (25 RTTs) are CUBIC's, however many.
    #[test]
    fn the_gain_cycle_s_rhythm_is_taken_for_a_rate_based_competitor() {
        let seen = rhythm(1.0, 10.0).expect("not recognised");
        // The fifth event: the first is the queue's fall as the quiet after entering ends
        // (0.2 s), the next ones a second apart.
        let at = seen.saturating_since(Instant::ZERO).as_secs_f64();
        assert!((4.0..=4.5).contains(&at), "{at}");
        assert_eq!(rhythm(2.5, 60.0), None);
    }

    /// A queue that never falls after an overflow is still this flow's to cut when its own
    /// packets keep being lost there; a full queue without loss (a CUBIC competitor on its
    /// plateau, just below its last maximum) is not.
    #[test]
    fn a_queue_kept_full_with_nobody_cutting_is_cut_by_this_flow() {
        let srtt = Duration::from_millis(100);
        let run = |lost: bool| {
            let mut c = Compete::new(Instant::ZERO, 1.0, 80e6, srtt, PACKET, (0.1, 0));
            let mut t = Instant::ZERO;
            let mut events = 0;
            for _ in 0..400 {
                t += Duration::from_millis(10);
                let before = c.last_event;
                c.on_report(t, (0.1, 0), srtt, srtt, lost, None);
                events += usize::from(c.last_event != before);
            }
            events
        };
        // The first loss is the overflow; the queue never falls, so the next ones come every
        // STILL_FULL_RTTS (1.5 s here).
        assert_eq!(run(true), 3);
        assert_eq!(run(false), 0);
    }

    /// Under either law the flow takes at most the cap it is given (`capacity.rs`: a fair
    /// share of the capacity the drains measured), however much room the competitor leaves
    /// (a queue that never falls from full: no event, and the CUBIC window grows on).
    #[test]
    fn neither_law_takes_more_than_its_cap() {
        let srtt = Duration::from_millis(100);
        let run = |rate_based: bool, cap: f64| {
            let mut c = Compete::new(Instant::ZERO, 1.0, 40e6, srtt, PACKET, (0.1, 0));
            if rate_based {
                c.set_rate_based(Instant::ZERO);
            }
            c.set_cap(cap);
            let mut t = Instant::ZERO;
            let mut rate = 0.0_f64;
            for _ in 0..3000 {
                t += Duration::from_millis(10);
                // Delivery keeps up with whatever is sent: the competitor yields.
                let d = Some(rate.max(40e6));
                rate = c.on_report(t, (0.05, 0), srtt, srtt, false, d);
            }
            rate
        };
        for rate_based in [false, true] {
            // Uncapped, the laws grow past a half (the CUBIC window without bound).
            assert!(run(rate_based, f64::INFINITY) > 60e6, "{rate_based}");
            let capped = run(rate_based, 52e6);
            assert!(
                capped <= 52e6 + 1.0 && capped > 45e6,
                "{rate_based} {capped}"
            );
        }
    }

    /// BBR's law starts from the rate the mode was entered with, not from what the CUBIC
    /// window had sunk to by the time BBR was recognised, and keeps it only while delivery
    /// does.
    #[test]
    fn bbr_s_law_starts_from_the_rate_entered_with_at_most_the_seed_limit() {
        let srtt = Duration::from_millis(50);
        let mut c = Compete::new(Instant::ZERO, 1.0, 50e6, srtt, PACKET, (0.05, 0));
        // Reports every 10 ms, 10 Mbit/s delivered: the rates paced from report `from` on.
        let step = |c: &mut Compete, from: u32, n: u32| -> Vec<f64> {
            (from..from + n)
                .map(|i| {
                    let t = Instant::ZERO + Duration::from_millis(10) * i;
                    c.on_report(t, (0.05, 0), srtt, srtt, false, Some(10e6))
                })
                .collect()
        };
        // The CUBIC law for 2 s, then BBR is recognised.
        step(&mut c, 1, 200);
        c.set_rate_based(Instant::ZERO + Duration::from_secs(2));
        // Over the filter's span (10 RTTs) the law paces near 0.96 × 50 Mbit/s...
        let early = step(&mut c, 201, 40);
        let mean = early.iter().sum::<f64>() / early.len() as f64;
        assert!(mean > 40e6, "{mean}");
        // ...and falls back to what is delivered once the seed has left the filter.
        let late = step(&mut c, 241, 200);
        assert!(late[199] < 15e6, "{}", late[199]);

        // A seed limit below the rate entered with bounds the start (`capacity.rs`): the same
        // run, the law never paced above 1.25 × 0.96 × 20 Mbit/s over the filter's span.
        let mut c = Compete::new(Instant::ZERO, 1.0, 50e6, srtt, PACKET, (0.05, 0));
        step(&mut c, 1, 200);
        c.set_seed_limit(20e6);
        c.set_rate_based(Instant::ZERO + Duration::from_secs(2));
        let early = step(&mut c, 201, 40);
        let most = early.iter().copied().fold(0.0, f64::max);
        assert!(most <= 1.25 * 0.96 * 20e6 + 1.0, "{most}");
        assert!(most > 20e6, "{most}");
    }
}
