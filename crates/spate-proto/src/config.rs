//! Session settings.

use core::time::Duration;

use crate::cc::RateConfig;

/// Default datagram size: UDP payload that fits a 1500-byte Ethernet MTU over IPv4.
pub const DEFAULT_MAX_DATAGRAM: u16 = 1472;

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
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            max_datagram: crate::wire::MAX_DATAGRAM as u16,
            idle_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(60),
            resume: false,
        }
    }
}
