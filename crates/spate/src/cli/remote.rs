//! The commands that start their other end over ssh: `get`, `cp`, and the pieces `send`
//! shares with them (ssh options, the remote's rate options, exiting when the client goes).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use spate::report::human_bytes;

use super::events::GetEvents;
use super::{
    parse_target, send_cmd, session_json, DirectIoArgs, GetArgs, JsonMode, RateArgs, SendArgs,
    Target,
};

/// Started over ssh: when the client goes (stdin closes), go too.
pub(crate) fn watch_stdin_and_exit() {
    spate::ssh::on_stdin_end(|| std::process::exit(spate::exit::Exit::Interrupted as u8 as i32));
}

/// The rate options as arguments for the remote (`get` passes them to `push-once`).
pub(crate) fn rate_args(r: &RateArgs) -> Vec<String> {
    use clap::ValueEnum;
    let policy = r
        .policy
        .to_possible_value()
        .map_or("fair".to_owned(), |v| v.get_name().to_owned());
    let mut v = vec!["--policy".to_owned(), policy];
    if let Some(x) = r.rate {
        v.extend(["--rate".to_owned(), x.to_string()]);
    }
    if let Some(x) = r.min_rate {
        v.extend(["--min-rate".to_owned(), x.to_string()]);
    }
    if r.compete {
        v.push("--compete".to_owned());
    }
    v.extend(["--fec".to_owned(), r.fec.name()]);
    v
}

pub(crate) fn ssh_options(
    ssh: &Option<String>,
    remote_spate: &str,
    port_range: Option<(u16, u16)>,
    timeout: Duration,
) -> spate::ssh::SshOptions {
    let cmd = match (ssh, std::env::var("SPATE_SSH")) {
        (Some(c), _) => c.clone(),
        (None, Ok(c)) if !c.trim().is_empty() => c,
        _ => "ssh".to_owned(),
    };
    spate::ssh::SshOptions {
        ssh: cmd.split_whitespace().map(str::to_owned).collect(),
        remote_spate: remote_spate.to_owned(),
        port_range,
        timeout,
    }
}

pub(crate) fn get_cmd(g: &GetArgs) -> Result<()> {
    use spate::exit::{tag, Exit};
    let (local, remotes) = g.args.split_last().expect("clap requires two");
    let mut host = None;
    let mut daemon = None;
    let mut paths = Vec::new();
    for r in remotes {
        let (h, dest) = match parse_target(r, g.client.daemon).map_err(|e| tag(e, Exit::Input))? {
            Target::Ssh { host: h, dest } => (h, dest),
            Target::Daemon {
                host: h,
                port,
                dest,
            } => {
                daemon = Some(port);
                (format!("{h}:{port}"), dest)
            }
        };
        if host.get_or_insert_with(|| h.clone()) != &h {
            return Err(tag(
                anyhow::anyhow!("all sources must be on one host"),
                Exit::Input,
            ));
        }
        if dest.is_empty() {
            return Err(tag(
                anyhow::anyhow!("'{r}': name a path on the host"),
                Exit::Input,
            ));
        }
        paths.push(dest);
    }
    let host = host.expect("at least one source");
    let local = PathBuf::from(local);
    if !local.is_dir() {
        return Err(tag(
            anyhow::anyhow!(
                "'{}' is not a directory here: create it, or name one",
                local.display()
            ),
            Exit::Input,
        ));
    }
    let opts = spate::get::GetOptions {
        paths,
        recursive: g.recursive,
        resume: g.resume,
        rate_args: rate_args(&g.rate),
        receive_rate: daemon.and(g.rate.rate).map(|bps| bps / 8),
        direct_io: g.direct.direct_io,
    };
    let ssh = ssh_options(
        &g.remote.ssh,
        &g.remote.remote_spate,
        g.remote.port_range,
        Duration::from_secs(30),
    );
    let bar = spate::progress::Progress::new(0, g.quiet || g.json.is_some());
    let mut events = (g.json == Some(JsonMode::Events)).then(GetEvents::new);
    let progress = |r: &spate::serve::Received| {
        bar.received(r);
        if let Some(ev) = events.as_mut() {
            ev.received(r);
        }
    };
    let log = match daemon {
        Some(port) => {
            let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
            let name = name.trim_start_matches('[').trim_end_matches(']');
            get_from_daemon(g, name, port, &local, &opts, progress)
        }
        None => spate::get::get(&host, &local, &opts, &ssh, progress),
    };
    bar.finish();
    let log = log?;
    if let Some(ev) = events.as_mut() {
        ev.done(&log);
    } else if g.json.is_some() {
        println!("{}", session_json(&log));
    } else if !g.quiet {
        let secs = log.seconds.max(1e-3);
        let mut resumed = String::new();
        if log.resumed > 0 {
            resumed = format!(" (+ {} already here)", human_bytes(log.resumed));
        }
        if let Some(note) = log.direct_note() {
            resumed += &format!(" ({note})");
        }
        eprintln!(
            "{} entries, {}{resumed} in {:.1} s: {} goodput [{}]; every file verified (BLAKE3)",
            log.objects,
            human_bytes(log.bytes),
            secs,
            spate::rate::format_rate(log.bytes as f64 * 8.0 / secs),
            log.cipher
        );
    }
    Ok(())
}

/// `get HOST:PORT:PATH…`: a request to a daemon, answered on the same socket.
fn get_from_daemon(
    g: &GetArgs,
    host: &str,
    port: u16,
    local: &std::path::Path,
    opts: &spate::get::GetOptions,
    progress: impl FnMut(&spate::serve::Received),
) -> Result<spate::serve::SessionLog> {
    use spate::exit::{tag, Exit};
    let quiet = g.quiet || g.json.is_some();
    // Bad paths are the user's to fix before anything goes on the network.
    spate::request::request(&opts.paths, opts.recursive).map_err(|e| tag(e, Exit::Input))?;
    if (g.rate.min_rate.is_some() || g.rate.policy != crate::PolicyArg::Fair) && !quiet {
        eprintln!(
            "spate: note: a daemon sends downloads at its own policy; --policy and --min-rate \
             apply to uploads and to downloads over ssh (--rate caps a download from a daemon \
             too)"
        );
    }
    let server = super::resolve_daemon(host, port)?;
    let c = &g.client;
    let security = super::client_security(c, quiet, c.token.as_deref(), Some((host, port, server)))
        .map_err(|e| tag(e, Exit::Input))?;
    let timeouts = (
        Duration::from_secs_f64(c.connect_timeout.clamp(0.1, 3600.0)),
        Duration::from_secs_f64(c.idle_timeout.clamp(1.0, 86_400.0)),
    );
    spate::get::get_daemon(server, &security, local, opts, timeouts, progress).map_err(|e| {
        if spate::exit::code(&e) == Exit::UntrustedServer as u8 {
            tag(super::key_changed(c, host, port, &e), Exit::UntrustedServer)
        } else {
            e
        }
    })
}

/// `cp`: a send if the destination is remote, else a get.
pub(crate) fn cp_cmd(a: SendArgs) -> Result<()> {
    let (last, sources) = a.args.split_last().expect("clap requires two");
    let remote = |s: &str| {
        !s.starts_with('/')
            && !s.starts_with('.')
            && s.split('/').next().is_some_and(|p| p.contains(':'))
    };
    if remote(last) {
        return send_cmd(&a);
    }
    if !sources.iter().all(|s| remote(s)) {
        return Err(spate::exit::tag(
            anyhow::anyhow!(
                "cp needs a HOST:PATH destination (a send) or HOST:PATH sources (a get)"
            ),
            spate::exit::Exit::Input,
        ));
    }
    let g = GetArgs {
        args: a.args.clone(),
        recursive: a.recursive,
        resume: a.resume,
        rate: a.rate,
        remote: a.remote.clone(),
        client: a.client.clone(),
        json: a.json,
        quiet: a.quiet,
        direct: DirectIoArgs {
            direct_io: a.direct_io,
        },
    };
    get_cmd(&g)
}
