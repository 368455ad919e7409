//! One direction of a path.
//!
//! A packet offered at `now` meets, in order: an outage (dropped), the drop-tail queue (dropped
//! if the backlog is longer than the phase's `queue`), serialisation at the phase's rate, random
//! or burst loss, half the RTT of propagation, reordering (a fraction delayed by
//! `reorder_delay`), duplication, and a stall.
//!
//! **Stalls** model what a busy host, a hypervisor's pause or a radio scheduler does to a path:
//! for `stall` at a time nothing arrives, then everything held arrives at once, in order, and
//! nothing is lost. The bottleneck keeps serving during a stall (the hold is after it), so a
//! stall adds delay but no queue and takes no capacity. Stall starts are a Poisson process with
//! mean gap `stall_every` (drawn from their own random stream, so a scenario without stalls
//! gives the same fates as before they existed); a packet whose arrival falls inside a stall
//! arrives at its end. The emulator's own scheduling delays look like this (lateness of
//! 0.1–0.2 ms mean and up to 25 ms on a busy 2-core VM), which is why the simulator has them.

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
    /// Held by a stall (counted whether or not later lost to an outage).
    pub stalled: u64,
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
    stall_rng: SimRng,
    /// The stall window generated last, `[start, end)`; later ones are drawn as arrivals pass it.
    stall_window: (Instant, Instant),
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
            stall_rng: SimRng::new(seed, direction * 16 + 4),
            stall_window: (Instant::ZERO, Instant::ZERO),
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

    /// When a packet due at `at` arrives, given the stalls of the phase in force (`self.phase`,
    /// at its sending). Windows are drawn in time order from the phase start or the last one's
    /// end, whichever is later; a reordered packet due before the current window is not held.
    fn after_stalls(&mut self, at: Instant) -> Instant {
        let p = &self.schedule.phases()[self.phase];
        if !p.stalls() {
            return at;
        }
        let (stall, every) = (p.stall, p.stall_every.as_secs_f64());
        let phase_start = Instant::ZERO + p.at;
        while self.stall_window.1 <= at {
            let from = self.stall_window.1.max(phase_start);
            // Exponential gap; 1 − u is in (0, 1], so the logarithm is finite.
            let gap = -(1.0 - self.stall_rng.unit()).ln() * every;
            let start = from.saturating_add(Duration::from_secs_f64(gap.min(1e9)));
            self.stall_window = (start, start.saturating_add(stall));
        }
        let (start, end) = self.stall_window;
        if at >= start {
            self.stats.stalled += 1;
            end
        } else {
            at
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
        let at = self.after_stalls(at);
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
    fn a_stall_holds_arrivals_and_releases_them_in_order_at_its_end() {
        // 120 Mbit/s, no queue limit to speak of, 10 ms RTT; stalls of 20 ms every 100 ms.
        let mut p = Phase::clean(ms(0), 120_000_000, ms(10));
        p.stall = ms(20);
        p.stall_every = ms(100);
        let mut l = Link::new(Schedule::new(vec![p]).unwrap(), 5, 0);
        let mut last = Instant::ZERO;
        let (mut held, mut max_hold) = (0, Duration::ZERO);
        // One 1500-byte packet every 0.1 ms for 10 s: the link is exactly full.
        for i in 0..100_000u64 {
            let now = Instant::from_micros(i * 100);
            match l.transmit(now, 1500) {
                Fate::Delivered {
                    at, queue_delay, ..
                } => {
                    assert!(at >= last, "stalls must not reorder");
                    assert!(queue_delay <= ms(1), "a stall adds no queue");
                    let hold = at.saturating_since(now + Duration::from_micros(100) + ms(5));
                    assert!(hold <= ms(20), "{hold:?}");
                    if hold > Duration::ZERO {
                        held += 1;
                        max_hold = max_hold.max(hold);
                    }
                    last = at;
                }
                f => panic!("a stall loses nothing: {f:?}"),
            }
        }
        // About a fifth of the time is stalled: 20 ms of every ~120 ms (a stall, then a gap
        // drawn from its end).
        assert!((12_000..22_000).contains(&held), "{held}");
        assert_eq!(l.stats().stalled, held);
        assert!(max_hold > ms(19), "{max_hold:?}");
    }

    #[test]
    fn stalls_do_not_move_other_fates() {
        let mut p = Phase::clean(ms(0), 1_000_000_000, ms(10));
        p.loss = 0.05;
        let run = |p: Phase| {
            let mut l = Link::new(Schedule::new(vec![p]).unwrap(), 3, 0);
            (0..10_000)
                .map(|i| {
                    matches!(
                        l.transmit(Instant::from_micros(i * 20), 1500),
                        Fate::Dropped(_)
                    )
                })
                .collect::<Vec<_>>()
        };
        let plain = run(p.clone());
        p.stall = ms(5);
        p.stall_every = ms(20);
        assert_eq!(run(p), plain);
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
