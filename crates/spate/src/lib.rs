//! # spate — real transfers over UDP
//!
//! The driver that runs the sans-IO protocol core ([`spate_proto`]) on real sockets, real time
//! and real files, and the pieces of the `spate` command.
//!
//! | module | job |
//! |---|---|
//! | [`udp`] | the socket: large buffers, batched send (UDP GSO) and receive (GRO) via quinn-udp |
//! | [`clock`] | maps the OS monotonic clock to the core's [`spate_proto::Instant`] |
//! | [`rate`] | RATE arguments (`800k`, `200M`, `1.5G`) |
//! | [`scan`] | the sender's side of the file system: sources → manifest, digests |
//! | [`source`] | file bytes for the sender, read ahead on an I/O thread |
//! | [`confine`] | the receiver's side: every path stays below `--root` |
//! | [`sink`] | the receiver's writer thread: temporary files, digest check, rename into place |
//! | [`keys`] | identities, `authorized_keys` and `known_hosts` files, fingerprints |
//! | [`access`] | the server's authorization: keys, per-key restrictions, one-time tokens |
//! | [`pin`] | the client's server keys: `known_hosts`, first contact, changed keys |
//! | [`config`] | defaults for `send` from `config.toml` |
//! | [`send`] | the sending event loop |
//! | [`seal_pool`] | sealing and sending full batches on N more threads, in order (`--sealers`) |
//! | [`ssh`] | a one-off receiver started over the user's ssh (`host:DEST`) |
//! | [`get`] | downloads: over ssh (the remote sends to the port this side knocked from) and from a daemon (a request, then its answering session) |
//! | [`request`] | a download's request (spec §5.6) resolved beneath a server's root, following no link |
//! | [`serve`] | the server's event loop (many sessions on one socket; downloads answered on threads) |
//! | [`demo`] | `spate demo`: receiver, impaired link and sender in one process |
//! | [`relay`] | a user-space impaired link (delay, loss, rate) between two UDP endpoints |
//! | [`progress`], [`report`] | what the user sees: progress bar, final report, JSON |
//! | [`exit`] | the command's exit codes |
//!
//! ## Threads
//!
//! Each end runs its protocol session and socket on one thread, which never blocks on a disk:
//! the sender's file reads happen ahead of need on a reader thread, the receiver's writes,
//! digest checks and renames on a writer thread. Buffers travel between the threads in both
//! directions and are reused, so the per-packet path allocates nothing.

pub mod access;
pub mod alloc;
pub mod clock;
pub mod config;
pub mod confine;
pub mod demo;
pub mod exit;
pub mod get;
pub mod journal;
pub mod keys;
pub mod noise;
pub mod pin;
pub mod progress;
pub mod random;
pub mod rate;
pub mod relay;
pub mod report;
pub mod request;
pub mod scan;
pub mod seal_pool;
pub mod send;
pub mod serve;
pub mod sink;
pub mod source;
pub mod ssh;
pub mod treehash;
pub mod udp;

/// UDP port `spate serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7373;
