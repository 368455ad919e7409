//! What sessions tell the application, and how they fail.

use core::time::Duration;

use crate::wire::{CloseCode, WireError};

/// Application events of a sender, from [`Sender::poll_event`](crate::Sender::poll_event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SenderEvent {
    /// The receiver accepted the session.
    Accepted,
    /// Every byte of this object is acknowledged.
    ObjectDelivered(u32),
    /// Feedback stopped for several probe timeouts; sending is paused and probes continue.
    PathSilent,
    /// Feedback is back after a silence; sending resumed.
    PathRestored,
    /// Every byte is acknowledged; the session is closed.
    Complete,
    /// The session ended without completing.
    Failed(SessionError),
}

/// Application events of a receiver, from [`Receiver::poll_event`](crate::Receiver::poll_event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// The manifest is known ([`Receiver::manifest`](crate::Receiver::manifest)).
    ManifestReady,
    /// Every byte of this object was delivered.
    ObjectComplete(u32),
    /// Every byte of every object was delivered.
    Complete,
    /// The session ended without completing.
    Failed(SessionError),
}

/// Why a session ended early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// Nothing arrived from the peer for the idle timeout.
    #[error("no packet from the peer for {0:?}; the path or the peer is down (raise the idle timeout to ride out longer outages)")]
    IdleTimeout(Duration),
    /// The receiver offered no room to write for the idle timeout (its Write Limit did not
    /// grow, spec §7.4): its disk is stuck, or it holds the sender on purpose.
    #[error(
        "the receiver took no data for {0:?}: its disk accepted nothing (is it full or stuck?)"
    )]
    ReceiverStalled(Duration),
    /// The peer never answered the HELLO.
    #[error("the receiver did not answer within {0:?}; is it running and reachable?")]
    HandshakeTimeout(Duration),
    /// The peer ended the session.
    #[error("the peer closed the session ({code:?}): {reason}")]
    PeerClosed {
        /// Its code.
        code: CloseCode,
        /// Its reason.
        reason: String,
    },
    /// This side's application ended the session.
    #[error("closed locally ({code:?}): {reason}")]
    LocalClose {
        /// The code sent.
        code: CloseCode,
        /// The reason sent.
        reason: String,
    },
    /// The byte source failed.
    #[error("reading object {object} at offset {offset} failed: {reason}")]
    Source {
        /// Object.
        object: u32,
        /// Offset.
        offset: u64,
        /// The source's message.
        reason: String,
    },
    /// The peer sent something the protocol forbids.
    #[error("protocol violation by the peer: {0}")]
    ProtocolViolation(String),
    /// The packet number space is exhausted (2^48 packets).
    #[error("packet numbers exhausted")]
    PacketNumbersExhausted,
    /// The handshake could not be made (spec §9.2).
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The server answered with a static key other than the one this client expected
    /// (spec §9.6): its key changed, or someone is in the middle.
    #[error("the server's key is not the one expected")]
    ServerKeyMismatch {
        /// The key the answer offered (unauthenticated).
        offered: [u8; 32],
    },
}

/// Why one incoming datagram was dropped. Dropping never changes session state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// It did not parse.
    #[error("malformed: {0}")]
    Malformed(#[from] WireError),
    /// It belongs to another session.
    #[error("wrong session id {0:#010x}")]
    WrongSession(u32),
    /// Its type is not expected in this direction or state.
    #[error("unexpected {0} packet")]
    Unexpected(&'static str),
    /// It names data outside the objects' bounds or an unknown object.
    #[error("data out of bounds: object {object}, offset {offset}, length {len}")]
    OutOfBounds {
        /// Object.
        object: u32,
        /// Offset.
        offset: u64,
        /// Length.
        len: usize,
    },
    /// The session is closed.
    #[error("session closed")]
    Closed,
    /// It did not open under the session's keys: forged, altered or truncated (spec §9.4).
    #[error("not authentic")]
    NotAuthentic,
    /// Its packet number was opened before, or is older than the replay window (spec §9.4).
    #[error("replayed")]
    Replayed,
}
