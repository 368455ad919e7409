//! Verification (spec §6.8): with VERIFY the sender succeeds only after the receiver's
//! application confirms the data, and fails with the receiver's reason when it refuses.

use spate_proto::{
    wire::CloseCode, Entry, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, ReceiverEvent,
    Sender, SenderConfig, SenderEvent, SessionError, Source,
};
use std::time::Duration;

/// The receiver's address-validation token in these tests (spec §4.8).
const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;

struct Zeros;
impl Source for Zeros {
    fn next(&mut self, _: u32, _: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
        Ok(Some(vec![7; max.min(1 << 16) as usize]))
    }
}

/// The receiver's application: after `Complete`, wait `check` and then confirm or refuse.
#[derive(Clone, Copy)]
enum Verdict {
    Confirm,
    Refuse,
}

/// A lossless link with 5 ms one-way delay; returns the sender's events and whether the
/// receiver saw `Complete`. Bounded to 30 s of virtual time.
fn run(verify: bool, check: Duration, verdict: Verdict) -> (Vec<SenderEvent>, bool) {
    // VERIFY needs a digest for every file (§6.8); the values do not matter here, the
    // application's verdict is scripted.
    let digest = |mut e: Entry| {
        e.digest = Some([9; 32]);
        e
    };
    let manifest = Manifest {
        destination: String::new(),
        entries: vec![
            digest(Entry::file("a", 100_000)),
            digest(Entry::file("b", 0)),
        ],
    };
    let mut cfg = SenderConfig::new(RateConfig::fixed(50_000_000));
    cfg.verify = verify;
    let mut sender = Sender::new(cfg, 7, &manifest, Instant::ZERO).unwrap();
    let mut receiver: Option<Receiver> = None;
    let owd = Duration::from_millis(5);
    let mut wire: Vec<(Instant, bool, Vec<u8>)> = Vec::new();
    let mut buf = vec![0u8; 1472];
    let mut events = Vec::new();
    let mut complete_at = None;
    let mut now = Instant::ZERO;
    while now < Instant::from_millis(30_000) {
        while let Some(t) = sender.poll_transmit(now, &mut buf, &mut Zeros) {
            wire.push((now + owd, true, buf[..t.len].to_vec()));
        }
        if let Some(r) = receiver.as_mut() {
            while let Some(t) = r.poll_transmit(now, &mut buf) {
                wire.push((now + owd, false, buf[..t.len].to_vec()));
            }
            while let Some(e) = r.poll_event() {
                if e == ReceiverEvent::Complete {
                    complete_at = Some(now);
                }
            }
            let due = complete_at.is_some_and(|t| t != Instant::MAX && now >= t + check);
            if due {
                match verdict {
                    Verdict::Confirm => r.confirm(now),
                    Verdict::Refuse => r.close(CloseCode::Application, "digest mismatch: a"),
                }
                complete_at = Some(Instant::MAX); // the verdict is given once
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
        }
        if let Some(t) = complete_at.filter(|&t| t != Instant::MAX) {
            next = next.min(t + check);
        }
        now = now.max(next.min(Instant::from_millis(30_000)));
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= now);
        wire = rest;
        for (_, to_rx, mut bytes) in due {
            if to_rx {
                match receiver.as_mut() {
                    None => {
                        receiver =
                            Receiver::accept(ReceiverConfig::default(), now, &mut bytes, TOKEN).ok()
                    }
                    Some(r) => {
                        let _ = r.handle_datagram(now, &mut bytes);
                    }
                }
            } else {
                let _ = sender.handle_datagram(now, &mut bytes);
            }
        }
        sender.handle_timeout(now);
        if let Some(r) = receiver.as_mut() {
            r.handle_timeout(now);
        }
    }
    (events, receiver.is_some_and(|r| r.wants_verification()))
}

#[test]
fn without_verify_the_sender_completes_on_delivery() {
    let (events, wanted) = run(false, Duration::from_secs(5), Verdict::Refuse);
    assert!(!wanted);
    assert!(events.contains(&SenderEvent::Complete), "{events:?}");
}

#[test]
fn a_slow_confirmation_is_waited_for() {
    // 5 s of checking: far longer than a probe timeout, well inside the idle timeout.
    let (events, wanted) = run(true, Duration::from_secs(5), Verdict::Confirm);
    assert!(wanted);
    assert_eq!(events.last(), Some(&SenderEvent::Complete), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, SenderEvent::Failed(_))));
}

#[test]
fn a_refusal_fails_the_sender_with_the_reason() {
    let (events, _) = run(true, Duration::from_millis(300), Verdict::Refuse);
    assert!(!events.contains(&SenderEvent::Complete), "{events:?}");
    let failed = events.iter().find_map(|e| match e {
        SenderEvent::Failed(SessionError::PeerClosed { reason, .. }) => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(failed.as_deref(), Some("digest mismatch: a"), "{events:?}");
}
