//! One simulated transfer: its two sessions, its byte source and its checking sink.

use spate_proto::{
    Entry, Instant, Manifest, Receiver, ReceiverEvent, Sender, SenderConfig, SenderEvent, Source,
};

use crate::pattern::{chunk_digest, fill};
use crate::scenario::FlowSpec;

/// Object size used for "send until the end" flows (1 PiB: never reached in a simulation).
pub const UNBOUNDED: u64 = 1 << 50;

/// Generates content and digests each new chunk the first time it is read for sending.
pub(crate) struct PatternSource {
    seed: u64,
    /// Next offset never read before; new data is read in increasing order.
    high_water: u64,
    pub digest: u128,
}

impl Source for PatternSource {
    fn read(&mut self, object: u32, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        fill(self.seed, object, offset, buf);
        if offset == self.high_water {
            self.digest = self.digest.wrapping_add(chunk_digest(object, offset, buf));
            self.high_water += buf.len() as u64;
        }
        Ok(())
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
                high_water: 0,
                digest: 0,
            },
            sink: Sink {
                seed: content_seed,
                digest: 0,
                mismatches: 0,
                scratch: Vec::new(),
            },
            completed_at: None,
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
            self.source.high_water
        } else {
            self.spec.bytes
        }
    }
}
