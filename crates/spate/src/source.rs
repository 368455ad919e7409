//! File bytes for the sender, read once, in order, on an I/O thread.
//!
//! The session asks for each object's bytes once, in stream order (object 1 from offset 0,
//! then object 2, …: spec §11.1), and keeps them until they are acknowledged — so a reader
//! thread reads every file front to back in 1 MiB blocks into a bounded channel ([`AHEAD`]
//! blocks) and the network thread takes whole blocks out of it without ever waiting: an empty
//! channel is "nothing ready yet" ([`Sender::starved`](spate_proto::Sender::starved)), never
//! a blocking read on the network thread.
//!
//! A **streamed file** (spec §5.1, manifest kind 2) is hashed as it is read: after its last
//! block the reader hands over the 32-byte BLAKE3 digest of the bytes it read, the object's
//! trailer. The first packet therefore leaves as soon as the first block is read, whatever the
//! file's size, and each byte is read from the disk exactly once ([`FileSource::bytes_read`]
//! counts them). Files whose digest is already in the manifest (a resumed transfer, which
//! needs it up front) are read the same way, without hashing.
//!
//! Blocks the session no longer needs come back through [`Source::recycle`] and are refilled,
//! so after start-up the reader allocates nothing.
//!
//! **Resuming**, the session skips ahead over chunks the receiver already holds. The network
//! thread then drops the blocks before the position asked for, and tells the reader, which
//! seeks past them in files whose digest is in the manifest (it must still read — and hash —
//! a streamed file whole). A resumed file is then read twice at most: once for its digest
//! before the session starts, and once for what is actually sent.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use spate_proto::manifest::DIGEST_TRAILER;
use spate_proto::{Entry, EntryKind, Source};

use crate::scan::SourceFile;
use crate::sink::lock;

/// Block size read at once: 1 MiB (large sequential reads; 725 chunks of 1448 bytes).
const BLOCK: usize = 1 << 20;
/// Blocks read ahead of the network thread: 8 MiB, 6.7 ms at 10 Gbit/s (the session looks
/// 4 MiB further ahead, and the kernel's own read-ahead runs before both). Small enough that a
/// block is still in the CPU's cache when it is hashed, packed into packets and refilled: with
/// 32 MiB, reading and hashing a tmpfs file cost the sender 7.4 % of a core per Gbit/s, with
/// 8 MiB 5.9 (`spate-lab bench-io`, file → file, against 4.8 for a read and hash into one
/// buffer that never leaves the cache).
const AHEAD: usize = 8;

/// What the reader hands over: the next bytes of an object, or why it stopped.
struct Block {
    object: u32,
    offset: u64,
    data: Result<Vec<u8>, String>,
}

/// How the reader treats one manifest entry.
#[derive(Clone)]
struct Item {
    file: Option<SourceFile>,
    size: u64,
    /// Hash while reading and send the digest after the bytes (a streamed file).
    streamed: bool,
}

/// A [`Source`] over files, object `i` being the file of manifest entry `i - 1`.
pub struct FileSource {
    rx: Receiver<Block>,
    back: SyncSender<Vec<u8>>,
    read: Arc<AtomicU64>,
    /// The furthest position the session asked for: the reader may seek to it.
    asked: Arc<Mutex<(u32, u64)>>,
    reader: Option<JoinHandle<()>>,
}

impl FileSource {
    /// Start the reader thread for the manifest's `entries`, whose files are `files`.
    pub fn new(files: &[Option<SourceFile>], entries: &[Entry]) -> FileSource {
        let items: Vec<Item> = files
            .iter()
            .zip(entries)
            .map(|(f, e)| Item {
                file: f.clone(),
                size: e.size,
                streamed: e.kind == EntryKind::StreamedFile,
            })
            .collect();
        let (tx, rx) = sync_channel(AHEAD);
        let (back, back_rx) = sync_channel(AHEAD + 2);
        let read = Arc::new(AtomicU64::new(0));
        let asked = Arc::new(Mutex::new((1, 0)));
        let reader = Reader {
            tx,
            back: back_rx,
            counter: Arc::clone(&read),
            asked: Arc::clone(&asked),
        };
        let reader = std::thread::Builder::new()
            .name("spate-reader".into())
            .spawn(move || reader.read_all(&items))
            .expect("spawning a thread");
        FileSource {
            rx,
            back,
            read,
            asked,
            reader: Some(reader),
        }
    }

    /// Bytes read from files so far (each byte of each file once, when all goes well).
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
}

impl Source for FileSource {
    fn next(&mut self, object: u32, offset: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
        {
            let mut asked = lock(&self.asked);
            *asked = (*asked).max((object, offset));
        }
        loop {
            let b = match self.rx.try_recv() {
                Ok(b) => b,
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => {
                    return Err(format!(
                        "internal error: the reader stopped before object {object} offset \
                         {offset}"
                    ))
                }
            };
            let data = b.data?;
            let end = b.offset + data.len() as u64;
            if (b.object, end) <= (object, offset) {
                // Held by the receiver: skipped by the session.
                let _ = self.back.try_send(data);
                continue;
            }
            if (b.object, b.offset) > (object, offset) {
                return Err(format!(
                    "internal error: the reader is out of step (object {} offset {} where \
                     {object} offset {offset} was asked for)",
                    b.object, b.offset
                ));
            }
            let data = if b.offset < offset {
                let rest = data[(offset - b.offset) as usize..].to_vec();
                let _ = self.back.try_send(data);
                rest
            } else {
                data
            };
            if data.len() as u64 > max {
                return Err(format!(
                    "internal error: object {object} is longer than the manifest says"
                ));
            }
            return Ok(Some(data));
        }
    }

    fn recycle(&mut self, block: Vec<u8>) {
        let _ = self.back.try_send(block);
    }
}

impl Drop for FileSource {
    fn drop(&mut self) {
        // Closing the channel ends the reader at its next block.
        let (_, dead) = sync_channel(1);
        self.rx = dead;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// The reader thread's ends: blocks out, spent buffers back, bytes read, and how far the
/// session has asked.
struct Reader {
    tx: SyncSender<Block>,
    back: Receiver<Vec<u8>>,
    counter: Arc<AtomicU64>,
    asked: Arc<Mutex<(u32, u64)>>,
}

impl Reader {
    /// Every item's bytes in order, then (streamed files) their digest.
    fn read_all(&self, items: &[Item]) {
        for (i, item) in items.iter().enumerate() {
            let object = i as u32 + 1;
            let Some(path) = &item.file else { continue };
            match self.read_file(object, path, item) {
                Ok(true) => {}
                Ok(false) => return, // the session is gone
                Err(why) => {
                    let _ = self.tx.send(Block {
                        object,
                        offset: 0,
                        data: Err(why),
                    });
                    return;
                }
            }
        }
    }

    /// Where to go on in `object` from `offset`: further on if the session asked for a later
    /// position (a resume skipping what the receiver holds), `None` if it is past this object.
    /// A streamed file is read whole: its digest needs every byte.
    fn skip(&self, object: u32, offset: u64, item: &Item) -> Option<u64> {
        if item.streamed {
            return Some(offset);
        }
        let (o, off) = *lock(&self.asked);
        match o.cmp(&object) {
            std::cmp::Ordering::Greater => None,
            std::cmp::Ordering::Equal => Some(offset.max(off)),
            std::cmp::Ordering::Less => Some(offset),
        }
    }

    /// Send one file's blocks (and trailer); `Ok(false)` when the session stopped listening.
    fn read_file(&self, object: u32, path: &SourceFile, item: &Item) -> Result<bool, String> {
        if item.size == 0 && !item.streamed {
            return Ok(true);
        }
        if self.skip(object, 0, item).is_none() {
            return Ok(true);
        }
        let mut f: File = path.open().map_err(|e| e.to_string())?;
        let mut hasher = item.streamed.then(blake3::Hasher::new);
        let mut offset = 0u64;
        let cannot = |e: std::io::Error| format!("cannot read '{}': {e}", path.path.display());
        while offset < item.size {
            let Some(at) = self.skip(object, offset, item) else {
                return Ok(true);
            };
            if at != offset {
                offset = at.min(item.size);
                f.seek(SeekFrom::Start(offset)).map_err(cannot)?;
                continue;
            }
            let mut data = self.back.try_recv().unwrap_or_default();
            let len = (item.size - offset).min(BLOCK as u64) as usize;
            data.resize(len, 0);
            if let Err(e) = f.read_exact(&mut data) {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    return Err(format!(
                        "cannot read '{}': it is shorter than when the transfer started (was it \
                         changed?)",
                        path.path.display()
                    ));
                }
                return Err(cannot(e));
            }
            self.counter.fetch_add(len as u64, Ordering::Relaxed);
            if let Some(h) = hasher.as_mut() {
                h.update(&data);
            }
            let b = Block {
                object,
                offset,
                data: Ok(data),
            };
            if self.tx.send(b).is_err() {
                return Ok(false);
            }
            offset += len as u64;
        }
        if let Some(h) = hasher {
            let digest = h.finalize().as_bytes().to_vec();
            debug_assert_eq!(digest.len() as u64, DIGEST_TRAILER);
            let b = Block {
                object,
                offset,
                data: Ok(digest),
            };
            if self.tx.send(b).is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The next block, waiting up to 10 s for the reader.
    fn next_block(src: &mut FileSource, object: u32, offset: u64, max: u64) -> Vec<u8> {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            match src.next(object, offset, max) {
                Ok(Some(b)) => return b,
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(1)),
                other => panic!("object {object} offset {offset}: {other:?}"),
            }
        }
    }

    /// The first block is there long before the file is read, the reader stays a bounded
    /// distance ahead of the session, and a streamed file's bytes are followed by their digest
    /// — each byte read once.
    #[test]
    fn reads_each_byte_once_a_bounded_way_ahead_and_streams_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let size: u64 = 96 << 20;
        let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mut plan = crate::scan::plan(std::slice::from_ref(&path), "", false).unwrap();
        plan.stream_digests();
        let mut src = FileSource::new(&plan.sources, &plan.manifest.entries);
        let object_len = plan.manifest.entries[0].object_len();
        let first = next_block(&mut src, 1, 0, object_len);
        assert_eq!(first[..], data[..first.len()]);
        // Nobody takes more: the reader stops after its channel's worth.
        std::thread::sleep(Duration::from_millis(300));
        let ahead = src.bytes_read();
        assert!(
            ahead <= (AHEAD as u64 + 2) * BLOCK as u64,
            "read {ahead} bytes ahead of a session that took one block"
        );
        let mut got = first;
        while (got.len() as u64) < object_len {
            let at = got.len() as u64;
            let b = next_block(&mut src, 1, at, object_len - at);
            got.extend_from_slice(&b);
        }
        assert_eq!(got.len() as u64, size + DIGEST_TRAILER);
        assert_eq!(got[..size as usize], data[..]);
        assert_eq!(&got[size as usize..], blake3::hash(&data).as_bytes());
        assert_eq!(src.bytes_read(), size, "each byte read once");
    }

    /// Resuming, the session skips what the receiver holds: the reader seeks past it in a file
    /// whose digest is in the manifest, and the blocks it hands over start where asked.
    #[test]
    fn a_resume_skips_what_the_receiver_holds_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let size: u64 = 96 << 20;
        let data: Vec<u8> = (0..size).map(|i| (i % 241) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mut plan = crate::scan::plan(std::slice::from_ref(&path), "", false).unwrap();
        plan.compute_digests(|_| {}).unwrap();
        let mut src = FileSource::new(&plan.sources, &plan.manifest.entries);
        let first = next_block(&mut src, 1, 0, size);
        assert_eq!(first[..], data[..first.len()]);
        // Held by the receiver: everything up to 90 MiB + 100 (not a block boundary).
        let mut at = (90 << 20) + 100;
        while at < size {
            let b = next_block(&mut src, 1, at, size - at);
            assert_eq!(b[..], data[at as usize..at as usize + b.len()], "at {at}");
            at += b.len() as u64;
        }
        let read = src.bytes_read();
        assert!(
            read <= (AHEAD as u64 + 3) * BLOCK as u64 + (6 << 20),
            "read {read} bytes of a file of which 6 MiB were wanted"
        );
    }

    /// A file that shrank after the scan: a clear error, not a short digest.
    #[test]
    fn a_file_that_shrank_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 3 << 20]).unwrap();
        let mut plan = crate::scan::plan(std::slice::from_ref(&path), "", false).unwrap();
        plan.stream_digests();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let mut src = FileSource::new(&plan.sources, &plan.manifest.entries);
        let _ = next_block(&mut src, 1, 0, 3 << 20);
        let end = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match src.next(1, 1 << 20, 2 << 20) {
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(1)),
                other => break other.unwrap_err(),
            }
        };
        assert!(
            err.contains("shorter than when the transfer started"),
            "{err}"
        );
    }
}
