//! The ends of `spate-lab bench-io`, each run as its own process (`spate-lab bench-end ...`) so
//! that it can be placed in a network namespace and its CPU time measured alone.
//!
//! Each end prints one JSON line on stdout when it is done: `bytes` moved, `seconds` from its
//! first to its last byte, and `cpu_s`, the process's user + system CPU time from
//! `getrusage(RUSAGE_SELF)` (all threads).
//!
//! | end | what it does |
//! |---|---|
//! | `udp-blast` | sends 1472-byte datagrams as fast as the kernel takes them, 44 per GSO call (64 KiB) |
//! | `udp-sink` | counts what arrives (GRO, `recvmmsg`) until the blaster has been quiet for 1 s |
//! | `spate-recv` | `spate serve` for one session: `--discard` (memory) or into `--root` |
//! | `spate-send` | `spate send` of `--mem BYTES` from memory, or of `--file PATH` |

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use spate::access::Access;
use spate::confine::Root;
use spate::keys::{Authorized, Identity};
use spate::send::{send, send_with, Security, SendConfig};
use spate::serve::Server;
use spate::udp::{RecvBatch, Socket};
use spate_proto::secure::Cipher;
use spate_proto::{Entry, Manifest, Policy, RateConfig, Source};

/// Datagram size of the raw UDP test: the Ethernet MTU's UDP payload, as Spate sends.
const DATAGRAM: usize = 1472;

#[derive(Args)]
pub struct EndArgs {
    #[command(subcommand)]
    end: End,
}

#[derive(Subcommand)]
enum End {
    UdpBlast {
        #[arg(long)]
        to: SocketAddr,
        #[arg(long)]
        seconds: f64,
    },
    UdpSink {
        #[arg(long)]
        listen: SocketAddr,
    },
    SpateRecv {
        #[arg(long)]
        listen: SocketAddr,
        /// Write into this directory; without it, discard.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Directory with the `server` and `client` identities (`write_keys`).
        #[arg(long)]
        keys: PathBuf,
        /// Give up when no session has ended within this many seconds.
        #[arg(long, default_value_t = 300)]
        max_seconds: u64,
        /// Threads that open packets of large receive batches besides the loop (default: as
        /// `spate serve --openers auto`).
        #[arg(long)]
        openers: Option<usize>,
        /// Write files with O_DIRECT (`spate serve --direct-io`).
        #[arg(long)]
        direct_io: bool,
    },
    SpateSend {
        #[arg(long)]
        to: SocketAddr,
        /// Directory with the `server` and `client` identities (`write_keys`).
        #[arg(long)]
        keys: PathBuf,
        /// Packet cipher: aes-256-gcm, chacha20-poly1305 or none (authenticated only).
        #[arg(long, default_value = "aes-256-gcm")]
        cipher: String,
        #[arg(long)]
        mem: Option<u64>,
        #[arg(long)]
        file: Option<PathBuf>,
        /// Policy fixed at this rate (bits/s) instead of fair.
        #[arg(long)]
        fixed: Option<u64>,
        /// Adaptive policy (fair, high, low) when not --fixed.
        #[arg(long, default_value = "fair")]
        policy: String,
        /// Upper limit of the adaptive rate, bits/s (0: none).
        #[arg(long, default_value_t = 0)]
        max_rate: u64,
        /// Lower limit of the adaptive rate, bits/s.
        #[arg(long, default_value_t = 0)]
        min_rate: u64,
        /// Compete with buffer-filling TCP (fair and high).
        #[arg(long)]
        compete: bool,
        /// Coding (spec §6.9): auto, off, or a repair rate.
        #[arg(long, default_value = "auto", value_parser = spate_proto::coding::Fec::parse)]
        fec: spate_proto::coding::Fec,
        /// Threads that seal and send full batches besides the sending loop (default: as
        /// `spate send --sealers auto`).
        #[arg(long)]
        sealers: Option<usize>,
        /// Print `{"t": S, "delivered": BYTES, "mode": M, "rate_bps": R}` every 100 ms and at
        /// each change of mode (the emulator stops the sender at the end of a run, keeps its
        /// last count, and draws the mode and pacing rate over time).
        #[arg(long)]
        progress: bool,
    },
}

pub fn run(a: EndArgs) -> Result<()> {
    spate::clock::process_start();
    let (bytes, seconds, extra) = match a.end {
        End::UdpBlast { to, seconds } => udp_blast(to, seconds)?,
        End::UdpSink { listen } => udp_sink(listen)?,
        End::SpateRecv {
            listen,
            root,
            keys,
            max_seconds,
            openers,
            direct_io,
        } => spate_recv(listen, root, &keys, max_seconds, openers, direct_io)?,
        End::SpateSend {
            to,
            keys,
            cipher,
            mem,
            file,
            fixed,
            policy,
            max_rate,
            min_rate,
            compete,
            fec,
            sealers,
            progress,
        } => {
            let rate = match fixed {
                Some(bps) => RateConfig::fixed(bps),
                None => {
                    let Some(policy) = Policy::parse(&policy) else {
                        bail!("unknown policy '{policy}'; choose one of {}", Policy::NAMES)
                    };
                    RateConfig {
                        rate_bps: max_rate,
                        min_rate_bps: min_rate,
                        compete,
                        ..RateConfig::adaptive(policy)
                    }
                }
            };
            let sealers = sealers.unwrap_or_else(spate::seal_pool::auto_threads);
            spate_send(
                to,
                &keys,
                &cipher,
                mem,
                file,
                (rate, fec, sealers),
                progress,
            )?
        }
    };
    let mut out = json!({ "bytes": bytes, "seconds": seconds, "cpu_s": cpu_seconds() });
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        o.extend(e);
    }
    println!("{out}");
    Ok(())
}

/// User + system CPU seconds of this process so far.
pub fn cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

/// User + system CPU seconds from `getrusage(who)`: `RUSAGE_SELF` (the process) or
/// `RUSAGE_THREAD` (the calling thread); 0 if the call fails.
pub fn rusage_seconds(who: libc::c_int) -> f64 {
    spate::clock::cpu_seconds(who)
}

/// What an end moved: bytes, seconds, and more fields for its JSON line (a Spate sender:
/// retransmitted / data packets, when its first file byte left, bytes read from its file).
type Moved = (u64, f64, Value);

fn udp_blast(to: SocketAddr, seconds: f64) -> Result<Moved> {
    let bind: SocketAddr = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse()?;
    let s = Socket::bind(bind)?;
    let segments = s.max_batch(DATAGRAM);
    let buf = vec![0xA5u8; segments * DATAGRAM];
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut bytes = 0u64;
    while Instant::now() < end {
        if s.send(to, &buf, DATAGRAM)? {
            bytes += buf.len() as u64;
        } else {
            s.wait(Duration::from_millis(1), true)?;
        }
    }
    Ok((bytes, start.elapsed().as_secs_f64(), json!({})))
}

fn udp_sink(listen: SocketAddr) -> Result<Moved> {
    let s = Socket::bind(listen)?;
    let mut batch = RecvBatch::default();
    let mut bytes = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let started = Instant::now();
    loop {
        let mut got = 0;
        while s.recv(&mut batch)? > 0 {
            batch.for_each(|_, d| got += d.len() as u64);
        }
        if got > 0 {
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            bytes += got;
        }
        let quiet = last.elapsed() > Duration::from_secs(1);
        if (first.is_some() && quiet) || started.elapsed() > Duration::from_secs(120) {
            break;
        }
        s.wait(Duration::from_millis(10), false)?;
    }
    let secs = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    Ok((bytes, secs, json!({})))
}

/// Fresh `server` and `client` identities in `dir`, for the two ends of a run.
pub fn write_keys(dir: &Path) -> Result<()> {
    for name in ["server", "client"] {
        Identity::generate()?.save(&dir.join(name), name, true)?;
    }
    Ok(())
}

fn spate_recv(
    listen: SocketAddr,
    root: Option<PathBuf>,
    keys: &Path,
    max_seconds: u64,
    openers: Option<usize>,
    direct_io: bool,
) -> Result<Moved> {
    let dir = match &root {
        Some(r) => r.clone(),
        None => std::env::temp_dir(),
    };
    let client = Identity::load(&keys.join("client"))?;
    let access = Access::keys(vec![Authorized {
        key: client.public,
        dir: None,
        may_send: true,
        may_get: true,
        comment: "bench".into(),
    }]);
    let identity = Identity::load(&keys.join("server"))?;
    let mut server = Server::bind(listen, Root::new(&dir)?, identity, access)?.direct_io(direct_io);
    if let Some(n) = openers {
        server = server.openers(n)?;
    }
    if root.is_none() {
        server = server.discard();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut result = None;
    let s2 = Arc::clone(&stop);
    let deadline = Instant::now() + Duration::from_secs(max_seconds);
    let watchdog = Arc::clone(&stop);
    std::thread::spawn(move || {
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        watchdog.store(true, Ordering::Relaxed);
    });
    let loop_start = rusage_seconds(libc::RUSAGE_THREAD);
    server.run(&stop, |log| {
        result = Some((log.bytes, log.seconds, log.error.clone()));
        s2.store(true, Ordering::Relaxed);
    })?;
    // The loop's own thread (without writers and opening threads).
    let loop_cpu_s = rusage_seconds(libc::RUSAGE_THREAD) - loop_start;
    match result {
        Some((bytes, secs, None)) => Ok((bytes, secs, json!({ "loop_cpu_s": loop_cpu_s }))),
        Some((_, _, Some(e))) => bail!("the session failed: {e}"),
        None => bail!("no session within {max_seconds} s"),
    }
}

/// Memory as a source: a 1 MiB block of pseudo-random bytes, copied into every block handed
/// to the session (the cost of reading from the page cache, without a file).
struct Memory {
    block: Vec<u8>,
    spare: Vec<Vec<u8>>,
}

impl Source for Memory {
    fn next(&mut self, _: u32, offset: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
        let n = self.block.len();
        let mut out = self.spare.pop().unwrap_or_default();
        out.resize(max.min(n as u64) as usize, 0);
        let at = (offset % n as u64) as usize;
        let k = out.len().min(n - at);
        out[..k].copy_from_slice(&self.block[at..at + k]);
        let rest = out.len() - k;
        out[k..].copy_from_slice(&self.block[..rest]);
        Ok(Some(out))
    }

    fn recycle(&mut self, block: Vec<u8>) {
        self.spare.push(block);
    }
}

fn spate_send(
    to: SocketAddr,
    keys: &Path,
    cipher: &str,
    mem: Option<u64>,
    file: Option<PathBuf>,
    (rate, fec, sealers): (RateConfig, spate_proto::coding::Fec, usize),
    progress: bool,
) -> Result<Moved> {
    let (start, mut last, mut last_mode) = (Instant::now(), Instant::now(), None);
    // Every 100 ms (the lab's series bin), and whenever the rate controller changes mode: the
    // emulator draws the pacing rate and the mode over time from these lines (`t` is seconds
    // since this program started).
    let mut report = |s: &spate_proto::Sender| {
        let mode = s.rate_mode();
        if progress && (last.elapsed() >= Duration::from_millis(100) || last_mode != Some(mode)) {
            last = Instant::now();
            last_mode = Some(mode);
            let mut line = json!({ "t": start.elapsed().as_secs_f64(),
                "delivered": s.stats().delivered_bytes, "mode": mode.name(),
                "rate_bps": s.pacing_rate() });
            // Why the rate is what it is: the controller's last report (kept in the lab's
            // work directory with SPATE_LAB_KEEP).
            if let Some(c) = s.rate_trace() {
                line["cc"] = json!({ "q_ms": c.q * 1e3, "target_ms": c.target * 1e3,
                    "delivery_bps": c.delivery, "unused_bps": c.unused, "limited": c.limited,
                    "behind": c.behind, "spare": c.spare, "probing": c.probing,
                    "loss": c.loss, "in_flight": s.in_flight_bytes() });
            }
            println!("{line}");
        }
    };
    let cipher = match cipher {
        "aes-256-gcm" => Cipher::Aes256Gcm,
        "chacha20-poly1305" => Cipher::ChaCha20Poly1305,
        "none" => Cipher::AuthOnly,
        other => bail!("unknown cipher '{other}'"),
    };
    let security = Security {
        identity: Identity::load(&keys.join("client"))?.private,
        server_key: Identity::load(&keys.join("server"))?.public.0,
        cipher,
        auth: [0; 16],
    };
    let cfg = SendConfig {
        server: to,
        rate,
        connect_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(20),
        resume: false,
        fec,
        security,
        sealers,
    };
    let r = match (mem, file) {
        (Some(bytes), None) => {
            let manifest = Manifest {
                destination: String::new(),
                entries: vec![Entry::file("bench.bin", bytes)],
            };
            let block = spate::noise::bytes(2, 1 << 20);
            let mut source = Memory {
                block,
                spare: Vec::new(),
            };
            send_with(&manifest, &mut source, &cfg, &mut report)?
        }
        (None, Some(path)) => {
            let dest = spate::scan::normalize_dest(".")?;
            let mut plan = spate::scan::plan(&[path], &dest, false)?;
            plan.stream_digests();
            send(&plan, &cfg, &mut report)?
        }
        _ => bail!("give exactly one of --mem and --file"),
    };
    let retx = r.stats.retransmitted_packets as f64 / r.stats.data_packets_sent.max(1) as f64;
    let extra = json!({
        "retransmission_overhead": retx,
        "first_data_s": r.first_data_s,
        "file_bytes_read": r.file_bytes_read,
        "loop_cpu_s": r.loop_cpu_s,
        "disk_wait_s": r.stats.write_limit_us as f64 / 1e6,
    });
    Ok((r.stats.delivered_bytes, r.seconds, extra))
}
