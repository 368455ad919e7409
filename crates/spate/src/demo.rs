//! `spate demo`: a receiver, an impaired link and a sender in one process, over loopback, with
//! no privileges: the quickest way to see Spate on a long, lossy path.
//!
//! A file of pseudo-random bytes is generated in a temporary directory, sent through a
//! [`relay`](crate::relay) that emulates the path (default 200 Mbit/s, 100 ms RTT, 1 % loss
//! each way, a BDP of buffer), received into another temporary directory, verified, and
//! compared byte for byte with the original.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use spate_proto::RateConfig;

use crate::confine::Root;
use crate::progress::Progress;
use crate::rate::format_rate;
use crate::relay::{PathConfig, Relay};
use crate::report::{human_bytes, Report};
use crate::scan;
use crate::send::{send, SendConfig};
use crate::serve::Server;

/// What the demo does.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Bytes of the generated file.
    pub size: u64,
    /// The emulated path.
    pub path: PathConfig,
    /// Rate settings of the sender.
    pub rate: RateConfig,
    /// Coding (spec §6.9).
    pub fec: spate_proto::coding::Fec,
    /// No progress bar.
    pub quiet: bool,
}

/// The demo's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    /// The transfer.
    #[serde(flatten)]
    pub transfer: Report,
    /// Emulated capacity, Mbit/s.
    pub capacity_mbps: f64,
    /// Emulated RTT, ms.
    pub rtt_ms: f64,
    /// Emulated loss, each direction.
    pub loss: f64,
    /// Goodput over the payload share of capacity (1448 of every 1500 bytes).
    pub utilization: f64,
    /// Packets the relay dropped at random, towards the receiver.
    pub random_drops: u64,
    /// Packets the relay's queue dropped, towards the receiver.
    pub queue_drops: u64,
    /// What TCP Reno would reach on this path by the Mathis formula, Mbit/s.
    pub tcp_reno_estimate_mbps: f64,
    /// The received file equals the sent one, byte for byte.
    pub identical: bool,
}

/// Run the demo in a fresh temporary directory under `work` (the system's temp dir if `None`).
pub fn run(cfg: &DemoConfig) -> Result<DemoReport> {
    let base = std::env::temp_dir().join(format!("spate-demo-{}", std::process::id()));
    let _cleanup = Cleanup(base.clone());
    let (src_dir, dst_dir) = (base.join("send"), base.join("receive"));
    std::fs::create_dir_all(&src_dir)?;
    std::fs::create_dir_all(&dst_dir)?;
    let file = src_dir.join("demo.bin");
    generate(&file, cfg.size).with_context(|| format!("cannot write {}", file.display()))?;

    // Encrypted like any transfer (spec §9): fresh keys for both ends, nothing written to the
    // user's key files.
    let (identity, access, security) = crate::access::in_process(crate::pin::default_cipher())?;
    let mut server = Server::bind(
        "127.0.0.1:0".parse()?,
        Root::new(&dst_dir)?,
        identity,
        access,
    )?;
    let server_addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let server_thread = std::thread::spawn(move || server.run(&s, |_| {}));
    let relay = Relay::start(&cfg.path, server_addr)?;

    let mut plan = scan::plan(std::slice::from_ref(&file), "", false)?;
    plan.stream_digests();
    let bar = Progress::new(cfg.size, cfg.quiet);
    let sent = send(
        &plan,
        &SendConfig {
            resume: false,
            fec: cfg.fec,
            server: relay.addr(),
            rate: cfg.rate,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            security,
            sealers: 0,
        },
        |s| bar.update(s),
    );
    bar.finish();
    let relay_stats = relay.stop()?;
    stop.store(true, Ordering::Relaxed);
    let served = server_thread.join();
    let sent = sent?;
    if let Ok(Err(e)) = served {
        bail!("the demo's receiver failed: {e}");
    }
    // The receiver checked the digest the sender streamed; the demo checks again on its own,
    // comparing both files' digests.
    let (want, _) = scan::digest_file(&file, &mut |_| {})?;
    let (got, len) = scan::digest_file(&dst_dir.join("demo.bin"), &mut |_| {})?;
    let identical = got == want && len == plan.manifest.entries[0].size;
    if !identical {
        bail!("the received file differs from the sent one");
    }
    let transfer = Report::new(1, &sent);
    let capacity = cfg.path.rate_bps as f64 / 1e6;
    let rtt = cfg.path.rtt.as_secs_f64();
    // Mathis et al. (1997): rate ≈ MSS / RTT · 1.22 / √p.
    let reno = if cfg.path.loss > 0.0 && rtt > 0.0 {
        (1448.0 * 8.0 / rtt * 1.22 / cfg.path.loss.sqrt() / 1e6).min(capacity)
    } else {
        capacity
    };
    Ok(DemoReport {
        utilization: transfer.goodput_mbps / (capacity * 1448.0 / 1500.0),
        transfer,
        capacity_mbps: capacity,
        rtt_ms: rtt * 1e3,
        loss: cfg.path.loss,
        random_drops: relay_stats.forward.random_drops,
        queue_drops: relay_stats.forward.queue_drops,
        tcp_reno_estimate_mbps: reno,
        identical,
    })
}

impl DemoReport {
    /// The closing report for humans.
    pub fn text(&self) -> String {
        let t = &self.transfer;
        format!(
            "Spate demo: {} over an emulated {} path, {:.0} ms RTT, {:.1} % random loss each way\n\
             \n  goodput       {} ({:.0} % of the link's payload capacity)\n  \
             time          {:.1} s\n  \
             retransmitted {:.2} % of data packets ({} lost to random loss, {} to the queue)\n  \
             coding        {} repair packets, {} blocks rebuilt without a round trip (--fec)\n  \
             RTT           {:.0} ms smoothed, {:.0} ms minimum\n  \
             integrity     BLAKE3 verified by the receiver; received file identical: {}\n\
             \n  TCP Reno on this path: about {} (Mathis formula) — {:.0}× less.\n",
            human_bytes(t.bytes_delivered),
            format_rate(self.capacity_mbps * 1e6),
            self.rtt_ms,
            self.loss * 100.0,
            format_rate(t.goodput_mbps * 1e6),
            self.utilization * 100.0,
            t.duration_s,
            100.0 * t.retransmission_overhead,
            self.random_drops,
            self.queue_drops,
            t.repair_packets,
            t.rebuilt_blocks,
            t.srtt_ms,
            t.min_rtt_ms,
            if self.identical { "yes" } else { "NO" },
            format_rate(self.tcp_reno_estimate_mbps * 1e6),
            t.goodput_mbps / self.tcp_reno_estimate_mbps.max(1e-9),
        )
    }
}

struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `size` pseudo-random bytes (xorshift; incompressible, cheap).
fn generate(path: &std::path::Path, size: u64) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut noise = crate::noise::Noise::new(1);
    let mut block = vec![0u8; 1 << 16];
    let mut left = size;
    while left > 0 {
        noise.fill(&mut block);
        let n = left.min(block.len() as u64) as usize;
        w.write_all(&block[..n])?;
        left -= n as u64;
    }
    w.flush()
}
