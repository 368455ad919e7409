//! The discrete-event loop.
//!
//! Virtual time starts at zero. Each step either delivers the earliest datagram in flight or
//! runs the timers that are due; after every step every endpoint is asked for output until it
//! has none. Datagrams travel as real Spate wire bytes through the [`Link`] model, one link per
//! direction shared by all flows. Ties in time are broken by insertion order, so a run is a pure
//! function of the scenario: same seed, same report, bit for bit.

use core::time::Duration;

use spate_netmodel::{Direction, Fate, Path};
use spate_proto::wire::{IP_UDP_OVERHEAD, MAX_DATAGRAM};
use spate_proto::{Instant, Receiver, ReceiverConfig};

use crate::flow::Flow;
use crate::metrics::Recorder;
use crate::report::{jain, kib_per_gib, round, FlowReport, Report, TimeSeries};
use crate::scenario::Scenario;

/// A run's outputs.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// Summary.
    pub report: Report,
    /// Time series.
    pub series: TimeSeries,
}

/// A run that could not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The loop stopped making progress in time (a bug in an endpoint's timer logic).
    #[error("simulation stalled at {0}: an endpoint keeps asking to be woken without progress")]
    Stalled(Instant),
    /// A flow uses a protocol the simulator has no model of.
    #[error("flow {flow} uses protocol \"{protocol}\", which runs only in the real-time emulator (spate-lab emu); the simulator models Spate flows")]
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
    bytes: Vec<u8>,
}

/// Steps allowed at one instant before the run is declared stalled.
const STALL_STEPS: u32 = 1_000_000;

struct Engine<'a> {
    scenario: &'a Scenario,
    now: Instant,
    flows: Vec<Flow>,
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
        .find(|(_, f)| f.protocol != crate::scenario::Protocol::Spate)
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
            .map(|(i, f)| Flow::new(i, f.clone(), scenario.seed))
            .collect(),
        path: Path::new(scenario.schedule.clone(), scenario.seed),
        pool: Vec::new(),
        buf: vec![0u8; MAX_DATAGRAM],
        rec: Recorder::new(scenario.duration, scenario.flows.len(), n_phases),
    };
    let end = Instant::ZERO + scenario.duration;
    let mut steps_here = 0u32;
    let mut steps = 0u64;
    loop {
        e.start_flows();
        e.transmit_all();
        if e.flows.iter().all(|f| f.finished) {
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
        for f in self.flows.iter_mut() {
            if f.sender.is_none() && !f.finished && Instant::ZERO + f.spec.start <= self.now {
                f.start(self.now);
            }
        }
    }

    fn next_event_time(&self) -> Instant {
        let mut t = self.path.next_arrival().unwrap_or(Instant::MAX);
        for f in &self.flows {
            if f.finished {
                continue;
            }
            match &f.sender {
                None => t = t.min(Instant::ZERO + f.spec.start),
                Some(s) => {
                    if let Some(x) = s.poll_timeout() {
                        t = t.min(x);
                    }
                }
            }
            if let Some(x) = f.receiver.as_ref().and_then(|r| r.poll_timeout()) {
                t = t.min(x);
            }
        }
        t
    }

    /// Push one datagram through the path; it arrives (once or twice) or is counted as lost.
    fn send(&mut self, flow: u32, to_receiver: bool, len: usize) {
        let now = self.now;
        let dir = if to_receiver {
            Direction::Forward
        } else {
            Direction::Reverse
        };
        let (pool, buf) = (&mut self.pool, &self.buf);
        // Datagram buffers are recycled through `pool`: no allocation per packet once the pool
        // holds as many buffers as packets are ever in flight.
        let fate = self
            .path
            .send(now, dir, (len + IP_UDP_OVERHEAD) as u64, || {
                let mut bytes = pool.pop().unwrap_or_default();
                bytes.clear();
                bytes.extend_from_slice(&buf[..len]);
                Datagram {
                    flow,
                    to_receiver,
                    bytes,
                }
            });
        if !to_receiver {
            return;
        }
        let phase = self.path.link(dir).phase_index();
        match fate {
            Fate::Dropped(cause) => self.rec.on_dropped(phase, now, cause),
            Fate::Delivered { queue_delay, .. } => self.rec.on_queued(phase, now, queue_delay),
        }
    }

    fn transmit_all(&mut self) {
        let now = self.now;
        for i in 0..self.flows.len() {
            if self.flows[i].finished {
                continue;
            }
            loop {
                let f = &mut self.flows[i];
                let Some(s) = f.sender.as_mut() else { break };
                let Some(t) = s.poll_transmit(now, &mut self.buf, &mut f.source) else {
                    break;
                };
                let rate = s.pacing_rate();
                self.rec.on_sent(i, now, rate);
                // Segments leave one after another; the link serialises them.
                let mut at = 0;
                while at < t.len {
                    let n = t.segment_size.min(t.len - at);
                    if at > 0 {
                        self.buf.copy_within(at..at + n, 0);
                    }
                    self.send(i as u32, true, n);
                    at += n;
                }
            }
            loop {
                let f = &mut self.flows[i];
                let Some(r) = f.receiver.as_mut() else { break };
                let Some(t) = r.poll_transmit(now, &mut self.buf) else {
                    break;
                };
                self.send(i as u32, false, t.len);
            }
            self.flows[i].poll_events(now);
        }
    }

    fn step(&mut self) {
        let now = self.now;
        if let Some((_, mut d)) = self.path.pop_due(now) {
            self.arrive(now, &mut d);
            self.pool.push(d.bytes);
            return;
        }
        // Sessions check their own deadlines, so no second poll_timeout() pass is needed here.
        for f in self.flows.iter_mut().filter(|f| !f.finished) {
            if let Some(s) = f.sender.as_mut() {
                s.handle_timeout(now);
            }
            if let Some(r) = f.receiver.as_mut() {
                r.handle_timeout(now);
            }
        }
    }

    fn arrive(&mut self, now: Instant, d: &mut Datagram) {
        let i = d.flow as usize;
        let f = &mut self.flows[i];
        if f.finished {
            return;
        }
        if !d.to_receiver {
            if let Some(s) = f.sender.as_mut() {
                let _ = s.handle_datagram(now, &mut d.bytes);
            }
            return;
        }
        match f.receiver.as_mut() {
            None => {
                // Any per-flow value works as the address token in a simulation (nobody
                // spoofs); derived from the flow so runs stay bit-identical.
                let token = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let cfg = ReceiverConfig::default();
                if let Ok(r) = Receiver::accept(cfg, now, &mut d.bytes, token) {
                    f.receiver = Some(r);
                }
            }
            Some(r) => {
                if let Ok(Some(c)) = r.handle_datagram(now, &mut d.bytes) {
                    let payload = &d.bytes[c.payload.clone()];
                    f.sink.accept(c.object, c.offset, payload);
                    self.rec.on_delivered(i, now, payload.len() as u64);
                }
            }
        }
    }

    fn finish(self) -> SimResult {
        let end = self.now;
        let mut flows: Vec<FlowReport> = self.flows.iter().map(|f| flow_report(f, end)).collect();
        let phases = self.rec.phase_reports(&self.scenario.schedule, end);
        let series = self.rec.series(&self.scenario.schedule, end);
        let (fairness_jain, fairness_window_s) = self.fairness(end, &mut flows);
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
        }
    }

    /// Jain's index (Σx)² / (n·Σx²) of goodputs over the window where all flows run.
    fn fairness(&self, end: Instant, flows: &mut [FlowReport]) -> (Option<f64>, Option<[f64; 2]>) {
        let last_start = self
            .flows
            .iter()
            .map(|f| f.spec.start)
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
            .filter_map(|f| f.completed_at)
            .min()
            .unwrap_or(end)
            .min(end);
        let to = Duration::from_nanos(first_done.as_nanos());
        if to <= from {
            return (None, None);
        }
        let x = self.rec.goodputs_between(from, to);
        for (f, &g) in flows.iter_mut().zip(&x) {
            f.window_goodput_mbps = Some(round(g / 1e6, 3));
        }
        let window = Some([round(from.as_secs_f64(), 6), round(to.as_secs_f64(), 6)]);
        (jain(&x), window)
    }
}

fn flow_report(f: &Flow, end: Instant) -> FlowReport {
    let start = Instant::ZERO + f.spec.start;
    let (tx, rx) = (
        f.sender.as_ref().map(|s| *s.stats()),
        f.receiver.as_ref().map(|r| *r.stats()),
    );
    let tx = tx.unwrap_or_default();
    let rx = rx.unwrap_or_default();
    let delivered = rx.delivered_bytes;
    let complete = f.completed_at.is_some() && f.spec.bytes > 0;
    let stop = f.completed_at.unwrap_or(end);
    let secs = stop.saturating_since(start).as_secs_f64();
    let offered = f.bytes_offered();
    let digest_ok = !complete || f.sink.digest == f.source.digest;
    let feedback = rx.bytes_sent + rx.packets_sent * IP_UDP_OVERHEAD as u64;
    FlowReport {
        policy: f.spec.rate.policy.name().to_owned(),
        start_s: round(f.spec.start.as_secs_f64(), 6),
        bytes_offered: offered,
        bytes_delivered: delivered,
        complete,
        completion_s: f
            .completed_at
            .filter(|_| complete)
            .map(|t| round(t.saturating_since(start).as_secs_f64(), 6)),
        verified: f.sink.mismatches == 0 && digest_ok && f.error.is_none(),
        goodput_mbps: if secs > 0.0 {
            round(delivered as f64 * 8.0 / secs / 1e6, 3)
        } else {
            0.0
        },
        data_packets_sent: tx.data_packets_sent,
        retransmitted_packets: tx.retransmitted_packets,
        retransmission_overhead: if offered > 0 {
            round(tx.retransmitted_bytes as f64 / offered as f64, 5)
        } else {
            0.0
        },
        spurious_retransmissions: rx.spurious_retransmissions,
        lost_packets: tx.lost_packets,
        feedback_bytes: feedback,
        window_goodput_mbps: None,
        feedback_kib_per_gib: round(kib_per_gib(feedback, delivered), 2),
        error: f.error.clone(),
    }
}
