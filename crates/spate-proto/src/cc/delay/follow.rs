//! Competing with BBR on BBR's terms: the rate law a `fair` or `high` flow follows once
//! `dips.rs` has recognised a rate-based competitor.
//!
//! # In a nutshell
//!
//! ```text
//! D̄       delivery rate averaged over the last base RTT (one sample, as BBR's span an RTT)
//! bw      max of D̄ over the last 10 smoothed RTTs · k      k = 0.96 `fair`, 1.0 `high`
//! RTprop  least RTT (base + q) seen; taken again when 10 s old, and then the flow holds back
//!         to 4 packets per RTT for 200 ms and an RTT (BBR's ProbeRTT)
//! rate    = g · bw, at most 2 · (1 + e) · bw · RTprop / srtt in flight
//!         g cycles 1.25, 0.75, 1, 1, 1, 1, 1, 1, one RTprop each
//! e       the competitor's excess: how far the mean RTT over the last 10 smoothed RTTs
//!         stands above 2 RTprop, relative to it, within 0–0.25 (0 when the queue is at most
//!         one RTprop, as it is between two flows whose estimates are right)
//! ```
//!
//! BBR does not cut on loss, so a CUBIC-like window next to it has no cut to follow: every
//! BBR gain cycle that drops the queue from full looks like a cut, and the window was cut
//! every few hundred milliseconds (7 % of a 1×BDP buffer in the emulator), while in a 4×BDP
//! buffer the window held the queue BBR's in-flight cap leaves and took 66–80 %. Two BBR
//! flows share evenly (the simulator's BBR model: 24 paths of 24 within 40–60 % over 180 s),
//! so this flow runs BBR's own law: the same bandwidth filter, gains, in-flight cap and
//! ProbeRTT (which also keeps the two flows' ProbeRTTs together, as two BBR flows' are).
//!
//! The one constant that is not BBR's is `k`. The share two such flows reach is set by the
//! ratio of their effective gains, steeply: against the BBR model over the same 24 paths, with
//! this law in force from entering competitive mode (before the stretch below), `fair` held
//! 48–73 % at k = 1.0 (11 of 24 within 40–60 %), 50–66 % at 0.98, 49–57 % at 0.96 (24 of 24),
//! 41–53 % at 0.94, and 15–31 % at 0.9. BBR itself paces at 0.99 of its estimate, and this
//! flow's samples (the receiver's delivery rate, averaged) read a few per cent above BBR's
//! per-ACK ones; 0.96 is the middle of the flat part. `high` at 1.0 held 56–77 % (23 of 24
//! within 55–75 %).
//!
//! **The in-flight allowance follows the competitor's.** Two flows that each hold at most
//! `2 · bw · RTprop` in flight hold the RTT at `2 · (1 + ε) · RTprop`, where `ε` is the larger
//! of their estimates' excess over what they are delivered: the flow whose estimate reads
//! higher sets the queue, and the other's cap then binds below its pace, so it delivers less,
//! its filter reads less, and its share shrinks round after round. Kernel BBR in the
//! emulator read about 10 % high (a standing RTT of 105–110 ms on a 50 ms path, 4×BDP buffer,
//! where the simulator's model and this flow read 100), and `fair` held 33–38 % of it. So the
//! cap here stretches by the RTT's excess over two RTprops, as measured: the flow is then
//! limited by its pace, which the competitor's cap does not set, and FIFO gives a paced flow
//! what it sends. When the two estimates agree the mean RTT stays at or below two RTprops
//! (the 0.75 phases drain it) and the law is BBR's; the stretch is bounded (0.25) because a
//! flow that sets the RTT itself would otherwise stretch its own cap.

use core::time::Duration;
use std::collections::VecDeque;

use super::filters::WindowedMax;
use crate::time::Instant;

/// BBR's bandwidth filter, RTTs: its gain cycle and two more.
const FILTER_RTTS: u32 = 10;
/// BBR's pacing gains, one per RTprop.
const GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// BBR's window gain: at most this many bandwidth-delay products in flight.
const INFLIGHT_GAIN: f64 = 2.0;
/// `k` for `fair` (see the module doc).
const BW_GAIN: f64 = 0.96;
/// `k` for `high`.
const BW_GAIN_HIGH: f64 = 1.0;
/// BBR's RTprop window. Without the ProbeRTT it triggers this flow took the link whenever
/// BBR held back, and BBR got 20–30 % of a 4×BDP buffer.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// BBR's ProbeRTT time...
const PROBE_RTT: Duration = Duration::from_millis(200);
/// ...and window, packets.
const PROBE_RTT_PACKETS: f64 = 4.0;
/// The in-flight cap stretches by at most this fraction for a competitor whose estimate
/// reads high (the module doc): kernel BBR read 10 % high in the emulator.
const MAX_EXCESS: f64 = 0.25;

/// The state of the law; it observes every report of the competitive mode so that its
/// filters are warm when it takes over.
#[derive(Debug, Clone)]
pub struct Follow {
    /// `high` (two flows' worth) or `fair`.
    high: bool,
    /// Delivery rates, bits/s: the largest of the last [`FILTER_RTTS`] RTTs.
    delivered_max: WindowedMax,
    /// Delivery rates of the last base RTT (time, bits/s): their mean is one sample.
    recent: VecDeque<(Instant, f64)>,
    /// RTprop, s, and when it was taken.
    rtprop: (f64, Instant),
    /// Holding back as BBR's ProbeRTT does until then.
    probe_rtt_until: Instant,
    /// Where in [`GAINS`] the rate is, and since when.
    phase: usize,
    phase_since: Instant,
    /// Mean RTT (s) over the last [`FILTER_RTTS`] smoothed RTTs, and when it was updated.
    rtt_mean: (f64, Instant),
}

impl Follow {
    /// Start observing at `now` with smoothed RTT `srtt`; `n` flows' worth (1 `fair`, 2 `high`).
    pub fn new(now: Instant, srtt: Duration, n: f64) -> Self {
        Follow {
            high: n > 1.0,
            delivered_max: WindowedMax::new(srtt * FILTER_RTTS),
            recent: VecDeque::new(),
            rtprop: (srtt.as_secs_f64(), now),
            probe_rtt_until: now,
            phase: 0,
            phase_since: now,
            rtt_mean: (srtt.as_secs_f64(), now),
        }
    }

    /// A report: smoothed RTT `rtt` and queueing delay `q` (s), the RTT now (the path's
    /// minimum plus `q`), the delivery rate (bits/s); `active` when the law is in force (only
    /// then does RTprop's expiry start a ProbeRTT).
    pub fn observe(
        &mut self,
        now: Instant,
        rtt: f64,
        q: f64,
        rtt_now: Duration,
        delivered: Option<f64>,
        active: bool,
    ) {
        self.delivered_max
            .set_window(Duration::from_secs_f64(rtt) * FILTER_RTTS);
        if let Some(d) = delivered {
            let base = Duration::from_secs_f64((rtt - q).max(1e-4));
            self.recent.push_back((now, d));
            while self
                .recent
                .front()
                .is_some_and(|&(t, _)| now.saturating_since(t) > base)
            {
                self.recent.pop_front();
            }
            let mean = self.recent.iter().map(|&(_, d)| d).sum::<f64>() / self.recent.len() as f64;
            self.delivered_max.push(now, mean as i64);
        }
        let sample = rtt_now.as_secs_f64();
        // An exponential mean with the bandwidth filter's span as its time constant.
        let dt = now.saturating_since(self.rtt_mean.1).as_secs_f64();
        let w = (dt / (rtt * f64::from(FILTER_RTTS))).min(1.0);
        self.rtt_mean = (self.rtt_mean.0 + w * (sample - self.rtt_mean.0), now);
        let expired = now > self.rtprop.1 + MIN_RTT_WINDOW;
        if sample < self.rtprop.0 || expired {
            self.rtprop = (sample, now);
        }
        if expired && active && now >= self.probe_rtt_until {
            self.probe_rtt_until = now + PROBE_RTT + Duration::from_secs_f64(rtt);
        }
    }

    /// Start the bandwidth filter at `now` from at least `bw` (bits/s), as if that much had
    /// just been delivered: it holds for one filter span and then only if delivery keeps it.
    pub fn seed(&mut self, now: Instant, bw: f64) {
        self.delivered_max.push(now, bw as i64);
    }

    /// The rate to pace at (bits/s), given the smoothed RTT `rtt` (s), bits per packet, and
    /// the rate to use before any delivery was measured.
    pub fn rate(&mut self, now: Instant, rtt: f64, packet_bits: f64, fallback: f64) -> f64 {
        let base = self.rtprop.0.max(1e-4);
        if now < self.probe_rtt_until {
            return PROBE_RTT_PACKETS * packet_bits / rtt;
        }
        let bw = self.delivered_max.get(now).map_or(fallback, |b| b as f64);
        if now.saturating_since(self.phase_since).as_secs_f64() >= base {
            self.phase = (self.phase + 1) % GAINS.len();
            self.phase_since = now;
        }
        let bw = bw * if self.high { BW_GAIN_HIGH } else { BW_GAIN };
        let cap = INFLIGHT_GAIN * (1.0 + self.excess()) * bw * base / rtt;
        (GAINS[self.phase] * bw).min(cap)
    }

    /// How far the mean RTT stands above two RTprops, relative to them, within
    /// 0–[`MAX_EXCESS`]: the competitor's estimate's excess (the module doc).
    fn excess(&self) -> f64 {
        let base = self.rtprop.0.max(1e-4);
        (self.rtt_mean.0 / (INFLIGHT_GAIN * base) - 1.0).clamp(0.0, MAX_EXCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports every 10 ms for `secs` on a 50 ms path with a 30 ms queue, delivering
    /// `delivered` bits/s; the rates asked for.
    fn drive(f: &mut Follow, t: &mut Instant, secs: f64, delivered: f64) -> Vec<f64> {
        let mut rates = Vec::new();
        for _ in 0..(secs / 0.01) as u64 {
            *t += Duration::from_millis(10);
            let rtt_now = Duration::from_millis(80);
            f.observe(*t, 0.080, 0.030, rtt_now, Some(delivered), true);
            rates.push(f.rate(*t, 0.080, 12_000.0, 1e6));
        }
        rates
    }

    #[test]
    fn the_rate_cycles_around_what_was_delivered() {
        let mut f = Follow::new(Instant::ZERO, Duration::from_millis(80), 1.0);
        let mut t = Instant::ZERO;
        let rates = drive(&mut f, &mut t, 5.0, 50e6);
        let (lo, hi) = rates[100..]
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        // 0.75 and 1.25 times 0.96 · 50 Mbit/s.
        assert!((lo / 36e6 - 1.0).abs() < 0.01, "{lo}");
        assert!((hi / 60e6 - 1.0).abs() < 0.01, "{hi}");
        let mean = rates[100..].iter().sum::<f64>() / (rates.len() - 100) as f64;
        assert!((mean / 48e6 - 1.0).abs() < 0.03, "{mean}");
    }

    #[test]
    fn an_old_rtprop_holds_back_as_probe_rtt() {
        let mut f = Follow::new(Instant::ZERO, Duration::from_millis(80), 2.0);
        let mut t = Instant::ZERO;
        let rates = drive(&mut f, &mut t, 10.5, 50e6);
        // After 10 s without a lower RTT: 4 packets per RTT for 200 ms and an RTT.
        let held = rates.iter().filter(|&&r| r < 1e6).count();
        assert!((25..=30).contains(&held), "{held}");
        // `high` takes the estimate whole: the cycle's top is 1.25 · 50 Mbit/s.
        assert!(rates.iter().any(|&r| (r / 62.5e6 - 1.0).abs() < 0.01));
    }

    /// Reports every 10 ms for `secs` on a 50 ms path whose RTT stands at `rtt` (s),
    /// delivering 40 Mbit/s; the rates asked for in the gain-1 phases.
    fn steady_rates(rtt: f64, secs: f64) -> (Vec<f64>, f64) {
        let mut f = Follow::new(Instant::ZERO, Duration::from_secs_f64(rtt), 1.0);
        let mut t = Instant::ZERO;
        let rtt_now = Duration::from_secs_f64(rtt);
        // The RTprop: one report from an empty queue.
        f.observe(t, rtt, 0.0, Duration::from_millis(50), Some(40e6), true);
        let mut rates = Vec::new();
        for _ in 0..(secs / 0.01) as u64 {
            t += Duration::from_millis(10);
            f.observe(t, rtt, rtt - 0.05, rtt_now, Some(40e6), true);
            let r = f.rate(t, rtt, 12_000.0, 1e6);
            if f.phase >= 2 {
                rates.push(r);
            }
        }
        (rates, f.excess())
    }

    #[test]
    fn a_competitor_that_holds_the_rtt_above_two_rtprops_does_not_cap_this_flow_below_its_pace() {
        // Kernel BBR in the emulator held the RTT at 105–110 ms on a 50 ms path. Without the
        // stretch the cap, 2 · 38.4 Mbit/s · 50 / 110 ms, is 34.9 Mbit/s: 9 % below the pace.
        let (rates, _) = steady_rates(0.110, 3.0);
        let last = rates[rates.len() - 1];
        assert!((last / 38.4e6 - 1.0).abs() < 0.01, "{last}");
        // The stretch is bounded: at four RTprops the cap is 2 · 1.25 · 38.4 · 50 / 200 ms.
        let (rates, _) = steady_rates(0.200, 3.0);
        let last = rates[rates.len() - 1];
        assert!((last / 24e6 - 1.0).abs() < 0.01, "{last}");
    }

    #[test]
    fn no_stretch_while_the_rtt_stays_within_two_rtprops() {
        // Two flows whose estimates are right hold the RTT at or below two RTprops: the law
        // is then BBR's own.
        for rtt in [0.060, 0.080, 0.100] {
            let (rates, excess) = steady_rates(rtt, 3.0);
            assert_eq!(excess, 0.0, "{rtt}");
            assert!(rates.iter().all(|&r| r <= 38.4e6 * 1.001), "{rtt}");
        }
        let (_, excess) = steady_rates(0.110, 3.0);
        assert!((excess - 0.1).abs() < 1e-3, "{excess}");
    }
}
