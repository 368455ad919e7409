//! The sender's view of the file system: command-line sources become a manifest.
//!
//! Each source `PATH` becomes an entry named by its last component; with `-r` a directory is
//! walked (sorted by name, so the manifest is the same on every run, which
//! `--resume` relies on) and its subdirectories and files keep their relative paths. Each
//! entry carries size, permission bits, modification time and — for files — the BLAKE3 digest
//! of its content, which the receiver checks before the file is renamed into place: streamed
//! after the file's bytes as the reader reads them ([`Plan::stream_digests`], the default), or
//! in the manifest when resuming ([`Plan::compute_digests`]).
//!
//! The destination is not joined onto the paths: the manifest carries it as it is (spec §5.1),
//! because only the receiver knows whether it is a directory. A single file sent to `b.iso`
//! becomes `b.iso` unless the receiver has a directory of that name; several sources, or a
//! tree, go into it (§5.3, as scp and rsync do).
//!
//! Symbolic links inside a tree and special files (sockets, devices, FIFOs) are skipped and
//! listed: sending what a link points to could leak files outside the tree, and recreating
//! links is a later feature. A symbolic link given on the command line is followed (the user
//! named it): the plan keeps the path it resolves to.
//!
//! **What is sent is what was scanned.** Each file is remembered with its identity (device and
//! inode) as scanned, and every later open — for hashing, reading ahead, re-reading —
//! goes through [`SourceFile::open`]: without following a symbolic link at the end
//! (`O_NOFOLLOW`), and checking that the file opened is the one scanned. A file of the tree
//! swapped for a link to a secret (or for another file) while `spate send -r` runs therefore
//! fails the transfer with a message instead of sending the secret under a valid digest.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use spate_proto::manifest::{validate_path, Mtime};
use spate_proto::{Entry, EntryKind, Manifest};

/// What to send: the manifest and, for each entry, where its bytes come from.
#[derive(Debug)]
pub struct Plan {
    /// The manifest (object 0).
    pub manifest: Manifest,
    /// Source file of each entry (`None` for directories).
    pub sources: Vec<Option<SourceFile>>,
    /// Paths skipped (symbolic links and special files inside trees), with the reason.
    pub skipped: Vec<(PathBuf, &'static str)>,
}

/// A file to send: its path and the identity of the file it named when scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The path (a symbolic link given on the command line already resolved).
    pub path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SourceFile {
    /// Open for reading, without following a symbolic link at the end, and only if it is
    /// still the file that was scanned (not replaced since).
    pub fn open(&self) -> io::Result<File> {
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    io::Error::other(format!(
                        "'{}' was replaced by a symbolic link after the transfer started; \
                         nothing of it is sent",
                        self.path.display()
                    ))
                } else {
                    io::Error::new(
                        e.kind(),
                        format!("cannot read '{}': {e}", self.path.display()),
                    )
                }
            })?;
        let m = f.metadata()?;
        if (m.dev(), m.ino()) != (self.dev, self.ino) {
            return Err(io::Error::other(format!(
                "'{}' was replaced by another file after the transfer started; nothing of it \
                 is sent — send it again when it is stable",
                self.path.display()
            )));
        }
        Ok(f)
    }
}

/// Check a destination and put it in the manifest's form (spec §5.1): relative to the server's
/// root; empty, `.` or `./` is the root itself; a trailing '/' (kept, one) says "a directory,
/// even if it does not exist yet".
pub fn normalize_dest(dest: &str) -> Result<String> {
    let dir = dest.ends_with('/');
    let mut d = dest.trim_end_matches('/');
    while let Some(rest) = d.strip_prefix("./") {
        d = rest.trim_start_matches('/');
    }
    if d.is_empty() || d == "." {
        return Ok(String::new());
    }
    if let Err(why) = validate_path(d) {
        bail!(
            "destination '{dest}' {why}: give a path relative to the server's --root \
             (for example 'incoming', 'incoming/' or '.'), without '..' or a leading '/'"
        );
    }
    Ok(if dir { format!("{d}/") } else { d.to_owned() })
}

/// What a plan needs of a file's metadata: std's ([`fs::Metadata`]) for files found by path,
/// cap-std's for files found beneath a directory handle (a server's, `request.rs`).
pub(crate) trait ScannedMeta {
    /// (size, mode, mtime seconds, mtime nanoseconds, device, inode)
    fn scanned(&self) -> (u64, u32, i64, i64, u64, u64);
}

/// Both metadata types answer with the same Unix fields, through their own `MetadataExt`.
macro_rules! scanned_meta {
    ($meta:ty, $ext:path) => {
        impl ScannedMeta for $meta {
            fn scanned(&self) -> (u64, u32, i64, i64, u64, u64) {
                use $ext as M;
                (
                    self.len(),
                    M::mode(self),
                    M::mtime(self),
                    M::mtime_nsec(self),
                    M::dev(self),
                    M::ino(self),
                )
            }
        }
    };
}

scanned_meta!(fs::Metadata, std::os::unix::fs::MetadataExt);
scanned_meta!(cap_std::fs::Metadata, cap_std::fs::MetadataExt);

/// Build the plan for `sources` sent to `dest` (already normalised by [`normalize_dest`]).
pub fn plan(sources: &[PathBuf], dest: &str, recursive: bool) -> Result<Plan> {
    plan_filtered(sources, dest, recursive, &Filter::default())
}

/// Which entries of a walked tree to send (`--exclude`, `--include`).
///
/// Rules are tried in the order given and the first whose glob matches decides; an entry no
/// rule matches is sent. A pattern with a `/` is matched against the entry's path as it will
/// be named on the receiver (`photos/2024/a.jpg`), one without against its name alone
/// (`*.tmp`). `*` does not cross `/`; `**` does. An excluded directory is skipped with
/// everything below it. Sources named on the command line are always sent.
#[derive(Debug, Default)]
pub struct Filter {
    rules: Vec<(bool, globset::GlobMatcher, bool)>,
}

impl Filter {
    /// Add a rule: `include` or exclude what `pattern` matches.
    pub fn rule(&mut self, pattern: &str, include: bool) -> Result<()> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .with_context(|| format!("'{pattern}' is not a valid pattern"))?;
        self.rules
            .push((include, glob.compile_matcher(), pattern.contains('/')));
        Ok(())
    }

    /// Whether the entry at `rel` (named `name`) is sent.
    pub fn sends(&self, rel: &str, name: &str) -> bool {
        for (include, m, whole) in &self.rules {
            if m.is_match(if *whole { rel } else { name }) {
                return *include;
            }
        }
        true
    }
}

/// [`plan`] with `filter` applied to the entries found below directories.
pub fn plan_filtered(
    sources: &[PathBuf],
    dest: &str,
    recursive: bool,
    filter: &Filter,
) -> Result<Plan> {
    let mut p = Plan::empty(dest);
    for src in sources {
        let meta = fs::metadata(src).with_context(|| format!("cannot read '{}'", src.display()))?;
        let path = source_name(src)?;
        if meta.is_dir() {
            if !recursive {
                bail!(
                    "'{}' is a directory: add -r to send directory trees",
                    src.display()
                );
            }
            p.push(path.clone(), src, &meta);
            walk(&mut p, src, &path, filter)?;
        } else if meta.is_file() {
            // A link named on the command line is followed: keep where it leads, so that
            // later opens need not follow links.
            let real = if fs::symlink_metadata(src)?.file_type().is_symlink() {
                fs::canonicalize(src)
                    .with_context(|| format!("cannot resolve '{}'", src.display()))?
            } else {
                src.to_path_buf()
            };
            p.push(path, &real, &meta);
        } else {
            bail!("'{}' is not a regular file or directory", src.display());
        }
    }
    if p.manifest.entries.is_empty() {
        bail!("nothing to send");
    }
    p.manifest
        .validate()
        .map_err(|e| anyhow::anyhow!("cannot send these paths: {e}"))?;
    Ok(p)
}

fn source_name(src: &Path) -> Result<String> {
    let abs;
    let name = match src.file_name() {
        Some(n) => n,
        None => {
            abs = fs::canonicalize(src)
                .with_context(|| format!("cannot resolve '{}'", src.display()))?;
            abs.file_name().unwrap_or_default()
        }
    };
    let name = name
        .to_str()
        .with_context(|| format!("'{}': file names must be UTF-8", src.display()))?;
    if name.is_empty() {
        bail!("cannot send the file system root '/'; name a directory below it");
    }
    Ok(name.to_owned())
}

/// `dir/name`, or `name` at the top.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

fn walk(p: &mut Plan, dir: &Path, prefix: &str, filter: &Filter) -> Result<()> {
    let mut children: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("cannot list '{}'", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot list '{}'", dir.display()))?;
    children.sort_by_key(|e| e.file_name());
    for child in children {
        let path = child.path();
        let Some(name) = child.file_name().to_str().map(str::to_owned) else {
            p.skipped.push((path, "name is not UTF-8"));
            continue;
        };
        let meta = fs::symlink_metadata(&path)
            .with_context(|| format!("cannot read '{}'", path.display()))?;
        let rel = join(prefix, &name);
        if !filter.sends(&rel, &name) {
            continue;
        }
        if meta.file_type().is_symlink() {
            p.skipped.push((path, "symbolic link"));
        } else if meta.is_dir() {
            p.push(rel.clone(), &path, &meta);
            walk(p, &path, &rel, filter)?;
        } else if meta.is_file() {
            p.push(rel, &path, &meta);
        } else {
            p.skipped.push((path, "special file"));
        }
    }
    Ok(())
}

impl Plan {
    /// An empty plan of entries for `dest`.
    pub(crate) fn empty(dest: &str) -> Plan {
        Plan {
            manifest: Manifest {
                destination: dest.to_owned(),
                entries: vec![],
            },
            sources: vec![],
            skipped: vec![],
        }
    }

    fn push(&mut self, path: String, src: &Path, meta: &fs::Metadata) {
        self.push_scanned(path, src, meta.is_dir(), meta);
    }

    /// Add the entry `path`, read from `src`, as `meta` (std's or cap-std's metadata, from
    /// wherever the scan looked) describes it; `dir`: it is a directory. Every later open of
    /// `src` checks it is still the file of `meta` ([`SourceFile::open`]).
    pub(crate) fn push_scanned(
        &mut self,
        path: String,
        src: &Path,
        dir: bool,
        meta: &impl ScannedMeta,
    ) {
        let (len, mode, secs, nanos, dev, ino) = meta.scanned();
        self.manifest.entries.push(Entry {
            path,
            kind: if dir {
                EntryKind::Directory
            } else {
                EntryKind::File
            },
            size: if dir { 0 } else { len },
            mode: mode & 0o7777,
            mtime: Some(Mtime {
                secs,
                nanos: nanos.clamp(0, 999_999_999) as u32,
            }),
            digest: None,
        });
        self.sources.push((!dir).then(|| SourceFile {
            path: src.to_path_buf(),
            dev,
            ino,
        }));
    }

    /// Send every file as a streamed file (spec §5.1): its digest follows its bytes, computed
    /// by the reader as it reads them for sending, so the transfer starts at once and each
    /// byte is read once. A session that resumes needs the digests up front instead
    /// ([`compute_digests`](Self::compute_digests)): the receiver checks what it holds
    /// against them before anything is sent.
    pub fn stream_digests(&mut self) {
        for e in &mut self.manifest.entries {
            if e.kind.is_file() {
                e.kind = EntryKind::StreamedFile;
                e.digest = None;
            }
        }
    }

    /// Compute every file's digest (reading each file once), calling `progress(bytes)` as
    /// bytes are hashed.
    pub fn compute_digests(&mut self, mut progress: impl FnMut(u64)) -> Result<()> {
        for (e, src) in self.manifest.entries.iter_mut().zip(&self.sources) {
            let Some(src) = src else { continue };
            let mut f = src.open()?;
            let (digest, n) = digest_reader(&mut f, &mut progress)
                .with_context(|| format!("cannot read '{}'", src.path.display()))?;
            if n != e.size {
                bail!(
                    "'{}' changed size while being read ({} → {n} bytes); send it again when it is stable",
                    src.path.display(),
                    e.size
                );
            }
            e.digest = Some(digest);
        }
        Ok(())
    }
}

/// BLAKE3 of a file's bytes and its length.
pub fn digest_file(path: &Path, progress: &mut impl FnMut(u64)) -> Result<([u8; 32], u64)> {
    let mut f = File::open(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    digest_reader(&mut f, progress).with_context(|| format!("cannot read '{}'", path.display()))
}

/// BLAKE3 of everything `r` yields, in 1 MiB reads.
pub fn digest_reader(
    r: &mut impl std::io::Read,
    progress: &mut impl FnMut(u64),
) -> std::io::Result<([u8; 32], u64)> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
        total += n as u64;
        progress(n as u64);
    }
    Ok((*h.finalize().as_bytes(), total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::FileSource;
    use spate_proto::Source;

    #[test]
    fn excludes_and_includes_follow_the_first_matching_rule() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("tree");
        fs::create_dir_all(tree.join("build/deep")).unwrap();
        fs::create_dir_all(tree.join("src")).unwrap();
        for f in [
            "a.rs",
            "b.tmp",
            "keep.tmp",
            "build/deep/x.o",
            "src/c.rs",
            "src/d.tmp",
        ] {
            fs::write(tree.join(f), b"x").unwrap();
        }
        let mut filter = Filter::default();
        filter.rule("keep.tmp", true).unwrap();
        filter.rule("*.tmp", false).unwrap();
        filter.rule("tree/build", false).unwrap();
        let p = plan_filtered(&[tree], "", true, &filter).unwrap();
        let names: Vec<&str> = p.manifest.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            names,
            [
                "tree",
                "tree/a.rs",
                "tree/keep.tmp",
                "tree/src",
                "tree/src/c.rs"
            ]
        );
        assert!(Filter::default().rule("[", false).is_err());
    }

    /// Issue 14, finding 7: a file of the tree swapped, after the scan, for a symbolic link to
    /// a secret of the same size (or for another file) was sent — the secret under a valid
    /// digest. Hashing and sending now refuse a file that is not the one scanned.
    #[test]
    fn a_file_swapped_after_the_scan_is_not_sent() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("tree");
        fs::create_dir(&tree).unwrap();
        let secret = t.path().join("secret");
        fs::write(&secret, b"the secret").unwrap();
        let f = tree.join("f");
        for swap in ["link", "file"] {
            fs::write(&f, b"harmless!!").unwrap();
            let mut p = plan(std::slice::from_ref(&tree), "", true).unwrap();
            // Swapped between the scan and the hashing.
            let keep = t.path().join("old");
            fs::rename(&f, &keep).unwrap(); // the scanned inode stays alive
            if swap == "link" {
                std::os::unix::fs::symlink(&secret, &f).unwrap();
            } else {
                // Another file renamed over it (created while the old one still exists, so
                // it is a different inode).
                fs::copy(&secret, t.path().join("other")).unwrap();
                fs::rename(t.path().join("other"), &f).unwrap();
            }
            let e = p.compute_digests(|_| {}).unwrap_err().to_string();
            assert!(e.contains("was replaced"), "{swap}: {e}");
            // Swapped between hashing and sending.
            fs::remove_file(&f).unwrap();
            fs::write(&f, b"harmless!!").unwrap();
            let mut p = plan(std::slice::from_ref(&tree), "", true).unwrap();
            p.compute_digests(|_| {}).unwrap();
            fs::rename(&f, &keep).unwrap();
            if swap == "link" {
                std::os::unix::fs::symlink(&secret, &f).unwrap();
            } else {
                // Another file renamed over it (created while the old one still exists, so
                // it is a different inode).
                fs::copy(&secret, t.path().join("other")).unwrap();
                fs::rename(t.path().join("other"), &f).unwrap();
            }
            let mut src = FileSource::new(&p.sources, &p.manifest.entries);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let got = loop {
                match src.next(2, 0, 10) {
                    Ok(None) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    other => break other,
                }
            };
            let e = got.unwrap_err();
            assert!(e.contains("was replaced"), "{swap}: {e}");
            assert_eq!(src.bytes_read(), 0, "nothing of the swapped file was read");
            fs::remove_file(&f).unwrap();
        }
    }

    /// A symbolic link named on the command line is followed, as before.
    #[test]
    fn a_link_named_on_the_command_line_is_sent() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        fs::write(&real, b"content").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut p = plan(&[link], "", false).unwrap();
        p.compute_digests(|_| {}).unwrap();
        assert_eq!(p.manifest.entries[0].path, "link");
        assert_eq!(
            p.manifest.entries[0].digest,
            Some(*blake3::hash(b"content").as_bytes())
        );
    }
}
