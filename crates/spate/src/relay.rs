//! A user-space impaired link: a UDP relay that gives every datagram the fate
//! [`spate_netmodel::Link`] decides — bottleneck rate and drop-tail queue, propagation delay,
//! random loss — in real time. The kernel here has no `netem`, and the same model drives the
//! simulator, so a demo over the relay and a simulated scenario mean the same path.
//!
//! The relay forwards datagrams from its client (the first address that is not the server) to
//! the server through the forward link, and the server's answers back through the reverse
//! link. Datagrams wait in a time-ordered heap; their buffers are reused.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use spate_netmodel::{Fate, Link, LinkStats, Phase, Schedule};
use spate_proto::Instant;

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
        let links = [
            Link::new(schedule.clone(), path.seed, 0),
            Link::new(schedule, path.seed, 1),
        ];
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("spate-relay".into())
            .spawn(move || run(&socket, server, links, &s))?;
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

/// A datagram in flight: (arrival, sequence) orders the heap.
struct InFlight {
    at: Instant,
    seq: u64,
    to_server: bool,
    len: usize,
    buf: Vec<u8>,
}
impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

fn run(
    socket: &Socket,
    server: SocketAddr,
    mut links: [Link; 2],
    stop: &AtomicBool,
) -> std::io::Result<RelayStats> {
    let clock = Clock::new();
    let mut client: Option<SocketAddr> = None;
    let mut heap: BinaryHeap<Reverse<InFlight>> = BinaryHeap::new();
    let mut free: Vec<Vec<u8>> = Vec::new();
    let mut batch = RecvBatch::default();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        while socket.recv(&mut batch)? > 0 {
            let now = clock.now();
            batch.for_each(|from, d| {
                let to_server = from != server;
                if to_server {
                    client = Some(from);
                }
                let link = &mut links[usize::from(!to_server)];
                if let Fate::Delivered { at, duplicate, .. } =
                    link.transmit(now, d.len() as u64 + 28)
                {
                    for _ in 0..1 + usize::from(duplicate) {
                        let mut buf = free.pop().unwrap_or_else(|| vec![0; 65536]);
                        buf[..d.len()].copy_from_slice(d);
                        seq += 1;
                        heap.push(Reverse(InFlight {
                            at,
                            seq,
                            to_server,
                            len: d.len(),
                            buf,
                        }));
                    }
                }
            });
        }
        let now = clock.now();
        while heap.peek().is_some_and(|p| p.0.at <= now) {
            let Some(Reverse(p)) = heap.pop() else { break };
            let dest = if p.to_server { Some(server) } else { client };
            if let Some(dest) = dest {
                // A full socket buffer drops the datagram, as a full link would.
                let _ = socket.send(dest, &p.buf[..p.len], p.len);
            }
            free.push(p.buf);
        }
        let next = heap
            .peek()
            .map_or(now + Duration::from_millis(20), |p| p.0.at);
        socket.wait(clock.until(next).min(Duration::from_millis(20)), false)?;
    }
    Ok(RelayStats {
        forward: *links[0].stats(),
        reverse: *links[1].stats(),
    })
}
