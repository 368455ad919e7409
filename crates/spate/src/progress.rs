//! The progress display of `spate send` and `spate demo`: bytes, percentage, rate, ETA,
//! retransmission share and RTT, and for trees the files done out of all and the file being
//! sent, on stderr (indicatif hides it when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use spate_proto::Sender;

use crate::rate::format_rate;

/// A progress bar over the bytes of a transfer.
pub struct Progress {
    bar: ProgressBar,
    /// Entry names, for trees (more than one entry).
    names: Vec<String>,
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
        if r.total > 0 && self.bar.length() != Some(r.total) {
            self.bar.set_length(r.total);
        }
        self.bar.set_position(r.bytes);
        let secs = self.bar.elapsed().as_secs_f64().max(1e-3);
        self.bar.set_message(format!(
            "{:>12}  {} entries",
            format_rate(r.bytes as f64 * 8.0 / secs),
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
