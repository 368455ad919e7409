//! A whole path: both directions and the packets in flight on them.
//!
//! [`Path`] is what the simulator (virtual time) and the emulator and demo relay (real time)
//! drive, so all three give a packet the same fate and hold it for the same time:
//!
//! ```text
//!  send(now, dir, bytes, make) ─► Link[dir].transmit ─► Dropped ─► counted, nothing held
//!                                                    └► Delivered{at} ─► delay line (1 or 2 copies)
//!  next_arrival() ─► earliest `at`;  pop_due(now) ─► (dir, item) in (at, send order)
//! ```
//!
//! The delay line is a min-heap keyed by (arrival time, send sequence), so packets that arrive
//! at the same instant leave in the order they were sent: a run is a pure function of its
//! inputs. The caller owns what a packet is (`T`): real bytes in a reusable buffer for the
//! emulator, a slot index for the simulator.

use core::cmp::Reverse;
use std::collections::BinaryHeap;

use spate_proto::Instant;

use crate::link::{Fate, Link};
use crate::phase::Schedule;

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Sender → receiver (data).
    Forward,
    /// Receiver → sender (feedback, ACKs).
    Reverse,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::Forward => 0,
            Direction::Reverse => 1,
        }
    }
}

/// Both directions of a path, with the packets in flight.
#[derive(Debug)]
pub struct Path<T> {
    links: [Link; 2],
    line: BinaryHeap<Reverse<(Instant, u64, u32)>>,
    slots: Vec<Option<(Direction, T)>>,
    free: Vec<u32>,
    seq: u64,
}

impl<T> Path<T> {
    /// A path following `schedule` in both directions, its random streams derived from `seed`.
    pub fn new(schedule: Schedule, seed: u64) -> Self {
        Path {
            links: [
                Link::new(schedule.clone(), seed, 0),
                Link::new(schedule, seed, 1),
            ],
            line: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }

    /// One direction's link (its counters, schedule and current phase).
    pub fn link(&self, dir: Direction) -> &Link {
        &self.links[dir.index()]
    }

    /// Offer a packet of `wire_bytes` (IP bytes) to direction `dir` at `now`. If the link
    /// delivers it, `make` is called once per copy (twice when the path duplicates it) and the
    /// copies are held until their arrival time. Calls must come in non-decreasing `now`.
    pub fn send(
        &mut self,
        now: Instant,
        dir: Direction,
        wire_bytes: u64,
        mut make: impl FnMut() -> T,
    ) -> Fate {
        let fate = self.links[dir.index()].transmit(now, wire_bytes);
        if let Fate::Delivered { at, duplicate, .. } = fate {
            for _ in 0..1 + usize::from(duplicate) {
                self.hold(at, dir, make());
            }
        }
        fate
    }

    fn hold(&mut self, at: Instant, dir: Direction, item: T) {
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some((dir, item));
                s
            }
            None => {
                self.slots.push(Some((dir, item)));
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.seq += 1;
        self.line.push(Reverse((at, self.seq, slot)));
    }

    /// When the earliest packet in flight arrives.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.line.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Packets in flight (both directions).
    pub fn in_flight(&self) -> usize {
        self.line.len()
    }

    /// The earliest packet whose arrival time is at or before `now`, if any.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Direction, T)> {
        loop {
            let &Reverse((at, _, slot)) = self.line.peek()?;
            if at > now {
                return None;
            }
            self.line.pop();
            let item = self.slots.get_mut(slot as usize).and_then(Option::take);
            self.free.push(slot);
            if item.is_some() {
                return item;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::Phase;
    use core::time::Duration;

    #[test]
    fn holds_each_packet_for_its_fate_and_keeps_send_order_on_ties() {
        let ms = Duration::from_millis;
        let mut p = Phase::clean(ms(0), 12_000_000, ms(20));
        p.duplicate = 1.0;
        let mut path = Path::new(Schedule::new(vec![p]).unwrap(), 1);
        let t = Instant::from_millis(5);
        let mut n = 0;
        for _ in 0..2 {
            let _ = path.send(t, Direction::Forward, 1500, || {
                n += 1;
                n
            });
        }
        let _ = path.send(t, Direction::Reverse, 1500, || 100);
        // Forward: 1 ms of serialisation each, then 10 ms; reverse: its own link.
        assert_eq!(path.next_arrival(), Some(Instant::from_millis(16)));
        assert_eq!(path.pop_due(Instant::from_millis(15)), None);
        let due: Vec<_> = std::iter::from_fn(|| path.pop_due(Instant::from_millis(17))).collect();
        assert_eq!(
            due,
            vec![
                (Direction::Forward, 1),
                (Direction::Forward, 2),
                (Direction::Reverse, 100),
                (Direction::Reverse, 100),
                (Direction::Forward, 3),
                (Direction::Forward, 4)
            ]
        );
        assert_eq!(path.in_flight(), 0);
        assert_eq!(path.link(Direction::Forward).stats().duplicated, 2);
    }
}
