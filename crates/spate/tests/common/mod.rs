//! Helpers shared by the tests that run the `spate` binary as a user would.

#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const SPATE: &str = env!("CARGO_BIN_EXE_spate");

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

pub fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn serve(root: &Path, port: u16) -> Serve {
    serve_with(root, port, &[])
}

/// A `spate serve` with `extra` options.
pub fn serve_with(root: &Path, port: u16, extra: &[&str]) -> Serve {
    let mut child = Command::new(SPATE)
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
    let first = s.log.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.contains("listening"), "{first}");
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
