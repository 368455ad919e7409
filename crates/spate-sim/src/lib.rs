//! # spate-sim — Spate in virtual time
//!
//! A deterministic discrete-event simulator: it runs real [`spate_proto`] sessions, exchanging
//! real wire bytes, over a [`spate_netmodel`] path, in virtual time. The seed experiments of
//! `SEEDS.md` (10 Gbit/s, 400 ms, 2 % loss, handovers) run here in seconds to minutes of CPU.
//!
//! * [`Scenario`] — the TOML scenario format (version 1), with errors that name key and line.
//! * [`run`] — the event loop; returns a [`Report`] (JSON-serialisable) and a [`TimeSeries`].
//! * Every delivered byte is checked: object content is a seeded function of (object, offset),
//!   the receiver compares each chunk and both ends keep an order-independent digest
//!   (see `pattern.rs`).
//!
//! Determinism: the simulator has no source of nondeterminism — no clock, no OS randomness, no
//! hash-map iteration; same scenario and seed give the same report, bit for bit.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod engine;
mod flow;
pub mod metrics;
pub mod pattern;
pub mod report;
pub mod scenario;
pub mod tcp;

pub use engine::{run, SimError, SimResult};
pub use metrics::Recorder;
pub use report::{FlowReport, PhaseReport, Report, TimeSeries};
pub use scenario::{FlowSpec, Protocol, Scenario, ScenarioError, MAX_BATCH};
