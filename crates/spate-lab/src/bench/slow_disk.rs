//! A disk slower than the network, for `bench-io`'s "Spate against the disk's limit" row
//! (issue 18: file → file at ≥ 90 % of the disk limit measured in the same run).
//!
//! On tmpfs that limit cannot be judged: a new file's pages cost what the VM's memory costs at
//! that minute (3–24 Gbit/s on the project machine within minutes, `docs/results/bench-io.md`),
//! so the "disk" is as fast as the transfer and moves with it. A real disk slower than the path
//! has a limit that holds still. This module makes one:
//!
//! 1. an image file on tmpfs (so the only limit is the throttle), attached to a loop device
//!    and formatted ext4;
//! 2. the cgroup-v1 blkio throttle on the *root* group for that device
//!    (`blkio.throttle.write_bps_device`): v1 does not charge buffered writes to the writer's
//!    group (the flusher threads write them back from the root group), so a throttle on the
//!    writer's own group would not hold;
//! 3. a strict per-device dirty limit of 16 MiB (`/sys/class/bdi/MAJ:MIN/strict_limit`,
//!    `max_bytes`): without it the page cache (gigabytes on the project machine) would take a
//!    whole run at memory speed and write it back afterwards. With it, a writer waits for the
//!    device as it would for a slow disk; 16 MiB is the most any run can gain from the cache
//!    (1.6 % of a 1 GiB run).
//!
//! `crates/spate/tests/slow_disk.rs` asserts the same set-up's flow control (issue 18's "loses
//! nothing to socket overflow"); this one measures speed. Everything is undone on drop.
//! Needs root, `losetup`, `mkfs.ext4` and the blkio controller; [`unavailable`] says which is
//! missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use super::netns::{can_create, run};

/// The root group's write throttle (cgroup v1).
const THROTTLE: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";

/// The device's dirty-page allowance, bytes: see the module doc.
const DIRTY_BYTES: u64 = 16 << 20;

/// Why a throttled disk cannot be made here, or `None` if it can.
pub fn unavailable() -> Option<String> {
    if !can_create() {
        return Some("needs root (a loop device and the blkio throttle)".into());
    }
    if !Path::new(THROTTLE).exists() {
        return Some(format!("needs the cgroup-v1 blkio controller ({THROTTLE})"));
    }
    for tool in ["losetup", "mkfs.ext4"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Some(format!(
                "needs {tool} (apt-get install util-linux e2fsprogs)"
            ));
        }
    }
    None
}

/// An ext4 file system on a loop device whose writes the kernel holds to a set rate.
pub struct SlowDisk {
    image: PathBuf,
    device: Option<String>,
    /// "major:minor" of the device, once known.
    number: Option<String>,
    mount: PathBuf,
    mounted: bool,
}

impl SlowDisk {
    /// A disk of at least `bytes` free, written at most at `bytes_per_s`, with its image and
    /// mount point in `dir` (which should be on tmpfs).
    pub fn create(dir: &Path, bytes: u64, bytes_per_s: u64) -> Result<SlowDisk> {
        // ext4's journal and metadata take a few percent; a quarter more and 128 MiB is room.
        let size = bytes + bytes / 4 + (128 << 20);
        let mut disk = SlowDisk {
            image: dir.join("slow-disk.img"),
            device: None,
            number: None,
            mount: dir.join("slow-disk"),
            mounted: false,
        };
        std::fs::File::create(&disk.image)
            .and_then(|f| f.set_len(size))
            .with_context(|| format!("cannot make the disk image {}", disk.image.display()))?;
        let image = disk.image.to_string_lossy().into_owned();
        let device = run("losetup", &["-f", "--show", &image])?;
        disk.device = Some(device.clone());
        let name = device.trim_start_matches("/dev/");
        let number = std::fs::read_to_string(format!("/sys/block/{name}/dev"))
            .with_context(|| format!("no device number for {device}"))?
            .trim()
            .to_owned();
        disk.number = Some(number.clone());
        run("mkfs.ext4", &["-q", "-F", &device])?;
        std::fs::create_dir_all(&disk.mount)?;
        run("mount", &[&device, &disk.mount.to_string_lossy()])?;
        disk.mounted = true;
        let bdi = format!("/sys/class/bdi/{number}");
        write(&format!("{bdi}/strict_limit"), "1")?;
        write(&format!("{bdi}/max_bytes"), &DIRTY_BYTES.to_string())?;
        write(THROTTLE, &format!("{number} {bytes_per_s}"))?;
        Ok(disk)
    }

    /// Where the file system is mounted.
    pub fn root(&self) -> &Path {
        &self.mount
    }
}

impl Drop for SlowDisk {
    fn drop(&mut self) {
        if let Some(number) = &self.number {
            let _ = std::fs::write(THROTTLE, format!("{number} 0"));
        }
        if self.mounted {
            let _ = Command::new("umount").arg(&self.mount).status();
        }
        if let Some(device) = &self.device {
            let _ = Command::new("losetup").args(["-d", device]).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

fn write(path: &str, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("cannot write '{value}' to {path}"))
}
