//! Packet protection (spec §9) end to end in virtual time: a protected pair over a link that
//! loses, reorders, duplicates and corrupts, and an on-path attacker who reads every packet and
//! forges, replays and flips bits. Every forgery is dropped and counted, and the transfer still
//! completes byte-exact.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use spate_proto::secure::{
    identity_packet, open_hello, public_key, retry_packet, Cipher, ClientParams, HelloRefusal,
    RetryKey, Sealer, SecureReceiver, SecureSender, TAG_LEN,
};
use spate_proto::wire::{self, CloseCode, Header, PacketType, MAX_PACKET_NUMBER};
use spate_proto::{
    Entry, Instant, Manifest, RateConfig, ReceiverConfig, ReceiverEvent, SenderConfig, SenderEvent,
    SessionError,
};

mod common;
use common::{byte_at, Pattern};

const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;
const SERVER: [u8; 32] = [0x51; 32];
const CLIENT: [u8; 32] = [0xc1; 32];
const SESSION: u32 = 42;

/// The source of every run here: chunks of an odd size, and every third request finds nothing
/// ready (a disk slower than the link), so every run also drives a starved sender.
fn source() -> Pattern {
    Pattern::stalling(4_321, 3)
}

/// What happens to one datagram on the way (to_receiver, index in that direction, bytes):
/// the datagrams that arrive instead, each with an extra delay.
type Middle<'a> = dyn FnMut(bool, u64, &[u8]) -> Vec<(Duration, Vec<u8>)> + 'a;

fn deliver(bytes: &[u8]) -> Vec<(Duration, Vec<u8>)> {
    vec![(Duration::ZERO, bytes.to_vec())]
}

struct Run {
    files: Vec<Vec<u8>>,
    sender: SecureSender,
    receiver: Option<SecureReceiver>,
    sender_events: Vec<SenderEvent>,
    receiver_events: Vec<ReceiverEvent>,
    /// Every datagram that left either end.
    seen: Vec<(bool, Vec<u8>)>,
    /// Datagrams each end dropped: (receiver, sender).
    dropped: (u64, u64),
}

struct Setup {
    sizes: Vec<u64>,
    cipher: Cipher,
    server_key_known: [u8; 32],
    batch: usize,
    /// Refuse the client once its key is known.
    refuse: bool,
    /// Server answers HELLOs without a valid token with RETRY.
    retry: bool,
    /// Drive the sender through `poll_transmit_deferred` and seal each batch after it was
    /// written, instead of `poll_transmit` (which seals as it writes).
    seal_after: bool,
    /// ... and seal each batch only on the next turn, after the datagrams that arrived
    /// meanwhile (whose acknowledgements may release the send buffer's blocks), as a sealing
    /// thread may.
    seal_late: bool,
}

impl Setup {
    fn new(sizes: &[u64]) -> Setup {
        Setup {
            sizes: sizes.to_vec(),
            cipher: Cipher::Aes256Gcm,
            server_key_known: public_key(&SERVER),
            batch: 4,
            refuse: false,
            retry: false,
            seal_after: false,
            seal_late: false,
        }
    }
}

fn run(setup: &Setup, middle: &mut Middle<'_>) -> Run {
    let manifest = Manifest::new(
        setup
            .sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| Entry::file(format!("f{i}"), s))
            .collect(),
    );
    let mut files: Vec<Vec<u8>> = setup.sizes.iter().map(|&s| vec![0; s as usize]).collect();
    let mut cfg = SenderConfig::new(RateConfig::fixed(50_000_000));
    cfg.batch = setup.batch;
    let params = ClientParams {
        cipher: setup.cipher,
        local_private: CLIENT,
        server_public: setup.server_key_known,
        auth: [0; 16],
        seed: [7; 32],
    };
    let mut sender = SecureSender::new(cfg, SESSION, &manifest, Instant::ZERO, params).unwrap();
    let mut receiver: Option<SecureReceiver> = None;
    let retry_key = RetryKey::new([9; 32]);
    let owd = Duration::from_millis(20);
    let mut wire: BTreeMap<(Instant, u64), (bool, Vec<u8>)> = BTreeMap::new();
    let (mut seq, mut n_fwd, mut n_rev) = (0u64, 0u64, 0u64);
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 1472 * setup.batch];
    let (mut sender_events, mut receiver_events, mut seen) = (vec![], vec![], vec![]);
    let mut dropped = (0, 0);
    let mut source = source();
    let mut put = |wire: &mut BTreeMap<_, _>, now: Instant, to_rx: bool, d: &[u8], n: u64| {
        for (extra, bytes) in middle(to_rx, n, d) {
            seq += 1;
            wire.insert((now + owd + extra, seq), (to_rx, bytes));
        }
    };
    let mut late: Vec<(Vec<u8>, usize, Option<Sealer>)> = Vec::new();
    for _ in 0..2_000_000 {
        for (mut batch, segment, sealer) in late.drain(..) {
            if let Some(s) = sealer {
                s.seal_batch(&mut batch, segment);
            }
            for d in batch.chunks(segment) {
                seen.push((true, d.to_vec()));
                put(&mut wire, now, true, d, n_fwd);
                n_fwd += 1;
            }
        }
        if setup.seal_late {
            while let Some((t, sealer)) = sender.poll_transmit_deferred(now, &mut buf, &mut source)
            {
                late.push((buf[..t.len].to_vec(), t.segment_size, sealer));
            }
        }
        while let Some(t) = if setup.seal_late {
            None
        } else if setup.seal_after {
            sender
                .poll_transmit_deferred(now, &mut buf, &mut source)
                .map(|(t, sealer)| {
                    if let Some(s) = sealer {
                        s.seal_batch(&mut buf[..t.len], t.segment_size);
                    }
                    t
                })
        } else {
            sender.poll_transmit(now, &mut buf, &mut source)
        } {
            for d in buf[..t.len].chunks(t.segment_size) {
                seen.push((true, d.to_vec()));
                put(&mut wire, now, true, d, n_fwd);
                n_fwd += 1;
            }
        }
        if let Some(r) = receiver.as_mut() {
            while let Some(t) = r.poll_transmit(now, &mut buf) {
                seen.push((false, buf[..t.len].to_vec()));
                put(&mut wire, now, false, &buf[..t.len], n_rev);
                n_rev += 1;
            }
            while let Some(e) = r.inner_mut().poll_event() {
                receiver_events.push(e);
            }
        }
        while let Some(e) = sender.poll_event() {
            sender_events.push(e);
        }
        let rx_closed = receiver.as_ref().is_none_or(|r| r.inner().is_closed());
        if sender.is_closed() && rx_closed && wire.is_empty() && late.is_empty() {
            break;
        }
        let mut next = wire.keys().next().map(|k| k.0).unwrap_or(Instant::MAX);
        if !late.is_empty() {
            next = next.min(now);
        }
        if let Some(t) = sender.poll_timeout() {
            next = next.min(t);
        }
        if let Some(t) = receiver.as_ref().and_then(|r| r.inner().poll_timeout()) {
            next = next.min(t);
        }
        if sender.inner().starved() {
            next = next.min(now + Duration::from_millis(1));
        }
        if next == Instant::MAX || next > Instant::from_millis(300_000) {
            break;
        }
        now = now.max(next);
        if let Some(entry) = wire.first_entry() {
            if entry.key().0 <= now {
                let (to_rx, mut bytes) = entry.remove();
                if !to_rx {
                    if sender.handle_datagram(now, &mut bytes).is_err() {
                        dropped.1 += 1;
                    }
                    continue;
                }
                let Some(r) = receiver.as_mut() else {
                    // The server's side of a HELLO for an unknown session.
                    let secs = now.as_nanos() / 1_000_000_000;
                    let mut out = [0u8; 64];
                    let token_ok = bytes.len() > 36
                        && retry_key.check(&bytes[12..36], secs, SESSION, b"client");
                    if setup.retry && !token_ok {
                        let t = retry_key.token(secs, SESSION, b"client");
                        let n = retry_packet(SESSION, &t, &mut out);
                        put(&mut wire, now, false, &out[..n], n_rev);
                        n_rev += 1;
                        continue;
                    }
                    match open_hello(&SERVER, &bytes, [8; 32]) {
                        Ok(h) => {
                            assert_eq!(h.client_key(), public_key(&CLIENT));
                            let mut r =
                                SecureReceiver::accept(ReceiverConfig::default(), now, h, TOKEN)
                                    .unwrap();
                            if setup.refuse {
                                r.inner_mut()
                                    .close(CloseCode::Refused, "key not in authorized_keys");
                            }
                            receiver = Some(r);
                        }
                        Err(HelloRefusal::NotForThisKey) => {
                            let n = identity_packet(SESSION, &public_key(&SERVER), &mut out);
                            put(&mut wire, now, false, &out[..n], n_rev);
                            n_rev += 1;
                        }
                        Err(HelloRefusal::Malformed(_)) => {}
                    }
                    continue;
                };
                match r.handle_datagram(now, &mut bytes) {
                    Ok(Some(c)) => {
                        let f = &mut files[c.object as usize - 1];
                        let at = c.offset as usize;
                        f[at..at + c.payload.len()].copy_from_slice(&bytes[c.payload]);
                    }
                    Ok(None) => {}
                    Err(_) => dropped.0 += 1,
                }
                // §6.9: chunks rebuilt from repair symbols are written like DATA.
                while let Some(c) = r.inner_mut().poll_rebuilt() {
                    let f = &mut files[c.object as usize - 1];
                    let at = c.offset as usize;
                    f[at..at + c.bytes.len()].copy_from_slice(&c.bytes);
                }
                continue;
            }
        }
        sender.handle_timeout(now);
        if let Some(r) = receiver.as_mut() {
            r.inner_mut().handle_timeout(now);
        }
    }
    Run {
        files,
        sender,
        receiver,
        sender_events,
        receiver_events,
        seen,
        dropped,
    }
}

fn assert_exact(r: &Run, sizes: &[u64]) {
    for (i, f) in r.files.iter().enumerate() {
        assert_eq!(f.len() as u64, sizes[i]);
        for (off, &b) in f.iter().enumerate() {
            assert_eq!(b, byte_at(i as u32 + 1, off as u64), "file {i} byte {off}");
        }
    }
    assert!(
        r.sender_events.contains(&SenderEvent::Complete),
        "{:?}",
        r.sender_events
    );
    assert!(
        r.receiver_events.contains(&ReceiverEvent::Complete),
        "{:?}",
        r.receiver_events
    );
}

#[test]
fn a_protected_transfer_completes_and_no_datagram_carries_the_plaintext() {
    let sizes = [300_000, 0, 5_000];
    for cipher in [
        Cipher::Aes256Gcm,
        Cipher::ChaCha20Poly1305,
        Cipher::AuthOnly,
    ] {
        let mut setup = Setup::new(&sizes);
        setup.cipher = cipher;
        let r = run(&setup, &mut |_, _, d| deliver(d));
        assert_exact(&r, &sizes);
        // The plaintext of file 0 at some 16-byte-aligned offsets: found in no datagram when
        // encrypted; found when the cipher only authenticates.
        let probes: Vec<Vec<u8>> = (0..50)
            .map(|k| (0..16).map(|i| byte_at(1, k * 4099 + i)).collect())
            .collect();
        let found = r.seen.iter().any(|(_, d)| {
            probes
                .iter()
                .any(|p| d.windows(16).any(|w| w == p.as_slice()))
        });
        assert_eq!(found, !cipher.encrypts(), "{cipher:?}");
        let rx = r.receiver.as_ref().unwrap();
        assert_eq!(rx.cipher(), cipher);
        assert_eq!(rx.secure_stats().not_authentic, 0);
    }
}

/// Sealing DATA payloads from the send buffer as the batch is written (`poll_transmit`) puts
/// the same bytes on the wire as handing the batch to a `Sealer` that seals it afterwards
/// (`poll_transmit_deferred`, the payloads taken along shared), with each cipher, over a lossy
/// path (so retransmissions and probes are among them). Both differ from a packet copied in
/// and sealed only in where the payload is read (`aead::tests`).
#[test]
fn sealing_while_writing_sends_the_same_datagrams_as_sealing_after() {
    let sizes = [300_000, 0, 5_000, 2_100_000];
    for cipher in [
        Cipher::Aes256Gcm,
        Cipher::ChaCha20Poly1305,
        Cipher::AuthOnly,
    ] {
        let mut runs = [false, true].map(|seal_after| {
            let mut setup = Setup::new(&sizes);
            setup.cipher = cipher;
            setup.seal_after = seal_after;
            run(&setup, &mut |to_rx, n, d| {
                if to_rx && n % 37 == 5 {
                    vec![]
                } else {
                    deliver(d)
                }
            })
        });
        for r in &runs {
            assert_exact(r, &sizes);
        }
        let [a, b] = &mut runs;
        assert!(
            a.seen.len() > 1_000,
            "{cipher:?}: {} datagrams",
            a.seen.len()
        );
        assert!(a.seen == b.seen, "{cipher:?}: the wire bytes differ");
    }
}

/// A batch sealed on the next turn — after acknowledgements that may have released the send
/// buffer's blocks its payloads are in — still carries the right bytes: the sealer holds its
/// blocks, which go back to the source only when no sealer does.
#[test]
fn a_batch_sealed_after_its_blocks_were_released_carries_the_right_bytes() {
    let sizes = [3_000_000, 0, 5_000];
    for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
        let mut setup = Setup::new(&sizes);
        setup.cipher = cipher;
        setup.seal_late = true;
        let r = run(&setup, &mut |to_rx, n, d| {
            if to_rx && n % 29 == 3 {
                vec![]
            } else {
                deliver(d)
            }
        });
        assert_exact(&r, &sizes);
        assert_eq!(r.receiver.as_ref().unwrap().secure_stats().not_authentic, 0);
    }
}

/// An on-path attacker who reads the session's packets forges each of the attacks that worked
/// on unprotected sessions (issue 15), replays captured packets and flips bits. Nothing is acted
/// on; each is counted; the transfer completes byte-exact.
#[test]
fn forgeries_replays_and_bit_flips_are_dropped_and_counted() {
    let sizes = [2_000_000, 3_000];
    let mut captured: Vec<(bool, Vec<u8>)> = Vec::new();
    let mut injected = (0u64, 0u64); // (to receiver, to sender)
    let mut middle = |to_rx: bool, n: u64, d: &[u8]| {
        let mut out = deliver(d);
        let ty = d[1] & 0x0f;
        let sealed = ty != PacketType::Hello as u8 && ty != PacketType::Accept as u8;
        // Every 7th DATA-direction packet, every report.
        if sealed && (!to_rx || n % 7 == 3) {
            let forged: Vec<Vec<u8>> = if to_rx {
                vec![
                    // PING with the largest packet number (killed the sender's feedback once).
                    forge(PacketType::Ping, 0, MAX_PACKET_NUMBER, &[0; 8 + TAG_LEN]),
                    // CLOSE to the receiver.
                    forge(PacketType::Close, 0, n + 1_000, &close_body()),
                    // DATA at the start of file 1, in the clear with a zero tag.
                    forge(PacketType::Data, 0, n + 2_000, &data_body(1, 0, 600)),
                ]
            } else {
                vec![
                    // FEEDBACK COMPLETE (made `spate send` exit 0 with no file).
                    forge(PacketType::Feedback, 0x3, n + 1_000, &complete_feedback()),
                    forge(PacketType::Close, 0, n + 2_000, &close_body()),
                    // HAVE claiming everything is held.
                    forge(PacketType::Have, 0, n + 3_000, &[1, 1, 2, 0, 0, 0, 0]),
                ]
            };
            for f in forged {
                out.push((Duration::from_millis(1), f));
                if to_rx {
                    injected.0 += 1;
                } else {
                    injected.1 += 1;
                }
            }
            // A bit flip of this very packet, and a replay of a packet captured earlier.
            let mut flipped = d.to_vec();
            let bit = (n as usize * 131) % (d.len() * 8);
            flipped[bit / 8] ^= 1 << (bit % 8);
            out.push((Duration::from_millis(2), flipped));
            let mut n_injected = 1;
            if let Some((_, old)) = captured.iter().rev().find(|(dir, _)| *dir == to_rx) {
                out.push((Duration::from_millis(3), old.clone()));
                n_injected += 1;
            }
            if to_rx {
                injected.0 += n_injected;
            } else {
                injected.1 += n_injected;
            }
        }
        if sealed {
            captured.push((to_rx, d.to_vec()));
        }
        out
    };
    let r = run(&Setup::new(&sizes), &mut middle);
    assert_exact(&r, &sizes);
    let rx = r.receiver.as_ref().unwrap().secure_stats();
    let tx = r.sender.secure_stats();
    assert!(injected.0 > 10 && injected.1 > 10, "{injected:?}");
    // Every injected packet was dropped (a flipped bit in the header's version, type or session
    // drops it before the AEAD is tried; everything else is counted by the protection).
    assert!(r.dropped.0 >= injected.0, "{:?} {injected:?}", r.dropped);
    assert!(r.dropped.1 >= injected.1, "{:?} {injected:?}", r.dropped);
    assert!(
        rx.not_authentic + rx.replayed >= injected.0 * 9 / 10,
        "{rx:?} {injected:?}"
    );
    assert!(
        tx.not_authentic + tx.replayed >= injected.1 * 8 / 10,
        "{tx:?} {injected:?}"
    );
    assert!(rx.replayed > 0 && tx.replayed > 0);
}

/// A packet with this header and body (its tag, if any, is part of `body`).
fn forge(ty: PacketType, flags: u8, pn: u64, body: &[u8]) -> Vec<u8> {
    let mut b = vec![wire::VERSION, (flags << 4) | ty as u8];
    b.extend_from_slice(&SESSION.to_be_bytes());
    b.extend_from_slice(&pn.to_be_bytes()[2..]);
    b.extend_from_slice(body);
    b
}

fn close_body() -> Vec<u8> {
    let mut v = vec![0, 0, 0]; // code 0 = Done, empty reason
    v.extend_from_slice(&[0; TAG_LEN]);
    v
}

fn data_body(object: u32, offset: u64, len: usize) -> Vec<u8> {
    let mut v = object.to_be_bytes().to_vec();
    v.extend_from_slice(&offset.to_be_bytes());
    v.extend(std::iter::repeat_n(0xee, len));
    v.extend_from_slice(&[0; TAG_LEN]);
    v
}

/// A FEEDBACK body (§4.5) that says: everything held (watermark past the last of 2 objects),
/// packets 0..=5 received.
fn complete_feedback() -> Vec<u8> {
    let mut v = vec![5, 0, 0, 0, 3, 0, 0, 5];
    v.extend_from_slice(&[0; TAG_LEN]);
    v
}

#[test]
fn a_client_with_a_stale_server_key_learns_the_servers_key_at_once() {
    let mut setup = Setup::new(&[1000]);
    setup.server_key_known = public_key(&[0x77; 32]);
    let r = run(&setup, &mut |_, _, d| deliver(d));
    assert!(
        r.receiver.is_none(),
        "no session for a HELLO it cannot open"
    );
    assert!(
        r.sender_events.iter().any(|e| matches!(
            e,
            SenderEvent::Failed(SessionError::ServerKeyMismatch { offered })
                if *offered == public_key(&SERVER)
        )),
        "{:?}",
        r.sender_events
    );
}

#[test]
fn one_damaged_identity_does_not_end_the_handshake() {
    // The first HELLO is damaged, so the server answers IDENTITY; that IDENTITY is damaged
    // too and offers a wrong key. The client asks again (§9.6) and the session completes.
    let setup = Setup::new(&[1000]);
    let r = run(&setup, &mut |_, i, d| {
        let mut d = d.to_vec();
        if i == 0 {
            let last = d.len() - 1;
            d[last] ^= 0x40;
        }
        vec![(Duration::ZERO, d)]
    });
    assert!(
        r.sender_events.contains(&SenderEvent::Complete),
        "{:?}",
        r.sender_events
    );
    assert!(!r
        .sender_events
        .iter()
        .any(|e| matches!(e, SenderEvent::Failed(_))));
}

#[test]
fn a_refused_client_gets_an_authenticated_close_and_sends_no_data() {
    let mut setup = Setup::new(&[100_000]);
    setup.refuse = true;
    let r = run(&setup, &mut |_, _, d| deliver(d));
    assert!(
        r.sender_events.iter().any(|e| matches!(
            e,
            SenderEvent::Failed(SessionError::PeerClosed { code: CloseCode::Refused, reason })
                if reason.contains("authorized_keys")
        )),
        "{:?}",
        r.sender_events
    );
    assert!(r.seen.iter().all(|(to_rx, d)| !*to_rx || d[1] & 0x0f != 3));
}

#[test]
fn a_server_under_load_makes_the_client_prove_its_address_first() {
    let sizes = [50_000];
    let mut setup = Setup::new(&sizes);
    setup.retry = true;
    let r = run(&setup, &mut |_, _, d| deliver(d));
    assert_exact(&r, &sizes);
    let hellos = r
        .seen
        .iter()
        .filter(|(to_rx, d)| *to_rx && d[1] & 0x0f == 1)
        .count();
    assert_eq!(hellos, 2, "one HELLO, one RETRY, one HELLO with the token");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// Byte-exact delivery under arbitrary loss, reordering, duplication and corruption, with
    /// protection on.
    #[test]
    fn protected_delivery_is_exact_under_any_impairment(
        seed in any::<u64>(),
        loss in 0u64..20,
        corrupt in 0u64..10,
        dup in 0u64..10,
        reorder_ms in 0u64..30,
        batch in 1usize..5,
        sizes in proptest::collection::vec(0u64..40_000, 1..4),
    ) {
        let mut setup = Setup::new(&sizes);
        setup.batch = batch;
        let mut rng = seed | 1;
        let mut next = move || { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; rng % 100 };
        let mut middle = |_: bool, _: u64, d: &[u8]| {
            if next() < loss { return vec![]; }
            let mut d = d.to_vec();
            if next() < corrupt {
                let i = (next() as usize * 7919) % d.len();
                d[i] ^= 0x40;
            }
            let delay = Duration::from_millis(next() % (reorder_ms + 1));
            let mut out = vec![(delay, d.clone())];
            if next() < dup { out.push((delay + Duration::from_millis(1), d)); }
            out
        };
        let r = run(&setup, &mut middle);
        for (i, f) in r.files.iter().enumerate() {
            for (off, &b) in f.iter().enumerate() {
                prop_assert_eq!(b, byte_at(i as u32 + 1, off as u64), "file {} byte {}", i, off);
            }
        }
        prop_assert!(r.sender_events.contains(&SenderEvent::Complete), "{:?}", r.sender_events);
    }
}

#[test]
fn wire_header_parse_is_unchanged_for_sealed_packets() {
    // The header of a sealed packet stays readable for routing.
    let p = forge(PacketType::Data, 0, 77, &data_body(1, 0, 10));
    let h = Header::peek(&p).unwrap();
    assert_eq!((h.session, h.pn), (SESSION, 77));
    let _ = wire::HEADER_LEN;
}

/// A HELLO datagram that is a valid Noise message 1 around the plaintext `payload`.
fn hello_around(payload: &[u8]) -> Vec<u8> {
    let header = [1u8, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0];
    let mut prologue = spate_proto::secure::PROLOGUE_LABEL.to_vec();
    prologue.extend_from_slice(&header);
    let mut i = snow::Builder::new(spate_proto::secure::NOISE_PARAMS.parse().unwrap())
        .local_private_key(&CLIENT)
        .remote_public_key(&public_key(&SERVER))
        .prologue(&prologue)
        .fixed_ephemeral_key_for_testing_only(&[8; 32])
        .build_initiator()
        .unwrap();
    let mut p = payload.to_vec();
    p.resize(1232 - 12 - 24 - 96, 0);
    let mut d = header.to_vec();
    d.extend_from_slice(&[0; 24]);
    let mut m = vec![0u8; 2048];
    let n = i.write_message(&p, &mut m).unwrap();
    d.extend_from_slice(&m[..n]);
    d
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// What the fuzz targets `handshake` and `hello_plaintext` do, run here on every test run:
    /// any bytes as a HELLO datagram, any plaintext behind a valid message 1, any bytes as the
    /// server's answer and as packets of an open session — nothing panics, and a HELLO opens
    /// only if its plaintext is this session's HELLO packet.
    #[test]
    fn handshake_messages_never_panic(
        raw in proptest::collection::vec(any::<u8>(), 0..1500),
        plain in proptest::collection::vec(any::<u8>(), 0..1200),
    ) {
        let _ = open_hello(&SERVER, &raw, [1; 32]);
        let mut inner = plain.clone();
        if let Ok(h) = open_hello(&SERVER, &hello_around(&inner), [2; 32]) {
            prop_assert_eq!(&h.packet()[..6], &[1, 1, 0, 0, 0, 9][..]);
            if let Ok(mut r) = SecureReceiver::accept(ReceiverConfig::default(), Instant::ZERO, h, 3) {
                let mut buf = vec![0u8; 70_000];
                while r.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
                let _ = r.handle_datagram(Instant::from_millis(1), &mut inner);
            }
        }
        // The client side in its handshake, and after it.
        let m = Manifest::new(vec![Entry::file("f", 10)]);
        let params = ClientParams {
            cipher: Cipher::Aes256Gcm,
            local_private: CLIENT,
            server_public: public_key(&SERVER),
            auth: [0; 16],
            seed: [7; 32],
        };
        let mut c = SecureSender::new(SenderConfig::new(RateConfig::fixed(1_000_000)), 9, &m, Instant::ZERO, params).unwrap();
        let mut buf = vec![0u8; 1500];
        let _ = c.poll_transmit(Instant::ZERO, &mut buf, &mut source());
        let mut answer = raw.clone();
        if answer.len() >= 6 {
            answer[2..6].copy_from_slice(&9u32.to_be_bytes());
        }
        let _ = c.handle_datagram(Instant::ZERO, &mut answer);
    }
}

#[test]
fn a_hello_whose_packet_is_not_this_sessions_hello_is_refused() {
    // The right layout but an inner packet of another session, or not a HELLO.
    let mut p = vec![0u8; 16];
    p.extend_from_slice(&[1, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0]);
    assert!(matches!(
        open_hello(&SERVER, &hello_around(&p), [2; 32]),
        Err(HelloRefusal::Malformed(_))
    ));
    let mut p = vec![0u8; 16];
    p.extend_from_slice(&[1, 3, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0]);
    assert!(matches!(
        open_hello(&SERVER, &hello_around(&p), [2; 32]),
        Err(HelloRefusal::Malformed(_))
    ));
}
