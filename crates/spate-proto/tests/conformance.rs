//! The decisions `docs/spec.md` takes where an independent implementation found it silent
//! (§3.3, §4.1–§4.5, §5, §6.8, §8.3, §8.4), each pinned by a test that fails if the reference
//! drifts from the text. Packets a conforming sender never produces are built by hand, byte by
//! byte, as an implementer in another language would.

use spate_proto::wire::{self, CloseCode, Packet};
use spate_proto::{
    Entry, EntryKind, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, ReceiverEvent,
    Sender, SenderConfig, Zeros,
};

/// The receiver's address-validation token in these tests (spec §4.8).
const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;

fn varint(v: u64) -> Vec<u8> {
    match v {
        0..=63 => vec![v as u8],
        64..=16_383 => (0x4000 | v as u16).to_be_bytes().to_vec(),
        _ => (0x8000_0000 | v as u32).to_be_bytes().to_vec(),
    }
}

fn header(flags: u8, ty: u8, session: u32, pn: u64) -> Vec<u8> {
    let mut h = vec![1, flags << 4 | ty];
    h.extend(session.to_be_bytes());
    h.extend(&pn.to_be_bytes()[2..]);
    h
}

/// A PING of `session` carrying `token` (§4.4).
fn ping(session: u32, pn: u64, token: u64) -> Vec<u8> {
    let mut d = header(0, 4, session, pn);
    d.extend(token.to_be_bytes());
    d
}

/// §4.8: the sender's PING with the ACCEPT's token validates its address.
fn validate(r: &mut Receiver, session: u32, pn: u64) {
    r.handle_datagram(Instant::ZERO, &mut ping(session, pn, TOKEN))
        .unwrap();
    assert!(r.is_validated());
}

/// A HELLO carrying all of `manifest`, `len` bytes long in all, announcing `max_datagram`.
fn hello(flags: u8, max_datagram: u16, count: u64, manifest: &[u8], len: usize) -> Vec<u8> {
    let mut d = header(flags, 1, 9, 0);
    d.extend(max_datagram.to_be_bytes());
    d.push(0); // cipher
    d.extend(varint(10_000));
    d.extend(varint(60_000));
    d.extend(varint(count));
    d.extend(varint(manifest.len() as u64));
    d.extend(varint(manifest.len() as u64));
    d.extend(manifest);
    d.resize(len.max(d.len()), 0);
    d
}

/// A manifest with no destination and one file entry of `size` bytes at `path`.
fn one_file(path: &str, size: u64, digest: bool) -> Vec<u8> {
    let mut m = vec![0, 1, u8::from(digest)];
    m.extend(varint(size));
    m.push(0); // mode
    if digest {
        m.extend([7; 32]);
    }
    m.extend(varint(path.len() as u64));
    m.extend(path.as_bytes());
    m
}

fn cfg() -> ReceiverConfig {
    ReceiverConfig {
        resume: true,
        ..ReceiverConfig::default()
    }
}

/// Every datagram the receiver wants to send now, parsed into (type, flags, close code).
fn answers(r: &mut Receiver, now: Instant) -> Vec<(wire::PacketType, u8, Option<CloseCode>)> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 2048];
    while let Some(t) = r.poll_transmit(now, &mut buf) {
        let p = wire::parse(&buf[..t.len]).unwrap();
        let code = match p.packet {
            Packet::Close(c) => Some(c.code),
            _ => None,
        };
        out.push((p.header.ty, p.header.flags, code));
    }
    out
}

#[test]
fn a_hello_shorter_than_1232_bytes_gets_no_answer() {
    let m = one_file("a", 10, false);
    for len in [0, 40, 1231] {
        let mut d = hello(0, 1232, 1, &m, len);
        d.truncate(len.max(40));
        assert!(
            Receiver::accept(cfg(), Instant::ZERO, &mut d, TOKEN).is_err(),
            "{len}"
        );
    }
}

/// The receiver's whole answer to the HELLO `d` is one CLOSE with `code`, and it keeps no
/// session.
fn assert_closed_with(d: &mut [u8], code: CloseCode, what: &str) -> Receiver {
    let mut r = Receiver::accept(cfg(), Instant::ZERO, d, TOKEN).unwrap();
    assert_eq!(
        answers(&mut r, Instant::ZERO),
        [(wire::PacketType::Close, 0, Some(code))],
        "{what}"
    );
    assert!(r.is_closed(), "{what}");
    r
}

#[test]
fn a_malformed_or_unpadded_hello_is_a_protocol_violation() {
    let m = one_file("a", 10, false);
    // 1300 bytes announcing 1472: not padded to its Max Datagram.
    let unpadded = hello(0, 1472, 1, &m, 1300);
    // Max Datagram 1000 is below the minimum; the datagram itself is 1232 bytes.
    let malformed = hello(0, 1000, 1, &m, 1232);
    for (what, mut d) in [("unpadded", unpadded), ("malformed", malformed)] {
        assert_closed_with(&mut d, CloseCode::ProtocolViolation, what);
    }
}

/// §4.1: a refused manifest is answered with CLOSE instead of ACCEPT, never both.
#[test]
fn a_refused_manifest_gets_a_close_and_no_accept() {
    let count_mismatch = hello(0, 1232, 2, &one_file("a", 10, false), 1232);
    let bad_path = hello(0, 1232, 1, &one_file("../a", 10, false), 1232);
    let mut trailing = one_file("a", 10, false);
    trailing.push(0);
    let trailing = hello(0, 1232, 1, &trailing, 1232);
    let orphan = hello(0, 1232, 1, &one_file("d/a", 10, false), 1232);
    // §5.6: GET carries a request (entries of kind 3), and only GET does.
    let request = [0, 1, 3 << 2, 0, 0, 1, b'a'];
    let get_with_files = hello(0x4, 1232, 1, &one_file("a", 10, false), 1232);
    let request_without_get = hello(0, 1232, 1, &request, 1232);
    for (what, mut d) in [
        ("count", count_mismatch),
        ("path", bad_path),
        ("trailing", trailing),
        ("orphan", orphan),
        ("GET with files", get_with_files),
        ("a request without GET", request_without_get),
    ] {
        let mut r = assert_closed_with(&mut d, CloseCode::Refused, what);
        // A repeated HELLO is not answered with ACCEPT either.
        assert!(r.handle_datagram(Instant::ZERO, &mut d).is_err(), "{what}");
        assert!(answers(&mut r, Instant::ZERO).is_empty(), "{what}");
    }
}

/// §5.6: a GET's request completes at once (its objects are empty), asks nothing to be
/// written, and with RESUME asks that the answer resume — without this session resuming.
#[test]
fn a_request_completes_and_waits_for_its_answer() {
    let request = [0, 1, 3 << 2 | 0x10, 0, 0, 1, b'a'];
    let mut d = hello(0x1 | 0x2 | 0x4, 1232, 1, &request, 1232);
    let mut r = Receiver::accept(cfg(), Instant::ZERO, &mut d, TOKEN).unwrap();
    let accept = answers(&mut r, Instant::ZERO);
    assert_eq!(accept[0].0, wire::PacketType::Accept);
    assert_eq!(
        accept[0].1 & wire::ACCEPT_RESUME,
        0,
        "no RESUME in a request's ACCEPT"
    );
    validate(&mut r, 9, 1);
    assert!(r.is_get() && r.answer_resumes());
    let m = r.manifest().unwrap();
    assert_eq!(
        m.entries[0].kind,
        spate_proto::EntryKind::Request { recursive: true }
    );
    assert!(!r.wants_resume());
    // VERIFY: COMPLETE only once the application confirms (its answer is ready).
    let mut events = Vec::new();
    while let Some(e) = r.poll_event() {
        events.push(e);
    }
    assert!(
        events.contains(&spate_proto::ReceiverEvent::Complete),
        "{events:?}"
    );
}

/// §8.4: unassigned bits of every flag field are ignored: the header's and an entry's.
#[test]
fn unassigned_flag_bits_are_ignored() {
    let mut m = one_file("a", 10, false);
    m[2] |= 0xf0; // entry flags bits 4–7
    let mut d = hello(0x8, 1232, 1, &m, 1232); // HELLO flags beyond VERIFY, RESUME and GET
    let mut r = Receiver::accept(cfg(), Instant::ZERO, &mut d, TOKEN).unwrap();
    assert_eq!(
        answers(&mut r, Instant::ZERO)[0].0,
        wire::PacketType::Accept
    );
    validate(&mut r, 9, 1);
    assert!(r.manifest().is_some());
    assert!(!r.is_get());
    // DATA with the unassigned flag bits 0x4 and 0x8 is accepted as plain DATA.
    let mut data = header(0xc, 3, 9, 2);
    data.extend(1u32.to_be_bytes());
    data.extend(0u64.to_be_bytes());
    data.extend([5; 10]);
    let chunk = r.handle_datagram(Instant::ZERO, &mut data).unwrap();
    assert!(chunk.is_some());
}

/// §6.8: with VERIFY, a file entry without a digest cannot be checked: the session is refused.
#[test]
fn verify_without_a_digest_is_refused() {
    let mut d = hello(wire::HELLO_VERIFY, 1232, 1, &one_file("a", 10, false), 1232);
    assert_closed_with(&mut d, CloseCode::Refused, "no digest");
    // With a digest it is accepted.
    let mut d = hello(wire::HELLO_VERIFY, 1232, 1, &one_file("a", 10, true), 1232);
    let mut r = Receiver::accept(cfg(), Instant::ZERO, &mut d, TOKEN).unwrap();
    assert_eq!(
        answers(&mut r, Instant::ZERO)[0].0,
        wire::PacketType::Accept
    );
}

/// §3.3/§4.2: ACCEPT carries min(HELLO's Max Datagram, the receiver's own).
#[test]
fn accept_carries_the_smaller_datagram_size() {
    let m = one_file("a", 10, false);
    for (hello_max, own, want) in [
        (1472u16, 65_507u16, 1472u16),
        (1472, 1400, 1400),
        (1300, 1500, 1300),
    ] {
        let mut d = hello(0, hello_max, 1, &m, hello_max as usize);
        let c = ReceiverConfig {
            max_datagram: own,
            ..cfg()
        };
        let mut r = Receiver::accept(c, Instant::ZERO, &mut d, TOKEN).unwrap();
        let mut buf = [0u8; 2048];
        let t = r.poll_transmit(Instant::ZERO, &mut buf).unwrap();
        let Packet::Accept(a) = wire::parse(&buf[..t.len]).unwrap().packet else {
            panic!("not an ACCEPT")
        };
        assert_eq!(a.max_datagram, want, "{hello_max} vs {own}");
    }
}

/// A sender and receiver with the handshake done. Returns them and the receiver's first
/// answers.
fn pair(m: &Manifest, verify: bool, resume: bool) -> (Sender, Receiver, Vec<u8>) {
    let mut c = SenderConfig::new(RateConfig::fixed(10_000_000));
    c.verify = verify;
    c.resume = resume;
    // The checks below follow single packets; coding (§6.9) would add repair symbols to
    // them and is checked on its own.
    c.fec = spate_proto::coding::Fec::Off;
    let mut s = Sender::new(c, 3, m, Instant::ZERO).unwrap();
    let mut buf = vec![0u8; 1472];
    let t = s
        .poll_transmit(Instant::ZERO, &mut buf, &mut Zeros)
        .unwrap();
    let hello = buf[..t.len].to_vec();
    let r = Receiver::accept(cfg(), Instant::ZERO, &mut buf[..t.len], TOKEN).unwrap();
    (s, r, hello)
}

/// Hand the receiver's ACCEPT to the sender at `now`, and the sender's first answer, the PING
/// with the ACCEPT's token (§4.8), to the receiver.
fn deliver_accept(s: &mut Sender, r: &mut Receiver, now: Instant) {
    let mut buf = vec![0u8; 1472];
    let t = r.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    s.handle_datagram(now, &mut buf[..t.len]).unwrap();
    let t = s.poll_transmit(now, &mut buf, &mut Zeros).unwrap();
    let p = wire::parse(&buf[..t.len]).unwrap();
    assert_eq!(p.packet, Packet::Ping(wire::Ping { token: TOKEN }));
    r.handle_datagram(now, &mut buf[..t.len]).unwrap();
    assert!(r.is_validated());
}

fn dir(p: &str) -> Entry {
    Entry {
        kind: EntryKind::Directory,
        ..Entry::file(p, 0)
    }
}

fn with_digest(mut e: Entry) -> Entry {
    e.digest = Some([1; 32]);
    e
}

/// A parsed FEEDBACK: (COMPLETE, watermark, inclusive ranges).
type Report = (bool, (u32, u64), Vec<(u64, u64)>);

/// The first FEEDBACK the receiver sends at `now`.
fn feedback(r: &mut Receiver, now: Instant) -> Option<Report> {
    let mut buf = vec![0u8; 2048];
    while let Some(t) = r.poll_transmit(now, &mut buf) {
        let p = wire::parse(&buf[..t.len]).unwrap();
        if let Packet::Feedback(f) = p.packet {
            return Some((
                p.header.flags & 1 != 0,
                (f.repr.first_missing_object, f.repr.first_missing_offset),
                f.ranges.iter().collect(),
            ));
        }
    }
    None
}

/// §6.8: a manifest of only directories and empty files needs no DATA: the receiver is
/// complete when the manifest is, and (after verifying) reports COMPLETE at once.
#[test]
fn only_empty_objects_complete_with_the_manifest() {
    let m = Manifest::new(vec![
        dir("d"),
        with_digest(Entry::file("d/e", 0)),
        dir("d/sub"),
    ]);
    let (_, mut r, _) = pair(&m, true, false);
    validate(&mut r, 3, 1);
    let mut events = Vec::new();
    while let Some(e) = r.poll_event() {
        events.push(e);
    }
    assert!(events.contains(&ReceiverEvent::ManifestReady));
    assert!(events.contains(&ReceiverEvent::Complete), "{events:?}");
    let fb = feedback(&mut r, Instant::ZERO).unwrap();
    assert!(!fb.0, "COMPLETE waits for the verdict");
    r.confirm(Instant::from_millis(1));
    let fb = feedback(&mut r, Instant::from_millis(1)).unwrap();
    assert!(fb.0, "COMPLETE once confirmed");
    assert_eq!(fb.1, (4, 0), "watermark past the last object");
}

/// §8.3/§6.8: a resume where everything is held completes without any file DATA.
#[test]
fn a_resume_that_holds_everything_completes_without_data() {
    let m = Manifest::new(vec![
        with_digest(Entry::file("a", 5000)),
        with_digest(Entry::file("b", 0)),
    ]);
    let (_, mut r, _) = pair(&m, true, true);
    validate(&mut r, 3, 1);
    while r.poll_event().is_some() {}
    assert!(r.wants_resume());
    r.resume(Instant::from_millis(1), [(1, 0..5000)]);
    let events: Vec<_> = std::iter::from_fn(|| r.poll_event()).collect();
    assert!(events.contains(&ReceiverEvent::Complete), "{events:?}");
    r.confirm(Instant::from_millis(2));
    let fb = feedback(&mut r, Instant::from_millis(2)).unwrap();
    assert!(fb.0);
}

/// §4.5: HELLO and PING packet numbers are acknowledged like DATA; a retransmission of bytes
/// already held is acknowledged too.
#[test]
fn hello_ping_and_duplicate_data_are_acknowledged() {
    let m = Manifest::new(vec![Entry::file("a", 100)]);
    let (_, mut r, _) = pair(&m, false, false);
    let fb = feedback(&mut r, Instant::ZERO).unwrap();
    assert_eq!(fb.2, [(0, 0)], "the HELLO (packet 0) is acknowledged");
    r.handle_datagram(Instant::from_millis(1), &mut ping(3, 1, TOKEN))
        .unwrap();
    let fb = feedback(&mut r, Instant::from_millis(1)).unwrap();
    assert_eq!(fb.2, [(0, 1)]);
    let data = |pn: u64, flags: u8| {
        let mut d = header(flags, 3, 3, pn);
        d.extend(1u32.to_be_bytes());
        d.extend(0u64.to_be_bytes());
        d.extend([5; 50]);
        d
    };
    assert!(r
        .handle_datagram(Instant::from_millis(2), &mut data(2, 0))
        .unwrap()
        .is_some());
    // The same bytes again under a new packet number: nothing new, but acknowledged.
    assert!(r
        .handle_datagram(Instant::from_millis(3), &mut data(3, 1))
        .unwrap()
        .is_none());
    let fb = feedback(&mut r, Instant::from_millis(20)).unwrap();
    assert_eq!(fb.2, [(0, 3)]);
    assert_eq!(r.stats().spurious_retransmissions, 1);
}

/// §4.3: object 0 is chunked from the end of the HELLO prefix, not from offset 0.
#[test]
fn the_manifest_rest_is_chunked_from_the_prefix_end() {
    let entries = (0..200)
        .map(|i| Entry::file(format!("file-{i:04}"), 1))
        .collect();
    let m = Manifest::new(entries);
    let (mut s, mut r, hello) = pair(&m, false, false);
    let Packet::Hello(h) = wire::parse(&hello).unwrap().packet else {
        panic!()
    };
    let prefix = h.manifest_prefix.len() as u64;
    assert!(prefix < h.manifest_len);
    // At 10 Mbit/s the 1472-byte HELLO holds the pacer for 1.2 ms.
    deliver_accept(&mut s, &mut r, Instant::from_millis(10));
    let mut buf = vec![0u8; 1472];
    let t = s
        .poll_transmit(Instant::from_millis(10), &mut buf, &mut Zeros)
        .unwrap();
    let Packet::Data(d) = wire::parse(&buf[..t.segment_size]).unwrap().packet else {
        panic!()
    };
    assert_eq!((d.object, d.offset), (0, prefix));
}

/// §6.6: the probe timeout counts from the later of the last packet sent and the last
/// FEEDBACK received: `PTO = srtt + max(4 · rttvar, 1 ms) + Feedback Interval`.
#[test]
fn the_probe_timeout_counts_from_the_last_packet_sent() {
    let m = Manifest::new(vec![Entry::file("a", 100)]);
    let (mut s, mut r, _) = pair(&m, false, false);
    // ACCEPT after 10 ms: srtt 10 ms, rttvar 5 ms, so PTO = 10 + 20 + 10 (feedback) = 40 ms.
    deliver_accept(&mut s, &mut r, Instant::from_millis(10));
    let mut buf = vec![0u8; 1472];
    let sent = Instant::from_millis(12);
    let t = s.poll_transmit(sent, &mut buf, &mut Zeros).unwrap();
    assert!(matches!(
        wire::parse(&buf[..t.len]).unwrap().packet,
        Packet::Data(_)
    ));
    while s.poll_transmit(sent, &mut buf, &mut Zeros).is_some() {}
    assert_eq!(
        s.poll_timeout(),
        Some(sent + core::time::Duration::from_millis(40))
    );
}

/// §5.1, §7.4: a streamed file's object runs 32 bytes past its size (the trailer), and no
/// further; trailer bytes are object bytes but not file bytes; the application's room goes
/// out as a Write Limit counting both — as a peer sends them, byte by byte.
#[test]
fn a_streamed_files_trailer_is_accepted_and_nothing_past_it() {
    let mut e = Entry::file("s", 100);
    e.kind = EntryKind::StreamedFile;
    let m = Manifest::new(vec![e]);
    let (_, mut r, _) = pair(&m, true, false);
    r.handle_datagram(Instant::from_millis(1), &mut ping(3, 1, TOKEN))
        .unwrap();
    let data = |pn: u64, offset: u64, len: usize| {
        let mut d = header(0, 3, 3, pn);
        d.extend(1u32.to_be_bytes());
        d.extend(offset.to_be_bytes());
        d.extend(vec![5; len]);
        d
    };
    let now = Instant::from_millis(2);
    r.set_write_room(now, 1 << 20);
    // The file's 100 bytes and 12 of the trailer, then the trailer's last 20.
    assert!(r
        .handle_datagram(now, &mut data(2, 0, 112))
        .unwrap()
        .is_some());
    assert!(r
        .handle_datagram(now, &mut data(3, 112, 20))
        .unwrap()
        .is_some());
    // One byte past the trailer: dropped whole, nothing recorded.
    assert!(r.handle_datagram(now, &mut data(4, 132, 1)).is_err());
    assert_eq!(
        r.stats().delivered_bytes,
        100,
        "the trailer is not file bytes"
    );
    let mut buf = vec![0u8; 2048];
    let mut limit = None;
    while let Some(t) = r.poll_transmit(Instant::from_millis(20), &mut buf) {
        if let Packet::Feedback(f) = wire::parse(&buf[..t.len]).unwrap().packet {
            limit = f.repr.write_limit;
        }
    }
    assert_eq!(
        limit,
        Some(132 + (1 << 20)),
        "received object bytes plus the room"
    );
}
