//! `spate-lab sim`: run one scenario in the simulator.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

/// Run a scenario in the deterministic simulator and report.
///
/// The scenario file (TOML) describes a path as phases (rate, RTT, loss, queue, reordering,
/// duplication, outages) and the flows that share it; see scenarios/README.md. The same file
/// and seed always give the same results, bit for bit.
///
/// Without --json a summary table is printed. Exit status is 0 when every flow finished
/// (bounded flows complete and verified; unbounded flows ran without error), 1 on a bad
/// scenario file, and 2 when a flow failed or a check did not hold.
#[derive(Args)]
#[command(
    after_help = "Examples:\n  spate-lab sim scenarios/fasp/scenario-2.toml\n  spate-lab sim scenarios/wan-grid/rtt400-loss2.toml --json\n  spate-lab sim my.toml --timeseries out.csv --plot out.svg"
)]
pub struct SimArgs {
    /// Scenario file (TOML, format version 1).
    scenario: PathBuf,
    /// Print the report as one JSON object on stdout (field names as in SEEDS.md).
    #[arg(long)]
    json: bool,
    /// Write a CSV time series (100 ms intervals): capacity, goodput and rate per flow,
    /// queueing delay, drops.
    #[arg(long, value_name = "FILE.csv")]
    timeseries: Option<PathBuf>,
    /// Write a plot of goodput against capacity and of queueing delay over time; the format
    /// follows the extension (.svg or .png).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<PathBuf>,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the scenario's `utc_start_s`: the UTC second the simulated clock starts at,
    /// which places Spate's drains (every 8 s of UTC) among the phases. Sweep it to see how
    /// much a result owes to where the drains fell.
    #[arg(long, value_name = "SECONDS", value_parser = utc_start)]
    utc_start: Option<Duration>,
    /// Multiply every rate (path phases, flow rates) and byte count by this; delays, loss and
    /// queue times stay (as `spate-lab emu --scale`).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Do not show progress on stderr.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(a: SimArgs) -> Result<()> {
    let mut scenario = crate::scenario::load(&a.scenario, a.scale, a.seed)?;
    if let Some(utc) = a.utc_start {
        scenario = scenario.with_utc_start(utc);
    }
    if let Some(p) = &a.plot {
        crate::plot::check_extension(p)?;
    }
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(1000);
        b.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:40}] {percent:>3}% of simulated time, {elapsed} elapsed, ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        b.set_message(format!("simulating {}", a.scenario.display()));
        b
    });
    let wall = Instant::now();
    let result = spate_sim::run(&scenario, &mut |f| {
        if let Some(b) = &bar {
            b.set_position((f * 1000.0) as u64);
        }
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let wall = wall.elapsed();
    if let Some(path) = &a.timeseries {
        std::fs::write(path, result.series.to_csv())
            .with_context(|| format!("cannot write time series to {}", path.display()))?;
    }
    if let Some(path) = &a.plot {
        crate::plot::sim_plot(path, &result.report, &result.series)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&result.report)?);
    } else {
        print!("{}", result.report.to_text());
        eprintln!(
            "({:.1} s of CPU time for {:.1} s simulated)",
            wall.as_secs_f64(),
            result.report.sim_time_s
        );
    }
    let failed = result
        .report
        .flows
        .iter()
        // A flow with an error is never verified, so this covers failures too.
        .any(|f| !f.verified);
    if failed {
        std::process::exit(2);
    }
    Ok(())
}

/// `--utc-start`: seconds, 0 to a day (as the scenario key).
fn utc_start(v: &str) -> Result<Duration, String> {
    let s: f64 = v
        .parse()
        .map_err(|_| format!("not a number of seconds: {v:?}"))?;
    let max = spate_sim::scenario::MAX_UTC_START_S;
    if !(0.0..=max).contains(&s) {
        return Err(format!("must be between 0 and {max} seconds (got {s})"));
    }
    Ok(Duration::from_secs_f64(s))
}
