//! Hostile input: arbitrary datagrams thrown at live sessions never panic, and a session that
//! drops them carries on as if they never came.

use proptest::prelude::*;
use spate_proto::{
    Entry, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, Sender, SenderConfig,
    SenderEvent, Zeros,
};

mod common;
use common::{byte_at, Pattern};

/// The receiver's address-validation token in these tests (spec §4.8).
const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;

/// A datagram with a valid version byte and the session's id, then arbitrary bytes.
fn datagram(session: u32) -> impl Strategy<Value = Vec<u8>> {
    (0u8..16, prop::collection::vec(any::<u8>(), 0..300)).prop_map(move |(tf, body)| {
        let mut d = vec![1, tf];
        d.extend_from_slice(&session.to_be_bytes());
        d.extend(body);
        d
    })
}

fn pair() -> (Sender, Receiver) {
    let m = Manifest {
        destination: String::new(),
        entries: vec![Entry::file("a", 100_000), Entry::file("b-c", 7)],
    };
    // Both sides resume, so garbage also meets the HAVE path (the sender waits for one).
    let mut cfg = SenderConfig::new(RateConfig::fixed(10_000_000));
    cfg.resume = true;
    let mut s = Sender::new(cfg, 5, &m, Instant::ZERO).unwrap();
    let rcfg = ReceiverConfig {
        resume: true,
        ..ReceiverConfig::default()
    };
    let mut buf = vec![0u8; 1472];
    let t = s
        .poll_transmit(Instant::ZERO, &mut buf, &mut Zeros)
        .unwrap();
    let mut hello = buf[..t.len].to_vec();
    let mut r = Receiver::accept(rcfg, Instant::ZERO, &mut hello, TOKEN).unwrap();
    let t = r.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    s.handle_datagram(Instant::from_millis(10), &mut buf[..t.len])
        .unwrap();
    // The sender's PING with the token validates its address, so garbage meets a session
    // past the handshake (spec §4.8).
    let t = s
        .poll_transmit(Instant::from_millis(10), &mut buf, &mut Zeros)
        .unwrap();
    r.handle_datagram(Instant::from_millis(15), &mut buf[..t.len])
        .unwrap();
    assert!(r.is_validated());
    (s, r)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn receiver_survives_garbage(ds in prop::collection::vec(datagram(5), 1..20)) {
        let (_, mut r) = pair();
        for (i, mut d) in ds.into_iter().enumerate() {
            let now = Instant::from_millis(20 + i as u64);
            if let Ok(Some(c)) = r.handle_datagram(now, &mut d) {
                // Whatever was accepted is within the datagram and the object.
                prop_assert!(c.payload.end <= d.len());
            }
            let mut buf = vec![0u8; 1472];
            while r.poll_transmit(now, &mut buf).is_some() {}
            r.handle_timeout(now);
            while r.poll_event().is_some() {}
        }
    }

    #[test]
    fn sender_survives_garbage(ds in prop::collection::vec(datagram(5), 1..20)) {
        let (mut s, _) = pair();
        let mut buf = vec![0u8; 1472 * 4];
        for (i, mut d) in ds.into_iter().enumerate() {
            let now = Instant::from_millis(20 + i as u64);
            let _ = s.handle_datagram(now, &mut d);
            while s.poll_transmit(now, &mut buf, &mut Zeros).is_some() {}
            s.handle_timeout(now);
            while s.poll_event().is_some() {}
        }
    }
}

#[test]
fn feedback_for_packets_never_sent_is_dropped() {
    let (mut s, _) = pair();
    // FEEDBACK acknowledging packet 1000 (never sent): largest 1000, first range 0.
    let mut d = vec![1, 5, 0, 0, 0, 5, 0, 0, 0, 0, 0, 1];
    d.extend([0x43, 0xe8, 0, 0, 0, 1, 0, 0, 0]);
    assert!(s.handle_datagram(Instant::from_millis(30), &mut d).is_err());
    assert_eq!(s.stats().feedback_received, 0);
}

#[test]
fn data_outside_an_object_is_neither_used_nor_acknowledged() {
    let (_, mut r) = pair();
    // DATA for object 2 (size 7) at offset 5 with 3 bytes: overruns the object.
    let mut d = vec![
        1, 3, 0, 0, 0, 5, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3,
    ];
    assert!(r.handle_datagram(Instant::from_millis(30), &mut d).is_err());
    assert_eq!(r.stats().data_packets_received, 0);
}

#[test]
fn a_have_naming_bytes_outside_the_manifest_is_dropped_whole() {
    let (mut s, _) = pair();
    let have = |body: &[u8]| {
        let mut d = vec![1, 8, 0, 0, 0, 5, 0, 0, 0, 0, 0, 3];
        d.extend_from_slice(body);
        d
    };
    // Object 3 of a two-entry manifest; then bytes 0..8 of object 2 (size 7).
    for body in [&[1u8, 3, 1][..], &[1, 2, 0, 0, 8]] {
        assert!(s
            .handle_datagram(Instant::from_millis(30), &mut have(body))
            .is_err());
    }
    assert_eq!(s.stats().resumed_bytes, 0);
    // A valid one (object 2 whole) is taken.
    s.handle_datagram(Instant::from_millis(31), &mut have(&[1, 2, 1]))
        .unwrap();
    assert_eq!(s.stats().resumed_bytes, 7);
}

/// A valid manifest with a destination, nested directories and a digest, encoded.
fn encoded_manifest() -> Vec<u8> {
    let mut f = Entry::file("d/f", 5);
    f.digest = Some([3; 32]);
    let m = Manifest {
        destination: "in/".into(),
        entries: vec![
            Entry {
                kind: spate_proto::EntryKind::Directory,
                ..Entry::file("d", 0)
            },
            f,
        ],
    };
    m.encode().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The manifest parser (§5.1, destination field included) never panics, and whatever it
    /// accepts — from arbitrary bytes or from a valid manifest with bytes flipped, cut or
    /// added — passes every rule of §5.2, so the receiver only ever acts on a valid manifest.
    #[test]
    fn manifest_decode_survives_garbage_and_accepts_only_valid(
        garbage in prop::collection::vec(any::<u8>(), 0..400),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        if let Ok(m) = Manifest::decode(&garbage) {
            prop_assert!(m.validate().is_ok());
        }
        let mut b = encoded_manifest();
        for (i, x) in &flips {
            let i = i.index(b.len());
            b[i] ^= x;
        }
        let n = cut.index(b.len() + 1);
        for bytes in [&b[..n], &b[..]] {
            if let Ok(m) = Manifest::decode(bytes) {
                prop_assert!(m.validate().is_ok(), "{m:?}");
            }
        }
    }
}

/// A REPAIR (type 7, §4.9) with the given fields and a symbol of `symbol_len` bytes.
fn repair(pn: u8, object: u32, first: u32, count: u16, index: u16, symbol_len: usize) -> Vec<u8> {
    let mut d = vec![1, 7, 0, 0, 0, 5, 0, 0, 0, 0, 1, pn];
    d.extend_from_slice(&object.to_be_bytes());
    d.extend_from_slice(&first.to_be_bytes());
    d.extend_from_slice(&count.to_be_bytes());
    d.extend_from_slice(&index.to_be_bytes());
    d.extend(std::iter::repeat_n(0xa5, symbol_len));
    d
}

/// §4.9: a REPAIR for the manifest, for an object the manifest lacks, for a block reaching
/// past its object's end, or with a symbol that is not one chunk long is dropped: not
/// acknowledged, nothing kept, nothing rebuilt.
#[test]
fn repair_outside_the_objects_is_dropped() {
    let (_, mut r) = pair();
    // Chunks are 1448 bytes; object 1 (100 000 bytes) has chunks 0..=69.
    let chunk = 1448;
    for (what, mut d) in [
        ("manifest", repair(1, 0, 0, 1, 0, chunk)),
        ("no such object", repair(2, 3, 0, 1, 0, chunk)),
        ("past the end", repair(3, 1, 60, 11, 0, chunk)),
        ("short symbol", repair(4, 1, 0, 4, 0, chunk - 2)),
        ("index beyond R(K)", repair(5, 1, 0, 4, 16, chunk)),
    ] {
        assert!(
            r.handle_datagram(Instant::from_millis(30), &mut d).is_err(),
            "{what}"
        );
    }
    assert_eq!(r.coding_stats().symbols_received, 0);
    assert_eq!(r.coding_bytes(), 0);
    assert!(r.poll_rebuilt().is_none());
    // The last chunk's block, well formed, is taken (and, with nothing else kept, rebuilt
    // from its one symbol: the sender's word, which the application's digest check judges).
    let mut ok = repair(6, 1, 69, 1, 0, chunk);
    assert!(r.handle_datagram(Instant::from_millis(31), &mut ok).is_ok());
    assert_eq!(r.coding_stats().symbols_received, 1);
    let c = r.poll_rebuilt().unwrap();
    assert_eq!(
        (c.object, c.offset, c.bytes.len()),
        (1, 69 * 1448, 100_000 - 69 * 1448)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Arbitrary REPAIR fields and KEEP DATA never panic the receiver, and what it keeps for
    /// coding stays within its budget.
    #[test]
    fn arbitrary_repairs_never_panic(
        ps in prop::collection::vec((0u32..4, 0u32..80, 0u16..80, 0u16..40, any::<bool>()), 1..60)
    ) {
        let (_, mut r) = pair();
        for (i, (object, first, count, index, data)) in ps.into_iter().enumerate() {
            let now = Instant::from_millis(20 + i as u64);
            let pn = (i % 250) as u8;
            let mut d = if data {
                // A KEEP DATA chunk of object 1 at chunk `first`.
                let mut d = vec![1, 0x43, 0, 0, 0, 5, 0, 0, 0, 0, 2, pn];
                d.extend_from_slice(&1u32.to_be_bytes());
                d.extend_from_slice(&(u64::from(first % 70) * 1448).to_be_bytes());
                let len = if first % 70 == 69 { 100_000 - 69 * 1448 } else { 1448 };
                d.extend(std::iter::repeat_n(7u8, len));
                d
            } else {
                repair(pn, object, first, count, index, 1448)
            };
            let _ = r.handle_datagram(now, &mut d);
            while let Some(c) = r.poll_rebuilt() {
                prop_assert!(c.offset + c.bytes.len() as u64 <= 100_000);
            }
            prop_assert!(r.coding_bytes() <= spate_proto::coding::KEEP_BUDGET);
        }
    }
}

/// Object sizes of [`tampered_transfer`]: a coded file of 30 chunks and a short one.
const TAMPERED_SIZES: [u64; 2] = [43_000, 3_000];

/// A coded transfer (every block with repair symbols, so REPAIR, KEEP and the Rebuilt Blocks
/// extension are in play) in which datagram `nth` of one direction has byte `at` changed by
/// `xor`: what an authenticated hostile peer can send. Neither end may panic, every chunk the
/// receiver accepts or rebuilds must lie inside its object, and when the change went to the
/// sender, every byte the receiver took must be the source's. With `resume`, the receiver
/// already holds the first 10 000 bytes of the first file (so HAVE is in play) and reports a
/// Write Limit of 64 KiB past what it received (§7.4). Returns `None` if there was no `nth`
/// datagram long enough to change, else whether the transfer completed.
fn tampered_transfer(
    resume: bool,
    to_receiver: bool,
    nth: usize,
    at: usize,
    xor: u8,
) -> Option<bool> {
    let m = Manifest {
        destination: String::new(),
        entries: vec![
            Entry::file("a", TAMPERED_SIZES[0]),
            Entry::file("b", TAMPERED_SIZES[1]),
        ],
    };
    let mut cfg = SenderConfig::new(RateConfig::fixed(20_000_000));
    cfg.fec = spate_proto::coding::Fec::Rate(0.0625);
    cfg.resume = resume;
    let mut s = Sender::new(cfg, 5, &m, Instant::ZERO).unwrap();
    let mut source = Pattern::new(16 << 10);
    let mut buf = vec![0u8; 1472];
    let t = s
        .poll_transmit(Instant::ZERO, &mut buf, &mut source)
        .unwrap();
    let rcfg = ReceiverConfig {
        resume,
        ..ReceiverConfig::default()
    };
    let mut r = Receiver::accept(rcfg, Instant::ZERO, &mut buf[..t.len], TOKEN).unwrap();
    let check = |object: u32, offset: u64, bytes: &[u8]| {
        let size = TAMPERED_SIZES[object as usize - 1];
        assert!(
            offset + bytes.len() as u64 <= size,
            "chunk past object {object}'s end"
        );
        if !to_receiver {
            for (i, b) in bytes.iter().enumerate() {
                assert_eq!(*b, byte_at(object, offset + i as u64), "object {object}");
            }
        }
    };
    let (mut count, mut changed, mut complete) = (0, false, false);
    let mut tamper = |d: &mut [u8]| {
        if count == nth && at < d.len() {
            d[at] ^= xor;
            changed = true;
        }
        count += 1;
    };
    // At most 3 s of virtual time, in 1 ms steps: enough for the untouched transfer many times
    // over, and a bound for one the change broke.
    for ms in 1..3000 {
        let now = Instant::from_millis(ms);
        while let Some(t) = s.poll_transmit(now, &mut buf, &mut source) {
            let d = &mut buf[..t.len];
            if to_receiver {
                tamper(d);
            }
            if let Ok(Some(c)) = r.handle_datagram(now, d) {
                check(c.object, c.offset, &d[c.payload]);
            }
        }
        while let Some(c) = r.poll_rebuilt() {
            check(c.object, c.offset, &c.bytes);
        }
        if resume {
            if r.wants_resume() {
                r.resume(now, [(1, 0..10_000)]);
            }
            r.set_write_room(now, 64 << 10);
        }
        let mut one = [0u8; 1472];
        while let Some(t) = r.poll_transmit(now, &mut one) {
            let d = &mut one[..t.len];
            if !to_receiver {
                tamper(d);
            }
            let _ = s.handle_datagram(now, d);
        }
        s.handle_timeout(now);
        r.handle_timeout(now);
        while let Some(e) = s.poll_event() {
            complete |= e == SenderEvent::Complete;
        }
        while r.poll_event().is_some() {}
        if s.is_closed() && r.is_closed() {
            break;
        }
    }
    changed.then_some(complete && r.is_complete())
}

/// Every single-byte change to the first 48 bytes (the header's packet number and every
/// field of every packet type, FEEDBACK's first ranges and extensions) of every datagram of a
/// coded transfer, fresh and resumed, either way, flipping the low bit, the high bit or all
/// eight: what a peer that holds the session's keys can send instead of the real packet. The
/// fuzz target `tampered_pair` searches further; this covers the one-field changes
/// exhaustively.
#[test]
fn every_one_byte_change_to_a_field_is_survived() {
    let mut runs = 0;
    for (resume, to_receiver) in [(false, true), (false, false), (true, true), (true, false)] {
        for nth in 0.. {
            // Unchanged (`xor` 0): the transfer completes.
            match tampered_transfer(resume, to_receiver, nth, 6, 0) {
                None => break,
                Some(done) => assert!(done, "untouched transfer did not complete"),
            }
            for at in 6..48 {
                for xor in [0x01, 0x80, 0xff] {
                    tampered_transfer(resume, to_receiver, nth, at, xor);
                    runs += 1;
                }
            }
        }
    }
    assert!(
        runs > 10_000,
        "{runs} runs: fewer datagrams than a coded transfer sends"
    );
}
