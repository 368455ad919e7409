//! Stateless RETRY tokens (`docs/spec.md` §9.5): a server under load proves a client's address
//! before it spends a Diffie-Hellman on it, and keeps nothing meanwhile.
//!
//! > §9.5: A RETRY token is `Time (64) | MAC (128)`: Time in seconds on the server's clock, MAC
//! > the first 16 bytes of HMAC-SHA256(K, Time | Session ID | Address) with a key K only the
//! > server knows. Its format is the server's business (only the server reads it); a client
//! > copies it into its HELLO's Retry Token field as it is.
//!
//! The same idea as QUIC's Retry and WireGuard's cookie reply: a RETRY is 36 bytes against a
//! HELLO of at least 1232, so it amplifies nothing, and checking a token is one HMAC (≈1 µs)
//! against the ≈100 µs of the handshake's four X25519 operations.

use ring::hmac;

use super::RETRY_TOKEN_LEN;

/// How long a token stays good, seconds.
pub const RETRY_TOKEN_LIFETIME_S: u64 = 30;

/// The server's token key.
pub struct RetryKey {
    key: hmac::Key,
}

impl RetryKey {
    /// A key from 32 secret bytes (the driver draws them at start).
    pub fn new(secret: [u8; 32]) -> RetryKey {
        RetryKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, &secret),
        }
    }

    fn mac(&self, time_s: u64, session: u32, addr: &[u8]) -> [u8; 16] {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(&time_s.to_be_bytes());
        ctx.update(&session.to_be_bytes());
        ctx.update(addr);
        let tag = ctx.sign();
        let mut out = [0; 16];
        out.copy_from_slice(&tag.as_ref()[..16]);
        out
    }

    /// The token for a HELLO of `session` from `addr` (the address in any stable byte form)
    /// at `now_s` seconds.
    pub fn token(&self, now_s: u64, session: u32, addr: &[u8]) -> [u8; RETRY_TOKEN_LEN] {
        let mut t = [0; RETRY_TOKEN_LEN];
        t[..8].copy_from_slice(&now_s.to_be_bytes());
        t[8..].copy_from_slice(&self.mac(now_s, session, addr));
        t
    }

    /// True if `token` is one this key made for `session` and `addr` within the lifetime.
    pub fn check(&self, token: &[u8], now_s: u64, session: u32, addr: &[u8]) -> bool {
        if token.len() != RETRY_TOKEN_LEN {
            return false;
        }
        let mut t = [0; 8];
        t.copy_from_slice(&token[..8]);
        let time_s = u64::from_be_bytes(t);
        if time_s > now_s || now_s - time_s > RETRY_TOKEN_LIFETIME_S {
            return false;
        }
        let mac = self.mac(time_s, session, addr);
        // Constant time: every byte is compared whatever the first difference.
        mac.iter()
            .zip(&token[8..])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bound_to_session_address_key_and_time() {
        let k = RetryKey::new([5; 32]);
        let t = k.token(1000, 7, b"10.0.0.1:4000");
        assert!(k.check(&t, 1000, 7, b"10.0.0.1:4000"));
        assert!(k.check(&t, 1000 + RETRY_TOKEN_LIFETIME_S, 7, b"10.0.0.1:4000"));
        assert!(!k.check(&t, 1001 + RETRY_TOKEN_LIFETIME_S, 7, b"10.0.0.1:4000"));
        assert!(!k.check(&t, 999, 7, b"10.0.0.1:4000"), "from the future");
        assert!(!k.check(&t, 1000, 8, b"10.0.0.1:4000"));
        assert!(!k.check(&t, 1000, 7, b"10.0.0.2:4000"));
        assert!(!RetryKey::new([6; 32]).check(&t, 1000, 7, b"10.0.0.1:4000"));
        assert!(!k.check(&[0; RETRY_TOKEN_LEN], 1000, 7, b"10.0.0.1:4000"));
        assert!(!k.check(&t[..10], 1000, 7, b"10.0.0.1:4000"));
    }
}
