//! The TCP model's sender: a SACK scoreboard, RACK loss detection, one window reduction per
//! recovery episode, and the retransmission timer.
//!
//! # In a nutshell
//!
//! ```text
//! segment states:  InFlight ─SACK/ACK─► Delivered
//!                     │ RACK: sent reo_wnd before a delivered one, or RTO
//!                     ▼
//!                   Lost ─retransmit─► InFlight
//! pipe   = segments InFlight (RFC 6675's estimate; SACKed and lost ones are not in it)
//! send   while pipe < cwnd: lost segments first (lowest first), then new ones — unpaced, as
//!        Linux sends CUBIC and Reno without the fq qdisc: a burst per ACK, spaced by the ACKs
//! RACK   reo_wnd = min_rtt/4 (RFC 8985): a segment sent more than reo_wnd before the latest
//!        sent segment known delivered is lost; transmissions are kept in send order, so a lost
//!        retransmission is found the same way
//! loss   first loss outside a recovery episode: the window law reduces once, recovery lasts
//!        until everything sent before it is acknowledged
//! RTO    srtt + max(4·rttvar, 200 ms) after the last progress (Linux's minimum), doubling on
//!        repeats: everything in flight is lost, the window restarts at one segment and grows
//!        in slow start while the losses are resent (Linux's Loss state)
//! ```
//!
//! Sequence numbers count segments, not bytes: every segment but a bounded flow's last carries
//! [`MSS`] bytes. Delayed ACKs, TLP, PRR and the receive window are left out (see `mod.rs`).

use core::time::Duration;
use std::collections::VecDeque;

use spate_proto::Instant;

use super::bbr::{AckInfo, Bbr, CaState, RateSample};
use super::window::{Acked, Law, Window};
use super::{Ack, Algorithm};

/// Segment payload, bytes: a 1500-byte MTU less IP, TCP and timestamp-option headers.
pub const MSS: u64 = 1448;
/// Linux's minimum retransmission timeout.
const MIN_RTO: Duration = Duration::from_millis(200);
/// Initial retransmission timeout (RFC 6298).
const INITIAL_RTO: Duration = Duration::from_secs(1);
/// Longest retransmission timeout (Linux `TCP_RTO_MAX`).
const MAX_RTO: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    Lost,
    Delivered,
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    state: State,
    /// Time of its latest transmission.
    sent: Instant,
    /// Number of its latest transmission (send order).
    tx: u64,
    retransmitted: bool,
    /// The connection's delivered count, and when it last grew, at that transmission, and
    /// the send time of the first transmission of the rate sample it belongs to (Linux
    /// `tcp_rate.c`).
    delivered: u64,
    delivered_time: Instant,
    first_tx: Instant,
}

/// Counters for the flow's report.
#[derive(Debug, Clone, Copy, Default)]
pub struct SenderStats {
    /// Segments sent, including retransmissions.
    pub sent: u64,
    /// Retransmissions.
    pub retransmitted: u64,
    /// Segments declared lost.
    pub lost: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Segments declared lost that were then acknowledged before being resent.
    pub spurious: u64,
}

/// What sets the window (and for BBR the pacing rate).
#[derive(Debug, Clone)]
enum Control {
    /// Reno or CUBIC: a window law, unpaced.
    Window(Window),
    /// BBR: a model-based window and a pacing rate.
    Bbr(Bbr),
}

/// One TCP sender.
#[derive(Debug, Clone)]
pub struct TcpSender {
    control: Control,
    /// Segments to send in all (`u64::MAX`: unbounded).
    total: u64,
    cum_ack: u64,
    next_seq: u64,
    /// Segments `cum_ack..next_seq`.
    board: VecDeque<Segment>,
    /// Transmissions in send order: (number, time, segment).
    sends: VecDeque<(u64, Instant, u64)>,
    /// Transmissions so far.
    tx: u64,
    /// Segments above `cum_ack` known delivered (SACKed).
    sacked: u64,
    /// Lost segments awaiting retransmission (may hold segments since delivered).
    retx: VecDeque<u64>,
    pipe: u64,
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min_rtt: Duration,
    /// The latest transmission known delivered: (number, time) (RACK).
    rack: Option<(u64, Instant)>,
    /// Recovery lasts until `cum_ack` reaches this.
    recovery_until: Option<u64>,
    /// The recovery began with a timeout (Linux's `TCP_CA_Loss`): the window grows in it.
    after_timeout: bool,
    /// The retransmission timer's deadline.
    rto_at: Option<Instant>,
    stats: SenderStats,
    /// Segments delivered so far, and when that count last grew.
    delivered: u64,
    delivered_time: Instant,
    /// Send time of the newest segment whose delivery gave the last rate sample.
    first_tx: Instant,
    /// Paced senders (BBR) send nothing before this.
    next_send: Instant,
}

impl TcpSender {
    /// A sender of `total` segments (`u64::MAX` for "until the end") using `algorithm`,
    /// starting at `now`; `seed` feeds BBR's random choices.
    pub fn new(algorithm: Algorithm, total: u64, now: Instant, seed: u64) -> Self {
        let control = match algorithm {
            Algorithm::Reno => Control::Window(Window::new(Law::Reno)),
            Algorithm::Cubic => Control::Window(Window::new(Law::Cubic)),
            Algorithm::Bbr => Control::Bbr(Bbr::new(now, seed)),
        };
        TcpSender {
            control,
            total,
            cum_ack: 0,
            next_seq: 0,
            board: VecDeque::new(),
            sends: VecDeque::new(),
            tx: 0,
            sacked: 0,
            retx: VecDeque::new(),
            pipe: 0,
            srtt: None,
            rttvar: Duration::ZERO,
            rto: INITIAL_RTO,
            min_rtt: Duration::MAX,
            rack: None,
            recovery_until: None,
            after_timeout: false,
            rto_at: None,
            stats: SenderStats::default(),
            delivered: 0,
            delivered_time: now,
            first_tx: now,
            next_send: now,
        }
    }

    /// Every segment acknowledged.
    pub fn is_done(&self) -> bool {
        self.cum_ack >= self.total
    }

    /// Counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Congestion window, segments.
    pub fn cwnd(&self) -> f64 {
        match &self.control {
            Control::Window(w) => w.cwnd,
            Control::Bbr(b) => b.cwnd,
        }
    }

    /// Pacing rate, segments per second, for a paced sender.
    pub fn pacing_rate(&self) -> Option<f64> {
        match &self.control {
            Control::Window(_) => None,
            Control::Bbr(b) => Some(b.pacing_rate),
        }
    }

    /// Whether the window has room for another segment.
    fn window_open(&self) -> bool {
        (self.pipe as f64) < self.cwnd().floor().max(1.0)
    }

    /// Whether the window has room and there is a segment to send.
    fn can_send(&self) -> bool {
        self.window_open() && (self.next_seq < self.total || !self.retx.is_empty())
    }

    /// The next segment to put on the wire now, if the window (and a paced sender's pacing
    /// rate) allows one.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<u64> {
        if !self.window_open() || now < self.next_send {
            return None;
        }
        let (seq, again) = loop {
            match self.retx.pop_front() {
                Some(s) if s >= self.cum_ack && self.seg(s).state == State::Lost => {
                    break (s, true)
                }
                Some(_) => continue,
                None if self.next_seq < self.total => {
                    self.board.push_back(Segment {
                        state: State::Lost,
                        sent: now,
                        tx: 0,
                        retransmitted: false,
                        delivered: 0,
                        delivered_time: now,
                        first_tx: now,
                    });
                    self.next_seq += 1;
                    break (self.next_seq - 1, false);
                }
                None => return None,
            }
        };
        let i = (seq - self.cum_ack) as usize;
        let seg = &mut self.board[i];
        if again {
            seg.retransmitted = true;
            self.stats.retransmitted += 1;
        }
        if self.pipe == 0 {
            // Nothing in flight: a rate sample starts here (`tcp_rate_skb_sent`).
            self.first_tx = now;
            self.delivered_time = now;
        }
        seg.state = State::InFlight;
        seg.sent = now;
        seg.delivered = self.delivered;
        seg.delivered_time = self.delivered_time;
        seg.first_tx = self.first_tx;
        self.tx += 1;
        seg.tx = self.tx;
        if let Some(rate) = self.pacing_rate().filter(|&r| r > 0.0) {
            self.next_send = self.next_send.max(now) + Duration::from_secs_f64(1.0 / rate);
        }
        self.pipe += 1;
        self.stats.sent += 1;
        self.sends.push_back((self.tx, now, seq));
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto);
        }
        Some(seq)
    }

    fn seg(&self, seq: u64) -> &Segment {
        &self.board[(seq - self.cum_ack) as usize]
    }

    /// When the sender next needs a timeout call (or, paced, may send again).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let pace = (self.pacing_rate().is_some() && self.can_send()).then_some(self.next_send);
        self.rto_at.into_iter().chain(pace).min()
    }

    /// An ACK arrived.
    pub fn on_ack(&mut self, now: Instant, ack: &Ack) {
        let prior_in_flight = self.pipe;
        let lost_before = self.stats.lost;
        let mut delivered = 0u64;
        let mut rtt = None;
        // The newest transmission this ACK delivered: (number, its segment as sent).
        let mut newest: Option<(u64, Segment)> = None;
        let mut spurious = 0;
        let min_rtt = self.min_rtt;
        let mut deliver = |s: &mut Segment, pipe: &mut u64| {
            match s.state {
                State::Delivered => return false,
                State::InFlight => *pipe -= 1,
                State::Lost => spurious += 1,
            }
            s.state = State::Delivered;
            delivered += 1;
            // RFC 8985 §6.2 step 2: a resent segment acknowledged sooner than the path's
            // minimum RTT after it was resent was the original arriving; its resend's time
            // says nothing about what else has arrived. (Taken for the resend, it marked
            // every segment sent before that resend lost: at 1 % loss a BBR flow resent
            // 15 % of its data.)
            let original = s.retransmitted && now.saturating_since(s.sent) < min_rtt;
            if !original && newest.is_none_or(|(tx, _)| s.tx > tx) {
                newest = Some((s.tx, *s));
            }
            if !s.retransmitted {
                // Karn: only segments sent once give RTT samples.
                let r = now.saturating_since(s.sent);
                rtt = Some(rtt.map_or(r, |x: Duration| x.min(r)));
            }
            true
        };
        for &(from, to) in ack.sack.iter().flatten() {
            let (from, to) = (from.max(self.cum_ack), to.min(self.next_seq));
            for seq in from..to {
                let i = (seq - self.cum_ack) as usize;
                if deliver(&mut self.board[i], &mut self.pipe) {
                    self.sacked += 1;
                }
            }
        }
        let advanced = ack.cum.min(self.next_seq).saturating_sub(self.cum_ack);
        for _ in 0..advanced {
            if let Some(mut s) = self.board.pop_front() {
                if !deliver(&mut s, &mut self.pipe) {
                    self.sacked -= 1;
                }
            }
            self.cum_ack += 1;
        }
        self.stats.spurious += spurious;
        if let Some(r) = rtt {
            self.on_rtt(r);
        }
        if let Some((tx, s)) = newest {
            self.rack = Some(self.rack.map_or((tx, s.sent), |r| r.max((tx, s.sent))));
        }
        let rate = self.rate_sample(now, delivered, newest.map(|(_, s)| s));
        self.detect_losses();
        if self.recovery_until.is_some_and(|p| self.cum_ack >= p) {
            self.recovery_until = None;
            self.after_timeout = false;
        }
        match &mut self.control {
            Control::Window(w) => {
                // Fast recovery holds the reduced window (Linux's PRR keeps it there); after a
                // timeout the window restarts at one segment and grows in slow start while the
                // losses are resent, as Linux does in its Loss state. (Held at one segment
                // instead, a flow that lost hundreds of segments to a timeout resent one per
                // RTT for a minute.)
                if delivered > 0 && (self.recovery_until.is_none() || self.after_timeout) {
                    let srtt = self.srtt.unwrap_or(INITIAL_RTO);
                    w.on_ack(&Acked {
                        now,
                        segments: delivered,
                        rtt,
                        srtt,
                        min_rtt: self.min_rtt,
                        cum_ack: self.cum_ack,
                        next_seq: self.next_seq,
                    });
                }
            }
            Control::Bbr(b) => {
                let state = match (self.recovery_until, self.after_timeout) {
                    (None, _) => CaState::Open,
                    (Some(_), false) => CaState::Recovery,
                    (Some(_), true) => CaState::Loss,
                };
                b.on_ack(&AckInfo {
                    now,
                    acked: delivered,
                    losses: self.stats.lost - lost_before,
                    prior_in_flight,
                    in_flight: self.pipe,
                    delivered: self.delivered,
                    lost: self.stats.lost,
                    rtt,
                    rate,
                    state,
                });
            }
        }
        if advanced > 0 || delivered > 0 {
            self.rto_at = (self.pipe > 0 || !self.retx.is_empty()).then(|| now + self.rto);
        }
    }

    /// Count `n` segments delivered now and make the rate sample of the newest one, `s` as it
    /// was sent (`tcp_rate_gen`): segments delivered since it was sent, over the longer of its
    /// send and ACK intervals; none shorter than the minimum RTT (ACK compression).
    fn rate_sample(&mut self, now: Instant, n: u64, s: Option<Segment>) -> Option<RateSample> {
        if n == 0 {
            return None;
        }
        self.delivered += n;
        self.delivered_time = now;
        let s = s?;
        self.first_tx = s.sent;
        let send = s.sent.saturating_since(s.first_tx);
        let ack = now.saturating_since(s.delivered_time);
        let interval = send.max(ack);
        if interval.is_zero() || interval < self.min_rtt {
            return None;
        }
        Some(RateSample {
            delivered: self.delivered - s.delivered,
            prior_delivered: s.delivered,
            interval,
        })
    }

    fn on_rtt(&mut self, r: Duration) {
        self.min_rtt = self.min_rtt.min(r);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        self.rto = (srtt + (self.rttvar * 4).max(MIN_RTO)).min(MAX_RTO);
    }

    /// RACK: transmissions sent before the newest delivered one, by more than the reordering
    /// window, are lost. As in Linux before any reordering is seen, the window is zero once
    /// three segments are SACKed or recovery has begun (the classic three duplicate ACKs).
    fn detect_losses(&mut self) {
        let Some((rack_tx, rack_time)) = self.rack else {
            return;
        };
        let reo_wnd = if self.sacked >= 3 || self.recovery_until.is_some() {
            Duration::ZERO
        } else if self.min_rtt == Duration::MAX {
            return;
        } else {
            self.min_rtt / 4
        };
        let mut congestion = false;
        while let Some(&(tx, sent, seq)) = self.sends.front() {
            if seq < self.cum_ack {
                self.sends.pop_front();
                continue;
            }
            let i = (seq - self.cum_ack) as usize;
            let s = self.board[i];
            // An entry for an earlier transmission of a segment sent again since: stale.
            if s.state != State::InFlight || s.tx != tx {
                self.sends.pop_front();
                continue;
            }
            if tx >= rack_tx || (!reo_wnd.is_zero() && sent + reo_wnd >= rack_time) {
                break;
            }
            self.sends.pop_front();
            self.board[i].state = State::Lost;
            self.pipe -= 1;
            self.stats.lost += 1;
            insert_sorted(&mut self.retx, seq);
            congestion = true;
        }
        if congestion && self.recovery_until.is_none() {
            // BBR does not reduce on loss (it counts the losses at the next ACK).
            if let Control::Window(w) = &mut self.control {
                w.on_congestion();
            }
            self.recovery_until = Some(self.next_seq);
        }
    }

    /// Time passes; the retransmission timer may fire.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.rto_at.is_none_or(|t| now < t) {
            return;
        }
        self.stats.timeouts += 1;
        for (k, s) in self.board.iter_mut().enumerate() {
            if s.state == State::InFlight {
                s.state = State::Lost;
                self.stats.lost += 1;
                insert_sorted(&mut self.retx, self.cum_ack + k as u64);
            }
        }
        self.sends.clear();
        self.pipe = 0;
        match &mut self.control {
            Control::Window(w) => w.on_timeout(),
            Control::Bbr(b) => b.on_timeout(self.delivered, self.stats.lost),
        }
        self.recovery_until = Some(self.next_seq);
        self.after_timeout = true;
        self.rto = (self.rto * 2).min(MAX_RTO);
        self.rto_at = Some(now + self.rto);
    }
}

/// Keep the retransmission queue in sequence order (losses are mostly found in order, so this
/// is an append).
fn insert_sorted(q: &mut VecDeque<u64>, seq: u64) {
    let at = q.partition_point(|&s| s < seq);
    if q.get(at) != Some(&seq) {
        q.insert(at, seq);
    }
}
