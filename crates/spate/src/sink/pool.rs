//! The writer threads every session shares: a fixed pool, not a thread per session.
//!
//! Each session has a *lane*: its queue of jobs and its writer state. A lane with jobs is
//! queued on the pool once; a worker takes it, runs up to [`BATCH`] of its jobs, and queues it
//! again at the back if more are waiting. So a session's jobs run in order and never on two
//! threads at once, sessions take turns, and one session with a slow disk (or a huge manifest
//! to create) occupies one worker at most — the others keep writing.
//!
//! A lane counts the bytes queued on it — the size of each queued job's buffer, the memory it
//! holds, not the bytes of data in it (a peer whose datagrams never continue one another made
//! each 1400-byte datagram hold a 256 KiB buffer, see `Sink::flush`); the network thread asks
//! [`Lane::has_room`] before handing a session more data and drops DATA it cannot queue (the
//! sender retransmits it), so the network thread never blocks on a writer and memory for
//! queued data is bounded by [`LANE_BYTES`] per session and [`POOL_BYTES`] in all. Dropping is
//! the last resort: each session reports its lane's [`Lane::room`] to its sender (spec §7.4),
//! which keeps what it sends within it. The room a lane offers is its share of the pool — the
//! pool divided among the lanes holding data, itself included — so that the rooms promised
//! together never pass what the pool has free: with up to four sessions behind, each may still
//! have a whole [`LANE_BYTES`]; with eight, 32 MiB each (before, each was offered the pool's
//! whole free space, and eight stalled sessions were promised 512 MiB of a 256 MiB pool, the
//! excess dropped on arrival and sent again).
//!
//! Why our own: the work is a queue per session with strict order inside it and turns between
//! them. A general thread pool (rayon, threadpool) runs independent tasks and would either
//! reorder a session's writes or need this bookkeeping around it anyway.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::spares::Spares;
use super::writer::Writer;
use super::Job;

/// Jobs a worker runs from one lane before giving the next lane its turn: 16 jobs of up to
/// 256 KiB, 4 MiB, a few milliseconds of disk time.
const BATCH: usize = 16;
/// Bytes of received data queued for one session, at most: 64 MiB. It is also the room a
/// session offers its sender (spec §7.4), which bounds the sender's new data in flight, so it
/// covers the bandwidth-delay products Spate is built for: 1 Gbit/s × 500 ms, 10 Gbit/s ×
/// 50 ms. Memory is taken only while a writer is behind.
pub const LANE_BYTES: usize = 64 << 20;
/// Bytes queued for all sessions together, at most: 256 MiB (bounds memory with many sessions).
pub const POOL_BYTES: usize = 256 << 20;

/// The shared writer threads. Dropping it finishes the queued jobs and joins the threads.
pub struct WriterPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Staging buffers of direct I/O held by all sessions (`direct.rs`, `POOL_BLOCKS`).
    staged: Arc<AtomicUsize>,
}

struct Shared {
    ready: Mutex<VecDeque<Arc<Lane>>>,
    wake: Condvar,
    stop: AtomicBool,
    queued: AtomicUsize,
    /// Lanes holding queued bytes.
    active: AtomicUsize,
    /// Bytes per second all workers together may write (`spate serve --write-rate`), and
    /// when the writes so far are paid for.
    pace: Option<(u64, Mutex<std::time::Instant>)>,
    /// Written buffers, for the network thread to fill again (`spares.rs`).
    spares: Spares,
}

impl Shared {
    /// Wait until `bytes` more may be written at the pool's write rate, if it has one. Each
    /// write books its time on one shared clock, so the workers together keep to the rate.
    fn pace(&self, bytes: usize) {
        let Some((rate, booked)) = &self.pace else {
            return;
        };
        let cost = std::time::Duration::from_secs_f64(bytes as f64 / *rate as f64);
        let until = {
            let mut b = lock(booked);
            let start = (*b).max(std::time::Instant::now());
            *b = start + cost;
            *b
        };
        std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
    }
}

/// One session's queue on the pool.
pub struct Lane {
    shared: Arc<Shared>,
    state: Mutex<LaneState>,
    idle: Condvar,
    queued: AtomicUsize,
}

struct LaneState {
    jobs: VecDeque<Job>,
    /// The session's writer; `None` while a worker runs it (or before its `Start` job ran).
    writer: Option<Box<Writer>>,
    /// On the ready queue or running.
    scheduled: bool,
}

/// Lock `m` even if a thread panicked while holding it (the writer pool's queues, the file
/// reader's position): what these locks guard is consistent after every statement.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl WriterPool {
    /// Start `threads` workers (at least one).
    pub fn new(threads: usize) -> std::io::Result<WriterPool> {
        Self::with_write_rate(threads, None)
    }

    /// Start `threads` workers that together write at most `rate` bytes per second (none:
    /// as fast as the disk takes them). For servers whose disks are shared with other work
    /// (`spate serve --write-rate`); senders slow down to it through the room each session
    /// reports (spec §7.4), not by loss.
    pub fn with_write_rate(threads: usize, rate: Option<u64>) -> std::io::Result<WriterPool> {
        let shared = Arc::new(Shared {
            ready: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            pace: rate
                .filter(|&r| r > 0)
                .map(|r| (r, Mutex::new(std::time::Instant::now()))),
            spares: Spares::default(),
        });
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let s = shared.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("spate-writer-{i}"))
                    .spawn(move || work(&s))?,
            );
        }
        Ok(WriterPool {
            shared,
            threads: handles,
            staged: Arc::default(),
        })
    }

    /// A pool whose jobs never run (for tests of the queue bounds).
    #[cfg(test)]
    pub fn paused() -> WriterPool {
        let mut p = WriterPool::new(1).expect("a thread");
        p.shared.stop.store(true, Ordering::SeqCst);
        p.shared.wake.notify_all();
        for t in p.threads.drain(..) {
            let _ = t.join();
        }
        p
    }

    /// Four workers: enough that a slow session leaves others a thread while disks overlap
    /// their requests; file writing needs little CPU (hashing is ~1 GB/s per core).
    pub fn default_size() -> usize {
        4
    }

    /// The count of staging buffers the pool's sessions hold (`direct.rs`).
    pub(super) fn staged(&self) -> Arc<AtomicUsize> {
        self.staged.clone()
    }

    /// Staging buffers the pool's sessions hold now.
    #[cfg(test)]
    pub fn staged_buffers(&self) -> usize {
        self.staged.load(Ordering::Acquire)
    }

    /// A new, empty lane for a session.
    pub fn lane(&self) -> Arc<Lane> {
        Arc::new(Lane {
            shared: self.shared.clone(),
            state: Mutex::new(LaneState {
                jobs: VecDeque::new(),
                writer: None,
                scheduled: false,
            }),
            idle: Condvar::new(),
            queued: AtomicUsize::new(0),
        })
    }
}

impl Drop for WriterPool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Lane {
    /// Queue `job` (after every job queued before it). A write counts by its buffer's size.
    pub fn push(self: &Arc<Self>, job: Job) {
        if let Job::Write { buf, .. } = &job {
            let held = buf.len();
            if self.queued.fetch_add(held, Ordering::Relaxed) == 0 {
                self.shared.active.fetch_add(1, Ordering::Relaxed);
            }
            self.shared.queued.fetch_add(held, Ordering::Relaxed);
        }
        let mut st = lock(&self.state);
        st.jobs.push_back(job);
        if !st.scheduled {
            st.scheduled = true;
            drop(st);
            lock(&self.shared.ready).push_back(self.clone());
            self.shared.wake.notify_one();
        }
    }

    /// Whether `len` more bytes may be queued.
    pub fn has_room(&self, len: usize) -> bool {
        self.queued.load(Ordering::Relaxed) + len <= LANE_BYTES
            && self.shared.queued.load(Ordering::Relaxed) + len <= POOL_BYTES
    }

    /// Bytes more this lane offers to queue (what its session reports, spec §7.4): its share
    /// of the pool less what it holds, and never more than the pool has free.
    pub fn room(&self) -> usize {
        let queued = self.queued.load(Ordering::Relaxed);
        let others = self.shared.active.load(Ordering::Relaxed);
        let sharing = if queued == 0 {
            others + 1
        } else {
            others.max(1)
        };
        let share = (POOL_BYTES / sharing).min(LANE_BYTES);
        let pool = POOL_BYTES.saturating_sub(self.shared.queued.load(Ordering::Relaxed));
        share.saturating_sub(queued).min(pool)
    }

    /// A write whose buffer held `len` bytes is done.
    fn release(&self, len: usize) {
        if self.queued.fetch_sub(len, Ordering::Relaxed) == len {
            self.shared.active.fetch_sub(1, Ordering::Relaxed);
        }
        self.shared.queued.fetch_sub(len, Ordering::Relaxed);
    }

    /// A spare write buffer of `len` bytes, if the pool kept one (`spares.rs`).
    pub fn spare(&self, len: usize) -> Option<Vec<u8>> {
        self.shared.spares.take(len)
    }

    /// Give a write buffer that is done with to the pool's spares (`spares.rs`).
    pub fn give_spare(&self, buf: Vec<u8>) {
        let queued = self.shared.queued.load(Ordering::Relaxed);
        self.shared.spares.give(buf, queued);
    }

    /// Bytes of spare write buffers the pool keeps.
    #[cfg(test)]
    pub fn spare_bytes(&self) -> usize {
        self.shared.spares.bytes()
    }

    /// Bytes of the buffers of the write jobs queued.
    #[cfg(test)]
    pub fn held_bytes(&self) -> usize {
        let st = lock(&self.state);
        st.jobs
            .iter()
            .map(|j| match j {
                Job::Write { buf, .. } => buf.len(),
                _ => 0,
            })
            .sum()
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Wait until every job queued so far has run.
    pub fn wait_idle(&self) {
        let mut st = lock(&self.state);
        while st.scheduled {
            st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

fn work(shared: &Shared) {
    loop {
        let lane = {
            let mut ready = lock(&shared.ready);
            loop {
                if let Some(l) = ready.pop_front() {
                    break l;
                }
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                ready = shared.wake.wait(ready).unwrap_or_else(|p| p.into_inner());
            }
        };
        let (mut writer, batch) = {
            let mut st = lock(&lane.state);
            let n = st.jobs.len().min(BATCH);
            (st.writer.take(), st.jobs.drain(..n).collect::<Vec<_>>())
        };
        for job in batch {
            let (bytes, held) = match &job {
                Job::Write { len, buf, .. } => (*len, Some(buf.len())),
                _ => (0, None),
            };
            shared.pace(bytes);
            let buf = Writer::run(&mut writer, job);
            if let Some(held) = held {
                lane.release(held);
            }
            if let Some(buf) = buf {
                lane.give_spare(buf);
            }
        }
        let mut st = lock(&lane.state);
        st.writer = writer;
        if st.jobs.is_empty() {
            st.scheduled = false;
            lane.idle.notify_all();
        } else {
            drop(st);
            lock(&shared.ready).push_back(lane.clone());
            shared.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(lane: &Arc<Lane>, len: usize) {
        lane.push(Job::Write {
            object: 1,
            offset: 0,
            buf: vec![0; len],
            at: 0,
            len,
        });
    }

    /// What the lanes offer together never passes what the pool has free, however many
    /// sessions are behind; a session alone (or one of four) still gets a whole lane.
    #[test]
    fn the_rooms_offered_together_fit_in_the_pool() {
        let pool = WriterPool::paused();
        let first = pool.lane();
        assert_eq!(first.room(), LANE_BYTES);
        hold(&first, 1 << 20);
        assert_eq!(first.room(), LANE_BYTES - (1 << 20));
        let lanes: Vec<_> = (0..7).map(|_| pool.lane()).collect();
        for l in &lanes {
            hold(l, 1 << 20);
        }
        let all: Vec<_> = std::iter::once(&first).chain(&lanes).collect();
        let offered: usize = all.iter().map(|l| l.room()).sum();
        let free = POOL_BYTES - 8 * (1 << 20);
        assert!(offered <= free, "{offered} offered, {free} free");
        assert!(offered >= free - 8, "{offered} offered, {free} free");
        // A newcomer with nothing queued counts itself among the sharers.
        let new = pool.lane();
        assert_eq!(new.room(), POOL_BYTES / 9);
        // Written out, a lane stops counting as a sharer.
        for l in &lanes {
            l.release(1 << 20);
        }
        assert_eq!(first.room(), LANE_BYTES - (1 << 20));
        assert_eq!(pool.shared.active.load(Ordering::Relaxed), 1);
    }
}
