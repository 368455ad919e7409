//! A live receiver session fed arbitrary datagrams (each prefixed with a valid header for its
//! session) must not panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use spate_proto::{
    Entry, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, Sender, SenderConfig, Zeros,
};

/// The receiver's address-validation token in these tests (spec §4.8).
const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;

fuzz_target!(|data: &[u8]| {
    let m = Manifest {
        destination: String::new(),
        entries: vec![Entry::file("a", 10_000)],
    };
    let mut s = Sender::new(
        SenderConfig::new(RateConfig::fixed(1_000_000)),
        7,
        &m,
        Instant::ZERO,
    )
    .unwrap();
    let mut buf = vec![0u8; 1472];
    let t = s
        .poll_transmit(Instant::ZERO, &mut buf, &mut Zeros)
        .unwrap();
    let Ok(mut r) = Receiver::accept(
        ReceiverConfig::default(),
        Instant::ZERO,
        &mut buf[..t.len],
        TOKEN,
    ) else {
        return;
    };
    // The sender's PING with the token (spec §4.8): the fuzzed packets meet a session whose
    // address is validated, where DATA and the manifest are acted on.
    let mut ping = vec![1u8, 4, 0, 0, 0, 7, 0, 0, 0, 0, 0, 1];
    ping.extend(TOKEN.to_be_bytes());
    let _ = r.handle_datagram(Instant::ZERO, &mut ping);
    for (i, chunk) in data.split(|&b| b == 0xff).enumerate() {
        let mut d = vec![1u8, chunk.first().copied().unwrap_or(3) & 0x3f, 0, 0, 0, 7];
        d.extend_from_slice(chunk);
        let now = Instant::from_millis(i as u64);
        let _ = r.handle_datagram(now, &mut d);
        while r.poll_transmit(now, &mut buf).is_some() {}
        r.handle_timeout(now);
        while r.poll_event().is_some() {}
    }
});
