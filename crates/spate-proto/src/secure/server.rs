//! The server side of packet protection (`docs/spec.md` §9): opening a HELLO, the stateless
//! answers (RETRY, IDENTITY), and a [`Receiver`] behind the seal.
//!
//! A server driver does, for a HELLO of an unknown session: its admission checks; under load,
//! a RETRY unless the HELLO's token checks ([`RetryKey`](super::RetryKey)); [`open_hello`] (the
//! Diffie-Hellman work, and the client's static key); its authorization decision on that key;
//! then [`SecureReceiver::accept`]. A HELLO that does not open under the server's key is
//! answered with IDENTITY (§9.6) so that a client with a stale pin learns at once why.

use snow::HandshakeState;

use super::aead::Cipher;
use super::client::SecureStats;
use super::handshake;
use super::protect::Protection;
use super::schedule::Opener;
use super::{types, AUTH_LEN, HELLO_OVERHEAD, IK_MSG2_OVERHEAD, KEY_LEN, RETRY_TOKEN_LEN, TAG_LEN};
use crate::config::{Overhead, ReceiverConfig};
use crate::event::DropReason;
use crate::receiver::{DataChunk, Receiver};
use crate::sender::Transmit;
use crate::time::Instant;
use crate::wire::{self, CloseCode, Header, Packet, PacketType, HEADER_LEN, MIN_DATAGRAM, VERSION};

/// Why a HELLO datagram was not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloRefusal {
    /// Not a well-formed protected HELLO: drop it without an answer.
    #[error("malformed HELLO: {0}")]
    Malformed(&'static str),
    /// Message 1 does not open under this server's key: answer IDENTITY (§9.6).
    #[error("HELLO not encrypted to this server's key")]
    NotForThisKey,
}

/// A HELLO whose handshake message opened.
pub struct OpenedHello {
    hs: HandshakeState,
    client_key: [u8; KEY_LEN],
    auth: [u8; AUTH_LEN],
    /// The HELLO packet.
    packet: Vec<u8>,
    /// Message 1, to recognise repeats.
    msg: Vec<u8>,
}

impl OpenedHello {
    /// The session id.
    pub fn session(&self) -> u32 {
        u32::from_be_bytes([
            self.packet[2],
            self.packet[3],
            self.packet[4],
            self.packet[5],
        ])
    }

    /// The client's static public key, proven by the handshake.
    pub fn client_key(&self) -> [u8; KEY_LEN] {
        self.client_key
    }

    /// The authorization token the client sent (zeros if none).
    pub fn auth(&self) -> [u8; AUTH_LEN] {
        self.auth
    }

    /// The HELLO packet inside (header and body).
    pub fn packet(&self) -> &[u8] {
        &self.packet
    }
}

/// Open a HELLO datagram with the server's static private key (§9.2). `seed`: 32 random bytes
/// for the server's ephemeral key.
pub fn open_hello(
    server_private: &[u8; KEY_LEN],
    datagram: &[u8],
    seed: [u8; 32],
) -> Result<OpenedHello, HelloRefusal> {
    if datagram.len() < MIN_DATAGRAM {
        return Err(HelloRefusal::Malformed("shorter than 1232 bytes"));
    }
    let mut header = [0; HEADER_LEN];
    header.copy_from_slice(&datagram[..HEADER_LEN]);
    let h = Header::peek(&header).map_err(|_| HelloRefusal::Malformed("bad header"))?;
    if h.ty != PacketType::Hello || h.flags != 0 || h.pn != 0 {
        return Err(HelloRefusal::Malformed(
            "outer header must be HELLO, no flags, packet number 0",
        ));
    }
    let mut hs = handshake::responder(server_private, &header, seed)
        .map_err(|_| HelloRefusal::Malformed("handshake setup"))?;
    let msg = &datagram[HEADER_LEN + RETRY_TOKEN_LEN..];
    let mut payload = vec![0; msg.len()];
    let n = hs
        .read_message(msg, &mut payload)
        .map_err(|_| HelloRefusal::NotForThisKey)?;
    payload.truncate(n);
    if n < AUTH_LEN + HEADER_LEN {
        return Err(HelloRefusal::Malformed("handshake payload too short"));
    }
    let packet = payload.split_off(AUTH_LEN);
    let inner = Header::peek(&packet).map_err(|_| HelloRefusal::Malformed("inner header"))?;
    if inner.ty != PacketType::Hello || inner.session != h.session || inner.pn != 0 {
        return Err(HelloRefusal::Malformed(
            "the packet inside is not this session's first HELLO",
        ));
    }
    if packet.len() + HELLO_OVERHEAD != datagram.len() {
        return Err(HelloRefusal::Malformed("HELLO layout"));
    }
    let mut client_key = [0; KEY_LEN];
    client_key.copy_from_slice(
        hs.get_remote_static()
            .ok_or(HelloRefusal::Malformed("no client key"))?,
    );
    let mut auth = [0; AUTH_LEN];
    auth.copy_from_slice(&payload);
    Ok(OpenedHello {
        hs,
        client_key,
        auth,
        packet,
        msg: msg.to_vec(),
    })
}

/// The RETRY token field of a HELLO datagram (zeros if none), read before any work is done.
pub fn hello_retry_token(datagram: &[u8]) -> Option<&[u8]> {
    datagram.get(HEADER_LEN..HEADER_LEN + RETRY_TOKEN_LEN)
}

fn stateless_header(ty: u8, session: u32, buf: &mut [u8]) {
    buf[0] = VERSION;
    buf[1] = ty;
    buf[2..6].copy_from_slice(&session.to_be_bytes());
    buf[6..HEADER_LEN].fill(0);
}

/// A RETRY (§9.5) into `buf`; its length. `buf` must hold 36 bytes.
pub fn retry_packet(session: u32, token: &[u8; RETRY_TOKEN_LEN], buf: &mut [u8]) -> usize {
    stateless_header(types::RETRY, session, buf);
    buf[HEADER_LEN..HEADER_LEN + RETRY_TOKEN_LEN].copy_from_slice(token);
    HEADER_LEN + RETRY_TOKEN_LEN
}

/// An IDENTITY (§9.6) into `buf`; its length. `buf` must hold 44 bytes.
pub fn identity_packet(session: u32, public: &[u8; KEY_LEN], buf: &mut [u8]) -> usize {
    stateless_header(types::IDENTITY, session, buf);
    buf[HEADER_LEN..HEADER_LEN + KEY_LEN].copy_from_slice(public);
    HEADER_LEN + KEY_LEN
}

/// An IDENTIFY (§9.6) into `buf`, padded to 1232 bytes so that the answer amplifies nothing;
/// its length. `buf` must hold 1232 bytes.
pub fn identify_packet(session: u32, buf: &mut [u8]) -> usize {
    stateless_header(types::IDENTIFY, session, buf);
    buf[HEADER_LEN..MIN_DATAGRAM].fill(0);
    MIN_DATAGRAM
}

/// A [`Receiver`] whose packets are protected.
pub struct SecureReceiver {
    inner: Receiver,
    cipher: Cipher,
    client_key: [u8; KEY_LEN],
    hs: Option<HandshakeState>,
    /// The ACCEPT datagram (message 2), built from the session's first packet.
    accept: Vec<u8>,
    hello_msg: Vec<u8>,
    hello_packet: Vec<u8>,
    /// Set once message 2 is written.
    prot: Option<Protection>,
    stats: SecureStats,
}

impl SecureReceiver {
    /// Start the session of an opened HELLO (see [`Receiver::accept`]). To refuse the client
    /// (an unknown key), accept and then [`close`](Receiver::close) it through
    /// [`inner_mut`](Self::inner_mut): the refusal then travels authenticated in message 2.
    pub fn accept(
        mut cfg: ReceiverConfig,
        now: Instant,
        hello: OpenedHello,
        token: u64,
    ) -> Result<SecureReceiver, DropReason> {
        cfg.overhead = Overhead::SEALED;
        let cipher = match wire::parse(&hello.packet) {
            Ok(p) => match p.packet {
                Packet::Hello(h) => Cipher::from_u8(h.cipher),
                _ => None,
            },
            Err(_) => None,
        };
        let mut packet = hello.packet.clone();
        let inner = Receiver::accept(cfg, now, &mut packet, token)?;
        Ok(SecureReceiver {
            inner,
            // A HELLO with an unknown cipher is refused by the session (CLOSE Unsupported,
            // inside message 2); nothing is ever sealed with this placeholder.
            cipher: cipher.unwrap_or(Cipher::ChaCha20Poly1305),
            client_key: hello.client_key,
            hs: Some(hello.hs),
            accept: Vec::new(),
            hello_msg: hello.msg,
            hello_packet: hello.packet,
            prot: None,
            stats: SecureStats::default(),
        })
    }

    /// The session inside.
    pub fn inner(&self) -> &Receiver {
        &self.inner
    }

    /// The session inside, for what the wrapper does not change.
    pub fn inner_mut(&mut self) -> &mut Receiver {
        &mut self.inner
    }

    /// The client's static key (proven by the handshake).
    pub fn client_key(&self) -> [u8; KEY_LEN] {
        self.client_key
    }

    /// The packet cipher.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Packets dropped by the protection.
    pub fn secure_stats(&self) -> SecureStats {
        self.stats
    }

    /// Process one datagram of this session (see [`Receiver::handle_datagram`]).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
    ) -> Result<Option<DataChunk>, DropReason> {
        self.handle(now, datagram, false)
    }

    /// See [`Receiver::handle_datagram_from_new_address`]: only an authentic packet moves the
    /// session to a new address.
    pub fn handle_datagram_from_new_address(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
    ) -> Result<Option<DataChunk>, DropReason> {
        self.handle(now, datagram, true)
    }

    fn handle(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
        moved: bool,
    ) -> Result<Option<DataChunk>, DropReason> {
        if datagram.len() < HEADER_LEN || datagram[0] != VERSION {
            return Err(DropReason::Unexpected("not a Spate v1 packet"));
        }
        let session = u32::from_be_bytes([datagram[2], datagram[3], datagram[4], datagram[5]]);
        if session != self.inner.session_id() {
            return Err(DropReason::WrongSession(session));
        }
        if datagram[1] & 0x0f == PacketType::Hello as u8 {
            // A repeated HELLO (our ACCEPT was lost) carries the same message 1; only then is
            // it answered, with the same ACCEPT.
            let msg = datagram.get(HEADER_LEN + RETRY_TOKEN_LEN..);
            if moved || msg != Some(&self.hello_msg[..]) {
                self.stats.not_authentic += 1;
                return Err(DropReason::NotAuthentic);
            }
            let mut packet = self.hello_packet.clone();
            return self.inner.handle_datagram(now, &mut packet);
        }
        let Some(prot) = self.prot.as_mut() else {
            self.stats.not_authentic += 1;
            return Err(DropReason::NotAuthentic);
        };
        let opened = prot.open(datagram, &mut self.stats);
        self.after_open(now, datagram, opened, moved)
    }

    /// The opener of `datagram` (a sealed packet of this session whose epoch's key is at
    /// hand), to open it on another thread before [`handle_opened`](Self::handle_opened).
    pub fn opener(&self, datagram: &[u8]) -> Option<Opener> {
        if datagram.len() < HEADER_LEN
            || datagram[0] != VERSION
            || datagram[1] & 0x0f == PacketType::Hello as u8
        {
            return None;
        }
        self.prot.as_ref()?.opener(datagram)
    }

    /// Process a datagram of this session that an [`Opener`] from
    /// [`opener`](Self::opener) opened in place (`opened`: the packet's length, or `None` if
    /// it was not authentic): the replay check and everything after it, exactly as
    /// [`handle_datagram`](Self::handle_datagram) would; `moved`: it came from an address
    /// other than the session's.
    pub fn handle_opened(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
        opened: Option<usize>,
        moved: bool,
    ) -> Result<Option<DataChunk>, DropReason> {
        if datagram.len() < HEADER_LEN {
            return Err(DropReason::Unexpected("not a Spate v1 packet"));
        }
        let session = u32::from_be_bytes([datagram[2], datagram[3], datagram[4], datagram[5]]);
        if session != self.inner.session_id() {
            return Err(DropReason::WrongSession(session));
        }
        let Some(prot) = self.prot.as_mut() else {
            self.stats.not_authentic += 1;
            return Err(DropReason::NotAuthentic);
        };
        let accepted = match opened {
            Some(n) => prot
                .accept_opened(super::client::packet_number(datagram), &mut self.stats)
                .map(|()| n),
            None => {
                self.stats.not_authentic += 1;
                Err(DropReason::NotAuthentic)
            }
        };
        self.after_open(now, datagram, accepted, moved)
    }

    /// After the one open point: end the session past the integrity limit, and hand an
    /// authentic packet to the session.
    fn after_open(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
        opened: Result<usize, DropReason>,
        moved: bool,
    ) -> Result<Option<DataChunk>, DropReason> {
        if self.stats.integrity_exceeded() {
            self.inner
                .close(CloseCode::Application, "AEAD integrity limit reached");
        }
        let n = opened?;
        if moved {
            self.inner
                .handle_datagram_from_new_address(now, &mut datagram[..n])
        } else {
            self.inner.handle_datagram(now, &mut datagram[..n])
        }
    }

    /// The session's next datagram, protected (see [`Receiver::poll_transmit`]).
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.inner.poll_transmit(now, buf)?;
        if let Some(hs) = self.hs.as_mut() {
            // The session's first packet (ACCEPT or CLOSE) is message 2's payload (§9.2).
            let payload = &buf[..t.len - TAG_LEN];
            let mut out = vec![0; HEADER_LEN + payload.len() + IK_MSG2_OVERHEAD];
            stateless_header(PacketType::Accept as u8, self.inner.session_id(), &mut out);
            let n = hs.write_message(payload, &mut out[HEADER_LEN..]).ok()?;
            out.truncate(HEADER_LEN + n);
            let (c2s, s2c) = handshake::split(hs);
            self.hs = None;
            self.prot = Some(Protection::new(self.cipher, s2c, c2s));
            self.accept = out;
        } else if buf[1] & 0x0f != PacketType::Accept as u8 {
            self.prot
                .as_mut()?
                .seal_batch(&mut buf[..t.len], t.segment_size);
            return Some(t);
        }
        let n = self.accept.len();
        buf.get_mut(..n)?.copy_from_slice(&self.accept);
        Some(Transmit {
            len: n,
            segment_size: n,
        })
    }
}
