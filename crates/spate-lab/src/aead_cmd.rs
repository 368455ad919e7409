//! `spate-lab bench-aead`: how fast this machine seals and opens Spate-sized packets with the
//! AEADs packet protection uses (spec §9.4) — the crypto limit that encrypted transfers are
//! measured against, in the same units as `bench-io` (Gbit/s of datagram payload).
//!
//! Each cipher seals (and then opens) packets of `--size` bytes in place with a 12-byte
//! header as associated data and the packet number as nonce, the way packet protection will,
//! first on one core, then on every core at once (one key per thread, as sessions have). A
//! run takes about a second per cipher and size.
//!
//! It measures `aws-lc-rs`, which packet protection uses. Why: measured here (x86-64 with AES,
//! VAES and VPCLMULQDQ, 1432-byte packets, one core, session 47), aws-lc-rs 1.19 sealed
//! AES-256-GCM at 65 Gbit/s and opened at 55, ring 0.17 at 48 and 49; ChaCha20-Poly1305 17 / 16
//! with either. In session 15 ring was ahead (34 against 22, RustCrypto's aes-gcm 8.6).

use std::time::Instant;

use anyhow::{bail, Result};
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};

/// Options of `spate-lab bench-aead`.
#[derive(clap::Args)]
pub struct AeadArgs {
    /// Packet payload sizes to measure, bytes (Spate's default datagram is 1472 bytes, 1448 of
    /// them DATA payload).
    #[arg(long, value_delimiter = ',', default_values_t = [1448usize, 8192])]
    size: Vec<usize>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 0.5)]
    seconds: f64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Gbit/s of payload sealed and opened by `threads` threads for about `seconds`.
pub fn measure(
    alg: &'static aws_lc_rs::aead::Algorithm,
    size: usize,
    threads: usize,
    seconds: f64,
) -> (f64, f64) {
    let run = move |open: bool| -> f64 {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::spawn(move || {
                    let key = LessSafeKey::new(
                        UnboundKey::new(alg, &[t as u8 + 1; 32]).expect("32-byte key"),
                    );
                    let header = [0x5au8; 12];
                    let mut packet = vec![7u8; size + 16];
                    // A sealed packet to open repeatedly (opening checks the tag; the nonce
                    // must be the one it was sealed with).
                    let nonce0 = [0u8; 12];
                    seal(&key, 0, &header, &mut packet);
                    let sealed = packet.clone();
                    let start = Instant::now();
                    let mut n = 0u64;
                    while start.elapsed().as_secs_f64() < seconds {
                        for _ in 0..64 {
                            n += 1;
                            if open {
                                packet.copy_from_slice(&sealed);
                                let ok = key
                                    .open_in_place(
                                        Nonce::assume_unique_for_key(nonce0),
                                        Aad::from(&header),
                                        &mut packet,
                                    )
                                    .is_ok();
                                assert!(ok, "a packet sealed here opens here");
                            } else {
                                seal(&key, n, &header, &mut packet);
                            }
                        }
                    }
                    n as f64 * size as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0.0)).sum()
    };
    (run(false), run(true))
}

/// Seal `packet` (payload, then 16 bytes for the tag) in place with packet number `pn` as the
/// nonce and `header` as associated data, as packet protection will.
fn seal(key: &LessSafeKey, pn: u64, header: &[u8; 12], packet: &mut [u8]) {
    let size = packet.len() - 16;
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&pn.to_be_bytes());
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(header),
            &mut packet[..size],
        )
        .expect("sealing a buffer of the right size cannot fail");
    packet[size..].copy_from_slice(tag.as_ref());
}

/// Run the benchmark.
pub fn run(a: AeadArgs) -> Result<()> {
    if a.size.iter().any(|&s| !(1..=65_507).contains(&s)) || !(0.05..=60.0).contains(&a.seconds) {
        bail!("--size must be 1..65507 bytes and --seconds 0.05..60");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows = Vec::new();
    if !a.json {
        println!("AEAD packet protection on this machine ({cores} cores), Gbit/s of payload:");
        println!("| cipher | packet | seal, 1 core | open, 1 core | seal, {cores} cores | open, {cores} cores |");
        println!("|---|---|---|---|---|---|");
    }
    for (name, alg) in [
        ("AES-256-GCM", &AES_256_GCM),
        ("ChaCha20-Poly1305", &CHACHA20_POLY1305),
    ] {
        for &size in &a.size {
            let (s1, o1) = measure(alg, size, 1, a.seconds);
            let (sn, on) = measure(alg, size, cores, a.seconds);
            if !a.json {
                println!("| {name} | {size} B | {s1:.1} | {o1:.1} | {sn:.1} | {on:.1} |");
            }
            rows.push(serde_json::json!({
                "cipher": name, "size": size, "cores": cores,
                "seal_gbps_1": s1, "open_gbps_1": o1, "seal_gbps_all": sn, "open_gbps_all": on,
            }));
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(())
}
