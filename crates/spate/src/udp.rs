//! The UDP socket: large kernel buffers, batched sends with UDP GSO (one system call sends up
//! to 64 datagrams cut by the kernel) and batched receives with GRO and `recvmmsg`, via
//! quinn-udp, which falls back to one datagram per call where the kernel lacks them.
//!
//! The socket is non-blocking; [`Socket::wait`] sleeps in `ppoll(2)` with microsecond
//! resolution until it is readable (or writable) or a deadline passes — the pacing timer of the
//! event loops.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::ops::ControlFlow;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};

/// Kernel buffer size asked for each direction: 32 MiB holds ~25 ms at 10 Gbit/s, enough to
/// ride out a scheduling hiccup of the event loop. (The kernel caps it at `net.core.rmem_max`
/// unless we are root, when `SO_RCVBUFFORCE` lifts the cap.)
const SOCKET_BUFFER: usize = 32 << 20;
/// Largest GSO batch in bytes: the payload of one maximal UDP datagram over IPv4 (65 535 − 20 −
/// 8); the kernel refuses larger ones with EMSGSIZE. 44 datagrams of 1472 bytes.
pub const MAX_GSO_BYTES: usize = 65_507;
/// Receive buffers per batch; each takes one GRO super-datagram or one plain datagram.
const RECV_BATCH: usize = 16;
/// Size of each receive buffer: the largest GRO super-datagram.
const RECV_BUF: usize = 64 * 1024;

/// A UDP socket set up for bulk transfer.
#[derive(Debug)]
pub struct Socket {
    io: UdpSocket,
    state: UdpSocketState,
}

impl Socket {
    /// Bind on `ip` at the first free port of `range` (`None`: any port), for firewalls that
    /// open a range (`--port-range`).
    pub fn bind_in_range(ip: std::net::IpAddr, range: Option<(u16, u16)>) -> io::Result<Socket> {
        let Some((lo, hi)) = range else {
            return Socket::bind(SocketAddr::new(ip, 0));
        };
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "empty port range");
        for p in lo..=hi {
            match Socket::bind(SocketAddr::new(ip, p)) {
                Ok(s) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Bind to `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddr) -> io::Result<Socket> {
        let domain = socket2::Domain::for_address(addr);
        let s = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        if addr.is_ipv6() {
            let _ = s.set_only_v6(false);
        }
        // The plain options first: each sets the buffer anew, capped at the system maximum,
        // so set after the forced ones they undid them (8 MiB here, not 32: the receiver's
        // socket overflowed behind a writer stalled for a few milliseconds).
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
        for force in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
            set_buffer(&s, force);
        }
        s.bind(&addr.into())?;
        let io: UdpSocket = s.into();
        let state = UdpSocketState::new(UdpSockRef::from(&io))?;
        Ok(Socket { io, state })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// The kernel's receive buffer, bytes (as Linux reports it: twice what was granted).
    pub fn recv_buffer(&self) -> usize {
        socket2::SockRef::from(&self.io)
            .recv_buffer_size()
            .unwrap_or(0)
    }

    /// A note for the operator when the receive buffer is below [`SOCKET_BUFFER`]: at several
    /// Gbit/s a few milliseconds of stalled writing overflow a small one (the lost packets are
    /// sent again, at the cost of rate and bandwidth).
    pub fn small_buffer_note(&self) -> Option<String> {
        // Linux reports twice the size granted (the rest is its bookkeeping allowance).
        let granted = self.recv_buffer() / 2;
        (granted < SOCKET_BUFFER).then(|| {
            format!(
                "note: the UDP receive buffer is {} KiB, below the {} MiB asked for (capped by \
                 net.core.rmem_max unless run as root); at more than ~1 Gbit/s short stalls \
                 overflow it and cost retransmissions. Raise it with \
                 'sysctl -w net.core.rmem_max={}'",
                granted >> 10,
                SOCKET_BUFFER >> 20,
                SOCKET_BUFFER
            )
        })
    }

    /// How many datagrams one send may carry (1 without GSO).
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// How many datagrams of `segment_size` bytes one [`send`](Self::send) should carry: the
    /// kernel's GSO limit, and at most [`MAX_GSO_BYTES`] in all.
    pub fn max_batch(&self, segment_size: usize) -> usize {
        self.max_gso_segments()
            .min(MAX_GSO_BYTES / segment_size.max(1))
            .max(1)
    }

    /// Send `contents` to `dest` as datagrams of `segment_size` bytes (the last may be
    /// shorter). Returns `Ok(false)` if the kernel buffer is full (try again when writable).
    ///
    /// Other errors of the send itself (an ICMP unreachable reported on the socket, no route
    /// during an outage) are the network losing the datagrams: the protocol's timers deal with
    /// them, as with any loss, so they are not errors here.
    ///
    /// `contents` must not exceed [`max_batch`](Self::max_batch) datagrams: an oversized batch
    /// fails with EMSGSIZE, which would count as such a loss and vanish silently. It is refused
    /// here instead.
    pub fn send(&self, dest: SocketAddr, contents: &[u8], segment_size: usize) -> io::Result<bool> {
        if contents.len() > segment_size && contents.len() > MAX_GSO_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a GSO batch of {} bytes exceeds the kernel's {MAX_GSO_BYTES}",
                    contents.len()
                ),
            ));
        }
        let segment_size = (contents.len() > segment_size).then_some(segment_size);
        let t = Transmit {
            destination: dest,
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        };
        match self.state.try_send(UdpSockRef::from(&self.io), &t) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(_) => Ok(true),
        }
    }

    /// Receive a batch into `batch` (replacing its contents). Returns the number of datagrams;
    /// 0 when nothing is waiting.
    pub fn recv(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.filled = 0;
        let mut slices: [IoSliceMut<'_>; RECV_BATCH] = {
            let mut chunks = batch.storage.chunks_mut(RECV_BUF);
            std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()))
        };
        match self
            .state
            .recv(UdpSockRef::from(&self.io), &mut slices, &mut batch.meta)
        {
            Ok(n) => {
                batch.filled = n;
                Ok(batch.datagrams())
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            // ICMP port unreachable from an earlier send surfaces here on Linux; the
            // protocol's timeouts deal with an absent peer.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Receive at most `max_batches` batches into `batch`, handing each to `f` until `f` breaks.
    /// Returns true if it stopped at the bound, so more may be waiting. An event loop reads
    /// this way, never until the socket is empty: a sender faster than the loop (a flood, or
    /// a peer on the same overloaded machine) need never let it empty, and the loop's other
    /// work — sending, delivering, checking its deadline — would wait as long.
    pub fn recv_bounded(
        &self,
        batch: &mut RecvBatch,
        max_batches: usize,
        mut f: impl FnMut(&mut RecvBatch) -> ControlFlow<()>,
    ) -> io::Result<bool> {
        for _ in 0..max_batches {
            if self.recv(batch)? == 0 || f(batch).is_break() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Sleep until the socket can take more, or until `timeout` (at least 1 ms).
    pub fn wait_writable(&self, timeout: Duration) -> io::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.io.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = timeout.as_millis().clamp(1, 3_600_000) as libc::c_int;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Sleep until readable (or also writable, if `writable`) or until `timeout`. Returns
    /// whether the socket is readable (true also when interrupted: look anyway).
    pub fn wait(&self, timeout: Duration, writable: bool) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.io.as_raw_fd(),
            events: libc::POLLIN | if writable { libc::POLLOUT } else { 0 },
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(3600) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            return Ok(true);
        }
        Ok(pfd.revents & libc::POLLIN != 0)
    }
}

fn set_buffer(s: &socket2::Socket, opt: libc::c_int) {
    let v: libc::c_int = SOCKET_BUFFER as libc::c_int;
    // SAFETY: setsockopt with a pointer to a c_int of the stated size. Failure (not root) is
    // harmless: the plain option set before still applies up to the system maximum.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Receive buffers and their metadata, allocated once per event loop.
pub struct RecvBatch {
    storage: Vec<u8>,
    meta: [RecvMeta; RECV_BATCH],
    filled: usize,
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            storage: vec![0; RECV_BATCH * RECV_BUF],
            meta: [RecvMeta::default(); RECV_BATCH],
            filled: 0,
        }
    }
}

impl RecvBatch {
    fn datagrams(&self) -> usize {
        self.meta[..self.filled]
            .iter()
            .map(|m| m.len.div_ceil(m.stride.max(1)))
            .sum()
    }

    /// Every datagram received (GRO super-datagrams split), with its source, as disjoint
    /// slices that other threads may work on at once.
    pub fn datagrams_mut(&mut self) -> Vec<(SocketAddr, &mut [u8])> {
        let mut out = Vec::with_capacity(self.datagrams());
        for (m, buf) in self.meta[..self.filled]
            .iter()
            .zip(self.storage.chunks_mut(RECV_BUF))
        {
            for d in buf[..m.len.min(RECV_BUF)].chunks_mut(m.stride.max(1)) {
                out.push((m.addr, d));
            }
        }
        out
    }

    /// Call `f(source, datagram)` for every datagram received (GRO super-datagrams split).
    pub fn for_each(&mut self, mut f: impl FnMut(SocketAddr, &mut [u8])) {
        self.for_each_stamped(|from, _, d| f(from, d));
    }

    /// [`for_each`](Self::for_each), with when the kernel received each datagram (wall clock,
    /// since the Unix epoch; `SO_TIMESTAMPNS`, which quinn-udp turns on for every socket on
    /// Linux), or `None` where the kernel gave no time. The datagrams of one GRO
    /// super-datagram share a time.
    pub fn for_each_stamped(&mut self, mut f: impl FnMut(SocketAddr, Option<Duration>, &mut [u8])) {
        for (i, m) in self.meta[..self.filled].iter().enumerate() {
            let buf = &mut self.storage[i * RECV_BUF..i * RECV_BUF + m.len.min(RECV_BUF)];
            for d in buf.chunks_mut(m.stride.max(1)) {
                f(m.addr, m.timestamp, d);
            }
        }
    }
}

/// A thread sending junk datagrams of 1200 bytes to a target as fast as it can, in full GSO
/// batches, for the flood tests of the loops that read a socket (`relay.rs`, `send.rs`,
/// `get.rs`): each must still do its other work while its socket never empties. Test support.
#[doc(hidden)]
pub struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<u64>>>,
}

impl Flood {
    /// Start flooding `target`; the thread stops by itself after `for_at_most`.
    pub fn start(target: SocketAddr, for_at_most: Duration) -> io::Result<Flood> {
        let s = Socket::bind((std::net::Ipv4Addr::LOCALHOST, 0).into())?;
        let stop = Arc::new(AtomicBool::new(false));
        let halt = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let junk = vec![0xa5u8; 1200 * s.max_batch(1200)];
            let (start, mut sent) = (std::time::Instant::now(), 0u64);
            while !halt.load(Ordering::Relaxed) && start.elapsed() < for_at_most {
                if s.send(target, &junk, 1200)? {
                    sent += (junk.len() / 1200) as u64;
                }
            }
            Ok(sent)
        });
        Ok(Flood {
            stop,
            thread: Some(thread),
        })
    }

    /// Stop; how many datagrams were handed to the kernel.
    pub fn stop(mut self) -> io::Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => Err(io::Error::other("flood thread panicked")),
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel buffers are as large as this process may make them: 32 MiB asked (Linux
    /// reports twice that) when root may force it, else up to the system maximum. (The plain
    /// option used to be set after the forced one and undid it: 8 MiB on this machine.)
    #[test]
    fn socket_buffers_are_as_large_as_allowed() {
        let s = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let snd = socket2::SockRef::from(&s.io).send_buffer_size().unwrap();
        let rcv = s.recv_buffer();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let max = |f: &str| -> usize {
            std::fs::read_to_string(f)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let want = |sys_max: usize| {
            if root {
                2 * SOCKET_BUFFER
            } else {
                2 * sys_max.min(SOCKET_BUFFER)
            }
        };
        assert!(
            rcv >= want(max("/proc/sys/net/core/rmem_max")),
            "receive buffer {rcv}"
        );
        assert!(
            snd >= want(max("/proc/sys/net/core/wmem_max")),
            "send buffer {snd}"
        );
        if root {
            assert_eq!(s.small_buffer_note(), None);
        } else {
            eprintln!("not root: buffers capped by the system maximum; CI runs as root");
        }
    }

    /// A full batch crosses loopback whole. (Before the 64 KiB limit, a 64-datagram batch was
    /// refused by the kernel with EMSGSIZE, which quinn-udp reports as success: every large
    /// batch vanished and looked like loss.)
    #[test]
    fn a_full_gso_batch_arrives_whole() {
        let rx = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let tx = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let n = tx.max_batch(1472);
        assert!(n * 1472 <= MAX_GSO_BYTES);
        let data: Vec<u8> = (0..n * 1472).map(|i| (i / 1472) as u8).collect();
        assert!(tx.send(rx.local_addr().unwrap(), &data, 1472).unwrap());
        let mut batch = RecvBatch::default();
        let mut got = Vec::new();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while got.len() < n && std::time::Instant::now() < end {
            rx.wait(Duration::from_millis(50), false).unwrap();
            while rx.recv(&mut batch).unwrap() > 0 {
                batch.for_each(|_, d| got.push(d.to_vec()));
            }
        }
        assert_eq!(got.len(), n);
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.len(), 1472);
            assert!(d.iter().all(|&b| b == i as u8));
        }
    }

    #[test]
    fn an_oversized_batch_is_refused_not_lost_silently() {
        let tx = Socket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let data = vec![0u8; 64 * 1472];
        let to = "127.0.0.1:9".parse().unwrap();
        assert!(tx.send(to, &data, 1472).is_err());
    }
}
