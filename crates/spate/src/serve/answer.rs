//! Answering a download (spec §2.1, §5.6): the session the server opens to send what a
//! client's request named.
//!
//! A request arrives as a GET session, received like any other. Once it is complete (and its
//! client has proved its address) the server starts one thread per answer, which:
//!
//! 1. resolves the request beneath the directory the client's key may read (`request.rs`,
//!    following no link) and, if the request asked to resume, computes the files' digests;
//! 2. says whether it can ([`Answer::poll_ready`]): the request session then reports
//!    COMPLETE, or refuses with the reason (no match, a directory without `-r`, …);
//! 3. once the COMPLETE is on its way ([`Answer::go`]), opens the answering session as its
//!    sender: to the address the request came from (proven, so nothing is reflected at a
//!    victim), from the server's own socket (the port the client reached: its NAT and firewall
//!    let the answer through), with the server's key as its identity and the client's key —
//!    proven in the request's handshake — as the peer it expects.
//!
//! The server's loop reads the socket for everyone; it hands the datagrams of an answer's
//! session id to that answer's inbox (bounded: a flood is dropped, as the socket would drop
//! it). Answers count against `--max-sessions` with the receiving sessions, so a client cannot
//! start more threads than the operator allows.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use spate_proto::coding::Fec;
use spate_proto::secure::Cipher;
use spate_proto::{Manifest, RateConfig};

use super::SessionLog;
use crate::confine::Root;
use crate::send::{send_via, Link, Security, SendConfig, SendResult};
use crate::source::FileSource;
use crate::udp::Socket;

/// Datagrams an answer's inbox holds before further ones are dropped (its feedback arrives
/// about every 10 ms; 1024 is seconds of it).
const INBOX: usize = 1024;
/// How long a resolved answer waits for its request session to report COMPLETE.
const GO_WAIT: Duration = Duration::from_secs(60);
/// The answering session's handshake: the client is waiting for it, so a short timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Silence after which the answering session gives up.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// What an answer needs to start.
pub(super) struct Job {
    /// Where the client's key may read.
    pub root: Root,
    /// The request (§5.6).
    pub request: Manifest,
    /// The request set RESUME: digests first, and ask the client what it holds.
    pub resume: bool,
    /// Entries the answer may list (`--max-entries`).
    pub max_entries: usize,
    /// The client's proven address.
    pub peer: SocketAddr,
    /// The client's static key, proven by the request's handshake.
    pub client_key: [u8; 32],
    /// The server's static private key.
    pub identity: [u8; 32],
    /// The request's packet cipher, which the answer uses too.
    pub cipher: Cipher,
    /// The client, for the log.
    pub who: String,
    /// How to send.
    pub rate: RateConfig,
    /// The answering session's id (not used by any session of the server).
    pub id: u32,
    /// The server's socket.
    pub socket: Arc<Socket>,
}

/// An answer in progress.
pub(super) struct Answer {
    /// The answering session's id.
    pub id: u32,
    /// The client's address.
    pub peer: SocketAddr,
    who: String,
    started: std::time::Instant,
    inbox: mpsc::SyncSender<Vec<u8>>,
    ready: mpsc::Receiver<Result<(), String>>,
    go: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Result<SendResult, String>>>,
}

impl Answer {
    /// Start answering `job` on a thread of its own.
    pub fn start(job: Job) -> std::io::Result<Answer> {
        let (inbox, inbox_rx) = mpsc::sync_channel(INBOX);
        let (ready_tx, ready) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let (id, peer, who) = (job.id, job.peer, job.who.clone());
        let thread = std::thread::Builder::new()
            .name(format!("spate-answer-{id:08x}"))
            .spawn(move || run(job, &ready_tx, &go_rx, &inbox_rx))?;
        Ok(Answer {
            id,
            peer,
            who,
            started: std::time::Instant::now(),
            inbox,
            ready,
            go: Some(go),
            thread: Some(thread),
        })
    }

    /// `Some(Ok)`: the request is resolved, the answer can start; `Some(Err)`: it cannot,
    /// for the reason given (for the client); `None`: not known yet.
    pub fn poll_ready(&self) -> Option<Result<(), String>> {
        match self.ready.try_recv() {
            Ok(r) => Some(r),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => {
                Some(Err("the server could not prepare the answer".to_owned()))
            }
        }
    }

    /// The request session reported COMPLETE: open the answering session.
    pub fn go(&mut self) {
        if let Some(go) = self.go.take() {
            let _ = go.send(());
        }
    }

    /// A datagram of the answering session, from the server's socket.
    pub fn deliver(&self, d: &[u8]) {
        let _ = self.inbox.try_send(d.to_vec());
    }

    /// The answer ended: how.
    pub fn finished(&mut self) -> Option<Result<SendResult, String>> {
        if !self.thread.as_ref().is_some_and(JoinHandle::is_finished) {
            return None;
        }
        let t = self.thread.take()?;
        Some(
            t.join()
                .unwrap_or_else(|_| Err("the answer's thread failed".to_owned())),
        )
    }

    /// The log line of the answer that ended with `r`.
    pub fn log(&self, r: &Result<SendResult, String>) -> SessionLog {
        let mut log = SessionLog {
            session: self.id,
            direction: "sent",
            peer: self.peer,
            client: self.who.clone(),
            cipher: "",
            dropped_not_authentic: 0,
            objects: 0,
            bytes: 0,
            resumed: 0,
            damaged_blocks: 0,
            direct_bytes: None,
            seconds: self.started.elapsed().as_secs_f64(),
            error: None,
        };
        match r {
            Ok(s) => {
                log.cipher = s.cipher.name();
                log.dropped_not_authentic = s.dropped_not_authentic;
                log.objects = s.entries;
                log.bytes = s.stats.delivered_bytes;
                log.resumed = s.stats.resumed_bytes;
            }
            Err(e) => log.error = Some(e.clone()),
        }
        log
    }
}

fn run(
    job: Job,
    ready: &mpsc::Sender<Result<(), String>>,
    go: &mpsc::Receiver<()>,
    inbox: &mpsc::Receiver<Vec<u8>>,
) -> Result<SendResult, String> {
    let prepared =
        crate::request::resolve(&job.root, &job.request, job.max_entries).and_then(|mut plan| {
            if job.resume {
                // §8.3: the client checks what it holds against the digests.
                plan.compute_digests(|_| {})
                    .map_err(|e| format!("cannot read the files: {e:#}"))?;
            } else {
                plan.stream_digests();
            }
            Ok(plan)
        });
    let plan = match prepared {
        Ok(p) => p,
        Err(why) => {
            let _ = ready.send(Err(why.clone()));
            return Err(why);
        }
    };
    let _ = ready.send(Ok(()));
    go.recv_timeout(GO_WAIT)
        .map_err(|_| "the request ended before its answer could start".to_owned())?;
    let cfg = SendConfig {
        server: job.peer,
        rate: job.rate,
        connect_timeout: CONNECT_TIMEOUT,
        idle_timeout: IDLE_TIMEOUT,
        resume: job.resume,
        fec: Fec::Auto,
        security: Security {
            identity: job.identity,
            server_key: job.client_key,
            cipher: job.cipher,
            auth: [0; 16],
        },
        // A server bounds its threads by its sessions: an answer seals on its own thread.
        sealers: 0,
    };
    let mut source = FileSource::new(&plan.sources, &plan.manifest.entries);
    let link = Link::shared(&job.socket, inbox);
    send_via(link, job.id, &plan.manifest, &mut source, &cfg, |_| {}).map_err(|e| format!("{e:#}"))
}
