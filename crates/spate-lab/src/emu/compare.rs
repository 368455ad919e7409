//! `spate-lab compare` (the simulator's fidelity) and `spate-lab report` (many runs, one table).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use spate_sim::report::round;
use spate_sim::Protocol;

use super::report::{markdown, EmuReport};

/// Run a scenario in the simulator and in the emulator and print Spate's per-phase utilization
/// in each and the difference: how far the simulator's virtual time can be trusted.
///
/// Every flow runs Spate. Needs root (the emulator). Exit status 2 when a phase differs by
/// more than --tolerance percentage points.
#[derive(Args)]
#[command(
    after_help = "Example:\n  sudo spate-lab compare scenarios/fasp/scenario-1.toml --scale 0.1 --plot fidelity.svg"
)]
pub struct CompareArgs {
    /// Scenario file.
    scenario: PathBuf,
    /// Multiply every rate by this (as `emu --scale`).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Largest accepted difference in utilization, percentage points.
    #[arg(long, default_value_t = 10.0)]
    tolerance: f64,
    /// Plot both runs' goodput against the capacity (.svg or .png).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<PathBuf>,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
    /// Do not show progress.
    #[arg(long, short)]
    quiet: bool,
}

pub fn compare(a: CompareArgs) -> Result<()> {
    super::catch_interrupts();
    let mut s = crate::scenario::load(&a.scenario, a.scale, None)?;
    for f in &mut s.flows {
        f.protocol = Protocol::Spate;
    }
    if let Some(p) = &a.plot {
        crate::plot::check_extension(p)?;
    }
    let sim = spate_sim::run(&s, &mut |_| {})?;
    let emu = super::run_one(&s, a.scale, a.quiet)?;
    let mut rows = Vec::new();
    let mut worst: f64 = 0.0;
    for (i, (ps, pe)) in sim.report.phases.iter().zip(&emu.report.phases).enumerate() {
        let diff = round((pe.utilization - ps.utilization) * 100.0, 1);
        worst = worst.max(diff.abs());
        rows.push(serde_json::json!({
            "phase": i + 1,
            "capacity_mbps": ps.capacity_mbps,
            "sim_utilization": ps.utilization,
            "emu_utilization": pe.utilization,
            "difference_pp": diff,
            "sim_time_to_adapt_s": ps.time_to_adapt_s,
            "emu_time_to_adapt_s": pe.time_to_adapt_s,
            "sim_queue_p50_ms": ps.queue_delay_ms.p50,
            "emu_queue_p50_ms": pe.queue_delay_ms.p50,
        }));
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "scenario": s.name, "scale": a.scale, "phases": rows,
                "worst_difference_pp": worst, "tolerance_pp": a.tolerance,
            }))?
        );
    } else {
        println!(
            "{} (rates × {}): Spate in the simulator and in the emulator\n",
            s.name, a.scale
        );
        println!("| phase | capacity Mbit/s | util sim | util emu | difference | adapt s sim / emu | queue p50 ms sim / emu |");
        println!("|---|---|---|---|---|---|---|");
        let o = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x}"));
        for r in &rows {
            println!(
                "| {} | {} | {} | {} | {:+} pp | {} / {} | {} / {} |",
                r["phase"],
                r["capacity_mbps"],
                r["sim_utilization"],
                r["emu_utilization"],
                r["difference_pp"].as_f64().unwrap_or(0.0),
                o(&r["sim_time_to_adapt_s"]),
                o(&r["emu_time_to_adapt_s"]),
                r["sim_queue_p50_ms"],
                r["emu_queue_p50_ms"],
            );
        }
        println!(
            "\nlargest difference {worst} percentage points (tolerance {})",
            a.tolerance
        );
    }
    if let Some(p) = &a.plot {
        let line = |t: &spate_sim::TimeSeries| -> Vec<(f64, f64)> {
            t.rows.iter().map(|r| (r.t_s, r.goodput_mbps)).collect()
        };
        let q = |t: &spate_sim::TimeSeries| -> Vec<(f64, f64)> {
            t.rows
                .iter()
                .map(|r| (r.t_s, r.queue_delay_ms_mean))
                .collect()
        };
        crate::plot::Figure {
            title: format!("{} (rates × {}): simulator and emulator", s.name, a.scale),
            t_max: s.duration.as_secs_f64(),
            capacity: sim
                .series
                .rows
                .iter()
                .map(|r| (r.t_s, r.capacity_mbps))
                .collect(),
            goodput: vec![
                ("Spate, simulator".into(), line(&sim.series)),
                ("Spate, emulator".into(), line(&emu.series)),
            ],
            queue: vec![
                ("simulator (mean)".into(), q(&sim.series)),
                ("emulator (mean)".into(), q(&emu.series)),
            ],
            competitive: Vec::new(),
        }
        .write(p)?;
    }
    if worst > a.tolerance {
        std::process::exit(2);
    }
    Ok(())
}

/// Turn a directory of `spate-lab emu --out` runs into one Markdown table.
#[derive(Args)]
pub struct ReportArgs {
    /// Directory (or directories) holding the runs' JSON files.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
}

pub fn report(a: ReportArgs) -> Result<()> {
    let mut runs: Vec<(String, EmuReport)> = Vec::new();
    for dir in &a.dirs {
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
        for e in entries {
            let path = e?.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            // Other JSON files (a simulator report, a calibration) are not runs: skip them.
            if let Ok(r) = serde_json::from_str::<EmuReport>(&text) {
                runs.push((path.to_string_lossy().into_owned(), r));
            }
        }
    }
    if runs.is_empty() {
        bail!("no emulator runs (JSON written by `spate-lab emu --out DIR`) found");
    }
    // By scenario, then in the order tools are listed (Spate first), then by file name.
    let rank = |label: &str| {
        Protocol::ALL
            .iter()
            .position(|p| label.split('+').next() == Some(p.name()))
            .unwrap_or(usize::MAX)
    };
    runs.sort_by(|(pa, a), (pb, b)| {
        (&a.scenario, rank(&a.label), pa).cmp(&(&b.scenario, rank(&b.label), pb))
    });
    let runs: Vec<EmuReport> = runs.into_iter().map(|r| r.1).collect();
    print!("{}", markdown(&runs));
    Ok(())
}
