//! The calibration probes through Rattan (`spate-lab calibrate --rattan`): the same checks on
//! an emulator nobody here wrote, so that the lab's own is judged against more than its own
//! configuration.
//!
//! Rattan 0.1.1 (`cargo install --locked rattan --version 0.1.1`, Apache-2.0; `scripts/lab-setup.sh` installs
//! it) builds its path from veth pairs and namespaces. `rattan link` runs a command in a new
//! namespace ("left") whose packets cross Rattan's cells — bandwidth, delay, loss, each
//! direction — to the host's namespace ("right"), at the address it puts in `$RATTAN_BASE`.
//! So the probe sender runs inside `rattan link` and the receiver in this process's namespace,
//! on an address Rattan created. Both read `CLOCK_MONOTONIC`, which all namespaces share.
//!
//! Two things differ from the lab's own bed, and the probe run allows for them:
//! * Rattan's queue is unbounded by default (the lab's is one RTT of drop-tail); at the
//!   checks' loads (at most 110 % for 4 s) neither drops for lack of room.
//! * Rattan tears its path down when the command exits, losing whatever is still in flight;
//!   the command therefore waits an RTT plus the queue's drain (at most 10 % of the run) plus
//!   a margin after the last probe before it exits.
//!
//! Rattan carried about 450 Mbit/s at most on this 2-core machine (issue 17), so only checks up
//! to [`MAX_RATE_MBPS`] run through it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// Highest rate a check runs at through Rattan, Mbit/s.
pub const MAX_RATE_MBPS: f64 = 250.0;
/// UDP port of the probes through Rattan.
const PORT: u16 = 9998;
/// Before the first probe, for Rattan's path to come up, seconds.
const SETTLE_S: f64 = 0.5;

/// The path of a check, as Rattan's `link` command takes it.
pub struct RattanPath {
    pub rate_mbps: f64,
    pub rtt_ms: f64,
    pub loss: f64,
}

/// Send `seconds` of probes at `rate_bps` through Rattan at `path`; the sender's and the
/// receiver's JSON results (as `calib-end send` and `recv` print them).
pub fn probe(
    rattan: &Path,
    lab: &Path,
    path: &RattanPath,
    rate_bps: u64,
    seconds: f64,
) -> Result<(Value, Value)> {
    let dir = std::env::temp_dir().join(format!("spate-rattan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let sent_file = dir.join("sent.json");
    let _ = std::fs::remove_file(&sent_file);
    let mut recv = Command::new(lab)
        .args(["calib-end", "recv", "--listen", &format!("0.0.0.0:{PORT}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start the probe receiver")?;
    std::thread::sleep(Duration::from_millis(300));
    let one_way = format!("{}ms", path.rtt_ms / 2.0);
    let rate = format!("{}Mbps", path.rate_mbps);
    let drain = path.rtt_ms / 1e3 + 0.1 * seconds + 1.0;
    let mut link = Command::new(rattan);
    link.arg("link");
    for way in ["uplink", "downlink"] {
        link.args([format!("--{way}-bandwidth"), rate.clone()])
            .args([format!("--{way}-delay"), one_way.clone()]);
    }
    if path.loss > 0.0 {
        // The probes go one way (left to right: Rattan's uplink); loss applies to them only,
        // as in the lab's own check.
        link.args(["--uplink-loss".to_owned(), path.loss.to_string()]);
    }
    let script = format!(
        "sleep {SETTLE_S}; \"$0\" calib-end send --to \"$RATTAN_BASE:{PORT}\" --rate {rate_bps} \
         --seconds {seconds} > \"$1\"; sleep {drain}"
    );
    let out = link
        .args(["--", "sh", "-c", &script])
        .arg(lab)
        .arg(&sent_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", rattan.display()))?;
    // The receiver stops 1 s after its last probe.
    let deadline = Instant::now() + Duration::from_secs(5);
    while recv.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = recv.kill();
    let r = recv.wait_with_output()?;
    let sent = std::fs::read(&sent_file).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() || sent.is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last: Vec<&str> = err.lines().rev().take(5).collect();
        bail!(
            "rattan link failed ({}); its last lines:\n{}",
            out.status,
            last.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let sent: Value = serde_json::from_slice(&sent).context("the probe sender's result")?;
    let got: Value =
        serde_json::from_slice(&r.stdout).context("the probe receiver gave no result")?;
    Ok((sent, got))
}

/// `rattan` as given, or found on `PATH`.
pub fn find(given: &str) -> Result<std::path::PathBuf> {
    let p = Path::new(given);
    if p.components().count() > 1 {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!("{given}: no such file (install Rattan with scripts/lab-setup.sh)");
    }
    super::flows::which(given).with_context(|| {
            format!(
                "{given} is not on PATH: install Rattan with scripts/lab-setup.sh (cargo install \
                 --locked rattan --version 0.1.1: a few minutes), or give its path: --rattan /path/to/rattan"
            )
        })
}
