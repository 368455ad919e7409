//! `spate-lab calib-end`: the two ends of `spate-lab calibrate`'s probes, run inside the test
//! bed's namespaces (or Rattan's).
//!
//! The sender paces numbered probes of [`PROBE`] bytes, each stamped with the
//! `CLOCK_MONOTONIC` time it was sent; the receiver prints, as JSON, how many arrived, their
//! one-way delays, and their IP-level rate over the steady part of the run.
//!
//! Both ends share the machine's two cores with the emulator they measure, and at 1 Gbit/s
//! (86 000 probes a second) one system call and one wake-up per probe took more than half a
//! core each, enough to hold the emulator up by tens of milliseconds. So they batch:
//!
//! * the sender hands every probe due at once to the kernel in one call (UDP GSO through
//!   [`spate::udp::Socket`]: the kernel cuts the datagrams, so the emulator still sees one
//!   1500-byte packet per probe);
//! * the receiver reads what has arrived with `recvmmsg` once every [`NAP`], instead of being
//!   woken per probe, and times each probe by the kernel's receive timestamp
//!   (`SO_TIMESTAMPNS`, taken when the emulator's write hands the packet to the receiving
//!   namespace), not by when it got round to reading it. That stamp is wall-clock time; the
//!   receiver converts it to `CLOCK_MONOTONIC` with the two clocks' offset read at each batch.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;
use spate::udp::{RecvBatch, Socket};

/// Probe size: UDP payload of a 1500-byte IP packet.
pub const PROBE: usize = 1472;
/// How often the sender wakes to send what is due: at 1 Gbit/s about 4 probes a time, a burst
/// of 50 µs at the path's rate — below the added-delay tolerance (1 ms) by far.
const SEND_EVERY: Duration = Duration::from_micros(50);
/// How long the receiver sleeps between reads: 1 ms of probes at 1 Gbit/s is 86 of them,
/// 0.2 MiB, against a 32 MiB socket buffer.
const NAP: Duration = Duration::from_millis(1);
/// Receive batches read per wake-up at most (16 datagrams each): 4 096 probes, 48 ms at
/// 1 Gbit/s, so a sender faster than the receiver cannot keep it from checking its deadline.
const DRAIN_BATCHES: usize = 256;
/// The receiver stops this long after the last probe.
const QUIET: Duration = Duration::from_secs(1);
/// ... or this long after it started, whatever happens.
const RECV_LIMIT: Duration = Duration::from_secs(700);
/// The steady part of a run starts this long after the first probe arrived.
const STEADY_AFTER_NS: u64 = 500_000_000;

/// The probe ends (run inside the namespaces by `calibrate`).
#[derive(Args)]
pub struct CalibEndArgs {
    #[command(subcommand)]
    end: CalibEnd,
}

#[derive(clap::Subcommand)]
enum CalibEnd {
    /// Send paced probes.
    Send {
        #[arg(long)]
        to: SocketAddr,
        /// IP-level rate, bits/s.
        #[arg(long)]
        rate: u64,
        #[arg(long)]
        seconds: f64,
    },
    /// Receive probes until 1 s after the last.
    Recv {
        #[arg(long)]
        listen: SocketAddr,
    },
}

/// `CLOCK_MONOTONIC` in nanoseconds: shared by all network namespaces of the machine.
fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn run_end(a: CalibEndArgs) -> Result<()> {
    match a.end {
        CalibEnd::Send { to, rate, seconds } => send(to, rate, seconds),
        CalibEnd::Recv { listen } => recv(listen),
    }
}

/// Send probes to `to` at `rate` IP bits/s for `seconds`; print how many.
fn send(to: SocketAddr, rate: u64, seconds: f64) -> Result<()> {
    super::forward::precise_timers();
    let sock = Socket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0).into())
        .context("cannot open the probe socket")?;
    let batch = sock.max_batch(PROBE);
    let mut buf = vec![0u8; batch * PROBE];
    let per_packet = ((PROBE + 28) * 8) as f64;
    let start = Instant::now();
    let mut sent = 0u64;
    'run: while start.elapsed().as_secs_f64() < seconds {
        let due = (start.elapsed().as_secs_f64() * rate as f64 / per_packet) as u64;
        while sent < due {
            let k = (due - sent).min(batch as u64) as usize;
            let now = mono_ns();
            for (i, p) in buf.chunks_mut(PROBE).take(k).enumerate() {
                p[..8].copy_from_slice(&(sent + i as u64).to_be_bytes());
                p[8..16].copy_from_slice(&now.to_be_bytes());
            }
            // A full socket buffer: wait for room and send the same probes (the old blocking
            // socket did the same), until the run is over.
            while !sock.send(to, &buf[..k * PROBE], PROBE)? {
                if start.elapsed().as_secs_f64() >= seconds {
                    break 'run;
                }
                sock.wait_writable(Duration::from_millis(1))?;
            }
            sent += k as u64;
        }
        std::thread::sleep(SEND_EVERY);
    }
    println!("{}", json!({ "sent": sent }));
    Ok(())
}

/// What the receiver has seen so far.
#[derive(Default)]
struct Tally {
    received: u64,
    /// Arrival of the first and the last probe, `CLOCK_MONOTONIC` ns.
    first: Option<u64>,
    last: u64,
    /// IP bytes that arrived from [`STEADY_AFTER_NS`] after the first, and when the first of
    /// them did.
    steady_bytes: u64,
    steady_from: Option<u64>,
    /// One-way delay of every probe, ns.
    owd: Vec<u64>,
}

impl Tally {
    fn add(&mut self, at: u64, probe: &[u8]) {
        // Bytes 0..8 are the sequence number, 8..16 the send time.
        let Some(stamp) = probe.get(8..16) else {
            return;
        };
        let sent_at = u64::from_be_bytes(stamp.try_into().unwrap_or([0; 8]));
        self.owd.push(at.saturating_sub(sent_at));
        self.received += 1;
        let first = *self.first.get_or_insert(at);
        self.last = self.last.max(at);
        if at >= first + STEADY_AFTER_NS {
            self.steady_from = Some(self.steady_from.map_or(at, |s| s.min(at)));
            self.steady_bytes += (probe.len() + 28) as u64;
        }
    }

    fn report(mut self) -> serde_json::Value {
        self.owd.sort_unstable();
        let ms = |ns: Option<&u64>| ns.copied().unwrap_or(0) as f64 / 1e6;
        let steady_s = self
            .steady_from
            .map_or(0.0, |s| self.last.saturating_sub(s) as f64 / 1e9);
        json!({
            "received": self.received,
            "owd_p50_ms": ms(self.owd.get(self.owd.len() / 2)),
            "owd_min_ms": ms(self.owd.first()),
            "steady_ip_bps": if steady_s > 0.0 { self.steady_bytes as f64 * 8.0 / steady_s } else { 0.0 },
        })
    }
}

/// Receive probes on `listen` until [`QUIET`] after the last; print what arrived.
fn recv(listen: SocketAddr) -> Result<()> {
    // spate's socket asks for (and as root forces) a 32 MiB receive buffer, so the receiver
    // itself does not drop at 1 Gbit/s while it naps.
    let sock = Socket::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    let mut batch = RecvBatch::default();
    let mut tally = Tally::default();
    let started = Instant::now();
    loop {
        let readable = sock.wait(Duration::from_millis(200), false)?;
        let mut more = false;
        if readable {
            // Kernel stamps are wall-clock time; this batch's offset to the monotonic clock.
            let offset = clock_ns(libc::CLOCK_REALTIME).wrapping_sub(mono_ns());
            more = sock.recv_bounded(&mut batch, DRAIN_BATCHES, |b| {
                b.for_each_stamped(|_, stamp, d| {
                    let at =
                        stamp.map_or_else(mono_ns, |t| (t.as_nanos() as u64).wrapping_sub(offset));
                    tally.add(at, d);
                });
                ControlFlow::Continue(())
            })?;
        }
        let quiet = tally.first.is_some() && mono_ns() > tally.last + QUIET.as_nanos() as u64;
        if quiet || started.elapsed() > RECV_LIMIT {
            break;
        }
        if readable && !more {
            std::thread::sleep(NAP);
        }
    }
    println!("{}", tally.report());
    Ok(())
}
