//! Opening packets on several cores (spec §9.4): the AEAD of each datagram of a receive batch
//! runs on a pool of threads, the rest of each packet stays on the loop's thread, in order.
//!
//! Opening is stateless given the epoch's key and the packet number, and it is the costly
//! part of a packet: about half of the receiver's CPU in `bench-io` (one core opens ~33 Gbit/s
//! of AES-256-GCM). So for a batch of at least [`MIN_PARALLEL`] sealed packets, the loop asks
//! the endpoint for each packet's [`Opener`], splits the batch into `N + 1` parts, opens N of
//! them on the pool and one itself, and then hands every packet to its session in arrival order
//! ([`Endpoint::handle_opened`](spate_proto::endpoint::Endpoint::handle_opened): the replay
//! check, the address rules, the session). Smaller batches — a loop that keeps up — are opened
//! inline as before: handing work over costs more than it saves there.
//!
//! A packet that fails to open on the pool is counted and dropped; it is never retried,
//! because ring leaves a failed packet's bytes unspecified. Packets of a later epoch, HELLOs
//! and packets of unknown sessions get no opener and go the usual way.
//!
//! rayon rather than scoped threads: its pool persists across batches and its scopes can
//! borrow the receive buffers; spawning threads per batch (every ~100 µs at 10 Gbit/s) would
//! cost more than the opening it spreads.

use std::net::SocketAddr;

use spate_proto::secure::Opener;

/// Sealed packets in a batch from which opening is spread over the pool.
pub const MIN_PARALLEL: usize = 32;

/// The pool of opening threads.
pub struct Openers {
    pool: rayon::ThreadPool,
    threads: usize,
}

impl Openers {
    /// `threads` (≥ 1) opening threads.
    pub fn new(threads: usize) -> std::io::Result<Openers> {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("spate-open-{i}"))
            .build()
            .map_err(std::io::Error::other)?;
        Ok(Openers { pool, threads })
    }

    /// Open, in place, every datagram of `batch` that has an opener; `opened[i]` becomes its
    /// length, or stays `None` (not authentic, or no opener).
    pub fn open(
        &self,
        batch: &mut [(SocketAddr, &mut [u8])],
        openers: &[Option<Opener>],
        opened: &mut [Option<usize>],
    ) {
        let part = batch.len().div_ceil(self.threads + 1).max(1);
        let mut parts = batch
            .chunks_mut(part)
            .zip(openers.chunks(part))
            .zip(opened.chunks_mut(part));
        let Some(mine) = parts.next() else {
            return;
        };
        self.pool.in_place_scope(|scope| {
            for p in parts {
                scope.spawn(move |_| open_part(p));
            }
            open_part(mine);
        });
    }
}

type Part<'a, 'b> = (
    (&'a mut [(SocketAddr, &'b mut [u8])], &'a [Option<Opener>]),
    &'a mut [Option<usize>],
);

fn open_part(((batch, openers), opened): Part<'_, '_>) {
    for (((_, d), o), r) in batch.iter_mut().zip(openers).zip(opened.iter_mut()) {
        if let Some(o) = o {
            *r = o.open(d);
        }
    }
}
