//! What the `spate` command offers around transfers: shell completions and manual pages
//! generated from its definition, and `serve --json` logs a pipeline can read.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{free_port, run_bounded};

#[test]
fn completions_and_man_pages_come_from_the_command_definition() {
    for shell in ["bash", "zsh", "fish"] {
        let out = common::spate()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("strict-host-keys"), "{shell}: {text:.200}");
    }
    let out = common::spate().args(["man", "send"]).output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH spate-send 1"), "{page:.300}");
    assert!(page.contains("known\\-hosts"), "{page:.300}");
    let out = common::spate().args(["man"]).output().unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains(".TH spate 1"));
    let out = common::spate().args(["man", "bogus"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no subcommand 'bogus'"));
}

#[test]
fn serve_json_logs_one_object_per_session() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let port = free_port();
    let mut child = common::spate()
        .args([
            "serve",
            "--json",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--root",
        ])
        .arg(&root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(t.path().join("f"), b"json log").unwrap();
    for dest in ["f", "../escape"] {
        let _ = run_bounded(
            common::spate()
                .current_dir(t.path())
                .args(["send", "-q", "--connect-timeout", "5", "f"])
                .arg(format!("127.0.0.1:{port}:{dest}")),
            Duration::from_secs(30),
        );
    }
    let line = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["outcome"], "ok", "{line}");
    assert_eq!(v["bytes"], 8);
    assert_eq!(v["entries"], 1);
    assert!(
        v["client"].as_str().unwrap().starts_with("BLAKE3:"),
        "{line}"
    );
    assert!(v["cipher"].as_str().is_some());
    // The second send was refused by the client itself ('..'): no second line.
    assert!(rx.recv_timeout(Duration::from_millis(500)).is_err());
}

/// Exit codes a script can tell apart (`spate --help`, `exit.rs`): 3 for bad input here, 4 for
/// a server that does not answer (5 and 6 are checked in `e2e_secure.rs`).
#[test]
fn exit_codes_say_what_failed() {
    let t = tempfile::tempdir().unwrap();
    let code = |args: &[&str]| {
        let out = run_bounded(
            common::spate()
                .current_dir(t.path())
                .args(["send", "-q", "--connect-timeout", "1"])
                .args(args),
            Duration::from_secs(30),
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (c, err) = code(&["missing.bin", "127.0.0.1:9:."]);
    assert_eq!(c, Some(3), "{err}");
    std::fs::write(t.path().join("f"), b"x").unwrap();
    let (c, err) = code(&["f", "127.0.0.1:9:../up"]);
    assert_eq!(c, Some(3), "{err}");
    let port = free_port().to_string();
    let (c, err) = code(&["f", &format!("127.0.0.1:{port}:f")]);
    assert_eq!(c, Some(4), "{err}");
    assert!(err.contains("no answer"), "{err}");
    let out = common::spate().args(["send", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `config.toml` gives send its defaults; the command line wins; a mistake in the file is
/// named, with exit code 3.
#[test]
fn config_toml_gives_defaults_the_command_line_overrides() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let s = common::serve_with(&root, free_port(), &[]);
    std::fs::write(t.path().join("f"), b"configured").unwrap();
    let cfg = t.path().join("config.toml");
    std::fs::write(&cfg, "cipher = \"none\"\nconnect_timeout = 5\n").unwrap();
    let send = |extra: &[&str], dest: &str| {
        run_bounded(
            common::spate()
                .env("SPATE_CONFIG", &cfg)
                .current_dir(t.path())
                .args(["send", "-q"])
                .args(extra)
                .arg("f")
                .arg(format!("127.0.0.1:{}:{dest}", s.port)),
            Duration::from_secs(30),
        )
    };
    let o = send(&[], "a");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("UNENCRYPTED"),
        "the file's cipher"
    );
    let o = send(&["--cipher", "aes-256-gcm"], "b");
    assert!(o.status.success());
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("UNENCRYPTED"),
        "the command line wins"
    );
    std::fs::write(&cfg, "ciper = \"none\"\n").unwrap();
    let o = send(&[], "c");
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ciper") && err.contains("config.toml"),
        "{err}"
    );
}

/// `send --json=events`: one JSON object per line — start, a file event per entry, progress,
/// done; and an error event with the exit code when it fails.
#[test]
fn json_events_stream_one_object_per_line() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let s = common::serve_with(&root, free_port(), &[]);
    let tree = t.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..3 {
        std::fs::write(tree.join(format!("f{i}")), vec![i as u8; 50_000]).unwrap();
    }
    let o = run_bounded(
        common::spate()
            .current_dir(t.path())
            .args(["send", "--json=events", "-r", "tree"])
            .arg(format!("127.0.0.1:{}:in/", s.port)),
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (events, kinds) = common::events(&o.stdout);
    assert_eq!(kinds.first().map(String::as_str), Some("start"));
    assert_eq!(kinds.last().map(String::as_str), Some("done"));
    assert_eq!(
        kinds.iter().filter(|k| *k == "file").count(),
        4,
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "progress"), "{kinds:?}");
    assert_eq!(events.last().unwrap()["bytes_delivered"], 150_000);
    // Alone on loopback the rate controller stays in its delay mode; `--compete` never acted.
    for e in events.iter().filter(|e| e["event"] == "progress") {
        assert_eq!(e["mode"], "delay", "{e}");
    }
    assert_eq!(events.last().unwrap()["competing_s"], 0.0);
    assert_eq!(events.last().unwrap()["following_bbr_s"], 0.0);
    let o = run_bounded(
        common::spate().current_dir(t.path()).args([
            "send",
            "--json=events",
            "missing",
            "127.0.0.1:9:x",
        ]),
        Duration::from_secs(30),
    );
    let last: serde_json::Value =
        serde_json::from_str(String::from_utf8(o.stdout).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "error");
    assert_eq!(last["exit_code"], 3);
}

/// Start `spate serve` with `serve_args`, send a file of `size` bytes to it with `send_args`
/// and `--json`, and check the copy is exact: the sender's JSON report.
fn send_one_file(serve_args: &[&str], send_args: &[&str], size: u64) -> serde_json::Value {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let port = free_port();
    let mut server = common::spate()
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--root"])
        .arg(&root)
        .args(serve_args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let data: Vec<u8> = (0..size).map(|i| (i * 13 % 253) as u8).collect();
    std::fs::write(t.path().join("big.bin"), &data).unwrap();
    let out = run_bounded(
        common::spate()
            .current_dir(t.path())
            .args(["send", "--json", "--connect-timeout", "5"])
            .args(send_args)
            .arg("big.bin")
            .arg(format!("127.0.0.1:{port}:")),
        Duration::from_secs(120),
    );
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(root.join("big.bin")).unwrap(), data);
    serde_json::from_str(stdout.trim()).unwrap()
}

/// A plain send streams each file's digest after its bytes (spec §5.1, kind 2): the sender
/// reads each byte once — no hashing pass before the first packet — and the receiver still
/// checks the digest before the file is put in place. `--json` says so.
#[test]
fn a_send_reads_each_byte_once_and_reports_when_its_first_byte_left() {
    let size: u64 = 40 << 20;
    let v = send_one_file(&[], &[], size);
    assert_eq!(v["file_bytes_read"], size, "{v}");
    assert_eq!(
        v["bytes_delivered"], size,
        "the digest trailer is not file bytes"
    );
    assert!(v["first_data_s"].as_f64().is_some(), "{v}");
}

/// A server that writes at 400 Mbit/s (`--write-rate`) receiving from a sender fixed at
/// 1.6 Gbit/s, three times what its 64 MiB queue holds: the room each report carries (spec
/// §7.4) slows the sender to the writer, so nothing is lost to a full queue — at most 1 % is
/// sent twice (measured without the Write Limit: 65 %) — and the transfer takes as long as the
/// writer needs, not less.
#[test]
fn a_slow_writer_slows_the_sender_instead_of_dropping_its_packets() {
    let size: u64 = 200 << 20;
    let v = send_one_file(
        &["--write-rate", "400M"],
        &["--policy", "fixed", "--rate", "1600M"],
        size,
    );
    let (retx, sent) = (
        v["retransmitted_packets"].as_f64().unwrap(),
        v["data_packets_sent"].as_f64().unwrap(),
    );
    assert!(
        retx <= 0.01 * sent,
        "{retx} of {sent} packets sent twice: {v}"
    );
    // 200 MiB at 50 MB/s is 4.2 s; the queue absorbs 64 MiB of it early, the rest waits for
    // the writer.
    let secs = v["duration_s"].as_f64().unwrap();
    assert!(secs >= 2.5, "{secs} s: faster than the writer allows? {v}");
    // The sender knows why it went slower than its rate.
    let waited = v["receiver_disk_wait_s"].as_f64().unwrap();
    assert!(
        waited >= 1.0,
        "{waited} s waiting for the receiver's disk: {v}"
    );
}
