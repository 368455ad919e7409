//! Rebuilding coded blocks off the network thread (spec §6.9).
//!
//! A rebuild is an FFT over a block's shards — about 6 ms of CPU for a 3840-chunk block, 13–17 %
//! of a core per Gbit/s of coded data — which, on the thread that reads the socket, would hold
//! up every session's packets meanwhile. The sessions hand their rebuilds out
//! ([`ReceiverConfig::rebuild_elsewhere`](spate_proto::ReceiverConfig::rebuild_elsewhere)), one
//! worker thread runs them in order, and the loop gives each result back to its session.
//!
//! Memory: a job holds the block's copies and symbols, which its session's coding budget
//! (128 MiB) already counts until the result is back; a session that ended meanwhile has its
//! result dropped.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use spate_proto::coding::{RebuildDone, RebuildJob};

/// The worker and its queues.
pub struct Rebuilder {
    jobs: Option<Sender<(u32, RebuildJob)>>,
    done: Receiver<(u32, RebuildDone)>,
    pending: usize,
    worker: Option<JoinHandle<()>>,
}

impl Rebuilder {
    /// Start the worker thread.
    pub fn start() -> std::io::Result<Rebuilder> {
        let (jobs, todo) = channel::<(u32, RebuildJob)>();
        let (results, done) = channel();
        let worker = std::thread::Builder::new()
            .name("spate-rebuild".into())
            .spawn(move || {
                for (session, job) in todo {
                    if results.send((session, job.run())).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Rebuilder {
            jobs: Some(jobs),
            done,
            pending: 0,
            worker: Some(worker),
        })
    }

    /// Queue a rebuild of session `session`.
    pub fn submit(&mut self, session: u32, job: RebuildJob) {
        if let Some(j) = &self.jobs {
            if j.send((session, job)).is_ok() {
                self.pending += 1;
            }
        }
    }

    /// Rebuilds queued and not yet taken back with [`finished`](Self::finished).
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// A rebuild that is done, if any.
    pub fn finished(&mut self) -> Option<(u32, RebuildDone)> {
        let r = self.done.try_recv().ok()?;
        self.pending -= 1;
        Some(r)
    }
}

impl Drop for Rebuilder {
    fn drop(&mut self) {
        // Closing the queue ends the worker after the job it runs.
        self.jobs = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
