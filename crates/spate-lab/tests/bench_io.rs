//! `spate-lab bench-io` runs end to end at a tiny scale: every row is measured (or says why
//! not), Spate's transfers complete (each twice: the row is the median run), and the veth pair
//! and the throttled disk are used when root — skipped with a message otherwise. Speeds are
//! not asserted: that is what the benchmark is for.

use std::process::Command;

#[test]
fn bench_io_measures_every_row() {
    let out = Command::new(env!("CARGO_BIN_EXE_spate-lab"))
        .args([
            "bench-io",
            "--json",
            "--size",
            "32M",
            "--seconds",
            "0.5",
            "--repeat",
            "2",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paths: &[&str] = if root {
        &["loopback", "veth"]
    } else {
        eprintln!("not root: the veth pair cannot be measured here; CI runs as root");
        &["loopback"]
    };
    for path in paths {
        for test in ["raw UDP", "Spate memory", "Spate file", "tmpfs write"] {
            let r = rows
                .iter()
                .find(|r| r["path"] == *path && r["test"].as_str().unwrap().starts_with(test))
                .unwrap_or_else(|| panic!("no {test} row for {path}: {v}"));
            let g = r["goodput_gbps"].as_f64().unwrap_or(0.0);
            assert!(g > 0.0, "{path} {test}: {r}");
            if test.starts_with("Spate") {
                let runs = r["runs_gbps"].as_array().map_or(0, Vec::len);
                assert_eq!(runs, 2, "{path} {test}: {r}");
            }
        }
        let file = rows
            .iter()
            .find(|r| r["path"] == *path && r["test"].as_str().unwrap().starts_with("Spate file"))
            .unwrap();
        assert!(file["note"].as_str().unwrap().contains("BLAKE3"), "{file}");
        // The disk limit is the median of as many new-file writes as Spate runs, after one.
        let write = rows
            .iter()
            .find(|r| r["path"] == *path && r["test"].as_str().unwrap().starts_with("tmpfs write"))
            .unwrap();
        assert!(
            write["note"]
                .as_str()
                .unwrap()
                .contains("median of 2 such files after a first"),
            "{write}"
        );
    }
    // As root, file → file onto a throttled disk, against that disk's limit from the same run
    // (where the kernel has what that disk needs: the row says so otherwise).
    let disk = rows
        .iter()
        .find(|r| r["test"] == "Spate file → file (throttled disk)")
        .unwrap_or_else(|| panic!("no throttled-disk row: {v}"));
    let note = disk["note"].as_str().unwrap();
    if note.starts_with("not measured: needs") {
        eprintln!("SKIPPED the throttled disk: {note}");
        assert!(!root || !note.contains("needs root"), "{disk}");
    } else {
        for test in ["Spate file → file (throttled disk)", "throttled disk write"] {
            let r = rows
                .iter()
                .find(|r| r["test"].as_str().unwrap().starts_with(test))
                .unwrap_or_else(|| panic!("no {test} row: {v}"));
            let g = r["goodput_gbps"].as_f64().unwrap_or(0.0);
            assert!(g > 0.0, "{test}: {r}");
        }
        assert!(note.contains("% of the disk's limit"), "{disk}");
    }
    if !root {
        assert!(v["skipped"].to_string().contains("needs root"), "{v}");
    }
}
