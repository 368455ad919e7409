//! The discrete-event loop.
//!
//! Virtual time starts at zero. Each step either delivers the earliest datagram in flight or
//! runs the timers that are due; after every step every endpoint is asked for output until it
//! has none. Datagrams travel as real Spate wire bytes through the
//! [`Link`](spate_netmodel::Link) model, one link per direction shared by all flows. Ties in
//! time are broken by insertion order, so a run is a pure function of the scenario: same
//! seed, same report, bit for bit.

use core::time::Duration;

use spate_netmodel::{Direction, Fate, Path};
use spate_proto::wire::{IP_UDP_OVERHEAD, MAX_DATAGRAM};
use spate_proto::{Instant, Receiver, ReceiverConfig};

use crate::flow::{Flow, SimFlow, TcpSim};
use crate::metrics::Recorder;
use crate::report::{jain, kib_per_gib, round, window_shares, FlowReport, Report, TimeSeries};
use crate::scenario::{FlowSpec, Scenario};
use crate::tcp::{TcpPacket, HEADER as TCP_HEADER, MSS};

/// A run's outputs.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// Summary.
    pub report: Report,
    /// Time series.
    pub series: TimeSeries,
    /// Each flow's sender counters at the end, as a real sender keeps them (`None`: a TCP
    /// flow, or a flow that never started).
    pub sender_stats: Vec<Option<spate_proto::SenderStats>>,
}

/// A run that could not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The loop stopped making progress in time (a bug in an endpoint's timer logic).
    #[error("simulation stalled at {0}: an endpoint keeps asking to be woken without progress")]
    Stalled(Instant),
    /// A flow uses a protocol the simulator has no model of.
    #[error("flow {flow} uses protocol \"{protocol}\", which runs only in the real-time emulator (spate-lab emu); the simulator models spate, cubic, bbr and reno flows")]
    NotSimulated {
        /// Index of the flow (from 0).
        flow: usize,
        /// Its protocol.
        protocol: crate::scenario::Protocol,
    },
}

struct Datagram {
    flow: u32,
    to_receiver: bool,
    body: Body,
}

/// What a datagram carries: Spate's wire bytes, or a TCP model's segment or ACK.
enum Body {
    Spate(Vec<u8>),
    Tcp(TcpPacket),
}

/// Steps allowed at one instant before the run is declared stalled.
const STALL_STEPS: u32 = 1_000_000;

struct Engine<'a> {
    scenario: &'a Scenario,
    now: Instant,
    flows: Vec<SimFlow>,
    path: Path<Datagram>,
    pool: Vec<Vec<u8>>,
    buf: Vec<u8>,
    rec: Recorder,
}

/// Run a scenario to its end. `progress` is called now and then with the fraction done.
pub fn run(scenario: &Scenario, progress: &mut dyn FnMut(f64)) -> Result<SimResult, SimError> {
    if let Some((flow, f)) = scenario
        .flows
        .iter()
        .enumerate()
        .find(|(_, f)| !f.protocol.simulated())
    {
        return Err(SimError::NotSimulated {
            flow,
            protocol: f.protocol,
        });
    }
    let n_phases = scenario.schedule.phases().len();
    let mut e = Engine {
        scenario,
        now: Instant::ZERO,
        flows: scenario
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| SimFlow::new(i, f.clone(), scenario.seed))
            .collect(),
        path: Path::new(scenario.schedule.clone(), scenario.seed),
        pool: Vec::new(),
        // Room for the largest batch a flow sends at once (`batch`).
        buf: vec![0u8; MAX_DATAGRAM * scenario.flows.iter().map(|f| f.batch).max().unwrap_or(1)],
        rec: Recorder::new(scenario.duration, scenario.flows.len(), n_phases),
    };
    let end = Instant::ZERO + scenario.duration;
    let mut steps_here = 0u32;
    let mut steps = 0u64;
    loop {
        e.start_flows();
        e.transmit_all();
        if e.flows.iter().all(|f| f.finished()) {
            break;
        }
        let next = e.next_event_time();
        if next >= end {
            e.now = end;
            break;
        }
        if next > e.now {
            e.now = next;
            steps_here = 0;
        } else {
            steps_here += 1;
            if steps_here > STALL_STEPS {
                return Err(SimError::Stalled(e.now));
            }
        }
        e.step();
        steps += 1;
        if steps % (1 << 16) == 0 {
            progress(e.now.as_secs_f64() / end.as_secs_f64());
        }
    }
    progress(1.0);
    Ok(e.finish())
}

impl Engine<'_> {
    fn start_flows(&mut self) {
        let now = self.now;
        for f in self.flows.iter_mut() {
            f.start_if_due(now);
        }
    }

    fn next_event_time(&self) -> Instant {
        let mut t = self.path.next_arrival().unwrap_or(Instant::MAX);
        for f in &self.flows {
            if let Some(x) = f.next_timeout() {
                t = t.min(x);
            }
        }
        t
    }

    /// Push one datagram of `wire_bytes` through the path; it arrives (once or twice) or is
    /// counted as lost. `body` makes each copy's contents, from the buffer pool and the send
    /// buffer.
    fn send(
        &mut self,
        flow: u32,
        to_receiver: bool,
        wire_bytes: u64,
        mut body: impl FnMut(&mut Vec<Vec<u8>>, &[u8]) -> Body,
    ) {
        let dir = if to_receiver {
            Direction::Forward
        } else {
            Direction::Reverse
        };
        let (pool, buf) = (&mut self.pool, &self.buf);
        let fate = self.path.send(self.now, dir, wire_bytes, || Datagram {
            flow,
            to_receiver,
            body: body(pool, buf),
        });
        if to_receiver {
            self.record(fate);
        }
    }

    /// The bottleneck's measurements count the forward direction only.
    fn record(&mut self, fate: Fate) {
        let phase = self.path.link(Direction::Forward).phase_index();
        match fate {
            Fate::Dropped(cause) => self.rec.on_dropped(phase, self.now, cause),
            Fate::Delivered { queue_delay, .. } => self.rec.on_queued(phase, self.now, queue_delay),
        }
    }

    /// Send the first `len` bytes of `buf` as a Spate datagram. Buffers are recycled through
    /// `pool`: no allocation per packet once the pool holds as many buffers as packets are
    /// ever in flight.
    fn send_spate(&mut self, flow: u32, to_receiver: bool, len: usize) {
        let wire = (len + IP_UDP_OVERHEAD) as u64;
        self.send(flow, to_receiver, wire, |pool, buf| {
            let mut bytes = pool.pop().unwrap_or_default();
            bytes.clear();
            bytes.extend_from_slice(&buf[..len]);
            Body::Spate(bytes)
        });
    }

    fn transmit_all(&mut self) {
        for i in 0..self.flows.len() {
            match &self.flows[i] {
                SimFlow::Spate(f) if !f.finished => self.transmit_spate(i),
                SimFlow::Tcp(f) if !f.finished => self.transmit_tcp(i),
                _ => {}
            }
        }
    }

    fn transmit_spate(&mut self, i: usize) {
        let now = self.now;
        loop {
            let SimFlow::Spate(f) = &mut self.flows[i] else {
                return;
            };
            let Some(s) = f.sender.as_mut() else { break };
            let Some(t) = s.poll_transmit(now, &mut self.buf, &mut f.source) else {
                break;
            };
            if f.last_new_at.is_none() && f.spec.bytes > 0 && s.stats().new_bytes_sent >= f.size {
                f.last_new_at = Some(now);
            }
            let rate = s.pacing_rate();
            self.rec.on_sent(i, now, rate);
            self.rec.on_mode(i, now, s.rate_mode());
            // Segments leave one after another; the link serialises them.
            let mut at = 0;
            while at < t.len {
                let n = t.segment_size.min(t.len - at);
                if at > 0 {
                    self.buf.copy_within(at..at + n, 0);
                }
                self.send_spate(i as u32, true, n);
                at += n;
            }
        }
        loop {
            let SimFlow::Spate(f) = &mut self.flows[i] else {
                return;
            };
            let Some(r) = f.receiver.as_mut() else { break };
            let Some(t) = r.poll_transmit(now, &mut self.buf) else {
                break;
            };
            self.send_spate(i as u32, false, t.len);
        }
        if let SimFlow::Spate(f) = &mut self.flows[i] {
            f.poll_events(now);
        }
    }

    fn transmit_tcp(&mut self, i: usize) {
        let now = self.now;
        loop {
            let SimFlow::Tcp(f) = &mut self.flows[i] else {
                return;
            };
            let Some(s) = f.tcp.sender.as_mut() else {
                return;
            };
            let Some(seq) = s.poll_transmit(now) else {
                return;
            };
            // CUBIC and Reno have no pacing rate; the series shows their window's rate instead.
            let rate =
                s.pacing_rate().unwrap_or(s.cwnd() / f.srtt_s()) * (MSS + TCP_HEADER) as f64 * 8.0;
            self.rec.on_sent(i, now, rate as u64);
            let len = f.tcp.segment_len(seq);
            self.send(i as u32, true, len + TCP_HEADER, |_, _| {
                Body::Tcp(TcpPacket::Data { seq, len })
            });
        }
    }

    fn step(&mut self) {
        let now = self.now;
        if let Some((_, d)) = self.path.pop_due(now) {
            self.arrive(now, d);
            return;
        }
        // Sessions check their own deadlines, so no second poll_timeout() pass is needed here.
        for f in self.flows.iter_mut() {
            f.handle_timeout(now);
        }
    }

    fn arrive(&mut self, now: Instant, d: Datagram) {
        let i = d.flow as usize;
        match d.body {
            Body::Spate(mut bytes) => {
                self.arrive_spate(now, i, d.to_receiver, &mut bytes);
                self.pool.push(bytes);
            }
            Body::Tcp(p) => self.arrive_tcp(now, i, p),
        }
    }

    fn arrive_tcp(&mut self, now: Instant, i: usize, p: TcpPacket) {
        let SimFlow::Tcp(f) = &mut self.flows[i] else {
            return;
        };
        if f.finished {
            return;
        }
        match p {
            TcpPacket::Data { seq, len } => {
                let (new, ack) = f.tcp.receiver.on_segment(seq);
                if new {
                    f.tcp.delivered += len;
                    self.rec.on_delivered(i, now, len);
                }
                if f.tcp.is_complete() && f.completed_at.is_none() {
                    f.completed_at = Some(now);
                }
                self.send(i as u32, false, ack.wire_bytes(), |_, _| {
                    Body::Tcp(TcpPacket::Ack(ack))
                });
            }
            TcpPacket::Ack(a) => {
                if let Some(s) = f.tcp.sender.as_mut() {
                    s.on_ack(now, &a);
                    if s.is_done() {
                        f.finished = true;
                    }
                }
            }
        }
    }

    fn arrive_spate(&mut self, now: Instant, i: usize, to_receiver: bool, bytes: &mut [u8]) {
        let SimFlow::Spate(f) = &mut self.flows[i] else {
            return;
        };
        if f.finished {
            return;
        }
        if !to_receiver {
            if let Some(s) = f.sender.as_mut() {
                let _ = s.handle_datagram(now, bytes);
            }
            return;
        }
        match f.receiver.as_mut() {
            None => {
                // Any per-flow value works as the address token in a simulation (nobody
                // spoofs); derived from the flow so runs stay bit-identical.
                let token = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let cfg = ReceiverConfig::default();
                if let Ok(r) = Receiver::accept(cfg, now, bytes, token) {
                    f.receiver = Some(r);
                }
            }
            Some(r) => {
                if let Ok(Some(c)) = r.handle_datagram(now, bytes) {
                    let payload = &bytes[c.payload.clone()];
                    f.sink.accept(c.object, c.offset, payload);
                    self.rec.on_delivered(i, now, payload.len() as u64);
                }
                while let Some(c) = r.poll_rebuilt() {
                    f.sink.accept(c.object, c.offset, &c.bytes);
                    self.rec.on_delivered(i, now, c.bytes.len() as u64);
                }
            }
        }
    }

    fn finish(self) -> SimResult {
        let end = self.now;
        let mut flows: Vec<FlowReport> = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| match f {
                SimFlow::Spate(f) => {
                    let mut r = flow_report(f, end);
                    let (delay, competitive, bbr) = self.rec.mode_seconds(i);
                    r.delay_mode_s = Some(delay);
                    r.competitive_mode_s = Some(competitive);
                    r.following_bbr_s = Some(bbr);
                    r
                }
                SimFlow::Tcp(f) => tcp_report(f, end),
            })
            .collect();
        let phases = self.rec.phase_reports(&self.scenario.schedule, end);
        let series = self.rec.series(&self.scenario.schedule, end);
        let (fairness_jain, fairness_window_s) = self.fairness(end, &mut flows);
        let sender_stats = self
            .flows
            .iter()
            .map(|f| match f {
                SimFlow::Spate(f) => f.sender.as_ref().map(|s| *s.stats()),
                SimFlow::Tcp(_) => None,
            })
            .collect();
        SimResult {
            report: Report {
                scenario: self.scenario.name.clone(),
                seed: self.scenario.seed,
                sim_time_s: round(end.as_secs_f64(), 6),
                flows,
                phases,
                fairness_jain,
                fairness_window_s,
            },
            series,
            sender_stats,
        }
    }

    /// Jain's index (Σx)² / (n·Σx²) of goodputs over the window where all flows run.
    fn fairness(&self, end: Instant, flows: &mut [FlowReport]) -> (Option<f64>, Option<[f64; 2]>) {
        let last_start = self
            .flows
            .iter()
            .map(|f| f.spec().start)
            .max()
            .unwrap_or_default();
        let from = self
            .scenario
            .fairness_from
            .unwrap_or(last_start)
            .max(last_start);
        let first_done = self
            .flows
            .iter()
            .filter_map(|f| f.completed_at())
            .min()
            .unwrap_or(end)
            .min(end);
        let to = Duration::from_nanos(first_done.as_nanos());
        if to <= from {
            return (None, None);
        }
        let x = self.rec.goodputs_between(from, to);
        for (f, (mbps, share)) in flows.iter_mut().zip(window_shares(&x)) {
            f.window_goodput_mbps = Some(mbps);
            f.share = share;
        }
        let window = Some([round(from.as_secs_f64(), 6), round(to.as_secs_f64(), 6)]);
        (jain(&x), window)
    }
}

/// The fields of a flow's report every protocol computes the same way, from when the flow
/// started and completed (`None`: it ran to `end`), what it was offered and delivered, and
/// the bytes its receiver sent back. The per-protocol counters are left at zero.
fn base_report(
    spec: &FlowSpec,
    completed_at: Option<Instant>,
    end: Instant,
    (offered, delivered, feedback): (u64, u64, u64),
) -> FlowReport {
    let start = Instant::ZERO + spec.start;
    let complete = completed_at.is_some() && spec.bytes > 0;
    let secs = completed_at
        .unwrap_or(end)
        .saturating_since(start)
        .as_secs_f64();
    FlowReport {
        protocol: spec.protocol.name().to_owned(),
        policy: spec.rate.policy.name().to_owned(),
        start_s: round(spec.start.as_secs_f64(), 6),
        bytes_offered: offered,
        bytes_delivered: delivered,
        complete,
        completion_s: completed_at
            .filter(|_| complete)
            .map(|t| round(t.saturating_since(start).as_secs_f64(), 6)),
        verified: true,
        goodput_mbps: if secs > 0.0 {
            round(delivered as f64 * 8.0 / secs / 1e6, 3)
        } else {
            0.0
        },
        data_packets_sent: 0,
        retransmitted_packets: 0,
        retransmission_overhead: 0.0,
        spurious_retransmissions: 0,
        lost_packets: 0,
        feedback_bytes: feedback,
        window_goodput_mbps: None,
        share: None,
        delay_mode_s: None,
        competitive_mode_s: None,
        following_bbr_s: None,
        feedback_kib_per_gib: round(kib_per_gib(feedback, delivered), 2),
        fec: None,
        repair_packets: 0,
        overshoot: 0.0,
        recovered_by_repair: 0,
        useless_repairs: 0,
        tail_round_trips: None,
        error: None,
    }
}

/// Retransmitted bytes as a fraction of the bytes offered.
fn overhead(retransmitted: u64, offered: u64) -> f64 {
    if offered > 0 {
        round(retransmitted as f64 / offered as f64, 5)
    } else {
        0.0
    }
}

fn flow_report(f: &Flow, end: Instant) -> FlowReport {
    let tx = f.sender.as_ref().map(|s| *s.stats()).unwrap_or_default();
    let rx = f.receiver.as_ref().map(|r| *r.stats()).unwrap_or_default();
    let offered = f.bytes_offered();
    let feedback = rx.bytes_sent + rx.packets_sent * IP_UDP_OVERHEAD as u64;
    let base = base_report(
        &f.spec,
        f.completed_at,
        end,
        (offered, rx.delivered_bytes, feedback),
    );
    let digest_ok = !base.complete
        || f.sender.as_ref().is_some_and(|s| {
            f.sink.digest == f.source.expected_digest(1, f.size, s.chunk_payload())
        });
    let coding = f
        .sender
        .as_ref()
        .map(|s| *s.coding_stats())
        .unwrap_or_default();
    let rx_coding = f
        .receiver
        .as_ref()
        .map(|r| r.coding_stats())
        .unwrap_or_default();
    // Round trips after the last new byte left, beyond the one-way trip it needed anyway.
    let min_rtt = f.sender.as_ref().map(|s| s.rtt().min().as_secs_f64());
    let tail_round_trips = match (f.last_new_at, f.completed_at, min_rtt) {
        (Some(sent), Some(done), Some(rtt)) if rtt > 0.0 && base.complete => {
            let tail = done.saturating_since(sent).as_secs_f64();
            Some(round(((tail - rtt / 2.0) / rtt).max(0.0), 2))
        }
        _ => None,
    };
    FlowReport {
        verified: f.sink.mismatches == 0 && digest_ok && f.error.is_none(),
        fec: Some(f.spec.fec.name()),
        repair_packets: coding.repair_packets,
        overshoot: overhead(tx.retransmitted_bytes + coding.repair_bytes, offered),
        recovered_by_repair: rx_coding.rebuilt_chunks,
        useless_repairs: rx_coding.useless_symbols,
        tail_round_trips,
        data_packets_sent: tx.data_packets_sent,
        retransmitted_packets: tx.retransmitted_packets,
        retransmission_overhead: overhead(tx.retransmitted_bytes, offered),
        spurious_retransmissions: rx.spurious_retransmissions,
        lost_packets: tx.lost_packets,
        error: f.error.clone(),
        ..base
    }
}

fn tcp_report(f: &TcpSim, end: Instant) -> FlowReport {
    let st = f.tcp.sender.as_ref().map(|s| s.stats()).unwrap_or_default();
    let delivered = f.tcp.delivered;
    let offered = if f.spec.bytes > 0 {
        f.spec.bytes
    } else {
        delivered
    };
    // One ACK per segment received.
    let acks = f.tcp.receiver.cum().min(st.sent);
    let feedback = acks * TCP_HEADER;
    FlowReport {
        policy: "-".to_owned(),
        // The model carries no content: nothing to verify, nothing wrong (base: verified).
        data_packets_sent: st.sent,
        retransmitted_packets: st.retransmitted,
        retransmission_overhead: overhead(st.retransmitted * MSS, offered),
        lost_packets: st.lost,
        spurious_retransmissions: st.spurious,
        ..base_report(&f.spec, f.completed_at, end, (offered, delivered, feedback))
    }
}
