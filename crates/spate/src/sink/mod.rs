//! The receiver's writing side: received bytes into temporary files, then digest check and
//! rename into place, on a pool of writer threads shared by all sessions.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | [`Sink`], the network thread's handle on one session's writer |
//! | `pool.rs` | the writer threads, a lane (ordered queue) per session, queued-bytes bounds |
//! | `writer.rs` | one session's files: temporaries, block hashes, journal, verify and rename |
//! | `part.rs` | opening a temporary file so that it is this session's alone |
//! | `held.rs` | what a resuming session already holds |
//! | `spares.rs` | written buffers kept for reuse, pool-wide and bounded |
//! | `direct.rs` | writing with `O_DIRECT`: aligned blocks, staging, fallbacks |
//!
//! For each file the writer creates `.NAME.spate-part` next to the final name, sized to the
//! file (a sparse file: ranges that arrive as zeros are left as holes). The temporary is
//! locked (`flock`) by the session writing it, so no two sessions ever write one temporary:
//! a second transfer of the same destination while the first is writing it is refused with a
//! message saying so. The writer hashes each 1 MiB block as its bytes are written
//! (`treehash.rs`). When the protocol reports the object complete, the writer assembles the
//! file's BLAKE3 digest from the blocks', compares it with the manifest's, applies permission
//! bits (setuid/setgid/sticky dropped) and modification time, and renames it over the final
//! name — which may be a regular file (replaced, as scp does) but never a directory, FIFO,
//! device or socket. A mismatch removes the temporary file and fails the session with a
//! message naming the file: a corrupt file is never put in place. Two transfers of one file
//! one after the other, or overlapping only after the first placed it: the last rename wins,
//! and each placed file is whole and verified.
//!
//! The network thread coalesces contiguous chunks into 256 KiB buffers; written buffers go
//! back to the pool and are filled again (`spares.rs`).
//!
//! **Resume.** Beside each temporary file the writer keeps a journal of the 1 MiB blocks
//! written and their digests (`journal.rs`). A session that resumes reuses the blocks of a
//! partial file that still match its journal and files already in place with the right digest;
//! everything else is written again. On failure a resuming session keeps its partial files and
//! journals for the next attempt; other sessions remove them, and the directories they created
//! that are still empty. A file whose digest or writes failed loses its own partial file
//! either way, and only its own.

mod direct;
mod held;
mod part;
mod pool;
mod spares;
#[cfg(test)]
mod tests;
mod writer;

use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;

use spate_proto::Manifest;

use crate::confine::Root;
use crate::journal::BLOCK;
pub use held::{find_held, Held};
pub(crate) use pool::lock;
pub use pool::{Lane, WriterPool, LANE_BYTES, POOL_BYTES};

/// Size of a write buffer: 256 KiB (181 chunks), large sequential writes.
const WRITE_BUF: usize = 256 << 10;
/// A buffer less than 1/`SPARSE` full is queued as a copy of its bytes (`Sink::flush`).
const SPARSE: usize = 4;

/// Work for a session's writer, run in order on the pool.
pub enum Job {
    /// Create the writer: prepare every entry's place (creating parent directories) and, when
    /// resuming, find what is already held.
    Start {
        root: Root,
        manifest: Manifest,
        placed: Vec<String>,
        resume: bool,
        back: Sender<Outcome>,
        /// Write with `O_DIRECT`, staging within the pool's count of buffers (`direct.rs`).
        direct: Option<direct::Budget>,
    },
    /// Bytes of `object` at `offset`: `buf[at..at + len]`.
    Write {
        object: u32,
        offset: u64,
        buf: Vec<u8>,
        at: usize,
        len: usize,
    },
    /// Every byte of the object was handed over: verify and place it.
    Finish(u32),
    /// The session failed: remove temporary files (and directories it created that are still
    /// empty), or keep them (with their journals) for a resume.
    Abort { keep: bool },
    /// The session is gone: close its files.
    Close,
}

/// What the writer reports back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// What a resuming session already holds, as (object, byte range) pairs for HAVE, and how
    /// many journaled blocks no longer matched (they are sent again).
    Held {
        ranges: Vec<(u32, Range<u64>)>,
        damaged_blocks: u64,
    },
    /// The object is verified and in place.
    Done(u32),
    /// The session cannot start (a path it may not write); the message says why.
    Refused(String),
    /// The transfer cannot succeed; the message says why and what to do. The failing file's
    /// temporary file is gone; the caller decides about the others with [`Sink::abort`].
    Failed(String),
}

/// The network thread's handle on a session's writer. Never blocks: data the writer cannot
/// take now is refused by [`has_room`](Sink::has_room) before it is handed over.
pub struct Sink {
    lane: Arc<Lane>,
    back: Receiver<Outcome>,
    /// The coalescing buffer being filled.
    cur: Option<Coalescing>,
    /// The writer is gone (its start was refused) and said so: nothing more will come.
    gone: bool,
    /// With direct I/O (`direct.rs`), the bytes the writer wrote with `O_DIRECT`. Each buffer
    /// then holds bytes of one block only, from an aligned place, so that a block that
    /// arrives in order goes to the disk as it is, without being staged.
    direct_bytes: Option<Arc<std::sync::atomic::AtomicU64>>,
}

/// Contiguous bytes of one object, gathered for one write.
struct Coalescing {
    object: u32,
    /// File offset of the first byte.
    offset: u64,
    buf: Vec<u8>,
    /// Where the bytes start in `buf` (aligned to [`direct::ALIGN`] with direct I/O).
    at: usize,
    used: usize,
}

impl Sink {
    /// Start a writer on `pool` for `manifest` below `root`, its entries written at `placed`
    /// (from [`Root::placed_paths`]). With `resume`, the writer first looks for what is
    /// already held and reports it ([`Outcome::Held`]) before anything else. Returns at once:
    /// directories are created on the pool, and a path that may not be written is reported as
    /// [`Outcome::Refused`]. With `direct`, whole blocks are written with `O_DIRECT` where the
    /// file system takes it (`direct.rs`).
    pub fn start(
        pool: &WriterPool,
        root: Root,
        manifest: &Manifest,
        placed: &[String],
        resume: bool,
        direct: bool,
    ) -> Sink {
        // Unbounded on purpose: the writer must never block on it. Its length is bounded
        // anyway: one outcome per object, and a few more.
        let (back_tx, back) = channel();
        let lane = pool.lane();
        let budget = direct.then(|| direct::Budget::new(pool.staged()));
        let direct_bytes = budget.as_ref().map(direct::Budget::direct_bytes);
        lane.push(Job::Start {
            root,
            manifest: manifest.clone(),
            placed: placed.to_vec(),
            resume,
            back: back_tx,
            direct: budget,
        });
        Sink {
            lane,
            back,
            cur: None,
            gone: false,
            direct_bytes,
        }
    }

    /// With direct I/O, the bytes written with `O_DIRECT` so far (the rest of the file bytes
    /// went through the page cache: last blocks, spilled blocks, file systems that refuse it).
    pub fn direct_bytes(&self) -> Option<u64> {
        self.direct_bytes
            .as_ref()
            .map(|n| n.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Whether `len` more bytes can be queued now. When not, the caller drops the datagram
    /// unacknowledged (the sender sends it again), so a slow disk never blocks the network
    /// thread and queued data stays within [`LANE_BYTES`] per session.
    pub fn has_room(&self, len: usize) -> bool {
        self.lane.has_room(len + self.span())
    }

    /// Files are written with `O_DIRECT`.
    fn direct(&self) -> bool {
        self.direct_bytes.is_some()
    }

    /// Bytes one coalescing buffer holds: [`WRITE_BUF`], or a block with direct I/O.
    fn span(&self) -> usize {
        if self.direct() {
            BLOCK as usize
        } else {
            WRITE_BUF
        }
    }

    /// Bytes this session's writer can still take (what the session offers its sender as a
    /// Write Limit, spec §7.4): the queue's room, less the buffer being filled and one more
    /// for the datagram [`has_room`](Self::has_room) must still accept.
    pub fn room(&self) -> u64 {
        let filling = self.cur.as_ref().map_or(0, |c| c.buf.len());
        self.lane.room().saturating_sub(filling + 2 * self.span()) as u64
    }

    /// True while the writer has bytes queued that it has not written.
    pub fn is_behind(&self) -> bool {
        self.lane.queued() > 0
    }

    /// Queue `bytes` of `object` at `offset` for writing.
    pub fn write(&mut self, object: u32, mut offset: u64, mut bytes: &[u8]) {
        // Nothing to place: no coalescing buffer is started (or ended) for it. The wire
        // refuses empty DATA (§4.3); this keeps an empty write of any origin a no-op.
        if bytes.is_empty() {
            return;
        }
        if !self.direct() {
            self.put(object, offset, bytes);
            return;
        }
        // One block per buffer, handed over as soon as its block's end is reached.
        while !bytes.is_empty() {
            let to_end = BLOCK - offset % BLOCK;
            let n = bytes
                .len()
                .min(usize::try_from(to_end).unwrap_or(usize::MAX));
            self.put(object, offset, &bytes[..n]);
            if n as u64 == to_end {
                self.flush();
            }
            offset += n as u64;
            bytes = &bytes[n..];
        }
    }

    /// Append `bytes` to the coalescing buffer, starting another when they do not continue it
    /// or do not fit.
    fn put(&mut self, object: u32, offset: u64, bytes: &[u8]) {
        let span = self.span();
        if let Some(c) = &self.cur {
            let contiguous = c.object == object && c.offset + c.used as u64 == offset;
            if !contiguous || c.used + bytes.len() > span {
                self.flush();
            }
        }
        if self.cur.is_none() {
            // With direct I/O one alignment's worth more, so that the bytes can start at an
            // aligned address.
            let extra = if self.direct() { direct::ALIGN } else { 0 };
            let buf = self
                .lane
                .spare(span + extra)
                .unwrap_or_else(|| vec![0; span + extra]);
            let at = if self.direct() {
                direct::aligned_start(&buf)
            } else {
                0
            };
            self.cur = Some(Coalescing {
                object,
                offset,
                buf,
                at,
                used: 0,
            });
        }
        if let Some(c) = &mut self.cur {
            let n = bytes.len().min(span - c.used);
            let from = c.at + c.used;
            c.buf[from..from + n].copy_from_slice(&bytes[..n]);
            c.used += n;
        }
    }

    /// Queue the coalescing buffer. One less than a quarter full goes as a copy of its bytes,
    /// and the buffer to the spares: the queue counts each job by its buffer's size (the
    /// memory it holds), so a job holds at most 4× its bytes, and a run of datagrams that
    /// never continue one another — a hostile peer's, or retransmissions filling holes — is
    /// counted at about what it holds instead of a whole buffer each.
    fn flush(&mut self) {
        if let Some(c) = self.cur.take() {
            let (buf, at) = if c.used * SPARSE < c.buf.len() {
                let bytes = c.buf[c.at..c.at + c.used].to_vec();
                self.lane.give_spare(c.buf);
                (bytes, 0)
            } else {
                (c.buf, c.at)
            };
            self.lane.push(Job::Write {
                object: c.object,
                offset: c.offset,
                buf,
                at,
                len: c.used,
            });
        }
    }

    /// Every byte of `object` has been handed over: verify and place it.
    pub fn finish(&mut self, object: u32) {
        self.flush();
        self.lane.push(Job::Finish(object));
    }

    /// The next outcome, if any.
    pub fn poll(&mut self) -> Option<Outcome> {
        if self.gone {
            return None;
        }
        match self.back.try_recv() {
            Ok(o) => Some(o),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                // Reported once: a writer whose start was refused said why already.
                self.gone = true;
                Some(Outcome::Failed("the writer stopped".into()))
            }
        }
    }

    /// The session failed. Finished files stay; temporary files are removed, or with `keep`
    /// kept with their journals for a resume (the bytes queued so far are written first).
    pub fn abort(&mut self, keep: bool) {
        if keep {
            self.flush();
        }
        self.cur = None;
        self.lane.push(Job::Abort { keep });
    }

    /// Wait until everything queued so far is done (files closed after an abort, so another
    /// session may take them over).
    pub fn wait_idle(&mut self) {
        self.flush();
        self.lane.wait_idle();
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.lane.push(Job::Close);
    }
}
