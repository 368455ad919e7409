//! Loss recovery (`docs/spec.md` §6).
//!
//! | file | concept |
//! |---|---|
//! | `rtt.rs` | round-trip time estimator (smoothed, variance, windowed minimum) |
//! | `reorder.rs` | the adaptive reordering window: how long to wait before calling a packet lost |
//! | `sent.rs` | the ledger of sent packets; acknowledgement and time-based loss detection |

mod reorder;
mod rtt;
mod sent;

pub use reorder::ReorderWindow;
pub use rtt::RttEstimator;
pub use sent::{AckOutcome, Chunk, SentKind, SentLedger, SentPacket};
