//! End-to-end transfers over real loopback sockets: `spate serve`'s server and `spate send`'s
//! sender in one process, on real files, checked byte for byte. Every run is bounded in time
//! (connect 5 s, idle 20 s).

mod common;

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use spate::access::Access;
use spate::confine::Root;
use spate::keys::{Authorized, Identity, PublicKey};
use spate::scan;
use spate::send::{send, Security, SendConfig, SendResult};
use spate::serve::{Server, SessionLog};
use spate_proto::secure::Cipher;
use spate_proto::{Policy, RateConfig};

struct Serving {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    logs: Arc<Mutex<Vec<SessionLog>>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap().unwrap();
        }
    }
}

/// The test process's server and client key pairs: (server private, server public, client
/// private, client public).
fn keys() -> &'static ([u8; 32], PublicKey, [u8; 32], PublicKey) {
    static KEYS: OnceLock<([u8; 32], PublicKey, [u8; 32], PublicKey)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let (s, c) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        (s.private, s.public, c.private, c.public)
    })
}

fn bind(addr: SocketAddr, root: &Path) -> anyhow::Result<Server> {
    let k = keys();
    let access = Access::keys(vec![Authorized {
        key: k.3,
        dir: None,
        may_send: true,
        may_get: true,
        comment: "e2e".into(),
    }]);
    let identity = Identity {
        private: k.0,
        public: k.1,
    };
    Server::bind(addr, Root::new(root)?, identity, access)
}

fn serve(root: &Path) -> Serving {
    let mut server = bind("127.0.0.1:0".parse().unwrap(), root).unwrap();
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let logs = Arc::new(Mutex::new(Vec::new()));
    let (s, l) = (Arc::clone(&stop), Arc::clone(&logs));
    let thread =
        std::thread::spawn(move || server.run(&s, |log| l.lock().unwrap().push(log.clone())));
    Serving {
        addr,
        stop,
        logs,
        thread: Some(thread),
    }
}

fn config(addr: SocketAddr) -> SendConfig {
    SendConfig {
        server: addr,
        // A cap keeps loopback runs from overrunning socket buffers on a slow CI machine.
        rate: {
            let mut r = RateConfig::adaptive(Policy::Fair);
            r.rate_bps = 2_000_000_000;
            r
        },
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(20),
        resume: false,
        fec: spate_proto::coding::Fec::Auto,
        security: Security {
            identity: keys().2,
            server_key: keys().1 .0,
            cipher: Cipher::Aes256Gcm,
            auth: [0; 16],
        },
        sealers: 0,
    }
}

fn send_to(
    addr: SocketAddr,
    paths: &[PathBuf],
    dest: &str,
    recursive: bool,
) -> anyhow::Result<SendResult> {
    let dest = scan::normalize_dest(dest)?;
    let mut plan = scan::plan(paths, &dest, recursive)?;
    plan.compute_digests(|_| {})?;
    send(&plan, &config(addr), |_| {})
}

/// The plan for the one file `f`, its digest sent after its bytes (a streamed file, spec §5.1).
fn streamed_plan(f: &Path) -> scan::Plan {
    let mut plan = scan::plan(std::slice::from_ref(&f.to_path_buf()), "", false).unwrap();
    plan.stream_digests();
    plan
}

/// Deterministic pseudo-random content.
fn content(seed: u64, len: usize) -> Vec<u8> {
    spate::noise::bytes(seed, len)
}

/// Every file and directory below `a` exists below `b` with the same bytes.
fn assert_same_tree(a: &Path, b: &Path) {
    let mut n = 0;
    for e in fs::read_dir(a).unwrap() {
        let e = e.unwrap();
        let other = b.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            assert!(other.is_dir(), "{} missing", other.display());
            assert_same_tree(&e.path(), &other);
        } else {
            assert_eq!(
                fs::read(e.path()).unwrap(),
                fs::read(&other).unwrap(),
                "{}",
                other.display()
            );
        }
        n += 1;
    }
    assert_eq!(
        n,
        fs::read_dir(b)
            .unwrap()
            .filter(|e| !e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".spate-part"))
            .count()
    );
}

#[test]
fn a_single_file_arrives_byte_exact() {
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let f = src.path().join("one.bin");
    fs::write(&f, content(1, 3_000_017)).unwrap();
    let s = serve(dst.path());
    let r = send_to(s.addr, std::slice::from_ref(&f), "", false).unwrap();
    assert_eq!(r.stats.delivered_bytes, 3_000_017);
    assert_eq!(
        fs::read(&f).unwrap(),
        fs::read(dst.path().join("one.bin")).unwrap()
    );
}

/// `--sealers`: full batches sealed and sent by other threads arrive byte-exact, in order
/// (nothing looks lost to the sender's loss detection on loopback).
#[test]
fn sealing_threads_deliver_byte_exact_and_in_order() {
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let f = src.path().join("sealed.bin");
    fs::write(&f, content(5, 48 << 20)).unwrap();
    let s = serve(dst.path());
    let plan = streamed_plan(&f);
    for sealers in [1, 3] {
        let cfg = SendConfig {
            sealers,
            ..config(s.addr)
        };
        let r = send(&plan, &cfg, |_| {}).unwrap();
        assert_eq!(r.stats.delivered_bytes, 48 << 20);
        assert_eq!(
            fs::read(dst.path().join("sealed.bin")).unwrap(),
            content(5, 48 << 20)
        );
        eprintln!(
            "{sealers} sealing thread(s): {} retransmitted of {} data packets, loop {:.3} CPU-s",
            r.stats.retransmitted_packets, r.stats.data_packets_sent, r.loop_cpu_s
        );
        assert!(
            r.stats.retransmitted_packets * 100 <= r.stats.data_packets_sent,
            "batches out of order look like loss: {:?}",
            r.stats
        );
    }
}

/// `serve --openers`: packets of large receive batches opened on other threads arrive
/// byte-exact, and the pool did open some.
#[test]
fn packets_opened_on_other_threads_arrive_byte_exact() {
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let f = src.path().join("opened.bin");
    fs::write(&f, content(6, 48 << 20)).unwrap();
    let mut server = bind("127.0.0.1:0".parse().unwrap(), dst.path())
        .unwrap()
        .openers(2)
        .unwrap();
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        server.run(&s, |_| {}).unwrap();
        server
    });
    let r = send_to(addr, std::slice::from_ref(&f), "", false);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let server = thread.join().unwrap();
    let r = r.unwrap();
    assert_eq!(r.stats.delivered_bytes, 48 << 20);
    assert_eq!(
        fs::read(dst.path().join("opened.bin")).unwrap(),
        content(6, 48 << 20)
    );
    eprintln!(
        "{} of {} data packets opened on the pool",
        server.opened_on_pool(),
        r.stats.data_packets_sent
    );
    assert!(server.opened_on_pool() > 0);
}

/// A download from a daemon (spec §2.1, §5.6) over a 100 Mbit/s, 60 ms path with 1 % loss each
/// way (the user-space relay): the request and the answering session both cross it, and the
/// files arrive byte-exact, the glob expanded on the server: once written through the page
/// cache, once with `--direct-io` (`sink/direct.rs`: blocks staged while their lost packets
/// are repaired, then written with `O_DIRECT`).
#[test]
fn a_download_from_a_daemon_crosses_a_lossy_long_path() {
    download_across_a_lossy_long_path(false);
    download_across_a_lossy_long_path(true);
}

fn download_across_a_lossy_long_path(direct_io: bool) {
    use spate::relay::{PathConfig, Relay};
    let (root, local) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fs::write(root.path().join("a.bin"), content(8, 6 << 20)).unwrap();
    fs::write(root.path().join("b.bin"), content(9, 1 << 20)).unwrap();
    fs::write(root.path().join("c.txt"), b"not asked for").unwrap();
    let s = serve(root.path());
    let path = PathConfig {
        rate_bps: 100_000_000,
        rtt: Duration::from_millis(60),
        loss: 0.01,
        queue: Duration::from_millis(60),
        seed: 3,
    };
    let relay = Relay::start(&path, s.addr).unwrap();
    let opts = spate::get::GetOptions {
        paths: vec!["*.bin".into()],
        recursive: false,
        resume: false,
        rate_args: vec![],
        receive_rate: None,
        direct_io,
    };
    let security = config(relay.addr()).security;
    let timeouts = (Duration::from_secs(5), Duration::from_secs(20));
    let log = spate::get::get_daemon(
        relay.addr(),
        &security,
        local.path(),
        &opts,
        timeouts,
        |_| {},
    )
    .unwrap();
    let stats = relay.stop().unwrap();
    assert_eq!(log.objects, 2);
    // The session's log says how much went to the disk with O_DIRECT: here every block (both
    // files are whole blocks), where the file system takes it.
    let takes_direct = {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(local.path().join("a.bin"))
            .is_ok()
    };
    match (direct_io, log.direct_bytes) {
        (false, None) => {}
        (true, Some(d)) if takes_direct => assert_eq!(d, 7 << 20, "bytes written with O_DIRECT"),
        (true, Some(0)) => eprintln!("no O_DIRECT where the test writes; the log says so"),
        (want, got) => panic!("--direct-io {want}: the log counts {got:?} bytes"),
    }
    assert_eq!(
        fs::read(local.path().join("a.bin")).unwrap(),
        content(8, 6 << 20)
    );
    assert_eq!(
        fs::read(local.path().join("b.bin")).unwrap(),
        content(9, 1 << 20)
    );
    assert!(!local.path().join("c.txt").exists());
    eprintln!(
        "download over the relay (direct I/O {direct_io}): {:.2} s, {} of {} packets dropped \
         at random server → client",
        log.seconds, stats.reverse.random_drops, stats.reverse.packets
    );
    assert!(
        stats.reverse.random_drops > 0,
        "the path lost packets: {stats:?}"
    );
}

#[test]
fn a_thousand_small_files_and_a_tree_with_empty_files() {
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tree = src.path().join("tree");
    for i in 0..1000u64 {
        let d = tree
            .join(format!("d{}", i % 10))
            .join(format!("e{}", i % 3));
        fs::create_dir_all(&d).unwrap();
        fs::write(
            d.join(format!("f{i}")),
            content(i, (i * 37 % 5000) as usize),
        )
        .unwrap();
    }
    fs::create_dir_all(tree.join("empty-dir")).unwrap();
    fs::write(tree.join("empty-file"), b"").unwrap();
    let s = serve(dst.path());
    send_to(s.addr, std::slice::from_ref(&tree), "incoming/today", true).unwrap();
    assert_same_tree(&tree, &dst.path().join("incoming/today/tree"));
}

#[test]
fn permissions_and_mtime_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let f = src.path().join("script.sh");
    fs::write(&f, b"#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o751)).unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let s = serve(dst.path());
    send_to(s.addr, &[f], "", false).unwrap();
    let m = fs::metadata(dst.path().join("script.sh")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o751);
    assert_eq!(m.modified().unwrap(), old);
}

#[test]
fn a_4_gib_sparse_file_arrives_byte_exact_and_stays_sparse() {
    // 4 GiB, mostly holes, with data at both ends and across the 4 GiB boundary of 32-bit
    // offsets (2^32 − 3 ..): offsets are 64-bit throughout, and the receiver skips zeros.
    use std::os::unix::fs::{FileExt, MetadataExt};
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let f = src.path().join("sparse.img");
    let file = fs::File::create(&f).unwrap();
    let size = (4u64 << 30) + 4096;
    file.set_len(size).unwrap();
    let marks: [(u64, &[u8]); 4] = [
        (0, b"head"),
        (2 << 30, b"middle"),
        ((1 << 32) - 3, b"straddle"),
        (size - 4, b"tail"),
    ];
    for (at, bytes) in marks {
        file.write_all_at(bytes, at).unwrap();
    }
    drop(file);
    let s = serve(dst.path());
    let r = send_to(s.addr, std::slice::from_ref(&f), "", false).unwrap();
    assert_eq!(r.stats.delivered_bytes, size);
    let got = dst.path().join("sparse.img");
    let m = fs::metadata(&got).unwrap();
    assert_eq!(m.len(), size);
    assert!(
        m.blocks() * 512 < 64 << 20,
        "receiver wrote {} bytes of zeros",
        m.blocks() * 512
    );
    let g = fs::File::open(&got).unwrap();
    for (at, bytes) in marks {
        let mut b = vec![0u8; bytes.len()];
        g.read_exact_at(&mut b, at).unwrap();
        assert_eq!(b, bytes, "at {at}");
    }
    // Byte-exact as a whole: the receiver checked the BLAKE3 of all 4 GiB before the rename,
    // and no journal or temporary file is left.
    assert_eq!(fs::read_dir(dst.path()).unwrap().count(), 1);
}

#[test]
fn bad_destinations_are_refused_before_anything_is_sent() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("x");
    fs::write(&f, b"x").unwrap();
    for dest in ["../up", "/etc", "a/../../b", "a\\b"] {
        let e = scan::normalize_dest(dest).unwrap_err().to_string();
        assert!(e.contains("relative to the server's --root"), "{dest}: {e}");
    }
}

#[test]
fn a_symlink_leading_out_of_the_root_is_refused() {
    let (src, dst, outside) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    std::os::unix::fs::symlink(outside.path(), dst.path().join("escape")).unwrap();
    let f = src.path().join("payload");
    fs::write(&f, b"should not leave the root").unwrap();
    let s = serve(dst.path());
    let e = send_to(s.addr, &[f], "escape", false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    drop(s);
}

#[test]
fn missing_and_unreadable_sources_are_clear_errors() {
    let src = tempfile::tempdir().unwrap();
    let e = scan::plan(&[src.path().join("nope")], "", false).unwrap_err();
    assert!(format!("{e:#}").contains("No such file"), "{e:#}");
    let e = scan::plan(&[src.path().to_path_buf()], "", false).unwrap_err();
    assert!(e.to_string().contains("-r"), "{e}");
    if common::is_root() {
        eprintln!("running as root: unreadable files are readable; that case is skipped");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let f = src.path().join("secret");
    fs::write(&f, b"x").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o000)).unwrap();
    let mut plan = scan::plan(&[f], "", false).unwrap();
    let e = plan.compute_digests(|_| {}).unwrap_err();
    assert!(format!("{e:#}").contains("Permission denied"), "{e:#}");
}

#[test]
fn no_server_gives_a_timeout_that_says_what_to_do() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("x");
    fs::write(&f, b"x").unwrap();
    // A bound socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut plan = scan::plan(&[f], "", false).unwrap();
    plan.compute_digests(|_| {}).unwrap();
    let mut cfg = config(silent.local_addr().unwrap());
    cfg.connect_timeout = Duration::from_millis(700);
    let e = send(&plan, &cfg, |_| {}).unwrap_err().to_string();
    assert!(e.contains("spate serve"), "{e}");
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let dst = tempfile::tempdir().unwrap();
    let s = serve(dst.path());
    let e = bind(s.addr, dst.path()).err().unwrap();
    assert!(format!("{e:#}").contains("--listen"), "{e:#}");
}

#[test]
fn concurrent_senders_are_served() {
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = serve(dst.path());
    let addr = s.addr;
    let threads: Vec<_> = (0..3u64)
        .map(|i| {
            let f = src.path().join(format!("c{i}"));
            fs::write(&f, content(i + 10, 2_000_000)).unwrap();
            std::thread::spawn(move || send_to(addr, &[f], "", false).map(|_| ()))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    for i in 0..3u64 {
        assert_eq!(
            fs::read(dst.path().join(format!("c{i}"))).unwrap(),
            content(i + 10, 2_000_000)
        );
    }
    // The server logs each session when it ends (its CLOSE may still be in flight).
    for _ in 0..50 {
        if s.logs.lock().unwrap().len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let logs = s.logs.lock().unwrap();
    assert_eq!(logs.len(), 3, "{logs:?}");
    assert!(
        logs.iter().all(|l| l.error.is_none() && l.objects == 1),
        "{logs:?}"
    );
}

#[test]
fn a_full_disk_fails_the_transfer_with_a_clear_message_and_leaves_nothing_behind() {
    let dst = tempfile::tempdir().unwrap();
    let mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(dst.path())
        .output();
    if !matches!(&mount, Ok(o) if o.status.success()) {
        eprintln!("SKIPPED: cannot mount a small tmpfs (needs root): {mount:?}");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _u = Unmount(dst.path());
    fs::write(dst.path().join("keep.txt"), b"existing data").unwrap();
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("too-big.bin");
    fs::write(&f, content(3, 3 << 20)).unwrap();
    let s = serve(dst.path());
    // A fresh transfer larger than the free space is refused before anything is written.
    let e = send_to(s.addr, std::slice::from_ref(&f), "", false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("free below its root"), "{e}");
    // A resume is not checked up front (its partial files already hold space): the disk
    // fills during the transfer, which fails saying so.
    let dest = scan::normalize_dest("").unwrap();
    let mut plan = scan::plan(&[f], &dest, false).unwrap();
    plan.compute_digests(|_| {}).unwrap();
    let cfg = SendConfig {
        resume: true,
        fec: spate_proto::coding::Fec::Auto,
        ..config(s.addr)
    };
    let e = send(&plan, &cfg, |_| {}).unwrap_err().to_string();
    assert!(e.contains("disk full"), "{e}");
    drop(s);
    let left: Vec<_> = fs::read_dir(dst.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("keep.txt")], "{left:?}");
    assert_eq!(
        fs::read(dst.path().join("keep.txt")).unwrap(),
        b"existing data"
    );
}

/// Junk sent at full speed to the sender's own port does not stop the transfer: the sender's
/// loop reads a bounded number of batches before it sends again, as the server's does. (It
/// used to read until its socket was empty, which a flood need never let happen.)
#[test]
fn a_flood_to_the_senders_port_does_not_stop_its_transfer() {
    use spate::udp::Socket;
    let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let f = src.path().join("flooded.bin");
    fs::write(&f, content(11, 8 << 20)).unwrap();
    let s = serve(dst.path());
    let socket = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let target = socket.local_addr().unwrap();
    let flood = spate::udp::Flood::start(target, Duration::from_secs(60)).unwrap();
    let plan = streamed_plan(&f);
    let r = spate::send::send_plan_on(socket, &plan, &config(s.addr), |_| {});
    let junk = flood.stop().unwrap();
    let r =
        r.unwrap_or_else(|e| panic!("the flooded sender failed ({junk} junk datagrams): {e:#}"));
    eprintln!(
        "8 MiB in {:.2} s while {junk} junk datagrams were sent to the sender's port",
        r.seconds
    );
    assert_eq!(r.stats.delivered_bytes, 8 << 20);
    assert_eq!(
        fs::read(dst.path().join("flooded.bin")).unwrap(),
        content(11, 8 << 20)
    );
}
