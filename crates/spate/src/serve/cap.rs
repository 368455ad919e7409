//! A receiver's cap on how fast its sender may send: `spate get --rate` from a daemon.
//!
//! A daemon sends downloads at its own policy; the client cannot set the daemon's rate. It
//! can hold it back, with the Write Limit every FEEDBACK carries (spec §7.4): the sender
//! never has sent more new data bytes than the largest limit it has seen. Raising the limit
//! no faster than the cap makes the sender's new data follow it, without a wire change and
//! with any conforming sender.
//!
//! The limit is a token bucket over data bytes: the allowance starts at nothing when the
//! writer first reports room, grows at `rate` bytes per second, and may run at most
//! [`BURST_S`] seconds of the rate (at least [`MIN_BURST`] bytes) ahead of what has arrived.
//! Starting empty, the sender's new data never passes the rate averaged from the start
//! (measured: 24 MiB on loopback capped at 20, 40 and 100 Mbit/s arrived at 19.97, 39.9 and
//! 99.4 Mbit/s). The allowance ahead must cover what is in flight, one round trip of data at
//! the capped rate, or the sender would wait at the limit each round trip: one second is more
//! than the longest round trips Spate is built for (400 ms) plus the feedback's own delay. It
//! is also what a sender that fell behind (a slower path, a loss episode) may catch up by.
//! Within it the sender runs as fast as its own rate control lets it. Retransmissions are not
//! limited (spec §7.4: their bytes were counted when first sent).

use spate_proto::Instant;

/// Seconds of the capped rate the allowance may run ahead of the data received.
pub const BURST_S: f64 = 1.0;
/// ...but at least this many bytes: 256 KiB, so that a low cap still lets whole batches of
/// datagrams through rather than one at a time.
pub const MIN_BURST: u64 = 256 << 10;

/// The state of one session's cap.
#[derive(Debug, Clone)]
pub struct ReceiveCap {
    /// Bytes per second.
    rate: f64,
    burst: f64,
    /// Data bytes the sender may have sent so far, and when that was computed.
    allowed: f64,
    at: Option<Instant>,
}

impl ReceiveCap {
    /// A cap of `bytes_per_sec` (at least one byte per second).
    pub fn new(bytes_per_sec: u64) -> ReceiveCap {
        let rate = bytes_per_sec.max(1) as f64;
        ReceiveCap {
            rate,
            burst: (rate * BURST_S).max(MIN_BURST as f64),
            allowed: 0.0,
            at: None,
        }
    }

    /// The room to report at `now` (bytes past `received`, the session's data bytes so far),
    /// at most `room` (what the writer can take).
    pub fn room(&mut self, now: Instant, received: u64, room: u64) -> u64 {
        let dt = self
            .at
            .map_or(0.0, |t| now.saturating_since(t).as_secs_f64());
        self.at = Some(now);
        let received = received as f64;
        // The bucket: the allowance grows at the rate, but never more than a burst ahead of
        // what arrived (an idle sender does not save up).
        self.allowed = (self.allowed.max(received) + self.rate * dt).min(received + self.burst);
        ((self.allowed - received) as u64).min(room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    /// A sender that sends whatever the limit allows, arriving at once: over 10 s it moves
    /// the rate's 10 s, whatever the writer's room.
    #[test]
    fn a_greedy_sender_is_held_to_the_rate() {
        let mut c = ReceiveCap::new(1_000_000);
        let mut received = 0u64;
        let mut now = Instant::ZERO;
        for _ in 0..1000 {
            let room = c.room(now, received, 64 << 20);
            received += room;
            now += Duration::from_millis(10);
        }
        let expect = 1_000_000.0 * 9.99;
        assert!(
            (received as f64 / expect - 1.0).abs() < 0.01,
            "{received} vs {expect}"
        );
    }

    /// A sender that ignores the limit (a hostile or broken daemon) is not rewarded for it:
    /// the room stays what the rate earned since the last report, never negative, and what
    /// it sent past the limit is bounded only by the writer's queue (`sink::has_room`), as
    /// without a cap.
    #[test]
    fn a_sender_past_the_limit_earns_only_the_rate() {
        let mut c = ReceiveCap::new(1_000_000);
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        c.room(t(0), 0, u64::MAX);
        assert_eq!(c.room(t(100), 0, u64::MAX), 100_000);
        assert_eq!(c.room(t(200), 5_000_000, u64::MAX), 100_000);
        assert_eq!(c.room(t(200), u64::MAX / 2, u64::MAX), 0);
    }

    /// The allowance starts empty, and a sender that stopped does not earn more than
    /// [`BURST_S`] of the rate by waiting.
    #[test]
    fn an_idle_sender_does_not_save_up() {
        let mut c = ReceiveCap::new(1_000_000);
        assert_eq!(c.room(Instant::ZERO, 0, u64::MAX), 0);
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        assert_eq!(c.room(t(250), 0, u64::MAX), 250_000);
        assert_eq!(c.room(t(60_000), 0, u64::MAX), 1_000_000);
        // What arrived is no longer ahead.
        assert_eq!(c.room(t(60_000), 400_000, u64::MAX), 600_000);
        // The writer's room still bounds it; a low cap still lets the minimum burst ahead.
        assert_eq!(c.room(t(60_100), 400_000, 5), 5);
        let mut low = ReceiveCap::new(1000);
        low.room(Instant::ZERO, 0, u64::MAX);
        assert_eq!(low.room(t(3_600_000), 0, u64::MAX), MIN_BURST);
    }
}
