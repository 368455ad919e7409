//! One emulated run: bed, receivers, forwarder, senders at their start times, and the report.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use spate_sim::report::{jain, kib_per_gib, round};
use spate_sim::{Protocol, Scenario, TimeSeries};

use super::bed::Bed;
use super::flows::{self, Proc, Tools};
use super::forward::{self, Classifier};
use super::host::{CpuTimes, HostLoad};
use super::report::{EmuFlow, EmuReport, EmulatorStats, HostLimits};
use super::tun;

/// Highest bottleneck rate the emulator is calibrated for (see docs/lab.md): it forwards every
/// 1500-byte packet with two system calls on one core.
pub const MAX_RATE_BPS: u64 = 1_000_000_000;

/// Most flows in one emulated run: each gets its own server port (and GridFTP a range of 100).
pub const MAX_FLOWS: usize = 32;

/// One finished run: its report and time series.
pub struct Run {
    /// Summary.
    pub report: EmuReport,
    /// 100 ms series.
    pub series: TimeSeries,
}

/// Where `scripts/lab-setup.sh` installs the shim that sets GridFTP's congestion control
/// (`lab/tcpcc/spate-tcp-cc.c`); a copy next to this binary is found too.
pub const TCP_CC_SHIM: &str = "/usr/local/lib/spate-tcp-cc.so";

/// Where this binary's helpers are.
fn tools(dir: &Path) -> Result<Tools> {
    let lab = std::env::current_exe().context("cannot find the spate-lab executable")?;
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys)?;
    crate::bench::ends::write_keys(&keys)?;
    let udt = flows::which("spate-udt").or_else(|| {
        let p = lab.with_file_name("spate-udt");
        p.is_file().then_some(p)
    });
    let tcp_cc = [
        PathBuf::from(TCP_CC_SHIM),
        lab.with_file_name("spate-tcp-cc.so"),
    ]
    .into_iter()
    .find(|p| p.is_file());
    Ok(Tools {
        lab,
        keys,
        udt,
        tcp_cc,
        dir: dir.to_path_buf(),
    })
}

/// Set by SIGINT or SIGTERM: the run in progress ends early and cleans up (namespaces, TUN
/// devices, programs) instead of leaving them behind.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Catch SIGINT and SIGTERM for the rest of the process.
pub(super) fn catch_interrupts() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, handler as libc::sighandler_t) };
    }
}

/// True once the user asked to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The forwarder running on a bed.
pub struct Emulation {
    /// Time zero of the path's schedule.
    pub t0: Instant,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<std::io::Result<forward::Measured>>,
}

impl Emulation {
    /// Start forwarding between the bed's TUN devices along scenario `s`'s path, now.
    pub fn start(
        client: tun::Tun,
        server: tun::Tun,
        s: &Scenario,
        classifier: Classifier,
    ) -> Result<Emulation> {
        let stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let setup = forward::Setup {
            schedule: s.schedule.clone(),
            seed: s.seed,
            classifier,
            flows: s.flows.len(),
            duration: s.duration,
            t0,
        };
        let st = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("emulator".into())
            .spawn(move || forward::run(client, server, setup, &st))?;
        Ok(Emulation { t0, stop, thread })
    }

    /// Stop forwarding; what was measured.
    pub fn finish(self) -> Result<forward::Measured> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("the emulator thread panicked"))??)
    }
}

/// Run one scenario (its flows' protocols as given) on a fresh bed.
pub fn run_one(s: &Scenario, scale: f64, quiet: bool) -> Result<Run> {
    let work = tempfile::tempdir()?;
    let tools = tools(work.path())?;
    // SPATE_LAB_KEEP=1 keeps each run's program logs (their stdout and stderr) for debugging.
    let _work = if std::env::var_os("SPATE_LAB_KEEP").is_some() {
        let kept = work.keep();
        eprintln!("spate-lab: the programs' logs stay in {}", kept.display());
        None
    } else {
        Some(work)
    };
    for f in &s.flows {
        flows::check(f.protocol, &tools)?;
    }
    if s.flows.len() > MAX_FLOWS {
        bail!(
            "the emulator runs at most {MAX_FLOWS} flows (this scenario has {})",
            s.flows.len()
        );
    }
    let top = s
        .schedule
        .phases()
        .iter()
        .map(|p| p.rate_bps)
        .max()
        .unwrap_or(0);
    if top > MAX_RATE_BPS && !quiet {
        eprintln!(
            "spate-lab: warning: the path reaches {:.0} Mbit/s; the emulator is calibrated up to {:.0} Mbit/s on this kind of machine (use --scale)",
            top as f64 / 1e6,
            MAX_RATE_BPS as f64 / 1e6
        );
    }
    let label = {
        let mut v: Vec<&str> = s.flows.iter().map(|f| f.protocol.name()).collect();
        v.dedup();
        v.join("+")
    };
    let (bed, client, server) = Bed::create()?;
    let mut classifier = Classifier::new();
    for (i, f) in s.flows.iter().enumerate() {
        flows::classify(&mut classifier, i, f);
    }
    let run_s = s.duration.as_secs_f64();
    let mut receivers: Vec<Option<Proc>> = Vec::new();
    for (i, f) in s.flows.iter().enumerate() {
        receivers.push(flows::start_receiver(&bed, i, f, &tools, run_s)?);
    }
    // Receivers bind before the clock starts.
    std::thread::sleep(Duration::from_millis(500));
    let cpu_before = CpuTimes::now();
    let emu = Emulation::start(client, server, s, classifier)?;
    let t0 = emu.t0;
    let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(s.duration.as_millis() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:40}] {percent:>3}% of the run, {elapsed} elapsed",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        b.set_message(format!("{} ({label})", s.name));
        b
    });
    let mut senders: Vec<Option<Proc>> = (0..s.flows.len()).map(|_| None).collect();
    let mut exited: Vec<Option<(f64, Option<String>)>> = vec![None; s.flows.len()];
    let mut cpu_send: Vec<Option<f64>> = vec![None; s.flows.len()];
    let result = (|| -> Result<()> {
        while t0.elapsed() < s.duration && !interrupted() {
            let now = t0.elapsed();
            for (i, f) in s.flows.iter().enumerate() {
                if senders[i].is_none() && exited[i].is_none() && f.start <= now {
                    let left = (s.duration - now).as_secs_f64();
                    senders[i] = Some(flows::start_sender(&bed, i, f, &tools, left)?);
                }
                if let Some(p) = senders[i].as_mut() {
                    if let Some(c) = flows::cpu_seconds(p.child.id()) {
                        cpu_send[i] = Some(c);
                    }
                    // `try_wait` keeps answering once the child exited: only the first
                    // answer is its exit time (later ones would move completion to the end).
                    if let Some(st) = p
                        .child
                        .try_wait()
                        .ok()
                        .flatten()
                        .filter(|_| exited[i].is_none())
                    {
                        let at = (t0.elapsed() - f.start).as_secs_f64();
                        let err = (!st.success()).then(|| failure(p));
                        exited[i] = Some((at, err));
                    }
                }
            }
            if let Some(b) = &bar {
                b.set_position(now.as_millis() as u64);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    })();
    let end = t0.elapsed();
    let mut cpu_recv: Vec<Option<f64>> = vec![None; s.flows.len()];
    for (i, p) in senders.iter_mut().enumerate() {
        if let Some(p) = p {
            if let Some(c) = flows::cpu_seconds(p.child.id()) {
                cpu_send[i] = Some(c);
            }
            flows::stop(p, Duration::from_secs(2));
        }
    }
    for (i, r) in receivers.iter_mut().enumerate() {
        if let Some(r) = r {
            cpu_recv[i] = flows::cpu_seconds(r.child.id());
            flows::stop(r, Duration::from_secs(2));
        }
    }
    let mut measured = emu.finish()?;
    let host = HostLoad::since(cpu_before);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    drop(bed);
    result?;
    if interrupted() {
        bail!(
            "interrupted after {:.1} s; the namespaces and programs are cleaned up",
            end.as_secs_f64()
        );
    }
    let end_i = spate_proto::Instant::from_nanos(end.as_nanos() as u64);
    // Each sender's output, read once: progress lines, the controller's view, bytes moved.
    let outputs: Vec<Option<String>> = senders
        .iter()
        .map(|p| {
            p.as_ref()
                .and_then(|p| std::fs::read_to_string(&p.out).ok())
        })
        .collect();
    // ...and its progress lines parsed once, for the series and for the host's limits.
    let progress: Vec<Vec<serde_json::Value>> = outputs
        .iter()
        .map(|o| o.as_deref().map(json_lines).unwrap_or_default())
        .collect();
    for (i, f) in s.flows.iter().enumerate() {
        record_progress(&mut measured.rec, i, f.start, end, &progress[i]);
    }
    let series = measured.rec.series(&s.schedule, end_i);
    let phases = measured.rec.phase_reports(&s.schedule, end_i);
    let mut out_flows = Vec::new();
    for (i, f) in s.flows.iter().enumerate() {
        let delivered: u64 = measured.rec.delivered[i].iter().sum();
        let done = exited[i].as_ref().map(|e| e.0);
        let active = done
            .unwrap_or((end - f.start.min(end)).as_secs_f64())
            .max(1e-3);
        let goodput = delivered as f64 * 8.0 / active;
        let per_gbps = |cpu: Option<f64>| {
            cpu.filter(|_| goodput >= 1e6)
                .map(|c| round(c / active * 100.0 / (goodput / 1e9), 1))
        };
        let fb = measured.reverse_bytes[i];
        let modes = (f.protocol == Protocol::Spate).then(|| measured.rec.mode_seconds(i));
        let app_bytes = outputs[i].as_deref().and_then(app_bytes);
        out_flows.push(EmuFlow {
            protocol: f.protocol.name().into(),
            policy: if f.protocol == Protocol::Spate {
                f.rate.policy.name().into()
            } else {
                "-".into()
            },
            start_s: round(f.start.as_secs_f64(), 3),
            bytes_delivered: delivered,
            goodput_mbps: round(goodput / 1e6, 3),
            window_goodput_mbps: None,
            phase_goodput_mbps: phases
                .iter()
                .map(|p| {
                    let (from, to) = (
                        Duration::from_secs_f64(p.at_s),
                        Duration::from_secs_f64(p.until_s),
                    );
                    let g = measured.rec.goodputs_between(from, to);
                    round(g.get(i).copied().unwrap_or(0.0) / 1e6, 3)
                })
                .collect(),
            completion_s: done
                .filter(|_| f.bytes > 0 && exited[i].as_ref().is_some_and(|e| e.1.is_none()))
                .map(|d| round(d, 3)),
            feedback_bytes: fb,
            feedback_kib_per_gib: round(kib_per_gib(fb, delivered), 1),
            cpu_s: [
                cpu_send[i].map(|c| round(c, 2)),
                cpu_recv[i].map(|c| round(c, 2)),
            ],
            cpu_pct_per_gbps: [per_gbps(cpu_send[i]), per_gbps(cpu_recv[i])],
            app_bytes,
            error: exited[i].as_ref().and_then(|e| e.1.clone()),
            share: None,
            delay_mode_s: modes.map(|m| m.0),
            competitive_mode_s: modes.map(|m| m.1),
            following_bbr_s: modes.map(|m| m.2),
            sender_limited: (f.protocol == Protocol::Spate)
                .then(|| host_limits(&progress[i]))
                .flatten(),
        });
    }
    let (jain, window) = fairness(s, &measured.rec, end, &mut out_flows);
    let l = measured.links;
    let report = EmuReport {
        scenario: s.name.clone(),
        scale,
        seed: s.seed,
        run_s: round(end.as_secs_f64(), 3),
        label,
        flows: out_flows,
        phases,
        fairness_jain: jain,
        fairness_window_s: window,
        host,
        emulator: EmulatorStats {
            cpu_s: round(measured.cpu_s, 2),
            lateness_mean_us: round(measured.lateness_us.0, 1),
            lateness_max_us: measured.lateness_us.1,
            unclassified: measured.unclassified,
            forward: [
                l[0].packets,
                l[0].queue_drops,
                l[0].random_drops,
                l[0].outage_drops,
            ],
            reverse: [
                l[1].packets,
                l[1].queue_drops,
                l[1].random_drops,
                l[1].outage_drops,
            ],
        },
    };
    Ok(Run { report, series })
}

/// Jain's index over the window where every flow runs (from the last start, or the scenario's
/// `fairness_from_s`, to the end).
fn fairness(
    s: &Scenario,
    rec: &spate_sim::Recorder,
    end: Duration,
    flows: &mut [EmuFlow],
) -> (Option<f64>, Option<[f64; 2]>) {
    let last = s.flows.iter().map(|f| f.start).max().unwrap_or_default();
    let from = s.fairness_from.unwrap_or(last).max(last);
    if s.flows.len() < 2 || end <= from {
        return (None, None);
    }
    let x = rec.goodputs_between(from, end);
    for (f, (mbps, share)) in flows.iter_mut().zip(spate_sim::report::window_shares(&x)) {
        f.window_goodput_mbps = Some(mbps);
        f.share = share;
    }
    let window = Some([round(from.as_secs_f64(), 3), round(end.as_secs_f64(), 3)]);
    (jain(&x), window)
}

/// The last lines of a failed program's error output.
fn failure(p: &Proc) -> String {
    let err = std::fs::read_to_string(p.out.with_extension("err")).unwrap_or_default();
    let tail: Vec<&str> = err.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!("{} exited with an error: {}", p.what, tail.join(" / "))
}

/// Spate's sender prints its rate controller's mode and pacing rate with the seconds since it
/// started, every 100 ms (`bench-end spate-send --progress`); mark each mode from its line to
/// the next in the recorder's bins, and each rate in its line's bin, so the series and the
/// plot show them.
fn record_progress(
    rec: &mut spate_sim::Recorder,
    flow: usize,
    start: Duration,
    end: Duration,
    lines: &[serde_json::Value],
) {
    let marks: Vec<(f64, spate_proto::RateMode, Option<u64>)> = lines
        .iter()
        .filter_map(|v| {
            let t = v.get("t")?.as_f64()?;
            let mode = spate_proto::RateMode::parse(v.get("mode")?.as_str()?)?;
            Some((t, mode, v.get("rate_bps").and_then(|r| r.as_u64())))
        })
        .collect();
    let end_s = end.as_secs_f64();
    let at = |s: f64| spate_proto::Instant::from_nanos((s * 1e9) as u64);
    for (k, &(t, mode, rate)) in marks.iter().enumerate() {
        let from = start.as_secs_f64() + t;
        let to = marks
            .get(k + 1)
            .map_or(end_s, |n| start.as_secs_f64() + n.0)
            .min(end_s);
        if let Some(rate) = rate.filter(|_| from < end_s) {
            rec.on_sent(flow, at(from), rate);
        }
        let mut t = from;
        while t < to {
            rec.on_mode(flow, at(t), mode);
            t += rec.fine.as_secs_f64();
        }
    }
}

/// A program's output, one JSON value per line (lines that are not JSON left out).
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How much the host held a Spate sender up, from the controller's view in its progress lines
/// (`cc.limited`, `cc.unused_bps`); `None` without such lines.
fn host_limits(lines: &[serde_json::Value]) -> Option<HostLimits> {
    let (mut n, mut limited, mut unused) = (0u32, 0u32, 0.0f64);
    for v in lines {
        let Some(cc) = v.get("cc") else { continue };
        n += 1;
        limited += u32::from(cc.get("limited").and_then(|l| l.as_bool()) == Some(true));
        unused += cc.get("unused_bps").and_then(|u| u.as_f64()).unwrap_or(0.0);
    }
    (n > 0).then(|| HostLimits {
        share: round(f64::from(limited) / f64::from(n), 3),
        unused_mbps: round(unused / f64::from(n) / 1e6, 2),
    })
}

/// What the sender reported moving: Spate's bench end prints `bytes` when done and
/// `delivered` (acknowledged by the receiver) every 100 ms; iperf3's JSON has the receiver's
/// byte count; UDT's helper prints `bytes`.
fn app_bytes(text: &str) -> Option<u64> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if let Some(b) = v
            .pointer("/end/sum_received/bytes")
            .and_then(|b| b.as_u64())
        {
            return Some(b);
        }
    }
    let v: serde_json::Value = serde_json::from_str(text.lines().last()?).ok()?;
    v.get("bytes")
        .or_else(|| v.get("delivered"))
        .and_then(serde_json::Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_limits_count_the_reports_that_found_the_sender_limited() {
        let log = r#"{"cc":{"limited":false,"unused_bps":0.0},"mode":"delay","t":0.1}
{"cc":{"limited":true,"unused_bps":20000000.0},"mode":"delay","t":0.2}
not json
{"cc":{"limited":true,"unused_bps":10000000.0},"mode":"delay","t":0.3}
{"cc":{"limited":false,"unused_bps":2000000.0},"mode":"delay","t":0.4}
{"bytes":125000000}"#;
        assert_eq!(
            host_limits(&json_lines(log)),
            Some(HostLimits {
                share: 0.5,
                unused_mbps: 8.0
            })
        );
        // A log without the controller's view (another program, an older sender).
        assert_eq!(host_limits(&json_lines(r#"{"bytes":1}"#)), None);
    }
}
