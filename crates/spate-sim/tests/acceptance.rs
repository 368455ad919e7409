//! Issue #3's acceptance checks for the adaptive controller at reduced scale, so that a
//! regression fails CI in seconds. Each test asserts the bound on a smaller (cheaper)
//! version of its scenario — 200 Mbit/s where the full check uses 1 Gbit/s, 1 Gbit/s where it
//! uses 10 Gbit/s — and `controller_table` snapshots the numbers, so any change in behaviour
//! shows up in review. The full-scale runs are the files in `scenarios/checks/` and the grid
//! (`spate-lab grid`), reported in docs/results/.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use spate_sim::{run, Report, Scenario, SimResult};

/// Run a scenario once per test binary: the bound tests and `controller_table` share runs
/// (tests run on parallel threads; each scenario text is simulated by whichever asks first).
fn sim(text: &str) -> &'static SimResult {
    static RUNS: Mutex<BTreeMap<String, &'static OnceLock<SimResult>>> =
        Mutex::new(BTreeMap::new());
    let cell = *RUNS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(text.to_string())
        .or_insert_with(|| Box::leak(Box::default()));
    cell.get_or_init(|| {
        let s = Scenario::parse(text).unwrap_or_else(|e| panic!("bad test scenario: {e}\n{text}"));
        let r = run(&s, &mut |_| {}).expect("simulation runs");
        for f in &r.report.flows {
            assert!(f.verified, "flow not verified: {:?}", f);
        }
        r
    })
}

fn phase(at: f64, mbps: f64, rtt: f64, extra: &str) -> String {
    format!("[[path.phase]]\nat_s = {at}\nrate_mbps = {mbps}\nrtt_ms = {rtt}\n{extra}\n")
}

fn flow(start: f64, policy: &str, bytes: u64) -> String {
    format!("[[flow]]\nstart_s = {start}\nbytes = {bytes}\npolicy = \"{policy}\"\n")
}

fn head(name: &str, secs: f64, extra: &str) -> String {
    seeded_head(name, 3, secs, extra)
}

fn seeded_head(name: &str, seed: u64, secs: f64, extra: &str) -> String {
    format!("name = \"{name}\"\nseed = {seed}\nduration_s = {secs}\n{extra}\n")
}

fn handover_up() -> &'static Report {
    // FASP scenario 2 at 1/10 scale: 10 Mbit/s, 92 ms -> 1 Gbit/s, 74 ms, 0.06 % loss.
    let t = head("handover up", 20.0, "")
        + &phase(0.0, 10.0, 92.0, "loss = 0.0006")
        + &phase(10.0, 1000.0, 74.0, "loss = 0.0006")
        + &flow(0.0, "fair", 0);
    &sim(&t).report
}

fn handover_down() -> &'static Report {
    handover_down_with("")
}

/// FASP scenario 1 at 1/10 scale: 1 Gbit/s, 74 ms -> 10 Mbit/s... kept at 100 Mbit/s so the
/// 25 ms bound means the same thing as at full scale (α/capacity = 6 ms), and the second
/// phase kept at the full scale's 40 s: the bound is a p95 over the phase, and the ~2 s
/// transient after the drop would be a larger share of a shorter phase. `flow_extra` is added
/// to the flow's table.
fn handover_down_with(flow_extra: &str) -> &'static Report {
    handover_down_seeded(3, flow_extra)
}

fn handover_down_seeded(seed: u64, flow_extra: &str) -> &'static Report {
    let t = seeded_head("handover down", seed, 50.0, "")
        + &phase(0.0, 1000.0, 74.0, "loss = 0.0006")
        + &phase(10.0, 100.0, 92.0, "loss = 0.0006")
        + &flow(0.0, "fair", 0)
        + flow_extra;
    &sim(&t).report
}

#[test]
fn follows_a_capacity_step_up_within_a_second() {
    let r = handover_up();
    let tta = r.phases[1].time_to_adapt_s.expect("adapts");
    assert!(tta <= 1.0, "time to adapt {tta} s");
}

/// After the step down: a queue p95 within 25 ms and the new link used.
fn assert_sheds_the_step(r: &Report) {
    let p = &r.phases[1];
    assert!(
        p.queue_delay_ms.p95 <= 25.0,
        "queue p95 {} ms",
        p.queue_delay_ms.p95
    );
    assert!(p.utilization > 0.9, "utilization {}", p.utilization);
}

#[test]
fn sheds_a_capacity_step_down_without_stalling_and_with_a_short_queue() {
    assert_sheds_the_step(handover_down());
}

/// The same step with competitive mode allowed: the longer path leaves the delay floor 9 ms
/// below the new minimum, a "queue" no drain can empty. Until session 27 the flow took it for
/// a competitor's and competed for 38.6 s (queue p95 33.9 ms); its drains now bottom out well
/// below the queue the step built (`cc/delay/mod.rs`, "Modes"). Until session 43 they did
/// so on 19 of 24 seeds: on the others a drain's reading window stretched into its own
/// refill, and the flow competed for 12.4–12.5 s (queue p95 59–69 ms).
#[test]
fn a_flow_that_may_compete_sheds_a_step_down_to_a_longer_path_alike() {
    for seed in 1..=12 {
        let r = handover_down_seeded(seed, "compete = true\n");
        assert_eq!(r.flows[0].competitive_mode_s, Some(0.0), "seed {seed}");
        assert_sheds_the_step(r);
    }
}

/// A flow that may compete, alone at 1 Gbit/s, holds 0.6 ms of queue: below the level at which
/// `dips.rs` calls a queue empty. Until session 29 the moments its queue rose above that level
/// ended "dips" at an unchanging floor, it took itself for BBR after 11 s, and when the step
/// to 10 Mbit/s later made it compete it followed BBR's law instead of CUBIC's (FASP scenario
/// 1 at 1/10: 34.8 s; this run 15.2 s).
#[test]
fn a_flow_alone_on_a_fast_path_does_not_take_itself_for_bbr() {
    // FASP scenario 1 at 1/10, as `scenarios/fasp/scenario-1.toml` with `--scale 0.1`, for 60 s
    // (seed 1: with the other seeds tried the false dips did not line up 9–12 s apart).
    let t = "name = \"fasp 1 at 1/10, compete\"\nseed = 1\nduration_s = 60.0\n".to_string()
        + &phase(0.0, 1000.0, 74.0, "loss = 0.0006")
        + &phase(40.0, 10.0, 92.0, "loss = 0.0006")
        + &flow(0.0, "fair", 0)
        + "compete = true\n";
    let f = &sim(&t).report.flows[0];
    assert!(
        f.following_bbr_s.unwrap_or(0.0) == 0.0,
        "followed BBR for {:?} s (competitive for {:?} s)",
        f.following_bbr_s,
        f.competitive_mode_s
    );
}

fn deep_buffer() -> &'static Report {
    let t = head("deep buffer", 15.0, "")
        + &phase(0.0, 200.0, 50.0, "queue_ms = 200.0")
        + &flow(0.0, "fair", 0);
    &sim(&t).report
}

#[test]
fn keeps_a_deep_buffer_nearly_empty() {
    let r = deep_buffer();
    let p95 = r.phases[0].queue_delay_ms.p95;
    assert!(p95 <= 12.5, "queue p95 {p95} ms (bound max(5, 0.25 x 50))");
}

fn shared(
    name: &str,
    mbps: f64,
    policies: &[(f64, &str)],
    secs: f64,
    from: f64,
) -> &'static Report {
    let mut t =
        head(name, secs, &format!("fairness_from_s = {from}")) + &phase(0.0, mbps, 50.0, "");
    for (start, p) in policies {
        t += &flow(*start, p, 0);
    }
    &sim(&t).report
}

fn window(r: &Report, i: usize) -> f64 {
    r.flows[i].window_goodput_mbps.expect("window goodput")
}

#[test]
fn four_fair_flows_share_equally() {
    let r = shared(
        "four fair",
        200.0,
        &[(0.0, "fair"), (2.0, "fair"), (4.0, "fair"), (6.0, "fair")],
        30.0,
        16.0,
    );
    let j = r.fairness_jain.expect("index");
    assert!(j >= 0.95, "Jain {j}");
}

/// Four fair flows joining 3 s apart at 100 Mbit/s, 50 ms, a one-BDP buffer: they drain
/// together on the grid (`cc/delay/grid.rs`), the first drain after the last one joins
/// empties the queue, and from then on every floor is the path's, so the queue holds the
/// four α (24 ms at 100 Mbit/s) and no more. Before the grid the latecomers drained alone
/// and kept the queue they joined into as part of their floors: queue p50 49.5 ms (the
/// buffer full), Jain 0.987.
#[test]
fn fair_flows_that_join_apart_drain_together() {
    // Where the drain grid's instants (every 8 s of UTC) fall among the joins decides single
    // runs (session 53: 24–43 ms at eleven placements), so the claim is over eight of them, a
    // second apart. Before the grid every placement gave 30.7 ms, Jain 0.998.
    let mut p50s = Vec::new();
    for utc in 0..8 {
        let mut t = head(
            "four fair 3 s apart",
            49.0,
            &format!("fairness_from_s = 19.0\nutc_start_s = {utc}.0"),
        ) + &phase(0.0, 100.0, 50.0, "");
        for start in [0.0, 3.0, 6.0, 9.0] {
            t += &flow(start, "fair", 0);
        }
        let r = &sim(&t).report;
        let p50 = r.phases[0].queue_delay_ms.p50;
        assert!(
            p50 <= 36.0,
            "utc {utc} s: queue p50 {p50} ms (four α: 24 ms)"
        );
        let j = r.fairness_jain.expect("index");
        assert!(j >= 0.97, "utc {utc} s: Jain {j}");
        p50s.push(p50);
    }
    let mean = p50s.iter().sum::<f64>() / p50s.len() as f64;
    assert!(mean <= 28.0, "queue p50 {mean} ms on average over {p50s:?}");
}

#[test]
fn low_yields_and_high_takes_about_twice() {
    // At the scale (1 Gbit/s): α/16 is 2.5 packets, and at 200 Mbit/s a packet of
    // queue is 60 µs — the low flow's target is then within the delay filter's noise.
    let r = shared(
        "low vs fair",
        1000.0,
        &[(0.0, "fair"), (2.0, "low")],
        30.0,
        10.0,
    );
    let share = window(r, 1) / (window(r, 0) + window(r, 1));
    assert!(share <= 0.10, "low share {share}");
    let r = shared(
        "high vs fair",
        200.0,
        &[(0.0, "fair"), (2.0, "high")],
        30.0,
        15.0,
    );
    let ratio = window(r, 1) / window(r, 0);
    assert!((1.6..=2.4).contains(&ratio), "high/fair {ratio}");
}

/// `low` gives way to a queue it does not hold (`cc/delay/scavenge.rs`), and a step down leaves
/// its delay floor a packet short (12 ms at 1 Mbit/s), which reads as others' queue. Without
/// the step rule it sank until the floor's 10 s window passed: 0.87 of the new link over the
/// phase, 10.6 s to adapt. It follows the step now (1.02, 0.7 s).
#[test]
fn low_follows_a_step_down_to_a_slow_link() {
    let t = seeded_head("low, 100 to 1 Mbit/s", 1, 40.0, "")
        + &phase(0.0, 100.0, 50.0, "")
        + &phase(20.0, 1.0, 50.0, "")
        + &flow(0.0, "low", 0);
    let p = &sim(&t).report.phases[1];
    let adapt = p.time_to_adapt_s.expect("adapts");
    assert!(
        p.utilization >= 0.95 && adapt <= 3.0,
        "utilization {}, adapted in {adapt} s",
        p.utilization
    );
}

/// 200 Mbit/s, 50 ms for 10 s, with `extra` keys in its phase (none: the clean path the
/// impaired runs are compared with; it is simulated once).
fn path_200m(extra: &str) -> &'static Report {
    let t = head("200 Mbit/s, 50 ms", 10.0, "")
        + &phase(0.0, 200.0, 50.0, extra)
        + &flow(0.0, "fair", 0);
    &sim(&t).report
}

/// 5 % of packets 10 ms late.
const REORDER: &str = "reorder = 0.05\nreorder_ms = 10.0";

#[test]
fn reordering_causes_few_spurious_retransmissions_and_costs_no_throughput() {
    let with = path_200m(REORDER);
    let without = path_200m("");
    let f = &with.flows[0];
    let spurious = f.spurious_retransmissions as f64 / f.data_packets_sent as f64;
    assert!(spurious <= 0.005, "spurious {spurious}");
    let (a, b) = (with.phases[0].utilization, without.phases[0].utilization);
    assert!(a >= 0.95 * b, "utilization {a} vs {b} without reordering");
}

/// Stalls of 25 ms starting on average every 500 ms: the path holds everything for 5 % of
/// the time and then delivers it in a burst.
const STALLS: &str = "stall_ms = 25.0\nstall_every_ms = 500.0";

#[test]
fn stalls_are_not_taken_for_congestion() {
    // A stall shows the receiver a one-way delay 25 ms higher, then a burst: neither is a
    // queue the flow should drain, and the link kept serving throughout.
    let (with, without) = (path_200m(STALLS), path_200m(""));
    let (a, b) = (with.phases[0].utilization, without.phases[0].utilization);
    assert!(a >= 0.97 * b, "utilization {a} vs {b} without stalls");
    let (qa, qb) = (
        with.phases[0].queue_delay_ms.p50,
        without.phases[0].queue_delay_ms.p50,
    );
    assert!(
        qa <= qb + 1.0,
        "queue p50 {qa} ms vs {qb} ms without stalls"
    );
    assert_eq!(with.phases[0].queue_drops, 0);
}

/// Alone at 10 Mbit/s, 92 ms (FASP pipe 12 at 1/10), where α is 60 ms of queue and a flow
/// that measures itself alone aims at 2 ms. A stall's burst lifted the delivery its share
/// probe saw above what the probe added, which read as a share below zero; the flow then took
/// itself for one of several and held α's queue all along (median 59.9 ms on seed 1). And a
/// stall's dip in delivery made it forget that it was alone every few seconds: over seeds 1–8
/// the median queue was 8.5–53.9 ms until the share waited a delivery window for the stall's
/// burst (session 44), 3.8–20.8 ms since.
#[test]
fn a_stalls_burst_is_not_taken_for_others() {
    // 24 seeds: the share estimator's noise flips single seeds (before session 53, seed 15
    // held α for most of the run: a 59 ms median).
    for seed in 1..=24 {
        let t = seeded_head("stalls at 10 Mbit/s", seed, 40.0, "")
            + &phase(
                0.0,
                10.0,
                92.0,
                "loss = 0.0006\nstall_ms = 20.0\nstall_every_ms = 1000.0",
            )
            + &flow(0.0, "fair", 0);
        let p = &sim(&t).report.phases[0];
        assert!(
            p.utilization > 0.95,
            "seed {seed}: utilization {}",
            p.utilization
        );
        assert!(
            p.queue_delay_ms.p50 < 30.0,
            "seed {seed}: queue p50 {} ms",
            p.queue_delay_ms.p50
        );
    }
}

fn outage() -> &'static SimResult {
    let t = head("outage", 8.0, "")
        + &phase(0.0, 200.0, 50.0, "")
        + &phase(3.0, 200.0, 50.0, "outage_ms = 2000.0")
        + &phase(5.0, 200.0, 50.0, "")
        + &flow(0.0, "fair", 0);
    sim(&t)
}

#[test]
fn recovers_from_a_two_second_outage_at_its_previous_rate() {
    let r = outage();
    // Data flows again within one RTT + 200 ms of the path returning at 5 s (100 ms bins).
    let first = r
        .series
        .rows
        .iter()
        .find(|row| row.t_s >= 5.0 - 1e-9 && row.goodput_mbps > 0.0)
        .expect("data after the outage");
    assert!(
        first.t_s < 5.0 + 0.05 + 0.2,
        "first data in the bin at {} s",
        first.t_s
    );
    let tta = r.report.phases[2].time_to_adapt_s.expect("adapts");
    assert!(tta <= 1.0, "back to 90 % after {tta} s");
}

fn feedback(rtt: f64, loss: f64) -> &'static Report {
    // A buffer of one RTT, 1 ms at RTT 0 (as in the grid).
    let queue = rtt.max(1.0);
    let t = head("feedback", 60.0, "")
        + &phase(
            0.0,
            1000.0,
            rtt,
            &format!("loss = {loss}\nqueue_ms = {queue}"),
        )
        + &flow(0.0, "fair", 256 << 20);
    &sim(&t).report
}

#[test]
fn feedback_costs_little() {
    let clean = feedback(50.0, 0.0).flows[0].feedback_kib_per_gib;
    assert!(clean <= 128.0, "{clean} KiB/GiB at 1 Gbit/s, 50 ms");
    let lossy = feedback(400.0, 0.02).flows[0].feedback_kib_per_gib;
    assert!(lossy <= 1024.0, "{lossy} KiB/GiB at 2 %, 400 ms");
    // RTT 0: the sender asks for a report about every millisecond (spec §6.5).
    let short = feedback(0.0, 0.0).flows[0].feedback_kib_per_gib;
    assert!(short <= 1024.0, "{short} KiB/GiB at 1 Gbit/s, RTT 0");
}

fn grid_point(rtt: f64, loss: f64) -> &'static Report {
    // The full grid's buffer is one RTT, and 1 ms (125 KB at 1 Gbit/s) at RTT 0. At 1/5 of
    // the rate the same 125 KB is 5 ms: a 1 ms buffer here (25 KB) would be smaller than one
    // flow's queue target α (75 KB), a different regime (docs/design.md: "Limitation: buffers smaller than α").
    let queue = if rtt > 0.0 { rtt } else { 5.0 };
    let t = head("grid", 10.0 + rtt / 25.0, "")
        + &phase(
            0.0,
            200.0,
            rtt,
            &format!("loss = {loss}\nqueue_ms = {queue}"),
        )
        + &flow(0.0, "fair", 0);
    &sim(&t).report
}

const GRID_CORNERS: [(f64, f64); 4] = [(0.0, 0.0), (50.0, 0.001), (150.0, 0.01), (400.0, 0.02)];

#[test]
fn grid_corners_are_used_fully_and_found_quickly() {
    for (rtt, loss) in GRID_CORNERS {
        let r = grid_point(rtt, loss);
        let p = &r.phases[0];
        let u = p.utilization_after_adapt.expect("adapts");
        let tta = p.time_to_adapt_s.expect("adapts");
        assert!(u >= 0.95 * (1.0 - loss), "rtt {rtt} loss {loss}: {u}");
        // Queue overflow on top of random loss shows as retransmissions beyond the loss rate
        // (at RTT 0 a runaway once retransmitted more than it delivered).
        let retx = r.flows[0].retransmission_overhead;
        assert!(
            retx <= loss + 0.01,
            "rtt {rtt} loss {loss}: {retx} retransmitted"
        );
        assert!(
            tta <= 1.0 + 20.0 * rtt / 1e3,
            "rtt {rtt} loss {loss}: {tta} s"
        );
    }
}

fn short_buffer(mbps: f64, rtt: f64, loss: f64) -> &'static Report {
    short_buffer_seeded(3, mbps, rtt, loss)
}

fn short_buffer_seeded(seed: u64, mbps: f64, rtt: f64, loss: f64) -> &'static Report {
    // One flow alone, the default buffer of one BDP: at 10–20 Mbit/s and 20–40 ms that is
    // shorter than α's queue (60 ms at 10 Mbit/s), docs/design.md "Limitation: buffers
    // smaller than α".
    let t = seeded_head("short buffer", seed, 30.0, "")
        + &phase(0.0, mbps, rtt, &format!("loss = {loss}"))
        + &flow(0.0, "fair", 0);
    &sim(&t).report
}

const SHORT_BUFFERS: [(f64, f64, f64); 3] =
    [(10.0, 20.0, 0.0), (10.0, 40.0, 0.01), (20.0, 20.0, 0.0)];

#[test]
fn alone_it_does_not_hold_a_buffer_shorter_than_alpha_full() {
    // Before session 37 these retransmitted 143 %, 41 % and 38 % of the data, holding the
    // buffer full; a loss-based sender overflows it now and then (kernel CUBIC: 0.2 %).
    // The lossy point over other seeds: `a_lone_lossy_flow_finds_itself_alone_on_every_seed`.
    for (mbps, rtt, loss) in SHORT_BUFFERS {
        let r = short_buffer(mbps, rtt, loss);
        let p = &r.phases[0];
        let retx = r.flows[0].retransmission_overhead;
        assert!(
            retx <= loss + 0.03,
            "{mbps} Mbit/s, {rtt} ms: {:.1} % retransmitted",
            retx * 100.0
        );
        let u = p.utilization_after_adapt.expect("adapts");
        assert!(u >= 0.94 * (1.0 - loss), "{mbps} Mbit/s, {rtt} ms: {u}");
        let p50 = p.queue_delay_ms.p50;
        assert!(
            p50 <= 0.75 * rtt,
            "{mbps} Mbit/s, {rtt} ms: queue p50 {p50} ms"
        );
    }
}

/// Steering brings a queue down one loop late, so it often empties it at about the capacity
/// it steered to; growth then fired after an RTT and, at 1/8 doubling per RTT, was 12–18 %
/// over capacity by the time the new queue showed. At 250 Mbit/s, 200 ms, 1 % loss the queue
/// swung between empty and 17–22 ms every 1.3 s (p95 16.9 ms after start-up). Above the rate
/// it steered to, a flow now grows slowly until delivery shows capacity it has not seen
/// (`REGROWTH`): 4.6 ms.
#[test]
fn a_lone_flow_on_a_long_lossy_path_holds_its_queue() {
    let t = head("long lossy", 30.0, "")
        + &phase(0.0, 250.0, 200.0, "loss = 0.01")
        + &phase(5.0, 250.0, 200.0, "loss = 0.01")
        + &flow(0.0, "fair", 0);
    let p = &sim(&t).report.phases[1];
    let p95 = p.queue_delay_ms.p95;
    assert!(p95 < 10.0, "queue p95 {p95} ms after start-up");
    // The stale probes' bumps: 15 ms each at 200 ms with the full gain (p99 14.9 ms), at most
    // 5 ms since `PROBE_BUMP` (6.5 ms).
    let p99 = p.queue_delay_ms.p99;
    assert!(p99 < 10.0, "queue p99 {p99} ms after start-up");
    assert!(p.utilization > 0.95 * 0.99, "utilization {}", p.utilization);
}

/// Start-up overshoots by about half a BDP before the first queue is reported (one doubling per
/// RTT, one RTT late), and steering alone took a second to remove it from a reported queue that
/// is itself a loop old: at 250 Mbit/s, 200 ms the first 5 s had a queue p95 of 92 ms (at
/// 1 Gbit/s, 400 ms 184 ms, the rise before the first report alone 134). The
/// flow now drains what it has in flight beyond the pipe at once (`overshoot.rs`): 20 ms, and
/// at 1 Gbit/s, 400 ms the median of the first 5 s falls from 61 ms to nothing.
#[test]
fn growth_that_overshot_drains_at_once() {
    for (mbps, rtt, bound) in [(250.0, 200.0, 40.0), (1000.0, 400.0, 160.0)] {
        let t = head("start-up", 10.0, "")
            + &phase(0.0, mbps, rtt, "loss = 0.01")
            + &phase(5.0, mbps, rtt, "loss = 0.01")
            + &flow(0.0, "fair", 0);
        let r = &sim(&t).report;
        let q = &r.phases[0].queue_delay_ms;
        assert!(
            q.p95 < bound,
            "{mbps} Mbit/s, {rtt} ms: start-up queue p95 {} ms",
            q.p95
        );
        assert!(
            q.p50 < 5.0,
            "{mbps} Mbit/s, {rtt} ms: start-up queue p50 {} ms",
            q.p50
        );
        // Draining costs nothing once it is over.
        let after = r.phases[1].utilization;
        assert!(
            after > 0.95 * 0.99,
            "{mbps} Mbit/s, {rtt} ms: utilization {after} after"
        );
    }
    // Nor while it ends: what is in flight fits the pipe once the queue is gone, and the pipe
    // is what the path delivers. Read from the followed rate, which lags it (861 of
    // 996 Mbit/s), the drain ended late and the link went idle for 68 ms: no 10 good 100 ms
    // bins in a row before 4.0 s at 1 Gbit/s, 400 ms, 2 % loss; now 3.2 s, as before the drain.
    let r = &sim(include_str!(
        "../../../scenarios/checks/lossy-long-fair.toml"
    ))
    .report;
    let adapt = r.phases[0].time_to_adapt_s;
    assert!(
        adapt.is_some_and(|t| t <= 3.5),
        "1 Gbit/s, 400 ms, 2 %: time to adapt {adapt:?} s"
    );
    // A path that stalls holds packets in flight too. Taken for an overshoot, the drain's
    // followed rate read a stall's burst as capacity: 41 218 packets dropped at 1 Gbit/s,
    // 50 ms with 25 ms stalls every 0.5 s, against none.
    let r = &sim(include_str!("../../../scenarios/checks/stalls.toml")).report;
    let drops = r.phases[0].queue_drops;
    assert_eq!(drops, 0, "a stalling path: {drops} packets dropped");
}

#[test]
fn a_lone_lossy_flow_finds_itself_alone_on_every_seed() {
    // One flow, 1 % random loss, a one-BDP buffer shorter than α. Start-up overflows it, and
    // the first share probe, at the top of the full buffer, could not raise the queue: read
    // by the queue it said "shared", the flow was charged for its loss and its rate fell
    // to a quarter, again and again. Until session 43 (docs/design.md) seeds 1–6 retransmitted
    // 2.0–8.3 % (10 Mbit/s, 40 ms) and 1.6–6.3 % (20 Mbit/s, 20 ms) in these 30 s; now such
    // a probe counts as one from a full buffer and measures the share by delivery: 1.4–2.1 %
    // and 1.2–1.4 %.
    for (mbps, rtt) in [(10.0, 40.0), (20.0, 20.0)] {
        for seed in 1..=6 {
            let retx = short_buffer_seeded(seed, mbps, rtt, 0.01).flows[0].retransmission_overhead;
            assert!(
                retx <= 0.01 + 0.015,
                "{mbps} Mbit/s, {rtt} ms, seed {seed}: {:.2} % retransmitted",
                retx * 100.0
            );
        }
    }
}

/// The largest share of its data any flow of the run retransmitted.
fn most_retransmitted(r: &Report) -> f64 {
    r.flows
        .iter()
        .map(|f| f.retransmission_overhead)
        .fold(0.0, f64::max)
}

#[test]
fn a_flow_alone_in_a_full_buffer_takes_no_credit_for_its_loss() {
    // Four `fair` flows 2 s apart at 200 Mbit/s, 10 ms, 0.5 % loss, in a one-BDP buffer (10 ms,
    // shorter than Σα). The third came while the buffer was full and took it into its delay
    // floor: it read 0.7 ms of queue where the others read 10, found itself alone once it held
    // most of the link, and credited its 20 % overflow as random loss (sending D/(1 − p)
    // overflows p): 184 of 200 Mbit/s, one flow at 1.9 with 153 % retransmitted, Jain 0.27.
    // No flow takes credit for loss in a buffer held full now: Jain 0.99, at most 7 %.
    let mut t = seeded_head("full and alone", 2, 40.0, "fairness_from_s = 16.0")
        + &phase(0.0, 200.0, 10.0, "loss = 0.005");
    for i in 0..4 {
        t += &flow(2.0 * f64::from(i), "fair", 0);
    }
    let r = &sim(&t).report;
    let jain = r.fairness_jain.expect("a fairness window");
    assert!(jain >= 0.9, "Jain {jain}");
    let worst = most_retransmitted(r);
    assert!(worst <= 0.2, "{:.1} % retransmitted", worst * 100.0);
}

#[test]
fn flows_sharing_a_buffer_shorter_than_their_alphas_do_not_hold_it_full() {
    // Four `fair` flows 2 s apart at 100 Mbit/s, 20 ms, in a 20 ms buffer: Σα is 24 ms of
    // queue. Until session 41 each pushed towards its α for ever and took the overflow for
    // random loss: 45–61 % of the data retransmitted, Jain 0.997. Now a buffer held full
    // charges each flow for its loss (docs/design.md, "Session 41"): 9–19 %, Jain 0.974.
    let r = &sim(include_str!(
        "../../../scenarios/limits/four-shallow-100m.toml"
    ))
    .report;
    let worst = most_retransmitted(r);
    assert!(worst <= 0.3, "{:.1} % retransmitted", worst * 100.0);
    let jain = r.fairness_jain.expect("a fairness window");
    assert!(jain >= 0.9, "Jain {jain}");
}

#[test]
fn controller_table() {
    let mut t = String::from(
        "| check | util | after adapt | adapt s | q p50 / p95 ms | retx % | spurious | fb KiB/GiB | Jain | flow goodputs |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut row = |name: &str, r: &Report, phase: usize| {
        let p = &r.phases[phase];
        let f = &r.flows[0];
        let goodputs: Vec<String> = r
            .flows
            .iter()
            .map(|f| format!("{:.1}", f.window_goodput_mbps.unwrap_or(f.goodput_mbps)))
            .collect();
        t += &format!(
            "| {name} | {:.3} | {} | {} | {:.2} / {:.2} | {:.2} | {} | {:.0} | {} | {} |\n",
            p.utilization,
            p.utilization_after_adapt
                .map_or("-".into(), |v| format!("{v:.3}")),
            p.time_to_adapt_s.map_or("-".into(), |v| format!("{v:.1}")),
            p.queue_delay_ms.p50,
            p.queue_delay_ms.p95,
            f.retransmission_overhead * 100.0,
            f.spurious_retransmissions,
            f.feedback_kib_per_gib,
            r.fairness_jain.map_or("-".into(), |v| format!("{v:.3}")),
            goodputs.join(" / "),
        );
    };
    row("handover up, after step", handover_up(), 1);
    row("handover down, after step", handover_down(), 1);
    row("deep buffer", deep_buffer(), 0);
    row("reorder 5 % by 10 ms", path_200m(REORDER), 0);
    row("stalls 25 ms every 0.5 s", path_200m(STALLS), 0);
    row("outage, after", &outage().report, 2);
    for (rtt, loss) in GRID_CORNERS {
        row(
            &format!("grid rtt {rtt} loss {loss}"),
            grid_point(rtt, loss),
            0,
        );
    }
    for (mbps, rtt, loss) in SHORT_BUFFERS {
        row(
            &format!("alone {mbps} Mbit/s rtt {rtt} loss {loss}, 1 BDP"),
            short_buffer(mbps, rtt, loss),
            0,
        );
    }
    insta::assert_snapshot!(t);
}
