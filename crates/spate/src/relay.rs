//! A user-space impaired link: a UDP relay that gives every datagram the fate
//! [`spate_netmodel::Link`] decides — bottleneck rate and drop-tail queue, propagation delay,
//! random loss — in real time. The kernel here has no `netem`, and the same model drives the
//! simulator, so a demo over the relay and a simulated scenario mean the same path.
//!
//! The relay forwards datagrams from its client (the first address that is not the server) to
//! the server through the forward link, and the server's answers back through the reverse
//! link. Datagrams wait in the path's delay line ([`Path`], in arrival order); their buffers
//! are reused.
//!
//! The loop alternates: read at most [`MAX_DRAIN`] batches, then deliver whatever is due (as
//! the lab's forwarder does, `spate-lab/src/emu/forward.rs`). Reading until the socket was
//! empty, the demo's relay (sender, receiver and relay in one process on 2 cores) delivered
//! nothing for up to 184 ms while a sender at start-up kept the socket full, then all of it at
//! once; the receiver measured 375 Mbit/s on a 200 Mbit/s link, the sender steered up to it,
//! and each default demo lost 580–5 000 packets to the queue (mean 2 440 over thirteen runs)
//! where the simulator and the namespace emulator lose none. Bounded: 0–835 over eight runs
//! (mean 477), 1.0–1.8 % retransmitted against 1.6–6.0 %, the same goodput (165–169 Mbit/s).
//! What is left is the 2 cores shared by five busy threads at start-up (the receiver still
//! saw gaps of 20–54 ms then).
//!
//! A datagram enters the link when the kernel received it (its `SO_TIMESTAMPNS` time), not
//! when this thread read it, so a datagram read one drain late, or after the thread was not
//! scheduled for a while, is not queued behind time the link spent idle; a late relay only
//! delivers late, as a late emulator does.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use spate_netmodel::{Direction, LinkStats, Path, Phase, Schedule};

use crate::clock::Clock;
use crate::udp::{RecvBatch, Socket};

/// The emulated path (both directions alike).
#[derive(Debug, Clone)]
pub struct PathConfig {
    /// Bottleneck rate, bits per second of IP packets.
    pub rate_bps: u64,
    /// Round-trip propagation delay.
    pub rtt: Duration,
    /// Random loss probability per packet, each direction.
    pub loss: f64,
    /// Drop-tail buffer as queueing time (a BDP is the usual choice).
    pub queue: Duration,
    /// Seed of the loss pattern.
    pub seed: u64,
}

/// What the relay did, per direction (forward = towards the server).
#[derive(Debug, Clone, Copy, Default)]
pub struct RelayStats {
    /// Client → server.
    pub forward: LinkStats,
    /// Server → client.
    pub reverse: LinkStats,
}

/// A running relay.
pub struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<RelayStats>>>,
}

impl Relay {
    /// Start relaying to `server` on a free loopback port.
    pub fn start(path: &PathConfig, server: SocketAddr) -> std::io::Result<Relay> {
        let socket = Socket::bind("127.0.0.1:0".parse().expect("literal"))?;
        let addr = socket.local_addr()?;
        let mut phase = Phase::clean(Duration::ZERO, path.rate_bps, path.rtt);
        phase.loss = path.loss;
        phase.queue = path.queue;
        let schedule = Schedule::new(vec![phase])
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        let model = Path::new(schedule, path.seed);
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("spate-relay".into())
            .spawn(move || run(&socket, server, model, &s))?;
        Ok(Relay {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where clients send.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop and return the counters.
    pub fn stop(mut self) -> std::io::Result<RelayStats> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => Err(std::io::Error::other("relay thread panicked")),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Receive batches read before the relay delivers what is due. A batch is up to 16 messages
/// (16 datagrams, or with GRO up to 16 × 64 KiB): 8 of them are at most 128 datagrams
/// without GRO, well under a millisecond of reading, so a sender that keeps the socket full
/// holds deliveries up by about that much and no more.
const MAX_DRAIN: usize = 8;

/// Longest a datagram counts as having waited in the relay's socket: the kernel's time is
/// the wall clock, which may be stepped while the relay runs; a step forward must not make
/// every datagram look seconds old. Real waits are milliseconds.
const MAX_WAIT: Duration = Duration::from_secs(1);

fn run(
    socket: &Socket,
    server: SocketAddr,
    mut path: Path<(Vec<u8>, usize)>,
    stop: &AtomicBool,
) -> std::io::Result<RelayStats> {
    let clock = Clock::new();
    let mut client: Option<SocketAddr> = None;
    let mut free: Vec<Vec<u8>> = Vec::new();
    let mut batch = RecvBatch::default();
    let mut last_arrival = clock.now();
    while !stop.load(Ordering::Relaxed) {
        socket.recv_bounded(&mut batch, MAX_DRAIN, |batch| {
            let now = clock.now();
            let wall = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .ok();
            batch.for_each_stamped(|from, received, d| {
                let dir = if from == server {
                    Direction::Reverse
                } else {
                    client = Some(from);
                    Direction::Forward
                };
                let waited = match (wall, received) {
                    (Some(w), Some(r)) => w.saturating_sub(r).min(MAX_WAIT),
                    _ => Duration::ZERO,
                };
                // Never earlier than a datagram already placed: the link takes them in order.
                let at = now.saturating_sub(waited).max(last_arrival);
                last_arrival = at;
                let _ = path.send(at, dir, d.len() as u64 + 28, || {
                    let mut buf = free.pop().unwrap_or_else(|| vec![0; 65536]);
                    buf[..d.len()].copy_from_slice(d);
                    (buf, d.len())
                });
            });
            ControlFlow::Continue(())
        })?;
        let now = clock.now();
        while let Some((dir, (buf, len))) = path.pop_due(now) {
            let dest = match dir {
                Direction::Forward => Some(server),
                Direction::Reverse => client,
            };
            if let Some(dest) = dest {
                // A full socket buffer drops the datagram, as a full link would.
                let _ = socket.send(dest, &buf[..len], len);
            }
            free.push(buf);
        }
        let next = path
            .next_arrival()
            .unwrap_or(now + Duration::from_millis(20));
        socket.wait(clock.until(next).min(Duration::from_millis(20)), false)?;
    }
    Ok(RelayStats {
        forward: *path.link(Direction::Forward).stats(),
        reverse: *path.link(Direction::Reverse).stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::Flood;
    use std::time::Instant as WallInstant;

    /// A client that keeps the relay's socket full must not hold deliveries up until it stops:
    /// the relay reads a bounded number of batches, then delivers what is due. (Reading until
    /// the socket was empty, the demo's relay delivered nothing for up to 184 ms at a time.)
    #[test]
    fn a_flood_does_not_hold_deliveries_up() {
        let server = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let path = PathConfig {
            rate_bps: 100_000_000_000,
            rtt: Duration::from_millis(1),
            loss: 0.0,
            queue: Duration::from_secs(1),
            seed: 1,
        };
        let relay = Relay::start(&path, server.local_addr().unwrap()).unwrap();
        let flood = Flood::start(relay.addr(), Duration::from_secs(2)).unwrap();
        let start = WallInstant::now();
        let mut rx = RecvBatch::default();
        // 2 s of flooding at most; delivery should begin within milliseconds.
        let mut delivered = false;
        while !delivered && start.elapsed() < Duration::from_secs(2) {
            server.wait(Duration::from_millis(10), false).unwrap();
            delivered = server.recv(&mut rx).unwrap() > 0;
        }
        let flooded = start.elapsed();
        flood.stop().unwrap();
        let stats = relay.stop().unwrap();
        assert!(
            delivered,
            "nothing delivered during {flooded:?} of flooding ({} datagrams reached the relay)",
            stats.forward.packets
        );
    }
}
