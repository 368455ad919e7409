//! Address validation: what a receiver may send before the sender has shown that it receives
//! at the address it sends from (`docs/spec.md` §4.8).
//!
//! > §4.8: Every ACCEPT carries a Token, 64 unpredictable bits chosen by the receiver for the
//! > session, and every PING of the sender carries it back. The sender's address is validated
//! > when a PING with the session's Token arrives from it. Until then the receiver (1) sends at
//! > most three times the bytes it received from that address in this session, (2) drops DATA
//! > unacknowledged, and (3) does not decode the manifest — so it creates nothing, reads
//! > nothing and sends no HAVE for a peer that may be spoofing a victim's address. A datagram
//! > of the session from a new address (the sender moved, or someone forged it) makes the new
//! > address unvalidated again: the 3× limit applies to it until a PING with the Token arrives
//! > from there; DATA is still accepted, since the session was validated once.
//!
//! The factor 3 is QUIC's (RFC 9000 §8.1): enough for the ACCEPT and the first reports, too
//! little to make the receiver a useful reflector. The Token is the only thing a spoofer cannot
//! know, because the ACCEPT goes to the spoofed address; it is not a secret against anyone on
//! the path (the next issue's encryption is).

use super::{DataChunk, Receiver};
use crate::event::DropReason;
use crate::time::Instant;

/// Bytes a receiver sends per byte received before the address is validated.
pub const AMPLIFICATION_FACTOR: u64 = 3;

/// Validation state of the current sender address.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Validation {
    /// The token the ACCEPT carries.
    pub token: u64,
    /// A PING with the token arrived from the current address.
    pub validated: bool,
    /// Some address of this session was validated at some point.
    pub ever: bool,
    /// Datagram bytes received from the current address.
    pub bytes_in: u64,
    /// Datagram bytes sent to the current address.
    pub bytes_out: u64,
}

impl Receiver {
    /// True once the current sender address sent a PING with this session's token.
    pub fn is_validated(&self) -> bool {
        self.validation.validated
    }

    /// True once any address of this session was validated: the session has proven a sender
    /// that receives (a half-open session otherwise).
    pub fn was_validated(&self) -> bool {
        self.validation.ever
    }

    /// Process a datagram of this session that arrived from an address other than the one the
    /// driver has been sending to. If the session accepts it, the driver sends to the new
    /// address from now on, which starts unvalidated (the sender moved, or someone forged the
    /// packet): at most three times what arrives from it is sent until a PING with the token
    /// comes from there (spec §4.8). If the datagram is dropped, nothing changes.
    pub fn handle_datagram_from_new_address(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
    ) -> Result<Option<DataChunk>, DropReason> {
        let before = self.validation;
        self.validation.validated = false;
        self.validation.bytes_in = 0;
        self.validation.bytes_out = 0;
        let res = self.handle_datagram(now, datagram);
        if res.is_err() {
            self.validation = before;
        }
        res
    }

    /// Whether a packet of `len` bytes may be sent now (and if so, count it).
    pub(super) fn may_send(&mut self, len: usize) -> bool {
        let v = &mut self.validation;
        let len = len as u64;
        if !v.validated && v.bytes_out + len > AMPLIFICATION_FACTOR * v.bytes_in {
            self.stats.withheld_packets += 1;
            return false;
        }
        v.bytes_out += len;
        true
    }

    /// A PING arrived with `token`: false if it is not this session's.
    pub(super) fn on_token(&mut self, token: u64) -> bool {
        if token != self.validation.token {
            return false;
        }
        self.validation.validated = true;
        if !std::mem::replace(&mut self.validation.ever, true) {
            self.on_first_validation();
        }
        true
    }
}
