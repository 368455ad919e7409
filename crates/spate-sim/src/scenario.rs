//! Scenario files (TOML, format version 1).
//!
//! A scenario names a path (a list of phases) and the flows that share it. Keys may be added
//! in later versions, none removed. Every error names the key and the line:
//! `line 14: rate_mbps: must be greater than 0 (got -5)`. Unknown keys are errors too, so a typo
//! never silently falls back to a default. See `scenarios/README.md` for the full key list.

use core::time::Duration;

use serde::Deserialize;
use spate_netmodel::{bps, PathSpec, Phase, Schedule, TomlText, MAX_RATE_MBPS};
use spate_proto::cc::{Policy, RateConfig};
use spate_proto::coding::Fec;
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
    /// Rate policy and limits (Spate flows).
    pub rate: RateConfig,
    /// Which program moves the data.
    pub protocol: Protocol,
    /// Coding (Spate flows, spec §6.9): `auto` (the default), `off`, or a fixed repair rate.
    pub fec: Fec,
    /// Datagrams a Spate sender sends at once, as a driver using UDP GSO does (spec §7.1):
    /// 1 (the default) paces each on its own. The real driver sends up to 44 (`spate`'s
    /// `Socket::max_batch`); the emulator runs the real driver and ignores this.
    pub batch: usize,
}

/// Largest `batch`: the real driver's (44 datagrams of 1472 bytes in one UDP GSO call).
pub const MAX_BATCH: usize = 44;

/// The program that moves a flow's data. The simulator runs Spate's core and its model of
/// kernel TCP (Reno, CUBIC); the real-time emulator (`spate-lab emu`) runs the real programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Spate.
    Spate,
    /// Kernel TCP with CUBIC.
    Cubic,
    /// Kernel TCP with BBR.
    Bbr,
    /// Kernel TCP with Reno.
    Reno,
    /// GridFTP (`globus-url-copy -p 8`, 8 parallel TCP streams) with kernel CUBIC.
    Gridftp,
    /// GridFTP with 8 streams of kernel BBR (GridFTP has no option for it: the lab sets it on
    /// each socket through an `LD_PRELOAD` shim).
    GridftpBbr,
    /// UDT4 (libudt).
    Udt,
}

impl Protocol {
    /// Every protocol, in the order tables list them.
    pub const ALL: [Protocol; 7] = [
        Protocol::Spate,
        Protocol::Cubic,
        Protocol::Bbr,
        Protocol::Reno,
        Protocol::Gridftp,
        Protocol::GridftpBbr,
        Protocol::Udt,
    ];

    /// The scenario-file name.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Spate => "spate",
            Protocol::Cubic => "cubic",
            Protocol::Bbr => "bbr",
            Protocol::Reno => "reno",
            Protocol::Gridftp => "gridftp",
            Protocol::GridftpBbr => "gridftp-bbr",
            Protocol::Udt => "udt",
        }
    }

    /// Whether the simulator has a model of it (Spate's own core, and the TCP model's Reno,
    /// CUBIC and BBR); the others run only in the real-time emulator.
    pub fn simulated(self) -> bool {
        matches!(
            self,
            Protocol::Spate | Protocol::Cubic | Protocol::Reno | Protocol::Bbr
        )
    }

    /// Parse a scenario-file name.
    pub fn parse(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

pub use spate_netmodel::SpecError as ScenarioError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    seed: Option<Spanned<i64>>,
    duration_s: Spanned<f64>,
    path: PathSpec,
    #[serde(default)]
    flow: Vec<RawFlow>,
    fairness_from_s: Option<Spanned<f64>>,
    utc_start_s: Option<Spanned<f64>>,
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
    protocol: Option<Spanned<String>>,
    compete: Option<Spanned<bool>>,
    fec: Option<Spanned<FecValue>>,
    batch: Option<Spanned<i64>>,
}

/// `fec = "auto"`, `"off"`, `"2%"`, or a number (`0.02`).
#[derive(Deserialize)]
#[serde(untagged)]
enum FecValue {
    Name(String),
    Rate(f64),
}

/// Largest simulated duration accepted (one day).
const MAX_DURATION_S: f64 = 86_400.0;
/// Where the simulation's clock starts on UTC by default, seconds (`utc_start_s`): 0 would
/// put the drain grid's instants at 0, 8, 16 s... of a scenario, on the phase switches that
/// scenarios place at whole seconds, often multiples of 8 (FASP scenario 2's handover at
/// 40 s), so that every step met a drain; real handovers fall at no particular instant.
/// 0.5 s moves the instants to 7.5, 15.5 s... (session 52).
const UTC_START_S: f64 = 0.5;
/// Largest `utc_start_s`: the grid repeats every 8 s, so a day covers every placement.
pub const MAX_UTC_START_S: f64 = 86_400.0;

impl Scenario {
    /// The same scenario with every rate (path phases, flow rate caps) multiplied by `factor`,
    /// keeping delays, loss and queue times: how a 10 Gbit/s experiment is run on a machine
    /// that carries 1 Gbit/s. Byte counts scale too, so a bounded flow takes as long.
    pub fn scaled(&self, factor: f64) -> Scenario {
        let mut s = self.clone();
        let scale = |v: u64| ((v as f64) * factor).round().max(1.0) as u64;
        let phases = s
            .schedule
            .phases()
            .iter()
            .map(|p| Phase {
                rate_bps: scale(p.rate_bps),
                ..p.clone()
            })
            .collect();
        // Scaling a valid schedule's rates (kept ≥ 1) leaves it valid.
        if let Ok(schedule) = Schedule::new(phases) {
            s.schedule = schedule;
        }
        for f in &mut s.flows {
            if f.rate.rate_bps > 0 {
                f.rate.rate_bps = scale(f.rate.rate_bps);
            }
            f.rate.min_rate_bps = (f.rate.min_rate_bps as f64 * factor).round() as u64;
            if f.bytes > 0 {
                f.bytes = scale(f.bytes);
            }
        }
        s
    }

    /// Parse and validate a scenario from TOML text.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| TomlText::new(text).line(s));
            ScenarioError {
                line,
                key: None,
                message: e.message().trim().to_owned(),
            }
        })?;
        let c = TomlText::new(text);
        let duration_s = c.num(&raw.duration_s, "duration_s", 0.001, MAX_DURATION_S, " s")?;
        let seed = match &raw.seed {
            None => 1,
            Some(s) => u64::try_from(*s.get_ref())
                .map_err(|_| c.err(s, "seed", "must be a non-negative integer".into()))?,
        };
        let schedule = raw.path.schedule(&c, duration_s)?;
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
        let utc_start_s = c.opt(
            &raw.utc_start_s,
            "utc_start_s",
            0.0,
            MAX_UTC_START_S,
            " s",
            UTC_START_S,
        )?;
        Ok(Scenario {
            name: raw.name.unwrap_or_default(),
            seed,
            duration: Duration::from_secs_f64(duration_s),
            schedule,
            flows,
            fairness_from,
        }
        .with_utc_start(Duration::from_secs_f64(utc_start_s)))
    }

    /// The same scenario with its clock starting at `utc` past the Unix epoch (`utc_start_s`).
    /// Every flow reads the simulation's one clock, so each flow's `RateConfig::epoch_utc_ns`
    /// (where its drain grid lies) is that start: the flows hold the only copy.
    pub fn with_utc_start(mut self, utc: Duration) -> Scenario {
        let ns = u64::try_from(utc.as_nanos()).unwrap_or(u64::MAX);
        for f in &mut self.flows {
            f.rate.epoch_utc_ns = ns;
        }
        self
    }
}

trait FlowSpecs {
    fn flow(&self, f: &RawFlow, duration_s: f64) -> Result<FlowSpec, ScenarioError>;
}

impl FlowSpecs for TomlText<'_> {
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
        let compete = match &f.compete {
            None => false,
            Some(c) if matches!(policy, Policy::Fair | Policy::High) => *c.get_ref(),
            Some(c) => {
                return Err(self.err(
                    c,
                    "compete",
                    format!(
                        "applies to the fair and high policies only (this flow's is {:?})",
                        policy.name()
                    ),
                ))
            }
        };
        let protocol = match &f.protocol {
            None => Protocol::Spate,
            Some(p) => Protocol::parse(p.get_ref()).ok_or_else(|| {
                let names: Vec<_> = Protocol::ALL.iter().map(|p| p.name()).collect();
                self.err(
                    p,
                    "protocol",
                    format!(
                        "unknown protocol {:?}; choose one of {}",
                        p.get_ref(),
                        names.join(", ")
                    ),
                )
            })?,
        };
        let fec = match &f.fec {
            None => Fec::Auto,
            Some(v) => {
                let text = match v.get_ref() {
                    FecValue::Name(n) => n.clone(),
                    FecValue::Rate(r) => r.to_string(),
                };
                Fec::parse(&text).map_err(|e| self.err(v, "fec", e))?
            }
        };
        let batch = match &f.batch {
            None => 1,
            Some(b) => usize::try_from(*b.get_ref())
                .ok()
                .filter(|n| (1..=MAX_BATCH).contains(n))
                .ok_or_else(|| {
                    self.err(
                        b,
                        "batch",
                        format!("must be between 1 and {MAX_BATCH} datagrams"),
                    )
                })?,
        };
        Ok(FlowSpec {
            protocol,
            fec,
            batch,
            start: Duration::from_secs_f64(start),
            bytes,
            rate: RateConfig {
                policy,
                rate_bps: bps(rate),
                min_rate_bps: bps(min_rate),
                queue_target_bytes,
                compete,
                // Set with the scenario's `utc_start_s` (`Scenario::with_utc_start`).
                epoch_utc_ns: 0,
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
        assert_eq!(
            s.flows[0].rate,
            RateConfig {
                epoch_utc_ns: 500_000_000,
                ..RateConfig::fixed(90_000_000)
            }
        );
    }

    #[test]
    fn the_clock_start_places_every_flows_grid() {
        let s = Scenario::parse(&format!("utc_start_s = 3.25\n{GOOD}")).unwrap();
        assert!(s.flows.iter().all(|f| f.rate.epoch_utc_ns == 3_250_000_000));
        let s = s.with_utc_start(Duration::from_secs(7));
        assert!(s.flows.iter().all(|f| f.rate.epoch_utc_ns == 7_000_000_000));
        let e = Scenario::parse(&format!("utc_start_s = -1.0\n{GOOD}")).unwrap_err();
        assert!(e.to_string().contains("utc_start_s"), "{e}");
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

    #[test]
    fn batch_is_one_datagram_unless_set_and_at_most_the_drivers() {
        assert_eq!(Scenario::parse(GOOD).unwrap().flows[0].batch, 1);
        let with = |n: &str| {
            GOOD.replace(
                "policy = \"fixed\"",
                &format!("policy = \"fixed\"\nbatch = {n}"),
            )
        };
        assert_eq!(Scenario::parse(&with("44")).unwrap().flows[0].batch, 44);
        for bad in ["0", "45", "-1"] {
            assert_eq!(
                err(&with(bad)),
                "line 23: batch: must be between 1 and 44 datagrams",
                "{bad}"
            );
        }
    }

    #[test]
    fn stalls_need_both_keys_and_room_between_them() {
        let with = |keys: &str| GOOD.replace("loss = 0.0006\nqueue", &format!("{keys}\nqueue"));
        let s = Scenario::parse(&with("stall_ms = 20.0\nstall_every_ms = 500.0")).unwrap();
        let p = &s.schedule.phases()[1];
        assert_eq!(
            (p.stall, p.stall_every),
            (Duration::from_millis(20), Duration::from_millis(500))
        );
        assert_eq!(
            err(&with("stall_ms = 20.0")),
            "line 16: stall_ms: needs stall_every_ms > 0 (the mean time between stalls)"
        );
        assert!(err(&with("stall_ms = 20.0\nstall_every_ms = 30.0"))
            .starts_with("line 17: stall_every_ms: must be at least twice stall_ms (20 ms)"));
        // Scaling keeps times: stalls are delays, not rates.
        let tenth = Scenario::parse(&with("stall_ms = 20.0\nstall_every_ms = 500.0"))
            .unwrap()
            .scaled(0.1);
        assert_eq!(tenth.schedule.phases()[1].stall, Duration::from_millis(20));
    }

    #[test]
    fn protocol_and_scale() {
        let s = Scenario::parse(&GOOD.replace(
            "policy = \"fixed\"",
            "protocol = \"cubic\"\npolicy = \"fixed\"",
        ))
        .unwrap();
        assert_eq!(s.flows[0].protocol, Protocol::Cubic);
        assert!(err(&GOOD.replace(
            "policy = \"fixed\"",
            "protocol = \"tcp\"\npolicy = \"fixed\""
        ))
        .contains("unknown protocol \"tcp\"; choose one of spate, cubic, bbr, reno, gridftp, gridftp-bbr, udt"));
        let tenth = Scenario::parse(GOOD).unwrap().scaled(0.1);
        let p = tenth.schedule.phases();
        assert_eq!((p[0].rate_bps, p[1].rate_bps), (10_000_000, 1_000_000_000));
        assert_eq!(p[1].rtt, Duration::from_millis(74));
        assert_eq!(tenth.flows[0].rate.rate_bps, 9_000_000);
        let udt = Scenario::parse(&GOOD.replace(
            "policy = \"fixed\"",
            "protocol = \"udt\"\npolicy = \"fixed\"",
        ))
        .unwrap();
        let err = crate::run(&udt, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("runs only in the real-time emulator"), "{err}");
    }
}
