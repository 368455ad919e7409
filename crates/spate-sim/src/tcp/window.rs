//! Congestion-window laws of the TCP model: Reno (RFC 5681) and CUBIC (RFC 9438), with
//! HyStart's slow-start exit as Linux applies it to CUBIC.
//!
//! # In a nutshell
//!
//! ```text
//! slow start (cwnd < ssthresh):   cwnd += acked                      (both)
//! Reno avoidance:                 cwnd += acked / cwnd               (1 segment per RTT)
//! CUBIC avoidance, t = now − epoch:
//!     W_cubic(t) = C·(t − K)³ + W_max,   K = ∛((W_max − cwnd_epoch) / C)
//!     target     = clamp(W_cubic(t + RTT), cwnd, 1.5·cwnd)
//!     cwnd      += (target − cwnd) / cwnd · acked
//!     W_est     += α·acked / cwnd,  α = 3(1 − β)/(1 + β);  cwnd ≥ W_est (Reno-friendly)
//!     no loss yet (W_max = 0): cwnd += at least acked / 20       (5 % per RTT, Linux)
//! congestion:  Reno cwnd ← cwnd/2;  CUBIC W_max ← cwnd (·(1 + β)/2 if below the last W_max:
//!              fast convergence), cwnd ← β·cwnd, β = 0.7;  ssthresh ← cwnd
//! HyStart (CUBIC, cwnd ≥ 16): leave slow start when a round's first 8 RTT samples have a
//!     minimum ≥ the last round's + clamp(last/8, 4 ms, 16 ms) (delay increase), or when a train
//!     of ACKs less than 2 ms apart spans more than half the minimum RTT (an unpaced sender's
//!     window then covers half a BDP: Linux's ack-train test).
//! ```
//!
//! **Before the first loss** there is no `W_max` to aim at, and a HyStart exit leaves the curve
//! flat at the window it left with (`K = 0`): by RFC 9438 alone the window would then grow by a
//! fraction of a segment per second. Linux's `bictcp_update` bounds the ACKs per increment at
//! 20 while `last_max_cwnd == 0` ("the initial growth of cubic function may be too
//! conservative when the available bandwidth is still unknown"): 5 % per RTT until the first
//! loss. That is what fills a deep buffer after an early HyStart exit — in the emulator kernel
//! CUBIC filled a 200 ms buffer on a 100 Mbit/s, 50 ms path 4.3 s after it started, at
//! 50 ms of queue per second, where the model without the rule had 62 ms after 10 s. Linux
//! also clears `last_max_cwnd` on a timeout; the model keeps the window before it as `W_max`
//! (RFC 9438 §4.8), so the floor applies only before the first loss.
//!
//! Windows are in segments (f64), as Linux keeps them in packets. What is left out: Linux's
//! `tcp_cwnd_reduction` (PRR) — the window drops at once and the sender waits until the pipe
//! falls below it, which sends the same number of packets per round trip, a little burstier.

use core::time::Duration;

use spate_proto::Instant;

/// CUBIC's multiplicative decrease (RFC 9438 §4.6).
const BETA_CUBIC: f64 = 0.7;
/// CUBIC's scaling constant C, segments/s³ (RFC 9438 §5.1).
const C_CUBIC: f64 = 0.4;
/// Reno's multiplicative decrease.
const BETA_RENO: f64 = 0.5;
/// Before the first loss the window grows by at least one segment per this many acknowledged
/// (Linux `bictcp_update`: `ca->cnt = 20` while `last_max_cwnd == 0`, 5 % per RTT).
const UNKNOWN_BW_ACKS_PER_SEGMENT: f64 = 20.0;
/// HyStart looks only at windows of at least this many segments (Linux `hystart_low_window`).
const HYSTART_LOW_WINDOW: f64 = 16.0;
/// RTT samples per round HyStart takes the minimum of (Linux `HYSTART_MIN_SAMPLES`).
const HYSTART_SAMPLES: u32 = 8;
/// ACKs closer than this belong to one train (Linux `hystart_ack_delta_us`).
const HYSTART_ACK_DELTA: Duration = Duration::from_millis(2);

/// Which law grows the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Law {
    /// RFC 5681 (NewReno's window, with SACK recovery in the sender).
    Reno,
    /// RFC 9438, with HyStart.
    Cubic,
}

/// What an ACK told the window.
#[derive(Debug, Clone, Copy)]
pub struct Acked {
    /// When it arrived.
    pub now: Instant,
    /// Segments it newly delivered (cumulatively or by SACK).
    pub segments: u64,
    /// Its RTT sample, if it gave one.
    pub rtt: Option<Duration>,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// The path's minimum RTT.
    pub min_rtt: Duration,
    /// Cumulative acknowledgement after it (HyStart's rounds end there).
    pub cum_ack: u64,
    /// The next new segment to send.
    pub next_seq: u64,
}

/// One connection's window state.
#[derive(Debug, Clone)]
pub struct Window {
    law: Law,
    /// Congestion window, segments.
    pub cwnd: f64,
    /// Slow-start threshold, segments.
    pub ssthresh: f64,
    /// The window at the last loss (`W_max`; 0 before the first, as Linux's `last_max_cwnd`).
    w_max: f64,
    /// Where the current epoch's curve is centred: `W_max`, or the epoch's first window when
    /// that is already above it (Linux `bic_origin_point`).
    origin: f64,
    k: f64,
    epoch: Option<Instant>,
    w_est: f64,
    hystart: HyStart,
}

#[derive(Debug, Clone, Default)]
struct HyStart {
    /// The round ends when this segment is acknowledged.
    round_end: u64,
    round_start: Option<Instant>,
    last_ack: Option<Instant>,
    samples: u32,
    curr_min: Option<Duration>,
    last_min: Option<Duration>,
}

impl Window {
    /// Linux's initial window: 10 segments (RFC 6928), unbounded ssthresh.
    pub fn new(law: Law) -> Self {
        Window {
            law,
            cwnd: 10.0,
            ssthresh: f64::MAX,
            w_max: 0.0,
            origin: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            hystart: HyStart::default(),
        }
    }

    /// Segments were newly delivered.
    pub fn on_ack(&mut self, a: &Acked) {
        let acked = a.segments as f64;
        if self.cwnd < self.ssthresh {
            if self.law == Law::Cubic {
                self.hystart(a);
            }
            self.cwnd += acked;
            return;
        }
        match self.law {
            Law::Reno => self.cwnd += acked / self.cwnd,
            Law::Cubic => self.cubic(a.now, acked, a.srtt),
        }
    }

    fn cubic(&mut self, now: Instant, acked: f64, srtt: Duration) {
        let epoch = *self.epoch.get_or_insert_with(|| {
            // No loss yet, or the window grew past the old maximum: the curve starts here.
            self.origin = self.w_max.max(self.cwnd);
            self.k = ((self.origin - self.cwnd) / C_CUBIC).cbrt();
            self.w_est = self.cwnd;
            now
        });
        let t = now.saturating_since(epoch).as_secs_f64();
        let w = |t: f64| C_CUBIC * (t - self.k).powi(3) + self.origin;
        let target = w(t + srtt.as_secs_f64()).clamp(self.cwnd, 1.5 * self.cwnd);
        let alpha = 3.0 * (1.0 - BETA_CUBIC) / (1.0 + BETA_CUBIC);
        self.w_est += alpha * acked / self.cwnd;
        let mut grow = (target - self.cwnd) / self.cwnd * acked;
        if self.w_max == 0.0 {
            grow = grow.max(acked / UNKNOWN_BW_ACKS_PER_SEGMENT);
        }
        self.cwnd += grow;
        if w(t) < self.w_est {
            self.cwnd = self.cwnd.max(self.w_est);
        }
    }

    fn hystart(&mut self, a: &Acked) {
        let (now, rtt, min_rtt, cum_ack, next_seq) =
            (a.now, a.rtt, a.min_rtt, a.cum_ack, a.next_seq);
        let h = &mut self.hystart;
        if cum_ack >= h.round_end || h.round_start.is_none() {
            h.round_end = next_seq;
            h.round_start = Some(now);
            h.last_ack = Some(now);
            h.last_min = h.curr_min.or(h.last_min);
            h.curr_min = None;
            h.samples = 0;
        }
        if self.cwnd < HYSTART_LOW_WINDOW {
            return;
        }
        let mut found = false;
        if let (Some(start), Some(last)) = (h.round_start, h.last_ack) {
            if now.saturating_since(last) <= HYSTART_ACK_DELTA {
                h.last_ack = Some(now);
                if now.saturating_since(start) > min_rtt / 2 {
                    found = true;
                }
            }
        }
        if let Some(rtt) = rtt {
            if h.samples < HYSTART_SAMPLES {
                h.curr_min = Some(h.curr_min.map_or(rtt, |m| m.min(rtt)));
                h.samples += 1;
            }
            if let (HYSTART_SAMPLES, Some(curr), Some(last)) = (h.samples, h.curr_min, h.last_min) {
                let eta = (last / 8).clamp(Duration::from_millis(4), Duration::from_millis(16));
                if curr >= last + eta {
                    found = true;
                }
            }
        }
        if found {
            self.ssthresh = self.cwnd;
        }
    }

    /// Loss (or an overflowing queue) detected: reduce once per recovery episode.
    pub fn on_congestion(&mut self) {
        match self.law {
            Law::Reno => self.cwnd = (self.cwnd * BETA_RENO).max(2.0),
            Law::Cubic => {
                self.w_max = if self.cwnd < self.w_max {
                    self.cwnd * (1.0 + BETA_CUBIC) / 2.0
                } else {
                    self.cwnd
                };
                self.cwnd = (self.cwnd * BETA_CUBIC).max(2.0);
                self.epoch = None;
            }
        }
        self.ssthresh = self.cwnd;
    }

    /// Retransmission timeout: the window restarts from one segment in slow start.
    pub fn on_timeout(&mut self) {
        let before = self.cwnd;
        self.on_congestion();
        self.ssthresh = self.cwnd.max(2.0);
        self.cwnd = 1.0;
        if self.law == Law::Cubic {
            self.w_max = before;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One ACK: `rtt` its sample, `base` the smoothed and minimum RTT.
    fn ack(
        w: &mut Window,
        now: Instant,
        segments: u64,
        rtt: Duration,
        base: Duration,
        cum: u64,
        next: u64,
    ) {
        w.on_ack(&Acked {
            now,
            segments,
            rtt: Some(rtt),
            srtt: base,
            min_rtt: base,
            cum_ack: cum,
            next_seq: next,
        });
    }

    fn ack_round(w: &mut Window, now: Instant, rtt: Duration) {
        let n = w.cwnd as u64;
        ack(w, now, n, rtt, rtt, 0, 0);
    }

    #[test]
    fn reno_halves_and_grows_one_segment_per_round() {
        let mut w = Window::new(Law::Reno);
        w.ssthresh = 100.0;
        w.cwnd = 100.0;
        w.on_congestion();
        assert_eq!(w.cwnd, 50.0);
        let rtt = Duration::from_millis(50);
        for i in 0..10 {
            ack_round(&mut w, Instant::ZERO + rtt * i, rtt);
        }
        assert!((w.cwnd - 60.0).abs() < 0.5, "{}", w.cwnd);
    }

    #[test]
    fn cubic_returns_to_w_max_after_k_seconds() {
        let mut w = Window::new(Law::Cubic);
        w.cwnd = 1000.0;
        w.ssthresh = 1000.0;
        w.on_congestion();
        assert_eq!(w.cwnd, 700.0);
        // K = ∛(300 / 0.4) ≈ 9.09 s: the window is back near 1000 then, and plateaus there.
        let rtt = Duration::from_millis(20);
        let mut t = Instant::ZERO;
        while t < Instant::ZERO + Duration::from_secs(9) {
            ack_round(&mut w, t, rtt);
            t += rtt;
        }
        assert!((950.0..1010.0).contains(&w.cwnd), "{}", w.cwnd);
    }

    #[test]
    fn before_the_first_loss_the_window_grows_five_percent_per_round() {
        // A HyStart exit at 400 segments, no loss yet: Linux grows 5 % per RTT.
        let mut w = Window::new(Law::Cubic);
        w.cwnd = 400.0;
        w.ssthresh = 400.0;
        let rtt = Duration::from_millis(50);
        for i in 0..10 {
            ack_round(&mut w, Instant::ZERO + rtt * i, rtt);
        }
        let expected = 400.0 * 1.05f64.powi(10);
        assert!(
            (w.cwnd - expected).abs() < 10.0,
            "{} against {expected}",
            w.cwnd
        );
        // After a loss W_max is known and the curve's plateau holds the window near it.
        w.on_congestion();
        let after = w.cwnd;
        for i in 0..10 {
            ack_round(&mut w, Instant::ZERO + rtt * (20 + i), rtt);
        }
        assert!(w.cwnd < after * 1.3, "{after} -> {}", w.cwnd);
    }

    #[test]
    fn fast_convergence_lowers_the_next_maximum() {
        let mut w = Window::new(Law::Cubic);
        w.cwnd = 1000.0;
        w.ssthresh = 1000.0;
        w.on_congestion();
        w.on_congestion();
        // Second loss below W_max = 1000: W_max = 700 · 0.85.
        assert!((w.w_max - 595.0).abs() < 1e-9);
        assert!((w.cwnd - 490.0).abs() < 1e-9);
    }

    #[test]
    fn hystart_leaves_slow_start_when_delay_rises() {
        let mut w = Window::new(Law::Cubic);
        w.cwnd = 32.0;
        let base = Duration::from_millis(100);
        // Round 1: 8 samples at the base RTT; ACKs 5 ms apart, so no ack train.
        let mut t = Instant::ZERO;
        for i in 0..8 {
            t += Duration::from_millis(5);
            ack(&mut w, t, 1, base, base, i, 100);
        }
        // Round 2 (cum_ack reached 100): RTT grew by 20 ms > clamp(100/8, 4, 16) = 12.5 ms.
        for i in 0..8 {
            t += Duration::from_millis(5);
            ack(
                &mut w,
                t,
                1,
                base + Duration::from_millis(20),
                base,
                100 + i,
                200,
            );
        }
        assert!(w.ssthresh < f64::MAX);
    }
}
