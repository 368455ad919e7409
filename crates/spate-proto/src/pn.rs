//! Packet numbers: one number space per direction of a session, failing closed at its end.
//!
//! > §3.1: A packet number is never used twice in one direction, not even for a
//! > retransmission. A session that would exceed 2^48 − 1 MUST end.
//!
//! Every packet a side sends — HELLO, DATA, PING, ACCEPT, FEEDBACK, HAVE, CLOSE — takes its
//! number from the one [`PacketNumbers`] of that side, and there is no other way to get one.
//! When the space is used up, [`take`](PacketNumbers::take) returns `None` for ever after:
//! the caller ends the session without sending, rather than reuse the last number (with
//! packet protection the number is the AEAD nonce, and a repeated nonce under one key gives
//! away the keystream and the authentication key).

use crate::wire::MAX_PACKET_NUMBER;

/// The packet numbers of one direction of a session.
#[derive(Debug, Clone, Default)]
pub struct PacketNumbers {
    next: u64,
}

impl PacketNumbers {
    /// A fresh space, starting at 0.
    pub const fn new() -> Self {
        PacketNumbers { next: 0 }
    }

    /// The next unused number, or `None` once every number up to 2^48 − 1 has been used.
    pub fn take(&mut self) -> Option<u64> {
        if self.next > MAX_PACKET_NUMBER {
            return None;
        }
        let pn = self.next;
        self.next += 1;
        Some(pn)
    }

    /// How many numbers were used: every number below this was sent.
    pub fn used(&self) -> u64 {
        self.next
    }

    /// A space whose next number is `n` (for tests of the end of the space).
    #[cfg(test)]
    pub(crate) fn starting_at(n: u64) -> Self {
        PacketNumbers { next: n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_never_repeat_and_the_end_is_final() {
        let mut p = PacketNumbers::starting_at(MAX_PACKET_NUMBER - 1);
        assert_eq!(p.take(), Some(MAX_PACKET_NUMBER - 1));
        assert_eq!(p.take(), Some(MAX_PACKET_NUMBER));
        for _ in 0..3 {
            assert_eq!(p.take(), None);
        }
        assert_eq!(p.used(), MAX_PACKET_NUMBER + 1);
    }
}
