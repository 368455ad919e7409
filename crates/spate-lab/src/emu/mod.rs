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
pub mod host;
pub mod probe;
mod rattan;
pub mod report;
mod run;
pub mod tun;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use spate_sim::{Protocol, Scenario};

use self::report::EmuReport;
use self::run::catch_interrupts;
pub use self::run::{interrupted, run_one, Emulation, Run};

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
    /// (comma-separated: spate, cubic, bbr, reno, gridftp, gridftp-bbr, udt). Default: the file's.
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

pub fn run(a: EmuArgs) -> Result<()> {
    catch_interrupts();
    let base = crate::scenario::load(&a.scenario, a.scale, a.seed)?;
    let protocols: Vec<Protocol> = a
        .protocols
        .iter()
        .map(|p| {
            Protocol::parse(p.trim()).with_context(|| {
                let names: Vec<_> = Protocol::ALL.iter().map(|p| p.name()).collect();
                format!("unknown protocol {p:?}; choose from {}", names.join(", "))
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
        competitive: Vec::new(),
    };
    figure.write(path)
}
