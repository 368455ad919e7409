//! One direction of a path.

use core::time::Duration;

use spate_proto::pacer::transmission_time;
use spate_proto::Instant;

use crate::loss::LossModel;
use crate::phase::Schedule;
use crate::rng::SimRng;

/// Why a packet did not arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// The drop-tail queue was full.
    Queue,
    /// Random (or burst) loss.
    Random,
    /// The path was in an outage.
    Outage,
}

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Lost.
    Dropped(DropCause),
    /// Arrives at `at`; a second copy arrives at the same time if `duplicate`.
    Delivered {
        /// Arrival time.
        at: Instant,
        /// Time spent waiting in the bottleneck queue.
        queue_delay: Duration,
        /// Whether the network delivers it twice.
        duplicate: bool,
    },
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered.
    pub packets: u64,
    /// Bytes offered.
    pub bytes: u64,
    /// Dropped by the full queue.
    pub queue_drops: u64,
    /// Dropped by random loss.
    pub random_drops: u64,
    /// Dropped during outages.
    pub outage_drops: u64,
    /// Delivered twice.
    pub duplicated: u64,
    /// Given extra reordering delay.
    pub reordered: u64,
}

/// One direction of a path: bottleneck queue, serialisation, delay and impairments.
#[derive(Debug, Clone)]
pub struct Link {
    schedule: Schedule,
    phase: usize,
    busy_until: Instant,
    loss: LossModel,
    loss_rng: SimRng,
    reorder_rng: SimRng,
    dup_rng: SimRng,
    stats: LinkStats,
}

impl Link {
    /// A link following `schedule`, with random streams derived from `seed` and `direction`
    /// (use 0 for sender→receiver and 1 for the reverse).
    pub fn new(schedule: Schedule, seed: u64, direction: u64) -> Self {
        Link {
            schedule,
            phase: 0,
            busy_until: Instant::ZERO,
            loss: LossModel::new(),
            loss_rng: SimRng::new(seed, direction * 16 + 1),
            reorder_rng: SimRng::new(seed, direction * 16 + 2),
            dup_rng: SimRng::new(seed, direction * 16 + 3),
            stats: LinkStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// Index of the phase in force at the last `transmit`.
    pub fn phase_index(&self) -> usize {
        self.phase
    }

    /// Move to the phase in force at `now`; work queued across a rate change drains at the new
    /// rate from the moment of the change.
    fn advance(&mut self, now: Instant) {
        while let Some(start) = self.schedule.next_start(self.phase) {
            if now < start {
                break;
            }
            let old = self.schedule.phases()[self.phase].rate_bps;
            self.phase += 1;
            let new = self.schedule.phases()[self.phase].rate_bps;
            if self.busy_until > start && old != new {
                let left = self.busy_until.saturating_since(start).as_nanos();
                let scaled = left * u128::from(old) / u128::from(new);
                self.busy_until =
                    start + Duration::from_nanos(u64::try_from(scaled).unwrap_or(u64::MAX));
            }
        }
    }

    /// Send a packet of `wire_bytes` (IP bytes) into the link at `now`. Calls must come in
    /// non-decreasing `now` order.
    pub fn transmit(&mut self, now: Instant, wire_bytes: u64) -> Fate {
        self.advance(now);
        self.stats.packets += 1;
        self.stats.bytes += wire_bytes;
        let p = &self.schedule.phases()[self.phase];
        if p.in_outage(now) {
            self.stats.outage_drops += 1;
            return Fate::Dropped(DropCause::Outage);
        }
        let backlog = self.busy_until.saturating_since(now);
        if backlog > p.queue {
            self.stats.queue_drops += 1;
            return Fate::Dropped(DropCause::Queue);
        }
        self.busy_until = self.busy_until.max(now) + transmission_time(wire_bytes, p.rate_bps);
        if self.loss.lose(&mut self.loss_rng, p.loss, p.burst_loss_len) {
            self.stats.random_drops += 1;
            return Fate::Dropped(DropCause::Random);
        }
        let mut at = self.busy_until + p.rtt / 2;
        if self.reorder_rng.chance(p.reorder) {
            self.stats.reordered += 1;
            at += p.reorder_delay;
        }
        let duplicate = self.dup_rng.chance(p.duplicate);
        // A packet that would arrive during an outage (of this or a later phase) is lost too.
        let arrival_phase = &self.schedule.phases()[self.schedule.index_at(at)];
        if arrival_phase.in_outage(at) {
            self.stats.outage_drops += 1;
            return Fate::Dropped(DropCause::Outage);
        }
        self.stats.duplicated += u64::from(duplicate);
        Fate::Delivered {
            at,
            queue_delay: backlog,
            duplicate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::Phase;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn serialisation_delay_and_queue_drops() {
        // 12 Mbit/s: a 1500-byte packet takes 1 ms. Queue of 2 ms, RTT 20 ms.
        let mut p = Phase::clean(ms(0), 12_000_000, ms(20));
        p.queue = ms(2);
        let mut l = Link::new(Schedule::new(vec![p]).unwrap(), 1, 0);
        let t = Instant::from_millis(100);
        let fates: Vec<_> = (0..5).map(|_| l.transmit(t, 1500)).collect();
        assert_eq!(
            fates[0],
            Fate::Delivered {
                at: Instant::from_millis(111),
                queue_delay: ms(0),
                duplicate: false
            }
        );
        assert_eq!(
            fates[1],
            Fate::Delivered {
                at: Instant::from_millis(112),
                queue_delay: ms(1),
                duplicate: false
            }
        );
        assert_eq!(
            fates[2],
            Fate::Delivered {
                at: Instant::from_millis(113),
                queue_delay: ms(2),
                duplicate: false
            }
        );
        assert_eq!(fates[3], Fate::Dropped(DropCause::Queue));
        assert_eq!(l.stats().queue_drops, 2);
    }

    #[test]
    fn backlog_drains_at_the_new_rate_after_a_step_down() {
        let mut fast = Phase::clean(ms(0), 120_000_000, ms(0));
        fast.queue = ms(1000);
        let mut slow = Phase::clean(ms(10), 12_000_000, ms(0));
        slow.queue = ms(1000);
        let mut l = Link::new(Schedule::new(vec![fast, slow]).unwrap(), 1, 0);
        // 100 packets at 0.1 ms each: backlog until 10 ms, exactly the change.
        for _ in 0..100 {
            let _ = l.transmit(Instant::ZERO, 1500);
        }
        // Queue 5 ms more of work just before the change: at 120 Mbit/s that is 50 packets.
        let mut l2 = l.clone();
        for _ in 0..50 {
            let _ = l2.transmit(Instant::from_millis(5), 1500);
        }
        // After the change, the last 5 ms of work at the old rate take 50 ms at the new rate.
        match l2.transmit(Instant::from_millis(10), 1500) {
            Fate::Delivered { queue_delay, .. } => assert_eq!(queue_delay, ms(50)),
            f => panic!("{f:?}"),
        }
    }

    #[test]
    fn outage_drops_everything_in_its_window() {
        let mut p = Phase::clean(ms(1000), 1_000_000_000, ms(10));
        p.outage = ms(500);
        let mut l = Link::new(
            Schedule::new(vec![Phase::clean(ms(0), 1_000_000_000, ms(10)), p]).unwrap(),
            3,
            0,
        );
        // Sent at 996 ms, would arrive at 1001 ms: inside the outage.
        assert_eq!(
            l.transmit(Instant::from_millis(996), 100),
            Fate::Dropped(DropCause::Outage)
        );
        assert_eq!(
            l.transmit(Instant::from_millis(1200), 100),
            Fate::Dropped(DropCause::Outage)
        );
        assert!(matches!(
            l.transmit(Instant::from_millis(1500), 100),
            Fate::Delivered { .. }
        ));
    }

    #[test]
    fn same_seed_same_fates() {
        let mut p = Phase::clean(ms(0), 1_000_000_000, ms(10));
        p.loss = 0.05;
        p.reorder = 0.1;
        p.reorder_delay = ms(3);
        p.duplicate = 0.02;
        let s = Schedule::new(vec![p]).unwrap();
        let run = |seed| {
            let mut l = Link::new(s.clone(), seed, 0);
            (0..10_000)
                .map(|i| l.transmit(Instant::from_micros(i * 20), 1500))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
