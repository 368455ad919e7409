//! Rebuilding one block, as work that owns its data (`docs/spec.md` §6.9).
//!
//! A rebuild is the costly part of coding on the receiver (an FFT over the block's shards:
//! 13–17 % of a core per Gbit/s of coded data, `spate-lab bench-fec`), so the receiver hands
//! it out as a [`RebuildJob`] that a driver may run on another thread
//! ([`ReceiverConfig::rebuild_elsewhere`](crate::ReceiverConfig::rebuild_elsewhere)); the
//! result comes back as a [`RebuildDone`]. Run inline (the default, and what the simulator
//! does), nothing changes but where the time goes.

use super::store::RebuiltChunk;

/// A block whose kept chunks and symbols suffice to rebuild it, with everything the rebuild
/// needs, owned.
#[derive(Debug)]
pub struct RebuildJob {
    pub(super) object: u32,
    pub(super) first: u32,
    pub(super) count: u32,
    pub(super) chunk: usize,
    pub(super) object_len: u64,
    /// Kept chunks (index within the block, bytes padded to the chunk size).
    pub(super) have: Vec<(usize, Vec<u8>)>,
    /// Symbols (index, bytes).
    pub(super) symbols: Vec<(usize, Vec<u8>)>,
    /// Bytes of the store's budget the job holds until it is done.
    pub(super) bytes: u64,
}

/// What a [`RebuildJob`] produced, for [`Receiver::finish_rebuild`](crate::Receiver::finish_rebuild).
#[derive(Debug)]
pub struct RebuildDone {
    pub(super) object: u32,
    pub(super) first: u32,
    pub(super) bytes: u64,
    /// The chunks the block lacked, cut at the object's end; `None` if the code refused.
    pub(super) chunks: Option<Vec<RebuiltChunk>>,
}

impl RebuildJob {
    /// Bytes the job holds (copies and symbols).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Rebuild the block. Pure computation: any thread.
    pub fn run(self) -> RebuildDone {
        let decoded = super::decode(
            self.count,
            self.have.iter().map(|(i, b)| (*i, b.as_slice())),
            self.symbols.iter().map(|(i, s)| (*i, s.as_slice())),
        );
        let c = self.chunk as u64;
        let chunks = decoded.ok().map(|rebuilt| {
            rebuilt
                .into_iter()
                .filter_map(|(i, mut bytes)| {
                    let offset = u64::from(self.first + i as u32) * c;
                    (offset < self.object_len).then(|| {
                        bytes.truncate((self.object_len - offset).min(c) as usize);
                        RebuiltChunk {
                            object: self.object,
                            offset,
                            bytes,
                        }
                    })
                })
                .collect()
        });
        RebuildDone {
            object: self.object,
            first: self.first,
            bytes: self.bytes,
            chunks,
        }
    }
}

impl RebuildDone {
    /// The block: (object, first chunk).
    pub fn block(&self) -> (u32, u32) {
        (self.object, self.first)
    }

    pub(crate) fn into_chunks(self) -> Option<Vec<RebuiltChunk>> {
        self.chunks
    }
}
