//! The server's endpoint: session lookup, admission and protection in one place
//! (`docs/spec.md` §4.1, §4.8, §9).
//!
//! One [`Endpoint`] serves every session of one socket. For each datagram it:
//!
//! 1. finds the session by its ID and hands the datagram to it — through the session's one
//!    open point ([`SecureReceiver`]); only an authentic packet moves a session to a new
//!    address, and the first time a session's sender proves its address the session takes one
//!    of `max_sessions` slots or is refused as busy;
//! 2. for an unknown ID, answers statelessly: IDENTITY to an IDENTIFY (§9.6), CLOSE Refused to
//!    a HELLO of a session that ended (§4.1), RETRY to a HELLO without a valid token while
//!    under load (§9.5);
//! 3. admits a HELLO (`admit.rs`: half-open limits per source and in all), opens its handshake
//!    message (§9.2) — IDENTITY if it does not decrypt — and asks the [`Host`] whether the
//!    client's key may come in; a refusal travels, authenticated, inside message 2.
//!
//! The application's per-session state (`A`: where files go, the writer, …) lives beside
//! each session in its [`Slot`]. The endpoint reads no clock and no random source: the time
//! is an argument, and the [`Host`] supplies randomness for each new session.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the endpoint: routing, stateless answers, opening sessions, slots |
//! | `admit.rs` | half-open sessions, their limits, ended session IDs |

mod admit;

use std::collections::BTreeMap;
use std::net::SocketAddr;

pub use admit::{
    Admission, Verdict, ENDED_FOR, HALF_OPEN_FOR, HALF_OPEN_PER_SOURCE, MAX_ENDED, MAX_HALF_OPEN,
};

use crate::config::ReceiverConfig;
use crate::receiver::DataChunk;
use crate::secure::{
    hello_retry_token, identity_packet, open_hello, retry_packet, types, HelloRefusal, Opener,
    RetryKey, SecureReceiver, AUTH_LEN, KEY_LEN,
};
use crate::time::Instant;
use crate::wire::{Close, CloseCode, PacketType, HEADER_LEN, HELLO_GET, MIN_DATAGRAM, VERSION};

/// Half-open sessions from which on the endpoint is "under load" (spec §9.5): a HELLO must
/// then carry a RETRY token before the endpoint spends a handshake (≈150 µs of X25519) on it.
/// 64 is far above what legitimate clients leave half-open (each for one round trip), and far
/// below the [`MAX_HALF_OPEN`] the table holds.
pub const UNDER_LOAD: usize = 64;
/// Handshakes per second from which on the endpoint is under load, whatever the half-open
/// count: HELLOs of random bytes create no session but each costs a Diffie-Hellman before it
/// fails to open. 256 a second is ≈4 % of a core here; above it, RETRY costs one HMAC.
pub const UNDER_LOAD_HANDSHAKES: u32 = 256;

/// What the endpoint needs from its application for a new session.
pub trait Host<A> {
    /// 32 random bytes for the session's ephemeral key and a random address-validation
    /// Token (spec §4.8, §9.2), from a cryptographically secure source.
    fn random(&mut self) -> ([u8; 32], u64);

    /// The client proved the static key `client_key` and sent `auth` (zeros, or a one-time
    /// token's secret); `get`: it asks for files (HELLO flag GET, §5.6) rather than sending
    /// them. Return the application's state for the session and, to refuse it, the reason
    /// the client is told.
    fn admit(
        &mut self,
        client_key: &[u8; KEY_LEN],
        auth: &[u8; AUTH_LEN],
        get: bool,
    ) -> (A, Option<String>);
}

/// One session and the application's state beside it.
pub struct Slot<A> {
    /// The protected session.
    pub rx: SecureReceiver,
    /// The address its sender is reached at (moves only with an authentic packet).
    pub peer: SocketAddr,
    /// When it opened.
    pub started: Instant,
    /// Its sender proved its address, and it holds one of the `max_sessions` slots.
    pub validated: bool,
    /// The application's state.
    pub app: A,
}

impl<A> Slot<A> {
    /// Half-open for longer than [`HALF_OPEN_FOR`]: to be removed.
    pub fn expired(&self, now: Instant) -> bool {
        !self.validated && now.saturating_since(self.started) > HALF_OPEN_FOR
    }
}

/// What became of a datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// It went to session `id`; `chunk` is object data to write (a range of the datagram).
    Session {
        /// The session.
        id: u32,
        /// Object bytes to write, if any.
        chunk: Option<DataChunk>,
    },
    /// It opened session `id` (half-open until its sender proves its address).
    Opened(u32),
    /// Send the first `n` bytes of the answer buffer back to the datagram's source.
    Answer(usize),
    /// Dropped.
    Dropped,
}

/// The server's endpoint (see the module documentation).
pub struct Endpoint<A> {
    private: [u8; KEY_LEN],
    public: [u8; KEY_LEN],
    cfg: ReceiverConfig,
    max_sessions: usize,
    retry: RetryKey,
    retry_always: bool,
    /// Never answer IDENTITY (a client waiting for the answer to its download, §2.1: its
    /// static key is not for strangers to learn).
    hide_identity: bool,
    /// Handshakes attempted in the current second: (the second, count).
    handshakes: (u64, u32),
    admission: Admission,
    /// By session id. A B-tree, not a hash map: SipHash of the id of every datagram was 4 %
    /// of the receiver's CPU.
    sessions: BTreeMap<u32, Slot<A>>,
}

impl<A> Endpoint<A> {
    /// An endpoint with the static key pair (`private`, `public`), creating sessions with
    /// `cfg`, at most `max_sessions` of them validated at once. `retry_secret`: 32 random
    /// bytes for RETRY tokens.
    pub fn new(
        private: [u8; KEY_LEN],
        public: [u8; KEY_LEN],
        cfg: ReceiverConfig,
        max_sessions: usize,
        retry_secret: [u8; 32],
    ) -> Endpoint<A> {
        Endpoint {
            private,
            public,
            cfg,
            max_sessions: max_sessions.max(1),
            retry: RetryKey::new(retry_secret),
            retry_always: false,
            hide_identity: false,
            handshakes: (0, 0),
            admission: Admission::default(),
            sessions: BTreeMap::new(),
        }
    }

    /// Ask every new client for a RETRY token first, as under load (for tests).
    pub fn retry_always(&mut self) {
        self.retry_always = true;
    }

    /// Never answer IDENTIFY, nor a HELLO made for another key, with IDENTITY (§9.6): for a
    /// client receiving the answer to its download (§2.1), whose peer knows its key already.
    pub fn hide_identity(&mut self) {
        self.hide_identity = true;
    }

    /// Change the receiver settings of new sessions.
    pub fn set_config(&mut self, cfg: ReceiverConfig) {
        self.cfg = cfg;
    }

    /// Change how many validated sessions may run at once.
    pub fn set_max_sessions(&mut self, n: usize) {
        self.max_sessions = n.max(1);
    }

    /// The server's static public key.
    pub fn public_key(&self) -> [u8; KEY_LEN] {
        self.public
    }

    /// The session `id`.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut Slot<A>> {
        self.sessions.get_mut(&id)
    }

    /// Every session, by id.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Slot<A>)> {
        self.sessions.iter_mut().map(|(&id, s)| (id, s))
    }

    /// Number of sessions (half-open included).
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Sessions whose sender proved its address (the ones that may move data; half-open
    /// sessions hold a HELLO's worth at most).
    pub fn validated(&self) -> usize {
        self.admission.validated
    }

    /// True without sessions.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Remove session `id`. Its ID is remembered as ended (spec §4.1) if it ran (was
    /// validated or closed), not if it was evicted or expired half-open: that sender's next
    /// HELLO must still work.
    pub fn remove(&mut self, now: Instant, id: u32, remember: bool) -> Option<Slot<A>> {
        let s = self.sessions.remove(&id)?;
        if s.validated {
            self.admission.validated -= 1;
        } else {
            self.admission.left_half_open(s.peer.ip(), false);
        }
        if remember {
            self.admission.remember_ended(now, id);
        }
        Some(s)
    }

    /// Handle one datagram from `from`. `out` receives a stateless answer ([`Handled::Answer`];
    /// 128 bytes are enough). `before_session(slot, datagram)` may refuse a datagram of an
    /// existing session before it is opened (the server drops DATA whose writer is behind).
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        d: &mut [u8],
        out: &mut [u8],
        host: &mut impl Host<A>,
        before_session: impl FnOnce(&Slot<A>, &[u8]) -> bool,
    ) -> Handled {
        if d.len() < HEADER_LEN || d[0] != VERSION {
            return Handled::Dropped;
        }
        let ty = d[1] & 0x0f;
        let id = u32::from_be_bytes([d[2], d[3], d[4], d[5]]);
        if self.sessions.contains_key(&id) {
            return self.in_session(id, from, d, before_session, |rx, d, moved| {
                if moved {
                    rx.handle_datagram_from_new_address(now, d)
                } else {
                    rx.handle_datagram(now, d)
                }
            });
        }
        // Nothing for an unknown session but a full-size HELLO or IDENTIFY (§4.1, §9.6): an
        // answer is then never larger than what arrived.
        if d.len() < MIN_DATAGRAM {
            return Handled::Dropped;
        }
        if ty == types::IDENTIFY && !self.hide_identity {
            return Handled::Answer(identity_packet(id, &self.public, out));
        }
        if ty != PacketType::Hello as u8 {
            return Handled::Dropped;
        }
        if self.admission.is_ended(id) {
            return self.answer_ended(id, out);
        }
        // §9.5: under load, no handshake work before the client proved its address.
        let secs = now.as_nanos() / 1_000_000_000;
        if self.handshakes.0 != secs {
            self.handshakes = (secs, 0);
        }
        let loaded =
            self.admission.half_open() >= UNDER_LOAD || self.handshakes.1 >= UNDER_LOAD_HANDSHAKES;
        if self.retry_always || loaded {
            let addr = addr_bytes(from);
            let ok = hello_retry_token(d).is_some_and(|t| self.retry.check(t, secs, id, &addr));
            if !ok {
                let token = self.retry.token(secs, id, &addr);
                return Handled::Answer(retry_packet(id, &token, out));
            }
        }
        let sessions = &self.sessions;
        let verdict = self.admission.hello(id, from.ip(), |id| {
            sessions.get(&id).is_some_and(|s| !s.validated)
        });
        match verdict {
            Verdict::Ended => return self.answer_ended(id, out),
            Verdict::Ignore => return Handled::Dropped,
            Verdict::Open(evict) => {
                if let Some(old) = evict {
                    self.remove(now, old, false);
                }
            }
        }
        self.handshakes.1 += 1;
        let (seed, token) = host.random();
        let hello = match open_hello(&self.private, d, seed) {
            Ok(h) => h,
            // The client pinned another key: tell it ours, so it can say so (§9.6).
            Err(HelloRefusal::NotForThisKey) if !self.hide_identity => {
                return Handled::Answer(identity_packet(id, &self.public, out))
            }
            Err(HelloRefusal::NotForThisKey) => return Handled::Dropped,
            Err(HelloRefusal::Malformed(_)) => return Handled::Dropped,
        };
        let get = (hello.packet()[1] >> 4) & HELLO_GET != 0;
        let (app, refusal) = host.admit(&hello.client_key(), &hello.auth(), get);
        let Ok(mut rx) = SecureReceiver::accept(self.cfg.clone(), now, hello, token) else {
            return Handled::Dropped;
        };
        // A refusal travels inside the handshake's answer, authenticated (§9.2).
        if let Some(msg) = refusal {
            rx.inner_mut().close(CloseCode::Refused, &msg);
        }
        self.admission.opened(now, id, from.ip());
        self.sessions.insert(
            id,
            Slot {
                rx,
                peer: from,
                started: now,
                validated: false,
                app,
            },
        );
        Handled::Opened(id)
    }

    /// The opener of `d` — a sealed packet of a session this endpoint holds, of an epoch whose
    /// key is at hand — to open it on another thread before
    /// [`handle_opened`](Self::handle_opened). Opening is the costly part of a packet (the
    /// AEAD); what follows it is per-session state and stays on one thread.
    pub fn opener(&self, d: &[u8]) -> Option<Opener> {
        if d.len() < HEADER_LEN || d[0] != VERSION {
            return None;
        }
        let id = u32::from_be_bytes([d[2], d[3], d[4], d[5]]);
        self.sessions.get(&id)?.rx.opener(d)
    }

    /// [`handle`](Self::handle) for a datagram an [`Opener`] from [`opener`](Self::opener)
    /// already opened in place (`opened`: its length, `None` if it was not authentic).
    pub fn handle_opened(
        &mut self,
        now: Instant,
        from: SocketAddr,
        d: &mut [u8],
        opened: Option<usize>,
        before_session: impl FnOnce(&Slot<A>, &[u8]) -> bool,
    ) -> Handled {
        if d.len() < HEADER_LEN || d[0] != VERSION {
            return Handled::Dropped;
        }
        let id = u32::from_be_bytes([d[2], d[3], d[4], d[5]]);
        self.in_session(id, from, d, before_session, |rx, d, moved| {
            rx.handle_opened(now, d, opened, moved)
        })
    }

    /// A datagram of session `id`, which `process` hands to its protection.
    fn in_session(
        &mut self,
        id: u32,
        from: SocketAddr,
        d: &mut [u8],
        before_session: impl FnOnce(&Slot<A>, &[u8]) -> bool,
        process: impl FnOnce(
            &mut SecureReceiver,
            &mut [u8],
            bool,
        ) -> Result<Option<DataChunk>, crate::event::DropReason>,
    ) -> Handled {
        let Some(s) = self.sessions.get_mut(&id) else {
            return Handled::Dropped;
        };
        if !before_session(s, d) {
            return Handled::Dropped;
        }
        // The peer's address changes only with a datagram the session accepts — an
        // authentic one — and the new address starts unvalidated (spec §4.8, §9.4).
        let res = process(&mut s.rx, d, from != s.peer);
        if res.is_ok() {
            s.peer = from;
        }
        if !s.validated && s.rx.inner().was_validated() {
            s.validated = true;
            self.admission.left_half_open(s.peer.ip(), true);
            if self.admission.validated > self.max_sessions {
                let msg = format!(
                    "refused: the receiver is busy ({} transfers in progress); try again later",
                    self.max_sessions
                );
                s.rx.inner_mut().close(CloseCode::Refused, &msg);
            }
        }
        match res {
            Ok(chunk) => Handled::Session { id, chunk },
            Err(_) => Handled::Dropped,
        }
    }

    /// A HELLO for a session that ended (delayed in the network, or a sender that reused its
    /// ID) gets a CLOSE instead of a new session nobody would drive (spec §4.1). Only a
    /// full-size HELLO gets here, so the answer is never larger than the packet. In the clear
    /// (the session's keys are gone): a client accepts a clear CLOSE only in its handshake.
    fn answer_ended(&self, id: u32, out: &mut [u8]) -> Handled {
        let reason = "this session has ended; a new session needs a new session ID";
        match Close::datagram(out, id, 0, CloseCode::Refused, reason) {
            Ok(n) => Handled::Answer(n),
            Err(_) => Handled::Dropped,
        }
    }
}

/// A socket address as bytes, for RETRY tokens.
fn addr_bytes(a: SocketAddr) -> Vec<u8> {
    let mut v = match a.ip() {
        std::net::IpAddr::V4(ip) => ip.octets().to_vec(),
        std::net::IpAddr::V6(ip) => ip.octets().to_vec(),
    };
    v.extend_from_slice(&a.port().to_be_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{SenderEvent, SessionError};
    use crate::secure::{public_key, Cipher, ClientParams, SecureSender};
    use crate::{Entry, Manifest, RateConfig, SenderConfig, Zeros};

    const SERVER: [u8; 32] = [0x51; 32];

    /// A host that refuses keys other than `allowed` and counts what it was asked.
    struct TestHost {
        allowed: [u8; 32],
        admitted: u32,
    }

    impl Host<u32> for TestHost {
        fn random(&mut self) -> ([u8; 32], u64) {
            ([9; 32], 77)
        }
        fn admit(&mut self, key: &[u8; 32], _: &[u8; 16], _: bool) -> (u32, Option<String>) {
            self.admitted += 1;
            let refusal = (*key != self.allowed).then(|| "not authorized".to_owned());
            (self.admitted, refusal)
        }
    }

    fn client(private: [u8; 32]) -> SecureSender {
        let m = Manifest::new(vec![Entry::file("f", 5000)]);
        let params = ClientParams {
            cipher: Cipher::ChaCha20Poly1305,
            local_private: private,
            server_public: public_key(&SERVER),
            auth: [0; 16],
            seed: [3; 32],
        };
        let cfg = SenderConfig::new(RateConfig::fixed(10_000_000));
        SecureSender::new(cfg, 7, &m, Instant::ZERO, params).unwrap()
    }

    fn endpoint() -> Endpoint<u32> {
        Endpoint::new(
            SERVER,
            public_key(&SERVER),
            ReceiverConfig::default(),
            1,
            [4; 32],
        )
    }

    /// Run client and endpoint over a lossless zero-delay link until both are quiet or 5 s
    /// of virtual time passed; the datagrams the endpoint answered statelessly.
    fn run(c: &mut SecureSender, e: &mut Endpoint<u32>, host: &mut TestHost) -> usize {
        run_with(c, e, |e, now, from, d, out| {
            e.handle(now, from, d, out, host, |_, _| true)
        })
    }

    /// [`run`], each datagram to the endpoint handed over by `deliver`.
    fn run_with(
        c: &mut SecureSender,
        e: &mut Endpoint<u32>,
        mut deliver: impl FnMut(
            &mut Endpoint<u32>,
            Instant,
            SocketAddr,
            &mut [u8],
            &mut [u8; 128],
        ) -> Handled,
    ) -> usize {
        let from: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let mut answers = 0;
        let mut buf = vec![0u8; 1500];
        let mut out = [0u8; 128];
        for ms in 0..5000 {
            let now = Instant::from_millis(ms);
            c.handle_timeout(now);
            while let Some(t) = c.poll_transmit(now, &mut buf, &mut Zeros) {
                let mut d = buf[..t.len].to_vec();
                if let Handled::Answer(n) = deliver(e, now, from, &mut d, &mut out) {
                    answers += 1;
                    let mut a = out[..n].to_vec();
                    let _ = c.handle_datagram(now, &mut a);
                }
            }
            for (_, s) in e.iter_mut() {
                s.rx.inner_mut().handle_timeout(now);
                while let Some(t) = s.rx.poll_transmit(now, &mut buf) {
                    let _ = c.handle_datagram(now, &mut buf[..t.len]);
                }
            }
            if c.is_closed() {
                break;
            }
        }
        answers
    }

    #[test]
    fn an_allowed_client_completes_and_a_stranger_is_refused_inside_the_handshake() {
        let mut host = TestHost {
            allowed: public_key(&[1; 32]),
            admitted: 0,
        };
        let mut e = endpoint();
        let mut c = client([1; 32]);
        assert_eq!(run(&mut c, &mut e, &mut host), 0);
        let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
        assert!(events.contains(&SenderEvent::Complete), "{events:?}");
        assert!(e.iter_mut().all(|(_, s)| s.validated));

        let mut e = endpoint();
        let mut c = client([2; 32]);
        run(&mut c, &mut e, &mut host);
        let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
        assert!(
            events.iter().any(|ev| matches!(ev, SenderEvent::Failed(SessionError::PeerClosed { reason, .. }) if reason == "not authorized")),
            "{events:?}"
        );
    }

    /// Packets opened elsewhere (`opener`, then `handle_opened`) complete the transfer as
    /// `handle` would; a replayed copy and a forged copy of each are dropped and counted.
    #[test]
    fn packets_opened_on_another_thread_are_handled_as_the_session_would() {
        let mut host = TestHost {
            allowed: public_key(&[1; 32]),
            admitted: 0,
        };
        let mut e = endpoint();
        let mut c = client([1; 32]);
        let (mut via_opener, mut replays, mut forgeries) = (0, 0, 0);
        run_with(&mut c, &mut e, |e, now, from, d, out| {
            let Some(opener) = e.opener(d) else {
                return e.handle(now, from, d, out, &mut host, |_, _| true);
            };
            via_opener += 1;
            let (mut copy, mut forged) = (d.to_vec(), d.to_vec());
            let n = forged.len() - 1;
            forged[n] ^= 1;
            let opened = std::thread::scope(|t| t.spawn(|| opener.open(d)).join().unwrap());
            let h = e.handle_opened(now, from, d, opened, |_, _| true);
            assert!(matches!(h, Handled::Session { .. }), "{h:?}");
            let again = opener.open(&mut copy);
            assert_eq!(
                e.handle_opened(now, from, &mut copy, again, |_, _| true),
                Handled::Dropped
            );
            replays += 1;
            let bad = opener.open(&mut forged);
            assert_eq!(bad, None);
            assert_eq!(
                e.handle_opened(now, from, &mut forged, bad, |_, _| true),
                Handled::Dropped
            );
            forgeries += 1;
            h
        });
        let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
        assert!(events.contains(&SenderEvent::Complete), "{events:?}");
        assert!(via_opener >= 3, "{via_opener}");
        let (_, s) = e.iter_mut().next().unwrap();
        assert_eq!(s.rx.secure_stats().replayed, replays);
        assert_eq!(s.rx.secure_stats().not_authentic, forgeries);
    }

    #[test]
    fn under_retry_the_client_proves_its_address_before_any_handshake_work() {
        let mut host = TestHost {
            allowed: public_key(&[1; 32]),
            admitted: 0,
        };
        let mut e = endpoint();
        e.retry_always();
        let mut c = client([1; 32]);
        assert_eq!(run(&mut c, &mut e, &mut host), 1, "one RETRY");
        assert_eq!(host.admitted, 1, "one handshake");
        let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
        assert!(events.contains(&SenderEvent::Complete), "{events:?}");
    }

    #[test]
    fn stateless_answers_are_small_and_keep_nothing() {
        let mut host = TestHost {
            allowed: [0; 32],
            admitted: 0,
        };
        let mut e = endpoint();
        let from: SocketAddr = "192.0.2.9:1".parse().unwrap();
        let mut out = [0u8; 128];
        let mut identify = vec![0u8; 1232];
        crate::secure::identify_packet(5, &mut identify);
        let h = e.handle(
            Instant::ZERO,
            from,
            &mut identify,
            &mut out,
            &mut host,
            |_, _| true,
        );
        assert_eq!(h, Handled::Answer(44));
        assert_eq!(&out[12..44], &public_key(&SERVER));
        // Short IDENTIFY, random HELLO: nothing, or an IDENTITY; no session either way.
        let h = e.handle(
            Instant::ZERO,
            from,
            &mut identify[..600],
            &mut out,
            &mut host,
            |_, _| true,
        );
        assert_eq!(h, Handled::Dropped);
        let mut hello = vec![0x5au8; 1300];
        hello[..12].copy_from_slice(&[1, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0]);
        let h = e.handle(
            Instant::ZERO,
            from,
            &mut hello,
            &mut out,
            &mut host,
            |_, _| true,
        );
        assert_eq!(h, Handled::Answer(44));
        assert!(e.is_empty());
        assert_eq!(host.admitted, 0);
        // An endpoint that hides its key (the receiving end of a download, §2.1) answers
        // neither.
        e.hide_identity();
        for d in [&mut identify[..], &mut hello[..]] {
            let h = e.handle(Instant::ZERO, from, d, &mut out, &mut host, |_, _| true);
            assert_eq!(h, Handled::Dropped);
        }
    }
}
