//! Every path the receiver touches stays below `--root`.
//!
//! Manifest paths are already relative, without `.`/`..` and without NUL or backslashes (the
//! core rejects others, spec §5.2); they are checked again here. Each component is then walked
//! from the root with `symlink_metadata`: an existing component that is a symbolic link —
//! the final name included — or a file where a directory is needed is refused, and missing
//! directories are created. Files are written under temporary names and renamed into place.
//!
//! Not covered: a local user racing the server by swapping a checked directory for a link
//! between the check and the write. `openat2(RESOLVE_BENEATH)` closes that window; it is the
//! planned hardening for multi-user servers.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use spate_proto::manifest::validate_path;

/// The directory transfers are confined to.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    /// `dir` must be an existing directory.
    pub fn new(dir: &Path) -> anyhow::Result<Root> {
        let meta = fs::metadata(dir).map_err(|e| {
            anyhow::anyhow!(
                "--root '{}': {e}; create it first or choose another directory",
                dir.display()
            )
        })?;
        if !meta.is_dir() {
            anyhow::bail!("--root '{}' is not a directory", dir.display());
        }
        Ok(Root {
            dir: fs::canonicalize(dir)?,
        })
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The absolute path for `rel`, creating its parent directories below the root. Refuses
    /// paths that would leave the root, including through symbolic links.
    pub fn prepare(&self, rel: &str) -> io::Result<PathBuf> {
        validate_path(rel).map_err(|why| refuse(format!("path '{rel}' {why}")))?;
        let mut at = self.dir.clone();
        let parts: Vec<&str> = rel.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let last = i + 1 == parts.len();
            match fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(refuse(format!(
                        "'{}' is a symbolic link; refusing to write through it",
                        at.display()
                    )))
                }
                Ok(m) if !last && !m.is_dir() => {
                    return Err(refuse(format!(
                        "'{}' exists and is not a directory",
                        at.display()
                    )))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && !last => fs::create_dir(&at)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(at)
    }
}

fn refuse(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_below_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::new(t.path()).unwrap();
        let p = root.prepare("a/b/c.txt").unwrap();
        assert!(p.starts_with(root.path()));
        assert!(root.path().join("a/b").is_dir());
        for bad in ["../x", "/etc/passwd", "a/../../x", "a//b", "./a", ""] {
            assert!(root.prepare(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn symlinks_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("link")).unwrap();
        let root = Root::new(t.path()).unwrap();
        let e = root.prepare("link/file").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = root.prepare("link").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
