//! The receiving session (`docs/spec.md` §2, §4, §5).
//!
//! A [`Receiver`] is created from the first HELLO of a session ([`Receiver::accept`]). It
//! measures and reports; it makes no decision about rate or retransmission. Every DATA packet
//! whose bytes are new is handed back to the caller as a [`DataChunk`] (a range inside the
//! caller's datagram buffer, so nothing is copied), to be written at its offset: nothing waits
//! for order.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | state, construction, incoming packets, timers |
//! | `report.rs` | when to send FEEDBACK and what it says |
//! | `resume.rs` | telling a resuming sender what is already here (HAVE) |
//! | `validate.rs` | what may be sent before the sender's address is validated (§4.8) |
//! | `flow.rs` | the Write Limit: how much the application can still take (§7.4) |
//! | `coding.rs` | copies of KEEP chunks, REPAIR, rebuilt chunks (§6.9) |

mod coding;
mod flow;
mod report;
mod resume;
mod validate;

pub use validate::AMPLIFICATION_FACTOR;

use core::ops::Range;
use core::time::Duration;
use std::collections::VecDeque;

use crate::config::Overhead;
use crate::config::ReceiverConfig;
use crate::event::{DropReason, ReceiverEvent, SessionError};
use crate::manifest::{EntryKind, Manifest, MAX_MANIFEST_BYTES};
use crate::pn::PacketNumbers;
use crate::ranges::RangeSet;
use crate::time::Instant;
use crate::wire::{self, CloseCode, Data, Hello, Packet, CIPHER_NONE};

/// New object bytes in the datagram just handled, to be written by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct DataChunk {
    /// Object number (1-based manifest entry index + 1).
    pub object: u32,
    /// Offset of the bytes in the object.
    pub offset: u64,
    /// Where the bytes are in the datagram passed to `handle_datagram`.
    pub payload: Range<usize>,
}

/// Counters of a receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Datagrams of this session received.
    pub packets_received: u64,
    /// DATA packets received (including duplicates).
    pub data_packets_received: u64,
    /// Packets whose packet number was seen before (duplicated by the network).
    pub duplicate_packets: u64,
    /// Retransmitted DATA whose bytes had all arrived already.
    pub spurious_retransmissions: u64,
    /// File bytes delivered to the application (each byte once; a streamed file's digest
    /// trailer is object bytes but not counted here).
    pub delivered_bytes: u64,
    /// Object bytes the application already held from an earlier session ([`Receiver::resume`]).
    pub resumed_bytes: u64,
    /// FEEDBACK packets sent.
    pub feedback_sent: u64,
    /// Datagram bytes of all packets sent to the sender (FEEDBACK, ACCEPT, CLOSE).
    pub bytes_sent: u64,
    /// Packets sent to the sender.
    pub packets_sent: u64,
    /// Datagrams dropped as malformed or unexpected.
    pub dropped_packets: u64,
    /// Packets not sent because the sender's address was not validated and they would have
    /// exceeded three times the bytes received from it (spec §4.8).
    pub withheld_packets: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Receiving,
    /// All data is here; answering stragglers until CLOSE or the drain timeout.
    Draining,
    Ended,
}

/// The receiving side of a session. See the module documentation.
#[derive(Debug)]
pub struct Receiver {
    cfg: ReceiverConfig,
    session: u32,
    phase: Phase,
    epoch: Instant,
    datagram: usize,
    feedback_interval: Duration,

    object_count: u64,
    manifest_buf: Vec<u8>,
    manifest: Option<Manifest>,
    /// The manifest, complete and checked, waiting for the address to be validated (§4.8).
    pending_manifest: Option<Manifest>,
    /// Size of each known object; index 0 is the manifest.
    sizes: Vec<u64>,
    received: Vec<RangeSet>,
    done: Vec<bool>,
    objects_remaining: usize,
    watermark: (u32, u64),

    pns: RangeSet,
    largest: u64,
    largest_at: Instant,
    bytes_received: u64,
    /// Largest packet number at each of the last [`report::REPEAT`] reports.
    recent_largest: [u64; report::REPEAT],
    reports: u64,
    feedback_due: Option<Instant>,
    last_feedback_at: Option<Instant>,
    last_packet_at: Instant,
    accepts_owed: u32,
    close_pending: Option<(CloseCode, String)>,
    /// Numbers of the packets this receiver sends (`pn.rs`).
    out_pns: PacketNumbers,
    /// The sender asked for verification (HELLO flag VERIFY): COMPLETE waits for
    /// [`Receiver::confirm`].
    verify: bool,
    /// HELLO set GET: object 0 is a request (§5.6).
    get: bool,
    /// HELLO set GET and RESUME: the answering session resumes.
    answer_resumes: bool,
    resume: resume::Resume,
    validation: validate::Validation,
    flow: flow::Flow,
    coding: coding::Coding,

    events: VecDeque<ReceiverEvent>,
    stats: ReceiverStats,
}

impl Receiver {
    /// Start a session from its first datagram, which must be a HELLO. A HELLO with parameters
    /// this receiver does not support still yields a session, which only sends a CLOSE and
    /// ends. `token` is the session's address-validation token (spec §4.8): it must be
    /// unpredictable to anyone who does not receive the ACCEPT (a driver takes it from the
    /// operating system's random source; a simulation from its seeded generator).
    ///
    /// > §4.1: A HELLO datagram shorter than 1232 bytes MUST be dropped without an answer. A
    /// > HELLO of at least 1232 bytes that is malformed, or whose length differs from its Max
    /// > Datagram field (not padded to it), is answered with CLOSE ProtocolViolation and no
    /// > session is kept.
    pub fn accept(
        cfg: ReceiverConfig,
        now: Instant,
        datagram: &mut [u8],
        token: u64,
    ) -> Result<Receiver, DropReason> {
        // The datagram's length: this packet and the handshake message around it (spec §9).
        let len = datagram.len() + cfg.overhead.hello;
        if len < wire::MIN_DATAGRAM {
            // Anything we sent would be an amplification toward an unproven address.
            return Err(DropReason::Unexpected("HELLO shorter than 1232 bytes"));
        }
        let header = wire::Header::decode(&mut crate::codec::Reader::new(datagram))?;
        let refusing = |reason: &str| {
            let mut r = Receiver::new(cfg.clone(), header.session, now, &Hello::placeholder());
            r.validation.bytes_in = len as u64;
            r.refuse(CloseCode::ProtocolViolation, reason);
            r
        };
        if header.ty != wire::PacketType::Hello {
            return Err(DropReason::Unexpected(
                "non-HELLO packet for an unknown session",
            ));
        }
        let parsed = match wire::parse(datagram) {
            Ok(p) => p,
            Err(e) => return Ok(refusing(&format!("malformed HELLO: {e}"))),
        };
        let Packet::Hello(hello) = parsed.packet else {
            return Err(DropReason::Unexpected("non-HELLO packet"));
        };
        if usize::from(hello.max_datagram) != len {
            return Ok(refusing(&format!(
                "HELLO of {len} bytes: it must be padded to its Max Datagram ({})",
                hello.max_datagram
            )));
        }
        let mut r = Receiver::new(cfg, parsed.header.session, now, &hello);
        r.validation.token = token;
        r.validation.bytes_in = len as u64;
        r.verify = parsed.header.flags & wire::HELLO_VERIFY != 0;
        // §5.6: a GET session carries a request; its RESUME is for the answering session.
        r.get = parsed.header.flags & wire::HELLO_GET != 0;
        if r.get {
            r.answer_resumes = parsed.header.flags & wire::HELLO_RESUME != 0;
        } else if parsed.header.flags & wire::HELLO_RESUME != 0 && r.cfg.resume {
            r.resume = resume::Resume::Offered;
        }
        r.on_packet(now, parsed.header.pn, true);
        if r.phase == Phase::Ended {
            return Ok(r);
        }
        r.accepts_owed = 1;
        // §4.8: until the address is validated only the prefix is kept (at most one datagram),
        // not a buffer of the length the HELLO claims.
        let prefix = hello.manifest_prefix.len();
        r.manifest_buf = hello.manifest_prefix.to_vec();
        r.received[0].insert(0..prefix as u64);
        r.after_object_bytes(0);
        Ok(r)
    }

    fn new(cfg: ReceiverConfig, session: u32, now: Instant, hello: &Hello<'_>) -> Receiver {
        let datagram =
            usize::from(hello.max_datagram.min(cfg.max_datagram)).max(wire::MIN_DATAGRAM);
        let mut r = Receiver {
            session,
            phase: Phase::Receiving,
            epoch: now,
            datagram,
            feedback_interval: Duration::from_micros(hello.feedback_interval_us),
            object_count: hello.object_count,
            manifest_buf: Vec::new(),
            manifest: None,
            pending_manifest: None,
            sizes: vec![hello.manifest_len],
            received: vec![RangeSet::new()],
            done: vec![false],
            objects_remaining: 1,
            watermark: (0, 0),
            pns: RangeSet::new(),
            largest: 0,
            largest_at: now,
            bytes_received: 0,
            recent_largest: [0; report::REPEAT],
            reports: 0,
            feedback_due: None,
            last_feedback_at: None,
            last_packet_at: now,
            accepts_owed: 0,
            close_pending: None,
            out_pns: PacketNumbers::new(),
            verify: false,
            get: false,
            answer_resumes: false,
            resume: resume::Resume::Off,
            validation: validate::Validation::default(),
            events: VecDeque::new(),
            flow: flow::Flow::default(),
            coding: coding::Coding::default(),
            stats: ReceiverStats::default(),
            cfg,
        };
        // §9.4: an unprotected session has cipher 0; a protected one names a packet cipher.
        let protected = r.cfg.overhead != Overhead::NONE;
        let cipher_ok = if protected {
            crate::secure::Cipher::from_u8(hello.cipher).is_some()
        } else {
            hello.cipher == CIPHER_NONE
        };
        if !cipher_ok {
            r.refuse(
                CloseCode::Unsupported,
                &format!("cipher {} is not supported", hello.cipher),
            );
        } else if hello.manifest_len > MAX_MANIFEST_BYTES {
            r.refuse(CloseCode::Refused, "manifest larger than 64 MiB");
        } else if hello.object_count > crate::manifest::MAX_ENTRIES {
            r.refuse(CloseCode::Refused, "more than 1 000 000 entries");
        }
        r
    }

    /// The sender proved its address for the first time: make room for the whole manifest
    /// (zeroed pages cost memory only where bytes arrive) and decode it if the HELLO carried it
    /// all.
    fn on_first_validation(&mut self) {
        if self.phase == Phase::Ended {
            return;
        }
        if self.pending_manifest.is_none() {
            let mut buf = vec![0; self.sizes[0] as usize];
            let prefix = self.manifest_buf.len().min(buf.len());
            buf[..prefix].copy_from_slice(&self.manifest_buf[..prefix]);
            self.manifest_buf = buf;
        }
        self.after_object_bytes(0);
    }

    fn refuse(&mut self, code: CloseCode, reason: &str) {
        self.phase = Phase::Ended;
        // §4.6: the CLOSE is the answer; an ACCEPT after it would contradict it.
        self.accepts_owed = 0;
        self.close_pending = Some((code, reason.to_owned()));
        self.events
            .push_back(ReceiverEvent::Failed(SessionError::LocalClose {
                code,
                reason: reason.to_owned(),
            }));
    }

    /// The session id.
    pub fn session_id(&self) -> u32 {
        self.session
    }

    /// The manifest, once [`ReceiverEvent::ManifestReady`] was emitted.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// The sender asks for files (HELLO flag GET, §5.6): the manifest is a request, and the
    /// application answers it in a session of its own (§2.1) instead of writing anything.
    pub fn is_get(&self) -> bool {
        self.get
    }

    /// A GET whose HELLO also set RESUME: the answering session should resume (§5.6).
    pub fn answer_resumes(&self) -> bool {
        self.answer_resumes
    }

    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// True once every byte arrived.
    pub fn is_complete(&self) -> bool {
        self.objects_remaining == 0
    }

    /// True if the sender asked for verification: after [`ReceiverEvent::Complete`] the
    /// application checks the data and calls [`confirm`](Self::confirm), or
    /// [`close`](Self::close) with the reason it refuses the data (spec §6.8).
    pub fn wants_verification(&self) -> bool {
        self.verify
    }

    /// The application has verified every object: report COMPLETE. Has no effect before all
    /// bytes arrived or when the session did not ask for verification.
    pub fn confirm(&mut self, now: Instant) {
        if self.verify && self.objects_remaining == 0 && self.phase == Phase::Receiving {
            // The drain timeout counts from the confirmation, not from the last PING.
            self.last_packet_at = now;
            self.enter_draining();
        }
    }

    /// True once the session is over and nothing is left to send.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Ended && self.close_pending.is_none() && self.accepts_owed == 0
    }

    /// Next application event. Call after every `handle_*` call until it returns `None`.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    /// End the session now (for example: the disk is full), telling the sender `reason`.
    pub fn close(&mut self, code: CloseCode, reason: &str) {
        if self.phase != Phase::Ended {
            self.refuse(code, reason);
        }
    }

    /// Process one datagram from the sender. `Ok(Some(chunk))` hands back new object bytes to
    /// write; an `Err` means the datagram was dropped and the session is unchanged.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
    ) -> Result<Option<DataChunk>, DropReason> {
        // §4.8: everything received counts toward what may be sent before validation.
        self.validation.bytes_in += (datagram.len() + self.cfg.overhead.tag) as u64;
        let res = self.handle_inner(now, datagram);
        if res.is_err() {
            self.stats.dropped_packets += 1;
        }
        res
    }

    fn handle_inner(
        &mut self,
        now: Instant,
        datagram: &mut [u8],
    ) -> Result<Option<DataChunk>, DropReason> {
        let len = datagram.len();
        let parsed = wire::parse(datagram)?;
        let h = parsed.header;
        if h.session != self.session {
            return Err(DropReason::WrongSession(h.session));
        }
        if self.phase == Phase::Ended {
            return Err(DropReason::Closed);
        }
        match parsed.packet {
            Packet::Hello(_) => {
                // A repeated HELLO: our ACCEPT was lost. Answer each one once (never more
                // packets than received, so no amplification).
                self.on_packet(now, h.pn, true);
                self.accepts_owed = (self.accepts_owed + 1).min(4);
                Ok(None)
            }
            Packet::Ping(p) => {
                if !self.on_token(p.token) {
                    return Err(DropReason::Unexpected("PING with another session's token"));
                }
                self.on_packet(now, h.pn, true);
                self.on_ping_resume();
                Ok(None)
            }
            Packet::Data(d) => self.on_data(now, h.pn, len, &d),
            Packet::Repair(r) => self.on_repair(now, h.pn, len, &r),
            Packet::Close(c) => {
                if self.phase == Phase::Draining && c.code == CloseCode::Done {
                    self.phase = Phase::Ended;
                } else {
                    self.phase = Phase::Ended;
                    self.events
                        .push_back(ReceiverEvent::Failed(SessionError::PeerClosed {
                            code: c.code,
                            reason: c.reason_lossy(),
                        }));
                }
                Ok(None)
            }
            Packet::Accept(_) => Err(DropReason::Unexpected("ACCEPT")),
            Packet::Feedback(_) => Err(DropReason::Unexpected("FEEDBACK")),
            Packet::Have(_) => Err(DropReason::Unexpected("HAVE")),
        }
    }

    fn on_data(
        &mut self,
        now: Instant,
        pn: u64,
        len: usize,
        d: &Data<'_>,
    ) -> Result<Option<DataChunk>, DropReason> {
        let n = d.payload.len();
        let oob = DropReason::OutOfBounds {
            object: d.object,
            offset: d.offset,
            len: n,
        };
        if !self.validation.ever {
            // §4.8: no work and no memory for a sender that may be spoofing its address.
            return Err(DropReason::Unexpected(
                "DATA before the address is validated",
            ));
        }
        // Validate before acknowledging: data we cannot place must be neither used nor acked.
        let size = match self.sizes.get(d.object as usize) {
            Some(&s) => s,
            None if d.object as u64 <= self.object_count => {
                return Err(DropReason::Unexpected("file DATA before the manifest"))
            }
            None => return Err(oob),
        };
        let end = d.offset + n as u64;
        if end > size {
            return Err(oob);
        }
        self.stats.data_packets_received += 1;
        // Datagram bytes, as the sender counted them: the tag too (spec §4.5, §9).
        self.bytes_received += (len + self.cfg.overhead.tag) as u64;
        if !self.on_packet(now, pn, d.flags.probe) {
            return Ok(None);
        }
        self.keep_copy(d);
        let o = d.object as usize;
        let (new, content_new) = self.mark_received(o, d.offset..end);
        if new == 0 {
            if d.flags.retransmission {
                self.stats.spurious_retransmissions += 1;
            }
            return Ok(None);
        }
        let start = len - n;
        if o == 0 {
            self.manifest_buf[d.offset as usize..end as usize].copy_from_slice(d.payload);
            self.after_object_bytes(0);
            return Ok(None);
        }
        self.stats.delivered_bytes += content_new;
        self.flow.received += new;
        self.on_file_data_resume();
        self.after_object_bytes(d.object);
        Ok(Some(DataChunk {
            object: d.object,
            offset: d.offset,
            payload: start..len,
        }))
    }

    /// Account for a packet of this session; returns false if it is a network duplicate.
    fn on_packet(&mut self, now: Instant, pn: u64, urgent: bool) -> bool {
        self.stats.packets_received += 1;
        self.last_packet_at = now;
        if self.pns.contains(pn) {
            self.stats.duplicate_packets += 1;
            return false;
        }
        let first = self.pns.is_empty() && self.reports == 0;
        // Below the report floor a packet is no longer reported (spec §6.5); its data still counts.
        if pn >= self.report_floor() {
            self.pns.insert(pn..pn + 1);
        }
        if first || pn > self.largest {
            self.largest = pn;
            self.largest_at = now;
        }
        self.schedule_feedback(now, urgent);
        true
    }

    fn after_object_bytes(&mut self, object: u32) {
        let o = object as usize;
        if self.done[o] || self.received[o].covered() != self.sizes[o] {
            return;
        }
        let mut manifest = None;
        if o == 0 {
            // A manifest the HELLO carried whole is checked at once (one datagram: a small
            // constant of work), so a bad one is refused instead of accepted (§4.1); it takes
            // effect — directories, resume — only once the address is validated (§4.8).
            if self.pending_manifest.is_none() {
                self.pending_manifest = Some(match self.decode_manifest() {
                    Ok(m) => m,
                    Err((code, why)) => return self.refuse(code, &why),
                });
            }
            if !self.validation.ever {
                return;
            }
            manifest = self.pending_manifest.take();
        }
        self.done[o] = true;
        self.objects_remaining -= 1;
        if let Some(m) = manifest {
            self.on_manifest_complete(m);
        } else {
            self.events.push_back(ReceiverEvent::ObjectComplete(object));
        }
        self.check_complete();
    }

    /// Decode the complete manifest and check it against the HELLO; the error is the CLOSE
    /// that refuses it.
    fn decode_manifest(&self) -> Result<Manifest, (CloseCode, String)> {
        let refused = |why: &str| Err((CloseCode::Refused, why.to_owned()));
        match Manifest::decode(&self.manifest_buf) {
            Ok(m) if m.entries.len() as u64 != self.object_count => {
                refused("manifest entry count differs from HELLO")
            }
            // §5.6: GET carries a request, and only GET does.
            Ok(m) if m.is_request() != self.get => refused(if self.get {
                "a GET session must carry a request"
            } else {
                "a request needs the GET flag"
            }),
            // §6.8: verification checks each file against its digest; without one there is
            // nothing to check, and placing the file unchecked would break the promise.
            Ok(m)
                if self.verify
                    && m.entries
                        .iter()
                        .any(|e| e.kind == EntryKind::File && e.digest.is_none()) =>
            {
                refused("VERIFY needs a digest for every file entry")
            }
            Ok(m) => Ok(m),
            Err(e) => refused(&format!("manifest rejected: {e}")),
        }
    }

    /// Record bytes `range` of object `o` as held: (bytes new to this receiver, of which file
    /// content). A streamed file's trailer (§5.1) is object bytes but not file bytes.
    fn mark_received(&mut self, o: usize, range: Range<u64>) -> (u64, u64) {
        let content = self.content_len(o);
        let trailer_new = self.received[o].insert(range.start.max(content)..range.end);
        let content_new = self.received[o].insert(range.start..range.end.min(content));
        (trailer_new + content_new, content_new)
    }

    /// Bytes of object `o` that are file content: all of it, but for a streamed file's
    /// trailer.
    fn content_len(&self, o: usize) -> u64 {
        let listed = o
            .checked_sub(1)
            .and_then(|i| self.manifest.as_ref()?.entries.get(i));
        listed.map_or(self.sizes.get(o).copied().unwrap_or(0), |e| e.size)
    }

    fn on_manifest_complete(&mut self, manifest: Manifest) {
        self.manifest_buf = Vec::new();
        let n = manifest.entries.len();
        self.sizes.extend(
            manifest
                .entries
                .iter()
                .map(crate::manifest::Entry::object_len),
        );
        self.received.resize(n + 1, RangeSet::new());
        self.done.resize(n + 1, false);
        self.objects_remaining += n;
        self.manifest = Some(manifest);
        self.events.push_back(ReceiverEvent::ManifestReady);
        for o in 1..=n {
            if self.sizes[o] == 0 {
                self.after_object_bytes(o as u32);
            }
        }
    }

    fn check_complete(&mut self) {
        if self.objects_remaining == 0 && self.phase == Phase::Receiving {
            self.events.push_back(ReceiverEvent::Complete);
            // With VERIFY the session stays Receiving (the sender's PINGs keep it alive)
            // until the application confirms.
            if !self.verify {
                self.enter_draining();
            }
        }
    }

    /// All data is held (and confirmed, with VERIFY): report COMPLETE at once.
    fn enter_draining(&mut self) {
        self.phase = Phase::Draining;
        self.feedback_due = Some(Instant::ZERO);
    }
}
