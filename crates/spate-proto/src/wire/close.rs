//! CLOSE (`docs/spec.md` §4.6).
//!
//! ```text
//! CLOSE body:
//!   Code (16)              why the session ends (table below)
//!   Reason Length (varint)
//!   Reason (..)            UTF-8 text for humans; may be empty
//! ```
//!
//! > §4.6: CLOSE is not acknowledged. A sender that completed and still receives FEEDBACK
//! > answers each with CLOSE Done (one per report received, so never more packets than
//! > received).

use super::WireError;
use crate::codec::{Reader, Writer};

/// Longest reason text accepted or sent, bytes.
pub const MAX_REASON: usize = 512;

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// The transfer completed (sent by the sender after all data was acknowledged).
    Done,
    /// The peer broke the protocol.
    ProtocolViolation,
    /// The application on the closing side gave up (reason says why).
    Application,
    /// The receiver does not accept this session (reason says why).
    Refused,
    /// The version or a parameter in HELLO is not supported.
    Unsupported,
    /// A code this implementation does not know.
    Other(u16),
}

impl CloseCode {
    /// The wire value.
    pub fn to_u16(self) -> u16 {
        match self {
            CloseCode::Done => 0,
            CloseCode::ProtocolViolation => 1,
            CloseCode::Application => 2,
            CloseCode::Refused => 3,
            CloseCode::Unsupported => 4,
            CloseCode::Other(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_u16(v: u16) -> Self {
        match v {
            0 => CloseCode::Done,
            1 => CloseCode::ProtocolViolation,
            2 => CloseCode::Application,
            3 => CloseCode::Refused,
            4 => CloseCode::Unsupported,
            v => CloseCode::Other(v),
        }
    }
}

/// CLOSE body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Close<'a> {
    /// Why.
    pub code: CloseCode,
    /// Human-readable reason (not guaranteed UTF-8 when received; see [`Close::reason_lossy`]).
    pub reason: &'a [u8],
}

impl<'a> Close<'a> {
    /// Parse a body.
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let code = CloseCode::from_u16(r.u16()?);
        let len = r.varint()?;
        if len > MAX_REASON as u64 {
            return Err(WireError::Invalid("close reason longer than 512 bytes"));
        }
        let reason = r.bytes(len as usize)?;
        Ok(Close { code, reason })
    }

    /// Write a body; the reason is cut to [`MAX_REASON`] bytes at a character boundary.
    pub fn encode(code: CloseCode, reason: &str, w: &mut Writer<'_>) -> Result<(), WireError> {
        let mut end = reason.len().min(MAX_REASON);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        w.u16(code.to_u16())?;
        w.varint(end as u64)?;
        w.put(&reason.as_bytes()[..end])
    }

    /// A whole CLOSE datagram (header and body) into `buf`, for an endpoint that answers a
    /// packet it keeps no session for (spec §4.1: a late HELLO of an ended session). Returns
    /// its length.
    pub fn datagram(
        buf: &mut [u8],
        session: u32,
        pn: u64,
        code: CloseCode,
        reason: &str,
    ) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        super::Header {
            ty: super::PacketType::Close,
            flags: 0,
            session,
            pn,
        }
        .encode(&mut w)?;
        Close::encode(code, reason, &mut w)?;
        Ok(w.len())
    }

    /// The reason as text, with invalid UTF-8 replaced.
    pub fn reason_lossy(&self) -> String {
        String::from_utf8_lossy(self.reason).into_owned()
    }
}
