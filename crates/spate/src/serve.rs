//! The receiving event loop: one socket, any number of sessions, told apart by session id.
//!
//! Each iteration receives a batch of datagrams and hands each to its session (a HELLO with an
//! unknown session id opens one), runs the sessions' timers, relays writer outcomes
//! (verified files; failures, which close the session with the reason), and sends what the
//! sessions want to send. It then sleeps until a datagram arrives or the earliest session
//! timer, at most 50 ms.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use spate_proto::wire::{CloseCode, HEADER_LEN};
use spate_proto::{Instant, Receiver, ReceiverConfig, ReceiverEvent};

use crate::clock::Clock;
use crate::confine::Root;
use crate::sink::{Outcome, Sink};
use crate::udp::{RecvBatch, Socket};

/// Sessions served at once; further HELLOs are ignored until one ends (the sender retries).
const MAX_SESSIONS: usize = 64;
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
}

/// The receiver daemon: binds `listen` and serves into `root` until `stop` is set.
pub struct Server {
    socket: Socket,
    root: Root,
    clock: Clock,
    sessions: HashMap<u32, Session>,
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
            sessions: HashMap::new(),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().expect("bound socket")
    }

    /// Serve until `stop`; `log` is called when a session ends.
    pub fn run(&mut self, stop: &Arc<AtomicBool>, mut log: impl FnMut(&SessionLog)) -> Result<()> {
        let mut batch = RecvBatch::default();
        let mut out = vec![0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let now = self.clock.now();
            while self.socket.recv(&mut batch)? > 0 {
                batch.for_each(|from, d| self.on_datagram(now, from, d));
            }
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
        if self.sessions.len() >= MAX_SESSIONS {
            return;
        }
        if let Ok(rx) = Receiver::accept(ReceiverConfig::default(), now, d) {
            let mut s = Session {
                rx,
                root: self.root.clone(),
                peer: from,
                started: now,
                sink: None,
                placed: 0,
                all_received: false,
                error: None,
            };
            s.drain_events();
            self.sessions.insert(id, s);
        }
    }
}

impl Session {
    fn step(&mut self, now: Instant, socket: &Socket, out: &mut [u8]) -> Result<()> {
        if self.rx.poll_timeout().is_some_and(|t| t <= now) {
            self.rx.handle_timeout(now);
        }
        self.drain_events();
        while let Some(o) = self.sink.as_mut().and_then(Sink::poll) {
            match o {
                Outcome::Done(_) => self.placed += 1,
                Outcome::Failed(msg) => {
                    self.rx.close(CloseCode::Application, &msg);
                    self.error.get_or_insert(msg);
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

    fn drain_events(&mut self) {
        while let Some(e) = self.rx.poll_event() {
            match e {
                ReceiverEvent::ManifestReady => {
                    let Some(m) = self.rx.manifest() else {
                        continue;
                    };
                    match Sink::start(self.root.clone(), m) {
                        Ok(sink) => self.sink = Some(sink),
                        Err(e) => {
                            let msg = format!("refused: {e}");
                            self.rx.close(CloseCode::Refused, &msg);
                            self.error.get_or_insert(msg);
                        }
                    }
                }
                ReceiverEvent::ObjectComplete(o) => {
                    if let Some(s) = self.sink.as_mut() {
                        s.finish(o);
                    }
                }
                ReceiverEvent::Complete => self.all_received = true,
                ReceiverEvent::Failed(err) => {
                    if let Some(s) = self.sink.as_mut() {
                        s.abort();
                    }
                    self.error.get_or_insert(err.to_string());
                }
            }
        }
    }

    fn log(&self, now: Instant) -> SessionLog {
        SessionLog {
            session: self.rx.session_id(),
            peer: self.peer,
            objects: self.placed,
            bytes: self.rx.stats().delivered_bytes,
            seconds: now.saturating_since(self.started).as_secs_f64(),
            error: self.error.clone(),
        }
    }
}
