//! Behind the decryption (spec §9.2): a HELLO datagram that is a valid Noise message 1 whose
//! plaintext — Auth and the HELLO packet — is any bytes. Opening it and starting a session
//! from it must never panic, and must refuse what breaks §4.1 or §9.2.
#![no_main]
use libfuzzer_sys::fuzz_target;
use spate_proto::secure::{open_hello, public_key, SecureReceiver, NOISE_PARAMS, PROLOGUE_LABEL};
use spate_proto::{Instant, ReceiverConfig};

const SERVER: [u8; 32] = [5; 32];

fuzz_target!(|data: &[u8]| {
    let header = [1u8, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0];
    let mut prologue = PROLOGUE_LABEL.to_vec();
    prologue.extend_from_slice(&header);
    let mut i = snow::Builder::new(NOISE_PARAMS.parse().unwrap())
        .local_private_key(&[6; 32])
        .remote_public_key(&public_key(&SERVER))
        .prologue(&prologue)
        .fixed_ephemeral_key_for_testing_only(&[8; 32])
        .build_initiator()
        .unwrap();
    // A plaintext of the size that makes a 1232-byte datagram, starting with the fuzz input.
    let mut payload = data.to_vec();
    payload.resize(1232 - 12 - 24 - 96, 0);
    let mut d = header.to_vec();
    d.extend_from_slice(&[0; 24]);
    let mut m = vec![0u8; 2048];
    let n = i.write_message(&payload, &mut m).unwrap();
    d.extend_from_slice(&m[..n]);
    if let Ok(h) = open_hello(&SERVER, &d, [2; 32]) {
        if let Ok(mut r) = SecureReceiver::accept(ReceiverConfig::default(), Instant::ZERO, h, 3) {
            let mut buf = vec![0u8; 70_000];
            while r.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
        }
    }
});
