//! Scenario files (TOML, format version 1).
//!
//! A scenario names a path (a list of phases) and the flows that share it. Keys may be added
//! in later versions, none removed. Every error names the key and the line:
//! `line 14: rate_mbps: must be greater than 0 (got -5)`. Unknown keys are errors too, so a typo
//! never silently falls back to a default. See `scenarios/README.md` for the full key list.

use core::time::Duration;

use serde::Deserialize;
use spate_netmodel::{Phase, Schedule};
use spate_proto::cc::{Policy, RateConfig};
use toml::Spanned;

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Free text.
    pub name: String,
    /// All randomness derives from this.
    pub seed: u64,
    /// Simulated time limit.
    pub duration: Duration,
    /// The path.
    pub schedule: Schedule,
    /// Flows sharing the path.
    pub flows: Vec<FlowSpec>,
    /// Start of the window over which Jain's fairness index is computed (default: when the
    /// last flow starts).
    pub fairness_from: Option<Duration>,
}

/// One transfer in a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSpec {
    /// When it starts.
    pub start: Duration,
    /// Bytes to move; 0 means "send until the scenario ends".
    pub bytes: u64,
    /// Rate policy and limits.
    pub rate: RateConfig,
}

/// A problem in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default(), key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default())]
pub struct ScenarioError {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key at fault, when known.
    pub key: Option<String>,
    /// What is wrong and what would be right.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    seed: Option<Spanned<i64>>,
    duration_s: Spanned<f64>,
    path: RawPath,
    #[serde(default)]
    flow: Vec<RawFlow>,
    fairness_from_s: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    phase: Vec<RawPhase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    start_s: Option<Spanned<f64>>,
    bytes: Option<Spanned<i64>>,
    policy: Option<Spanned<String>>,
    rate_mbps: Option<Spanned<f64>>,
    min_rate_mbps: Option<Spanned<f64>>,
    queue_target_bytes: Option<Spanned<i64>>,
}

struct Ctx<'a> {
    text: &'a str,
}

impl Ctx<'_> {
    fn line(&self, span: core::ops::Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn err<T>(&self, v: &Spanned<T>, key: &str, message: String) -> ScenarioError {
        ScenarioError {
            line: Some(self.line(v.span())),
            key: Some(key.to_owned()),
            message,
        }
    }

    /// A finite number within `[min, max]`.
    fn num(
        &self,
        v: &Spanned<f64>,
        key: &str,
        min: f64,
        max: f64,
        unit: &str,
    ) -> Result<f64, ScenarioError> {
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

    fn opt(
        &self,
        v: &Option<Spanned<f64>>,
        key: &str,
        min: f64,
        max: f64,
        unit: &str,
        default: f64,
    ) -> Result<f64, ScenarioError> {
        v.as_ref()
            .map_or(Ok(default), |v| self.num(v, key, min, max, unit))
    }
}

/// Largest simulated duration accepted (one day).
const MAX_DURATION_S: f64 = 86_400.0;
/// Largest link rate accepted (1 Tbit/s).
const MAX_RATE_MBPS: f64 = 1e6;

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1e3)
}

fn bps(mbps: f64) -> u64 {
    (mbps * 1e6).round() as u64
}

impl Scenario {
    /// Parse and validate a scenario from TOML text.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| Ctx { text }.line(s));
            ScenarioError {
                line,
                key: None,
                message: e.message().trim().to_owned(),
            }
        })?;
        let c = Ctx { text };
        let duration_s = c.num(&raw.duration_s, "duration_s", 0.001, MAX_DURATION_S, " s")?;
        let seed = match &raw.seed {
            None => 1,
            Some(s) => u64::try_from(*s.get_ref())
                .map_err(|_| c.err(s, "seed", "must be a non-negative integer".into()))?,
        };
        let mut phases = Vec::with_capacity(raw.path.phase.len());
        for p in &raw.path.phase {
            let rtt_ms = c.num(&p.rtt_ms, "rtt_ms", 0.0, 10_000.0, " ms")?;
            let at_s = c.num(&p.at_s, "at_s", 0.0, duration_s, " s (within duration_s)")?;
            if let Some(prev) = phases.last().map(|q: &Phase| q.at) {
                if Duration::from_secs_f64(at_s) <= prev {
                    return Err(c.err(
                        &p.at_s,
                        "at_s",
                        "must be later than the previous phase's at_s".into(),
                    ));
                }
            } else if at_s != 0.0 {
                return Err(c.err(&p.at_s, "at_s", "of the first phase must be 0".into()));
            }
            let reorder = c.opt(&p.reorder, "reorder", 0.0, 1.0, " (a fraction)", 0.0)?;
            let reorder_ms = c.opt(&p.reorder_ms, "reorder_ms", 0.0, 10_000.0, " ms", 0.0)?;
            if reorder > 0.0 && reorder_ms == 0.0 {
                if let Some(r) = &p.reorder {
                    return Err(c.err(
                        r,
                        "reorder",
                        "needs reorder_ms > 0 (the extra delay of reordered packets)".into(),
                    ));
                }
            }
            let burst = c.opt(
                &p.burst_loss_len,
                "burst_loss_len",
                0.0,
                1e6,
                " packets",
                0.0,
            )?;
            if burst > 0.0 && burst < 1.0 {
                if let Some(b) = &p.burst_loss_len {
                    return Err(c.err(
                        b,
                        "burst_loss_len",
                        "must be 0 (no bursts) or a mean burst length ≥ 1".into(),
                    ));
                }
            }
            phases.push(Phase {
                at: Duration::from_secs_f64(at_s),
                rate_bps: bps(c.num(&p.rate_mbps, "rate_mbps", 0.001, MAX_RATE_MBPS, " Mbit/s")?),
                rtt: ms(rtt_ms),
                loss: c.opt(&p.loss, "loss", 0.0, 1.0, " (a fraction: 0.01 is 1 %)", 0.0)?,
                queue: ms(c.opt(&p.queue_ms, "queue_ms", 0.0, 100_000.0, " ms", rtt_ms)?),
                burst_loss_len: burst,
                reorder,
                reorder_delay: ms(reorder_ms),
                duplicate: c.opt(&p.duplicate, "duplicate", 0.0, 1.0, " (a fraction)", 0.0)?,
                outage: ms(c.opt(&p.outage_ms, "outage_ms", 0.0, 1e7, " ms", 0.0)?),
            });
        }
        let schedule = Schedule::new(phases).map_err(|e| ScenarioError {
            line: None,
            key: Some(format!("path.phase[{}].{}", e.phase, e.field)),
            message: e.why,
        })?;
        if raw.flow.is_empty() {
            return Err(ScenarioError {
                line: None,
                key: Some("flow".into()),
                message: "at least one [[flow]] is required".into(),
            });
        }
        let mut flows = Vec::with_capacity(raw.flow.len());
        for f in &raw.flow {
            flows.push(c.flow(f, duration_s)?);
        }
        let fairness_from = match &raw.fairness_from_s {
            None => None,
            Some(v) => Some(Duration::from_secs_f64(c.num(
                v,
                "fairness_from_s",
                0.0,
                duration_s,
                " s",
            )?)),
        };
        Ok(Scenario {
            name: raw.name.unwrap_or_default(),
            seed,
            duration: Duration::from_secs_f64(duration_s),
            schedule,
            flows,
            fairness_from,
        })
    }
}

impl Ctx<'_> {
    fn flow(&self, f: &RawFlow, duration_s: f64) -> Result<FlowSpec, ScenarioError> {
        let start = self.opt(
            &f.start_s,
            "start_s",
            0.0,
            duration_s,
            " s (within duration_s)",
            0.0,
        )?;
        let bytes = match &f.bytes {
            None => 0,
            Some(b) => u64::try_from(*b.get_ref()).map_err(|_| {
                self.err(
                    b,
                    "bytes",
                    "must be 0 (unbounded) or a positive byte count".into(),
                )
            })?,
        };
        let policy = match &f.policy {
            None => Policy::Fair,
            Some(p) => Policy::parse(p.get_ref()).ok_or_else(|| {
                self.err(
                    p,
                    "policy",
                    format!(
                        "unknown policy {:?}; choose one of {}",
                        p.get_ref(),
                        Policy::NAMES
                    ),
                )
            })?,
        };
        let min_rate = self.opt(
            &f.min_rate_mbps,
            "min_rate_mbps",
            0.0,
            MAX_RATE_MBPS,
            " Mbit/s",
            0.0,
        )?;
        let rate = match (&f.rate_mbps, policy) {
            (Some(r), _) => self.num(r, "rate_mbps", 0.001, MAX_RATE_MBPS, " Mbit/s")?,
            (None, Policy::Fixed) => {
                let at = f.policy.as_ref().map(|p| self.line(p.span()));
                return Err(ScenarioError {
                    line: at,
                    key: Some("rate_mbps".into()),
                    message: "is required for policy \"fixed\"".into(),
                });
            }
            (None, _) => 0.0, // no cap
        };
        if let (Some(m), true) = (&f.min_rate_mbps, rate > 0.0 && min_rate > rate) {
            return Err(self.err(
                m,
                "min_rate_mbps",
                format!("({min_rate}) must not exceed rate_mbps ({rate})"),
            ));
        }
        let queue_target_bytes = match &f.queue_target_bytes {
            None => spate_proto::cc::DEFAULT_QUEUE_TARGET,
            Some(q) => u64::try_from(*q.get_ref())
                .ok()
                .filter(|&v| (1500..=1 << 30).contains(&v))
                .ok_or_else(|| {
                    self.err(
                        q,
                        "queue_target_bytes",
                        "must be between 1500 and 1073741824".into(),
                    )
                })?,
        };
        Ok(FlowSpec {
            start: Duration::from_secs_f64(start),
            bytes,
            rate: RateConfig {
                policy,
                rate_bps: bps(rate),
                min_rate_bps: bps(min_rate),
                queue_target_bytes,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "handover-up"
seed = 1
duration_s = 80.0

[[path.phase]]
at_s = 0.0
rate_mbps = 100.0
rtt_ms = 92.0
loss = 0.0006

[[path.phase]]
at_s = 40.0
rate_mbps = 10000
rtt_ms = 74.0
loss = 0.0006
queue_ms = 10

[[flow]]
start_s = 0.0
bytes = 0
policy = "fixed"
rate_mbps = 90.0
"#;

    #[test]
    fn parses_the_issue_example() {
        let s = Scenario::parse(GOOD).unwrap();
        assert_eq!(s.name, "handover-up");
        assert_eq!(s.schedule.phases().len(), 2);
        let p = &s.schedule.phases()[0];
        assert_eq!(
            (p.rate_bps, p.rtt, p.queue),
            (
                100_000_000,
                Duration::from_millis(92),
                Duration::from_millis(92)
            )
        );
        assert_eq!(s.schedule.phases()[1].queue, Duration::from_millis(10));
        assert_eq!(s.flows[0].rate, RateConfig::fixed(90_000_000));
    }

    fn err(text: &str) -> String {
        Scenario::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_key_and_line() {
        assert_eq!(
            err(&GOOD.replace("rate_mbps = 10000", "rate_mbps = -5")),
            "line 14: rate_mbps: must be between 0.001 and 1000000 Mbit/s (got -5)"
        );
        assert_eq!(
            err(&GOOD.replace("loss = 0.0006\nqueue", "loss = 6\nqueue")),
            "line 16: loss: must be between 0 and 1 (a fraction: 0.01 is 1 %) (got 6)"
        );
        assert!(err(&GOOD.replace("rtt_ms = 74.0", "rtt_msec = 74.0"))
            .contains("unknown field `rtt_msec`"));
        assert!(err(&GOOD.replace("rtt_ms = 74.0", "rtt_msec = 74.0")).starts_with("line 15"));
        assert_eq!(
            err(&GOOD.replace("policy = \"fixed\"", "policy = \"fast\"")),
            "line 22: policy: unknown policy \"fast\"; choose one of \"fair\", \"high\", \"low\", \"fixed\""
        );
        assert_eq!(
            err(&GOOD.replace("at_s = 40.0", "at_s = 0.0")),
            "line 13: at_s: must be later than the previous phase's at_s"
        );
        assert!(err("duration_s = 'x'").starts_with("line 1: "));
        assert!(err(&GOOD.replace("rate_mbps = 90.0", "")).contains("rate_mbps: is required"));
    }
}
