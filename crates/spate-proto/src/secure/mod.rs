//! Packet protection (`docs/spec.md` §9): an authenticated key exchange, then every packet
//! sealed with an AEAD.
//!
//! ## In a nutshell
//!
//! 1. **Handshake (§9.2).** The HELLO is the first message of a Noise `IK` handshake
//!    (`Noise_IK_25519_ChaChaPoly_SHA256`): the client knows the server's static X25519 key
//!    (pinned, or vouched for out of band) and sends its ephemeral key, its own static key
//!    (encrypted) and the HELLO packet (encrypted). The ACCEPT is the second message: the
//!    server's ephemeral key and the ACCEPT packet (or a CLOSE refusing the client). One round
//!    trip, forward secrecy from the ephemeral keys, the client's identity hidden from
//!    observers. The client's PING with the ACCEPT's Token (§4.8), now sealed, proves its address.
//! 2. **Packet keys (§9.3).** Noise's final split gives one 32-byte secret per direction. Each
//!    direction's packet numbers are cut into epochs of 2^23 packets; epoch *n*'s key and IV
//!    come from secret *n* by HKDF-SHA256, and secret *n + 1* from secret *n*. No signal is
//!    needed: both ends read the epoch from the packet number. 2^23 packets is the AES-GCM
//!    confidentiality limit of RFC 9001 §6.6 for full-size packets.
//! 3. **Sealing (§9.4).** Everything after the handshake: the 12-byte header in the clear as
//!    associated data, the body encrypted, a 16-byte tag after it, nonce = IV ⊕ packet number.
//!    The packet number never repeats in a direction (`pn.rs` fails closed), so neither does
//!    a nonce. A packet that does not open, or whose number was already opened (a replay), is
//!    dropped and counted, and the session never sees it.
//! 4. **Under load (§9.5).** A server may answer a HELLO with a RETRY carrying a stateless
//!    token (a MAC of time, address and session) instead of doing the Diffie-Hellman work; the
//!    client repeats its HELLO with the token.
//!
//! ## Files
//!
//! | file | job |
//! |---|---|
//! | `aead.rs` | sealing and opening one packet with one key, and the cipher choice |
//! | `protect.rs` | the one seal and the one open of an established session: keys, replay window |
//! | `schedule.rs` | per-direction secrets, epochs and key update |
//! | `replay.rs` | the sliding window of opened packet numbers |
//! | `handshake.rs` | Noise IK through `snow`, with randomness passed in |
//! | `retry.rs` | stateless RETRY tokens |
//! | `client.rs` | [`SecureSender`]: a [`Sender`](crate::Sender) behind the protection |
//! | `server.rs` | [`open_hello`], [`SecureReceiver`] and the server's stateless answers |
//! | `vector.rs` | the handshake test vector (`docs/test-vectors/handshake.txt`) |
//!
//! The wrappers leave the sessions untouched: a session configured with
//! [`Overhead::SEALED`](crate::config::Overhead::SEALED) leaves room for the tag after every
//! packet and writes a HELLO short enough for the handshake message around it; the wrapper
//! seals in place on the way out and opens in place on the way in. The simulator runs sessions
//! without the wrapper (same behaviour, no crypto cost); the property tests run both.
//!
//! ## Determinism
//!
//! The core reads no random source here either: the ephemeral keys come from a 32-byte seed the
//! driver passes per handshake (`handshake.rs` expands it with HKDF).

mod aead;
mod client;
mod handshake;
mod protect;
mod replay;
mod retry;
mod schedule;
mod server;
pub mod vector;

pub use aead::Cipher;
pub use client::{ClientParams, SecureSender, SecureStats};
pub use handshake::{public_key, HandshakeError};
pub use retry::RetryKey;
pub use schedule::{Opener, Sealer};
pub use server::{
    hello_retry_token, identify_packet, identity_packet, open_hello, retry_packet, HelloRefusal,
    OpenedHello, SecureReceiver,
};

use crate::wire::HEADER_LEN;

/// Bytes of an AEAD tag.
pub const TAG_LEN: usize = 16;
/// Bytes of an X25519 key.
pub const KEY_LEN: usize = 32;
/// Bytes of a RETRY token (§9.5): 8 of time, 16 of MAC.
pub const RETRY_TOKEN_LEN: usize = 24;
/// Bytes of the authorization token in the first handshake payload (§9.2; zero when unused).
pub const AUTH_LEN: usize = 16;
/// Bytes Noise IK's first message adds to its payload: e (32), encrypted s (32 + 16), tag (16).
pub const IK_MSG1_OVERHEAD: usize = 96;
/// Bytes Noise IK's second message adds to its payload: e (32), tag (16).
pub const IK_MSG2_OVERHEAD: usize = 48;
/// Bytes of a HELLO datagram around the HELLO packet: outer header, RETRY token, Noise
/// overhead, authorization token.
pub const HELLO_OVERHEAD: usize = HEADER_LEN + RETRY_TOKEN_LEN + IK_MSG1_OVERHEAD + AUTH_LEN;
/// The Noise protocol name (§9.2).
pub const NOISE_PARAMS: &str = "Noise_IK_25519_ChaChaPoly_SHA256";
/// Prefix of the Noise prologue; the HELLO's outer header follows it.
pub const PROLOGUE_LABEL: &[u8] = b"spate/1 IK";
/// log2 of the packets per key epoch (§9.3).
pub const EPOCH_BITS: u32 = 23;
/// Failed opens after which a session ends (§9.4): the integrity limit of ChaCha20-Poly1305
/// (RFC 9001 §6.6), the lower of the two AEADs', counted over the whole session.
pub const INTEGRITY_LIMIT: u64 = 1 << 36;

/// Packet types of the protection layer (spec §9.5, §9.6): never seen by a session.
pub mod types {
    /// Server → client: repeat the HELLO with this stateless token.
    pub const RETRY: u8 = 9;
    /// Client → server: what is your static key? (first contact, §9.6)
    pub const IDENTIFY: u8 = 10;
    /// Server → client: my static key.
    pub const IDENTITY: u8 = 11;
}
