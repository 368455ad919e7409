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
use spate_proto::wire::{Close, CloseCode, PacketType, HEADER_LEN, MIN_DATAGRAM};
use spate_proto::{Instant, Receiver, ReceiverConfig};

pub use admit::{HALF_OPEN_FOR, HALF_OPEN_PER_SOURCE, MAX_HALF_OPEN};
pub use limits::Limits;

use crate::clock::Clock;
use crate::confine::Root;
use crate::sink::WriterPool;
use crate::udp::{RecvBatch, Socket};
use admit::{Admission, Verdict};
use session::{Ctx, Session};

/// Receive batches (of up to 16 × 64 KiB) handled before the sessions get to send.
const MAX_BATCHES: usize = 16;
/// Longest sleep of the loop.
const MAX_WAIT: Duration = Duration::from_millis(50);

/// How a session ended, for the log.
#[derive(Debug, Clone)]
pub struct SessionLog {
    /// Session id.
    pub session: u32,
    /// Sender address.
    pub peer: SocketAddr,
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
}

impl Server {
    /// Bind the socket and start the writer threads.
    pub fn bind(listen: SocketAddr, root: Root) -> Result<Server> {
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
        })
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
        let mut out = vec![0u8; 2048];
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
                if s.rx.is_closed() || expired {
                    ended.push((id, expired));
                } else if let Some(t) = s.rx.poll_timeout() {
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
        if d.len() < HEADER_LEN {
            return;
        }
        let Ok(header) = spate_proto::wire::Header::peek(d) else {
            return;
        };
        if let Some(s) = self.sessions.get_mut(&header.session) {
            // A writer that is behind takes no more data now: dropped unacknowledged, the
            // DATA is sent again, and the network thread never waits for a disk.
            if header.ty == PacketType::Data
                && s.sink.as_ref().is_some_and(|k| !k.has_room(d.len()))
            {
                return;
            }
            // The peer's address changes only with a datagram the session accepts, and the
            // new address starts unvalidated (spec §4.8).
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
            if !s.validated && s.rx.was_validated() {
                s.validated = true;
                self.admission.left_half_open(s.peer.ip(), true);
                if self.admission.validated > self.ctx.limits.max_sessions {
                    let msg = format!(
                        "refused: the receiver is busy ({} transfers in progress, serve \
                         --max-sessions); try again later",
                        self.ctx.limits.max_sessions
                    );
                    s.rx.close(CloseCode::Refused, &msg);
                    s.error.get_or_insert(msg);
                }
            }
            return;
        }
        if header.ty != PacketType::Hello || d.len() < MIN_DATAGRAM {
            return; // §4.1: nothing for an unknown session but a full-size HELLO
        }
        let sessions = &self.sessions;
        let verdict = self.admission.hello(header.session, from.ip(), |id| {
            sessions.get(&id).is_some_and(|s| !s.validated)
        });
        match verdict {
            Verdict::Ended => return self.answer_ended(from, header.session),
            Verdict::Ignore => return,
            Verdict::Open(evict) => {
                if let Some(old) = evict {
                    self.drop_session(old);
                }
            }
        }
        let cfg = ReceiverConfig {
            resume: !self.ctx.discard,
            ..ReceiverConfig::default()
        };
        if let Ok(rx) = Receiver::accept(cfg, now, d, crate::random::u64()) {
            self.admission.opened(now, header.session, from.ip());
            self.sessions
                .insert(header.session, Session::new(rx, from, now));
        }
    }

    /// A HELLO for a session that ended (delayed in the network, or a sender that reused its
    /// ID) gets a CLOSE instead of a new session nobody would drive (spec §4.1). Only a
    /// full-size HELLO gets here, so the answer is never larger than the packet.
    fn answer_ended(&self, from: SocketAddr, id: u32) {
        let mut out = [0u8; 128];
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
                    s.rx.close(CloseCode::Application, &msg);
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
