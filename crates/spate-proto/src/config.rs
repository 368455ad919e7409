//! Session settings.

use core::time::Duration;

use crate::cc::RateConfig;

/// Default datagram size: UDP payload that fits a 1500-byte Ethernet MTU over IPv4.
pub const DEFAULT_MAX_DATAGRAM: u16 = 1472;

/// Bytes the packet protection of `docs/spec.md` §9 adds around the packets a session writes.
/// Zero (the default) for unprotected sessions, as the simulator runs them; a
/// [`secure`](crate::secure) endpoint sets [`Overhead::SEALED`].
///
/// The session keeps its datagram size in wire bytes and leaves the room itself: it ends every
/// packet but HELLO with `tag` bytes for the authentication tag (sealed in place, so a GSO batch
/// keeps its stride), and writes a HELLO `hello` bytes shorter than the datagram, for the
/// handshake message that carries it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overhead {
    /// Bytes after every packet except HELLO.
    pub tag: usize,
    /// Bytes a HELLO's datagram holds besides the packet.
    pub hello: usize,
}

impl Overhead {
    /// No protection.
    pub const NONE: Overhead = Overhead { tag: 0, hello: 0 };
    /// The overhead of spec §9: a 16-byte tag, and a HELLO inside a Noise IK first message.
    pub const SEALED: Overhead = Overhead {
        tag: crate::secure::TAG_LEN,
        hello: crate::secure::HELLO_OVERHEAD,
    };
}

/// Settings of a sending session.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// Largest UDP payload to send (the receiver may lower it).
    pub max_datagram: u16,
    /// Fail after this long without any packet from the receiver (outages shorter than this are
    /// ridden out).
    pub idle_timeout: Duration,
    /// Fail if the receiver does not answer the HELLO within this time.
    pub handshake_timeout: Duration,
    /// How often the receiver should report while data flows. 10 ms keeps feedback near
    /// 60 KiB per GiB at 1 Gbit/s while giving a rate controller several reports per RTT on
    /// paths of 40 ms and more.
    pub feedback_interval: Duration,
    /// RTT assumed before the first sample (drives the first HELLO retransmission).
    pub initial_rtt: Duration,
    /// Rate policy.
    pub rate: RateConfig,
    /// Ask the receiver to verify the data before it reports COMPLETE (HELLO flag VERIFY,
    /// spec §6.8): the session succeeds only when the receiver's application confirms it
    /// (for example after checking each file's digest), and fails if it refuses.
    pub verify: bool,
    /// Resume an interrupted transfer (HELLO flag RESUME, spec §8.3): if the receiver offers
    /// it, file data waits for its HAVE, and the bytes it lists are not sent.
    pub resume: bool,
    /// Datagrams the driver sends with one system call (UDP GSO); 1 without batching. The
    /// buffers it passes to `poll_transmit` should hold that many. With more than one, the
    /// sender releases data a batch at a time, waiting up to
    /// [`MAX_BATCH_HOLD`](crate::pacer::MAX_BATCH_HOLD) until a whole batch is due (spec §7.1):
    /// on a veth pair, one core sent 24–27 Gbit/s in full 44-datagram batches, 17–25 in the
    /// batches pacing happened to leave (31 datagrams on average).
    pub batch: usize,
    /// The packet cipher the HELLO announces (spec §9.4); 0 for unprotected sessions.
    pub cipher: u8,
    /// Room left for packet protection; set by [`secure`](crate::secure).
    pub overhead: Overhead,
    /// Most object bytes the session holds between taking them from its source and their
    /// acknowledgement (`sender/buffer.rs`); new data waits when it is reached. 512 MiB holds
    /// a 10 Gbit/s × 400 ms path's bytes in flight, and 3× the in-flight bound of 10 Gbit/s
    /// at 46 ms; the memory is taken only as data is in flight.
    pub send_buffer: u64,
    /// Coding (spec §6.9): repair symbols for the tail of the transfer (`Auto`), for every
    /// block at a fixed rate, or none. Used only with a receiver that accepts it.
    pub fec: crate::coding::Fec,
}

impl SenderConfig {
    /// Defaults with the given rate settings.
    pub fn new(rate: RateConfig) -> Self {
        SenderConfig {
            max_datagram: DEFAULT_MAX_DATAGRAM,
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            feedback_interval: Duration::from_millis(10),
            initial_rtt: Duration::from_millis(500),
            rate,
            verify: false,
            resume: false,
            batch: 1,
            cipher: 0,
            overhead: Overhead::NONE,
            send_buffer: 512 << 20,
            fec: crate::coding::Fec::Auto,
        }
    }
}

/// Settings of a receiving session.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// Largest UDP payload accepted.
    pub max_datagram: u16,
    /// Fail after this long without any packet from the sender.
    pub idle_timeout: Duration,
    /// After all data arrived, how long to keep answering a sender that did not get the news
    /// (its CLOSE ends this early). It must cover the sender's idle timeout: a sender whose
    /// COMPLETE report was lost in an outage keeps probing until then, and only an answer
    /// tells it that the transfer succeeded.
    pub drain_timeout: Duration,
    /// Offer resumption (ACCEPT flag RESUME, spec §8.3) to senders that ask: the application
    /// then answers [`Receiver::wants_resume`](crate::Receiver::wants_resume) with
    /// [`Receiver::resume`](crate::Receiver::resume) once the manifest is known.
    pub resume: bool,
    /// Take coded repair symbols (ACCEPT flag CODING, spec §6.9): the session then keeps
    /// copies of chunks flagged KEEP, up to [`KEEP_BUDGET`](crate::coding::KEEP_BUDGET).
    pub coding: bool,
    /// Hand rebuilds of coded blocks to the driver ([`Receiver::poll_rebuild_job`]) instead of
    /// running them inside `handle_datagram`: a rebuild of a 3840-chunk block takes ~6 ms of
    /// CPU, which a driver can spend on another thread than the one that reads the socket.
    ///
    /// [`Receiver::poll_rebuild_job`]: crate::Receiver::poll_rebuild_job
    pub rebuild_elsewhere: bool,
    /// Room left for packet protection; set by [`secure`](crate::secure).
    pub overhead: Overhead,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            max_datagram: crate::wire::MAX_DATAGRAM as u16,
            idle_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(60),
            resume: false,
            coding: true,
            rebuild_elsewhere: false,
            overhead: Overhead::NONE,
        }
    }
}
