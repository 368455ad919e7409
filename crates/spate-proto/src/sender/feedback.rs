//! Applying what the receiver says: ACCEPT, FEEDBACK, CLOSE (`docs/spec.md` §4.2, §4.5, §6).
//!
//! > §6.1: A FEEDBACK whose Largest Received was not acknowledged before yields an RTT sample:
//! > the time since that packet was sent, minus Ack Delay (RFC 9002 §5.3). It also yields a
//! > one-way delay sample, Receive Time minus the packet's send time, which is only meaningful
//! > relative to other samples because the two clocks are unrelated.
//!
//! > §4.5: The watermark (First Missing Object/Offset) tells the sender that everything before it
//! > arrived, even if the reports that acknowledged those packets were lost. COMPLETE tells it
//! > that everything arrived.

use core::time::Duration;

use super::{Phase, Sender};
use crate::cc::{RateControl, RateMode, RateSample};
use crate::event::{DropReason, SenderEvent};
use crate::recovery::{AckOutcome, SentKind};
use crate::time::Instant;
use crate::wire::{Accept, Feedback, FeedbackFlags, WireError, ACCEPT_CODING, ACCEPT_RESUME};

impl Sender {
    pub(super) fn on_accept(&mut self, now: Instant, flags: u8, a: Accept) {
        if self.phase != Phase::Handshake {
            return;
        }
        self.have_pending = self.cfg.resume && flags & ACCEPT_RESUME != 0;
        // §4.8: prove at once that we receive here; the receiver ignores our DATA until then.
        self.token = a.token;
        self.token_ping_due = true;
        self.datagram = self.datagram.min(usize::from(a.max_datagram));
        // §6.9: REPAIR only to a receiver that takes it, and with symbols the code can make
        // (an even chunk size).
        self.coder.active = flags & ACCEPT_CODING != 0
            && self.coder.fec != crate::coding::Fec::Off
            && self.chunk_payload() % 2 == 0;
        self.phase = Phase::Transfer;
        self.last_feedback_at = now;
        if self.hellos_sent == 1 {
            // Only an unambiguous exchange gives an RTT sample (Karn's rule).
            self.rtt.update(
                now,
                now.saturating_since(self.first_hello_at),
                Duration::ZERO,
            );
        }
        self.events.push_back(SenderEvent::Accepted);
        let prefix = self.prefix_len as u64;
        self.mark_delivered(0, 0..prefix);
        self.check_complete();
    }

    pub(super) fn on_feedback(
        &mut self,
        now: Instant,
        flags: u8,
        f: &Feedback<'_>,
    ) -> Result<(), DropReason> {
        if self.phase != Phase::Transfer {
            return Err(DropReason::Unexpected("FEEDBACK before ACCEPT"));
        }
        let flags = FeedbackFlags::from_bits(flags);
        if f.largest() >= self.pns.used() {
            return Err(WireError::Invalid("acknowledges a packet never sent").into());
        }
        let (wm_obj, wm_off) = (f.repr.first_missing_object, f.repr.first_missing_offset);
        let wm_ok = match self.sizes.get(wm_obj as usize) {
            Some(&size) => wm_off <= size,
            None => wm_obj as usize == self.sizes.len() && wm_off == 0,
        };
        if !wm_ok {
            return Err(WireError::Invalid("watermark outside the objects").into());
        }

        self.stats.feedback_received += 1;
        self.last_feedback_at = now;
        // §7.4: the largest Write Limit seen holds; reports that arrive late cannot lower it.
        if let Some(l) = f.repr.write_limit {
            self.write_limit = Some(self.write_limit.map_or(l, |w| w.max(l)));
        }
        // §4.8, §6.8: the receiver acts on the manifest only once it has validated our
        // address; a transfer is not over before it says so (VALIDATED, or COMPLETE).
        self.validated_seen |= flags.validated || flags.complete;
        if !flags.validated {
            // §4.8: the receiver has not seen our token from the address it reports to (our
            // PING was lost, or our address changed): send it again, at most once per RTT.
            let gap = self.rtt.smoothed().max(Duration::from_millis(1));
            if self
                .token_ping_at
                .is_none_or(|t| now.saturating_since(t) >= gap)
            {
                self.token_ping_due = true;
            }
        }
        self.probe_count = 0;
        self.probe_due = false;
        if self.silent {
            self.silent = false;
            self.cc.on_path_restored(now);
            self.events.push_back(SenderEvent::PathRestored);
        }

        let largest = f.largest();
        let mut outcomes = std::mem::take(&mut self.scratch);
        outcomes.clear();
        self.ledger.begin_report();
        for (lo, hi) in f.ranges.iter() {
            self.ledger.on_ack_range(lo, hi, |o| outcomes.push(o));
        }
        let mut acked_bytes = 0u64;
        let mut largest_sent_at = None;
        // Acknowledged chunks, merged while each continues the one before (data sent in order
        // is acknowledged in runs): one insert into the delivered set per run, not per packet.
        let mut run: Option<(u32, core::ops::Range<u64>)> = None;
        for o in &outcomes {
            let packet = match *o {
                AckOutcome::Acked {
                    pn,
                    packet,
                    overtaken_by,
                } => {
                    acked_bytes += u64::from(packet.bytes);
                    if pn == largest {
                        largest_sent_at = Some(packet.sent_at);
                    }
                    if let Some(d) = overtaken_by {
                        self.reorder.on_reorder(now, d);
                    }
                    packet
                }
                AckOutcome::Spurious { packet, .. } => {
                    self.stats.spurious_losses += 1;
                    let expected = packet.sent_at + self.rtt.smoothed();
                    let current = self.reorder.window(now, self.rtt.min());
                    self.reorder
                        .on_spurious(now, now.saturating_since(expected), current);
                    packet
                }
            };
            self.on_coded_ack(packet.kind);
            let SentKind::Data { chunk, .. } = packet.kind else {
                continue;
            };
            match &mut run {
                Some((object, r)) if *object == chunk.object && r.end == chunk.offset => {
                    r.end = chunk.end();
                }
                _ => {
                    if let Some((object, r)) =
                        run.replace((chunk.object, chunk.offset..chunk.end()))
                    {
                        self.mark_delivered(object, r);
                    }
                }
            }
        }
        if let Some((object, r)) = run {
            self.mark_delivered(object, r);
        }
        let newest = outcomes
            .iter()
            .map(|o| match *o {
                AckOutcome::Acked { packet, .. } | AckOutcome::Spurious { packet, .. } => {
                    packet.sent_at
                }
            })
            .max();
        if let Some(t) = newest {
            self.coder.on_acked(t, outcomes.len() as u64);
        }
        self.scratch = outcomes;
        // §6.9: blocks the receiver rebuilt are held, every byte; the Keep Limit (the latest,
        // absent = 128 MiB) bounds the coded data outstanding.
        self.on_rebuilt(f.repr.rebuilt.iter());
        self.coder.keep_limit = f.repr.keep_limit.map_or(crate::coding::KEEP_BUDGET, |l| {
            l.min(crate::coding::KEEP_BUDGET)
        });

        self.apply_watermark(wm_obj, wm_off);
        if flags.complete {
            self.complete_seen = true;
            for o in 0..self.sizes.len() {
                self.mark_delivered(o as u32, 0..self.sizes[o]);
            }
        }

        let mut one_way_delay_us = None;
        let mut rtt = None;
        if let Some(sent_at) = largest_sent_at {
            let sample = now.saturating_since(sent_at);
            self.rtt
                .update(now, sample, Duration::from_micros(f.repr.ack_delay_us));
            rtt = Some(sample);
            one_way_delay_us = Some(f.repr.recv_time_us as i64 - sent_at.as_micros() as i64);
        }

        self.detect_lost(now);
        // Everything declared lost since the previous report, by this report or by the loss
        // timer in between.
        let lost_bytes = core::mem::take(&mut self.lost_unreported);
        self.ledger.forget_resolved(now, self.keep_lost());

        let sample = RateSample {
            rtt,
            srtt: self.rtt.smoothed(),
            min_rtt: self.rtt.min(),
            one_way_delay_us,
            receiver_bytes: f.repr.bytes_received,
            receiver_time_us: f.repr.recv_time_us,
            acked_bytes,
            lost_bytes,
            in_flight_bytes: self.ledger.in_flight_bytes(),
            batch_time: self.batch_hold(),
            datagram_bytes: self.datagram as u64,
        };
        self.count_mode(now);
        self.cc.on_feedback(now, &sample);
        self.check_complete();
        Ok(())
    }

    /// Count the time since the last report into the mode the controller held over it (it
    /// changes mode only on a report, or when the path falls silent or comes back).
    fn count_mode(&mut self, now: Instant) {
        let since = self.mode_counted_at.replace(now);
        let us = since.map_or(0, |t| now.saturating_since(t).as_micros() as u64);
        match self.cc.mode() {
            RateMode::Competitive => self.stats.competing_us += us,
            RateMode::FollowingBbr => {
                self.stats.competing_us += us;
                self.stats.following_bbr_us += us;
            }
            RateMode::Fixed | RateMode::Delay => {}
        }
    }

    /// How long to remember lost packets for spurious-loss detection: a few RTTs, and at least
    /// one second so that a reordering burst is recognised.
    fn keep_lost(&self) -> Duration {
        (self.rtt.smoothed() * 4).max(Duration::from_secs(1))
    }

    fn apply_watermark(&mut self, object: u32, offset: u64) {
        if (object, offset) <= self.watermark {
            return;
        }
        let (mut o, mut from) = self.watermark;
        while o < object {
            self.mark_delivered(o, from..self.sizes[o as usize]);
            o += 1;
            from = 0;
        }
        if (o as usize) < self.sizes.len() {
            self.mark_delivered(o, from..offset);
        }
        self.watermark = (object, offset);
    }
}
