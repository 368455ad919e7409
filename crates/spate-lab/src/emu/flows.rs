//! The programs that move each flow's data, started in the bed's namespaces.
//!
//! | protocol | receiver (server namespace) | sender (client namespace) |
//! |---|---|---|
//! | `spate` | `spate-lab bench-end spate-recv` (Spate's server, data discarded) | `spate-lab bench-end spate-send --mem` (Spate's sender, memory source, encrypted as by default) |
//! | `cubic` `bbr` `reno` | `iperf3 -s -1` | `iperf3 -c -C <algorithm>` (kernel TCP, congestion control set per socket) |
//! | `gridftp` | `globus-gridftp-server` (anonymous, `/dev/null` sink) | `globus-url-copy -p 8` from `/dev/zero` |
//! | `gridftp-bbr` | the same, every TCP socket set to BBR by `spate-tcp-cc.so` (`LD_PRELOAD`) | the same, likewise |
//! | `udt` | `spate-udt recv` (ours, on libudt) | `spate-udt send` |
//!
//! Spate's ends are the same driver code `spate send` and `spate serve` run (the `spate`
//! library), with a memory source so a 40 s flow at 1 Gbit/s does not need a 5 GB file hashed
//! first. Receivers start before the run; senders at their flow's `start_s`. Each flow gets its
//! own server port, which is how the forwarder tells flows apart.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use spate_proto::Policy;
use spate_sim::{FlowSpec, Protocol};

use super::bed::{Bed, SERVER};
use super::forward::{Classifier, TCP, UDP};

/// Spate's per-packet bytes that are not file data: DATA header (24) and AEAD tag (16).
const SPATE_OVERHEAD: u16 = 40;
/// UDT's data packet header.
const UDT_OVERHEAD: u16 = 16;

/// Server port of flow `i` (GridFTP: its control port; data ports follow [`gridftp_ports`]).
pub fn port(p: Protocol, i: usize) -> u16 {
    let base = match p {
        Protocol::Spate => 7100,
        Protocol::Cubic | Protocol::Bbr | Protocol::Reno => 5201,
        Protocol::Gridftp | Protocol::GridftpBbr => 2811,
        Protocol::Udt => 9100,
    };
    base + i as u16
}

/// GridFTP data port range of flow `i`.
fn gridftp_ports(i: usize) -> (u16, u16) {
    let lo = 50_000 + 100 * i as u16;
    (lo, lo + 99)
}

/// Teach the classifier flow `i`'s packets.
pub fn classify(c: &mut Classifier, i: usize, f: &FlowSpec) {
    let p = port(f.protocol, i);
    match f.protocol {
        Protocol::Spate => c.add(UDP, p, p, i, SPATE_OVERHEAD),
        Protocol::Udt => c.add(UDP, p, p, i, UDT_OVERHEAD),
        Protocol::Cubic | Protocol::Bbr | Protocol::Reno => c.add(TCP, p, p, i, 0),
        Protocol::Gridftp | Protocol::GridftpBbr => {
            c.add(TCP, p, p, i, 0);
            let (lo, hi) = gridftp_ports(i);
            c.add(TCP, lo, hi, i, 0);
        }
    }
}

/// Where the lab finds its helpers.
pub struct Tools {
    /// This program (for `bench-end`).
    pub lab: PathBuf,
    /// Spate identities for the run (`server`, `client`).
    pub keys: PathBuf,
    /// The UDT helper, when built.
    pub udt: Option<PathBuf>,
    /// The shim that sets a TCP socket's congestion control (`lab/tcpcc`), when built.
    pub tcp_cc: Option<PathBuf>,
    /// Scratch directory for logs.
    pub dir: PathBuf,
}

/// A started program.
pub struct Proc {
    /// Which flow and end, for messages.
    pub what: String,
    /// The process.
    pub child: Child,
    /// Where its standard output goes.
    pub out: PathBuf,
}

impl Drop for Proc {
    /// A program still running when its run ends early (an error while starting the others)
    /// is killed, not left behind in a namespace that is about to be deleted.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn spawn(ns: &str, program: &Path, args: &[String], what: String, t: &Tools) -> Result<Proc> {
    let out = t.dir.join(format!("{}.out", what.replace(' ', "-")));
    let err = t.dir.join(format!("{}.err", what.replace(' ', "-")));
    let child = Bed::command(ns, &program.to_string_lossy())
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out)?)
        .stderr(std::fs::File::create(&err)?)
        .spawn()
        .with_context(|| format!("cannot start {} for {what}", program.display()))?;
    Ok(Proc { what, child, out })
}

/// Check that the programs a protocol needs are installed, with what to do if not.
pub fn check(p: Protocol, t: &Tools) -> Result<()> {
    let need: &[&str] = match p {
        Protocol::Spate => &[],
        Protocol::Cubic | Protocol::Bbr | Protocol::Reno => &["iperf3"],
        Protocol::Gridftp | Protocol::GridftpBbr => &["globus-url-copy", "globus-gridftp-server"],
        Protocol::Udt => &[],
    };
    for prog in need {
        if which(prog).is_none() {
            bail!("protocol {p} needs {prog}, which is not installed; run scripts/lab-setup.sh");
        }
    }
    if p == Protocol::GridftpBbr && t.tcp_cc.is_none() {
        bail!("protocol gridftp-bbr needs spate-tcp-cc.so (built from lab/tcpcc by scripts/lab-setup.sh), which sets BBR on GridFTP's sockets");
    }
    if p == Protocol::Udt && t.udt.is_none() {
        bail!("protocol udt needs the spate-udt helper (built from lab/udt by scripts/lab-setup.sh, which installs libudt-dev)");
    }
    Ok(())
}

/// The full path of `prog` on `$PATH` (GridFTP's server lives in /usr/sbin).
pub fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Start flow `i`'s receiver in the server namespace. `run_s` bounds how long it waits.
pub fn start_receiver(
    bed: &Bed,
    i: usize,
    f: &FlowSpec,
    t: &Tools,
    run_s: f64,
) -> Result<Option<Proc>> {
    let port = port(f.protocol, i);
    let what = format!("flow{i} {} receiver", f.protocol);
    let s = |v: &str| v.to_owned();
    let p = match f.protocol {
        Protocol::Spate => spawn(
            &bed.server,
            &t.lab,
            &[
                s("bench-end"),
                s("spate-recv"),
                s("--listen"),
                format!("{SERVER}:{port}"),
                s("--keys"),
                t.keys.to_string_lossy().into_owned(),
                s("--max-seconds"),
                format!("{}", run_s.ceil() as u64 + 30),
            ],
            what,
            t,
        )?,
        Protocol::Cubic | Protocol::Bbr | Protocol::Reno => spawn(
            &bed.server,
            Path::new("iperf3"),
            &[
                s("-s"),
                s("-1"),
                s("-p"),
                port.to_string(),
                s("-B"),
                SERVER.to_string(),
            ],
            what,
            t,
        )?,
        Protocol::Gridftp | Protocol::GridftpBbr => {
            let (lo, hi) = gridftp_ports(i);
            let server = which("globus-gridftp-server").context("globus-gridftp-server")?;
            let mut a = congestion_env(f.protocol, t)?;
            a.push(format!("GLOBUS_TCP_PORT_RANGE={lo},{hi}"));
            a.extend([
                server.to_string_lossy().into_owned(),
                s("-aa"),
                s("-anonymous-user"),
                s("nobody"),
                s("-p"),
                port.to_string(),
                s("-control-interface"),
                SERVER.to_string(),
                s("-data-interface"),
                SERVER.to_string(),
                s("-single"),
                s("-debug"),
            ]);
            let mut p = spawn(&bed.server, Path::new("env"), &a, what, t)?;
            p.what = format!("flow{i} {} server", f.protocol);
            p
        }
        Protocol::Udt => spawn(
            &bed.server,
            t.udt.as_deref().context("spate-udt")?,
            &[s("recv"), port.to_string()],
            what,
            t,
        )?,
    };
    Ok(Some(p))
}

/// Start flow `i`'s sender in the client namespace; it runs for at most `secs` seconds.
pub fn start_sender(bed: &Bed, i: usize, f: &FlowSpec, t: &Tools, secs: f64) -> Result<Proc> {
    let port = port(f.protocol, i);
    let what = format!("flow{i} {} sender", f.protocol);
    let s = |v: &str| v.to_owned();
    // Unbounded flows send more than the path could carry in the time left.
    let bytes = if f.bytes > 0 {
        f.bytes
    } else {
        (secs * 1.25e9).ceil() as u64
    };
    match f.protocol {
        Protocol::Spate => {
            let mut a = vec![
                s("bench-end"),
                s("spate-send"),
                s("--to"),
                format!("{SERVER}:{port}"),
                s("--keys"),
                t.keys.to_string_lossy().into_owned(),
                s("--mem"),
                bytes.to_string(),
                s("--progress"),
                s("--fec"),
                f.fec.name(),
            ];
            if f.rate.policy == Policy::Fixed {
                a.extend([s("--fixed"), f.rate.rate_bps.to_string()]);
            } else {
                a.extend([
                    s("--policy"),
                    s(f.rate.policy.name()),
                    s("--max-rate"),
                    f.rate.rate_bps.to_string(),
                    s("--min-rate"),
                    f.rate.min_rate_bps.to_string(),
                ]);
                if f.rate.compete {
                    a.push(s("--compete"));
                }
            }
            spawn(&bed.client, &t.lab, &a, what, t)
        }
        Protocol::Cubic | Protocol::Bbr | Protocol::Reno => {
            let mut a = vec![
                s("-c"),
                SERVER.to_string(),
                s("-p"),
                port.to_string(),
                s("-C"),
                s(f.protocol.name()),
                s("-J"),
            ];
            if f.bytes > 0 {
                a.extend([s("-n"), f.bytes.to_string()]);
            } else {
                a.extend([s("-t"), format!("{}", secs.floor().max(1.0) as u64)]);
            }
            spawn(&bed.client, Path::new("iperf3"), &a, what, t)
        }
        Protocol::Gridftp | Protocol::GridftpBbr => {
            let mut a = congestion_env(f.protocol, t)?;
            a.extend([
                s("globus-url-copy"),
                s("-p"),
                s("8"),
                s("-fast"),
                s("-len"),
                bytes.to_string(),
                s("file:///dev/zero"),
                format!("ftp://server:{port}/dev/null"),
            ]);
            spawn(&bed.client, Path::new("env"), &a, what, t)
        }
        Protocol::Udt => spawn(
            &bed.client,
            t.udt.as_deref().context("spate-udt")?,
            &[
                s("send"),
                SERVER.to_string(),
                port.to_string(),
                bytes.to_string(),
            ],
            what,
            t,
        ),
    }
}

/// `env` assignments that give a GridFTP end's TCP sockets the protocol's congestion control:
/// none for `gridftp` (the namespaces default to CUBIC), the `spate-tcp-cc.so` shim asking for
/// BBR for `gridftp-bbr`.
fn congestion_env(p: Protocol, t: &Tools) -> Result<Vec<String>> {
    if p != Protocol::GridftpBbr {
        return Ok(Vec::new());
    }
    let shim = t.tcp_cc.as_deref().context("spate-tcp-cc.so")?;
    Ok(vec![
        format!("LD_PRELOAD={}", shim.display()),
        "SPATE_TCP_CC=bbr".to_owned(),
    ])
}

/// CPU seconds (user + system) a process has used so far, from `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(ticks / hz.max(1) as f64)
}

/// Stop a process: SIGTERM, then SIGKILL after `grace`.
pub fn stop(p: &mut Proc, grace: Duration) {
    if matches!(p.child.try_wait(), Ok(Some(_))) {
        return;
    }
    // SAFETY: kill with a pid we started and have not reaped.
    unsafe { libc::kill(p.child.id() as libc::pid_t, libc::SIGTERM) };
    let end = std::time::Instant::now() + grace;
    while std::time::Instant::now() < end {
        if matches!(p.child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = p.child.kill();
    let _ = p.child.wait();
}
