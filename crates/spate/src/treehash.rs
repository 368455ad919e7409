//! A file's BLAKE3 digest assembled from its 1 MiB blocks, so the receiver hashes each byte
//! once, as it arrives, instead of reading the whole file back at the end.
//!
//! BLAKE3 is a tree hash: the input is split into 1 KiB chunks, and a subtree of `2^k` chunks
//! starting at a multiple of its own size has a *chaining value* (CV) that depends only on its
//! bytes and its position. The tree over `n > 1` chunks splits into a left subtree of the largest
//! power of two of chunks below `n` and a right subtree of the rest (BLAKE3 paper, §2.1), so
//! for any file larger than one [`BLOCK`] (1024 chunks) every aligned block is a whole subtree
//! — the last one may be short — and the file's digest is the blocks' CVs merged pairwise by
//! the same rule, with the root flag only on the top merge. That is what [`file_digest`] does
//! with `blake3::hazmat`; a file of one block or less has no interior nodes, and its digest is
//! the block's root hash ([`BlockHasher::finish`] gives the hasher for either use).
//!
//! The receiver feeds each block's hasher from the buffers it writes while they arrive in
//! order (nearly always); what arrives after a gap is read back from the file once the block is
//! complete. The same CVs vouch for blocks in the resume journal.
//!
//! Why not the plain `blake3::Hasher` over the file: data arrives out of order and the digest
//! would then need a second pass over the whole file (the receiver's main CPU cost in
//! `spate-lab bench-io`: 2 GiB read back and hashed per GiB received, with the journal's pass).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};

use crate::journal::{block_range, BLOCK};

/// A block's bytes, hashed in order as far as they arrived in order.
pub struct BlockHasher {
    hasher: blake3::Hasher,
    /// Bytes of the block fed so far (from its start).
    fed: u64,
}

impl BlockHasher {
    /// The hasher of block `index` (byte offset `index · BLOCK` in the file).
    pub fn new(index: u64) -> Self {
        let mut hasher = blake3::Hasher::new();
        hasher.set_input_offset(index * BLOCK);
        BlockHasher { hasher, fed: 0 }
    }

    /// Feed `bytes` found at `at` bytes into the block, if they continue what was fed.
    pub fn feed(&mut self, at: u64, bytes: &[u8]) {
        if at == self.fed {
            self.hasher.update(bytes);
            self.fed += bytes.len() as u64;
        } else if at < self.fed && at + bytes.len() as u64 > self.fed {
            // Overlaps what was fed (a retransmission that straddles): feed the new tail.
            let skip = (self.fed - at) as usize;
            self.hasher.update(&bytes[skip..]);
            self.fed = at + bytes.len() as u64;
        }
    }

    /// Complete block `index` of a file of `size` bytes, reading from `file` what was not fed,
    /// and return the hasher (call `finalize_non_root` for a block of a larger file,
    /// `finalize` for a file of one block).
    pub fn finish(
        mut self,
        file: &File,
        index: u64,
        size: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<blake3::Hasher> {
        let r = block_range(index, size);
        let from = r.start + self.fed;
        if from < r.end {
            buf.resize((r.end - from) as usize, 0);
            file.read_exact_at(buf, from)?;
            self.hasher.update(buf);
        }
        Ok(self.hasher)
    }

    /// Complete a block whose bytes are all in `block` (the whole block, from its start), and
    /// return the hasher as [`finish`](Self::finish) does.
    pub fn finish_from(mut self, block: &[u8]) -> blake3::Hasher {
        let fed = (self.fed as usize).min(block.len());
        self.hasher.update(&block[fed..]);
        self.hasher
    }
}

/// The CV of block `index` of a file of `size` bytes (more than one block), read from `file`.
pub fn read_block_cv(
    file: &File,
    index: u64,
    size: u64,
    buf: &mut Vec<u8>,
) -> io::Result<ChainingValue> {
    Ok(BlockHasher::new(index)
        .finish(file, index, size, buf)?
        .finalize_non_root())
}

/// The BLAKE3 digest of a file of `size` bytes, more than one [`BLOCK`], from the CVs of all
/// its blocks in order (`size.div_ceil(BLOCK)` of them). `None` if the count is wrong.
pub fn file_digest(cvs: &[ChainingValue], size: u64) -> Option<[u8; 32]> {
    if size <= BLOCK || cvs.len() as u64 != size.div_ceil(BLOCK) {
        return None;
    }
    let (left, right) = children(cvs, size);
    Some(*merge_subtrees_root(&left, &right, Mode::Hash).as_bytes())
}

/// The two children of the subtree of `len` bytes made of `cvs` (at least two blocks).
fn children(cvs: &[ChainingValue], len: u64) -> (ChainingValue, ChainingValue) {
    // For more than one block the left subtree is a power of two of chunks ≥ one block, so a
    // whole number of blocks.
    let left = left_subtree_len(len);
    let n = (left / BLOCK) as usize;
    (subtree(&cvs[..n], left), subtree(&cvs[n..], len - left))
}

fn subtree(cvs: &[ChainingValue], len: u64) -> ChainingValue {
    if let [cv] = cvs {
        return *cv;
    }
    let (left, right) = children(cvs, len);
    merge_subtrees_non_root(&left, &right, Mode::Hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn data(size: u64) -> Vec<u8> {
        (0..size).map(|i| (i * 31 % 253) as u8).collect()
    }

    #[test]
    fn merged_block_values_give_the_plain_digest() {
        for size in [
            BLOCK + 1,
            2 * BLOCK,
            3 * BLOCK + 10,
            4 * BLOCK,
            5 * BLOCK - 1,
            7 * BLOCK + 1024,
            9 * BLOCK + 1,
        ] {
            let d = data(size);
            let cvs: Vec<_> = (0..size.div_ceil(BLOCK))
                .map(|i| {
                    let r = block_range(i, size);
                    let mut h = BlockHasher::new(i);
                    h.feed(0, &d[r.start as usize..r.end as usize]);
                    h.hasher.finalize_non_root()
                })
                .collect();
            assert_eq!(
                file_digest(&cvs, size),
                Some(*blake3::hash(&d).as_bytes()),
                "size {size}"
            );
            assert_eq!(file_digest(&cvs[1..], size), None);
        }
        assert_eq!(file_digest(&[[0; 32]], BLOCK), None);
    }

    #[test]
    fn out_of_order_pieces_are_read_back() {
        let size = 2 * BLOCK + 5000;
        let d = data(size);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&d).unwrap();
        let i = 1;
        let r = block_range(i, size);
        let block = &d[r.start as usize..r.end as usize];
        let mut h = BlockHasher::new(i);
        // In order, a straddling retransmission, then a gap: the rest comes from the file.
        h.feed(0, &block[..1000]);
        h.feed(500, &block[500..3000]);
        h.feed(5000, &block[5000..6000]);
        assert_eq!(h.fed, 3000);
        let mut buf = Vec::new();
        let cv = h.finish(&f, i, size, &mut buf).unwrap().finalize_non_root();
        assert_eq!(cv, read_block_cv(&f, i, size, &mut buf).unwrap());
        // A file of one block: the finished hasher's root is the plain digest.
        let small = data(BLOCK - 7);
        let mut g = tempfile::tempfile().unwrap();
        g.write_all(&small).unwrap();
        let mut h = BlockHasher::new(0);
        h.feed(0, &small[..100]);
        let root = h
            .finish(&g, 0, small.len() as u64, &mut buf)
            .unwrap()
            .finalize();
        assert_eq!(root, blake3::hash(&small));
    }
}
