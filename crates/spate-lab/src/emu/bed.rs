//! The test bed: client — emulator — server, as two network namespaces joined through this
//! process.
//!
//! ```text
//!   netns <client>                 this process (host namespace)            netns <server>
//!   10.77.0.1 ── tun ──fd──► [ spate_netmodel::Path: queue, rate, delay, loss ] ──fd──► tun ── 10.77.0.2
//! ```
//!
//! Each namespace has one TUN interface (MTU 1500, a point-to-point /32 route to the other
//! end) whose descriptor this process holds; nothing else connects them, so every packet
//! between client and server crosses the emulated path. Host names `client` and `server` resolve
//! through `/etc/netns/<ns>/hosts`, which `ip netns exec` mounts over `/etc/hosts` (GridFTP looks
//! names up). TCP buffers inside the namespaces are raised to 256 MiB so kernel TCP is limited by
//! the path, not by its window, up to 4 BDP at 1 Gbit/s and 400 ms; TCP defaults to CUBIC
//! ([`allow_cubic`]). IPv6 is off so only the
//! flows' own packets cross. Everything is removed when the value is dropped.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::tun::Tun;
use crate::bench::netns::{ip, run};

/// Client address (inside the client namespace).
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Server address (inside the server namespace).
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

/// The two namespaces and the TUN descriptors joining them.
pub struct Bed {
    /// Client namespace name.
    pub client: String,
    /// Server namespace name.
    pub server: String,
    etc: Vec<PathBuf>,
}

impl Bed {
    /// Create both namespaces and their TUN devices; returns the bed and the descriptors
    /// (client side, server side).
    pub fn create() -> Result<(Bed, Tun, Tun)> {
        if !crate::bench::netns::can_create() {
            bail!("the emulator needs root (network namespaces and TUN devices); run it with sudo");
        }
        let id = std::process::id();
        let mut bed = Bed {
            client: format!("spate-emu-c-{id}"),
            server: format!("spate-emu-s-{id}"),
            etc: Vec::new(),
        };
        allow_cubic()?;
        sweep_stale();
        ip(&["netns", "add", &bed.client])?;
        ip(&["netns", "add", &bed.server])?;
        let c = Tun::create(&format!("sec{id}"))?;
        let s = Tun::create(&format!("ses{id}"))?;
        // GridFTP's server looks up this machine's own name too: inside each namespace it is
        // that namespace's address.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim();
        for (ns, tun, me, peer) in [
            (&bed.client, &c, CLIENT, SERVER),
            (&bed.server, &s, SERVER, CLIENT),
        ] {
            let dev = tun.name();
            ip(&["link", "set", dev, "netns", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &me.to_string(),
                "peer",
                &format!("{peer}/32"),
                "dev",
                dev,
            ])?;
            ip(&[
                "-n",
                ns,
                "link",
                "set",
                dev,
                "mtu",
                "1500",
                "txqueuelen",
                "10000",
                "up",
            ])?;
            let sysctls = [
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv4.tcp_rmem=4096 131072 268435456",
                "net.ipv4.tcp_wmem=4096 65536 268435456",
                "net.ipv4.tcp_no_metrics_save=1",
                "net.ipv4.tcp_congestion_control=cubic",
            ];
            for kv in sysctls {
                run("ip", &["netns", "exec", ns, "sysctl", "-q", "-w", kv])?;
            }
            let dir = PathBuf::from("/etc/netns").join(ns);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let mut hosts = format!("127.0.0.1 localhost\n{CLIENT} client\n{SERVER} server\n");
            if !host.is_empty() {
                hosts += &format!("{me} {host}\n");
            }
            std::fs::write(dir.join("hosts"), hosts)?;
            std::fs::write(dir.join("resolv.conf"), "")?;
            bed.etc.push(dir);
        }
        Ok((bed, c, s))
    }

    /// A command run inside namespace `ns` (`ip netns exec`, which execs: the child's pid is the
    /// program's).
    pub fn command(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }
}

/// Remove what an earlier run that was killed (SIGKILL, a crash) left behind: namespaces and
/// `/etc/netns` directories named after a process that no longer exists.
fn sweep_stale() {
    let Ok(dir) = std::fs::read_dir("/var/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("spate-emu-c-")
            .or_else(|| name.strip_prefix("spate-emu-s-"))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = ip(&["netns", "del", &name]);
                let _ = std::fs::remove_dir_all(PathBuf::from("/etc/netns").join(&name));
            }
        }
    }
}

/// Kernel TCP in the namespaces defaults to CUBIC, Linux's default (GridFTP has no option to
/// choose; iperf3 sets its algorithm per socket). A namespace may only default to an algorithm
/// the host allows unprivileged users, so add `cubic` to
/// `net.ipv4.tcp_allowed_congestion_control` if it is missing (it only widens what unprivileged
/// programs may pick per socket), and say so.
fn allow_cubic() -> Result<()> {
    const KEY: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    let allowed = std::fs::read_to_string(KEY).with_context(|| format!("cannot read {KEY}"))?;
    if allowed.split_whitespace().any(|a| a == "cubic") {
        return Ok(());
    }
    let wider = format!("{} cubic", allowed.trim());
    std::fs::write(KEY, &wider).with_context(|| format!("cannot write {KEY}"))?;
    eprintln!("spate-lab: added cubic to net.ipv4.tcp_allowed_congestion_control (now \"{wider}\") so the namespaces' TCP can default to it");
    Ok(())
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.client]);
        let _ = ip(&["netns", "del", &self.server]);
        for d in &self.etc {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
