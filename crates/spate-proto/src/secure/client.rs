//! The client side of packet protection: a [`Sender`] behind the handshake and the seal
//! (`docs/spec.md` §9).
//!
//! Outgoing, the session's packets pass through [`SecureSender::poll_transmit`]: the first
//! HELLO becomes Noise message 1 inside the HELLO datagram, built once — every repeat sends the
//! same bytes (a fresh message per repeat would make the server run a fresh handshake); every
//! other packet is sealed in place. Incoming, [`SecureSender::handle_datagram`] is the one
//! open point: the ACCEPT's message 2 (which yields the keys), RETRY and IDENTITY before it,
//! sealed packets after it. Nothing the session sees was not authenticated, except a CLOSE in
//! the clear during the handshake (a server that refuses before any key exists, §9.6).

use std::collections::VecDeque;

use snow::HandshakeState;

use super::aead::Cipher;
use super::handshake::{self, HandshakeError};
use super::protect::Protection;
use super::schedule::Sealer;
use super::{types, AUTH_LEN, KEY_LEN, RETRY_TOKEN_LEN};
use crate::config::{Overhead, SenderConfig};
use crate::event::{DropReason, SenderEvent, SessionError};
use crate::manifest::{Manifest, ManifestError};
use crate::sender::{Sender, Source, Transmit};
use crate::time::Instant;
use crate::wire::{CloseCode, Header, PacketType, HEADER_LEN, VERSION};

/// RETRYs a client follows per session (a forged one costs a repeat, not the session).
const MAX_RETRIES: u32 = 3;

/// What a client needs for a protected session.
#[derive(Clone)]
pub struct ClientParams {
    /// The packet cipher to ask for.
    pub cipher: Cipher,
    /// The client's static private key (its identity).
    pub local_private: [u8; KEY_LEN],
    /// The server's static public key, as pinned or vouched for.
    pub server_public: [u8; KEY_LEN],
    /// An authorization token for servers that issue them (`spate serve --token`); zeros
    /// otherwise.
    pub auth: [u8; AUTH_LEN],
    /// 32 bytes from a cryptographically secure random source, for the ephemeral key.
    pub seed: [u8; 32],
}

/// Packets the protection dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecureStats {
    /// Did not open: forged, altered, truncated, or sealed with another key.
    pub not_authentic: u64,
    /// Opened before (a replay, or a network duplicate), or older than the window.
    pub replayed: u64,
}

/// What becomes of datagrams the session wrote ([`SecureSender::written`]).
enum Written {
    /// Ready to send (a HELLO).
    Ready(Transmit),
    /// To be sealed with the session's keys.
    ToSeal(Transmit),
    /// Not sent.
    Dropped,
}

/// A [`Sender`] whose packets are protected.
pub struct SecureSender {
    inner: Sender,
    cipher: Cipher,
    server_public: [u8; KEY_LEN],
    hs: Option<HandshakeState>,
    /// The HELLO datagram, built from the session's first HELLO.
    hello: Vec<u8>,
    auth: [u8; AUTH_LEN],
    /// Set once the handshake completed.
    prot: Option<Protection>,
    retries: u32,
    /// When the session began (its first HELLO).
    started: Instant,
    /// A key other than ours that one IDENTITY offered, and when a second may confirm it.
    offered: Option<([u8; KEY_LEN], Instant)>,
    stats: SecureStats,
    events: VecDeque<SenderEvent>,
    payload: Vec<u8>,
}

impl SecureSender {
    /// A protected session moving `manifest` (see [`Sender::new`]).
    pub fn new(
        mut cfg: SenderConfig,
        session: u32,
        manifest: &Manifest,
        now: Instant,
        params: ClientParams,
    ) -> Result<SecureSender, ManifestError> {
        cfg.overhead = Overhead::SEALED;
        cfg.cipher = params.cipher as u8;
        let inner = Sender::new(cfg, session, manifest, now)?;
        let header = hello_header(session);
        let hs = handshake::initiator(
            &params.local_private,
            &params.server_public,
            &header,
            params.seed,
        )
        .ok();
        let mut s = SecureSender {
            inner,
            cipher: params.cipher,
            server_public: params.server_public,
            hs,
            hello: Vec::new(),
            auth: params.auth,
            prot: None,
            retries: 0,
            started: now,
            offered: None,
            stats: SecureStats::default(),
            events: VecDeque::new(),
            payload: Vec::new(),
        };
        if s.hs.is_none() {
            s.inner.abort(SessionError::Handshake("invalid key".into()));
        }
        Ok(s)
    }

    /// The session inside.
    pub fn inner(&self) -> &Sender {
        &self.inner
    }

    /// The session inside, for what the wrapper does not change (closing, statistics).
    pub fn inner_mut(&mut self) -> &mut Sender {
        &mut self.inner
    }

    /// The packet cipher.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Packets dropped by the protection.
    pub fn secure_stats(&self) -> SecureStats {
        self.stats
    }

    /// True once the handshake completed.
    pub fn is_established(&self) -> bool {
        self.prot.is_some()
    }

    /// See [`Sender::poll_event`].
    #[must_use]
    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front().or_else(|| self.inner.poll_event())
    }

    /// See [`Sender::poll_timeout`].
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }

    /// See [`Sender::handle_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now)
    }

    /// See [`Sender::is_closed`].
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The session's next datagrams, protected (see [`Sender::poll_transmit`]). Sealed as
    /// they are written: DATA payloads are encrypted from the send buffer into their packets,
    /// never copied in first (`sender/deferred.rs`).
    #[must_use]
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut impl Source,
    ) -> Option<Transmit> {
        loop {
            let t = self.inner.poll_transmit_deferring(now, buf, source)?;
            match self.written(buf, t)? {
                Written::Ready(t) => return Some(t),
                Written::Dropped => {}
                Written::ToSeal(t) => {
                    let prot = self.prot.as_mut()?;
                    prot.seal_batch_deferred(&mut buf[..t.len], t.segment_size, &self.inner);
                    return Some(t);
                }
            }
        }
    }

    /// [`poll_transmit`](Self::poll_transmit), leaving the sealing of the batch to the caller,
    /// who may run it on another thread before sending (spec §9.4 is unchanged: the same key,
    /// nonce and associated data). `Some(sealer)`: the batch is still to be sealed with it —
    /// its DATA payloads too, which the sealer holds shared (`sender/deferred.rs`); `None`: it
    /// is ready to send (the HELLO, or a batch that crosses an epoch).
    pub fn poll_transmit_deferred(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut impl Source,
    ) -> Option<(Transmit, Option<Sealer>)> {
        loop {
            let t = self.inner.poll_transmit_deferring(now, buf, source)?;
            match self.written(buf, t)? {
                Written::Ready(t) => return Some((t, None)),
                Written::Dropped => {}
                Written::ToSeal(t) => {
                    let prot = self.prot.as_mut()?;
                    let sealer = prot.sealer_for(&mut buf[..t.len], t.segment_size, &self.inner);
                    return Some((t, sealer));
                }
            }
        }
    }

    /// What becomes of the datagrams the session just wrote into `buf`: a HELLO is replaced
    /// by its Noise message (ready to send), anything else is sealed — or dropped while there
    /// are no keys (a CLOSE during the handshake: nothing may leave unsealed).
    fn written(&mut self, buf: &mut [u8], t: Transmit) -> Option<Written> {
        if buf[1] & 0x0f == PacketType::Hello as u8 {
            if self.hello.is_empty() && !self.build_hello(&buf[..t.len]) {
                return Some(Written::Dropped);
            }
            let n = self.hello.len();
            buf.get_mut(..n)?.copy_from_slice(&self.hello);
            return Some(Written::Ready(Transmit {
                len: n,
                segment_size: n,
            }));
        }
        Some(match self.prot {
            Some(_) => Written::ToSeal(t),
            None => Written::Dropped,
        })
    }

    /// Wrap the session's first HELLO in Noise message 1 (§9.2).
    fn build_hello(&mut self, inner: &[u8]) -> bool {
        let Some(hs) = self.hs.as_mut() else {
            return false;
        };
        let header = hello_header(self.inner.session_id());
        let mut payload = self.auth.to_vec();
        payload.extend_from_slice(inner);
        let mut out = vec![0; HEADER_LEN + RETRY_TOKEN_LEN + payload.len() + 200];
        out[..HEADER_LEN].copy_from_slice(&header);
        match hs.write_message(&payload, &mut out[HEADER_LEN + RETRY_TOKEN_LEN..]) {
            Ok(n) => {
                out.truncate(HEADER_LEN + RETRY_TOKEN_LEN + n);
                self.hello = out;
                true
            }
            Err(e) => {
                self.inner
                    .abort(SessionError::Handshake(HandshakeError::from(e).to_string()));
                false
            }
        }
    }

    /// Process one datagram from the server: the one open point (see [`Sender::handle_datagram`]).
    pub fn handle_datagram(&mut self, now: Instant, datagram: &mut [u8]) -> Result<(), DropReason> {
        if datagram.len() < HEADER_LEN || datagram[0] != VERSION {
            return Err(DropReason::Unexpected("not a Spate v1 packet"));
        }
        let session = u32::from_be_bytes([datagram[2], datagram[3], datagram[4], datagram[5]]);
        if session != self.inner.session_id() {
            return Err(DropReason::WrongSession(session));
        }
        let ty = datagram[1] & 0x0f;
        match ty {
            t if t == PacketType::Accept as u8 => self.on_accept(now, datagram),
            types::RETRY => self.on_retry(now, datagram),
            types::IDENTITY => self.on_identity(now, datagram),
            _ if self.prot.is_some() => self.open_sealed(now, datagram),
            t if t == PacketType::Close as u8 => {
                // §9.6: before any key, a server can refuse only in the clear.
                self.inner.handle_datagram(now, datagram)
            }
            _ => Err(DropReason::Unexpected("sealed packet before the handshake")),
        }
    }

    fn on_accept(&mut self, now: Instant, datagram: &mut [u8]) -> Result<(), DropReason> {
        let Some(hs) = self.hs.as_mut() else {
            // A repeated ACCEPT (the server saw a repeated HELLO): the keys are set.
            return Err(DropReason::Unexpected("repeated ACCEPT"));
        };
        self.payload.resize(datagram.len(), 0);
        let n = match hs.read_message(&datagram[HEADER_LEN..], &mut self.payload) {
            Ok(n) => n,
            Err(_) => {
                self.stats.not_authentic += 1;
                return Err(DropReason::NotAuthentic);
            }
        };
        let inner = &mut self.payload[..n];
        // The packet inside must be this session's ACCEPT or CLOSE.
        let ok = Header::peek(inner).is_ok_and(|h| {
            h.session == self.inner.session_id()
                && matches!(h.ty, PacketType::Accept | PacketType::Close)
        });
        if !ok {
            self.stats.not_authentic += 1;
            return Err(DropReason::Unexpected("handshake payload is not an ACCEPT"));
        }
        let (c2s, s2c) = handshake::split(hs);
        self.hs = None;
        let mut prot = Protection::new(self.cipher, c2s, s2c);
        prot.mark(packet_number(inner));
        self.prot = Some(prot);
        let mut inner = core::mem::take(&mut self.payload);
        let res = self.inner.handle_datagram(now, &mut inner[..n]);
        self.payload = inner;
        res
    }

    fn on_retry(&mut self, now: Instant, datagram: &[u8]) -> Result<(), DropReason> {
        if self.hs.is_none() || self.hello.is_empty() || self.retries >= MAX_RETRIES {
            return Err(DropReason::Unexpected("RETRY"));
        }
        if datagram.len() != HEADER_LEN + RETRY_TOKEN_LEN {
            return Err(DropReason::Unexpected("RETRY of the wrong length"));
        }
        self.retries += 1;
        self.hello[HEADER_LEN..HEADER_LEN + RETRY_TOKEN_LEN]
            .copy_from_slice(&datagram[HEADER_LEN..]);
        self.inner.repeat_hello(now);
        Ok(())
    }

    /// §9.6: an IDENTITY with another key ends the handshake only when a second one, answering
    /// a repeated HELLO, offers the same key — one damaged datagram can carry any key, and a
    /// duplicate of it arrives with it. The answer to the repeat takes about as long as the
    /// first answer took; a copy that comes less than half that time after the first is not
    /// taken as an answer.
    fn on_identity(&mut self, now: Instant, datagram: &[u8]) -> Result<(), DropReason> {
        if self.hs.is_none() || datagram.len() != HEADER_LEN + KEY_LEN {
            return Err(DropReason::Unexpected("IDENTITY"));
        }
        let mut offered = [0; KEY_LEN];
        offered.copy_from_slice(&datagram[HEADER_LEN..]);
        if offered == self.server_public {
            // The server could not open our HELLO although its key is the one we used: the
            // HELLO was damaged on the way. The repeat will do.
            return Err(DropReason::Unexpected("IDENTITY with the expected key"));
        }
        match self.offered {
            Some((key, not_before)) if key == offered && now >= not_before => {}
            Some((key, _)) if key == offered => {
                return Err(DropReason::Unexpected("IDENTITY repeated too soon"));
            }
            _ => {
                let waited = now.saturating_since(self.started);
                self.offered = Some((offered, now + waited / 2));
                self.inner.repeat_hello(now);
                return Ok(());
            }
        }
        // Unauthenticated, but twice the same: this is what a changed server key looks like, so
        // say so now rather than time out. (A forger gains nothing it could not get by dropping
        // our HELLOs.)
        self.inner
            .abort(SessionError::ServerKeyMismatch { offered });
        Ok(())
    }

    fn open_sealed(&mut self, now: Instant, datagram: &mut [u8]) -> Result<(), DropReason> {
        let prot = self.prot.as_mut().ok_or(DropReason::NotAuthentic)?;
        let opened = prot.open(datagram, &mut self.stats);
        if self.stats.integrity_exceeded() {
            self.inner
                .close(CloseCode::Application, "AEAD integrity limit reached");
        }
        let n = opened?;
        self.inner.handle_datagram(now, &mut datagram[..n])
    }
}

/// The HELLO's outer header (§9.2): type HELLO, no flags, packet number 0.
fn hello_header(session: u32) -> [u8; HEADER_LEN] {
    let mut h = [0; HEADER_LEN];
    h[0] = VERSION;
    h[1] = PacketType::Hello as u8;
    h[2..6].copy_from_slice(&session.to_be_bytes());
    h
}

/// The packet number of a packet at least a header long.
pub(crate) fn packet_number(packet: &[u8]) -> u64 {
    let mut b = [0; 8];
    b[2..].copy_from_slice(&packet[6..HEADER_LEN]);
    u64::from_be_bytes(b)
}
