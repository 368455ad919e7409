//! What an emulator run reports (JSON, one object per run) and the tables made from many runs.
//!
//! Phase fields are the simulator's ([`PhaseReport`], computed by the same code from the same
//! kind of recording), so `spate-lab compare` subtracts like from like. Flow fields are those
//! every protocol has: goodput at the receiver's interface, feedback bytes, CPU time of each end.

use serde::{Deserialize, Serialize};
use spate_sim::report::{fairness_line, flow_notes, phase_table};
use spate_sim::PhaseReport;

use super::host::HostLoad;

/// One emulator run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmuReport {
    /// Scenario name.
    pub scenario: String,
    /// Rate scale applied to the scenario file.
    pub scale: f64,
    /// Seed of the path's loss pattern.
    pub seed: u64,
    /// Seconds the run lasted.
    pub run_s: f64,
    /// The protocols of the flows, joined with "+" (the run's label in tables).
    pub label: String,
    /// Per flow.
    pub flows: Vec<EmuFlow>,
    /// Per path phase (all flows together).
    pub phases: Vec<PhaseReport>,
    /// Jain's index over the window where all flows run, when there are several.
    pub fairness_jain: Option<f64>,
    /// That window, seconds.
    pub fairness_window_s: Option<[f64; 2]>,
    /// The emulator's own numbers.
    pub emulator: EmulatorStats,
    /// The machine over the run (absent in reports from before session 49, and where
    /// `/proc/stat` cannot be read).
    #[serde(default)]
    pub host: Option<HostLoad>,
}

/// One flow of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmuFlow {
    /// spate, cubic, bbr, reno, gridftp, gridftp-bbr, udt.
    pub protocol: String,
    /// Spate's rate policy (other protocols: "-").
    pub policy: String,
    /// When it started, seconds.
    pub start_s: f64,
    /// Payload bytes delivered to the receiver's interface.
    pub bytes_delivered: u64,
    /// Delivered payload per second from its start to the end of the run (or its own end).
    pub goodput_mbps: f64,
    /// Goodput in the fairness window.
    pub window_goodput_mbps: Option<f64>,
    /// Goodput in each path phase.
    #[serde(default)]
    pub phase_goodput_mbps: Vec<f64>,
    /// Seconds from start to the sender's exit, when it finished before the run ended.
    pub completion_s: Option<f64>,
    /// IP bytes from receiver to sender (Spate's feedback, TCP's ACKs).
    pub feedback_bytes: u64,
    /// Feedback per GiB delivered, KiB.
    pub feedback_kib_per_gib: f64,
    /// CPU seconds of the sending and receiving process (user + system; kernel TCP's work in
    /// softirq context is not counted).
    pub cpu_s: [Option<f64>; 2],
    /// CPU percent of one core per Gbit/s of goodput, sender and receiver.
    pub cpu_pct_per_gbps: [Option<f64>; 2],
    /// Bytes the program itself reported moving (Spate: delivered; iperf3: received).
    pub app_bytes: Option<u64>,
    /// Why the flow failed, when it did.
    pub error: Option<String>,
    /// Its fraction of all flows' goodput in the fairness window.
    #[serde(default)]
    pub share: Option<f64>,
    /// Seconds a Spate flow's rate controller spent in the delay mode (null for others).
    #[serde(default)]
    pub delay_mode_s: Option<f64>,
    /// Seconds it spent competing with buffer-filling traffic.
    #[serde(default)]
    pub competitive_mode_s: Option<f64>,
    /// Of those, seconds it followed BBR's law (having recognised BBR).
    #[serde(default)]
    pub following_bbr_s: Option<f64>,
    /// A Spate sender held up by its host: the fraction of its progress lines (every 100 ms)
    /// whose controller report found it `limited` (more than 5 % of its pace left unused),
    /// and the pace it left unused on average, Mbit/s.
    #[serde(default)]
    pub sender_limited: Option<HostLimits>,
}

/// How much a Spate sender was held up by its own host rather than by the path: its CPU, or
/// its scheduling on a busy machine (`cc/delay/mod.rs`, "A slow sender is not a slow path").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostLimits {
    /// Fraction of the sender's reports in which it counted as limited.
    pub share: f64,
    /// Mean pace left unused, Mbit/s.
    pub unused_mbps: f64,
}

/// A run's text and table say the host held Spate up when the pace its sender left unused
/// is above this fraction of its goodput. Quiet runs of the lab's paths leave 0.1–1 % (at
/// 1 Gbit/s 2–5 Mbit/s, in 2–6 % of the reports); next to three busy loops 15 %.
pub const UNUSED_NOTE: f64 = 0.03;

/// The note for a Spate sender its host held up, if it was, with what the machine did over
/// the run when that is known.
fn host_note(f: &EmuFlow, host: Option<&HostLoad>) -> Option<String> {
    let l = f
        .sender_limited
        .filter(|l| l.unused_mbps > UNUSED_NOTE * f.goodput_mbps)?;
    let machine = host.map_or(String::new(), |h| format!(" (over the run: {})", h.brief()));
    Some(format!(
        "the host held the sender up in {:.0} % of its reports ({:.1} Mbit/s of its pace left unused on average): a busy machine, not the path{machine} (docs/lab.md, \"A busy host\"); close other programs and run again",
        l.share * 100.0,
        l.unused_mbps
    ))
}

/// The emulator's own numbers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmulatorStats {
    /// CPU seconds of the forwarding thread.
    pub cpu_s: f64,
    /// How late packets left the delay line, mean, microseconds.
    pub lateness_mean_us: f64,
    /// And the worst.
    pub lateness_max_us: u64,
    /// Packets that matched no flow.
    pub unclassified: u64,
    /// Forward (towards the receiver) packets offered, and dropped by queue, loss, outage.
    pub forward: [u64; 4],
    /// Reverse packets offered, and dropped by queue, loss, outage.
    pub reverse: [u64; 4],
}

impl EmulatorStats {
    /// The share of forward packets the bottleneck's queue dropped, in per cent (`None` when
    /// nothing was offered). Goodput alone hides a sender that overflows the buffer: it still
    /// fills the link, and the wire carries what the queue throws away.
    pub fn queue_drop_pct(&self) -> Option<f64> {
        let [offered, queue, ..] = self.forward;
        (offered > 0).then(|| queue as f64 * 100.0 / offered as f64)
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

impl EmuReport {
    /// The per-run text summary.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "scenario {:?} (rates × {}), {:.1} s in real time, emulator: {:.1} s CPU, packets late by {:.0} µs on average ({} µs at most), {} % of forward packets dropped by the bottleneck queue\n",
            self.scenario,
            self.scale,
            self.run_s,
            self.emulator.cpu_s,
            self.emulator.lateness_mean_us,
            self.emulator.lateness_max_us,
            opt(self.emulator.queue_drop_pct(), 2)
        );
        if let Some(h) = &self.host {
            s += &format!("host: {}\n", h.describe());
        }
        s.push('\n');
        s += "flow  protocol  policy  start s  goodput Mbit/s  done     feedback KiB/GiB  CPU %/Gbit/s send/recv\n";
        for (i, f) in self.flows.iter().enumerate() {
            s += &format!(
                "{:<5} {:<9} {:<7} {:<8} {:<15.2} {:<8} {:<17.1} {}/{}\n",
                i,
                f.protocol,
                f.policy,
                f.start_s,
                f.goodput_mbps,
                opt(f.completion_s, 2),
                f.feedback_kib_per_gib,
                opt(f.cpu_pct_per_gbps[0], 1),
                opt(f.cpu_pct_per_gbps[1], 1),
            );
            s += &flow_notes(
                f.window_goodput_mbps,
                f.share,
                f.competitive_mode_s,
                f.following_bbr_s,
                self.flows.len() > 1,
                f.error.as_deref(),
            );
            if let Some(n) = host_note(f, self.host.as_ref()) {
                s += &format!("      note: {n}\n");
            }
        }
        s += &fairness_line(self.fairness_jain, self.fairness_window_s);
        s += &phase_table(&self.phases);
        s
    }
}

/// Each flow's share of the fairness window, and for Spate flows the time they competed:
/// `spate fair 50.6 % (36 s competing), cubic 49.4 %` (`-` with one flow).
fn shares(r: &EmuReport) -> String {
    if r.flows.len() < 2 {
        return "-".into();
    }
    let each: Vec<String> = r
        .flows
        .iter()
        .map(|f| {
            let who = if f.protocol == "spate" {
                format!("spate {}", f.policy)
            } else {
                f.protocol.clone()
            };
            let share = f
                .share
                .map_or("-".into(), |x| format!("{:.1} %", x * 100.0));
            match (
                f.competitive_mode_s.filter(|&c| c > 0.0),
                f.following_bbr_s.filter(|&b| b > 0.0),
            ) {
                (Some(c), Some(b)) => {
                    format!("{who} {share} ({c:.0} s competing, {b:.0} s of it following BBR)")
                }
                (Some(c), None) => format!("{who} {share} ({c:.0} s competing)"),
                _ => format!("{who} {share}"),
            }
        })
        .collect();
    each.join(", ")
}

/// A Markdown table of many runs: one row per run, per phase its utilization, time to adapt
/// and queueing delay, then total goodput and CPU. Runs are grouped by scenario in the order
/// given.
pub fn markdown(runs: &[EmuReport]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < runs.len() {
        let name = &runs[i].scenario;
        let group: Vec<&EmuReport> = runs[i..]
            .iter()
            .take_while(|r| &r.scenario == name)
            .collect();
        i += group.len();
        let phases = group.iter().map(|r| r.phases.len()).max().unwrap_or(0);
        let first = group[0];
        out += &format!("### {name} (rates × {})\n\n", first.scale);
        let describe: Vec<String> = first
            .phases
            .iter()
            .map(|p| format!("{}–{} s: {} Mbit/s", p.at_s, p.until_s, p.capacity_mbps))
            .collect();
        out += &format!("Path: {}.\n\n", describe.join("; "));
        out += "| tool | goodput Mbit/s | dropped by the queue % |";
        for k in 0..phases {
            out += &format!(
                " phase {} util | adapt s | queue ms p50 / p95 / mean |",
                k + 1
            );
        }
        out += " CPU %/Gbit/s send/recv | shares of the fairness window |\n|---|---|---|";
        for _ in 0..phases {
            out += "---|---|---|";
        }
        out += "---|---|\n";
        for r in &group {
            let goodput: f64 = r.flows.iter().map(|f| f.goodput_mbps).sum();
            out += &format!(
                "| {} | {:.1} | {} |",
                r.label,
                goodput,
                opt(r.emulator.queue_drop_pct(), 2)
            );
            for k in 0..phases {
                match r.phases.get(k) {
                    Some(p) => {
                        out += &format!(
                            " {:.3} | {} | {:.1} / {:.1} / {} |",
                            p.utilization,
                            opt(p.time_to_adapt_s, 1),
                            p.queue_delay_ms.p50,
                            p.queue_delay_ms.p95,
                            opt(p.queue_delay_ms.mean, 1)
                        )
                    }
                    None => out += " - | - | - |",
                }
            }
            let cpu: Vec<String> = r
                .flows
                .iter()
                .map(|f| {
                    format!(
                        "{}/{}",
                        opt(f.cpu_pct_per_gbps[0], 1),
                        opt(f.cpu_pct_per_gbps[1], 1)
                    )
                })
                .collect();
            out += &format!(" {} | {} |", cpu.join(", "), shares(r));
            if let Some(e) = r.flows.iter().find_map(|f| f.error.as_ref()) {
                out += &format!(" *failed: {}*", e.replace('|', "/"));
            }
            out += "\n";
        }
        for r in &group {
            for n in r.flows.iter().filter_map(|f| host_note(f, r.host.as_ref())) {
                out += &format!("\n*{}: {n}.*\n", r.label);
            }
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use spate_sim::report::Percentiles;

    fn run(label: &str, util: f64, mean: Option<f64>) -> EmuReport {
        EmuReport {
            scenario: "s".into(),
            scale: 0.1,
            seed: 1,
            run_s: 10.0,
            label: label.into(),
            flows: vec![EmuFlow {
                protocol: label.into(),
                policy: "-".into(),
                start_s: 0.0,
                bytes_delivered: 1,
                goodput_mbps: util * 100.0,
                window_goodput_mbps: None,
                phase_goodput_mbps: vec![],
                completion_s: None,
                feedback_bytes: 0,
                feedback_kib_per_gib: 0.0,
                cpu_s: [Some(1.0), None],
                cpu_pct_per_gbps: [Some(12.5), None],
                app_bytes: None,
                error: None,
                share: None,
                delay_mode_s: None,
                competitive_mode_s: None,
                following_bbr_s: None,
                sender_limited: None,
            }],
            phases: vec![PhaseReport {
                at_s: 0.0,
                until_s: 10.0,
                capacity_mbps: 100.0,
                goodput_mbps: util * 100.0,
                utilization: util,
                time_to_adapt_s: None,
                utilization_after_adapt: None,
                queue_delay_ms: Percentiles {
                    p50: 1.0,
                    p95: 2.0,
                    p99: 3.0,
                    mean,
                },
                queue_drops: 0,
                random_drops: 0,
                outage_drops: 0,
            }],
            fairness_jain: None,
            fairness_window_s: None,
            emulator: EmulatorStats {
                cpu_s: 1.0,
                lateness_mean_us: 10.0,
                lateness_max_us: 100,
                unclassified: 0,
                forward: [0; 4],
                reverse: [0; 4],
            },
            host: None,
        }
    }

    #[test]
    fn a_sender_its_host_held_up_is_noted_in_text_and_table() {
        // Limited now and then, but little pace left unused (1 Gbit/s on a quiet host).
        let mut quiet = run("spate", 0.94, None);
        quiet.flows[0].sender_limited = Some(HostLimits {
            share: 0.06,
            unused_mbps: 2.5,
        });
        let mut busy = run("spate", 0.78, None);
        busy.flows[0].sender_limited = Some(HostLimits {
            share: 0.84,
            unused_mbps: 12.3,
        });
        assert!(!quiet.to_text().contains("held the sender up"));
        assert!(!markdown(&[quiet]).contains("held the sender up"));
        let note = "the host held the sender up in 84 % of its reports (12.3 Mbit/s of its pace left unused on average)";
        assert!(busy.to_text().contains(note), "{}", busy.to_text());
        assert!(busy.to_text().contains("close other programs"));
        let t = markdown(&[busy.clone()]);
        assert!(t.contains(&format!("*spate: {note}")), "{t}");
        // What the machine did over the run is in the text, and in the note.
        busy.host = Some(HostLoad {
            cpus: 2,
            idle_pct: 3.5,
            steal_pct: 6.2,
        });
        let text = busy.to_text();
        assert!(
            text.contains("host: 2 CPUs, 3.5 % idle, 6.2 % taken by the hypervisor (steal)\n"),
            "{text}"
        );
        let with_host = "a busy machine, not the path (over the run: 3.5 % idle, 6.2 % taken by the hypervisor)";
        assert!(text.contains(with_host), "{text}");
        assert!(markdown(&[busy]).contains(with_host));
    }

    #[test]
    fn one_row_per_run_with_phase_columns() {
        let t = markdown(&[run("spate", 0.94, Some(6.25)), run("cubic", 0.09, None)]);
        assert!(
            t.starts_with("### s (rates × 0.1)\n\nPath: 0–10 s: 100 Mbit/s.\n"),
            "{t}"
        );
        assert!(
            t.contains("| spate | 94.0 | - | 0.940 | - | 1.0 / 2.0 / 6.2 | 12.5/- |"),
            "{t}"
        );
        assert!(
            t.contains("| cubic | 9.0 | - | 0.090 | - | 1.0 / 2.0 / - | 12.5/- |"),
            "{t}"
        );
        // What the queue dropped, of the forward packets offered.
        let mut overflowing = run("spate", 0.95, None);
        overflowing.emulator.forward = [50_613, 25_601, 0, 0];
        let t = markdown(&[overflowing.clone()]);
        assert!(t.contains("| spate | 95.0 | 50.58 | 0.950 |"), "{t}");
        assert!(
            overflowing
                .to_text()
                .contains("50.58 % of forward packets dropped by the bottleneck queue"),
            "{}",
            overflowing.to_text()
        );
        // A report written before a field existed still reads.
        let json = serde_json::to_string(&run("udt", 0.3, None)).unwrap();
        let old = json
            .replace(",\"mean\":null", "")
            .replace(",\"phase_goodput_mbps\":[]", "");
        assert!(serde_json::from_str::<EmuReport>(&old).is_ok());
    }
}
