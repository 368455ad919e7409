//! Sealing on several cores (spec §9.4): the sending loop builds each batch of datagrams and
//! hands it, with its [`Sealer`], to one of N worker threads, which seal it and send it — in
//! the order the loop built the batches, so the wire sees packet numbers in order, as from one
//! thread.
//!
//! **Why.** One core seals AES-256-GCM at ~33 Gbit/s of 1448-byte packets here
//! (`spate-lab bench-aead`), and sealing was 30–46 % of the sending thread's CPU in `bench-io`;
//! the rest is building packets (the core, on the loop's thread) and the GSO `sendmsg` (which
//! moves to the workers too). With N workers the loop's thread keeps only the building, and
//! sealing and sending scale with N until the socket — one per transfer — is the limit.
//!
//! **Order.** Each batch takes a ticket. A worker seals its batch, then waits for its turn (a
//! mutex and a condition variable) and sends: sealing runs in parallel, sending in ticket order.
//! Reordering would not break the protocol, but it would look like loss to the sender's loss
//! detection until its reordering window grew.
//!
//! **Only when CPU-bound.** Only full batches go to the workers: a partial batch means pacing
//! released fewer packets than a GSO batch holds, so the transfer is not CPU-bound, and waking
//! a thread would cost more than sealing there. A partial batch is sealed and sent by the loop
//! itself when no batch is out at the workers (else it joins the queue, to keep the order).
//!
//! **Memory.** `2 N + 2` batch buffers (64 KiB each at the default datagram size) circulate
//! between the loop and the workers; the loop waits for one to come back when all are out,
//! which is the backpressure of sealing. A batch's [`Sealer`] also holds the send buffer's
//! blocks its DATA payloads are encrypted from (`spate-proto` `sender/deferred.rs`): at most
//! two 1 MiB blocks per batch, usually the same ones, beyond the send buffer's own budget only
//! while a block the session released waits for its worker.

use std::io;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::Scope;
use std::time::Duration;

use spate_proto::secure::Sealer;

use crate::udp::Socket;

/// How long a worker waits for the socket to take more before looking again.
const WRITABLE_WAIT: Duration = Duration::from_millis(1);
/// A batch not back after this long means a worker is stuck (one takes microseconds).
const STUCK: Duration = Duration::from_secs(10);

/// Crypto threads by default (`spate send --sealers`, `spate serve --openers`): none below 4
/// cores (the loop, the reader or writers and — on a test machine — the other end already
/// use 2–3), else all but two, at most 8.
pub fn auto_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 4 {
        0
    } else {
        (cores - 2).min(8)
    }
}

struct Job {
    ticket: u64,
    buf: Vec<u8>,
    len: usize,
    segment: usize,
    sealer: Option<Sealer>,
    to: SocketAddr,
}

struct Shared {
    /// The ticket whose batch goes out next.
    turn: Mutex<u64>,
    turned: Condvar,
    /// The first send error of any worker.
    error: Mutex<Option<io::Error>>,
}

/// The workers and the buffers in circulation (see the module documentation).
pub struct SealPool {
    jobs: Vec<mpsc::SyncSender<Job>>,
    free: mpsc::Receiver<Vec<u8>>,
    shared: Arc<Shared>,
    next_ticket: u64,
    /// Batches at the workers, not yet back.
    out: usize,
    /// Buffers back from the workers.
    spare: Vec<Vec<u8>>,
    /// Buffers made so far (at most `2 N + 2`).
    made: usize,
    buf_len: usize,
}

impl SealPool {
    /// Start `n` (≥ 1) workers in `scope`, sending on `socket`; batches are `buf_len` bytes.
    pub fn start<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        socket: &'env Socket,
        n: usize,
        buf_len: usize,
    ) -> SealPool {
        let shared = Arc::new(Shared {
            turn: Mutex::new(0),
            turned: Condvar::new(),
            error: Mutex::new(None),
        });
        let (free_tx, free) = mpsc::channel();
        let mut jobs = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            let (tx, rx) = mpsc::sync_channel::<Job>(4);
            let shared = Arc::clone(&shared);
            let free_tx = free_tx.clone();
            scope.spawn(move || {
                for job in rx {
                    let buf = work(socket, &shared, job);
                    if free_tx.send(buf).is_err() {
                        break;
                    }
                }
            });
            jobs.push(tx);
        }
        SealPool {
            jobs,
            free,
            shared,
            next_ticket: 0,
            out: 0,
            spare: Vec::new(),
            made: 0,
            buf_len,
        }
    }

    /// Batches handed out and not yet sent.
    pub fn outstanding(&mut self) -> usize {
        while let Ok(b) = self.free.try_recv() {
            self.out -= 1;
            self.spare.push(b);
        }
        self.out
    }

    /// A send error of a worker, once.
    fn error(&self) -> io::Result<()> {
        match self.shared.error.lock().ok().and_then(|mut e| e.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// An empty batch buffer: a returned one, a new one while fewer than `2 N + 2` exist, or
    /// — all out — the first to come back.
    pub fn buffer(&mut self) -> io::Result<Vec<u8>> {
        self.outstanding();
        if let Some(b) = self.spare.pop() {
            return Ok(b);
        }
        if self.made < self.limit() {
            self.made += 1;
            return Ok(vec![0; self.buf_len]);
        }
        match self.free.recv_timeout(STUCK) {
            Ok(b) => {
                self.out -= 1;
                Ok(b)
            }
            Err(_) => Err(stuck()),
        }
    }

    fn limit(&self) -> usize {
        2 * self.jobs.len() + 2
    }

    /// Seal (with `sealer`, if any) and send the first `len` bytes of `buf` to `to` in
    /// `segment`-byte datagrams, after every batch submitted before. An error is one a
    /// worker met sending an earlier batch.
    pub fn submit(
        &mut self,
        buf: Vec<u8>,
        len: usize,
        segment: usize,
        sealer: Option<Sealer>,
        to: SocketAddr,
    ) -> io::Result<()> {
        self.error()?;
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.out += 1;
        let worker = &self.jobs[(ticket % self.jobs.len() as u64) as usize];
        let job = Job {
            ticket,
            buf,
            len,
            segment,
            sealer,
            to,
        };
        worker.send(job).map_err(|_| stuck())
    }

    /// Wait until every batch submitted has been sent; an error a worker met sending.
    pub fn drain(&mut self) -> io::Result<()> {
        while self.out > 0 {
            self.free.recv_timeout(STUCK).map_err(|_| stuck())?;
            self.out -= 1;
        }
        self.error()
    }
}

/// A worker's part of one job: seal, wait for the turn, send; the buffer back.
fn work(socket: &Socket, shared: &Shared, mut job: Job) -> Vec<u8> {
    if let Some(s) = &job.sealer {
        s.seal_batch(&mut job.buf[..job.len], job.segment);
    }
    // Tests: one batch in three is slow to seal, so that without the turns later batches
    // would overtake it.
    #[cfg(test)]
    if job.ticket % 3 == 0 {
        std::thread::sleep(Duration::from_micros(300));
    }
    let Ok(mut turn) = shared.turn.lock() else {
        return job.buf;
    };
    while *turn != job.ticket {
        turn = match shared.turned.wait(turn) {
            Ok(t) => t,
            Err(_) => return job.buf,
        };
    }
    let sent = send_all(socket, &job);
    *turn += 1;
    drop(turn);
    shared.turned.notify_all();
    if let Err(e) = sent {
        if let Ok(mut slot) = shared.error.lock() {
            slot.get_or_insert(e);
        }
    }
    job.buf
}

fn stuck() -> io::Error {
    io::Error::other("a sealing thread stopped (see --sealers)")
}

/// Send a job's batch, waiting while the kernel has no room (never dropping it).
fn send_all(socket: &Socket, job: &Job) -> io::Result<()> {
    loop {
        if socket.send(job.to, &job.buf[..job.len], job.segment)? {
            return Ok(());
        }
        socket.wait_writable(WRITABLE_WAIT)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches handed to three workers leave in the order they were submitted, whole.
    #[test]
    fn batches_leave_in_submission_order() {
        let rx = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let tx = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let to = rx.local_addr().unwrap();
        const BATCHES: u32 = 300;
        const PER: usize = 4;
        const SEG: usize = 64;
        std::thread::scope(|scope| {
            let mut pool = SealPool::start(scope, &tx, 3, PER * SEG);
            for b in 0..BATCHES {
                let mut buf = pool.buffer().unwrap();
                for (i, seg) in buf.chunks_mut(SEG).enumerate() {
                    seg[..4].copy_from_slice(&(b * PER as u32 + i as u32).to_be_bytes());
                }
                pool.submit(buf, PER * SEG, SEG, None, to).unwrap();
            }
            assert!(pool.drain().is_ok());
            assert_eq!(pool.outstanding(), 0);
        });
        let mut got = Vec::new();
        let mut batch = crate::udp::RecvBatch::default();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while got.len() < BATCHES as usize * PER && std::time::Instant::now() < end {
            while rx.recv(&mut batch).unwrap() > 0 {
                batch.for_each(|_, d| {
                    for seg in d.chunks(SEG) {
                        got.push(u32::from_be_bytes([seg[0], seg[1], seg[2], seg[3]]));
                    }
                });
            }
            rx.wait(Duration::from_millis(10), false).unwrap();
        }
        let want: Vec<u32> = (0..BATCHES * PER as u32).collect();
        assert_eq!(got, want);
    }
}
