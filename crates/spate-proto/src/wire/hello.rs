//! HELLO and ACCEPT: the handshake (`docs/spec.md` §4.1–§4.2).
//!
//! > §4.1 HELLO: sent by the sender to open a session and repeated, with a new packet number,
//! > until an ACCEPT or CLOSE arrives. It carries the session parameters, the manifest's length
//! > and as much of the manifest as fits. It is padded with zero bytes to the sender's maximum
//! > datagram size, which proves that datagrams of that size cross the path and lets the
//! > receiver answer without amplification (an ACCEPT is always smaller than the HELLO).
//!
//! ```text
//! HELLO body:
//!   Max Datagram (16)            largest UDP payload the sender will send
//!   Cipher (8)                   0 = unprotected; 1–3 the packet cipher of §9.4
//!   Feedback Interval (varint)   µs between receiver reports while data flows
//!   Idle Timeout (varint)        ms of silence after which the session fails
//!   Object Count (varint)        number of manifest entries
//!   Manifest Length (varint)     bytes of the encoded manifest (object 0)
//!   Prefix Length (varint)       bytes of the manifest carried in this packet
//!   Manifest Prefix (..)
//!   Padding (..)                 zero bytes, ignored
//!
//! ACCEPT body:
//!   Max Datagram (16)            largest UDP payload the receiver accepts
//!   Idle Timeout (varint)        the receiver's idle timeout, ms
//!   Token (64)                   unpredictable; echoed in every PING (§4.8)
//! ```

use super::WireError;
use crate::codec::{Reader, Writer};
use crate::wire::{MAX_DATAGRAM, MIN_DATAGRAM};

/// Cipher identifier for unencrypted sessions (the only one in v1).
pub const CIPHER_NONE: u8 = 0;

/// HELLO flag (header Flags field): the sender treats the transfer as successful only on a
/// FEEDBACK with COMPLETE, which the receiver sends after its application has verified the
/// data (spec §4.1, §6.8).
pub const HELLO_VERIFY: u8 = 0x1;

/// HELLO flag: the sender resumes an interrupted transfer and will skip the bytes the receiver
/// reports holding in a HAVE (spec §4.1, §8.3).
pub const HELLO_RESUME: u8 = 0x2;

/// HELLO flag: object 0 is a request (§5.6), not files to write: the sender asks the receiver
/// to send what it names, in an answering session the receiver opens (§2.1). With GET,
/// RESUME asks that the answering session resume.
pub const HELLO_GET: u8 = 0x4;

/// ACCEPT flag: the receiver will send a HAVE once the manifest is complete; a sender that
/// asked to resume waits for it before sending file data (spec §4.2, §8.3). Without it the
/// sender sends everything.
pub const ACCEPT_RESUME: u8 = 0x1;

/// ACCEPT flag: the receiver takes REPAIR packets and keeps the chunks of DATA flagged KEEP
/// until their block is held (spec §4.2, §6.9). Without it the sender sends no REPAIR.
pub const ACCEPT_CODING: u8 = 0x2;

/// HELLO body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello<'a> {
    /// Largest UDP payload the sender will send.
    pub max_datagram: u16,
    /// Cipher suite (0 = none).
    pub cipher: u8,
    /// Requested interval between feedback packets, µs.
    pub feedback_interval_us: u64,
    /// Sender's idle timeout, ms.
    pub idle_timeout_ms: u64,
    /// Manifest entries.
    pub object_count: u64,
    /// Total manifest bytes.
    pub manifest_len: u64,
    /// The first bytes of the manifest.
    pub manifest_prefix: &'a [u8],
}

impl<'a> Hello<'a> {
    /// The parameters of a HELLO that could not be parsed: a session made from them only
    /// sends CLOSE (smallest datagram, default reporting, no manifest).
    pub fn placeholder() -> Hello<'static> {
        Hello {
            max_datagram: MIN_DATAGRAM as u16,
            cipher: CIPHER_NONE,
            feedback_interval_us: 10_000,
            idle_timeout_ms: 1,
            object_count: 0,
            manifest_len: 0,
            manifest_prefix: &[],
        }
    }

    /// Bytes the body takes before the manifest prefix.
    pub fn fixed_len(&self) -> usize {
        use crate::codec::varint_len as v;
        3 + v(self.feedback_interval_us)
            + v(self.idle_timeout_ms)
            + v(self.object_count)
            + v(self.manifest_len)
            + v(self.manifest_prefix.len() as u64)
    }

    /// Parse a body.
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let max_datagram = r.u16()?;
        if usize::from(max_datagram) < MIN_DATAGRAM {
            return Err(WireError::Invalid("max datagram below 1232"));
        }
        let cipher = r.u8()?;
        let feedback_interval_us = r.varint()?;
        if feedback_interval_us == 0 || feedback_interval_us > 1_000_000 {
            return Err(WireError::Invalid("feedback interval outside 1 µs..1 s"));
        }
        let idle_timeout_ms = r.varint()?;
        if idle_timeout_ms == 0 {
            return Err(WireError::Invalid("idle timeout of zero"));
        }
        let object_count = r.varint()?;
        let manifest_len = r.varint()?;
        let prefix_len = r.varint()?;
        if prefix_len > manifest_len {
            return Err(WireError::Invalid("manifest prefix longer than manifest"));
        }
        let prefix_len = usize::try_from(prefix_len).map_err(|_| WireError::Truncated)?;
        let manifest_prefix = r.bytes(prefix_len)?;
        // The rest is padding; its content is ignored.
        r.rest();
        Ok(Hello {
            max_datagram,
            cipher,
            feedback_interval_us,
            idle_timeout_ms,
            object_count,
            manifest_len,
            manifest_prefix,
        })
    }

    /// Write the body, then pad with zeros up to `pad_to` bytes of total writer length.
    pub fn encode(&self, w: &mut Writer<'_>, pad_to: usize) -> Result<(), WireError> {
        if usize::from(self.max_datagram) < MIN_DATAGRAM
            || usize::from(self.max_datagram) > MAX_DATAGRAM
        {
            return Err(WireError::Invalid("max datagram outside 1232..65507"));
        }
        w.u16(self.max_datagram)?;
        w.u8(self.cipher)?;
        w.varint(self.feedback_interval_us)?;
        w.varint(self.idle_timeout_ms)?;
        w.varint(self.object_count)?;
        w.varint(self.manifest_len)?;
        w.varint(self.manifest_prefix.len() as u64)?;
        w.put(self.manifest_prefix)?;
        let pad = pad_to.saturating_sub(w.len()).min(w.remaining());
        w.zeros(pad)
    }
}

/// ACCEPT body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accept {
    /// Largest UDP payload the receiver accepts.
    pub max_datagram: u16,
    /// Receiver's idle timeout, ms.
    pub idle_timeout_ms: u64,
    /// Address-validation token, chosen at random by the receiver; the sender echoes it in
    /// every PING (spec §4.8).
    pub token: u64,
}

impl Accept {
    /// Parse a body.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let max_datagram = r.u16()?;
        if usize::from(max_datagram) < MIN_DATAGRAM {
            return Err(WireError::Invalid("max datagram below 1232"));
        }
        let idle_timeout_ms = r.varint()?;
        let token = r.u64()?;
        Ok(Accept {
            max_datagram,
            idle_timeout_ms,
            token,
        })
    }

    /// Write the body.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u16(self.max_datagram)?;
        w.varint(self.idle_timeout_ms)?;
        w.u64(self.token)
    }
}
