//! The receiver's journal: which blocks of a partial file are written, and their digests, so an
//! interrupted transfer resumes without trusting the partial file blindly.
//!
//! Next to `.NAME.spate-part` the writer keeps `.NAME.spate-journal`, a text file:
//!
//! ```text
//! spate-journal 2 size=1073741824 digest=9f2c…(64 hex) mtime=1700000000.5
//! 0 3b7e…(64 hex: BLAKE3 chaining value of block 0)
//! 7 a01c…
//! ```
//!
//! The header names the source file the partial belongs to (size, the sender's BLAKE3 digest,
//! modification time): a resume for a changed source starts over. Each later line records one
//! [`BLOCK`]-sized block (the last may be shorter) that was completely written, with the BLAKE3
//! chaining value of its bytes — its subtree in the file's BLAKE3 tree, which the writer
//! computes anyway to assemble the file's digest (`treehash.rs`) — appended when the block
//! completed. (Version 1 journals held each block's own BLAKE3 hash; they are ignored, and the
//! file starts over.) On resume every listed block is read back
//! and hashed again; only blocks whose digest still matches are reported as held, so a partial
//! file damaged after it was written (bit rot, a torn write, someone editing it) is repaired by
//! sending those blocks again, never accepted. A line cut short by a crash ends the journal.
//!
//! No `fsync`: a block whose data did not reach the disk before a power failure fails its
//! digest check and is sent again; the journal can only lose progress, never vouch for bad data.
//! Why our own format: a few lines of text are the whole need, readable with `cat`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;

use cap_std::fs::OpenOptions;
use spate_proto::Entry;

use crate::confine::Target;
use crate::treehash::read_block_cv;

/// Journal block: 1 MiB. Small enough that a kill loses little, large enough that a 4 GiB
/// file needs only 4096 lines (~280 KiB) and hashing a block costs far more than its line.
pub const BLOCK: u64 = 1 << 20;

const MAGIC: &str = "spate-journal 2";

/// `.NAME.spate-part` for a final path.
pub fn part_path(target: &Target) -> Target {
    target.sibling("spate-part")
}

/// `.NAME.spate-journal` for a final path.
pub fn journal_path(target: &Target) -> Target {
    target.sibling("spate-journal")
}

/// A journal's header line names the source `entry` describes: the same size and
/// modification time, and the same digest when both name one. A journal written while a
/// streamed file arrived (`digest=-`: its digest comes last) is taken up by a resume, whose
/// manifest lists digests; if the source changed without changing size or time, its blocks
/// fail the file's digest check at the end and the partial file is discarded — never placed.
fn same_source(line: &str, entry: &Entry) -> bool {
    let want = header(entry);
    let unhashed = |l: &str| {
        let words = l.split(' ').map(|w| {
            if w.starts_with("digest=") {
                "digest=-"
            } else {
                w
            }
        });
        words.collect::<Vec<_>>().join(" ")
    };
    let either_unhashed = line.split(' ').any(|w| w == "digest=-") || entry.digest.is_none();
    line == want || (either_unhashed && unhashed(line) == unhashed(&want))
}

/// The header line for a manifest entry: what the partial file is a part of.
fn header(e: &Entry) -> String {
    let digest = e.digest.map_or_else(|| "-".to_owned(), |d| hex(&d));
    let mtime = e
        .mtime
        .map_or_else(|| "-".to_owned(), |t| format!("{}.{}", t.secs, t.nanos));
    format!("{MAGIC} size={} digest={digest} mtime={mtime}", e.size)
}

/// Bytes `[start, end)` of block `i` of a file of `size` bytes.
pub fn block_range(i: u64, size: u64) -> std::ops::Range<u64> {
    let start = i.saturating_mul(BLOCK).min(size);
    start..start.saturating_add(BLOCK).min(size)
}

/// An open journal, appended to as blocks complete.
pub struct Journal {
    file: File,
}

impl Journal {
    /// Start a journal for `entry` at `path` listing `blocks` (already verified) first.
    pub fn create(path: &Target, entry: &Entry, blocks: &[(u64, [u8; 32])]) -> io::Result<Journal> {
        let mut text = header(entry);
        text.push('\n');
        for (i, h) in blocks {
            text.push_str(&format!("{i} {}\n", hex(h)));
        }
        // A fresh file, created exclusively: whatever was at the name (a hard link planted to
        // make us write elsewhere, an old journal) is unlinked, not written through. Only the
        // session holding the partial file's lock gets here (`sink/part.rs`).
        match path.remove_file() {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = path.open(OpenOptions::new().write(true).create_new(true))?;
        file.write_all(text.as_bytes())?;
        Ok(Journal { file })
    }

    /// Record that block `i`, with digest `h`, is written.
    pub fn append(&mut self, i: u64, h: &[u8; 32]) -> io::Result<()> {
        self.file.write_all(format!("{i} {}\n", hex(h)).as_bytes())
    }
}

/// What a partial file still holds.
#[derive(Debug, Default)]
pub struct Salvage {
    /// Blocks whose bytes still match the journal: (index, digest).
    pub good: Vec<(u64, [u8; 32])>,
    /// Blocks the journal lists whose bytes no longer match (they will be sent again).
    pub damaged: u64,
}

/// Check the partial file of `entry` at `target` against its journal. `None` if there is no
/// usable partial (none, or one of another version of the source, or of another size).
pub fn salvage(target: &Target, entry: &Entry) -> Option<Salvage> {
    let journal = journal_path(target).open_read().ok()?;
    let part = part_path(target).open_read().ok()?;
    // Only a plain file of its own: a hard link (link count above one) may be someone's way
    // to make us vouch for, or later write, a file outside this transfer.
    let (jm, pm) = (journal.metadata().ok()?, part.metadata().ok()?);
    if !jm.is_file() || jm.nlink() != 1 || !pm.is_file() || pm.nlink() != 1 {
        return None;
    }
    if pm.len() != entry.size {
        return None;
    }
    let mut lines = BufReader::new(journal).lines();
    if !same_source(&lines.next()?.ok()?, entry) {
        return None;
    }
    let blocks = entry.size.div_ceil(BLOCK);
    let mut seen = vec![false; blocks as usize];
    let mut out = Salvage::default();
    let mut buf = Vec::new();
    for line in lines {
        let Some((i, h)) = line.ok().as_deref().and_then(parse_line) else {
            break; // torn by a crash: what follows is not trustworthy
        };
        if i >= blocks || std::mem::replace(&mut seen[i as usize], true) {
            continue;
        }
        match read_block_cv(&part, i, entry.size, &mut buf) {
            Ok(got) if got == h => out.good.push((i, h)),
            _ => out.damaged += 1,
        }
    }
    Some(out)
}

fn parse_line(line: &str) -> Option<(u64, [u8; 32])> {
    let (i, h) = line.split_once(' ')?;
    let i = i.parse().ok()?;
    if h.len() != 64 {
        return None;
    }
    let mut d = [0u8; 32];
    for (k, b) in d.iter_mut().enumerate() {
        *b = u8::from_str_radix(h.get(2 * k..2 * k + 2)?, 16).ok()?;
    }
    Some((i, d))
}

/// Remove a file's partial data and journal (after success, or when they cannot be used).
pub fn discard(target: &Target) {
    let _ = part_path(target).remove_file();
    let _ = journal_path(target).remove_file();
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::Root;
    use std::fs;
    use std::os::unix::fs::FileExt;

    #[test]
    fn salvage_keeps_matching_blocks_and_drops_damaged_ones() {
        let dir = tempfile::tempdir().unwrap();
        let target = Root::new(dir.path()).unwrap().prepare("f").unwrap();
        let size = 3 * BLOCK + 10;
        let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        let mut entry = Entry::file("f", size);
        entry.digest = Some(*blake3::hash(&data).as_bytes());
        fs::write(part_path(&target).path(), &data).unwrap();
        let part = File::open(part_path(&target).path()).unwrap();
        let mut buf = Vec::new();
        let blocks: Vec<_> = [0, 1, 3]
            .iter()
            .map(|&i| (i, read_block_cv(&part, i, size, &mut buf).unwrap()))
            .collect();
        let mut j = Journal::create(&journal_path(&target), &entry, &blocks[..2]).unwrap();
        j.append(blocks[2].0, &blocks[2].1).unwrap();
        drop(j);
        let s = salvage(&target, &entry).unwrap();
        assert_eq!(s.good.iter().map(|b| b.0).collect::<Vec<_>>(), [0, 1, 3]);
        // Damage block 1: it is no longer vouched for.
        let f = fs::OpenOptions::new()
            .write(true)
            .open(part_path(&target).path())
            .unwrap();
        f.write_all_at(b"X", BLOCK + 5).unwrap();
        let s = salvage(&target, &entry).unwrap();
        assert_eq!(s.good.iter().map(|b| b.0).collect::<Vec<_>>(), [0, 3]);
        assert_eq!(s.damaged, 1);
        // Another version of the source: nothing is used.
        entry.digest = Some([0; 32]);
        assert!(salvage(&target, &entry).is_none());
    }

    #[test]
    fn a_torn_line_ends_the_journal() {
        assert_eq!(parse_line("3 abc"), None);
        assert_eq!(parse_line(&format!("x {}", "0".repeat(64))), None);
        assert_eq!(
            parse_line(&format!("4 {}", "0".repeat(64))),
            Some((4, [0; 32]))
        );
    }
}
