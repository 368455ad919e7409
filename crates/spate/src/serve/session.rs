//! One session of the server: its protocol state, its writer, and how its events are handled.

use std::net::SocketAddr;

use spate_proto::secure::SecureReceiver;
use spate_proto::wire::CloseCode;
use spate_proto::{Instant, ReceiverEvent};

use super::limits::Limits;
use super::SessionLog;
use crate::confine::Root;
use crate::sink::{Outcome, Sink, WriterPool};
use crate::udp::Socket;

/// What the sessions of a server share: where they write, how, and within which limits.
pub(super) struct Ctx {
    /// The server's root (a session may be confined below it, [`Session::root`]).
    pub root: Root,
    pub pool: WriterPool,
    pub limits: Limits,
    /// Write nothing (`serve --discard`).
    pub discard: bool,
    /// Bytes the sessions in progress claim together (for `--quota`).
    pub claimed: u64,
}

pub(super) struct Session {
    pub rx: SecureReceiver,
    pub peer: SocketAddr,
    /// Where this session writes: the server's root, or the directory below it that the
    /// client's key is confined to (`dir=` in authorized_keys).
    pub root: Root,
    /// The client, for the log: its key's fingerprint and comment.
    pub who: String,
    pub started: Instant,
    /// The sender proved its address (counted among the validated sessions).
    pub validated: bool,
    pub sink: Option<Sink>,
    placed: usize,
    all_received: bool,
    pub error: Option<String>,
    damaged_blocks: u64,
    /// Objects the protocol completed before the writer existed (empty files and directories
    /// complete with the manifest): handed to the writer as soon as it starts.
    complete_before_sink: Vec<u32>,
    /// Where each entry goes below the root (spec §5.3), once the manifest is here.
    pub targets: Vec<String>,
    /// Bytes this session claims (counted in [`Ctx::claimed`] while it runs).
    pub claimed: u64,
    /// A resuming session whose manifest is ready: the server supersedes older sessions of
    /// the same sender writing the same files, then starts the writer.
    pub wants_writer: bool,
}

impl Session {
    pub fn new(
        rx: SecureReceiver,
        peer: SocketAddr,
        now: Instant,
        root: Root,
        who: String,
    ) -> Session {
        Session {
            rx,
            peer,
            root,
            who,
            started: now,
            validated: false,
            sink: None,
            placed: 0,
            all_received: false,
            error: None,
            damaged_blocks: 0,
            complete_before_sink: Vec::new(),
            targets: Vec::new(),
            claimed: 0,
            wants_writer: false,
        }
    }

    pub fn step(
        &mut self,
        now: Instant,
        socket: &Socket,
        out: &mut [u8],
        ctx: &mut Ctx,
    ) -> std::io::Result<()> {
        if self.rx.inner().poll_timeout().is_some_and(|t| t <= now) {
            self.rx.inner_mut().handle_timeout(now);
        }
        self.drain_events(ctx);
        while let Some(o) = self.sink.as_mut().and_then(Sink::poll) {
            match o {
                Outcome::Done(_) => self.placed += 1,
                Outcome::Held {
                    ranges,
                    damaged_blocks,
                } => {
                    self.damaged_blocks = damaged_blocks;
                    self.rx.inner_mut().resume(now, ranges);
                    self.drain_events(ctx);
                }
                Outcome::Refused(msg) => {
                    let msg = format!("refused: {msg}");
                    self.rx.inner_mut().close(CloseCode::Refused, &msg);
                    self.error.get_or_insert(msg);
                }
                Outcome::Failed(msg) => {
                    self.rx.inner_mut().close(CloseCode::Application, &msg);
                    self.abort_sink(msg);
                }
            }
        }
        let objects = self
            .rx
            .inner()
            .manifest()
            .map_or(usize::MAX, |m| m.entries.len());
        if self.all_received && self.placed == objects {
            self.rx.inner_mut().confirm(now);
        }
        while let Some(t) = self.rx.poll_transmit(now, out) {
            socket.send(self.peer, &out[..t.len], t.segment_size)?;
        }
        Ok(())
    }

    /// The session failed with `why` (the first reason is kept): partial files stay for a
    /// resume, else they are removed.
    pub fn abort_sink(&mut self, why: String) {
        self.error.get_or_insert(why);
        let keep = self.rx.inner().resumes();
        if let Some(s) = self.sink.as_mut() {
            s.abort(keep);
        }
    }

    fn refuse(&mut self, why: String) {
        let msg = format!("refused: {why}");
        self.rx.inner_mut().close(CloseCode::Refused, &msg);
        self.error.get_or_insert(msg);
    }

    pub fn drain_events(&mut self, ctx: &mut Ctx) {
        while let Some(e) = self.rx.inner_mut().poll_event() {
            match e {
                ReceiverEvent::ManifestReady => self.on_manifest(ctx),
                ReceiverEvent::ObjectComplete(_) if ctx.discard => self.placed += 1,
                ReceiverEvent::ObjectComplete(o) => match self.sink.as_mut() {
                    Some(s) => s.finish(o),
                    None => self.complete_before_sink.push(o),
                },
                ReceiverEvent::Complete => self.all_received = true,
                ReceiverEvent::Failed(err) => self.abort_sink(err.to_string()),
            }
        }
    }

    /// The manifest is here (and the sender's address validated): check it against the
    /// limits, then start the writer (a resuming session first lets the server supersede
    /// older sessions of the same files).
    fn on_manifest(&mut self, ctx: &mut Ctx) {
        let Some(m) = self.rx.inner().manifest() else {
            return;
        };
        let targets = self.root.placed_paths(m);
        if let Some(why) = ctx.limits.check(m, &targets) {
            return self.refuse(why);
        }
        let claim = m.total_bytes();
        let free = if self.rx.inner().wants_resume() || ctx.discard {
            None
        } else {
            super::limits::free_space(self.root.path())
        };
        if let Some(why) = ctx.limits.check_space(claim, ctx.claimed, free) {
            return self.refuse(why);
        }
        self.claimed = claim;
        ctx.claimed += claim;
        self.targets = targets;
        if ctx.discard {
            return;
        }
        if self.rx.inner().wants_resume() {
            self.wants_writer = true;
        } else {
            self.start_sink(ctx, false);
        }
    }

    pub fn start_sink(&mut self, ctx: &Ctx, resume: bool) {
        let Some(m) = self.rx.inner().manifest() else {
            return;
        };
        let mut sink = Sink::start(&ctx.pool, self.root.clone(), m, &self.targets, resume);
        for o in self.complete_before_sink.drain(..) {
            sink.finish(o);
        }
        self.sink = Some(sink);
    }

    pub fn log(&self, now: Instant) -> SessionLog {
        SessionLog {
            session: self.rx.inner().session_id(),
            peer: self.peer,
            client: self.who.clone(),
            cipher: self.rx.cipher().name(),
            dropped_not_authentic: self.rx.secure_stats().not_authentic,
            objects: self.placed,
            bytes: self.rx.inner().stats().delivered_bytes,
            resumed: self.rx.inner().stats().resumed_bytes,
            damaged_blocks: self.damaged_blocks,
            seconds: now.saturating_since(self.started).as_secs_f64(),
            error: self.error.clone(),
        }
    }
}
