//! The manifest: what a session transfers and where it goes (`docs/spec.md` §5).
//!
//! The manifest is object 0 of a session. It names the destination and lists the entries
//! (files and directories) with their relative paths, sizes and metadata; entry *i* (counting
//! from 0) is object *i + 1*.
//!
//! ```text
//! Manifest:
//!   Destination Length (varint)  at most 4096
//!   Destination (..)     UTF-8: empty (the receiver's root) or a relative path, maybe ending in '/'
//!   Entry Count (varint)
//!   Entry × Entry Count:
//!     Flags (8)            bit 0: digest present; bit 1: mtime present;
//!                          bits 2–3: kind (0 = file, 1 = directory, 2 = streamed file,
//!                          3 = request); bit 4: RECURSIVE (requests only);
//!                          bits 5–7 unassigned
//!     Size (varint)        bytes of the file (0 for a directory)
//!     Mode (varint)        permission bits (low 12 bits); 0 = unspecified
//!     [Mtime Seconds (varint, zigzag)]  if bit 1: seconds since 1970-01-01 UTC
//!     [Mtime Nanos (varint)]            if bit 1: 0..=999 999 999
//!     [Digest (256)]                    if bit 0: BLAKE3 of the file's bytes
//!     Path Length (varint)
//!     Path (..)            UTF-8, relative, '/'-separated
//! ```
//!
//! > §5.2: A path is relative: non-empty, not starting with '/', with no empty, "." or ".."
//! > component, and containing neither NUL nor '\'. Two entries may not have the same path. An
//! > entry whose path has several components is preceded by a directory entry for its parent.
//! > A receiver rejects a manifest that breaks these rules (CLOSE with Refused) rather than
//! > rewriting paths, so nothing is ever written outside the destination.
//!
//! > §5.3: A manifest of exactly one entry, a file, sent to a Destination that does not end in
//! > '/' and that is not an existing directory at the receiver, is written *as* the
//! > Destination (`spate send a.iso host:b.iso` makes `b.iso`). In every other case each entry
//! > is written *into* the Destination, at `Destination/Path` (scp's and rsync's rule).
//!
//! Only the receiver knows whether the Destination is a directory, so the manifest carries it
//! as such and [`Manifest::placed_paths`] resolves it there.
//!
//! > §5.1: A **streamed file** (kind 2) has no Digest in the manifest: its object is the
//! > file's Size bytes followed by the 32-byte BLAKE3 digest of those bytes, so a sender can
//! > start before it has read the file and hashes each byte as it reads it for sending.
//!
//! > §5.6: The object 0 of a session whose HELLO sets GET is a **request**: a manifest whose
//! > entries are all of kind 3, each naming a path (or a glob) on the receiver that the
//! > receiver is asked to send back in an answering session. A receiver that predates
//! > requests refuses kind 3, so a request is never mistaken for files to write.
//!
//! Decoding never panics and bounds what a hostile sender can make us allocate.

use std::collections::HashMap;

use crate::codec::{Reader, Writer, VARINT_MAX};
use crate::wire::WireError;

/// Most entries a manifest may have.
pub const MAX_ENTRIES: u64 = 1_000_000;
/// Longest path, bytes (Linux PATH_MAX).
pub const MAX_PATH: usize = 4096;
/// Largest encoded manifest, bytes. Bounds the receiver's buffer for object 0.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file; its bytes are the object.
    File,
    /// A directory; its object is empty.
    Directory,
    /// A regular file whose object is its bytes followed by their 32-byte BLAKE3 digest
    /// ([`DIGEST_TRAILER`]); its manifest entry carries no digest.
    StreamedFile,
    /// A request (§5.6): send me what this path names on your side; `recursive`: a
    /// directory with everything below it. Its object is empty.
    Request {
        /// Directories are sent with everything below them (like `scp -r`).
        recursive: bool,
    },
}

impl EntryKind {
    /// A regular file, streamed or not.
    pub fn is_file(self) -> bool {
        matches!(self, EntryKind::File | EntryKind::StreamedFile)
    }

    /// A request entry (§5.6).
    pub fn is_request(self) -> bool {
        matches!(self, EntryKind::Request { .. })
    }
}

/// Entry flag of a request (§5.6): send a directory with everything below it.
const FLAG_RECURSIVE: u8 = 0x10;

/// Bytes after a streamed file's content in its object: the BLAKE3 digest of the content.
pub const DIGEST_TRAILER: u64 = 32;

/// Modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mtime {
    /// Seconds since the Unix epoch (may be negative).
    pub secs: i64,
    /// Nanoseconds, below 10^9.
    pub nanos: u32,
}

/// One manifest entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative path, '/'-separated.
    pub path: String,
    /// File or directory.
    pub kind: EntryKind,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// Permission bits, 0 if unspecified.
    pub mode: u32,
    /// Modification time, if known.
    pub mtime: Option<Mtime>,
    /// BLAKE3 digest of the content, if the sender computed it up front.
    pub digest: Option<[u8; 32]>,
}

impl Entry {
    /// A file entry with only a path and a size.
    pub fn file(path: impl Into<String>, size: u64) -> Self {
        Entry {
            path: path.into(),
            kind: EntryKind::File,
            size,
            mode: 0,
            mtime: None,
            digest: None,
        }
    }

    /// A request entry (§5.6) for `path` on the receiver.
    pub fn request(path: impl Into<String>, recursive: bool) -> Self {
        Entry {
            path: path.into(),
            kind: EntryKind::Request { recursive },
            size: 0,
            mode: 0,
            mtime: None,
            digest: None,
        }
    }

    /// Bytes of this entry's object (§5.1): the size, and for a streamed file the digest
    /// that follows it.
    pub fn object_len(&self) -> u64 {
        match self.kind {
            EntryKind::StreamedFile => self.size.saturating_add(DIGEST_TRAILER),
            EntryKind::File | EntryKind::Directory | EntryKind::Request { .. } => self.size,
        }
    }
}

/// Why a manifest was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The bytes are malformed.
    #[error("malformed manifest: {0}")]
    Wire(#[from] WireError),
    /// More entries than [`MAX_ENTRIES`].
    #[error("manifest lists {0} entries; at most {MAX_ENTRIES} are allowed")]
    TooManyEntries(u64),
    /// An entry's path is unsafe or malformed.
    #[error("entry {index}: path {path:?} {why}")]
    BadPath {
        /// Entry index.
        index: usize,
        /// The path, lossily decoded.
        path: String,
        /// What is wrong.
        why: &'static str,
    },
    /// The destination is not empty or a relative path (§5.1).
    #[error("destination {destination:?} {why}")]
    BadDestination {
        /// The destination, lossily decoded.
        destination: String,
        /// What is wrong.
        why: &'static str,
    },
    /// Two entries share a path.
    #[error("entries {first} and {second} have the same path {path:?}")]
    DuplicatePath {
        /// Earlier entry.
        first: usize,
        /// Later entry.
        second: usize,
        /// The path.
        path: String,
    },
    /// A field is out of range.
    #[error("entry {index}: {why}")]
    BadEntry {
        /// Entry index.
        index: usize,
        /// What is wrong.
        why: &'static str,
    },
}

/// What a session moves, and where to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Where the entries go, relative to the receiver's root: empty for the root itself,
    /// else a path of §5.2, optionally ending in one '/' ("a directory, even if absent").
    pub destination: String,
    /// Entries; entry `i` is object `i + 1`.
    pub entries: Vec<Entry>,
}

const FLAG_DIGEST: u8 = 0x01;
const FLAG_MTIME: u8 = 0x02;
const KIND_SHIFT: u8 = 2;

/// Check a Destination against spec §5.1: empty, or a path of §5.2 with at most one trailing '/'.
pub fn validate_destination(dest: &str) -> Result<(), &'static str> {
    match dest.strip_suffix('/') {
        None if dest.is_empty() => Ok(()),
        Some("") => Err("is '/' alone (the root is the empty destination)"),
        Some(d) => validate_path(d),
        None => validate_path(dest),
    }
}

/// Check a relative path against spec §5.2.
pub fn validate_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    if path.len() > MAX_PATH {
        return Err("is longer than 4096 bytes");
    }
    if path.starts_with('/') {
        return Err("is absolute");
    }
    if path.contains('\0') {
        return Err("contains NUL");
    }
    if path.contains('\\') {
        return Err("contains a backslash");
    }
    for c in path.split('/') {
        match c {
            "" => return Err("has an empty component"),
            "." | ".." => return Err("has a '.' or '..' component"),
            _ => {}
        }
    }
    Ok(())
}

impl Manifest {
    /// A request (§5.6): its entries are requests (the first decides; [`validate`] refuses
    /// a mix).
    ///
    /// [`validate`]: Self::validate
    pub fn is_request(&self) -> bool {
        self.entries.first().is_some_and(|e| e.kind.is_request())
    }

    /// Total bytes of all files (digest trailers not counted).
    pub fn total_bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| e.size)
            .fold(0u64, u64::saturating_add)
    }

    /// Bytes of object `object` (0 is the manifest itself and is not listed), a streamed
    /// file's digest trailer included.
    pub fn object_size(&self, object: u32) -> Option<u64> {
        let i = (object as usize).checked_sub(1)?;
        self.entries.get(i).map(Entry::object_len)
    }

    /// A manifest of `entries` for the receiver's root (empty destination).
    pub fn new(entries: Vec<Entry>) -> Manifest {
        Manifest {
            destination: String::new(),
            entries,
        }
    }

    /// True when the only entry, a file, is written as the destination itself (§5.3):
    /// `dest_is_dir` says whether the receiver has a directory at the destination.
    pub fn writes_as_destination(&self, dest_is_dir: bool) -> bool {
        !dest_is_dir
            && !self.destination.is_empty()
            && !self.destination.ends_with('/')
            && matches!(self.entries.as_slice(), [e] if e.kind.is_file())
    }

    /// The destination without its trailing '/': empty for the root.
    pub fn destination_dir(&self) -> &str {
        self.destination
            .strip_suffix('/')
            .unwrap_or(&self.destination)
    }

    /// Where each entry is written, relative to the receiver's root (§5.3). The joined paths
    /// may exceed [`MAX_PATH`]; the receiver checks each before use.
    pub fn placed_paths(&self, dest_is_dir: bool) -> Vec<String> {
        let dir = self.destination_dir();
        if self.writes_as_destination(dest_is_dir) {
            return vec![dir.to_owned()];
        }
        self.entries
            .iter()
            .map(|e| {
                if dir.is_empty() {
                    e.path.clone()
                } else {
                    format!("{dir}/{}", e.path)
                }
            })
            .collect()
    }

    /// Check every rule of §5.1–§5.2.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.entries.len() as u64 > MAX_ENTRIES {
            return Err(ManifestError::TooManyEntries(self.entries.len() as u64));
        }
        validate_destination(&self.destination).map_err(|why| ManifestError::BadDestination {
            destination: self.destination.clone(),
            why,
        })?;
        // §5.6: a request is all requests (and a manifest of files has none).
        let request = self.is_request();
        if request && !self.destination.is_empty() {
            return Err(ManifestError::BadDestination {
                destination: self.destination.clone(),
                why: "must be empty in a request",
            });
        }
        // Path → (index, kind) of the entries so far.
        let mut seen: HashMap<&str, (usize, EntryKind)> =
            HashMap::with_capacity(self.entries.len());
        for (index, e) in self.entries.iter().enumerate() {
            validate_path(&e.path).map_err(|why| ManifestError::BadPath {
                index,
                path: e.path.clone(),
                why,
            })?;
            if e.kind.is_request() != request {
                return Err(ManifestError::BadEntry {
                    index,
                    why: "a request mixed with other entries",
                });
            }
            if request && (e.size != 0 || e.mode != 0 || e.mtime.is_some() || e.digest.is_some()) {
                return Err(ManifestError::BadEntry {
                    index,
                    why: "a request entry with a size, mode, mtime or digest",
                });
            }
            if e.kind == EntryKind::Directory && e.size != 0 {
                return Err(ManifestError::BadEntry {
                    index,
                    why: "directory with non-zero size",
                });
            }
            if e.kind == EntryKind::StreamedFile {
                if e.digest.is_some() {
                    return Err(ManifestError::BadEntry {
                        index,
                        why: "streamed file with a digest in the manifest",
                    });
                }
                if e.size > VARINT_MAX - DIGEST_TRAILER {
                    return Err(ManifestError::BadEntry {
                        index,
                        why: "streamed file too large for its digest trailer",
                    });
                }
            }
            if let Some(m) = e.mtime {
                if m.nanos >= 1_000_000_000 {
                    return Err(ManifestError::BadEntry {
                        index,
                        why: "mtime nanoseconds ≥ 10^9",
                    });
                }
            }
            if let Some(&(first, _)) = seen.get(e.path.as_str()) {
                return Err(ManifestError::DuplicatePath {
                    first,
                    second: index,
                    path: e.path.clone(),
                });
            }
            // Requests name paths on the receiver, which has their parents.
            if let Some((parent, _)) = e.path.rsplit_once('/').filter(|_| !request) {
                if !matches!(seen.get(parent), Some((_, EntryKind::Directory))) {
                    return Err(ManifestError::BadPath {
                        index,
                        path: e.path.clone(),
                        why: "is not preceded by a directory entry for its parent",
                    });
                }
            }
            seen.insert(e.path.as_str(), (index, e.kind));
        }
        Ok(())
    }

    /// Encode (after validating).
    pub fn encode(&self) -> Result<Vec<u8>, ManifestError> {
        self.validate()?;
        let cap: usize = self
            .entries
            .iter()
            .map(|e| 64 + e.path.len())
            .sum::<usize>()
            + 16
            + self.destination.len();
        let mut out = vec![0u8; cap];
        let mut w = Writer::new(&mut out);
        w.varint(self.destination.len() as u64)?;
        w.put(self.destination.as_bytes())?;
        w.varint(self.entries.len() as u64)?;
        for e in &self.entries {
            let kind = match e.kind {
                EntryKind::File => 0u8,
                EntryKind::Directory => 1,
                EntryKind::StreamedFile => 2,
                EntryKind::Request { .. } => 3,
            };
            let recursive = matches!(e.kind, EntryKind::Request { recursive: true });
            let flags = (if e.digest.is_some() { FLAG_DIGEST } else { 0 })
                | (if recursive { FLAG_RECURSIVE } else { 0 })
                | (if e.mtime.is_some() { FLAG_MTIME } else { 0 })
                | (kind << KIND_SHIFT);
            w.u8(flags)?;
            w.varint(e.size)?;
            w.varint(u64::from(e.mode & 0o7777))?;
            if let Some(m) = e.mtime {
                w.varint(zigzag(m.secs))?;
                w.varint(u64::from(m.nanos))?;
            }
            if let Some(d) = &e.digest {
                w.put(d)?;
            }
            w.varint(e.path.len() as u64)?;
            w.put(e.path.as_bytes())?;
        }
        let n = w.len();
        out.truncate(n);
        Ok(out)
    }

    /// Decode and validate.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(WireError::Invalid("manifest larger than 64 MiB").into());
        }
        let mut r = Reader::new(bytes);
        let dest_len = r.varint()?;
        if dest_len > MAX_PATH as u64 + 1 {
            return Err(WireError::Invalid("destination longer than 4097 bytes").into());
        }
        let raw = r.bytes(dest_len as usize)?;
        let destination = std::str::from_utf8(raw)
            .map_err(|_| ManifestError::BadDestination {
                destination: String::from_utf8_lossy(raw).into_owned(),
                why: "is not UTF-8",
            })?
            .to_owned();
        let count = r.varint()?;
        if count > MAX_ENTRIES {
            return Err(ManifestError::TooManyEntries(count));
        }
        // Each entry takes at least 4 bytes, which bounds the allocation by the input size.
        let mut entries = Vec::with_capacity((count as usize).min(bytes.len() / 4));
        for index in 0..count as usize {
            // §8.4: unassigned flag bits (4–7) are ignored on receipt.
            let flags = r.u8()?;
            let kind = match (flags >> KIND_SHIFT) & 0x3 {
                0 => EntryKind::File,
                1 => EntryKind::Directory,
                2 => EntryKind::StreamedFile,
                _ => EntryKind::Request {
                    recursive: flags & FLAG_RECURSIVE != 0,
                },
            };
            let size = r.varint()?;
            let mode = r.varint()?;
            if mode > 0o7777 {
                return Err(ManifestError::BadEntry {
                    index,
                    why: "mode beyond permission bits",
                });
            }
            let mtime = if flags & FLAG_MTIME != 0 {
                let secs = unzigzag(r.varint()?);
                let nanos = r.varint()?;
                if nanos >= 1_000_000_000 {
                    return Err(ManifestError::BadEntry {
                        index,
                        why: "mtime nanoseconds ≥ 10^9",
                    });
                }
                Some(Mtime {
                    secs,
                    nanos: nanos as u32,
                })
            } else {
                None
            };
            let digest = if flags & FLAG_DIGEST != 0 {
                Some(r.array::<32>()?)
            } else {
                None
            };
            let len = r.varint()?;
            if len > MAX_PATH as u64 {
                return Err(ManifestError::BadEntry {
                    index,
                    why: "path longer than 4096 bytes",
                });
            }
            let raw = r.bytes(len as usize)?;
            let path = std::str::from_utf8(raw)
                .map_err(|_| ManifestError::BadPath {
                    index,
                    path: String::from_utf8_lossy(raw).into_owned(),
                    why: "is not UTF-8",
                })?
                .to_owned();
            entries.push(Entry {
                path,
                kind,
                size,
                mode: mode as u32,
                mtime,
                digest,
            });
        }
        if r.remaining() != 0 {
            return Err(WireError::Invalid("trailing bytes after manifest").into());
        }
        let m = Manifest {
            destination,
            entries,
        };
        m.validate()?;
        Ok(m)
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64 & crate::codec::VARINT_MAX
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            destination: String::new(),
            entries: vec![
                Entry {
                    path: "dir".into(),
                    kind: EntryKind::Directory,
                    size: 0,
                    mode: 0o755,
                    mtime: Some(Mtime { secs: -5, nanos: 7 }),
                    digest: None,
                },
                Entry {
                    path: "dir/a.bin".into(),
                    kind: EntryKind::File,
                    size: 1 << 40,
                    mode: 0o644,
                    mtime: Some(Mtime {
                        secs: 1_700_000_000,
                        nanos: 999_999_999,
                    }),
                    digest: Some([7; 32]),
                },
                Entry::file("b", 0),
            ],
        }
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let bytes = m.encode().unwrap();
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
    }

    #[test]
    fn literal_bytes_of_one_file() {
        let m = Manifest {
            destination: String::new(),
            entries: vec![Entry::file("a", 300)],
        };
        // destination len=0, count=1, flags=0, size=300 (2-byte varint 0x412c), mode=0,
        // path len=1, "a"
        assert_eq!(
            m.encode().unwrap(),
            vec![0x00, 0x01, 0x00, 0x41, 0x2c, 0x00, 0x01, b'a']
        );
    }

    #[test]
    fn unsafe_paths_are_rejected() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a\\b",
            "a/\0",
        ] {
            let m = Manifest {
                destination: String::new(),
                entries: vec![Entry::file(bad, 1)],
            };
            assert!(
                matches!(m.encode(), Err(ManifestError::BadPath { .. })),
                "path {bad:?} was accepted"
            );
        }
        let dup = Manifest {
            destination: String::new(),
            entries: vec![Entry::file("x", 1), Entry::file("x", 2)],
        };
        assert!(matches!(
            dup.encode(),
            Err(ManifestError::DuplicatePath { .. })
        ));
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        // Claims a million entries in 6 bytes.
        let bytes = [0x00, 0x80, 0x0f, 0x42, 0x40, 0x00];
        assert!(Manifest::decode(&bytes).is_err());
        let too_many = [0x00, 0x80, 0x0f, 0x42, 0x41];
        assert!(matches!(
            Manifest::decode(&too_many),
            Err(ManifestError::TooManyEntries(_))
        ));
    }

    fn placed(dest: &str, entries: Vec<Entry>, dest_is_dir: bool) -> Vec<String> {
        let m = Manifest {
            destination: dest.into(),
            entries,
        };
        let back = Manifest::decode(&m.encode().unwrap()).unwrap();
        assert_eq!(back, m, "the destination survives encoding");
        back.placed_paths(dest_is_dir)
    }

    /// §5.3: one file to a destination that is not a directory is written as it; anything
    /// else goes into it.
    #[test]
    fn destination_rule_of_scp() {
        let f = || Entry::file("a.iso", 3);
        assert_eq!(placed("b.iso", vec![f()], false), ["b.iso"]);
        assert_eq!(placed("x/b.iso", vec![f()], false), ["x/b.iso"]);
        assert_eq!(placed("b.iso", vec![f()], true), ["b.iso/a.iso"]);
        assert_eq!(placed("d/", vec![f()], false), ["d/a.iso"]);
        assert_eq!(placed("", vec![f()], false), ["a.iso"]);
        assert_eq!(
            placed("d", vec![f(), Entry::file("b", 1)], false),
            ["d/a.iso", "d/b"]
        );
        let dir = Entry {
            kind: EntryKind::Directory,
            ..Entry::file("t", 0)
        };
        assert_eq!(
            placed("d", vec![dir.clone(), Entry::file("t/x", 1)], false),
            ["d/t", "d/t/x"]
        );
        // A lone directory (`-r` of an empty tree) goes into the destination too.
        assert_eq!(placed("d", vec![dir], false), ["d/t"]);
    }

    #[test]
    fn bad_destinations_are_rejected() {
        for bad in ["/", "/abs", "../x", "a//", "a/./b", "a\\b"] {
            let m = Manifest {
                destination: bad.into(),
                entries: vec![Entry::file("a", 1)],
            };
            assert!(
                matches!(m.encode(), Err(ManifestError::BadDestination { .. })),
                "destination {bad:?} was accepted"
            );
        }
    }

    /// §5.2: an entry below a directory needs that directory's entry earlier in the list.
    #[test]
    fn parents_precede_their_contents() {
        let dir = |p: &str| Entry {
            kind: EntryKind::Directory,
            ..Entry::file(p, 0)
        };
        let ok = Manifest::new(vec![dir("a"), dir("a/b"), Entry::file("a/b/c", 1)]);
        assert!(ok.encode().is_ok());
        for bad in [
            vec![Entry::file("a/b", 1)],
            vec![Entry::file("a/b", 1), dir("a")],
            vec![Entry::file("a", 1), Entry::file("a/b", 1)],
        ] {
            let m = Manifest::new(bad.clone());
            assert!(
                matches!(m.encode(), Err(ManifestError::BadPath { .. })),
                "{bad:?} was accepted"
            );
        }
    }

    /// §8.4: unassigned flag bits (here 4–7 of an entry's Flags) are ignored on receipt.
    #[test]
    fn unassigned_entry_flags_are_ignored() {
        let m = Manifest::new(vec![Entry::file("a", 300)]);
        let mut bytes = m.encode().unwrap();
        bytes[2] |= 0xf0;
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
    }

    /// A streamed file (kind 2) carries its digest after its bytes: its object is 32 bytes
    /// longer, it may not also list a digest, and a size whose object would pass the largest
    /// offset is refused — as a peer's bytes, not only as our own encoding.
    #[test]
    fn streamed_files_follow_their_rules_on_the_wire() {
        let mut e = Entry::file("s", 5);
        e.kind = EntryKind::StreamedFile;
        let m = Manifest::new(vec![e.clone()]);
        let bytes = m.encode().unwrap();
        assert_eq!(bytes[2] >> KIND_SHIFT & 0x3, 2);
        let back = Manifest::decode(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.object_size(1), Some(5 + DIGEST_TRAILER));
        assert_eq!(back.total_bytes(), 5, "the trailer is not file bytes");
        // The digest flag set on a streamed entry (a peer's bytes: 32 digest bytes added).
        let mut with_digest = bytes.clone();
        with_digest[2] |= FLAG_DIGEST;
        with_digest.splice(5..5, [0u8; 32]);
        assert!(matches!(
            Manifest::decode(&with_digest),
            Err(ManifestError::BadEntry { why, .. }) if why.contains("digest in the manifest")
        ));
        // A size whose trailer would end past the largest offset.
        let mut huge = e;
        huge.size = VARINT_MAX - DIGEST_TRAILER + 1;
        assert!(Manifest::new(vec![huge]).encode().is_err());
        // Kind 3 is a request, which has no size.
        let mut kind3 = bytes;
        kind3[2] |= 3 << KIND_SHIFT;
        assert!(Manifest::decode(&kind3).is_err());
    }

    /// §5.6: a request is all request entries, with an empty destination and nothing but a
    /// path (patterns included, parents not listed) and the RECURSIVE bit.
    #[test]
    fn requests_follow_their_rules() {
        let m = Manifest::new(vec![
            Entry::request("logs/*.gz", false),
            Entry::request("photos/2024", true),
        ]);
        assert!(m.is_request());
        let bytes = m.encode().unwrap();
        assert_eq!(bytes[2], 3 << KIND_SHIFT);
        assert_eq!(
            bytes[2 + 4 + "logs/*.gz".len()],
            3 << KIND_SHIFT | FLAG_RECURSIVE
        );
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
        assert_eq!(m.object_size(1), Some(0));
        let refused = |m: Manifest| m.encode().unwrap_err().to_string();
        let mut mixed = m.clone();
        mixed.entries.push(Entry::file("f", 1));
        assert!(refused(mixed).contains("mixed"));
        let mut dest = m.clone();
        dest.destination = "in".into();
        assert!(refused(dest).contains("empty in a request"));
        let mut sized = m.clone();
        sized.entries[0].size = 1;
        assert!(refused(sized).contains("a request entry with a size"));
        for bad in ["../etc/passwd", "/etc/passwd", "a//b"] {
            assert!(Manifest::new(vec![Entry::request(bad, false)])
                .encode()
                .is_err());
        }
        assert!(!Manifest::new(vec![Entry::file("f", 1)]).is_request());
    }
}
