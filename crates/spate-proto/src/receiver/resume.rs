//! Resuming: telling the sender which bytes are already here (`docs/spec.md` §8.3, §4.7).
//!
//! > §8.3: A sender that resumes sets RESUME in HELLO. A receiver that can answer sets RESUME
//! > in ACCEPT; once the manifest is complete, its application finds what it holds from an
//! > earlier session, and the receiver sends one HAVE listing it — at once, and again in answer
//! > to each PING until file DATA arrives (at most [`MAX_HAVE_SENDS`] times). A HAVE fits one
//! > datagram: when the held bytes do not, the receiver leaves out the smallest ranges (they are
//! > simply sent again).
//!
//! Held bytes count as received: the watermark, COMPLETE and the object events treat them like
//! bytes that arrived in this session, so an object held whole completes at once.

use core::ops::Range;

use super::{Phase, Receiver};
use crate::codec::Writer;
use crate::time::Instant;
use crate::wire::{Have, HaveEntry, PacketType, HEADER_LEN};

/// HAVE packets a receiver sends at most per session: one per PING for 10 s of the sender's
/// 200 ms PINGs, bounding what a spoofed PING stream can draw from it.
pub const MAX_HAVE_SENDS: u32 = 50;

/// Where a session stands on resuming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resume {
    /// Not asked for, or this receiver does not resume.
    Off,
    /// ACCEPT said yes; waiting for the application to say what it holds.
    Offered,
    /// The HAVE body to send; `owed` when one is due; `sent` so far.
    Ready {
        body: Vec<u8>,
        owed: bool,
        sent: u32,
    },
    /// File DATA arrived: the sender has the HAVE.
    Done,
}

impl Receiver {
    /// True when the sender asked to resume and this receiver offered it: after
    /// [`ReceiverEvent::ManifestReady`](crate::ReceiverEvent::ManifestReady) the application
    /// must call [`resume`](Self::resume) (with nothing, if nothing is held) — the sender sends
    /// no file data until it has.
    pub fn wants_resume(&self) -> bool {
        self.resume == Resume::Offered && self.manifest.is_some()
    }

    /// True when this session resumes (both sides asked for it): on failure the application
    /// should keep its partial data for the next attempt.
    pub fn resumes(&self) -> bool {
        self.resume != Resume::Off
    }

    /// The application holds these bytes from an earlier session: `(object, byte range)`
    /// pairs, objects from 1. Ranges outside the manifest are ignored. The bytes count as
    /// received (objects held whole complete at once) and the sender is told to skip them.
    pub fn resume(&mut self, now: Instant, held: impl IntoIterator<Item = (u32, Range<u64>)>) {
        if !self.wants_resume() || self.phase != Phase::Receiving {
            return;
        }
        let mut touched = Vec::new();
        for (object, range) in held {
            let o = object as usize;
            let Some(&size) = self.sizes.get(o).filter(|_| o > 0) else {
                continue;
            };
            let r = range.start.min(size)..range.end.min(size);
            if r.is_empty() {
                continue;
            }
            self.stats.resumed_bytes += self.received[o].insert(r);
            touched.push(object);
        }
        let body = self.have_body();
        self.resume = Resume::Ready {
            body,
            owed: true,
            sent: 0,
        };
        for object in touched {
            self.after_object_bytes(object);
        }
        self.schedule_feedback(now, true);
    }

    /// A PING arrived: repeat the HAVE (the last one may have been lost).
    pub(super) fn on_ping_resume(&mut self) {
        if let Resume::Ready { owed, .. } = &mut self.resume {
            *owed = true;
        }
    }

    /// File DATA arrived: the sender got the HAVE.
    pub(super) fn on_file_data_resume(&mut self) {
        if matches!(self.resume, Resume::Ready { .. }) {
            self.resume = Resume::Done;
        }
    }

    pub(super) fn have_owed(&self) -> bool {
        matches!(self.resume, Resume::Ready { owed: true, sent, .. } if sent < MAX_HAVE_SENDS)
    }

    pub(super) fn write_have(&mut self, buf: &mut [u8]) -> Option<usize> {
        let h = self.header(PacketType::Have, 0)?;
        let Resume::Ready { body, owed, sent } = &mut self.resume else {
            return None;
        };
        *owed = false;
        *sent += 1;
        let mut w = Writer::new(buf);
        h.encode(&mut w).ok()?;
        w.put(body).ok()?;
        Some(w.len())
    }

    /// The held bytes as one HAVE body that fits a datagram: whole objects as runs, partial
    /// ones as ranges; if they do not all fit, the largest ranges are kept.
    fn have_body(&self) -> Vec<u8> {
        let mut entries = Vec::new();
        let mut o = 1;
        while o < self.sizes.len() {
            if self.received[o].covered() == self.sizes[o] {
                let first = o;
                while o < self.sizes.len() && self.received[o].covered() == self.sizes[o] {
                    o += 1;
                }
                entries.push(HaveEntry::Whole {
                    first: first as u32,
                    count: (o - first) as u32,
                });
                continue;
            }
            for r in self.received[o].iter() {
                entries.push(HaveEntry::Range {
                    object: o as u32,
                    offset: r.start,
                    len: r.end - r.start,
                });
            }
            o += 1;
        }
        let room = self.datagram - HEADER_LEN - 8 - self.cfg.overhead.tag;
        let size = |es: &[HaveEntry]| {
            let mut prev = 0;
            es.iter()
                .map(|e| {
                    let n = e.encoded_len(prev);
                    prev = e.object();
                    n
                })
                .sum::<usize>()
        };
        if size(&entries) > room {
            // Keep what saves most: whole runs, then the longest ranges, within the room
            // (each entry's size bounded by its encoding after object 0).
            let worth = |e: &HaveEntry| match *e {
                HaveEntry::Whole { .. } => u64::MAX,
                HaveEntry::Range { len, .. } => len,
            };
            entries.sort_by_key(|e| core::cmp::Reverse(worth(e)));
            let mut used = 0;
            entries.retain(|e| {
                used += e.encoded_len(0);
                used <= room
            });
            entries.sort_by_key(|e| match *e {
                HaveEntry::Whole { first, .. } => (first, 0),
                HaveEntry::Range { object, offset, .. } => (object, offset),
            });
        }
        let mut body = vec![0; room + 8];
        let mut w = Writer::new(&mut body);
        // Sorted, objects ≥ 1, non-empty: encoding cannot fail; if it did, say nothing held.
        let len = match Have::encode(&entries, &mut w) {
            Ok(()) => w.len(),
            Err(_) => 0,
        };
        body.truncate(len.max(1)); // an empty list is the single byte 0
        body
    }
}
