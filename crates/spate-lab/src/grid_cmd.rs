//! `spate-lab grid`: run a set of scenarios on all cores and write one results table (Markdown
//! and CSV), a goodput-over-time plot for every scenario with capacity changes, and a
//! utilization heat map over RTT × loss for the single-phase scenarios.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use spate_netmodel::Phase;
use spate_sim::{PhaseReport, Report, Scenario};

/// The scenario sets run when none are named: the 42-point WAN grid, the FASP handover
/// scenarios and the RLNC tests (scenarios/README.md).
const DEFAULT_SETS: [&str; 3] = ["scenarios/wan-grid", "scenarios/fasp", "scenarios/rlnc"];

/// Run many scenarios and write one table plus plots.
///
/// Each argument is a scenario file or a directory of them (*.toml, in name order). Runs use
/// every core; results are deterministic whatever the number of jobs. Writes into --out:
/// results.md and results.csv (one row per scenario phase), plots/NAME.svg (goodput against
/// capacity and queueing delay over time) for every scenario whose capacity changes, and
/// heatmap.svg (utilization after adapting, by RTT and loss) when at least four single-phase
/// scenarios were run. Exit status 2 when any flow failed.
#[derive(Args)]
#[command(
    after_help = "Examples:\n  spate-lab grid                       # WAN grid, FASP 1-3, RLNC A-C into docs/results/\n  spate-lab grid scenarios/checks --out /tmp/checks\n  spate-lab grid scenarios/fasp/scenario-2.toml --out /tmp/s2"
)]
pub struct GridArgs {
    /// Scenario files or directories (default: scenarios/wan-grid scenarios/fasp scenarios/rlnc).
    paths: Vec<PathBuf>,
    /// Output directory (created if missing).
    #[arg(long, default_value = "docs/results")]
    out: PathBuf,
    /// Parallel runs (default: number of cores).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Do not show progress on stderr.
    #[arg(long, short)]
    quiet: bool,
}

struct Run {
    file: PathBuf,
    scenario: Scenario,
    report: Report,
}

impl Run {
    /// Each phase's results with the path it ran on (the report has one entry per scheduled
    /// phase that began before the run ended).
    fn phases(&self) -> impl Iterator<Item = (&PhaseReport, &Phase)> {
        self.report
            .phases
            .iter()
            .zip(self.scenario.schedule.phases())
    }
}

pub fn run(a: GridArgs) -> Result<()> {
    let roots: Vec<PathBuf> = if a.paths.is_empty() {
        DEFAULT_SETS.iter().map(PathBuf::from).collect()
    } else {
        a.paths.clone()
    };
    let files = collect(&roots)?;
    // Parse everything before running anything: a typo in file 40 should not cost 5 minutes.
    let mut jobs = Vec::with_capacity(files.len());
    for f in files {
        let text = std::fs::read_to_string(&f)
            .with_context(|| format!("cannot read scenario file {}", f.display()))?;
        match Scenario::parse(&text) {
            Ok(s) => jobs.push((f, s)),
            Err(e) => bail!("{}: {e}", f.display()),
        }
    }
    std::fs::create_dir_all(a.out.join("plots"))
        .with_context(|| format!("cannot create output directory {}", a.out.display()))?;

    let workers = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(jobs.len() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "[{pos}/{len}] {bar:30} {elapsed} elapsed, ETA {eta}  {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        b
    });
    let wall = Instant::now();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Run>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((file, scenario)) = jobs.get(i) else {
                    break;
                };
                if let Some(b) = &bar {
                    b.set_message(scenario.name.clone());
                }
                let r = spate_sim::run(scenario, &mut |_| {})
                    .map_err(anyhow::Error::from)
                    .and_then(|res| {
                        if needs_plot(scenario) {
                            let stem = file.file_stem().unwrap_or_default().to_string_lossy();
                            let p = a.out.join("plots").join(format!("{stem}.svg"));
                            crate::plot::sim_plot(&p, &res.report, &res.series)?;
                        }
                        Ok(Run {
                            file: file.clone(),
                            scenario: scenario.clone(),
                            report: res.report,
                        })
                    })
                    .with_context(|| format!("{}", file.display()));
                results.lock().expect("no panics while held")[i] = Some(r);
                if let Some(b) = &bar {
                    b.inc(1);
                } else if !a.quiet {
                    eprintln!("[{}/{}] {}", i + 1, jobs.len(), file.display());
                }
            });
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut runs = Vec::new();
    for r in results
        .into_inner()
        .expect("workers joined")
        .into_iter()
        .flatten()
    {
        runs.push(r?);
    }

    let cmd = command_line(&roots, &a.out);
    let md = markdown(&runs, &cmd);
    let csv = csv(&runs);
    std::fs::write(a.out.join("results.md"), md)
        .with_context(|| format!("cannot write {}", a.out.join("results.md").display()))?;
    std::fs::write(a.out.join("results.csv"), csv)
        .with_context(|| format!("cannot write {}", a.out.join("results.csv").display()))?;
    let cells = heat_cells(&runs);
    if cells.len() >= 4 {
        crate::plot::heatmap(&a.out.join("heatmap.svg"), &cells)?;
    }
    let failed: Vec<_> = runs
        .iter()
        .filter(|r| r.report.flows.iter().any(|f| !f.verified))
        .map(|r| r.file.display().to_string())
        .collect();
    if !a.quiet {
        eprintln!(
            "{} scenarios in {:.0} s; wrote {}",
            runs.len(),
            wall.elapsed().as_secs_f64(),
            a.out.join("results.md").display()
        );
    }
    if !failed.is_empty() {
        eprintln!("spate-lab: flows failed in: {}", failed.join(", "));
        std::process::exit(2);
    }
    Ok(())
}

/// Scenario files under `roots`: files as given, directories' *.toml in name order.
fn collect(roots: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for r in roots {
        let meta = std::fs::metadata(r).with_context(|| {
            format!(
                "cannot open {} (run from the repository root, or name scenario files)",
                r.display()
            )
        })?;
        if meta.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(r)
                .with_context(|| format!("cannot list {}", r.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            v.sort_by_key(|p| natural_key(p));
            if v.is_empty() {
                bail!("no scenario files (*.toml) in {}", r.display());
            }
            out.extend(v);
        } else {
            out.push(r.clone());
        }
    }
    Ok(out)
}

/// Sort key that orders embedded numbers by value (rtt50 before rtt100, loss0.5 before loss1).
fn natural_key(p: &Path) -> Vec<(String, u64, u64)> {
    let s = p.to_string_lossy();
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut int = c.to_digit(10).unwrap_or(0) as u64;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                int = int.saturating_mul(10).saturating_add(d as u64);
                chars.next();
            }
            let mut frac = 0u64;
            if chars.peek() == Some(&'.') {
                let mut ahead = chars.clone();
                ahead.next();
                if ahead.peek().is_some_and(|c| c.is_ascii_digit()) {
                    chars.next();
                    let mut digits = 0;
                    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                        if digits < 6 {
                            frac = frac * 10 + d as u64;
                            digits += 1;
                        }
                        chars.next();
                    }
                    frac *= 10u64.pow(6 - digits);
                }
            }
            key.push((std::mem::take(&mut text), int, frac));
        } else {
            text.push(c);
        }
    }
    key.push((text, 0, 0));
    key
}

fn needs_plot(s: &Scenario) -> bool {
    let p = s.schedule.phases();
    p.windows(2).any(|w| w[0].rate_bps != w[1].rate_bps) || s.flows.len() > 1
}

fn command_line(roots: &[PathBuf], out: &Path) -> String {
    let mut c = String::from("cargo run --release -p spate-lab -- grid");
    for r in roots {
        let _ = write!(c, " {}", r.display());
    }
    let _ = write!(c, " --out {}", out.display());
    c
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

/// Per-scenario numbers over all flows: mean retransmission overhead, spurious
/// retransmissions, the worst feedback cost, and whether every flow verified.
struct Totals {
    retx: f64,
    spurious: u64,
    fb: f64,
    ok: bool,
}

impl Totals {
    fn of(r: &Report) -> Totals {
        let flows = &r.flows;
        Totals {
            retx: flows.iter().map(|f| f.retransmission_overhead).sum::<f64>()
                / flows.len().max(1) as f64,
            spurious: flows.iter().map(|f| f.spurious_retransmissions).sum(),
            fb: flows
                .iter()
                .map(|f| f.feedback_kib_per_gib)
                .fold(0.0, f64::max),
            ok: flows.iter().all(|f| f.verified),
        }
    }
}

fn markdown(runs: &[Run], cmd: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Simulation results\n");
    let _ = writeln!(
        s,
        "Made by `{cmd}` (deterministic: the same command gives the same table). One row per \
         path phase. *util* is goodput / capacity over the phase; *after adapt* the same from \
         the time goodput first reached 90 % of capacity (*adapt s*, from the phase start); \
         queue delays are percentiles over the phase; *retx* retransmitted packets / data \
         packets; *fb* feedback bytes (incl. 28 B IP/UDP each) per GiB delivered; *Jain* over \
         the scenario's fairness window. Goodput counts payload only: 1448 of every 1500 IP \
         bytes, so utilization cannot exceed 0.965.\n"
    );
    let _ = writeln!(
        s,
        "| scenario | phase s | capacity Mbit/s | RTT ms | loss % | goodput Mbit/s | util | after adapt | adapt s | queue p50 / p95 ms | retx % | spurious | fb KiB/GiB | Jain | ok |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in runs {
        let Totals {
            retx,
            spurious,
            fb,
            ok,
        } = Totals::of(&r.report);
        for (i, (p, ph)) in r.phases().enumerate() {
            let first = i == 0;
            let _ = writeln!(
                s,
                "| {} | {:.0}–{:.0} | {:.0} | {:.0} | {} | {:.0} | {:.3} | {} | {} | {:.1} / {:.1} | {} | {} | {} | {} | {} |",
                if first { r.report.scenario.as_str() } else { "″" },
                p.at_s,
                p.until_s,
                p.capacity_mbps,
                ph.rtt.as_secs_f64() * 1e3,
                ph.loss * 100.0,
                p.goodput_mbps,
                p.utilization,
                opt(p.utilization_after_adapt, 3),
                opt(p.time_to_adapt_s, 1),
                p.queue_delay_ms.p50,
                p.queue_delay_ms.p95,
                if first { format!("{:.2}", retx * 100.0) } else { String::new() },
                if first { spurious.to_string() } else { String::new() },
                if first { format!("{fb:.0}") } else { String::new() },
                if first { opt(r.report.fairness_jain, 3) } else { String::new() },
                if first { if ok { "✓" } else { "✗" } } else { "" },
            );
        }
    }
    s
}

fn csv(runs: &[Run]) -> String {
    let mut s = String::from(
        "scenario,file,phase,at_s,until_s,capacity_mbps,rtt_ms,loss,goodput_mbps,utilization,utilization_after_adapt,time_to_adapt_s,queue_p50_ms,queue_p95_ms,queue_p99_ms,retransmission_overhead,spurious_retransmissions,feedback_kib_per_gib,fairness_jain,verified\n",
    );
    for r in runs {
        let Totals {
            retx,
            spurious,
            fb,
            ok,
        } = Totals::of(&r.report);
        for (i, (p, ph)) in r.phases().enumerate() {
            let _ = writeln!(
                s,
                "\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.report.scenario.replace('"', "\"\""),
                r.file.display(),
                i,
                p.at_s,
                p.until_s,
                p.capacity_mbps,
                ph.rtt.as_secs_f64() * 1e3,
                ph.loss,
                p.goodput_mbps,
                p.utilization,
                p.utilization_after_adapt
                    .map_or(String::new(), |v| v.to_string()),
                p.time_to_adapt_s.map_or(String::new(), |v| v.to_string()),
                p.queue_delay_ms.p50,
                p.queue_delay_ms.p95,
                p.queue_delay_ms.p99,
                retx,
                spurious,
                fb,
                r.report
                    .fairness_jain
                    .map_or(String::new(), |v| v.to_string()),
                ok
            );
        }
    }
    s
}

/// (RTT ms, loss %, utilization after adapt) of single-phase, single-flow runs.
fn heat_cells(runs: &[Run]) -> Vec<(f64, f64, f64)> {
    runs.iter()
        .filter(|r| r.scenario.schedule.phases().len() == 1 && r.scenario.flows.len() == 1)
        .filter_map(|r| {
            let ph = &r.scenario.schedule.phases()[0];
            let u = r.report.phases.first()?.utilization_after_adapt?;
            Some((ph.rtt.as_secs_f64() * 1e3, ph.loss * 100.0, u))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_sorts_numbers_by_value() {
        let mut v: Vec<PathBuf> = ["rtt100-loss1", "rtt50-loss0.5", "rtt50-loss0", "rtt0-loss2"]
            .iter()
            .map(PathBuf::from)
            .collect();
        v.sort_by_key(|p| natural_key(p));
        let names: Vec<_> = v.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            ["rtt0-loss2", "rtt50-loss0", "rtt50-loss0.5", "rtt100-loss1"]
        );
    }
}
