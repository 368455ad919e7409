//! Downloads from a `spate serve` daemon (issue 16; spec §2.1, §5.6), with the real binary on
//! loopback: files, globs and trees arrive byte-exact through `get` and `cp`; per-key rules
//! hold (send-only cannot fetch, get-only cannot upload, `dir=` cannot read outside its
//! directory); no symbolic link on the server is followed; an interrupted download resumes.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{free_port, run_bounded, serve_with, Serve};

fn spate_in(cwd: &Path, args: &[&str]) -> Command {
    let mut c = common::spate();
    c.current_dir(cwd).args(args);
    c
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    run_bounded(&mut spate_in(cwd, args), Duration::from_secs(60))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn at(s: &Serve, path: &str) -> String {
    format!("127.0.0.1:{}:{path}", s.port)
}

/// A server root with a file, two logs and a tree; and an empty `local` beside it.
fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    fs::create_dir_all(root.join("logs/2024")).unwrap();
    fs::write(root.join("big.bin"), spate::noise::bytes(1, 3 << 20)).unwrap();
    fs::write(root.join("logs/a.gz"), b"log a").unwrap();
    fs::write(root.join("logs/b.gz"), b"log b").unwrap();
    fs::write(root.join("logs/readme.txt"), b"not a gz").unwrap();
    fs::write(root.join("logs/2024/c.gz"), spate::noise::bytes(2, 100_000)).unwrap();
    let local = t.path().join("local");
    fs::create_dir(&local).unwrap();
    (t, root, local)
}

/// An authorized_keys file with the tests' client key and `options`.
fn keys_with(dir: &Path, options: &str) -> String {
    let public = fs::read_to_string(common::config_home().join("spate/id_x25519.pub")).unwrap();
    let keys = dir.join(format!(
        "authorized_keys-{}",
        options.replace(['=', ','], "_")
    ));
    let line = if options.is_empty() {
        public
    } else {
        format!("{options} {public}")
    };
    fs::write(&keys, line).unwrap();
    keys.to_string_lossy().into_owned()
}

#[test]
fn files_globs_and_trees_come_down_byte_exact() {
    let (t, root, local) = setup();
    let s = serve_with(&root, free_port(), &[]);
    let o = run(
        t.path(),
        &[
            "get",
            "--json",
            &at(&s, "big.bin"),
            &at(&s, "logs/*.gz"),
            "local",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        fs::read(local.join("big.bin")).unwrap(),
        spate::noise::bytes(1, 3 << 20)
    );
    assert_eq!(fs::read(local.join("a.gz")).unwrap(), b"log a");
    assert_eq!(fs::read(local.join("b.gz")).unwrap(), b"log b");
    assert!(
        !local.join("readme.txt").exists(),
        "the glob picked only *.gz"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["entries"], 3, "{v}");
    assert_eq!(v["bytes"], (3 << 20) + 10, "{v}");
    // The server logs the download once, as sent, with the client's key.
    let line = s.wait_for(" sent ");
    assert!(
        line.contains("3 entries") && line.contains("tests"),
        "{line}"
    );

    // A tree, with cp, into a fresh directory.
    fs::create_dir(local.join("tree")).unwrap();
    let o = run(t.path(), &["cp", "-q", "-r", &at(&s, "logs"), "local/tree"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        fs::read(local.join("tree/logs/2024/c.gz")).unwrap(),
        spate::noise::bytes(2, 100_000)
    );
    assert_eq!(
        fs::read(local.join("tree/logs/readme.txt")).unwrap(),
        b"not a gz"
    );

    // What the server cannot give is refused with the reason, and nothing lands.
    for (path, why) in [
        ("nothing-here", "no such file"),
        ("logs/*.zip", "no match"),
        ("logs", "add -r"),
    ] {
        let o = run(t.path(), &["get", &at(&s, path), "local/tree"]);
        assert_eq!(o.status.code(), Some(5), "{path}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{path}: {}", stderr(&o));
    }
    let o = run(t.path(), &["get", &at(&s, "../etc/passwd"), "local"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

/// `get --rate` caps a download from a daemon, whose sender keeps its own policy: the
/// client's Write Limit (spec §7.4) lets new data through at the rate from the start
/// (`serve/cap.rs`). 3 MiB at 8 Mbit/s (1 MB/s) cannot arrive in under 3.1 s; on loopback it
/// otherwise takes a small fraction of that.
#[test]
fn rate_caps_a_download_from_a_daemon() {
    let (t, root, local) = setup();
    let s = serve_with(&root, free_port(), &[]);
    let started = std::time::Instant::now();
    let o = run(
        t.path(),
        &["get", "--json", "--rate", "8M", &at(&s, "big.bin"), "local"],
    );
    let took = started.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        fs::read(local.join("big.bin")).unwrap(),
        spate::noise::bytes(1, 3 << 20)
    );
    assert!(took >= 2.8, "3 MiB at 8 Mbit/s took only {took:.2} s");
    // The rate is honoured, not refused: no note that the daemon ignores it.
    assert!(!stderr(&o).contains("own policy"), "{}", stderr(&o));
    // --min-rate still cannot be asked of a daemon, and says so.
    let o = run(
        t.path(),
        &["get", "--min-rate", "1M", &at(&s, "logs/a.gz"), "local"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("own policy"), "{}", stderr(&o));
}

/// `send-only` may not fetch, `get-only` may fetch but not upload, `dir=` reads only below its
/// directory, and links lead nowhere.
#[test]
fn per_key_rules_hold_for_downloads() {
    let (t, root, local) = setup();
    let outside = t.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret"), b"secret").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("logs/out")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), root.join("logs/s.gz")).unwrap();
    fs::write(root.join("top-secret"), b"not for alice").unwrap();

    let keys = keys_with(t.path(), "send-only");
    let s = serve_with(&root, free_port(), &["--authorized-keys", &keys]);
    let o = run(t.path(), &["get", &at(&s, "big.bin"), "local"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("send-only"), "{}", stderr(&o));
    assert!(!local.join("big.bin").exists());
    drop(s);

    let keys = keys_with(t.path(), "get-only");
    let s = serve_with(&root, free_port(), &["--authorized-keys", &keys]);
    let o = run(t.path(), &["get", "-q", &at(&s, "logs/a.gz"), "local"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(local.join("a.gz")).unwrap(), b"log a");
    let o = run(t.path(), &["send", "-q", "local/a.gz", &at(&s, "up.gz")]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("get-only"), "{}", stderr(&o));
    assert!(!root.join("up.gz").exists());
    // No link is followed: not on the way, not at the end, not inside a tree.
    for path in ["logs/out/secret", "logs/s.gz"] {
        let o = run(t.path(), &["get", &at(&s, path), "local"]);
        assert_eq!(o.status.code(), Some(5), "{path}: {}", stderr(&o));
        assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
    }
    fs::create_dir(local.join("tree")).unwrap();
    let o = run(
        t.path(),
        &["get", "-q", "-r", &at(&s, "logs"), "local/tree"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(local.join("tree/logs/a.gz").exists());
    assert!(!local.join("tree/logs/s.gz").exists());
    assert!(!local.join("tree/logs/out").exists());
    drop(s);

    // dir=logs: paths are relative to it, and nothing above it can be named.
    let keys = keys_with(t.path(), "dir=logs");
    let s = serve_with(&root, free_port(), &["--authorized-keys", &keys]);
    fs::create_dir(local.join("confined")).unwrap();
    let o = run(t.path(), &["get", "-q", &at(&s, "b.gz"), "local/confined"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(local.join("confined/b.gz")).unwrap(), b"log b");
    let o = run(t.path(), &["get", &at(&s, "top-secret"), "local/confined"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(!local.join("confined/top-secret").exists());
    for walled in ["*/../top-secret", "/top-secret"] {
        let o = run(t.path(), &["get", &at(&s, walled), "local/confined"]);
        assert_eq!(o.status.code(), Some(3), "{walled}: {}", stderr(&o));
    }
    for f in fs::read_dir(local.join("confined")).unwrap() {
        assert_ne!(fs::read(f.unwrap().path()).unwrap(), b"secret");
    }
}

#[test]
fn a_killed_download_from_a_daemon_resumes() {
    let (t, root, local) = setup();
    let data = spate::noise::bytes(6, 24 << 20);
    fs::write(root.join("large.bin"), &data).unwrap();
    // 40 Mbit/s: 24 MiB take 5 s, so the kill after 1.5 s leaves a partial file.
    let s = serve_with(&root, free_port(), &["--send-rate", "40M"]);
    let mut child = spate_in(t.path(), &["get", "-q", &at(&s, "large.bin"), "local"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _ = child.kill();
    let _ = child.wait();
    assert!(!local.join("large.bin").exists(), "killed before the end");
    let o = run(
        t.path(),
        &["get", "--json", "--resume", &at(&s, "large.bin"), "local"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(local.join("large.bin")).unwrap(), data);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    eprintln!(
        "daemon download resumed: {} bytes were already here",
        v["resumed_bytes"]
    );
    assert!(v["resumed_bytes"].as_u64().unwrap() > 0, "{v}");
}

/// Answers count against `--max-sessions`: with one allowed, a second download while the
/// first runs is refused "busy" (not queued, not a thread more), and the first completes.
#[test]
fn answers_are_bounded_by_max_sessions() {
    let (t, root, local) = setup();
    let data = spate::noise::bytes(7, 8 << 20);
    fs::write(root.join("slow.bin"), &data).unwrap();
    // 32 Mbit/s: 8 MiB take 2 s.
    let s = serve_with(
        &root,
        free_port(),
        &["--send-rate", "32M", "--max-sessions", "1"],
    );
    let first = spate_in(t.path(), &["get", "-q", &at(&s, "slow.bin"), "local"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    fs::create_dir(local.join("second")).unwrap();
    let o = run(t.path(), &["get", &at(&s, "logs/a.gz"), "local/second"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    let out = first.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(local.join("slow.bin")).unwrap(), data);
    // And once it is done, the next one is served.
    std::thread::sleep(Duration::from_millis(300));
    let o = run(
        t.path(),
        &["get", "-q", &at(&s, "logs/a.gz"), "local/second"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `get --json=events`: one JSON object per line — start, a "file" for every entry placed,
/// progress, then done; a refusal is an "error" event with the exit code.
#[test]
fn get_streams_json_events() {
    let (t, root, _local) = setup();
    let s = serve_with(&root, free_port(), &[]);
    let o = run(
        t.path(),
        &["get", "--json=events", "-r", &at(&s, "logs"), "local"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (events, kinds) = common::events(&o.stdout);
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("start"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("done"), "{kinds:?}");
    assert_eq!(events[0]["entries"], 6);
    let mut files: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "file")
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    files.sort_unstable();
    assert_eq!(
        files,
        [
            "logs",
            "logs/2024",
            "logs/2024/c.gz",
            "logs/a.gz",
            "logs/b.gz",
            "logs/readme.txt"
        ]
    );
    assert_eq!(events.last().unwrap()["outcome"], "ok");
    let o = run(
        t.path(),
        &["get", "--json=events", &at(&s, "nope"), "local"],
    );
    let last: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "error");
    assert_eq!(last["exit_code"], 5);
}
