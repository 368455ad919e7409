//! `spate serve --max-*` (issue 14, finding 1): a manifest beyond the server's limits is
//! refused with a message naming the limit, before anything is created below the root.

mod common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::{free_port, run_bounded, serve_with};

fn send(cwd: &Path, args: &[&str]) -> (bool, String) {
    let out = run_bounded(
        common::spate()
            .current_dir(cwd)
            .args(["send", "-q", "--connect-timeout", "5"])
            .args(args),
        Duration::from_secs(30),
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn transfers_beyond_the_limits_are_refused_before_anything_is_created() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    fs::write(p.join("big"), spate::noise::bytes(1, 2 << 20)).unwrap();
    fs::write(p.join("small"), spate::noise::bytes(2, 300 << 10)).unwrap();
    for i in 0..4 {
        fs::write(p.join(format!("f{i}")), b"x").unwrap();
    }
    let root = p.join("root");
    fs::create_dir(&root).unwrap();
    let s = serve_with(
        &root,
        free_port(),
        &[
            "--max-file-size",
            "1M",
            "--max-entries",
            "3",
            "--max-bytes",
            "1M",
        ],
    );
    let at = |d: &str| format!("127.0.0.1:{}:{d}", s.port);

    let (ok, err) = send(p, &["big", &at("in/")]);
    assert!(!ok);
    assert!(err.contains("--max-file-size"), "{err}");
    let (ok, err) = send(p, &["f0", "f1", "f2", "f3", &at("in/")]);
    assert!(!ok);
    assert!(err.contains("--max-entries"), "{err}");
    let (ok, err) = send(p, &["small", "f0", "f1", &at("in/")]);
    assert!(ok, "{err}");
    assert_eq!(
        fs::read(root.join("in/small")).unwrap(),
        fs::read(p.join("small")).unwrap()
    );
    fs::write(p.join("small2"), spate::noise::bytes(3, 800 << 10)).unwrap();
    let (ok, err) = send(p, &["small", "small2", &at("two/")]);
    assert!(!ok);
    assert!(err.contains("--max-bytes"), "{err}");
    // Nothing of the refused transfers exists: no directory, no temporary file.
    assert!(!root.join("two").exists());
    let left: Vec<_> = fs::read_dir(root.join("in"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(left, ["f0", "f1", "small"]);
}
