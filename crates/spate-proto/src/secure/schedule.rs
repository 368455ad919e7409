//! Per-direction packet keys and their update (`docs/spec.md` §9.3).
//!
//! > §9.3: Each direction starts from its 32-byte secret S₀ (Noise's split: the first output
//! > for client → server, the second for server → client). Packet number *pn* belongs to epoch
//! > *n* = ⌊pn / 2^23⌋. With HKDF-Expand(PRK, info, L) of RFC 5869 over SHA-256:
//! > key *n* = HKDF-Expand(Sₙ, "spate/1 key", 32), IV *n* = HKDF-Expand(Sₙ, "spate/1 iv", 12),
//! > Sₙ₊₁ = HKDF-Expand(Sₙ, "spate/1 next", 32). An implementation forgets Sₙ once it no
//! > longer needs epoch *n*.
//!
//! Why 2^23: it is the AES-GCM confidentiality limit for full-size packets (RFC 9001 §6.6),
//! and the epoch follows from the packet number, so the update needs no signal and no round
//! trip. At 10 Gbit/s of 1472-byte packets an epoch lasts about 10 s.
//!
//! The sealing side walks forward only (packet numbers only grow). The opening side keeps the
//! current and the previous epoch (packets reordered across the boundary) and derives later
//! ones on trial, committing only when a packet opened with them.

use std::sync::Arc;

use ring::hkdf::{KeyType, Prk, HKDF_SHA256};

use super::aead::{Cipher, PacketKey};
use super::EPOCH_BITS;
use crate::sender::Payload;

/// How many epochs ahead an opener tries (beyond that a packet is dropped).
const MAX_EPOCH_JUMP: u64 = 4;

struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand(secret, label, out.len()) with SHA-256.
pub(crate) fn expand(secret: &[u8; 32], label: &[u8], out: &mut [u8]) {
    let prk = Prk::new_less_safe(HKDF_SHA256, secret);
    // Outputs here are at most 32 bytes, far below HKDF's 255 × 32.
    prk.expand(&[label], Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF output within bounds");
}

fn next_secret(s: &[u8; 32]) -> [u8; 32] {
    let mut out = [0; 32];
    expand(s, b"spate/1 next", &mut out);
    out
}

/// Key and IV of the epoch whose secret is `s`.
pub(crate) fn epoch_key(cipher: Cipher, s: &[u8; 32]) -> PacketKey {
    let mut key = [0; 32];
    let mut iv = [0; 12];
    expand(s, b"spate/1 key", &mut key);
    expand(s, b"spate/1 iv", &mut iv);
    PacketKey::new(cipher, &key, iv)
}

fn epoch_of(pn: u64) -> u64 {
    pn >> EPOCH_BITS
}

/// The sealing keys of one direction.
pub(crate) struct SealKeys {
    cipher: Cipher,
    epoch: u64,
    secret: [u8; 32],
    /// Shared with the [`Sealer`]s of batches sealed on other threads.
    key: Arc<PacketKey>,
}

/// The sealing of one batch, for any thread: the key of the one epoch all its packet numbers
/// are in (spec §9.3–§9.4), and the DATA payloads the session left out of the batch, to be
/// encrypted from where they are held into their packets (`sender/deferred.rs`).
#[derive(Clone)]
pub struct Sealer {
    key: Arc<PacketKey>,
    pub(crate) payloads: Vec<Payload>,
}

impl Sealer {
    /// Seal every datagram of `batch` (`stride` bytes apart, the last possibly shorter) in
    /// place, each numbered by its own header, filling in the payloads left out.
    pub fn seal_batch(&self, batch: &mut [u8], stride: usize) {
        let payloads = self.payloads.iter().map(|p| {
            let bytes = p.bytes.as_ref().map(|(block, range)| &block[range.clone()]);
            (p.at, bytes)
        });
        seal_each(batch, stride, payloads, |pn, d, p| {
            self.key.seal_with(pn, d, p)
        });
    }
}

/// Seal each datagram of `batch` (`stride` bytes apart, the last possibly shorter), numbered
/// by its own header, with `seal(pn, datagram, payload)`. `payload` is the DATA payload the
/// session left out of that datagram (`payloads`: where each such datagram starts, in order,
/// and its bytes; `sender/deferred.rs`), `None` for a datagram written whole. A left-out
/// payload that is not at hand (its bytes `None`, which nothing between writing and sealing
/// can cause) leaves its datagram unsealed: it does not open, and is lost like any other.
pub(crate) fn seal_each<'p>(
    batch: &mut [u8],
    stride: usize,
    payloads: impl Iterator<Item = (usize, Option<&'p [u8]>)>,
    mut seal: impl FnMut(u64, &mut [u8], Option<&[u8]>),
) {
    let stride = stride.max(1);
    let mut payloads = payloads.peekable();
    for (i, d) in batch.chunks_mut(stride).enumerate() {
        let pn = super::client::packet_number(d);
        match payloads.next_if(|&(at, _)| at == i * stride) {
            Some((_, Some(p))) => seal(pn, d, Some(p)),
            Some((_, None)) => {}
            None => seal(pn, d, None),
        }
    }
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer")
    }
}

impl SealKeys {
    pub(crate) fn new(cipher: Cipher, secret: [u8; 32]) -> SealKeys {
        SealKeys {
            cipher,
            epoch: 0,
            key: Arc::new(epoch_key(cipher, &secret)),
            secret,
        }
    }

    /// Move to the epoch of `pn` (never back).
    fn advance(&mut self, pn: u64) {
        while self.epoch < epoch_of(pn) {
            self.secret = next_secret(&self.secret);
            self.epoch += 1;
            self.key = Arc::new(epoch_key(self.cipher, &self.secret));
        }
    }

    /// Seal the packet numbered `pn` (header, body, tag room) in place.
    pub(crate) fn seal(&mut self, pn: u64, packet: &mut [u8]) {
        self.advance(pn);
        self.key.seal(pn, packet);
    }

    /// Seal the packet numbered `pn`, its left-out payload from where it is
    /// ([`PacketKey::seal_with`]).
    pub(crate) fn seal_with(&mut self, pn: u64, packet: &mut [u8], payload: Option<&[u8]>) {
        self.advance(pn);
        self.key.seal_with(pn, packet, payload);
    }

    /// The sealer of packets `first..=last` if they are in one epoch (a batch that crosses an
    /// epoch, once in 2^23 packets, is sealed here instead).
    pub(crate) fn sealer(&mut self, first: u64, last: u64) -> Option<Sealer> {
        self.advance(first);
        (epoch_of(last) == self.epoch).then(|| Sealer {
            key: Arc::clone(&self.key),
            payloads: Vec::new(),
        })
    }
}

/// The opening keys of one direction.
pub(crate) struct OpenKeys {
    cipher: Cipher,
    epoch: u64,
    secret: [u8; 32],
    /// Shared with the [`Opener`]s of packets opened on other threads.
    key: Arc<PacketKey>,
    prev: Option<Arc<PacketKey>>,
}

/// The opening of one packet, for any thread: the key of its epoch (the current or the
/// previous one; a later epoch is derived on trial by the session itself, §9.3). Opening
/// changes nothing else: the replay check and everything after it stay with the session
/// ([`crate::secure::SecureReceiver::handle_opened`]).
#[derive(Clone)]
pub struct Opener(Arc<PacketKey>);

impl Opener {
    /// Open `datagram` (header, ciphertext, tag) in place: the plaintext packet's length, or
    /// `None` if it is not authentic — its bytes are then unspecified.
    pub fn open(&self, datagram: &mut [u8]) -> Option<usize> {
        if datagram.len() < crate::wire::HEADER_LEN {
            return None;
        }
        self.0
            .open(super::client::packet_number(datagram), datagram)
    }
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opener")
    }
}

impl OpenKeys {
    pub(crate) fn new(cipher: Cipher, secret: [u8; 32]) -> OpenKeys {
        OpenKeys {
            cipher,
            epoch: 0,
            key: Arc::new(epoch_key(cipher, &secret)),
            secret,
            prev: None,
        }
    }

    /// The opener of a packet numbered `pn`, if its epoch's key is at hand.
    pub(crate) fn opener(&self, pn: u64) -> Option<Opener> {
        let e = epoch_of(pn);
        if e == self.epoch {
            Some(Opener(Arc::clone(&self.key)))
        } else if e + 1 == self.epoch {
            self.prev.as_ref().map(|k| Opener(Arc::clone(k)))
        } else {
            None
        }
    }

    /// Open the packet numbered `pn` in place: the plaintext length, or `None`.
    pub(crate) fn open(&mut self, pn: u64, packet: &mut [u8]) -> Option<usize> {
        let e = epoch_of(pn);
        if e == self.epoch {
            return self.key.open(pn, packet);
        }
        if e + 1 == self.epoch {
            return self.prev.as_ref()?.open(pn, packet);
        }
        if e < self.epoch || e > self.epoch + MAX_EPOCH_JUMP {
            return None;
        }
        // A later epoch: derive on trial, keep only if the packet is authentic (a forged
        // packet number must not move our keys).
        let mut secret = self.secret;
        let mut before = None;
        for _ in self.epoch..e {
            before = Some(secret);
            secret = next_secret(&secret);
        }
        let key = epoch_key(self.cipher, &secret);
        let n = key.open(pn, packet)?;
        self.prev = before.map(|b| Arc::new(epoch_key(self.cipher, &b)));
        self.epoch = e;
        self.secret = secret;
        self.key = Arc::new(key);
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secure::TAG_LEN;

    fn packet(pn: u64) -> Vec<u8> {
        let mut p = vec![1, 0x03, 0, 0, 0, 7];
        p.extend_from_slice(&pn.to_be_bytes()[2..]);
        p.extend_from_slice(b"payload");
        p.extend_from_slice(&[0; TAG_LEN]);
        p
    }

    /// A batch sealed by a [`Sealer`] on another thread is byte for byte the batch sealed in
    /// place, and a batch across an epoch gets no sealer (it is sealed where the keys move).
    #[test]
    fn a_sealer_seals_as_the_session_would() {
        let e = 1u64 << EPOCH_BITS;
        let mut inline = SealKeys::new(Cipher::Aes256Gcm, [3; 32]);
        let mut deferred = SealKeys::new(Cipher::Aes256Gcm, [3; 32]);
        for first in [0, 40, e + 3, 3 * e] {
            let batch: Vec<Vec<u8>> = (first..first + 4).map(packet).collect();
            let mut a = batch.concat();
            let stride = batch[0].len();
            for (i, seg) in a.chunks_mut(stride).enumerate() {
                inline.seal(first + i as u64, seg);
            }
            let sealer = deferred.sealer(first, first + 3).expect("one epoch");
            let mut b = batch.concat();
            std::thread::spawn(move || {
                sealer.seal_batch(&mut b, stride);
                b
            })
            .join()
            .map(|b| assert_eq!(a, b, "batch at {first}"))
            .unwrap();
        }
        assert!(deferred.sealer(4 * e - 2, 4 * e + 1).is_none());
    }

    #[test]
    fn keys_update_every_epoch_and_the_opener_follows_across_reordering() {
        let mut s = SealKeys::new(Cipher::Aes256Gcm, [3; 32]);
        let mut o = OpenKeys::new(Cipher::Aes256Gcm, [3; 32]);
        let e = 1u64 << EPOCH_BITS;
        let pns = [0, 5, e - 1, e + 1, e - 2, 2 * e, e + 7, e - 3, 7 * e];
        // Sealed in number order (a sender's numbers only grow), delivered reordered.
        let mut order = pns.to_vec();
        order.sort_unstable();
        let mut by_pn = std::collections::HashMap::new();
        for pn in order {
            let mut p = packet(pn);
            s.seal(pn, &mut p);
            by_pn.insert(pn, p);
        }
        let mut sealed: Vec<_> = pns.iter().map(|&pn| (pn, by_pn[&pn].clone())).collect();
        // Epoch keys differ: a packet sealed in epoch 1 does not open with epoch 0's key.
        let k0 = epoch_key(Cipher::Aes256Gcm, &[3; 32]);
        assert_eq!(k0.open(e + 1, &mut sealed[3].1.clone()), None);
        // In order of arrival: e+1 moves to epoch 1; e−2 still opens (previous epoch); 2e moves
        // on; e+7 is the previous epoch now; e−3 is two epochs back and is dropped; 7e is too
        // far ahead.
        let expect = [true, true, true, true, true, true, true, false, false];
        for ((pn, p), want) in sealed.iter_mut().zip(expect) {
            assert_eq!(o.open(*pn, p).is_some(), want, "pn {pn}");
        }
    }

    #[test]
    fn a_forged_packet_of_a_later_epoch_does_not_move_the_keys() {
        let mut s = SealKeys::new(Cipher::ChaCha20Poly1305, [4; 32]);
        let mut o = OpenKeys::new(Cipher::ChaCha20Poly1305, [4; 32]);
        let e = 1u64 << EPOCH_BITS;
        let mut forged = packet(3 * e);
        assert_eq!(o.open(3 * e, &mut forged), None);
        let mut p = packet(9);
        s.seal(9, &mut p);
        assert!(o.open(9, &mut p).is_some());
    }
}
