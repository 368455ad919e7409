//! The adaptive delay-based controller behind the `fair`, `high` and `low` policies.
//!
//! # The idea in one sentence
//!
//! Each flow keeps a small, fixed amount of its own data — `α` bytes — waiting in the
//! bottleneck queue; since every flow sees the same queueing delay `q`, every flow then sends at
//! `α / q`, so flows with equal `α` share the link equally whatever their RTT, and the queue
//! stays at `Σα / capacity` (half a millisecond for one flow at 1 Gbit/s).
//!
//! # In a nutshell (FAST TCP's window law, paced, plus two fast paths)
//!
//! ```text
//! q      = owd − base_owd                 queueing delay: receiver-measured one-way delay
//!                                          minus its windowed minimum (10 s)
//! base   = minimum RTT;  rtt = base + q
//! w      = the flow's window in bits;  pacing rate r = w / rtt
//! q*     = 8·α / r                         this flow's equilibrium queueing delay at rate r
//! D      = delivery rate measured by the receiver over the last RTT
//!
//! grow   if q < q*/4:   w ← max(w · 2^(g · dt / rtt), D_max·base + 8·α)  (g doublings per RTT)
//!                       g ← min(1, g · 2^(dt / rtt))
//! cut    if q > max(4·q*, 1 ms) and D < 0.9·r:   w ← D·base + 8·α,  g ← 1/8,  D_max ← D
//! steer  otherwise:   w ← w + γ·(dt/rtt)·(w·base/rtt + 8·α − w),     g ← 1/8
//! ```
//!
//! `D_max` is the largest delivery rate of the last [`DMAX_WINDOW`] (or since the last cut).
//! `dt` is the time since the previous report and `γ = 1/2`. At the fixed point of *steer*,
//! `w·q/rtt = 8·α`, i.e. `r·q = 8·α`. Pacing at `w / rtt` makes the rate fall at once when the
//! queue grows, as an ACK-clocked window would; a rate-only law reacting to a one-RTT-old queue
//! oscillated between an empty and a full buffer in FASP scenario 2. After a *cut* the window is
//! the delivered rate's BDP plus α: the queue drains smoothly to its target instead of collapsing
//! to nothing and restarting growth.
//!
//! * **Loss is not congestion.** Loss does not appear in these rules at all. Random loss leaves
//!   `q` flat and changes nothing; a queue overflow comes with a full queue, so *cut* applies.
//! * **Find capacity fast.** With no queue the rate doubles every RTT (`g = 1`): 100× in 6.6
//!   RTTs, half a second at 74 ms. After a capacity increase the queue empties and growth
//!   resumes. Growth speed `g` itself adapts: whenever the flow steers or cuts it drops to 1/8
//!   doubling per RTT, and it doubles every RTT the queue stays empty. Without this, each brief
//!   emptying of the queue restarted full-speed doubling, and one RTT of feedback delay
//!   overshot into a full buffer every cycle (a sawtooth seen in FASP scenario 2); with it, a
//!   brief emptying overshoots by ~9 % of an RTT's data, while a real capacity increase reaches
//!   full growth speed within 3 RTTs (100× in about 9 RTTs). And when the queue empties because
//!   steering shrank the window below the path's BDP (it reacts to a queue one RTT old), the
//!   window returns at once to the BDP of the best recent delivery rate, `D_max·base + 8·α`,
//!   rather than growing back: slow growth is only for capacity the flow has not seen yet.
//! * **Shed it faster.** When delivery falls behind while the queue grows, the rate snaps to
//!   what the receiver actually got.
//! * **Policies are values of α**: `fair` = α, `high` = 2α (twice a fair flow's share, by the
//!   equilibrium above), `low` = α/16 (a scavenger: about 1/16 of a fair flow's rate against
//!   fair flows, everything when alone).
//! * **Outages.** On a silent path the rate is saved; when feedback returns, sending resumes at
//!   the saved rate instead of starting over.
//! * **Stale minimum.** After a handover to a longer path, `owd − base_owd` includes the extra
//!   propagation delay and would read as a standing queue. Every [`PROBE_EVERY`] RTTs (at least
//!   [`PROBE_MIN_INTERVAL`]) in steady state the controller sends 10 % faster for one RTT. If
//!   delivery rises while the queueing delay does not, the queue was not real: the delay floor
//!   is re-based to the current minimum and growth resumes.
//!
//! What it deliberately ignores: ECN (not yet reported), per-packet delay variation (the
//! receiver reports one sample per feedback; a 10 ms min filter rejects transient spikes), and
//! loss-based competition (against loss-based TCP flows a delay-based flow yields; `fixed` or
//! `high` exist for that).

mod filters;

use core::time::Duration;

pub use filters::{DeliveryRate, WindowedMin};

use super::{RateControl, RateSample};
use crate::time::Instant;
use crate::wire::IP_UDP_OVERHEAD;

/// Default α: 40 full packets (60 000 bytes). One flow then holds q = 0.48 ms of queue at
/// 1 Gbit/s, 4.8 ms at 100 Mbit/s, 48 µs at 10 Gbit/s: small enough for the ≤ 5 ms delay goal
/// on links of 100 Mbit/s and more, large enough to measure (a 40-packet queue is 40 packet
/// times of delay, far above the 1 µs timestamp resolution).
pub const DEFAULT_QUEUE_TARGET: u64 = 60_000;
/// Rate before any measurement: 10 Mbit/s. A 10 Gbit/s path is reached in 10 doublings.
pub const INITIAL_RATE: u64 = 10_000_000;
/// Growth speed right after a cut, doublings per RTT (1/8: +9 % per RTT).
const MIN_GROWTH: f64 = 0.125;
/// Gain of the steering rule per RTT (FAST's γ).
const GAMMA: f64 = 0.5;
/// Window of the delay floor (one-way delay minimum), as for the minimum RTT.
const BASE_WINDOW: Duration = Duration::from_secs(10);
/// Window of the current-delay minimum filter: about one feedback interval, so the estimate
/// follows the queue within ~10 ms but a single delayed sample does not move it.
const RECENT_WINDOW: Duration = Duration::from_millis(10);
/// How long the best delivery rate is remembered (also at least 10 RTTs).
pub const DMAX_WINDOW: Duration = Duration::from_secs(2);
/// Probe for stale delay floors every this many RTTs in steady state...
const PROBE_EVERY: u32 = 8;
/// ...but not more often than this.
const PROBE_MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Extra rate during a probe: +10 % for one RTT adds at most 0.1 RTT of queue if the link is
/// full, within the 0.25 RTT delay goal.
const PROBE_GAIN: f64 = 1.10;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Probe {
    /// Not probing; next probe not before this time.
    Idle { next: Instant },
    /// Sending faster since `start`; `q0`, `d0`: queueing delay and delivery before.
    Up {
        start: Instant,
        q0: f64,
        d0: f64,
        q_max: f64,
        d_max: f64,
    },
}

/// The delay controller. See the module documentation.
#[derive(Debug, Clone)]
pub struct Delay {
    alpha_bits: f64,
    cap: f64,
    floor: f64,
    /// Window, bits.
    window: f64,
    /// Pacing rate, bits/s: window / (base + q), within [floor, cap].
    rate: f64,
    /// The last RTT estimate base + q, seconds.
    rtt_s: f64,
    base_owd: WindowedMin,
    recent_owd: WindowedMin,
    delivery: DeliveryRate,
    /// Best delivery rate recently (negated, to reuse the minimum filter), bits/s.
    d_max: WindowedMin,
    last_update: Option<Instant>,
    saved_rate: Option<f64>,
    /// Growth speed, doublings per RTT (1/8..=1).
    growth: f64,
    cut_hold_until: Instant,
    probe: Probe,
}

impl Delay {
    /// A controller keeping `queue_target` bytes queued, rate within `[floor_bps, cap_bps]`
    /// (`cap_bps` 0 means no cap).
    pub fn new(queue_target: u64, cap_bps: u64, floor_bps: u64) -> Self {
        let cap = if cap_bps == 0 {
            f64::MAX
        } else {
            cap_bps as f64
        };
        let floor = (floor_bps as f64).min(cap);
        Delay {
            alpha_bits: (queue_target.max(1500) * 8) as f64,
            cap,
            floor,
            rate: (INITIAL_RATE as f64).clamp(floor.max(crate::pacer::MIN_RATE_BPS as f64), cap),
            window: 0.0,
            rtt_s: 0.0,
            base_owd: WindowedMin::new(BASE_WINDOW),
            recent_owd: WindowedMin::new(RECENT_WINDOW),
            delivery: DeliveryRate::default(),
            d_max: WindowedMin::new(DMAX_WINDOW),
            last_update: None,
            saved_rate: None,
            growth: 1.0,
            cut_hold_until: Instant::ZERO,
            probe: Probe::Idle {
                next: Instant::ZERO,
            },
        }
    }

    /// Derive the rate from the window; a clamped rate pulls the window along so it cannot
    /// wind up beyond what the cap lets through.
    fn set_rate_from_window(&mut self) {
        let r = self.window / self.rtt_s;
        self.rate = r.clamp(self.floor.max(crate::pacer::MIN_RATE_BPS as f64), self.cap);
        if self.rate != r {
            self.window = self.rate * self.rtt_s;
        }
    }

    fn probe_step(&mut self, now: Instant, rtt: Duration, q: f64, d: Option<f64>, steady: bool) {
        match self.probe {
            Probe::Idle { next } => {
                if steady && now >= next {
                    if let Some(d0) = d {
                        self.probe = Probe::Up {
                            start: now,
                            q0: q,
                            d0,
                            q_max: q,
                            d_max: 0.0,
                        };
                    }
                }
            }
            Probe::Up {
                start,
                q0,
                d0,
                mut q_max,
                mut d_max,
            } => {
                let age = now.saturating_since(start);
                // Reports about packets sent during the probe arrive from one RTT after its start.
                if age >= rtt {
                    q_max = q_max.max(q);
                    d_max = d_max.max(d.unwrap_or(0.0));
                }
                if age >= rtt * 2 {
                    let rtt_s = rtt.as_secs_f64();
                    let queue_grew = q_max > q0 + 0.02 * rtt_s + 0.5 * self.alpha_bits / self.rate;
                    if !queue_grew && d_max > d0 * 1.05 {
                        // The "queue" did not grow while more was delivered: the floor is stale.
                        self.base_owd
                            .reset(now, self.recent_owd.get(now).unwrap_or(0));
                    }
                    let wait = (rtt * PROBE_EVERY).max(PROBE_MIN_INTERVAL);
                    self.probe = Probe::Idle { next: now + wait };
                } else {
                    self.probe = Probe::Up {
                        start,
                        q0,
                        d0,
                        q_max,
                        d_max,
                    };
                }
            }
        }
    }
}

impl RateControl for Delay {
    fn pacing_rate(&self) -> u64 {
        let r = match self.probe {
            Probe::Up { .. } => (self.rate * PROBE_GAIN).min(self.cap),
            Probe::Idle { .. } => self.rate,
        };
        r as u64
    }

    fn on_sent(&mut self, _now: Instant, _wire_bytes: u64) {}

    fn on_feedback(&mut self, now: Instant, s: &RateSample) {
        let Some(owd) = s.one_way_delay_us else {
            return;
        };
        self.base_owd.push(now, owd);
        self.recent_owd.push(now, owd);
        self.delivery.push(s.receiver_time_us, s.receiver_bytes);
        let base_owd = self.base_owd.get(now).unwrap_or(owd);
        let recent = self.recent_owd.get(now).unwrap_or(owd);
        let q = (recent - base_owd).max(0) as f64 / 1e6;
        let base = s.min_rtt.as_secs_f64();
        let rtt_s = (base + q).max(1e-4);
        let rtt = Duration::from_secs_f64(rtt_s);
        let dt = self
            .last_update
            .map_or(0.0, |t| now.saturating_since(t).as_secs_f64())
            .min(rtt_s);
        self.last_update = Some(now);
        let dg = s.datagram_bytes.max(1) as f64;
        let d = self
            .delivery
            .rate(rtt.max(Duration::from_millis(20)))
            .map(|b| b as f64 * 8.0 * (dg + IP_UDP_OVERHEAD as f64) / dg);
        if let Some(d) = d {
            self.d_max.set_window((rtt * 10).max(DMAX_WINDOW));
            self.d_max.push(now, -(d as i64));
        }
        if self.window == 0.0 {
            self.window = self.rate * rtt_s; // first report: keep the initial rate
        }
        self.rtt_s = rtt_s;
        let q_star = self.alpha_bits / self.rate;

        let mut steady = false;
        if q > (4.0 * q_star).max(1e-3)
            && d.is_some_and(|d| d < 0.9 * self.rate)
            && now >= self.cut_hold_until
        {
            // Cut: delivery fell behind and the queue is growing.
            let d = d.unwrap_or(self.rate);
            self.window = d * base + self.alpha_bits;
            self.d_max.reset(now, -(d as i64));
            self.growth = MIN_GROWTH;
            self.cut_hold_until = now + rtt;
            self.probe = Probe::Idle {
                next: now + (rtt * PROBE_EVERY).max(PROBE_MIN_INTERVAL),
            };
        } else if q < q_star / 4.0 {
            // Grow: far less queue than this flow's share: there is spare capacity.
            let known = self.d_max.get(now).map_or(0.0, |v| -v as f64) * base + self.alpha_bits;
            self.window = (self.window * (self.growth * dt / rtt_s).exp2()).max(known);
            self.growth = (self.growth * (dt / rtt_s).exp2()).min(1.0);
        } else {
            // Steer towards w·q/rtt = 8α.
            let target = self.window * base / rtt_s + self.alpha_bits;
            self.window += GAMMA * (dt / rtt_s) * (target - self.window);
            self.growth = MIN_GROWTH;
            steady = true;
        }
        self.set_rate_from_window();
        self.probe_step(now, rtt, q, d, steady);
    }

    fn on_path_silent(&mut self, _now: Instant) {
        if self.saved_rate.is_none() {
            self.saved_rate = Some(self.rate);
        }
    }

    fn on_path_restored(&mut self, now: Instant) {
        if let Some(r) = self.saved_rate.take() {
            self.rate = r;
            self.window = r * self.rtt_s;
        }
        // Measurements across the outage describe nothing; give the path one report cycle.
        self.delivery.clear();
        self.last_update = None;
        self.cut_hold_until = now + Duration::from_millis(100);
        self.probe = Probe::Idle {
            next: now + PROBE_MIN_INTERVAL,
        };
    }
}

#[cfg(test)]
mod tests;
