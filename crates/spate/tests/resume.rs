//! `spate send --resume` end to end, with real processes killed with SIGKILL: the sender at a
//! random point, the receiver mid-transfer; a partial file damaged between attempts; a source
//! changed between attempts. Every result is compared byte for byte, and the second attempt
//! must send only what the receiver lacked. Every process is bounded in time.

use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{free_port, serve};

/// 32 MiB at 100 Mbit/s: about 2.7 s, so a kill after 0.6–1.4 s lands mid-transfer.
const SIZE: usize = 32 << 20;
const RATE: &str = "100M";

fn send_cmd(src: &Path, port: u16, extra: &[&str]) -> Command {
    let mut c = common::spate();
    c.args([
        "send",
        "--resume",
        "--json",
        "-q",
        "--rate",
        RATE,
        "--connect-timeout",
        "5",
    ])
    .args(["--idle-timeout", "3"])
    .args(extra)
    .arg(src)
    .arg(format!("127.0.0.1:{port}:in/"));
    c
}

/// Run a send to completion (at most 60 s) and return its output.
fn send(src: &Path, port: u16) -> Output {
    let mut child = send_cmd(src, port, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("send did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Start a send and SIGKILL it after `after`.
fn send_and_kill(src: &Path, port: u16, after: Duration) {
    let mut child = send_cmd(src, port, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the sender finished before it could be killed"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Send `s.src` to completion; it must succeed and the copy be byte-exact.
fn send_whole(s: &Setup, port: u16) -> Output {
    let out = send(&s.src, port);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(dest(s)).unwrap(), fs::read(&s.src).unwrap());
    out
}

fn field(out: &Output, name: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v[name].as_u64().unwrap()
}

/// A random kill time in 0.6..1.4 s (the operating system seeds `RandomState`).
fn random_moment() -> Duration {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    Duration::from_millis(600 + h.finish() % 800)
}

struct Setup {
    _dir: tempfile::TempDir,
    src: PathBuf,
    root: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.bin");
    fs::write(&src, spate::noise::bytes(1, SIZE)).unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    Setup {
        src,
        root,
        _dir: dir,
    }
}

fn dest(s: &Setup) -> PathBuf {
    s.root.join("in/big.bin")
}

fn part(s: &Setup) -> PathBuf {
    s.root.join("in/.big.bin.spate-part")
}

fn journal_blocks(s: &Setup) -> usize {
    fs::read_to_string(s.root.join("in/.big.bin.spate-journal"))
        .map_or(0, |t| t.lines().count().saturating_sub(1))
}

#[test]
fn killing_the_sender_then_resuming_sends_only_the_rest() {
    let s = setup();
    let server = serve(&s.root, free_port());
    let at = random_moment();
    send_and_kill(&s.src, server.port, at);
    assert!(!dest(&s).exists());
    assert!(part(&s).exists(), "the partial file is kept");
    let out = send_whole(&s, server.port);
    let (sent, resumed) = (field(&out, "bytes_delivered"), field(&out, "bytes_resumed"));
    assert_eq!(sent + resumed, SIZE as u64);
    assert!(
        resumed >= 1 << 20,
        "killed after {at:?}: {resumed} bytes resumed"
    );
    assert!(!part(&s).exists(), "no temporary file left");
    assert!(!s.root.join("in/.big.bin.spate-journal").exists());
    // The killed session was taken over; the resumed one succeeded.
    server.wait_for("superseded");
    let ok = server.wait_for("resumed");
    assert!(!ok.contains("failed"), "{ok}");
}

#[test]
fn killing_the_receiver_then_resuming_sends_only_the_rest() {
    let s = setup();
    let port = free_port();
    let mut server = serve(&s.root, port);
    let first = send_cmd(&s.src, port, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(random_moment());
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    // The sender notices the silence and fails with a message that says what to do.
    let out = first.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stopped answering"), "{err}");
    let blocks = journal_blocks(&s);
    assert!(blocks >= 1, "a journal survives the receiver's death");
    drop(server);
    let server = serve(&s.root, port);
    let out = send_whole(&s, server.port);
    assert_eq!(field(&out, "bytes_resumed"), blocks as u64 * (1 << 20));
}

#[test]
fn a_damaged_partial_file_is_repaired_not_accepted() {
    let s = setup();
    let server = serve(&s.root, free_port());
    send_and_kill(&s.src, server.port, Duration::from_millis(1200));
    let blocks = journal_blocks(&s);
    assert!(blocks >= 2, "{blocks} blocks journaled");
    // Damage the first journaled block on disk (bit rot, a stray write).
    let f = fs::OpenOptions::new().write(true).open(part(&s)).unwrap();
    f.write_all_at(b"damage", 1000).unwrap();
    drop(f);
    let out = send_whole(&s, server.port);
    // The killed session's writer may journal a few more queued blocks before the resume
    // takes over, so the exact count is the server's to tell: one block was damaged.
    let resumed = field(&out, "bytes_resumed");
    assert!(
        resumed % (1 << 20) == 0 && resumed < SIZE as u64,
        "{resumed}"
    );
    assert!(resumed >= (blocks as u64 - 1) * (1 << 20), "{resumed}");
    server.wait_for("1 damaged block");
}

#[test]
fn a_changed_source_starts_over_and_a_complete_file_is_not_sent_again() {
    let s = setup();
    let server = serve(&s.root, free_port());
    send_and_kill(&s.src, server.port, Duration::from_millis(800));
    assert!(journal_blocks(&s) >= 1);
    fs::write(&s.src, spate::noise::bytes(2, SIZE)).unwrap();
    let out = send_whole(&s, server.port);
    assert_eq!(
        field(&out, "bytes_resumed"),
        0,
        "the old partial belongs to other data"
    );
    // Again: everything is already there.
    let out = send(&s.src, server.port);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(field(&out, "bytes_resumed"), SIZE as u64);
    assert_eq!(field(&out, "bytes_delivered"), 0);
}
