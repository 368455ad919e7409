//! Two network namespaces joined by a veth pair (MTU 1500), for `spate-lab bench-io`: traffic
//! between them crosses a real (virtual) Ethernet link instead of loopback's 64 KiB MTU.
//!
//! Made with `ip(8)`; needs root. Names carry the process id so parallel runs do not collide;
//! everything is removed when the value is dropped (deleting a namespace deletes its end of the
//! veth pair, and with it the other end).

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The pair; `a` sends, `b` receives.
pub struct VethPair {
    pub a: String,
    pub b: String,
}

/// Address of namespace `b`'s end.
pub const B_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 213, 0, 2));

/// Run `ip` with arguments; an error carries its stderr.
pub fn ip(args: &[&str]) -> Result<()> {
    run("ip", args).map(drop)
}

/// Run a setup program to completion: its trimmed stdout; an error names it and carries its
/// stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program} (scripts/lab-setup.sh installs it)"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

impl VethPair {
    /// Create both namespaces and the link between them.
    pub fn create() -> Result<VethPair> {
        let id = std::process::id();
        let pair = VethPair {
            a: format!("spate-bench-a-{id}"),
            b: format!("spate-bench-b-{id}"),
        };
        let (va, vb) = (format!("sba{id}"), format!("sbb{id}"));
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        ip(&["link", "set", &va, "netns", &pair.a])?;
        ip(&["link", "set", &vb, "netns", &pair.b])?;
        for (ns, dev, addr) in [
            (&pair.a, &va, "10.213.0.1/24"),
            (&pair.b, &vb, "10.213.0.2/24"),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "mtu", "1500", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

/// True when this process may create namespaces (root).
pub fn can_create() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
