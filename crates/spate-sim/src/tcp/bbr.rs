//! BBR version 1 as Linux 6.1 runs it (`net/ipv4/tcp_bbr.c`), so simulated scenarios can put
//! kernel BBR on a bottleneck beside Spate.
//!
//! # In a nutshell
//!
//! ```text
//! sample    per ACK, from the most recently sent segment it delivered (tcp_rate.c):
//!           bw = segments delivered since it was sent / max(send interval, ACK interval);
//!           no sample if that interval is shorter than min_rtt
//! BtlBw     windowed maximum of bw over 10 round trips
//! RTprop    minimum RTT over 10 s; when it expires: ProbeRTT
//! pacing    gain · BtlBw · 0.99           cwnd = cwnd_gain · BtlBw · RTprop + 3 TSO bursts
//! STARTUP   gains 2/ln 2 (2.89) until BtlBw grew < 25 % in 3 rounds, then
//! DRAIN     pacing 1/2.89 until in flight ≤ one BDP, then
//! PROBE_BW  cwnd gain 2, pacing gains cycling 1.25, 0.75, 1 ×6, one min_rtt each (1.25 runs
//!           until in flight reaches 1.25 BDP or a loss; 0.75 ends early once in flight ≤ BDP);
//!           the cycle starts at a random phase other than 0.75
//! PROBE_RTT every 10 s without a lower RTT: cwnd 4 segments for 200 ms and one round, then
//!           back, the window restored
//! loss      no reduction of the model: cwnd −= segments lost in the ACK; on entering
//!           recovery cwnd = in flight + acked, held there for one round (packet conservation);
//!           on leaving it the window before recovery is restored. A timeout restarts from
//!           one segment and grows by what is acked, up to the target.
//! lt_bw     policer detection: when two intervals of 4–16 rounds, each ending in a loss with
//!           ≥ 20 % of segments lost, deliver within 1/8 of each other, BBR paces at their
//!           mean with gain 1 for 48 rounds
//! ```
//!
//! Left out, and why that is safe here: the ACK-aggregation allowance (`extra_acked`: the
//! simulated and emulated receivers acknowledge every segment or every second one, evenly),
//! idle restarts and app-limited samples (the lab's flows always have data and never go
//! idle; Linux also marks ProbeRTT's samples app-limited, but a sample below the windowed
//! maximum cannot lower it anyway), pacing in TSO bursts (segments are paced
//! one by one: at the lab's rates a burst is 2–8 segments, 0.1–1 ms) and the receive window.
//! The last shows on one path: kernel BBR at 250 Mbit/s, 200 ms, 1 % loss in the emulator
//! filled the link within 6 s in two runs of four (209 and 210 Mbit/s over 60 s) and took
//! ~25 s in the other two (150, 155) — its start-up ended at a low rate, probably while the
//! receiver's autotuned window was still small, and gain cycling then adds 25 % per 8 rounds.
//! The model does the former (215–217 Mbit/s over five seeds). On pipe 12 model and kernel
//! agree within 2 % (`docs/results/tcp/README.md`).

use core::time::Duration;
use std::collections::VecDeque;

use spate_proto::Instant;

/// STARTUP's gains: 2/ln 2, the smallest that doubles the delivery rate every round trip.
const HIGH_GAIN: f64 = 2885.0 / 1000.0;
/// DRAIN's pacing gain: the inverse, to empty the queue STARTUP made in one round.
const DRAIN_GAIN: f64 = 1000.0 / 2885.0;
/// PROBE_BW's cwnd gain.
const CWND_GAIN: f64 = 2.0;
/// PROBE_BW's pacing gains, one phase per min_rtt.
const PACING_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Phases a cycle may start at: any but the 0.75 one (Linux `bbr_cycle_rand`).
const CYCLE_RAND: u64 = 7;
/// BtlBw's window, round trips (`bbr_bw_rtts`: the cycle and two more).
const BW_RTTS: u64 = PACING_GAINS.len() as u64 + 2;
/// RTprop's window.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// Time at the ProbeRTT window.
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// The smallest cwnd, segments (also ProbeRTT's).
const CWND_MIN: f64 = 4.0;
/// STARTUP ends when BtlBw grew by less than this factor...
const FULL_BW_THRESH: f64 = 1.25;
/// ...in this many rounds in a row.
const FULL_BW_CNT: u32 = 3;
/// Pacing runs 1 % below the estimate (`bbr_pacing_margin_percent`).
const PACING_MARGIN: f64 = 0.01;
/// Linux's initial window, segments.
const INIT_CWND: f64 = 10.0;
/// Below this pacing rate (bits/s) a TSO burst is one segment, above it two at least.
const MIN_TSO_RATE: f64 = 1_200_000.0;
/// A TSO burst is about this many seconds of pacing (`sk_pacing_shift` 10: 1/1024 s).
const TSO_BURST_S: f64 = 1.0 / 1024.0;
/// lt_bw: rounds per sampling interval, at least...
const LT_INTERVAL_MIN_RTTS: u32 = 4;
/// ...and the loss rate (lost / delivered) that makes an interval a policed one: 50/256.
const LT_LOSS_THRESH: f64 = 50.0 / 256.0;
/// Two intervals agree within this fraction of the rate...
const LT_BW_RATIO: f64 = 1.0 / 8.0;
/// ...or this many bytes per second.
const LT_BW_DIFF: f64 = 4000.0;
/// Rounds lt_bw is used for.
const LT_BW_MAX_RTTS: u32 = 48;

/// TCP's loss-recovery state, as BBR sees it (`icsk_ca_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    /// No recovery.
    Open,
    /// Fast recovery after a loss found by SACK.
    Recovery,
    /// Recovery after a retransmission timeout.
    Loss,
}

/// One delivery-rate sample (Linux `struct rate_sample`).
#[derive(Debug, Clone, Copy)]
pub struct RateSample {
    /// Segments delivered over `interval`.
    pub delivered: u64,
    /// The connection's delivered count when the sampled segment was sent.
    pub prior_delivered: u64,
    /// max(send interval, ACK interval).
    pub interval: Duration,
}

/// What one ACK told BBR.
#[derive(Debug, Clone, Copy)]
pub struct AckInfo {
    /// When it arrived.
    pub now: Instant,
    /// Segments it newly delivered.
    pub acked: u64,
    /// Segments newly found lost while processing it.
    pub losses: u64,
    /// Segments in flight before it.
    pub prior_in_flight: u64,
    /// Segments in flight after it.
    pub in_flight: u64,
    /// Segments delivered so far, after it.
    pub delivered: u64,
    /// Segments declared lost so far.
    pub lost: u64,
    /// The RTT of the newest segment it acknowledged that was sent once.
    pub rtt: Option<Duration>,
    /// The delivery-rate sample, if valid.
    pub rate: Option<RateSample>,
    /// The recovery state after it.
    pub state: CaState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// One BBR connection's model state.
#[derive(Debug, Clone)]
pub struct Bbr {
    mode: Mode,
    /// Congestion window, segments.
    pub cwnd: f64,
    /// Pacing rate, segments per second (0: none yet).
    pub pacing_rate: f64,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// (round, bw in segments/s), decreasing bw: the windowed maximum at the front.
    bw: VecDeque<(u64, f64)>,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    has_seen_rtt: bool,
    round_count: u64,
    next_rtt_delivered: u64,
    round_start: bool,
    full_bw: f64,
    full_bw_cnt: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_stamp: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    prior_cwnd: f64,
    prev_state: CaState,
    packet_conservation: bool,
    /// Segments delivered at the last ACK (the cycle's clock runs on delivery times).
    delivered_stamp: Instant,
    lt: LongTerm,
    /// A small generator for the cycle's random start (splitmix64 state).
    rng: u64,
}

#[derive(Debug, Clone, Default)]
struct LongTerm {
    use_bw: bool,
    bw: f64,
    is_sampling: bool,
    rtt_cnt: u32,
    last_stamp: Option<Instant>,
    last_delivered: u64,
    last_lost: u64,
}

impl Bbr {
    /// A connection starting now; `seed` picks its gain cycles' starting phases.
    pub fn new(now: Instant, seed: u64) -> Self {
        Bbr {
            mode: Mode::Startup,
            cwnd: INIT_CWND,
            // Linux without an RTT sample yet: the initial window per millisecond.
            pacing_rate: HIGH_GAIN * INIT_CWND / 0.001,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            bw: VecDeque::new(),
            min_rtt: None,
            min_rtt_stamp: now,
            has_seen_rtt: false,
            round_count: 0,
            next_rtt_delivered: 0,
            round_start: false,
            full_bw: 0.0,
            full_bw_cnt: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: now,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            prior_cwnd: 0.0,
            prev_state: CaState::Open,
            packet_conservation: false,
            delivered_stamp: now,
            lt: LongTerm::default(),
            rng: seed,
        }
    }

    fn random(&mut self, n: u64) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }

    /// BtlBw, segments per second.
    fn max_bw(&self) -> f64 {
        self.bw.front().map_or(0.0, |&(_, b)| b)
    }

    fn bw(&self) -> f64 {
        if self.lt.use_bw {
            self.lt.bw
        } else {
            self.max_bw()
        }
    }

    /// `bbr_bdp` + `bbr_quantization_budget`: the window `gain` BDPs need, segments.
    fn inflight(&self, bw: f64, gain: f64) -> f64 {
        let Some(min_rtt) = self.min_rtt else {
            return INIT_CWND;
        };
        let bdp = (bw * min_rtt.as_secs_f64() * gain).ceil();
        let mut w = bdp + 3.0 * self.tso_segs();
        // Rounded up to even, as Linux does for delayed ACKs.
        w = 2.0 * (w / 2.0).ceil();
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            w += 2.0;
        }
        w
    }

    /// Segments per TSO burst (`bbr_tso_segs_goal`).
    fn tso_segs(&self) -> f64 {
        let rate_bits = self.pacing_rate * super::MSS as f64 * 8.0;
        let min = if rate_bits < MIN_TSO_RATE { 1.0 } else { 2.0 };
        (self.pacing_rate * TSO_BURST_S).floor().clamp(min, 127.0)
    }

    /// A retransmission timeout (`bbr_ssthresh` saves the window, `tcp_enter_loss` sets it to
    /// one segment, `bbr_set_state` to Loss).
    pub fn on_timeout(&mut self, delivered: u64, lost: u64) {
        self.save_cwnd();
        self.cwnd = 1.0;
        self.prev_state = CaState::Loss;
        self.full_bw = 0.0;
        self.round_start = true;
        self.lt_sampling(delivered, lost, 1);
    }

    fn save_cwnd(&mut self) {
        if self.prev_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    /// An ACK (`bbr_main`).
    pub fn on_ack(&mut self, a: &AckInfo) {
        if a.state == CaState::Recovery && self.prev_state == CaState::Open {
            // Entering recovery calls `ssthresh` first.
            self.save_cwnd();
        }
        if a.acked > 0 {
            self.delivered_stamp = a.now;
        }
        if !self.has_seen_rtt {
            if let Some(r) = a.rtt {
                self.has_seen_rtt = true;
                self.pacing_rate = HIGH_GAIN * INIT_CWND / r.as_secs_f64().max(1e-6);
            }
        }
        self.update_bw(a);
        self.update_cycle_phase(a);
        self.check_full_bw_reached();
        self.check_drain(a);
        self.update_min_rtt(a);
        self.update_gains();
        let bw = self.bw();
        let rate = self.pacing_gain * bw * (1.0 - PACING_MARGIN);
        if rate > 0.0 && (self.full_bw_reached || rate > self.pacing_rate) {
            self.pacing_rate = rate;
        }
        self.set_cwnd(a, bw);
    }

    fn update_bw(&mut self, a: &AckInfo) {
        self.round_start = false;
        let Some(rs) = a.rate else { return };
        if rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = a.delivered;
            self.round_count += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_sampling(a.delivered, a.lost, a.losses);
        let bw = rs.delivered as f64 / rs.interval.as_secs_f64();
        let round = self.round_count;
        while self.bw.back().is_some_and(|&(_, b)| b <= bw) {
            self.bw.pop_back();
        }
        self.bw.push_back((round, bw));
        while self.bw.front().is_some_and(|&(r, _)| r + BW_RTTS <= round) {
            self.bw.pop_front();
        }
    }

    fn lt_sampling(&mut self, delivered: u64, lost: u64, losses: u64) {
        if self.lt.use_bw {
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt.rtt_cnt += 1;
                if self.lt.rtt_cnt >= LT_BW_MAX_RTTS {
                    self.lt = LongTerm::default();
                    self.reset_probe_bw();
                }
            }
            return;
        }
        if !self.lt.is_sampling {
            if losses == 0 {
                return;
            }
            self.lt_reset_interval(delivered, lost);
            self.lt.is_sampling = true;
        }
        if self.round_start {
            self.lt.rtt_cnt += 1;
        }
        if self.lt.rtt_cnt < LT_INTERVAL_MIN_RTTS {
            return;
        }
        if self.lt.rtt_cnt > 4 * LT_INTERVAL_MIN_RTTS {
            self.lt = LongTerm::default();
            return;
        }
        if losses == 0 {
            return;
        }
        let (lost, delivered_n) = (lost - self.lt.last_lost, delivered - self.lt.last_delivered);
        if delivered_n == 0 || (lost as f64) < LT_LOSS_THRESH * delivered_n as f64 {
            return;
        }
        // Linux measures this interval in whole milliseconds.
        let t = self
            .lt
            .last_stamp
            .map_or(Duration::ZERO, |s| self.delivered_stamp.saturating_since(s));
        let ms = t.as_millis();
        if ms < 1 {
            return;
        }
        let bw = delivered_n as f64 / (ms as f64 / 1000.0);
        if self.lt.bw > 0.0 {
            let diff = (bw - self.lt.bw).abs();
            if diff <= LT_BW_RATIO * self.lt.bw || diff * super::MSS as f64 <= LT_BW_DIFF {
                self.lt.bw = (bw + self.lt.bw) / 2.0;
                self.lt.use_bw = true;
                self.pacing_gain = 1.0;
                self.lt.rtt_cnt = 0;
                return;
            }
        }
        self.lt.bw = bw;
        self.lt_reset_interval(delivered, lost);
    }

    fn lt_reset_interval(&mut self, delivered: u64, lost: u64) {
        self.lt.last_stamp = Some(self.delivered_stamp);
        self.lt.last_delivered = delivered;
        self.lt.last_lost = lost;
        self.lt.rtt_cnt = 0;
    }

    fn update_cycle_phase(&mut self, a: &AckInfo) {
        if self.mode != Mode::ProbeBw || !self.is_next_cycle_phase(a) {
            return;
        }
        self.advance_cycle_phase();
    }

    fn is_next_cycle_phase(&self, a: &AckInfo) -> bool {
        let min_rtt = self.min_rtt.unwrap_or(Duration::ZERO);
        let full_length = self.delivered_stamp.saturating_since(self.cycle_stamp) > min_rtt;
        let gain = self.pacing_gain;
        if gain == 1.0 {
            return full_length;
        }
        let inflight = a.prior_in_flight as f64;
        let bw = self.max_bw();
        if gain > 1.0 {
            full_length && (a.losses > 0 || inflight >= self.inflight(bw, gain))
        } else {
            full_length || inflight <= self.inflight(bw, 1.0)
        }
    }

    fn advance_cycle_phase(&mut self) {
        self.cycle_idx = (self.cycle_idx + 1) % PACING_GAINS.len();
        self.cycle_stamp = self.delivered_stamp;
    }

    fn reset_probe_bw(&mut self) {
        self.mode = Mode::ProbeBw;
        let n = PACING_GAINS.len() as u64;
        self.cycle_idx = (n - 1 - self.random(CYCLE_RAND)) as usize;
        self.advance_cycle_phase();
    }

    fn check_full_bw_reached(&mut self) {
        if self.full_bw_reached || !self.round_start {
            return;
        }
        if self.max_bw() >= self.full_bw * FULL_BW_THRESH {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    fn check_drain(&mut self, a: &AckInfo) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && a.in_flight as f64 <= self.inflight(self.max_bw(), 1.0) {
            self.reset_probe_bw();
        }
    }

    fn update_min_rtt(&mut self, a: &AckInfo) {
        let expired = a.now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if let Some(r) = a.rtt {
            if self.min_rtt.is_none_or(|m| r < m) || expired {
                self.min_rtt = Some(r);
                self.min_rtt_stamp = a.now;
            }
        }
        if expired && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            match self.probe_rtt_done {
                None if a.in_flight as f64 <= CWND_MIN => {
                    self.probe_rtt_done = Some(a.now + PROBE_RTT_TIME);
                    self.probe_rtt_round_done = false;
                    self.next_rtt_delivered = a.delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && a.now > done {
                        self.min_rtt_stamp = a.now;
                        self.cwnd = self.cwnd.max(self.prior_cwnd);
                        if self.full_bw_reached {
                            self.reset_probe_bw();
                        } else {
                            self.mode = Mode::Startup;
                        }
                    }
                }
            }
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw if self.lt.use_bw => (1.0, CWND_GAIN),
            Mode::ProbeBw => (PACING_GAINS[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    /// `bbr_set_cwnd` with `bbr_set_cwnd_to_recover_or_restore`.
    fn set_cwnd(&mut self, a: &AckInfo, bw: f64) {
        if a.acked > 0 {
            let acked = a.acked as f64;
            let mut cwnd = self.cwnd;
            if a.losses > 0 {
                cwnd = (cwnd - a.losses as f64).max(1.0);
            }
            let (state, prev) = (a.state, self.prev_state);
            if state == CaState::Recovery && prev != CaState::Recovery {
                self.packet_conservation = true;
                self.next_rtt_delivered = a.delivered;
                cwnd = a.in_flight as f64 + acked;
            } else if prev >= CaState::Recovery && state < CaState::Recovery {
                cwnd = cwnd.max(self.prior_cwnd);
                self.packet_conservation = false;
            }
            self.prev_state = state;
            if self.packet_conservation {
                cwnd = cwnd.max(a.in_flight as f64 + acked);
            } else {
                let target = self.inflight(bw, self.cwnd_gain);
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || a.delivered < INIT_CWND as u64 {
                    cwnd += acked;
                }
                cwnd = cwnd.max(CWND_MIN);
            }
            self.cwnd = cwnd;
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(CWND_MIN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bulk flow over an uncontended path: one ACK per segment, delivered at the path's
    /// rate, RTT fixed.
    fn run_path(bw: f64, rtt: Duration, secs: f64) -> Bbr {
        let mut b = Bbr::new(Instant::ZERO, 1);
        let mut now = Instant::ZERO;
        let mut delivered = 0u64;
        let gap = Duration::from_secs_f64(1.0 / bw);
        let mut sent_at: VecDeque<(Instant, u64)> = VecDeque::new();
        let end = Instant::ZERO + Duration::from_secs_f64(secs);
        // The sender sends when the window and the pacer allow; the link delivers a segment
        // every `gap` at most, an RTT after it was sent.
        let mut next_send = now;
        let mut link_free = now;
        let mut in_flight: VecDeque<Instant> = VecDeque::new();
        while now < end {
            while (in_flight.len() as f64) < b.cwnd && next_send <= now {
                link_free = link_free.max(now) + gap;
                in_flight.push_back(link_free + rtt);
                sent_at.push_back((now, delivered));
                next_send = now + Duration::from_secs_f64(1.0 / b.pacing_rate);
            }
            let arrival = in_flight.front().copied().unwrap_or(Instant::MAX);
            now = arrival.min(next_send.max(now + Duration::from_micros(10)));
            if arrival <= now {
                let prior = in_flight.len() as u64;
                in_flight.pop_front();
                let (sent, prior_delivered) = sent_at.pop_front().unwrap();
                delivered += 1;
                let interval = now.saturating_since(sent).max(rtt);
                b.on_ack(&AckInfo {
                    now,
                    acked: 1,
                    losses: 0,
                    prior_in_flight: prior,
                    in_flight: prior - 1,
                    delivered,
                    lost: 0,
                    rtt: Some(now.saturating_since(sent)),
                    rate: Some(RateSample {
                        delivered: delivered - prior_delivered,
                        prior_delivered,
                        interval,
                    }),
                    state: CaState::Open,
                });
            }
        }
        b
    }

    #[test]
    fn finds_the_bottleneck_and_cycles_around_it() {
        // 100 Mbit/s in 1448-byte segments, 50 ms.
        let bw = 100e6 / (1448.0 * 8.0);
        let b = run_path(bw, Duration::from_millis(50), 5.0);
        assert_eq!(b.mode, Mode::ProbeBw);
        assert!(
            (b.max_bw() / bw - 1.0).abs() < 0.05,
            "{} vs {bw}",
            b.max_bw()
        );
        let bdp = bw * 0.05;
        assert!(
            (1.9 * bdp..2.3 * bdp + 40.0).contains(&b.cwnd),
            "{} vs {bdp}",
            b.cwnd
        );
    }

    #[test]
    fn probes_rtt_every_ten_seconds() {
        let bw = 10e6 / (1448.0 * 8.0);
        let b = run_path(bw, Duration::from_millis(20), 10.1);
        assert!(matches!(b.mode, Mode::ProbeRtt), "{:?}", b.mode);
        assert_eq!(b.cwnd, CWND_MIN);
    }
}
