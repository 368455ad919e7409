//! DATA payloads left for the sealer to fill: one pass over each byte instead of two.
//!
//! Written plainly, a DATA packet's payload is copied from the send buffer into the packet and
//! then encrypted there in place — two passes over bytes that by then have left the CPU's
//! cache (the source reads megabytes ahead). A [`SecureSender`](crate::secure::SecureSender)
//! leaves the copy out: the packet gets its header and DATA fields, and the sealer encrypts
//! the payload from the send buffer straight into the packet (an AEAD with a separate input
//! for the rest of the plaintext). The wire bytes are the same (spec §9.4). Measured
//! (`spate-lab bench-end` pair, 2 GiB file to file on loopback, session 48): the copy was
//! 8.8 % of the sending process's CPU samples.
//!
//! Only where one block holds the whole chunk: the chunk that straddles two blocks of the
//! source (one per block) is copied as before, as are manifest bytes. A batch sealed on
//! another thread ([`Sealer`](crate::secure::Sealer)) takes its payloads along as [`Payload`]s:
//! shared handles on their blocks, which the send buffer may release meanwhile (a released
//! block's memory then goes when the sealer is done with it, not back to the source).

use core::ops::Range;
use std::sync::Arc;

use super::Sender;
use crate::recovery::Chunk;

/// A DATA payload for a sealer on another thread: where its packet starts in the batch, and
/// its bytes — a block of the send buffer, shared, and the range in it; `None` only if the
/// send buffer no longer held them (nothing between writing and handing over can cause it),
/// and then the packet is left unsealed: it does not open, and is lost like any other.
#[derive(Debug, Clone)]
pub(crate) struct Payload {
    pub(crate) at: usize,
    pub(crate) bytes: Option<(Arc<Vec<u8>>, Range<usize>)>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    /// Leave payloads unfilled during this `poll_transmit`.
    pub on: bool,
    /// The DATA packets written without their payload: where each starts in the caller's
    /// buffer, and its chunk.
    pub packets: Vec<(usize, Chunk)>,
}

impl Deferred {
    /// Start a `poll_transmit` that leaves payloads unfilled (`on`) or fills them.
    pub fn start(&mut self, on: bool) {
        self.on = on;
        self.packets.clear();
    }
}

impl Sender {
    /// The DATA packets of the last [`poll_transmit_deferring`](Sender::poll_transmit_deferring)
    /// left without their payload: where each starts in its buffer, and the payload's bytes
    /// (`None` only if the send buffer no longer held them, which nothing between the two
    /// calls can cause).
    pub(crate) fn deferred_payloads(&self) -> impl Iterator<Item = (usize, Option<&[u8]>)> {
        self.deferred
            .packets
            .iter()
            .map(|&(at, c)| (at, self.buffer.slice(c)))
    }

    /// The payloads the last [`poll_transmit_deferring`](Sender::poll_transmit_deferring) left
    /// out, for a sealer on another thread.
    pub(crate) fn deferred_shared(&self) -> Vec<Payload> {
        self.deferred
            .packets
            .iter()
            .map(|&(at, c)| Payload {
                at,
                bytes: self.buffer.shared(c),
            })
            .collect()
    }
}
