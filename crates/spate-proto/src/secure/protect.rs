//! An established session's protection: the one seal and the one open of every packet after
//! the handshake, in both wrappers (`docs/spec.md` §9.4).
//!
//! Opening checks the replay window first (cheap), then the AEAD, then marks the number: a
//! packet that does not open never touches the window, so a forger cannot slide it.

use super::client::{packet_number, SecureStats};
use super::replay::ReplayWindow;
use super::schedule::{seal_each, OpenKeys, Opener, SealKeys, Sealer};
use super::{Cipher, INTEGRITY_LIMIT};
use crate::event::DropReason;
use crate::sender::Sender;

/// Keys of both directions and the replay window of the incoming one.
pub(crate) struct Protection {
    seal: SealKeys,
    open: OpenKeys,
    replay: ReplayWindow,
}

impl Protection {
    /// From the two secrets of Noise's split, as this side uses them.
    pub(crate) fn new(cipher: Cipher, outgoing: [u8; 32], incoming: [u8; 32]) -> Protection {
        Protection {
            seal: SealKeys::new(cipher, outgoing),
            open: OpenKeys::new(cipher, incoming),
            replay: ReplayWindow::new(),
        }
    }

    /// Seal every datagram of a batch (`stride` bytes apart, the last possibly shorter) in
    /// place; each ends with the room for its tag.
    pub(crate) fn seal_batch(&mut self, batch: &mut [u8], stride: usize) {
        for seg in batch.chunks_mut(stride.max(1)) {
            self.seal.seal(packet_number(seg), seg);
        }
    }

    /// Seal a batch `sender` wrote with its payloads deferred (`sender/deferred.rs`): those
    /// are encrypted from its send buffer into their packets, the rest sealed in place
    /// ([`seal_each`]).
    pub(crate) fn seal_batch_deferred(&mut self, batch: &mut [u8], stride: usize, sender: &Sender) {
        let keys = &mut self.seal;
        seal_each(batch, stride, sender.deferred_payloads(), |pn, d, p| {
            keys.seal_with(pn, d, p)
        });
    }

    /// The sealing of a batch `sender` wrote with its payloads deferred (`stride` bytes
    /// apart), for another thread, if its packets are in one epoch; else the batch is sealed
    /// here and `None` returned.
    pub(crate) fn sealer_for(
        &mut self,
        batch: &mut [u8],
        stride: usize,
        sender: &Sender,
    ) -> Option<Sealer> {
        let first = packet_number(batch);
        let last_at = (batch.len().saturating_sub(1) / stride.max(1)) * stride.max(1);
        let last = packet_number(&batch[last_at..]);
        match self.seal.sealer(first, last) {
            Some(mut s) => {
                s.payloads = sender.deferred_shared();
                Some(s)
            }
            None => {
                self.seal_batch_deferred(batch, stride, sender);
                None
            }
        }
    }

    /// Note an incoming packet number that arrived inside the handshake (it is not sealed).
    pub(crate) fn mark(&mut self, pn: u64) {
        self.replay.mark(pn);
    }

    /// The opener of `datagram` for another thread, if its epoch's key is at hand; the
    /// replay check is left to [`accept_opened`](Self::accept_opened).
    pub(crate) fn opener(&self, datagram: &[u8]) -> Option<Opener> {
        self.open.opener(packet_number(datagram))
    }

    /// A packet numbered `pn` opened elsewhere: drop it as a replay, or mark its number.
    pub(crate) fn accept_opened(
        &mut self,
        pn: u64,
        stats: &mut SecureStats,
    ) -> Result<(), DropReason> {
        if !self.replay.is_fresh(pn) {
            stats.replayed += 1;
            return Err(DropReason::Replayed);
        }
        self.replay.mark(pn);
        Ok(())
    }

    /// Open `datagram` in place: the length of the packet inside. Drops are counted in
    /// `stats`; past the integrity limit the caller must end the session
    /// ([`SecureStats::integrity_exceeded`]).
    pub(crate) fn open(
        &mut self,
        datagram: &mut [u8],
        stats: &mut SecureStats,
    ) -> Result<usize, DropReason> {
        let pn = packet_number(datagram);
        if !self.replay.is_fresh(pn) {
            stats.replayed += 1;
            return Err(DropReason::Replayed);
        }
        let Some(n) = self.open.open(pn, datagram) else {
            stats.not_authentic += 1;
            return Err(DropReason::NotAuthentic);
        };
        self.replay.mark(pn);
        Ok(n)
    }
}

impl SecureStats {
    /// True once more packets failed to open than the AEAD's integrity limit allows (§9.4):
    /// the session must end.
    pub fn integrity_exceeded(&self) -> bool {
        self.not_authentic >= INTEGRITY_LIMIT
    }
}
