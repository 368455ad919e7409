//! The progress display of `spate send` and `spate demo`: bytes, percentage, rate, ETA,
//! retransmission share and RTT, and for trees the files done out of all and the file being
//! sent, on stderr (indicatif hides it when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use spate_proto::Sender;

use crate::rate::format_rate;

/// What held the sender back, when it was not the network: the share of the time since the
/// last sample that new data waited for the receiver's disk (its Write Limit, spec §7.4) or
/// for this side's disk (the reader), from the sender's counters; or, resuming, that the
/// receiver has not yet said what it holds (it reads and hashes its partial files first,
/// which takes a while for large ones).
#[derive(Debug, Default)]
pub struct Holdups {
    last: Option<(std::time::Instant, u64, u64)>,
}

impl Holdups {
    /// `("receiver_disk" | "source_disk", share of the time)` since the last call, when that
    /// share is at least a quarter; `("receiver_check", 1.0)` while a resuming receiver has
    /// not yet said what it holds.
    pub fn sample(&mut self, s: &Sender) -> Option<(&'static str, f64)> {
        let st = s.stats();
        let now = std::time::Instant::now();
        let last = self
            .last
            .replace((now, st.write_limit_us, st.source_wait_us));
        if s.awaiting_have() {
            return Some(("receiver_check", 1.0));
        }
        let (t0, w0, r0) = last?;
        let span = now.duration_since(t0).as_micros().max(1) as f64;
        let write = (st.write_limit_us - w0) as f64 / span;
        let read = (st.source_wait_us - r0) as f64 / span;
        let (what, share) = if write >= read {
            ("receiver_disk", write)
        } else {
            ("source_disk", read)
        };
        (share >= 0.25).then_some((what, share.min(1.0)))
    }
}

/// A progress bar over the bytes of a transfer.
pub struct Progress {
    bar: ProgressBar,
    /// Entry names, for trees (more than one entry).
    names: Vec<String>,
    holdups: std::cell::RefCell<Holdups>,
}

impl Progress {
    /// A bar for `total` bytes; hidden if `quiet`.
    pub fn new(total: u64, quiet: bool) -> Progress {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30.cyan/blue} {bytes:>10}/{total_bytes} {percent:>3}%  {msg}  ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        Progress {
            bar,
            names: Vec::new(),
            holdups: Default::default(),
        }
    }

    /// Also show files done out of all and the one being sent (`names`: the manifest's
    /// entries in order); only for more than one entry.
    pub fn with_files(mut self, names: Vec<String>) -> Progress {
        if names.len() > 1 {
            self.names = names;
        }
        self
    }

    /// Show the sender's state.
    pub fn update(&self, s: &Sender) {
        let st = s.stats();
        self.bar.set_position(st.delivered_bytes + st.resumed_bytes);
        let retx = if st.data_packets_sent > 0 {
            100.0 * st.retransmitted_packets as f64 / st.data_packets_sent as f64
        } else {
            0.0
        };
        let elapsed = self.bar.elapsed().as_secs_f64().max(1e-3);
        let mut msg = format!(
            "{:>12} (pacing {})  retx {retx:.1}%  RTT {:.0} ms",
            format_rate(st.delivered_bytes as f64 * 8.0 / elapsed),
            format_rate(s.pacing_rate() as f64),
            s.rtt().smoothed().as_secs_f64() * 1e3
        );
        // `--compete` acting: the rate is the competitive mode's, not the delay mode's.
        match s.rate_mode() {
            spate_proto::RateMode::Competitive => msg.push_str("  competing with TCP"),
            spate_proto::RateMode::FollowingBbr => msg.push_str("  competing with BBR"),
            spate_proto::RateMode::Fixed | spate_proto::RateMode::Delay => {}
        }
        match self.holdups.borrow_mut().sample(s) {
            Some(("receiver_check", _)) => {
                msg = format!(
                    "{msg}  (resuming: the receiver is checking the partial files it holds)"
                );
            }
            Some((what, share)) => {
                let what = what.replace("_disk", "'s disk");
                msg = format!(
                    "{msg}  (waiting for the {what} {:.0} % of the time)",
                    share * 100.0
                );
            }
            None => {}
        }
        if !self.names.is_empty() {
            let (done, total) = s.entries_delivered();
            let current = s.sending_object() as usize;
            let name = current
                .checked_sub(1)
                .and_then(|i| self.names.get(i))
                .map_or("", String::as_str);
            msg = format!("files {done}/{total}  {msg}  {}", tail(name, 32));
        }
        self.bar.set_message(msg);
    }

    /// Show what a receiving end holds (a download): bytes of the total, once it is known.
    pub fn received(&self, r: &crate::serve::Received) {
        if r.sessions == 0 {
            return;
        }
        if r.total > 0 && self.bar.length() != Some(r.total) {
            self.bar.set_length(r.total);
        }
        self.bar.set_position(r.bytes);
        let secs = self.bar.elapsed().as_secs_f64().max(1e-3);
        self.bar.set_message(format!(
            "{:>12}  files {}/{}",
            format_rate(r.bytes as f64 * 8.0 / secs),
            r.placed,
            r.entries
        ));
    }

    /// Show a position and a message (for phases before the transfer, such as hashing).
    pub fn set(&self, pos: u64, msg: &str) {
        self.bar.set_position(pos);
        self.bar.set_message(msg.to_owned());
    }

    /// Remove the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The last `n` characters of `s`, marked with `…` when cut.
fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_owned();
    }
    let rest: String = s.chars().skip(count - n + 1).collect();
    format!("…{rest}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_names_keep_their_end() {
        assert_eq!(super::tail("photos/a.jpg", 32), "photos/a.jpg");
        assert_eq!(super::tail("abcdef", 4), "…def");
    }
}
