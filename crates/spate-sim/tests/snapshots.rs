//! Snapshot of a small table of simulator results. Any change in protocol behaviour shows up
//! as a diff of this table in review; accept intended changes with `cargo insta review` (or
//! `INSTA_UPDATE=always cargo test -p spate-sim --test snapshots`).

use spate_sim::{run, Scenario};

const SCENARIOS: &[(&str, &str)] = &[
    ("clean", "rate_mbps = 50.0\nrtt_ms = 40.0"),
    ("loss 1%", "rate_mbps = 50.0\nrtt_ms = 40.0\nloss = 0.01"),
    ("burst loss 2% x5", "rate_mbps = 50.0\nrtt_ms = 40.0\nloss = 0.02\nburst_loss_len = 5.0"),
    ("reorder 5% by 10ms", "rate_mbps = 50.0\nrtt_ms = 40.0\nreorder = 0.05\nreorder_ms = 10.0"),
    ("duplicate 3%", "rate_mbps = 50.0\nrtt_ms = 40.0\nduplicate = 0.03"),
    ("long RTT 2% loss", "rate_mbps = 50.0\nrtt_ms = 400.0\nloss = 0.02"),
    ("overload 10% over", "rate_mbps = 41.0\nrtt_ms = 40.0\nqueue_ms = 10.0"),
    (
        "2 s outage at 0.5 s",
        "rate_mbps = 50.0\nrtt_ms = 40.0\n[[path.phase]]\nat_s = 0.5\nrate_mbps = 50.0\nrtt_ms = 40.0\noutage_ms = 2000.0",
    ),
];

fn scenario(name: &str, phase: &str) -> Scenario {
    let text = format!(
        "name = {name:?}\nseed = 7\nduration_s = 60.0\n[[path.phase]]\nat_s = 0.0\n{phase}\n\
         [[flow]]\nbytes = 5000000\npolicy = \"fixed\"\nrate_mbps = 45.0\n"
    );
    Scenario::parse(&text).unwrap()
}

#[test]
fn results_table() {
    let mut table = String::from(
        "| scenario | done s | goodput Mbit/s | retrans % | spurious | lost | repair | rebuilt | overshoot % | tail RTTs | feedback KiB/GiB | q p95 ms | verified |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (name, phase) in SCENARIOS {
        let r = run(&scenario(name, phase), &mut |_| {}).unwrap().report;
        let f = &r.flows[0];
        table += &format!(
            "| {name} | {} | {:.2} | {:.2} | {} | {} | {} | {} | {:.2} | {} | {:.0} | {} | {} |\n",
            f.completion_s.map_or("-".into(), |c| format!("{c:.3}")),
            f.goodput_mbps,
            f.retransmission_overhead * 100.0,
            f.spurious_retransmissions,
            f.lost_packets,
            f.repair_packets,
            f.recovered_by_repair,
            f.overshoot * 100.0,
            f.tail_round_trips.map_or("-".into(), |t| format!("{t:.2}")),
            f.feedback_kib_per_gib,
            r.phases[0].queue_delay_ms.p95,
            f.verified,
        );
    }
    insta::assert_snapshot!(table);
}
