//! Measurement filters for the delay controller: a windowed minimum and the receiver-measured
//! delivery rate.

use core::time::Duration;
use std::collections::VecDeque;

use crate::time::Instant;

/// Minimum of the values pushed within the last `window` (monotonic deque: O(1) amortised).
/// Of equal values the newest is kept: [`WindowedMin::age`] is the time since the minimum
/// was last seen. (Keeping the oldest made every drain, which sees the floor again, look 8 s
/// old at once, so drains repeated every probe until the old sample expired.)
#[derive(Debug, Clone)]
pub struct WindowedMin {
    window: Duration,
    /// (time, value), values strictly increasing from front to back.
    q: VecDeque<(Instant, i64)>,
}

impl WindowedMin {
    /// A filter over `window`.
    pub fn new(window: Duration) -> Self {
        WindowedMin {
            window,
            q: VecDeque::new(),
        }
    }

    /// Add a sample.
    pub fn push(&mut self, now: Instant, v: i64) {
        while self.q.back().is_some_and(|&(_, b)| b >= v) {
            self.q.pop_back();
        }
        self.q.push_back((now, v));
        self.expire(now);
    }

    fn expire(&mut self, now: Instant) {
        while self.q.len() > 1
            && self
                .q
                .front()
                .is_some_and(|&(t, _)| now.saturating_since(t) > self.window)
        {
            self.q.pop_front();
        }
    }

    /// The minimum over the window ending at `now` (the latest sample if all expired).
    pub fn get(&mut self, now: Instant) -> Option<i64> {
        self.expire(now);
        self.q.front().map(|&(_, v)| v)
    }

    /// How long ago the current minimum was seen.
    pub fn age(&mut self, now: Instant) -> Option<Duration> {
        self.expire(now);
        self.q.front().map(|&(t, _)| now.saturating_since(t))
    }

    /// Forget everything and start from `v`.
    pub fn reset(&mut self, now: Instant, v: i64) {
        self.q.clear();
        self.q.push_back((now, v));
    }

    /// Change the window length.
    pub fn set_window(&mut self, window: Duration) {
        self.window = window;
    }
}

/// Maximum of the values pushed within the last `window`: a [`WindowedMin`] of their
/// negations.
#[derive(Debug, Clone)]
pub struct WindowedMax(WindowedMin);

impl WindowedMax {
    /// A filter over `window`.
    pub fn new(window: Duration) -> Self {
        WindowedMax(WindowedMin::new(window))
    }

    /// Add a sample.
    pub fn push(&mut self, now: Instant, v: i64) {
        self.0.push(now, v.saturating_neg());
    }

    /// The maximum over the window ending at `now`.
    pub fn get(&mut self, now: Instant) -> Option<i64> {
        self.0.get(now).map(i64::saturating_neg)
    }

    /// Change the window (samples older than it leave at the next push or get).
    pub fn set_window(&mut self, window: Duration) {
        self.0.set_window(window);
    }
}

/// The pacing rates of the last few seconds, so a delivery rate can be compared with the rate
/// its packets were sent at (one loop delay earlier).
#[derive(Debug, Clone, Default)]
pub struct RateHistory {
    /// (time, bits/s), time increasing.
    samples: VecDeque<(Instant, f64)>,
}

impl RateHistory {
    /// How far back rates are kept: beyond the longest loop delay of interest (400 ms RTT, its
    /// queue and the delivery window).
    pub(super) const KEEP: Duration = Duration::from_secs(4);

    /// Record that the rate is `rate` from `now` on.
    pub fn push(&mut self, now: Instant, rate: f64) {
        self.samples.push_back((now, rate));
        while self
            .samples
            .front()
            .is_some_and(|&(t, _)| now.saturating_since(t) > Self::KEEP)
        {
            self.samples.pop_front();
        }
    }

    /// The rate in force at `t`, or `None` if `t` is before the oldest rate kept (then
    /// nobody knows what was sent: at the start of a transfer, or right after [`clear`]).
    ///
    /// [`clear`]: RateHistory::clear
    pub fn at(&self, t: Instant) -> Option<f64> {
        let i = self.samples.partition_point(|&(s, _)| s <= t);
        i.checked_sub(1).map(|i| self.samples[i].1)
    }

    /// Forget history.
    pub fn clear(&mut self) {
        self.samples.clear();
    }
}

/// A cumulative count of bits, marked once per report, so that what was counted over a past
/// window can be read: the sending capacity the sender left unused (pacing credit it forfeited
/// because it had nothing to send or could not keep pace), against which a past window's
/// pacing rate is compared with what actually left.
#[derive(Debug, Clone, Default)]
pub struct BitTally {
    /// Bits counted so far.
    total: f64,
    /// (time, `total` then), time increasing; kept as long as [`RateHistory`] keeps rates.
    marks: VecDeque<(Instant, f64)>,
}

impl BitTally {
    /// Count `bits` more.
    pub fn add(&mut self, bits: f64) {
        self.total += bits;
    }

    /// Remember the total at `now` (called once per report).
    pub fn mark(&mut self, now: Instant) {
        self.marks.push_back((now, self.total));
        while self
            .marks
            .front()
            .is_some_and(|&(t, _)| now.saturating_since(t) > RateHistory::KEEP)
        {
            self.marks.pop_front();
        }
    }

    /// Bits per second counted between the last marks at or before `from` and `to`; zero
    /// when no mark is that old (at the start, and after [`clear`](BitTally::clear)).
    pub fn rate(&self, from: Instant, to: Instant) -> f64 {
        let at = |t: Instant| self.mark_at(t).map(|i| self.marks[i]);
        match (at(from), at(to)) {
            (Some((t0, v0)), Some((t1, v1))) if t1 > t0 => {
                (v1 - v0) / t1.saturating_since(t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// Bits counted since `from`; `None` when no mark is that old. Between two marks the count
    /// is taken to have grown evenly: reports come every 10 ms, which at 250 Mbit/s is 10 ms
    /// of a 200 ms pipe, and the overshoot drain's end read from the mark before swung by
    /// that much from report to report.
    pub fn since(&self, from: Instant) -> Option<f64> {
        let i = self.mark_at(from)?;
        let (t0, v0) = self.marks[i];
        let at_from = match self.marks.get(i + 1) {
            Some(&(t1, v1)) if t1 > t0 => {
                let f =
                    from.saturating_since(t0).as_secs_f64() / t1.saturating_since(t0).as_secs_f64();
                v0 + f * (v1 - v0)
            }
            _ => v0,
        };
        Some(self.total - at_from)
    }

    /// The index of the last mark at or before `t`.
    fn mark_at(&self, t: Instant) -> Option<usize> {
        self.marks.partition_point(|&(s, _)| s <= t).checked_sub(1)
    }

    /// Forget history (after an outage).
    pub fn clear(&mut self) {
        self.marks.clear();
    }
}

/// Delivery rate from the receiver's cumulative byte counter and its clock, over a window.
///
/// Both numbers come from the receiver, so the rate is what arrived at the far end, unaffected
/// by feedback delay or lost reports (a lost report only widens the interval of the next).
#[derive(Debug, Clone, Default)]
pub struct DeliveryRate {
    /// (receiver µs, receiver cumulative bytes)
    samples: VecDeque<(u64, u64)>,
}

impl DeliveryRate {
    /// Add a report's numbers.
    pub fn push(&mut self, recv_us: u64, bytes: u64) {
        if self
            .samples
            .back()
            .is_some_and(|&(t, b)| recv_us <= t || bytes < b)
        {
            return; // reordered or stale report
        }
        self.samples.push_back((recv_us, bytes));
        while self.samples.len() > 256 {
            self.samples.pop_front();
        }
    }

    /// Bytes per second over at least `window` (up to the oldest of the 256 samples kept), if
    /// two samples span at least half the window. Does not discard history, so windows of
    /// different lengths can be asked for in turn.
    pub fn rate(&self, window: Duration) -> Option<u64> {
        let &(t1, b1) = self.samples.back()?;
        let w = window.as_micros() as u64;
        // The latest sample at least `w` before the newest, or the oldest kept.
        let later = self.samples.partition_point(|&(t, _)| t1 - t >= w);
        let &(t0, b0) = self.samples.get(later.saturating_sub(1))?;
        let span = t1 - t0;
        if span == 0 || span < w / 2 {
            return None;
        }
        Some(((u128::from(b1 - b0) * 1_000_000) / u128::from(span)) as u64)
    }

    /// Forget history (after an outage the old samples describe another path).
    pub fn clear(&mut self) {
        self.samples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_since_reads_between_marks_as_even() {
        let mut t = BitTally::default();
        t.add(5e6); // before the first mark
        t.mark(Instant::from_millis(0));
        t.add(1e6);
        t.mark(Instant::from_millis(10));
        t.add(2e6);
        t.mark(Instant::from_millis(20));
        t.add(4e6); // not yet marked, but counted
        assert_eq!(t.since(Instant::from_millis(10)), Some(6e6));
        assert_eq!(t.since(Instant::from_millis(15)), Some(5e6));
        assert_eq!(t.since(Instant::from_millis(25)), Some(4e6));
        assert_eq!(t.since(Instant::ZERO), Some(7e6));
        t.clear();
        assert_eq!(t.since(Instant::from_millis(15)), None);
    }

    #[test]
    fn tally_rate_covers_marked_windows_only() {
        let mut u = BitTally::default();
        u.add(1e9); // before the first mark: the start-up gap, not counted
        u.mark(Instant::from_millis(0));
        u.add(1e6);
        u.mark(Instant::from_millis(10));
        u.add(3e6);
        u.mark(Instant::from_millis(20));
        assert_eq!(
            u.rate(Instant::from_millis(0), Instant::from_millis(20)),
            2e8
        );
        assert_eq!(
            u.rate(Instant::from_millis(15), Instant::from_millis(25)),
            3e8
        );
        assert_eq!(u.rate(Instant::ZERO, Instant::ZERO), 0.0);
        u.clear();
        assert_eq!(
            u.rate(Instant::from_millis(0), Instant::from_millis(20)),
            0.0
        );
    }

    #[test]
    fn windowed_min_expires_old_minimum() {
        let mut f = WindowedMin::new(Duration::from_millis(100));
        f.push(Instant::from_millis(0), 5);
        f.push(Instant::from_millis(50), 9);
        assert_eq!(f.get(Instant::from_millis(60)), Some(5));
        assert_eq!(f.get(Instant::from_millis(120)), Some(9));
        f.push(Instant::from_millis(130), 7);
        assert_eq!(f.get(Instant::from_millis(130)), Some(7));
    }

    #[test]
    fn rate_history_looks_back() {
        let mut h = RateHistory::default();
        assert_eq!(h.at(Instant::from_millis(5)), None);
        h.push(Instant::from_millis(10), 1.0);
        h.push(Instant::from_millis(20), 2.0);
        assert_eq!(h.at(Instant::from_millis(5)), None);
        assert_eq!(h.at(Instant::from_millis(15)), Some(1.0));
        assert_eq!(h.at(Instant::from_millis(20)), Some(2.0));
        h.push(Instant::from_millis(10_000), 3.0);
        assert_eq!(h.at(Instant::from_millis(15)), None);
        assert_eq!(h.at(Instant::from_millis(10_000)), Some(3.0));
    }

    #[test]
    fn delivery_rate_over_window() {
        let mut d = DeliveryRate::default();
        for i in 0..=100u64 {
            d.push(i * 1000, i * 1250); // 1.25 MB/s
        }
        assert_eq!(d.rate(Duration::from_millis(50)), Some(1_250_000));
        let mut e = DeliveryRate::default();
        e.push(0, 0);
        assert_eq!(e.rate(Duration::from_millis(50)), None);
    }
}

/// Fraction of sent bytes lost, averaged exponentially over a horizon: the receiver's
/// delivery rate is the bottleneck's output *after* random loss, so a flow steering towards
/// it would shrink by the loss rate every loop; dividing by `1 − loss` recovers what the
/// bottleneck drained. Capped at [`LossFraction::MAX`] so a burst of congestion drops (which
/// come with a full queue, which the steering rule drains anyway) cannot inflate the rate.
#[derive(Debug, Clone, Copy, Default)]
pub struct LossFraction {
    acked: f64,
    lost: f64,
}

impl LossFraction {
    /// Largest fraction reported.
    pub const MAX: f64 = 0.2;

    /// Decay the history by `elapsed` horizons, then add a report's bytes.
    pub fn push(&mut self, elapsed: f64, acked: u64, lost: u64) {
        let keep = (-elapsed).exp();
        self.acked = self.acked * keep + acked as f64;
        self.lost = self.lost * keep + lost as f64;
    }

    /// The smoothed loss fraction, 0..=MAX.
    pub fn fraction(&self) -> f64 {
        let total = self.acked + self.lost;
        if total <= 0.0 {
            0.0
        } else {
            (self.lost / total).min(Self::MAX)
        }
    }
}
