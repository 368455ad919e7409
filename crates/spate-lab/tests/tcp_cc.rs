//! The shim behind `spate-lab emu`'s `gridftp-bbr` protocol (`lab/tcpcc/spate-tcp-cc.c`, built
//! into /usr/local/lib by `scripts/lab-setup.sh`): a process started with it preloaded gets the
//! congestion control `SPATE_TCP_CC` names on every TCP socket, its UDP sockets are left alone,
//! and an algorithm the kernel does not have makes `socket()` fail rather than let a comparison
//! run with the wrong one. Skipped, with a message, where the shim is not built or the kernel
//! has no BBR.
//!
//! The process under test is this test binary itself, run again with only [`probe`] selected
//! and the shim preloaded: Rust's standard library opens sockets through libc's `socket()`,
//! which is what the shim wraps in GridFTP.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

/// Where `scripts/lab-setup.sh` installs the shim (`spate-lab`'s `emu/run.rs` looks there).
const SHIM: &str = "/usr/local/lib/spate-tcp-cc.so";
/// Set in the child: [`probe`] reports instead of returning at once.
const PROBE: &str = "SPATE_TCP_CC_PROBE";

/// A TCP socket's congestion control, as the kernel names it.
fn congestion_control(fd: i32) -> std::io::Result<String> {
    let mut name = [0u8; 32];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: `name` is a writable buffer of `len` bytes and `len` is a valid pointer.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let name = &name[..len as usize];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Run in the child only: print what a new TCP socket's congestion control is (or the error
/// opening it), and whether a UDP socket opens.
#[test]
fn probe() {
    if std::env::var_os(PROBE).is_none() {
        return;
    }
    match std::net::TcpListener::bind("127.0.0.1:0") {
        Ok(l) => println!("tcp={}", congestion_control(l.as_raw_fd()).unwrap()),
        Err(e) => println!("tcp-error={}", e.raw_os_error().unwrap_or(0)),
    }
    println!("udp={}", std::net::UdpSocket::bind("127.0.0.1:0").is_ok());
}

/// This binary, run again with only [`probe`], the shim preloaded and `SPATE_TCP_CC=cc`.
fn run_probe(cc: Option<&str>) -> String {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "probe", "--nocapture", "--test-threads=1"])
        .env("LD_PRELOAD", SHIM)
        .env(PROBE, "1")
        .env_remove("SPATE_TCP_CC");
    if let Some(cc) = cc {
        c.env("SPATE_TCP_CC", cc);
    }
    let out = c.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kernel_has(cc: &str) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .is_ok_and(|s| s.split_whitespace().any(|a| a == cc))
}

#[test]
fn the_shim_sets_the_congestion_control_of_tcp_sockets_only() {
    if !Path::new(SHIM).is_file() {
        eprintln!("SKIPPED: {SHIM} is not built (scripts/lab-setup.sh builds it from lab/tcpcc)");
        return;
    }
    if !kernel_has("bbr") {
        // scripts/lab-setup.sh loads tcp_bbr; a kernel without it cannot run gridftp-bbr.
        eprintln!("SKIPPED: this kernel has no BBR (tcp_available_congestion_control)");
        return;
    }
    // An unprivileged process may choose only what tcp_allowed_congestion_control lists.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() == 0 };
    let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .is_ok_and(|s| s.split_whitespace().any(|a| a == "bbr"));
    if !root && !allowed {
        eprintln!("SKIPPED: not root, and bbr is not in tcp_allowed_congestion_control");
        return;
    }
    let out = run_probe(Some("bbr"));
    assert!(out.contains("tcp=bbr\n"), "{out}");
    assert!(out.contains("udp=true\n"), "{out}");

    // Without the variable the shim changes nothing: the default stays.
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let out = run_probe(None);
    assert!(out.contains(&format!("tcp={}\n", default.trim())), "{out}");

    // An algorithm the kernel lacks: socket() fails (ENOENT from setsockopt), the program
    // does not carry on with the default.
    let out = run_probe(Some("no-such-algorithm"));
    assert!(
        out.contains(&format!("tcp-error={}\n", libc::ENOENT)),
        "{out}"
    );
    assert!(out.contains("udp=true\n"), "{out}");
}
