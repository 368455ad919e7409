//! File bytes for the sender, read ahead on an I/O thread.
//!
//! New data is read in order — object 1 from offset 0, then object 2, … — so a reader thread
//! reads 1 MiB blocks in that order into a bounded channel ([`AHEAD`] blocks) while the network
//! thread copies chunks out of them. The last [`KEEP`] blocks stay in memory for
//! retransmissions; older bytes are re-read with `pread`, the rare case (a loss found more than
//! ~8 MiB of data later). Blocks go back to the reader once used and are refilled, so after
//! start-up nothing is allocated.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use spate_proto::Source;

use crate::scan::SourceFile;

/// Block size read at once: 1 MiB (large sequential reads; 725 chunks of 1448 bytes).
const BLOCK: usize = 1 << 20;
/// Blocks read ahead of the network thread: 32 MiB, 27 ms at 10 Gbit/s.
const AHEAD: usize = 32;
/// Blocks kept behind for retransmissions.
const KEEP: usize = 8;
/// Files kept open for re-reads.
const OPEN_FILES: usize = 16;

struct Block {
    object: u32,
    offset: u64,
    len: usize,
    data: Vec<u8>,
    error: Option<String>,
}

/// A [`Source`] over files, object `i` being `files[i - 1]` (`None`: a directory).
pub struct FileSource {
    files: Arc<Vec<Option<SourceFile>>>,
    rx: Receiver<Block>,
    back: SyncSender<Vec<u8>>,
    window: VecDeque<Block>,
    reader_done: bool,
    open: Vec<(u32, File)>,
    reader: Option<JoinHandle<()>>,
}

impl FileSource {
    /// Start the reader thread for `files` with their expected `sizes`.
    pub fn new(files: Vec<Option<SourceFile>>, sizes: Vec<u64>) -> FileSource {
        let files = Arc::new(files);
        let (tx, rx) = sync_channel(AHEAD);
        let (back, back_rx) = sync_channel(AHEAD + KEEP + 2);
        let f = Arc::clone(&files);
        let reader = std::thread::Builder::new()
            .name("spate-reader".into())
            .spawn(move || read_ahead(&f, &sizes, &tx, &back_rx))
            .expect("spawning a thread");
        FileSource {
            files,
            rx,
            back,
            window: VecDeque::new(),
            reader_done: false,
            open: Vec::new(),
            reader: Some(reader),
        }
    }

    fn path(&self, object: u32) -> String {
        self.files
            .get(object as usize - 1)
            .and_then(|p| p.as_ref())
            .map_or_else(
                || format!("object {object}"),
                |p| p.path.display().to_string(),
            )
    }

    /// Copy what the window holds of `object` at `offset` into `buf`; returns bytes copied.
    fn copy_from_window(&self, object: u32, offset: u64, buf: &mut [u8]) -> usize {
        for b in &self.window {
            if b.object == object && b.offset <= offset && offset < b.offset + b.len as u64 {
                let at = (offset - b.offset) as usize;
                let n = buf.len().min(b.len - at);
                buf[..n].copy_from_slice(&b.data[at..at + n]);
                return n;
            }
        }
        0
    }

    /// True if (object, offset) lies beyond the last block read so far.
    fn ahead_of_window(&self, object: u32, offset: u64) -> bool {
        match self.window.back() {
            None => true,
            Some(b) => (object, offset) >= (b.object, b.offset + b.len as u64),
        }
    }

    fn pull(&mut self) -> Result<bool, String> {
        if self.reader_done {
            return Ok(false);
        }
        let Ok(b) = self.rx.recv() else {
            self.reader_done = true;
            return Ok(false);
        };
        if let Some(e) = b.error {
            return Err(e);
        }
        self.window.push_back(b);
        while self.window.len() > KEEP {
            if let Some(old) = self.window.pop_front() {
                let _ = self.back.try_send(old.data);
            }
        }
        Ok(true)
    }

    fn pread(&mut self, object: u32, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let i = match self.open.iter().position(|(o, _)| *o == object) {
            Some(i) => i,
            None => {
                let path = self
                    .files
                    .get(object as usize - 1)
                    .and_then(|p| p.clone())
                    .ok_or_else(|| format!("object {object} has no file"))?;
                let f = path.open().map_err(|e| e.to_string())?;
                if self.open.len() >= OPEN_FILES {
                    self.open.remove(0);
                }
                self.open.push((object, f));
                self.open.len() - 1
            }
        };
        self.open[i]
            .1
            .read_exact_at(buf, offset)
            .map_err(|e| format!("cannot read '{}': {e}", self.path(object)))
    }
}

impl Source for FileSource {
    fn read(&mut self, object: u32, mut offset: u64, mut buf: &mut [u8]) -> Result<(), String> {
        while !buf.is_empty() {
            let n = self.copy_from_window(object, offset, buf);
            if n > 0 {
                offset += n as u64;
                buf = &mut buf[n..];
                continue;
            }
            if self.ahead_of_window(object, offset) && self.pull()? {
                continue;
            }
            return self.pread(object, offset, buf);
        }
        Ok(())
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

fn read_ahead(
    files: &[Option<SourceFile>],
    sizes: &[u64],
    tx: &SyncSender<Block>,
    back: &Receiver<Vec<u8>>,
) {
    for (i, (path, &size)) in files.iter().zip(sizes).enumerate() {
        let (Some(path), true) = (path, size > 0) else {
            continue;
        };
        let object = i as u32 + 1;
        let fail = |msg: String| {
            let _ = tx.send(Block {
                object,
                offset: 0,
                len: 0,
                data: Vec::new(),
                error: Some(msg),
            });
        };
        let mut f = match path.open() {
            Ok(f) => f,
            Err(e) => return fail(e.to_string()),
        };
        let mut offset = 0u64;
        while offset < size {
            let mut data = back.try_recv().unwrap_or_else(|_| vec![0u8; BLOCK]);
            let len = (size - offset).min(BLOCK as u64) as usize;
            if let Err(e) = f.read_exact(&mut data[..len]) {
                let why = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "it is shorter than when the transfer started (was it changed?)".to_owned()
                } else {
                    e.to_string()
                };
                return fail(format!("cannot read '{}': {why}", path.path.display()));
            }
            let b = Block {
                object,
                offset,
                len,
                data,
                error: None,
            };
            if tx.send(b).is_err() {
                return;
            }
            offset += len as u64;
        }
    }
}
