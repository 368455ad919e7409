//! The allocator of Spate's programs: the system's, with large blocks page-aligned.
//!
//! Spate's bulk data lives in large `Vec<u8>` buffers: the reader's 1 MiB blocks, which the
//! kernel copies file pages into and BLAKE3 hashes, and the writers' 256 KiB jobs, which are
//! hashed and copied into the page cache. glibc serves allocations of 128 KiB and more from
//! `mmap` and returns a pointer 16 bytes past the page boundary, and a `Vec<u8>` cannot ask for
//! more. Measured on the project machine (AMD EPYC, AVX2), reading a 2 GiB tmpfs file in 1 MiB
//! `read`s and hashing each block: 8.2 % of a core per Gbit/s into a buffer from `vec!`, 4.5 %
//! into the same buffer at a page boundary, with or without huge pages — presumably because the
//! kernel's `rep movsb` copy and BLAKE3's 32-byte loads slow down when source and destination
//! sit at different offsets in a cache line.
//!
//! In Spate itself the gain is smaller — its blocks wait in memory between the read and the
//! packets, so its copies touch memory the CPU's cache no longer holds — but steady: three
//! interleaved runs each of a 2 GiB loopback transfer (`spate-lab bench-end` pairs), file →
//! file 13.5 → 12.9 % of a core per Gbit/s at the sender and 16.1 → 15.5 at the receiver,
//! memory → memory 8.1 → 7.7 at the sender.
//!
//! So [`PageAligned`] hands every allocation of at least [`LARGE`] bytes out page-aligned, by
//! asking the system allocator for that alignment (glibc's `posix_memalign`, which pads the
//! `mmap` by one page); smaller ones are the system's as before. The programs install it with
//! `#[global_allocator]`; the library never does, so an embedding program keeps its own.
//!
//! Why not a crate: the need is one property of the system allocator's large blocks, not a
//! different allocator (jemalloc's large size classes are page-aligned too, at the price of a
//! C build and of every other allocation behaving differently).

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations of at least this many bytes are page-aligned: 64 KiB, below the reader's and
/// writers' buffers and the GSO batches, above anything allocated per packet.
pub const LARGE: usize = 64 << 10;
/// The alignment given to large allocations: a page.
pub const PAGE: usize = 4096;

/// The system allocator with allocations of [`LARGE`] bytes and more aligned to a [`PAGE`].
pub struct PageAligned;

/// The layout actually asked of the system for `layout`: the same, page-aligned when large.
/// A function of size and alignment alone, so that `dealloc` gives back what `alloc` took.
fn adjusted(layout: Layout) -> Layout {
    if layout.size() >= LARGE && layout.align() < PAGE {
        Layout::from_size_align(layout.size(), PAGE).unwrap_or(layout)
    } else {
        layout
    }
}

// SAFETY: every call is forwarded to `System` with the layout `adjusted` derives from the
// caller's, which is the same for the allocation and for its release (size and alignment
// determine it), and at least as aligned as the caller asked.
unsafe impl GlobalAlloc for PageAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: `adjusted` keeps the size (non-zero, as the caller guarantees) and returns a
        // valid layout.
        unsafe { System.alloc(adjusted(layout)) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(adjusted(layout)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this `layout`, so from `System` with
        // `adjusted(layout)`.
        unsafe { System.dealloc(ptr, adjusted(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = adjusted(layout);
        let Ok(new) = Layout::from_size_align(new_size, layout.align()).map(adjusted) else {
            return std::ptr::null_mut();
        };
        if old.align() == new.align() {
            // SAFETY: `ptr` is `System`'s with layout `old`; the new size keeps the alignment
            // `System` was asked for.
            return unsafe { System.realloc(ptr, old, new_size) };
        }
        // Crossing `LARGE`: a new block with the other alignment, and the bytes moved over.
        // SAFETY: `new` is a valid non-zero layout; both blocks are live and distinct, and
        // the copy stays within the smaller of them.
        unsafe {
            let fresh = System.alloc(new);
            if !fresh.is_null() {
                std::ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
                System.dealloc(ptr, old);
            }
            fresh
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_layouts_are_page_aligned_and_small_ones_untouched() {
        let small = Layout::from_size_align(LARGE - 1, 1).unwrap();
        assert_eq!(adjusted(small), small);
        let large = Layout::from_size_align(LARGE, 1).unwrap();
        assert_eq!(adjusted(large).align(), PAGE);
        assert_eq!(adjusted(large).size(), LARGE);
        let stricter = Layout::from_size_align(LARGE, 2 * PAGE).unwrap();
        assert_eq!(
            adjusted(stricter),
            stricter,
            "a larger alignment asked for is kept"
        );
    }

    #[test]
    fn blocks_are_aligned_and_keep_their_bytes_across_reallocation() {
        let a = PageAligned;
        let small = Layout::from_size_align(1000, 1).unwrap();
        // SAFETY: layouts are non-zero; each pointer is used within its size and released
        // once with the layout it has at that moment.
        unsafe {
            let p = a.alloc(small);
            assert!(!p.is_null());
            for i in 0..1000 {
                *p.add(i) = i as u8;
            }
            // Growing across LARGE moves it to a page-aligned block.
            let q = a.realloc(p, small, 2 * LARGE);
            assert!(!q.is_null());
            assert_eq!(q as usize % PAGE, 0);
            assert!((0..1000).all(|i| *q.add(i) == i as u8));
            let large = Layout::from_size_align(2 * LARGE, 1).unwrap();
            // Growing while large stays page-aligned.
            let r = a.realloc(q, large, 4 * LARGE);
            assert_eq!(r as usize % PAGE, 0);
            assert!((0..1000).all(|i| *r.add(i) == i as u8));
            // Shrinking back below LARGE.
            let larger = Layout::from_size_align(4 * LARGE, 1).unwrap();
            let s = a.realloc(r, larger, 500);
            assert!((0..500).all(|i| *s.add(i) == i as u8));
            a.dealloc(s, Layout::from_size_align(500, 1).unwrap());
            let z = a.alloc_zeroed(large);
            assert_eq!(z as usize % PAGE, 0);
            assert!((0..2 * LARGE).all(|i| *z.add(i) == 0));
            a.dealloc(z, large);
        }
    }
}
