//! A sender and a receiver talking through a path the fuzzer controls: every datagram either
//! way may be delivered, dropped, duplicated, held back behind later ones, or have a byte
//! changed — what an authenticated hostile peer (or a path with no packet protection) can do
//! to real, well-formed packets. Random bytes rarely make a FEEDBACK with valid ranges and
//! extensions; tampering with real ones reaches the sender's acknowledgement, loss, coding
//! (Rebuilt Blocks, Keep Limit), flow-control (Write Limit) and resume (HAVE) logic.
//!
//! Checked: neither end panics; every chunk the receiver accepts lies inside its datagram and
//! its object; and when no datagram towards the receiver was changed, every byte it accepted
//! (received or rebuilt) is the source's byte at that place.
#![no_main]
use libfuzzer_sys::fuzz_target;
use spate_proto::coding::Fec;
use spate_proto::{
    Entry, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, Sender, SenderConfig, Source,
};
use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

/// The receiver's address-validation token (spec §4.8).
const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;
/// Object sizes: a few dozen packets (enough for coded blocks and several feedback rounds,
/// few enough that the fuzzer reaches the end of a transfer often), one short file, one empty.
const SIZES: [u64; 3] = [60_000, 3_000, 0];
/// At most this many steps per input, so every run ends quickly.
const MAX_STEPS: usize = 4_000;

/// The byte at `offset` of `object`: not zero, so a misplaced chunk shows.
fn byte(object: u32, offset: u64) -> u8 {
    (offset.wrapping_mul(31) ^ (object as u64 * 0x9e)) as u8 | 1
}

struct Pattern;

impl Source for Pattern {
    fn next(&mut self, object: u32, offset: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
        let n = max.min(48 << 10);
        Ok(Some(
            (offset..offset + n).map(|o| byte(object, o)).collect(),
        ))
    }
}

/// Bytes the receiver accepted at `offset` of `object`: inside the object, and, if `exact`,
/// the source's.
fn check(object: u32, offset: u64, bytes: &[u8], exact: bool) {
    let size = *SIZES
        .get((object as usize).wrapping_sub(1))
        .expect("a chunk of an object in the manifest");
    assert!(offset + bytes.len() as u64 <= size, "chunk past its object");
    if exact {
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(
                *b,
                byte(object, offset + i as u64),
                "object {object} byte {}",
                offset + i as u64
            );
        }
    }
}

/// The two ends and the datagrams on their way.
struct Pair {
    s: Sender,
    r: Receiver,
    buf: Vec<u8>,
    now: Instant,
    /// Towards the receiver.
    fwd: VecDeque<Vec<u8>>,
    /// Towards the sender.
    back: VecDeque<Vec<u8>>,
    /// Nothing on the way to the receiver was changed: what it accepts must be the source's.
    exact: bool,
}

impl Pair {
    /// Both ends write what they have to send now: the sender a datagram or a GSO batch, the
    /// receiver everything it has.
    fn transmit(&mut self) {
        if let Some(t) = self.s.poll_transmit(self.now, &mut self.buf, &mut Pattern) {
            for d in self.buf[..t.len].chunks(t.segment_size.max(1)) {
                self.fwd.push_back(d.to_vec());
            }
        }
        let mut one = [0u8; 1472];
        while let Some(t) = self.r.poll_transmit(self.now, &mut one) {
            self.back.push_back(one[..t.len].to_vec());
        }
    }

    fn to_receiver(&mut self, mut d: Vec<u8>) {
        if let Ok(Some(c)) = self.r.handle_datagram(self.now, &mut d) {
            assert!(c.payload.start <= c.payload.end && c.payload.end <= d.len());
            check(c.object, c.offset, &d[c.payload], self.exact);
        }
    }

    fn to_sender(&mut self, mut d: Vec<u8>) {
        let _ = self.s.handle_datagram(self.now, &mut d);
    }

    fn tick(&mut self, by: Duration) {
        self.now += by;
        self.s.handle_timeout(self.now);
        self.r.handle_timeout(self.now);
    }

    fn after_step(&mut self) {
        while let Some(c) = self.r.poll_rebuilt() {
            check(c.object, c.offset, &c.bytes, self.exact);
        }
        while self.s.poll_event().is_some() {}
        while self.r.poll_event().is_some() {}
        // A queue that only grows would make the run slow, not interesting.
        self.fwd.truncate(4096);
        self.back.truncate(4096);
    }
}

/// Change byte `6 + at % 64` of `d` (past the version and session fields: the header's packet
/// number and the fields of every packet type, FEEDBACK's first ranges and extensions) by
/// `xor`; false if `d` is too short. Later bytes are left alone: they are payload, which only
/// the AEAD or the file digest can tell from the source's, so changing them finds nothing.
fn tamper(d: &mut [u8], at: u8, xor: u8) -> bool {
    let i = 6 + at as usize % 64;
    if i >= d.len() {
        return false;
    }
    d[i] ^= xor.max(1);
    true
}

fuzz_target!(|data: &[u8]| {
    let (&flags, ops) = match data.split_first() {
        Some(x) => x,
        None => return,
    };
    let m = Manifest {
        destination: String::new(),
        entries: SIZES
            .iter()
            .enumerate()
            .map(|(i, &s)| Entry::file(format!("f{i}"), s))
            .collect(),
    };
    let mut cfg = SenderConfig::new(RateConfig::fixed(50_000_000));
    cfg.fec = match flags & 9 {
        0 => Fec::Off,
        1 => Fec::Auto,
        _ => Fec::Rate(0.05),
    };
    cfg.resume = flags & 2 == 2;
    cfg.batch = 1 + (flags >> 4) as usize % 4;
    let Ok(mut s) = Sender::new(cfg.clone(), 9, &m, Instant::ZERO) else {
        return;
    };
    let rcfg = ReceiverConfig {
        resume: cfg.resume,
        coding: flags & 4 == 4,
        ..ReceiverConfig::default()
    };
    let mut buf = vec![0u8; 1472 * cfg.batch];
    let Some(t) = s.poll_transmit(Instant::ZERO, &mut buf, &mut Pattern) else {
        return;
    };
    let Ok(r) = Receiver::accept(rcfg, Instant::ZERO, &mut buf[..t.len], TOKEN) else {
        return;
    };
    let mut p = Pair {
        s,
        r,
        buf,
        now: Instant::ZERO,
        fwd: VecDeque::new(),
        back: VecDeque::new(),
        exact: true,
    };
    // Steps of five bytes: what (low nibble; bit 7: towards the sender), then a, b, c, d.
    for op in ops.chunks_exact(5).take(MAX_STEPS) {
        let [code, a, b, c, d] = [op[0], op[1], op[2], op[3], op[4]];
        let towards_receiver = code & 0x80 == 0;
        let queue = if towards_receiver {
            &mut p.fwd
        } else {
            &mut p.back
        };
        match code & 0x0f {
            0..=2 => p.transmit(),
            3..=6 => {
                // Deliver the oldest datagram.
                if let Some(d) = queue.pop_front() {
                    if towards_receiver {
                        p.to_receiver(d);
                    } else {
                        p.to_sender(d);
                    }
                }
            }
            7 => {
                queue.pop_front();
            }
            8 => {
                if let Some(d) = queue.front().cloned() {
                    queue.push_back(d);
                }
            }
            9 => {
                // Hold the oldest back behind up to 15 later ones.
                if let Some(d) = queue.pop_front() {
                    let at = (a as usize % 16).min(queue.len());
                    queue.insert(at, d);
                }
            }
            10 => {
                if let Some(d) = queue.front_mut() {
                    if tamper(d, a, b) && towards_receiver {
                        p.exact = false;
                    }
                }
            }
            11 => {
                // Cut the oldest short.
                if let Some(d) = queue.front_mut() {
                    let n = a as usize % (d.len() + 1);
                    d.truncate(n);
                    if towards_receiver && n > 0 {
                        p.exact = false;
                    }
                }
            }
            12 => {
                // The receiver's writer: room to buffer (Write Limit, spec §7.4).
                p.r.set_write_room(p.now, (a as u64) << 12);
            }
            13 => {
                if p.r.wants_resume() {
                    // The receiver already holds the start of each file.
                    let held: Vec<(u32, Range<u64>)> = (1..=SIZES.len() as u32)
                        .map(|o| (o, 0..((a as u64) << 8).min(SIZES[o as usize - 1])))
                        .collect();
                    p.r.resume(p.now, held);
                }
            }
            14 => p.tick(Duration::from_micros(a as u64 * 1000 + 1)),
            _ => {
                // A path for up to 255 ms that delivers everything within the millisecond,
                // so that a short input reaches the middle and the end of a transfer — except
                // the `b`-th datagram of the pump in the step's direction (none if 0), which
                // is dropped (bit 6 set) or has one byte changed (`tamper(c, d)`).
                let mut counted = 0u32;
                for _ in 0..a {
                    p.transmit();
                    let mut due: Vec<_> = p.fwd.drain(..).map(|x| (true, x)).collect();
                    due.extend(p.back.drain(..).map(|x| (false, x)));
                    for (to_r, mut dg) in due {
                        if to_r == towards_receiver {
                            counted += 1;
                            if counted == b as u32 {
                                if code & 0x40 != 0 {
                                    continue;
                                }
                                if tamper(&mut dg, c, d) && to_r {
                                    p.exact = false;
                                }
                            }
                        }
                        if to_r {
                            p.to_receiver(dg);
                        } else {
                            p.to_sender(dg);
                        }
                    }
                    p.tick(Duration::from_millis(1));
                    p.after_step();
                }
            }
        }
        p.after_step();
    }
});
