//! One session of the server: its state beside the protocol's (where it writes, its writer,
//! what it claims), and how its events and writer outcomes are handled.

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
    /// Each session's sender may send new data at most this fast, bytes per second
    /// (`spate get --rate` from a daemon; [`super::cap`]).
    pub receive_rate: Option<u64>,
    /// Write whole blocks with `O_DIRECT` (`--direct-io`; `sink/direct.rs`).
    pub direct_io: bool,
}

/// The server's state of one session, beside the protocol's (`Slot::app`).
pub(super) struct Session {
    /// Where this session writes: the server's root, or the directory below it that the
    /// client's key is confined to (`dir=` in authorized_keys).
    pub root: Root,
    /// The client, for the log: its key's fingerprint and comment.
    pub who: String,
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
    /// A GET session whose request is complete: the server starts its answer (§5.6).
    pub wants_answer: bool,
    /// The answer being prepared (the request's files resolved, digests computed), until the
    /// server lets it start.
    pub answer: Option<super::answer::Answer>,
    /// The request's answer is ready (COMPLETE reports it): the answer logs the download.
    pub answered: bool,
    /// Entries placed since the server last looked (for progress reports), below the root.
    pub just_placed: Vec<String>,
    /// The cap on the sender's rate, once the writer reports room ([`Ctx::receive_rate`]).
    cap: Option<super::cap::ReceiveCap>,
}

/// A session as the endpoint keeps it: the protocol's state and ours.
pub(super) type Slot = spate_proto::endpoint::Slot<Session>;

impl Session {
    pub fn new(root: Root, who: String, refused: Option<&str>) -> Session {
        Session {
            root,
            who,
            sink: None,
            placed: 0,
            all_received: false,
            error: refused.map(|r| format!("refused: {r}")),
            damaged_blocks: 0,
            complete_before_sink: Vec::new(),
            targets: Vec::new(),
            claimed: 0,
            wants_writer: false,
            wants_answer: false,
            answer: None,
            answered: false,
            just_placed: Vec::new(),
            cap: None,
        }
    }
}

/// Run a session's timers, relay its writer's outcomes, and send what it has to send.
pub(super) fn step(
    slot: &mut Slot,
    now: Instant,
    socket: &Socket,
    out: &mut [u8],
    ctx: &mut Ctx,
) -> std::io::Result<()> {
    if slot.rx.inner().poll_timeout().is_some_and(|t| t <= now) {
        slot.rx.inner_mut().handle_timeout(now);
    }
    drain_events(slot, ctx);
    while let Some(o) = slot.app.sink.as_mut().and_then(Sink::poll) {
        match o {
            Outcome::Done(o) => {
                slot.app.placed += 1;
                let at = (o as usize)
                    .checked_sub(1)
                    .and_then(|i| slot.app.targets.get(i));
                slot.app.just_placed.extend(at.cloned());
            }
            Outcome::Held {
                ranges,
                damaged_blocks,
            } => {
                slot.app.damaged_blocks = damaged_blocks;
                slot.rx.inner_mut().resume(now, ranges);
                drain_events(slot, ctx);
            }
            Outcome::Refused(msg) => {
                let msg = format!("refused: {msg}");
                slot.rx.inner_mut().close(CloseCode::Refused, &msg);
                slot.app.error.get_or_insert(msg);
            }
            Outcome::Failed(msg) => {
                slot.rx.inner_mut().close(CloseCode::Application, &msg);
                abort_sink(slot, msg);
            }
        }
    }
    let objects = slot
        .rx
        .inner()
        .manifest()
        .map_or(usize::MAX, |m| m.entries.len());
    // §5.6: a request is "placed" once its answer is ready; COMPLETE then tells the client.
    match slot
        .app
        .answer
        .as_ref()
        .and_then(super::answer::Answer::poll_ready)
    {
        Some(Ok(())) => {
            slot.app.placed = objects;
            slot.app.answered = true;
        }
        Some(Err(why)) => {
            slot.app.answer = None;
            refuse(slot, why);
        }
        None => {}
    }
    if slot.app.all_received && slot.app.placed == objects {
        slot.rx.inner_mut().confirm(now);
    }
    // §7.4: the sender keeps what is in flight within what the writer can still take, so a
    // disk slower than the path slows the sender instead of overflowing the queue; a cap on
    // the receive rate holds it back the same way.
    if let Some(mut room) = slot.app.sink.as_ref().map(Sink::room) {
        if let Some(rate) = ctx.receive_rate {
            let received = slot.rx.inner().data_received();
            let cap = slot
                .app
                .cap
                .get_or_insert_with(|| super::cap::ReceiveCap::new(rate));
            room = cap.room(now, received, room);
        }
        slot.rx.inner_mut().set_write_room(now, room);
    }
    while let Some(t) = slot.rx.poll_transmit(now, out) {
        socket.send(slot.peer, &out[..t.len], t.segment_size)?;
    }
    Ok(())
}

/// The session failed with `why` (the first reason is kept): partial files stay for a
/// resume, else they are removed.
pub(super) fn abort_sink(slot: &mut Slot, why: String) {
    slot.app.error.get_or_insert(why);
    let keep = slot.rx.inner().resumes();
    if let Some(s) = slot.app.sink.as_mut() {
        s.abort(keep);
    }
}

pub(super) fn refuse(slot: &mut Slot, why: String) {
    let msg = format!("refused: {why}");
    slot.rx.inner_mut().close(CloseCode::Refused, &msg);
    slot.app.error.get_or_insert(msg);
}

pub(super) fn drain_events(slot: &mut Slot, ctx: &mut Ctx) {
    while let Some(e) = slot.rx.inner_mut().poll_event() {
        match e {
            ReceiverEvent::ManifestReady => on_manifest(slot, ctx),
            ReceiverEvent::ObjectComplete(_) if ctx.discard => slot.app.placed += 1,
            ReceiverEvent::ObjectComplete(o) => match slot.app.sink.as_mut() {
                Some(s) => s.finish(o),
                None => slot.app.complete_before_sink.push(o),
            },
            ReceiverEvent::Complete => slot.app.all_received = true,
            ReceiverEvent::Failed(err) => abort_sink(slot, err.to_string()),
        }
    }
}

/// The manifest is here (and the sender's address validated): check it against the
/// limits, then start the writer (a resuming session first lets the server supersede
/// older sessions of the same files).
fn on_manifest(slot: &mut Slot, ctx: &mut Ctx) {
    let Some(m) = slot.rx.inner().manifest() else {
        return;
    };
    if slot.rx.inner().is_get() {
        // A request (§5.6): nothing is written; the server answers it.
        slot.app.wants_answer = true;
        return;
    }
    let targets = slot.app.root.placed_paths(m);
    if let Some(why) = ctx.limits.check(m, &targets) {
        return refuse(slot, why);
    }
    let claim = m.total_bytes();
    let free = if slot.rx.inner().wants_resume() || ctx.discard {
        None
    } else {
        super::limits::free_space(slot.app.root.path())
    };
    if let Some(why) = ctx.limits.check_space(claim, ctx.claimed, free) {
        return refuse(slot, why);
    }
    slot.app.claimed = claim;
    ctx.claimed += claim;
    slot.app.targets = targets;
    if ctx.discard {
        return;
    }
    if slot.rx.inner().wants_resume() {
        slot.app.wants_writer = true;
    } else {
        start_sink(slot, ctx, false);
    }
}

pub(super) fn start_sink(slot: &mut Slot, ctx: &Ctx, resume: bool) {
    let Some(m) = slot.rx.inner().manifest() else {
        return;
    };
    let mut sink = Sink::start(
        &ctx.pool,
        slot.app.root.clone(),
        m,
        &slot.app.targets,
        resume,
        ctx.direct_io,
    );
    for o in slot.app.complete_before_sink.drain(..) {
        sink.finish(o);
    }
    slot.app.sink = Some(sink);
}

pub(super) fn log(slot: &Slot, now: Instant) -> SessionLog {
    SessionLog {
        session: slot.rx.inner().session_id(),
        direction: if slot.rx.inner().is_get() {
            "request"
        } else {
            "received"
        },
        peer: slot.peer,
        client: slot.app.who.clone(),
        cipher: slot.rx.cipher().name(),
        dropped_not_authentic: slot.rx.secure_stats().not_authentic,
        objects: slot.app.placed,
        bytes: slot.rx.inner().stats().delivered_bytes,
        resumed: slot.rx.inner().stats().resumed_bytes,
        damaged_blocks: slot.app.damaged_blocks,
        seconds: now.saturating_since(slot.started).as_secs_f64(),
        error: slot.app.error.clone(),
        direct_bytes: slot.app.sink.as_ref().and_then(Sink::direct_bytes),
    }
}
