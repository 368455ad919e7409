//! Unpredictable values from the operating system's random source (`getrandom`): session IDs
//! and address-validation tokens (spec §3.1, §4.8). The protocol core never reads it; the
//! driver passes the values in.

/// 64 random bits. Aborts the process if the operating system has no random source: running
/// on with predictable tokens would quietly turn the server into a reflector.
pub fn u64() -> u64 {
    getrandom::u64().expect("the operating system's random source is unavailable")
}
