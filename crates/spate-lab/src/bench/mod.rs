//! `spate-lab bench-io`: Spate's speed against this machine's limits, measured in one run.
//!
//! On loopback and (as root) on a veth pair between two network namespaces at MTU 1500, it
//! measures, one after another:
//!
//! 1. **raw UDP**: a GSO blaster (44 × 1472-byte datagrams per call) into a GRO sink — the most
//!    UDP this machine moves, with no protocol at all;
//! 2. **TCP cubic**: `iperf3` (Debian package `iperf3`; `scripts/lab-setup.sh` installs it);
//! 3. **the AEAD's seal rate** on one core at Spate's packet size (the sender seals on its
//!    one network thread), the crypto limit of an encrypted transfer;
//! 4. **Spate memory → memory**: `spate send` from a memory source to `spate serve --discard`,
//!    encrypted (AES-256-GCM) with the default `fair` policy, again with `--cipher none`
//!    (authenticated only: GMAC over the whole packet as associated data; ring computed that
//!    at ~13 Gbit/s per core, slower than it encrypted, and aws-lc-rs, used since session 47,
//!    does not have that gap), and with `--policy fixed
//!    --rate 30G` (the driver's own limit, with no rate control). The encrypted row states the
//!    AEAD's share of each end's CPU and how close the pair came to what the cores allow;
//!    the encrypted run again with `--sealers 1` (full batches sealed and sent by a second
//!    thread, `spate::seal_pool`), and with `--openers 1` at the receiver as well (large
//!    receive batches opened half on a second thread);
//! 5. **Spate file → file**: a file on tmpfs to a directory on tmpfs, BLAKE3 included, beside
//!    the receiver's own limit there: one process writing a new file of the same size in
//!    256 KiB writes (fresh tmpfs pages cost far more than memory copies on a VM: 0.3–0.8 GB/s
//!    on the project machine, against 4.6 GB/s for overwriting);
//! 6. **the floor under file → file** (`floor.rs`): reading and hashing the file, and hashing
//!    alone, on one core; with the raw UDP, AEAD and write rows, the CPU per Gbit/s no
//!    verified, encrypted transfer can go below, which the file row is stated against;
//! 7. **Spate file → file with direct I/O** (`--disk`, /var/tmp): a file on a disk's file
//!    system to a directory there, the receiver with `--direct-io` (whole blocks written with
//!    `O_DIRECT`, `spate::sink` `direct.rs`), beside that file system's own `O_DIRECT` write
//!    and read-and-hash rows, which make its floor;
//! 8. **Spate file → file onto a throttled disk** (root; `slow_disk.rs`): ext4 on a loop device
//!    the kernel holds to `--disk-rate` (1 Gbit/s), slower than the path, beside that disk's
//!    own limit measured the same way as tmpfs's. tmpfs's limit moves with the VM's memory
//!    from minute to minute; this one holds still, so "Spate reaches N % of the disk's limit"
//!    can be judged (issue 18 asks ≥ 90 %). Once through the page cache and once with the
//!    receiver's `--direct-io`, whose synchronous writes the throttle holds back in turn.
//!
//! Each Spate test runs `--repeat` times (3) and the table shows the median run with every
//! run's goodput beside it: a 2 GiB transfer lasts under a second, and single runs of one
//! build spread by ±20 % on the project's VM (18–28 Gbit/s over twenty sends), where raw UDP
//! and TCP are averages over `--seconds`.
//!
//! Each end is its own process (`spate-lab bench-end …`, placed in its namespace with
//! `ip netns exec`), and reports its own CPU time, so the table gives CPU per Gbit/s for
//! sender and receiver apart: CPU-seconds per Gbit moved, in % of a core per Gbit/s. The
//! ratios compare Spate with raw UDP and TCP from the same run — absolute numbers say more
//! about the machine than about Spate.

pub mod ends;
mod floor;
pub mod netns;
mod slow_disk;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};

pub use ends::{run as run_end, EndArgs};

/// What `bench-io` takes.
#[derive(Args)]
#[command(after_long_help = "Examples:
  spate-lab bench-io                      # loopback, and a veth pair when run as root
  spate-lab bench-io --size 4G --seconds 10
  spate-lab bench-io --only loopback --json

Targets (issue #4): Spate memory-to-memory >= 40 % of raw UDP on the veth pair, and at most
10 % of a core per Gbit/s at each end.")]
pub struct BenchArgs {
    /// Bytes each Spate transfer moves (binary suffixes: 512M, 2G).
    #[arg(long, default_value = "1G", value_parser = spate::rate::parse_size)]
    size: u64,
    /// Seconds of the raw UDP and TCP runs.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Runs of each Spate test: the table shows the median run (the slower middle one for an
    /// even count) and lists every run's goodput. A 2 GiB transfer lasts under a second, and
    /// on the project's VM single runs of the same build spread by ±20 % (raw UDP and TCP
    /// are averaged over --seconds instead).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    repeat: u32,
    /// Measure only on this path.
    #[arg(long, value_enum)]
    only: Option<PathKind>,
    /// Directory on tmpfs for the file-to-file run.
    #[arg(long, default_value = "/dev/shm")]
    tmpfs: PathBuf,
    /// Directory on a disk's file system (ext4, XFS) for the file-to-file run with
    /// `--direct-io` at the receiver ("" leaves it out). Its files are written and removed;
    /// it needs twice --size free.
    #[arg(long, default_value = "/var/tmp")]
    disk: PathBuf,
    /// Write rate of the throttled disk of the "against the disk's limit" rows (bits/s: 500M,
    /// 1G): a loop device held to it by the kernel, slower than the path, so that its limit
    /// holds still while Spate is measured against it (root only; 0 leaves it out). Each run
    /// moves min(--size, 1 GiB).
    #[arg(long, default_value = "1G", value_parser = parse_disk_rate)]
    disk_rate: u64,
    /// Print the results as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PathKind {
    Loopback,
    Veth,
}

/// One measurement.
struct Row {
    path: &'static str,
    test: &'static str,
    gbps: f64,
    /// CPU-seconds per Gbit, sender and receiver (× 100 = % of a core per Gbit/s).
    cpu_per_gbit: (f64, f64),
    note: String,
    /// Goodput of every run, Gbit/s, when the test was repeated (`gbps` is their median).
    runs: Vec<f64>,
    /// A file sender's start: seconds from its start to its first file byte, and bytes it
    /// read from the file.
    start: Option<(f64, f64)>,
}

impl Row {
    /// A test that could not run here, and why (its numbers show as dashes).
    fn unmeasured(path: &'static str, test: &'static str, why: &anyhow::Error) -> Row {
        Row {
            path,
            test,
            gbps: f64::NAN,
            cpu_per_gbit: (f64::NAN, f64::NAN),
            note: format!("not measured: {why:#}"),
            runs: vec![],
            start: None,
        }
    }
}

/// Where the ends run: loopback (no namespace) or the two namespaces of a veth pair.
struct Place<'a> {
    name: &'static str,
    sender_ns: Option<&'a str>,
    receiver_ns: Option<&'a str>,
    receiver_ip: IpAddr,
}

impl Place<'_> {
    fn command(&self, ns: Option<&str>, program: &Path) -> Command {
        match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }
}

pub fn run(a: BenchArgs) -> Result<()> {
    let exe = std::env::current_exe()?;
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    if a.only != Some(PathKind::Veth) {
        let lo = Place {
            name: "loopback",
            sender_ns: None,
            receiver_ns: None,
            receiver_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        measure(&lo, &exe, &a, &mut rows)?;
    }
    if a.only != Some(PathKind::Loopback) {
        if netns::can_create() {
            let pair = netns::VethPair::create()
                .context("cannot make the veth pair between two network namespaces")?;
            let veth = Place {
                name: "veth",
                sender_ns: Some(&pair.a),
                receiver_ns: Some(&pair.b),
                receiver_ip: netns::B_ADDR,
            };
            measure(&veth, &exe, &a, &mut rows)?;
        } else {
            skipped.push(
                "veth pair: needs root (network namespaces); run as root to measure it".to_owned(),
            );
        }
    }
    if a.json {
        let out: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({ "path": r.path, "test": r.test, "goodput_gbps": r.gbps,
                "sender_cpu_pct_per_gbps": r.cpu_per_gbit.0 * 100.0,
                "receiver_cpu_pct_per_gbps": r.cpu_per_gbit.1 * 100.0, "note": r.note,
                "runs_gbps": r.runs })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "rows": out, "skipped": skipped }))?
        );
    } else {
        print!("{}", table(&rows));
        for s in &skipped {
            println!("skipped: {s}");
        }
    }
    Ok(())
}

fn measure(place: &Place<'_>, exe: &Path, a: &BenchArgs, rows: &mut Vec<Row>) -> Result<()> {
    let port = 17_000 + (std::process::id() % 20_000) as u16;
    let to = SocketAddr::new(place.receiver_ip, port).to_string();
    let listen = SocketAddr::new(place.receiver_ip, port).to_string();
    let secs = a.seconds.to_string();
    eprintln!("[{}] raw UDP, {secs} s …", place.name);
    let own = |v: &[&str]| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
    let (s, r) = pair(
        place,
        exe,
        &own(&["udp-sink", "--listen", &listen]),
        &own(&["udp-blast", "--to", &to, "--seconds", &secs]),
    )?;
    rows.push(row(place.name, RAW_UDP, &s, &r, String::new()));

    eprintln!("[{}] TCP cubic (iperf3), {secs} s …", place.name);
    match tcp(place, port, a.seconds) {
        Ok(r) => rows.push(r),
        Err(e) => rows.push(Row::unmeasured(place.name, "TCP cubic (iperf3)", &e)),
    }

    // Fresh identities for the two ends (every Spate session is authenticated, spec §9).
    let key_dir = tempfile::Builder::new()
        .prefix("spate-bench-keys-")
        .tempdir()?;
    ends::write_keys(key_dir.path())?;
    let keys = key_dir.path().to_string_lossy().into_owned();
    let recv = |extra: &[&str]| -> Vec<String> {
        let mut v = vec!["spate-recv", "--listen", &listen, "--keys", &keys];
        v.extend_from_slice(extra);
        v.into_iter().map(str::to_owned).collect()
    };
    let send = |extra: &[&str]| -> Vec<String> {
        let mut v = vec!["spate-send", "--to", &to, "--keys", &keys];
        v.extend_from_slice(extra);
        v.into_iter().map(str::to_owned).collect()
    };

    // The crypto limit of this CPU, measured now: the sender seals on its one network thread.
    eprintln!("[{}] AES-256-GCM seal rate, one core …", place.name);
    let (seal, open) =
        crate::aead_cmd::measure(&aws_lc_rs::aead::AES_256_GCM, AEAD_PAYLOAD, 1, 0.5);
    rows.push(Row {
        path: place.name,
        test: AEAD_LIMIT,
        gbps: seal,
        cpu_per_gbit: (1.0 / seal, 1.0 / open),
        note: format!(
            "{AEAD_PAYLOAD}-byte payloads in place, one core; opens at {} Gbit/s",
            num(open, 1, "")
        ),
        runs: vec![],
        start: None,
    });

    let size = a.size.to_string();
    eprintln!(
        "[{}] Spate memory → memory, {} MiB …",
        place.name,
        a.size >> 20
    );
    let mut mem = repeated(place.name, MEM, a.repeat, retx_and_loop, || {
        pair(place, exe, &recv(&[]), &send(&["--mem", &size]))
    })?;

    eprintln!("[{}] {MEM_NONE} …", place.name);
    let none = repeated(place.name, MEM_NONE, a.repeat, retx, || {
        pair(
            place,
            exe,
            &recv(&[]),
            &send(&["--mem", &size, "--cipher", "none"]),
        )
    })?;
    // What encryption costs, from this run: the AEAD's own CPU per Gbit/s at each end (one
    // core seals at `seal` Gbit/s, so sealing costs 1/seal core-seconds per Gbit), against the
    // whole CPU per Gbit/s each end spent. Where both ends share the machine's cores, as here,
    // the transfer is bound by their sum.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let both = mem.cpu_per_gbit.0 + mem.cpu_per_gbit.1;
    // The encryption target: encrypted ≥ 80 % of min(`--cipher none`, the seal rate × the
    // cores the sender seals on — its loop and its default sealing threads).
    let sealing_cores = 1 + spate::seal_pool::auto_threads();
    let limit = none.gbps.min(seal * sealing_cores as f64);
    mem.note = format!(
        "{}; the AEAD is {:.0} % of the sender's and {:.0} % of the receiver's CPU; both ends \
         on {cores:.0} cores can move at most {} Gbit/s at this CPU cost ({:.0} % reached); \
         {:.0} % of min(--cipher none, seal rate × {sealing_cores} sealing core(s)) = {} \
         Gbit/s",
        mem.note,
        100.0 / seal / mem.cpu_per_gbit.0,
        100.0 / open / mem.cpu_per_gbit.1,
        num(cores / both, 1, ""),
        100.0 * mem.gbps * both / cores,
        100.0 * mem.gbps / limit,
        num(limit, 1, "")
    );
    // Sealing and sending full batches on another thread (`--sealers 1`, `seal_pool.rs`):
    // the sending loop keeps only the building of packets; and opening large receive
    // batches on another thread too (`--openers 1`, `serve/open.rs`). Where both ends share
    // the cores, the threads compete with the other end.
    rows.push(mem);
    for (test, openers) in [(MEM_SEALER, "0"), (MEM_BOTH, "1")] {
        eprintln!("[{}] {test} …", place.name);
        rows.push(repeated(place.name, test, a.repeat, retx_and_loop, || {
            pair(
                place,
                exe,
                &recv(&["--openers", openers]),
                &send(&["--mem", &size, "--sealers", "1"]),
            )
        })?);
    }
    rows.push(none);

    eprintln!("[{}] {MEM_FIXED} …", place.name);
    let fixed = (FIXED_GBPS * 1e9).to_string();
    rows.push(repeated(place.name, MEM_FIXED, a.repeat, retx, || {
        pair(
            place,
            exe,
            &recv(&[]),
            &send(&["--mem", &size, "--fixed", &fixed]),
        )
    })?);

    eprintln!("[{}] Spate file → file (tmpfs) …", place.name);
    let (dir, src) = source_in(&a.tmpfs, "the file test (--tmpfs)", a.size)?;
    // The receiver writes a new file: that costs what the file system charges for fresh pages,
    // which on a VM can be far below memory speed. Measured the same way here, as often as
    // the Spate runs and after one more: the first write may be the first touch of memory
    // this VM was given (the hypervisor then maps every page), and a VM that returns freed
    // pages to its host (virtio-balloon free page reporting) may pay it again later. On the
    // project machine successive 2 GiB writes went at 3.0, 20.6, 5.0, 5.3, 9.6 and 4.0 Gbit/s
    // in one minute and at 15.6–22.0 in fifteen writes the next: one second write (this row
    // until session 25) is a sample, not the limit. The median of several is steadier.
    let limit = dir.path().join("limit.bin");
    let first = floor::fresh_write(&limit, a.size)?.0;
    let writes = (0..a.repeat.max(1))
        .map(|_| floor::fresh_write(&limit, a.size))
        .collect::<Result<Vec<_>>>()?;
    let list: Vec<String> = writes.iter().map(|w| num(w.0, 1, "")).collect();
    let (gbps, cpu) = median_by(writes, |w| w.0);
    rows.push(Row {
        path: place.name,
        test: TMPFS_WRITE,
        gbps,
        cpu_per_gbit: (f64::NAN, cpu),
        note: format!(
            "one process writing a new file in 256 KiB writes, as Spate's receiver does; median \
             of {} such files after a first ({} Gbit/s): {} Gbit/s{}",
            list.len(),
            num(first, 2, ""),
            list.join(", "),
            if floor::free_page_reporting() {
                "; this VM may return freed pages to its host (virtio-balloon free page \
                 reporting is on), so what a new file's pages cost varies from run to run"
            } else {
                ""
            }
        ),
        runs: vec![],
        start: None,
    });
    // The sender's disk side and the receiver's hashing, each at its cheapest: with the rows
    // above they make the floor the file row is measured against (`floor.rs`).
    let (gbps, cpu) = floor::read_and_hash(&src)?;
    rows.push(Row {
        path: place.name,
        test: READ_HASH,
        gbps,
        cpu_per_gbit: (cpu, f64::NAN),
        note: "1 MiB reads into one buffer, each hashed at once, as Spate's reader does".into(),
        runs: vec![],
        start: None,
    });
    let (gbps, cpu) = floor::hash(a.size)?;
    rows.push(Row {
        path: place.name,
        test: HASH,
        gbps,
        cpu_per_gbit: (f64::NAN, cpu),
        note: "a 1 MiB block in cache, hashed over and over (the receiver hashes what it writes)"
            .into(),
        runs: vec![],
        start: None,
    });
    // One Spate transfer of the file `src` into the directory `root`.
    let mut transfer = |root: &str, src: &str| {
        pair(
            place,
            exe,
            &recv(&["--root", root]),
            &send(&["--file", src]),
        )
    };
    let root = dir.path().join("dst");
    let reported = floor::reported_kib();
    let mut file_row = file_runs(
        place.name,
        FILE,
        a.repeat,
        retx,
        &src,
        &root,
        &mut transfer,
        |r| format!("BLAKE3 of the file at both ends included; {}", r.note),
    )?;
    if let (Some(before), Some(after)) = (reported, floor::reported_kib()) {
        // On the project VM most of the receiver's distance from its floor was this: freed
        // pages went back to the host at once, and each new file faulted them in again
        // (docs/results/bench-io.md, session 32).
        file_row.note = format!(
            "{}; the VM handed {} MiB of freed pages back to its host during these runs",
            file_row.note,
            after.saturating_sub(before) >> 10
        );
    }
    if let Some((first, read)) = file_row.start {
        file_row.note = format!(
            "first file byte sent {:.0} ms after the sender started; the file read {:.2}×; {}",
            first * 1e3,
            read / a.size as f64,
            file_row.note
        );
    }
    if let Some(floor) = floor_of(rows, place.name, READ_HASH, TMPFS_WRITE) {
        note_floor(&mut file_row, floor);
    }
    rows.push(file_row);
    let mut direct = |root: &str, src: &str| {
        pair(
            place,
            exe,
            &recv(&["--root", root, "--direct-io"]),
            &send(&["--file", src]),
        )
    };
    if !a.disk.as_os_str().is_empty() {
        eprintln!("[{}] {FILE_DIRECT} …", place.name);
        if let Err(e) = direct_rows(place.name, a, rows, &mut direct) {
            rows.push(Row::unmeasured(place.name, FILE_DIRECT, &e));
        }
    }
    if a.disk_rate > 0 {
        let disk = slow_disk_rows(place, dir.path(), a, &mut transfer, &mut direct);
        match disk {
            Ok(mut two) => rows.append(&mut two),
            Err(e) => rows.push(Row::unmeasured(place.name, DISK_FILE, &e)),
        }
    }
    Ok(())
}

/// File → file on a disk's file system (`--disk`) with `--direct-io` at the receiver: that
/// file system's own direct-write and read-and-hash rows, and Spate's row against the floor
/// they make with the path's UDP, AEAD and hash rows. `transfer(root, src)` runs one pair.
fn direct_rows(
    path: &'static str,
    a: &BenchArgs,
    rows: &mut Vec<Row>,
    transfer: &mut impl FnMut(&str, &str) -> Result<(Value, Value)>,
) -> Result<()> {
    let (dir, src) = source_in(&a.disk, "the direct I/O test (--disk)", a.size)?;
    let Some((gbps, cpu)) = floor::direct_write(&dir.path().join("limit.bin"), a.size)? else {
        bail!(
            "{} refuses O_DIRECT (--disk: name a directory on ext4 or XFS)",
            a.disk.display()
        );
    };
    rows.push(Row {
        path,
        test: DIRECT_WRITE,
        gbps,
        cpu_per_gbit: (f64::NAN, cpu),
        note: format!(
            "{}: one process writing a new file in 1 MiB O_DIRECT writes, as Spate's receiver \
             does with --direct-io",
            a.disk.display()
        ),
        runs: vec![],
        start: None,
    });
    let (gbps, cpu) = floor::read_and_hash(&src)?;
    rows.push(Row {
        path,
        test: DISK_READ_HASH,
        gbps,
        cpu_per_gbit: (cpu, f64::NAN),
        note: "the source file just written, so from the page cache, as Spate's sender reads it"
            .into(),
        runs: vec![],
        start: None,
    });
    let mut row = file_runs(
        path,
        FILE_DIRECT,
        a.repeat,
        retx,
        &src,
        &dir.path().join("dst"),
        transfer,
        |r| format!("BLAKE3 of the file at both ends included; {}", r.note),
    )?;
    if let Some(floor) = floor_of(rows, path, DISK_READ_HASH, DIRECT_WRITE) {
        note_floor(&mut row, floor);
    }
    rows.push(row);
    Ok(())
}

/// File → file onto a disk slower than the path (`slow_disk.rs`), and that disk's own limit,
/// measured the same way as the tmpfs one: Spate's row states its goodput as a share of the
/// median of `--repeat` plain new-file writes onto the same disk. `transfer(root, src)` runs
/// one Spate pair writing into `root`.
fn slow_disk_rows(
    place: &Place<'_>,
    tmpfs: &Path,
    a: &BenchArgs,
    transfer: &mut impl FnMut(&str, &str) -> Result<(Value, Value)>,
    direct: &mut impl FnMut(&str, &str) -> Result<(Value, Value)>,
) -> Result<Vec<Row>> {
    if let Some(why) = slow_disk::unavailable() {
        bail!("{why}");
    }
    let size = a.size.min(DISK_MAX);
    eprintln!(
        "[{}] {DISK_FILE}: {} MiB at most {} …",
        place.name,
        size >> 20,
        spate::rate::format_rate(a.disk_rate as f64)
    );
    let disk = slow_disk::SlowDisk::create(tmpfs, size, a.disk_rate / 8)?;
    let src = tmpfs.join("disk-src.bin");
    write_file(&src, size)?;
    let limit = disk.root().join("limit.bin");
    let writes = (0..a.repeat.max(1))
        .map(|_| floor::fresh_write(&limit, size))
        .collect::<Result<Vec<_>>>()?;
    let list: Vec<String> = writes.iter().map(|w| num(w.0, 3, "")).collect();
    let (limit_gbps, limit_cpu) = median_by(writes, |w| w.0);
    let of_limit = |r: &Row| {
        format!(
            "{:.1} % of the disk's limit (below, measured in this run); ext4 on a loop device \
             throttled to {}, {} MiB per run; {}",
            100.0 * r.gbps / limit_gbps,
            spate::rate::format_rate(a.disk_rate as f64),
            size >> 20,
            r.note
        )
    };
    let root = disk.root().join("dst");
    let file = file_runs(
        place.name, DISK_FILE, a.repeat, held, &src, &root, transfer, of_limit,
    )?;
    // The same onto the same disk with the receiver writing past the page cache: each block is
    // one synchronous write, which the throttle holds back, and the Write Limit must still
    // slow the sender to it (nothing lost to a full socket). The disk holds one copy.
    std::fs::remove_dir_all(&root)?;
    let root = disk.root().join("dst-direct");
    let file_direct = file_runs(
        place.name,
        DISK_FILE_DIRECT,
        a.repeat,
        held,
        &src,
        &root,
        direct,
        of_limit,
    )?;
    let _ = std::fs::remove_file(&src);
    let write = Row {
        path: place.name,
        test: DISK_WRITE,
        gbps: limit_gbps,
        cpu_per_gbit: (f64::NAN, limit_cpu),
        note: format!(
            "one process writing a new file in 256 KiB writes onto the throttled disk; median \
             of {} writes: {} Gbit/s",
            list.len(),
            list.join(", ")
        ),
        runs: vec![],
        start: None,
    };
    drop(disk);
    Ok(vec![file, file_direct, write])
}

/// `repeat` Spate transfers of the file `src` into a new directory `root` (each run writes a
/// new file, as the first did: an existing one would be skipped) by `transfer(root, src)`:
/// the median run's row (`repeated`), its note made by `whole(row)` when every copy came out
/// whole and a warning when one is missing or short.
#[allow(clippy::too_many_arguments)]
fn file_runs(
    path: &'static str,
    test: &'static str,
    repeat: u32,
    note: impl Fn(&Value, &Value) -> String,
    src: &Path,
    root: &Path,
    transfer: &mut impl FnMut(&str, &str) -> Result<(Value, Value)>,
    whole: impl FnOnce(&Row) -> String,
) -> Result<Row> {
    std::fs::create_dir(root)?;
    let size = std::fs::metadata(src)?.len();
    let copy = root.join(src.file_name().context("the source has no file name")?);
    let (root_s, src_s) = (root.to_string_lossy(), src.to_string_lossy());
    let mut short = false;
    let row = repeated(path, test, repeat, note, || {
        let _ = std::fs::remove_file(&copy);
        let ends = transfer(&root_s, &src_s)?;
        short |= std::fs::metadata(&copy).map(|m| m.len()).ok() != Some(size);
        Ok(ends)
    })?;
    let note = if short {
        "the copy is missing or short!".to_owned()
    } else {
        whole(&row)
    };
    Ok(Row { note, ..row })
}

/// [`retx`], and how long the receiver's Write Limit held the sender (spec §7.4): what a disk
/// slower than the path should do.
fn held(sender: &Value, receiver: &Value) -> String {
    format!(
        "{}; the receiver's Write Limit held the sender {} s",
        retx(sender, receiver),
        num(sender["disk_wait_s"].as_f64().unwrap_or(f64::NAN), 2, "")
    )
}

/// The (sender, receiver) floor of a file → file transfer on `path` (`floor.rs`), in
/// CPU-seconds per Gbit, from that path's rows: `None` if one of its terms is missing.
fn floor_of(rows: &[Row], path: &str, read_hash: &str, write: &str) -> Option<(f64, f64)> {
    let get = |test: &str| find(rows, path, test).map(|r| r.cpu_per_gbit);
    let floors = floor::floors(
        get(RAW_UDP)?,
        get(AEAD_LIMIT)?,
        get(read_hash)?.0,
        get(HASH)?.1,
        get(write)?.1,
    );
    (floors.0.is_finite() && floors.1.is_finite()).then_some(floors)
}

/// Put a file row's `floor` (sender, receiver; CPU-seconds per Gbit) and its CPU as multiples
/// of it in front of its note.
fn note_floor(row: &mut Row, floor: (f64, f64)) {
    let (send, recv) = over_floor(row, floor);
    row.note = format!(
        "floor (below) {} / {} % of a core per Gbit/s, Spate at {send:.2}× / {recv:.2}× of it; \
         {}",
        num(floor.0 * 100.0, 1, ""),
        num(floor.1 * 100.0, 1, ""),
        row.note
    );
}

/// A file row's CPU as multiples of the floor (sender, receiver).
fn over_floor(file: &Row, floor: (f64, f64)) -> (f64, f64) {
    (file.cpu_per_gbit.0 / floor.0, file.cpu_per_gbit.1 / floor.1)
}

/// The row of `test` on `path`.
fn find<'a>(rows: &'a [Row], path: &str, test: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.path == path && r.test == test)
}

/// Run a Spate test `repeat` times: the row of the median run by goodput (the slower middle
/// one for an even count), its note from `note(sender)`, followed by every run's goodput.
fn repeated(
    path: &'static str,
    test: &'static str,
    repeat: u32,
    note: impl Fn(&Value, &Value) -> String,
    mut once: impl FnMut() -> Result<(Value, Value)>,
) -> Result<Row> {
    let mut runs = Vec::new();
    for _ in 0..repeat.max(1) {
        let (s, r) = once()?;
        runs.push(row(path, test, &s, &r, note(&s, &r)));
    }
    let gbps: Vec<f64> = runs.iter().map(|r| r.gbps).collect();
    let mut median = median_by(runs, |r| r.gbps);
    if gbps.len() > 1 {
        let list: Vec<String> = gbps.iter().map(|g| num(*g, 1, "")).collect();
        median.note = format!(
            "{}; median of {} runs: {} Gbit/s",
            median.note,
            gbps.len(),
            list.join(", ")
        );
        median.runs = gbps;
    }
    Ok(median)
}

/// The median of `items` by `key` (the lower middle one for an even count); `items` must not
/// be empty.
fn median_by<T>(mut items: Vec<T>, key: impl Fn(&T) -> f64) -> T {
    items.sort_by(|a, b| key(a).total_cmp(&key(b)));
    items.swap_remove((items.len() - 1) / 2)
}

/// A file of `size` pseudo-random bytes (written in 1 MiB blocks).
/// A temporary directory below `parent` for `test` (named in the error), holding a source
/// file of `size` bytes, `src.bin`.
fn source_in(parent: &Path, test: &str, size: u64) -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::Builder::new()
        .prefix("spate-bench-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot use {} for {test}", parent.display()))?;
    let src = dir.path().join("src.bin");
    write_file(&src, size)?;
    Ok((dir, src))
}

fn write_file(path: &Path, size: u64) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut noise = spate::noise::Noise::new(1);
    let mut block = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        noise.fill(&mut block[..n]);
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.flush()?;
    Ok(())
}

/// Run a receiver end, then a sender end; both must finish within 5 minutes.
fn pair(place: &Place<'_>, exe: &Path, recv: &[String], send: &[String]) -> Result<(Value, Value)> {
    let spawn = |ns: Option<&str>, args: &[String]| -> Result<Child> {
        place
            .command(ns, exe)
            .arg("bench-end")
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start a bench end")
    };
    let r = spawn(place.receiver_ns, recv)?;
    std::thread::sleep(Duration::from_millis(300)); // let it bind
    let s = spawn(place.sender_ns, send)?;
    let s = finish(s, "sender")?;
    let r = finish(r, "receiver")?;
    Ok((s, r))
}

fn finish(c: Child, what: &str) -> Result<Value> {
    let out = finish_raw(c, what, Duration::from_secs(300))?;
    let line = String::from_utf8_lossy(&out);
    serde_json::from_str(line.trim()).with_context(|| format!("{what} printed '{line}'"))
}

/// Wait for `c` at most `limit` (then kill it); its stdout if it succeeded.
fn finish_raw(mut c: Child, what: &str, limit: Duration) -> Result<Vec<u8>> {
    let end = Instant::now() + limit;
    while c.try_wait()?.is_none() {
        if Instant::now() > end {
            let _ = c.kill();
            let _ = c.wait();
            bail!("the {what} did not finish within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = c.wait_with_output()?;
    if !out.status.success() {
        bail!("the {what} failed ({})", out.status);
    }
    Ok(out.stdout)
}

/// The fixed rate of the second memory run, Gbit/s: more than one sender here can reach, so
/// the run shows the driver's own limit, without rate control.
const FIXED_GBPS: f64 = 30.0;
const MEM: &str = "Spate memory → memory (AES-256-GCM)";
const MEM_SEALER: &str = "Spate memory → memory (AES-256-GCM), sealing on a second thread";
const MEM_BOTH: &str =
    "Spate memory → memory (AES-256-GCM), sealing and opening on a second thread each";
const MEM_NONE: &str = "Spate memory → memory, --cipher none (authenticated only, GMAC)";
const AEAD_LIMIT: &str = "AES-256-GCM seal, one core (the sender's crypto limit)";
/// DATA payload of a 1472-byte datagram with its tag: 1472 − 24 − 16.
const AEAD_PAYLOAD: usize = 1432;
const FILE: &str = "Spate file → file (tmpfs)";
const FILE_DIRECT: &str = "Spate file → file (disk, receiver with --direct-io)";
const DIRECT_WRITE: &str = "disk write with O_DIRECT, new file (the receiver's disk limit)";
const DISK_READ_HASH: &str = "disk read (page cache) + BLAKE3, one core (the sender's disk side)";
const DISK_FILE: &str = "Spate file → file (throttled disk)";
const DISK_FILE_DIRECT: &str = "Spate file → file (throttled disk, receiver with --direct-io)";
const DISK_WRITE: &str = "throttled disk write, new file (its limit)";
/// The most a throttled-disk run moves: at 1 Gbit/s 8.6 s, so the rows stay within a minute
/// or two per path.
const DISK_MAX: u64 = 1 << 30;
const TMPFS_WRITE: &str = "tmpfs write, new file (the receiver's disk limit)";
const READ_HASH: &str = "tmpfs read + BLAKE3, one core (the sender's disk side)";
const HASH: &str = "BLAKE3 in cache, one core";
const RAW_UDP: &str = "raw UDP (GSO/GRO)";
const MEM_FIXED: &str = "Spate memory → memory, --policy fixed --rate 30G";

/// [`retx`], and each end's loop thread in % of a core per Gbit/s (what sealing and opening
/// threads take off them).
fn retx_and_loop(sender: &Value, receiver: &Value) -> String {
    let share = |end: &Value| {
        let gbit = end["bytes"].as_f64().unwrap_or(0.0) * 8.0 / 1e9;
        num(
            100.0 * end["loop_cpu_s"].as_f64().unwrap_or(f64::NAN) / gbit,
            1,
            "",
        )
    };
    format!(
        "{}; loop threads {} (send) and {} (receive) % of a core per Gbit/s",
        retx(sender, receiver),
        share(sender),
        share(receiver)
    )
}

fn retx(sender: &Value, _receiver: &Value) -> String {
    let r = sender["retransmission_overhead"]
        .as_f64()
        .unwrap_or(f64::NAN);
    format!("{:.2} % retransmitted", 100.0 * r)
}

fn row(path: &'static str, test: &'static str, s: &Value, r: &Value, note: String) -> Row {
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let (bytes, secs) = (f(r, "bytes"), f(r, "seconds"));
    let gbit = bytes * 8.0 / 1e9;
    Row {
        path,
        test,
        gbps: gbit / secs,
        cpu_per_gbit: (f(s, "cpu_s") / gbit, f(r, "cpu_s") / gbit),
        note,
        runs: vec![],
        start: s["first_data_s"]
            .as_f64()
            .zip(s["file_bytes_read"].as_f64()),
    }
}

/// iperf3 with cubic; CPU from iperf3's own report (percent of one core over the run).
fn tcp(place: &Place<'_>, port: u16, seconds: f64) -> Result<Row> {
    let port = (port + 1).to_string();
    let ip = place.receiver_ip.to_string();
    let iperf = Path::new("iperf3");
    let mut server = place
        .command(place.receiver_ns, iperf)
        .args(["-s", "-1", "-B", &ip, "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("iperf3 is not installed (apt-get install iperf3, or scripts/lab-setup.sh)")?;
    std::thread::sleep(Duration::from_millis(300));
    // iperf3 takes whole seconds, and -t 0 would run forever.
    let secs = seconds.ceil().max(1.0) as u64;
    let client = place
        .command(place.sender_ns, iperf)
        .args(["-c", &ip, "-p", &port, "-C", "cubic", "-J", "-t"])
        .arg(secs.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let out = client.map_err(anyhow::Error::from).and_then(|c| {
        let limit = Duration::from_secs(secs + 30);
        finish_raw(c, "iperf3 client", limit)
    });
    let _ = server.kill();
    let _ = server.wait();
    let v: Value = serde_json::from_slice(&out?).context("iperf3 printed no JSON")?;
    if let Some(e) = v["error"].as_str() {
        bail!("iperf3: {e}");
    }
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .context("no sum_received in iperf3's report")?;
    let cpu = &v["end"]["cpu_utilization_percent"];
    let gbps = bps / 1e9;
    let pct = |k: &str| cpu[k].as_f64().unwrap_or(f64::NAN) / 100.0 / gbps;
    Ok(Row {
        path: place.name,
        test: "TCP cubic (iperf3)",
        gbps,
        cpu_per_gbit: (pct("host_total"), pct("remote_total")),
        note: if place.name == "loopback" {
            "loopback MTU is 64 KiB: TCP sends 64 KiB segments".to_owned()
        } else {
            String::new()
        },
        runs: vec![],
        start: None,
    })
}

/// `v` with `decimals` and `unit`, or a dash where there is no number (a row with no sender, a
/// run that did not happen).
fn num(v: f64, decimals: usize, unit: &str) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}{unit}")
    } else {
        "–".into()
    }
}

fn table(rows: &[Row]) -> String {
    let mut t = String::from(
        "| path | test | goodput Gbit/s | sender CPU, % core per Gbit/s | receiver CPU, % core per Gbit/s | note |\n|---|---|---|---|---|---|\n",
    );
    for r in rows {
        t += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.path,
            r.test,
            num(r.gbps, 2, ""),
            num(r.cpu_per_gbit.0 * 100.0, 1, ""),
            num(r.cpu_per_gbit.1 * 100.0, 1, ""),
            r.note
        );
    }
    t += "\n| path | Spate mem / raw UDP | Spate mem / TCP | Spate mem fixed / raw UDP | Spate file / raw UDP | Spate file / tmpfs write | Spate file / throttled disk write | CPU ≤ 10 %/Gbit/s (send, recv) | file CPU / its floor (send, recv) |\n|---|---|---|---|---|---|---|---|---|\n";
    for path in ["loopback", "veth"] {
        let get = |test: &str| find(rows, path, test);
        let (Some(udp), Some(mem), Some(file)) = (get(RAW_UDP), get(MEM), get(FILE)) else {
            continue;
        };
        let tcp = get("TCP cubic (iperf3)").map_or(f64::NAN, |r| r.gbps);
        let fixed = get(MEM_FIXED).map_or(f64::NAN, |r| r.gbps);
        let disk = get(TMPFS_WRITE).map_or(f64::NAN, |r| r.gbps);
        let slow = get(DISK_FILE).map_or(f64::NAN, |r| r.gbps)
            / get(DISK_WRITE).map_or(f64::NAN, |r| r.gbps);
        let ok = |v: f64| if v <= 0.10 { "yes" } else { "no" };
        let pct = |v: f64| num(v, 0, " %");
        let floor = floor_of(rows, path, READ_HASH, TMPFS_WRITE).map_or("–".to_owned(), |floor| {
            let (send, recv) = over_floor(file, floor);
            format!("{send:.2}×, {recv:.2}×")
        });
        t += &format!(
            "| {path} | {} | {} | {} | {} | {} | {} | {}, {} | {floor} |\n",
            pct(100.0 * mem.gbps / udp.gbps),
            pct(100.0 * mem.gbps / tcp),
            pct(100.0 * fixed / udp.gbps),
            pct(100.0 * file.gbps / udp.gbps),
            pct(100.0 * file.gbps / disk),
            pct(100.0 * slow),
            ok(mem.cpu_per_gbit.0),
            ok(mem.cpu_per_gbit.1),
        );
    }
    t
}

/// `--disk-rate`: a rate, or 0 to leave the throttled disk out (`parse_rate` refuses 0).
fn parse_disk_rate(text: &str) -> Result<u64, String> {
    if text.trim() == "0" {
        Ok(0)
    } else {
        spate::rate::parse_rate(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A number that was not measured (the disk row has no sender) shows as a dash, not NaN.
    #[test]
    fn unmeasured_numbers_show_as_dashes() {
        let row = |test, gbps, cpu| Row {
            path: "veth",
            test,
            gbps,
            cpu_per_gbit: cpu,
            note: String::new(),
            runs: vec![],
            start: None,
        };
        let t = table(&[
            row("raw UDP (GSO/GRO)", 40.0, (0.02, 0.01)),
            row(MEM, 20.0, (0.04, 0.03)),
            row(FILE, 4.0, (0.2, 0.3)),
            row(TMPFS_WRITE, 2.0, (f64::NAN, 0.4)),
        ]);
        assert!(!t.contains("NaN"), "{t}");
        assert!(t.contains("| 2.00 | – | 40.0 |"), "{t}");
        // No TCP or fixed-rate row: their ratios are dashes; the others are computed.
        assert!(
            t.contains("| veth | 50 % | – | – | 10 % | 200 % | – | yes, yes | – |"),
            "{t}"
        );
        // With the throttled disk's rows, Spate's share of that disk's limit.
        let t = table(&[
            row(RAW_UDP, 40.0, (0.02, 0.01)),
            row(MEM, 20.0, (0.04, 0.03)),
            row(FILE, 4.0, (0.2, 0.3)),
            row(DISK_FILE, 0.95, (0.2, 0.3)),
            row(DISK_WRITE, 1.0, (f64::NAN, 0.3)),
        ]);
        assert!(t.contains("| 10 % | – | 95 % | yes, yes |"), "{t}");
        // With every term of the floor: sender 0.02 + 0.03 + 0.05 = 0.1, receiver
        // 0.01 + 0.03 + 0.06 + 0.4 = 0.5.
        let t = table(&[
            row(RAW_UDP, 40.0, (0.02, 0.01)),
            row(MEM, 20.0, (0.04, 0.03)),
            row(FILE, 4.0, (0.2, 0.3)),
            row(TMPFS_WRITE, 2.0, (f64::NAN, 0.4)),
            row(AEAD_LIMIT, 33.0, (0.03, 0.03)),
            row(READ_HASH, 20.0, (0.05, f64::NAN)),
            row(HASH, 30.0, (f64::NAN, 0.06)),
        ]);
        assert!(t.contains("| yes, yes | 2.00×, 0.60× |"), "{t}");
    }

    /// A repeated test shows its median run (the slower middle one for an even count), with
    /// that run's CPU and note, and lists every run in order.
    #[test]
    fn repeated_tests_show_the_median_run() {
        let run = |secs: f64, cpu: f64| {
            let s = json!({ "cpu_s": cpu, "retransmission_overhead": secs / 100.0 });
            let r = json!({ "bytes": 1e9 / 8.0, "seconds": secs, "cpu_s": 0.1 });
            (s, r)
        };
        // 1 Gbit in 0.5, 0.25, 1 s: 2, 4, 1 Gbit/s.
        let mut script = vec![run(0.5, 0.02), run(0.25, 0.04), run(1.0, 0.01)].into_iter();
        let r = repeated("veth", MEM, 3, retx, || Ok(script.next().unwrap())).unwrap();
        assert_eq!(r.gbps, 2.0);
        assert_eq!(r.cpu_per_gbit.0, 0.02);
        assert_eq!(r.runs, vec![2.0, 4.0, 1.0]);
        assert_eq!(
            r.note,
            "0.50 % retransmitted; median of 3 runs: 2.0, 4.0, 1.0 Gbit/s"
        );
        let mut script = vec![
            run(0.25, 0.0),
            run(1.0, 0.0),
            run(0.5, 0.0),
            run(0.125, 0.0),
        ]
        .into_iter();
        let r = repeated("veth", MEM, 4, retx, || Ok(script.next().unwrap())).unwrap();
        assert_eq!(r.gbps, 2.0);
        // One run: no list.
        let r = repeated("veth", MEM, 1, retx, || Ok(run(1.0, 0.0))).unwrap();
        assert_eq!((r.gbps, r.note.as_str()), (1.0, "1.00 % retransmitted"));
        assert!(r.runs.is_empty());
    }

    /// `--disk-rate 0` leaves the throttled disk out, as its help says; other values are rates.
    #[test]
    fn a_disk_rate_of_zero_leaves_the_disk_out() {
        assert_eq!(parse_disk_rate("0"), Ok(0));
        assert_eq!(parse_disk_rate("1G"), Ok(1_000_000_000));
        assert!(parse_disk_rate("-1").is_err());
    }
}
