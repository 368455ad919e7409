//! The forwarder: real packets through [`spate_netmodel::Path`] in real time.
//!
//! One thread owns both TUN descriptors. Each turn it reads what the namespaces have sent (up
//! to [`BATCH`] packets per side, so neither direction starves the other), offers every packet to
//! the path at the moment it was read, writes out every packet whose arrival time has come, and
//! sleeps in `ppoll` until the next arrival or the next packet, whichever is first. The thread's
//! timer slack is set to 1 ns, so a wake-up is late by the scheduler's latency only (tens of
//! µs here; `spate-lab calibrate` measures the added delay).
//!
//! Writing a packet into a TUN device runs the receiving namespace's whole input path (for TCP:
//! the receiver's protocol work and the ACK it sends) inside `write`, on the writing thread. So
//! due packets are handed, a batch per turn, to one writer thread per direction, and the
//! forwarding thread only reads and keeps time; buffers come back to it for reuse.
//!
//! Measurement happens here, at the bottleneck, for every protocol alike, into the simulator's
//! own [`Recorder`]: the forward queueing delay and drops of every packet when it enters the
//! link, and each flow's goodput when a packet is delivered to the receiver's interface —
//! transport payload bytes (TCP payload; UDP payload less the protocol's fixed per-packet
//! overhead, 40 bytes for Spate's DATA header and tag). Flows are told apart by the server's
//! port (a range for GridFTP's data connections). Reverse bytes per flow are the receiver's
//! feedback (Spate's FEEDBACK, TCP's ACKs).

use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use spate_netmodel::{Direction, Fate, LinkStats, Path, Schedule};
use spate_proto::Instant;
use spate_sim::Recorder;

use super::tun::Tun;

/// Packets read from one side before turning to the other.
const BATCH: usize = 64;
/// Longest sleep when nothing is in flight (bounds the reaction to `stop`).
const IDLE_WAIT: Duration = Duration::from_millis(5);
/// Buffer size: the MTU and some.
const BUF: usize = 2048;

/// How packets map to flows: IP protocol, server port range, flow, per-packet overhead.
#[derive(Debug, Clone)]
pub struct Classifier {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, Copy)]
struct Rule {
    proto: u8,
    lo: u16,
    hi: u16,
    flow: u16,
    overhead: u16,
}

/// IP protocol numbers.
pub const TCP: u8 = 6;
/// IP protocol numbers.
pub const UDP: u8 = 17;

impl Classifier {
    /// No flows.
    pub fn new() -> Self {
        Classifier { rules: Vec::new() }
    }

    /// Packets of IP protocol `proto` whose server-side port is in `lo..=hi` belong to `flow`;
    /// each carries `overhead` bytes of transport payload that are not file data.
    pub fn add(&mut self, proto: u8, lo: u16, hi: u16, flow: usize, overhead: u16) {
        self.rules.push(Rule {
            proto,
            lo,
            hi,
            flow: u16::try_from(flow).unwrap_or(u16::MAX),
            overhead,
        });
    }

    /// (flow, payload bytes) of an IPv4 packet travelling `dir`; `None` for anything else.
    pub fn classify(&self, dir: Direction, p: &[u8]) -> Option<(usize, u64)> {
        let (proto, sport, dport, payload) = parse(p)?;
        let port = match dir {
            Direction::Forward => dport,
            Direction::Reverse => sport,
        };
        let r = self
            .rules
            .iter()
            .find(|r| r.proto == proto && (r.lo..=r.hi).contains(&port))?;
        Some((
            usize::from(r.flow),
            payload.saturating_sub(u64::from(r.overhead)),
        ))
    }
}

/// (protocol, source port, destination port, transport payload length) of an IPv4 TCP or UDP
/// packet. Never panics: anything short or odd is `None`.
fn parse(p: &[u8]) -> Option<(u8, u16, u16, u64)> {
    let v = *p.first()?;
    if v >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(v & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?])).min(p.len());
    let proto = *p.get(9)?;
    let l4 = p.get(ihl..total)?;
    let port = |i: usize| Some(u16::from_be_bytes([*l4.get(i)?, *l4.get(i + 1)?]));
    let (sport, dport) = (port(0)?, port(2)?);
    let header = match proto {
        TCP => usize::from(*l4.get(12)? >> 4) * 4,
        UDP => 8,
        _ => return None,
    };
    Some((proto, sport, dport, l4.len().saturating_sub(header) as u64))
}

/// What the forwarder measured.
pub struct Measured {
    /// Bottleneck metrics, as the simulator's.
    pub rec: Recorder,
    /// Per flow: IP bytes towards the sender (feedback, ACKs).
    pub reverse_bytes: Vec<u64>,
    /// Link counters, forward and reverse.
    pub links: [LinkStats; 2],
    /// Packets that matched no flow (both directions).
    pub unclassified: u64,
    /// CPU seconds the forwarder used (reading and timing, and the writer threads, which
    /// include the receiving namespaces' input path).
    pub cpu_s: f64,
    /// How late packets reached the receiving interface, against their modelled arrival
    /// time: mean and max, microseconds.
    pub lateness_us: (f64, u64),
}

/// What the forwarder emulates and measures.
pub struct Setup {
    /// The path's phases.
    pub schedule: Schedule,
    /// Seed of its random impairments.
    pub seed: u64,
    /// Which packets belong to which flow.
    pub classifier: Classifier,
    /// How many flows.
    pub flows: usize,
    /// Planned length of the run.
    pub duration: Duration,
    /// Time zero of the path's schedule.
    pub t0: std::time::Instant,
}

/// A packet held in the delay line: buffer, length, and (flow, payload bytes) if it has one.
type Held = (Vec<u8>, usize, Option<(usize, u64)>);

/// Run until `stop`: forward between `client` and `server` as `setup` says.
pub fn run(
    mut client: Tun,
    mut server: Tun,
    setup: Setup,
    stop: &AtomicBool,
) -> std::io::Result<Measured> {
    let Setup {
        schedule,
        seed,
        classifier,
        flows,
        duration,
        t0,
    } = setup;
    precise_timers();
    let n_phases = schedule.phases().len();
    let mut path: Path<Held> = Path::new(schedule, seed);
    let mut rec = Recorder::new(duration + Duration::from_secs(2), flows, n_phases);
    let mut reverse_bytes = vec![0u64; flows];
    let mut unclassified = 0u64;
    let mut free: Vec<Vec<u8>> = Vec::new();
    let (back_tx, back) = std::sync::mpsc::channel::<Vec<u8>>();
    let to_server = Writer::start(
        server.try_clone().map_err(std::io::Error::other)?,
        back_tx.clone(),
        t0,
    )?;
    let to_client = Writer::start(
        client.try_clone().map_err(std::io::Error::other)?,
        back_tx,
        t0,
    )?;
    let (mut fwd_batch, mut rev_batch): (Batch, Batch) = (Vec::new(), Vec::new());
    let mut scratch = vec![0u8; BUF];
    let clock = || Instant::from_nanos(t0.elapsed().as_nanos() as u64);
    let cpu0 = thread_cpu();
    while !stop.load(Ordering::Relaxed) {
        let mut busy = false;
        for dir in [Direction::Forward, Direction::Reverse] {
            let tun = match dir {
                Direction::Forward => &mut client,
                Direction::Reverse => &mut server,
            };
            for _ in 0..BATCH {
                let Some(n) = tun.read(&mut scratch)? else {
                    break;
                };
                busy = true;
                let now = clock();
                let class = classifier.classify(dir, &scratch[..n]);
                match (dir, class) {
                    (_, None) => unclassified += 1,
                    (Direction::Reverse, Some((f, _))) => reverse_bytes[f] += n as u64,
                    (Direction::Forward, Some(_)) => {}
                }
                let fate = path.send(now, dir, n as u64, || {
                    let mut b = free.pop().unwrap_or_else(|| vec![0; BUF]);
                    b[..n].copy_from_slice(&scratch[..n]);
                    (b, n, class)
                });
                if dir == Direction::Forward {
                    let phase = path.link(dir).phase_index();
                    match fate {
                        Fate::Dropped(cause) => rec.on_dropped(phase, now, cause),
                        Fate::Delivered { queue_delay, .. } => {
                            rec.on_queued(phase, now, queue_delay)
                        }
                    }
                }
            }
        }
        free.extend(back.try_iter());
        let now = clock();
        while let Some(at) = path.next_arrival().filter(|&a| a <= now) {
            let Some((dir, (buf, len, class))) = path.pop_due(now) else {
                break;
            };
            match dir {
                Direction::Forward => {
                    fwd_batch.push((buf, len, at));
                    if let Some((f, payload)) = class {
                        rec.on_delivered(f, now, payload);
                    }
                }
                Direction::Reverse => rev_batch.push((buf, len, at)),
            }
        }
        to_server.send(&mut fwd_batch)?;
        to_client.send(&mut rev_batch)?;
        if busy {
            continue;
        }
        let wait = path
            .next_arrival()
            .map_or(IDLE_WAIT, |a| a.saturating_since(clock()))
            .min(IDLE_WAIT);
        wait_readable(&client, &server, wait)?;
    }
    let late = [to_server.finish()?, to_client.finish()?];
    let late_n = late[0].n + late[1].n;
    Ok(Measured {
        rec,
        reverse_bytes,
        links: [
            *path.link(Direction::Forward).stats(),
            *path.link(Direction::Reverse).stats(),
        ],
        unclassified,
        cpu_s: thread_cpu() - cpu0 + late[0].cpu_s + late[1].cpu_s,
        lateness_us: (
            if late_n > 0 {
                (late[0].sum_us + late[1].sum_us) as f64 / late_n as f64
            } else {
                0.0
            },
            late[0].max_us.max(late[1].max_us),
        ),
    })
}

/// Packets due for one direction: buffer, length, and when it was due.
type Batch = Vec<(Vec<u8>, usize, Instant)>;

/// How late a writer put packets on the receiving interface, against their arrival time.
#[derive(Default)]
struct Lateness {
    n: u64,
    sum_us: u128,
    max_us: u64,
    /// CPU seconds of the writer thread.
    cpu_s: f64,
}

/// A thread that writes batches of packets into one TUN device and returns the buffers.
struct Writer {
    tx: Option<std::sync::mpsc::Sender<Batch>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<Lateness>>>,
}

impl Writer {
    fn start(
        mut tun: Tun,
        back: std::sync::mpsc::Sender<Vec<u8>>,
        t0: std::time::Instant,
    ) -> std::io::Result<Writer> {
        let (tx, rx) = std::sync::mpsc::channel::<Batch>();
        let thread = std::thread::Builder::new()
            .name(format!("emu-write-{}", tun.name()))
            .spawn(move || {
                precise_timers();
                let mut late = Lateness::default();
                let cpu0 = thread_cpu();
                for batch in rx {
                    for (buf, len, at) in batch {
                        tun.write(&buf[..len])?;
                        let now = Instant::from_nanos(t0.elapsed().as_nanos() as u64);
                        let us = now.saturating_since(at).as_micros() as u64;
                        late.n += 1;
                        late.sum_us += u128::from(us);
                        late.max_us = late.max_us.max(us);
                        let _ = back.send(buf);
                    }
                }
                late.cpu_s = thread_cpu() - cpu0;
                Ok(late)
            })?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Hand over the batch (leaving it empty).
    fn send(&self, batch: &mut Batch) -> std::io::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let b = std::mem::take(batch);
        match &self.tx {
            Some(tx) if tx.send(b).is_ok() => Ok(()),
            _ => Err(std::io::Error::other("the TUN writer thread stopped")),
        }
    }
}

impl Writer {
    /// Stop the thread; how late its packets were.
    fn finish(mut self) -> std::io::Result<Lateness> {
        self.tx = None;
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => Err(std::io::Error::other("the TUN writer thread panicked")),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sleep until either descriptor is readable or `wait` has passed (nanosecond timeout).
fn wait_readable(a: &Tun, b: &Tun, wait: Duration) -> std::io::Result<()> {
    if wait.is_zero() {
        return Ok(());
    }
    let mut fds = [
        libc::pollfd {
            fd: a.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: b.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: two valid pollfds and a valid timespec; no signal mask.
    let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// CPU seconds of the calling thread.
fn thread_cpu() -> f64 {
    crate::bench::ends::rusage_seconds(libc::RUSAGE_THREAD)
}

/// Let this thread's sleeps end on time: timer slack of 1 ns instead of the default 50 µs.
pub fn precise_timers() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer and affects only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(proto: u8, sport: u16, dport: u16, payload: usize) -> Vec<u8> {
        let l4h = if proto == TCP { 32 } else { 8 };
        let total = 20 + l4h + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = proto;
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        if proto == TCP {
            p[32] = 8 << 4;
        }
        p
    }

    #[test]
    fn classifies_by_server_port_and_counts_payload() {
        let mut c = Classifier::new();
        c.add(UDP, 7000, 7000, 0, 40);
        c.add(TCP, 5201, 5201, 1, 0);
        c.add(TCP, 50000, 50099, 2, 0);
        let f = Direction::Forward;
        assert_eq!(
            c.classify(f, &packet(UDP, 40000, 7000, 1472 - 8)),
            Some((0, 1424))
        );
        assert_eq!(
            c.classify(f, &packet(TCP, 40000, 5201, 1448)),
            Some((1, 1448))
        );
        assert_eq!(
            c.classify(f, &packet(TCP, 40000, 50042, 100)),
            Some((2, 100))
        );
        assert_eq!(
            c.classify(Direction::Reverse, &packet(TCP, 5201, 40000, 0)),
            Some((1, 0))
        );
        assert_eq!(c.classify(f, &packet(TCP, 5201, 40000, 0)), None);
        // Nothing short or odd panics.
        for p in [&[][..], &[0x45], &[0x60; 40], &packet(TCP, 1, 2, 0)[..30]] {
            let _ = c.classify(f, p);
        }
        let mut bad = packet(UDP, 1, 7000, 0);
        bad[0] = 0x4f; // header length past the end
        assert_eq!(c.classify(f, &bad), None);
    }
}
