//! The final statistics of `spate send` / `spate demo`, for humans and as JSON (`--json`;
//! field names as in the lab's reports where they mean the same thing).

use serde::Serialize;

use crate::rate::format_rate;
use crate::send::SendResult;

/// Final statistics of one transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Files and directories sent.
    pub entries: usize,
    /// File bytes delivered.
    pub bytes_delivered: u64,
    /// File bytes the receiver already held from an interrupted transfer (`--resume`): not sent.
    pub bytes_resumed: u64,
    /// Seconds from the first packet to the end.
    pub duration_s: f64,
    /// File bytes per second, as Mbit/s.
    pub goodput_mbps: f64,
    /// DATA packets sent.
    pub data_packets_sent: u64,
    /// DATA packets that repeated earlier bytes.
    pub retransmitted_packets: u64,
    /// Retransmitted / data packets.
    pub retransmission_overhead: f64,
    /// Packets declared lost that had arrived after all.
    pub spurious_retransmissions: u64,
    /// REPAIR packets sent (coding, `--fec`): each can rebuild any one lost packet of its
    /// block at the receiver without a round trip.
    pub repair_packets: u64,
    /// Coded blocks the receiver reported rebuilt from them.
    pub rebuilt_blocks: u64,
    /// (Retransmitted + repair bytes) / file bytes sent: what went beyond each byte once.
    pub overshoot: f64,
    /// Smoothed RTT at the end, ms.
    pub srtt_ms: f64,
    /// Smallest RTT seen, ms.
    pub min_rtt_ms: f64,
    /// Seconds from the start of `spate` to the first file byte sent (scan, keys, handshake
    /// and the first read included): the sender streams each file's digest after its bytes,
    /// so this does not grow with file size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_data_s: Option<f64>,
    /// Bytes read from the files for sending: each byte once (with `--resume`, the files
    /// were also read once before, to put their digests in the manifest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_bytes_read: Option<u64>,
    /// Seconds new data waited for the receiver's disk (its Write Limit, spec §7.4).
    pub receiver_disk_wait_s: f64,
    /// Seconds new data waited for this side's disk (the reader).
    pub source_disk_wait_s: f64,
    /// Seconds the rate controller competed with buffer-filling traffic on its terms
    /// (`--compete`; 0 without it).
    pub competing_s: f64,
    /// Of those, seconds it followed BBR's law (it recognised BBR on the path).
    pub following_bbr_s: f64,
    /// Every file's BLAKE3 digest was checked by the receiver before it was put in place.
    pub verified: bool,
    /// The packet cipher (spec §9.4).
    pub cipher: &'static str,
    /// Fingerprint of the server's key, proven in the handshake.
    pub server_key: String,
    /// Packets that did not open under the session's keys (forged, altered) or were replays:
    /// dropped, never acted on.
    pub dropped_unauthentic: u64,
}

impl Report {
    /// From a finished send of `entries` entries.
    pub fn new(entries: usize, r: &SendResult) -> Report {
        let s = r.stats;
        Report {
            entries,
            bytes_delivered: s.delivered_bytes,
            bytes_resumed: s.resumed_bytes,
            duration_s: r.seconds,
            goodput_mbps: s.delivered_bytes as f64 * 8.0 / r.seconds.max(1e-9) / 1e6,
            data_packets_sent: s.data_packets_sent,
            retransmitted_packets: s.retransmitted_packets,
            retransmission_overhead: s.retransmitted_packets as f64
                / s.data_packets_sent.max(1) as f64,
            spurious_retransmissions: s.spurious_losses,
            repair_packets: r.coding.repair_packets,
            rebuilt_blocks: r.coding.rebuilt_blocks,
            overshoot: (s.retransmitted_bytes + r.coding.repair_bytes) as f64
                / s.new_bytes_sent.max(1) as f64,
            srtt_ms: r.srtt.as_secs_f64() * 1e3,
            min_rtt_ms: r.min_rtt.as_secs_f64() * 1e3,
            first_data_s: r.first_data_s,
            file_bytes_read: r.file_bytes_read,
            receiver_disk_wait_s: s.write_limit_us as f64 / 1e6,
            source_disk_wait_s: s.source_wait_us as f64 / 1e6,
            competing_s: s.competing_us as f64 / 1e6,
            following_bbr_s: s.following_bbr_us as f64 / 1e6,
            verified: true,
            cipher: r.cipher.name(),
            server_key: r.server_key.fingerprint(),
            dropped_unauthentic: r.dropped_not_authentic + r.dropped_replayed,
        }
    }

    /// One line for humans.
    pub fn summary(&self) -> String {
        let resumed = if self.bytes_resumed > 0 {
            format!(" (+ {} already there)", human_bytes(self.bytes_resumed))
        } else {
            String::new()
        };
        format!(
            "{} entries, {}{resumed} in {:.1} s: {} goodput, {:.2} % retransmitted, RTT {:.0} ms (min {:.0}){}; every file verified (BLAKE3)",
            self.entries,
            human_bytes(self.bytes_delivered),
            self.duration_s,
            format_rate(self.goodput_mbps * 1e6),
            100.0 * self.retransmission_overhead,
            self.srtt_ms,
            self.min_rtt_ms,
            competed(self.competing_s, self.following_bbr_s),
        )
    }
}

/// `, competed with TCP for 23 s (following BBR 20 s)`, or nothing: how long `--compete`
/// acted, in whole seconds.
fn competed(competing_s: f64, following_bbr_s: f64) -> String {
    if competing_s < 0.5 {
        return String::new();
    }
    let bbr = if following_bbr_s >= 0.5 {
        format!(" (following BBR {following_bbr_s:.0} s)")
    } else {
        String::new()
    };
    format!(", competed with TCP for {competing_s:.0} s{bbr}")
}

/// Text a peer chose (a path, a CLOSE reason), made safe to print: control characters — a
/// newline that would forge a log line, an ANSI escape that would repaint the terminal — are
/// shown as `\u{..}` escapes; everything else is kept as it is.
pub fn escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Bytes for humans, in binary units: `1.50 GiB`, `200 MiB`, `12 KiB`, `7 B`.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", units[i])
    }
}

#[cfg(test)]
mod tests {
    /// Issue 14, finding 9: a peer's newline or ANSI escape cannot forge a log line.
    #[test]
    fn peer_text_is_escaped() {
        let forged = "ok\n127.0.0.1 session 00000000: 1 entries\x1b[2J";
        let shown = super::escape(forged);
        assert!(!shown.contains('\n') && !shown.contains('\x1b'), "{shown}");
        assert_eq!(super::escape("été/ä.txt"), "été/ä.txt");
    }

    #[test]
    fn the_summary_says_how_long_the_flow_competed() {
        assert_eq!(super::competed(0.0, 0.0), "");
        assert_eq!(super::competed(0.4, 0.0), "");
        assert_eq!(super::competed(23.4, 0.0), ", competed with TCP for 23 s");
        assert_eq!(
            super::competed(23.4, 19.6),
            ", competed with TCP for 23 s (following BBR 20 s)"
        );
    }
}
