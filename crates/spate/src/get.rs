//! Downloads: `spate get [user@]host:PATH... LOCALDIR` over ssh, and
//! `spate get HOST:PORT:PATH... LOCALDIR` from a `spate serve` daemon ([`get_daemon`]).
//!
//! ## Over ssh
//!
//! The protocol's client is the sender (it opens the session with the handshake's first
//! message), so for a download the remote sends and this side receives. The remote is started
//! over ssh as `spate push-once`, and the roles meet through NAT like this:
//!
//! 1. This side makes a fresh key pair and a token secret and starts, over ssh,
//!    `spate push-once --peer-key KEY --token SECRET PATH...`. The remote expands the paths
//!    (globs included: `host:'logs/*.gz'`), hashes them, binds a UDP port and announces
//!    `SPATE-ONCE 1 ADDRESS PORT KNOCK` on stdout.
//! 2. This side binds a UDP socket and sends a *knock* (`SPATE-KNOCK1` and the knock secret)
//!    to that port. The knock opens this side's NAT and firewall for answers from there, and
//!    tells the remote where to send.
//! 3. The remote sends to the knock's source from the port it announced, as a client whose
//!    pinned server key is the one passed over ssh, presenting the token; this side receives
//!    on the socket it knocked from, as a one-session server ([`Server::on_socket`]).
//!
//! Everything that authenticates the UDP session — both keys and the token — travelled over
//! ssh, so ssh's host-key check vouches for the remote. A forged knock (its secret came over
//! ssh too) cannot redirect the data; a knock from elsewhere would only receive packets it
//! cannot open.

use std::io::Write;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::access::Access;
use crate::confine::Root;
use crate::exit::{tag, Exit};
use crate::keys::Identity;
use crate::keys::{Authorized, PublicKey};
use crate::send::{Security, SendConfig};
use crate::serve::{Server, SessionLog};
use crate::ssh::{SshOptions, ANNOUNCE};
use crate::udp::{RecvBatch, Socket};

/// The first bytes of a knock.
const KNOCK: &[u8] = b"SPATE-KNOCK1";
/// How long the remote waits for the knock, and this side for the session.
const WAIT: Duration = Duration::from_secs(30);

/// What a download asks of the remote.
pub struct GetOptions {
    /// Paths (or globs) on the remote, relative to the login directory or absolute.
    pub paths: Vec<String>,
    /// Fetch directories and everything below them.
    pub recursive: bool,
    /// Only what this side does not hold yet (journals of an interrupted download).
    pub resume: bool,
    /// The remote's rate options, passed through (`--policy`, `--rate`, …).
    pub rate_args: Vec<String>,
    /// From a daemon, whose sender keeps its own policy: hold its new data to at most this
    /// many bytes per second ([`Server::receive_rate`]).
    pub receive_rate: Option<u64>,
    /// Write files with `O_DIRECT` ([`Server::direct_io`]).
    pub direct_io: bool,
}

/// Download `o.paths` from `host` into `local` (an existing directory); `progress` sees the
/// bytes held and to hold about every 100 ms.
pub fn get(
    host: &str,
    local: &Path,
    o: &GetOptions,
    ssh: &SshOptions,
    progress: impl FnMut(&crate::serve::Received),
) -> Result<SessionLog> {
    let root = Root::new(local).map_err(|e| tag(e, Exit::Input))?;
    let identity = Identity::generate()?;
    let secret = crate::random::bytes16();
    // `=`: base64url values may begin with '-'.
    let mut args = vec![
        "push-once".to_owned(),
        format!("--peer-key={}", URL_SAFE_NO_PAD.encode(identity.public.0)),
        format!("--token={}", URL_SAFE_NO_PAD.encode(secret)),
    ];
    if o.recursive {
        args.push("-r".into());
    }
    if o.resume {
        args.push("--resume".into());
    }
    if let Some((lo, hi)) = ssh.port_range {
        args.push("--port-range".into());
        args.push(format!("{lo}-{hi}"));
    }
    args.extend(o.rate_args.iter().cloned());
    args.push("--".into());
    args.extend(o.paths.iter().cloned());
    let remote = crate::ssh::start_command(host, &args, ssh)?;
    let knock_secret = URL_SAFE_NO_PAD
        .decode(&remote.token)
        .ok()
        .filter(|k| k.len() == 16)
        .context("the remote announced a bad knock")?;
    let socket = socket_for(remote.addr)?;
    let mut knock = KNOCK.to_vec();
    knock.extend_from_slice(&knock_secret);
    // A few knocks, in case one is lost; the remote acts on the first.
    for _ in 0..3 {
        socket.send(remote.addr, &knock, knock.len())?;
        std::thread::sleep(Duration::from_millis(30));
    }
    let access = Access::default().with_token(secret);
    let server = Server::on_socket(socket, root, identity, access)?
        .once(WAIT)
        .direct_io(o.direct_io);
    let remote_addr = remote.addr;
    let log = receive_one(server, progress, || {
        format!(
            "no data from {host} within {} s: is UDP from port {} blocked by a firewall? (open \
             a range and pass it with --port-range LO-HI)",
            WAIT.as_secs(),
            remote_addr.port()
        )
    });
    drop(remote);
    log
}

/// Download `o.paths` from the daemon at `server` into `local` (spec §2.1, §5.6).
///
/// 1. A request session, as a client like any upload: `security` proves this client's key
///    and pins the daemon's, and the object 0 is a request (the paths, `-r`, `--resume`). The
///    daemon refuses it with a reason (key not allowed to fetch, no match, a directory
///    without `-r`), or reports COMPLETE once it has resolved the paths beneath the
///    directory this key may read.
/// 2. The answering session, received on the same socket as a one-session server: the
///    daemon opens it from the port the request went to (so this side's NAT and firewall let
///    it in), proving the key this side pinned; no other key is let in.
pub fn get_daemon(
    server: SocketAddr,
    security: &Security,
    local: &Path,
    o: &GetOptions,
    timeouts: (Duration, Duration),
    progress: impl FnMut(&crate::serve::Received),
) -> Result<SessionLog> {
    let root = Root::new(local).map_err(|e| tag(e, Exit::Input))?;
    let request =
        crate::request::request(&o.paths, o.recursive).map_err(|e| tag(e, Exit::Input))?;
    let socket = socket_for(server)?;
    let (connect_timeout, idle_timeout) = timeouts;
    let cfg = SendConfig {
        server,
        rate: spate_proto::RateConfig::adaptive(spate_proto::Policy::Fair),
        connect_timeout,
        idle_timeout,
        resume: o.resume,
        fec: spate_proto::coding::Fec::Off,
        security: security.clone(),
        sealers: 0,
    };
    let id = crate::random::u64() as u32;
    crate::send::send_via(
        crate::send::Link::own(&socket),
        id,
        &request,
        &mut spate_proto::Zeros,
        &cfg,
        |_| {},
    )?;
    // 2. The answer: only the daemon's key may open it.
    let identity = Identity {
        private: security.identity,
        public: PublicKey(spate_proto::secure::public_key(&security.identity)),
    };
    let access = Access::keys(vec![Authorized {
        key: PublicKey(security.server_key),
        dir: None,
        may_send: true,
        may_get: false,
        comment: "the daemon".to_owned(),
    }]);
    let mut answer = Server::on_socket(socket, root, identity, access)?
        .hide_identity()
        .once(WAIT)
        .direct_io(o.direct_io);
    if let Some(r) = o.receive_rate {
        answer = answer.receive_rate(r);
    }
    receive_one(answer, progress, || {
        format!(
            "the daemon at {server} accepted the request but its answer did not arrive within \
             {} s: does a firewall here drop UDP from port {}?",
            WAIT.as_secs(),
            server.port()
        )
    })
}

/// A UDP socket on any local port of `peer`'s address family.
fn socket_for(peer: SocketAddr) -> Result<Socket> {
    let bind: SocketAddr = if peer.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    }
    .parse()?;
    Socket::bind(bind).context("cannot open a UDP socket")
}

/// Receive the one session `server` is waiting for: its log, or — `silent()` says why — an
/// error when none came or it failed.
fn receive_one(
    mut server: Server,
    progress: impl FnMut(&crate::serve::Received),
    silent: impl FnOnce() -> String,
) -> Result<SessionLog> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut log = None;
    server.run_with_progress(&stop, |s| log = Some(s.clone()), progress)?;
    let Some(log) = log else {
        return Err(tag(anyhow::anyhow!(silent()), Exit::Unreachable));
    };
    if let Some(e) = &log.error {
        bail!(tag(
            anyhow::anyhow!("the download failed: {}", crate::report::escape(e)),
            Exit::Interrupted
        ));
    }
    Ok(log)
}

/// The remote side: `spate push-once`. Expand `paths`, announce a port on stdout, wait for the
/// knock, and send to it.
pub fn push_once(
    paths: &[String],
    recursive: bool,
    resume: bool,
    peer_key: &str,
    token: &str,
    port_range: Option<(u16, u16)>,
    (rate, fec): (spate_proto::RateConfig, spate_proto::coding::Fec),
) -> Result<()> {
    let decode = |what: &str, v: &str, n: usize| -> Result<Vec<u8>> {
        URL_SAFE_NO_PAD
            .decode(v)
            .ok()
            .filter(|b| b.len() == n)
            .with_context(|| format!("bad {what}"))
    };
    let mut server_key = [0u8; 32];
    server_key.copy_from_slice(&decode("--peer-key", peer_key, 32)?);
    let mut auth = [0u8; 16];
    auth.copy_from_slice(&decode("--token", token, 16)?);
    let sources = expand(paths)?;
    let mut plan = crate::scan::plan(&sources, "", recursive)?;
    if resume {
        plan.compute_digests(|_| {})?;
    } else {
        plan.stream_digests();
    }
    let socket = Socket::bind_in_range([0, 0, 0, 0].into(), port_range)
        .context("no free UDP port in --port-range")?;
    let knock_secret = crate::random::bytes16();
    let ip = crate::ssh::connection_address();
    let port = socket.local_addr()?.port();
    let mut out = std::io::stdout();
    writeln!(
        out,
        "{ANNOUNCE} 1 {ip} {port} {}",
        URL_SAFE_NO_PAD.encode(knock_secret)
    )?;
    out.flush()?;
    let mut knock = KNOCK.to_vec();
    knock.extend_from_slice(&knock_secret);
    let peer = wait_for_knock(&socket, &knock)?;
    let cfg = SendConfig {
        server: peer,
        rate,
        connect_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        resume,
        fec,
        security: Security {
            identity: Identity::generate()?.private,
            server_key,
            cipher: crate::pin::default_cipher(),
            auth,
        },
        sealers: crate::seal_pool::auto_threads(),
    };
    crate::send::send_plan_on(socket, &plan, &cfg, |_| {})?;
    Ok(())
}

fn wait_for_knock(socket: &Socket, knock: &[u8]) -> Result<SocketAddr> {
    let end = Instant::now() + WAIT;
    let mut batch = RecvBatch::default();
    while Instant::now() < end {
        let mut found = None;
        // A bounded number of batches per look, so that a flood of other datagrams cannot keep
        // this loop from reaching its deadline.
        socket.recv_bounded(&mut batch, 16, |b| {
            b.for_each(|from, d| {
                if d == knock {
                    found.get_or_insert(from);
                }
            });
            match found {
                Some(_) => ControlFlow::Break(()),
                None => ControlFlow::Continue(()),
            }
        })?;
        if let Some(p) = found {
            return Ok(p);
        }
        socket.wait(Duration::from_millis(100), false)?;
    }
    bail!("no knock from the client within {} s", WAIT.as_secs())
}

/// The remote's paths: globs (`*`, `?`, `[`) in the last component are expanded in their
/// directory, sorted; a glob that matches nothing is an error, as in a shell with `failglob`.
fn expand(paths: &[String]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let (dir, name) = match p.rsplit_once('/') {
            Some((d, n)) => (if d.is_empty() { "/" } else { d }, n),
            None => (".", p.as_str()),
        };
        if !name.contains(['*', '?', '[']) {
            out.push(PathBuf::from(p));
            continue;
        }
        let m = globset::Glob::new(name)
            .with_context(|| format!("'{p}' is not a valid pattern"))?
            .compile_matcher();
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list '{dir}'"))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_str().is_some_and(|n| m.is_match(n)))
            .map(|e| e.path())
            .collect();
        if found.is_empty() {
            bail!("no match for '{p}'");
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_expand_in_their_directory() {
        let t = tempfile::tempdir().unwrap();
        for f in ["a.gz", "b.gz", "c.txt"] {
            std::fs::write(t.path().join(f), b"x").unwrap();
        }
        let d = t.path().display();
        let got = expand(&[format!("{d}/*.gz"), format!("{d}/c.txt")]).unwrap();
        let names: Vec<_> = got
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["a.gz", "b.gz", "c.txt"]);
        assert!(expand(&[format!("{d}/*.zip")]).is_err());
    }

    /// The knock is found among a flood of other datagrams (which never lets the socket
    /// empty): looking reads a bounded number of batches, then answers.
    #[test]
    fn a_knock_is_found_in_a_flood() {
        let socket = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let target = socket.local_addr().unwrap();
        let flood = crate::udp::Flood::start(target, Duration::from_secs(20)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(wait_for_knock(&socket, b"knock").map_err(|e| e.to_string()));
        });
        // Knock from its own socket every 10 ms once the flood runs (a full socket buffer
        // drops a knock as it drops junk).
        std::thread::sleep(Duration::from_millis(200));
        let knocker = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let start = Instant::now();
        let got = loop {
            let _ = knocker.send(target, b"knock", 5).unwrap();
            match rx.recv_timeout(Duration::from_millis(10)) {
                Err(_) if start.elapsed() < Duration::from_secs(15) => continue,
                r => break r,
            }
        };
        flood.stop().unwrap();
        let from = knocker.local_addr().unwrap();
        assert_eq!(got.expect("no answer within 15 s of flooding"), Ok(from));
    }
}
