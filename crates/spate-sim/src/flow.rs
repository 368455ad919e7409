//! One simulated transfer: a Spate flow's two sessions, its byte source and its checking sink,
//! or a modelled TCP connection ([`SimFlow`] holds either).

use spate_proto::{
    Entry, Instant, Manifest, Receiver, ReceiverEvent, Sender, SenderConfig, SenderEvent, Source,
};

use crate::pattern::{chunk_digest, fill};
use crate::scenario::{FlowSpec, Protocol};
use crate::tcp::{Algorithm, TcpFlow};

/// Object size used for "send until the end" flows (1 PiB: never reached in a simulation).
pub const UNBOUNDED: u64 = 1 << 50;

/// Generates content, in blocks of [`BLOCK`] bytes, as the sender asks for it.
pub(crate) struct PatternSource {
    seed: u64,
    /// Buffers the sender gave back.
    spare: Vec<Vec<u8>>,
}

/// Bytes per block handed to the sender: 256 KiB, small next to its 4 MiB look-ahead.
const BLOCK: u64 = 256 << 10;

impl PatternSource {
    /// The digest a sink computes over every chunk of `object` (`size` bytes, chunks of
    /// `payload` bytes): what a complete, exact delivery must match.
    pub fn expected_digest(&self, object: u32, size: u64, payload: u64) -> u128 {
        let mut buf = vec![0u8; payload as usize];
        let mut digest = 0u128;
        let mut offset = 0;
        while offset < size {
            let n = payload.min(size - offset) as usize;
            fill(self.seed, object, offset, &mut buf[..n]);
            digest = digest.wrapping_add(chunk_digest(object, offset, &buf[..n]));
            offset += n as u64;
        }
        digest
    }
}

impl Source for PatternSource {
    fn next(&mut self, object: u32, offset: u64, max: u64) -> Result<Option<Vec<u8>>, String> {
        let mut block = self.spare.pop().unwrap_or_default();
        block.resize(max.min(BLOCK) as usize, 0);
        fill(self.seed, object, offset, &mut block);
        Ok(Some(block))
    }

    fn recycle(&mut self, block: Vec<u8>) {
        self.spare.push(block);
    }
}

/// Checks every delivered chunk against the content and digests it.
pub(crate) struct Sink {
    seed: u64,
    pub digest: u128,
    pub mismatches: u64,
    scratch: Vec<u8>,
}

impl Sink {
    pub fn accept(&mut self, object: u32, offset: u64, bytes: &[u8]) {
        self.scratch.resize(bytes.len(), 0);
        fill(self.seed, object, offset, &mut self.scratch);
        if self.scratch != bytes {
            self.mismatches += 1;
        }
        self.digest = self
            .digest
            .wrapping_add(chunk_digest(object, offset, bytes));
    }
}

pub(crate) struct Flow {
    pub spec: FlowSpec,
    pub session: u32,
    pub size: u64,
    pub sender: Option<Sender>,
    pub receiver: Option<Receiver>,
    pub source: PatternSource,
    pub sink: Sink,
    pub completed_at: Option<Instant>,
    /// When the sender sent the last byte of new data (the start of the tail).
    pub last_new_at: Option<Instant>,
    pub error: Option<String>,
    pub finished: bool,
}

impl Flow {
    pub fn new(index: usize, spec: FlowSpec, seed: u64) -> Flow {
        let content_seed = seed ^ (index as u64 + 1).wrapping_mul(0xa076_1d64_78bd_642f);
        let size = if spec.bytes == 0 {
            UNBOUNDED
        } else {
            spec.bytes
        };
        Flow {
            spec,
            session: index as u32 + 1,
            size,
            sender: None,
            receiver: None,
            source: PatternSource {
                seed: content_seed,
                spare: Vec::new(),
            },
            sink: Sink {
                seed: content_seed,
                digest: 0,
                mismatches: 0,
                scratch: Vec::new(),
            },
            completed_at: None,
            last_new_at: None,
            error: None,
            finished: false,
        }
    }

    /// Create the sender at its start time.
    pub fn start(&mut self, now: Instant) {
        let manifest = Manifest {
            destination: String::new(),
            entries: vec![Entry::file(format!("flow{}.bin", self.session), self.size)],
        };
        let mut cfg = SenderConfig::new(self.spec.rate);
        // Simulated paths may go silent for long outages right at the start; the simulated
        // sender waits as long for the first answer as for any other.
        cfg.handshake_timeout = cfg.idle_timeout;
        cfg.fec = self.spec.fec;
        cfg.batch = self.spec.batch;
        match Sender::new(cfg, self.session, &manifest, now) {
            Ok(s) => self.sender = Some(s),
            Err(e) => {
                self.error = Some(e.to_string());
                self.finished = true;
            }
        }
    }

    /// Drain both sides' events; update completion and errors.
    pub fn poll_events(&mut self, now: Instant) {
        if let Some(s) = self.sender.as_mut() {
            while let Some(e) = s.poll_event() {
                if let SenderEvent::Failed(err) = e {
                    self.error.get_or_insert_with(|| format!("sender: {err}"));
                }
            }
        }
        if let Some(r) = self.receiver.as_mut() {
            while let Some(e) = r.poll_event() {
                match e {
                    ReceiverEvent::Complete => self.completed_at = Some(now),
                    ReceiverEvent::Failed(err) => {
                        self.error.get_or_insert_with(|| format!("receiver: {err}"));
                    }
                    _ => {}
                }
            }
        }
        let tx_done = self.sender.as_ref().is_some_and(|s| s.is_closed());
        // A complete receiver waiting for a lost CLOSE has nothing left to tell anyone.
        let rx_done = self
            .receiver
            .as_ref()
            .is_none_or(|r| r.is_closed() || r.is_complete());
        if tx_done && rx_done {
            self.finished = true;
        }
    }

    /// Bytes offered: the transfer size, or for unbounded flows the distinct bytes sent.
    pub fn bytes_offered(&self) -> u64 {
        if self.spec.bytes == 0 {
            self.sender.as_ref().map_or(0, |s| s.stats().new_bytes_sent)
        } else {
            self.spec.bytes
        }
    }
}

/// A simulated TCP connection (the kernel's Reno or CUBIC, modelled in `tcp/`).
pub(crate) struct TcpSim {
    pub spec: FlowSpec,
    pub tcp: TcpFlow,
    pub completed_at: Option<Instant>,
    pub finished: bool,
}

impl TcpSim {
    /// Smoothed RTT in seconds for the window-rate series (the path's base RTT would do; 0.1 s
    /// before any sample).
    pub fn srtt_s(&self) -> f64 {
        self.tcp
            .sender
            .as_ref()
            .and_then(|s| s.srtt())
            .map_or(0.1, |d| d.as_secs_f64().max(1e-4))
    }
}

/// One flow of a scenario, whichever program moves its data.
// A scenario holds a handful of flows: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SimFlow {
    Spate(Flow),
    Tcp(TcpSim),
}

impl SimFlow {
    pub fn new(index: usize, spec: FlowSpec, seed: u64) -> SimFlow {
        let algorithm = match spec.protocol {
            Protocol::Cubic => Some(Algorithm::Cubic),
            Protocol::Reno => Some(Algorithm::Reno),
            Protocol::Bbr => Some(Algorithm::Bbr),
            _ => None,
        };
        match algorithm {
            Some(algorithm) => SimFlow::Tcp(TcpSim {
                tcp: TcpFlow::new(
                    algorithm,
                    spec.bytes,
                    seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                ),
                spec,
                completed_at: None,
                finished: false,
            }),
            None => SimFlow::Spate(Flow::new(index, spec, seed)),
        }
    }

    pub fn spec(&self) -> &FlowSpec {
        match self {
            SimFlow::Spate(f) => &f.spec,
            SimFlow::Tcp(f) => &f.spec,
        }
    }

    pub fn finished(&self) -> bool {
        match self {
            SimFlow::Spate(f) => f.finished,
            SimFlow::Tcp(f) => f.finished,
        }
    }

    pub fn completed_at(&self) -> Option<Instant> {
        match self {
            SimFlow::Spate(f) => f.completed_at,
            SimFlow::Tcp(f) => f.completed_at,
        }
    }

    fn started(&self) -> bool {
        match self {
            SimFlow::Spate(f) => f.sender.is_some(),
            SimFlow::Tcp(f) => f.tcp.sender.is_some(),
        }
    }

    /// Start the flow once its start time has come.
    pub fn start_if_due(&mut self, now: Instant) {
        if self.finished() || self.started() || Instant::ZERO + self.spec().start > now {
            return;
        }
        match self {
            SimFlow::Spate(f) => f.start(now),
            SimFlow::Tcp(f) => f.tcp.start(now),
        }
    }

    /// The earliest time the flow needs the loop: its start, or a timer.
    pub fn next_timeout(&self) -> Option<Instant> {
        if self.finished() {
            return None;
        }
        if !self.started() {
            return Some(Instant::ZERO + self.spec().start);
        }
        match self {
            SimFlow::Spate(f) => {
                let s = f.sender.as_ref().and_then(|s| s.poll_timeout());
                let r = f.receiver.as_ref().and_then(|r| r.poll_timeout());
                s.into_iter().chain(r).min()
            }
            SimFlow::Tcp(f) => f.tcp.sender.as_ref().and_then(|s| s.poll_timeout()),
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.finished() {
            return;
        }
        match self {
            SimFlow::Spate(f) => {
                if let Some(s) = f.sender.as_mut() {
                    s.handle_timeout(now);
                }
                if let Some(r) = f.receiver.as_mut() {
                    r.handle_timeout(now);
                }
            }
            SimFlow::Tcp(f) => {
                if let Some(s) = f.tcp.sender.as_mut() {
                    s.handle_timeout(now);
                }
            }
        }
    }
}
