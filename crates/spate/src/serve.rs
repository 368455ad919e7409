//! The receiving event loop: one socket, any number of sessions, told apart by session id.
//!
//! Each iteration receives a batch of datagrams and hands each to its session (a HELLO with an
//! unknown session id opens one), runs the sessions' timers, relays writer outcomes
//! (verified files; failures, which close the session with the reason), and sends what the
//! sessions want to send. It then sleeps until a datagram arrives or the earliest session
//! timer, at most 50 ms.
//!
//! A session that resumes (`spate send --resume`) first looks for what is already here —
//! files in place with the right digest, verified blocks of partial files — on a thread of its
//! own, since that reads files; the sender waits for the answer. A resuming session takes over
//! files that an older, still open session is writing (typically one whose sender was killed
//! and has not timed out yet): the older session is closed and its partial files are kept.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use spate_proto::wire::{Close, CloseCode, PacketType, HEADER_LEN, MIN_DATAGRAM};
use spate_proto::{Instant, Receiver, ReceiverConfig, ReceiverEvent};

use crate::clock::Clock;
use crate::confine::Root;
use crate::sink::{find_held, Held, Outcome, Sink};
use crate::udp::{RecvBatch, Socket};

/// Sessions served at once; further HELLOs are ignored until one ends (the sender retries).
const MAX_SESSIONS: usize = 64;
/// Receive batches (of up to 16 × 64 KiB) handled before the sessions get to send.
const MAX_BATCHES: usize = 16;
/// Longest sleep of the loop.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// How long the ID of an ended session is remembered (spec §4.1: a late HELLO must not open a
/// new session): twice the default idle timeout, longer than a HELLO can sensibly be delayed.
const ENDED_FOR: Duration = Duration::from_secs(120);
/// Ended session IDs remembered at most (12 bytes each): beyond it the oldest are forgotten.
const MAX_ENDED: usize = 4096;

/// What one session may ask of this server (`spate serve --max-*`). A manifest beyond them is
/// refused (CLOSE Refused, naming the limit) before anything is created: the sizes a manifest
/// claims are only claims, and memory, disk and directories must not follow them.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Entries (files and directories) per session.
    pub max_entries: usize,
    /// Bytes of any one file.
    pub max_file_size: u64,
    /// Bytes of all files of a session together.
    pub max_bytes: u64,
}

impl Default for Limits {
    /// For a server open to many senders: 100 000 entries (a tree that size takes seconds
    /// to create, not minutes), 4 TiB per file and 16 TiB per session.
    fn default() -> Self {
        Limits {
            max_entries: 100_000,
            max_file_size: 4 << 40,
            max_bytes: 16 << 40,
        }
    }
}

impl Limits {
    /// Why `m` exceeds these limits, if it does.
    fn check(&self, m: &spate_proto::Manifest) -> Option<String> {
        let human = crate::report::human_bytes;
        if m.entries.len() > self.max_entries {
            return Some(format!(
                "{} entries, more than this server accepts per transfer ({}, serve --max-entries)",
                m.entries.len(),
                self.max_entries
            ));
        }
        if let Some(e) = m.entries.iter().find(|e| e.size > self.max_file_size) {
            return Some(format!(
                "'{}' claims {}, more than this server accepts per file ({}, serve --max-file-size)",
                crate::report::escape(&e.path),
                human(e.size),
                human(self.max_file_size)
            ));
        }
        let total = m.total_bytes();
        (total > self.max_bytes).then(|| {
            format!(
                "the transfer claims {}, more than this server accepts per transfer ({}, serve --max-bytes)",
                human(total),
                human(self.max_bytes)
            )
        })
    }
}

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

struct Session {
    rx: Receiver,
    root: Root,
    peer: SocketAddr,
    started: Instant,
    sink: Option<Sink>,
    placed: usize,
    all_received: bool,
    error: Option<String>,
    /// Resuming: the manifest is here, the search for held data has not started.
    scan_wanted: bool,
    /// Resuming: the search for held data is running.
    scan: Option<mpsc::Receiver<io::Result<Held>>>,
    damaged_blocks: u64,
    /// Write nothing (see [`Server::discard`]).
    discard: bool,
    /// Objects the protocol completed before the writer existed (empty files and directories
    /// complete with the manifest, while a resuming session is still looking for held data):
    /// handed to the writer as soon as it starts.
    complete_before_sink: Vec<u32>,
    /// Where each entry goes below the root (spec §5.3), once the manifest is here.
    targets: Vec<String>,
    limits: Limits,
}

/// The receiver daemon: binds `listen` and serves into `root` until `stop` is set.
pub struct Server {
    socket: Socket,
    root: Root,
    clock: Clock,
    /// By session id. A B-tree, not a hash map: at most [`MAX_SESSIONS`], and SipHash of the id
    /// of every datagram was 4 % of the receiver's CPU.
    sessions: BTreeMap<u32, Session>,
    /// IDs of recently ended sessions, oldest first, with the time they ended.
    ended: VecDeque<(Instant, u32)>,
    limits: Limits,
    discard: bool,
}

impl Server {
    /// Bind the socket.
    pub fn bind(listen: SocketAddr, root: Root) -> Result<Server> {
        let socket = Socket::bind(listen).with_context(|| {
            format!("cannot listen on {listen} (is another spate serve running there? choose another port with --listen)")
        })?;
        Ok(Server {
            socket,
            root,
            clock: Clock::new(),
            sessions: BTreeMap::new(),
            ended: VecDeque::new(),
            limits: Limits::default(),
            discard: false,
        })
    }

    /// Receive without writing anything: every object counts as placed once all its bytes
    /// arrived (nothing is verified). For measuring the network and the protocol alone
    /// (`spate serve --discard`, `spate-lab bench-io`).
    pub fn discard(mut self) -> Self {
        self.discard = true;
        self
    }

    /// Refuse sessions beyond `limits`.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
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
            self.start_scans();
            let now = self.clock.now();
            let mut next = now + MAX_WAIT;
            let mut ended = Vec::new();
            for (&id, s) in &mut self.sessions {
                s.step(now, &self.socket, &mut out)?;
                if s.rx.is_closed() {
                    ended.push(id);
                } else if let Some(t) = s.rx.poll_timeout() {
                    next = next.min(t);
                }
            }
            for id in ended {
                if let Some(s) = self.sessions.remove(&id) {
                    log(&s.log(now));
                    self.remember_ended(now, id);
                }
            }
            self.socket.wait(self.clock.until(next), false)?;
        }
        Ok(())
    }

    fn on_datagram(&mut self, now: Instant, from: SocketAddr, d: &mut [u8]) {
        if d.len() < HEADER_LEN {
            return;
        }
        let id = u32::from_be_bytes([d[2], d[3], d[4], d[5]]);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.peer = from;
            if let Ok(Some(c)) = s.rx.handle_datagram(now, d) {
                if let Some(sink) = s.sink.as_mut() {
                    sink.write(c.object, c.offset, &d[c.payload]);
                }
            }
            // After the chunk is queued: an ObjectComplete must follow its last write.
            s.drain_events();
            return;
        }
        if self.ended.iter().any(|&(_, e)| e == id) {
            self.answer_ended(from, id, d);
            return;
        }
        if self.sessions.len() >= MAX_SESSIONS {
            return;
        }
        let cfg = ReceiverConfig {
            resume: !self.discard,
            ..ReceiverConfig::default()
        };
        if let Ok(rx) = Receiver::accept(cfg, now, d) {
            let mut s = Session {
                rx,
                root: self.root.clone(),
                peer: from,
                started: now,
                sink: None,
                placed: 0,
                all_received: false,
                error: None,
                scan_wanted: false,
                scan: None,
                damaged_blocks: 0,
                discard: self.discard,
                complete_before_sink: Vec::new(),
                targets: Vec::new(),
                limits: self.limits,
            };
            s.drain_events();
            self.sessions.insert(id, s);
        }
    }

    fn remember_ended(&mut self, now: Instant, id: u32) {
        while self
            .ended
            .front()
            .is_some_and(|&(at, _)| now.saturating_since(at) > ENDED_FOR)
            || self.ended.len() >= MAX_ENDED
        {
            self.ended.pop_front();
        }
        self.ended.push_back((now, id));
    }

    /// A packet for a session that ended: a HELLO (delayed in the network, or a sender that
    /// reused its ID) gets a CLOSE instead of a new session nobody would drive (spec §4.1).
    /// Only a full-size HELLO is answered, so the answer is never larger than the packet.
    fn answer_ended(&self, from: SocketAddr, id: u32, d: &[u8]) {
        let is_hello = d
            .get(1)
            .is_some_and(|b| b & 0x0f == PacketType::Hello as u8);
        if !is_hello || d.len() < MIN_DATAGRAM {
            return;
        }
        let mut out = [0u8; 128];
        let reason = "this session has ended; a new session needs a new session ID";
        if let Ok(n) = Close::datagram(&mut out, id, 0, CloseCode::Refused, reason) {
            let _ = self.socket.send(from, &out[..n], n);
        }
    }

    /// Start the search for held data of sessions that resume, after closing older sessions
    /// writing the same files (so their writers have stopped before the files are read).
    fn start_scans(&mut self) {
        let wanted: Vec<u32> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.scan_wanted)
            .map(|(&id, _)| id)
            .collect();
        for id in wanted {
            let Some(m) = self.sessions[&id].rx.manifest().cloned() else {
                continue;
            };
            let placed = self.sessions[&id].targets.clone();
            let paths: HashSet<&str> = placed.iter().map(String::as_str).collect();
            for (&other, s) in &mut self.sessions {
                let shares = other != id && s.targets.iter().any(|p| paths.contains(p.as_str()));
                if shares {
                    let msg = "superseded: a newer transfer of the same files started".to_owned();
                    s.rx.close(CloseCode::Application, &msg);
                    s.error.get_or_insert(msg);
                    if let Some(mut sink) = s.sink.take() {
                        sink.abort(true); // dropping it waits for the writer
                    }
                }
            }
            let (tx, rx) = mpsc::channel();
            let root = self.root.clone();
            std::thread::spawn(move || {
                let _ = tx.send(find_held(&root, &m, &placed));
            });
            if let Some(s) = self.sessions.get_mut(&id) {
                s.scan_wanted = false;
                s.scan = Some(rx);
            }
        }
    }
}

impl Session {
    fn step(&mut self, now: Instant, socket: &Socket, out: &mut [u8]) -> Result<()> {
        if self.rx.poll_timeout().is_some_and(|t| t <= now) {
            self.rx.handle_timeout(now);
        }
        self.drain_events();
        if let Some(found) = self.scan.as_ref().and_then(|r| r.try_recv().ok()) {
            self.scan = None;
            self.on_held(now, found);
        }
        while let Some(o) = self.sink.as_mut().and_then(Sink::poll) {
            match o {
                Outcome::Done(_) => self.placed += 1,
                Outcome::Failed(msg) => {
                    self.rx.close(CloseCode::Application, &msg);
                    self.abort_sink(msg);
                }
            }
        }
        let objects = self.rx.manifest().map_or(usize::MAX, |m| m.entries.len());
        if self.all_received && self.placed == objects {
            self.rx.confirm(now);
        }
        while let Some(t) = self.rx.poll_transmit(now, out) {
            socket.send(self.peer, &out[..t.len], t.segment_size)?;
        }
        Ok(())
    }

    /// The session failed with `why` (the first reason is kept): partial files stay for a
    /// resume, else they are removed.
    fn abort_sink(&mut self, why: String) {
        self.error.get_or_insert(why);
        let keep = self.rx.resumes();
        if let Some(s) = self.sink.as_mut() {
            s.abort(keep);
        }
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.rx.poll_event() {
            if let (ReceiverEvent::ManifestReady, Some(m)) = (&e, self.rx.manifest()) {
                if let Some(why) = self.limits.check(m) {
                    let msg = format!("refused: {why}");
                    self.rx.close(CloseCode::Refused, &msg);
                    self.error.get_or_insert(msg);
                    continue;
                }
                self.targets = self.root.placed_paths(m);
            }
            match e {
                ReceiverEvent::ManifestReady if self.rx.wants_resume() => {
                    self.scan_wanted = true;
                }
                ReceiverEvent::ManifestReady if self.discard => {}
                ReceiverEvent::ManifestReady => self.start_sink(Held::default()),
                ReceiverEvent::ObjectComplete(_) if self.discard => self.placed += 1,
                ReceiverEvent::ObjectComplete(o) => match self.sink.as_mut() {
                    Some(s) => s.finish(o),
                    None => self.complete_before_sink.push(o),
                },
                ReceiverEvent::Complete => self.all_received = true,
                ReceiverEvent::Failed(err) => self.abort_sink(err.to_string()),
            }
        }
    }

    fn start_sink(&mut self, held: Held) {
        let Some(m) = self.rx.manifest() else {
            return;
        };
        match Sink::start(self.root.clone(), m, &self.targets, held) {
            Ok(mut sink) => {
                for o in self.complete_before_sink.drain(..) {
                    sink.finish(o);
                }
                self.sink = Some(sink);
            }
            Err(e) => {
                let msg = format!("refused: {e}");
                self.rx.close(CloseCode::Refused, &msg);
                self.error.get_or_insert(msg);
            }
        }
    }

    /// The search for held data finished: start writing, and tell the sender what to skip.
    fn on_held(&mut self, now: Instant, found: io::Result<Held>) {
        let (held, ranges) = match (found, self.rx.manifest()) {
            (Ok(h), Some(m)) => {
                let r = h.ranges(m);
                (h, r)
            }
            (Err(e), _) => {
                let msg = format!("refused: cannot look for earlier data: {e}");
                self.rx.close(CloseCode::Refused, &msg);
                self.error.get_or_insert(msg);
                return;
            }
            (Ok(_), None) => return,
        };
        self.damaged_blocks = held.damaged_blocks;
        self.start_sink(held);
        if self.sink.is_some() {
            self.rx.resume(now, ranges);
            self.drain_events();
        }
    }

    fn log(&self, now: Instant) -> SessionLog {
        SessionLog {
            session: self.rx.session_id(),
            peer: self.peer,
            objects: self.placed,
            bytes: self.rx.stats().delivered_bytes,
            resumed: self.rx.stats().resumed_bytes,
            damaged_blocks: self.damaged_blocks,
            seconds: now.saturating_since(self.started).as_secs_f64(),
            error: self.error.clone(),
        }
    }
}
