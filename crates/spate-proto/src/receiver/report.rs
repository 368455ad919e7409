//! When the receiver reports, and what (`docs/spec.md` §4.5, §6.5).
//!
//! > §6.5: While DATA arrives, the receiver sends a FEEDBACK at most once per Feedback Interval
//! > (from HELLO) and at least once per interval in which a packet arrived. It reports at once
//! > when a packet carries the PROBE flag, on HELLO and PING, and when the last missing byte
//! > arrives. Each report lists received ranges from the largest packet number down to the
//! > largest packet number of the report sent 8 ([`REPEAT`]) reports earlier, so every range is
//! > repeated in several reports and the loss of a few reports loses no information; ranges
//! > that do not fit in one datagram are left out, oldest first.
//!
//! Feedback volume: one report of ~40–300 bytes per 10 ms is 30–250 KiB per GiB at 1 Gbit/s.

use super::{Phase, Receiver};
use crate::codec::Writer;
use crate::event::{ReceiverEvent, SessionError};
use crate::sender::Transmit;
use crate::time::Instant;
use crate::wire::{
    Accept, Close, CloseCode, FeedbackFlags, FeedbackRepr, Header, PacketType, ACCEPT_CODING,
    ACCEPT_RESUME,
};

/// How many consecutive reports repeat each received range. 8: with independent loss, losing
/// eight reports in a row is negligible even at 10 %; with burst loss (Gilbert–Elliott, mean
/// burst 5) 4 repeats let 4.5 % of packets be retransmitted spuriously, 8 repeats 0.4 % (see the
/// snapshot table). The cost is bytes only when there are many holes: ~330 KiB per GiB at 2 %
/// loss and 400 ms, against ~200 KiB with 4 repeats.
pub const REPEAT: usize = 8;

impl Receiver {
    /// The lowest packet number still reported: the largest of [`REPEAT`] reports ago.
    pub(super) fn report_floor(&self) -> u64 {
        if self.reports < REPEAT as u64 {
            return 0;
        }
        self.recent_largest[(self.reports % REPEAT as u64) as usize]
    }

    pub(super) fn schedule_feedback(&mut self, now: Instant, urgent: bool) {
        let at = if urgent {
            now
        } else {
            match self.last_feedback_at {
                Some(t) => (t + self.feedback_interval).max(now),
                None => now,
            }
        };
        self.feedback_due = Some(self.feedback_due.map_or(at, |d| d.min(at)));
    }

    /// Write the next datagram for the sender into `buf`, if one is due at `now`.
    ///
    /// Call until it returns `None` after every `handle_*` call. `buf` must hold one maximum
    /// datagram (the size the HELLO announced, 1472 bytes by default).
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let len = if let Some((code, reason)) = self.close_pending.take() {
            self.write_close(buf, code, &reason)?
        } else if self.accepts_owed > 0 {
            self.accepts_owed -= 1;
            self.write_accept(buf)?
        } else if self.have_owed() && self.phase != Phase::Ended {
            self.write_have(buf)?
        } else if self.phase != Phase::Ended && self.feedback_due.is_some_and(|t| t <= now) {
            self.write_feedback(now, buf)?
        } else {
            return None;
        };
        // Room for the protection's tag (spec §9), which sealing writes in place.
        let end = len + self.cfg.overhead.tag;
        buf.get_mut(len..end)?.fill(0);
        let len = end;
        if !self.may_send(len) {
            return None;
        }
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        Some(Transmit {
            len,
            segment_size: len,
        })
    }

    /// When [`handle_timeout`](Self::handle_timeout) or `poll_transmit` must next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.close_pending.is_some() || self.accepts_owed > 0 || self.have_owed() {
            return Some(Instant::ZERO);
        }
        let limit = match self.phase {
            Phase::Ended => return None,
            Phase::Receiving => self.cfg.idle_timeout,
            Phase::Draining => self.cfg.drain_timeout,
        };
        let deadline = self.last_packet_at + limit;
        Some(self.feedback_due.map_or(deadline, |d| d.min(deadline)))
    }

    /// Run the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.phase {
            Phase::Receiving if now >= self.last_packet_at + self.cfg.idle_timeout => {
                let d = self.cfg.idle_timeout;
                self.phase = Phase::Ended;
                self.events
                    .push_back(ReceiverEvent::Failed(SessionError::IdleTimeout(d)));
            }
            Phase::Draining if now >= self.last_packet_at + self.cfg.drain_timeout => {
                self.phase = Phase::Ended;
            }
            _ => {}
        }
    }

    /// The header of the next packet, with the next packet number; `None` (and the session
    /// ends) once the numbers are used up — never a repeated number (`pn.rs`).
    pub(super) fn header(&mut self, ty: PacketType, flags: u8) -> Option<Header> {
        let Some(pn) = self.out_pns.take() else {
            if self.phase != Phase::Ended {
                self.phase = Phase::Ended;
                self.events
                    .push_back(ReceiverEvent::Failed(SessionError::PacketNumbersExhausted));
            }
            self.close_pending = None;
            self.accepts_owed = 0;
            return None;
        };
        Some(Header {
            ty,
            flags,
            session: self.session,
            pn,
        })
    }

    fn write_close(&mut self, buf: &mut [u8], code: CloseCode, reason: &str) -> Option<usize> {
        let h = self.header(PacketType::Close, 0)?;
        let mut w = Writer::new(buf);
        h.encode(&mut w).ok()?;
        Close::encode(code, reason, &mut w).ok()?;
        Some(w.len())
    }

    fn write_accept(&mut self, buf: &mut [u8]) -> Option<usize> {
        let flags = if self.resume == super::resume::Resume::Off {
            0
        } else {
            ACCEPT_RESUME
        } | if self.coding_accepted() {
            ACCEPT_CODING
        } else {
            0
        };
        let h = self.header(PacketType::Accept, flags)?;
        let mut w = Writer::new(buf);
        h.encode(&mut w).ok()?;
        let idle_timeout_ms = (self.cfg.idle_timeout.as_millis() as u64).max(1);
        Accept {
            max_datagram: self.datagram as u16,
            idle_timeout_ms,
            token: self.validation.token,
        }
        .encode(&mut w)
        .ok()?;
        Some(w.len())
    }

    /// Advance the watermark past every complete prefix.
    fn advance_watermark(&mut self) -> (u32, u64) {
        let (mut o, mut off) = self.watermark;
        while (o as usize) < self.sizes.len() {
            let gap = self.received[o as usize].first_gap_from(off);
            if gap < self.sizes[o as usize] {
                off = gap;
                break;
            }
            if o == 0 && self.manifest.is_none() {
                off = gap;
                break; // object sizes beyond the manifest are not known yet
            }
            o += 1;
            off = 0;
        }
        self.watermark = (o, off);
        (o, off)
    }

    fn write_feedback(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.pns.is_empty() {
            self.feedback_due = None;
            return None;
        }
        let (first_missing_object, first_missing_offset) = self.advance_watermark();
        self.forget_held_copies();
        let repr = FeedbackRepr {
            flags: FeedbackFlags {
                // §6.8: COMPLETE means held and, with VERIFY, confirmed.
                complete: self.phase == Phase::Draining,
                validated: self.validation.validated,
            },
            ack_delay_us: now.saturating_since(self.largest_at).as_micros() as u64,
            recv_time_us: self.largest_at.saturating_since(self.epoch).as_micros() as u64,
            bytes_received: self.bytes_received,
            first_missing_object,
            first_missing_offset,
            write_limit: self.take_write_limit(),
            rebuilt: self.take_rebuilt(),
            keep_limit: self.keep_limit(),
        };
        let floor = self.report_floor();
        let h = self.header(PacketType::Feedback, repr.flags.bits())?;
        let room = buf.len().min(self.datagram) - self.cfg.overhead.tag;
        let mut w = Writer::new(&mut buf[..room]);
        h.encode(&mut w).ok()?;
        let ranges = self
            .pns
            .iter_rev()
            .take_while(|r| r.end > floor)
            .map(|r| (r.start, r.end - 1));
        repr.encode(&mut w, ranges).ok()?;
        let len = w.len();

        self.recent_largest[(self.reports % REPEAT as u64) as usize] = self.largest;
        self.reports += 1;
        self.pns.remove_below(self.report_floor());
        self.feedback_due = None;
        self.last_feedback_at = Some(now);
        self.stats.feedback_sent += 1;
        Some(len)
    }
}
