//! Admission: which HELLOs open a session, and what a session costs before its sender has
//! proven that it receives at its address (spec §4.8).
//!
//! A HELLO opens a *half-open* session. Until a PING with the session's token arrives it is
//! cheap — the receiver keeps the HELLO's manifest prefix (one datagram) and sends at most 3×
//! what it received — and it holds none of the `max_sessions` slots
//! ([`Endpoint::new`](super::Endpoint::new)) of sessions that move data. Half-open sessions
//! are limited apart:
//!
//! - at most [`MAX_HALF_OPEN`] at once; a HELLO beyond that evicts the oldest half-open
//!   session (silently: its sender, if real, repeats its HELLO and gets a new one);
//! - at most [`HALF_OPEN_PER_SOURCE`] per source IP address; further HELLOs from that address
//!   are ignored until one validates or goes;
//! - each lives at most [`HALF_OPEN_FOR`].
//!
//! So a flood of spoofed HELLOs (which never validate) only churns the half-open table: a
//! real sender's session lives [`MAX_HALF_OPEN`] ÷ (flood rate) seconds before eviction —
//! half a second at 2 000 HELLOs per second, many round trips — and, once validated, cannot be
//! evicted. A validated session beyond `max_sessions` is refused with CLOSE Refused ("busy"),
//! which is safe to send: the address is proven.
//!
//! IDs of sessions that ended after validation (or were refused with a CLOSE) are remembered
//! for [`ENDED_FOR`] (spec §4.1): a late HELLO with such an ID is answered with CLOSE Refused
//! and opens nothing. Evicted and expired half-open sessions are not remembered: their
//! sender's next HELLO must still work.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use crate::time::Instant;

/// Half-open sessions at once: 1024 × (one HELLO's prefix, ≤ 64 KiB, plus ~2 KiB of state)
/// is at most ~66 MiB, and at 1472-byte HELLOs ~3.5 MiB.
pub const MAX_HALF_OPEN: usize = 1024;
/// Half-open sessions per source address: a NAT with a few users starting transfers at once
/// fits; one host cannot fill the table by itself.
pub const HALF_OPEN_PER_SOURCE: usize = 16;
/// How long a session may stay half-open: a sender's PING follows its ACCEPT after one round
/// trip; 10 s is the reference sender's whole handshake timeout.
pub const HALF_OPEN_FOR: Duration = Duration::from_secs(10);
/// How long the ID of an ended session is remembered (spec §4.1): twice the default idle
/// timeout, longer than a HELLO can sensibly be delayed.
pub const ENDED_FOR: Duration = Duration::from_secs(120);
/// Ended session IDs remembered at most: beyond it the oldest are forgotten.
pub const MAX_ENDED: usize = 4096;

/// The bookkeeping of admission (the sessions themselves live in the server).
#[derive(Debug, Default)]
pub struct Admission {
    ended: HashSet<u32>,
    ended_order: VecDeque<(Instant, u32)>,
    /// Half-open sessions in the order they opened (may list sessions that since validated
    /// or ended; those are skipped).
    half_open_order: VecDeque<(Instant, u32)>,
    half_open_by_source: BTreeMap<IpAddr, usize>,
    half_open: usize,
    /// Validated sessions.
    pub validated: usize,
}

/// What to do with a HELLO for an unknown session ID.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Open a half-open session, after removing this one (the oldest half-open) if `Some`.
    Open(Option<u32>),
    /// The ID belongs to a session that ended: answer CLOSE Refused.
    Ended,
    /// Ignore it (its source has too many half-open sessions).
    Ignore,
}

impl Admission {
    /// True if `id` belongs to a session that ended recently (spec §4.1).
    pub fn is_ended(&self, id: u32) -> bool {
        self.ended.contains(&id)
    }

    /// Half-open sessions now.
    pub fn half_open(&self) -> usize {
        self.half_open
    }

    /// Decide about a HELLO with session ID `id` from `ip`. `is_half_open(id)` says whether a
    /// session is still half-open (for eviction).
    pub fn hello(&mut self, id: u32, ip: IpAddr, is_half_open: impl Fn(u32) -> bool) -> Verdict {
        if self.ended.contains(&id) {
            return Verdict::Ended;
        }
        if self.half_open_by_source.get(&ip).copied().unwrap_or(0) >= HALF_OPEN_PER_SOURCE {
            return Verdict::Ignore;
        }
        if self.half_open < MAX_HALF_OPEN {
            return Verdict::Open(None);
        }
        while let Some((_, old)) = self.half_open_order.pop_front() {
            if is_half_open(old) {
                return Verdict::Open(Some(old));
            }
        }
        Verdict::Open(None)
    }

    /// A half-open session `id` from `ip` was opened.
    pub fn opened(&mut self, now: Instant, id: u32, ip: IpAddr) {
        self.half_open += 1;
        *self.half_open_by_source.entry(ip).or_default() += 1;
        self.half_open_order.push_back((now, id));
        // Entries of sessions long gone would otherwise accumulate under a flood of HELLOs
        // that validate.
        if self.half_open_order.len() > 2 * MAX_HALF_OPEN {
            let keep = self
                .half_open_order
                .split_off(self.half_open_order.len() - MAX_HALF_OPEN);
            self.half_open_order = keep;
        }
    }

    /// Session `id` from `ip` is no longer half-open: it validated (`validated`) or went.
    pub fn left_half_open(&mut self, ip: IpAddr, validated: bool) {
        self.half_open = self.half_open.saturating_sub(1);
        if let Some(n) = self.half_open_by_source.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.half_open_by_source.remove(&ip);
            }
        }
        if validated {
            self.validated += 1;
        }
    }

    /// Remember that session `id` ended at `now` (spec §4.1).
    pub fn remember_ended(&mut self, now: Instant, id: u32) {
        while let Some(&(at, old)) = self.ended_order.front() {
            if now.saturating_since(at) <= ENDED_FOR && self.ended_order.len() < MAX_ENDED {
                break;
            }
            self.ended_order.pop_front();
            self.ended.remove(&old);
        }
        if self.ended.insert(id) {
            self.ended_order.push_back((now, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_evicts_the_oldest_half_open_session() {
        let mut a = Admission::default();
        let now = Instant::ZERO;
        for i in 0..MAX_HALF_OPEN as u32 {
            let ip = IpAddr::from([10, 0, (i >> 8) as u8, i as u8]);
            assert_eq!(a.hello(i, ip, |_| true), Verdict::Open(None));
            a.opened(now, i, ip);
        }
        // Session 0 validated meanwhile: its place is free, and then the oldest still
        // half-open, 1, makes room.
        a.left_half_open(IpAddr::from([10, 0, 0, 0]), true);
        let new = IpAddr::from([10, 9, 9, 9]);
        assert_eq!(a.hello(99_998, new, |id| id != 0), Verdict::Open(None));
        a.opened(now, 99_998, new);
        assert_eq!(a.hello(99_999, new, |id| id != 0), Verdict::Open(Some(1)));
        assert_eq!(a.validated, 1);
    }

    #[test]
    fn one_source_gets_a_bounded_share() {
        let mut a = Admission::default();
        let ip = IpAddr::from([192, 0, 2, 1]);
        for i in 0..HALF_OPEN_PER_SOURCE as u32 {
            assert_eq!(a.hello(i, ip, |_| true), Verdict::Open(None));
            a.opened(Instant::ZERO, i, ip);
        }
        assert_eq!(a.hello(1000, ip, |_| true), Verdict::Ignore);
        a.left_half_open(ip, false);
        assert_eq!(a.hello(1000, ip, |_| true), Verdict::Open(None));
    }

    #[test]
    fn ended_ids_are_remembered_for_a_while() {
        let mut a = Admission::default();
        a.remember_ended(Instant::ZERO, 7);
        assert_eq!(
            a.hello(7, IpAddr::from([127, 0, 0, 1]), |_| true),
            Verdict::Ended
        );
        a.remember_ended(Instant::from_millis(121_000), 8);
        assert_ne!(
            a.hello(7, IpAddr::from([127, 0, 0, 1]), |_| true),
            Verdict::Ended
        );
    }
}
