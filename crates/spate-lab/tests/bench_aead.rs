//! `spate-lab bench-aead` runs end to end at a tiny scale: every cipher and size is measured on
//! one core and on all, and bad options are refused. Speeds are not asserted: that is what
//! the benchmark is for.

use std::process::Command;

fn lab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_spate-lab"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn bench_aead_measures_every_cipher_and_size() {
    let out = lab(&[
        "bench-aead",
        "--json",
        "--size",
        "100,1448",
        "--seconds",
        "0.05",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{v}");
    for r in rows {
        for k in [
            "seal_gbps_1",
            "open_gbps_1",
            "seal_gbps_all",
            "open_gbps_all",
        ] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let bad = lab(&["bench-aead", "--size", "0"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--size"));
}
