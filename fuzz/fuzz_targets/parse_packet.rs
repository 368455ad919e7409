//! Any bytes: the packet parser must not panic, and what it accepts must re-validate.
#![no_main]
use libfuzzer_sys::fuzz_target;
use spate_proto::wire::{parse, Packet};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = parse(data) {
        if let Packet::Feedback(f) = p.packet {
            assert_eq!(f.ranges.iter().count(), f.ranges.len());
        }
    }
});
