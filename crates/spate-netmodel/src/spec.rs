//! The path part of scenario files (TOML, format version 1): `[[path.phase]]` tables, turned into
//! a validated [`Schedule`]. The simulator and the emulator read scenarios through this one
//! parser, so a phase means the same in both. Every error names the key and the line:
//! `line 14: rate_mbps: must be between 0.001 and 1000000 Mbit/s (got -5)`. Unknown keys are
//! errors, so a typo never silently falls back to a default. `scenarios/README.md` lists the keys.

use core::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::phase::{Phase, Schedule};

/// A problem in a scenario file: the line and key at fault and what would be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default(), key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default())]
pub struct SpecError {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key at fault, when known.
    pub key: Option<String>,
    /// What is wrong and what would be right.
    pub message: String,
}

/// The `[path]` table of a scenario: its `[[path.phase]]` list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    phase: Vec<PhaseSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseSpec {
    at_s: Spanned<f64>,
    rate_mbps: Spanned<f64>,
    rtt_ms: Spanned<f64>,
    loss: Option<Spanned<f64>>,
    queue_ms: Option<Spanned<f64>>,
    burst_loss_len: Option<Spanned<f64>>,
    reorder: Option<Spanned<f64>>,
    reorder_ms: Option<Spanned<f64>>,
    duplicate: Option<Spanned<f64>>,
    outage_ms: Option<Spanned<f64>>,
    stall_ms: Option<Spanned<f64>>,
    stall_every_ms: Option<Spanned<f64>>,
}

/// Largest link rate accepted (1 Tbit/s).
pub const MAX_RATE_MBPS: f64 = 1e6;

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1e3)
}

/// Mbit/s (as written in scenarios) to bits per second.
pub fn bps(mbps: f64) -> u64 {
    (mbps * 1e6).round() as u64
}

impl PathSpec {
    /// Validate the phases against a run of `duration_s` seconds.
    pub fn schedule(&self, t: &TomlText<'_>, duration_s: f64) -> Result<Schedule, SpecError> {
        let mut phases = Vec::with_capacity(self.phase.len());
        for p in &self.phase {
            let rtt_ms = t.num(&p.rtt_ms, "rtt_ms", 0.0, 10_000.0, " ms")?;
            let at_s = t.num(&p.at_s, "at_s", 0.0, duration_s, " s (within duration_s)")?;
            if let Some(prev) = phases.last().map(|q: &Phase| q.at) {
                if Duration::from_secs_f64(at_s) <= prev {
                    return Err(t.err(
                        &p.at_s,
                        "at_s",
                        "must be later than the previous phase's at_s".into(),
                    ));
                }
            } else if at_s != 0.0 {
                return Err(t.err(&p.at_s, "at_s", "of the first phase must be 0".into()));
            }
            let reorder = t.opt(&p.reorder, "reorder", 0.0, 1.0, " (a fraction)", 0.0)?;
            let reorder_ms = t.opt(&p.reorder_ms, "reorder_ms", 0.0, 10_000.0, " ms", 0.0)?;
            if reorder > 0.0 && reorder_ms == 0.0 {
                if let Some(r) = &p.reorder {
                    return Err(t.err(
                        r,
                        "reorder",
                        "needs reorder_ms > 0 (the extra delay of reordered packets)".into(),
                    ));
                }
            }
            let burst = t.opt(
                &p.burst_loss_len,
                "burst_loss_len",
                0.0,
                1e6,
                " packets",
                0.0,
            )?;
            if burst > 0.0 && burst < 1.0 {
                if let Some(b) = &p.burst_loss_len {
                    return Err(t.err(
                        b,
                        "burst_loss_len",
                        "must be 0 (no bursts) or a mean burst length ≥ 1".into(),
                    ));
                }
            }
            let stall = t.opt(&p.stall_ms, "stall_ms", 0.0, 10_000.0, " ms", 0.0)?;
            let stall_every = t.opt(
                &p.stall_every_ms,
                "stall_every_ms",
                0.0,
                1e7,
                " ms (the mean time between stalls)",
                0.0,
            )?;
            if let Some(s) = p
                .stall_ms
                .as_ref()
                .filter(|_| stall > 0.0 && stall_every == 0.0)
            {
                return Err(t.err(
                    s,
                    "stall_ms",
                    "needs stall_every_ms > 0 (the mean time between stalls)".into(),
                ));
            }
            if let Some(e) = p
                .stall_every_ms
                .as_ref()
                .filter(|_| stall_every > 0.0 && stall_every < 2.0 * stall)
            {
                return Err(t.err(
                    e,
                    "stall_every_ms",
                    format!(
                        "must be at least twice stall_ms ({stall} ms): a path stalled most of \
                         the time is an outage (outage_ms)"
                    ),
                ));
            }
            phases.push(Phase {
                at: Duration::from_secs_f64(at_s),
                rate_bps: bps(t.num(&p.rate_mbps, "rate_mbps", 0.001, MAX_RATE_MBPS, " Mbit/s")?),
                rtt: ms(rtt_ms),
                loss: t.opt(&p.loss, "loss", 0.0, 1.0, " (a fraction: 0.01 is 1 %)", 0.0)?,
                queue: ms(t.opt(&p.queue_ms, "queue_ms", 0.0, 100_000.0, " ms", rtt_ms)?),
                burst_loss_len: burst,
                reorder,
                reorder_delay: ms(reorder_ms),
                duplicate: t.opt(&p.duplicate, "duplicate", 0.0, 1.0, " (a fraction)", 0.0)?,
                outage: ms(t.opt(&p.outage_ms, "outage_ms", 0.0, 1e7, " ms", 0.0)?),
                stall: ms(stall),
                stall_every: ms(stall_every),
            });
        }
        Schedule::new(phases).map_err(|e| SpecError {
            line: None,
            key: Some(format!("path.phase[{}].{}", e.phase, e.field)),
            message: e.why,
        })
    }
}

/// The text of a TOML file, to turn spans into line numbers in errors.
pub struct TomlText<'a> {
    text: &'a str,
}

impl<'a> TomlText<'a> {
    /// Wrap the file's text.
    pub fn new(text: &'a str) -> Self {
        TomlText { text }
    }

    /// The 1-based line where `span` starts.
    pub fn line(&self, span: core::ops::Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// An error at `v`'s line, naming `key`.
    pub fn err<T>(&self, v: &Spanned<T>, key: &str, message: String) -> SpecError {
        SpecError {
            line: Some(self.line(v.span())),
            key: Some(key.to_owned()),
            message,
        }
    }

    /// A finite number within `[min, max]`.
    pub fn num(
        &self,
        v: &Spanned<f64>,
        key: &str,
        min: f64,
        max: f64,
        unit: &str,
    ) -> Result<f64, SpecError> {
        let x = *v.get_ref();
        if !x.is_finite() || x < min || x > max {
            return Err(self.err(
                v,
                key,
                format!("must be between {min} and {max}{unit} (got {x})"),
            ));
        }
        Ok(x)
    }

    /// An optional number within `[min, max]`, or `default`.
    pub fn opt(
        &self,
        v: &Option<Spanned<f64>>,
        key: &str,
        min: f64,
        max: f64,
        unit: &str,
        default: f64,
    ) -> Result<f64, SpecError> {
        v.as_ref()
            .map_or(Ok(default), |v| self.num(v, key, min, max, unit))
    }
}
