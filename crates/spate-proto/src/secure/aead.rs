//! The one seal and the one open of a Spate packet (`docs/spec.md` §9.4).
//!
//! > §9.4: A sealed packet is `Header (12) | Ciphertext | Tag (16)`. The header travels in the
//! > clear and is the associated data; the nonce is the epoch's IV XOR the packet number,
//! > big-endian, in the IV's last 8 bytes. With cipher 3 (authenticated only) the body travels
//! > in the clear and the tag is AES-256-GCM's over an empty plaintext with `Header | Body` as
//! > associated data (GMAC).
//!
//! `aws-lc-rs` does the work: measured fastest here (`spate-lab bench-aead`, 1432-byte
//! packets, one core): AES-256-GCM sealed at 65 and opened at 55 Gbit/s, against ring's 48 and
//! 49; ChaCha20-Poly1305 at 17 / 16 with either. (Until session 47 this was ring, then ahead at
//! 34 against 22.) The packet is sealed where the session wrote it, so a GSO batch is never
//! copied; a DATA payload is encrypted from the send buffer straight into its packet
//! ([`PacketKey::seal_from`], `sender/deferred.rs`).

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};

use super::TAG_LEN;
use crate::wire::{DATA_OVERHEAD, HEADER_LEN};

/// Bytes of a DATA packet's body before its payload (object and offset, spec §4.3).
const DATA_FIELDS: usize = DATA_OVERHEAD - HEADER_LEN;

/// The packet cipher of a session, chosen by the client in its HELLO (§9.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Cipher {
    /// AES-256-GCM: the default where the CPU has AES instructions.
    Aes256Gcm = 1,
    /// ChaCha20-Poly1305: the default where it does not.
    ChaCha20Poly1305 = 2,
    /// Bodies in the clear, still authenticated (GMAC): for measurement only.
    AuthOnly = 3,
}

impl Cipher {
    /// The cipher with this wire value.
    pub fn from_u8(v: u8) -> Option<Cipher> {
        match v {
            1 => Some(Cipher::Aes256Gcm),
            2 => Some(Cipher::ChaCha20Poly1305),
            3 => Some(Cipher::AuthOnly),
            _ => None,
        }
    }

    /// Name for people.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes256Gcm => "aes-256-gcm",
            Cipher::ChaCha20Poly1305 => "chacha20-poly1305",
            Cipher::AuthOnly => "none (authenticated, NOT encrypted)",
        }
    }

    /// True if bodies are encrypted.
    pub fn encrypts(self) -> bool {
        self != Cipher::AuthOnly
    }
}

/// One epoch's key and IV in one direction.
pub(crate) struct PacketKey {
    key: LessSafeKey,
    iv: [u8; 12],
    encrypts: bool,
}

impl PacketKey {
    pub(crate) fn new(cipher: Cipher, key: &[u8; 32], iv: [u8; 12]) -> PacketKey {
        let alg = match cipher {
            Cipher::Aes256Gcm | Cipher::AuthOnly => &AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &CHACHA20_POLY1305,
        };
        // Both algorithms take 32-byte keys, so this cannot fail.
        let unbound = UnboundKey::new(alg, key).expect("32-byte key for a 256-bit AEAD");
        PacketKey {
            key: LessSafeKey::new(unbound),
            iv,
            encrypts: cipher.encrypts(),
        }
    }

    fn nonce(&self, pn: u64) -> Nonce {
        let mut n = self.iv;
        for (b, p) in n[4..].iter_mut().zip(pn.to_be_bytes()) {
            *b ^= p;
        }
        Nonce::assume_unique_for_key(n)
    }

    /// Seal `packet` (header, body, then `TAG_LEN` bytes of room) in place.
    pub(crate) fn seal(&self, pn: u64, packet: &mut [u8]) {
        if packet.len() < HEADER_LEN + TAG_LEN {
            return;
        }
        let (msg, tag_out) = packet.split_at_mut(packet.len() - TAG_LEN);
        let tag = if self.encrypts {
            let (header, body) = msg.split_at_mut(HEADER_LEN);
            self.key
                .seal_in_place_separate_tag(self.nonce(pn), Aad::from(&*header), body)
        } else {
            self.key
                .seal_in_place_separate_tag(self.nonce(pn), Aad::from(&*msg), &mut [])
        };
        // The AEAD fails only for inputs beyond 2^36 bytes; a packet is at most 64 KiB.
        if let Ok(tag) = tag {
            tag_out.copy_from_slice(tag.as_ref());
        }
    }

    /// Seal a packet whose payload is not in it yet (`sender/deferred.rs`): `packet` holds the
    /// header and `fields` more bytes of body, then room for `payload` and the tag, and the
    /// payload is encrypted from where it is into that room — the bytes [`seal`](Self::seal)
    /// makes of the packet with the payload copied in. Without encryption (cipher 3) the
    /// payload is copied in and the packet sealed so.
    pub(crate) fn seal_from(&self, pn: u64, packet: &mut [u8], fields: usize, payload: &[u8]) {
        let room = HEADER_LEN + fields;
        if !self.encrypts || packet.len() != room + payload.len() + TAG_LEN {
            if let Some(dst) = packet.get_mut(room..room + payload.len()) {
                dst.copy_from_slice(payload);
                self.seal(pn, packet);
            }
            return;
        }
        let (header, rest) = packet.split_at_mut(HEADER_LEN);
        let (body, out) = rest.split_at_mut(fields);
        // Fails only for inputs beyond 2^36 bytes, as in `seal`; the packet then does not
        // open, and is lost like any other.
        let _ =
            self.key
                .seal_in_place_scatter(self.nonce(pn), Aad::from(&*header), body, payload, out);
    }

    /// Seal `packet` in place ([`seal`](Self::seal)), or, with the `payload` the session left
    /// out of this DATA packet, from where that payload is ([`seal_from`](Self::seal_from)).
    pub(crate) fn seal_with(&self, pn: u64, packet: &mut [u8], payload: Option<&[u8]>) {
        match payload {
            Some(p) => self.seal_from(pn, packet, DATA_FIELDS, p),
            None => self.seal(pn, packet),
        }
    }

    /// Open `packet` (header, ciphertext, tag) in place; the plaintext packet's length (the
    /// tag removed), or `None` if it is not authentic.
    pub(crate) fn open(&self, pn: u64, packet: &mut [u8]) -> Option<usize> {
        let len = packet.len().checked_sub(TAG_LEN)?;
        if len < HEADER_LEN {
            return None;
        }
        let nonce = self.nonce(pn);
        if self.encrypts {
            let (header, rest) = packet.split_at_mut(HEADER_LEN);
            self.key
                .open_in_place(nonce, Aad::from(&*header), rest)
                .ok()?;
        } else {
            let (msg, tag) = packet.split_at_mut(len);
            self.key.open_in_place(nonce, Aad::from(&*msg), tag).ok()?;
        }
        Some(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CIPHERS: [Cipher; 3] = [
        Cipher::Aes256Gcm,
        Cipher::ChaCha20Poly1305,
        Cipher::AuthOnly,
    ];

    fn packet(body: &[u8]) -> Vec<u8> {
        let mut p = vec![1, 0x03, 0, 0, 0, 7, 0, 0, 0, 0, 0, 42];
        p.extend_from_slice(body);
        p.extend_from_slice(&[0; TAG_LEN]);
        p
    }

    #[test]
    fn every_cipher_round_trips_and_rejects_any_flipped_bit() {
        for cipher in CIPHERS {
            let k = PacketKey::new(cipher, &[7; 32], [9; 12]);
            let body = b"the quick brown fox jumps over the lazy dog";
            let mut p = packet(body);
            k.seal(42, &mut p);
            let in_clear = p.windows(16).any(|w| w == &body[..16]);
            assert_eq!(in_clear, !cipher.encrypts(), "{cipher:?}");
            for bit in 0..p.len() * 8 {
                let mut q = p.clone();
                q[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(k.open(42, &mut q), None, "{cipher:?} bit {bit}");
            }
            assert_eq!(k.open(43, &mut p.clone()), None, "another packet number");
            assert_eq!(k.open(42, &mut p[..20].to_vec()), None, "truncated");
            let n = k.open(42, &mut p).unwrap();
            assert_eq!(&p[HEADER_LEN..n], body);
        }
    }

    /// A payload encrypted from elsewhere makes the same packet as one copied in and sealed.
    #[test]
    fn sealing_from_elsewhere_makes_the_same_bytes() {
        for cipher in CIPHERS {
            let k = PacketKey::new(cipher, &[7; 32], [9; 12]);
            let payload: Vec<u8> = (0..1436u32).map(|i| (i * 7 + 3) as u8).collect();
            let fields = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 5, 0xa0];
            let mut body = fields.to_vec();
            body.extend_from_slice(&payload);
            let mut copied = packet(&body);
            k.seal(1 << 20, &mut copied);
            // Header and fields, then stale bytes where the payload and tag go.
            let mut from = packet(&fields);
            from.truncate(HEADER_LEN + fields.len());
            from.resize(copied.len(), 0xee);
            k.seal_from(1 << 20, &mut from, fields.len(), &payload);
            assert_eq!(from, copied, "{cipher:?}");
        }
    }
}
