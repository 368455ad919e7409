//! What a resuming session already holds (spec §8.3): files in place with the manifest's
//! digest, and the blocks of partial files that still match their journal.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use spate_proto::{Entry, Manifest};

use crate::confine::Target;
use crate::journal;

/// What a resuming receiver already holds, found by [`find_held`].
#[derive(Debug, Default)]
pub struct Held {
    /// Objects whose final file is in place with the manifest's digest.
    pub in_place: HashSet<u32>,
    /// Objects with a usable partial file: its verified blocks (index, digest).
    pub partial: HashMap<u32, Vec<(u64, [u8; 32])>>,
    /// Journaled blocks whose bytes no longer matched (to be sent again).
    pub damaged_blocks: u64,
}

impl Held {
    /// The held bytes as (object, range) pairs, for the protocol's HAVE.
    pub fn ranges(&self, manifest: &Manifest) -> Vec<(u32, Range<u64>)> {
        let mut out = Vec::new();
        for &o in &self.in_place {
            if let Some(e) = manifest.entries.get(o as usize - 1) {
                out.push((o, 0..e.size));
            }
        }
        for (&o, blocks) in &self.partial {
            let Some(e) = manifest.entries.get(o as usize - 1) else {
                continue;
            };
            for &(i, _) in blocks {
                out.push((o, journal::block_range(i, e.size)));
            }
        }
        out
    }
}

/// Find what is already at `targets` (one per entry of `manifest`): final files with the right
/// digest, and partial files whose journaled blocks still match. Reads (and hashes) those
/// files: it runs on the writer pool, never on the network thread.
pub fn find_held(manifest: &Manifest, targets: &[Target]) -> Held {
    let mut held = Held::default();
    for (i, (e, target)) in manifest.entries.iter().zip(targets).enumerate() {
        let object = i as u32 + 1;
        if !e.kind.is_file() || e.size == 0 {
            continue;
        }
        if in_place(target, e) {
            held.in_place.insert(object);
            continue;
        }
        if let Some(s) = journal::salvage(target, e) {
            held.damaged_blocks += s.damaged;
            if !s.good.is_empty() {
                held.partial.insert(object, s.good);
            }
        }
    }
    held
}

/// A regular file of the entry's size and digest is already at `target` (never for a streamed
/// file: its digest comes after its bytes, too late to vouch for a file in place).
fn in_place(target: &Target, e: &Entry) -> bool {
    let (Ok(m), Some(want)) = (target.symlink_metadata(), e.digest) else {
        return false;
    };
    if !m.is_file() || m.len() != e.size {
        return false;
    }
    // digest_reader reads 1 MiB at a time itself: no buffering needed.
    let Ok(mut f) = target.open_read() else {
        return false;
    };
    crate::scan::digest_reader(&mut f, &mut |_| {}).is_ok_and(|(got, _)| got == want)
}
