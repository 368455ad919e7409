//! The receiver's writer thread: received bytes into temporary files, then digest check and
//! rename into place.
//!
//! For each file the writer creates `.NAME.spate-part` next to the final name, sized to the
//! file at once (a sparse file: ranges that arrive as zeros are left as holes and read back as
//! zeros, so a sparse 4 GiB file stays sparse). The writer hashes each 1 MiB block as its bytes
//! are written (`treehash.rs`: from the write buffers while they arrive in order, reading back
//! only what followed a gap). When the protocol reports the object complete, the writer
//! assembles the file's BLAKE3 digest from the blocks', compares it with the manifest's,
//! applies permission bits (setuid/setgid/sticky dropped) and modification time, and renames it
//! over the final name. A mismatch removes the temporary file and fails the session with a
//! message naming the file: a corrupt file is never put in place.
//!
//! The network thread coalesces contiguous chunks into 256 KiB buffers; buffers come back
//! through the result channel and are reused.
//!
//! **Resume.** Beside each temporary file the writer keeps a journal of the 1 MiB blocks
//! written and their digests (`journal.rs`). A session that resumes ([`find_held`]) reuses the
//! blocks of a partial file that still match its journal and files already in place with the
//! right digest; everything else is written again. A reused partial file is not sparse-fresh,
//! so its zero chunks are written. On failure a resuming session keeps its partial files and
//! journals for the next attempt; other sessions remove them. A file whose digest or writes
//! failed loses its own partial file either way, and only its own.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use blake3::hazmat::{ChainingValue, HasherExt};
use spate_proto::ranges::RangeSet;
use spate_proto::{Entry, EntryKind, Manifest};

use crate::confine::{Root, Target};
use crate::journal::{self, Journal, BLOCK};
use crate::scan::digest_reader;
use crate::treehash::{self, BlockHasher};

/// Size of a write buffer: 256 KiB (181 chunks), large sequential writes.
const WRITE_BUF: usize = 256 << 10;
/// Buffers queued to the writer: 64 × 256 KiB = 16 MiB, ~13 ms at 10 Gbit/s.
const QUEUE: usize = 64;

enum Job {
    Write {
        object: u32,
        offset: u64,
        buf: Vec<u8>,
        len: usize,
    },
    Finish(u32),
    /// The session failed: remove temporary files, or keep them (with their journals) for a
    /// resume.
    Abort {
        keep: bool,
    },
}

/// What a resuming receiver already holds, found by [`find_held`].
#[derive(Debug, Default)]
pub struct Held {
    /// Objects whose final file is in place with the manifest's digest.
    pub in_place: HashSet<u32>,
    /// Objects with a usable partial file: its verified blocks (index, digest).
    pub partial: HashMap<u32, Vec<(u64, [u8; 32])>>,
    /// Journaled blocks whose bytes no longer matched (to be sent again).
    pub damaged_blocks: u64,
}

impl Held {
    /// The held bytes as (object, range) pairs, for the protocol's HAVE.
    pub fn ranges(&self, manifest: &Manifest) -> Vec<(u32, Range<u64>)> {
        let mut out = Vec::new();
        for &o in &self.in_place {
            if let Some(e) = manifest.entries.get(o as usize - 1) {
                out.push((o, 0..e.size));
            }
        }
        for (&o, blocks) in &self.partial {
            let Some(e) = manifest.entries.get(o as usize - 1) else {
                continue;
            };
            for &(i, _) in blocks {
                out.push((o, journal::block_range(i, e.size)));
            }
        }
        out
    }
}

/// Find what is already below `root` for `manifest`, whose entries go to `placed` (from
/// [`Root::placed_paths`]): final files with the right digest, and partial files whose
/// journaled blocks still match. Reads (and hashes) those files: run it off the network thread.
pub fn find_held(root: &Root, manifest: &Manifest, placed: &[String]) -> io::Result<Held> {
    let mut held = Held::default();
    for (i, (e, path)) in manifest.entries.iter().zip(placed).enumerate() {
        let object = i as u32 + 1;
        if e.kind != EntryKind::File || e.size == 0 {
            continue;
        }
        let target = root.prepare(path)?;
        if in_place(&target, e) {
            held.in_place.insert(object);
            continue;
        }
        if let Some(s) = journal::salvage(&target, e) {
            held.damaged_blocks += s.damaged;
            if !s.good.is_empty() {
                held.partial.insert(object, s.good);
            }
        }
    }
    Ok(held)
}

/// A regular file of the entry's size and digest is already at `target`.
fn in_place(target: &Target, e: &Entry) -> bool {
    let (Ok(m), Some(want)) = (target.symlink_metadata(), e.digest) else {
        return false;
    };
    if !m.is_file() || m.len() != e.size {
        return false;
    }
    // digest_reader reads 1 MiB at a time itself: no buffering needed.
    let Ok(mut f) = target.open_read() else {
        return false;
    };
    crate::scan::digest_reader(&mut f, &mut |_| {}).is_ok_and(|(got, _)| got == want)
}

/// What the writer reports back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The object is verified and in place.
    Done(u32),
    /// The transfer cannot succeed; the message says why and what to do. The failing file's
    /// temporary file is gone; the caller decides about the others with [`Sink::abort`].
    Failed(String),
}

enum Back {
    Buffer(Vec<u8>),
    Outcome(Outcome),
}

/// The network thread's handle on a session's writer.
pub struct Sink {
    jobs: SyncSender<Job>,
    back: Receiver<Back>,
    pool: Vec<Vec<u8>>,
    /// Coalescing buffer: (object, offset of its first byte, bytes, used).
    cur: Option<(u32, u64, Vec<u8>, usize)>,
    thread: Option<JoinHandle<()>>,
}

impl Sink {
    /// Start a writer for `manifest` below `root`, its entries written at `placed` (from
    /// [`Root::placed_paths`]), reusing what `held` lists (from [`find_held`]; empty for a
    /// fresh transfer). Fails if any path would leave the root.
    pub fn start(
        root: Root,
        manifest: &Manifest,
        placed: &[String],
        held: Held,
    ) -> io::Result<Sink> {
        let mut targets = Vec::with_capacity(manifest.entries.len());
        for path in placed {
            targets.push(root.prepare(path)?);
        }
        if targets.len() != manifest.entries.len() {
            return Err(io::Error::other(
                "internal error: a placement per entry expected",
            ));
        }
        let (jobs, jobs_rx) = sync_channel(QUEUE);
        // Unbounded on purpose: if the writer could block on a full result channel while the
        // network thread blocks on a full job channel, both would wait forever (it happened
        // with 1000 small files). Its length is bounded anyway: buffers in circulation plus
        // one outcome per object.
        let (back_tx, back) = channel();
        let m = manifest.clone();
        let names = placed.to_vec();
        let thread = std::thread::Builder::new()
            .name("spate-writer".into())
            .spawn(move || Writer::new(m, targets, names, held, back_tx).run(jobs_rx))?;
        Ok(Sink {
            jobs,
            back,
            pool: Vec::new(),
            cur: None,
            thread: Some(thread),
        })
    }

    /// Queue `bytes` of `object` at `offset` for writing.
    pub fn write(&mut self, object: u32, offset: u64, bytes: &[u8]) {
        if let Some((o, start, _, used)) = &self.cur {
            let contiguous = *o == object && start + *used as u64 == offset;
            if !contiguous || used + bytes.len() > WRITE_BUF {
                self.flush();
            }
        }
        if self.cur.is_none() {
            let buf = self.pool.pop().unwrap_or_else(|| vec![0; WRITE_BUF]);
            self.cur = Some((object, offset, buf, 0));
        }
        if let Some((_, _, buf, used)) = &mut self.cur {
            let n = bytes.len().min(WRITE_BUF - *used);
            buf[*used..*used + n].copy_from_slice(&bytes[..n]);
            *used += n;
        }
    }

    fn flush(&mut self) {
        if let Some((object, offset, buf, len)) = self.cur.take() {
            let _ = self.jobs.send(Job::Write {
                object,
                offset,
                buf,
                len,
            });
        }
    }

    /// Every byte of `object` has been handed over: verify and place it.
    pub fn finish(&mut self, object: u32) {
        self.flush();
        let _ = self.jobs.send(Job::Finish(object));
    }

    /// The next outcome, if any (reclaims returned buffers on the way).
    pub fn poll(&mut self) -> Option<Outcome> {
        loop {
            match self.back.try_recv() {
                Ok(Back::Buffer(b)) => self.pool.push(b),
                Ok(Back::Outcome(o)) => return Some(o),
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => {
                    return Some(Outcome::Failed("the writer thread stopped".into()))
                }
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
        let _ = self.jobs.send(Job::Abort { keep });
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let (dead, _) = sync_channel(1);
        self.jobs = dead;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Writer {
    manifest: Manifest,
    targets: Vec<Target>,
    /// Each entry's path relative to the root, for messages.
    names: Vec<String>,
    back: Sender<Back>,
    open: HashMap<u32, Open>,
    held: Held,
    failed: bool,
    scratch: Vec<u8>,
}

/// A temporary file being written.
struct Open {
    file: File,
    /// Created empty (sparse) in this session: zero chunks need not be written.
    fresh: bool,
    /// Bytes written, including reused blocks.
    written: RangeSet,
    /// Chaining values of the completed blocks of a file of more than one block, by block
    /// index (empty for smaller files). A map, not a vector sized to the file: memory follows
    /// the blocks received, never the size a (possibly hostile) manifest claims.
    cvs: BTreeMap<u64, ChainingValue>,
    /// Hashers of the blocks being written.
    hashing: HashMap<u64, BlockHasher>,
    /// The digest of a file of one block or less, once complete.
    digest: Option<[u8; 32]>,
    /// None for files of one block or less: their only block completes with the file.
    journal: Option<Journal>,
}

impl Open {
    /// Block `i` of this file of `size` bytes is complete and hashed (or does not exist).
    fn block_done(&self, i: u64, size: u64) -> bool {
        if size > BLOCK {
            i >= size.div_ceil(BLOCK) || self.cvs.contains_key(&i)
        } else {
            self.digest.is_some() || i > 0
        }
    }
}

impl Writer {
    fn new(
        manifest: Manifest,
        targets: Vec<Target>,
        names: Vec<String>,
        held: Held,
        back: Sender<Back>,
    ) -> Self {
        Writer {
            manifest,
            targets,
            names,
            back,
            open: HashMap::new(),
            held,
            failed: false,
            scratch: Vec::new(),
        }
    }

    fn run(mut self, jobs: Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            match job {
                Job::Write {
                    object,
                    offset,
                    buf,
                    len,
                } => {
                    if !self.failed {
                        if let Err(e) = self.write(object, offset, &buf[..len]) {
                            self.fail(object, "writing", &e);
                        }
                    }
                    let _ = self.back.send(Back::Buffer(buf));
                }
                Job::Finish(object) if !self.failed => match self.finish(object) {
                    Ok(()) => {
                        let _ = self.back.send(Back::Outcome(Outcome::Done(object)));
                    }
                    Err(e) => self.fail(object, "finishing", &e),
                },
                Job::Finish(_) => {}
                Job::Abort { keep: false } => self.remove_temporaries(),
                Job::Abort { keep: true } => self.open.clear(),
            }
        }
    }

    fn entry(&self, object: u32) -> io::Result<(&spate_proto::Entry, &Target)> {
        let i = (object as usize)
            .checked_sub(1)
            .filter(|&i| i < self.targets.len())
            .ok_or_else(|| io::Error::other(format!("unknown object {object}")))?;
        Ok((&self.manifest.entries[i], &self.targets[i]))
    }

    fn file(&mut self, object: u32) -> io::Result<&mut Open> {
        if !self.open.contains_key(&object) {
            let (e, target) = self.entry(object)?;
            let (entry, target) = (e.clone(), target.clone());
            let reuse = self.held.partial.remove(&object).unwrap_or_default();
            let fresh = reuse.is_empty();
            let file = journal::part_path(&target).open(
                cap_std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(fresh),
            )?;
            file.set_len(entry.size)?;
            let mut open = Open {
                file,
                fresh,
                written: RangeSet::new(),
                cvs: BTreeMap::new(),
                hashing: HashMap::new(),
                digest: (entry.size == 0).then(|| *blake3::hash(b"").as_bytes()),
                journal: if entry.size > BLOCK {
                    Some(Journal::create(
                        &journal::journal_path(&target),
                        &entry,
                        &reuse,
                    )?)
                } else {
                    None
                },
            };
            for &(i, cv) in &reuse {
                open.written.insert(journal::block_range(i, entry.size));
                if entry.size > BLOCK {
                    open.cvs.insert(i, cv);
                }
            }
            self.open.insert(object, open);
        }
        Ok(self.open.get_mut(&object).expect("inserted above"))
    }

    fn write(&mut self, object: u32, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let size = self.entry(object)?.0.size;
        self.file(object)?;
        let (Some(open), scratch) = (self.open.get_mut(&object), &mut self.scratch) else {
            return Ok(());
        };
        // A file created sparse in this session reads zeros where nothing was written.
        if !(open.fresh && bytes.iter().all(|&b| b == 0)) {
            open.file.write_all_at(bytes, offset)?;
        }
        let end = offset + bytes.len() as u64;
        open.written.insert(offset..end);
        // Hash the blocks this write touched; journal those it completed.
        for i in offset / BLOCK..end.div_ceil(BLOCK) {
            if open.block_done(i, size) {
                continue; // a duplicate
            }
            let block = journal::block_range(i, size);
            let (from, to) = (offset.max(block.start), end.min(block.end));
            if from >= to {
                continue; // not possible for DATA within the file (the protocol checks)
            }
            let piece = &bytes[(from - offset) as usize..(to - offset) as usize];
            let h = open.hashing.entry(i).or_insert_with(|| BlockHasher::new(i));
            h.feed(from - block.start, piece);
            if !open.written.contains_range(block) {
                continue;
            }
            let h = open.hashing.remove(&i).expect("inserted above");
            let hasher = h.finish(&open.file, i, size, scratch)?;
            if size > BLOCK {
                let cv = hasher.finalize_non_root();
                if let Some(journal) = open.journal.as_mut() {
                    journal.append(i, &cv)?;
                }
                open.cvs.insert(i, cv);
            } else {
                open.digest = Some(*hasher.finalize().as_bytes());
            }
        }
        Ok(())
    }

    fn finish(&mut self, object: u32) -> io::Result<()> {
        let (e, target) = self.entry(object)?;
        let (kind, mode, mtime, digest) = (e.kind, e.mode, e.mtime, e.digest);
        let path = self.names[object as usize - 1].clone();
        let size = e.size;
        let target = target.clone();
        if kind == EntryKind::Directory {
            match target.symlink_metadata() {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(io::Error::other(format!(
                        "'{}' exists and is not a directory",
                        target.path().display()
                    )))
                }
                Err(_) => target.create_dir()?,
            }
            if mode != 0 {
                target.set_mode(mode & 0o777 | 0o700)?;
            }
            return Ok(());
        }
        if self.held.in_place.contains(&object) {
            return Ok(()); // already there with the right digest
        }
        self.file(object)?;
        let open = self.open.remove(&object).expect("opened above");
        let f = open.file;
        let tmp = journal::part_path(&target);
        if let Some(want) = digest {
            // Every block hashed: the map holds one value per block, in order.
            let cvs = (open.cvs.len() as u64 == size.div_ceil(BLOCK))
                .then(|| open.cvs.values().copied().collect::<Vec<_>>());
            let got = match (open.digest, cvs) {
                (Some(d), _) => d,
                (None, Some(cvs)) if size > BLOCK => {
                    treehash::file_digest(&cvs, size).ok_or_else(|| {
                        io::Error::other("internal error: block count does not match the size")
                    })?
                }
                // Not every block was hashed, though the protocol said the file is complete:
                // hash the file.
                _ => {
                    let mut r = io::BufReader::with_capacity(1 << 20, &f);
                    digest_reader(&mut r, &mut |_| {})?.0
                }
            };
            if got != want {
                drop(f);
                journal::discard(&target);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "digest mismatch for '{path}': the bytes received differ from the \
                         sender's file (BLAKE3 {} expected, {} received); nothing was put in \
                         place — send it again",
                        journal::hex(&want[..8]),
                        journal::hex(&got[..8])
                    ),
                ));
            }
        }
        if mode != 0 {
            f.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))?;
        }
        if let Some(t) = mtime {
            let when = if t.secs >= 0 {
                SystemTime::UNIX_EPOCH + Duration::new(t.secs as u64, t.nanos)
            } else {
                SystemTime::UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs())
                    + Duration::from_nanos(u64::from(t.nanos))
            };
            let _ = f.set_modified(when);
        }
        drop(f);
        if target.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            return Err(io::Error::other(format!(
                "'{}' exists and is a directory",
                target.path().display()
            )));
        }
        tmp.rename_to(&target)?;
        let _ = journal::journal_path(&target).remove_file();
        Ok(())
    }

    fn fail(&mut self, object: u32, doing: &str, e: &io::Error) {
        self.failed = true;
        let path = (object as usize)
            .checked_sub(1)
            .and_then(|i| self.names.get(i))
            .cloned()
            .unwrap_or_default();
        let msg = if e.raw_os_error() == Some(libc::ENOSPC) {
            format!("disk full on the receiver while {doing} '{path}': free space below its --root and send again")
        } else if e.kind() == io::ErrorKind::InvalidData {
            e.to_string()
        } else {
            format!("receiver failed {doing} '{path}': {e}")
        };
        // Only this file's bytes are in doubt. The others' partial files stay until the
        // session says whether it resumes ([`Sink::abort`]): one bad file must not cost a
        // resuming transfer the progress of every other.
        // Its temporary file goes even if it never became an open file (created, then
        // `set_len` refused the claimed size): nothing of a failed file stays behind.
        drop(self.open.remove(&object));
        if let Ok((_, t)) = self.entry(object) {
            journal::discard(t);
        }
        let _ = self.back.send(Back::Outcome(Outcome::Failed(msg)));
    }

    fn remove_temporaries(&mut self) {
        for (object, f) in std::mem::take(&mut self.open) {
            drop(f);
            if let Ok((_, t)) = self.entry(object) {
                journal::discard(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spate_proto::Entry;
    use std::path::Path;
    use std::time::Instant;

    /// Two 3 MiB files; the first's digest is wrong. All of the first and 2 MiB of the second
    /// are written, then the first is finished: the session fails, and is aborted with `keep`.
    fn fail_first_of_two(root: &Path, keep: bool) {
        let size = 3 << 20;
        let mut bad = Entry::file("a.bin", size);
        bad.digest = Some([0; 32]);
        let manifest = Manifest {
            destination: String::new(),
            entries: vec![bad, Entry::file("b.bin", size)],
        };
        let root = Root::new(root).unwrap();
        let placed = root.placed_paths(&manifest);
        let mut sink = Sink::start(root, &manifest, &placed, Held::default()).unwrap();
        let data = vec![7u8; 1 << 20];
        for i in 0..3u64 {
            sink.write(1, i << 20, &data);
        }
        for i in 0..2u64 {
            sink.write(2, i << 20, &data);
        }
        sink.finish(1);
        let end = Instant::now() + Duration::from_secs(10);
        let failed = loop {
            match sink.poll() {
                Some(Outcome::Failed(msg)) => break msg,
                Some(o) => panic!("{o:?}"),
                None if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
                None => panic!("no outcome"),
            }
        };
        assert!(failed.contains("digest mismatch for 'a.bin'"), "{failed}");
        sink.abort(keep);
        drop(sink); // waits for the writer
    }

    /// One file's digest mismatch removes that file's partial; a resuming session keeps the
    /// other files' partials and journals for the next attempt, any other session removes them.
    #[test]
    fn a_bad_file_costs_a_resuming_session_only_its_own_partial() {
        for keep in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            fail_first_of_two(dir.path(), keep);
            let root = Root::new(dir.path()).unwrap();
            let (a, b) = (
                root.prepare("a.bin").unwrap(),
                root.prepare("b.bin").unwrap(),
            );
            for p in [
                journal::part_path(&a),
                journal::journal_path(&a),
                a,
                b.clone(),
            ] {
                let p = p.path();
                assert!(!p.exists(), "{} exists (keep {keep})", p.display());
            }
            for p in [journal::part_path(&b), journal::journal_path(&b)] {
                let p = p.path();
                assert_eq!(p.exists(), keep, "{} (keep {keep})", p.display());
            }
        }
    }

    /// Resident memory of this process, bytes (Linux).
    fn rss() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    /// Issue 14, finding 1: a manifest claiming a huge file, then one byte of it, cost memory
    /// in proportion to the claim (a slot per 1 MiB block: 530 MiB for 16 TiB, an abort for
    /// 2^55 bytes). Memory now follows what was received.
    #[test]
    fn a_huge_claimed_file_costs_memory_for_what_arrived_only() {
        let dir = tempfile::tempdir().unwrap();
        let before = rss();
        for (i, size) in [16u64 << 40, 1 << 55].into_iter().enumerate() {
            let name = format!("huge-{i}");
            let mut e = Entry::file(name.as_str(), size);
            e.digest = Some([0; 32]);
            let manifest = Manifest::new(vec![e]);
            let root = Root::new(dir.path()).unwrap();
            let placed = root.placed_paths(&manifest);
            let mut sink = Sink::start(root, &manifest, &placed, Held::default()).unwrap();
            sink.write(1, size / 2, b"x");
            sink.write(1, size - 1, b"y");
            sink.abort(false);
            drop(sink); // waits for the writer
            assert!(
                !dir.path().join(format!(".{name}.spate-part")).exists(),
                "the temporary file of an aborted session is removed"
            );
        }
        let grown = rss().saturating_sub(before);
        assert!(grown < 64 << 20, "memory grew by {grown} bytes");
    }
}
