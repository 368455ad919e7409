//! What an independent implementation found (issue 13), run as a user runs it: the `spate`
//! binary against `spate serve` on loopback. Resumes of transfers that hold empty files and
//! directories complete (they hung), also after the receiver was killed; destinations follow
//! scp's rule (`docs/spec.md` §5.3); a late HELLO of an ended session opens nothing (§4.1).
//! Every process is bounded in time and every result compared byte for byte.

mod common;

use std::fs;
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, run_bounded, serve};
use spate_proto::secure::SecureSender;
use spate_proto::wire::{self, CloseCode, Packet};
use spate_proto::{Entry, EntryKind, Manifest, RateConfig, SenderConfig, SenderEvent, Zeros};

/// Each command gets this long; a hang fails the test instead of stalling it.
const LIMIT: Duration = Duration::from_secs(30);

fn spate(args: &[&str], cwd: &Path) -> Command {
    let mut c = common::spate();
    c.current_dir(cwd).args(args);
    c
}

/// Run a `spate send` to completion; it must succeed.
fn send_ok(args: &[&str], cwd: &Path) {
    let out = run_bounded(&mut spate(args, cwd), LIMIT);
    assert!(
        out.status.success(),
        "spate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The issue's sources: a 5000-byte file, an empty file, a directory with a file and an empty
/// subdirectory holding an empty file.
fn sources(dir: &Path) {
    fs::create_dir_all(dir.join("src/d/sub")).unwrap();
    fs::write(dir.join("src/f1"), spate::noise::bytes(1, 5000)).unwrap();
    fs::write(dir.join("src/e0"), b"").unwrap();
    fs::write(dir.join("src/d/f3"), spate::noise::bytes(3, 3000)).unwrap();
    fs::write(dir.join("src/d/sub/e"), b"").unwrap();
    fs::create_dir(dir.join("src/d/void")).unwrap();
}

/// `b` holds everything below `a`, byte for byte, empty files and directories included, and
/// nothing else (no temporary or journal file either).
fn same_tree(a: &Path, b: &Path) {
    let list = |p: &Path| {
        let mut v: Vec<_> = fs::read_dir(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(list(a), list(b), "{} vs {}", a.display(), b.display());
    for name in list(a) {
        let (x, y) = (a.join(&name), b.join(&name));
        if x.is_dir() {
            assert!(y.is_dir(), "{} is not a directory", y.display());
            same_tree(&x, &y);
        } else {
            assert_eq!(
                fs::read(&x).unwrap(),
                fs::read(&y).unwrap(),
                "{}",
                y.display()
            );
        }
    }
}

/// The three commands of the issue complete, twice each (fresh, then resumed over what is
/// there), with every empty file and directory created.
#[test]
fn resumes_with_empty_files_and_directories_complete() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let root = t.path().join("root");
    fs::create_dir(&root).unwrap();
    let s = serve(&root, free_port());
    let at = |dest: &str| format!("127.0.0.1:{}:{dest}", s.port);
    let q = [
        "send",
        "-q",
        "--idle-timeout",
        "3",
        "--connect-timeout",
        "5",
    ];
    fn with<'a>(q: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [q, extra].concat()
    }
    let p = t.path();
    for _ in 0..2 {
        send_ok(&with(&q, &["--resume", "src/e0", "src/f1", &at("a")]), p);
        send_ok(&with(&q, &["--resume", "-r", "src/d", &at("b")]), p);
        send_ok(&with(&q, &["src/e0", &at("c")]), p);
        send_ok(&with(&q, &["--resume", "src/e0", &at("c")]), p);
    }
    assert_eq!(fs::read(root.join("a/e0")).unwrap(), b"");
    assert_eq!(
        fs::read(root.join("a/f1")).unwrap(),
        fs::read(p.join("src/f1")).unwrap()
    );
    same_tree(&p.join("src/d"), &root.join("b/d"));
    // One file to a destination that is not a directory is written as it (§5.3).
    assert_eq!(fs::read(root.join("c")).unwrap(), b"");
}

/// The receiver is killed in the middle of a tree with empty objects; a resume after it is
/// restarted completes byte-exact, and a second resume (everything held) completes too.
#[test]
fn a_killed_receiver_then_resumed_tree_with_empty_objects_is_complete() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    // 24 MiB at 80 Mbit/s: about 2.5 s, so a kill after 1 s lands mid-transfer.
    fs::write(t.path().join("src/d/big"), spate::noise::bytes(4, 24 << 20)).unwrap();
    let root = t.path().join("root");
    fs::create_dir(&root).unwrap();
    let port = free_port();
    let mut server = serve(&root, port);
    let dest = format!("127.0.0.1:{port}:in");
    let args = [
        "send",
        "-q",
        "--resume",
        "--rate",
        "80M",
        "--idle-timeout",
        "3",
        "--connect-timeout",
        "5",
        "-r",
        "src/d",
        &dest,
    ];
    let first = spate(&args, t.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let first = first.wait_with_output().unwrap();
    assert!(
        !first.status.success(),
        "the first send outlived its receiver"
    );
    assert!(
        root.join("in/d/.big.spate-journal").exists(),
        "the partial file's journal survives"
    );
    drop(server);
    let server = serve(&root, port);
    send_ok(&args, t.path());
    same_tree(&t.path().join("src/d"), &root.join("in/d"));
    let line = server.wait_for("session");
    assert!(line.contains("resumed"), "{line}");
    send_ok(&args, t.path());
    same_tree(&t.path().join("src/d"), &root.join("in/d"));
}

/// §5.3 as users know it from scp: `a.iso host:b.iso` writes b.iso; into a directory that
/// exists or is named with a trailing '/'; several sources and trees go into the destination.
#[test]
fn destinations_follow_scp() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    sources(p);
    let root = p.join("root");
    fs::create_dir_all(root.join("existing")).unwrap();
    let s = serve(&root, free_port());
    let at = |dest: &str| format!("127.0.0.1:{}:{dest}", s.port);
    let send = |args: &[&str]| {
        send_ok(
            &[&["send", "-q", "--connect-timeout", "5"][..], args].concat(),
            p,
        )
    };
    let f1 = fs::read(p.join("src/f1")).unwrap();
    send(&["src/f1", &at("b.iso")]);
    assert_eq!(fs::read(root.join("b.iso")).unwrap(), f1);
    send(&["src/f1", &at("new/dir/c.iso")]);
    assert_eq!(fs::read(root.join("new/dir/c.iso")).unwrap(), f1);
    send(&["src/f1", &at("existing")]);
    assert_eq!(fs::read(root.join("existing/f1")).unwrap(), f1);
    send(&["src/f1", &at("slash/")]);
    assert_eq!(fs::read(root.join("slash/f1")).unwrap(), f1);
    send(&["src/f1", "src/e0", &at("two")]);
    assert_eq!(fs::read(root.join("two/f1")).unwrap(), f1);
    assert_eq!(fs::read(root.join("two/e0")).unwrap(), b"");
    // §5.4: a file's permission bits are applied; a directory's with the owner's rwx added.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let set = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    set(&p.join("src/d/f3"), 0o640);
    set(&p.join("src/d/void"), 0o555);
    send(&["-r", "src/d", &at("tree")]);
    same_tree(&p.join("src/d"), &root.join("tree/d"));
    assert_eq!(mode(&root.join("tree/d/f3")), 0o640);
    assert_eq!(mode(&root.join("tree/d/void")), 0o755);
    send(&["src/f1", &at(".")]);
    assert_eq!(fs::read(root.join("f1")).unwrap(), f1);
    // The same single file again over b.iso replaces it (a regular file, as scp does).
    send(&["src/e0", &at("b.iso")]);
    assert_eq!(fs::read(root.join("b.iso")).unwrap(), b"");
}

/// §4.1: a HELLO that arrives after its session ended (delayed in the network, or a sender
/// that reused its ID) is answered with CLOSE Refused; it opens no session and creates nothing.
#[test]
fn a_late_hello_of_an_ended_session_opens_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    fs::create_dir(&root).unwrap();
    let s = serve(&root, free_port());
    let server = format!("127.0.0.1:{}", s.port);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let m = Manifest {
        destination: "late".into(),
        entries: vec![Entry {
            kind: EntryKind::Directory,
            ..Entry::file("dir", 0)
        }],
    };
    let session = 0x1a7e_0001;
    let mut sender = SecureSender::new(
        SenderConfig::new(RateConfig::fixed(10_000_000)),
        session,
        &m,
        spate_proto::Instant::ZERO,
        common::client_params(&common::client_identity()),
    )
    .unwrap();
    let clock = Instant::now();
    let now = || spate_proto::Instant::from_micros(clock.elapsed().as_micros() as u64);
    let mut buf = vec![0u8; 2048];
    let mut first_hello = None;
    let mut done = false;
    while !sender.is_closed() && clock.elapsed() < LIMIT {
        while let Some(tx) = sender.poll_transmit(now(), &mut buf, &mut Zeros) {
            first_hello.get_or_insert_with(|| buf[..tx.len].to_vec());
            sock.send_to(&buf[..tx.len], &server).unwrap();
        }
        if let Ok(n) = sock.recv(&mut buf) {
            let _ = sender.handle_datagram(now(), &mut buf[..n]);
        }
        sender.handle_timeout(now());
        while let Some(e) = sender.poll_event() {
            done |= e == SenderEvent::Complete;
        }
    }
    assert!(done, "the session completed");
    // Without VERIFY, COMPLETE means "every byte held", not "placed": wait for the server.
    let line = s.wait_for("session 1a7e0001");
    assert!(root.join("late/dir").is_dir(), "{line}");
    fs::remove_dir_all(root.join("late")).unwrap();
    // The same HELLO again.
    let hello = first_hello.unwrap();
    sock.send_to(&hello, &server).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    let close = loop {
        assert!(Instant::now() < end, "no answer to the late HELLO");
        if let Ok(n) = sock.recv(&mut buf) {
            let p = wire::parse(&buf[..n]).unwrap();
            if let Packet::Close(c) = p.packet {
                break (p.header.session, c.code, n);
            }
            panic!("a {:?} answered the late HELLO", p.header.ty);
        }
    };
    assert_eq!(close.0, session);
    assert_eq!(close.1, CloseCode::Refused);
    assert!(
        close.2 < hello.len(),
        "the answer is smaller than the HELLO"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!root.join("late").exists(), "a late HELLO created files");
}

/// The digests in `docs/test-vectors/` are BLAKE3's (the core has no BLAKE3 to check them).
#[test]
fn test_vector_digests_are_blake3() {
    assert_eq!(
        blake3::hash(b"hello").as_bytes(),
        spate_proto::vectors::blake3_hello()
    );
    assert_eq!(
        blake3::hash(b"").as_bytes(),
        &spate_proto::vectors::BLAKE3_EMPTY
    );
}
