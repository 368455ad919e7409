//! What one session, and all sessions together, may ask of a server (`spate serve --max-*`,
//! `--quota`).
//!
//! A manifest beyond them is refused (CLOSE Refused, naming the limit and the option that
//! sets it) before anything is created: the sizes a manifest claims are only claims, and
//! memory, disk and directories must not follow them. The defaults are for a server open to
//! many senders.

use spate_proto::Manifest;

use crate::report::{escape, human_bytes};

/// Per-session and server-wide limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Entries (files and directories) per session.
    pub max_entries: usize,
    /// Bytes of any one file.
    pub max_file_size: u64,
    /// Bytes of all files of a session together.
    pub max_bytes: u64,
    /// Directory levels below the destination, at most.
    pub max_depth: usize,
    /// Sessions moving data at once (sessions whose sender proved its address; half-open
    /// sessions are limited separately, see `admit.rs`).
    pub max_sessions: usize,
    /// Bytes all sessions in progress may claim together (`None`: no limit beyond the free
    /// space of the file system, which is always checked for a fresh transfer).
    pub quota: Option<u64>,
}

impl Default for Limits {
    /// 100 000 entries (a tree that size takes seconds to create, not minutes), 4 TiB per
    /// file, 16 TiB per session, 64 levels, 64 sessions, no quota.
    fn default() -> Self {
        Limits {
            max_entries: 100_000,
            max_file_size: 4 << 40,
            max_bytes: 16 << 40,
            max_depth: 64,
            max_sessions: 64,
            quota: None,
        }
    }
}

impl Limits {
    /// Why `m`, whose entries go to `placed`, exceeds the per-session limits, if it does.
    pub fn check(&self, m: &Manifest, placed: &[String]) -> Option<String> {
        if m.entries.len() > self.max_entries {
            return Some(format!(
                "{} entries, more than this server accepts per transfer ({}, serve --max-entries)",
                m.entries.len(),
                self.max_entries
            ));
        }
        if let Some(e) = m.entries.iter().find(|e| e.size > self.max_file_size) {
            return Some(format!(
                "'{}' claims {}, more than this server accepts per file ({}, serve --max-file-size)",
                escape(&e.path),
                human_bytes(e.size),
                human_bytes(self.max_file_size)
            ));
        }
        let base = m
            .destination_dir()
            .split('/')
            .filter(|c| !c.is_empty())
            .count();
        if let Some(p) = placed
            .iter()
            .find(|p| p.split('/').count().saturating_sub(base) > self.max_depth)
        {
            return Some(format!(
                "'{}' is more than {} directory levels deep (serve --max-depth)",
                escape(p),
                self.max_depth
            ));
        }
        let total = m.total_bytes();
        (total > self.max_bytes).then(|| {
            format!(
                "the transfer claims {}, more than this server accepts per transfer ({}, serve --max-bytes)",
                human_bytes(total),
                human_bytes(self.max_bytes)
            )
        })
    }

    /// Why a transfer claiming `claim` bytes cannot start while sessions in progress claim
    /// `in_progress`, on a file system with `free` bytes available (`None`: unknown, or a
    /// resume, whose partial files already hold space). The quota counts claims; free space
    /// is compared with this transfer's claim alone — what others wrote is already gone from
    /// it, and what they only claim must not lock everyone else out.
    pub fn check_space(&self, claim: u64, in_progress: u64, free: Option<u64>) -> Option<String> {
        if let Some(q) = self.quota {
            if claim.saturating_add(in_progress) > q {
                return Some(format!(
                    "the transfer claims {}, and transfers in progress {}: more than this \
                     server's quota ({}, serve --quota); try again later",
                    human_bytes(claim),
                    human_bytes(in_progress),
                    human_bytes(q)
                ));
            }
        }
        let free = free?;
        (claim > free).then(|| {
            format!(
                "the transfer claims {} but the receiver has only {} free below its root",
                human_bytes(claim),
                human_bytes(free)
            )
        })
    }
}

/// Bytes available to an unprivileged user on the file system holding `dir`.
pub fn free_space(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a properly sized out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use spate_proto::{Entry, EntryKind};

    fn dir(p: &str) -> Entry {
        Entry {
            kind: EntryKind::Directory,
            ..Entry::file(p, 0)
        }
    }

    #[test]
    fn each_limit_names_its_option() {
        let l = Limits {
            max_entries: 3,
            max_file_size: 100,
            max_bytes: 150,
            max_depth: 2,
            ..Limits::default()
        };
        let deep = Manifest::new(vec![dir("a"), dir("a/b"), Entry::file("a/b/c", 1)]);
        let placed: Vec<String> = deep.entries.iter().map(|e| e.path.clone()).collect();
        assert!(l.check(&deep, &placed).unwrap().contains("--max-depth"));
        let many = Manifest::new((0..4).map(|i| Entry::file(format!("f{i}"), 1)).collect());
        assert!(l.check(&many, &[]).unwrap().contains("--max-entries"));
        let big = Manifest::new(vec![Entry::file("f", 101)]);
        assert!(l.check(&big, &[]).unwrap().contains("--max-file-size"));
        let sum = Manifest::new(vec![Entry::file("f", 100), Entry::file("g", 100)]);
        assert!(l.check(&sum, &[]).unwrap().contains("--max-bytes"));
        let q = Limits {
            quota: Some(1000),
            ..l
        };
        assert!(q.check_space(600, 500, None).unwrap().contains("--quota"));
        assert!(q.check_space(400, 500, Some(10_000)).is_none());
        assert!(q.check_space(400, 500, Some(800)).is_none());
        assert!(q.check_space(400, 0, Some(300)).unwrap().contains("free"));
    }
}
