//! The sender's coding plan: which chunks go into coded blocks, and how many repair symbols
//! each block gets (`docs/spec.md` §6.9; none of this is on the wire — any plan interoperates).
//!
//! **Which blocks** (`--fec auto`, the default): a block is coded when a loss found in it
//! would cost the transfer a round trip — when the new data still to send takes less than
//! a few loss-finding horizons (`RTT + reordering window`) at the current rate: the **tail
//! window**. A loss in the last horizon is found only after the last byte left; one a horizon
//! earlier is retransmitted in time, but that retransmission may be lost too, and so on
//! ([`tail_rounds`]). Only while the path has shown loss (a loss-free path pays nothing) and
//! at most [`MAX_CODED_LOSS`]. Before any report has said anything about loss (a transfer
//! shorter than a couple of RTTs), the tail is coded for an assumed [`BLIND_LOSS`].
//! `--fec RATE` codes every block with `⌈RATE · K⌉` symbols, as the fixed redundancy of the
//! research's network-coding prototype did; `--fec off` codes nothing.
//!
//! **Block size.** Consecutive new chunks of one object, at most [`MAX_CHUNKS`] and at most
//! [`block_time`] of sending: a quarter of the smoothed RTT (so the block's repairs follow it
//! closely and its chunks are still in the send buffer) within 1–50 ms.
//!
//! **How many symbols.** Losses in a block of K chunks at loss rate p arriving in bursts of
//! mean length b have mean λ = pK and variance about λb (a compound Poisson count). A block in
//! the last loss-finding horizon gets `M = ⌈λ + 3·√(λ·b) + b⌉` symbols at once: enough in
//! about 999 blocks of 1000, since a shortfall found after the end costs a round trip. An
//! earlier block gets `⌈λ + b⌉`; when the reports show it lost more (its **deficit**, see
//! `CodedBlock`), it gets more symbols, which still arrive before the end. Lost chunks of a
//! coded block are not retransmitted; a block whose R(K) symbols run out, or that is not held
//! four horizons (at least 200 ms) after it closed, falls back to retransmission, so coding
//! never holds a transfer up. p and b come from the sender's own loss detection over the last
//! 16–32 K packets.

use core::time::Duration;
use std::collections::{BTreeMap, VecDeque};

use crate::time::Instant;

/// Most chunks in a block the reference builds: 3840, so that with its R(K) = 256 symbols the
/// code works on 4096 shards (the next power of two); at the spec's 4096 it would work on 8192,
/// and rebuilding cost 20 % of a core per Gbit/s instead of 13 (`spate-lab bench-fec`). A 2 %
/// loss block needs ~105 symbols.
pub const MAX_CHUNKS: u32 = 3840;

/// Above this loss rate nothing is coded: coding is for random loss of a few per cent, and a
/// path losing more (a queue overflowing, a controller overshooting) is repaired by
/// retransmission, which sends exactly what is missing.
pub const MAX_CODED_LOSS: f64 = 0.1;

/// Loss rate assumed for the tail before any report has shown the path's loss (2 %).
pub const BLIND_LOSS: f64 = 0.02;

/// Packets of loss history kept: counts halve when they pass 32 768.
const LOSS_WINDOW: f64 = 32_768.0;

/// Packets that must have been judged (acknowledged or lost) before the loss estimate is used.
const MIN_EVIDENCE: f64 = 256.0;

/// Highest fixed repair rate: what R(K) holds for the largest blocks (256 of 4096 chunks).
pub const MAX_RATE: f64 = 0.0625;

/// What `--fec` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fec {
    /// No coding.
    Off,
    /// Code the tail window, with symbols following the measured loss (the default).
    Auto,
    /// Code every block with this fraction of repair symbols (0 < r ≤ 6.25 %).
    Rate(f64),
}

impl Fec {
    /// Parse `auto`, `off` or a fraction (`0.02`) or percentage (`2%`).
    pub fn parse(s: &str) -> Result<Fec, String> {
        match s {
            "auto" => return Ok(Fec::Auto),
            "off" | "none" => return Ok(Fec::Off),
            _ => {}
        }
        let (num, per) = match s.strip_suffix('%') {
            Some(n) => (n, 100.0),
            None => (s, 1.0),
        };
        match num.trim().parse::<f64>().map(|v| v / per) {
            Ok(r) if r > 0.0 && r <= MAX_RATE => Ok(Fec::Rate(r)),
            _ => Err(format!(
                "{s:?} is not a coding setting: use auto, off, or a repair rate above 0 and at most 6.25 % (0.02 or 2%)"
            )),
        }
    }

    /// The setting as `--fec` takes it.
    pub fn name(&self) -> String {
        match self {
            Fec::Off => "off".into(),
            Fec::Auto => "auto".into(),
            Fec::Rate(r) => format!("{r}"),
        }
    }
}

/// Counters of the sender's coding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodingStats {
    /// Blocks coded.
    pub blocks: u64,
    /// REPAIR packets sent.
    pub repair_packets: u64,
    /// Symbol bytes sent in them.
    pub repair_bytes: u64,
    /// Blocks the receiver reported rebuilt.
    pub rebuilt_blocks: u64,
    /// Blocks left uncoded because their chunks had already left the send buffer.
    pub abandoned_blocks: u64,
}

/// A block being filled with chunks as they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenBlock {
    pub object: u32,
    pub first: u32,
    pub started: Instant,
}

/// A repair symbol waiting to be sent: block (object, first chunk) and symbol index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingSymbol {
    pub object: u32,
    pub first: u32,
    pub index: u32,
}

/// A coded block not yet known held, and what became of its packets.
///
/// The receiver can rebuild the block once it holds K of its packets (chunks it kept and
/// symbols, any mix: the code is MDS). From the acknowledgements the sender knows how many
/// arrived, and from its loss detection how many did not; the **deficit** is what is still
/// missing once the packets in flight arrive (at the loss rate): `K − arrived − (1 − p) ·
/// in flight`. A lost chunk of a block is not retransmitted: the block gets more symbols for
/// its deficit, which serve whichever chunk is missing. Only a block whose symbols are used up
/// falls back to retransmission.
#[derive(Debug)]
pub(crate) struct CodedBlock {
    pub count: u32,
    /// All R(K) symbols, computed when the block closed.
    pub symbols: Vec<Vec<u8>>,
    /// Next symbol index to send.
    pub next: u32,
    pub chunks_acked: u32,
    pub chunks_lost: u32,
    pub symbols_acked: u32,
    pub symbols_lost: u32,
    /// Its symbols are used up: its losses go back to retransmission.
    pub exhausted: bool,
    /// K of its packets were acknowledged: the receiver has rebuilt or holds it, and keeps no
    /// copies for it, so it no longer counts toward the keep budget.
    pub released: bool,
    /// When its last chunk was sent and it was encoded (`None` while it collects chunks).
    pub closed_at: Option<Instant>,
}

impl CodedBlock {
    /// A block that has started to collect chunks.
    pub fn open() -> CodedBlock {
        CodedBlock {
            count: 0,
            symbols: Vec::new(),
            next: 0,
            chunks_acked: 0,
            chunks_lost: 0,
            symbols_acked: 0,
            symbols_lost: 0,
            exhausted: false,
            released: false,
            closed_at: None,
        }
    }

    /// Packets of the block neither acknowledged nor lost.
    fn in_flight(&self) -> f64 {
        let chunks = self
            .count
            .saturating_sub(self.chunks_acked + self.chunks_lost);
        let symbols = self
            .next
            .saturating_sub(self.symbols_acked + self.symbols_lost);
        f64::from(chunks + symbols)
    }

    /// Symbols still needed, after what is in flight arrives at loss rate `p`.
    pub fn deficit(&self, p: f64) -> f64 {
        let arrived = f64::from(self.chunks_acked + self.symbols_acked);
        f64::from(self.count) - arrived - (1.0 - p) * self.in_flight()
    }

    /// At least K of the block's packets arrived (the receiver can rebuild it).
    pub fn arrived_enough(&self) -> bool {
        self.chunks_acked + self.symbols_acked >= self.count
    }

    /// Nothing of the block is in flight any more.
    pub fn settled(&self) -> bool {
        self.in_flight() == 0.0
    }

    /// Every chunk of the block was acknowledged or declared lost: its deficit is known
    /// rather than expected (before that, the first symbols cover the expectation).
    pub fn chunks_judged(&self) -> bool {
        self.chunks_acked + self.chunks_lost >= self.count
    }
}

/// Longest run of consecutive lost packets counted as a burst of random loss; a longer run is
/// an outage (the path was gone), which coding neither can nor should size for.
const MAX_BURST: u64 = 64;

/// Groups the packets declared lost into runs of consecutive packet numbers, across loss
/// detections (the loss timer declares a burst a few packets at a time).
#[derive(Debug, Default)]
pub(crate) struct LossRuns {
    prev: Option<u64>,
    run: u64,
}

impl LossRuns {
    /// Packet `pn` was declared lost (in increasing order); returns a run that ended before
    /// it, if one did.
    fn push(&mut self, pn: u64) -> Option<u64> {
        if self.prev.is_some_and(|q| q + 1 == pn) {
            self.run += 1;
            self.prev = Some(pn);
            return None;
        }
        self.prev = Some(pn);
        let ended = core::mem::replace(&mut self.run, 1);
        (ended > 0).then_some(ended)
    }
}

/// The sender's coding state. See the module documentation.
#[derive(Debug)]
pub(crate) struct Coder {
    pub fec: Fec,
    /// The receiver set CODING, `fec` is not off and the chunk size is even.
    pub active: bool,
    pub open: Option<OpenBlock>,
    pub pending: VecDeque<PendingSymbol>,
    /// Coded blocks not yet known held, by (object, first chunk).
    pub blocks: BTreeMap<(u32, u32), CodedBlock>,
    /// Chunk bytes in `blocks` and the open block (at most [`keep_limit`](Self::keep_limit)).
    pub outstanding: u64,
    /// The receiver's last Keep Limit (§6.9), at most [`super::KEEP_BUDGET`].
    pub keep_limit: u64,
    lost: f64,
    judged: f64,
    runs: f64,
    /// Acknowledged packets not yet judged: (latest send time among them, count). A packet
    /// counts as judged only once loss detection could have declared its neighbours lost,
    /// so that acknowledgements (at once) and losses (a reordering window later) enter the
    /// estimate for the same packets.
    acked_waiting: VecDeque<(Instant, u64)>,
    runs_open: LossRuns,
    pub stats: CodingStats,
}

impl Coder {
    pub fn new(fec: Fec) -> Coder {
        Coder {
            fec,
            active: false,
            open: None,
            pending: VecDeque::new(),
            blocks: BTreeMap::new(),
            outstanding: 0,
            keep_limit: super::KEEP_BUDGET,
            lost: 0.0,
            judged: 0.0,
            runs: 0.0,
            acked_waiting: VecDeque::new(),
            runs_open: LossRuns::default(),
            stats: CodingStats::default(),
        }
    }

    /// Packet `pn` was declared lost (packet numbers in increasing order within a detection).
    /// A run of consecutive lost packets enters the estimate when it ends; a run longer than
    /// [`MAX_BURST`] is an outage and is left out.
    pub fn on_lost(&mut self, pn: u64) {
        if let Some(run) = self.runs_open.push(pn) {
            if run <= MAX_BURST {
                self.on_judged(0, run, 1);
            }
        }
    }

    /// A report acknowledged `n` packets, the latest of them sent at `sent_at`.
    pub fn on_acked(&mut self, sent_at: Instant, n: u64) {
        if n > 0 {
            self.acked_waiting.push_back((sent_at, n));
        }
    }

    /// Loss detection has judged every packet sent before `judged_before`: their
    /// acknowledgements enter the estimate.
    pub fn on_judged_before(&mut self, judged_before: Instant) {
        while let Some(&(t, n)) = self.acked_waiting.front() {
            if t > judged_before {
                break;
            }
            self.acked_waiting.pop_front();
            self.on_judged(n, 0, 0);
        }
    }

    /// `acked` packets were delivered and `lost` lost, in `runs` runs of consecutive packet
    /// numbers.
    pub fn on_judged(&mut self, acked: u64, lost: u64, runs: u64) {
        self.lost += lost as f64;
        self.runs += runs as f64;
        self.judged += (acked + lost) as f64;
        if self.judged > LOSS_WINDOW {
            self.lost /= 2.0;
            self.runs /= 2.0;
            self.judged /= 2.0;
        }
    }

    /// The measured loss rate, once there is enough evidence.
    pub fn loss_rate(&self) -> Option<f64> {
        (self.judged >= MIN_EVIDENCE).then(|| self.lost / self.judged)
    }

    /// Mean length of a run of lost packets (1 without bursts).
    fn burst(&self) -> f64 {
        if self.runs > 0.0 {
            (self.lost / self.runs).max(1.0)
        } else {
            1.0
        }
    }

    /// Whether a new block should start now, given how long the new data still to send takes
    /// at the current rate (`left`), the time a loss takes to be found (`horizon`) and the
    /// packets sent in that time.
    pub fn wants_block(&self, left: Duration, horizon: Duration, packets_per_horizon: f64) -> bool {
        match self.fec {
            Fec::Off => false,
            Fec::Rate(_) => true,
            Fec::Auto => {
                let p = self.loss_rate().unwrap_or(BLIND_LOSS);
                p > 0.0
                    && p <= MAX_CODED_LOSS
                    && left <= horizon.mul_f64(tail_rounds(p, p * packets_per_horizon))
            }
        }
    }

    /// The loss rate to plan with: measured, or assumed before any evidence.
    pub fn planning_loss(&self) -> f64 {
        self.loss_rate().unwrap_or(BLIND_LOSS)
    }

    /// Symbols to add to a block whose deficit is `d` (> 0): enough that they cover it after
    /// their own losses, and one more. `last`: no new data is left, so a top-up that falls
    /// short costs a round trip after the end; it gets the margin of a last-horizon block
    /// (the symbols leave back to back, and one burst can take several).
    pub fn top_up(&self, d: f64, last: bool) -> u32 {
        let p = self.planning_loss().min(0.5);
        let margin = if last {
            let b = self.burst();
            3.0 * (p * d * b).sqrt() + b
        } else {
            1.0
        };
        (d / (1.0 - p) + margin).ceil() as u32
    }

    /// The block of new chunk index `index` of `object`, if it is coded.
    pub fn block_of(&mut self, object: u32, index: u32) -> Option<&mut CodedBlock> {
        let key = self.block_key(object, index)?;
        self.blocks.get_mut(&key)
    }

    /// The key of the coded block chunk `index` of `object` lies in, if any.
    pub fn block_key(&self, object: u32, index: u32) -> Option<(u32, u32)> {
        self.blocks
            .range(..=(object, index))
            .next_back()
            .filter(|(&(o, first), b)| o == object && index < first + b.count)
            .map(|(k, _)| *k)
    }

    /// Chunks in the block being filled (0 without one).
    pub fn open_count(&self) -> u32 {
        self.open
            .and_then(|b| self.blocks.get(&(b.object, b.first)))
            .map_or(0, |b| b.count)
    }

    /// Repair symbols to send right after a block of `count` chunks. `last` says the block
    /// is in the last loss-finding horizon: a deficit found after it would cost a round trip
    /// after the end, so it gets the margin; an earlier block gets the expected loss, and a
    /// top-up (which still arrives before the end) if it lost more.
    pub fn symbols_for(&self, count: u32, last: bool) -> usize {
        let k = f64::from(count);
        let m = match self.fec {
            Fec::Off => 0.0,
            Fec::Rate(r) => (r * k).ceil(),
            Fec::Auto => {
                let p = self.loss_rate().unwrap_or(BLIND_LOSS);
                if p <= 0.0 {
                    0.0
                } else {
                    let b = self.burst();
                    let lambda = p * k;
                    let margin = if last { 3.0 * (lambda * b).sqrt() } else { 0.0 };
                    (lambda + margin + b).ceil()
                }
            }
        };
        (m as usize).min(super::repair_capacity(count) as usize)
    }
}

/// How many loss-finding horizons before the end the tail window opens. Data sent `n`
/// horizons before the end can be retransmitted `n − 1` times before the end; with `l`
/// losses per horizon of data, `l · p^(n−1)` of them are still missing after that. The window
/// opens where fewer than 0.1 would be: `n = 1 + ⌈ln(0.1 / l) / ln p⌉`, within 1–6. At 1 %
/// loss and 10 Gbit/s × 57 ms that is 3 horizons (the last 18 % of a 1.1 GB transfer); at 2 %
/// and 1 Gbit/s × 500 ms, 4.
pub fn tail_rounds(p: f64, l: f64) -> f64 {
    if l <= 0.1 || p <= 0.0 || p >= 1.0 {
        return 1.0;
    }
    (1.0 + ((0.1 / l).ln() / p.ln()).ceil()).clamp(1.0, 6.0)
}

/// How long a block may collect chunks: a quarter of the smoothed RTT, within 1–50 ms.
pub fn block_time(srtt: Duration) -> Duration {
    (srtt / 4).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fec_parses_what_the_help_promises() {
        assert_eq!(Fec::parse("auto"), Ok(Fec::Auto));
        assert_eq!(Fec::parse("off"), Ok(Fec::Off));
        assert_eq!(Fec::parse("0.02"), Ok(Fec::Rate(0.02)));
        assert_eq!(Fec::parse("2%"), Ok(Fec::Rate(0.02)));
        assert_eq!(Fec::parse("6.25%"), Ok(Fec::Rate(0.0625)));
        for bad in ["0", "-1", "0.5", "7%", "30%", "x", ""] {
            assert!(Fec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn symbols_follow_the_loss_and_a_clean_path_pays_nothing() {
        let mut c = Coder::new(Fec::Auto);
        // No evidence yet: the blind guess.
        assert!(c.symbols_for(1000, true) > 10);
        c.on_judged(100_000, 0, 0);
        assert_eq!(c.symbols_for(1000, true), 0);
        assert!(!c.wants_block(Duration::ZERO, Duration::from_millis(100), 1e4));
        let mut c = Coder::new(Fec::Auto);
        c.on_judged(9_900, 100, 100);
        let m = c.symbols_for(1000, true);
        // λ = 10, 3σ ≈ 9.5, +1.
        assert!((19..=22).contains(&m), "{m}");
        // Before the last horizon: the expected loss, and a top-up if more is lost.
        assert_eq!(c.symbols_for(1000, false), 11);
        let mut bursty = Coder::new(Fec::Auto);
        bursty.on_judged(9_900, 100, 5);
        assert!(bursty.symbols_for(1000, true) > 2 * m);
        assert_eq!(Coder::new(Fec::Rate(0.02)).symbols_for(1000, true), 20);
    }
}
