//! The Noise IK handshake through `snow` (`docs/spec.md` §9.2), with randomness passed in.
//!
//! > §9.2: The handshake is `Noise_IK_25519_ChaChaPoly_SHA256` (Noise revision 34). The
//! > prologue is the 10 ASCII bytes `spate/1 IK` followed by the HELLO's 12-byte outer
//! > header. Message 1 (`-> e, es, s, ss`) is the HELLO's handshake message; its payload is the
//! > 16-byte authorization token followed by the HELLO packet. Message 2 (`<- e, ee, se`) is the
//! > ACCEPT's; its payload is the server's first packet (ACCEPT, or CLOSE). After message 2
//! > both ends take Noise's `Split()`: the first key for client → server packets, the second
//! > for server → client.
//!
//! Only this file touches `snow`. Noise draws its ephemeral keys from a random source; the core
//! reads none, so the driver passes a 32-byte seed per handshake and [`SeededRng`] expands it
//! with HKDF-SHA256 (`snow` asks for 32 bytes, once).

use rand_core::{CryptoRng, RngCore};
use snow::params::{DHChoice, NoiseParams};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher as NoiseCipher, Dh, Hash, Random};
use snow::{Builder, HandshakeState};

use super::schedule::expand;
use super::{KEY_LEN, NOISE_PARAMS, PROLOGUE_LABEL};
use crate::wire::HEADER_LEN;

/// Why a handshake message was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The message did not decrypt: not for this key, or altered.
    #[error("handshake message not authentic (wrong key, or altered)")]
    NotAuthentic,
    /// A key or message was malformed.
    #[error("handshake failed: {0}")]
    Other(String),
}

impl From<snow::Error> for HandshakeError {
    fn from(e: snow::Error) -> Self {
        match e {
            snow::Error::Decrypt | snow::Error::Dh => HandshakeError::NotAuthentic,
            other => HandshakeError::Other(other.to_string()),
        }
    }
}

/// Randomness for `snow`: HKDF-SHA256 expansions of a seed the driver drew from its random
/// source, one per request.
struct SeededRng {
    seed: [u8; 32],
    counter: u64,
}

impl RngCore for SeededRng {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }

    fn next_u64(&mut self) -> u64 {
        let mut b = [0; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for c in dest.chunks_mut(32) {
            let mut info = *b"spate/1 rng \0\0\0\0\0\0\0\0";
            info[12..].copy_from_slice(&self.counter.to_be_bytes());
            self.counter += 1;
            let mut block = [0; 32];
            expand(&self.seed, &info, &mut block);
            c.copy_from_slice(&block[..c.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for SeededRng {}
impl Random for SeededRng {}

/// `snow`'s default primitives, with [`SeededRng`] as the random source.
struct Resolver {
    seed: [u8; 32],
}

impl CryptoResolver for Resolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRng {
            seed: self.seed,
            counter: 0,
        }))
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }

    fn resolve_hash(&self, choice: &snow::params::HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(&self, choice: &snow::params::CipherChoice) -> Option<Box<dyn NoiseCipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

fn params() -> NoiseParams {
    NOISE_PARAMS.parse().expect("a valid Noise protocol name")
}

fn prologue(header: &[u8; HEADER_LEN]) -> Vec<u8> {
    let mut p = PROLOGUE_LABEL.to_vec();
    p.extend_from_slice(header);
    p
}

/// The X25519 public key of `private`.
pub fn public_key(private: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    let mut dh = DefaultResolver
        .resolve_dh(&DHChoice::Curve25519)
        .expect("snow's default resolver has X25519");
    dh.set(private);
    let mut out = [0; KEY_LEN];
    out.copy_from_slice(dh.pubkey());
    out
}

fn builder<'a>(
    local_private: &'a [u8; KEY_LEN],
    prologue: &'a [u8],
    seed: [u8; 32],
) -> Builder<'a> {
    Builder::with_resolver(params(), Box::new(Resolver { seed }))
        .local_private_key(local_private)
        .prologue(prologue)
}

/// The client's handshake state before message 1.
pub(crate) fn initiator(
    local_private: &[u8; KEY_LEN],
    server_public: &[u8; KEY_LEN],
    header: &[u8; HEADER_LEN],
    seed: [u8; 32],
) -> Result<HandshakeState, HandshakeError> {
    let prologue = prologue(header);
    Ok(builder(local_private, &prologue, seed)
        .remote_public_key(server_public)
        .build_initiator()?)
}

/// The server's handshake state before message 1.
pub(crate) fn responder(
    local_private: &[u8; KEY_LEN],
    header: &[u8; HEADER_LEN],
    seed: [u8; 32],
) -> Result<HandshakeState, HandshakeError> {
    let prologue = prologue(header);
    Ok(builder(local_private, &prologue, seed).build_responder()?)
}

/// The two directions' secrets after the last message: (client → server, server → client).
pub(crate) fn split(hs: &mut HandshakeState) -> ([u8; 32], [u8; 32]) {
    hs.dangerously_get_raw_split()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ik_round_trip_gives_both_ends_the_same_keys_and_the_client_identity() {
        let server = [1u8; 32];
        let client = [2u8; 32];
        let header = [1, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0];
        let mut i = initiator(&client, &public_key(&server), &header, [3; 32]).unwrap();
        let mut r = responder(&server, &header, [4; 32]).unwrap();
        let mut m1 = vec![0; 200];
        let n = i.write_message(b"hello", &mut m1).unwrap();
        assert_eq!(n, 5 + super::super::IK_MSG1_OVERHEAD);
        let mut p = vec![0; 200];
        let n = r.read_message(&m1[..n], &mut p).unwrap();
        assert_eq!(&p[..n], b"hello");
        assert_eq!(r.get_remote_static().unwrap(), public_key(&client));
        let mut m2 = vec![0; 200];
        let n = r.write_message(b"accept", &mut m2).unwrap();
        assert_eq!(n, 6 + super::super::IK_MSG2_OVERHEAD);
        let k = i.read_message(&m2[..n], &mut p).unwrap();
        assert_eq!(&p[..k], b"accept");
        assert_eq!(split(&mut i), split(&mut r));

        // Another prologue (a changed header) or another server key: message 1 does not open.
        let mut other = header;
        other[5] = 8;
        let mut i = initiator(&client, &public_key(&server), &header, [3; 32]).unwrap();
        let n = i.write_message(b"hello", &mut m1).unwrap();
        let mut r = responder(&server, &other, [4; 32]).unwrap();
        assert_eq!(
            r.read_message(&m1[..n], &mut p).unwrap_err(),
            snow::Error::Decrypt
        );
        let mut r = responder(&[9; 32], &header, [4; 32]).unwrap();
        assert!(r.read_message(&m1[..n], &mut p).is_err());
    }
}
