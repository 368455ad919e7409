//! Every path the receiver touches stays below `--root`.
//!
//! Manifest paths are already relative, without `.`/`..` and without NUL or backslashes (the
//! core rejects others, spec §5.2); they are checked again here. Each component is then walked
//! from the root: an existing component that is a symbolic link — the final name included — or
//! a file where a directory is needed is refused, and missing directories are created. Files are
//! written under temporary names and renamed into place.
//!
//! Every operation — the walk, opening, renaming, removing — goes through an open handle on the
//! root directory with [`cap_std`], which resolves each path beneath that handle (with
//! `openat2(RESOLVE_BENEATH)` where the kernel has it, else component by component) and fails
//! if the path would leave it, through `..`, an absolute symlink or one that climbs out. So a
//! local user who swaps a checked directory for a link between the walk and the write cannot
//! redirect the write outside the root: the worst a race can do is fail the transfer or move it
//! within the root. (cap-std rather than our own `openat` walk: it is made for exactly this,
//! handles the kernels without `openat2`, and is kept by the Bytecode Alliance; cap-fs-ext adds
//! not following a link at the end of a path.)

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, Metadata, OpenOptions, Permissions, PermissionsExt};
use spate_proto::manifest::validate_path;

/// The directory transfers are confined to. Cheap to clone: every [`Target`] holds one.
#[derive(Debug, Clone)]
pub struct Root(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    dir: Dir,
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
        let path = fs::canonicalize(dir)?;
        let handle = Dir::open_ambient_dir(&path, cap_std::ambient_authority())
            .map_err(|e| anyhow::anyhow!("--root '{}': {e}", path.display()))?;
        Ok(Root(Arc::new(Shared { path, dir: handle })))
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The open handle every operation resolves beneath.
    pub(crate) fn dir(&self) -> &Dir {
        &self.0.dir
    }

    /// Where `manifest`'s entries go below this root (spec §5.3): a single file sent to a
    /// destination that is not an existing directory here is written as it. A symbolic link
    /// at the destination is not a directory (and `prepare` refuses to write through it).
    pub fn placed_paths(&self, manifest: &spate_proto::Manifest) -> Vec<String> {
        let dest = manifest.destination_dir();
        let dest_is_dir =
            dest.is_empty() || self.dir().symlink_metadata(dest).is_ok_and(|m| m.is_dir());
        manifest.placed_paths(dest_is_dir)
    }

    /// The place for `rel`, creating its parent directories below the root. Refuses paths
    /// that would leave the root, names reserved for temporary files, and symbolic links
    /// anywhere on the way. Messages name paths relative to the root: they go to the peer.
    pub fn prepare(&self, rel: &str) -> io::Result<Target> {
        self.prepare_noting(rel, &mut Vec::new())
    }

    /// [`prepare`](Self::prepare), appending each directory it creates to `created` (so a
    /// session that fails can remove them again).
    pub fn prepare_noting(&self, rel: &str, created: &mut Vec<Target>) -> io::Result<Target> {
        validate_path(rel).map_err(|why| refuse(format!("path '{rel}' {why}")))?;
        if let Some(part) = rel.split('/').find(|p| is_reserved(p)) {
            return Err(refuse(format!(
                "path '{rel}': '{part}' is a name the receiver uses for its temporary files"
            )));
        }
        let mut at = PathBuf::new();
        let parts: Vec<&str> = rel.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let last = i + 1 == parts.len();
            match self.dir().symlink_metadata(&at) {
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
                Err(e) if e.kind() == io::ErrorKind::NotFound && !last => {
                    self.dir().create_dir(&at)?;
                    created.push(Target {
                        root: self.clone(),
                        rel: at.clone(),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Target {
            root: self.clone(),
            rel: at,
        })
    }
}

/// A path below a [`Root`]; every operation on it is resolved beneath the root's handle.
#[derive(Debug, Clone)]
pub struct Target {
    root: Root,
    rel: PathBuf,
}

impl Target {
    /// The absolute path (for messages: operations go through the root's handle).
    pub fn path(&self) -> PathBuf {
        self.root.path().join(&self.rel)
    }

    /// `.NAME.ext` beside this one.
    pub fn sibling(&self, ext: &str) -> Target {
        let name = self.rel.file_name().unwrap_or_default().to_string_lossy();
        Target {
            root: self.root.clone(),
            rel: self.rel.with_file_name(format!(".{name}.{ext}")),
        }
    }

    /// Metadata, not following a symbolic link at the end.
    pub fn symlink_metadata(&self) -> io::Result<Metadata> {
        self.root.dir().symlink_metadata(&self.rel)
    }

    /// Open with `options` (a symbolic link at the end is not followed).
    pub fn open(&self, options: &OpenOptions) -> io::Result<fs::File> {
        let mut o = options.clone();
        o.follow(FollowSymlinks::No);
        Ok(self.root.dir().open_with(&self.rel, &o)?.into_std())
    }

    /// Open for reading.
    pub fn open_read(&self) -> io::Result<fs::File> {
        self.open(OpenOptions::new().read(true))
    }

    /// Create this directory.
    pub fn create_dir(&self) -> io::Result<()> {
        self.root.dir().create_dir(&self.rel)
    }

    /// Set the permission bits of this file or directory.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        self.root
            .dir()
            .set_permissions(&self.rel, Permissions::from_mode(mode))
    }

    /// Rename this file over `to` (replacing a file there).
    pub fn rename_to(&self, to: &Target) -> io::Result<()> {
        self.root.dir().rename(&self.rel, to.root.dir(), &to.rel)
    }

    /// Remove this file.
    pub fn remove_file(&self) -> io::Result<()> {
        self.root.dir().remove_file(&self.rel)
    }

    /// Remove this directory if it is empty.
    pub fn remove_dir(&self) -> io::Result<()> {
        self.root.dir().remove_dir(&self.rel)
    }
}

/// `.NAME.spate-part` and `.NAME.spate-journal` are the receiver's (`journal.rs`): a peer that
/// could name them could write into another transfer's temporary file.
fn is_reserved(component: &str) -> bool {
    component.starts_with('.')
        && (component.ends_with(".spate-part") || component.ends_with(".spate-journal"))
}

fn refuse(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    /// A root in a fresh directory, and another directory outside it.
    fn root_and_outside() -> (TempDir, Root, TempDir) {
        let t = tempfile::tempdir().unwrap();
        let root = Root::new(t.path()).unwrap();
        (t, root, tempfile::tempdir().unwrap())
    }

    #[test]
    fn paths_stay_below_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::new(t.path()).unwrap();
        let p = root.prepare("a/b/c.txt").unwrap();
        assert_eq!(p.path(), root.path().join("a/b/c.txt"));
        assert!(root.path().join("a/b").is_dir());
        for bad in ["../x", "/etc/passwd", "a/../../x", "a//b", "./a", ""] {
            assert!(root.prepare(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn symlinks_are_not_followed() {
        let (t, root, outside) = root_and_outside();
        std::os::unix::fs::symlink(outside.path(), t.path().join("link")).unwrap();
        let e = root.prepare("link/file").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = root.prepare("link").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    /// The race the walk alone cannot stop: a directory checked by `prepare` is swapped for a
    /// link to elsewhere before the writer uses it. Every operation still resolves beneath the
    /// root, so each fails and nothing appears outside.
    #[test]
    fn a_directory_swapped_for_a_link_after_the_check_does_not_lead_out() {
        let (t, root, outside) = root_and_outside();
        let target = root.prepare("d/f").unwrap();
        let part = target.sibling("spate-part");
        fs::remove_dir(t.path().join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("d")).unwrap();
        let create = OpenOptions::new().write(true).create(true).clone();
        assert!(part.open(&create).is_err());
        assert!(target.open(&create).is_err());
        assert!(root.prepare("d/g").is_err());
        let sub = Target {
            root: root.clone(),
            rel: PathBuf::from("d/sub"),
        };
        assert!(sub.create_dir().is_err());
        fs::write(t.path().join("x"), b"x").unwrap();
        let x = root.prepare("x").unwrap();
        assert!(x.rename_to(&target).is_err());
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(t.path().join("x").exists());
    }

    /// A link at the final name, planted after the check, is not followed either.
    /// Issue 14, finding 2b: a peer that names another transfer's temporary file
    /// (`.f.spate-part`) in its manifest could have its bytes placed as `f`. Those names are
    /// refused, in any component.
    #[test]
    fn temporary_names_are_reserved() {
        let (_t, root, _) = root_and_outside();
        for bad in ["in/.f.spate-part", ".f.spate-journal", ".d.spate-part/x"] {
            let e = root.prepare(bad).unwrap_err();
            assert!(e.to_string().contains("temporary files"), "{bad}: {e}");
        }
        for ok in ["f.spate-part", ".hidden", "in/.f.spate-partial"] {
            assert!(root.prepare(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_link_planted_at_the_final_name_is_not_followed() {
        let (t, root, outside) = root_and_outside();
        let target = root.prepare("f").unwrap();
        let victim = outside.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("f")).unwrap();
        let write = OpenOptions::new().write(true).truncate(true).clone();
        assert!(target.open(&write).is_err());
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
    }
}
