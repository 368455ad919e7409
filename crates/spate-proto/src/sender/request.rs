//! Asking for reports sooner than the Feedback Interval (`docs/spec.md` §4.3, §6.5).
//!
//! > §6.5: A sender MAY set PROBE on a DATA packet to ask for a report before the Feedback
//! > Interval has passed. The reference sender does so on one packet once both
//! > `max(smoothed RTT, 1 ms)` and 32 DATA packets have passed since its last request, and
//! > only while `max(smoothed RTT, 1 ms)` is shorter than the Feedback Interval.
//!
//! Why: the rate controller grows by at most one doubling per report and per RTT (`cc/delay`).
//! On a path whose RTT is far below the 10 ms interval, the interval, not the path, sets the
//! pace: a veth pair (RTT ~100 µs) took 110–150 ms to climb from 10 Mbit/s to 20–25 Gbit/s,
//! a fifth of a 2 GiB transfer. Asking for a report about once per RTT gives the controller
//! what it would get on a long path, and costs nothing there: at 10 ms of RTT or more the
//! sender never asks.
//!
//! The constants, and what they bound:
//! * [`REQUEST_SPACING`] 1 ms: at most 1 000 extra reports a second. A report is 40–300 bytes,
//!   so at most ~2.4 Mbit/s of reverse traffic, and at 25 Gbit/s one report per ~2 000 data
//!   packets. The controller's delay filter then spans three reports (3 ms) and growth waits
//!   for it (`cc/delay`): a doubling per 3 ms instead of per 10 ms.
//! * [`REQUEST_PACKETS`] 32: a slow flow on a short path (10 Mbit/s is under one packet per
//!   millisecond) never gets one report per few packets; requests start at about 380 Mbit/s
//!   with RTTs under 1 ms and cost at most one report per 32 data packets (< 0.2 % of the bytes).
//!
//! Measured (veth pair, 2 GiB memory to memory, ten interleaved sends each): 23.8–28.8 Gbit/s
//! (median 25.0) with requests, 17.8–23.3 (median 21.0) without. In the simulator's 1 Gbit/s
//! RTT-0 rows the feedback volume rises from 70–330 to 590–840 KiB per GiB (under 0.1 % of the
//! bytes) and queue drops at start-up fall (retransmission 0.09 → 0.01 % without random loss).

use core::time::Duration;

use super::Sender;
use crate::time::Instant;

/// Shortest time between two report requests.
pub const REQUEST_SPACING: Duration = Duration::from_millis(1);
/// Fewest DATA packets between two report requests.
pub const REQUEST_PACKETS: u32 = 32;

impl Sender {
    /// Count one DATA packet about to be sent at `now`; true if it should carry PROBE to ask
    /// for a report at once.
    pub(super) fn request_report(&mut self, now: Instant) -> bool {
        self.since_request = self.since_request.saturating_add(1);
        let spacing = self.rtt.smoothed().max(REQUEST_SPACING);
        if !self.rtt.has_sample()
            || spacing >= self.cfg.feedback_interval
            || self.since_request < REQUEST_PACKETS
            || now < self.last_request_at + spacing
        {
            return false;
        }
        self.since_request = 0;
        self.last_request_at = now;
        self.stats.report_requests += 1;
        true
    }
}
