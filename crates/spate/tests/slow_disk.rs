//! A receiver whose disk is slower than the path (issue 18, spec §7.4), on a real throttled
//! block device: an ext4 file system on a loop device whose writes the kernel's blkio throttle
//! holds to 25 MB/s, with the device's dirty pages capped (a strict per-device limit of
//! 16 MiB) so that the page cache cannot hide the disk. A sender fixed at 400 Mbit/s — twice
//! what the disk takes — sends 200 MiB to `spate serve` writing there. The receiver's Write
//! Limit must slow the sender to the disk: no datagram lost to a full socket buffer, at most
//! 1 % retransmitted, and an identical copy.
//!
//! Needs root, `losetup`, `mkfs.ext4` and the cgroup-v1 blkio controller (the throttle on the
//! root group covers the flusher threads' writeback, which cgroup v1 does not attribute to
//! the writer); skipped with a message otherwise. Everything it sets up is undone when it
//! ends, however it ends.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{free_port, is_root, run_bounded, serve, spate};

/// The disk's write rate, bytes/s.
const DISK_BPS: u64 = 25_000_000;
/// The transfer: more than the receiver's 64 MiB writer queue can absorb at twice the disk's
/// rate, so the Write Limit must hold the sender for most of it.
const SIZE: usize = 200 << 20;
const THROTTLE: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() || !o.stdout.is_empty() || !o.stderr.is_empty())
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A throttled ext4 file system on a loop device; torn down when dropped.
struct SlowDisk {
    device: String,
    /// "major:minor".
    number: String,
    mount: PathBuf,
}

impl SlowDisk {
    fn new(dir: &Path) -> SlowDisk {
        let image = dir.join("disk.img");
        fs::File::create(&image).unwrap().set_len(1 << 30).unwrap();
        let device = run(Command::new("losetup").args(["-f", "--show"]).arg(&image));
        let mount = dir.join("mnt");
        fs::create_dir(&mount).unwrap();
        let name = device.trim_start_matches("/dev/");
        let number = fs::read_to_string(format!("/sys/block/{name}/dev"))
            .unwrap()
            .trim()
            .to_owned();
        let disk = SlowDisk {
            device,
            number,
            mount,
        };
        run(Command::new("mkfs.ext4").args(["-q", "-F", &disk.device]));
        run(Command::new("mount").arg(&disk.device).arg(&disk.mount));
        let bdi = format!("/sys/class/bdi/{}", disk.number);
        fs::write(format!("{bdi}/strict_limit"), "1").unwrap();
        fs::write(format!("{bdi}/max_bytes"), (16u64 << 20).to_string()).unwrap();
        fs::write(THROTTLE, format!("{} {DISK_BPS}", disk.number)).unwrap();
        disk
    }
}

impl Drop for SlowDisk {
    fn drop(&mut self) {
        let _ = fs::write(THROTTLE, format!("{} 0", self.number));
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

/// The kernel's count of UDP datagrams dropped for a full receive buffer.
fn rcvbuf_errors() -> u64 {
    let snmp = fs::read_to_string("/proc/net/snmp").unwrap();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let i = names
        .split_whitespace()
        .position(|n| n == "RcvbufErrors")
        .unwrap();
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

#[test]
fn a_receiver_on_a_throttled_disk_slows_the_sender_without_losing_packets() {
    if !is_root() {
        eprintln!("SKIPPED: not root (a loop device and the blkio throttle need root)");
        return;
    }
    if !Path::new(THROTTLE).exists() || !have("losetup") || !have("mkfs.ext4") {
        eprintln!("SKIPPED: needs losetup, mkfs.ext4 and the cgroup-v1 blkio controller");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    let data = spate::noise::bytes(7, SIZE);
    fs::write(&src, &data).unwrap();
    let disk = SlowDisk::new(dir.path());
    let dst = disk.mount.join("dst");
    fs::create_dir(&dst).unwrap();
    let server = serve(&dst, free_port());
    let before = rcvbuf_errors();
    let out = run_bounded(
        spate()
            .args(["send", "--policy", "fixed", "--rate", "400M", "--json"])
            .arg(&src)
            .arg(format!("127.0.0.1:{}:copy.bin", server.port)),
        Duration::from_secs(120),
    );
    let dropped = rcvbuf_errors() - before;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = r["data_packets_sent"].as_u64().unwrap();
    let retransmitted = r["retransmitted_packets"].as_u64().unwrap();
    let seconds = r["duration_s"].as_f64().unwrap();
    let waited = r["receiver_disk_wait_s"].as_f64().unwrap();
    eprintln!(
        "{} MiB in {seconds:.2} s onto a {} MB/s disk: {retransmitted} of {sent} packets \
         retransmitted, {dropped} datagrams dropped for a full socket buffer, the sender held \
         {waited:.2} s by the receiver's Write Limit",
        SIZE >> 20,
        DISK_BPS / 1_000_000
    );
    // The disk, not the path, set the pace (else the throttle did not work and this test
    // would show nothing): 200 MiB at 25 MB/s is 8.4 s; at 400 Mbit/s it would be 4.2 s.
    assert!(
        seconds > SIZE as f64 / (1.5 * DISK_BPS as f64),
        "{seconds} s: the disk was not slower than the path: {r}"
    );
    assert!(waited > 0.0, "the Write Limit never held the sender: {r}");
    assert_eq!(dropped, 0, "datagrams lost to a full socket buffer: {r}");
    assert!(
        retransmitted * 100 <= sent,
        "{retransmitted} of {sent} retransmitted"
    );
    assert_eq!(r["verified"], true, "{r}");
    drop(server);
    assert!(
        fs::read(dst.join("copy.bin")).unwrap() == data,
        "the copy differs"
    );
    drop(disk);
}
