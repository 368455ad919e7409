//! The ledger of sent packets (`docs/spec.md` §6.2).
//!
//! Packet numbers are assigned consecutively and never reused, so the ledger is a `VecDeque`
//! indexed by `pn − base`: recording a send, finding a packet from an acknowledged range and
//! popping resolved packets are all O(1). Send order equals packet-number order, which makes the
//! time-based loss rule monotonic: scanning from the oldest packet still in flight, the first
//! packet that is not yet lost ends the scan, so each detection pass costs O(newly lost + 1).
//!
//! > §6.2: A packet P is lost when a packet with a larger packet number has been acknowledged
//! > and at least `rtt + reorder_window` has passed since P was sent, where `rtt` is the larger
//! > of the most recent RTT sample and the minimum RTT. [...] A packet acknowledged after it was
//! > declared lost was a spurious loss; its data is delivered and the reordering window grows
//! > (§6.3).

use core::time::Duration;
use std::collections::VecDeque;

use crate::time::Instant;

/// A piece of an object carried by one DATA packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Chunk {
    /// Object number.
    pub object: u32,
    /// Byte offset.
    pub offset: u64,
    /// Byte count.
    pub len: u32,
}

impl Chunk {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + u64::from(self.len)
    }
}

/// What a sent packet carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentKind {
    /// Object bytes.
    Data {
        /// The chunk.
        chunk: Chunk,
        /// Whether it was a retransmission.
        retransmission: bool,
    },
    /// HELLO or PING: elicits feedback, carries no object bytes.
    Control,
    /// A REPAIR symbol of the coded block starting at chunk `first` of `object` (§6.9).
    Repair {
        /// The block's object.
        object: u32,
        /// The block's first chunk.
        first: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    Acked,
    Lost,
}

/// One sent packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentPacket {
    /// When it was sent.
    pub sent_at: Instant,
    /// Datagram bytes (UDP payload).
    pub bytes: u32,
    /// What it carried.
    pub kind: SentKind,
    state: State,
}

/// What one acknowledged packet tells.
#[derive(Debug, Clone, Copy)]
pub enum AckOutcome {
    /// First acknowledgement of a packet in flight.
    Acked {
        /// Packet number.
        pn: u64,
        /// The packet.
        packet: SentPacket,
        /// Set if a packet sent this much later was acknowledged in an earlier report.
        overtaken_by: Option<Duration>,
    },
    /// Acknowledgement of a packet that had been declared lost.
    Spurious {
        /// Packet number.
        pn: u64,
        /// The packet.
        packet: SentPacket,
    },
}

/// Sent packets not yet forgotten.
#[derive(Debug, Clone, Default)]
pub struct SentLedger {
    base: u64,
    packets: VecDeque<SentPacket>,
    /// Every packet below this number is acknowledged or lost.
    scan_from: u64,
    in_flight_bytes: u64,
    largest_acked: Option<u64>,
    /// Send time of the largest acknowledged packet when the current report began.
    report_start_rack: Option<Instant>,
}

impl SentLedger {
    /// An empty ledger; the first recorded packet must have number 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty ledger whose first recorded packet has number `base` (for tests of the end
    /// of the packet number space).
    #[cfg(test)]
    pub(crate) fn starting_at(base: u64) -> Self {
        SentLedger {
            base,
            ..Self::default()
        }
    }

    /// Record a send. Packet numbers must be consecutive.
    pub fn on_sent(&mut self, pn: u64, sent_at: Instant, bytes: u32, kind: SentKind) {
        debug_assert_eq!(
            pn,
            self.base + self.packets.len() as u64,
            "non-consecutive pn"
        );
        self.packets.push_back(SentPacket {
            sent_at,
            bytes,
            kind,
            state: State::InFlight,
        });
        self.in_flight_bytes += u64::from(bytes);
    }

    /// Bytes sent and neither acknowledged nor declared lost.
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes
    }

    /// Largest acknowledged packet number.
    pub fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    /// The packet with number `pn`, if remembered.
    pub fn get(&self, pn: u64) -> Option<&SentPacket> {
        self.packets
            .get(usize::try_from(pn.checked_sub(self.base)?).ok()?)
    }

    /// Call before processing the ranges of one report.
    pub fn begin_report(&mut self) {
        self.report_start_rack = self
            .largest_acked
            .and_then(|pn| self.get(pn))
            .map(|p| p.sent_at);
    }

    /// Apply one acknowledged range (inclusive); `out` sees each packet whose state changed.
    pub fn on_ack_range(&mut self, lo: u64, hi: u64, mut out: impl FnMut(AckOutcome)) {
        let end = self.base + self.packets.len() as u64;
        let lo = lo.max(self.base);
        let hi = hi.min(end.saturating_sub(1));
        if self.packets.is_empty() || lo > hi {
            return;
        }
        for pn in lo..=hi {
            let idx = (pn - self.base) as usize;
            let p = &mut self.packets[idx];
            match p.state {
                State::InFlight => {
                    p.state = State::Acked;
                    self.in_flight_bytes -= u64::from(p.bytes);
                    let overtaken_by = self
                        .report_start_rack
                        .filter(|&t| t > p.sent_at)
                        .map(|t| t.saturating_since(p.sent_at));
                    out(AckOutcome::Acked {
                        pn,
                        packet: *p,
                        overtaken_by,
                    });
                }
                State::Lost => {
                    p.state = State::Acked;
                    out(AckOutcome::Spurious { pn, packet: *p });
                }
                State::Acked => {}
            }
        }
        if self.largest_acked.is_none_or(|l| hi > l) {
            self.largest_acked = Some(hi);
        }
    }

    /// Declare lost every packet that meets the rule of §6.2; `on_lost` sees each. Returns when
    /// the next packet would become lost if nothing else is acknowledged (a timer to arm).
    pub fn detect_lost(
        &mut self,
        now: Instant,
        rtt: Duration,
        reorder_window: Duration,
        mut on_lost: impl FnMut(u64, SentPacket),
    ) -> Option<Instant> {
        let largest = self.largest_acked?;
        let end = self.base + self.packets.len() as u64;
        let mut pn = self.scan_from.max(self.base);
        while pn < end.min(largest) {
            let p = &mut self.packets[(pn - self.base) as usize];
            if p.state == State::InFlight {
                let deadline = p.sent_at + rtt + reorder_window;
                if deadline > now {
                    self.scan_from = pn;
                    return Some(deadline);
                }
                p.state = State::Lost;
                self.in_flight_bytes -= u64::from(p.bytes);
                on_lost(pn, *p);
            }
            pn += 1;
        }
        self.scan_from = pn;
        None
    }

    /// The oldest packet still in flight.
    pub fn oldest_in_flight(&self) -> Option<(u64, SentPacket)> {
        let start = self.scan_from.max(self.base);
        (start..self.base + self.packets.len() as u64)
            .map(|pn| (pn, self.packets[(pn - self.base) as usize]))
            .find(|(_, p)| p.state == State::InFlight)
    }

    /// Forget resolved packets at the front: acknowledged ones at once, lost ones once they were
    /// sent more than `keep_lost` ago (a late acknowledgement of those is then not recognised as
    /// spurious, only ignored).
    pub fn forget_resolved(&mut self, now: Instant, keep_lost: Duration) {
        while let Some(p) = self.packets.front() {
            let forget = match p.state {
                State::InFlight => false,
                State::Acked => true,
                State::Lost => now.saturating_since(p.sent_at) > keep_lost,
            };
            if !forget {
                break;
            }
            self.packets.pop_front();
            self.base += 1;
        }
    }

    /// Packets remembered (for tests and memory bounds).
    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// True if nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(object: u32, offset: u64) -> SentKind {
        SentKind::Data {
            chunk: Chunk {
                object,
                offset,
                len: 100,
            },
            retransmission: false,
        }
    }

    fn ledger_with(n: u64) -> SentLedger {
        let mut l = SentLedger::new();
        for pn in 0..n {
            l.on_sent(pn, Instant::from_millis(pn), 128, data(1, pn * 100));
        }
        l
    }

    #[test]
    fn gap_becomes_lost_only_after_rtt_plus_window() {
        let mut l = ledger_with(10);
        l.begin_report();
        let mut acked = vec![];
        l.on_ack_range(5, 9, |o| {
            if let AckOutcome::Acked { pn, .. } = o {
                acked.push(pn)
            }
        });
        assert_eq!(acked, vec![5, 6, 7, 8, 9]);
        let rtt = Duration::from_millis(50);
        let win = Duration::from_millis(10);
        let mut lost = vec![];
        // Packet 0 was sent at 0 ms: lost at 60 ms, not before.
        let next = l.detect_lost(Instant::from_millis(59), rtt, win, |pn, _| lost.push(pn));
        assert!(lost.is_empty());
        assert_eq!(next, Some(Instant::from_millis(60)));
        l.detect_lost(Instant::from_millis(62), rtt, win, |pn, _| lost.push(pn));
        assert_eq!(lost, vec![0, 1, 2]);
        assert_eq!(l.in_flight_bytes(), 2 * 128);
        // Packets above the largest acknowledged are never declared lost by this rule.
        l.detect_lost(Instant::from_millis(10_000), rtt, win, |pn, _| {
            lost.push(pn)
        });
        assert_eq!(lost, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn late_ack_of_lost_packet_is_spurious_and_reordering_is_measured() {
        let mut l = ledger_with(4);
        l.begin_report();
        l.on_ack_range(3, 3, |_| {});
        l.detect_lost(
            Instant::from_millis(1000),
            Duration::from_millis(1),
            Duration::ZERO,
            |_, _| {},
        );
        l.begin_report();
        let mut seen = vec![];
        l.on_ack_range(0, 2, |o| seen.push(o));
        assert!(seen
            .iter()
            .all(|o| matches!(o, AckOutcome::Spurious { .. })));
        // A fresh ledger: packet 1 overtaken by packet 3 (sent 2 ms later) in an earlier report.
        let mut l = ledger_with(4);
        l.begin_report();
        l.on_ack_range(3, 3, |_| {});
        l.begin_report();
        let mut over = None;
        l.on_ack_range(1, 1, |o| {
            if let AckOutcome::Acked { overtaken_by, .. } = o {
                over = overtaken_by
            }
        });
        assert_eq!(over, Some(Duration::from_millis(2)));
    }

    #[test]
    fn forgets_acked_front_and_keeps_recent_lost() {
        let mut l = ledger_with(6);
        l.begin_report();
        l.on_ack_range(0, 1, |_| {});
        l.on_ack_range(5, 5, |_| {});
        l.detect_lost(
            Instant::from_millis(100),
            Duration::ZERO,
            Duration::ZERO,
            |_, _| {},
        );
        l.forget_resolved(Instant::from_millis(100), Duration::from_secs(1));
        assert_eq!(l.len(), 4); // lost 2,3,4 kept for spurious detection, 5 acked behind them
        l.forget_resolved(Instant::from_millis(2000), Duration::from_secs(1));
        assert!(l.is_empty());
        assert_eq!(l.in_flight_bytes(), 0);
    }
}
