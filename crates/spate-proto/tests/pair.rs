//! A virtual-time pair of endpoints over a scripted link: the smallest complete driver loop,
//! and scripted exchanges that read like packet traces (drop this one, delay that one).

use std::collections::BTreeMap;
use std::time::Duration;

use spate_proto::{
    Entry, Instant, Manifest, RateConfig, Receiver, ReceiverConfig, ReceiverEvent, Sender,
    SenderConfig, SenderEvent,
};

mod common;
use common::{byte_at, Pattern};

/// Chunks of an odd size, so that they straddle blocks.
const CHUNK: u64 = 30_001;

/// The receiver's address-validation token in these tests (spec §4.8).
const TOKEN: u64 = 0x7e57_7e57_7e57_7e57;

/// The receiving application's writer, slower than the link: it drains `bytes_per_sec` from a
/// queue of at most `budget` bytes, and DATA that would overflow the queue is dropped
/// unacknowledged before the session sees it (as the reference's server does). With
/// `flow_control` the session is told the queue's room (spec §7.4).
struct SlowWriter {
    budget: u64,
    bytes_per_sec: u64,
    flow_control: bool,
    queued: u64,
    drained_to: Instant,
    dropped: u64,
    peak: u64,
}

impl SlowWriter {
    fn new(budget: u64, bytes_per_sec: u64, flow_control: bool) -> Self {
        SlowWriter {
            budget,
            bytes_per_sec,
            flow_control,
            queued: 0,
            drained_to: Instant::ZERO,
            dropped: 0,
            peak: 0,
        }
    }

    fn drain(&mut self, now: Instant) {
        let dt = now.saturating_since(self.drained_to);
        let n = (dt.as_nanos() * u128::from(self.bytes_per_sec) / 1_000_000_000) as u64;
        if n > 0 || self.queued == 0 {
            self.queued = self.queued.saturating_sub(n);
            self.drained_to = now;
        }
    }
}

thread_local! {
    /// The coding setting of this test's sender (each test runs on its own thread).
    static FEC: std::cell::Cell<spate_proto::coding::Fec> =
        const { std::cell::Cell::new(spate_proto::coding::Fec::Auto) };
    /// Whether this test's receiver hands its rebuilds out (`rebuild_elsewhere`).
    static ELSEWHERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// This test's receiver's coding budget, if not the default.
    static KEEP: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
    /// This test's sender's send buffer budget, if not the default.
    static SEND_BUFFER: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

fn receiver_config() -> ReceiverConfig {
    ReceiverConfig {
        rebuild_elsewhere: ELSEWHERE.with(|e| e.get()),
        ..ReceiverConfig::default()
    }
}

/// What the link does with the n-th datagram in one direction.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Deliver,
    Drop,
    Delay(Duration),
    Duplicate,
}

struct Outcome {
    files: Vec<Vec<u8>>,
    sender_events: Vec<SenderEvent>,
    receiver_events: Vec<ReceiverEvent>,
    end: Instant,
    sender: Sender,
    receiver: Option<Receiver>,
    /// Datagrams in each DATA batch the sender released, with its time.
    batches: Vec<(Instant, usize)>,
    writer: Option<SlowWriter>,
}

/// Run a transfer of `sizes` over a link with one-way delay `owd`, where `forward(n)` and
/// `reverse(n)` decide the fate of the n-th datagram each way. Bounded to 10 minutes of virtual
/// time and 10 million steps.
fn run(
    sizes: &[u64],
    rate_bps: u64,
    owd: Duration,
    forward: impl Fn(u64, Instant) -> Fate,
    reverse: impl Fn(u64, Instant) -> Fate,
) -> Outcome {
    run_batched(1, sizes, rate_bps, owd, forward, reverse)
}

/// [`run`] with a sender that sends up to `batch` datagrams at once (as with UDP GSO).
fn run_batched(
    batch: usize,
    sizes: &[u64],
    rate_bps: u64,
    owd: Duration,
    forward: impl Fn(u64, Instant) -> Fate,
    reverse: impl Fn(u64, Instant) -> Fate,
) -> Outcome {
    let source = Pattern::new(CHUNK);
    run_from(source, None, batch, sizes, rate_bps, owd, forward, reverse)
}

/// [`run_batched`] reading from `source`. A starved sender is polled again after 1 ms of
/// virtual time, as a driver does when its reader thread has the next block.
#[allow(clippy::too_many_arguments)]
fn run_from(
    mut source: Pattern,
    mut writer: Option<SlowWriter>,
    batch: usize,
    sizes: &[u64],
    rate_bps: u64,
    owd: Duration,
    forward: impl Fn(u64, Instant) -> Fate,
    reverse: impl Fn(u64, Instant) -> Fate,
) -> Outcome {
    let manifest = Manifest {
        destination: String::new(),
        entries: sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| Entry::file(format!("f{i}"), s))
            .collect(),
    };
    let mut files: Vec<Vec<u8>> = sizes.iter().map(|&s| vec![0u8; s as usize]).collect();
    let mut cfg = SenderConfig::new(RateConfig::fixed(rate_bps));
    cfg.batch = batch;
    cfg.fec = FEC.with(|f| f.get());
    if let Some(b) = SEND_BUFFER.with(|b| b.get()) {
        cfg.send_buffer = b;
    }
    let mut sender = Sender::new(cfg, 42, &manifest, Instant::ZERO).unwrap();
    let mut receiver: Option<Receiver> = None;
    // (arrival time, sequence) -> (to_receiver, bytes)
    let mut wire: BTreeMap<(Instant, u64), (bool, Vec<u8>)> = BTreeMap::new();
    let (mut seq, mut fwd_n, mut rev_n) = (0u64, 0u64, 0u64);
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 1472 * batch];
    let mut batches = vec![];
    let (mut sender_events, mut receiver_events) = (vec![], vec![]);
    let mut send =
        |wire: &mut BTreeMap<_, _>, to_rx: bool, now: Instant, bytes: &[u8], fate: Fate| {
            let mut put = |at: Instant| {
                seq += 1;
                wire.insert((at, seq), (to_rx, bytes.to_vec()));
            };
            match fate {
                Fate::Deliver => put(now + owd),
                Fate::Drop => {}
                Fate::Delay(d) => put(now + owd + d),
                Fate::Duplicate => {
                    put(now + owd);
                    put(now + owd);
                }
            }
        };
    for _ in 0..10_000_000 {
        while let Some(t) = sender.poll_transmit(now, &mut buf, &mut source) {
            batches.push((now, t.len.div_ceil(t.segment_size)));
            for d in buf[..t.len].chunks(t.segment_size) {
                let fate = forward(fwd_n, now);
                fwd_n += 1;
                send(&mut wire, true, now, d, fate);
            }
        }
        if let Some(r) = receiver.as_mut() {
            if let Some(w) = writer.as_mut().filter(|w| w.flow_control) {
                w.drain(now);
                r.set_write_room(now, w.budget - w.queued);
            }
            while let Some(t) = r.poll_transmit(now, &mut buf) {
                let fate = reverse(rev_n, now);
                rev_n += 1;
                send(&mut wire, false, now, &buf[..t.len], fate);
            }
            while let Some(e) = r.poll_event() {
                receiver_events.push(e);
            }
        }
        while let Some(e) = sender.poll_event() {
            sender_events.push(e);
        }
        let rx_closed = receiver.as_ref().is_none_or(|r| r.is_closed());
        if sender.is_closed() && rx_closed && wire.is_empty() {
            break;
        }
        let mut next = wire.keys().next().map(|k| k.0).unwrap_or(Instant::MAX);
        if let Some(t) = sender.poll_timeout() {
            next = next.min(t);
        }
        if let Some(t) = receiver.as_ref().and_then(|r| r.poll_timeout()) {
            next = next.min(t);
        }
        if sender.starved() || writer.as_ref().is_some_and(|w| w.queued > 0) {
            next = next.min(now + MS);
        }
        if next == Instant::MAX || next > Instant::from_millis(600_000) {
            break;
        }
        now = now.max(next);
        if let Some(entry) = wire.first_entry() {
            if entry.key().0 <= now {
                let (to_rx, mut bytes) = entry.remove();
                if to_rx {
                    match receiver.as_mut() {
                        None => {
                            receiver = Receiver::accept(receiver_config(), now, &mut bytes, TOKEN)
                                .ok()
                                .map(|mut r| {
                                    if let Some(b) = KEEP.with(|k| k.get()) {
                                        r.set_coding_budget(b);
                                    }
                                    r
                                })
                        }
                        Some(r) => {
                            if let Some(w) = writer.as_mut() {
                                w.drain(now);
                                let data = bytes[1] & 0x0f == 3;
                                if data && w.queued + bytes.len() as u64 > w.budget {
                                    w.dropped += 1;
                                    continue;
                                }
                            }
                            let mut chunks = Vec::new();
                            if let Ok(Some(c)) = r.handle_datagram(now, &mut bytes) {
                                chunks.push((c.object, c.offset, bytes[c.payload].to_vec()));
                            }
                            // §6.9: a driver that rebuilds elsewhere runs the jobs and hands the
                            // results back (here at once, as a worker thread would later).
                            while let Some(job) = r.poll_rebuild_job() {
                                r.finish_rebuild(job.run());
                            }
                            // Chunks rebuilt from repair symbols are written like DATA.
                            while let Some(c) = r.poll_rebuilt() {
                                chunks.push((c.object, c.offset, c.bytes));
                            }
                            for (object, offset, payload) in chunks {
                                let f = &mut files[object as usize - 1];
                                let (at, n) = (offset as usize, payload.len());
                                f[at..at + n].copy_from_slice(&payload);
                                if let Some(w) = writer.as_mut() {
                                    w.queued += n as u64;
                                    w.peak = w.peak.max(w.queued);
                                }
                            }
                        }
                    }
                } else {
                    let _ = sender.handle_datagram(now, &mut bytes);
                }
                continue;
            }
        }
        sender.handle_timeout(now);
        if let Some(r) = receiver.as_mut() {
            r.handle_timeout(now);
        }
    }
    Outcome {
        files,
        sender_events,
        receiver_events,
        end: now,
        sender,
        receiver,
        batches,
        writer,
    }
}

fn assert_exact(o: &Outcome, sizes: &[u64]) {
    for (i, f) in o.files.iter().enumerate() {
        assert_eq!(f.len() as u64, sizes[i]);
        for (off, &b) in f.iter().enumerate() {
            assert_eq!(b, byte_at(i as u32 + 1, off as u64), "file {i} byte {off}");
        }
    }
    assert!(
        o.sender_events.contains(&SenderEvent::Complete),
        "{:?}",
        o.sender_events
    );
    assert!(
        o.receiver_events.contains(&ReceiverEvent::Complete),
        "{:?}",
        o.receiver_events
    );
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn clean_path_delivers_everything_in_about_one_transfer_time() {
    let sizes = [1_000_000, 0, 5];
    let o = run(
        &sizes,
        100_000_000,
        25 * MS,
        |_, _| Fate::Deliver,
        |_, _| Fate::Deliver,
    );
    assert_exact(&o, &sizes);
    // 1 MB at 100 Mbit/s ≈ 83 ms of sending plus a 50 ms handshake and 25 ms delivery.
    assert!(o.end < Instant::from_millis(400), "took until {}", o.end);
    assert_eq!(o.sender.stats().retransmitted_packets, 0);
    assert_eq!(
        o.receiver_events
            .iter()
            .filter(|e| matches!(e, ReceiverEvent::ObjectComplete(_)))
            .count(),
        3
    );
}

/// A source that has nothing ready on every other request (a disk slower than the link):
/// the sender waits for it instead of failing or spinning, and every byte arrives exactly,
/// each taken from the source once.
#[test]
fn a_source_slower_than_the_link_is_waited_for() {
    let sizes = [2_000_000, 0, 333_333];
    let lossy = |n: u64, _| {
        if n % 13 == 5 {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    };
    let source = Pattern::stalling(CHUNK, 2);
    let o = run_from(source, None, 1, &sizes, 100_000_000, 20 * MS, lossy, lossy);
    assert_exact(&o, &sizes);
    let s = o.sender.stats();
    assert_eq!(s.source_bytes, sizes.iter().sum::<u64>(), "{s:?}");
    assert!(
        s.retransmitted_packets > 0,
        "losses were repaired from memory"
    );
}

/// A writer at 20 Mbit/s behind a 100 Mbit/s sender, with a 1 MiB queue (spec §7.4): told
/// the queue's room, the sender slows to the writer — nothing is dropped for lack of room,
/// the queue never holds more than its budget, and the transfer takes about size / writer
/// rate. Without it (the control run) the sender finds out only by loss, and a large share of
/// what it sends is dropped and sent again.
#[test]
fn a_receiver_slower_than_the_link_slows_the_sender_instead_of_dropping() {
    let sizes = [6_000_000, 2_000_000];
    let deliver = |_, _| Fate::Deliver;
    let steady = || Pattern::new(CHUNK);
    let writer = |flow| Some(SlowWriter::new(1 << 20, 2_500_000, flow));
    let o = run_from(
        steady(),
        writer(true),
        4,
        &sizes,
        100_000_000,
        30 * MS,
        deliver,
        deliver,
    );
    assert_exact(&o, &sizes);
    let w = o.writer.as_ref().unwrap();
    let s = o.sender.stats();
    assert_eq!(w.dropped, 0, "{s:?}");
    assert!(w.peak <= w.budget, "{} queued", w.peak);
    assert!(
        s.retransmitted_packets * 100 <= s.data_packets_sent,
        "{s:?}"
    );
    // 8 MB at 2.5 MB/s: 3.2 s, plus the start and the last drain.
    assert!(o.end < Instant::from_millis(4_500), "took until {}", o.end);

    let control = run_from(
        steady(),
        writer(false),
        4,
        &sizes,
        100_000_000,
        30 * MS,
        deliver,
        deliver,
    );
    assert_exact(&control, &sizes);
    let cw = control.writer.as_ref().unwrap();
    let cs = control.sender.stats();
    println!(
        "flow control: until {}, {} dropped, {}/{} retransmitted, peak queue {} B; without: \
         until {}, {} dropped, {}/{} retransmitted",
        o.end,
        w.dropped,
        s.retransmitted_packets,
        s.data_packets_sent,
        w.peak,
        control.end,
        cw.dropped,
        cs.retransmitted_packets,
        cs.data_packets_sent
    );
    assert!(
        cw.dropped > 100,
        "the control run dropped only {}",
        cw.dropped
    );
    assert!(
        cs.retransmitted_packets * 10 > cs.data_packets_sent,
        "{cs:?}"
    );
}

/// A receiver whose writer never drains (a dead disk, or a peer that wants to hold the
/// sender): the sender sends no more than the room it was offered, waits without spinning —
/// a PING every 200 ms asks for news — and gives up after its idle timeout (60 s) with an
/// error that says why, instead of being held for ever.
#[test]
fn a_receiver_that_never_makes_room_holds_the_sender_only_for_an_idle_timeout() {
    let sizes = [4_000_000];
    let deliver = |_, _| Fate::Deliver;
    let steady = Pattern::new(CHUNK);
    let writer = Some(SlowWriter::new(256 << 10, 0, true));
    let o = run_from(
        steady,
        writer,
        4,
        &sizes,
        100_000_000,
        10 * MS,
        deliver,
        deliver,
    );
    let s = o.sender.stats();
    let w = o.writer.as_ref().unwrap();
    assert_eq!(w.dropped, 0);
    assert!(s.new_bytes_sent <= 256 << 10, "{s:?}");
    assert!(
        o.sender_events.iter().any(|e| matches!(
            e,
            SenderEvent::Failed(spate_proto::SessionError::ReceiverStalled(_))
        )),
        "{:?}",
        o.sender_events
    );
    let secs = o.end.as_secs_f64();
    assert!((60.0..=62.0).contains(&secs), "ended at {secs} s");
    // About five PINGs a second, nothing like a busy loop.
    assert!(s.packets_sent as f64 <= 200.0 + 5.5 * secs, "{s:?}");
    assert!(s.write_limit_us as f64 >= 0.98e6 * (secs - 1.0), "{s:?}");
}

#[test]
fn every_tenth_packet_lost_both_ways() {
    let sizes = [2_000_000];
    let lossy = |n: u64, _| {
        if n % 10 == 3 {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    };
    let o = run(&sizes, 50_000_000, 40 * MS, lossy, lossy);
    assert_exact(&o, &sizes);
    let s = o.sender.stats();
    // Retransmissions: about a tenth of the packets plus losses of retransmissions.
    assert!(
        s.retransmitted_packets as f64 <= 0.13 * s.data_packets_sent as f64,
        "{s:?}"
    );
}

/// A send buffer far smaller than what one lost packet used to pin (everything sent after
/// it until its retransmission is acknowledged: 3 MiB here) — blocks behind the loss are
/// released or cut down to their lost chunks, so new data keeps going and every byte arrives
/// exact, retransmissions copied from the cut-down blocks.
#[test]
fn a_small_send_buffer_keeps_sending_past_its_losses() {
    let sizes = [24_000_000];
    let lossy = |n: u64, _| {
        if n % 97 == 11 {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    };
    SEND_BUFFER.with(|b| b.set(Some(2 << 20)));
    let o = run(&sizes, 100_000_000, 60 * MS, lossy, |_, _| Fate::Deliver);
    SEND_BUFFER.with(|b| b.set(None));
    assert_exact(&o, &sizes);
    let s = o.sender.stats();
    // 24 MB at 100 Mbit/s is 1.9 s (2.3 s here with handshake and tail); with only the front
    // block released, each loss pinned 2+ RTTs of data and held new data back: 3.7 s.
    let secs = o.end.saturating_since(Instant::ZERO).as_secs_f64();
    assert!(secs < 2.8, "{secs} s: {s:?}");
}

#[test]
fn handshake_survives_lost_hello_and_lost_accept() {
    let sizes = [10_000];
    let o = run(
        &sizes,
        10_000_000,
        10 * MS,
        |n, _| if n == 0 { Fate::Drop } else { Fate::Deliver },
        |n, _| if n == 0 { Fate::Drop } else { Fate::Deliver },
    );
    assert_exact(&o, &sizes);
}

#[test]
fn reordering_and_duplicates_do_not_corrupt() {
    let sizes = [3_000_000, 77_777];
    let fwd = |n: u64, _| match n % 17 {
        0 => Fate::Delay(15 * MS),
        5 => Fate::Duplicate,
        _ => Fate::Deliver,
    };
    let o = run(&sizes, 200_000_000, 20 * MS, fwd, |n, _| {
        if n % 7 == 0 {
            Fate::Duplicate
        } else {
            Fate::Deliver
        }
    });
    assert_exact(&o, &sizes);
    let rx = o.receiver.as_ref().unwrap().stats();
    assert!(rx.duplicate_packets > 0);
    // The reordering window adapts: few retransmissions are spurious.
    let s = o.sender.stats();
    assert!(s.spurious_losses * 100 <= s.data_packets_sent, "{s:?}");
}

#[test]
fn tail_losses_are_repaired_without_long_timeouts() {
    // The last 20 packets of the first flight are lost.
    let sizes = [100 * 1448];
    let o = run(
        &sizes,
        100_000_000,
        50 * MS,
        |n, _| {
            if (80..=101).contains(&n) {
                Fate::Drop
            } else {
                Fate::Deliver
            }
        },
        |_, _| Fate::Deliver,
    );
    assert_exact(&o, &sizes);
    // Handshake 100 ms + send 12 ms + a probe timeout (~RTT + 4·rttvar + 10 ms) + repair RTT.
    assert!(o.end < Instant::from_millis(900), "took until {}", o.end);
}

#[test]
fn thirty_second_outage_is_ridden_out() {
    let sizes = [20_000_000];
    let outage = |_: u64, t: Instant| {
        if t >= Instant::from_millis(500) && t < Instant::from_millis(30_500) {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    };
    let o = run(&sizes, 100_000_000, 30 * MS, outage, outage);
    assert_exact(&o, &sizes);
    assert!(o.sender_events.contains(&SenderEvent::PathSilent));
    assert!(o.sender_events.contains(&SenderEvent::PathRestored));
    // Data flows again within one RTT + 200 ms of the path returning, then 1.6 s of sending.
    assert!(
        o.end < Instant::from_millis(30_500 + 260 + 2_500),
        "took until {}",
        o.end
    );
    // Probes during the outage are bounded: at most ~5 per second.
    assert!(
        o.sender.stats().probes_sent < 30 * 6,
        "{:?}",
        o.sender.stats()
    );
}

#[test]
fn idle_timeout_ends_both_sides_with_clear_errors() {
    let sizes = [50_000_000];
    let dead = |_: u64, t: Instant| {
        if t >= Instant::from_millis(300) {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    };
    let o = run(&sizes, 100_000_000, 10 * MS, dead, dead);
    let failed = o.sender_events.iter().find_map(|e| match e {
        SenderEvent::Failed(err) => Some(err.to_string()),
        _ => None,
    });
    assert!(failed.unwrap().contains("no packet from the peer for 60s"));
    assert!(o
        .receiver_events
        .iter()
        .any(|e| matches!(e, ReceiverEvent::Failed(_))));
    assert!(
        o.end >= Instant::from_millis(60_000) && o.end < Instant::from_millis(61_000),
        "{}",
        o.end
    );
}

#[test]
fn no_receiver_means_handshake_timeout() {
    let o = run(
        &[1],
        1_000_000,
        10 * MS,
        |_, _| Fate::Drop,
        |_, _| Fate::Drop,
    );
    let err = o.sender_events.iter().find_map(|e| match e {
        SenderEvent::Failed(err) => Some(err.to_string()),
        _ => None,
    });
    assert!(err.unwrap().contains("did not answer within 10s"));
}

/// §7.1: a sender sending several datagrams per call waits until a whole batch is due (at most
/// 500 µs), then sends it at once — and still keeps its rate on average.
#[test]
fn a_batching_sender_sends_whole_batches_at_its_rate() {
    let sizes = [20_000_000];
    let deliver = |_, _| Fate::Deliver;
    // 1 Gbit/s: 9 more packets of 1500 IP bytes take 108 µs, so whole batches of 10 leave.
    let o = run_batched(10, &sizes, 1_000_000_000, 5 * MS, deliver, deliver);
    assert_exact(&o, &sizes);
    let data: Vec<usize> = o.batches.iter().map(|b| b.1).filter(|&n| n > 1).collect();
    let whole = data.iter().filter(|&&n| n == 10).count();
    assert!(
        whole * 100 >= data.len() * 95,
        "{whole} of {} batches whole",
        data.len()
    );
    // 20 MB at 1 Gbit/s (IP bytes) is 166 ms, plus the handshake and the last report.
    let secs = o.end.as_secs_f64();
    assert!((0.16..0.2).contains(&secs), "took {secs} s");

    // 100 Mbit/s: a packet every 120 µs; the 500 µs cap lets 5 leave together, not 44.
    let sizes = [2_000_000];
    let o = run_batched(44, &sizes, 100_000_000, 5 * MS, deliver, deliver);
    assert_exact(&o, &sizes);
    let late: Vec<usize> = o.batches.iter().skip(20).map(|b| b.1).collect();
    assert!(late.iter().all(|&n| n <= 5), "{late:?}");
    assert!(late.iter().filter(|&&n| n == 5).count() * 2 > late.len());
    let secs = o.end.as_secs_f64();
    assert!((0.16..0.2).contains(&secs), "took {secs} s");
}

/// §6.5: on a path whose RTT is far below the 10 ms Feedback Interval the sender asks for a
/// report about once per millisecond (PROBE on a DATA packet); on a long path it never asks.
#[test]
fn a_short_path_gets_a_report_about_every_millisecond() {
    let sizes = [20_000_000];
    let deliver = |_, _| Fate::Deliver;
    // 1 Gbit/s over 100 µs each way: 166 ms of data, 83 packets a millisecond.
    let o = run(&sizes, 1_000_000_000, MS / 10, deliver, deliver);
    assert_exact(&o, &sizes);
    let secs = o.end.as_secs_f64();
    let requests = o.sender.stats().report_requests;
    let reports = o.receiver.as_ref().unwrap().stats().feedback_sent;
    // One request per millisecond at most; most of the transfer's 160 ms get one.
    assert!(
        requests as f64 <= secs * 1000.0 + 1.0,
        "{requests} in {secs} s"
    );
    assert!(requests >= 120, "{requests} requests in {secs} s");
    assert!(reports > requests, "{reports} reports, {requests} requests");
    assert_eq!(o.sender.stats().probes_sent, 0);

    // 25 ms each way: the RTT exceeds the interval, the receiver's own reports suffice.
    let o = run(&sizes, 1_000_000_000, 25 * MS, deliver, deliver);
    assert_exact(&o, &sizes);
    assert_eq!(o.sender.stats().report_requests, 0);
    let reports = o.receiver.as_ref().unwrap().stats().feedback_sent;
    assert!(reports <= 30, "{reports} reports");

    // 10 Mbit/s on the short path: under one packet per millisecond; a request every 32
    // packets (39 ms) at most, fewer reports than the 10 ms interval gives anyway.
    let sizes = [500_000];
    let o = run(&sizes, 10_000_000, MS / 10, deliver, deliver);
    assert_exact(&o, &sizes);
    let s = o.sender.stats();
    assert!(s.report_requests * 32 <= s.data_packets_sent, "{s:?}");
    assert!(
        s.report_requests * 30 <= (o.end.as_secs_f64() * 1000.0) as u64,
        "{s:?}"
    );
}

/// §6.9: with coding, the losses of a transfer's last round trips are rebuilt from repair
/// symbols as they arrive: the transfer ends about when its last packet arrives, where
/// retransmission needs at least one more loss-finding round trip. 1 in 50 packets is lost
/// (2 %), 200 ms RTT, 100 Mbit/s, 16 MiB.
#[test]
fn tail_losses_are_rebuilt_without_a_round_trip() {
    let sizes = [16 << 20];
    let lossy = |n: u64, _: Instant| {
        if n % 50 == 17 {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    };
    let run_with = |fec| {
        FEC.with(|f| f.set(fec));
        run(&sizes, 100_000_000, 100 * MS, lossy, |_, _| Fate::Deliver)
    };
    let off = run_with(spate_proto::coding::Fec::Off);
    let auto = run_with(spate_proto::coding::Fec::Auto);
    // Rebuilding handed to the driver (as `spate serve` does, on a worker thread) gives the
    // same transfer.
    ELSEWHERE.with(|e| e.set(true));
    let elsewhere = run_with(spate_proto::coding::Fec::Auto);
    ELSEWHERE.with(|e| e.set(false));
    assert_exact(&elsewhere, &sizes);
    assert_eq!(elsewhere.end, auto.end);
    // A receiver that keeps only 128 KiB says so (Keep Limit): the sender codes within it, so
    // the receiver never has to drop a copy or a symbol.
    KEEP.with(|k| k.set(Some(128 << 10)));
    let small = run_with(spate_proto::coding::Fec::Auto);
    KEEP.with(|k| k.set(None));
    assert_exact(&small, &sizes);
    let st = small.receiver.as_ref().unwrap().coding_stats();
    assert!(st.rebuilt_chunks > 0, "{st:?}");
    assert_eq!(st.over_budget, 0, "{st:?}");
    assert_eq!(
        elsewhere.receiver.as_ref().unwrap().coding_stats(),
        auto.receiver.as_ref().unwrap().coding_stats()
    );
    assert_exact(&off, &sizes);
    assert_exact(&auto, &sizes);
    let coded = auto.sender.coding_stats();
    let rebuilt = auto.receiver.as_ref().unwrap().coding_stats();
    assert!(
        coded.repair_packets > 0 && rebuilt.rebuilt_chunks > 0,
        "{coded:?} {rebuilt:?}"
    );
    assert_eq!(off.sender.coding_stats().repair_packets, 0);
    // Lost chunks are still losses (rate control sees them), and rebuilt ones are not sent
    // again.
    assert!(auto.sender.stats().lost_packets > 0);
    assert!(auto.sender.stats().retransmitted_packets < off.sender.stats().retransmitted_packets);
    // The handshake (200 ms), 16 MiB at 100 Mbit/s (1.43 s with headers and 3 % more), the
    // last packet's 100 ms, then the COMPLETE report and the CLOSE (200 ms) end both sides:
    // 1.93 s coded; uncoded, at least one more RTT (measured: 1.94 s and 2.37 s).
    let rtt = Duration::from_millis(200);
    assert!(
        auto.end + rtt <= off.end,
        "coded {} uncoded {}",
        auto.end,
        off.end
    );
    assert!(
        auto.end < Instant::from_millis(2_000),
        "coded {} uncoded {}",
        auto.end,
        off.end
    );
}
