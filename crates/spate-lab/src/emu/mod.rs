//! `spate-lab emu`: a scenario in real time, real programs on an emulated path.
//!
//! A run builds the test bed ([`bed`]: two namespaces, a TUN device in each), starts the
//! forwarder ([`forward`]: the scenario's [`spate_netmodel::Path`], the same model the simulator
//! drives, applied to real packets), starts each flow's receiver, then each sender at its
//! `start_s` ([`flows`]), and after `duration_s` stops everything and reports ([`report`]). With
//! several `--protocols` the scenario runs once per protocol, each on a fresh bed, one after
//! another — the research's "pipes" with each tool in turn.

pub mod bed;
pub mod calibrate;
pub mod compare;
pub mod flows;
pub mod forward;
pub mod report;
pub mod tun;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use spate_sim::report::round;
use spate_sim::{Protocol, Scenario, TimeSeries};

use self::bed::Bed;
use self::flows::{Proc, Tools};
use self::forward::Classifier;
use self::report::{EmuFlow, EmuReport, EmulatorStats};

/// Highest bottleneck rate the emulator is calibrated for (see docs/lab.md): it forwards every
/// 1500-byte packet with two system calls on one core.
pub const MAX_RATE_BPS: u64 = 1_000_000_000;

/// Run a scenario in real time: real Spate, kernel TCP, GridFTP and UDT on an emulated path.
///
/// Needs root (network namespaces, TUN devices). The path is the scenario's, emulated in user
/// space by the same link model `spate-lab sim` uses; each flow runs the real program named by
/// its `protocol` (scripts/lab-setup.sh installs them). Goodput is measured at the receiver's
/// interface every 100 ms; the report has the simulator's per-phase fields.
#[derive(Args, Clone)]
#[command(
    after_help = "Examples:\n  sudo spate-lab emu scenarios/emu/short.toml\n  sudo spate-lab emu scenarios/fasp/scenario-2.toml --scale 0.1 --protocols spate,cubic,bbr --out results/\n  sudo spate-lab emu my.toml --json --timeseries run.csv --plot run.svg"
)]
pub struct EmuArgs {
    /// Scenario file (TOML, the same format as `spate-lab sim`).
    pub scenario: PathBuf,
    /// Multiply every rate by this (delays, loss and queue times stay): 0.1 runs a 10 Gbit/s
    /// experiment at 1 Gbit/s.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Run the scenario once per protocol, every flow using it, one after another
    /// (comma-separated: spate, cubic, bbr, reno, gridftp, udt). Default: the file's.
    #[arg(long, value_delimiter = ',')]
    pub protocols: Vec<String>,
    /// Write each run's JSON, CSV time series and plot, and a comparison plot and table, here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print each run's report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write the (single) run's CSV time series (100 ms bins).
    #[arg(long, value_name = "FILE.csv")]
    pub timeseries: Option<PathBuf>,
    /// Write the (single) run's plot (.svg or .png).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    pub plot: Option<PathBuf>,
    /// Override the scenario's seed (the emulated loss pattern).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Do not show progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// One finished run: its report and time series.
pub struct Run {
    /// Summary.
    pub report: EmuReport,
    /// 100 ms series.
    pub series: TimeSeries,
}

/// Read, scale and check a scenario for the emulator.
pub fn load(path: &Path, scale: f64, seed: Option<u64>) -> Result<Scenario> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read scenario file {}", path.display()))?;
    let mut s = match Scenario::parse(&text) {
        Ok(s) => s,
        Err(e) => bail!("{}: {e}", path.display()),
    };
    if !(scale.is_finite() && scale > 0.0 && scale <= 1000.0) {
        bail!("--scale must be a number above 0 (got {scale})");
    }
    if scale != 1.0 {
        s = s.scaled(scale);
    }
    if let Some(seed) = seed {
        s.seed = seed;
    }
    Ok(s)
}

pub fn run(a: EmuArgs) -> Result<()> {
    let base = load(&a.scenario, a.scale, a.seed)?;
    let protocols: Vec<Protocol> = a
        .protocols
        .iter()
        .map(|p| {
            Protocol::parse(p.trim()).with_context(|| {
                format!("unknown protocol {p:?}; choose from spate, cubic, bbr, reno, gridftp, udt")
            })
        })
        .collect::<Result<_>>()?;
    let single = protocols.len() <= 1;
    if !single && (a.timeseries.is_some() || a.plot.is_some()) {
        bail!("--timeseries and --plot take one run; with several --protocols give --out DIR");
    }
    for p in [&a.plot].into_iter().flatten() {
        crate::plot::check_extension(p)?;
    }
    let variants: Vec<Scenario> = if protocols.is_empty() {
        vec![base]
    } else {
        protocols
            .iter()
            .map(|&p| {
                let mut s = base.clone();
                for f in &mut s.flows {
                    f.protocol = p;
                }
                s
            })
            .collect()
    };
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    }
    let mut runs = Vec::new();
    for s in &variants {
        let run = run_one(s, a.scale, a.quiet)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&run.report)?);
        } else {
            print!("{}", run.report.to_text());
            println!();
        }
        if let Some(p) = &a.timeseries {
            std::fs::write(p, run.series.to_csv())
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        if let Some(p) = &a.plot {
            plot_run(p, &run)?;
        }
        if let Some(dir) = &a.out {
            let stem = format!("{}-{}", slug(&s.name), run.report.label);
            std::fs::write(
                dir.join(format!("{stem}.json")),
                serde_json::to_string_pretty(&run.report)?,
            )?;
            std::fs::write(dir.join(format!("{stem}.csv")), run.series.to_csv())?;
            plot_run(&dir.join(format!("{stem}.svg")), &run)?;
        }
        runs.push(run);
    }
    if runs.len() > 1 {
        let reports: Vec<EmuReport> = runs.iter().map(|r| r.report.clone()).collect();
        let table = report::markdown(&reports);
        if !a.json {
            print!("{table}");
        }
        if let Some(dir) = &a.out {
            let stem = slug(&variants[0].name);
            std::fs::write(dir.join(format!("{stem}.md")), &table)?;
            compare_plot(&dir.join(format!("{stem}-compare.svg")), &runs)?;
        }
    }
    if runs
        .iter()
        .any(|r| r.report.flows.iter().any(|f| f.error.is_some()))
    {
        std::process::exit(2);
    }
    Ok(())
}

/// A file-name-safe version of a scenario name.
pub fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

fn plot_run(path: &Path, run: &Run) -> Result<()> {
    let labels: Vec<String> = run
        .report
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| format!("flow {i} ({})", f.protocol))
        .collect();
    let title = format!(
        "{} — {} (emulated, rates × {})",
        run.report.scenario, run.report.label, run.report.scale
    );
    crate::plot::run_plot(path, &title, &run.series, &labels)
}

/// One plot with each run's total goodput against the capacity, and each run's mean queueing
/// delay: the research's figure of the tools side by side.
fn compare_plot(path: &Path, runs: &[Run]) -> Result<()> {
    let first = &runs[0];
    let figure = crate::plot::Figure {
        title: format!(
            "{} (emulated, rates × {})",
            first.report.scenario, first.report.scale
        ),
        t_max: runs
            .iter()
            .filter_map(|r| r.series.rows.last().map(|x| x.t_s + r.series.bin_s))
            .fold(1.0, f64::max),
        capacity: first
            .series
            .rows
            .iter()
            .map(|r| (r.t_s, r.capacity_mbps))
            .collect(),
        goodput: runs
            .iter()
            .map(|r| {
                (
                    r.report.label.clone(),
                    r.series
                        .rows
                        .iter()
                        .map(|x| (x.t_s, x.goodput_mbps))
                        .collect(),
                )
            })
            .collect(),
        queue: runs
            .iter()
            .map(|r| {
                (
                    format!("{} (mean)", r.report.label),
                    r.series
                        .rows
                        .iter()
                        .map(|x| (x.t_s, x.queue_delay_ms_mean))
                        .collect(),
                )
            })
            .collect(),
    };
    figure.write(path)
}

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
    Ok(Tools {
        lab,
        keys,
        udt,
        dir: dir.to_path_buf(),
    })
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
        while t0.elapsed() < s.duration {
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
                    if let Ok(Some(st)) = p.child.try_wait() {
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
    let measured = emu.finish()?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    drop(bed);
    result?;
    let end_i = spate_proto::Instant::from_nanos(end.as_nanos() as u64);
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
        let app_bytes = senders[i].as_ref().and_then(app_bytes);
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
            completion_s: done
                .filter(|_| f.bytes > 0 && exited[i].as_ref().is_some_and(|e| e.1.is_none()))
                .map(|d| round(d, 3)),
            feedback_bytes: fb,
            feedback_kib_per_gib: if delivered > 0 {
                round(
                    fb as f64 / 1024.0 / (delivered as f64 / (1u64 << 30) as f64),
                    1,
                )
            } else {
                0.0
            },
            cpu_s: [
                cpu_send[i].map(|c| round(c, 2)),
                cpu_recv[i].map(|c| round(c, 2)),
            ],
            cpu_pct_per_gbps: [per_gbps(cpu_send[i]), per_gbps(cpu_recv[i])],
            app_bytes,
            error: exited[i].as_ref().and_then(|e| e.1.clone()),
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
    let (b0, b1) = (rec.bin_of(from), rec.bin_of(end));
    let secs = (end - from).as_secs_f64();
    let x: Vec<f64> = rec
        .delivered
        .iter()
        .map(|d| d[b0.min(d.len())..b1.min(d.len())].iter().sum::<u64>() as f64 * 8.0 / secs)
        .collect();
    for (f, &g) in flows.iter_mut().zip(&x) {
        f.window_goodput_mbps = Some(round(g / 1e6, 3));
    }
    let (sum, sq) = x.iter().fold((0.0, 0.0), |(a, b), &v| (a + v, b + v * v));
    let window = Some([round(from.as_secs_f64(), 3), round(end.as_secs_f64(), 3)]);
    if sq == 0.0 {
        return (None, window);
    }
    (Some(round(sum * sum / (x.len() as f64 * sq), 4)), window)
}

/// The last lines of a failed program's error output.
fn failure(p: &Proc) -> String {
    let err = std::fs::read_to_string(p.out.with_extension("err")).unwrap_or_default();
    let tail: Vec<&str> = err.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!("{} exited with an error: {}", p.what, tail.join(" / "))
}

/// What the sender reported moving: Spate's bench end prints `bytes` when done and
/// `delivered` (acknowledged by the receiver) every second; iperf3's JSON has the receiver's
/// byte count; UDT's helper prints `bytes`.
fn app_bytes(p: &Proc) -> Option<u64> {
    let text = std::fs::read_to_string(&p.out).ok()?;
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
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
