//! Receiver flow control: the Write Limit each FEEDBACK carries (`docs/spec.md` §4.5, §7.4).
//!
//! > §7.4: A receiver whose application buffers what it has not yet written reports, in each
//! > FEEDBACK, a Write Limit: the data bytes (objects 1 and above, trailers included) it
//! > received in this session plus the bytes its application can still take. A sender never
//! > has sent more new data bytes in the session than the largest Write Limit it has seen.
//!
//! What reaches the sender is a running total, not a window: reports that arrive out of
//! order or not at all cannot shrink it, and the sender need not know what of its data
//! arrived. Bytes the sender counts but the receiver never got (lost packets) only make the
//! rule stricter; a retransmission carries bytes already counted. So what the application
//! holds unwritten never exceeds the room it last reported.
//!
//! When the application drains its backlog while no DATA arrives (the sender stopped at the
//! limit), the receiver reports again once the limit has grown by [`UPDATE`]: the sender
//! learns of the room without waiting for its keep-alive PING.

use super::Receiver;
use crate::time::Instant;

/// Growth of the Write Limit past the last one reported that calls for a report of its own:
/// 1 MiB, a few hundred microseconds of data at 10 Gbit/s and far above one datagram, so a
/// draining writer causes at most one report per Feedback Interval.
pub const UPDATE: u64 = 1 << 20;

/// Flow-control state of a receiving session.
#[derive(Debug, Default)]
pub(super) struct Flow {
    /// Bytes the application can still take, if it said so.
    room: Option<u64>,
    /// Distinct data bytes (objects 1..) received in this session, digest trailers included.
    pub received: u64,
    /// The Write Limit of the last report.
    advertised: u64,
}

impl Receiver {
    /// Tell the session how many more bytes the application can take now (its memory budget
    /// for this session less what it holds unwritten). From then on every FEEDBACK carries a
    /// Write Limit (spec §7.4) and the sender never sends more than that allows; call it
    /// whenever the backlog changes (the reference: before each `poll_transmit`).
    pub fn set_write_room(&mut self, now: Instant, room: u64) {
        self.flow.room = Some(room);
        let limit = self.flow.received.saturating_add(room);
        if limit >= self.flow.advertised.saturating_add(UPDATE) && !self.pns.is_empty() {
            self.schedule_feedback(now, false);
        }
    }

    /// Distinct data bytes received in this session (what the Write Limit counts from,
    /// spec §7.4): objects 1 and above, digest trailers included; bytes held from an earlier
    /// session not counted.
    pub fn data_received(&self) -> u64 {
        self.flow.received
    }

    /// The Write Limit for the next report, remembered as advertised.
    pub(super) fn take_write_limit(&mut self) -> Option<u64> {
        let limit = self.flow.received.saturating_add(self.flow.room?);
        self.flow.advertised = self.flow.advertised.max(limit);
        Some(limit)
    }
}
