//! Defaults for `spate send` from `$XDG_CONFIG_HOME/spate/config.toml`.
//!
//! Every key is optional and stands for the `send` option of the same name; an option given
//! on the command line wins. Unknown keys are an error (a typo should not be silently
//! ignored), as is a value of the wrong type, and the message names the file and the key.
//!
//! ```toml
//! policy = "fair"            # fair | high | low | fixed
//! rate = "500M"              # cap (or the rate of `fixed`), bits per second
//! min_rate = "10M"
//! cipher = "auto"            # auto | aes-256-gcm | chacha20-poly1305 | none
//! identity = "~/.config/spate/work_x25519"
//! ssh = "ssh -p 2222"
//! remote_spate = "/opt/spate/bin/spate"
//! port_range = "60000-60100"
//! connect_timeout = 10       # seconds
//! idle_timeout = 60          # seconds
//! strict_host_keys = false
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

/// The file's contents.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SendDefaults {
    /// `--policy`.
    pub policy: Option<String>,
    /// `--rate`.
    pub rate: Option<String>,
    /// `--min-rate`.
    pub min_rate: Option<String>,
    /// `--cipher`.
    pub cipher: Option<String>,
    /// `--identity` (a leading `~/` is the home directory).
    pub identity: Option<String>,
    /// `--ssh`.
    pub ssh: Option<String>,
    /// `--remote-spate`.
    pub remote_spate: Option<String>,
    /// `--port-range`.
    pub port_range: Option<String>,
    /// `--connect-timeout`.
    pub connect_timeout: Option<f64>,
    /// `--idle-timeout`.
    pub idle_timeout: Option<f64>,
    /// `--strict-host-keys`.
    pub strict_host_keys: Option<bool>,
}

/// The default configuration file.
pub fn default_path() -> Result<PathBuf> {
    Ok(crate::keys::config_dir()?.join("config.toml"))
}

/// Read `path`; a missing file is no defaults.
pub fn load(path: &Path) -> Result<SendDefaults> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SendDefaults::default()),
        Err(e) => return Err(e).with_context(|| format!("cannot read '{}'", path.display())),
    };
    parse(&text).with_context(|| format!("in '{}'", path.display()))
}

/// Parse the text of a configuration file.
pub fn parse(text: &str) -> Result<SendDefaults> {
    toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))
}

/// `~/x` as `$HOME/x`.
pub fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_mistakes_are_named() {
        let d = parse("policy = \"high\"\nrate = \"500M\"\nconnect_timeout = 5\n").unwrap();
        assert_eq!(d.policy.as_deref(), Some("high"));
        assert_eq!(d.rate.as_deref(), Some("500M"));
        assert_eq!(d.connect_timeout, Some(5.0));
        let e = parse("polcy = \"high\"\n").unwrap_err().to_string();
        assert!(e.contains("polcy"), "{e}");
        let e = parse("connect_timeout = \"soon\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("connect_timeout"), "{e}");
        assert_eq!(parse("").unwrap(), SendDefaults::default());
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            load(&dir.path().join("none.toml")).unwrap(),
            SendDefaults::default()
        );
    }
}
