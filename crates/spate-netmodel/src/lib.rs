//! # spate-netmodel — what a path does to packets
//!
//! One model of a bottleneck path, used by both the discrete-event simulator (`spate-sim`,
//! virtual time) and the real-time emulator (`spate-lab emulate`), so a scenario means the same
//! thing in both. Nothing here does I/O or reads a clock: [`Link::transmit`] takes the time a
//! packet enters the link and returns its fate (dropped, and why; or delivered, when).
//!
//! The model of one direction, in the order a packet meets it:
//!
//! ```text
//!  enter ─► outage? ─► drop-tail queue ─► serialisation at the phase's rate ─► random loss
//!        ─► propagation (RTT/2) ─► optional extra reordering delay ─► arrival (maybe twice)
//! ```
//!
//! * **Phases** ([`Phase`]): rate, base RTT, loss, queue size, reordering, duplication and an
//!   optional outage, each holding from `at` until the next phase begins. Backlog carried across
//!   a rate change drains at the new rate.
//! * **Queue**: drop-tail, sized in time at the current rate: a packet is dropped when the work
//!   already waiting exceeds `queue`.
//! * **Loss**: independent (Bernoulli) or bursty (Gilbert–Elliott with a mean burst length),
//!   applied after the queue, as on a lossy radio hop behind the bottleneck.
//! * **Randomness**: every impairment draws from its own seeded xoshiro256++ stream, so turning
//!   reordering on does not change which packets are lost. Same seed ⇒ same fates, bit for bit.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod link;
mod loss;
mod path;
mod phase;
mod rng;
mod spec;

pub use link::{DropCause, Fate, Link, LinkStats};
pub use loss::LossModel;
pub use path::{Direction, Path};
pub use phase::{Phase, Schedule, ScheduleError};
pub use rng::SimRng;
pub use spate_proto::Instant;
pub use spec::{bps, PathSpec, SpecError, TomlText, MAX_RATE_MBPS};
