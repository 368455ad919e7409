//! Rate control (`docs/spec.md` §7).
//!
//! The sender decides the rate; the receiver only measures. A controller sees the events below
//! and answers one question, [`RateControl::pacing_rate`]. Controllers are dispatched through
//! the [`Controller`] enum rather than a trait object, so the per-packet calls inline.
//!
//! | file | policy |
//! |---|---|
//! | `fixed.rs` | `fixed`: the configured rate, no adaptation |
//! | `delay/` | `fair`, `high`, `low`: the adaptive delay-based controller |

pub mod delay;
mod fixed;

use core::time::Duration;

pub use delay::{Delay, DelayTrace, DEFAULT_QUEUE_TARGET};
pub use fixed::Fixed;

use crate::time::Instant;

/// What one FEEDBACK told the sender, distilled for rate control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSample {
    /// Most recent RTT sample, if this report produced one.
    pub rtt: Option<Duration>,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// Windowed minimum RTT.
    pub min_rtt: Duration,
    /// One-way delay of the largest acknowledged packet, µs, on an unknown clock offset
    /// (receiver receive time − sender send time); only differences between samples mean
    /// anything.
    pub one_way_delay_us: Option<i64>,
    /// Cumulative DATA bytes the receiver reports having received.
    pub receiver_bytes: u64,
    /// Receiver clock (µs) when it received the largest packet.
    pub receiver_time_us: u64,
    /// Datagram bytes newly acknowledged by this report.
    pub acked_bytes: u64,
    /// Datagram bytes newly declared lost while processing this report.
    pub lost_bytes: u64,
    /// Bytes in flight after processing the report.
    pub in_flight_bytes: u64,
    /// Current full datagram size (to convert receiver byte counts to IP bytes).
    pub datagram_bytes: u64,
    /// How long one batch of the sender's takes at its pacing rate: the queueing delay its
    /// own batches may add to the last packet of each (spec §7.1); zero without batching.
    pub batch_time: Duration,
}

/// The hooks a rate controller implements. Time is always explicit.
pub trait RateControl {
    /// Current pacing rate, bits per second (IP bytes, see spec §7.1).
    fn pacing_rate(&self) -> u64;
    /// A packet of `wire_bytes` left at `now`; before it the sender let `unused` of sending
    /// time pass that its pacer will not make up
    /// ([`Pacer::forfeited`](crate::pacer::Pacer::forfeited)): it had nothing to send, or
    /// could not send as fast as paced.
    fn on_sent(&mut self, now: Instant, wire_bytes: u64, unused: Duration);
    /// A report arrived.
    fn on_feedback(&mut self, now: Instant, sample: &RateSample);
    /// No feedback for several probe timeouts: the path is silent (outage or handover).
    fn on_path_silent(&mut self, now: Instant);
    /// Feedback arrived again after a silence.
    fn on_path_restored(&mut self, now: Instant);
    /// How the controller is sharing the path right now (for statistics and plots).
    fn mode(&self) -> RateMode;
}

/// How a controller is sharing the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateMode {
    /// A fixed rate.
    Fixed,
    /// Delay-based: holding a small queue.
    Delay,
    /// Competing with buffer-filling (loss-based) traffic on its terms.
    Competitive,
    /// Competing with BBR on its terms (recognised by its ProbeRTT).
    FollowingBbr,
}

impl RateMode {
    /// The mode's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            RateMode::Fixed => "fixed",
            RateMode::Delay => "delay",
            RateMode::Competitive => "competitive",
            RateMode::FollowingBbr => "following-bbr",
        }
    }

    /// Whether a sender in this mode may send datagrams in batches (spec §7.1). Not while it
    /// follows BBR's law: that buffer overflows by design, and a batch reaches it back to
    /// back, so the datagrams after the first find it full more often than paced ones; BBR's
    /// law sets its rate from its own delivery, so those losses lower it. In the emulator, 1×BDP
    /// next to kernel BBR, a `high` flow sending batches of up to 5 datagrams (100 Mbit/s,
    /// 500 µs) lost about 12 % of what it sent and took 49–57 % of the link; one datagram at a
    /// time it took 65–76 % (`docs/design.md`, "Session 63"). The CUBIC window law keeps its
    /// batches: its share is set by when it cuts, not by what it delivers, and sent singly it
    /// gained nothing ("Session 64").
    pub fn batches(self) -> bool {
        !matches!(self, RateMode::FollowingBbr)
    }

    /// The mode a report names.
    pub fn parse(name: &str) -> Option<RateMode> {
        [
            RateMode::Fixed,
            RateMode::Delay,
            RateMode::Competitive,
            RateMode::FollowingBbr,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }
}

/// Rate policy names as users and scenario files spell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Adaptive; shares the bottleneck equally with other `fair` flows (the default).
    Fair,
    /// Adaptive; takes about twice a `fair` flow's share.
    High,
    /// Adaptive scavenger; uses only capacity others leave idle: about 1/16 of a fair share
    /// against `fair` flows, and a few per cent next to TCP whatever the buffer
    /// (`delay/scavenge.rs`).
    Low,
    /// Send at the configured rate regardless of the path (unfair to other traffic).
    Fixed,
}

impl Policy {
    /// All policy names, for help texts and error messages.
    pub const NAMES: &'static str = "\"fair\", \"high\", \"low\", \"fixed\"";

    /// Parse a policy name.
    pub fn parse(name: &str) -> Option<Policy> {
        match name {
            "fair" => Some(Policy::Fair),
            "high" => Some(Policy::High),
            "low" => Some(Policy::Low),
            "fixed" => Some(Policy::Fixed),
            _ => None,
        }
    }

    /// The policy's name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fair => "fair",
            Policy::High => "high",
            Policy::Low => "low",
            Policy::Fixed => "fixed",
        }
    }
}

/// Rate settings of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    /// The policy.
    pub policy: Policy,
    /// The fixed rate, or the cap for adaptive policies (0: no cap); bits per second.
    pub rate_bps: u64,
    /// Never send slower than this, bits per second.
    pub min_rate_bps: u64,
    /// Bytes a `fair` flow keeps queued at the bottleneck (α of the delay controller); `high`
    /// keeps twice, `low` a sixteenth.
    pub queue_target_bytes: u64,
    /// `fair` and `high` flows compete with loss-based traffic that fills the bottleneck's
    /// buffer (CUBIC, Reno) instead of yielding to it (`delay/compete.rs`). Off by default: the
    /// detection can mistake other Spate flows that started at different times for such
    /// traffic (docs/design.md).
    pub compete: bool,
    /// The UTC time (nanoseconds since the Unix epoch) of the `Instant::ZERO` of the clock the
    /// session runs on; 0 where every flow reads one clock (a simulation). Adaptive flows
    /// drain their queue at multiples of 8 s of UTC, so that flows of different hosts with
    /// synchronised clocks drain together (`delay/grid.rs`).
    pub epoch_utc_ns: u64,
}

impl RateConfig {
    /// A fixed-rate configuration.
    pub fn fixed(rate_bps: u64) -> Self {
        RateConfig {
            policy: Policy::Fixed,
            rate_bps,
            min_rate_bps: 0,
            queue_target_bytes: DEFAULT_QUEUE_TARGET,
            compete: false,
            epoch_utc_ns: 0,
        }
    }

    /// An adaptive configuration with no cap and no floor.
    pub fn adaptive(policy: Policy) -> Self {
        RateConfig {
            policy,
            rate_bps: 0,
            min_rate_bps: 0,
            queue_target_bytes: DEFAULT_QUEUE_TARGET,
            compete: false,
            epoch_utc_ns: 0,
        }
    }
}

/// The controller of one session.
#[derive(Debug, Clone)]
// One controller lives in each session, never in bulk collections, so the size difference
// between variants costs nothing; boxing would add an indirection to every per-packet call.
#[allow(clippy::large_enum_variant)]
pub enum Controller {
    /// `fixed` policy.
    Fixed(Fixed),
    /// `fair`, `high`, `low` policies.
    Delay(Delay),
}

impl Controller {
    /// Build the controller a configuration asks for.
    pub fn new(cfg: &RateConfig) -> Self {
        let q = cfg.queue_target_bytes;
        let delay = |alpha, n: f64| {
            let d = Delay::new(alpha, cfg.rate_bps, cfg.min_rate_bps).on_clock(cfg.epoch_utc_ns);
            Controller::Delay(if cfg.compete { d.competing_as(n) } else { d })
        };
        match cfg.policy {
            Policy::Fixed => Controller::Fixed(Fixed::new(cfg.rate_bps.max(cfg.min_rate_bps))),
            Policy::Fair => delay(q, 1.0),
            Policy::High => delay(q.saturating_mul(2), 2.0),
            // A scavenger keeps yielding, and gives way to any queue others hold.
            Policy::Low => Controller::Delay(
                Delay::new(q / 16, cfg.rate_bps, cfg.min_rate_bps)
                    .on_clock(cfg.epoch_utc_ns)
                    .scavenging(),
            ),
        }
    }

    /// The adaptive controller's last report, inputs and verdicts (`None` for `fixed`).
    pub fn trace(&self) -> Option<DelayTrace> {
        match self {
            Controller::Fixed(_) => None,
            Controller::Delay(d) => Some(d.trace()),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Controller::Fixed($c) => $e,
            Controller::Delay($c) => $e,
        }
    };
}

impl RateControl for Controller {
    fn pacing_rate(&self) -> u64 {
        dispatch!(self, c => c.pacing_rate())
    }
    fn on_sent(&mut self, now: Instant, wire_bytes: u64, unused: Duration) {
        dispatch!(self, c => c.on_sent(now, wire_bytes, unused))
    }
    fn on_feedback(&mut self, now: Instant, sample: &RateSample) {
        dispatch!(self, c => c.on_feedback(now, sample))
    }
    fn on_path_silent(&mut self, now: Instant) {
        dispatch!(self, c => c.on_path_silent(now))
    }
    fn on_path_restored(&mut self, now: Instant) {
        dispatch!(self, c => c.on_path_restored(now))
    }
    fn mode(&self) -> RateMode {
        dispatch!(self, c => c.mode())
    }
}

#[cfg(test)]
mod mode_tests {
    use super::RateMode;

    #[test]
    fn mode_names_parse_back() {
        for m in [RateMode::Fixed, RateMode::Delay, RateMode::Competitive] {
            assert_eq!(RateMode::parse(m.name()), Some(m));
        }
        assert_eq!(RateMode::parse("fast"), None);
    }

    #[test]
    fn only_a_flow_following_bbr_sends_each_datagram_on_its_own() {
        assert!(RateMode::Fixed.batches() && RateMode::Delay.batches());
        assert!(RateMode::Competitive.batches() && !RateMode::FollowingBbr.batches());
    }
}
