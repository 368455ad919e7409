//! # spate-proto — the sans-IO core of Spate
//!
//! This crate is the whole Spate protocol with no I/O: the wire format (`docs/spec.md` §3–§5),
//! the sending and receiving sessions, loss detection and retransmission (§6) and rate control
//! (§7). A driver (the `spate` UDP event loop, the `spate-sim` simulator, a test) feeds it
//! datagrams and time and carries out what it asks.
//!
//! ## Determinism contract
//!
//! Nothing in this crate reads a clock, a socket, a file or the operating system's random
//! source. Time is an argument (`now: Instant`, nanoseconds since an epoch the caller picks);
//! randomness, where a session needs it (the session id), is chosen by the caller. Given the same
//! inputs in the same order, a session produces the same outputs, bit for bit, on every machine.
//! The simulator's bit-identical replays rest on this.
//!
//! ## Layers
//!
//! | module | what |
//! |---|---|
//! | [`wire`] | packet layouts: parse (never panics) and encode |
//! | [`manifest`] | object 0: the list of files and directories |
//! | [`recovery`] | RTT, the sent-packet ledger, time-based loss detection, reordering window |
//! | [`pacer`], [`cc`] | when packets leave: pacing and rate controllers |
//! | [`Sender`], [`Receiver`] | the two ends of a session |
//! | [`secure`] | the handshake and packet protection around them (§9) |
//! | [`endpoint`] | a server's sessions: lookup, admission, protection (§4.1, §4.8, §9) |
//! | [`vectors`] | byte-exact test vectors for other implementations (`docs/test-vectors/`) |
//!
//! ## Driving a session
//!
//! Both ends follow the same pattern (after quinn-proto and smoltcp): push input with
//! `handle_datagram(now, bytes)` and `handle_timeout(now)`, pull output with
//! `poll_transmit(now, buf)` until it returns `None`, ask `poll_timeout()` when to wake next, and
//! drain `poll_event()`. See `tests/pair.rs` for a complete virtual-time loop.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
mod codec;
pub mod coding;
pub mod config;
pub mod endpoint;
pub mod event;
pub mod manifest;
pub mod pacer;
pub mod pn;
pub mod ranges;
mod receiver;
pub mod recovery;
pub mod secure;
mod sender;
pub mod time;
pub mod vectors;
pub mod wire;

pub use cc::{Policy, RateConfig, RateMode};
pub use config::{ReceiverConfig, SenderConfig};
pub use event::{DropReason, ReceiverEvent, SenderEvent, SessionError};
pub use manifest::{Entry, EntryKind, Manifest};
pub use receiver::{DataChunk, Receiver, ReceiverStats, AMPLIFICATION_FACTOR};
pub use sender::{
    Sender, SenderStats, Source, Transmit, Zeros, MAX_PROBE_INTERVAL, REQUEST_PACKETS,
    REQUEST_SPACING,
};
pub use time::Instant;
