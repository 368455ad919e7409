//! Opening a temporary file (`.NAME.spate-part`, `.NAME.spate-journal`) so that it is this
//! session's alone, whatever is found at its name.
//!
//! The temporary's name is fixed — a resume must find the partial file an earlier session
//! left — so ownership comes from a lock, not the name: the writer takes an exclusive
//! `flock` on the open file and holds it for as long as it writes. A second session that
//! wants the same temporary while the first writes it fails to lock and is refused with a
//! clear message; a partial file left by a session that ended (or a server that was killed —
//! the kernel drops its locks) can be locked and is taken over.
//!
//! What may be at the name, and what happens:
//! - nothing: created;
//! - a regular file with one link (ours from an earlier session): locked and reused, truncated
//!   first unless the session resumes from it;
//! - a symbolic link: never followed (`O_NOFOLLOW` through cap-std); the name is removed and
//!   a file created exclusively (`O_EXCL`) in its place;
//! - a hard link to another file (link count above one: possibly planted to make us write
//!   outside the root), a FIFO, device or socket: the name is removed — which leaves the other
//!   file untouched — and a new file is created exclusively.
//!
//! After locking, the name must still lead to the locked file: a finishing writer renames its
//! temporary into place and only then closes (unlocks) it, so an open that raced with that
//! rename locks the placed file. That case is detected (device and inode differ) and the open
//! retried.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;

use cap_std::fs::MetadataExt as _;
use std::os::unix::io::AsRawFd;

use cap_std::fs::OpenOptions;

use crate::confine::Target;

/// Attempts before giving up on a name that keeps changing under us.
const ATTEMPTS: usize = 4;

/// Open (creating if needed) the temporary at `part` for reading and writing, locked for this
/// session. With `truncate`, its old contents are dropped (after locking, so another
/// session's data is never truncated). `name` is how messages call the final file.
pub fn open_locked(part: &Target, truncate: bool, name: &str) -> io::Result<File> {
    for _ in 0..ATTEMPTS {
        let file = match part.open(OpenOptions::new().read(true).write(true).create(true)) {
            Ok(f) => f,
            // A symbolic link at the name (O_NOFOLLOW refuses it): replace the name.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                part.remove_file()?;
                continue;
            }
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if !meta.is_file() || meta.nlink() != 1 {
            // Not a file of its own: drop the name (the file it links to is not touched)
            // and create one exclusively.
            drop(file);
            part.remove_file()?;
            let file = part.open(OpenOptions::new().read(true).write(true).create_new(true))?;
            lock(&file, name)?;
            return Ok(file);
        }
        lock(&file, name)?;
        // The name may have been renamed away between our open and lock.
        let now = part.symlink_metadata();
        if now.is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino()) {
            if truncate {
                file.set_len(0)?;
            }
            return Ok(file);
        }
    }
    Err(io::Error::other(format!(
        "the temporary file for '{name}' keeps changing; is another program writing there?"
    )))
}

/// Take the session's exclusive lock on `file`, or say who holds it.
fn lock(file: &File, name: &str) -> io::Result<()> {
    // SAFETY: flock on a descriptor this function borrows; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "'{name}' is being written by another transfer right now; send it again when \
                 that one has finished (the last one to finish is what stays in place)"
            ),
        ));
    }
    Err(e)
}
