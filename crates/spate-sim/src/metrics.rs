//! What the simulator measures while it runs, and the derived metrics of `SEEDS.md`.
//!
//! Delivered bytes, forward queueing delay and drops are binned in fine time bins (10 ms for
//! runs up to 1 000 s). Phase metrics are computed from those bins at the end:
//!
//! * goodput: file bytes delivered to the application per second, all flows;
//! * utilisation: goodput / capacity (capacity counts IP bytes, goodput only file bytes, so
//!   header overhead alone caps utilisation at 1448/1500 ≈ 0.965 with 1472-byte datagrams);
//! * time to adapt: from the phase start, the first 100 ms boundary after which every 100 ms
//!   window for one second has goodput ≥ 90 % of capacity;
//! * queueing delay percentiles: per packet entering the bottleneck during the phase.

use core::time::Duration;

use hdrhistogram::Histogram;
use spate_netmodel::{DropCause, Schedule};
use spate_proto::Instant;

use crate::report::{round, Percentiles, PhaseReport, SeriesRow, TimeSeries};

/// Mode record: the delay mode (or any mode that is not competitive).
pub const MODE_DELAY: u8 = 1;
/// Mode record: the competitive mode, following CUBIC's window.
pub const MODE_COMPETITIVE: u8 = 2;
/// Mode record: the competitive mode, following BBR's law.
pub const MODE_FOLLOWING_BBR: u8 = 3;

/// Width of the windows used for time to adapt and the time series.
pub const COARSE_BIN: Duration = Duration::from_millis(100);

/// What a run measures at the bottleneck, in fine time bins: the simulator records into one,
/// and so does the real-time emulator, so both report the same fields computed the same way.
#[allow(missing_docs)]
pub struct Recorder {
    pub fine: Duration,
    pub delivered: Vec<Vec<u64>>,
    pub rate: Vec<Vec<u64>>,
    /// Per flow and fine bin: the rate controller's mode when the flow last sent in it
    /// ([`MODE_DELAY`], [`MODE_COMPETITIVE`], [`MODE_FOLLOWING_BBR`], 0: no record).
    pub mode: Vec<Vec<u8>>,
    pub qdelay_sum_us: Vec<u64>,
    pub qdelay_n: Vec<u32>,
    pub qdelay_max_us: Vec<u32>,
    pub drops: Vec<u32>,
    pub phase_hist: Vec<Histogram<u64>>,
    /// Per phase: queue, random, outage drops (forward direction).
    pub phase_drops: Vec<[u64; 3]>,
}

#[allow(missing_docs)]
impl Recorder {
    /// Bins for a run of `duration` with `flows` flows over `phases` phases.
    pub fn new(duration: Duration, flows: usize, phases: usize) -> Self {
        let fine = Duration::from_millis(10).max(duration / 100_000);
        let n = (duration.as_nanos() / fine.as_nanos()) as usize + 2;
        let hist = || Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3).expect("valid bounds");
        Recorder {
            fine,
            delivered: vec![vec![0; n]; flows],
            rate: vec![vec![0; n]; flows],
            mode: vec![vec![0; n]; flows],
            qdelay_sum_us: vec![0; n],
            qdelay_n: vec![0; n],
            qdelay_max_us: vec![0; n],
            drops: vec![0; n],
            phase_hist: (0..phases).map(|_| hist()).collect(),
            phase_drops: vec![[0; 3]; phases],
        }
    }

    /// Fine bin of an instant, clamped to the last bin.
    pub fn bin(&self, t: Instant) -> usize {
        self.bin_of(t.saturating_since(Instant::ZERO))
            .min(self.qdelay_n.len() - 1)
    }

    pub fn on_delivered(&mut self, flow: usize, t: Instant, bytes: u64) {
        let b = self.bin(t);
        self.delivered[flow][b] += bytes;
    }

    pub fn on_sent(&mut self, flow: usize, t: Instant, rate_bps: u64) {
        let b = self.bin(t);
        self.rate[flow][b] = rate_bps;
    }

    /// The flow's rate controller is in `mode` at `t` (Spate flows).
    pub fn on_mode(&mut self, flow: usize, t: Instant, mode: spate_proto::RateMode) {
        let b = self.bin(t);
        self.mode[flow][b] = match mode {
            spate_proto::RateMode::Competitive => MODE_COMPETITIVE,
            spate_proto::RateMode::FollowingBbr => MODE_FOLLOWING_BBR,
            _ => MODE_DELAY,
        };
    }

    /// Seconds the flow spent in the delay mode, in the competitive mode (either law), and
    /// in the competitive mode following BBR (bins in which it sent).
    pub fn mode_seconds(&self, flow: usize) -> (f64, f64, f64) {
        let count = |m| self.mode[flow].iter().filter(|&&x| x == m).count() as f64;
        let bin = self.fine.as_secs_f64();
        let bbr = count(MODE_FOLLOWING_BBR);
        (
            round(count(MODE_DELAY) * bin, 3),
            round((count(MODE_COMPETITIVE) + bbr) * bin, 3),
            round(bbr * bin, 3),
        )
    }

    pub fn on_queued(&mut self, phase: usize, t: Instant, delay: Duration) {
        let b = self.bin(t);
        let us = delay.as_micros().min(u128::from(u32::MAX)) as u32;
        self.qdelay_sum_us[b] += u64::from(us);
        self.qdelay_n[b] += 1;
        self.qdelay_max_us[b] = self.qdelay_max_us[b].max(us);
        self.phase_hist[phase].saturating_record(u64::from(us).max(1));
    }

    pub fn on_dropped(&mut self, phase: usize, t: Instant, cause: DropCause) {
        let b = self.bin(t);
        self.drops[b] += 1;
        let i = match cause {
            DropCause::Queue => 0,
            DropCause::Random => 1,
            DropCause::Outage => 2,
        };
        self.phase_drops[phase][i] += 1;
    }

    /// Delivered bytes, all flows, in fine bins `[from, to)`.
    pub fn delivered_between(&self, from: usize, to: usize) -> u64 {
        self.delivered
            .iter()
            .map(|f| f[from.min(f.len())..to.min(f.len())].iter().sum::<u64>())
            .sum()
    }

    /// Time to adapt (see the module doc) for a phase spanning fine bins `[start, end)` with
    /// capacity `bps`; `None` if goodput never held for a full second inside the phase.
    pub fn time_to_adapt(&self, start: usize, end: usize, bps: u64) -> Option<Duration> {
        let w = (COARSE_BIN.as_nanos() / self.fine.as_nanos()).max(1) as usize;
        let windows = (Duration::from_secs(1).as_nanos() / COARSE_BIN.as_nanos()) as usize;
        let need = bps as f64 * 0.9 * COARSE_BIN.as_secs_f64() / 8.0;
        let good: Vec<bool> = (start..end)
            .step_by(w)
            .take_while(|&b| b + w <= end)
            .map(|b| self.delivered_between(b, b + w) as f64 >= need)
            .collect();
        let mut run = 0;
        for (k, &g) in good.iter().enumerate() {
            run = if g { run + 1 } else { 0 };
            if run == windows {
                return Some(COARSE_BIN * (k + 1 - windows) as u32);
            }
        }
        None
    }

    /// Each flow's goodput (bits/s) between `from` and `to`; zeros for an empty window.
    pub fn goodputs_between(&self, from: Duration, to: Duration) -> Vec<f64> {
        let (b0, b1) = (self.bin_of(from), self.bin_of(to));
        let secs = to.saturating_sub(from).as_secs_f64();
        self.delivered
            .iter()
            .map(|d| {
                if secs <= 0.0 {
                    return 0.0;
                }
                d[b0.min(d.len())..b1.min(d.len())].iter().sum::<u64>() as f64 * 8.0 / secs
            })
            .collect()
    }

    /// Fine bin index of a time.
    pub fn bin_of(&self, d: Duration) -> usize {
        (d.as_nanos() / self.fine.as_nanos()) as usize
    }

    /// Capacity at fine bin `b`.
    pub fn capacity_at(&self, schedule: &Schedule, b: usize) -> u64 {
        let t = Instant::from_nanos((self.fine * b as u32).as_nanos() as u64);
        schedule.phases()[schedule.index_at(t)].rate_bps
    }
    /// Per-phase goodput, utilisation, time to adapt, queueing delay and drops of a run that
    /// ended at `end`.
    pub fn phase_reports(&self, sched: &Schedule, end: Instant) -> Vec<PhaseReport> {
        let end_d = Duration::from_nanos(end.as_nanos());
        sched
            .phases()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let until = sched
                    .phases()
                    .get(i + 1)
                    .map_or(end_d, |n| n.at)
                    .min(end_d)
                    .max(p.at);
                let (b0, b1) = (self.bin_of(p.at), self.bin_of(until));
                let secs = (until - p.at).as_secs_f64();
                let delivered = self.delivered_between(b0, b1);
                let goodput = if secs > 0.0 {
                    delivered as f64 * 8.0 / secs
                } else {
                    0.0
                };
                let tta = self.time_to_adapt(b0, b1, p.rate_bps);
                let after = tta.map(|t| {
                    let from = p.at + t;
                    let s = (until - from).as_secs_f64();
                    let bytes = self.delivered_between(self.bin_of(from), b1);
                    round(bytes as f64 * 8.0 / s / p.rate_bps as f64, 4)
                });
                let h = &self.phase_hist[i];
                let q = |v: f64| {
                    if h.is_empty() {
                        0.0
                    } else {
                        round(h.value_at_quantile(v) as f64 / 1e3, 3)
                    }
                };
                let d = self.phase_drops[i];
                PhaseReport {
                    at_s: round(p.at.as_secs_f64(), 6),
                    until_s: round(until.as_secs_f64(), 6),
                    capacity_mbps: round(p.rate_bps as f64 / 1e6, 3),
                    goodput_mbps: round(goodput / 1e6, 3),
                    utilization: round(goodput / p.rate_bps as f64, 4),
                    time_to_adapt_s: tta.map(|t| round(t.as_secs_f64(), 3)),
                    utilization_after_adapt: after,
                    queue_delay_ms: Percentiles {
                        p50: q(0.5),
                        p95: q(0.95),
                        p99: q(0.99),
                        mean: Some(if h.is_empty() {
                            0.0
                        } else {
                            round(h.mean() / 1e3, 3)
                        }),
                    },
                    queue_drops: d[0],
                    random_drops: d[1],
                    outage_drops: d[2],
                }
            })
            .collect()
    }

    /// The 100 ms time series of a run that ended at `end`.
    pub fn series(&self, sched: &Schedule, end: Instant) -> TimeSeries {
        let w = (COARSE_BIN.as_nanos() / self.fine.as_nanos()).max(1) as usize;
        let last = self.bin(end);
        let bin_s = (self.fine * w as u32).as_secs_f64();
        let mut rows = Vec::new();
        let mut b = 0;
        while b < last {
            let e = (b + w).min(last);
            let secs = (self.fine * (e - b) as u32).as_secs_f64();
            let mbps = |bytes: u64| round(bytes as f64 * 8.0 / secs / 1e6, 3);
            let n: u64 = self.qdelay_n[b..e].iter().map(|&x| u64::from(x)).sum();
            let sum: u64 = self.qdelay_sum_us[b..e].iter().sum();
            rows.push(SeriesRow {
                t_s: round((self.fine * b as u32).as_secs_f64(), 3),
                capacity_mbps: round(self.capacity_at(sched, b) as f64 / 1e6, 3),
                goodput_mbps: mbps(self.delivered_between(b, e)),
                flow_goodput_mbps: self
                    .delivered
                    .iter()
                    .map(|f| mbps(f[b..e].iter().sum()))
                    .collect(),
                flow_rate_mbps: self
                    .rate
                    .iter()
                    .map(|r| {
                        round(
                            r[b..e].iter().rev().find(|&&x| x > 0).copied().unwrap_or(0) as f64
                                / 1e6,
                            3,
                        )
                    })
                    .collect(),
                flow_competitive: self
                    .mode
                    .iter()
                    .map(|m| {
                        let seen = m[b..e].iter().filter(|&&x| x > 0).count();
                        let comp = m[b..e].iter().filter(|&&x| x >= MODE_COMPETITIVE).count();
                        if seen == 0 {
                            0.0
                        } else {
                            round(comp as f64 / seen as f64, 3)
                        }
                    })
                    .collect(),
                queue_delay_ms_mean: if n > 0 {
                    round(sum as f64 / n as f64 / 1e3, 3)
                } else {
                    0.0
                },
                queue_delay_ms_max: round(
                    f64::from(*self.qdelay_max_us[b..e].iter().max().unwrap_or(&0)) / 1e3,
                    3,
                ),
                drops: self.drops[b..e].iter().map(|&x| u64::from(x)).sum(),
            });
            b = e;
        }
        TimeSeries { bin_s, rows }
    }
}
