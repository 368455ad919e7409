//! The receiving event loop: one socket, any number of sessions, told apart by session id.
//!
//! Each iteration receives a batch of datagrams and hands each to the protocol core's
//! [`spate_proto::endpoint::Endpoint`], which owns session lookup, admission and packet
//! protection (a HELLO with an unknown session id may open a session; this module decides,
//! from the client's key, whether it may and where it writes), runs the sessions' timers,
//! relays writer outcomes (verified files; failures, which close the session with the
//! reason), and sends what the sessions want to send. It then sleeps until a datagram
//! arrives or the earliest session timer, at most 50 ms.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the server and its loop |
//! | `session.rs` | one session: events, writer outcomes, sending |
//! | `limits.rs` | `--max-*` and `--quota` |
//! | `rebuild.rs` | rebuilding coded blocks on a worker thread (spec §6.9) |
//! | `answer.rs` | answering a download: the session the server sends in (spec §2.1, §5.6) |
//! | `open.rs` | opening the packets of large receive batches on several cores (`--openers`) |
//!
//! A download is a GET session whose object 0 is a request (spec §5.6): received like any
//! session, then answered by a session the server opens, on a thread of its own, from this
//! socket; this loop routes the answer's datagrams (by session id) to that thread.
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

mod answer;
mod cap;
mod limits;
mod open;
mod rebuild;
mod session;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use spate_proto::coding::KEEP_BUDGET;
use spate_proto::endpoint::{Endpoint, Handled, Host};
use spate_proto::wire::{CloseCode, PacketType};
use spate_proto::{Instant, Policy, RateConfig, ReceiverConfig};

pub use limits::Limits;
pub use spate_proto::endpoint::{HALF_OPEN_FOR, HALF_OPEN_PER_SOURCE, MAX_HALF_OPEN};

use crate::access::Access;
use crate::clock::Clock;
use crate::confine::Root;
use crate::keys::{Identity, PublicKey};
use crate::sink::WriterPool;
use crate::udp::{RecvBatch, Socket};
use session::{Ctx, Session, Slot};

/// Receive batches (of up to 16 × 64 KiB) handled before the sessions get to send.
const MAX_BATCHES: usize = 16;
/// Longest sleep of the loop.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// How often [`Server::run_with_progress`] reports.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// How often the loop looks at a session whose writer is behind, so that the room it frees
/// reaches a sender held back by its Write Limit (spec §7.4) within a few milliseconds.
const WRITER_CHECK: Duration = Duration::from_millis(2);
/// Memory for coding (chunk copies and repair symbols, spec §6.9) of all sessions together:
/// each session gets an equal share, at most the 128 MiB a sender may have outstanding, so a
/// server with up to 4 transfers gives each all it can use, and 64 hostile sessions hold at
/// most 512 MiB between them (and only what they sent).
const CODING_POOL: u64 = 512 << 20;
/// How often the loop looks for finished rebuilds while some are queued (a rebuild takes a
/// few milliseconds).
const REBUILD_CHECK: Duration = Duration::from_millis(1);

/// What the sessions in progress hold so far.
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// Sessions.
    pub sessions: usize,
    /// File bytes held (received, or there already when resuming).
    pub bytes: u64,
    /// File bytes their manifests announce (0 until a manifest is complete; with the
    /// sessions of this run that ended).
    pub total: u64,
    /// Entries their manifests announce (with the sessions of this run that ended).
    pub entries: usize,
    /// Entries placed (verified and renamed into place) so far, by all sessions of this run.
    pub placed: usize,
    /// Where the entries placed since the last report went, relative to the root.
    pub placed_paths: Vec<String>,
}

/// How a session ended, for the log.
#[derive(Debug, Clone)]
pub struct SessionLog {
    /// Session id.
    pub session: u32,
    /// `received` (an upload to this server), `sent` (the answer to a download), or
    /// `request` (a download's request, logged when it fails; once answered, its answer is
    /// logged instead).
    pub direction: &'static str,
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
    /// File bytes received (or, for `sent`, delivered to the client).
    pub bytes: u64,
    /// Bytes already here from an earlier, interrupted transfer (not sent again).
    pub resumed: u64,
    /// Blocks of partial files that no longer matched their journal (sent again).
    pub damaged_blocks: u64,
    /// Seconds from HELLO to the end.
    pub seconds: f64,
    /// `None` on success, else why it failed.
    pub error: Option<String>,
    /// With `--direct-io`, the file bytes written with `O_DIRECT` (the rest went through the
    /// page cache); `None` without it.
    pub direct_bytes: Option<u64>,
}

impl SessionLog {
    /// With `--direct-io`, what went to the disk with `O_DIRECT`, for the session's line: a
    /// file system that refuses it is otherwise written through the page cache silently.
    pub fn direct_note(&self) -> Option<String> {
        let direct = self.direct_bytes?;
        Some(if direct == 0 && self.bytes > 0 {
            "--direct-io: nothing written with O_DIRECT (the file system refused it, or every \
             file was shorter than a block); written through the page cache"
                .to_owned()
        } else {
            format!(
                "{} of it written with O_DIRECT",
                crate::report::human_bytes(direct)
            )
        })
    }
}

/// The receiver daemon: binds `listen` and serves into `root` until `stop` is set.
pub struct Server {
    /// Shared with the threads of answers (which send from it).
    socket: Arc<Socket>,
    /// The server's static private key (answers prove it).
    identity: [u8; 32],
    /// Answers to downloads in progress, by the id of their session.
    answers: BTreeMap<u32, answer::Answer>,
    /// How answers send (`fair`, capped by `serve --send-rate`).
    answer_rate: RateConfig,
    /// Threads that open packets of large receive batches (`serve --openers`), if any.
    openers: Option<open::Openers>,
    /// Packets opened on those threads so far.
    opened_on_pool: u64,
    /// Entries placed since the last progress report, and in all.
    placed_since: Vec<String>,
    placed: usize,
    /// Entries and bytes the manifests of sessions that ended announced.
    ended_totals: (usize, u64),
    clock: Clock,
    /// Sessions, admission and protection (the protocol core's).
    endpoint: Endpoint<Session>,
    /// Root, writer pool, limits: what the sessions share.
    ctx: Ctx,
    /// Who may do what.
    access: Access,
    /// Serve one session, then return; return as well after this long without any session
    /// (`spate serve --once`).
    once: Option<Duration>,
    /// Rebuilds of coded blocks, off this thread.
    rebuilder: rebuild::Rebuilder,
}

/// What the endpoint asks of the server for a new session: randomness, and a decision on the
/// client's key (which also says where the session writes).
struct Admit<'a> {
    access: &'a mut Access,
    root: &'a Root,
}

impl Host<Session> for Admit<'_> {
    fn random(&mut self) -> ([u8; 32], u64) {
        (crate::random::bytes32(), crate::random::u64())
    }

    fn admit(&mut self, key: &[u8; 32], auth: &[u8; 16], get: bool) -> (Session, Option<String>) {
        let mut who = PublicKey(*key).fingerprint();
        let mut root = self.root.clone();
        let refusal = match self.access.decide(key, auth) {
            Err(msg) => Some(msg),
            Ok(g) => {
                who = g.who;
                match (&g.dir, if get { g.may_get } else { g.may_send }) {
                    (_, false) if get => {
                        Some("this key may only send files (send-only)".to_owned())
                    }
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
        let session = Session::new(root, who, refusal.as_deref());
        (session, refusal)
    }
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
        Server::on_socket(socket, root, identity, access)
    }

    /// A server on an already bound `socket` (a download over ssh receives on the socket it
    /// knocked from, so that the sender's packets pass the NAT).
    pub fn on_socket(
        socket: Socket,
        root: Root,
        identity: Identity,
        access: Access,
    ) -> Result<Server> {
        let pool = WriterPool::new(WriterPool::default_size())
            .context("cannot start the writer threads")?;
        let limits = Limits::default();
        let endpoint = Endpoint::new(
            identity.private,
            identity.public.0,
            receiver_config(false),
            limits.max_sessions,
            crate::random::bytes32(),
        );
        Ok(Server {
            socket: Arc::new(socket),
            identity: identity.private,
            answers: BTreeMap::new(),
            answer_rate: RateConfig::adaptive(Policy::Fair),
            openers: match crate::seal_pool::auto_threads() {
                0 => None,
                n => Some(open::Openers::new(n).context("cannot start the opening threads")?),
            },
            opened_on_pool: 0,
            placed_since: Vec::new(),
            placed: 0,
            ended_totals: (0, 0),
            clock: Clock::new(),
            endpoint,
            ctx: Ctx {
                root,
                pool,
                limits,
                discard: false,
                claimed: 0,
                receive_rate: None,
                direct_io: false,
            },
            access,
            once: None,
            rebuilder: rebuild::Rebuilder::start()?,
        })
    }

    /// Write at most `bytes_per_sec` to disk, all sessions together (`spate serve
    /// --write-rate`): senders are slowed to it by the room each session reports (spec §7.4).
    pub fn write_rate(mut self, bytes_per_sec: u64) -> Result<Self> {
        self.ctx.pool =
            WriterPool::with_write_rate(WriterPool::default_size(), Some(bytes_per_sec))
                .context("cannot start the writer threads")?;
        Ok(self)
    }

    /// Write files with direct I/O (`--direct-io`): whole 1 MiB blocks go to the disk with
    /// `O_DIRECT`, past the page cache, where the file system takes it (`sink/direct.rs`).
    pub fn direct_io(mut self, on: bool) -> Self {
        self.ctx.direct_io = on;
        self
    }

    /// Open packets on `n` threads besides the loop when receive batches are large (`serve
    /// --openers`; 0: the loop opens every packet itself).
    pub fn openers(mut self, n: usize) -> Result<Self> {
        self.openers = match n {
            0 => None,
            n => Some(open::Openers::new(n).context("cannot start the opening threads")?),
        };
        Ok(self)
    }

    /// Packets opened on the opening threads so far (`--openers`).
    pub fn opened_on_pool(&self) -> u64 {
        self.opened_on_pool
    }

    /// Let each session's sender send new data at most `bytes_per_sec` (over any second; the
    /// Write Limit of spec §7.4 holds it back): `spate get --rate` from a daemon, whose
    /// sender keeps its own policy.
    pub fn receive_rate(mut self, bytes_per_sec: u64) -> Self {
        self.ctx.receive_rate = Some(bytes_per_sec);
        self
    }

    /// Send each download at most `bps` bits per second (`serve --send-rate`).
    pub fn send_rate(mut self, bps: u64) -> Self {
        self.answer_rate.rate_bps = bps;
        self
    }

    /// Serve one session and stop (when it ends, however it ends), or stop after `idle`
    /// without any session (`spate serve --once`, started over SSH).
    pub fn once(mut self, idle: Duration) -> Self {
        self.once = Some(idle);
        self
    }

    /// Ask every new client to prove its address with a RETRY token first (spec §9.5), as
    /// the server does anyway under load: for tests of that path.
    pub fn retry_always(mut self) -> Self {
        self.endpoint.retry_always();
        self
    }

    /// Never tell the static key to whoever asks (IDENTIFY, §9.6): for the receiving end of
    /// a download, whose key its one peer knows already.
    pub fn hide_identity(mut self) -> Self {
        self.endpoint.hide_identity();
        self
    }

    /// The server's static public key (what clients pin).
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.endpoint.public_key())
    }

    /// Receive without writing anything: every object counts as placed once all its bytes
    /// arrived (nothing is verified). For measuring the network and the protocol alone
    /// (`spate serve --discard`, `spate-lab bench-io`).
    pub fn discard(mut self) -> Self {
        self.ctx.discard = true;
        self.endpoint.set_config(receiver_config(true));
        self
    }

    /// Refuse sessions beyond `limits`.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.endpoint.set_max_sessions(limits.max_sessions);
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
    pub fn run(&mut self, stop: &Arc<AtomicBool>, log: impl FnMut(&SessionLog)) -> Result<()> {
        self.run_with_progress(stop, log, |_| {})
    }

    /// [`run`](Self::run), also calling `progress` about every 100 ms with the sessions'
    /// bytes held and to hold (for a one-session server, such as a download's receiving end).
    pub fn run_with_progress(
        &mut self,
        stop: &Arc<AtomicBool>,
        mut log: impl FnMut(&SessionLog),
        mut progress: impl FnMut(&Received),
    ) -> Result<()> {
        let mut last_progress = self.clock.now();
        let mut batch = RecvBatch::default();
        let mut out = vec![0u8; 2048 + 64];
        let mut idle_since = self.clock.now();
        let mut served = false;
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
                self.on_batch(now, &mut batch);
            }
            self.start_resumed_writers();
            self.take_rebuilt();
            let now = self.clock.now();
            // §6.9: sessions share the coding pool; up to 4 get the full 128 MiB each.
            // (Half-open sessions hold no copies: before validation nothing is kept.)
            let share = (CODING_POOL / self.endpoint.validated().max(1) as u64).min(KEEP_BUDGET);
            let mut next = now + MAX_WAIT;
            if self.rebuilder.pending() > 0 {
                // A rebuild takes milliseconds: look for its result soon.
                next = next.min(now + REBUILD_CHECK);
            }
            let mut ended = Vec::new();
            let mut requests = Vec::new();
            for (id, s) in self.endpoint.iter_mut() {
                s.rx.inner_mut().set_coding_budget(share);
                session::step(s, now, &self.socket, &mut out, &mut self.ctx)?;
                self.placed_since.append(&mut s.app.just_placed);
                if s.app.wants_answer {
                    s.app.wants_answer = false;
                    requests.push(id);
                }
                if s.app.answered {
                    // Its answer is ready and the COMPLETE went out in this step: the answer
                    // may open its session.
                    if let Some(mut a) = s.app.answer.take() {
                        a.go();
                        self.answers.insert(a.id, a);
                    }
                }
                let expired = s.expired(now);
                if s.rx.inner().is_closed() || expired {
                    ended.push((id, expired));
                } else if let Some(t) = s.rx.inner().poll_timeout() {
                    next = next.min(t);
                }
                if s.app.sink.as_ref().is_some_and(|k| k.is_behind()) {
                    // Its writer frees room as it goes: look again soon, to tell a sender
                    // held back by its Write Limit (spec §7.4).
                    next = next.min(now + WRITER_CHECK);
                }
            }
            for id in requests {
                self.start_answer(id);
            }
            for (id, expired) in ended {
                // An expired half-open session is forgotten (its sender's next HELLO must
                // work); one that ran is remembered (spec §4.1) and logged — but a request
                // that was answered is logged with its answer.
                if let Some(s) = self.endpoint.remove(now, id, !expired) {
                    self.ctx.claimed = self.ctx.claimed.saturating_sub(s.app.claimed);
                    if let Some(m) = s.rx.inner().manifest().filter(|_| !s.rx.inner().is_get()) {
                        self.ended_totals.0 += m.entries.len();
                        self.ended_totals.1 += m.total_bytes();
                    }
                    let answered = s.app.answered && s.app.error.is_none();
                    if !expired && !answered {
                        log(&session::log(&s, now));
                        served = true;
                    }
                }
            }
            let mut done = Vec::new();
            for (id, a) in self.answers.iter_mut() {
                if let Some(r) = a.finished() {
                    log(&a.log(&r));
                    done.push(*id);
                }
            }
            for id in done {
                self.answers.remove(&id);
                served = true;
            }
            if !self.answers.is_empty() {
                // Look at answers' threads now and then.
                next = next.min(now + MAX_WAIT);
            }
            if now.saturating_since(last_progress) >= PROGRESS_EVERY {
                last_progress = now;
                let mut r = self.take_placed();
                for (_, s) in self.endpoint.iter_mut() {
                    let st = s.rx.inner().stats();
                    r.bytes += st.delivered_bytes + st.resumed_bytes;
                    r.sessions += 1;
                    if let Some(m) = s.rx.inner().manifest() {
                        r.total += m.total_bytes();
                        r.entries += m.entries.len();
                    }
                }
                progress(&r);
            }
            if let Some(idle) = self.once {
                if !self.endpoint.is_empty() || !self.answers.is_empty() {
                    idle_since = now;
                } else if served || now.saturating_since(idle_since) > idle {
                    // The last entries placed, if the session ended between reports.
                    progress(&self.take_placed());
                    return Ok(());
                }
            }
            self.socket.wait(self.clock.until(next), false)?;
        }
        Ok(())
    }

    /// Every datagram of a receive batch, in order: an answer's to its thread, the others to
    /// the endpoint — opened on the pool first when the batch is large (`open.rs`).
    fn on_batch(&mut self, now: Instant, batch: &mut RecvBatch) {
        let mut all = batch.datagrams_mut();
        let openers: Vec<Option<spate_proto::secure::Opener>> = match &self.openers {
            Some(_) if all.len() >= open::MIN_PARALLEL => all
                .iter()
                .map(|(_, d)| {
                    (self.answer_of(d).is_none())
                        .then(|| self.endpoint.opener(d))
                        .flatten()
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut opened = vec![None; openers.len()];
        let sealed = openers.iter().filter(|o| o.is_some()).count();
        let parallel = sealed >= open::MIN_PARALLEL;
        if let (true, Some(pool)) = (parallel, &self.openers) {
            pool.open(&mut all, &openers, &mut opened);
            self.opened_on_pool += sealed as u64;
        }
        for (i, (from, d)) in all.into_iter().enumerate() {
            if let Some(a) = self.answer_of(d) {
                a.deliver(d);
            } else if parallel && openers[i].is_some() {
                self.on_datagram(now, from, d, Some(opened[i]));
            } else {
                self.on_datagram(now, from, d, None);
            }
        }
    }

    /// The answer (a download this server sends) that datagram `d` belongs to, by session
    /// id (§3.1).
    fn answer_of(&self, d: &[u8]) -> Option<&answer::Answer> {
        let id = d.get(2..6)?;
        self.answers
            .get(&u32::from_be_bytes([id[0], id[1], id[2], id[3]]))
    }

    /// One datagram for the endpoint; `opened`: already opened in place on the pool (its
    /// length, `None` if not authentic).
    fn on_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        d: &mut [u8],
        opened: Option<Option<usize>>,
    ) {
        let mut answer = [0u8; 128];
        let mut host = Admit {
            access: &mut self.access,
            root: &self.ctx.root,
        };
        // A writer that is behind takes no more data now: dropped unacknowledged, the DATA
        // (or REPAIR, which may rebuild chunks to write) is sent again, and the network
        // thread never waits for a disk.
        let room = |s: &Slot, d: &[u8]| {
            let ty = d[1] & 0x0f;
            (ty != PacketType::Data as u8 && ty != PacketType::Repair as u8)
                || s.app.sink.as_ref().is_none_or(|k| k.has_room(d.len()))
        };
        let handled = match opened {
            Some(n) => self.endpoint.handle_opened(now, from, d, n, room),
            None => self
                .endpoint
                .handle(now, from, d, &mut answer, &mut host, room),
        };
        match handled {
            Handled::Answer(n) => {
                let _ = self.socket.send(from, &answer[..n], n);
            }
            Handled::Session { id, chunk } => {
                let Some(s) = self.endpoint.get_mut(id) else {
                    return;
                };
                if let Some(c) = chunk {
                    if let Some(sink) = s.app.sink.as_mut() {
                        sink.write(c.object, c.offset, &d[c.payload]);
                    }
                }
                // §6.9: a block its symbols can now rebuild goes to the worker thread
                // (`take_rebuilt` writes what it rebuilt).
                while let Some(job) = s.rx.inner_mut().poll_rebuild_job() {
                    self.rebuilder.submit(id, job);
                }
                // After the chunk is queued: an ObjectComplete must follow its last write.
                session::drain_events(s, &mut self.ctx);
            }
            Handled::Opened(_) | Handled::Dropped => {}
        }
    }

    /// A report of the entries placed since the last one, with what the sessions that ended
    /// announced (no session in progress counted yet).
    fn take_placed(&mut self) -> Received {
        self.placed += self.placed_since.len();
        Received {
            entries: self.ended_totals.0,
            total: self.ended_totals.1,
            placed: self.placed,
            placed_paths: std::mem::take(&mut self.placed_since),
            ..Received::default()
        }
    }

    /// Start answering the request of session `id` (complete, its client's address proven),
    /// within `--max-sessions` together with the sessions receiving.
    fn start_answer(&mut self, id: u32) {
        let busy = self.answers.len() + self.endpoint.validated() > self.ctx.limits.max_sessions;
        // An id no session of this server uses (the loop routes by id).
        let mut answer_id = crate::random::u64() as u32;
        while self.endpoint.get_mut(answer_id).is_some() || self.answers.contains_key(&answer_id) {
            answer_id = crate::random::u64() as u32;
        }
        let Some(s) = self.endpoint.get_mut(id) else {
            return;
        };
        if busy {
            let why = format!(
                "busy: the server is serving its maximum of {} transfers (serve --max-sessions); \
                 try again later",
                self.ctx.limits.max_sessions
            );
            return session::refuse(s, why);
        }
        let Some(request) = s.rx.inner().manifest().cloned() else {
            return;
        };
        let job = answer::Job {
            root: s.app.root.clone(),
            request,
            resume: s.rx.inner().answer_resumes(),
            max_entries: self.ctx.limits.max_entries,
            peer: s.peer,
            client_key: s.rx.client_key(),
            identity: self.identity,
            cipher: s.rx.cipher(),
            id: answer_id,
            who: s.app.who.clone(),
            rate: self.answer_rate,
            socket: Arc::clone(&self.socket),
        };
        match answer::Answer::start(job) {
            Ok(a) => s.app.answer = Some(a),
            Err(e) => session::refuse(s, format!("the server cannot start a thread: {e}")),
        }
    }

    /// Give finished rebuilds back to their sessions, and write the chunks they rebuilt
    /// like DATA (§6.9).
    fn take_rebuilt(&mut self) {
        while let Some((id, done)) = self.rebuilder.finished() {
            let Some(s) = self.endpoint.get_mut(id) else {
                continue;
            };
            s.rx.inner_mut().finish_rebuild(done);
            while let Some(c) = s.rx.inner_mut().poll_rebuilt() {
                if let Some(sink) = s.app.sink.as_mut() {
                    sink.write(c.object, c.offset, &c.bytes);
                }
            }
            // After the chunks are queued: an ObjectComplete must follow their writes.
            session::drain_events(s, &mut self.ctx);
        }
    }

    /// Start the writers of resuming sessions, after closing older sessions of the same
    /// sender address that write the same files (so their files are closed and unlocked
    /// before the new writer looks at them).
    fn start_resumed_writers(&mut self) {
        let wanted: Vec<u32> = self
            .endpoint
            .iter_mut()
            .filter(|(_, s)| s.app.wants_writer)
            .map(|(id, _)| id)
            .collect();
        for id in wanted {
            let Some(s) = self.endpoint.get_mut(id) else {
                continue;
            };
            let ip = s.peer.ip();
            let paths: HashSet<String> = s.app.targets.iter().cloned().collect();
            for (other, s) in self.endpoint.iter_mut() {
                let shares = other != id
                    && s.peer.ip() == ip
                    && s.app.targets.iter().any(|p| paths.contains(p));
                if shares {
                    let msg = "superseded: a newer transfer of the same files started".to_owned();
                    s.rx.inner_mut().close(CloseCode::Application, &msg);
                    s.app.error.get_or_insert(msg);
                    if let Some(sink) = s.app.sink.as_mut() {
                        sink.abort(true);
                        sink.wait_idle();
                    }
                    s.app.sink = None;
                }
            }
            if let Some(s) = self.endpoint.get_mut(id) {
                s.app.wants_writer = false;
                session::start_sink(s, &self.ctx, true);
            }
        }
    }
}

/// Settings of new sessions: resumption offered unless discarding.
fn receiver_config(discard: bool) -> ReceiverConfig {
    ReceiverConfig {
        resume: !discard,
        rebuild_elsewhere: true,
        ..ReceiverConfig::default()
    }
}
