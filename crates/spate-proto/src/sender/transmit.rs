//! Choosing and writing the sender's next packets (`docs/spec.md` §4.1, §4.3, §6.4, §7).
//!
//! Priority, highest first:
//! 1. a pending CLOSE;
//! 2. HELLO, while the handshake lasts (repeated after one initial RTT, then every 200 ms);
//! 3. a PING carrying the ACCEPT's token, right after ACCEPT and whenever a report says the
//!    receiver has not validated our address (spec §4.8);
//! 4. a probe, when the probe timer fired: the oldest chunk still in flight, flagged PROBE, or a
//!    PING if nothing is in flight (or that chunk's bytes were delivered by another packet);
//! 5. subject to pacing and the in-flight bound, and not while the path is silent:
//!    retransmissions of lost chunks, oldest loss first; then repair symbols of coded blocks
//!    (`coding.rs`); then new data in object order. File
//!    data waits until the manifest (object 0) is fully acknowledged and, when resuming, until
//!    the receiver's HAVE arrived; chunks the receiver holds entirely are skipped. New file
//!    data also stays within the receiver's Write Limit (§7.4) and the source's pace.
//!
//! > §6.4: A retransmission carries the same object bytes in a new packet with a new packet
//! > number and the RETRANSMISSION flag. A sender never retransmits bytes it knows were
//! > delivered.

use core::time::Duration;

use super::{Holdup, Phase, Sender, Source, Transmit};
use crate::cc::RateControl;
use crate::codec::Writer;
use crate::event::SessionError;
use crate::recovery::{Chunk, SentKind};
use crate::time::Instant;
use crate::wire::{
    Close, CloseCode, Data, DataFlags, Header, Hello, PacketType, Ping, Repair, DATA_OVERHEAD,
    HEADER_LEN, HELLO_GET, HELLO_RESUME, HELLO_VERIFY, IP_UDP_OVERHEAD,
};

impl Sender {
    /// Write the next datagrams to send into `buf`, if any are due at `now`.
    ///
    /// Call until it returns `None`, whenever anything happened (a datagram, a timeout, a new
    /// session). `buf` should hold at least one maximum datagram (1472 bytes by default); a
    /// larger buffer lets the sender write several equal-size datagrams at once for UDP GSO.
    /// `source` supplies object bytes.
    #[must_use]
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut impl Source,
    ) -> Option<Transmit> {
        self.deferred.start(false);
        self.transmit(now, buf, source)
    }

    /// [`poll_transmit`](Self::poll_transmit), leaving the payloads of DATA packets whose
    /// chunk one block holds unfilled for the sealer (`deferred.rs`), which must seal them with
    /// [`deferred_payloads`](Self::deferred_payloads) before the batch is sent.
    pub(crate) fn poll_transmit_deferring(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut impl Source,
    ) -> Option<Transmit> {
        self.deferred.start(true);
        let t = self.transmit(now, buf, source);
        self.deferred.on = false;
        t
    }

    fn transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        source: &mut impl Source,
    ) -> Option<Transmit> {
        if let Some((code, reason)) = self.close_pending.take() {
            let len = self.write_close(buf, code, &reason)?;
            return Some(Transmit {
                len,
                segment_size: len,
            });
        }
        match self.phase {
            Phase::Ended => None,
            Phase::Handshake => {
                if now < self.hello_due {
                    return None;
                }
                let len = self.write_hello(now, buf)?;
                Some(Transmit {
                    len,
                    segment_size: len,
                })
            }
            Phase::Transfer => {
                if self.token_ping_due {
                    self.token_ping_due = false;
                    self.token_ping_at = Some(now);
                    let len = self.write_ping(now, buf)?;
                    return Some(Transmit {
                        len,
                        segment_size: len,
                    });
                }
                if self.probe_due {
                    self.probe_due = false;
                    let len = self.write_probe(now, buf)?;
                    return Some(Transmit {
                        len,
                        segment_size: len,
                    });
                }
                let payload = self.chunk_payload();
                self.buffer.release(
                    &self.delivered,
                    &self.sizes,
                    payload,
                    self.stats.delivered_bytes,
                );
                let (cursor, sizes, delivered) = (self.cursor, &self.sizes, &self.delivered);
                if let Err((object, offset, reason)) =
                    self.buffer.fill(cursor, sizes, delivered, payload, source)
                {
                    let err = SessionError::Source {
                        object,
                        offset,
                        reason,
                    };
                    let msg = err.to_string();
                    self.fail(err, CloseCode::Application, &msg);
                    return self.poll_transmit(now, buf, source);
                }
                self.stats.source_bytes = self.buffer.taken();
                let t = self.write_data_batch(now, buf);
                self.account_holdup(now);
                t
            }
        }
    }

    /// The next packet number; at the end of the space the session fails (and its CLOSE,
    /// having no number left, is not sent: see `pn.rs`).
    fn take_pn(&mut self) -> Option<u64> {
        let pn = self.pns.take();
        if pn.is_none() && self.phase != Phase::Ended {
            self.fail(
                SessionError::PacketNumbersExhausted,
                CloseCode::Application,
                "packet numbers exhausted",
            );
        }
        pn
    }

    fn header(&self, ty: PacketType, flags: u8, pn: u64) -> Header {
        Header {
            ty,
            flags,
            session: self.session,
            pn,
        }
    }

    fn record(&mut self, now: Instant, pn: u64, len: usize, kind: SentKind) {
        self.ledger.on_sent(pn, now, len as u32, kind);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        self.last_sent_at = now;
        let wire = (len + IP_UDP_OVERHEAD) as u64;
        // A batching sender's deliberate wait (§7.1) is not lateness: the catch-up starts
        // after it. The wait only matters to a sender already late by more than the catch-up,
        // so only such a send pays for working it out (a division, on every packet otherwise).
        let late = self.pacer.forfeited(now, Duration::ZERO);
        let hold = if late.is_zero() {
            Duration::ZERO
        } else {
            self.batch_hold()
        };
        let unused = if core::mem::take(&mut self.path_held) {
            Duration::ZERO
        } else {
            late.saturating_sub(hold)
        };
        self.cc.on_sent(now, wire, unused);
        self.pacer.on_sent(now, wire, self.cc.pacing_rate(), hold);
    }

    /// Manifest bytes that fit in a HELLO of `self.datagram` bytes.
    pub(super) fn hello_prefix_len(&self) -> usize {
        let probe = self.hello(&self.manifest_bytes);
        let room = self
            .hello_len()
            .saturating_sub(HEADER_LEN + probe.fixed_len());
        room.min(self.manifest_bytes.len())
    }

    /// Bytes of the HELLO packet: the datagram, less what its protection wraps around it.
    fn hello_len(&self) -> usize {
        self.datagram - self.cfg.overhead.hello
    }

    /// Leave the protection's room for the tag after a packet of `len` bytes written at the
    /// start of `buf` (zeros, which sealing overwrites); the packet's datagram length.
    fn tag_room(&self, buf: &mut [u8], len: usize) -> Option<usize> {
        let end = len + self.cfg.overhead.tag;
        buf.get_mut(len..end)?.fill(0);
        Some(end)
    }

    fn hello<'a>(&self, prefix: &'a [u8]) -> Hello<'a> {
        Hello {
            max_datagram: self.datagram as u16,
            cipher: self.cfg.cipher,
            feedback_interval_us: (self.cfg.feedback_interval.as_micros() as u64)
                .clamp(1, 1_000_000),
            idle_timeout_ms: (self.cfg.idle_timeout.as_millis() as u64).max(1),
            object_count: (self.sizes.len() - 1) as u64,
            manifest_len: self.manifest_bytes.len() as u64,
            manifest_prefix: prefix,
        }
    }

    fn write_hello(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let pn = self.take_pn()?;
        let hello = self.hello(&self.manifest_bytes[..self.prefix_len]);
        let mut w = Writer::new(buf);
        let flags = if self.cfg.verify { HELLO_VERIFY } else { 0 }
            | if self.cfg.resume { HELLO_RESUME } else { 0 }
            | if self.get { HELLO_GET } else { 0 };
        self.header(PacketType::Hello, flags, pn)
            .encode(&mut w)
            .ok()?;
        hello.encode(&mut w, self.hello_len()).ok()?;
        let len = w.len();
        if self.hellos_sent == 0 {
            self.first_hello_at = now;
        }
        self.hellos_sent += 1;
        // The first repeat waits one initial RTT guess; after that the receiver is as silent as
        // a path in an outage, and HELLO is repeated at the probe cadence (200 ms), so the
        // handshake notices a returning path as fast as a transfer does.
        let wait = if self.hellos_sent == 1 {
            self.cfg.initial_rtt
        } else {
            super::MAX_PROBE_INTERVAL
        };
        self.hello_due = now + wait;
        self.record(now, pn, len + self.cfg.overhead.hello, SentKind::Control);
        Some(len)
    }

    fn write_close(&mut self, buf: &mut [u8], code: CloseCode, reason: &str) -> Option<usize> {
        let pn = self.pns.take()?;
        let mut w = Writer::new(buf);
        self.header(PacketType::Close, 0, pn).encode(&mut w).ok()?;
        Close::encode(code, reason, &mut w).ok()?;
        let len = w.len();
        let len = self.tag_room(buf, len)?;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        Some(len)
    }

    fn write_probe(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.stats.probes_sent += 1;
        let chunk = self
            .ledger
            .oldest_in_flight()
            .and_then(|(_, p)| match p.kind {
                SentKind::Data { chunk, .. } => Some(chunk),
                SentKind::Control | SentKind::Repair { .. } => None,
            })
            // A packet still counted in flight whose bytes arrived in another (a
            // retransmission) needs no repeat, and its bytes may have left the send buffer:
            // a PING asks for the report as well.
            .filter(|c| !self.delivered[c.object as usize].contains_range(c.offset..c.end()));
        match chunk {
            Some(c) => {
                let flags = DataFlags {
                    retransmission: true,
                    probe: true,
                    keep: self.in_coded_block(c),
                };
                self.write_data(now, buf, 0, c, flags)
            }
            None => self.write_ping(now, buf),
        }
    }

    /// A PING: asks for a report, and proves our address with the ACCEPT's token (§4.4, §4.8).
    fn write_ping(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let pn = self.take_pn()?;
        let mut w = Writer::new(buf);
        self.header(PacketType::Ping, 0, pn).encode(&mut w).ok()?;
        Ping { token: self.token }.encode(&mut w).ok()?;
        let len = w.len();
        let len = self.tag_room(buf, len)?;
        self.record(now, pn, len, SentKind::Control);
        Some(len)
    }

    fn write_data_batch(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let mut len = 0;
        let mut segment = 0;
        // The bound moves with the rate, which a batch hardly changes: computed once.
        let cap = self.window_cap();
        // > §7.1: While its controller sets its rate from its own delivery at a buffer a
        // > competitor fills (the reference's competitive mode following BBR, §7.3), a sender
        // > sends each datagram on its own, when it is due.
        let room = buf.len().min(self.batch() * self.datagram);
        // > §7.1: A sender that sends several datagrams per system call (UDP GSO) may wait until
        // > its whole batch is due, and then send the batch at once: [...] but never more than
        // > 500 µs after.
        if !self.pacer.may_send(now.saturating_sub(self.batch_hold())) {
            return None;
        }
        while !self.silent
            && self.pacer.may_send(now)
            && self.ledger.in_flight_bytes() < cap
            && room.saturating_sub(len) >= self.datagram
        {
            let n = if self.retransmit.is_empty() && !self.coder.pending.is_empty() {
                // §6.9: a block's repair symbols follow its last chunk, before new data.
                match self.write_repair(now, &mut buf[len..]) {
                    Some(0) => continue,
                    Some(n) => n,
                    None => break,
                }
            } else {
                let Some((chunk, retransmission)) = self.next_chunk() else {
                    break;
                };
                let keep = if retransmission {
                    self.in_coded_block(chunk)
                } else {
                    self.code_chunk(now, chunk)
                };
                let flags = DataFlags {
                    retransmission,
                    probe: self.request_report(now),
                    keep,
                };
                let Some(n) = self.write_data(now, buf, len, chunk, flags) else {
                    if retransmission {
                        self.retransmit.push_front(chunk);
                    }
                    break;
                };
                n
            };
            if segment == 0 {
                segment = n;
            }
            len += n;
            if n < segment || self.phase != Phase::Transfer {
                break;
            }
            if n < self.datagram {
                break;
            }
        }
        self.close_idle_block(now);
        let held = self.silent || self.ledger.in_flight_bytes() >= cap || self.buffer.full();
        if self.pacer.may_send(now) && held {
            self.path_held = true;
        }
        (len > 0).then_some(Transmit {
            len,
            segment_size: segment,
        })
    }

    /// The next chunk to send: the oldest undelivered lost chunk, else new data — if the
    /// source has handed its bytes over.
    fn next_chunk(&mut self) -> Option<(Chunk, bool)> {
        while let Some(c) = self.retransmit.pop_front() {
            if !self.delivered[c.object as usize].contains_range(c.offset..c.end()) {
                return Some((c, true));
            }
        }
        let chunk = self.next_new_chunk()?;
        self.cursor = (chunk.object, chunk.end());
        if self.stats.resumed_bytes > 0 {
            self.skip_held();
        }
        Some((chunk, false))
    }

    /// The chunk of new data at the cursor — manifest bytes, then file data — if it may go
    /// now. Moves the cursor past objects already sent to their end.
    fn next_new_chunk(&mut self) -> Option<Chunk> {
        let (object, offset) = self.cursor;
        if object == 0 && offset < self.sizes[0] {
            let len = self.chunk_payload().min(self.sizes[0] - offset) as u32;
            return Some(Chunk {
                object,
                offset,
                len,
            });
        }
        let c = self.upcoming_chunk()?;
        self.cursor = (c.object, c.offset);
        self.hold_of(c).is_none().then_some(c)
    }

    /// A DATA packet of `chunk` at `at` in `buf` (its payload left for the sealer when
    /// deferring, `deferred.rs`).
    fn write_data(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        at: usize,
        chunk: Chunk,
        flags: DataFlags,
    ) -> Option<usize> {
        let total = DATA_OVERHEAD + chunk.len as usize + self.cfg.overhead.tag;
        let buf = buf.get_mut(at..)?;
        if buf.len() < total {
            return None;
        }
        let pn = self.take_pn()?;
        let mut w = Writer::new(buf);
        self.header(PacketType::Data, flags.bits(), pn)
            .encode(&mut w)
            .ok()?;
        Data::encode_fields(chunk.object, chunk.offset, &mut w).ok()?;
        let payload = w.reserve(chunk.len as usize).ok()?;
        if chunk.object == 0 {
            let start = chunk.offset as usize;
            payload.copy_from_slice(&self.manifest_bytes[start..start + chunk.len as usize]);
        } else if self.deferred.on && self.buffer.slice(chunk).is_some() {
            self.deferred.packets.push((at, chunk));
        } else if !self.buffer.copy(chunk, payload) {
            let err = SessionError::Source {
                object: chunk.object,
                offset: chunk.offset,
                reason: "internal error: bytes in flight left the send buffer".to_owned(),
            };
            let msg = err.to_string();
            self.fail(err, CloseCode::Application, &msg);
            return None;
        }
        self.tag_room(buf, total - self.cfg.overhead.tag)?;
        self.stats.data_packets_sent += 1;
        if flags.retransmission {
            self.stats.retransmitted_packets += 1;
            self.stats.retransmitted_bytes += u64::from(chunk.len);
        } else if chunk.object != 0 {
            self.stats.new_bytes_sent += u64::from(chunk.len);
        }
        self.record(
            now,
            pn,
            total,
            SentKind::Data {
                chunk,
                retransmission: flags.retransmission,
            },
        );
        Some(total)
    }

    /// A REPAIR packet with the next pending symbol (§4.9), as long as a full DATA packet.
    fn write_repair(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let total = DATA_OVERHEAD + self.chunk_payload() as usize + self.cfg.overhead.tag;
        if buf.len() < total {
            return None;
        }
        let p = self.coder.pending.pop_front()?;
        let Some(block) = self.coder.blocks.get(&(p.object, p.first)) else {
            // Its block is held by now: nothing to send (the caller's loop asks again).
            return Some(0);
        };
        let count = block.count;
        let pn = self.take_pn()?;
        let mut w = Writer::new(buf);
        self.header(PacketType::Repair, 0, pn).encode(&mut w).ok()?;
        Repair::encode_fields(p.object, p.first, count, p.index, &mut w).ok()?;
        let symbol = self
            .coder
            .blocks
            .get(&(p.object, p.first))?
            .symbols
            .get(p.index as usize)?;
        w.put(symbol).ok()?;
        let len = w.len();
        let len = self.tag_room(buf, len)?;
        self.coder.stats.repair_packets += 1;
        self.coder.stats.repair_bytes += self.chunk_payload();
        let kind = SentKind::Repair {
            object: p.object,
            first: p.first,
        };
        self.record(now, pn, len, kind);
        Some(len)
    }

    /// Something could be sent now if pacing and the in-flight bound allow: a
    /// retransmission, manifest bytes, or new data the source has handed over (a starved
    /// session waits for its driver, not for a timer).
    pub(super) fn has_data_to_send(&self) -> bool {
        if !self.retransmit.is_empty() || !self.coder.pending.is_empty() {
            return true;
        }
        if self.cursor.0 == 0 && self.cursor.1 < self.sizes[0] {
            return true;
        }
        self.upcoming_chunk()
            .is_some_and(|c| self.hold_of(c).is_none())
    }

    /// The chunk of new file data at the cursor, if file data may go (the manifest is
    /// acknowledged, no HAVE is awaited) and any is left. The cursor may rest at the end of
    /// an object: the next chunk starts at the next non-empty object.
    fn upcoming_chunk(&self) -> Option<Chunk> {
        if !(self.object_done[0] && !self.have_pending && self.cursor < self.data_end) {
            return None;
        }
        let (mut object, mut offset) = self.cursor;
        while offset >= *self.sizes.get(object as usize)? {
            object += 1;
            offset = 0;
        }
        let end = self.sizes[object as usize].min(offset + self.chunk_payload());
        Some(Chunk {
            object,
            offset,
            len: (end - offset) as u32,
        })
    }

    /// What holds new file data back now, besides pacing and the in-flight bound.
    pub(super) fn holdup(&self) -> Option<Holdup> {
        self.upcoming_chunk().and_then(|c| self.hold_of(c))
    }

    /// What keeps chunk `c` of new file data from going: the receiver's Write Limit, a send
    /// buffer full of unacknowledged data, or a source that has not handed its bytes over.
    fn hold_of(&self, c: Chunk) -> Option<Holdup> {
        if !self.within_write_limit(c.len) {
            Some(Holdup::WriteLimit)
        } else if self.buffer.has(c.object, c.end()) {
            None
        } else if self.buffer.full() {
            Some(Holdup::SendBuffer)
        } else {
            Some(Holdup::Source)
        }
    }

    /// Add the time since the last call to the counter of what held new data back then.
    fn account_holdup(&mut self, now: Instant) {
        let us = now.saturating_since(self.holdup_at).as_micros() as u64;
        match self.held_by {
            Some(Holdup::WriteLimit) => self.stats.write_limit_us += us,
            Some(Holdup::Source) => self.stats.source_wait_us += us,
            Some(Holdup::SendBuffer) | None => {}
        }
        self.held_by = self.holdup();
        self.holdup_at = now;
        if self.held_by == Some(Holdup::WriteLimit) {
            self.write_blocked_since.get_or_insert(now);
        } else {
            self.write_blocked_since = None;
        }
    }

    /// > §7.4: A sender never has sent more new data bytes in the session than the largest
    /// > Write Limit it has seen.
    fn within_write_limit(&self, len: u32) -> bool {
        self.write_limit
            .is_none_or(|l| self.stats.new_bytes_sent + u64::from(len) <= l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SenderEvent;
    use crate::manifest::{Entry, Manifest};
    use crate::pn::PacketNumbers;
    use crate::wire::{parse, MAX_PACKET_NUMBER};
    use crate::{RateConfig, Zeros};

    /// At the end of the packet number space the sender fails instead of repeating a number
    /// (two allocators used to saturate at the maximum and send it again — with packet
    /// protection, a repeated nonce). Its CLOSE has no number left and is not sent.
    #[test]
    fn the_end_of_the_packet_numbers_fails_closed() {
        let m = Manifest::new(vec![Entry::file("a", 1 << 20)]);
        let cfg = crate::SenderConfig::new(RateConfig::fixed(1_000_000_000));
        let mut s = Sender::new(cfg, 1, &m, Instant::ZERO).unwrap();
        s.pns = PacketNumbers::starting_at(MAX_PACKET_NUMBER - 2);
        s.ledger = crate::recovery::SentLedger::starting_at(MAX_PACKET_NUMBER - 2);
        let mut buf = vec![0u8; 1472];
        let mut seen = Vec::new();
        for ms in 0..50 {
            let now = Instant::from_millis(ms * 300);
            s.handle_timeout(now);
            while let Some(t) = s.poll_transmit(now, &mut buf, &mut Zeros) {
                seen.push(parse(&buf[..t.segment_size]).unwrap().header.pn);
            }
        }
        assert_eq!(
            seen,
            [
                MAX_PACKET_NUMBER - 2,
                MAX_PACKET_NUMBER - 1,
                MAX_PACKET_NUMBER
            ]
        );
        let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, SenderEvent::Failed(SessionError::PacketNumbersExhausted))),
            "{events:?}"
        );
        assert!(s.is_closed());
    }
}
