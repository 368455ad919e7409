//! A TUN device: a network interface whose packets this process reads and writes.
//!
//! The emulator opens two (`IFF_TUN | IFF_NO_PI`: whole IPv4 packets, no extra header), moves
//! each into its namespace, and from then on every packet one namespace routes to the other
//! comes out of one descriptor and is written, when the path model says so, into the other.
//! The descriptor keeps working after the device moves to another namespace.
//!
//! No vnet header and no offloads, on purpose: the kernel then hands over packets of at most
//! the MTU (1500 bytes), one per read, so the link model sees the packets a real 1500-byte path
//! would carry and applies loss to each — with TSO a lost 64 KiB "packet" would stand for 44
//! losses at once. This costs two system calls per packet, which is what bounds the lab's rate
//! (measured by `spate-lab calibrate`, see `docs/lab.md`).
//!
//! Written against the kernel's ioctl directly: the few lines below are all the crate needs,
//! and the `tun` crates pull in async runtimes.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;

use anyhow::{bail, Context, Result};

/// `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// One TUN device, non-blocking.
pub struct Tun {
    file: File,
    name: String,
}

impl Tun {
    /// Create the device `name` (at most 15 bytes) in this process's namespace.
    pub fn create(name: &str) -> Result<Tun> {
        if name.len() >= libc::IFNAMSIZ {
            bail!("interface name {name:?} is longer than 15 bytes");
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .context("cannot open /dev/net/tun (is the tun module loaded? are you root?)")?;
        // SAFETY: ifreq is plain data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, which `req` is.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot create TUN device {name}"));
        }
        Ok(Tun {
            file,
            name: name.to_owned(),
        })
    }

    /// A second handle on the same device (a duplicated descriptor), for a writer thread.
    pub fn try_clone(&self) -> Result<Tun> {
        Ok(Tun {
            file: self
                .file
                .try_clone()
                .context("cannot duplicate the TUN descriptor")?,
            name: self.name.clone(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read one packet; `Ok(None)` when none is waiting.
    pub fn read(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        match self.file.read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Write one packet. A full device queue drops it, as a full link would.
    pub fn write(&mut self, packet: &[u8]) -> std::io::Result<()> {
        match self.file.write(packet) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
            // The namespace's interface went down (end of run): nothing to deliver to.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}
