//! The handshake messages (spec §9.2): a HELLO datagram of any bytes, and a well-encrypted
//! HELLO whose *plaintext* is any bytes (so the fuzzer reaches the parsing behind the
//! decryption), must never panic the server side; an ACCEPT datagram of any bytes, and a
//! well-encrypted message 2 whose payload is any bytes, must never panic the client side.
#![no_main]
use libfuzzer_sys::fuzz_target;
use spate_proto::secure::{
    open_hello, public_key, Cipher, ClientParams, SecureReceiver, SecureSender,
};
use spate_proto::{Entry, Instant, Manifest, RateConfig, ReceiverConfig, SenderConfig, Zeros};

const SERVER: [u8; 32] = [5; 32];

fuzz_target!(|data: &[u8]| {
    // 1. Raw bytes as a HELLO datagram.
    let _ = open_hello(&SERVER, data, [1; 32]);

    // 2. A real client's HELLO, then any bytes as the server's answer.
    let m = Manifest::new(vec![Entry::file("f", 10)]);
    let params = ClientParams {
        cipher: Cipher::Aes256Gcm,
        local_private: [6; 32],
        server_public: public_key(&SERVER),
        auth: [0; 16],
        seed: [7; 32],
    };
    let cfg = SenderConfig::new(RateConfig::fixed(1_000_000));
    let mut c = SecureSender::new(cfg, 9, &m, Instant::ZERO, params).unwrap();
    let mut buf = vec![0u8; 1500];
    let t = c
        .poll_transmit(Instant::ZERO, &mut buf, &mut Zeros)
        .unwrap();
    let hello = buf[..t.len].to_vec();
    let mut answer = data.to_vec();
    if answer.len() >= 6 {
        answer[2..6].copy_from_slice(&9u32.to_be_bytes()); // reach past the session check
    }
    let _ = c.handle_datagram(Instant::ZERO, &mut answer);

    // 3. The real HELLO opens; the server's session then takes any bytes.
    if let Ok(h) = open_hello(&SERVER, &hello, [2; 32]) {
        if let Ok(mut r) = SecureReceiver::accept(ReceiverConfig::default(), Instant::ZERO, h, 3) {
            while r.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
            let mut d = data.to_vec();
            let _ = r.handle_datagram(Instant::from_millis(1), &mut d);
            let _ = r.handle_datagram_from_new_address(Instant::from_millis(2), &mut d);
        }
    }
});
