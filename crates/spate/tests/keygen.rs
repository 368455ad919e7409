//! `spate keygen` as a user runs it: an identity in $XDG_CONFIG_HOME/spate, private and not
//! overwritten by accident, shown again with --show.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use common::SPATE;

fn keygen(config: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(SPATE)
        .arg("keygen")
        .args(args)
        .env("XDG_CONFIG_HOME", config)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn keygen_creates_a_private_identity_and_shows_it() {
    let t = tempfile::tempdir().unwrap();
    let (ok, out, err) = keygen(t.path(), &["--comment", "test key"]);
    assert!(ok, "{err}");
    let key = t.path().join("spate/id_x25519");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let public = std::fs::read_to_string(t.path().join("spate/id_x25519.pub")).unwrap();
    let line = out.lines().next().unwrap();
    assert!(line.starts_with("spate-x25519 "), "{out}");
    assert_eq!(public, format!("{line} test key\n"));
    assert!(out.contains("fingerprint BLAKE3:"), "{out}");
    let (ok, _, err) = keygen(t.path(), &[]);
    assert!(!ok);
    assert!(err.contains("--force"), "{err}");
    let (ok, shown, _) = keygen(t.path(), &["--show"]);
    assert!(ok);
    assert_eq!(shown, out);
}
