//! The progress display of `spate send` and `spate demo`: bytes, percentage, rate, ETA,
//! retransmission share and RTT, on stderr (indicatif hides it when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use spate_proto::Sender;

use crate::rate::format_rate;

/// A progress bar over the bytes of a transfer.
pub struct Progress {
    bar: ProgressBar,
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
        Progress { bar }
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
        self.bar.set_message(format!(
            "{:>12} (pacing {})  retx {retx:.1}%  RTT {:.0} ms",
            format_rate(st.delivered_bytes as f64 * 8.0 / elapsed),
            format_rate(s.pacing_rate() as f64),
            s.rtt().smoothed().as_secs_f64() * 1e3
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
