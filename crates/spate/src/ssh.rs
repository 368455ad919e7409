//! Starting a one-off receiver over the user's own SSH (`spate send FILE [user@]host:DEST`).
//!
//! Like ascp, qcp and mosh: the client runs `ssh [user@]host <spate> serve --once …`, so
//! `~/.ssh/config`, the agent, `ProxyJump` and ssh's host-key checking all apply. The remote
//! `spate serve --once` binds a UDP port, makes a fresh key and a one-time token, prints one
//! line on its stdout —
//!
//! ```text
//! SPATE-ONCE 1 <address> <port> <token>
//! ```
//!
//! — serves one session and exits. `<address>` is the server address of the SSH connection
//! (`$SSH_CONNECTION`), the one the client demonstrably reaches; `<token>` (`spate1-…`) holds
//! the server's key and a secret. The line travels over SSH, so the UDP session's server key
//! is vouched for by SSH's own host-key check: no `known_hosts` of Spate's is needed, and the
//! token lets exactly this client in.
//!
//! The client keeps the remote's stdin open for as long as it runs; when it ends — or is
//! killed — the remote sees end of input and exits, leaving partial files for `--resume`.
//!
//! Failures are reported by cause, within the connect timeout: ssh itself failing (exit 255:
//! its own message is on stderr), no `spate` on the remote PATH (exit 127: "install it there or
//! give --remote-spate"), or no UDP answer (the send's own "no answer … is UDP port N open?").

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::exit::{tag, Exit};

/// The first word of the announcement line.
pub const ANNOUNCE: &str = "SPATE-ONCE";

/// How to reach the remote.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// The ssh command and its options (`ssh`, or e.g. `ssh -p 2222 -i key`).
    pub ssh: Vec<String>,
    /// The `spate` to run on the remote.
    pub remote_spate: String,
    /// UDP ports the remote may listen on (`--port-range`), for firewalls.
    pub port_range: Option<(u16, u16)>,
    /// How long to wait for the remote to announce itself.
    pub timeout: Duration,
}

/// A remote one-off receiver, announced and waiting for its session.
pub struct Remote {
    child: Child,
    /// Closed when this is dropped (or this process dies): the remote's signal to stop.
    _stdin: Option<std::process::ChildStdin>,
    /// Where its UDP socket is.
    pub addr: SocketAddr,
    /// Its one-time token (`spate1-…`).
    pub token: String,
}

/// The remote end's side of it: the address the client reached this host at over ssh (the
/// third field of `$SSH_CONNECTION`), which it can reach again; loopback without ssh.
pub fn connection_address() -> String {
    std::env::var("SSH_CONNECTION")
        .ok()
        .and_then(|c| c.split_whitespace().nth(2).map(str::to_owned))
        .unwrap_or_else(|| "127.0.0.1".into())
}

/// The remote end's side: when started over ssh, standard input is a pipe the client holds
/// open; run `gone` (on a thread) when it ends — the client went. Nothing without a pipe (a
/// terminal or /dev/null says nothing about a client).
pub fn on_stdin_end(gone: impl FnOnce() + Send + 'static) {
    use std::os::unix::fs::FileTypeExt;
    let pipe = std::fs::metadata("/proc/self/fd/0")
        .map(|m| m.file_type().is_fifo() || m.file_type().is_socket())
        .unwrap_or(false);
    if pipe {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            gone();
        });
    }
}

/// Quote `s` for the remote shell (ssh passes the command line to it as one string).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@,+".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Split `DEST` of `host:DEST` into the remote root and the destination below it: an absolute
/// path is below `/`; anything else is below the login directory (where ssh starts), as with
/// scp.
pub fn remote_root(dest: &str) -> (&'static str, String) {
    match dest.strip_prefix('/') {
        Some(rest) => ("/", rest.to_owned()),
        None => (".", dest.to_owned()),
    }
}

/// Start `spate serve --once` on `host` (`[user@]host`) with `root` as its root (with
/// `direct_io`, writing with `--direct-io`), and wait for its announcement.
pub fn start(host: &str, root: &str, o: &SshOptions, direct_io: bool) -> Result<Remote> {
    let mut args = vec![
        "serve".to_owned(),
        "--once".into(),
        "--root".into(),
        root.into(),
    ];
    if direct_io {
        args.push("--direct-io".into());
    }
    if let Some((lo, hi)) = o.port_range {
        args.push("--port-range".into());
        args.push(format!("{lo}-{hi}"));
    }
    start_command(host, &args, o)
}

/// Run `spate ARGS…` on `host` over ssh (each argument quoted for the remote shell) and wait
/// for its announcement line.
pub fn start_command(host: &str, args: &[String], o: &SshOptions) -> Result<Remote> {
    let (program, ssh_args) = o.ssh.split_first().context("--ssh is empty")?;
    let mut remote = vec![shell_quote(&o.remote_spate)];
    remote.extend(args.iter().map(|a| shell_quote(a)));
    let mut child = Command::new(program)
        .args(ssh_args)
        .arg(host)
        .arg("--")
        .arg(remote.join(" "))
        // Held open while we run: if this process dies, ssh sees the pipe close and the remote
        // receiver sees its stdin end, and exits (its partial files stay for --resume).
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            tag(
                anyhow::anyhow!("cannot run '{program}': {e} (give the ssh command with --ssh)"),
                Exit::Unreachable,
            )
        })?;
    let stdout = child.stdout.take().context("ssh's stdout")?;
    let stdin = child.stdin.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + o.timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        // Once ssh has exited, what it printed before it went may still be in the pipe.
        let exited = child.try_wait()?;
        let wait = match exited {
            Some(_) => Duration::from_millis(200),
            None => left.min(Duration::from_millis(100)),
        };
        if let Ok(line) = rx.recv_timeout(wait) {
            if let Some((addr, token)) = parse_announcement(&line)? {
                return Ok(Remote {
                    child,
                    _stdin: stdin,
                    addr,
                    token,
                });
            }
            continue;
        }
        if exited.is_none() && left.is_zero() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(tag(
                anyhow::anyhow!(
                    "{host} did not start spate within {:.0} s (ssh connected but `{}` said \
                     nothing)",
                    o.timeout.as_secs_f64(),
                    o.remote_spate
                ),
                Exit::Unreachable,
            ));
        }
        if let Some(status) = exited {
            return Err(match status.code() {
                Some(127) => tag(
                    anyhow::anyhow!(
                        "{host} has no `{}` on its PATH: install spate there, or give its path \
                         with --remote-spate",
                        o.remote_spate
                    ),
                    Exit::Unreachable,
                ),
                Some(255) => tag(
                    anyhow::anyhow!("ssh to {host} failed (its message is above)"),
                    Exit::Unreachable,
                ),
                _ => tag(
                    anyhow::anyhow!(
                        "spate on {host} exited ({status}) before it was ready (its message is \
                         above)"
                    ),
                    Exit::Refused,
                ),
            });
        }
    }
}

/// `SPATE-ONCE 1 <address> <port> <token>`, or `None` for another line.
fn parse_announcement(line: &str) -> Result<Option<(SocketAddr, String)>> {
    let w: Vec<&str> = line.split_whitespace().collect();
    match w.as_slice() {
        [ANNOUNCE, "1", ip, port, token] => {
            let ip: IpAddr = ip.parse().context("the remote announced a bad address")?;
            let port: u16 = port.parse().context("the remote announced a bad port")?;
            Ok(Some((SocketAddr::new(ip, port), (*token).to_owned())))
        }
        [ANNOUNCE, v, ..] => {
            bail!("the remote spate speaks announcement version {v}; update one side")
        }
        _ => Ok(None),
    }
}

impl Remote {
    /// Wait (at most `limit`) for the remote receiver to finish; it ends after its session.
    pub fn finish(mut self, limit: Duration) {
        let end = std::time::Instant::now() + limit;
        while std::time::Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_roots_and_announcements() {
        assert_eq!(shell_quote("/usr/bin/spate"), "/usr/bin/spate");
        assert_eq!(shell_quote("it's here"), "'it'\\''s here'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(remote_root("/srv/in"), ("/", "srv/in".to_owned()));
        assert_eq!(remote_root("in/"), (".", "in/".to_owned()));
        let (a, t) = parse_announcement("SPATE-ONCE 1 10.0.0.1 4000 spate1-abc")
            .unwrap()
            .unwrap();
        assert_eq!(a, "10.0.0.1:4000".parse().unwrap());
        assert_eq!(t, "spate1-abc");
        assert!(parse_announcement("Welcome to host").unwrap().is_none());
        assert!(parse_announcement("SPATE-ONCE 2 x").is_err());
    }
}
