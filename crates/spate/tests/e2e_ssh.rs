//! `spate send`, `spate get` and `spate cp` with `[user@]host:PATH` through a real OpenSSH
//! server (issue 16): the remote end is started over ssh for the one transfer, with no
//! `spate serve` started by hand. A private
//! `sshd` listens on loopback with its own host key and authorized key (needs root and
//! Debian's `openssh-server`, which `scripts/lab-setup.sh` installs); without them the tests say
//! SKIPPED.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{is_root, run_bounded};

/// A private sshd on 127.0.0.1, killed when dropped.
struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    fn start() -> Option<Sshd> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !is_root() || !sshd.exists() || Command::new("ssh-keygen").arg("-?").output().is_err() {
            eprintln!(
                "SKIPPED: needs root and OpenSSH's sshd (scripts/lab-setup.sh installs it); CI \
                 runs it as root"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for key in ["host", "id"] {
            let st = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .status()
                .unwrap();
            assert!(st.success());
        }
        fs::copy(d.join("id.pub"), d.join("authorized_keys")).unwrap();
        let _ = fs::create_dir_all("/run/sshd");
        // The port is picked by binding port 0 and letting it go, so a test running alongside
        // can be handed the same one before this sshd binds it. That sshd then fails to bind
        // and exits, while a probe of the port reaches the other test's server — and this
        // test's ssh is refused once that test ends (seen in CI). The pid file is written
        // only after sshd has bound its port, so it tells this server from the other's; a
        // server that exited is started again on another port.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let pid_file = d.join("sshd.pid");
            let _ = fs::remove_file(&pid_file);
            let config = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {0}/host\nAuthorizedKeysFile \
                 {0}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile {1}\n",
                d.display(),
                pid_file.display()
            );
            fs::write(d.join("sshd_config"), config).unwrap();
            let mut child = Command::new(sshd)
                .args(["-D", "-e", "-f"])
                .arg(d.join("sshd_config"))
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let pid = child.id().to_string();
            let end = Instant::now() + Duration::from_secs(10);
            let listening = loop {
                if fs::read_to_string(&pid_file).is_ok_and(|p| p.trim() == pid) {
                    break true;
                }
                if child.try_wait().unwrap().is_some() {
                    break false;
                }
                assert!(Instant::now() < end, "sshd did not start");
                std::thread::sleep(Duration::from_millis(20));
            };
            if !listening {
                continue;
            }
            let s = Sshd { child, dir, port };
            // Wait until it accepts connections.
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < end, "sshd did not accept connections");
                std::thread::sleep(Duration::from_millis(50));
            }
            return Some(s);
        }
        panic!("sshd exited five times: is something else taking its ports?");
    }

    /// The `--ssh` command that reaches it.
    fn ssh(&self) -> String {
        format!(
            "ssh -p {} -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
             -o BatchMode=yes -o LogLevel=ERROR",
            self.port,
            self.dir.path().join("id").display()
        )
    }
}

fn spate_send(s: &Sshd, cwd: &Path, args: &[&str]) -> Command {
    let mut c = common::spate();
    c.current_dir(cwd)
        .args(["send", "--connect-timeout", "5", "--ssh", &s.ssh()])
        .args(["--remote-spate", common::SPATE])
        .args(args);
    c
}

fn run(s: &Sshd, cwd: &Path, args: &[&str]) -> Output {
    run_bounded(&mut spate_send(s, cwd, args), Duration::from_secs(60))
}

/// Run `cmd`, kill it (as `kill -9`) after `ms`, and give the remote end a second to see its
/// client gone (its stdin ends) and exit.
fn kill_after(cmd: &mut Command, ms: u64) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(ms));
    let _ = child.kill();
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(1000));
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn at(dir: &Path) -> String {
    format!("root@127.0.0.1:{}/", dir.display())
}

#[test]
fn a_file_and_a_tree_go_over_ssh_byte_exact() {
    let Some(s) = Sshd::start() else { return };
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("dst");
    fs::create_dir(&dst).unwrap();
    let data = spate::noise::bytes(3, 3 << 20);
    fs::write(t.path().join("one.bin"), &data).unwrap();
    let started = Instant::now();
    let o = run(&s, t.path(), &["-q", "one.bin", &at(&dst)]);
    assert!(o.status.success(), "{}", stderr(&o));
    eprintln!(
        "3 MiB over ssh bootstrap: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(fs::read(dst.join("one.bin")).unwrap(), data);
    // The remote receiver writing with direct I/O (`serve --once --direct-io`).
    let o = run(
        &s,
        t.path(),
        &["-q", "--direct-io", "one.bin", &at(&dst.join("direct"))],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(dst.join("direct/one.bin")).unwrap(), data);
    // A tree, to a new name below an absolute destination.
    let tree = t.path().join("tree");
    fs::create_dir_all(tree.join("a/b")).unwrap();
    fs::write(tree.join("a/b/x"), b"x").unwrap();
    fs::write(tree.join("y"), spate::noise::bytes(4, 100_000)).unwrap();
    fs::create_dir(tree.join("empty")).unwrap();
    let o = run(&s, t.path(), &["-q", "-r", "tree", &at(&dst.join("copy"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(dst.join("copy/tree/a/b/x")).unwrap(), b"x");
    assert_eq!(
        fs::read(dst.join("copy/tree/y")).unwrap(),
        fs::read(tree.join("y")).unwrap()
    );
    assert!(dst.join("copy/tree/empty").is_dir());
    // Excludes and includes: the first matching rule decides.
    fs::write(tree.join("scratch.tmp"), b"t").unwrap();
    fs::write(tree.join("keep.tmp"), b"k").unwrap();
    let o = run(
        &s,
        t.path(),
        &[
            "-q",
            "-r",
            "--include",
            "keep.tmp",
            "--exclude",
            "*.tmp",
            "--exclude",
            "tree/a",
            "tree",
            &at(&dst.join("filtered")),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got = dst.join("filtered/tree");
    assert!(got.join("keep.tmp").exists() && got.join("y").exists());
    assert!(!got.join("scratch.tmp").exists() && !got.join("a").exists());
}

#[test]
fn a_killed_transfer_resumes_over_ssh() {
    let Some(s) = Sshd::start() else { return };
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("dst");
    fs::create_dir(&dst).unwrap();
    let data = spate::noise::bytes(5, 24 << 20);
    fs::write(t.path().join("big.bin"), &data).unwrap();
    // 40 Mbit/s: about 5 s; killed after 1.5 s.
    let mut cmd = spate_send(
        &s,
        t.path(),
        &[
            "-q",
            "--policy",
            "fixed",
            "--rate",
            "40M",
            "big.bin",
            &at(&dst),
        ],
    );
    kill_after(&mut cmd, 1500);
    assert!(!dst.join("big.bin").exists(), "killed before the end");
    let o = run(&s, t.path(), &["--json", "--resume", "big.bin", &at(&dst)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(dst.join("big.bin")).unwrap(), data);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let resumed = v["bytes_resumed"].as_u64().unwrap();
    eprintln!("resumed over ssh: {resumed} bytes were already there");
    assert!(resumed > 0, "{v}");
}

/// Each failure is one line naming its cause, within 10 s.
#[test]
fn failures_say_which_part_failed() {
    let Some(s) = Sshd::start() else { return };
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("f"), b"data").unwrap();
    let dst = t.path().join("dst");
    fs::create_dir(&dst).unwrap();
    let timed = |cmd: &mut Command| {
        let start = Instant::now();
        let o = run_bounded(cmd, Duration::from_secs(60));
        let secs = start.elapsed().as_secs_f64();
        (o, secs)
    };

    // The remote has no spate at that path.
    let mut c = common::spate();
    c.current_dir(t.path())
        .args([
            "send",
            "-q",
            "--ssh",
            &s.ssh(),
            "--remote-spate",
            "/nonexistent/spate",
        ])
        .args(["f", &at(&dst)]);
    let (o, secs) = timed(&mut c);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("--remote-spate"), "{}", stderr(&o));
    assert!(secs < 10.0, "{secs} s");

    // ssh cannot connect.
    let mut c = common::spate();
    c.current_dir(t.path())
        .args([
            "send",
            "-q",
            "--ssh",
            "ssh -p 1 -o BatchMode=yes -o ConnectTimeout=3",
        ])
        .args(["f", "root@127.0.0.1:/tmp/x/"]);
    let (o, secs) = timed(&mut c);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ssh to root@127.0.0.1 failed"),
        "{}",
        stderr(&o)
    );
    assert!(secs < 10.0, "{secs} s");

    // A path the remote cannot write (a file where a directory must be).
    fs::write(dst.join("plain"), b"not a dir").unwrap();
    let o = run(&s, t.path(), &["-q", "f", &at(&dst.join("plain/sub"))]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("refused") || err.contains("plain"), "{err}");

    // Somewhere even root cannot create files.
    let o = run(
        &s,
        t.path(),
        &["-q", "f", "root@127.0.0.1:/proc/sys/spate-test/"],
    );
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot create 'proc/sys/spate-test/f'"),
        "{}",
        stderr(&o)
    );
    // A remote path that does not exist, for a download.
    let mut c = spate_get(
        &s,
        t.path(),
        &["-q", "root@127.0.0.1:/nonexistent/file", "."],
    );
    let (o, secs) = timed(&mut c);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot read '/nonexistent/file'"),
        "{}",
        stderr(&o)
    );
    assert!(secs < 10.0, "{secs} s");

    // UDP blocked by a firewall (nftables drops the port range the receiver must use).
    if Command::new("nft").arg("--version").output().is_err() {
        eprintln!("SKIPPED the firewall case: nft is not installed (scripts/lab-setup.sh)");
        return;
    }
    let table = format!("spate_test_{}", std::process::id());
    let nft = |script: &str| {
        Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(script.as_bytes())?;
                c.wait()
            })
            .unwrap()
    };
    let lo = 40_000 + (std::process::id() % 20_000) as u16;
    let range = format!("{lo}-{}", lo + 4);
    assert!(nft(&format!(
        "table inet {table} {{\n chain input {{\n  type filter hook input priority 0;\n  \
         udp dport {lo}-{} drop\n }}\n}}\n",
        lo + 4
    ))
    .success());
    let mut c = common::spate();
    c.current_dir(t.path())
        .args(["send", "-q", "--connect-timeout", "3", "--ssh", &s.ssh()])
        .args(["--remote-spate", common::SPATE, "--port-range", &range])
        .args(["f", &at(&dst)]);
    let (o, secs) = timed(&mut c);
    let _ = nft(&format!("delete table inet {table}"));
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("blocked by a firewall"),
        "{}",
        stderr(&o)
    );
    assert!(secs < 10.0, "{secs} s");
}

fn spate_get(s: &Sshd, cwd: &Path, args: &[&str]) -> Command {
    let mut c = common::spate();
    c.current_dir(cwd)
        .args(["get", "--ssh", &s.ssh()])
        .args(["--remote-spate", common::SPATE])
        .args(args);
    c
}

/// Downloads: a file, a glob expanded on the remote, a tree; `cp` in both directions; all
/// byte-exact.
#[test]
fn get_and_cp_fetch_files_globs_and_trees() {
    let Some(s) = Sshd::start() else { return };
    let t = tempfile::tempdir().unwrap();
    let remote = t.path().join("remote");
    fs::create_dir_all(remote.join("logs/old")).unwrap();
    for i in 0..3 {
        fs::write(
            remote.join(format!("logs/{i}.gz")),
            spate::noise::bytes(i, 200_000),
        )
        .unwrap();
    }
    fs::write(remote.join("logs/readme.txt"), b"not a gz").unwrap();
    fs::write(remote.join("logs/old/9.gz"), b"old").unwrap();
    let local = t.path().join("local");
    fs::create_dir(&local).unwrap();
    let r = remote.display();
    let ok = |o: Output| assert!(o.status.success(), "{}", stderr(&o));
    ok(run_bounded(
        &mut spate_get(
            &s,
            t.path(),
            &["-q", &format!("root@127.0.0.1:{r}/logs/*.gz"), "local"],
        ),
        Duration::from_secs(60),
    ));
    for i in 0..3 {
        assert_eq!(
            fs::read(local.join(format!("{i}.gz"))).unwrap(),
            spate::noise::bytes(i, 200_000)
        );
    }
    assert!(!local.join("readme.txt").exists(), "the glob chose");
    // A tree with get, then with cp (a get), then back with cp (a send).
    let tree_src = format!("root@127.0.0.1:{r}/logs");
    let mut get = spate_get(&s, t.path(), &["-q", "-r", &tree_src, "local"]);
    ok(run_bounded(&mut get, Duration::from_secs(60)));
    assert_eq!(fs::read(local.join("logs/old/9.gz")).unwrap(), b"old");
    let mut cp = common::spate();
    cp.current_dir(t.path())
        .args([
            "cp",
            "-q",
            "--ssh",
            &s.ssh(),
            "--remote-spate",
            common::SPATE,
            "-r",
        ])
        .arg(format!("root@127.0.0.1:{r}/logs"))
        .arg("local/again");
    fs::create_dir(local.join("again")).unwrap();
    ok(run_bounded(&mut cp, Duration::from_secs(60)));
    assert_eq!(
        fs::read(local.join("again/logs/readme.txt")).unwrap(),
        b"not a gz"
    );
    let mut cp = common::spate();
    cp.current_dir(t.path())
        .args([
            "cp",
            "-q",
            "--ssh",
            &s.ssh(),
            "--remote-spate",
            common::SPATE,
            "-r",
        ])
        .arg("local/again/logs")
        .arg(format!("root@127.0.0.1:{r}/back/"));
    ok(run_bounded(&mut cp, Duration::from_secs(60)));
    assert_eq!(
        fs::read(remote.join("back/logs/1.gz")).unwrap(),
        spate::noise::bytes(1, 200_000)
    );
}

#[test]
fn a_killed_download_resumes() {
    let Some(s) = Sshd::start() else { return };
    let t = tempfile::tempdir().unwrap();
    let data = spate::noise::bytes(6, 24 << 20);
    fs::write(t.path().join("big.bin"), &data).unwrap();
    let local = t.path().join("local");
    fs::create_dir(&local).unwrap();
    let src = format!("root@127.0.0.1:{}/big.bin", t.path().display());
    let mut cmd = spate_get(
        &s,
        t.path(),
        &["-q", "--policy", "fixed", "--rate", "40M", &src, "local"],
    );
    kill_after(&mut cmd, 1500);
    assert!(!local.join("big.bin").exists(), "killed before the end");
    let o = run_bounded(
        &mut spate_get(&s, t.path(), &["--json", "--resume", &src, "local"]),
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(local.join("big.bin")).unwrap(), data);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    eprintln!(
        "download resumed: {} bytes were already here",
        v["resumed_bytes"]
    );
    assert!(v["resumed_bytes"].as_u64().unwrap() > 0, "{v}");
}
