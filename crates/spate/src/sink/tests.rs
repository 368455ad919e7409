//! Tests of the writer: failures, memory, temporaries, and what other people put in the way.

use super::*;
use crate::journal;
use spate_proto::Entry;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

fn pool() -> WriterPool {
    WriterPool::new(2).unwrap()
}

/// Start a writer for `manifest` below `root`.
fn start(pool: &WriterPool, root: &Path, manifest: &Manifest) -> Sink {
    start_with(pool, root, manifest, false)
}

/// ... with or without direct I/O.
fn start_with(pool: &WriterPool, root: &Path, manifest: &Manifest, direct: bool) -> Sink {
    let root = Root::new(root).unwrap();
    let placed = root.placed_paths(manifest);
    Sink::start(pool, root, manifest, &placed, false, direct)
}

/// The next outcome within 10 s.
fn outcome(sink: &mut Sink) -> Outcome {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match sink.poll() {
            Some(o) => return o,
            None if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
            None => panic!("no outcome within 10 s"),
        }
    }
}

/// A file entry whose digest is that of `data`.
fn file(path: &str, data: &[u8]) -> Entry {
    let mut e = Entry::file(path, data.len() as u64);
    e.digest = Some(*blake3::hash(data).as_bytes());
    e
}

/// Hand `data` over as object `object` from `offset`, in datagram-sized pieces.
fn write(sink: &mut Sink, object: u32, offset: u64, data: &[u8]) {
    for (i, c) in data.chunks(1400).enumerate() {
        sink.write(object, offset + i as u64 * 1400, c);
    }
}

/// Write all of `data` as object `object` and finish it.
fn send(sink: &mut Sink, object: u32, data: &[u8]) {
    write(sink, object, 0, data);
    sink.finish(object);
}

/// Two 3 MiB files; the first's digest is wrong. All of the first and 2 MiB of the second
/// are written, then the first is finished: the session fails, and is aborted with `keep`.
fn fail_first_of_two(root: &Path, keep: bool) {
    let size = 3 << 20;
    let mut bad = Entry::file("a.bin", size);
    bad.digest = Some([0; 32]);
    let manifest = Manifest::new(vec![bad, Entry::file("b.bin", size)]);
    let pool = pool();
    let mut sink = start(&pool, root, &manifest);
    let data = vec![7u8; 3 << 20];
    write(&mut sink, 1, 0, &data);
    write(&mut sink, 2, 0, &data[..2 << 20]);
    sink.finish(1);
    let Outcome::Failed(failed) = outcome(&mut sink) else {
        panic!("the digest mismatch is not reported")
    };
    assert!(failed.contains("digest mismatch for 'a.bin'"), "{failed}");
    sink.abort(keep);
    sink.wait_idle();
}

/// One file's digest mismatch removes that file's partial; a resuming session keeps the
/// other files' partials and journals for the next attempt, any other session removes them.
#[test]
fn a_bad_file_costs_a_resuming_session_only_its_own_partial() {
    for keep in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        fail_first_of_two(dir.path(), keep);
        let root = Root::new(dir.path()).unwrap();
        let (a, b) = (
            root.prepare("a.bin").unwrap(),
            root.prepare("b.bin").unwrap(),
        );
        for p in [
            journal::part_path(&a),
            journal::journal_path(&a),
            a,
            b.clone(),
        ] {
            let p = p.path();
            assert!(!p.exists(), "{} exists (keep {keep})", p.display());
        }
        for p in [journal::part_path(&b), journal::journal_path(&b)] {
            let p = p.path();
            assert_eq!(p.exists(), keep, "{} (keep {keep})", p.display());
        }
    }
}

/// Resident memory of this process, bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Issue 14, finding 1: a manifest claiming a huge file, then one byte of it, cost memory
/// in proportion to the claim (a slot per 1 MiB block: 530 MiB for 16 TiB, an abort for
/// 2^55 bytes). Memory now follows what was received.
#[test]
fn a_huge_claimed_file_costs_memory_for_what_arrived_only() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool();
    let before = rss();
    for (i, size) in [16u64 << 40, 1 << 55].into_iter().enumerate() {
        let name = format!("huge-{i}");
        let mut e = Entry::file(name.as_str(), size);
        e.digest = Some([0; 32]);
        let manifest = Manifest::new(vec![e]);
        let mut sink = start(&pool, dir.path(), &manifest);
        sink.write(1, size / 2, b"x");
        sink.write(1, size - 1, b"y");
        sink.abort(false);
        sink.wait_idle();
        assert!(
            !dir.path().join(format!(".{name}.spate-part")).exists(),
            "the temporary file of an aborted session is removed"
        );
    }
    let grown = rss().saturating_sub(before);
    assert!(grown < 64 << 20, "memory grew by {grown} bytes");
}

/// Issue 14, finding 3: a hard link planted at the temporary name, pointing outside the root,
/// was written through (the outside file overwritten). The name is now replaced by a file of
/// our own; the outside file is untouched.
#[test]
fn a_planted_hard_link_is_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    fs::hard_link(&victim, dir.path().join(".k.spate-part")).unwrap();
    let data = vec![9u8; 100_000];
    let manifest = Manifest::new(vec![file("k", &data)]);
    let pool = pool();
    let mut sink = start(&pool, dir.path(), &manifest);
    send(&mut sink, 1, &data);
    assert_eq!(outcome(&mut sink), Outcome::Done(1));
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert_eq!(fs::read(dir.path().join("k")).unwrap(), data);
}

/// Issue 14, finding 2a: two transfers of one file at once. The second is refused while the
/// first writes the file; the file placed is the first's, whole. Afterwards another transfer
/// replaces it (the last to finish stays).
#[test]
fn a_second_writer_of_the_same_file_is_refused_while_the_first_writes() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool();
    let (one, two) = (vec![1u8; 3 << 20], vec![2u8; 3 << 20]);
    let mut first = start(&pool, dir.path(), &Manifest::new(vec![file("f", &one)]));
    write(&mut first, 1, 0, &one[..1 << 20]);
    first.wait_idle(); // the first holds the temporary now
    let mut second = start(&pool, dir.path(), &Manifest::new(vec![file("f", &two)]));
    send(&mut second, 1, &two);
    let Outcome::Failed(why) = outcome(&mut second) else {
        panic!("the second writer was not refused")
    };
    assert!(why.contains("being written by another transfer"), "{why}");
    second.abort(false);
    second.wait_idle();
    write(&mut first, 1, 1 << 20, &one[1 << 20..]);
    first.finish(1);
    assert_eq!(outcome(&mut first), Outcome::Done(1));
    assert_eq!(fs::read(dir.path().join("f")).unwrap(), one);
    let mut third = start(&pool, dir.path(), &Manifest::new(vec![file("f", &two)]));
    send(&mut third, 1, &two);
    assert_eq!(outcome(&mut third), Outcome::Done(1));
    assert_eq!(fs::read(dir.path().join("f")).unwrap(), two);
}

/// Issue 14, finding 10: a directory, FIFO or device at a file's name is not replaced; the
/// session is refused before any data, with a message naming the path relative to the root.
#[test]
fn only_regular_files_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("d")).unwrap();
    let fifo = std::ffi::CString::new(dir.path().join("p").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let pool = pool();
    for (name, kind) in [("d", "a directory"), ("p", "a FIFO")] {
        let data = b"data".to_vec();
        let mut sink = start(&pool, dir.path(), &Manifest::new(vec![file(name, &data)]));
        let Outcome::Refused(why) = outcome(&mut sink) else {
            panic!("{name} was not refused")
        };
        assert!(
            why.contains(&format!("'{name}' exists on the receiver and is {kind}")),
            "{why}"
        );
        assert!(
            !why.contains(dir.path().to_str().unwrap()),
            "absolute path in {why}"
        );
        // Nothing more comes from a refused writer: a caller polling in a loop stops.
        sink.wait_idle();
        let more = std::iter::from_fn(|| sink.poll()).take(10).count();
        assert!(more <= 1, "{more} outcomes after the refusal");
    }
    assert!(dir.path().join("d").is_dir());
    // A regular file is replaced.
    fs::write(dir.path().join("r"), b"old").unwrap();
    let mut sink = start(&pool, dir.path(), &Manifest::new(vec![file("r", b"new")]));
    send(&mut sink, 1, b"new");
    assert_eq!(outcome(&mut sink), Outcome::Done(1));
    assert_eq!(fs::read(dir.path().join("r")).unwrap(), b"new");
}

/// Issue 14, finding 6: a refused or failed session leaves nothing behind — no temporaries,
/// and none of the directories it created.
#[test]
fn a_failed_session_removes_the_directories_it_created() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("kept")).unwrap();
    let dirs: Vec<Entry> = ["kept", "kept/a", "kept/a/b"]
        .iter()
        .map(|p| Entry {
            kind: spate_proto::EntryKind::Directory,
            ..Entry::file(*p, 0)
        })
        .collect();
    let mut entries = dirs;
    let mut bad = Entry::file("kept/a/b/f", 2 << 20);
    bad.digest = Some([0; 32]);
    entries.push(bad);
    let pool = pool();
    let mut sink = start(&pool, dir.path(), &Manifest::new(entries));
    write(&mut sink, 4, 0, &[1; 1 << 20]);
    sink.abort(false);
    sink.wait_idle();
    assert!(
        dir.path().join("kept").is_dir(),
        "a directory that was there stays"
    );
    assert!(
        !dir.path().join("kept/a").exists(),
        "created directories are removed"
    );
}

/// The queue of one session is bounded: `has_room` says no before it holds more than
/// `LANE_BYTES` (here with no worker running, as with a disk that stalls).
#[test]
fn queued_bytes_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let pool = WriterPool::paused();
    let data = vec![0u8; 64 << 20];
    let mut sink = start(&pool, dir.path(), &Manifest::new(vec![file("f", &data)]));
    let mut queued = 0;
    while sink.has_room(1400) && queued < data.len() {
        sink.write(1, queued as u64, &data[queued..queued + 1400]);
        queued += 1400;
    }
    assert!(queued <= LANE_BYTES, "{queued} bytes queued");
    assert!(queued >= LANE_BYTES / 2, "only {queued} bytes queued");
}

/// The memory a session's queue holds is bounded, not only its bytes: a peer whose datagrams
/// never continue one another (each a little past the last, as a hostile sender can choose)
/// must not make each datagram hold a whole coalescing buffer. Before, 1400 counted bytes held
/// a 256 KiB buffer (1 MiB with direct I/O): 64 MiB of counted bytes were 11.7 GiB (47 GiB) of
/// buffers, and the whole pool's 256 MiB four times that.
#[test]
fn scattered_datagrams_hold_bounded_memory() {
    for direct in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let pool = WriterPool::paused();
        let manifest = Manifest::new(vec![Entry::file("f", 1 << 40)]);
        let mut sink = start_with(&pool, dir.path(), &manifest, direct);
        let piece = [7u8; 1400];
        let mut n = 0u64;
        // Stops well past the bound if has_room never says no.
        while sink.has_room(piece.len()) && sink.lane.held_bytes() <= 2 * LANE_BYTES {
            sink.write(1, n * 3 * 1400, &piece);
            n += 1;
        }
        let held = sink.lane.held_bytes();
        assert!(
            held <= LANE_BYTES + (2 << 20),
            "direct {direct}: {held} bytes of buffers held for {n} datagrams"
        );
        assert!(
            n * 1400 >= (LANE_BYTES / 8) as u64,
            "only {n} datagrams taken"
        );
    }
}

/// A streamed file's entry (spec §5.1): no digest in the manifest; its object is `data` and
/// then the 32-byte digest `trailer`.
fn streamed(path: &str, data: &[u8], trailer: [u8; 32]) -> (Entry, Vec<u8>) {
    let mut e = Entry::file(path, data.len() as u64);
    e.kind = spate_proto::EntryKind::StreamedFile;
    let mut object = data.to_vec();
    object.extend_from_slice(&trailer);
    (e, object)
}

/// The trailer is the digest the file is checked against and is not written to the file,
/// however the pieces fall (here one straddles the file's end and the trailer).
#[test]
fn a_streamed_file_is_checked_against_its_trailer_and_placed_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..(3u32 << 20) + 777).map(|i| (i * 7) as u8).collect();
    let (e, object) = streamed("s.bin", &data, *blake3::hash(&data).as_bytes());
    let (small, small_object) = streamed("t.bin", b"hello", *blake3::hash(b"hello").as_bytes());
    let manifest = Manifest::new(vec![e, small]);
    let pool = pool();
    let mut sink = start(&pool, dir.path(), &manifest);
    send(&mut sink, 1, &object);
    assert!(matches!(outcome(&mut sink), Outcome::Done(1)));
    // The trailer first, the content after: arrival order does not matter.
    write(&mut sink, 2, 5, &small_object[5..]);
    write(&mut sink, 2, 0, &small_object[..5]);
    sink.finish(2);
    assert!(matches!(outcome(&mut sink), Outcome::Done(2)));
    assert_eq!(fs::read(dir.path().join("s.bin")).unwrap(), data);
    assert_eq!(fs::read(dir.path().join("t.bin")).unwrap(), b"hello");
}

/// A trailer that is not the digest of the bytes received: nothing is put in place, and the
/// message says which file and what to do.
#[test]
fn a_streamed_file_with_a_wrong_trailer_is_not_placed() {
    let dir = tempfile::tempdir().unwrap();
    let data = vec![5u8; 2 << 20];
    let (e, object) = streamed("s.bin", &data, [9; 32]);
    let manifest = Manifest::new(vec![e]);
    let pool = pool();
    let mut sink = start(&pool, dir.path(), &manifest);
    send(&mut sink, 1, &object);
    let Outcome::Failed(msg) = outcome(&mut sink) else {
        panic!("a wrong trailer was accepted")
    };
    assert!(msg.contains("digest mismatch for 's.bin'"), "{msg}");
    assert!(msg.contains("send it again"), "{msg}");
    sink.abort(false);
    sink.wait_idle();
    assert!(!dir.path().join("s.bin").exists());
    let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Whether files in `dir` can be opened with `O_DIRECT` (not on every file system).
fn direct_io_works_in(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join("probe");
    let ok = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p)
        .is_ok();
    let _ = fs::remove_file(p);
    if !ok {
        eprintln!(
            "{}: no O_DIRECT here; the writer falls back to the page cache",
            dir.display()
        );
    }
    ok
}

/// Bytes that are not the same in any two 1400-byte pieces or 1 MiB blocks.
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// A direct-I/O writer for one file `name` of `data`, in a temporary directory, and whether
/// that directory's file system takes `O_DIRECT` (fields drop in order: the writer first).
struct DirectCase {
    sink: Sink,
    pool: WriterPool,
    works: bool,
    dir: tempfile::TempDir,
}

/// Finish object 1 of `sink`: it is placed at `path` with exactly `data`.
fn placed_exactly(sink: &mut Sink, path: &Path, data: &[u8]) {
    sink.finish(1);
    assert_eq!(outcome(sink), Outcome::Done(1));
    assert_eq!(fs::read(path).unwrap(), data);
}

fn direct_case(name: &str, data: &[u8]) -> DirectCase {
    let dir = tempfile::tempdir().unwrap();
    let works = direct_io_works_in(dir.path());
    let manifest = Manifest::new(vec![file(name, data)]);
    let pool = pool();
    let sink = start_with(&pool, dir.path(), &manifest, true);
    DirectCase {
        sink,
        pool,
        works,
        dir,
    }
}

/// Direct I/O (`direct.rs`): datagrams that arrive out of order, twice, and with holes filled
/// last are placed exactly as sent, whole blocks through `O_DIRECT` and the odd-sized last
/// block through the page cache.
#[test]
fn direct_io_places_exactly_what_arrived_in_any_order() {
    let data = pattern((5 << 20) + 1234);
    let DirectCase {
        mut sink,
        pool,
        works,
        dir,
    } = direct_case("d.bin", &data);
    let held_back = |i: usize| i % 97 == 0;
    for (i, c) in data.chunks(1400).enumerate() {
        if !held_back(i) {
            sink.write(1, i as u64 * 1400, c);
        }
    }
    write(&mut sink, 1, 0, &data[..64 << 10]); // a duplicate run
    for (i, c) in data.chunks(1400).enumerate().rev() {
        if held_back(i) {
            sink.write(1, i as u64 * 1400, c);
        }
    }
    sink.wait_idle();
    if works {
        assert!(
            pool.staged_buffers() > 0,
            "no block was staged for O_DIRECT"
        );
    }
    placed_exactly(&mut sink, &dir.path().join("d.bin"), &data);
    drop(sink);
    drop(pool);
}

/// Blocks waiting for repairs hold staging buffers only up to the session's limit; the
/// oldest are spilled to the page cache, and the file is still placed exactly.
#[test]
fn direct_io_staging_is_bounded_and_spills_exactly() {
    use super::direct::SESSION_BLOCKS;
    let data = pattern((SESSION_BLOCKS + 8) << 20);
    let DirectCase {
        mut sink,
        pool,
        works,
        dir,
    } = direct_case("s.bin", &data);
    // Every block's first datagram is lost: no block completes until they come at the end.
    let first = |i: usize| (i * 1400) % (1 << 20) < 1400;
    for (i, c) in data.chunks(1400).enumerate() {
        if !first(i) {
            sink.write(1, i as u64 * 1400, c);
        }
    }
    sink.wait_idle();
    let held = pool.staged_buffers();
    assert!(held <= SESSION_BLOCKS, "{held} staging buffers held");
    if works {
        assert_eq!(
            held, SESSION_BLOCKS,
            "the limit is used before blocks spill"
        );
    }
    for (i, c) in data.chunks(1400).enumerate() {
        if first(i) {
            sink.write(1, i as u64 * 1400, c);
        }
    }
    placed_exactly(&mut sink, &dir.path().join("s.bin"), &data);
    drop(sink);
    drop(pool);
}

/// Blocks that arrive in order go to the disk from the buffers they were gathered in, never
/// staged: the network thread hands each block over on its own, aligned.
#[test]
fn direct_io_writes_blocks_that_arrive_in_order_without_staging() {
    let data = pattern(4 << 20);
    let DirectCase {
        mut sink,
        pool,
        works,
        dir,
    } = direct_case("o.bin", &data);
    write(&mut sink, 1, 0, &data);
    sink.wait_idle();
    if works {
        assert_eq!(
            pool.staged_buffers(),
            0,
            "a block that came in order was staged"
        );
    }
    placed_exactly(&mut sink, &dir.path().join("o.bin"), &data);
}

/// Whole blocks of zeros are not written into a file created sparse, with direct I/O as
/// without: the holes read as them.
#[test]
fn direct_io_leaves_zero_blocks_as_holes() {
    use std::os::unix::fs::MetadataExt;
    let mut data = pattern(4 << 20);
    data[1 << 20..3 << 20].fill(0);
    let DirectCase {
        mut sink,
        pool: _pool,
        dir,
        ..
    } = direct_case("z.bin", &data);
    send(&mut sink, 1, &data);
    assert_eq!(outcome(&mut sink), Outcome::Done(1));
    let placed = dir.path().join("z.bin");
    assert_eq!(fs::read(&placed).unwrap(), data);
    let allocated = fs::metadata(&placed).unwrap().blocks() * 512;
    assert!(
        allocated < 3 << 20,
        "{allocated} bytes allocated for 2 MiB of data"
    );
}

/// Written buffers go back to the pool and are filled again: a second session of the same
/// pool takes the first's, and the pool keeps no more than `SPARE_BYTES` (`spares.rs`).
#[test]
fn written_buffers_are_filled_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(8 << 20);
    let pool = pool();
    let mut first = start(
        &pool,
        dir.path(),
        &Manifest::new(vec![file("a.bin", &data)]),
    );
    write(&mut first, 1, 0, &data);
    first.wait_idle();
    let kept = first.lane.spare_bytes();
    assert!(
        (WRITE_BUF..=spares::SPARE_BYTES).contains(&kept),
        "{kept} bytes of spare buffers kept"
    );
    let mut second = start(
        &pool,
        dir.path(),
        &Manifest::new(vec![file("b.bin", &data)]),
    );
    write(&mut second, 1, 0, &data[..1 << 20]);
    // Four buffers taken, the last still filling: at most three came back.
    let left = second.lane.spare_bytes();
    assert!(
        left <= kept - WRITE_BUF,
        "{left} of {kept} spare bytes left"
    );
}

/// An empty write is a no-op: it neither starts a coalescing buffer nor ends the one being
/// filled, even at an offset that does not continue it (before, it ended the buffer and began
/// an empty one, which `flush` then had to recognise).
#[test]
fn an_empty_write_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(4000);
    let pool = WriterPool::paused();
    let mut sink = start(
        &pool,
        dir.path(),
        &Manifest::new(vec![file("e.bin", &data)]),
    );
    sink.write(1, 9_999, &[]);
    assert!(sink.cur.is_none());
    sink.write(1, 0, &data[..1000]);
    sink.write(1, 3_000, &[]);
    sink.write(1, 1000, &data[1000..]);
    assert_eq!(sink.cur.as_ref().map(|c| c.used), Some(data.len()));
    assert_eq!(sink.lane.held_bytes(), 0, "nothing queued");
}
