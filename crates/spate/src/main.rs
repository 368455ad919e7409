//! The `spate` command: `serve`, `send`, `demo`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use spate::confine::Root;
use spate::rate::{parse_rate, parse_size};
use spate::relay::PathConfig;
use spate::report::{human_bytes, Report};
use spate::send::{send, SendConfig};
use spate::serve::{Limits, Server};
use spate::{demo, scan, DEFAULT_PORT};

/// Large buffers page-aligned: the reader's and writers' copies and hashes run at twice the
/// speed (`spate::alloc`).
#[global_allocator]
static ALLOC: spate::alloc::PageAligned = spate::alloc::PageAligned;

#[path = "cli/events.rs"]
mod events;
#[path = "cli/remote.rs"]
mod remote;
use events::Events;
use remote::{cp_cmd, get_cmd, ssh_options, watch_stdin_and_exit};
use spate_proto::{Policy, RateConfig};

/// Fast, reliable file transfer over long, lossy networks.
///
/// Spate moves files over UDP with its own rate control: it ignores random loss, keeps queues
/// short and follows capacity changes within about a second. Every file is checked (BLAKE3)
/// before it is put in place.
///
/// Try it without a network: `spate demo`.
#[derive(Parser)]
#[command(
    name = "spate",
    version,
    propagate_version = true,
    after_help = "Defaults for send: $XDG_CONFIG_HOME/spate/config.toml (or $SPATE_CONFIG), \
                  keys as the options' long names (policy, rate, cipher, identity, ssh, \
                  remote_spate, port_range, connect_timeout, …); the command line wins.\n\n\
                  Exit codes: 0 success (every file in place and verified); 1 other error; \
                  2 usage; 3 bad input here (missing or unreadable source, bad destination, \
                  token or key file); 4 server not reached; 5 refused by the server; 6 server \
                  key not trusted (changed); 7 transfer failed after it began (run it again \
                  with --resume)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Receive transfers into a directory (the receiver daemon).
    ///
    /// Accepts any number of senders, one after another and at once. Files are written under
    /// temporary names and renamed into place only after their digest matches; nothing is
    /// ever written outside --root (paths with '..', absolute paths and symbolic links that
    /// lead out are refused). An existing regular file is replaced; a directory, FIFO or
    /// device at a file's name is not (the transfer fails, saying so). Two transfers of the
    /// same file at once: the second is refused while the first writes it; one after the
    /// other, the last to finish stays. Senders must prove they receive at their address
    /// before anything is written (spoofed packets cost little and draw at most 3× back).
    /// The --max-* limits and --quota bound what senders can make the server hold; the
    /// defaults suit a server open to many senders (docs/security.md). Stop with Ctrl-C.
    ///
    /// Every session is authenticated and encrypted (Noise IK handshake, then AES-256-GCM or
    /// ChaCha20-Poly1305). Only clients whose public key is in --authorized-keys are let in
    /// (one `spate-x25519 KEY comment` line each, from `spate keygen` on the client; options
    /// `dir=SUBDIR` confines a key below --root, `get-only` forbids uploads); the file is read
    /// again when it changes. For a one-off transfer without exchanging keys, --token prints
    /// a token the client passes to `spate send --token`. The server's own key (--key) is
    /// created on first start; clients pin it on first contact: show it with --print-key.
    ///
    /// Examples:
    ///   spate serve --root /srv/incoming
    ///   spate serve --root /srv/incoming --token       # prints a one-time token
    ///   spate serve --print-key                        # the key clients should see
    #[command(verbatim_doc_comment)]
    Serve {
        /// Address and UDP port to listen on.
        #[arg(long, default_value_t = SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)))]
        listen: SocketAddr,
        /// Directory transfers are written into (must exist).
        #[arg(long, required_unless_present = "print_key")]
        root: Option<PathBuf>,
        /// The server's private key (created, mode 0600, if missing) [default:
        /// $XDG_CONFIG_HOME/spate/host_x25519].
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// Public keys of the clients allowed in [default:
        /// $XDG_CONFIG_HOME/spate/authorized_keys].
        #[arg(long, value_name = "FILE")]
        authorized_keys: Option<PathBuf>,
        /// Also let in any client that presents the token printed at start (valid while this
        /// server runs; it carries the server's key, so the client needs no known_hosts).
        #[arg(long)]
        token: bool,
        /// Print the server's public key and fingerprint (creating the key if needed) and exit.
        #[arg(long)]
        print_key: bool,
        /// Make every new client prove its address with a RETRY first, as under load
        /// (testing aid).
        #[arg(long, hide = true)]
        retry_always: bool,
        /// Serve one session and exit (what `spate send FILE host:DEST` starts over ssh): a
        /// fresh key and one-time token, announced on stdout as `SPATE-ONCE 1 ADDRESS PORT
        /// TOKEN`; no authorized_keys needed. Exits after 30 s without a session.
        #[arg(long)]
        once: bool,
        /// Listen on the first free UDP port of this range (for firewalls), e.g. 60000-60100.
        #[arg(long, value_name = "LO-HI", value_parser = parse_port_range)]
        port_range: Option<(u16, u16)>,
        /// Log each session as one JSON object per line on stdout (for log pipelines):
        /// time, session, peer, client key and comment, cipher, entries, bytes, resumed
        /// bytes, seconds, outcome ("ok" or "failed") and error. Start-up lines stay on stderr.
        #[arg(long)]
        json: bool,
        /// Write nothing: count received bytes only, as a network benchmark sink (nothing is
        /// verified; --root is still required and checked).
        #[arg(long)]
        discard: bool,
        #[command(flatten)]
        limits: ServeLimits,
    },
    /// Send files or directory trees to a `spate serve`.
    ///
    /// The last argument names the receiver and the destination, as with scp:
    /// `[user@]host:dest` starts a one-off receiver on that host over your own ssh (your
    /// ~/.ssh/config, agent and host keys apply; the remote needs only the spate binary) and
    /// `dest` is relative to your home there, or absolute; `host:port:dest` (or
    /// `[v6addr]:port:dest`, or `--daemon`) talks to a `spate serve` daemon, and `dest` is
    /// below its --root. `host:` or `host:.` is the home or root itself. The destination works as with scp: a single file sent to a destination that is
    /// not an existing directory on the server (and does not end in '/') is written as that
    /// name; otherwise — several sources, -r, a trailing '/', or an existing directory —
    /// everything goes into it, and missing directories are created.
    ///
    /// Examples:
    ///   spate send big.iso alice@server:backup.iso       # over ssh: ~alice/backup.iso
    ///   spate send big.iso server:/srv/isos/             # over ssh: /srv/isos/big.iso
    ///   spate send a.txt b.txt server:7373:docs          # daemon: docs/a.txt, docs/b.txt
    ///   spate send -r photos/ server:7373:incoming       # daemon: incoming/photos/...
    #[command(verbatim_doc_comment)]
    Send(SendArgs),
    /// Fetch files or trees from a host over your own ssh (the remote needs the spate binary),
    /// or from a `spate serve` daemon.
    ///
    /// `[user@]host:path` as with scp: relative to your home there, or absolute; a glob in the
    /// last component is expanded on the remote (quote it: host:'logs/*.gz'). Everything
    /// lands in LOCALDIR, which must exist. Integrity (BLAKE3), resume (--resume after an
    /// interruption) and modes and times work as for send.
    ///
    /// `host:PORT:path` (or --daemon) asks a daemon instead: paths are relative to what your
    /// key may read there (its --root, or the key's dir=), globs may be in any component,
    /// and symbolic links are never followed. The daemon must let your key fetch (not
    /// send-only) and sends at its own rate policy; --rate still caps the download (this side
    /// lets new data through no faster, spec §7.4).
    ///
    /// Examples:
    ///   spate get alice@server:big.iso .
    ///   spate get -r server:/srv/photos/2024 ~/photos/
    ///   spate get server:'logs/*.gz' logs/
    ///   spate get server:7373:'outgoing/*.iso' .          # from a daemon
    #[command(verbatim_doc_comment)]
    Get(GetArgs),
    /// Copy like scp: to a host if the destination is HOST:PATH, from one if the sources are.
    ///
    /// Examples:
    ///   spate cp -r photos/ server:backup/       # = spate send
    ///   spate cp server:backup/big.iso .          # = spate get
    #[command(verbatim_doc_comment)]
    Cp(SendArgs),
    /// The sending end of `spate get`, started by it over ssh (not for direct use).
    #[command(hide = true)]
    PushOnce {
        #[arg(long)]
        peer_key: String,
        #[arg(long)]
        token: String,
        #[arg(short, long)]
        recursive: bool,
        #[arg(long)]
        resume: bool,
        #[arg(long, value_parser = parse_port_range)]
        port_range: Option<(u16, u16)>,
        #[command(flatten)]
        rate: RateArgs,
        #[arg(required = true, last = true)]
        paths: Vec<String>,
    },
    /// Create an identity: an X25519 key pair for authenticated sessions.
    ///
    /// Writes the private key (mode 0600) to $XDG_CONFIG_HOME/spate/id_x25519 (else
    /// ~/.config/spate/id_x25519) or --out, and the public key beside it as NAME.pub, one line
    /// to copy into a server's authorized_keys. Prints the public key and its fingerprint.
    /// `spate send` uses it to authenticate to servers (--identity to pick another file).
    Keygen {
        /// Where to write the private key.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Comment for the public key line (default: USER@HOSTNAME).
        #[arg(long)]
        comment: Option<String>,
        /// Replace an existing key (whoever trusts the old one will refuse the new one).
        #[arg(long)]
        force: bool,
        /// Show the existing identity instead of creating one.
        #[arg(long)]
        show: bool,
    },
    /// Print a shell completion script.
    ///
    /// Examples:
    ///   spate completions bash > ~/.local/share/bash-completion/completions/spate
    ///   spate completions zsh > "${fpath[1]}/_spate"
    ///   spate completions fish > ~/.config/fish/completions/spate.fish
    #[command(verbatim_doc_comment)]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), of spate or of one subcommand.
    ///
    /// Examples:
    ///   spate man | man -l -
    ///   spate man send > spate-send.1
    #[command(verbatim_doc_comment)]
    Man {
        /// A subcommand (serve, send, keygen, demo, …); without it, the page of spate itself.
        subcommand: Option<String>,
    },
    /// Demonstrate a transfer over an emulated long, lossy link (no network or root needed).
    ///
    /// Starts a receiver, a user-space impaired link and a sender in this process over
    /// loopback, sends a generated file, and reports goodput, retransmissions and how TCP
    /// would fare on the same path.
    Demo {
        /// Size of the generated file (binary units: 64M, 1G).
        #[arg(long, default_value = "128M", value_parser = parse_size)]
        size: u64,
        /// Capacity of the emulated link (bits per second: 800k, 200M, 1.5G).
        #[arg(long, default_value = "200M", value_parser = parse_rate)]
        link: u64,
        /// Round-trip time of the emulated link, milliseconds.
        #[arg(long, default_value_t = 100.0)]
        rtt_ms: f64,
        /// Random loss of the emulated link, percent, each direction.
        #[arg(long, default_value_t = 1.0)]
        loss_pct: f64,
        #[command(flatten)]
        rate: RateArgs,
        /// Print the final statistics as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(short, long)]
        quiet: bool,
    },
}

#[derive(Args)]
struct SendArgs {
    /// Files (and with -r, directories) to send, then HOST[:PORT]:DEST.
    #[arg(required = true, num_args = 2.., value_name = "PATH... HOST[:PORT]:DEST")]
    args: Vec<String>,
    /// Send directories and everything below them.
    #[arg(short, long)]
    recursive: bool,
    /// With -r: leave out what matches PATTERN (a glob; with a '/', matched against the path
    /// as named on the receiver, e.g. 'photos/raw'; without, against the name, e.g. '*.tmp').
    /// Repeat it; with --include, the first matching rule decides.
    #[arg(long, value_name = "PATTERN")]
    exclude: Vec<String>,
    /// With -r: send what matches PATTERN even if a later --exclude matches it.
    #[arg(long, value_name = "PATTERN")]
    include: Vec<String>,
    /// Keep permission bits and modification times (always on; accepted for scp users).
    #[arg(short = 'p', long)]
    preserve: bool,
    /// --include and --exclude in command-line order (filled in from the matches).
    #[arg(skip)]
    rules: Vec<(String, bool)>,
    #[command(flatten)]
    rate: RateArgs,
    /// Resume an interrupted transfer: the receiver reports what it already holds (files in
    /// place with the same BLAKE3 digest, and blocks of partial files that still match their
    /// journal) and only the rest is sent. Harmless when nothing was interrupted. A damaged
    /// partial file is repaired, never accepted: each file is still verified whole.
    #[arg(long)]
    resume: bool,
    /// Print the final statistics as JSON on stdout; `--json=events` streams one JSON object
    /// per line instead, for automation: "start", "progress" (every 500 ms: bytes, files,
    /// rate, ETA, and "waiting_for": "receiver_disk" or "source_disk" with "waiting_share"
    /// when a disk, not the network, held the transfer back at least a quarter of the time,
    /// or "receiver_check" while a resuming receiver checks its partial files, and "mode":
    /// the rate controller's, "delay", "competitive" or "following-bbr" with --compete),
    /// "file" (each file or directory delivered), and
    /// "done" (the statistics, with "first_data_s", "file_bytes_read", and "competing_s" and
    /// "following_bbr_s": how long --compete acted) or "error" (message and exit code).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "summary", require_equals = true, value_name = "MODE")]
    json: Option<JsonMode>,
    /// No progress bar or summary (errors are still printed).
    #[arg(short, long)]
    quiet: bool,
    /// Threads that seal and send full batches besides the sending loop, for transfers the
    /// CPU limits (each seals ~30 Gbit/s of AES-256-GCM) [default: none below 4 cores, else
    /// all but two, at most 8].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=64))]
    sealers: Option<u16>,
    /// Over ssh: the remote receiver writes with direct I/O (O_DIRECT, as `spate serve
    /// --direct-io`; it needs a remote spate that knows the option). A daemon (HOST:PORT:DEST)
    /// writes as its own `spate serve --direct-io` says. With `spate cp HOST:PATH… LOCALDIR`,
    /// this side writes with direct I/O (as `spate get --direct-io`).
    #[arg(long)]
    direct_io: bool,
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    remote: SshArgs,
}

/// How a client reaches a `spate serve` daemon: keys, timeouts (`send` and `get`).
#[derive(Args, Clone)]
struct ClientArgs {
    /// Give up if the server does not answer within this many seconds.
    #[arg(long, default_value_t = 10.0)]
    connect_timeout: f64,
    /// Give up when the server stops answering for this many seconds during the transfer
    /// (outages shorter than this are ridden out).
    #[arg(long, default_value_t = 60.0)]
    idle_timeout: f64,
    /// This client's private key [default: $XDG_CONFIG_HOME/spate/id_x25519, from
    /// `spate keygen`].
    #[arg(long, value_name = "FILE")]
    identity: Option<PathBuf>,
    /// A one-time token from `spate serve --token`: no identity or known_hosts needed.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Packet cipher. auto: AES-256-GCM where the CPU has AES instructions, else
    /// ChaCha20-Poly1305. none: data is authenticated but NOT encrypted — for measuring
    /// the cost of encryption only.
    #[arg(long, value_enum, default_value_t = CipherArg::Auto)]
    cipher: CipherArg,
    /// Refuse a server whose key is not yet in known_hosts (instead of recording it on
    /// first contact).
    #[arg(long)]
    strict_host_keys: bool,
    /// The file of pinned server keys [default: $XDG_CONFIG_HOME/spate/known_hosts].
    #[arg(long, value_name = "FILE")]
    known_hosts: Option<PathBuf>,
    /// For HOST:PATH: talk to a `spate serve` daemon on port 7373 instead of starting the
    /// other end over ssh.
    #[arg(long)]
    daemon: bool,
}

/// How to start the remote end over ssh (`[user@]host:PATH`).
#[derive(Args, Clone)]
struct SshArgs {
    /// The ssh command, with options [default: $SPATE_SSH, else ssh]; for example
    /// --ssh "ssh -p 2222 -i ~/.ssh/lab".
    #[arg(long, value_name = "COMMAND")]
    ssh: Option<String>,
    /// The spate binary on the remote host.
    #[arg(long, value_name = "PATH", default_value = "spate")]
    remote_spate: String,
    /// UDP ports the remote end may use, for firewalls: LO-HI.
    #[arg(long, value_name = "LO-HI", value_parser = parse_port_range)]
    port_range: Option<(u16, u16)>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum JsonMode {
    /// The final statistics, once.
    Summary,
    /// One event per line.
    Events,
}

#[derive(Clone, Copy, ValueEnum)]
enum CipherArg {
    Auto,
    #[value(name = "aes-256-gcm")]
    Aes256Gcm,
    #[value(name = "chacha20-poly1305")]
    Chacha20Poly1305,
    None,
}

#[derive(Args)]
struct GetArgs {
    /// [USER@]HOST:PATH... or HOST:PORT:PATH... (one host), then LOCALDIR.
    #[arg(required = true, num_args = 2.., value_name = "HOST[:PORT]:PATH... LOCALDIR")]
    args: Vec<String>,
    /// Fetch directories and everything below them.
    #[arg(short, long)]
    recursive: bool,
    /// Fetch only what LOCALDIR does not hold yet from an interrupted download.
    #[arg(long)]
    resume: bool,
    #[command(flatten)]
    rate: RateArgs,
    #[command(flatten)]
    remote: SshArgs,
    #[command(flatten)]
    client: ClientArgs,
    /// Print the session's statistics as JSON on stdout; `--json=events` streams one JSON
    /// object per line instead: "start" (entries and bytes, once the list of files is
    /// known), "progress" (every 500 ms: bytes, files, rate, ETA), "file" (each entry placed
    /// and verified), then "done" (the statistics) or "error" (message and exit code).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "summary", require_equals = true, value_name = "MODE")]
    json: Option<JsonMode>,
    /// No summary (errors are still printed).
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    direct: DirectIoArgs,
}

/// `--direct-io` of the commands that receive (`serve`, `get`).
#[derive(Args, Clone, Copy)]
struct DirectIoArgs {
    /// Write received files with direct I/O (O_DIRECT): each whole 1 MiB block goes from
    /// memory to the disk past the page cache, which saves the receiver most of its CPU per
    /// byte on local disks (ext4, XFS; `spate-lab bench-io`) and leaves the page cache to other
    /// work. Where the file system refuses it (tmpfs before Linux 6.6, some network file
    /// systems) files are written as usual. Not for disks slower per request than the network:
    /// each block is one synchronous write.
    #[arg(long)]
    direct_io: bool,
}

#[derive(Args)]
struct RateArgs {
    /// Rate policy: fair shares equally with other Spate flows; high takes about twice a fair
    /// share; low uses only capacity others leave idle (it gives way to any queue other
    /// traffic holds, TCP included, for background jobs); fixed sends at --rate regardless
    /// (unfair to everything else on the path).
    #[arg(long, value_enum, default_value_t = PolicyArg::Fair)]
    policy: PolicyArg,
    /// Rate cap, or the rate for --policy fixed (bits per second: 800k, 200M, 1.5G).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// Never send slower than this (bits per second).
    #[arg(long, value_parser = parse_rate)]
    min_rate: Option<u64>,
    /// With --policy fair or high: when loss-based TCP (CUBIC, Reno) fills the bottleneck's
    /// buffer, compete with it for a fair share (high: about two) instead of yielding.
    /// Experimental: it competes when a drain at one of the instants all Spate flows drain at
    /// (every 8 s of UTC, so hosts need synchronised clocks) finds the queue still standing,
    /// and other Spate flows that started at different times are still taken for such traffic
    /// now and then; see docs/design.md, "Sharing with TCP". The progress line shows when it
    /// competes, and the summary for how long.
    #[arg(long)]
    compete: bool,
    /// Coding: repair packets that rebuild lost packets at the receiver without a round
    /// trip. auto (the default) codes the last round trips of a transfer, with redundancy
    /// following the loss the path shows (none on a loss-free path); off sends none; a rate
    /// (2% or 0.02, at most 6.25%) codes everything with that redundancy. Lost packets still
    /// count as losses for rate control.
    #[arg(long, value_name = "auto|off|RATE", default_value = "auto", value_parser = parse_fec)]
    fec: spate_proto::coding::Fec,
}

fn parse_fec(s: &str) -> Result<spate_proto::coding::Fec, String> {
    spate_proto::coding::Fec::parse(s)
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PolicyArg {
    Fair,
    High,
    Low,
    Fixed,
}

impl RateArgs {
    fn config(&self) -> Result<RateConfig> {
        let policy = match self.policy {
            PolicyArg::Fair => Policy::Fair,
            PolicyArg::High => Policy::High,
            PolicyArg::Low => Policy::Low,
            PolicyArg::Fixed => Policy::Fixed,
        };
        let mut cfg = if policy == Policy::Fixed {
            let Some(r) = self.rate else {
                bail!("--policy fixed needs --rate (for example --rate 200M)");
            };
            RateConfig::fixed(r)
        } else {
            let mut c = RateConfig::adaptive(policy);
            c.rate_bps = self.rate.unwrap_or(0);
            c
        };
        if self.compete {
            if !matches!(policy, Policy::Fair | Policy::High) {
                bail!("--compete applies to --policy fair and high only");
            }
            cfg.compete = true;
        }
        if let Some(m) = self.min_rate {
            if self.rate.is_some_and(|r| m > r) {
                bail!("--min-rate is above --rate");
            }
            cfg.min_rate_bps = m;
        }
        Ok(cfg)
    }
}

fn main() -> ExitCode {
    spate::clock::process_start();
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let sub = matches
        .subcommand_matches("send")
        .or(matches.subcommand_matches("cp"));
    if let (Command::Send(a) | Command::Cp(a), Some(m)) = (&mut cli.command, sub) {
        a.rules = filter_rules(m);
        if let Err(e) = apply_config(a, m) {
            eprintln!("spate: error: {e:#}");
            return ExitCode::from(spate::exit::Exit::Input as u8);
        }
    }
    let events = match &cli.command {
        Command::Send(a) | Command::Cp(a) => a.json == Some(JsonMode::Events),
        Command::Get(g) => g.json == Some(JsonMode::Events),
        _ => false,
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spate: error: {e:#}");
            let code = spate::exit::code(&e);
            if events {
                Events::emit(serde_json::json!({
                    "event": "error", "message": format!("{e:#}"), "exit_code": code,
                }));
            }
            ExitCode::from(code)
        }
    }
}

/// What senders may ask of `spate serve` (checked before anything is created).
#[derive(clap::Args)]
struct ServeLimits {
    /// Transfers moving data at once; more are refused with "busy, try again later".
    /// Senders that have not yet proven their address do not count (they are limited apart).
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_sessions: usize,
    /// Refuse a transfer of more files and directories than this.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    max_entries: usize,
    /// Refuse a transfer with a file larger than this (binary units: 512G, 4T).
    #[arg(long, default_value = "4T", value_parser = parse_size, value_name = "SIZE")]
    max_file_size: u64,
    /// Refuse a transfer larger than this in all (binary units).
    #[arg(long, default_value = "16T", value_parser = parse_size, value_name = "SIZE")]
    max_bytes: u64,
    /// Refuse a transfer with paths more than this many directories below its destination.
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_depth: usize,
    /// Refuse a transfer when it and the transfers in progress would claim more than this
    /// together (binary units). Without it, only the free space below --root limits them: a
    /// fresh transfer larger than the free space is refused at once, not when the disk fills.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    quota: Option<u64>,
    /// Write received files at most this fast, all transfers together (bits per second:
    /// 400M, 2G), for disks shared with other work. Senders slow down to it — each session
    /// tells its sender how much its writer can still take (spec §7.4) — instead of losing
    /// packets to a full queue.
    #[arg(long, value_parser = parse_rate, value_name = "RATE")]
    write_rate: Option<u64>,
    /// Send each download (`spate get HOST:PORT:PATH`) at most this fast (bits per second:
    /// 400M, 2G). Downloads use the fair policy: they share the path with other traffic, and
    /// clients cannot ask for more.
    #[arg(long, value_parser = parse_rate, value_name = "RATE")]
    send_rate: Option<u64>,
    /// Threads that open (decrypt and check) packets besides the network thread, when
    /// packets arrive faster than it alone opens them (one core opens ~30 Gbit/s of
    /// AES-256-GCM) [default: none below 4 cores, else all but two, at most 8].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=64))]
    openers: Option<u16>,
    #[command(flatten)]
    direct: DirectIoArgs,
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve {
            listen,
            root,
            key,
            authorized_keys,
            token,
            print_key,
            retry_always,
            once,
            port_range,
            json,
            discard,
            limits: l,
        } => {
            let limits_now = Limits {
                max_entries: l.max_entries,
                max_file_size: l.max_file_size,
                max_bytes: l.max_bytes,
                max_depth: l.max_depth,
                max_sessions: l.max_sessions.max(1),
                quota: l.quota,
            };
            if once {
                let root = root.context("--root is required")?;
                return serve_once(&root, listen, port_range, limits_now, l.direct.direct_io);
            }
            let key = match key {
                Some(k) => k,
                None => spate::keys::config_dir()?.join("host_x25519"),
            };
            let identity = host_identity(&key)?;
            if print_key {
                println!("{}", identity.public.line());
                println!("fingerprint {}", identity.public.fingerprint());
                return Ok(());
            }
            let root = root.context("--root is required")?;
            let limits = limits_now;
            let opts = ServeOpts {
                listen,
                discard,
                limits,
                write_rate: l.write_rate,
                send_rate: l.send_rate,
                openers: l.openers,
                direct_io: l.direct.direct_io,
                token,
                retry_always,
                json,
                authorized_keys,
                port_range,
            };
            serve(&root, identity, &opts)
        }
        Command::Send(a) => send_cmd(&a),
        Command::Get(g) => get_cmd(&g),
        Command::Cp(a) => cp_cmd(a),
        Command::PushOnce {
            peer_key,
            token,
            recursive,
            resume,
            port_range,
            rate,
            paths,
        } => {
            watch_stdin_and_exit();
            spate::get::push_once(
                &paths,
                recursive,
                resume,
                &peer_key,
                &token,
                port_range,
                (rate.config()?, rate.fec),
            )
        }
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "spate", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { subcommand } => man(subcommand.as_deref()),
        Command::Keygen {
            out,
            comment,
            force,
            show,
        } => keygen(out, comment, force, show),
        Command::Demo {
            size,
            link,
            rtt_ms,
            loss_pct,
            rate,
            json,
            quiet,
        } => {
            if !(0.0..=50.0).contains(&loss_pct) || !(0.0..=10_000.0).contains(&rtt_ms) {
                bail!("--loss-pct must be 0..50 and --rtt-ms 0..10000");
            }
            let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
            let cfg = demo::DemoConfig {
                size,
                path: PathConfig {
                    rate_bps: link,
                    rtt,
                    loss: loss_pct / 100.0,
                    queue: rtt.max(Duration::from_millis(10)),
                    seed: 1,
                },
                rate: rate.config()?,
                fec: rate.fec,
                quiet: quiet || json,
            };
            if !cfg.quiet {
                eprintln!(
                    "spate demo: sending {} over an emulated {} link, {rtt_ms:.0} ms RTT, {loss_pct} % loss…",
                    human_bytes(size),
                    spate::rate::format_rate(link as f64)
                );
            }
            let r = demo::run(&cfg)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", r.text());
            }
            Ok(())
        }
    }
}

/// `LO-HI` UDP ports.
fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or_else(|| format!("'{s}' is not LO-HI (for example 60000-60100)"))?;
    let (lo, hi): (u16, u16) = (
        lo.parse().map_err(|_| format!("'{lo}' is not a port"))?,
        hi.parse().map_err(|_| format!("'{hi}' is not a port"))?,
    );
    if lo == 0 || lo > hi {
        return Err(format!("'{s}': the range must be LO-HI with 0 < LO <= HI"));
    }
    Ok((lo, hi))
}

/// Bind the socket of a server on `ip`: at the first free port of `range`, else any port.
fn bind_socket(ip: std::net::IpAddr, range: Option<(u16, u16)>) -> Result<spate::udp::Socket> {
    spate::udp::Socket::bind_in_range(ip, range).with_context(|| match range {
        Some((lo, hi)) if lo == hi => format!(
            "cannot listen on port {lo} (is another spate serve running there? choose another \
             port with --listen)"
        ),
        Some((lo, hi)) => format!("no free UDP port in {lo}-{hi} (--port-range)"),
        None => "cannot open a UDP socket".to_owned(),
    })
}

/// `spate serve --once`: one session for whoever holds the token printed on stdout (the
/// client that started this over ssh), then exit.
fn serve_once(
    root: &std::path::Path,
    listen: SocketAddr,
    range: Option<(u16, u16)>,
    limits: Limits,
    direct_io: bool,
) -> Result<()> {
    use std::io::Write;
    let root = Root::new(root)?;
    let identity = spate::keys::Identity::generate()?;
    let public = identity.public;
    let secret = spate::random::bytes16();
    let range = range.or((listen.port() != DEFAULT_PORT).then_some((listen.port(), listen.port())));
    let access = spate::access::Access::default().with_token(secret);
    let mut server = Server::on_socket(bind_socket(listen.ip(), range)?, root, identity, access)?
        .limits(limits)
        .direct_io(direct_io)
        .once(Duration::from_secs(30));
    let token = spate::access::encode_token(&public.0, &secret);
    let ip = spate::ssh::connection_address();
    let port = server.local_addr().port();
    let mut out = std::io::stdout();
    writeln!(out, "{} 1 {ip} {port} {token}", spate::ssh::ANNOUNCE)?;
    out.flush()?;
    let stop = Arc::new(AtomicBool::new(false));
    let gone = Arc::clone(&stop);
    spate::ssh::on_stdin_end(move || gone.store(true, std::sync::atomic::Ordering::Relaxed));
    let mut failed = None;
    server.run(&stop, |s| {
        if let Some(e) = &s.error {
            failed = Some(spate::report::escape(e));
        }
    })?;
    match failed {
        Some(e) => bail!("the session failed: {e}"),
        None => Ok(()),
    }
}

/// The server's key at `path`, created on first start.
fn host_identity(path: &std::path::Path) -> Result<spate::keys::Identity> {
    use spate::keys::Identity;
    if path.exists() {
        return Identity::load(path);
    }
    let id = Identity::generate()?;
    id.save(path, "spate serve host key", false)?;
    eprintln!(
        "spate serve: created the server key {} ({})",
        path.display(),
        id.public.fingerprint()
    );
    Ok(id)
}

struct ServeOpts {
    listen: SocketAddr,
    discard: bool,
    limits: Limits,
    /// Bits per second all sessions together may write (`--write-rate`).
    write_rate: Option<u64>,
    /// Bits per second each download is sent at most (`--send-rate`).
    send_rate: Option<u64>,
    /// Opening threads (`--openers`).
    openers: Option<u16>,
    /// Write with `O_DIRECT` (`--direct-io`).
    direct_io: bool,
    token: bool,
    retry_always: bool,
    json: bool,
    authorized_keys: Option<PathBuf>,
    port_range: Option<(u16, u16)>,
}

fn serve(root: &std::path::Path, identity: spate::keys::Identity, o: &ServeOpts) -> Result<()> {
    let root = Root::new(root)?;
    let keys_file = match &o.authorized_keys {
        Some(f) => f.clone(),
        None => spate::keys::config_dir()?.join("authorized_keys"),
    };
    let mut access = if keys_file.exists() || !o.token {
        spate::access::Access::from_file(&keys_file).with_context(|| {
            format!(
                "no usable authorized_keys: put the clients' public keys (the line `spate keygen` \
                 prints) in {}, or start with --token for a one-off transfer",
                keys_file.display()
            )
        })?
    } else {
        spate::access::Access::default()
    };
    let mut token_line = None;
    if o.token {
        let secret = spate::random::bytes16();
        access = access.with_token(secret);
        token_line = Some(spate::access::encode_token(&identity.public.0, &secret));
    }
    let fingerprint = identity.public.fingerprint();
    let keys = access.len();
    let range = o
        .port_range
        .or(Some((o.listen.port(), o.listen.port())))
        .filter(|r| r.0 != 0);
    let socket = bind_socket(o.listen.ip(), range)?;
    let mut server = Server::on_socket(socket, root.clone(), identity, access)?
        .limits(o.limits)
        .direct_io(o.direct_io);
    if let Some(bps) = o.write_rate {
        server = server.write_rate((bps / 8).max(1))?;
    }
    if let Some(bps) = o.send_rate {
        server = server.send_rate(bps);
    }
    if let Some(n) = o.openers {
        server = server.openers(usize::from(n))?;
    }
    if o.discard {
        server = server.discard();
    }
    if o.retry_always {
        server = server.retry_always();
    }
    eprintln!(
        "spate serve: listening on {} (UDP), writing below {}",
        server.local_addr(),
        root.path().display()
    );
    eprintln!(
        "spate serve: server key {fingerprint}; {keys} authorized key(s) in {}",
        keys_file.display()
    );
    if let Some(t) = token_line {
        eprintln!("spate serve: one-time token (valid while this server runs):");
        eprintln!("  spate send --token {t} FILE... HOST:DEST");
    }
    if let Some(note) = server.buffer_note() {
        eprintln!("spate serve: {note}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let json = o.json;
    server.run(&stop, |s| {
        if json {
            return println!("{}", session_json(s));
        }
        let mut resumed = String::new();
        if s.resumed > 0 {
            resumed = format!(" (+ {} resumed)", human_bytes(s.resumed));
        }
        if s.damaged_blocks > 0 {
            resumed += &format!(
                " ({} damaged block(s) of partial files sent again)",
                s.damaged_blocks
            );
        }
        if let Some(note) = s.direct_note() {
            resumed += &format!(" ({note})");
        }
        let client = spate::report::escape(&s.client);
        match &s.error {
            None => eprintln!(
                "{} session {:08x} [{client}, {}]: {} {} entries, {}{resumed} in {:.1} s",
                s.peer,
                s.session,
                s.cipher,
                s.direction,
                s.objects,
                human_bytes(s.bytes),
                s.seconds
            ),
            // The reason may be the peer's own words (its CLOSE): escaped, never printed raw.
            Some(e) => eprintln!(
                "{} session {:08x} [{client}] failed ({}): {}{resumed}",
                s.peer,
                s.session,
                match s.direction {
                    "sent" => "sending",
                    "request" => "download request",
                    _ => "receiving",
                },
                spate::report::escape(e)
            ),
        }
    })
}

/// The manual page of spate, or of `sub`, generated from the command-line definition (so it
/// cannot drift from `--help`).
fn man(sub: Option<&str>) -> Result<()> {
    let cmd = Cli::command();
    let page = match sub {
        None => cmd,
        Some(name) => {
            let mut c = cmd
                .find_subcommand(name)
                .cloned()
                .with_context(|| format!("no subcommand '{name}' (see spate --help)"))?;
            let full = format!("spate-{name}");
            c = c
                .name(full.clone())
                .bin_name(full)
                .version(env!("CARGO_PKG_VERSION"));
            c
        }
    };
    clap_mangen::Man::new(page)
        .render(&mut std::io::stdout())
        .context("cannot write the page")
}

/// One session's log line as JSON (`serve --json`). Peer-supplied text (a CLOSE reason) is a
/// JSON string, escaped by the encoder.
fn session_json(s: &spate::serve::SessionLog) -> String {
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    serde_json::json!({
        "time": time,
        "session": format!("{:08x}", s.session),
        "peer": s.peer.to_string(),
        "client": s.client,
        "direction": s.direction,
        "cipher": s.cipher,
        "entries": s.objects,
        "bytes": s.bytes,
        "resumed_bytes": s.resumed,
        "damaged_blocks": s.damaged_blocks,
        "direct_io_bytes": s.direct_bytes,
        "dropped_unauthentic": s.dropped_not_authentic,
        "seconds": s.seconds,
        "outcome": if s.error.is_none() { "ok" } else { "failed" },
        "error": s.error,
    })
    .to_string()
}

/// Where `send` sends to.
enum Target {
    /// A `spate serve` daemon at `host:port`.
    Daemon {
        host: String,
        port: u16,
        dest: String,
    },
    /// A one-off receiver started over ssh on `host` (`[user@]host`).
    Ssh { host: String, dest: String },
}

/// `HOST:PORT:DEST` is a daemon; `[user@]HOST:DEST` (like scp) a receiver started over ssh,
/// unless `daemon` (then the default port). IPv6 hosts in brackets.
fn parse_target(t: &str, daemon: bool) -> Result<Target> {
    let bad = || {
        anyhow::anyhow!(
            "'{t}' is not [USER@]HOST:DEST or HOST:PORT:DEST (for example 'alice@server:incoming', \
             'server:/srv/in/', 'server:7373:.', '[::1]:7373:incoming')"
        )
    };
    let (host, rest) = if let Some(r) = t.strip_prefix('[') {
        let (h, rest) = r.split_once(']').ok_or_else(bad)?;
        (h.to_owned(), rest.strip_prefix(':').ok_or_else(bad)?)
    } else if let Some((user, r)) = t.split_once('@').filter(|(u, _)| !u.contains(':')) {
        let (h, rest) = r.split_once(':').ok_or_else(bad)?;
        (format!("{user}@{h}"), rest)
    } else {
        let (h, rest) = t.split_once(':').ok_or_else(bad)?;
        (h.to_owned(), rest)
    };
    if host.is_empty() || host.ends_with('@') {
        return Err(bad());
    }
    match rest.split_once(':') {
        Some((p, dest)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            if host.contains('@') {
                bail!("'{t}': USER@ is for ssh (HOST:DEST); a daemon is HOST:PORT:DEST");
            }
            let port = p.parse().map_err(|_| bad())?;
            Ok(Target::Daemon {
                host,
                port,
                dest: dest.to_owned(),
            })
        }
        _ if daemon => Ok(Target::Daemon {
            host,
            port: DEFAULT_PORT,
            dest: rest.to_owned(),
        }),
        _ => Ok(Target::Ssh {
            host,
            dest: rest.to_owned(),
        }),
    }
}

fn send_cmd(a: &SendArgs) -> Result<()> {
    use spate::exit::{tag, Exit};
    let input = |e| tag(e, Exit::Input);
    let (target, paths) = a.args.split_last().expect("clap requires two");
    let target = parse_target(target, a.client.daemon).map_err(input)?;
    let (dest, remote_root) = match &target {
        Target::Daemon { dest, .. } => (dest.clone(), None),
        Target::Ssh { dest, .. } => {
            let (root, dest) = spate::ssh::remote_root(dest);
            (dest, Some(root))
        }
    };
    let dest = scan::normalize_dest(&dest).map_err(input)?;
    let sources: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    let filter = filter_from_args(a).map_err(input)?;
    let mut plan = scan::plan_filtered(&sources, &dest, a.recursive, &filter).map_err(input)?;
    for (p, why) in &plan.skipped {
        eprintln!("spate: skipping '{}' ({why})", p.display());
    }
    let total = plan.manifest.total_bytes();
    let json = a.json.is_some();
    if a.resume {
        // The receiver checks what it holds against the digests before anything is sent.
        let hashing = spate::progress::Progress::new(total, a.quiet || json || total < 64 << 20);
        let mut hashed = 0;
        plan.compute_digests(|n| {
            hashed += n;
            hashing.set(hashed, "hashing (to resume)");
        })
        .map_err(input)?;
        hashing.finish();
    } else {
        plan.stream_digests();
    }
    let connect_timeout = Duration::from_secs_f64(a.client.connect_timeout.clamp(0.1, 3600.0));
    let (server, security, remote) = match &target {
        Target::Daemon { host, port, .. } => {
            if a.direct_io {
                return Err(input(anyhow::anyhow!(
                    "--direct-io is for a receiver started over ssh; the daemon at {host}:{port} \
                     writes as its own `spate serve --direct-io` says: leave the option out"
                )));
            }
            let server = resolve_daemon(host, *port)?;
            let pin = Some((host.as_str(), *port, server));
            let security =
                client_security(&a.client, a.quiet || json, a.client.token.as_deref(), pin)
                    .map_err(input)?;
            (server, security, None)
        }
        Target::Ssh { host, .. } => {
            // Logging in may take a prompt; the UDP part has its own timeout.
            let opts = ssh_options(
                &a.remote.ssh,
                &a.remote.remote_spate,
                a.remote.port_range,
                connect_timeout.max(Duration::from_secs(30)),
            );
            let remote = spate::ssh::start(host, remote_root.unwrap_or("."), &opts, a.direct_io)?;
            let security = client_security(&a.client, a.quiet || json, Some(&remote.token), None)
                .map_err(input)?;
            (remote.addr, security, Some(remote))
        }
    };
    let names: Vec<String> = plan
        .manifest
        .entries
        .iter()
        .map(|e| e.path.clone())
        .collect();
    let bar = spate::progress::Progress::new(total, a.quiet || json).with_files(names.clone());
    let mut events = (a.json == Some(JsonMode::Events)).then(|| Events::new(names, total));
    let cfg = SendConfig {
        server,
        rate: a.rate.config()?,
        connect_timeout,
        idle_timeout: Duration::from_secs_f64(a.client.idle_timeout.clamp(1.0, 86_400.0)),
        resume: a.resume,
        fec: a.rate.fec,
        security,
        sealers: a
            .sealers
            .map_or_else(spate::seal_pool::auto_threads, usize::from),
    };
    let result = send(&plan, &cfg, |s| {
        bar.update(s);
        if let Some(ev) = events.as_mut() {
            ev.progress(s);
        }
    });
    bar.finish();
    let remote_addr = remote.as_ref().map(|r| r.addr);
    if let Some(r) = remote {
        // After a success the remote receiver exits by itself once its session ended; after
        // a failure, dropping it ends ssh, and the remote sees its stdin close and exits.
        if result.is_ok() {
            r.finish(Duration::from_secs(10));
        }
    }
    let result = match (result, &remote_addr) {
        (Err(e), Some(addr)) if spate::exit::code(&e) == Exit::Unreachable as u8 => {
            return Err(tag(
                anyhow::anyhow!(
                    "the receiver started over ssh, but no UDP answer came from {addr} within \
                     {:.0} s: is UDP to port {} blocked by a firewall? (open a range and pass it \
                     with --port-range LO-HI)",
                    connect_timeout.as_secs_f64(),
                    addr.port()
                ),
                Exit::Unreachable,
            ));
        }
        (r, _) => r,
    };
    let result = match (result, &target) {
        (Err(e), Target::Daemon { host, port, .. })
            if spate::exit::code(&e) == Exit::UntrustedServer as u8 =>
        {
            return Err(tag(
                key_changed(&a.client, host, *port, &e),
                Exit::UntrustedServer,
            ));
        }
        (r, _) => r?,
    };
    let report = Report::new(plan.manifest.entries.len(), &result);
    if let Some(ev) = events.as_mut() {
        ev.done(&report);
    } else if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !a.quiet {
        eprintln!("{}", report.summary());
    }
    Ok(())
}

/// Fill in what the command line left out from `config.toml` (`spate::config`).
fn apply_config(a: &mut SendArgs, m: &clap::ArgMatches) -> Result<()> {
    use clap::parser::ValueSource;
    let path = match std::env::var_os("SPATE_CONFIG") {
        Some(p) => PathBuf::from(p),
        None => match spate::config::default_path() {
            Ok(p) => p,
            Err(_) => return Ok(()),
        },
    };
    let d = spate::config::load(&path)?;
    let unset = |id: &str| m.value_source(id) != Some(ValueSource::CommandLine);
    let bad = |key: &str, e: String| anyhow::anyhow!("in '{}': {key}: {e}", path.display());
    if let (Some(v), true) = (&d.policy, unset("policy")) {
        a.rate.policy = PolicyArg::from_str(v, true).map_err(|e| bad("policy", e))?;
    }
    if let (Some(v), true) = (&d.rate, unset("rate")) {
        a.rate.rate = Some(parse_rate(v).map_err(|e| bad("rate", e.to_string()))?);
    }
    if let (Some(v), true) = (&d.min_rate, unset("min_rate")) {
        a.rate.min_rate = Some(parse_rate(v).map_err(|e| bad("min_rate", e.to_string()))?);
    }
    if let (Some(v), true) = (&d.cipher, unset("cipher")) {
        a.client.cipher = CipherArg::from_str(v, true).map_err(|e| bad("cipher", e))?;
    }
    if let (Some(v), true) = (&d.identity, unset("identity")) {
        a.client.identity = Some(spate::config::expand_home(v));
    }
    if let (Some(v), true) = (&d.ssh, unset("ssh")) {
        a.remote.ssh = Some(v.clone());
    }
    if let (Some(v), true) = (&d.remote_spate, unset("remote_spate")) {
        a.remote.remote_spate = v.clone();
    }
    if let (Some(v), true) = (&d.port_range, unset("port_range")) {
        a.remote.port_range = Some(parse_port_range(v).map_err(|e| bad("port_range", e))?);
    }
    if let (Some(v), true) = (d.connect_timeout, unset("connect_timeout")) {
        a.client.connect_timeout = v;
    }
    if let (Some(v), true) = (d.idle_timeout, unset("idle_timeout")) {
        a.client.idle_timeout = v;
    }
    if let (Some(v), true) = (d.strict_host_keys, unset("strict_host_keys")) {
        a.client.strict_host_keys = v;
    }
    Ok(())
}

/// The --include and --exclude rules in the order given on the command line (the first that
/// matches decides, as with rsync); clap keeps each option's values apart, with their
/// positions.
fn filter_rules(m: &clap::ArgMatches) -> Vec<(String, bool)> {
    let mut rules: Vec<(usize, String, bool)> = Vec::new();
    for (id, include) in [("include", true), ("exclude", false)] {
        if let (Some(idx), Some(vals)) = (m.indices_of(id), m.get_many::<String>(id)) {
            rules.extend(idx.zip(vals).map(|(i, v)| (i, v.clone(), include)));
        }
    }
    rules.sort_by_key(|r| r.0);
    rules.into_iter().map(|(_, p, inc)| (p, inc)).collect()
}

fn filter_from_args(a: &SendArgs) -> Result<scan::Filter> {
    let mut f = scan::Filter::default();
    for (p, include) in &a.rules {
        f.rule(p, *include)?;
    }
    Ok(f)
}

/// Keys and cipher for a send: from --token, or the identity and the pinned server key.
fn client_security(
    c: &ClientArgs,
    quiet: bool,
    token: Option<&str>,
    pin: Option<(&str, u16, SocketAddr)>,
) -> Result<spate::send::Security> {
    use spate::keys::Identity;
    use spate_proto::secure::Cipher;
    let cipher = match c.cipher {
        CipherArg::Auto => spate::pin::default_cipher(),
        CipherArg::Aes256Gcm => Cipher::Aes256Gcm,
        CipherArg::Chacha20Poly1305 => Cipher::ChaCha20Poly1305,
        CipherArg::None => {
            eprintln!(
                "spate: WARNING: --cipher none: the data crosses the network UNENCRYPTED \
                 (authenticated only). Use it to measure the cost of encryption, nothing else."
            );
            Cipher::AuthOnly
        }
    };
    let id_path = match &c.identity {
        Some(p) => p.clone(),
        None => spate::keys::default_identity()?,
    };
    if let Some(t) = token {
        let (server_key, auth) = spate::access::decode_token(t)
            .context("that is not a token printed by `spate serve --token` (spate1-…)")?;
        // The token authorizes; an identity is used if there is one, else a throwaway key.
        let identity = if id_path.exists() {
            Identity::load(&id_path)?
        } else {
            Identity::generate()?
        };
        return Ok(spate::send::Security {
            identity: identity.private,
            server_key,
            cipher,
            auth,
        });
    }
    if !id_path.exists() {
        bail!(
            "no identity at {}: create one with `spate keygen` and add the line it prints to \
             the server's authorized_keys (or use a one-time token: `spate serve --token`)",
            id_path.display()
        );
    }
    let identity = Identity::load(&id_path)?;
    let Some((host, port, server)) = pin else {
        bail!("no server key: give a token or a daemon address");
    };
    let known = match &c.known_hosts {
        Some(f) => f.clone(),
        None => spate::pin::known_hosts_path()?,
    };
    let label = spate::pin::host_label(host, port);
    let timeout = Duration::from_secs_f64(c.connect_timeout.clamp(0.1, 3600.0));
    let pinned =
        spate::pin::server_key(&known, &label, server, timeout, c.strict_host_keys, quiet)?;
    Ok(spate::send::Security {
        identity: identity.private,
        server_key: pinned.key.0,
        cipher,
        auth: [0; 16],
    })
}

/// The address of the daemon at `host`:`port` (exit code "unreachable" if there is none).
fn resolve_daemon(host: &str, port: u16) -> Result<SocketAddr> {
    use spate::exit::{tag, Exit};
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{host}'"))
        .and_then(|mut a| a.next().with_context(|| format!("'{host}' has no address")))
        .map_err(|e| tag(e, Exit::Unreachable))
}

/// The loud error for a server whose key differs from the pinned one.
fn key_changed(c: &ClientArgs, host: &str, port: u16, e: &anyhow::Error) -> anyhow::Error {
    let Some(m) = spate::exit::find::<spate::send::KeyMismatch>(e) else {
        return anyhow::anyhow!("{e:#}");
    };
    if c.token.is_some() {
        return anyhow::anyhow!(
            "the server's key ({}) is not the one in the token: is the token from this \
             server's current run?",
            m.0.fingerprint()
        );
    }
    let label = spate::pin::host_label(host, port);
    let file = c
        .known_hosts
        .clone()
        .or_else(|| spate::pin::known_hosts_path().ok())
        .unwrap_or_default();
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    match spate::keys::lookup_known_host(&text, &label) {
        Some((line, pinned)) => spate::pin::KeyChanged {
            host: label,
            offered: m.0,
            pinned,
            file,
            line,
        }
        .into(),
        None => anyhow::anyhow!("{e:#}"),
    }
}

fn keygen(out: Option<PathBuf>, comment: Option<String>, force: bool, show: bool) -> Result<()> {
    use spate::keys::{default_identity, public_path, Identity};
    let path = match out {
        Some(p) => p,
        None => default_identity()?,
    };
    let id = if show {
        Identity::load(&path)?
    } else {
        let comment = comment.unwrap_or_else(|| {
            let user = std::env::var("USER").unwrap_or_else(|_| "spate".into());
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_default();
            format!("{user}@{host}")
        });
        let id = Identity::generate()?;
        id.save(&path, &comment, force)?;
        eprintln!("spate keygen: private key {} (mode 0600)", path.display());
        eprintln!(
            "spate keygen: public key  {} (add this line to a server's authorized_keys)",
            public_path(&path).display()
        );
        id
    };
    println!("{}", id.public.line());
    println!("fingerprint {}", id.public.fingerprint());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str, daemon: bool) -> String {
        match parse_target(t, daemon) {
            Ok(Target::Daemon { host, port, dest }) => format!("daemon {host} {port} {dest}"),
            Ok(Target::Ssh { host, dest }) => format!("ssh {host} {dest}"),
            Err(e) => format!("error {e}"),
        }
    }

    #[test]
    fn targets_follow_scp_and_a_port_means_a_daemon() {
        assert_eq!(parse("alice@host:backup/", false), "ssh alice@host backup/");
        assert_eq!(parse("host:/srv/in", false), "ssh host /srv/in");
        assert_eq!(parse("host:", false), "ssh host ");
        assert_eq!(parse("host:7373:in", false), "daemon host 7373 in");
        assert_eq!(parse("[::1]:7000:.", false), "daemon ::1 7000 .");
        assert_eq!(parse("[::1]:in", false), "ssh ::1 in");
        assert_eq!(parse("host:in", true), "daemon host 7373 in");
        assert!(parse("alice@host:7373:in", false).starts_with("error"));
        assert!(parse("nohost", false).starts_with("error"));
        assert!(parse(":in", false).starts_with("error"));
        assert!(parse("alice@:in", false).starts_with("error"));
    }
}
