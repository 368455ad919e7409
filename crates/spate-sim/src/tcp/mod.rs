//! A packet-level model of kernel TCP — Reno, CUBIC and BBR senders with SACK — so simulated
//! scenarios can put kernel TCP on the same bottleneck as Spate.
//!
//! | file | what |
//! |---|---|
//! | `window.rs` | the window laws: Reno, CUBIC (RFC 9438), HyStart |
//! | `bbr.rs` | BBR v1 as Linux 6.1 runs it: bandwidth and RTT filters, gain cycles, ProbeRTT |
//! | `sender.rs` | scoreboard, RACK loss detection, recovery, retransmission timer, delivery-rate samples, pacing |
//! | `mod.rs` | the receiver (cumulative ACK + 3 SACK blocks per segment) and [`TcpFlow`] |
//!
//! What the model keeps from Linux because it decides how TCP shares a bottleneck: the initial
//! window of 10, HyStart, unpaced sending for Reno and CUBIC (bursts clocked by ACKs), BBR
//! paced one segment at a time (as Linux paces it without the fq qdisc), one reduction per loss
//! episode, CUBIC's curve with fast convergence and its Reno-friendly region, RACK, a 200 ms
//! minimum RTO. What it leaves out, and why that is safe for what the lab measures: delayed
//! ACKs (Linux counts delivered segments, not ACKs, for window growth), PRR (same segments per
//! round trip, sent a little burstier), TLP (tails only; the lab's TCP flows run for the whole
//! scenario) and the receive window (iperf3's autotuned buffers reach 6 MiB, more than the paths
//! here need; while they grow, kernel BBR's start-up can end early — see `bbr.rs`).
//! `docs/results/tcp/README.md` compares the models with the kernel on the emulator and with
//! the Mathis formula.

mod bbr;
mod sender;
mod window;

use std::collections::BTreeMap;

use spate_proto::Instant;

pub use sender::{SenderStats, TcpSender, MSS};

/// The congestion control a modelled TCP sender runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// RFC 5681's window (NewReno, with SACK recovery in the sender).
    Reno,
    /// RFC 9438, with HyStart.
    Cubic,
    /// BBR v1 (Linux 6.1's `tcp_bbr.c`).
    Bbr,
}

/// IP + TCP + timestamp option header bytes of every segment.
pub const HEADER: u64 = 52;

/// One ACK: cumulative acknowledgement and up to three SACK blocks `[from, to)`, in segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Every segment below this has arrived.
    pub cum: u64,
    /// SACK blocks above `cum`; the first holds the segment that triggered this ACK.
    pub sack: [Option<(u64, u64)>; 3],
}

impl Ack {
    /// IP bytes of this ACK: headers plus the SACK option (2 + 8 per block, padded to 4).
    pub fn wire_bytes(&self) -> u64 {
        let n = self.sack.iter().flatten().count() as u64;
        HEADER + if n > 0 { 4 + 8 * n } else { 0 }
    }
}

/// The receiving end: which segments arrived, and the ACK for each arrival.
#[derive(Debug, Clone, Default)]
pub struct TcpReceiver {
    cum: u64,
    /// Out-of-order blocks above `cum`, start → end.
    blocks: BTreeMap<u64, u64>,
}

impl TcpReceiver {
    /// Segment `seq` arrived: whether it is new, and the ACK to send.
    pub fn on_segment(&mut self, seq: u64) -> (bool, Ack) {
        let new = seq >= self.cum && !self.holds(seq);
        if new {
            self.insert(seq);
        }
        let mut sack = [None; 3];
        let first = self.block_of(seq);
        let mut n = 0;
        if let Some(b) = first {
            sack[0] = Some(b);
            n = 1;
        }
        for (&s, &e) in &self.blocks {
            if n == 3 {
                break;
            }
            if Some((s, e)) != first {
                sack[n] = Some((s, e));
                n += 1;
            }
        }
        (
            new,
            Ack {
                cum: self.cum,
                sack,
            },
        )
    }

    fn holds(&self, seq: u64) -> bool {
        self.block_of(seq).is_some()
    }

    fn block_of(&self, seq: u64) -> Option<(u64, u64)> {
        self.blocks
            .range(..=seq)
            .next_back()
            .filter(|(_, &e)| seq < e)
            .map(|(&s, &e)| (s, e))
    }

    fn insert(&mut self, seq: u64) {
        let (mut s, mut e) = (seq, seq + 1);
        if let Some((&ps, &pe)) = self.blocks.range(..seq).next_back() {
            if pe == seq {
                s = ps;
                self.blocks.remove(&ps);
            }
        }
        if let Some(ne) = self.blocks.remove(&e) {
            e = ne;
        }
        if s == self.cum {
            self.cum = e;
        } else {
            self.blocks.insert(s, e);
        }
    }

    /// Segments received in order.
    pub fn cum(&self) -> u64 {
        self.cum
    }
}

/// What a TCP flow puts on the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpPacket {
    /// Segment `seq` with `len` payload bytes.
    Data {
        /// Segment number.
        seq: u64,
        /// Payload bytes.
        len: u64,
    },
    /// An acknowledgement.
    Ack(Ack),
}

/// Both ends of one simulated TCP connection.
#[derive(Debug, Clone)]
pub struct TcpFlow {
    /// The sender, from the flow's start.
    pub sender: Option<TcpSender>,
    /// The receiver.
    pub receiver: TcpReceiver,
    algorithm: Algorithm,
    /// Feeds the sender's random choices.
    seed: u64,
    /// Bytes to move (`u64::MAX`: until the end).
    bytes: u64,
    /// Distinct payload bytes received.
    pub delivered: u64,
}

impl TcpFlow {
    /// A flow moving `bytes` (0: until the scenario ends) with `algorithm`; `seed` feeds its
    /// random choices.
    pub fn new(algorithm: Algorithm, bytes: u64, seed: u64) -> Self {
        TcpFlow {
            sender: None,
            receiver: TcpReceiver::default(),
            algorithm,
            seed,
            bytes: if bytes == 0 { u64::MAX } else { bytes },
            delivered: 0,
        }
    }

    /// Open the connection at `now` (the handshake is not modelled: data leaves at once).
    pub fn start(&mut self, now: Instant) {
        let segments = if self.bytes == u64::MAX {
            u64::MAX
        } else {
            self.bytes.div_ceil(MSS)
        };
        self.sender = Some(TcpSender::new(self.algorithm, segments, now, self.seed));
    }

    /// Payload bytes of segment `seq`.
    pub fn segment_len(&self, seq: u64) -> u64 {
        if self.bytes == u64::MAX {
            MSS
        } else {
            MSS.min(self.bytes - seq * MSS)
        }
    }

    /// Every byte arrived.
    pub fn is_complete(&self) -> bool {
        self.bytes != u64::MAX && self.receiver.cum() * MSS >= self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_acks_in_order_and_reports_blocks() {
        let mut r = TcpReceiver::default();
        assert_eq!(
            r.on_segment(0),
            (
                true,
                Ack {
                    cum: 1,
                    sack: [None; 3]
                }
            )
        );
        let (new, a) = r.on_segment(3);
        assert!(new);
        assert_eq!(a.cum, 1);
        assert_eq!(a.sack[0], Some((3, 4)));
        let (_, a) = r.on_segment(5);
        assert_eq!(a.sack, [Some((5, 6)), Some((3, 4)), None]);
        let (_, a) = r.on_segment(4);
        assert_eq!(a.sack, [Some((3, 6)), None, None]);
        assert!(!r.on_segment(4).0, "a duplicate is not new");
        let (_, a) = r.on_segment(1);
        assert_eq!(a.cum, 2);
        let (_, a) = r.on_segment(2);
        assert_eq!(
            a,
            Ack {
                cum: 6,
                sack: [None; 3]
            }
        );
    }

    /// Drive a sender and receiver by hand over a path that drops chosen transmissions.
    fn run(drop: impl Fn(u64) -> bool, segments: u64) -> SenderStats {
        run_timed(|n, _| drop(n), segments).0
    }

    /// [`run`] with drops chosen by transmission and time since the start, and how long the
    /// transfer took (10 ms rounds and the timeouts' waits).
    fn run_timed(
        drop: impl Fn(u64, core::time::Duration) -> bool,
        segments: u64,
    ) -> (SenderStats, core::time::Duration) {
        let mut s = TcpSender::new(Algorithm::Cubic, segments, Instant::ZERO, 0);
        let mut r = TcpReceiver::default();
        let rtt = core::time::Duration::from_millis(10);
        let mut now = Instant::ZERO;
        let mut n = 0u64;
        for _ in 0..10_000 {
            if s.is_done() {
                return (s.stats(), now.saturating_since(Instant::ZERO));
            }
            let mut acks = Vec::new();
            while let Some(seq) = s.poll_transmit(now) {
                n += 1;
                if !drop(n, now.saturating_since(Instant::ZERO)) {
                    acks.push(r.on_segment(seq).1);
                }
            }
            now += rtt;
            if acks.is_empty() {
                now = now.max(s.poll_timeout().unwrap_or(now));
                s.handle_timeout(now);
            }
            for a in acks {
                s.on_ack(now, &a);
            }
        }
        panic!("transfer did not finish");
    }

    #[test]
    fn sack_recovery_repairs_scattered_losses_without_timeout() {
        let st = run(|n| n % 17 == 5, 2000);
        assert!(st.retransmitted > 0);
        assert_eq!(st.timeouts, 0, "{st:?}");
    }

    #[test]
    fn a_lost_retransmission_is_found_again() {
        // Transmission 20 is the first retransmission of the lost transmission 5.
        let st = run(|n| n == 5 || n == 20, 200);
        assert!(st.retransmitted >= 2, "{st:?}");
    }

    /// After a timeout the window grows in slow start while the losses are resent (Linux's
    /// Loss state): hundreds of segments lost at once are resent in a few rounds, not one per
    /// round.
    #[test]
    fn after_a_timeout_the_losses_are_resent_in_slow_start() {
        // Everything sent in rounds 7 and 8 is lost: the window is hundreds of segments by
        // then, and with nothing acknowledged the timer fires.
        let ms = core::time::Duration::from_millis;
        let (st, took) = run_timed(|_, t| (ms(70)..ms(90)).contains(&t), 3000);
        assert!(st.timeouts >= 1, "{st:?}");
        assert!(st.retransmitted >= 300, "{st:?}");
        // The timeout waits ~1 s (the initial RTO); resending one segment per 10 ms round
        // would add 3 s or more after it.
        assert!(took < ms(2000), "{took:?} {st:?}");
    }

    /// RFC 8985 §6.2: a resend acknowledged within the minimum RTT of being sent was the
    /// original arriving late; it must not make everything sent before the resend look lost.
    #[test]
    fn an_original_arriving_after_its_resend_marks_nothing_lost() {
        let mut s = TcpSender::new(Algorithm::Cubic, 1000, Instant::ZERO, 0);
        let mut r = TcpReceiver::default();
        let ms = core::time::Duration::from_millis;
        let mut now = Instant::ZERO;
        // One round trip of 10 segments sets the minimum RTT at 100 ms.
        let first: Vec<u64> = core::iter::from_fn(|| s.poll_transmit(now)).collect();
        now += ms(100);
        for seq in first {
            s.on_ack(now, &r.on_segment(seq).1);
        }
        // 20 segments leave; the first is delayed (not lost), the next 14 arrive and mark it
        // lost, and it is resent (the window, cut to 14, has room); the last 5 are still on
        // their way.
        let batch: Vec<u64> = core::iter::from_fn(|| s.poll_transmit(now)).collect();
        let late = batch[0];
        now += ms(100);
        for &seq in &batch[1..15] {
            s.on_ack(now, &r.on_segment(seq).1);
        }
        assert_eq!(s.stats().lost, 1);
        let sent: Vec<u64> = core::iter::from_fn(|| s.poll_transmit(now)).collect();
        assert!(
            sent.contains(&late),
            "the late segment was not resent: {sent:?}"
        );
        // The original arrives 1 ms after the resend left: nothing sent before the resend
        // (the rest of the batch, still in flight) is lost.
        now += ms(1);
        s.on_ack(now, &r.on_segment(late).1);
        assert_eq!(s.stats().lost, 1, "{:?}", s.stats());
        assert_eq!(s.stats().spurious, 0);
    }

    #[test]
    fn a_silent_path_times_out_and_recovers() {
        let st = run(|n| (30..400).contains(&n), 300);
        assert!(st.timeouts >= 1, "{st:?}");
    }
}
