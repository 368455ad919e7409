//! `spate-lab calib-end`: the two ends of `spate-lab calibrate`'s probes, run inside the test
//! bed's namespaces (or Rattan's).
//!
//! The sender paces numbered probes of [`PROBE`] bytes, each stamped with the
//! `CLOCK_MONOTONIC` time it was sent; the receiver prints, as JSON, how many arrived, their
//! one-way delays, and their rate over the steady part of the run.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use serde_json::json;

/// Probe size: UDP payload of a 1500-byte IP packet.
pub const PROBE: usize = 1472;

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
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn run_end(a: CalibEndArgs) -> Result<()> {
    match a.end {
        CalibEnd::Send { to, rate, seconds } => {
            super::forward::precise_timers();
            let sock = UdpSocket::bind("0.0.0.0:0")?;
            let mut buf = [0u8; PROBE];
            let per_packet = ((PROBE + 28) * 8) as f64;
            let start = Instant::now();
            let mut sent = 0u64;
            let mut refused = 0u64;
            while start.elapsed().as_secs_f64() < seconds {
                let due = (start.elapsed().as_secs_f64() * rate as f64 / per_packet) as u64;
                while sent < due {
                    buf[..8].copy_from_slice(&sent.to_be_bytes());
                    buf[8..16].copy_from_slice(&mono_ns().to_be_bytes());
                    if sock.send_to(&buf, to).is_err() {
                        refused += 1;
                    }
                    sent += 1;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            println!("{}", json!({ "sent": sent, "send_errors": refused }));
        }
        CalibEnd::Recv { listen } => {
            let sock = UdpSocket::bind(listen)?;
            // A deep receive buffer, so the probe receiver itself does not drop at 1 Gbit/s.
            let size: libc::c_int = 32 << 20;
            // SAFETY: setsockopt reads one int from a valid pointer; the fd is open.
            unsafe {
                libc::setsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&sock),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUFFORCE,
                    (&size as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            sock.set_read_timeout(Some(Duration::from_millis(200)))?;
            let mut buf = [0u8; 2048];
            let (mut n, mut first, mut last) = (0u64, None::<u64>, 0u64);
            let (mut steady_bytes, mut steady_from) = (0u64, None::<u64>);
            let mut owd: Vec<u64> = Vec::new();
            let started = Instant::now();
            loop {
                match sock.recv_from(&mut buf) {
                    Ok((len, _)) if len >= 16 => {
                        let now = mono_ns();
                        let sent_at = u64::from_be_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
                        owd.push(now.saturating_sub(sent_at));
                        n += 1;
                        let f = *first.get_or_insert(now);
                        last = now;
                        if now >= f + 500_000_000 {
                            steady_from.get_or_insert(now);
                            steady_bytes += (len + 28) as u64;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => {
                        let quiet = first.is_some() && mono_ns() > last + 1_000_000_000;
                        if quiet || started.elapsed() > Duration::from_secs(700) {
                            break;
                        }
                    }
                }
            }
            owd.sort_unstable();
            let p50 = owd.get(owd.len() / 2).copied().unwrap_or(0) as f64 / 1e6;
            let min = owd.first().copied().unwrap_or(0) as f64 / 1e6;
            let steady_s = steady_from.map_or(0.0, |s| (last.saturating_sub(s)) as f64 / 1e9);
            println!(
                "{}",
                json!({
                    "received": n,
                    "owd_p50_ms": p50,
                    "owd_min_ms": min,
                    "steady_ip_bps": if steady_s > 0.0 { steady_bytes as f64 * 8.0 / steady_s } else { 0.0 },
                })
            );
        }
    }
    Ok(())
}
