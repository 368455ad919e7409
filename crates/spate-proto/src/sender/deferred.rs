//! DATA payloads left for the sealer to fill: one pass over each byte instead of two.
//!
//! Written plainly, a DATA packet's payload is copied from the send buffer into the packet and
//! then encrypted there in place — two passes over bytes that by then have left the CPU's
//! cache (the source reads megabytes ahead). With the session's packets sealed right after
//! they are written ([`SecureSender::poll_transmit`](crate::secure::SecureSender)), the copy is
//! left out: the packet gets its header and DATA fields, and the sealer encrypts the payload
//! from the send buffer straight into the packet (an AEAD with a separate input for the rest
//! of the plaintext). The wire bytes are the same (spec §9.4). Measured (`spate-lab bench-end`
//! pair, 2 GiB file to file on loopback, session 48): the copy was 8.8 % of the sending
//! process's CPU samples.
//!
//! Only where one block holds the whole chunk: the chunk that straddles two blocks of the
//! source (one per block) is copied as before, as are manifest bytes, and every payload when
//! the driver seals on other threads (the send buffer may release a block before they run).

use crate::recovery::Chunk;

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
