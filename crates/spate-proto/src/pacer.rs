//! Pacing by earliest departure time (`docs/spec.md` §7.1).
//!
//! In a nutshell: after sending `b` bytes at rate `r` the next packet may leave
//! `b · 8 / r` seconds later. A sender that was idle may catch up by at most [`BURST`] of
//! sending time (a batching sender: beyond its batch's wait, [`MAX_BATCH_HOLD`] at most), so it
//! never dumps more than one millisecond's worth of packets (1.5 ms batching) at once into the
//! bottleneck queue, while the driver can still batch packets (GSO) without exceeding the rate
//! on average. Bytes counted are datagram bytes plus [`IP_UDP_OVERHEAD`](crate::wire::IP_UDP_OVERHEAD),
//! the same bytes a link's capacity counts.

use core::time::Duration;

use crate::time::Instant;

/// Most sending time an idle sender may make up at once (1 ms: a 64 KiB GSO batch at 1 Gbit/s
/// takes 0.5 ms; 1 ms at 10 Gbit/s is ~830 full packets, which a 74 ms-RTT path's queue absorbs).
pub const BURST: Duration = Duration::from_millis(1);

/// Longest a batching sender waits for a whole batch to fall due (spec §7.1).
///
/// Each wait is a sleep and a wake-up, and below ~1 Gbit/s the wake-ups, not the bytes, are
/// what a sender's CPU pays for: at 100 Mbit/s a 250 µs hold let 3 datagrams leave per call
/// and the sender used 18 % of a core on loopback (157 % per Gbit/s in the emulator); 500 µs
/// lets 5 leave and costs 13 % (112–120 % per Gbit/s), with the same goodput. The catch-up
/// ([`BURST`]) counts from the end of the hold ([`Pacer::forfeited`]), so waiting on purpose
/// never eats into the millisecond a late wake-up may make up (when it did, a 750 µs hold lost
/// 3–6 % of a fixed 100 Mbit/s on the project's VM, whose wake-ups are often 250 µs late). The
/// price is queue: a batch adds its hold to its own last packet at a bottleneck as fast as the
/// rate (the controller is told, and discounts it), which moved the emulator's median queue at
/// 100 Mbit/s from 2.3–2.8 to 2.7–3.2 ms (five runs each). From ~1 Gbit/s on a full 64 KiB
/// batch takes less than the hold anyway.
pub const MAX_BATCH_HOLD: Duration = Duration::from_micros(500);

/// Lowest rate the pacer accepts, bits per second; below it the rate is raised to this.
pub const MIN_RATE_BPS: u64 = 8_000;

/// Earliest departure time state.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    next: Instant,
}

impl Pacer {
    /// A pacer that may send at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Earliest time the next packet may leave.
    pub fn next_send_time(&self) -> Instant {
        self.next
    }

    /// True if a packet may leave at `now`.
    pub fn may_send(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Sending time the sender lets pass unused if its next packet leaves at `now`: how far
    /// `now` is behind the schedule beyond the [`BURST`] it may make up — beyond `hold` more
    /// for a batching sender, which waits that long on purpose (spec §7.1). Zero for a sender
    /// that keeps pace; the idle time of one that had nothing to send or could not keep up (a
    /// busy CPU, a late wake-up). The rate controller counts it so that it does not mistake a
    /// slow sender for a slow path.
    pub fn forfeited(&self, now: Instant, hold: Duration) -> Duration {
        (now - BURST - hold).saturating_since(self.next)
    }

    /// Account for `wire_bytes` sent at `now` while the rate is `rate_bps`, by a sender whose
    /// batches wait up to `hold` (zero without batching).
    pub fn on_sent(&mut self, now: Instant, wire_bytes: u64, rate_bps: u64, hold: Duration) {
        let base = self.next.max(now - BURST - hold);
        self.next = base + transmission_time(wire_bytes, rate_bps);
    }
}

/// How long a sender sending `batch` datagrams of `wire_bytes` each at once waits for the
/// whole batch to fall due: the pacing time of all but the first, at most [`MAX_BATCH_HOLD`].
/// It is also the queueing delay such a batch adds to its own last packet at a bottleneck no
/// slower than `rate_bps`. Zero for `batch` ≤ 1.
pub fn batch_hold(batch: usize, wire_bytes: u64, rate_bps: u64) -> Duration {
    let more = (batch.max(1) - 1) as u64 * wire_bytes;
    transmission_time(more, rate_bps).min(MAX_BATCH_HOLD)
}

/// Time to send `bytes` at `rate_bps`, rounded up to the nanosecond.
pub fn transmission_time(bytes: u64, rate_bps: u64) -> Duration {
    let rate = u128::from(rate_bps.max(MIN_RATE_BPS));
    let ns = (u128::from(bytes) * 8 * 1_000_000_000).div_ceil(rate);
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spacing_matches_rate() {
        // 1500 bytes at 1 Gbit/s = 12 µs.
        assert_eq!(
            transmission_time(1500, 1_000_000_000),
            Duration::from_micros(12)
        );
        let mut p = Pacer::new();
        let t = Instant::from_millis(10);
        let mut sent = 0;
        let mut now = t;
        // After idling, a burst of at most 1 ms is allowed: 1 ms / 12 µs = 83.3 packets.
        while p.may_send(now) {
            p.on_sent(now, 1500, 1_000_000_000, Duration::ZERO);
            sent += 1;
        }
        assert_eq!(sent, 84);
        // Then steady: 1000 packets in 12 ms, polled every microsecond.
        for _ in 0..12_000 {
            now += Duration::from_micros(1);
            while p.may_send(now) {
                p.on_sent(now, 1500, 1_000_000_000, Duration::ZERO);
                sent += 1;
            }
        }
        assert_eq!(sent, 84 + 1000);
        // A jump in time is capped at the burst again.
        now += Duration::from_secs(1);
        let before = sent;
        while p.may_send(now) {
            p.on_sent(now, 1500, 1_000_000_000, Duration::ZERO);
            sent += 1;
        }
        assert_eq!(sent - before, 84);
    }

    #[test]
    fn batch_hold_is_the_rest_of_the_batch_capped() {
        assert_eq!(batch_hold(1, 1500, 1_000_000), Duration::ZERO);
        // 43 more packets of 1500 bytes at 20 Gbit/s: 25.8 µs.
        assert_eq!(
            batch_hold(44, 1500, 20_000_000_000),
            Duration::from_nanos(25_800)
        );
        // At 1 Gbit/s the same batch would take 516 µs: capped.
        assert_eq!(batch_hold(44, 1500, 1_000_000_000), MAX_BATCH_HOLD);
        // A batch's own wait stays well inside what a late sender may make up.
        assert!(MAX_BATCH_HOLD * 2 <= BURST);
    }

    #[test]
    fn forfeits_only_time_beyond_the_burst() {
        let mut p = Pacer::new();
        let t = Instant::from_millis(10);
        while p.may_send(t) {
            p.on_sent(t, 1500, 1_000_000_000, Duration::ZERO);
        }
        let due = p.next_send_time();
        let (us, none, hold) = (Duration::from_micros, Duration::ZERO, MAX_BATCH_HOLD);
        // (late by, the batch's hold, forfeited): keeping pace, or late by less than the burst,
        // loses nothing; 3 ms late, 1 ms may be made up and 2 ms are lost. A batching sender
        // that waits up to 500 µs on purpose keeps its whole millisecond for lateness.
        for (late, hold, lost) in [
            (us(0), none, us(0)),
            (us(999), none, us(0)),
            (us(3_000), none, us(2_000)),
            (us(1_400), hold, us(0)),
            (us(3_000), hold, us(1_500)),
        ] {
            assert_eq!(
                p.forfeited(due + late, hold),
                lost,
                "{late:?} late, {hold:?} hold"
            );
        }
        // ...and may make up that much: 1.5 ms late, it sends 1.5 ms of packets at once.
        let late = due + Duration::from_micros(1_500);
        let mut sent = 0;
        while p.may_send(late) {
            p.on_sent(late, 1500, 1_000_000_000, hold);
            sent += 1;
        }
        assert_eq!(
            sent, 126,
            "1.5 ms at 1 Gbit/s is 125 packets of 1500 bytes, plus the due one"
        );
    }
}
