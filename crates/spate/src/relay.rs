//! A user-space impaired link: a UDP relay that gives every datagram the fate
//! [`spate_netmodel::Link`] decides — bottleneck rate and drop-tail queue, propagation delay,
//! random loss — in real time. The kernel here has no `netem`, and the same model drives the
//! simulator, so a demo over the relay and a simulated scenario mean the same path.
//!
//! The relay forwards datagrams from its client (the first address that is not the server) to
//! the server through the forward link, and the server's answers back through the reverse
//! link. Datagrams wait in a time-ordered heap; their buffers are reused.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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
    while !stop.load(Ordering::Relaxed) {
        while socket.recv(&mut batch)? > 0 {
            let now = clock.now();
            batch.for_each(|from, d| {
                let dir = if from == server {
                    Direction::Reverse
                } else {
                    client = Some(from);
                    Direction::Forward
                };
                let _ = path.send(now, dir, d.len() as u64 + 28, || {
                    let mut buf = free.pop().unwrap_or_else(|| vec![0; 65536]);
                    buf[..d.len()].copy_from_slice(d);
                    (buf, d.len())
                });
            });
        }
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
