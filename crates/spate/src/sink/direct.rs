//! Direct I/O for whole blocks (`spate serve --direct-io`, `spate get --direct-io`).
//!
//! **Why.** A buffered write copies every byte into the page cache, and on this project's VM
//! that copy is most of what the receiver spends beyond the network: writing a new file costs
//! the kernel 20–29 % of a core per Gbit/s (`dd` of 2 GiB: 3.4 s of system time into tmpfs,
//! 5.0 s into ext4), where an `O_DIRECT` write of the same bytes in 1 MiB pieces costs 0.14 s
//! (0.8 %: the device takes the bytes from our buffer by DMA). In `spate-lab bench-io` (file →
//! file on one ext4 file system) the receiver spent 11.7–12.9 % of a core per Gbit/s at
//! 6.2–6.7 Gbit/s through the page cache, and 6.5–7.5 % at 10.3–11.7 Gbit/s with this module
//! (`docs/results/bench-io.md`, session 47).
//!
//! **How.** `O_DIRECT` wants the buffer, the file offset and the length aligned to the
//! device's logical block ([`ALIGN`]), and bytes arrive as datagrams of any length, in any
//! order, with holes that are repaired an RTT or more later. With direct I/O the network
//! thread (`Sink`) gathers the bytes of each 1 MiB block of a file (the resume journal's
//! [`BLOCK`], aligned in the file) into a buffer of their own that starts at an aligned
//! address, and hands it over at the block's end: a block that arrived in order is then one
//! buffer, written with `O_DIRECT` as it is ([`DirectFile::write_whole`]). A block with holes
//! is *staged*: its bytes are copied into an aligned buffer of the writer's as they come, and
//! when the block is complete that buffer goes to the disk in one aligned write and is hashed
//! from memory ([`BlockHasher::finish_from`](crate::treehash::BlockHasher::finish_from)). Only
//! then is the block journaled, as before. A file's last block, shorter than [`ALIGN`] allows,
//! is written from its buffer through the page cache.
//!
//! **Bounds.** Staging memory is bounded by what this receiver is configured for, never by
//! what a peer sends: at most [`SESSION_BLOCKS`] buffers per session and [`POOL_BLOCKS`] for
//! all sessions of a writer pool, each counted from allocation to release ([`Budget`]). A
//! block that finds no buffer — the budget is spent on blocks waiting for repairs — takes the
//! lowest staged block of its file out of staging (*spills* it: the bytes it has so far are
//! written through the page cache, and the rest of that block follows them there), or goes
//! through the page cache itself. A spilled block completes as any buffered block does: what
//! its hasher did not see in order is read back from the file. So a lossy path with a long RTT
//! costs some of the gain, never memory or correctness.
//!
//! **Fallback.** The temporary file is opened a second time with `O_DIRECT` through
//! `/proc/self/fd` (the same file, never a path that could have changed). A file system that
//! refuses `O_DIRECT` at open, or a write with `EINVAL` (alignment it does not accept), sends
//! the file back to buffered writes: what was staged is spilled and the write is repeated
//! through the page cache. Other errors (a full disk, an I/O error) fail the file as buffered
//! writes do.
//!
//! Why not `io_uring`: a session's writes are already off the network thread and in order on
//! its lane; one synchronous 1 MiB write per block reached 3.1 GB/s on this VM's disk (`dd
//! oflag=direct`), faster than the network. Why our own aligned buffer and not a crate: it
//! is an ordinary vector one alignment longer, sliced at an aligned address
//! ([`aligned_start`]); the aligned-buffer crates on crates.io add nothing we use.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use spate_proto::ranges::RangeSet;

use crate::journal::BLOCK;

/// Alignment of a direct write's buffer, file offset and length: 4 KiB, the largest logical
/// block of common devices (512 B on most, 4 KiB on "4Kn" disks), so one value fits all.
pub const ALIGN: usize = 4096;
/// Staging buffers one session may hold: 16 MiB. Without loss a block is complete before the
/// next begins (one or two in use); with loss each block waits about an RTT for its repairs,
/// and past this the oldest are spilled to the page cache.
pub const SESSION_BLOCKS: usize = 16;
/// Staging buffers all sessions of a pool may hold together: 64 MiB (the pool's queues hold
/// up to 256 MiB more, `POOL_BYTES`).
pub const POOL_BLOCKS: usize = 64;

pub(super) const BLOCK_BYTES: usize = BLOCK as usize;

/// Staging buffers counted against a pool's and a session's limits, and the session's bytes
/// written with `O_DIRECT` (for its log: a file system may refuse direct I/O silently).
#[derive(Clone)]
pub struct Budget {
    pool: Arc<AtomicUsize>,
    session: Arc<AtomicUsize>,
    direct_bytes: Arc<AtomicU64>,
}

impl Budget {
    /// A session's budget within the pool's count `pool`.
    pub fn new(pool: Arc<AtomicUsize>) -> Budget {
        Budget {
            pool,
            session: Arc::new(AtomicUsize::new(0)),
            direct_bytes: Arc::default(),
        }
    }

    /// The session's count of bytes written with `O_DIRECT`.
    pub fn direct_bytes(&self) -> Arc<AtomicU64> {
        self.direct_bytes.clone()
    }

    fn wrote_direct(&self, bytes: usize) {
        self.direct_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Count one more buffer, if both limits allow it.
    fn acquire(&self) -> bool {
        let up = |limit: usize| move |n: usize| (n < limit).then_some(n + 1);
        if self
            .session
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, up(SESSION_BLOCKS))
            .is_err()
        {
            return false;
        }
        if self
            .pool
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, up(POOL_BLOCKS))
            .is_err()
        {
            self.session.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    fn release(&self) {
        self.session.fetch_sub(1, Ordering::AcqRel);
        self.pool.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where in `buf` an [`ALIGN`]-aligned run of bytes can start: `buf` needs `ALIGN` bytes more
/// than the run (the network thread's coalescing buffers and the staging buffers alike; a
/// slice of an ordinary vector, no allocator of our own).
pub fn aligned_start(buf: &[u8]) -> usize {
    buf.as_ptr().align_offset(ALIGN).min(ALIGN)
}

/// One staging buffer: [`BLOCK`] bytes at an [`ALIGN`]-aligned address, counted in its budget
/// until dropped.
pub struct Aligned {
    buf: Vec<u8>,
    at: usize,
    budget: Budget,
}

impl Aligned {
    /// A buffer counted in `budget`, or `None` when the budget is spent.
    fn new(budget: &Budget) -> Option<Aligned> {
        if !budget.acquire() {
            return None;
        }
        let buf = vec![0; BLOCK_BYTES + ALIGN];
        let at = aligned_start(&buf);
        Some(Aligned {
            buf,
            at,
            budget: budget.clone(),
        })
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.at..self.at + BLOCK_BYTES]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.at..self.at + BLOCK_BYTES]
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        self.budget.release();
    }
}

/// One session's staging buffers: those not in use, kept for the next blocks.
pub struct Blocks {
    budget: Budget,
    free: Vec<Aligned>,
}

impl Blocks {
    pub fn new(budget: Budget) -> Blocks {
        Blocks {
            budget,
            free: Vec::new(),
        }
    }

    fn take(&mut self) -> Option<Aligned> {
        self.free.pop().or_else(|| Aligned::new(&self.budget))
    }

    /// `bytes` went to the disk with `O_DIRECT`.
    fn wrote_direct(&self, bytes: usize) {
        self.budget.wrote_direct(bytes);
    }

    fn give(&mut self, a: Aligned) {
        self.free.push(a);
    }

    /// Hand a written block's buffer back for the next block.
    pub fn recycle(&mut self, w: Written) {
        self.give(w.0);
    }
}

/// A block being staged: its buffer and the byte ranges (within the block) it holds.
struct Staged {
    buf: Aligned,
    have: RangeSet,
}

/// A temporary file written with `O_DIRECT`: its second descriptor and its staged blocks.
pub struct DirectFile {
    file: File,
    staged: BTreeMap<u64, Staged>,
    /// Blocks that go through the page cache (spilled, or found no buffer). Entries are
    /// removed when the block completes, so this holds only blocks in progress.
    spilled: std::collections::BTreeSet<u64>,
}

/// A block just written from its staging buffer: hash its bytes from memory, then hand the
/// buffer back with [`Blocks::recycle`].
pub struct Written(Aligned);

impl Written {
    pub fn bytes(&self, len: usize) -> &[u8] {
        &self.0.bytes()[..len]
    }
}

impl DirectFile {
    /// `file` opened again with `O_DIRECT`, or `None` where that is refused (a file system
    /// without direct I/O, or no `/proc`): the file is then written through the page cache.
    pub fn open(file: &File) -> Option<DirectFile> {
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let direct = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
            .open(path)
            .ok()?;
        // The magic link must have led to the same file.
        let (a, b) = (file.metadata().ok()?, direct.metadata().ok()?);
        use std::os::unix::fs::MetadataExt;
        (a.dev() == b.dev() && a.ino() == b.ino()).then_some(DirectFile {
            file: direct,
            staged: BTreeMap::new(),
            spilled: Default::default(),
        })
    }

    /// Stage `bytes` at `at` within block `i`. `Ok(false)`: the block goes through the page
    /// cache, and the caller writes `bytes` to `buffered` itself.
    pub fn stage(
        &mut self,
        blocks: &mut Blocks,
        buffered: &File,
        i: u64,
        at: usize,
        bytes: &[u8],
    ) -> io::Result<bool> {
        if self.spilled.contains(&i) {
            return Ok(false);
        }
        if !self.staged.contains_key(&i) {
            let buf = match blocks.take() {
                Some(b) => b,
                // The budget is spent: the lowest staged block of this file (the one waiting
                // longest for its repairs) gives up its buffer.
                None => match self.staged.keys().next().copied() {
                    Some(j) => self.spill(j, buffered)?,
                    None => {
                        self.spilled.insert(i);
                        return Ok(false);
                    }
                },
            };
            self.staged.insert(
                i,
                Staged {
                    buf,
                    have: RangeSet::new(),
                },
            );
        }
        let s = self.staged.get_mut(&i).expect("inserted above");
        let Some(dst) = s.buf.bytes_mut().get_mut(at..at + bytes.len()) else {
            return Err(io::Error::other("internal error: bytes beyond their block"));
        };
        dst.copy_from_slice(bytes);
        s.have.insert(at as u64..(at + bytes.len()) as u64);
        Ok(true)
    }

    /// Block `i` arrived whole, in one buffer (`Sink` hands each block over on its own with
    /// direct I/O): write it with `O_DIRECT` straight from there, unstaged, if `bytes` is
    /// aligned. `Ok(false)`: it is not, or the block was staged already; stage it. A write the
    /// file system refuses with `EINVAL` is made through `buffered`, and `fell_back` set.
    pub fn write_whole(
        &mut self,
        blocks: &Blocks,
        i: u64,
        bytes: &[u8],
        buffered: &File,
        fell_back: &mut bool,
    ) -> io::Result<bool> {
        let aligned = bytes.len() % ALIGN == 0 && bytes.as_ptr() as usize % ALIGN == 0;
        if !aligned || self.staged.contains_key(&i) || self.spilled.contains(&i) {
            return Ok(false);
        }
        match self.file.write_all_at(bytes, i * BLOCK) {
            Ok(()) => {
                blocks.wrote_direct(bytes.len());
                Ok(true)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                *fell_back = true;
                buffered.write_all_at(bytes, i * BLOCK)?;
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// Write what block `j` holds through the page cache and take it out of staging; its
    /// buffer is returned for another block.
    fn spill(&mut self, j: u64, buffered: &File) -> io::Result<Aligned> {
        let s = self.staged.remove(&j).expect("a staged block");
        for r in s.have.iter() {
            let bytes = &s.buf.bytes()[r.start as usize..r.end as usize];
            buffered.write_all_at(bytes, j * BLOCK + r.start)?;
        }
        self.spilled.insert(j);
        Ok(s.buf)
    }

    /// Block `i`, of `len` bytes, is complete: write it if it is staged, and return its bytes
    /// for hashing (`None`: it went through the page cache, and the file has it). A write the
    /// file system refuses with `EINVAL` is made through `buffered`, and `fell_back` is set:
    /// the caller then ends direct I/O for this file with [`DirectFile::spill_all`].
    pub fn complete(
        &mut self,
        blocks: &Blocks,
        i: u64,
        len: usize,
        buffered: &File,
        fell_back: &mut bool,
    ) -> io::Result<Option<Written>> {
        self.spilled.remove(&i);
        let Some(s) = self.staged.remove(&i) else {
            return Ok(None);
        };
        let bytes = &s.buf.bytes()[..len];
        let at = i * BLOCK;
        if len % ALIGN == 0 {
            match self.file.write_all_at(bytes, at) {
                Ok(()) => {
                    blocks.wrote_direct(len);
                    return Ok(Some(Written(s.buf)));
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => *fell_back = true,
                Err(e) => return Err(e),
            }
        }
        buffered.write_all_at(bytes, at)?;
        Ok(Some(Written(s.buf)))
    }

    /// End direct I/O for this file: write everything staged through the page cache and
    /// release the buffers.
    pub fn spill_all(mut self, blocks: &mut Blocks, buffered: &File) -> io::Result<()> {
        while let Some(&j) = self.staged.keys().next() {
            let buf = self.spill(j, buffered)?;
            blocks.give(buf);
        }
        Ok(())
    }
}
