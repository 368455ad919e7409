//! The results of a run: a JSON-serialisable [`Report`] and a [`TimeSeries`].
//!
//! Field names and meanings follow `SEEDS.md` ("Metrics Spate reports"). Floats are rounded to
//! a fixed number of digits so that reports diff cleanly and snapshot tests are stable.

use serde::{Deserialize, Serialize};

/// Everything a run reports.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Seed used.
    pub seed: u64,
    /// Simulated time at the end of the run, seconds.
    pub sim_time_s: f64,
    /// Per flow.
    pub flows: Vec<FlowReport>,
    /// Per path phase.
    pub phases: Vec<PhaseReport>,
    /// Jain's fairness index of the flows' goodputs over `fairness_window_s` (null with fewer
    /// than two flows or an empty window).
    pub fairness_jain: Option<f64>,
    /// [from, to] seconds: from `fairness_from_s` (default: the last flow's start) to the
    /// first flow's completion or the end of the run.
    pub fairness_window_s: Option<[f64; 2]>,
}

/// One flow's results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FlowReport {
    /// The program: `spate`, or the TCP model's `cubic` / `reno` (absent in reports written
    /// before other protocols were simulated: Spate).
    #[serde(default = "spate_name")]
    pub protocol: String,
    /// Rate policy (Spate flows; `-` for others).
    pub policy: String,
    /// Start time, seconds.
    pub start_s: f64,
    /// Transfer size; for unbounded flows (bytes = 0), the distinct bytes sent.
    pub bytes_offered: u64,
    /// Distinct file bytes delivered to the receiving application.
    pub bytes_delivered: u64,
    /// Whether every byte arrived.
    pub complete: bool,
    /// Seconds from the flow's start until the receiver held every byte.
    pub completion_s: Option<f64>,
    /// Every delivered chunk equals the sender's bytes, and (for complete transfers) the
    /// receiver's digest over all delivered chunks equals the sender's digest over all it sent.
    pub verified: bool,
    /// bytes_delivered · 8 / (completion or end − start), Mbit/s.
    pub goodput_mbps: f64,
    /// DATA packets sent, including retransmissions.
    pub data_packets_sent: u64,
    /// DATA packets that repeated earlier bytes.
    pub retransmitted_packets: u64,
    /// Retransmitted file bytes / bytes offered.
    pub retransmission_overhead: f64,
    /// Retransmitted packets whose bytes had already arrived (counted by the receiver).
    pub spurious_retransmissions: u64,
    /// Packets the sender declared lost.
    pub lost_packets: u64,
    /// Receiver→sender bytes, UDP payload plus 28 bytes of IP/UDP header per packet.
    pub feedback_bytes: u64,
    /// feedback_bytes in KiB per GiB delivered.
    pub feedback_kib_per_gib: f64,
    /// Goodput within the fairness window, Mbit/s.
    pub window_goodput_mbps: Option<f64>,
    /// This flow's fraction of all flows' goodput within the fairness window.
    #[serde(default)]
    pub share: Option<f64>,
    /// Seconds a Spate flow's rate controller spent in the delay mode (null for others).
    #[serde(default)]
    pub delay_mode_s: Option<f64>,
    /// Seconds a Spate flow's rate controller spent competing with buffer-filling traffic.
    #[serde(default)]
    pub competitive_mode_s: Option<f64>,
    /// Of those, seconds it followed BBR's law (having recognised BBR).
    #[serde(default)]
    pub following_bbr_s: Option<f64>,
    /// Coding setting of a Spate flow (`auto`, `off` or the repair rate; null for others).
    #[serde(default)]
    pub fec: Option<String>,
    /// REPAIR packets sent (spec §6.9).
    #[serde(default)]
    pub repair_packets: u64,
    /// (Retransmitted + repair symbol bytes) / bytes offered: what the transfer sent beyond
    /// each byte once.
    #[serde(default)]
    pub overshoot: f64,
    /// Chunks the receiver rebuilt from repair symbols instead of waiting for a retransmission.
    #[serde(default)]
    pub recovered_by_repair: u64,
    /// Repair symbols that arrived for a block already held or rebuilt.
    #[serde(default)]
    pub useless_repairs: u64,
    /// Round trips between the last new byte leaving the sender and the receiver holding
    /// everything, beyond the half round trip that byte needed: (tail − RTT/2) / RTT, with
    /// the sender's minimum RTT.
    #[serde(default)]
    pub tail_round_trips: Option<f64>,
    /// Why the flow failed, if it did.
    pub error: Option<String>,
}

fn spate_name() -> String {
    "spate".to_owned()
}

/// Queueing delay percentiles, ms.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean (absent in reports written before it existed).
    #[serde(default)]
    pub mean: Option<f64>,
}

/// One path phase's results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseReport {
    /// Phase start, seconds.
    pub at_s: f64,
    /// Phase end (next phase or end of run), seconds.
    pub until_s: f64,
    /// Bottleneck capacity, Mbit/s.
    pub capacity_mbps: f64,
    /// Goodput of all flows, Mbit/s.
    pub goodput_mbps: f64,
    /// goodput / capacity.
    pub utilization: f64,
    /// Seconds from phase start until goodput stays ≥ 90 % of capacity for one second.
    pub time_to_adapt_s: Option<f64>,
    /// Utilisation from phase start + time to adapt until the phase end.
    pub utilization_after_adapt: Option<f64>,
    /// Queueing delay of packets entering the bottleneck in this phase (sender→receiver).
    pub queue_delay_ms: Percentiles,
    /// Packets dropped by the full queue (sender→receiver).
    pub queue_drops: u64,
    /// Packets dropped by random loss (sender→receiver).
    pub random_drops: u64,
    /// Packets dropped by outages (sender→receiver).
    pub outage_drops: u64,
}

/// Per-interval samples for CSV and plots.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    /// Interval length, seconds.
    pub bin_s: f64,
    /// Rows, one per interval.
    pub rows: Vec<SeriesRow>,
}

/// One interval.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRow {
    /// Interval start, seconds.
    pub t_s: f64,
    /// Capacity, Mbit/s.
    pub capacity_mbps: f64,
    /// Goodput of all flows, Mbit/s.
    pub goodput_mbps: f64,
    /// Goodput per flow, Mbit/s.
    pub flow_goodput_mbps: Vec<f64>,
    /// Pacing rate per flow at the end of the interval, Mbit/s (0 when not sending).
    pub flow_rate_mbps: Vec<f64>,
    /// Per flow: the fraction of the interval its rate controller spent in competitive mode
    /// (0 for flows that are not Spate's).
    pub flow_competitive: Vec<f64>,
    /// Mean queueing delay of packets entering the bottleneck, ms.
    pub queue_delay_ms_mean: f64,
    /// Largest queueing delay, ms.
    pub queue_delay_ms_max: f64,
    /// Packets dropped (sender→receiver).
    pub drops: u64,
}

/// Round to `digits` decimals.
pub fn round(v: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (v * m).round() / m
}

/// Jain's fairness index (Σx)² / (n·Σx²) of the goodputs `x`, rounded to 4 digits; `None` for
/// fewer than two flows or when nothing was delivered.
pub fn jain(x: &[f64]) -> Option<f64> {
    let (sum, sq): (f64, f64) = x.iter().fold((0.0, 0.0), |(s, q), &v| (s + v, q + v * v));
    if x.len() < 2 || sq == 0.0 {
        return None;
    }
    Some(round(sum * sum / (x.len() as f64 * sq), 4))
}

/// Each flow's goodput in the fairness window (Mbit/s, rounded) and its share of all flows'
/// (rounded to 4 digits; `None` when nothing was delivered), from goodputs in bits/s.
pub fn window_shares(x: &[f64]) -> impl Iterator<Item = (f64, Option<f64>)> + '_ {
    let total: f64 = x.iter().sum();
    x.iter().map(move |&g| {
        (
            round(g / 1e6, 3),
            (total > 0.0).then(|| round(g / total, 4)),
        )
    })
}

/// Feedback KiB per GiB delivered (0 when nothing was delivered).
pub fn kib_per_gib(feedback_bytes: u64, delivered_bytes: u64) -> f64 {
    if delivered_bytes == 0 {
        return 0.0;
    }
    feedback_bytes as f64 / 1024.0 / (delivered_bytes as f64 / (1u64 << 30) as f64)
}

/// "Jain's fairness index …" line of a text report (empty without an index).
pub fn fairness_line(jain: Option<f64>, window: Option<[f64; 2]>) -> String {
    match (jain, window) {
        (Some(j), Some(w)) => format!("Jain's fairness index {j:.4} over {}-{} s\n", w[0], w[1]),
        _ => String::new(),
    }
}

/// A flow's extra lines in a text report: its goodput and share in the fairness window (when
/// there are several flows), the time its rate controller competed with buffer-filling
/// traffic (when it did), and its error.
pub fn flow_notes(
    window_goodput_mbps: Option<f64>,
    share: Option<f64>,
    competitive_s: Option<f64>,
    following_bbr_s: Option<f64>,
    several: bool,
    error: Option<&str>,
) -> String {
    let mut s = String::new();
    if let Some(w) = window_goodput_mbps.filter(|_| several) {
        s += &format!("      goodput in fairness window: {w:.2} Mbit/s");
        if let Some(x) = share {
            s += &format!(" ({:.1} % of all flows)", x * 100.0);
        }
        s += "\n";
    }
    if let Some(c) = competitive_s.filter(|&c| c > 0.0) {
        s += &format!("      competitive mode: {c:.1} s (sharing with buffer-filling traffic)\n");
    }
    if let Some(b) = following_bbr_s.filter(|&b| b > 0.0) {
        s += &format!("      of which following BBR: {b:.1} s (recognised by its ProbeRTT)\n");
    }
    if let Some(e) = error {
        s += &format!("      error: {e}\n");
    }
    s
}

/// The per-phase table of a text report (simulator and emulator alike).
pub fn phase_table(phases: &[PhaseReport]) -> String {
    let mut s = String::new();
    s += "\nphase  from-to s        capacity  goodput   util   adapt s  util after  queue p50/p95/p99 ms   drops q/rand/out\n";
    for (i, p) in phases.iter().enumerate() {
        s += &format!(
            "{:<6} {:<16} {:<9} {:<9.2} {:<6.3} {:<8} {:<11} {:<21} {}/{}/{}\n",
            i,
            format!("{}-{}", p.at_s, p.until_s),
            p.capacity_mbps,
            p.goodput_mbps,
            p.utilization,
            p.time_to_adapt_s.map_or("-".into(), |t| format!("{t}")),
            p.utilization_after_adapt
                .map_or("-".into(), |u| format!("{u:.3}")),
            format!(
                "{}/{}/{}",
                p.queue_delay_ms.p50, p.queue_delay_ms.p95, p.queue_delay_ms.p99
            ),
            p.queue_drops,
            p.random_drops,
            p.outage_drops,
        );
    }
    s
}

impl TimeSeries {
    /// CSV with a header row.
    pub fn to_csv(&self) -> String {
        let flows = self.rows.first().map_or(0, |r| r.flow_goodput_mbps.len());
        let mut out = String::from("t_s,capacity_mbps,goodput_mbps");
        for i in 0..flows {
            out += &format!(",flow{i}_goodput_mbps,flow{i}_rate_mbps,flow{i}_competitive");
        }
        out += ",queue_delay_ms_mean,queue_delay_ms_max,drops\n";
        for r in &self.rows {
            out += &format!("{},{},{}", r.t_s, r.capacity_mbps, r.goodput_mbps);
            for i in 0..flows {
                out += &format!(
                    ",{},{},{}",
                    r.flow_goodput_mbps[i], r.flow_rate_mbps[i], r.flow_competitive[i]
                );
            }
            out += &format!(
                ",{},{},{}\n",
                r.queue_delay_ms_mean, r.queue_delay_ms_max, r.drops
            );
        }
        out
    }
}

impl Report {
    /// A plain-text summary for terminals.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "scenario {:?} (seed {}), {:.3} s simulated\n\n",
            self.scenario, self.seed, self.sim_time_s
        );
        s += "flow  policy  offered        delivered      done     verified  goodput Mbit/s  retrans %  spurious  feedback KiB/GiB\n";
        for (i, f) in self.flows.iter().enumerate() {
            s += &format!(
                "{:<5} {:<7} {:<14} {:<14} {:<8} {:<9} {:<15.2} {:<10.3} {:<9} {:.1}\n",
                i,
                if f.protocol == "spate" {
                    &f.policy
                } else {
                    &f.protocol
                },
                f.bytes_offered,
                f.bytes_delivered,
                f.completion_s.map_or("no".into(), |c| format!("{c:.3}s")),
                if f.verified { "yes" } else { "NO" },
                f.goodput_mbps,
                f.retransmission_overhead * 100.0,
                f.spurious_retransmissions,
                f.feedback_kib_per_gib,
            );
            if f.repair_packets > 0 || f.recovered_by_repair > 0 {
                s += &format!(
                    "      coding (fec {}): {} repair packets, {} chunks rebuilt, {} useless; \
                     overshoot {:.2} %\n",
                    f.fec.as_deref().unwrap_or("-"),
                    f.repair_packets,
                    f.recovered_by_repair,
                    f.useless_repairs,
                    f.overshoot * 100.0,
                );
            }
            if let Some(t) = f.tail_round_trips {
                s += &format!("      tail: {t:.2} round trips after the last new byte left\n");
            }
            s += &flow_notes(
                f.window_goodput_mbps,
                f.share,
                f.competitive_mode_s,
                f.following_bbr_s,
                self.flows.len() > 1,
                f.error.as_deref(),
            );
        }
        s += &fairness_line(self.fairness_jain, self.fairness_window_s);
        s += &phase_table(&self.phases);
        s
    }
}
