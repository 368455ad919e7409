//! Resume (spec §8.3, §4.7): a sender that asks to resume skips the bytes the receiver's HAVE
//! lists, waits for that HAVE however long the receiver's application takes, survives a lost
//! HAVE, and still delivers every byte exactly.

use core::ops::Range;
use spate_proto::wire::{self, PacketType};
use spate_proto::{
    Entry, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, ReceiverEvent, Sender,
    SenderConfig, SenderEvent, SenderStats,
};
use std::time::Duration;

mod common;
use common::{byte_at, Pattern};

/// The receiver's address-validation token in these tests (spec §4.8).
const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;

const SIZES: [u64; 3] = [200_000, 50_000, 30_000];

struct Outcome {
    events: Vec<SenderEvent>,
    stats: SenderStats,
    /// Object bytes the receiver was handed (not counting held bytes).
    written: u64,
    /// Every object byte-exact (held bytes pre-filled, received bytes written).
    exact: bool,
    /// How long the sender said it was waiting for the receiver's HAVE.
    awaited_have: Duration,
}

/// Run a session over a 5 ms link. The receiver's application holds `held` and answers a
/// resume request `answer_after` after the manifest; `drop_first_have` loses the first HAVE.
fn run(
    sender_resume: bool,
    receiver_resume: bool,
    held: &[(u32, Range<u64>)],
    answer_after: Duration,
    drop_first_have: bool,
) -> Outcome {
    let manifest = Manifest {
        destination: String::new(),
        entries: SIZES
            .iter()
            .enumerate()
            .map(|(i, &n)| Entry::file(format!("f{i}"), n))
            .collect(),
    };
    let mut cfg = SenderConfig::new(RateConfig::fixed(50_000_000));
    cfg.resume = sender_resume;
    let rcfg = ReceiverConfig {
        resume: receiver_resume,
        ..ReceiverConfig::default()
    };
    let mut sender = Sender::new(cfg, 9, &manifest, Instant::ZERO).unwrap();
    // Odd-sized chunks, so that they straddle blocks.
    let mut source = Pattern::new(7_777);
    let mut receiver: Option<Receiver> = None;
    // The receiver's files: held bytes already there, the rest unknown (0xEE).
    let mut files: Vec<Vec<u8>> = SIZES.iter().map(|&n| vec![0xEE; n as usize]).collect();
    for (o, r) in held {
        for off in r.clone() {
            files[*o as usize - 1][off as usize] = byte_at(*o, off);
        }
    }
    let owd = Duration::from_millis(5);
    let mut wire: Vec<(Instant, bool, Vec<u8>)> = Vec::new();
    let mut buf = vec![0u8; 1472];
    let mut events = Vec::new();
    let mut written = 0;
    let mut manifest_at = None;
    let mut have_dropped = !drop_first_have;
    let mut awaited_have = Duration::ZERO;
    let end = Instant::from_millis(30_000);
    let mut now = Instant::ZERO;
    while now < end {
        while let Some(t) = sender.poll_transmit(now, &mut buf, &mut source) {
            wire.push((now + owd, true, buf[..t.len].to_vec()));
        }
        if let Some(r) = receiver.as_mut() {
            while let Some(e) = r.poll_event() {
                if e == ReceiverEvent::ManifestReady {
                    manifest_at = Some(now);
                }
            }
            if r.wants_resume() && manifest_at.is_some_and(|t| now >= t + answer_after) {
                r.resume(now, held.iter().cloned());
            }
            while let Some(t) = r.poll_transmit(now, &mut buf) {
                let is_have =
                    wire::parse(&buf[..t.len]).is_ok_and(|p| p.header.ty == PacketType::Have);
                if is_have && !have_dropped {
                    have_dropped = true;
                    continue;
                }
                wire.push((now + owd, false, buf[..t.len].to_vec()));
            }
        }
        while let Some(e) = sender.poll_event() {
            events.push(e);
        }
        if sender.is_closed() && wire.is_empty() {
            break;
        }
        let mut next = wire.iter().map(|w| w.0).min().unwrap_or(Instant::MAX);
        next = next.min(sender.poll_timeout().unwrap_or(Instant::MAX));
        if let Some(r) = receiver.as_ref() {
            next = next.min(r.poll_timeout().unwrap_or(Instant::MAX));
            if r.wants_resume() {
                if let Some(t) = manifest_at {
                    next = next.min(t + answer_after);
                }
            }
        }
        let before = now;
        now = now.max(next.min(end));
        if sender.awaiting_have() {
            awaited_have += now.saturating_since(before);
        }
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= now);
        wire = rest;
        for (_, to_rx, mut bytes) in due {
            if !to_rx {
                let _ = sender.handle_datagram(now, &mut bytes);
                continue;
            }
            let Some(r) = receiver.as_mut() else {
                receiver = Receiver::accept(rcfg.clone(), now, &mut bytes, TOKEN).ok();
                continue;
            };
            if let Ok(Some(c)) = r.handle_datagram(now, &mut bytes) {
                let p = &bytes[c.payload];
                let f = &mut files[c.object as usize - 1];
                f[c.offset as usize..c.offset as usize + p.len()].copy_from_slice(p);
                written += p.len() as u64;
            }
        }
        sender.handle_timeout(now);
        if let Some(r) = receiver.as_mut() {
            r.handle_timeout(now);
        }
    }
    let exact = files.iter().enumerate().all(|(i, f)| {
        f.iter()
            .enumerate()
            .all(|(off, &b)| b == byte_at(i as u32 + 1, off as u64))
    });
    Outcome {
        events,
        stats: *sender.stats(),
        written,
        exact,
        awaited_have,
    }
}

fn total() -> u64 {
    SIZES.iter().sum()
}

const HELD: [(u32, Range<u64>); 3] = [(1, 0..60_000), (1, 80_000..90_000), (2, 0..50_000)];

/// The sender's last event is `Complete`.
fn assert_completed(o: &Outcome) {
    assert_eq!(
        o.events.last(),
        Some(&SenderEvent::Complete),
        "{:?}",
        o.events
    );
}

fn held_bytes() -> u64 {
    HELD.iter().map(|(_, r)| r.end - r.start).sum()
}

#[test]
fn resume_skips_held_bytes_and_delivers_exactly() {
    // The receiver takes 1 s to look at its partial files; the first HAVE is lost.
    let o = run(true, true, &HELD, Duration::from_secs(1), true);
    assert_completed(&o);
    assert!(o.exact);
    // The sender says it waits for the receiver while the receiver looks (1 s), and until
    // the resent HAVE arrives; then no longer.
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(3)).contains(&o.awaited_have),
        "{:?}",
        o.awaited_have
    );
    assert_eq!(o.stats.resumed_bytes, held_bytes());
    assert_eq!(o.stats.delivered_bytes, total() - held_bytes());
    // Partly held chunks are sent whole: at most one extra chunk per held range boundary.
    let chunk = 1448;
    assert!(
        o.written <= total() - held_bytes() + 4 * chunk,
        "{}",
        o.written
    );
    assert!(o.written >= total() - held_bytes());
}

#[test]
fn everything_held_sends_no_file_data() {
    let all: Vec<(u32, Range<u64>)> = (1..=3).map(|o| (o, 0..SIZES[o as usize - 1])).collect();
    let o = run(true, true, &all, Duration::from_millis(100), false);
    assert_completed(&o);
    assert_eq!(o.written, 0);
    assert_eq!(o.stats.resumed_bytes, total());
    assert!(o.exact);
}

#[test]
fn a_receiver_that_does_not_offer_resume_gets_everything() {
    let o = run(true, false, &HELD, Duration::ZERO, false);
    assert_completed(&o);
    assert_eq!(o.stats.resumed_bytes, 0);
    assert_eq!(o.written, total());
    assert!(o.exact);
}

#[test]
fn a_sender_that_does_not_ask_gets_no_have() {
    let o = run(false, true, &HELD, Duration::ZERO, false);
    assert_completed(&o);
    assert_eq!(o.awaited_have, Duration::ZERO);
    assert_eq!(o.stats.resumed_bytes, 0);
    assert_eq!(o.written, total());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Held ranges anywhere — across chunk boundaries and the source's odd-sized blocks — are
    /// skipped without losing a byte: every object arrives exact and the session completes.
    #[test]
    fn any_held_ranges_resume_exactly(
        ranges in proptest::collection::vec((1u32..=3, 0u64..200_000, 1u64..40_000), 0..6),
    ) {
        let held: Vec<(u32, Range<u64>)> = ranges
            .into_iter()
            .map(|(o, start, len)| {
                let size = SIZES[o as usize - 1];
                let start = start % size;
                (o, start..(start + len).min(size))
            })
            .collect();
        let o = run(true, true, &held, Duration::from_millis(10), false);
        proptest::prop_assert_eq!(o.events.last(), Some(&SenderEvent::Complete), "{:?}", o.events);
        proptest::prop_assert!(o.exact);
    }
}
