//! Helpers shared by the tests that run the `spate` binary as a user would.

#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const SPATE: &str = env!("CARGO_BIN_EXE_spate");

/// The `XDG_CONFIG_HOME` of every `spate` the tests start: a client identity (`id_x25519`),
/// an `authorized_keys` that lists it, and — once a server started — the server's key
/// (`host_x25519`) and the client's `known_hosts`. Made once per test build, below Cargo's
/// scratch directory for integration tests.
pub fn config_home() -> &'static Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("spate-test-config");
        let spate_dir = dir.join("spate");
        let id = spate_dir.join("id_x25519");
        if !id.exists() {
            let out = Command::new(SPATE)
                .env("XDG_CONFIG_HOME", &dir)
                .args(["keygen", "--comment", "tests"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
        let public = std::fs::read_to_string(spate_dir.join("id_x25519.pub")).unwrap();
        std::fs::write(spate_dir.join("authorized_keys"), public).unwrap();
        dir
    })
}

/// The tests' client identity (authorized on every test server).
pub fn client_identity() -> spate::keys::Identity {
    spate::keys::Identity::load(&config_home().join("spate/id_x25519")).unwrap()
}

/// The test servers' public key (they share `host_x25519`; call after a server started).
pub fn server_key() -> [u8; 32] {
    spate::keys::Identity::load(&config_home().join("spate/host_x25519"))
        .unwrap()
        .public
        .0
}

/// The test servers' public key, created (by `spate serve --print-key`) if no server ran yet.
pub fn server_key_or_start() -> [u8; 32] {
    if !config_home().join("spate/host_x25519").exists() {
        let out = spate().args(["serve", "--print-key"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    server_key()
}

/// Protection parameters of a client with `identity` for the test servers.
pub fn client_params(identity: &spate::keys::Identity) -> spate_proto::secure::ClientParams {
    spate_proto::secure::ClientParams {
        cipher: spate_proto::secure::Cipher::Aes256Gcm,
        local_private: identity.private,
        server_public: server_key(),
        auth: [0; 16],
        seed: spate::random::bytes32(),
    }
}

/// Whether the tests run as root (the ones that need namespaces, sshd or block devices say
/// SKIPPED otherwise).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A `spate` command that uses the tests' identities ([`config_home`]).
pub fn spate() -> Command {
    let mut c = Command::new(SPATE);
    c.env("XDG_CONFIG_HOME", config_home());
    c
}

/// A `spate serve` process; killed when dropped. Its log lines arrive on `log`.
pub struct Serve {
    pub child: Child,
    pub port: u16,
    pub log: mpsc::Receiver<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A UDP port on 127.0.0.1 for a test server, free when checked.
///
/// Taken below Linux's ephemeral range (32768–60999 by default), one after another from a
/// per-process start: a port the kernel hands out for `bind(0)` — as the old version of this
/// did, and as every client socket does — can be handed to a parallel test's client between
/// this check and the server's own bind, which then fails with "address in use". Below the
/// range only this counter hands ports out, and tests of one binary share it.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id() % 1000 * 12;
    for _ in 0..SPAN {
        let port = (LOW + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN) as u16;
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free UDP port in {LOW}..{}", LOW + SPAN);
}

pub fn serve(root: &Path, port: u16) -> Serve {
    serve_with(root, port, &[])
}

/// A `spate serve` with `extra` options.
pub fn serve_with(root: &Path, port: u16, extra: &[&str]) -> Serve {
    let mut child = spate()
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--root"])
        .arg(root)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, log) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let s = Serve { child, port, log };
    // The first line says where it listens (a line about creating its key may precede it).
    let listening = s.wait_for("listening");
    assert!(listening.contains("listening"), "{listening}");
    s
}

impl Serve {
    /// Log lines until one contains `what` (within 20 s).
    pub fn wait_for(&self, what: &str) -> String {
        let end = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.log.recv_timeout(left) {
                Ok(l) if l.contains(what) => return l,
                Ok(l) => seen.push(l),
                Err(_) => break,
            }
        }
        panic!("no log line with '{what}': {seen:?}");
    }
}

/// Run `cmd` to completion within `limit` (killed and reported otherwise); its output.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} did not finish within {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `--json=events` output: the events, and their kinds in order.
pub fn events(stdout: &[u8]) -> (Vec<serde_json::Value>, Vec<String>) {
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds = events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("").to_owned())
        .collect();
    (events, kinds)
}
