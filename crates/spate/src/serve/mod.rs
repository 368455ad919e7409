//! The receiving event loop: one socket, any number of sessions, told apart by session id.
//!
//! Each iteration receives a batch of datagrams and hands each to its session (a HELLO with an
//! unknown session id may open one, see `admit.rs`), runs the sessions' timers, relays writer
//! outcomes (verified files; failures, which close the session with the reason), and sends
//! what the sessions want to send. It then sleeps until a datagram arrives or the earliest
//! session timer, at most 50 ms.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the server and its loop |
//! | `admit.rs` | half-open sessions, session slots, ended session IDs |
//! | `session.rs` | one session: events, writer outcomes, sending |
//! | `limits.rs` | `--max-*` and `--quota` |
//!
//! Nothing on the network thread waits for a disk: writing, creating directories and looking
//! for held data run on a shared pool of writer threads (`sink/pool.rs`); DATA for a session
//! whose writer is behind is dropped unacknowledged (the sender sends it again), so one slow
//! or hostile session never stalls the others.
//!
//! A session that resumes (`spate send --resume`) takes over files that an older, still open
//! session *from the same address* is writing (typically one whose sender was killed and has
//! not timed out yet): the older session is closed and its partial files are kept. A resume
//! from elsewhere cannot end someone else's transfer: it finds the files locked and fails.

mod admit;
mod limits;
mod session;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use spate_proto::secure::{
    hello_retry_token, identity_packet, open_hello, retry_packet, types, HelloRefusal, RetryKey,
    SecureReceiver,
};
use spate_proto::wire::{Close, CloseCode, PacketType, HEADER_LEN, MIN_DATAGRAM, VERSION};
use spate_proto::{Instant, ReceiverConfig};

pub use admit::{HALF_OPEN_FOR, HALF_OPEN_PER_SOURCE, MAX_HALF_OPEN};
pub use limits::Limits;

use crate::access::Access;
use crate::clock::Clock;
use crate::confine::Root;
use crate::keys::{Identity, PublicKey};
use crate::sink::WriterPool;
use crate::udp::{RecvBatch, Socket};
use admit::{Admission, Verdict};
use session::{Ctx, Session};

/// Receive batches (of up to 16 × 64 KiB) handled before the sessions get to send.
const MAX_BATCHES: usize = 16;
/// Longest sleep of the loop.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Half-open sessions from which on the server is "under load" (spec §9.5): a HELLO must then
/// carry a RETRY token before the server spends a handshake (≈150 µs of X25519) on it. 64 is
/// far above what legitimate clients leave half-open (each for one round trip), and far below
/// the 1024 the table holds.
pub const UNDER_LOAD: usize = 64;
/// Handshakes per second from which on the server is under load, whatever the half-open
/// count: HELLOs of random bytes create no session but each costs a Diffie-Hellman before it
/// fails to open. 256 a second is ≈4 % of a core here; above it, RETRY costs one HMAC.
pub const UNDER_LOAD_HANDSHAKES: u32 = 256;

/// How a session ended, for the log.
#[derive(Debug, Clone)]
pub struct SessionLog {
    /// Session id.
    pub session: u32,
    /// Sender address.
    pub peer: SocketAddr,
    /// The client: its key's fingerprint and authorized_keys comment.
    pub client: String,
    /// The packet cipher.
    pub cipher: &'static str,
    /// Packets of the session that did not open (forged, altered) and were dropped.
    pub dropped_not_authentic: u64,
    /// Files and directories placed.
    pub objects: usize,
    /// Bytes received.
    pub bytes: u64,
    /// Bytes already here from an earlier, interrupted transfer (not sent again).
    pub resumed: u64,
    /// Blocks of partial files that no longer matched their journal (sent again).
    pub damaged_blocks: u64,
    /// Seconds from HELLO to the end.
    pub seconds: f64,
    /// `None` on success, else why it failed.
    pub error: Option<String>,
}

/// The receiver daemon: binds `listen` and serves into `root` until `stop` is set.
pub struct Server {
    socket: Socket,
    clock: Clock,
    /// By session id. A B-tree, not a hash map: SipHash of the id of every datagram was 4 %
    /// of the receiver's CPU.
    sessions: BTreeMap<u32, Session>,
    admission: Admission,
    /// Root, writer pool, limits: what the sessions share.
    ctx: Ctx,
    /// The server's static key pair (spec §9.2).
    identity: Identity,
    /// Who may do what.
    access: Access,
    /// Key of the stateless RETRY tokens (spec §9.5), fresh per process.
    retry: RetryKey,
    /// Ask every HELLO for a RETRY token, not only under load (for tests).
    retry_always: bool,
    /// Handshakes attempted in the current second: (the second, count).
    handshakes: (u64, u32),
}

/// A socket address as bytes, for RETRY tokens.
fn addr_bytes(a: SocketAddr) -> Vec<u8> {
    let mut v = match a.ip() {
        std::net::IpAddr::V4(ip) => ip.octets().to_vec(),
        std::net::IpAddr::V6(ip) => ip.octets().to_vec(),
    };
    v.extend_from_slice(&a.port().to_be_bytes());
    v
}

impl Server {
    /// Bind the socket and start the writer threads. The server proves `identity` to clients
    /// and lets in whom `access` allows.
    pub fn bind(
        listen: SocketAddr,
        root: Root,
        identity: Identity,
        access: Access,
    ) -> Result<Server> {
        let socket = Socket::bind(listen).with_context(|| {
            format!("cannot listen on {listen} (is another spate serve running there? choose another port with --listen)")
        })?;
        let pool = WriterPool::new(WriterPool::default_size())
            .context("cannot start the writer threads")?;
        Ok(Server {
            socket,
            clock: Clock::new(),
            sessions: BTreeMap::new(),
            admission: Admission::default(),
            ctx: Ctx {
                root,
                pool,
                limits: Limits::default(),
                discard: false,
                claimed: 0,
            },
            identity,
            access,
            retry: RetryKey::new(crate::random::bytes32()),
            retry_always: false,
            handshakes: (0, 0),
        })
    }

    /// Ask every new client to prove its address with a RETRY token first (spec §9.5), as
    /// the server does anyway under load: for tests of that path.
    pub fn retry_always(mut self) -> Self {
        self.retry_always = true;
        self
    }

    /// The server's static public key (what clients pin).
    pub fn public_key(&self) -> PublicKey {
        self.identity.public
    }

    /// Receive without writing anything: every object counts as placed once all its bytes
    /// arrived (nothing is verified). For measuring the network and the protocol alone
    /// (`spate serve --discard`, `spate-lab bench-io`).
    pub fn discard(mut self) -> Self {
        self.ctx.discard = true;
        self
    }

    /// Refuse sessions beyond `limits`.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.ctx.limits = limits;
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().expect("bound socket")
    }

    /// Advice for the operator when the socket's receive buffer is small (see
    /// [`Socket::small_buffer_note`]).
    pub fn buffer_note(&self) -> Option<String> {
        self.socket.small_buffer_note()
    }

    /// Serve until `stop`; `log` is called when a session ends.
    pub fn run(&mut self, stop: &Arc<AtomicBool>, mut log: impl FnMut(&SessionLog)) -> Result<()> {
        let mut batch = RecvBatch::default();
        let mut out = vec![0u8; 2048 + 64];
        while !stop.load(Ordering::Relaxed) {
            // Each batch is stamped with the time it was taken from the socket: a time read
            // once before draining a long backlog made later packets look as if they arrived
            // before they were sent, and the sender's delay floor and delivery rate absurd.
            // The drain is bounded so that feedback still goes out under a flood.
            for _ in 0..MAX_BATCHES {
                if self.socket.recv(&mut batch)? == 0 {
                    break;
                }
                let now = self.clock.now();
                batch.for_each(|from, d| self.on_datagram(now, from, d));
            }
            self.start_resumed_writers();
            let now = self.clock.now();
            let mut next = now + MAX_WAIT;
            let mut ended = Vec::new();
            for (&id, s) in &mut self.sessions {
                s.step(now, &self.socket, &mut out, &mut self.ctx)?;
                let expired = !s.validated && now.saturating_since(s.started) > HALF_OPEN_FOR;
                if s.rx.inner().is_closed() || expired {
                    ended.push((id, expired));
                } else if let Some(t) = s.rx.inner().poll_timeout() {
                    next = next.min(t);
                }
            }
            for (id, expired) in ended {
                if expired {
                    self.drop_session(id);
                } else if let Some(s) = self.end_session(now, id) {
                    log(&s.log(now));
                }
            }
            self.socket.wait(self.clock.until(next), false)?;
        }
        Ok(())
    }

    /// Remove a session that ended and remember its ID (spec §4.1).
    fn end_session(&mut self, now: Instant, id: u32) -> Option<Session> {
        let s = self.drop_session(id)?;
        self.admission.remember_ended(now, id);
        Some(s)
    }

    /// Remove a session (its writer finishes what is queued on its own).
    fn drop_session(&mut self, id: u32) -> Option<Session> {
        let s = self.sessions.remove(&id)?;
        if s.validated {
            self.admission.validated -= 1;
        } else {
            self.admission.left_half_open(s.peer.ip(), false);
        }
        self.ctx.claimed = self.ctx.claimed.saturating_sub(s.claimed);
        Some(s)
    }

    fn on_datagram(&mut self, now: Instant, from: SocketAddr, d: &mut [u8]) {
        if d.len() < HEADER_LEN || d[0] != VERSION {
            return;
        }
        let ty = d[1] & 0x0f;
        let id = u32::from_be_bytes([d[2], d[3], d[4], d[5]]);
        if let Some(s) = self.sessions.get_mut(&id) {
            // A writer that is behind takes no more data now: dropped unacknowledged, the
            // DATA is sent again, and the network thread never waits for a disk.
            if ty == PacketType::Data as u8 && s.sink.as_ref().is_some_and(|k| !k.has_room(d.len()))
            {
                return;
            }
            // The peer's address changes only with a datagram the session accepts — an
            // authentic one — and the new address starts unvalidated (spec §4.8, §9.4).
            let res = if from == s.peer {
                s.rx.handle_datagram(now, d)
            } else {
                s.rx.handle_datagram_from_new_address(now, d)
            };
            if res.is_ok() {
                s.peer = from;
            }
            if let Ok(Some(c)) = res {
                if let Some(sink) = s.sink.as_mut() {
                    sink.write(c.object, c.offset, &d[c.payload]);
                }
            }
            // After the chunk is queued: an ObjectComplete must follow its last write.
            s.drain_events(&mut self.ctx);
            if !s.validated && s.rx.inner().was_validated() {
                s.validated = true;
                self.admission.left_half_open(s.peer.ip(), true);
                if self.admission.validated > self.ctx.limits.max_sessions {
                    let msg = format!(
                        "refused: the receiver is busy ({} transfers in progress, serve \
                         --max-sessions); try again later",
                        self.ctx.limits.max_sessions
                    );
                    s.rx.inner_mut().close(CloseCode::Refused, &msg);
                    s.error.get_or_insert(msg);
                }
            }
            return;
        }
        // Nothing for an unknown session but a full-size HELLO or IDENTIFY (§4.1, §9.6): an
        // answer is then never larger than what arrived.
        if d.len() < MIN_DATAGRAM {
            return;
        }
        if ty == types::IDENTIFY {
            let mut out = [0u8; 64];
            let n = identity_packet(id, &self.identity.public.0, &mut out);
            let _ = self.socket.send(from, &out[..n], n);
            return;
        }
        if ty != PacketType::Hello as u8 {
            return;
        }
        if self.admission.is_ended(id) {
            return self.answer_ended(from, id);
        }
        // §9.5: under load, no handshake work before the client proved its address.
        let secs = now.as_nanos() / 1_000_000_000;
        if self.handshakes.0 != secs {
            self.handshakes = (secs, 0);
        }
        let loaded =
            self.admission.half_open() >= UNDER_LOAD || self.handshakes.1 >= UNDER_LOAD_HANDSHAKES;
        if self.retry_always || loaded {
            let addr = addr_bytes(from);
            let ok = hello_retry_token(d).is_some_and(|t| self.retry.check(t, secs, id, &addr));
            if !ok {
                let mut out = [0u8; 64];
                let n = retry_packet(id, &self.retry.token(secs, id, &addr), &mut out);
                let _ = self.socket.send(from, &out[..n], n);
                return;
            }
        }
        let sessions = &self.sessions;
        let verdict = self.admission.hello(id, from.ip(), |id| {
            sessions.get(&id).is_some_and(|s| !s.validated)
        });
        match verdict {
            Verdict::Ended => return self.answer_ended(from, id),
            Verdict::Ignore => return,
            Verdict::Open(evict) => {
                if let Some(old) = evict {
                    self.drop_session(old);
                }
            }
        }
        self.handshakes.1 += 1;
        let hello = match open_hello(&self.identity.private, d, crate::random::bytes32()) {
            Ok(h) => h,
            Err(HelloRefusal::NotForThisKey) => {
                // The client pinned another key: tell it ours, so it can say so (§9.6).
                let mut out = [0u8; 64];
                let n = identity_packet(id, &self.identity.public.0, &mut out);
                let _ = self.socket.send(from, &out[..n], n);
                return;
            }
            Err(HelloRefusal::Malformed(_)) => return,
        };
        let grant = self.access.decide(&hello.client_key(), &hello.auth());
        let cfg = ReceiverConfig {
            resume: !self.ctx.discard,
            ..ReceiverConfig::default()
        };
        let Ok(rx) = SecureReceiver::accept(cfg, now, hello, crate::random::u64()) else {
            return;
        };
        let mut root = self.ctx.root.clone();
        let mut who = PublicKey(rx.client_key()).fingerprint();
        // A refusal travels inside the handshake's answer, authenticated (§9.2).
        let refusal = match grant {
            Err(msg) => Some(msg),
            Ok(g) => {
                who = g.who;
                match (&g.dir, g.may_send) {
                    (_, false) => Some("this key may only fetch files (get-only)".to_owned()),
                    (Some(dir), true) => match Root::new(&root.path().join(dir)) {
                        Ok(r) => {
                            root = r;
                            None
                        }
                        Err(_) => Some(format!(
                            "the directory '{dir}' this key is confined to does not exist on \
                             the server"
                        )),
                    },
                    (None, true) => None,
                }
            }
        };
        let mut session = Session::new(rx, from, now, root, who);
        if let Some(msg) = refusal {
            session.rx.inner_mut().close(CloseCode::Refused, &msg);
            session.error = Some(format!("refused: {msg}"));
        }
        self.admission.opened(now, id, from.ip());
        self.sessions.insert(id, session);
    }

    /// A HELLO for a session that ended (delayed in the network, or a sender that reused its
    /// ID) gets a CLOSE instead of a new session nobody would drive (spec §4.1). Only a
    /// full-size HELLO gets here, so the answer is never larger than the packet.
    fn answer_ended(&self, from: SocketAddr, id: u32) {
        let mut out = [0u8; 128];
        // In the clear (the session's keys are gone): the client accepts a clear CLOSE only
        // while it is still in its handshake (§9.6).
        let reason = "this session has ended; a new session needs a new session ID";
        if let Ok(n) = Close::datagram(&mut out, id, 0, CloseCode::Refused, reason) {
            let _ = self.socket.send(from, &out[..n], n);
        }
    }

    /// Start the writers of resuming sessions, after closing older sessions of the same
    /// sender address that write the same files (so their files are closed and unlocked
    /// before the new writer looks at them).
    fn start_resumed_writers(&mut self) {
        let wanted: Vec<u32> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.wants_writer)
            .map(|(&id, _)| id)
            .collect();
        for id in wanted {
            let (ip, paths) = {
                let s = &self.sessions[&id];
                let paths: HashSet<String> = s.targets.iter().cloned().collect();
                (s.peer.ip(), paths)
            };
            for (&other, s) in &mut self.sessions {
                let shares =
                    other != id && s.peer.ip() == ip && s.targets.iter().any(|p| paths.contains(p));
                if shares {
                    let msg = "superseded: a newer transfer of the same files started".to_owned();
                    s.rx.inner_mut().close(CloseCode::Application, &msg);
                    s.error.get_or_insert(msg);
                    if let Some(sink) = s.sink.as_mut() {
                        sink.abort(true);
                        sink.wait_idle();
                    }
                    s.sink = None;
                }
            }
            if let Some(s) = self.sessions.get_mut(&id) {
                s.wants_writer = false;
                s.start_sink(&self.ctx, true);
            }
        }
    }
}
