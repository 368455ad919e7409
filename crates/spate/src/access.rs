//! Who may use a server, and for what (`docs/security.md`, "Authorization").
//!
//! A client proves in the handshake that it holds the private half of a static key
//! (spec §9.2). The server then looks that key up here:
//!
//! - in `authorized_keys` (see `keys.rs` for the format): a listed key may do what its line
//!   allows — `dir=SUBDIR` confines it below the root, `send-only`/`get-only` restrict the
//!   direction. The file is read again whenever its modification time changes, so an operator
//!   who adds or removes a line needs no restart;
//! - or by the one-time token of `spate serve --token`: a client that sends the token (inside
//!   the encrypted first handshake message) is let in with the whole root, whatever its key.
//!   The token is 128 random bits, valid while that `serve` runs.
//!
//! Anything else is refused with a CLOSE that, like every answer after the first handshake
//! message, is authenticated — and carries only the client's own fingerprint.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};

use crate::keys::{parse_authorized_keys, Authorized, PublicKey};

/// Bytes of a one-time token's secret.
pub const TOKEN_SECRET_LEN: usize = spate_proto::secure::AUTH_LEN;

/// The printed form of a one-time token: this prefix, then the unpadded URL-safe base64 of the
/// server's static public key (32 bytes) and the secret (16 bytes) — spec, Appendix C.
pub const TOKEN_PREFIX: &str = "spate1-";

/// A token for `key` and `secret` (`spate1-…`).
pub fn encode_token(key: &[u8; 32], secret: &[u8; TOKEN_SECRET_LEN]) -> String {
    use base64::Engine;
    let mut raw = key.to_vec();
    raw.extend_from_slice(secret);
    format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    )
}

/// The server key and secret of a token, if it is one.
pub fn decode_token(token: &str) -> Option<([u8; 32], [u8; TOKEN_SECRET_LEN])> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.strip_prefix(TOKEN_PREFIX)?)
        .ok()
        .filter(|r| r.len() == 32 + TOKEN_SECRET_LEN)?;
    let mut key = [0; 32];
    let mut secret = [0; TOKEN_SECRET_LEN];
    key.copy_from_slice(&raw[..32]);
    secret.copy_from_slice(&raw[32..]);
    Some((key, secret))
}

/// What one authenticated client may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Confined to this directory below the root.
    pub dir: Option<String>,
    /// May send files to the server.
    pub may_send: bool,
    /// May fetch files from the server.
    pub may_get: bool,
    /// For logs: the key's fingerprint and its comment, or "token".
    pub who: String,
}

/// The server's authorization policy.
#[derive(Debug, Default)]
pub struct Access {
    keys: Vec<Authorized>,
    file: Option<(PathBuf, Option<SystemTime>)>,
    token: Option<[u8; TOKEN_SECRET_LEN]>,
}

impl Access {
    /// Only the keys listed in `path`. A missing or malformed file is an error that names it.
    pub fn from_file(path: &Path) -> Result<Access> {
        let mut a = Access {
            file: Some((path.to_owned(), None)),
            ..Access::default()
        };
        a.reload()?;
        Ok(a)
    }

    /// Exactly these keys (for programs that embed a server: tests, benchmarks, the demo).
    pub fn keys(keys: Vec<Authorized>) -> Access {
        Access {
            keys,
            ..Access::default()
        }
    }

    /// Also let in clients that present `token` (`serve --token`).
    pub fn with_token(mut self, token: [u8; TOKEN_SECRET_LEN]) -> Access {
        self.token = Some(token);
        self
    }

    /// Number of keys listed.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if no key is listed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn reload(&mut self) -> Result<()> {
        let Some((path, seen)) = self.file.as_mut() else {
            return Ok(());
        };
        let mtime = std::fs::metadata(&*path)
            .and_then(|m| m.modified())
            .with_context(|| format!("cannot read '{}'", path.display()))?;
        if *seen == Some(mtime) {
            return Ok(());
        }
        let text = std::fs::read_to_string(&*path)
            .with_context(|| format!("cannot read '{}'", path.display()))?;
        self.keys =
            parse_authorized_keys(&text).with_context(|| format!("in '{}'", path.display()))?;
        *seen = Some(mtime);
        Ok(())
    }

    /// May the client with static key `key`, which sent `auth`, use the server? A refusal is
    /// the message the client sees.
    pub fn decide(
        &mut self,
        key: &[u8; 32],
        auth: &[u8; TOKEN_SECRET_LEN],
    ) -> Result<Grant, String> {
        let fp = PublicKey(*key).fingerprint();
        if let Some(t) = &self.token {
            // Constant time: a wrong token reveals nothing about the right one.
            let diff = t.iter().zip(auth).fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if diff == 0 {
                return Ok(Grant {
                    dir: None,
                    may_send: true,
                    may_get: true,
                    who: format!("{fp} (token)"),
                });
            }
        }
        if let Err(e) = self.reload() {
            // Keep the last good list: an editor's half-written file must not lock everyone
            // out, nor let anyone in.
            tracing_note(&format!("authorized_keys not reloaded: {e:#}"));
        }
        match self.keys.iter().find(|a| a.key.0 == *key) {
            Some(a) => Ok(Grant {
                dir: a.dir.clone(),
                may_send: a.may_send,
                may_get: a.may_get,
                who: if a.comment.is_empty() {
                    fp
                } else {
                    format!("{fp} {}", a.comment)
                },
            }),
            None => Err(format!(
                "key {fp} is not authorized on this server (add the client's .pub line to the \
                 server's authorized_keys)"
            )),
        }
    }
}

/// Keys for a server and a client in one process (the demo, benchmarks, tests): a fresh server
/// identity, an [`Access`] that lets in only a fresh client key, and that client's
/// [`Security`](crate::send::Security).
pub fn in_process(
    cipher: spate_proto::secure::Cipher,
) -> Result<(crate::keys::Identity, Access, crate::send::Security)> {
    let server = crate::keys::Identity::generate()?;
    let client = crate::keys::Identity::generate()?;
    let access = Access::keys(vec![Authorized {
        key: client.public,
        dir: None,
        may_send: true,
        may_get: true,
        comment: "in-process client".into(),
    }]);
    let security = crate::send::Security {
        identity: client.private,
        server_key: server.public.0,
        cipher,
        auth: [0; TOKEN_SECRET_LEN],
    };
    Ok((server, access, security))
}

fn tracing_note(msg: &str) {
    eprintln!("spate serve: {msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> PublicKey {
        PublicKey([b; 32])
    }

    #[test]
    fn keys_tokens_and_restrictions() {
        let text = format!(
            "{}\ndir=alice,send-only {} alice@laptop\n",
            key(1).line(),
            key(2).line()
        );
        let mut a = Access::keys(parse_authorized_keys(&text).unwrap());
        let g = a.decide(&[1; 32], &[0; 16]).unwrap();
        assert_eq!((g.dir, g.may_send, g.may_get), (None, true, true));
        let g = a.decide(&[2; 32], &[0; 16]).unwrap();
        assert_eq!(g.dir.as_deref(), Some("alice"));
        assert!(g.may_send && !g.may_get);
        assert!(g.who.ends_with("alice@laptop"));
        let refused = a.decide(&[3; 32], &[0; 16]).unwrap_err();
        assert!(refused.contains(&key(3).fingerprint()), "{refused}");
        let mut a = a.with_token([9; 16]);
        assert!(a.decide(&[3; 32], &[9; 16]).is_ok());
        assert!(a.decide(&[3; 32], &[8; 16]).is_err());
    }

    #[test]
    fn tokens_round_trip() {
        let t = encode_token(&[7; 32], &[9; 16]);
        assert!(t.starts_with(TOKEN_PREFIX));
        assert_eq!(decode_token(&t), Some(([7; 32], [9; 16])));
        assert_eq!(decode_token(&t[..t.len() - 2]), None);
        assert_eq!(decode_token("spate2-abc"), None);
    }

    #[test]
    fn the_file_is_read_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("authorized_keys");
        std::fs::write(&path, key(1).line()).unwrap();
        let mut a = Access::from_file(&path).unwrap();
        assert!(a.decide(&[2; 32], &[0; 16]).is_err());
        std::fs::write(&path, format!("{}\n{}\n", key(1).line(), key(2).line())).unwrap();
        // Make sure the modification time differs even on coarse clocks.
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(a.decide(&[2; 32], &[0; 16]).is_ok());
        // A broken edit keeps the last good list.
        std::fs::write(&path, "garbage line\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later + std::time::Duration::from_secs(5))
            .unwrap();
        assert!(a.decide(&[2; 32], &[0; 16]).is_ok());
        assert!(Access::from_file(&dir.path().join("missing")).is_err());
    }
}
