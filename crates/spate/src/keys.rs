//! Identities: X25519 key pairs for the authenticated handshake (Noise IK, spec §9.2), the
//! files they live in, and fingerprints people can compare.
//!
//! Formats (one line each, like OpenSSH's, so people can read, copy and `grep` them):
//!
//! ```text
//! NAME          (mode 0600)  spate-x25519-private <base64 private key> <base64 public key>
//! NAME.pub                   spate-x25519 <base64 public key> [comment]
//! authorized_keys            [options] spate-x25519 <base64 public key> [comment]
//! known_hosts                <host> spate-x25519 <base64 public key>
//! ```
//!
//! The private file keeps the public key too (as OpenSSH's does), so showing an identity
//! needs no curve arithmetic here. A fingerprint is `BLAKE3:` and the unpadded base64 of the
//! first 16 bytes of the BLAKE3 hash of the public key: 128 bits, enough against collisions a
//! person comparing two strings could be fooled by, short enough to read aloud.
//!
//! `authorized_keys` options (comma-separated, before the key): `dir=SUBDIR` confines the key
//! to that directory below the server's root; `send-only` lets it send files to the server
//! but not fetch any; `get-only` the reverse. Keys are generated with the operating system's
//! random source through `snow`, the Noise implementation the handshake uses.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;

/// The algorithm tag of a public key line.
pub const KEY_TYPE: &str = "spate-x25519";
const PRIVATE_TAG: &str = "spate-x25519-private";

/// A Curve25519 public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(pub [u8; 32]);

/// A key pair.
pub struct Identity {
    /// The private key (never printed).
    pub private: [u8; 32],
    /// The public key.
    pub public: PublicKey,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({})", self.public.fingerprint())
    }
}

impl PublicKey {
    /// `BLAKE3:` and 22 base64 characters (see the module documentation).
    pub fn fingerprint(&self) -> String {
        let h = blake3::hash(&self.0);
        format!("BLAKE3:{}", STANDARD_NO_PAD.encode(&h.as_bytes()[..16]))
    }

    /// The `spate-x25519 BASE64` form.
    pub fn line(&self) -> String {
        format!("{KEY_TYPE} {}", STANDARD.encode(self.0))
    }

    /// Parse the base64 of a key.
    pub fn from_base64(s: &str) -> Result<PublicKey> {
        decode_key(s)
            .map(PublicKey)
            .with_context(|| format!("'{s}' is not a base64 Curve25519 key (32 bytes)"))
    }
}

/// Where identities live by default: `$XDG_CONFIG_HOME/spate`, else `~/.config/spate`.
pub fn config_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("spate"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither XDG_CONFIG_HOME nor HOME is set: give the key file with --out")?;
    Ok(PathBuf::from(home).join(".config/spate"))
}

/// The default identity file.
pub fn default_identity() -> Result<PathBuf> {
    Ok(config_dir()?.join("id_x25519"))
}

impl Identity {
    /// A new key pair from the operating system's random source.
    pub fn generate() -> Result<Identity> {
        let params = "Noise_IK_25519_AESGCM_BLAKE2s"
            .parse()
            .context("Noise parameters")?;
        let kp = snow::Builder::new(params)
            .generate_keypair()
            .context("cannot generate a key pair")?;
        let (Ok(private), Ok(public)) = (
            <[u8; 32]>::try_from(kp.private.as_slice()),
            <[u8; 32]>::try_from(kp.public.as_slice()),
        ) else {
            bail!("unexpected key length from the Noise library");
        };
        Ok(Identity {
            private,
            public: PublicKey(public),
        })
    }

    /// Write the private key to `path` (mode 0600, refusing to replace an existing file unless
    /// `force`) and the public key to `path.pub`.
    pub fn save(&self, path: &Path, comment: &str, force: bool) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .with_context(|| format!("cannot create '{}'", dir.display()))?;
        }
        let mut opts = fs::OpenOptions::new();
        opts.write(true).mode(0o600);
        if force {
            opts.create(true).truncate(true);
        } else {
            opts.create_new(true);
        }
        let mut f = opts.open(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                anyhow::anyhow!(
                    "'{}' exists; keep it, or replace it with --force (whoever trusts its key \
                     will then refuse the new one)",
                    path.display()
                )
            } else {
                anyhow::anyhow!("cannot write '{}': {e}", path.display())
            }
        })?;
        writeln!(
            f,
            "{PRIVATE_TAG} {} {}",
            STANDARD.encode(self.private),
            STANDARD.encode(self.public.0)
        )?;
        let public = public_path(path);
        let comment = comment.replace(['\n', '\r'], " ");
        fs::write(&public, format!("{} {comment}\n", self.public.line()))
            .with_context(|| format!("cannot write '{}'", public.display()))?;
        Ok(())
    }

    /// Read an identity written by [`save`](Self::save). Refuses a private key file that
    /// others can read.
    pub fn load(path: &Path) -> Result<Identity> {
        use std::os::unix::fs::PermissionsExt;
        let meta = fs::metadata(path).with_context(|| {
            format!(
                "cannot read the key '{}' (create one with `spate keygen`)",
                path.display()
            )
        })?;
        if meta.permissions().mode() & 0o077 != 0 {
            bail!(
                "'{}' can be read by others; a private key must not be: chmod 600 '{}'",
                path.display(),
                path.display()
            );
        }
        let text = fs::read_to_string(path)?;
        let parts: Vec<&str> = text.split_whitespace().collect();
        let [PRIVATE_TAG, private, public] = parts.as_slice() else {
            bail!("'{}' is not a spate private key file", path.display());
        };
        let private = decode_key(private)
            .with_context(|| format!("the private key in '{}'", path.display()))?;
        Ok(Identity {
            private,
            public: PublicKey::from_base64(public)?,
        })
    }
}

/// 32 key bytes from base64 (public or private). The error does not repeat the text: it may
/// be a private key.
fn decode_key(s: &str) -> Result<[u8; 32]> {
    STANDARD
        .decode(s)
        .ok()
        .and_then(|v| <[u8; 32]>::try_from(v).ok())
        .context("not a base64 Curve25519 key (32 bytes)")
}

/// `KEY.pub` beside `KEY`.
pub fn public_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// What an `authorized_keys` line allows its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized {
    /// The key.
    pub key: PublicKey,
    /// Confined to this directory below the root (`dir=`), if set.
    pub dir: Option<String>,
    /// May send files to the server.
    pub may_send: bool,
    /// May fetch files from the server.
    pub may_get: bool,
    /// The comment, for logs.
    pub comment: String,
}

/// Parse an `authorized_keys` file; errors name the line.
pub fn parse_authorized_keys(text: &str) -> Result<Vec<Authorized>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parse = || -> Result<Authorized> {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words
                .iter()
                .position(|w| *w == KEY_TYPE)
                .with_context(|| format!("no '{KEY_TYPE}' key"))?;
            let key = PublicKey::from_base64(words.get(at + 1).context("key missing")?)?;
            let mut a = Authorized {
                key,
                dir: None,
                may_send: true,
                may_get: true,
                comment: words[(at + 2).min(words.len())..].join(" "),
            };
            if at > 1 {
                bail!("options must be one comma-separated word before the key");
            }
            for opt in words[..at].iter().flat_map(|o| o.split(',')) {
                match opt.split_once('=') {
                    Some(("dir", d)) => {
                        let d = d.trim_end_matches('/');
                        spate_proto::manifest::validate_path(d).map_err(|why| {
                            anyhow::anyhow!("dir='{d}' {why}: give a directory below the root")
                        })?;
                        a.dir = Some(d.to_owned());
                    }
                    None if opt == "send-only" => a.may_get = false,
                    None if opt == "get-only" => a.may_send = false,
                    _ => bail!("unknown option '{opt}' (known: dir=SUBDIR, send-only, get-only)"),
                }
            }
            if !a.may_send && !a.may_get {
                bail!("send-only and get-only together allow nothing");
            }
            Ok(a)
        };
        out.push(parse().with_context(|| format!("authorized_keys line {}", n + 1))?);
    }
    Ok(out)
}

/// What `known_hosts` says of a host's key.
#[derive(Debug, PartialEq, Eq)]
pub enum HostKey {
    /// The host is listed with this key.
    Known,
    /// The host is not listed (trust on first use: show the fingerprint, then record it).
    Unknown,
    /// The host is listed with another key, on this line (1-based): refuse, and say which
    /// line to remove if the change is expected.
    Changed { line: usize, expected: PublicKey },
}

/// The key `known_hosts` (its text) pins for `host`: the 1-based line and the key.
pub fn lookup_known_host(text: &str, host: &str) -> Option<(usize, PublicKey)> {
    text.lines().enumerate().find_map(|(n, line)| {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            [h, KEY_TYPE, k, ..] if *h == host => {
                PublicKey::from_base64(k).ok().map(|k| (n + 1, k))
            }
            _ => None,
        }
    })
}

/// Look up `host` presenting `key` in the text of a `known_hosts` file.
pub fn check_known_host(text: &str, host: &str, key: &PublicKey) -> HostKey {
    match lookup_known_host(text, host) {
        None => HostKey::Unknown,
        Some((_, listed)) if listed == *key => HostKey::Known,
        Some((line, listed)) => HostKey::Changed {
            line,
            expected: listed,
        },
    }
}

/// The `known_hosts` line recording `host`'s `key`.
pub fn known_host_line(host: &str, key: &PublicKey) -> String {
    format!("{host} {}", key.line())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_saved_identity_loads_back_and_is_private() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("sub/id_x25519");
        let id = Identity::generate().unwrap();
        id.save(&path, "me@host", false).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = Identity::load(&path).unwrap();
        assert_eq!((back.private, back.public), (id.private, id.public));
        let public = fs::read_to_string(public_path(&path)).unwrap();
        assert_eq!(public, format!("{} me@host\n", id.public.line()));
        // Not replaced by accident; replaced with force.
        let e = Identity::generate()
            .unwrap()
            .save(&path, "", false)
            .unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        Identity::generate().unwrap().save(&path, "", true).unwrap();
        assert_ne!(Identity::load(&path).unwrap().public, id.public);
        // A readable private key is refused, with the command that fixes it.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let e = Identity::load(&path).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }

    #[test]
    fn two_identities_differ_and_fingerprints_are_stable() {
        let (a, b) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        assert_ne!(a.public, b.public);
        let k = PublicKey([7; 32]);
        assert_eq!(k.fingerprint(), k.fingerprint());
        assert!(k.fingerprint().starts_with("BLAKE3:"));
        assert_eq!(k.fingerprint().len(), 7 + 22);
    }

    #[test]
    fn authorized_keys_options() {
        let k = PublicKey([1; 32]).line();
        let text =
            format!("# team\n{k} alice\ndir=incoming/bob,send-only {k} bob laptop\nget-only {k}\n");
        let a = parse_authorized_keys(&text).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(
            (a[0].may_send, a[0].may_get, a[0].dir.clone()),
            (true, true, None)
        );
        assert_eq!(a[1].dir.as_deref(), Some("incoming/bob"));
        assert_eq!((a[1].may_send, a[1].may_get), (true, false));
        assert_eq!(a[1].comment, "bob laptop");
        assert_eq!((a[2].may_send, a[2].may_get), (false, true));
        for bad in [
            format!("dir=../x {k}"),
            format!("dir=/etc {k}"),
            format!("frobnicate {k}"),
            format!("send-only,get-only {k}"),
            "spate-x25519 notbase64".to_owned(),
        ] {
            let e = parse_authorized_keys(&bad).unwrap_err();
            assert!(format!("{e:#}").contains("line 1"), "{bad}: {e:#}");
        }
    }

    #[test]
    fn known_hosts_trust_on_first_use_and_refuse_a_changed_key() {
        let (a, b) = (PublicKey([1; 32]), PublicKey([2; 32]));
        let text = format!("other {}\n{}\n", b.line(), known_host_line("srv:7373", &a));
        assert_eq!(check_known_host(&text, "srv:7373", &a), HostKey::Known);
        assert_eq!(check_known_host(&text, "new:7373", &a), HostKey::Unknown);
        assert_eq!(
            check_known_host(&text, "srv:7373", &b),
            HostKey::Changed {
                line: 2,
                expected: a
            }
        );
    }
}
