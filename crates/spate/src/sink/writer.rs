//! One session's files: temporaries, block hashes, journal, verify and rename (see the
//! module documentation of `sink`).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::sync::mpsc::Sender;
use std::time::{Duration, SystemTime};

use blake3::hazmat::{ChainingValue, HasherExt};
use cap_std::fs::FileTypeExt;
use spate_proto::ranges::RangeSet;
use spate_proto::{EntryKind, Manifest};

use super::direct::{Blocks, DirectFile, Written};
use super::held::{find_held, Held};
use super::{part, Job, Outcome};
use crate::confine::{Root, Target};
use crate::journal::{self, Journal, BLOCK};
use crate::scan::digest_reader;
use crate::treehash::{self, BlockHasher};

/// One session's files.
pub struct Writer {
    manifest: Manifest,
    targets: Vec<Target>,
    /// Each entry's path relative to the root, for messages.
    names: Vec<String>,
    back: Sender<Outcome>,
    open: HashMap<u32, Open>,
    held: Held,
    failed: bool,
    scratch: Vec<u8>,
    /// Directories this session created, in creation order: removed again (when still
    /// empty) if the session fails without keeping its partial files.
    created: Vec<Target>,
    /// Staging buffers, when files are written with `O_DIRECT` (`direct.rs`).
    blocks: Option<Blocks>,
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
    /// A streamed file's digest, from the bytes after its content (spec §5.1).
    trailer: Trailer,
    /// The file opened again with `O_DIRECT`, and its staged blocks (`direct.rs`).
    direct: Option<DirectFile>,
}

/// The 32 bytes after a streamed file's content: the sender's BLAKE3 digest of it.
#[derive(Default)]
struct Trailer {
    bytes: [u8; 32],
    /// Bit `i` set: byte `i` arrived.
    have: u32,
}

impl Trailer {
    fn put(&mut self, at: u64, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            let k = at as usize + i;
            if k < self.bytes.len() {
                self.bytes[k] = b;
                self.have |= 1 << k;
            }
        }
    }

    fn digest(&self) -> Option<[u8; 32]> {
        (self.have == u32::MAX).then_some(self.bytes)
    }
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
    /// Run `job` for the session whose writer is `slot` (`None` before `Start`, and after a
    /// start that failed or `Close`). A write's buffer is given back when done with.
    pub fn run(slot: &mut Option<Box<Writer>>, job: Job) -> Option<Vec<u8>> {
        match (job, slot.as_mut()) {
            (
                Job::Start {
                    root,
                    manifest,
                    placed,
                    resume,
                    back,
                    direct,
                },
                _,
            ) => {
                let blocks = direct.map(Blocks::new);
                *slot = Writer::start(&root, manifest, &placed, resume, back, blocks).map(Box::new);
                None
            }
            (Job::Close, _) => {
                *slot = None;
                None
            }
            (job, Some(w)) => w.handle(job),
            // No writer (its start was refused): nothing to write.
            (Job::Write { buf, .. }, None) => Some(buf),
            (_, None) => None,
        }
    }

    /// Prepare every entry's place below `root` — creating parent directories, refusing paths
    /// that may not be written — and, when resuming, find and report what is held.
    fn start(
        root: &Root,
        manifest: Manifest,
        placed: &[String],
        resume: bool,
        back: Sender<Outcome>,
        blocks: Option<Blocks>,
    ) -> Option<Writer> {
        let mut w = Writer {
            targets: Vec::with_capacity(placed.len()),
            names: placed.to_vec(),
            back,
            open: HashMap::new(),
            held: Held::default(),
            failed: false,
            scratch: Vec::new(),
            created: Vec::new(),
            manifest,
            blocks,
        };
        let prepared = placed
            .iter()
            .zip(&w.manifest.entries)
            .try_for_each(|(path, e)| {
                // Name the path (relative to the root) when the system's error does not.
                let t = root
                    .prepare_noting(path, &mut w.created)
                    .map_err(|err| (path.clone(), err))?;
                if e.kind.is_file() {
                    replaceable(&t, path).map_err(|err| (path.clone(), err))?;
                }
                w.targets.push(t);
                Ok::<_, (String, io::Error)>(())
            });
        if let Err((path, e)) = prepared {
            w.remove_created();
            let msg = e.to_string();
            let msg = if msg.contains(path.as_str()) {
                msg
            } else {
                format!("cannot create '{path}': {msg}")
            };
            let _ = w.back.send(Outcome::Refused(msg));
            return None;
        }
        if resume {
            w.held = find_held(&w.manifest, &w.targets);
            let ranges = w.held.ranges(&w.manifest);
            let damaged_blocks = w.held.damaged_blocks;
            let _ = w.back.send(Outcome::Held {
                ranges,
                damaged_blocks,
            });
        }
        Some(w)
    }

    /// Run `job`; a write's buffer comes back.
    fn handle(&mut self, job: Job) -> Option<Vec<u8>> {
        match job {
            Job::Write {
                object,
                offset,
                buf,
                at,
                len,
            } => {
                if !self.failed {
                    if let Err(e) = self.write(object, offset, &buf[at..at + len]) {
                        self.fail(object, "writing", &e);
                    }
                }
                return Some(buf);
            }
            Job::Finish(object) if !self.failed => match self.finish(object) {
                Ok(()) => {
                    let _ = self.back.send(Outcome::Done(object));
                }
                Err(e) => self.fail(object, "finishing", &e),
            },
            Job::Finish(_) | Job::Start { .. } | Job::Close => {}
            Job::Abort { keep: false } => {
                self.remove_temporaries();
                self.remove_created();
            }
            Job::Abort { keep: true } => self.open.clear(),
        }
        None
    }

    /// Remove the directories this session created that are still empty, deepest first.
    fn remove_created(&mut self) {
        for d in self.created.drain(..).rev() {
            let _ = d.remove_dir();
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
            let name = &self.names[object as usize - 1];
            let file = part::open_locked(&journal::part_path(&target), fresh, name)?;
            // From here the temporary is ours (locked): if it cannot be set up (the claimed
            // size refused, no room for the journal), it goes, while we still hold it.
            let journal = file.set_len(entry.size).and_then(|()| {
                (entry.size > BLOCK)
                    .then(|| Journal::create(&journal::journal_path(&target), &entry, &reuse))
                    .transpose()
            });
            let journal = match journal {
                Ok(j) => j,
                Err(e) => {
                    journal::discard(&target);
                    return Err(e);
                }
            };
            let mut open = Open {
                file,
                fresh,
                written: RangeSet::new(),
                cvs: BTreeMap::new(),
                hashing: HashMap::new(),
                digest: (entry.size == 0).then(|| *blake3::hash(b"").as_bytes()),
                journal,
                trailer: Trailer::default(),
                direct: None,
            };
            if self.blocks.is_some() {
                open.direct = DirectFile::open(&open.file);
            }
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
        let blocks = &mut self.blocks;
        // A streamed file's object goes on after its content with the digest (the protocol
        // keeps DATA within the object, so only a streamed file has bytes past `size`).
        let content = size.saturating_sub(offset).min(bytes.len() as u64) as usize;
        let (bytes, trailer) = bytes.split_at(content);
        if !trailer.is_empty() {
            open.trailer.put((offset + content as u64) - size, trailer);
        }
        if bytes.is_empty() {
            return Ok(());
        }
        // A file created sparse in this session reads zeros where nothing was written.
        let fresh = open.fresh;
        let skip = |bytes: &[u8]| fresh && bytes.iter().all(|&b| b == 0);
        // With direct I/O each block's piece is written (or staged) below, block by block.
        let direct = open.direct.is_some();
        if !direct && !skip(bytes) {
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
            let mut fell_back = false;
            match (open.direct.as_mut(), blocks.as_mut()) {
                (Some(d), Some(blocks)) => {
                    let at = (from - block.start) as usize;
                    let whole = at == 0 && to == block.end;
                    if whole && skip(piece) {
                        // Zeros into a file created sparse: the hole reads as them.
                    } else if whole
                        && d.write_whole(blocks, i, piece, &open.file, &mut fell_back)?
                    {
                        // On the disk as it came (the common case: a block that arrived in order).
                    } else if !d.stage(blocks, &open.file, i, at, piece)? && !skip(piece) {
                        open.file.write_all_at(piece, from)?;
                    }
                }
                // Direct I/O ended for this file within this write: the rest goes as usual.
                _ if direct && !skip(piece) => open.file.write_all_at(piece, from)?,
                _ => {}
            }
            if fell_back {
                end_direct(open, blocks)?;
            }
            let h = open.hashing.entry(i).or_insert_with(|| BlockHasher::new(i));
            h.feed(from - block.start, piece);
            if !open.written.contains_range(block.clone()) {
                continue;
            }
            let h = open.hashing.remove(&i).expect("inserted above");
            let len = (block.end - block.start) as usize;
            let hasher = match complete_direct(open, blocks, i, len)? {
                Some(w) => {
                    let hasher = h.finish_from(w.bytes(len));
                    if let Some(b) = blocks.as_mut() {
                        b.recycle(w);
                    }
                    hasher
                }
                None => h.finish(&open.file, i, size, scratch)?,
            };
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
        let (kind, mode, mtime, listed) = (e.kind, e.mode, e.mtime, e.digest);
        let path = self.names[object as usize - 1].clone();
        let size = e.size;
        let target = target.clone();
        if kind == EntryKind::Directory {
            match target.symlink_metadata() {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(io::Error::other(format!(
                        "'{path}' exists and is not a directory"
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
        let mut open = self.open.remove(&object).expect("opened above");
        // Every block is complete, so nothing is staged; should anything be, it reaches the
        // file before the file is checked.
        if let (Some(d), Some(b)) = (open.direct.take(), self.blocks.as_mut()) {
            d.spill_all(b, &open.file)?;
        }
        let f = open.file;
        let tmp = journal::part_path(&target);
        let digest = match kind {
            EntryKind::StreamedFile => Some(open.trailer.digest().ok_or_else(|| {
                io::Error::other("internal error: a streamed file ended without its digest")
            })?),
            EntryKind::File | EntryKind::Directory | EntryKind::Request { .. } => listed,
        };
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
                journal::discard(&target); // while still holding the lock
                drop(f);
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
        replaceable(&target, &path)?;
        tmp.rename_to(&target)?;
        // The lock is held until the journal is gone too: a session that takes the name next
        // must not lose its fresh journal to us.
        let _ = journal::journal_path(&target).remove_file();
        drop(f);
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
        // Its temporary goes — but only if it is ours (locked by this session): a file
        // refused because another transfer is writing it is that transfer's. (A temporary
        // that could not be set up was removed where that failed.)
        if let Some(open) = self.open.remove(&object) {
            if let Ok((_, t)) = self.entry(object) {
                journal::discard(t);
            }
            drop(open);
        }
        let _ = self.back.send(Outcome::Failed(msg));
    }

    fn remove_temporaries(&mut self) {
        for (object, f) in std::mem::take(&mut self.open) {
            if let Ok((_, t)) = self.entry(object) {
                journal::discard(t);
            }
            drop(f); // unlocked only now that its names are gone
        }
    }
}

/// Block `i` of `open`, `len` bytes, is complete: if it was staged, write it (`direct.rs`) and
/// return its bytes. A file system that refused the direct write ends direct I/O for the file.
fn complete_direct(
    open: &mut Open,
    blocks: &mut Option<Blocks>,
    i: u64,
    len: usize,
) -> io::Result<Option<Written>> {
    let (Some(d), Some(b)) = (open.direct.as_mut(), blocks.as_ref()) else {
        return Ok(None);
    };
    let mut fell_back = false;
    let w = d.complete(b, i, len, &open.file, &mut fell_back)?;
    if fell_back {
        end_direct(open, blocks)?;
    }
    Ok(w)
}

/// The file system refused a direct write: write `open`'s staged blocks through the page
/// cache, and the rest of the file too.
fn end_direct(open: &mut Open, blocks: &mut Option<Blocks>) -> io::Result<()> {
    if let (Some(d), Some(b)) = (open.direct.take(), blocks.as_mut()) {
        d.spill_all(b, &open.file)?;
    }
    Ok(())
}

/// What a transfer may replace at a file's final name: nothing, a regular file (as scp
/// does), or a symbolic link (the link itself is replaced; nothing is written through it).
/// A directory, FIFO, device or socket is refused: renaming over them would silently destroy
/// something that is not a file's old version. `name` is the path below the root, for the
/// message.
fn replaceable(target: &Target, name: &str) -> io::Result<()> {
    let kind = match target.symlink_metadata() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if m.is_file() || m.file_type().is_symlink() => return Ok(()),
        Ok(m) if m.is_dir() => "a directory",
        Ok(m) if m.file_type().is_fifo() => "a FIFO",
        Ok(m) if m.file_type().is_block_device() || m.file_type().is_char_device() => "a device",
        Ok(m) if m.file_type().is_socket() => "a socket",
        Ok(_) => "not a regular file",
    };
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "'{name}' exists on the receiver and is {kind}; a transfer replaces only regular \
             files — remove it or send to another destination"
        ),
    ))
}
