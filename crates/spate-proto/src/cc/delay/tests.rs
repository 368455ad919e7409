//! Unit tests of the delay controller against scripted reports.

use super::*;

const MS: Duration = Duration::from_millis(1);

/// A report with RTT `rtt`, one-way delay `owd_us`, and the receiver's cumulative byte count
/// and clock.
fn report(rtt: Duration, owd_us: i64, receiver_bytes: u64, receiver_time_us: u64) -> RateSample {
    RateSample {
        rtt: Some(rtt),
        srtt: rtt,
        min_rtt: rtt,
        one_way_delay_us: Some(owd_us),
        receiver_bytes,
        receiver_time_us,
        acked_bytes: 0,
        lost_bytes: 0,
        in_flight_bytes: 0,
        datagram_bytes: 1472,
        batch_time: Duration::ZERO,
    }
}

/// Feed `n` reports, the i-th at `first_us + i · gap_us`; `owd(i)` gives its one-way delay
/// (µs) and `deliver(i, rate)` the bytes delivered since the one before. Returns the rate after
/// each report.
fn feed(
    c: &mut Delay,
    (first_us, gap_us): (u64, u64),
    n: u64,
    rtt: Duration,
    owd: impl Fn(u64) -> i64,
    deliver: impl Fn(u64, f64) -> u64,
) -> Vec<f64> {
    let mut bytes = 0u64;
    let mut rates = vec![];
    for i in 0..n {
        let t = first_us + i * gap_us;
        bytes += deliver(i, c.rate);
        c.on_feedback(Instant::from_micros(t), &report(rtt, owd(i), bytes, t));
        rates.push(c.rate);
    }
    rates
}

/// Feed a report every 10 ms from `start` ms for `n` reports (see [`feed`]). Returns the
/// final rate.
fn drive(
    c: &mut Delay,
    start: u64,
    n: u64,
    rtt: Duration,
    owd: impl Fn(u64) -> i64,
    deliver: impl Fn(u64, f64) -> u64,
) -> f64 {
    feed(c, (start * 1000, 10_000), n, rtt, owd, deliver);
    c.rate
}

#[test]
fn grows_a_hundredfold_within_seven_rtts_at_74ms_with_no_queue() {
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    // The first report arrives an RTT after the start.
    let r = drive(
        &mut c,
        74,
        52,
        74 * MS,
        |_| 37_000,
        |_, r| (r / 8.0 * 0.01) as u64,
    );
    assert!(r >= 100.0 * INITIAL_RATE as f64, "rate {r}");
}

#[test]
fn random_loss_with_flat_delay_does_not_slow_it() {
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 1_000_000_000, 0);
    // At the cap, 2 % of bytes never arrive, delay flat.
    let r = drive(
        &mut c,
        0,
        300,
        50 * MS,
        |_| 25_000,
        |_, r| (r / 8.0 * 0.01 * 0.98) as u64,
    );
    assert_eq!(r, 1e9);
}

#[test]
fn cuts_to_delivery_rate_within_one_rtt_when_capacity_drops() {
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    c.rate = 10e9;
    c.empty_since = None;
    // The path now delivers 100 Mbit/s and the queue grows by 9.9 ms per 10 ms.
    let r = drive(
        &mut c,
        0,
        8,
        74 * MS,
        |i| 37_000 + (i as i64) * 9_900,
        |_, _| (100e6 / 8.0 * 0.01 / 1.019) as u64,
    );
    // Steering asks for less than the delivered rate while the queue is far above target, so
    // the queue drains; never less than a quarter of it, so the flow keeps moving.
    let d = 100e6 / 1.019;
    assert!((0.25 * d * 0.99..d).contains(&r), "rate {r}");
}

/// A probe holds the rate for two RTTs, but not into a step down: FASP scenario 1 at 1/10
/// (1 Gbit/s to 100 Mbit/s) with a drain begun 20 ms before the step held 1 Gbit/s for 0.5 s,
/// and nine tenths of it was dropped.
#[test]
fn a_probe_is_not_held_into_a_step_down() {
    for kind in [ProbeKind::Stale, ProbeKind::Drain] {
        let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
        c.rate = 1e9;
        c.empty_since = None;
        let mut bytes = 0u64;
        let mut report_at = |c: &mut Delay, i: u64, owd_us: i64, bps: f64| {
            bytes += (bps / 8.0 * 0.01 / 1.019) as u64;
            let t = i * 10_000;
            c.on_feedback(Instant::from_micros(t), &report(74 * MS, owd_us, bytes, t));
        };
        // 300 ms at 1 Gbit/s with a 1 ms queue: the delivery window fills.
        report_at(&mut c, 0, 37_000, 1e9);
        for i in 1..30 {
            report_at(&mut c, i, 38_000, 1e9);
        }
        let gains = kind.gains();
        c.probe = Probe::Up {
            kind,
            start: Instant::from_millis(300),
            half: 37 * MS,
            gains,
            gain: gains.0,
            q: DrainReadings::before(0.001),
            d0: 1e9,
            q_max: 0.001,
            d_max: 0.0,
            judged: false,
            confirms: false,
            lost: false,
            rtt0: 74 * MS,
            pinned: None,
        };
        // The path now delivers 100 Mbit/s, and the queue grows by 9 ms every 10 ms.
        for i in 30..40 {
            report_at(&mut c, i, 38_000 + (i as i64 - 29) * 9_000, 100e6);
        }
        assert!(
            (c.pacing_rate() as f64) < 200e6,
            "{kind:?}: {} Mbit/s 100 ms after the step",
            c.pacing_rate() / 1_000_000
        );
    }
}

/// A fluid bottleneck: capacity `cap` bit/s, one-way base delay `base_us`, queue in bits.
/// Returns (final rate, queueing delay at the end in seconds, mean utilisation over the last
/// half).
fn fluid(c: &mut Delay, cap: f64, base_us: i64, rtt: Duration, secs: u64) -> (f64, f64, f64) {
    let (r, q, util, _) = fluid_shared(c, cap, 0.0, base_us, rtt, secs);
    (r, q, util)
}

/// [`fluid`] with `cross` bit/s of other traffic that does not yield (served first come
/// first served with this flow's). The queue moves in 1 ms steps, reports come every 10 ms.
/// Also returns the mean queueing delay over the last half.
fn fluid_shared(
    c: &mut Delay,
    cap: f64,
    cross: f64,
    base_us: i64,
    rtt: Duration,
    secs: u64,
) -> (f64, f64, f64, f64) {
    let (r, q, util, mean_q, _) = fluid_buffer(c, (cap, f64::INFINITY), cross, base_us, rtt, secs);
    (r, q, util, mean_q)
}

/// [`fluid_shared`] through a drop-tail buffer of `buffer` seconds at capacity `cap`: what
/// arrives at a full buffer is lost (this flow's part of it in proportion to its rate), and
/// the reports say so. Also returns the share of this flow's bits sent over the last half
/// that were lost. One flow of [`fluid_flows`], measured over the last half.
fn fluid_buffer(
    c: &mut Delay,
    (cap, buffer): (f64, f64),
    cross: f64,
    base_us: i64,
    rtt: Duration,
    secs: u64,
) -> (f64, f64, f64, f64, f64) {
    let n = secs * 1000;
    let run = fluid_flows(
        std::slice::from_mut(c),
        &[0],
        (cap, buffer, cross),
        base_us,
        rtt,
        (secs, n / 2),
    );
    let half = (n - n / 2) as f64;
    let f = run.flows[0];
    (
        c.rate,
        run.queue_end,
        f.delivered / ((cap - cross) * half * 0.001),
        run.mean_queue,
        f.lost / f.sent,
    )
}

/// The report about millisecond `about.0` — one-way delay `about.1` µs, `about.2` bits
/// delivered so far, `about.3` bits acknowledged and lost since the report before — reaches
/// the sender `lag` reports later: queue it in `late`, and feed the one due at `now`.
fn feed_late(
    c: &mut Delay,
    late: &mut std::collections::VecDeque<(u64, i64, f64, (f64, f64))>,
    lag: usize,
    now: Instant,
    rtt: Duration,
    about: (u64, i64, f64, (f64, f64)),
) {
    late.push_back(about);
    while late.len() > lag {
        let Some((ms, owd, delivered, (acked, lost))) = late.pop_front() else {
            return;
        };
        let bytes = (delivered / 8.0 * 1472.0 / 1500.0) as u64;
        let mut s = report(rtt, owd, bytes, ms * 1000);
        (s.acked_bytes, s.lost_bytes) = ((acked / 8.0) as u64, (lost / 8.0) as u64);
        c.on_feedback(now, &s);
    }
}

#[test]
fn fills_a_link_with_a_small_queue() {
    for (cap, rtt_ms) in [(100e6, 20u64), (1e9, 50), (10e9, 74), (1e9, 400)] {
        let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
        let (r, q, util) = fluid(&mut c, cap, rtt_ms as i64 * 500, MS * rtt_ms as u32, 30);
        // Equilibrium: 8·α/cap of queue (6 ms at 100 Mbit/s, 0.6 ms at 1 Gbit/s).
        let q_eq = (DEFAULT_QUEUE_TARGET * 8) as f64 / cap;
        assert!(util > 0.97, "cap {cap}: utilisation {util}, rate {r}");
        assert!(
            q < 3.0 * q_eq + 0.1 * rtt_ms as f64 / 1e3,
            "cap {cap}: queue {q} s"
        );
    }
}

#[test]
fn resumes_previous_rate_after_an_outage() {
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    c.rate = 500e6;
    c.share = Some(Share::new(0.95, 480e6));
    c.on_path_silent(Instant::from_millis(100));
    c.on_path_restored(Instant::from_millis(2100));
    assert_eq!(c.pacing_rate(), 500_000_000);
    // The outage may have been a handover: the share is measured again.
    assert!(c.share.is_none());
}

#[test]
fn rate_stays_within_cap_and_floor() {
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 50_000_000, 20_000_000);
    let r = drive(
        &mut c,
        0,
        200,
        20 * MS,
        |_| 10_000,
        |_, r| (r / 8.0 * 0.01) as u64,
    );
    assert_eq!(r, 50e6);
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 50_000_000, 20_000_000);
    c.rate = 50e6;
    let r = drive(
        &mut c,
        0,
        100,
        20 * MS,
        |i| 10_000 + i as i64 * 5_000,
        |_, _| 1000,
    );
    assert_eq!(r, 20e6);
}

#[test]
fn does_not_grow_when_delivery_falls_behind_though_no_queue_shows() {
    // A delay floor that took in a standing queue (or a buffer too short to show delay): the
    // queue reads empty, but the path delivers 100 Mbit/s whatever is sent.
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let r = drive(
        &mut c,
        0,
        300,
        20 * MS,
        |_| 10_000,
        |_, _| (100e6 / 8.0 * 0.01) as u64,
    );
    assert!(r < 300e6, "rate {r}");
}

#[test]
fn a_sender_short_of_cpu_keeps_its_pace() {
    // The sender manages 18–22 Gbit/s (its CPU), whatever it is paced at; the path takes
    // everything with 0–40 µs of scheduling noise in the one-way delay. Taking what was
    // delivered for the path's rate, the rate ratcheted down to each dip in what the sender
    // managed (using 95 % of what the CPU could do); with the unused capacity added back, the
    // pace stays above what the sender manages.
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    c.rate = 21e9;
    c.empty_since = None;
    let mut seed = 0x2545_f491_u64;
    let mut noise = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 1000) as f64 / 1000.0
    };
    let mut bytes = 0u64;
    let (mut used, mut offered) = (0.0, 0.0);
    for i in 0..500u64 {
        let now = Instant::from_millis(i * 10);
        let pace = c.pacing_rate() as f64;
        let cpu = 18e9 + 4e9 * noise();
        let sent = pace.min(cpu);
        let unused = Duration::from_secs_f64((1.0 - sent / pace) * 0.01);
        c.on_sent(now, 1500, unused);
        bytes += (sent / 8.0 * 0.01 * 1472.0 / 1500.0) as u64;
        let owd = 50 + (40.0 * noise()) as i64;
        c.on_feedback(now, &report(MS / 10, owd, bytes, i * 10_000));
        if i >= 100 {
            used += sent;
            offered += cpu;
        }
    }
    assert!(
        used / offered > 0.99,
        "used {:.3} of what the sender could do",
        used / offered
    );
}

/// §7.1: the last packet of each batch waits behind the rest of its batch. Told how long that
/// is, the controller does not take it for a queue and grows into spare capacity; untold, the
/// same delay reads as a standing queue (64 500 bytes, most of α) and it barely grows.
#[test]
fn its_own_batches_are_not_a_queue() {
    // 44 datagrams of 1500 IP bytes at 5 Gbit/s: the last waits 103 µs behind the others.
    let batch_time = crate::pacer::batch_hold(44, 1500, 5_000_000_000);
    assert_eq!(batch_time.as_micros(), 103);
    let run = |told: Duration| {
        let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
        c.rate = 5e9;
        let mut bytes = 0u64;
        for i in 0..10u64 {
            bytes += (c.rate / 8.0 * 0.01) as u64;
            // The first report's packet travelled alone; every later one ended a batch.
            let owd = if i == 0 { 25_000 } else { 25_103 };
            let mut r = report(MS, owd, bytes, i * 10_000);
            r.batch_time = told;
            c.on_feedback(Instant::from_millis(i * 10), &r);
        }
        c.rate
    };
    let told = run(batch_time);
    let untold = run(Duration::ZERO);
    // Ten reports over 100 RTTs of 1 ms, delivery keeping up: told, it grows as into spare
    // capacity (hundredfold); untold, it only creeps towards what it takes for a queue of α.
    assert!(told > 100.0 * 5e9, "told: {told}");
    assert!(untold < 2.5 * 5e9, "untold: {untold}");
}

/// Feed reports numbered 1..=n every `gap_us` on a path of RTT `rtt` whose receiver delivers
/// whatever was sent at the rate of the report before; `owd(i)` gives the one-way delay (µs).
/// Returns the rate after each report.
fn drive_every(
    c: &mut Delay,
    gap_us: u64,
    n: u64,
    rtt: Duration,
    owd: impl Fn(u64) -> i64,
) -> Vec<f64> {
    let deliver = |_, rate: f64| (rate / 8.0 * gap_us as f64 / 1e6) as u64;
    feed(c, (gap_us, gap_us), n, rtt, |i| owd(i + 1), deliver)
}

/// §6.5: on a 200 µs path a sender that asks for a report every millisecond lets the
/// controller grow about three times as fast as 10 ms reports do, but never faster than one
/// doubling per delay-filter window (3 ms), the time a new queue takes to show.
#[test]
fn reports_every_millisecond_speed_up_growth_on_a_short_path() {
    let rtt = Duration::from_micros(200);
    let mut fast = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let fast_rates = drive_every(&mut fast, 1_000, 60, rtt, |_| 100);
    let mut slow = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let slow_rates = drive_every(&mut slow, 10_000, 6, rtt, |_| 100);
    let (f, s) = (fast_rates[59], slow_rates[5]);
    // 60 ms: at most 6 doublings at 10 ms reports; 1 ms reports must do far better.
    assert!(s <= 64.0 * INITIAL_RATE as f64, "10 ms reports: {s}");
    assert!(f > 16.0 * s, "1 ms reports {f} vs 10 ms reports {s}");
    // Never more than one doubling per 2 ms (the shortest window) between two reports.
    for w in fast_rates.windows(2) {
        assert!(
            w[1] <= w[0] * 2f64.powf(0.5) * 1.0001,
            "{} -> {}",
            w[0],
            w[1]
        );
    }
}

/// With reports every millisecond the current-delay filter spans three of them, so a queue
/// that appears stops growth within three reports, not the ten that a 10 ms window needs.
#[test]
fn a_queue_stops_growth_within_three_millisecond_reports() {
    let rtt = Duration::from_micros(200);
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    // Grow for 40 ms into spare capacity, then a standing queue of 2 ms appears.
    let rates = drive_every(
        &mut c,
        1_000,
        60,
        rtt,
        |i| if i <= 40 { 100 } else { 2_100 },
    );
    let peak = rates.iter().cloned().fold(0.0, f64::max);
    let peak_at = rates.iter().position(|&r| r == peak).unwrap() + 1;
    assert!(
        (40..=43).contains(&peak_at),
        "growth went on until report {peak_at}: {:?}",
        &rates[38..50]
    );
    assert!(rates[59] < peak, "{rates:?}");
}

/// Readings in milliseconds.
fn drain(q0: f64, q_min: f64, q_early: f64, q_late_max: f64) -> DrainReadings {
    DrainReadings {
        q_min: q_min / 1e3,
        q_early: q_early / 1e3,
        q_late_max: q_late_max / 1e3,
        ..DrainReadings::before(q0 / 1e3)
    }
}

/// Alone after a handover to a longer path: this flow's own 6 ms leave within the first half
/// of the slow half and the reading stays on the 5 ms of phantom queue that the stale floor
/// adds, far below the 55 ms the step down built. A stale floor, not a competitor.
#[test]
fn a_drain_that_bottoms_out_under_a_stale_floor_is_no_competitor() {
    let r = drain(11.0, 5.1, 5.2, 5.2);
    assert_eq!(
        Drained::judge(r, 0.0061, 0.055, 0.000_12),
        Drained::Bottomed
    );
}

/// The same at 10 Mbit/s, where a packet lasts 1.2 ms: a bottom whose readings moved by a
/// third of a millisecond has not risen (RLNC test A2 at 1/10, the step to 10 Mbit/s, 56 ms).
/// A wobble of more than a packet's time is a rise.
#[test]
fn a_bottom_may_wobble_by_less_than_a_packet() {
    let r = drain(5.40, 5.40, 5.40, 5.73);
    assert_eq!(Drained::judge(r, 0.002, 0.062, 0.0012), Drained::Bottomed);
    assert_eq!(Drained::judge(r, 0.002, 0.062, 0.000_12), Drained::Standing);
    let risen = drain(5.40, 5.40, 5.40, 6.80);
    assert_eq!(
        Drained::judge(risen, 0.002, 0.062, 0.0012),
        Drained::Standing
    );
}

/// Next to a competitor that keeps a 1×BDP buffer full (kernel BBR does: its in-flight cap is
/// twice the BDP), the drain's queue also stops falling once this flow's part has left, but
/// at the top of what the buffer ever held. Judged a bottom (session 26), it kept the flow out
/// of competitive mode and it missed the ProbeRTTs it recognises BBR by: `fair` 23–28 % of
/// the link instead of 47–49 %.
#[test]
fn a_drain_at_the_top_of_a_full_buffer_meets_a_competitor() {
    let r = drain(48.0, 44.0, 44.3, 44.2);
    assert_eq!(Drained::judge(r, 0.012, 0.050, 0.000_12), Drained::Standing);
}

/// Next to a standing queue the queue falls for the whole slow half (it is not flat), and a
/// queue that falls to a quarter of where it was is empty: nobody else holds one.
#[test]
fn a_drain_still_falling_meets_a_competitor_and_an_emptied_one_does_not() {
    let falling = drain(30.0, 22.0, 26.0, 24.0);
    assert_eq!(
        Drained::judge(falling, 0.012, 0.1, 0.000_12),
        Drained::Standing
    );
    let emptied = drain(12.0, 0.5, 3.0, 1.0);
    assert_eq!(
        Drained::judge(emptied, 0.012, 0.1, 0.000_12),
        Drained::Emptied
    );
    // A fall of more than twice this flow's own part is a competitor's cut, not a bottom.
    let cut = drain(200.0, 120.0, 120.5, 120.2);
    assert_eq!(Drained::judge(cut, 0.012, 0.2, 0.000_12), Drained::Standing);
}

#[test]
fn the_share_maps_to_how_far_a_flow_is_alone() {
    assert_eq!(alone_weight(None), 0.0);
    assert_eq!(alone_weight(Some(0.5)), 0.0);
    assert_eq!(alone_weight(Some(ALONE_SHARE.0)), 0.0);
    assert!((alone_weight(Some(0.775)) - 0.5).abs() < 1e-9);
    assert_eq!(alone_weight(Some(ALONE_SHARE.1)), 1.0);
    assert_eq!(alone_weight(Some(1.4)), 1.0);
}

#[test]
fn alone_it_holds_a_shorter_queue_than_alpha() {
    // 100 Mbit/s, 92 ms: α is 6 ms of queue there; alone the flow aims at 2 ms.
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let (_, _, util, q) = fluid_shared(&mut c, 100e6, 0.0, 46_000, 92 * MS, 40);
    let alpha_q = (DEFAULT_QUEUE_TARGET * 8) as f64 / 100e6;
    assert!(util > 0.97, "utilisation {util}");
    assert!(
        c.share.is_some_and(|s| s.smoothed > ALONE_SHARE.1),
        "share {:?}",
        c.share
    );
    assert!(q < 0.6 * alpha_q, "mean queue {q} s, α's {alpha_q} s");
}

#[test]
fn sharing_the_link_it_keeps_alpha() {
    // Half the link is others': the flow's probes measure a share of about a half.
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let (_, _, util, q) = fluid_shared(&mut c, 100e6, 50e6, 46_000, 92 * MS, 40);
    let alpha_q = (DEFAULT_QUEUE_TARGET * 8) as f64 / 50e6;
    assert!(util > 0.9, "utilisation of what is left {util}");
    assert!(
        c.share.is_some_and(|s| s.smoothed < ALONE_SHARE.0),
        "share {:?}",
        c.share
    );
    assert!(q > 0.7 * alpha_q, "mean queue {q} s, α's {alpha_q} s");
}

/// A busy host, as the emulator's VM had it when a 100 Mbit/s flow collapsed: in any
/// millisecond the sender is descheduled with probability 4 % for 2–11 ms (the pacer makes up
/// 1 ms of it and forfeits the rest), and the path with probability 1 % for 5–24 ms (it holds
/// everything that left the bottleneck meanwhile, then delivers it at once). Fluid bottleneck
/// of `cap` bit/s, RTT `rtt_ms`, reports every 10 ms. Returns the mean pacing rate and the
/// mean queueing delay (seconds) over the last half.
fn busy_host(c: &mut Delay, cap: f64, rtt_ms: u64, secs: u64, seed: u64) -> (f64, f64) {
    let mut seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut noise = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 10_000) as f64 / 10_000.0
    };
    let base_us = rtt_ms as i64 * 500;
    let (mut queue, mut delivered, mut held) = (0.0f64, 0.0f64, 0.0f64);
    let (mut sender_stall, mut path_stall) = (0u64, 0u64);
    let (mut pace_sum, mut q_sum, mut samples) = (0.0, 0.0, 0.0);
    let lag = (rtt_ms / 10).max(1) as usize;
    let mut history = std::collections::VecDeque::new();
    let n = secs * 1000;
    for i in 0..n {
        let now = Instant::from_millis(i);
        let r = c.pacing_rate() as f64;
        if sender_stall == 0 && noise() < 0.04 {
            sender_stall = 2 + (noise() * 10.0) as u64;
        }
        let sent = match sender_stall {
            0 => r * 0.001,
            1 => r * 0.002,
            _ => 0.0,
        };
        let forfeited = if sender_stall > 1 { MS } else { Duration::ZERO };
        c.on_sent(now, 0, forfeited);
        sender_stall = sender_stall.saturating_sub(1);
        let out = (queue + sent).min(cap * 0.001);
        queue += sent - out;
        held += out;
        if path_stall == 0 && noise() < 0.01 {
            path_stall = 5 + (noise() * 20.0) as u64;
        }
        if path_stall == 0 {
            delivered += held;
            held = 0.0;
        }
        let owd = base_us + ((queue / cap + path_stall as f64 / 1e3) * 1e6) as i64;
        path_stall = path_stall.saturating_sub(1);
        if i >= n / 2 {
            pace_sum += r;
            q_sum += queue / cap;
            samples += 1.0;
        }
        if i % 10 != 9 {
            continue;
        }
        feed_late(
            c,
            &mut history,
            lag,
            now,
            MS * rtt_ms as u32,
            (i, owd, delivered, (0.0, 0.0)),
        );
    }
    (pace_sum / samples, q_sum / samples)
}

/// A sender left pace unused (limited), and the path's stalls made its delivery rate dip.
/// Taking each dip as a cut that only growth could undo, and growth waiting for the sender to
/// keep pace, the rate sank: a mean pace of 55–84 Mbit/s on this 100 Mbit/s path over ten
/// seeds (31–62 with twice the path stalls; in the emulator's collapse 26–36 Mbit/s for 5 s).
/// Held unless the queue is above target: 88–96 Mbit/s (72–87), mean queue 0.8–2.2 ms; since
/// session 36, unless it has been above target for an RTT: 93.7–100.3, 1.2–3.8 ms.
/// Letting a limited sender's steering return to its highest pace of the last 2 s instead
/// held 115 Mbit/s over a 16 ms queue: hence the bound on the queue.
#[test]
fn a_busy_host_does_not_ratchet_the_rate_down() {
    busy_host_keeps_pace(95e6, 100e6, 92, 30, 80e6);
}

/// Seeds 1–4 of [`busy_host`] from `start` bits/s for `secs` s: the mean pace over the second
/// half stays above `min_pace` and the mean queue under 4 ms.
fn busy_host_keeps_pace(start: f64, cap: f64, rtt_ms: u64, secs: u64, min_pace: f64) {
    for seed in 1..=4 {
        let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
        c.rate = start;
        let (pace, q) = busy_host(&mut c, cap, rtt_ms, secs, seed);
        assert!(
            pace > min_pace,
            "seed {seed}: pace {:.1} Mbit/s",
            pace / 1e6
        );
        assert!(q < 0.004, "seed {seed}: mean queue {:.1} ms", q * 1e3);
    }
}

/// The same host on a long, fast path (250 Mbit/s, 200 ms). There the flow's target is 2.4 ms
/// of queue and every path stall (5–24 ms) reads above it for a report or two; a limited
/// sender cut for each, and growth waited for it to keep pace: a mean pace of 58–122 Mbit/s
/// over ten seeds, no queue. A limited sender is now cut only for a queue above its target
/// for a whole RTT (what its own pace builds stays that long; a stall's does not): 233–254.
#[test]
fn a_busy_host_on_a_long_path_keeps_its_pace() {
    busy_host_keeps_pace(240e6, 250e6, 200, 40, 200e6);
}

#[test]
fn alone_in_a_buffer_shorter_than_alpha_it_stops_overflowing() {
    // 10 Mbit/s, 20 ms, a one-BDP (20 ms) buffer: α is 60 ms of queue at this rate. Before the
    // full-buffer probe (session 37) the flow held the buffer full and lost 35–40 % of what it
    // sent, each loss credited as random loss.
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let (_, _, util, q, lost) = fluid_buffer(&mut c, (10e6, 0.020), 0.0, 10_000, 20 * MS, 40);
    assert!(util > 0.95, "utilisation {util}");
    assert!(lost < 0.01, "{:.1} % of what it sent lost", lost * 100.0);
    assert!(q < 0.015, "mean queue {q} s");
    assert!(c.ceiling.is_some(), "no ceiling learnt");
}

#[test]
fn sharing_a_full_buffer_it_keeps_alpha() {
    // The same buffer, held full together with 5 Mbit/s of traffic that does not yield: the
    // full-buffer probe measures the flow's share by delivery — its share of the arrivals,
    // 0.77–0.82 while it still paces 15–20 Mbit/s, about a half once the held-full charge has
    // brought it to 5 — and it never takes itself for alone.
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let _ = fluid_buffer(&mut c, (10e6, 0.020), 5e6, 10_000, 20 * MS, 40);
    assert!(c.ceiling.is_none(), "ceiling {:?}", c.ceiling);
    assert!(
        c.share.is_none_or(|s| s.smoothed < ALONE_SHARE.0),
        "share {:?}",
        c.share
    );
}

#[test]
fn a_step_downs_overflow_is_not_a_buffer_held_full() {
    // 100 Mbit/s, 56 ms, just after a step down from 10 Gbit/s (RLNC test A2): the first
    // 200 ms of reports lose as much as is delivered, then nothing more is lost while the
    // queue stands near 8 ms. The second-long loss fraction stays above PINNED_LOSS for
    // seconds after the burst; had the flow called that a buffer held full, probes and drains
    // would have run while it still steered the step's excess out (A2's queue p50/p95
    // rose from 4.9/9.0 to 6.0/14.7 ms).
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    c.rate = 100e6;
    let rtt = 56 * MS;
    let per_report = 100e6 / 8.0 * 0.010 * 1472.0 / 1500.0;
    let mut held_full = 0;
    for i in 0..100u64 {
        let t = i * 10_000;
        let mut s = report(rtt, 28_000 + 8_000, (per_report * i as f64) as u64, t);
        s.acked_bytes = per_report as u64;
        s.lost_bytes = if i < 20 { per_report as u64 } else { 0 };
        c.on_feedback(Instant::from_micros(t), &s);
        if i >= 40 && c.pinned.is_some() {
            held_full += 1;
        }
    }
    assert!(
        c.loss.fraction() >= PINNED_LOSS,
        "the burst is still in the loss fraction"
    );
    assert_eq!(
        held_full, 0,
        "reports taken for a buffer held full after the loss stopped"
    );
}

/// What each flow of [`fluid_flows`] sent, lost and was delivered after `from` ms, bits.
#[derive(Debug, Default, Clone, Copy)]
struct FlowTally {
    sent: f64,
    lost: f64,
    delivered: f64,
}

/// A run of [`fluid_flows`]: each flow's tally, the queueing delay at the end and its mean
/// from `from` ms on, seconds.
#[derive(Debug)]
struct FluidRun {
    flows: Vec<FlowTally>,
    queue_end: f64,
    mean_queue: f64,
}

/// Controllers through one drop-tail buffer of `buffer` seconds at capacity `cap`, next to
/// `cross` bit/s of traffic that does not yield: the k-th starts at `starts_ms[k]`. The queue
/// moves in 1 ms steps and is served first come first served, so the buffer delivers and
/// drops the senders' arrivals in proportion to their rates, and every flow sees the same loss
/// fraction. Reports come every 10 ms and reach each sender one RTT (plus a feedback
/// interval) late. Tallies count from `from_ms` on.
fn fluid_flows(
    cs: &mut [Delay],
    starts_ms: &[u64],
    (cap, buffer, cross): (f64, f64, f64),
    base_us: i64,
    rtt: Duration,
    (secs, from_ms): (u64, u64),
) -> FluidRun {
    let n = cs.len();
    let mut queue = 0.0f64;
    let mut queue_sum = 0.0f64;
    let mut delivered = vec![0.0f64; n];
    // Each flow's bits acknowledged and lost since its last report.
    let mut since = vec![(0.0f64, 0.0f64); n];
    let mut flows = vec![FlowTally::default(); n];
    let lag = (rtt.as_millis() as usize / 10).max(1);
    let mut history = vec![std::collections::VecDeque::new(); n];
    let mut rates = vec![0.0f64; n];
    for i in 0..secs * 1000 {
        let now = Instant::from_millis(i);
        for (k, c) in cs.iter_mut().enumerate() {
            rates[k] = if i >= starts_ms[k] {
                // The probes' rate changes follow what is sent.
                c.on_sent(now, 0, Duration::ZERO);
                c.pacing_rate() as f64
            } else {
                0.0
            };
        }
        let total = rates.iter().sum::<f64>() + cross;
        queue = (queue + (total - cap) * 0.001).max(0.0);
        let dropped = (queue - buffer * cap).max(0.0);
        queue -= dropped;
        let out = if queue > 0.0 { cap } else { total.min(cap) } * 0.001;
        if i >= from_ms {
            queue_sum += queue / cap;
        }
        for k in 0..n {
            if total <= 0.0 {
                break;
            }
            let (own, own_lost) = (out * rates[k] / total, dropped * rates[k] / total);
            delivered[k] += own;
            since[k].0 += own;
            since[k].1 += own_lost;
            if i >= from_ms {
                flows[k].sent += rates[k] * 0.001;
                flows[k].lost += own_lost;
                flows[k].delivered += own;
            }
        }
        if i % 10 != 9 {
            continue;
        }
        let owd = base_us + (queue / cap * 1e6) as i64;
        for (k, c) in cs.iter_mut().enumerate() {
            if i >= starts_ms[k] {
                let about = (i, owd, delivered[k], std::mem::take(&mut since[k]));
                feed_late(c, &mut history[k], lag, now, rtt, about);
            }
        }
    }
    let counted = (secs * 1000).saturating_sub(from_ms).max(1) as f64;
    FluidRun {
        flows,
        queue_end: queue / cap,
        mean_queue: queue_sum / counted,
    }
}

#[test]
fn flows_sharing_a_full_buffer_charge_each_other_to_a_fair_small_overflow() {
    // Four flows 2 s apart through 100 Mbit/s, 20 ms, a 20 ms buffer: Σα (24 ms of queue) is
    // more than the buffer holds, so each flow alone would push towards α for ever
    // (scenarios/limits/four-shallow-100m.toml; the packet simulator's acceptance test has the
    // same point). The held-full charge (`OVERFLOW_CHARGE`) sets the fixed point: every flow
    // pays K·p·r for its overflow, so the pushes equalise the rates and the overflow is a
    // small part of what is sent.
    let mut cs: Vec<Delay> = (0..4)
        .map(|_| Delay::new(DEFAULT_QUEUE_TARGET, 0, 0))
        .collect();
    let starts = [0, 2000, 4000, 6000];
    let t = fluid_flows(
        &mut cs,
        &starts,
        (100e6, 0.020, 0.0),
        10_000,
        20 * MS,
        (40, 16_000),
    )
    .flows;
    let sent: f64 = t.iter().map(|f| f.sent).sum();
    let lost: f64 = t.iter().map(|f| f.lost).sum();
    let goodputs: Vec<f64> = t.iter().map(|f| f.delivered / 24.0 / 1e6).collect();
    let (s, s2) = goodputs
        .iter()
        .fold((0.0, 0.0), |(s, s2), g| (s + g, s2 + g * g));
    let jain = s * s / (4.0 * s2);
    eprintln!(
        "goodputs {goodputs:.1?} Mbit/s, {:.2} % lost, Jain {jain:.3}",
        lost / sent * 100.0
    );
    assert!(s >= 0.95 * 100.0, "utilisation {:.3}", s / 100.0);
    assert!(
        lost / sent < 0.10,
        "{:.1} % of what was sent lost",
        lost / sent * 100.0
    );
    assert!(
        jain >= 0.9,
        "Jain {jain:.3}, goodputs {goodputs:.1?} Mbit/s"
    );
}

/// Delivery at 100 Mbit/s for 3 s with a flat delay, the share known from 1.5 s on; from 2 s
/// delivery falls to `level` of it for `reports` reports (10 ms apart, the delivery window
/// 25 ms) and then returns, nothing made up. Whether the share is still known at the end.
fn share_after_dip(level: f64, reports: u64) -> bool {
    let mut c = Delay::new(DEFAULT_QUEUE_TARGET, 0, 0);
    let per_report = 100e6 / 8.0 * 0.010;
    let mut bytes = 0u64;
    for i in 0..300u64 {
        let t = i * 10_000;
        if i == 150 {
            c.share = Some(Share::new(0.95, 100e6));
        }
        let dip = (200..200 + reports).contains(&i);
        bytes += (per_report * if dip { level } else { 1.0 }) as u64;
        c.on_feedback(Instant::from_micros(t), &report(50 * MS, 25_000, bytes, t));
        assert!(
            !matches!(c.probe, Probe::Up { .. }),
            "a probe at report {i} would hide the dip"
        );
    }
    c.share.is_some()
}

/// A dip that passes within a delivery window — a drain's, or a stall's whose held packets
/// do not come as a burst — says nothing about others; one that lasts (newcomers, a step
/// down) does (session 52: the stall runs forgot a lone flow's share ten times in eight seeds,
/// each after delivery was back).
#[test]
fn a_dip_that_passes_keeps_the_share_and_one_that_lasts_forgets_it() {
    assert!(share_after_dip(1.0, 0), "no dip");
    assert!(share_after_dip(0.0, 1), "10 ms of nothing, then as before");
    assert!(!share_after_dip(0.5, 20), "200 ms at half");
}
