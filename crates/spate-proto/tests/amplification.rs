//! Issue 14, finding 5: before the sender has shown that it receives at its address (a PING
//! with the ACCEPT's token, spec §4.8), a receiver sends at most three times the bytes it got —
//! whatever the attacker sends with a spoofed source — and does no work beyond a small
//! constant: no manifest beyond the HELLO, no HAVE, no DATA handled.
//!
//! Measured on the code before §4.8: an unpadded HELLO drew 4.4×, PINGs with far-apart packet
//! numbers 8.4×, and a HELLO with RESUME plus PINGs 159× (50 HAVEs of 2 KB).

use proptest::prelude::*;
use spate_proto::wire::{self, Packet, PacketType};
use spate_proto::{
    Entry, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, ReceiverEvent, Sender,
    SenderConfig, Zeros, AMPLIFICATION_FACTOR,
};

/// The token the receiver chose; the attacker does not know it (its ACCEPT went to the victim).
const TOKEN: u64 = 0x0123_4567_89ab_cdef;
const SESSION: u32 = 77;

/// A sender's real HELLO (RESUME and VERIFY set) for `entries` files.
fn hello(entries: usize) -> Vec<u8> {
    let files = (0..entries)
        .map(|i| {
            let mut e = Entry::file(format!("long-file-name-{i:04}.bin"), 200 << 20);
            e.digest = Some([3; 32]);
            e
        })
        .collect();
    let mut cfg = SenderConfig::new(RateConfig::fixed(10_000_000));
    cfg.resume = true;
    cfg.verify = true;
    let m = Manifest::new(files);
    let mut s = Sender::new(cfg, SESSION, &m, Instant::ZERO).unwrap();
    let mut buf = vec![0u8; 1472];
    let t = s
        .poll_transmit(Instant::ZERO, &mut buf, &mut Zeros)
        .unwrap();
    buf.truncate(t.len);
    buf
}

fn header(ty: PacketType, flags: u8, pn: u64) -> Vec<u8> {
    let mut h = vec![1, flags << 4 | ty as u8];
    h.extend(SESSION.to_be_bytes());
    h.extend(&pn.to_be_bytes()[2..]);
    h
}

/// What a spoofing attacker can send once the session exists.
#[derive(Debug, Clone)]
enum Attack {
    /// PING with a guessed token and any packet number.
    Ping { pn: u64, token: u64 },
    /// The HELLO again, with a new packet number.
    Hello { pn: u64 },
    /// DATA of any object at any offset.
    Data {
        pn: u64,
        object: u32,
        offset: u64,
        len: usize,
    },
    /// A header alone, of any type.
    Bare { pn: u64, ty: u8 },
}

fn attack() -> impl Strategy<Value = Attack> {
    let pn = prop_oneof![0u64..64, any::<u64>().prop_map(|p| p & 0xffff_ffff_ffff)];
    prop_oneof![
        (pn.clone(), any::<u64>()).prop_map(|(pn, token)| Attack::Ping { pn, token }),
        pn.clone().prop_map(|pn| Attack::Hello { pn }),
        (pn.clone(), 0u32..4, 0u64..(400 << 20), 1usize..1400).prop_map(
            |(pn, object, offset, len)| Attack::Data {
                pn,
                object,
                offset,
                len
            }
        ),
        (pn, 0u8..16).prop_map(|(pn, ty)| Attack::Bare { pn, ty }),
    ]
}

fn bytes_of(a: &Attack, hello: &[u8]) -> Vec<u8> {
    match *a {
        Attack::Ping { pn, token } => {
            let mut d = header(PacketType::Ping, 0, pn);
            d.extend(token.to_be_bytes());
            d
        }
        Attack::Hello { pn } => {
            let mut d = hello.to_vec();
            d[6..12].copy_from_slice(&pn.to_be_bytes()[2..]);
            d
        }
        Attack::Data {
            pn,
            object,
            offset,
            len,
        } => {
            // PROBE: asks for a report at once.
            let mut d = header(PacketType::Data, 0x2, pn);
            d.extend(object.to_be_bytes());
            d.extend(offset.to_be_bytes());
            d.resize(d.len() + len, 0xa5);
            d
        }
        Attack::Bare { pn, ty } => {
            let mut d = header(PacketType::Ping, 0, pn);
            d[1] = ty;
            d
        }
    }
}

/// Feed `attacks` to a session opened by `hello` at 1 ms intervals, running its timers; the
/// bytes received and sent, and whether anything beyond the handshake happened.
fn run(hello: &[u8], attacks: &[Attack]) -> (u64, u64, bool) {
    let cfg = ReceiverConfig {
        resume: true,
        ..ReceiverConfig::default()
    };
    let mut d = hello.to_vec();
    let mut r = Receiver::accept(cfg, Instant::ZERO, &mut d, TOKEN).unwrap();
    let (mut bytes_in, mut bytes_out) = (hello.len() as u64, 0u64);
    let mut worked = false;
    let mut buf = vec![0u8; 65_536];
    let mut drain = |r: &mut Receiver, now: Instant, out: &mut u64, worked: &mut bool| {
        while let Some(t) = r.poll_transmit(now, &mut buf) {
            *out += t.len as u64;
            if let Ok(p) = wire::parse(&buf[..t.len]) {
                *worked |= matches!(p.packet, Packet::Have(_));
            }
        }
        while let Some(e) = r.poll_event() {
            *worked |= matches!(
                e,
                ReceiverEvent::ManifestReady | ReceiverEvent::ObjectComplete(_)
            );
        }
    };
    drain(&mut r, Instant::ZERO, &mut bytes_out, &mut worked);
    for (i, a) in attacks.iter().enumerate() {
        let now = Instant::from_millis(1 + i as u64);
        let mut d = bytes_of(a, hello);
        bytes_in += d.len() as u64;
        worked |= matches!(r.handle_datagram(now, &mut d), Ok(Some(_)));
        r.handle_timeout(now);
        drain(&mut r, now, &mut bytes_out, &mut worked);
    }
    assert!(!r.is_validated());
    (bytes_in, bytes_out, worked)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Whatever a spoofer sends, at most 3× comes back and nothing beyond the handshake runs.
    #[test]
    fn a_spoofer_draws_at_most_three_times_what_it_sends(
        entries in prop_oneof![Just(1usize), Just(3), Just(400)],
        attacks in prop::collection::vec(attack(), 0..200),
    ) {
        let h = hello(entries);
        let (i, o, worked) = run(&h, &attacks);
        prop_assert!(o <= AMPLIFICATION_FACTOR * i, "{o} bytes out for {i} in");
        prop_assert!(!worked, "work done for an unvalidated address");
    }
}

/// The reproductions of the issue, one by one, as ratios.
#[test]
fn the_reported_amplifications_are_now_at_most_three() {
    let h = hello(3);
    // HELLO with RESUME, then 1000 PINGs (12-byte header + guessed token): was 159×.
    let pings: Vec<_> = (0..1000)
        .map(|pn| Attack::Ping {
            pn: pn + 1,
            token: pn,
        })
        .collect();
    // PINGs with far-apart packet numbers (each a new range in FEEDBACK): was 8.4×.
    let far: Vec<_> = (0..1000u64)
        .map(|k| Attack::Ping {
            pn: k * 1_000_003 % (1 << 47),
            token: 1,
        })
        .collect();
    // Header-only PINGs (the old format): dropped.
    let bare: Vec<_> = (0..1000).map(|pn| Attack::Bare { pn, ty: 4 }).collect();
    for (what, a) in [("resume+pings", pings), ("far pns", far), ("bare", bare)] {
        let (i, o, worked) = run(&h, &a);
        let ratio = o as f64 / i as f64;
        assert!(ratio <= 3.0, "{what}: {ratio:.2}× ({o} / {i})");
        assert!(!worked, "{what}");
    }
}

/// A validated session whose sender appears at a new address (moved, or forged) answers the
/// new address with at most 3× until a PING with the token comes from there.
#[test]
fn a_new_address_is_limited_until_it_pings() {
    let h = hello(1);
    let cfg = ReceiverConfig::default();
    let mut d = h.clone();
    let mut r = Receiver::accept(cfg, Instant::ZERO, &mut d, TOKEN).unwrap();
    let mut buf = vec![0u8; 65_536];
    let mut p = bytes_of(
        &Attack::Ping {
            pn: 1,
            token: TOKEN,
        },
        &h,
    );
    r.handle_datagram(Instant::ZERO, &mut p).unwrap();
    assert!(r.is_validated());
    while r.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
    // A forged DATA from elsewhere, which the driver sees arrive from a new address.
    let mut d = bytes_of(
        &Attack::Data {
            pn: 2,
            object: 1,
            offset: 0,
            len: 1200,
        },
        &h,
    );
    let n = d.len();
    r.handle_datagram_from_new_address(Instant::from_millis(1), &mut d)
        .unwrap();
    let (mut i, mut o) = (n as u64, 0u64);
    for k in 0..500u64 {
        let now = Instant::from_millis(2 + k);
        // DATA with far-apart packet numbers: every report lists one more range.
        let a = Attack::Data {
            pn: 3 + k * 9973,
            object: 1,
            offset: k,
            len: 1,
        };
        let mut p = bytes_of(&a, &h);
        i += p.len() as u64;
        let _ = r.handle_datagram(now, &mut p);
        r.handle_timeout(now);
        while let Some(t) = r.poll_transmit(now, &mut buf) {
            let f = wire::parse(&buf[..t.len]).unwrap();
            assert_eq!(
                f.header.flags & 2,
                0,
                "VALIDATED is not claimed for the new address"
            );
            o += t.len as u64;
        }
    }
    assert!(o <= 3 * i, "{o} out for {i} in");
    // The real sender's PING from there validates it again.
    let mut p = bytes_of(
        &Attack::Ping {
            pn: 10_000_000,
            token: TOKEN,
        },
        &h,
    );
    r.handle_datagram(Instant::from_millis(1000), &mut p)
        .unwrap();
    assert!(r.is_validated());
}
