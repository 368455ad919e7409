//! Coding on real sockets (spec §6.9): a transfer through the user-space impaired relay of
//! `spate demo` (UDP on loopback, encrypted, the real server and sender) rebuilds lost packets
//! from repair symbols with `--fec auto`, sends none with `--fec off`, and is byte-exact both
//! ways. Timing is not asserted (a slow machine must pass); `docs/design.md` has the numbers.

use std::time::Duration;

use spate::demo::{run, DemoConfig};
use spate::relay::PathConfig;
use spate_proto::coding::Fec;
use spate_proto::RateConfig;

fn demo(fec: Fec) -> spate::demo::DemoReport {
    let rtt = Duration::from_millis(100);
    run(&DemoConfig {
        size: 12 << 20,
        path: PathConfig {
            rate_bps: 100_000_000,
            rtt,
            loss: 0.02,
            queue: rtt,
            seed: 1,
        },
        rate: RateConfig::fixed(90_000_000),
        fec,
        quiet: true,
    })
    .unwrap()
}

#[test]
fn losses_are_rebuilt_from_repair_packets_on_real_sockets() {
    let auto = demo(Fec::Auto);
    assert!(auto.identical);
    assert!(auto.transfer.repair_packets > 0, "{:?}", auto.transfer);
    assert!(auto.transfer.rebuilt_blocks > 0, "{:?}", auto.transfer);
    let off = demo(Fec::Off);
    assert!(off.identical);
    assert_eq!(off.transfer.repair_packets, 0);
    assert_eq!(off.transfer.rebuilt_blocks, 0);
    eprintln!(
        "coded: {:.2} s, {} repair packets, {} blocks rebuilt; uncoded: {:.2} s",
        auto.transfer.duration_s,
        auto.transfer.repair_packets,
        auto.transfer.rebuilt_blocks,
        off.transfer.duration_s
    );
}
