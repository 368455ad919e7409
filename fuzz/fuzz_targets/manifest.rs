//! Any bytes: manifest decoding must not panic; what decodes must round-trip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use spate_proto::Manifest;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::decode(data) {
        let again =
            Manifest::decode(&m.encode().expect("valid manifest encodes")).expect("round trip");
        assert_eq!(m, again);
    }
});
