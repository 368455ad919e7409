//! The sending event loop.
//!
//! Each iteration: receive and hand feedback to the session, run its timers, send what it
//! releases (paced by the core, which is told the batch size and waits, at most 500 µs, until a
//! whole batch is due: each `poll_transmit` fills a buffer with up to 44 datagrams sent with one
//! GSO system call; full batches cut the kernel's cost per byte by a third, from 4.1 to 2.8 % of a
//! core per Gbit/s on veth, against the partial ones pacing otherwise leaves), report progress every 100 ms, and sleep until the core's
//! next deadline or a datagram. A send the kernel refuses for lack of buffer space is kept
//! and retried when the socket is writable, never dropped.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Result;
use spate_proto::secure::{Cipher, ClientParams, SecureSender, AUTH_LEN};
use spate_proto::{
    Instant, Manifest, RateConfig, Sender, SenderConfig, SenderEvent, SessionError, Source,
};

use crate::clock::Clock;
use crate::scan::Plan;
use crate::seal_pool::SealPool;
use crate::source::FileSource;
use crate::udp::{RecvBatch, Socket};

/// Longest time between looks at the socket for feedback while the loop does not sleep.
const RECV_CHECK: Duration = Duration::from_micros(200);
/// How long the loop sleeps when the session waits for the reader thread's next block.
const STARVED_WAIT: Duration = Duration::from_millis(1);
/// Receive batches (of up to 16 datagrams each) read before the loop sends again. Feedback
/// comes a few datagrams per millisecond; anything that fills the socket faster (a flood to
/// the sender's port) would otherwise keep the loop reading and send nothing. The server
/// bounds its reading the same way (`serve/mod.rs`).
const MAX_RECV_BATCHES: usize = 16;
/// How often the progress callback runs.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Settings of one `send`.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Where the receiver listens.
    pub server: SocketAddr,
    /// Rate policy, cap and floor.
    pub rate: RateConfig,
    /// Give up if the receiver does not answer within this time.
    pub connect_timeout: Duration,
    /// Give up after this long without any answer during the transfer.
    pub idle_timeout: Duration,
    /// Ask the receiver what it already holds from an interrupted transfer and send only the
    /// rest (spec §8.3).
    pub resume: bool,
    /// Coding (spec §6.9): repair symbols for the tail (`auto`), a fixed rate, or none.
    pub fec: spate_proto::coding::Fec,
    /// Keys and cipher (spec §9).
    pub security: Security,
    /// Threads that seal and send full batches besides the sending loop's (0: the loop does
    /// it all; see `seal_pool.rs`, [`crate::seal_pool::auto_threads`]).
    pub sealers: usize,
}

/// How a session is protected (spec §9).
#[derive(Clone)]
pub struct Security {
    /// This client's static private key (its identity).
    pub identity: [u8; 32],
    /// The server's static public key, pinned or from a token.
    pub server_key: [u8; 32],
    /// The packet cipher to ask for.
    pub cipher: Cipher,
    /// The secret of a one-time token (`spate serve --token`); zeros without one.
    pub auth: [u8; AUTH_LEN],
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field(
                "server_key",
                &crate::keys::PublicKey(self.server_key).fingerprint(),
            )
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

/// The server answered with a static key other than the one the client used (spec §9.6).
#[derive(Debug)]
pub struct KeyMismatch(pub crate::keys::PublicKey);

impl std::fmt::Display for KeyMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server's key is {}, not the one this client expected",
            self.0.fingerprint()
        )
    }
}

impl std::error::Error for KeyMismatch {}

/// A finished (or failed) transfer, as the core counted it.
#[derive(Debug, Clone)]
pub struct SendResult {
    /// Seconds from the first HELLO to the end.
    pub seconds: f64,
    /// Entries of the manifest.
    pub entries: usize,
    /// CPU seconds of the sending loop's own thread (without the reader thread and the
    /// sealing threads): what `--sealers` takes off it.
    pub loop_cpu_s: f64,
    /// Final sender statistics.
    pub stats: spate_proto::SenderStats,
    /// Coding statistics (spec §6.9).
    pub coding: spate_proto::coding::CodingStats,
    /// Smoothed RTT at the end.
    pub srtt: Duration,
    /// Minimum RTT seen.
    pub min_rtt: Duration,
    /// Seconds from the start of the process ([`crate::clock::process_start`]) to the first
    /// file byte sent (None: none was).
    pub first_data_s: Option<f64>,
    /// Bytes read from the files (a file source only): each byte once.
    pub file_bytes_read: Option<u64>,
    /// The packet cipher of the session.
    pub cipher: Cipher,
    /// The server's key, proven by the handshake.
    pub server_key: crate::keys::PublicKey,
    /// Packets from the server's address that did not open (forged, altered, truncated).
    pub dropped_not_authentic: u64,
    /// Packets dropped as replays.
    pub dropped_replayed: u64,
}

/// Send `plan` as configured; `progress(sender)` is called every 100 ms.
pub fn send(plan: &Plan, cfg: &SendConfig, progress: impl FnMut(&Sender)) -> Result<SendResult> {
    send_plan_on(any_port(cfg.server)?, plan, cfg, progress)
}

/// [`send`] from `socket` (see [`send_on`]).
pub fn send_plan_on(
    socket: Socket,
    plan: &Plan,
    cfg: &SendConfig,
    progress: impl FnMut(&Sender),
) -> Result<SendResult> {
    let mut source = FileSource::new(&plan.sources, &plan.manifest.entries);
    let mut r = send_on(socket, &plan.manifest, &mut source, cfg, progress)?;
    r.file_bytes_read = Some(source.bytes_read());
    Ok(r)
}

/// Send the objects of `manifest`, read from `source` (files, or memory for benchmarks).
pub fn send_with(
    manifest: &Manifest,
    source: &mut impl Source,
    cfg: &SendConfig,
    progress: impl FnMut(&Sender),
) -> Result<SendResult> {
    send_on(any_port(cfg.server)?, manifest, source, cfg, progress)
}

/// A socket on any local port of the family of `server`.
fn any_port(server: SocketAddr) -> Result<Socket> {
    let bind: SocketAddr = if server.is_ipv6() {
        "[::]:0".parse()?
    } else {
        "0.0.0.0:0".parse()?
    };
    Ok(Socket::bind(bind)?)
}

/// [`send_with`] from `socket` (already bound: a port a firewall or NAT lets through, as for
/// a download over ssh, where the receiver first knocks at this port).
pub fn send_on(
    socket: Socket,
    manifest: &Manifest,
    source: &mut impl Source,
    cfg: &SendConfig,
    progress: impl FnMut(&Sender),
) -> Result<SendResult> {
    let session = crate::random::u64() as u32;
    send_via(Link::own(&socket), session, manifest, source, cfg, progress)
}

/// Where a sending loop's datagrams come from.
///
/// A sender on its own socket reads that socket. A server's answering session (spec §5.6)
/// sends from the server's socket — the port the client reached, which its NAT and firewall
/// let answers through — and the server's loop, which reads that socket, hands it the
/// datagrams of its session id.
pub struct Link<'a> {
    socket: &'a Socket,
    inbox: Option<&'a mpsc::Receiver<Vec<u8>>>,
    /// A datagram taken from the inbox while waiting.
    held: Option<Vec<u8>>,
    batch: RecvBatch,
}

impl<'a> Link<'a> {
    /// Send and receive on `socket`.
    pub fn own(socket: &'a Socket) -> Link<'a> {
        Link {
            socket,
            inbox: None,
            held: None,
            batch: RecvBatch::default(),
        }
    }

    /// Send on `socket`, which another thread reads; receive what it routes to `inbox`.
    pub fn shared(socket: &'a Socket, inbox: &'a mpsc::Receiver<Vec<u8>>) -> Link<'a> {
        Link {
            inbox: Some(inbox),
            ..Link::own(socket)
        }
    }

    /// Hand the datagrams waiting to `f`: from the socket at most [`MAX_RECV_BATCHES`], so
    /// that the loop still sends while its socket is flooded. True if more may be waiting.
    fn recv(&mut self, mut f: impl FnMut(&mut [u8])) -> std::io::Result<bool> {
        match self.inbox {
            None => self
                .socket
                .recv_bounded(&mut self.batch, MAX_RECV_BATCHES, |b| {
                    b.for_each(|_, d| f(d));
                    ControlFlow::Continue(())
                }),
            Some(inbox) => {
                for mut d in self.held.take().into_iter().chain(inbox.try_iter()) {
                    f(&mut d);
                }
                Ok(false)
            }
        }
    }

    /// Sleep until a datagram arrives or `timeout` passes (or, with `writable`, the socket
    /// takes more); true if datagrams may be waiting.
    fn wait(&mut self, timeout: Duration, writable: bool) -> std::io::Result<bool> {
        let Some(inbox) = self.inbox else {
            return self.socket.wait(timeout, writable);
        };
        if writable {
            // The socket is the server's: its readiness to write is all we could wait for,
            // and the server loop wakes on its readability. Look again soon.
            std::thread::sleep(timeout.min(STARVED_WAIT));
            return Ok(true);
        }
        match inbox.recv_timeout(timeout) {
            Ok(d) => {
                self.held = Some(d);
                Ok(true)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(false),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(std::io::Error::other("the server is stopping"))
            }
        }
    }
}

/// Send `manifest` as session `session` over `link`.
pub fn send_via(
    mut link: Link<'_>,
    session: u32,
    manifest: &Manifest,
    source: &mut impl Source,
    cfg: &SendConfig,
    mut progress: impl FnMut(&Sender),
) -> Result<SendResult> {
    let socket = link.socket;
    let clock = Clock::new();
    let mut scfg = SenderConfig::new(RateConfig {
        epoch_utc_ns: clock.epoch_utc_ns(),
        ..cfg.rate
    });
    // Verification (spec §6.8) checks each file against its digest, so it needs one for every
    // file: files from disk always have them (streamed after their bytes, or in the manifest:
    // `Plan::stream_digests`, `Plan::compute_digests`); the memory sources of benchmarks have
    // none, and a receiver would refuse VERIFY without them. A request (§5.6) has no files:
    // its COMPLETE says the answer is ready.
    scfg.verify = manifest
        .entries
        .iter()
        .all(|e| e.kind != spate_proto::EntryKind::File || e.digest.is_some());
    scfg.resume = cfg.resume;
    scfg.fec = cfg.fec;
    scfg.handshake_timeout = cfg.connect_timeout;
    scfg.idle_timeout = cfg.idle_timeout;
    let datagram = usize::from(scfg.max_datagram);
    // Up to 44 datagrams of 1472 bytes per call: the kernel's GSO limits (Socket::max_batch).
    let segments = socket.max_batch(datagram);
    scfg.batch = segments;
    let params = ClientParams {
        cipher: cfg.security.cipher,
        local_private: cfg.security.identity,
        server_public: cfg.security.server_key,
        auth: cfg.security.auth,
        seed: crate::random::bytes32(),
    };
    let loop_cpu_start = crate::clock::cpu_seconds(libc::RUSAGE_THREAD);
    let mut sender = SecureSender::new(scfg, session, manifest, clock.now(), params)
        .map_err(|e| anyhow::anyhow!("cannot send these files: {e}"))?;
    let mut buf = vec![0u8; segments * datagram];
    let mut pending: Option<(usize, usize)> = None;
    let mut last_progress = Instant::ZERO;
    let mut failure: Option<SessionError> = None;
    let mut first_data: Option<std::time::Instant> = None;
    crate::clock::process_start();

    std::thread::scope(|scope| -> Result<()> {
        let mut pool =
            (cfg.sealers > 0).then(|| SealPool::start(scope, socket, cfg.sealers, buf.len()));
        // Whether the socket may hold feedback: known after a sleep; otherwise it is looked at no
        // more than every RECV_CHECK (an empty recvmmsg per loop was 40 % of all system calls).
        let mut readable = true;
        let mut last_recv = Instant::ZERO;
        // The last read stopped at its bound with datagrams left: read again next turn.
        let mut more = false;
        // With sealing threads: whether the loop is CPU-bound.
        let mut busy = pool.as_ref().map(|_| Busy::default());
        loop {
            if readable || clock.now().saturating_since(last_recv) >= RECV_CHECK {
                last_recv = clock.now();
                // Any source: the core keeps only this session's packets (by session id), and
                // a server with several addresses may answer from another one.
                more = link.recv(|d| {
                    let _ = sender.handle_datagram(clock.now(), d);
                })?;
            }
            let now = clock.now();
            if sender.poll_timeout().is_some_and(|t| t <= now) {
                sender.handle_timeout(now);
            }
            // Send: first what the kernel refused last time, then what the core releases — full
            // batches through the sealing threads, if any (`seal_pool.rs`).
            loop {
                let (len, seg) = match pending.take() {
                    Some(p) => p,
                    // Sealed on this thread: as the packets are written, each payload
                    // encrypted from the send buffer into its packet (no copy in between).
                    None if pool.is_none() => {
                        let Some(t) = sender.poll_transmit(now, &mut buf, source) else {
                            break;
                        };
                        (t.len, t.segment_size)
                    }
                    None => {
                        let Some((t, sealer)) =
                            sender.poll_transmit_deferred(now, &mut buf, source)
                        else {
                            break;
                        };
                        if let Some(p) = pool.as_mut() {
                            // Full batches while CPU-bound, and anything behind a batch still
                            // out (sends stay in order).
                            let full = t.len > (segments - 1) * t.segment_size;
                            let busy = busy.as_ref().is_some_and(|b| b.now);
                            if (full && busy) || p.outstanding() > 0 {
                                let batch = std::mem::replace(&mut buf, p.buffer()?);
                                p.submit(batch, t.len, t.segment_size, sealer, cfg.server)?;
                                continue;
                            }
                        }
                        if let Some(s) = sealer {
                            s.seal_batch(&mut buf[..t.len], t.segment_size);
                        }
                        (t.len, t.segment_size)
                    }
                };
                if !socket.send(cfg.server, &buf[..len], seg)? {
                    pending = Some((len, seg));
                    break;
                }
            }
            if first_data.is_none() && sender.inner().stats().new_bytes_sent > 0 {
                first_data = Some(std::time::Instant::now());
            }
            while let Some(e) = sender.poll_event() {
                if let SenderEvent::Failed(err) = e {
                    failure = Some(err);
                }
            }
            if now.saturating_since(last_progress) >= PROGRESS_EVERY {
                progress(sender.inner());
                last_progress = now;
            }
            if sender.is_closed() && pending.is_none() {
                break;
            }
            let next = sender.poll_timeout().unwrap_or(now + PROGRESS_EVERY);
            let mut wait = clock.until(next).min(PROGRESS_EVERY);
            if sender.inner().starved() {
                // The reader has not caught up: look again soon (the disk is the bottleneck; a
                // millisecond costs it nothing, and feedback still wakes us at once).
                wait = wait.min(STARVED_WAIT);
            }
            let worked = busy.as_ref().map(|_| clock.now());
            if !wait.is_zero() || pending.is_some() {
                readable = link.wait(wait, pending.is_some())?;
            } else {
                readable = false;
            }
            readable |= more;
            if let (Some(b), Some(w)) = (busy.as_mut(), worked) {
                b.note(w, clock.now());
            }
        }
        // The last batches (the CLOSE among them) leave before the workers stop.
        if let Some(p) = pool.as_mut() {
            p.drain()?;
        }
        Ok(())
    })?;
    progress(sender.inner());
    if let Some(err) = failure {
        use crate::exit::{tag, Exit};
        let exit = match &err {
            SessionError::ServerKeyMismatch { offered } => {
                let e = KeyMismatch(crate::keys::PublicKey(*offered));
                return Err(tag(e.into(), Exit::UntrustedServer));
            }
            SessionError::HandshakeTimeout(_) => Exit::Unreachable,
            SessionError::PeerClosed {
                code: spate_proto::wire::CloseCode::Refused,
                ..
            } => Exit::Refused,
            SessionError::Source { .. } => Exit::Input,
            _ => Exit::Interrupted,
        };
        return Err(tag(anyhow::anyhow!(explain(&err, cfg.server)), exit));
    }
    let inner = sender.inner();
    Ok(SendResult {
        seconds: clock.now().as_secs_f64(),
        entries: manifest.entries.len(),
        loop_cpu_s: crate::clock::cpu_seconds(libc::RUSAGE_THREAD) - loop_cpu_start,
        stats: *inner.stats(),
        coding: *inner.coding_stats(),
        srtt: inner.rtt().smoothed(),
        min_rtt: inner.rtt().min(),
        first_data_s: first_data.map(|t| {
            t.saturating_duration_since(crate::clock::process_start())
                .as_secs_f64()
        }),
        file_bytes_read: None,
        cipher: sender.cipher(),
        server_key: crate::keys::PublicKey(cfg.security.server_key),
        dropped_not_authentic: sender.secure_stats().not_authentic,
        dropped_replayed: sender.secure_stats().replayed,
    })
}

/// Whether the sending loop is CPU-bound (`seal_pool.rs` is handed batches only then): it
/// slept less than a tenth of the last 20 ms.
#[derive(Default)]
struct Busy {
    now: bool,
    /// Start of the period, and time slept in it.
    since: Option<Instant>,
    slept: Duration,
}

impl Busy {
    const PERIOD: Duration = Duration::from_millis(20);

    /// One turn of the loop: its work ended at `worked` (before it slept, if it did) and the
    /// next turn begins at `now`.
    fn note(&mut self, worked: Instant, now: Instant) {
        self.slept += now.saturating_since(worked);
        let since = *self.since.get_or_insert(now);
        if now.saturating_since(since) >= Self::PERIOD {
            self.now = self.slept < Self::PERIOD / 10;
            self.since = Some(now);
            self.slept = Duration::ZERO;
        }
    }
}

/// What a failure means for the user, and what to do.
fn explain(err: &SessionError, server: SocketAddr) -> String {
    match err {
        SessionError::HandshakeTimeout(d) => format!(
            "no answer from {server} within {:.0} s: is `spate serve` running there, and is UDP \
             port {} open? (start it with `spate serve --root DIR`)",
            d.as_secs_f64(),
            server.port()
        ),
        SessionError::IdleTimeout(d) => format!(
            "the receiver at {server} stopped answering for {:.0} s; run the same command with \
             --resume to send only what it does not have yet",
            d.as_secs_f64()
        ),
        SessionError::ReceiverStalled(d) => format!(
            "the receiver at {server} took no data for {:.0} s: its disk accepted nothing (full, \
             or stuck?); once it writes again, run the same command with --resume",
            d.as_secs_f64()
        ),
        SessionError::PeerClosed { reason, .. } => {
            // The reference server's reasons already begin "refused: ".
            let reason = reason.strip_prefix("refused: ").unwrap_or(reason);
            format!("the server refused: {}", crate::report::escape(reason))
        }
        other => other.to_string(),
    }
}
