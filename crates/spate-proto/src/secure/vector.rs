//! The handshake and packet-protection test vector (`docs/spec.md` Appendix B,
//! `docs/test-vectors/handshake.txt`): one protected session opened with fixed keys, every
//! intermediate value written out, so that an independent implementation can check its
//! handshake, key schedule and sealing byte for byte.
//!
//! The inputs are the two static private keys, the two ephemeral private keys and the HELLO
//! and ACCEPT packets; the outputs are the HELLO and ACCEPT datagrams, the split secrets, the
//! epoch-0 and epoch-1 keys and IVs of each direction, and a sealed PING. (The reference takes
//! its ephemeral keys from a 32-byte seed, `handshake.rs`; the file gives the keys themselves,
//! which is what another implementation needs — Noise libraries let tests fix them.)
//!
//! [`check`] recomputes everything from the inputs with the reference and compares.

use core::fmt::Write as _;

use super::aead::Cipher;
use super::handshake::{self, public_key};
use super::schedule::{expand, SealKeys};
use super::{HEADER_LEN, RETRY_TOKEN_LEN};
use crate::wire::{PacketType, VERSION};

const SESSION: u32 = 0x5350_4154;
const CLIENT_STATIC: [u8; 32] = [0x11; 32];
const SERVER_STATIC: [u8; 32] = [0x22; 32];
const CLIENT_SEED: [u8; 32] = [0x33; 32];
const SERVER_SEED: [u8; 32] = [0x44; 32];

/// The ephemeral private key the reference draws from `seed` (its first 32 random bytes).
fn ephemeral(seed: &[u8; 32]) -> [u8; 32] {
    let mut info = *b"spate/1 rng \0\0\0\0\0\0\0\0";
    info[12..].copy_from_slice(&0u64.to_be_bytes());
    let mut out = [0; 32];
    expand(seed, &info, &mut out);
    out
}

fn header(ty: u8, flags: u8, pn: u64) -> Vec<u8> {
    let mut h = vec![VERSION, (flags << 4) | ty];
    h.extend_from_slice(&SESSION.to_be_bytes());
    h.extend_from_slice(&pn.to_be_bytes()[2..]);
    h
}

/// The example session's HELLO packet: no flags, Max Datagram 1232, cipher 1 (AES-256-GCM),
/// feedback 10 000 µs, idle 60 000 ms, no objects, an empty manifest, padded so that the
/// datagram is 1232 bytes.
fn hello_packet() -> Vec<u8> {
    let mut p = header(PacketType::Hello as u8, 0, 0);
    p.extend_from_slice(&1232u16.to_be_bytes());
    p.push(Cipher::Aes256Gcm as u8);
    p.extend_from_slice(&[0x67, 0x10]); // varint 10 000
    p.extend_from_slice(&[0x80, 0x00, 0xea, 0x60]); // varint 60 000
    p.extend_from_slice(&[0, 0, 0]); // Object Count, Manifest Length, Prefix Length
    p.resize(1232 - super::HELLO_OVERHEAD, 0);
    p
}

/// The example ACCEPT packet: Max Datagram 1232, idle 60 000 ms, Token 0x5a17e0c0ffee0001.
fn accept_packet() -> Vec<u8> {
    let mut p = header(PacketType::Accept as u8, 0, 0);
    p.extend_from_slice(&1232u16.to_be_bytes());
    p.extend_from_slice(&[0x80, 0x00, 0xea, 0x60]);
    p.extend_from_slice(&0x5a17_e0c0_ffee_0001u64.to_be_bytes());
    p
}

/// Every value of the vector, in order: (name, bytes).
pub fn values() -> Vec<(&'static str, Vec<u8>)> {
    let mut v: Vec<(&'static str, Vec<u8>)> = vec![
        ("client static private", CLIENT_STATIC.to_vec()),
        ("client static public", public_key(&CLIENT_STATIC).to_vec()),
        ("server static private", SERVER_STATIC.to_vec()),
        ("server static public", public_key(&SERVER_STATIC).to_vec()),
        ("client ephemeral private", ephemeral(&CLIENT_SEED).to_vec()),
        ("server ephemeral private", ephemeral(&SERVER_SEED).to_vec()),
    ];
    let outer = header(PacketType::Hello as u8, 0, 0);
    let mut outer_a = [0u8; HEADER_LEN];
    outer_a.copy_from_slice(&outer);
    let mut prologue = super::PROLOGUE_LABEL.to_vec();
    prologue.extend_from_slice(&outer);
    v.push(("prologue", prologue));
    let hello = hello_packet();
    v.push((
        "HELLO packet (payload of message 1, after the 16 zero bytes of Auth)",
        hello.clone(),
    ));

    let mut c = handshake::initiator(
        &CLIENT_STATIC,
        &public_key(&SERVER_STATIC),
        &outer_a,
        CLIENT_SEED,
    )
    .expect("fixed keys are valid");
    let mut payload = vec![0u8; super::AUTH_LEN];
    payload.extend_from_slice(&hello);
    let mut msg1 = vec![0u8; payload.len() + super::IK_MSG1_OVERHEAD];
    let n = c.write_message(&payload, &mut msg1).expect("message 1");
    msg1.truncate(n);
    let mut hello_dgram = outer.clone();
    hello_dgram.extend_from_slice(&[0; RETRY_TOKEN_LEN]);
    hello_dgram.extend_from_slice(&msg1);
    v.push(("HELLO datagram", hello_dgram.clone()));

    let mut s = handshake::responder(&SERVER_STATIC, &outer_a, SERVER_SEED).expect("valid");
    let mut got = vec![0u8; msg1.len()];
    let _ = s.read_message(&msg1, &mut got).expect("message 1 opens");
    let accept = accept_packet();
    v.push(("ACCEPT packet (payload of message 2)", accept.clone()));
    let mut msg2 = vec![0u8; accept.len() + super::IK_MSG2_OVERHEAD];
    let n = s.write_message(&accept, &mut msg2).expect("message 2");
    msg2.truncate(n);
    let mut accept_dgram = header(PacketType::Accept as u8, 0, 0);
    accept_dgram.extend_from_slice(&msg2);
    v.push(("ACCEPT datagram", accept_dgram));
    let mut got = vec![0u8; msg2.len()];
    let _ = c.read_message(&msg2, &mut got).expect("message 2 opens");

    let (c2s, s2c) = handshake::split(&mut c);
    v.push(("client-to-server secret S0", c2s.to_vec()));
    v.push(("server-to-client secret S0", s2c.to_vec()));
    for (dir, s0) in [("client-to-server", c2s), ("server-to-client", s2c)] {
        let mut key = [0u8; 32];
        let mut iv = [0u8; 12];
        expand(&s0, b"spate/1 key", &mut key);
        expand(&s0, b"spate/1 iv", &mut iv);
        let mut s1 = [0u8; 32];
        expand(&s0, b"spate/1 next", &mut s1);
        let (k, i, n) = match dir {
            "client-to-server" => (
                "client-to-server key 0",
                "client-to-server IV 0",
                "client-to-server secret S1",
            ),
            _ => (
                "server-to-client key 0",
                "server-to-client IV 0",
                "server-to-client secret S1",
            ),
        };
        v.push((k, key.to_vec()));
        v.push((i, iv.to_vec()));
        v.push((n, s1.to_vec()));
    }
    // A PING (packet number 1, the Token) sealed client → server, and the same packet number
    // in epoch 1 (2^23 + 1).
    for (name, pn) in [
        ("sealed PING, packet number 1", 1u64),
        ("sealed PING, packet number 2^23 + 1", (1 << 23) + 1),
    ] {
        let mut ping = header(PacketType::Ping as u8, 0, pn);
        ping.extend_from_slice(&0x5a17_e0c0_ffee_0001u64.to_be_bytes());
        ping.extend_from_slice(&[0; super::TAG_LEN]);
        SealKeys::new(Cipher::Aes256Gcm, c2s).seal(pn, &mut ping);
        v.push((name, ping));
    }
    v
}

/// The `handshake.txt` file.
pub fn text() -> String {
    let mut out = String::from(
        "# handshake: a protected session (spec §9) with fixed keys. Noise_IK_25519_ChaChaPoly_SHA256,\n\
         # packet cipher AES-256-GCM. Each value: a line with its name after '#', then its hex\n\
         # (16 bytes per line). Inputs: the private keys and the two packets; the rest follows.\n",
    );
    for (name, bytes) in values() {
        let _ = writeln!(out, "# {name} ({} bytes)", bytes.len());
        for line in bytes.chunks(16) {
            let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
            let _ = writeln!(out, "{}", hex.join(" "));
        }
    }
    out
}

/// Parse a `handshake.txt` and compare it with what the reference computes.
pub fn check(text: &str) -> Result<(), String> {
    let mut parsed: Vec<(String, Vec<u8>)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("# ") {
            // "# NAME (N bytes)" starts a value; other comment lines are prose.
            let named = name
                .strip_suffix(" bytes)")
                .and_then(|n| n.rsplit_once(" ("));
            if let Some((n, _)) = named {
                parsed.push((n.to_owned(), Vec::new()));
            }
            continue;
        }
        let Some(last) = parsed.last_mut() else {
            continue;
        };
        for h in line.split_whitespace() {
            last.1
                .push(u8::from_str_radix(h, 16).map_err(|e| format!("bad hex '{h}': {e}"))?);
        }
    }
    let want = values();
    if parsed.len() != want.len() {
        return Err(format!(
            "{} values, the reference has {}",
            parsed.len(),
            want.len()
        ));
    }
    for ((pn, pb), (wn, wb)) in parsed.iter().zip(&want) {
        if pn != wn || pb != wb {
            return Err(format!("value '{wn}' differs from the reference"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secure::schedule::epoch_key;

    #[test]
    fn the_vector_is_a_session_the_reference_completes() {
        let v = values();
        let get = |n: &str| v.iter().find(|(k, _)| k.starts_with(n)).unwrap().1.clone();
        // The server's side of the reference opens the HELLO datagram and finds the packet.
        let opened =
            super::super::open_hello(&SERVER_STATIC, &get("HELLO datagram"), SERVER_SEED).unwrap();
        assert_eq!(opened.packet(), &get("HELLO packet")[..]);
        assert_eq!(opened.client_key().to_vec(), get("client static public"));
        // The sealed PING opens with the derived key.
        let key = epoch_key(
            Cipher::Aes256Gcm,
            &get("client-to-server secret S0").try_into().unwrap(),
        );
        let mut ping = get("sealed PING, packet number 1");
        let n = key.open(1, &mut ping).unwrap();
        assert_eq!(
            &ping[HEADER_LEN..n],
            &0x5a17_e0c0_ffee_0001u64.to_be_bytes()
        );
        assert_eq!(get("HELLO datagram").len(), 1232);
        // What another implementation does: a stock Noise initiator with the file's ephemeral
        // key (not our seeded randomness) writes the same message 1.
        let prologue = get("prologue");
        let e = get("client ephemeral private");
        let mut i = snow::Builder::new(crate::secure::NOISE_PARAMS.parse().unwrap())
            .local_private_key(&CLIENT_STATIC)
            .remote_public_key(&get("server static public"))
            .prologue(&prologue)
            .fixed_ephemeral_key_for_testing_only(&e)
            .build_initiator()
            .unwrap();
        let mut payload = vec![0u8; 16];
        payload.extend_from_slice(&get("HELLO packet"));
        let mut m1 = vec![0u8; 2000];
        let n = i.write_message(&payload, &mut m1).unwrap();
        assert_eq!(
            &m1[..n],
            &get("HELLO datagram")[HEADER_LEN + RETRY_TOKEN_LEN..]
        );
        check(&text()).unwrap();
        assert!(check(&text().replace("# prologue", "# prolog")).is_err());
    }
}
