//! The floor under a file → file transfer's CPU: the work per byte that no implementation of a
//! verified, encrypted transfer can skip, measured on this machine in the same run as Spate.
//!
//! | end | per byte, once | measured by |
//! |---|---|---|
//! | sender | read from the page cache (the kernel's copy), BLAKE3, seal, `sendmsg` | [`read_and_hash`], the AEAD row, the raw UDP blaster |
//! | receiver | `recvmsg`, open, BLAKE3, write into a new file | the raw UDP sink, the AEAD row, [`hash`], [`fresh_write`] |
//!
//! Each term is the cheapest form of that work on one core: the file read in 1 MiB `read`s
//! into one buffer that stays in cache and hashed at once, BLAKE3 over a 1 MiB block already
//! in cache, the AEAD over 1432-byte payloads in place, UDP in 64 KiB GSO batches. The sum is
//! therefore a little *below* what any real sender or receiver can reach: its buffers cannot
//! all stay in cache, and it has acknowledgements, ranges and pacing besides. Spate's
//! file → file CPU is reported against it as a ratio — the part of its cost that is its own.

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use super::ends::cpu_seconds;

/// Read block of [`read_and_hash`]: as Spate's reader (`spate::source`).
const BLOCK: usize = 1 << 20;

/// Passes of [`read_and_hash`]: the cheapest is the floor (a pass that meets a busy moment of
/// the machine only says so about the machine).
const PASSES: usize = 3;

/// Read `path` whole in 1 MiB `read`s into one buffer, hashing each block with BLAKE3 as it
/// comes (as Spate's reader does), [`PASSES`] times: Gbit/s and CPU-seconds per Gbit of the
/// cheapest pass.
pub fn read_and_hash(path: &Path) -> Result<(f64, f64)> {
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..PASSES {
        let pass = read_and_hash_once(path)?;
        if best.is_none_or(|b| pass.1 < b.1) {
            best = Some(pass);
        }
    }
    best.context("no pass")
}

fn read_and_hash_once(path: &Path) -> Result<(f64, f64)> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut buf = vec![0u8; BLOCK];
    let mut hasher = blake3::Hasher::new();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    std::hint::black_box(hasher.finalize());
    per_gbit(total, cpu0, t0)
}

/// Write a new file of `size` bytes at `path` in 256 KiB writes (as Spate's writers do) and
/// remove it: Gbit/s, and CPU-seconds per Gbit of this process.
pub fn fresh_write(path: &Path, size: u64) -> Result<(f64, f64)> {
    use std::os::unix::fs::FileExt;
    let f =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut block = vec![0u8; 256 << 10];
    spate::noise::Noise::new(3).fill(&mut block);
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut at = 0;
    while at < size {
        let n = (size - at).min(block.len() as u64) as usize;
        f.write_all_at(&block[..n], at)?;
        at += n as u64;
    }
    let measured = per_gbit(at, cpu0, t0);
    drop(f);
    std::fs::remove_file(path)?;
    measured
}

/// A new file at `path` written in 1 MiB `O_DIRECT` writes (Spate's receiver with
/// `--direct-io`, `spate::sink::direct`): (Gbit/s, CPU-seconds per Gbit) over the whole
/// blocks of `size`, or `None` where the file system refuses `O_DIRECT`.
pub fn direct_write(path: &Path, size: u64) -> Result<Option<(f64, f64)>> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    const BLOCK: usize = 1 << 20;
    let Ok(f) = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    else {
        return Ok(None);
    };
    // 4 KiB-aligned, as O_DIRECT wants: a slice of a larger vector.
    let mut buf = vec![0u8; BLOCK + 4096];
    let skip = buf.as_ptr().align_offset(4096);
    let block = &mut buf[skip..skip + BLOCK];
    spate::noise::Noise::new(3).fill(block);
    let blocks = (size / BLOCK as u64).max(1);
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    for i in 0..blocks {
        match f.write_all_at(block, i * BLOCK as u64) {
            Err(e) if i == 0 && e.raw_os_error() == Some(libc::EINVAL) => {
                drop(f);
                std::fs::remove_file(path)?;
                return Ok(None);
            }
            r => r.with_context(|| format!("cannot write {}", path.display()))?,
        }
    }
    let measured = per_gbit(blocks * BLOCK as u64, cpu0, t0);
    drop(f);
    std::fs::remove_file(path)?;
    measured.map(Some)
}

/// Whether this machine is a VM that returns freed pages to its host (virtio-balloon with
/// `VIRTIO_BALLOON_F_REPORTING`, feature bit 5 in sysfs's feature string): the host then
/// unmaps them, and the next write into them pays a first touch again.
pub fn free_page_reporting() -> bool {
    let Ok(dir) = std::fs::read_dir("/sys/bus/virtio/drivers/virtio_balloon") else {
        return false;
    };
    dir.flatten().any(|d| {
        std::fs::read_to_string(d.path().join("features"))
            .is_ok_and(|f| f.as_bytes().get(5) == Some(&b'1'))
    })
}

/// KiB of freed memory this VM has handed back to its host so far, where the kernel's
/// free page reporting says (`/sys/module/page_reporting/parameters/reported_kib`, a
/// parameter of some VM kernels, not of upstream Linux): what a new file's pages may have to
/// be faulted in from the host again.
pub fn reported_kib() -> Option<u64> {
    std::fs::read_to_string("/sys/module/page_reporting/parameters/reported_kib")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// BLAKE3 over one 1 MiB block in cache, `bytes` in all: Gbit/s and CPU-seconds per Gbit
/// (what hashing each byte once costs an end, without the memory traffic of reaching it).
pub fn hash(bytes: u64) -> Result<(f64, f64)> {
    let block = spate::noise::bytes(4, BLOCK);
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut hasher = blake3::Hasher::new();
    let mut done = 0u64;
    while done < bytes {
        hasher.update(&block);
        done += BLOCK as u64;
    }
    std::hint::black_box(hasher.finalize());
    per_gbit(done, cpu0, t0)
}

/// Gbit/s and CPU-seconds per Gbit of `bytes` done since (`cpu0`, `t0`).
fn per_gbit(bytes: u64, cpu0: f64, t0: Instant) -> Result<(f64, f64)> {
    let (cpu, secs) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let gbit = bytes as f64 * 8.0 / 1e9;
    anyhow::ensure!(gbit > 0.0 && secs > 0.0, "nothing was measured");
    Ok((gbit / secs, cpu / gbit))
}

/// The floors of (sender, receiver) in CPU-seconds per Gbit, from the run's own terms: the
/// raw UDP (send, receive) cost, the AEAD's seal and open cost, the read-and-hash cost, the
/// in-cache hash cost and the fresh-write cost.
pub fn floors(
    udp: (f64, f64),
    aead: (f64, f64),
    read_hash: f64,
    hash: f64,
    write: f64,
) -> (f64, f64) {
    (udp.0 + aead.0 + read_hash, udp.1 + aead.1 + hash + write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_pays_each_term_once() {
        let (s, r) = floors((0.01, 0.02), (0.03, 0.04), 0.05, 0.06, 0.07);
        assert!((s - 0.09).abs() < 1e-12, "{s}");
        assert!((r - 0.19).abs() < 1e-12, "{r}");
    }

    #[test]
    fn reading_and_hashing_a_file_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, spate::noise::bytes(5, 3 << 20)).unwrap();
        let (gbps, cpu) = read_and_hash(&p).unwrap();
        assert!(gbps > 0.0 && cpu >= 0.0, "{gbps} {cpu}");
        assert!(hash(4 << 20).unwrap().1 >= 0.0);
        let w = dir.path().join("w");
        let (gbps, cpu) = fresh_write(&w, 1 << 20).unwrap();
        assert!(gbps > 0.0 && cpu >= 0.0, "{gbps} {cpu}");
        assert!(!w.exists(), "the written file is removed");
        // O_DIRECT where the temporary directory's file system takes it (ext4 here).
        if let Some((gbps, cpu)) = direct_write(&w, 3 << 20).unwrap() {
            assert!(gbps > 0.0 && cpu >= 0.0, "{gbps} {cpu}");
        }
        assert!(!w.exists(), "the directly written file is removed");
    }

    #[test]
    fn an_empty_file_is_an_error_not_a_division_by_zero() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, b"").unwrap();
        assert!(read_and_hash(&p).is_err());
    }
}
