//! What the machine did during a run: its CPUs' idle time and the time a hypervisor took.
//!
//! Everything in a run shares the machine's cores (`docs/lab.md`, "A busy host"), and a run
//! that a busy machine held up understates the tools it measured. Two numbers tell such a run
//! from a quiet one, read from the first line of `/proc/stat` (jiffies summed over all CPUs,
//! `man 5 proc`) before the emulation starts and after it ends:
//!
//! * **idle**: idle and iowait over all time. Near 0 %, the run took every core, and a late
//!   wake-up anywhere held something up.
//! * **steal**: time the hypervisor ran something else while this VM wanted a CPU: stalls no
//!   program here can avoid or see coming. The VM of session 49 showed 0.2 % idle, and
//!   1.9–5.2 % over 8 s runs at 100 Mbit/s that it did not hurt (two thirds of the machine
//!   idle); at 1 Gbit/s, which takes the whole machine, Spate moved 783–878 Mbit/s with
//!   0.8–2.5 % stolen and 606–709 with 3.1–6.6 % (eight runs of `emu/short.toml --scale 10`).
//!   So the numbers are given, not judged: what they cost depends on the run's headroom.
//!
//! Written by hand: it is one line of numbers, and the crates that read `/proc` bring far
//! more than that.

use serde::{Deserialize, Serialize};

/// Cumulative CPU time of the whole machine, in jiffies, as `/proc/stat` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Idle and iowait.
    idle: u64,
    /// Stolen by the hypervisor.
    steal: u64,
    /// Every field (user, nice, system, idle, iowait, irq, softirq, steal; guest time is
    /// already inside user and nice).
    total: u64,
}

impl CpuTimes {
    /// The machine's times now; `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The first line of `/proc/stat` text (`cpu  user nice system idle iowait irq softirq
    /// steal ...`). Never panics: anything odd is `None`.
    fn parse(text: &str) -> Option<CpuTimes> {
        let mut fields = text.lines().next()?.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = fields
            .take(8)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        if v.len() < 4 {
            return None;
        }
        Some(CpuTimes {
            idle: at(3).saturating_add(at(4)),
            steal: at(7),
            total: v.iter().fold(0u64, |a, &x| a.saturating_add(x)),
        })
    }
}

/// The machine over a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// CPUs online.
    pub cpus: usize,
    /// Share of all CPU time left idle, per cent.
    pub idle_pct: f64,
    /// Share taken by the hypervisor, per cent.
    pub steal_pct: f64,
}

impl HostLoad {
    /// The machine between two readings; `None` if no time passed or the counters went back.
    pub fn between(a: CpuTimes, b: CpuTimes) -> Option<HostLoad> {
        let total = b.total.checked_sub(a.total).filter(|&t| t > 0)? as f64;
        let pct = |x: u64, y: u64| Some(y.checked_sub(x)? as f64 * 100.0 / total);
        Some(HostLoad {
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            idle_pct: spate_sim::report::round(pct(a.idle, b.idle)?, 1),
            steal_pct: spate_sim::report::round(pct(a.steal, b.steal)?, 1),
        })
    }

    /// The machine from `before` until now.
    pub fn since(before: Option<CpuTimes>) -> Option<HostLoad> {
        HostLoad::between(before?, CpuTimes::now()?)
    }

    /// `2 CPUs, 12.5 % idle, 3.1 % taken by the hypervisor (steal)`.
    pub fn describe(&self) -> String {
        format!("{} CPUs, {} (steal)", self.cpus, self.brief())
    }

    /// `12.5 % idle, 3.1 % taken by the hypervisor`.
    pub fn brief(&self) -> String {
        format!(
            "{} % idle, {} % taken by the hypervisor",
            self.idle_pct, self.steal_pct
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_idle_and_steal_between_two_readings() {
        let a = CpuTimes::parse("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        let b = CpuTimes::parse("cpu  400 0 150 1100 50 0 10 40 0 0\n").unwrap();
        let h = HostLoad::between(a, b).unwrap();
        // 750 jiffies passed: 300 idle, 40 stolen.
        assert_eq!((h.idle_pct, h.steal_pct), (40.0, 5.3));
        assert!(h
            .describe()
            .contains("40 % idle, 5.3 % taken by the hypervisor"));
        // The counters cannot run backwards, or stand still.
        assert_eq!(HostLoad::between(b, a), None);
        assert_eq!(HostLoad::between(a, a), None);
    }

    #[test]
    fn odd_text_is_none_not_a_panic() {
        for text in [
            "",
            "cpu",
            "cpu 1 2 3",
            "intr 1 2 3 4 5",
            "cpu 1 2 x 4 5",
            "cpu -1 2 3 4",
        ] {
            assert_eq!(CpuTimes::parse(text), None, "{text:?}");
        }
        // Old kernels give fewer fields: no steal column is no steal.
        let old = CpuTimes::parse("cpu 1 2 3 4").unwrap();
        assert_eq!((old.idle, old.steal, old.total), (4, 0, 10));
        // This machine's own.
        assert!(CpuTimes::now().is_some());
    }
}
