//! Unpredictable values from the operating system's random source (`getrandom`): session IDs,
//! address-validation tokens and key material (spec §3.1, §4.8, §9). The protocol core never
//! reads it; the driver passes the values in.

/// 64 random bits. Aborts the process if the operating system has no random source: running
/// on with predictable tokens would quietly turn the server into a reflector.
pub fn u64() -> u64 {
    getrandom::u64().expect("the operating system's random source is unavailable")
}

/// 32 random bytes: handshake seeds, RETRY token keys (spec §9). Aborts like [`u64()`].
pub fn bytes32() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the operating system's random source is unavailable");
    b
}

/// 16 random bytes: one-time token secrets.
pub fn bytes16() -> [u8; 16] {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the operating system's random source is unavailable");
    b
}
