//! `spate-lab` as a command in a shell pipeline.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// `spate-lab sim … | head` where the reader has gone before the table is written: the
/// command ends as `cat` would, by SIGPIPE, not with a panic and a backtrace (it did: Rust
/// ignores SIGPIPE, so the write failed and `println!` panicked).
#[test]
fn a_reader_that_leaves_early_ends_it_quietly() {
    let dir = std::env::temp_dir().join(format!("spate-lab-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("short.toml");
    std::fs::File::create(&scenario)
        .unwrap()
        .write_all(
            b"name = \"short\"\nduration_s = 1.0\n[[path.phase]]\nat_s = 0.0\n\
              rate_mbps = 10.0\nrtt_ms = 20.0\n[[flow]]\nbytes = 0\n",
        )
        .unwrap();
    // The reader has left before the command starts: a pipe whose read end is closed. (Closing
    // it after the start raced with the simulation, which can write its table first.)
    let mut fds = [0; 2];
    // SAFETY: `pipe` writes two new descriptors into `fds`, which has room for them.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors were just opened by `pipe` and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let child = Command::new(env!("CARGO_BIN_EXE_spate-lab"))
        .arg("sim")
        .arg(&scenario)
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {stderr}",
        out.status
    );
}
