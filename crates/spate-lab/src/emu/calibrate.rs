//! `spate-lab calibrate`: does the emulator do what its configuration says?
//!
//! Each check builds a fresh bed with a one-phase path and sends paced UDP probes through it
//! from the client namespace to the server namespace (`spate-lab calib-end`, `probe.rs`). Every
//! probe carries its sequence number and the `CLOCK_MONOTONIC` time it was sent; both
//! namespaces share that clock, so the receiver measures one-way delay directly (against the
//! kernel's receive timestamp of each probe).
//!
//! * **capacity**: probes offered at 110 % of the rate; the receiver's IP-level rate over the
//!   steady part (from 0.5 s after the first probe to the last) against the configured rate;
//! * **delay**: probes at 20 % (or 50 %) of the rate; median one-way delay against RTT/2 plus
//!   one packet's serialisation: what the emulator adds beyond the model (scheduling, copies);
//! * **loss**: probes at 50–80 % of a fast path (170 000 probes in 4 s at 1 Gbit/s, so the
//!   binomial standard deviation at 2 % loss is 0.034 points, a third of the tolerance);
//!   1 − received/sent against the configured loss, and apart from it the probes lost outside
//!   the model (sent, not dropped by the model, never received: kernel queues, buffers).
//!
//! Each check uses its own seed, so their loss draws are independent.
//!
//! Pass marks are the lab's claims (`docs/lab.md`): capacity within 2 %, added delay within
//! 1 ms, loss within 0.1 percentage points.
//!
//! With `--rattan`, every check up to 250 Mbit/s also runs through Rattan (`rattan.rs`), an
//! emulator nobody here wrote, and the two must agree within the same marks.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use spate_sim::report::round;
use spate_sim::Scenario;

use super::bed::{Bed, SERVER};
use super::forward::{Classifier, UDP};
use super::host::{CpuTimes, HostLoad};
use super::probe::PROBE;
use super::rattan::{self, RattanPath};
use super::Emulation;

/// UDP port of the probes.
const PORT: u16 = 9999;

/// Measure the emulator's capacity, added delay and loss against its configuration.
///
/// Needs root. Runs about a dozen 4-second checks up to the highest rate the lab claims
/// (1 Gbit/s with 100 ms RTT) and prints a table; exit status 2 if any check is outside its
/// tolerance (capacity 2 %, added delay 1 ms, loss 0.1 percentage points).
///
/// Each row also gives how late the emulator handed packets over on average; a check that
/// failed while the emulator fell more than 1 ms behind is named in a note (the machine was
/// busy, or cannot carry that rate: see --max-rate).
///
/// With --rattan, the checks up to 250 Mbit/s also run through Rattan 0.1.1 (installed by
/// scripts/lab-setup.sh) and a second table compares the two emulators; exit status 2 also
/// when they disagree by more than the tolerance.
#[derive(Args)]
#[command(after_help = "Examples:
  sudo spate-lab calibrate                          # the lab's emulator, ~1 min
  sudo spate-lab calibrate --rattan                 # and against Rattan on the same checks
  sudo spate-lab calibrate --only delay --seconds 1 --rattan /usr/local/bin/rattan
  sudo spate-lab calibrate --max-rate 250           # only what a slower machine carries")]
pub struct CalibrateArgs {
    /// Seconds of probing per check.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the table as Markdown to this file.
    #[arg(long, value_name = "FILE.md")]
    markdown: Option<PathBuf>,
    /// Also run the checks up to 250 Mbit/s through Rattan (the `rattan` on PATH, or this
    /// file) and compare.
    #[arg(long, value_name = "RATTAN", num_args = 0..=1, default_missing_value = "rattan")]
    rattan: Option<String>,
    /// Run only the checks of this kind (repeat for several).
    #[arg(long, value_enum)]
    only: Vec<Kind>,
    /// Run only the checks of paths up to this rate, Mbit/s (the lab claims 1000; a machine
    /// with fewer or slower cores may carry less).
    #[arg(long, value_name = "MBIT_S")]
    max_rate: Option<f64>,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Capacity,
    Delay,
    Loss,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Capacity => "capacity",
            Kind::Delay => "added delay",
            Kind::Loss => "loss",
        }
    }
}

/// One check: the path, the load, what is measured.
#[derive(Clone, Copy)]
struct Check {
    kind: Kind,
    rate_mbps: f64,
    rtt_ms: f64,
    loss: f64,
    load: f64,
}

#[derive(Serialize)]
struct Outcome {
    /// Which emulator: "lab" (ours) or "rattan".
    emulator: &'static str,
    kind: Kind,
    rate_mbps: f64,
    rtt_ms: f64,
    loss: f64,
    load: f64,
    configured: f64,
    measured: f64,
    error: f64,
    tolerance: f64,
    unit: &'static str,
    pass: bool,
    probes_sent: u64,
    /// Probes the model did not drop that never arrived (the lab's emulator only).
    lost_outside_model: Option<i64>,
    /// How late, on average, the emulator handed packets to the receiving namespace against
    /// the model's arrival time, µs (the lab's emulator only). It includes each write's own
    /// time, which runs the receiving namespace's input path; at full load on two cores it is
    /// what the emulator adds to the model's queueing delay.
    emulator_late_us_mean: Option<f64>,
    /// The machine during the check (the lab's emulator only).
    host: Option<HostLoad>,
}

#[rustfmt::skip]
const CHECKS: [Check; 12] = [
    Check {
        kind: Kind::Capacity,
        rate_mbps: 10.0,
        rtt_ms: 100.0,
        loss: 0.0,
        load: 1.1,
    },
    Check {
        kind: Kind::Capacity,
        rate_mbps: 100.0,
        rtt_ms: 100.0,
        loss: 0.0,
        load: 1.1,
    },
    Check {
        kind: Kind::Capacity,
        rate_mbps: 500.0,
        rtt_ms: 100.0,
        loss: 0.0,
        load: 1.1,
    },
    Check {
        kind: Kind::Capacity,
        rate_mbps: 1000.0,
        rtt_ms: 100.0,
        loss: 0.0,
        load: 1.1,
    },
    Check {
        kind: Kind::Delay,
        rate_mbps: 100.0,
        rtt_ms: 10.0,
        loss: 0.0,
        load: 0.2,
    },
    Check {
        kind: Kind::Delay,
        rate_mbps: 100.0,
        rtt_ms: 100.0,
        loss: 0.0,
        load: 0.2,
    },
    Check {
        kind: Kind::Delay,
        rate_mbps: 100.0,
        rtt_ms: 400.0,
        loss: 0.0,
        load: 0.2,
    },
    Check {
        kind: Kind::Delay,
        rate_mbps: 1000.0,
        rtt_ms: 100.0,
        loss: 0.0,
        load: 0.5,
    },
    Check {
        kind: Kind::Loss,
        rate_mbps: 1000.0,
        rtt_ms: 100.0,
        loss: 0.001,
        load: 0.5,
    },
    Check {
        kind: Kind::Loss,
        rate_mbps: 1000.0,
        rtt_ms: 100.0,
        loss: 0.01,
        load: 0.5,
    },
    Check {
        kind: Kind::Loss,
        rate_mbps: 1000.0,
        rtt_ms: 100.0,
        loss: 0.02,
        load: 0.5,
    },
    Check {
        kind: Kind::Loss,
        rate_mbps: 250.0,
        rtt_ms: 200.0,
        loss: 0.01,
        load: 0.8,
    },
];

pub fn run(a: CalibrateArgs) -> Result<()> {
    if !(a.seconds.is_finite() && (1.0..=600.0).contains(&a.seconds)) {
        bail!("--seconds must be between 1 and 600");
    }
    let max_rate = a.max_rate.unwrap_or(f64::INFINITY);
    if max_rate.is_nan() || max_rate < 10.0 {
        bail!("--max-rate must be at least 10 (Mbit/s; the slowest check's path)");
    }
    let lab = std::env::current_exe().context("cannot find the spate-lab executable")?;
    let rattan = a.rattan.as_deref().map(rattan::find).transpose()?;
    let mut out = Vec::new();
    super::catch_interrupts();
    let checks: Vec<(u64, &Check)> = (1..)
        .zip(CHECKS.iter())
        .filter(|(_, c)| a.only.is_empty() || a.only.contains(&c.kind))
        .filter(|(_, c)| c.rate_mbps <= max_rate)
        .collect();
    if checks.is_empty() {
        bail!(
            "no check is left (--only and --max-rate): capacity checks run from 10 Mbit/s, \
             delay checks from 100, loss checks from 250"
        );
    }
    let show = !a.json && std::io::stderr().is_terminal();
    for (n, &(seed, c)) in checks.iter().enumerate() {
        if super::interrupted() {
            bail!("interrupted; the namespaces are cleaned up");
        }
        if show {
            eprint!(
                "\rcalibrating: check {} of {} ({} at {} Mbit/s, {} ms)   ",
                n + 1,
                checks.len(),
                c.kind.name(),
                c.rate_mbps,
                c.rtt_ms
            );
        }
        out.push(check(&lab, c, a.seconds, seed)?);
        if let Some(r) = rattan
            .as_deref()
            .filter(|_| c.rate_mbps <= rattan::MAX_RATE_MBPS)
        {
            if show {
                eprint!(
                    "\rcalibrating: check {} of {} through Rattan                  ",
                    n + 1,
                    checks.len()
                );
            }
            out.push(through_rattan(r, &lab, c, a.seconds)?);
        }
    }
    if show {
        eprint!("\r{:70}\r", "");
    }
    let agreement = rattan.as_ref().map(|_| versus(&out));
    let mut table = markdown(&out);
    if let Some((t, _)) = &agreement {
        table += "\n";
        table += t;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{table}");
    }
    if let Some(p) = &a.markdown {
        std::fs::write(p, &table).with_context(|| format!("cannot write {}", p.display()))?;
    }
    let lab_failed = out.iter().any(|o| o.emulator == "lab" && !o.pass);
    if let Some(note) = busy_note(&out) {
        eprintln!("{note}");
    }
    if lab_failed || agreement.is_some_and(|(_, all)| !all) {
        std::process::exit(2);
    }
    Ok(())
}

/// Mean lateness above which a failed check says the emulator, not its model, fell behind:
/// the added-delay tolerance.
const LATE_US: f64 = 1000.0;

/// What to do when a check failed while the emulator was late: the host did not give it the
/// time to keep up (other programs, a hypervisor taking the CPU, or a rate beyond the machine).
fn busy_note(out: &[Outcome]) -> Option<String> {
    let late: Vec<String> = out
        .iter()
        .filter(|o| !o.pass)
        .filter_map(|o| {
            let us = o.emulator_late_us_mean.filter(|&us| us > LATE_US)?;
            let machine = o
                .host
                .map_or(String::new(), |h| format!("; the machine {}", h.brief()));
            Some(format!(
                "{} at {} Mbit/s ({} ms late on average{machine})",
                o.kind.name(),
                o.rate_mbps,
                round(us / 1e3, 1)
            ))
        })
        .collect();
    (!late.is_empty()).then(|| {
        format!(
            "note: the emulator fell behind its model during {}: this machine was busy or \
             cannot carry that rate with both probe ends on the same cores. Close other \
             programs and run again; if it persists, the lab's limit on this machine is lower \
             (see --max-rate, and docs/lab.md, \"A busy host\")",
            late.join(", ")
        )
    })
}

/// The lab's emulator against Rattan on each check both ran: a Markdown table, and whether
/// they agree within the tolerance everywhere.
fn versus(out: &[Outcome]) -> (String, bool) {
    let mut s = String::from(
        "Against Rattan (the same probes, one run each):\n\n| check | path | configured | this lab | Rattan | lab − Rattan | tolerance | |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut all = true;
    for pair in out.windows(2) {
        let [ours, theirs] = pair else { continue };
        if ours.emulator != "lab" || theirs.emulator != "rattan" {
            continue;
        }
        let diff = round(ours.measured - theirs.measured, 3);
        let agree = diff.abs() <= ours.tolerance;
        all &= agree;
        s += &format!(
            "| {} | {} Mbit/s, {} ms, {} % loss | {} {u} | {} {u} | {} {u} | {:+} {u} | ±{} {u} | {} |\n",
            ours.kind.name(),
            ours.rate_mbps,
            ours.rtt_ms,
            ours.loss * 100.0,
            ours.configured,
            ours.measured,
            theirs.measured,
            diff,
            ours.tolerance,
            if agree { "agree" } else { "**differ**" },
            u = ours.unit,
        );
    }
    (s, all)
}

fn markdown(out: &[Outcome]) -> String {
    let mut s = String::from(
        "| emulator | check | path | probes at | configured | measured | error | tolerance | | probes | lost outside the model | emulator late, mean |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for o in out {
        let kind = o.kind.name();
        s += &format!(
            "| {} | {kind} | {} Mbit/s, {} ms, {} % loss | {:.0} % | {} {u} | {} {u} | {:+} {u} | ±{} {u} | {} | {} | {} | {} |\n",
            o.emulator,
            o.rate_mbps,
            o.rtt_ms,
            o.loss * 100.0,
            o.load * 100.0,
            o.configured,
            o.measured,
            o.error,
            o.tolerance,
            if o.pass { "ok" } else { "**outside**" },
            o.probes_sent,
            o.lost_outside_model.map_or("–".to_owned(), |n| n.to_string()),
            o.emulator_late_us_mean
                .map_or("–".to_owned(), |us| format!("{} ms", round(us / 1e3, 3))),
            u = o.unit,
        );
    }
    s
}

fn check(lab: &std::path::Path, c: &Check, seconds: f64, seed: u64) -> Result<Outcome> {
    let text = format!(
        "name = \"calibrate\"\nseed = {seed}\nduration_s = {}\n[[path.phase]]\nat_s = 0.0\nrate_mbps = {}\nrtt_ms = {}\nloss = {}\n[[flow]]\n",
        seconds + 10.0,
        c.rate_mbps,
        c.rtt_ms,
        c.loss
    );
    let s = Scenario::parse(&text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (bed, client, server) = Bed::create()?;
    let mut cl = Classifier::new();
    cl.add(UDP, PORT, PORT, 0, 0);
    let mut recv = Bed::command(&bed.server, &lab.to_string_lossy())
        .args(["calib-end", "recv", "--listen", &format!("{SERVER}:{PORT}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start the probe receiver")?;
    std::thread::sleep(Duration::from_millis(300));
    let cpu_before = CpuTimes::now();
    let emu = Emulation::start(client, server, &s, cl)?;
    let rate_bps = (c.rate_mbps * 1e6 * c.load).round() as u64;
    let send = Bed::command(&bed.client, &lab.to_string_lossy())
        .args([
            "calib-end",
            "send",
            "--to",
            &format!("{SERVER}:{PORT}"),
            "--rate",
            &rate_bps.to_string(),
            "--seconds",
            &seconds.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .context("cannot run the probe sender")?;
    let deadline = Instant::now() + Duration::from_secs_f64(c.rtt_ms / 1e3 + 5.0);
    while recv.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = recv.kill();
    let r = recv.wait_with_output()?;
    let measured = emu.finish()?;
    let host = HostLoad::since(cpu_before);
    drop(bed);
    let sent: serde_json::Value = serde_json::from_slice(&send.stdout)
        .with_context(|| format!("probe sender: {}", String::from_utf8_lossy(&send.stderr)))?;
    let got: serde_json::Value =
        serde_json::from_slice(&r.stdout).context("probe receiver gave no result")?;
    let mut o = judge("lab", c, &sent, &got);
    let model_dropped = measured.links[0].random_drops + measured.links[0].queue_drops;
    o.lost_outside_model =
        Some(o.probes_sent as i64 - number(&got, "received") as i64 - model_dropped as i64);
    o.emulator_late_us_mean = Some(round(measured.lateness_us.0, 1));
    o.host = host;
    Ok(o)
}

/// Check `c` through Rattan.
fn through_rattan(
    rattan: &std::path::Path,
    lab: &std::path::Path,
    c: &Check,
    seconds: f64,
) -> Result<Outcome> {
    let path = RattanPath {
        rate_mbps: c.rate_mbps,
        rtt_ms: c.rtt_ms,
        loss: c.loss,
    };
    let rate_bps = (c.rate_mbps * 1e6 * c.load).round() as u64;
    let (sent, got) = rattan::probe(rattan, lab, &path, rate_bps, seconds)?;
    Ok(judge("rattan", c, &sent, &got))
}

fn number(v: &serde_json::Value, k: &str) -> f64 {
    v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0)
}

/// What the probes say about check `c`: the sender's and the receiver's results.
fn judge(
    emulator: &'static str,
    c: &Check,
    sent: &serde_json::Value,
    got: &serde_json::Value,
) -> Outcome {
    let probes = number(sent, "sent") as u64;
    let (configured, measured_v, tolerance, unit) = match c.kind {
        Kind::Capacity => {
            let got_mbps = number(got, "steady_ip_bps") / 1e6;
            (
                c.rate_mbps,
                round(got_mbps, 2),
                c.rate_mbps * 0.02,
                "Mbit/s",
            )
        }
        Kind::Delay => {
            let tx_ms = (PROBE + 28) as f64 * 8.0 / (c.rate_mbps * 1e6) * 1e3;
            let expect = c.rtt_ms / 2.0 + tx_ms;
            let owd = number(got, "owd_p50_ms");
            (0.0, round(owd - expect, 3), 1.0, "ms")
        }
        Kind::Loss => {
            let rx = number(got, "received");
            let lost = if probes > 0 {
                1.0 - rx / probes as f64
            } else {
                1.0
            };
            (round(c.loss * 100.0, 3), round(lost * 100.0, 3), 0.1, "%")
        }
    };
    let error = round(measured_v - configured, 3);
    Outcome {
        emulator,
        kind: c.kind,
        rate_mbps: c.rate_mbps,
        rtt_ms: c.rtt_ms,
        loss: c.loss,
        load: c.load,
        configured,
        measured: measured_v,
        error,
        tolerance: round(tolerance, 3),
        unit,
        pass: error.abs() <= tolerance && probes > 0,
        probes_sent: probes,
        lost_outside_model: None,
        emulator_late_us_mean: None,
        host: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capacity_at_1g(measured_mbps: f64, late_us: f64) -> Outcome {
        let c = Check {
            kind: Kind::Capacity,
            rate_mbps: 1000.0,
            rtt_ms: 100.0,
            loss: 0.0,
            load: 1.1,
        };
        let mut o = judge(
            "lab",
            &c,
            &json!({ "sent": 1000 }),
            &json!({ "steady_ip_bps": measured_mbps * 1e6 }),
        );
        o.emulator_late_us_mean = Some(late_us);
        o
    }

    #[test]
    fn a_check_failed_behind_a_late_emulator_says_what_to_do() {
        let mut late = capacity_at_1g(941.4, 16_336.0);
        let note = busy_note(std::slice::from_ref(&late)).unwrap();
        assert!(
            note.contains("capacity at 1000 Mbit/s (16.3 ms late on average)"),
            "{note}"
        );
        late.host = Some(HostLoad {
            cpus: 2,
            idle_pct: 1.2,
            steal_pct: 6.5,
        });
        let note = busy_note(&[late]).unwrap();
        assert!(
            note.contains(
                "(16.3 ms late on average; the machine 1.2 % idle, 6.5 % taken by the hypervisor)"
            ),
            "{note}"
        );
        assert!(note.contains("--max-rate"), "{note}");
        // Failed on time: the emulator's model or configuration, not the host.
        assert!(busy_note(&[capacity_at_1g(941.4, 120.0)]).is_none());
        // Passed although late: nothing to say.
        assert!(busy_note(&[capacity_at_1g(1000.3, 16_336.0)]).is_none());
    }
}
