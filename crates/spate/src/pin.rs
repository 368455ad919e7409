//! What a client knows of servers: `known_hosts`, first contact, and the loud failure when a
//! server's key changes (`docs/security.md`, "Server keys").
//!
//! The handshake (spec §9.2) needs the server's static key before the first packet. It comes
//! from, in order: a `--token` (which carries it), the `known_hosts` line for `HOST:PORT`, or —
//! on first contact — the server's IDENTITY answer (spec §9.6), which is unauthenticated: the
//! client shows its fingerprint and records it (trust on first use, as ssh's
//! `StrictHostKeyChecking=accept-new`), or refuses with `--strict-host-keys`. From then on a
//! server presenting another key is refused, with the line to remove if the change is expected.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use spate_proto::secure::{identify_packet, types, Cipher, KEY_LEN};
use spate_proto::wire::{HEADER_LEN, MIN_DATAGRAM, VERSION};

use crate::keys::{known_host_line, lookup_known_host, PublicKey};

/// The packet cipher to ask for: AES-256-GCM where the CPU has AES and carry-less multiply
/// instructions (then it is the faster: 25–34 against 13 Gbit/s per core here), else
/// ChaCha20-Poly1305 (constant time and fast in software).
pub fn default_cipher() -> Cipher {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
        {
            return Cipher::Aes256Gcm;
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
        {
            return Cipher::Aes256Gcm;
        }
    }
    Cipher::ChaCha20Poly1305
}

/// The `known_hosts` file.
pub fn known_hosts_path() -> Result<PathBuf> {
    Ok(crate::keys::config_dir()?.join("known_hosts"))
}

/// The name a server is pinned under: `HOST:PORT` as the user wrote the host.
pub fn host_label(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A server key changed: the message to show, naming the line to remove.
#[derive(Debug)]
pub struct KeyChanged {
    /// `HOST:PORT`.
    pub host: String,
    /// The key now offered (unauthenticated).
    pub offered: PublicKey,
    /// The pinned key.
    pub pinned: PublicKey,
    /// The file and 1-based line that pins it.
    pub file: PathBuf,
    /// The line.
    pub line: usize,
}

impl std::fmt::Display for KeyChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "THE KEY OF {host} HAS CHANGED.\n\
             \x20 pinned:  {p}\n\
             \x20 offered: {o}\n\
             Someone may be intercepting this connection, or the server's key was replaced.\n\
             Nothing was sent. If the change is expected, remove line {line} of {file}\n\
             (sed -i '{line}d' '{file}') and run the command again.",
            host = self.host,
            p = self.pinned.fingerprint(),
            o = self.offered.fingerprint(),
            line = self.line,
            file = self.file.display(),
        )
    }
}

impl std::error::Error for KeyChanged {}

/// What the client will use as the server's key.
pub struct Pinned {
    /// The key.
    pub key: PublicKey,
    /// The known_hosts line it came from, if any (for the message when it does not match).
    pub line: Option<usize>,
}

/// The server's key for `host` from `known_hosts`, or by first contact (recorded, with a
/// message on stderr unless `quiet`; refused when `strict`).
pub fn server_key(
    file: &Path,
    host: &str,
    server: SocketAddr,
    timeout: Duration,
    strict: bool,
    quiet: bool,
) -> Result<Pinned> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read '{}'", file.display())),
    };
    if let Some((line, key)) = lookup_known_host(&text, host) {
        return Ok(Pinned {
            key,
            line: Some(line),
        });
    }
    let key = identify(server, timeout)?;
    if strict {
        return Err(crate::exit::tag(
            anyhow::anyhow!(
                "{host} is not in {} and --strict-host-keys is set. Its key (unauthenticated) is \
             {}; if that is right, add this line:\n{}",
                file.display(),
                key.fingerprint(),
                known_host_line(host, &key)
            ),
            crate::exit::Exit::UntrustedServer,
        ));
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .with_context(|| format!("cannot write '{}'", file.display()))?;
    f.write_all(format!("{}\n", known_host_line(host, &key)).as_bytes())
        .with_context(|| format!("cannot write '{}'", file.display()))?;
    if !quiet {
        eprintln!(
            "spate: first contact with {host}: its key is {} — recorded in {} (compare it with \
             `spate serve --print-key` on the server)",
            key.fingerprint(),
            file.display()
        );
    }
    Ok(Pinned { key, line: None })
}

/// Ask the server at `server` for its static key (IDENTIFY, spec §9.6), repeating every 200 ms
/// until `timeout`.
pub fn identify(server: SocketAddr, timeout: Duration) -> Result<PublicKey> {
    let bind: SocketAddr = if server.is_ipv6() {
        "[::]:0".parse()?
    } else {
        "0.0.0.0:0".parse()?
    };
    let sock = std::net::UdpSocket::bind(bind).context("cannot open a UDP socket")?;
    let session = crate::random::u64() as u32;
    let mut out = vec![0u8; MIN_DATAGRAM];
    let n = identify_packet(session, &mut out);
    let end = Instant::now() + timeout;
    let mut buf = [0u8; 2048];
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        sock.send_to(&out[..n], server)
            .with_context(|| format!("cannot send to {server}"))?;
        sock.set_read_timeout(Some(
            left.min(Duration::from_millis(200))
                .max(Duration::from_millis(1)),
        ))?;
        let until = Instant::now() + Duration::from_millis(200);
        while Instant::now() < until {
            let Ok((len, from)) = sock.recv_from(&mut buf) else {
                break;
            };
            let d = &buf[..len];
            let ok = from.ip() == server.ip()
                && len == HEADER_LEN + KEY_LEN
                && d[0] == VERSION
                && d[1] & 0x0f == types::IDENTITY
                && d[2..6] == session.to_be_bytes();
            if ok {
                let mut k = [0; KEY_LEN];
                k.copy_from_slice(&d[HEADER_LEN..]);
                return Ok(PublicKey(k));
            }
        }
    }
    Err(crate::exit::tag(
        anyhow::anyhow!(
            "no answer from {server} within {:.0} s: is `spate serve` running there, and is UDP \
             port {} open? (start it with `spate serve --root DIR`)",
            timeout.as_secs_f64(),
            server.port()
        ),
        crate::exit::Exit::Unreachable,
    ))
}
