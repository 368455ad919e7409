//! `spate-lab`: Spate's laboratory. See `spate-lab --help`.

mod aead_cmd;
mod bench;
mod emu;
mod fec_cmd;
mod grid_cmd;
mod plot;
mod scenario;
mod sim_cmd;
mod vectors_cmd;

use clap::{Parser, Subcommand};

/// As the `spate` program: its ends (`bench-end`, the emulator's Spate processes) run the same
/// library code with the same page-aligned large buffers (`spate::alloc`).
#[global_allocator]
static ALLOC: spate::alloc::PageAligned = spate::alloc::PageAligned;

/// Spate's laboratory: run network experiments on Spate and report tables, time series and
/// plots.
#[derive(Parser)]
#[command(name = "spate-lab", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Sim(sim_cmd::SimArgs),
    Grid(grid_cmd::GridArgs),
    Emu(emu::EmuArgs),
    Calibrate(emu::calibrate::CalibrateArgs),
    Compare(emu::compare::CompareArgs),
    Report(emu::compare::ReportArgs),
    /// One end of a calibration probe (started by calibrate itself).
    #[command(hide = true)]
    CalibEnd(emu::probe::CalibEndArgs),
    /// Measure Spate's speed against raw UDP and TCP on this machine (loopback; a veth pair
    /// between network namespaces when root).
    BenchIo(bench::BenchArgs),
    TestVectors(vectors_cmd::VectorsArgs),
    /// Measure how fast this machine seals and opens packets with AES-256-GCM and
    /// ChaCha20-Poly1305 (aws-lc-rs, as Spate does), on one core and on all: the crypto limit
    /// of encrypted transfers.
    BenchAead(aead_cmd::AeadArgs),
    /// Measure what coding (repair symbols, spec §6.9) costs this machine's CPU: encoding a
    /// block and rebuilding it at 1 % and 2 % loss, in % of a core per Gbit/s.
    BenchFec(fec_cmd::FecArgs),
    /// One end of a bench-io measurement (started by bench-io itself).
    #[command(hide = true)]
    BenchEnd(bench::EndArgs),
}

/// A reader that leaves early (`spate-lab sim … | head`) ends this process as it ends `cat`:
/// quietly, by SIGPIPE. Rust starts programs with SIGPIPE ignored, so the write to the closed
/// pipe fails instead and `println!` panics with a backtrace. Nothing else here can raise it:
/// the lab never writes to its children's stdin, and std sends on sockets with
/// `MSG_NOSIGNAL`.
fn quiet_on_a_closed_pipe() {
    // SAFETY: restores a signal's default action, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    quiet_on_a_closed_pipe();
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Sim(a) => sim_cmd::run(a),
        Command::Grid(a) => grid_cmd::run(a),
        Command::Emu(a) => emu::run(a),
        Command::Calibrate(a) => emu::calibrate::run(a),
        Command::Compare(a) => emu::compare::compare(a),
        Command::Report(a) => emu::compare::report(a),
        Command::CalibEnd(a) => emu::probe::run_end(a),
        Command::BenchIo(a) => bench::run(a),
        Command::BenchEnd(a) => bench::run_end(a),
        Command::TestVectors(a) => vectors_cmd::run(a),
        Command::BenchAead(a) => aead_cmd::run(a),
        Command::BenchFec(a) => fec_cmd::run(a),
    };
    if let Err(e) = res {
        eprintln!("spate-lab: error: {e:#}");
        std::process::exit(1);
    }
}
