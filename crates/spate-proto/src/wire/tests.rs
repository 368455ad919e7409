//! Wire format tests against literal byte arrays (the layouts of `docs/spec.md` §3–§4).

use super::*;
use crate::codec::Writer;
use proptest::prelude::*;

fn encode(f: impl FnOnce(&mut Writer<'_>)) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let mut w = Writer::new(&mut buf);
    f(&mut w);
    let n = w.len();
    buf.truncate(n);
    buf
}

#[test]
fn header_layout() {
    let h = Header {
        ty: PacketType::Data,
        flags: 0x3,
        session: 0xdead_beef,
        pn: 0x0102_0304_0506,
    };
    let bytes = encode(|w| h.encode(w).unwrap());
    assert_eq!(
        bytes,
        [0x01, 0x33, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06]
    );
}

#[test]
fn data_packet_bytes() {
    let bytes = [
        0x01, 0x13, 0, 0, 0, 9, 0, 0, 0, 0, 0,
        5, // header: DATA, RETRANSMISSION, session 9, pn 5
        0, 0, 0, 2, // object 2
        0, 0, 0, 0, 0, 0, 0x10, 0x00, // offset 4096
        b'h', b'i',
    ];
    let p = parse(&bytes).unwrap();
    assert_eq!(p.header.pn, 5);
    let Packet::Data(d) = p.packet else {
        panic!("not data")
    };
    assert_eq!((d.object, d.offset, d.payload), (2, 4096, &b"hi"[..]));
    assert!(d.flags.retransmission && !d.flags.probe);
    // An empty payload is invalid.
    assert_eq!(
        parse(&bytes[..24]),
        Err(WireError::Invalid("empty DATA payload"))
    );
}

#[test]
fn hello_round_trip_with_padding() {
    let prefix = [1u8, 2, 3];
    let hello = Hello {
        max_datagram: 1472,
        cipher: CIPHER_NONE,
        feedback_interval_us: 10_000,
        idle_timeout_ms: 60_000,
        object_count: 1,
        manifest_len: 3,
        manifest_prefix: &prefix,
    };
    let h = Header {
        ty: PacketType::Hello,
        flags: 0,
        session: 7,
        pn: 0,
    };
    let bytes = encode(|w| {
        h.encode(w).unwrap();
        hello.encode(w, 1472).unwrap();
    });
    assert_eq!(bytes.len(), 1472);
    assert_eq!(
        &bytes[12..27],
        // max datagram, cipher, interval 10000 (0x6710), idle 60000 (0x8000_ea60), count, len,
        // prefix len, prefix
        &[0x05, 0xc0, 0x00, 0x67, 0x10, 0x80, 0x00, 0xea, 0x60, 0x01, 0x03, 0x03, 1, 2, 3]
    );
    assert_eq!(parse(&bytes).unwrap().packet, Packet::Hello(hello));
}

#[test]
fn feedback_ranges_follow_rfc9000_arithmetic() {
    let repr = FeedbackRepr {
        flags: FeedbackFlags::default(),
        ack_delay_us: 100,
        recv_time_us: 5,
        bytes_received: 3000,
        first_missing_object: 1,
        first_missing_offset: 0,
        write_limit: None,
        rebuilt: Rebuilt::default(),
        keep_limit: None,
    };
    // Received: 90..=100, 80..=85, 10..=10. Gaps: 86..=89 (4 missing → Gap 3), 11..=79 (Gap 68).
    let ranges = [(90u64, 100u64), (80, 85), (10, 10)];
    let bytes = encode(|w| {
        assert_eq!(repr.encode(w, ranges.iter().copied()).unwrap(), 3);
    });
    assert_eq!(
        bytes,
        [
            0x40, 100, // largest 100
            0x40, 100, // ack delay 100
            5,   // receive time
            0x4b, 0xb8, // bytes received 3000
            1, 0, // watermark
            0x40, 2,  // range count (fixed two-byte form)
            10, // first range: 90..=100
            3, 5, // gap 3, length 5: 80..=85
            0x40, 68, 0, // gap 68, length 0: 10..=10
        ]
    );
    let mut r = crate::codec::Reader::new(&bytes);
    let f = Feedback::decode(&mut r).unwrap();
    assert_eq!(f.ranges.iter().collect::<Vec<_>>(), ranges.to_vec());
    assert_eq!(f.ranges.smallest(), 10);
    assert_eq!(f.repr, repr);
}

/// The Write Limit rides after the ranges (§4.5): unknown extensions are skipped, a field
/// that does not fit ends the extensions (never the report), and ranges leave it room.
#[test]
fn feedback_carries_a_write_limit_after_its_ranges() {
    let repr = FeedbackRepr {
        first_missing_object: 1,
        write_limit: Some(16 << 20),
        ..FeedbackRepr::default()
    };
    let bytes = encode(|w| {
        repr.encode(w, [(3u64, 9u64)].into_iter()).unwrap();
    });
    let f = Feedback::decode(&mut crate::codec::Reader::new(&bytes)).unwrap();
    assert_eq!(f.repr.write_limit, Some(16 << 20));
    // An unknown type first, then the limit.
    let plain = encode(|w| {
        FeedbackRepr {
            write_limit: None,
            ..repr
        }
        .encode(w, [(3u64, 9u64)].into_iter())
        .unwrap();
    });
    let mut with_unknown = plain.clone();
    with_unknown.extend_from_slice(&[0x07, 0x02, 0xaa, 0xbb, 0x01, 0x02, 0x40, 0x63]);
    let f = Feedback::decode(&mut crate::codec::Reader::new(&with_unknown)).unwrap();
    assert_eq!(f.repr.write_limit, Some(99));
    // Truncated or malformed extensions: the report stands, without a limit.
    for tail in [
        &[0x01][..],
        &[0x01, 0x05, 0x01],
        &[0x01, 0x02, 0x01, 0x01],
        &[0x01, 0x00],
    ] {
        let mut b = plain.clone();
        b.extend_from_slice(tail);
        let f = Feedback::decode(&mut crate::codec::Reader::new(&b)).unwrap();
        assert_eq!(f.repr.write_limit, None, "{tail:?}");
        assert_eq!(f.ranges.iter().collect::<Vec<_>>(), [(3, 9)]);
    }
    // Many ranges into a small buffer: the limit still fits, after fewer ranges.
    let ranges: Vec<(u64, u64)> = (0..1000u64).rev().map(|i| (i * 4, i * 4 + 1)).collect();
    let mut buf = [0u8; 64];
    let mut w = Writer::new(&mut buf);
    repr.encode(&mut w, ranges.iter().copied()).unwrap();
    let n = w.len();
    let f = Feedback::decode(&mut crate::codec::Reader::new(&buf[..n])).unwrap();
    assert_eq!(f.repr.write_limit, Some(16 << 20));
}

#[test]
fn feedback_rejects_ranges_below_zero_and_truncates_to_fit() {
    // Largest 5, first range 3 → 2..=5, then gap 1 → next largest −1: invalid.
    let bytes = [5, 0, 0, 0, 0, 0, 1, 3, 1, 0];
    assert!(Feedback::decode(&mut crate::codec::Reader::new(&bytes)).is_err());
    // Many ranges into a small buffer: as many as fit are written and the count says so.
    let ranges: Vec<(u64, u64)> = (0..1000u64).rev().map(|i| (i * 4, i * 4 + 1)).collect();
    let mut buf = [0u8; 64];
    let mut w = Writer::new(&mut buf);
    let n = FeedbackRepr::default()
        .encode(&mut w, ranges.iter().copied())
        .unwrap();
    let len = w.len();
    assert!(n > 10 && n < 1000);
    let f = Feedback::decode(&mut crate::codec::Reader::new(&buf[..len])).unwrap();
    assert_eq!(f.ranges.iter().collect::<Vec<_>>(), ranges[..n].to_vec());
}

#[test]
fn close_and_unknown_types() {
    let h = Header {
        ty: PacketType::Close,
        flags: 0,
        session: 1,
        pn: 2,
    };
    let bytes = encode(|w| {
        h.encode(w).unwrap();
        Close::encode(CloseCode::Refused, "no", w).unwrap();
    });
    assert_eq!(&bytes[12..], &[0, 3, 2, b'n', b'o']);
    let Packet::Close(c) = parse(&bytes).unwrap().packet else {
        panic!()
    };
    assert_eq!(
        (c.code, c.reason_lossy().as_str()),
        (CloseCode::Refused, "no")
    );
    let mut reserved = bytes.clone();
    reserved[1] = 0x0c; // unassigned
    assert_eq!(parse(&reserved), Err(WireError::UnknownType(12)));
    reserved[0] = 2;
    assert_eq!(parse(&reserved), Err(WireError::UnsupportedVersion(2)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// No input makes the parser panic; what parses re-validates.
    #[test]
    fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(p) = parse(&bytes) {
            if let Packet::Feedback(f) = p.packet {
                let v: Vec<_> = f.ranges.iter().collect();
                prop_assert_eq!(v.len(), f.ranges.len());
                for w in v.windows(2) { prop_assert!(w[1].1 + 2 <= w[0].0); }
            }
        }
    }

    /// Structured fuzzing: valid headers followed by random bodies.
    #[test]
    fn parse_never_panics_on_valid_headers(ty in 0u8..16, flags in 0u8..16, body in prop::collection::vec(any::<u8>(), 0..120)) {
        let mut bytes = vec![VERSION, (flags << 4) | ty, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        bytes.extend(body);
        let _ = parse(&bytes);
        let _ = crate::manifest::Manifest::decode(&bytes);
    }
}

#[test]
fn have_round_trips_and_rejects_bad_entries() {
    use super::{Have, HaveEntry};
    let entries = [
        HaveEntry::Range {
            object: 1,
            offset: 0,
            len: 60_000,
        },
        HaveEntry::Range {
            object: 1,
            offset: 80_000,
            len: 10_000,
        },
        HaveEntry::Whole { first: 2, count: 3 },
        HaveEntry::Range {
            object: 9,
            offset: 5,
            len: 1,
        },
    ];
    let mut bytes = have_round_trip(&entries);
    // Trailing bytes, object 0 and empty ranges are refused.
    bytes.push(0);
    let mut r = crate::codec::Reader::new(&bytes);
    assert!(Have::decode(&mut r).is_err());
    for bad in [&[1u8, 0, 1][..], &[1, 1, 0, 0, 0], &[2, 1, 1]] {
        let mut r = crate::codec::Reader::new(bad);
        assert!(Have::decode(&mut r).is_err(), "{bad:?}");
    }
    // Out of order entries cannot be written.
    let mut buf = [0u8; 64];
    let mut w = Writer::new(&mut buf);
    assert!(Have::encode(&[entries[2], entries[0]], &mut w).is_err());
}

/// `entries` written as a HAVE body, checked to decode back to them; the bytes.
fn have_round_trip(entries: &[super::HaveEntry]) -> Vec<u8> {
    use super::Have;
    let mut buf = [0u8; 64];
    let mut w = Writer::new(&mut buf);
    Have::encode(entries, &mut w).unwrap();
    let n = w.len();
    let mut r = crate::codec::Reader::new(&buf[..n]);
    let h = Have::decode(&mut r).unwrap();
    assert_eq!(h.entries().collect::<Vec<_>>(), entries);
    buf[..n].to_vec()
}

/// A run of whole objects that ends at the last object number, 2^32 − 1, round-trips (its
/// last object was computed as `first + count − 1`, whose `first + count` overflows: a panic
/// in builds with overflow checks, found by the `parse_packet` fuzz target run with `-a`).
#[test]
fn a_have_run_may_end_at_the_last_object_number() {
    use super::HaveEntry;
    for (first, count) in [(u32::MAX, 1), (u32::MAX - 2, 3)] {
        have_round_trip(&[HaveEntry::Whole { first, count }]);
    }
}

/// Rebuilt Blocks (extension type 2, §6.9) ride after the Write Limit; a malformed list is
/// ignored with the rest of the extensions, never the report.
#[test]
fn feedback_lists_rebuilt_blocks() {
    let mut rebuilt = Rebuilt::default();
    assert!(rebuilt.push(1, 0));
    assert!(rebuilt.push(3, 70_000));
    let repr = FeedbackRepr {
        first_missing_object: 1,
        write_limit: Some(5),
        rebuilt,
        ..FeedbackRepr::default()
    };
    let bytes = encode(|w| {
        repr.encode(w, [(3u64, 9u64)].into_iter()).unwrap();
    });
    // ... Write Limit (type 1, 1 byte: 5), then type 2, 7 bytes: (1, 0), (3, 70000).
    assert!(bytes.ends_with(&[
        0x01, 0x01, 0x05, // Write Limit
        0x02, 0x07, 0x01, 0x00, 0x03, 0x80, 0x01, 0x11, 0x70, // Rebuilt Blocks
    ]));
    let f = Feedback::decode(&mut crate::codec::Reader::new(&bytes)).unwrap();
    assert_eq!(f.repr, repr);
    let full = (0..9).fold(Rebuilt::default(), |mut r, i| {
        r.push(1, i);
        r
    });
    assert_eq!(full.iter().count(), Rebuilt::CAPACITY);
    // A pair cut in half: the list is ignored, the report stands.
    let mut cut = bytes[..bytes.len() - 9].to_vec();
    cut.extend_from_slice(&[0x02, 0x01, 0x01]);
    let f = Feedback::decode(&mut crate::codec::Reader::new(&cut)).unwrap();
    assert!(f.repr.rebuilt.is_empty());
    assert_eq!(f.repr.write_limit, Some(5));
}

/// REPAIR (§4.9) takes the 12 bytes DATA's Object and Offset take, and is refused when its
/// block or index is out of range.
#[test]
fn repair_round_trips_and_refuses_what_the_code_cannot_mean() {
    let mut buf = vec![0u8; 64];
    let mut w = Writer::new(&mut buf);
    Header {
        ty: PacketType::Repair,
        flags: 0,
        session: 9,
        pn: 5,
    }
    .encode(&mut w)
    .unwrap();
    Repair::encode_fields(2, 100, 50, 3, &mut w).unwrap();
    w.put(&[7; 20]).unwrap();
    let n = w.len();
    assert_eq!(n, HEADER_LEN + REPAIR_FIELDS + 20);
    assert_eq!(&buf[12..24], &[0, 0, 0, 2, 0, 0, 0, 100, 0, 50, 0, 3]);
    let p = parse(&buf[..n]).unwrap();
    assert_eq!(
        p.packet,
        Packet::Repair(Repair {
            object: 2,
            first_chunk: 100,
            count: 50,
            index: 3,
            symbol: &[7; 20],
        })
    );
    let bad = |fields: [u8; 12], symbol: &[u8]| {
        let mut b = buf[..12].to_vec();
        b.extend_from_slice(&fields);
        b.extend_from_slice(symbol);
        parse(&b).is_err()
    };
    assert!(
        bad([0, 0, 0, 0, 0, 0, 0, 1, 0, 5, 0, 0], &[1, 2]),
        "object 0"
    );
    assert!(bad([0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0], &[1, 2]), "K = 0");
    assert!(
        bad([0, 0, 0, 1, 0, 0, 0, 1, 0x10, 0x01, 0, 0], &[1, 2]),
        "K = 4097"
    );
    // K = 16 has R = 16: index 16 is beyond it.
    assert!(
        bad([0, 0, 0, 1, 0, 0, 0, 1, 0, 16, 0, 16], &[1, 2]),
        "index ≥ R(K)"
    );
    assert!(
        bad([0, 0, 0, 1, 0, 0, 0, 1, 0, 16, 0, 3], &[1, 2, 3]),
        "odd symbol"
    );
    assert!(bad([0, 0, 0, 1, 0, 0, 0, 1, 0, 16, 0, 3], &[]), "no symbol");
    assert!(!bad([0, 0, 0, 1, 0, 0, 0, 1, 0, 16, 0, 3], &[1, 2]));
}

/// The Keep Limit (extension type 3, §6.9) rides with the others; a malformed one is ignored
/// with the rest of the extensions.
#[test]
fn feedback_carries_a_keep_limit() {
    let repr = FeedbackRepr {
        first_missing_object: 1,
        keep_limit: Some(32 << 20),
        ..FeedbackRepr::default()
    };
    let bytes = encode(|w| {
        repr.encode(w, [(3u64, 9u64)].into_iter()).unwrap();
    });
    assert!(bytes.ends_with(&[0x03, 0x04, 0x82, 0x00, 0x00, 0x00]));
    let f = Feedback::decode(&mut crate::codec::Reader::new(&bytes)).unwrap();
    assert_eq!(f.repr, repr);
    let mut bad = bytes[..bytes.len() - 6].to_vec();
    bad.extend_from_slice(&[0x03, 0x02, 0x01, 0x01]);
    let f = Feedback::decode(&mut crate::codec::Reader::new(&bad)).unwrap();
    assert_eq!(f.repr.keep_limit, None);
}
