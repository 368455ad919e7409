//! What a download asks of a server: a request (spec §5.6) resolved beneath the server's root.
//!
//! > §5.6: Each request entry names a path relative to what the client may read on the
//! > receiver; a component may be a glob (`*`, `?`, `[…]`), which matches the names of that
//! > directory (a name starting with '.' only if the pattern does); a glob that matches
//! > nothing, a missing path, a symbolic link, a special file, or a directory without
//! > RECURSIVE refuses the request. Each match becomes an entry of the answer named by its
//! > last component; a directory with RECURSIVE brings everything below it, except symbolic
//! > links and special files.
//!
//! A server must send nothing from outside the root, whatever is in it. So the resolution
//! never follows a symbolic link: every directory on the way is opened through the root's
//! handle with `O_NOFOLLOW` (cap-std resolves beneath the handle and refuses `..` and links
//! that leave it), the final name is looked at without following it, and links inside trees
//! are skipped, as `spate send -r` skips them. Each file is remembered with the identity
//! (device, inode) found that way, and every later open checks it
//! ([`SourceFile::open`](crate::scan::SourceFile::open)): a directory swapped for a link to
//! `/etc` after the scan makes the transfer fail; it never sends what the link points to.
//!
//! Messages name paths as the client wrote them or relative to the root: they go to the
//! client, and the server's own layout is none of its business.

use std::path::Path;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use spate_proto::{Entry, EntryKind, Manifest};

use crate::confine::Root;
use crate::report::escape;
use crate::scan::{join, Plan};

/// Request entries one request may hold: far more than anyone types, far fewer than the
/// million entries a manifest may list — each may be a glob that walks directories.
pub const MAX_REQUESTS: usize = 4096;
/// Directory entries the globs of one request may look at, all together: a hostile request
/// (thousands of `*/*/*/*`) costs the server a bounded walk, not one per pattern and level.
pub const MAX_LOOKED_AT: usize = 1_000_000;

/// Resolve `request` (a manifest of request entries) beneath `root`, listing at most
/// `max_entries` entries. The error is the refusal the client reads.
pub fn resolve(root: &Root, request: &Manifest, max_entries: usize) -> Result<Plan, String> {
    if request.entries.len() > MAX_REQUESTS {
        return Err(format!(
            "{} paths in one request; at most {MAX_REQUESTS} (use -r on their directory, or a glob)",
            request.entries.len()
        ));
    }
    let mut r = Resolver {
        root,
        plan: Plan::empty(""),
        max_entries,
        budget: MAX_LOOKED_AT,
    };
    for e in &request.entries {
        let EntryKind::Request { recursive } = e.kind else {
            return Err("not a request".to_owned());
        };
        let comps: Vec<&str> = e.path.split('/').collect();
        // Every error names the path or pattern it is about.
        let matched = r.expand(root.dir(), "", &comps, recursive)?;
        if matched == 0 {
            return Err(format!("no match for '{}'", escape(&e.path)));
        }
    }
    r.plan.manifest.validate().map_err(|e| match e {
        spate_proto::manifest::ManifestError::DuplicatePath { path, .. } => format!(
            "two of the requested paths are both named '{}': ask for them separately",
            escape(&path)
        ),
        other => other.to_string(),
    })?;
    Ok(r.plan)
}

/// Shell-style glob characters.
fn is_glob(c: &str) -> bool {
    c.contains(['*', '?', '['])
}

/// One request's resolution: the plan it builds and what it may still cost.
struct Resolver<'a> {
    root: &'a Root,
    plan: Plan,
    max_entries: usize,
    /// Names the globs may still look at.
    budget: usize,
}

impl Resolver<'_> {
    /// Add what `comps` name below `dir` (itself at `prefix`) to the plan, each match as the
    /// entry of its last component, globs' matches in name order; the number of matches.
    /// Directories on the way are opened without following links.
    fn expand(
        &mut self,
        dir: &Dir,
        prefix: &str,
        comps: &[&str],
        recursive: bool,
    ) -> Result<usize, String> {
        let Some((&c, rest)) = comps.split_first() else {
            return Ok(0);
        };
        let names = if is_glob(c) {
            self.glob(dir, prefix, c)?
        } else {
            vec![c.to_owned()]
        };
        let mut matched = 0;
        for name in names {
            let rel = join(prefix, &name);
            if rest.is_empty() {
                self.add(dir, &name, &rel, recursive)?;
                matched += 1;
                continue;
            }
            match dir.open_dir_nofollow(&name) {
                Ok(sub) => matched += self.expand(&sub, &rel, rest, recursive)?,
                // A glob's match that is not a directory simply does not match what follows.
                Err(_) if is_glob(c) => {}
                Err(e) => return Err(why_not_dir(dir, &name, &rel, e)),
            }
        }
        Ok(matched)
    }

    /// The names in `dir` (at `prefix`) that the glob `c` matches, sorted; a name beginning
    /// with '.' only if `c` does.
    fn glob(&mut self, dir: &Dir, prefix: &str, c: &str) -> Result<Vec<String>, String> {
        let m = globset::Glob::new(c)
            .map_err(|e| format!("'{}' is not a valid pattern ({e})", escape(c)))?
            .compile_matcher();
        let list = dir
            .entries()
            .map_err(|e| format!("cannot list '{}': {}", shown(prefix), io_why(&e)))?;
        let mut v = Vec::new();
        for d in list {
            self.budget = self.budget.checked_sub(1).ok_or_else(|| {
                format!("the globs look at more than {MAX_LOOKED_AT} names; ask for less")
            })?;
            let Some(n) = d.ok().and_then(|d| d.file_name().into_string().ok()) else {
                continue;
            };
            if (!n.starts_with('.') || c.starts_with('.')) && m.is_match(&n) {
                v.push(n);
            }
        }
        v.sort();
        Ok(v)
    }

    /// Add `name` in `dir` (at `rel` below the root) as an entry named `name`: a file, or
    /// with `recursive` a directory and everything below it.
    fn add(&mut self, dir: &Dir, name: &str, rel: &str, recursive: bool) -> Result<(), String> {
        let meta = dir
            .symlink_metadata(name)
            .map_err(|e| format!("'{}': {}", escape(rel), io_why(&e)))?;
        let src = self.root.path().join(rel);
        let ft = meta.file_type();
        if ft.is_symlink() {
            return Err(format!(
                "'{}' is a symbolic link; the server sends no links (ask for what it points to)",
                escape(rel)
            ));
        }
        if ft.is_file() {
            self.plan.push_scanned(name.to_owned(), &src, false, &meta);
        } else if ft.is_dir() {
            if !recursive {
                return Err(format!(
                    "'{}' is a directory: add -r to fetch directory trees",
                    escape(rel)
                ));
            }
            self.plan.push_scanned(name.to_owned(), &src, true, &meta);
            let sub = dir
                .open_dir_nofollow(name)
                .map_err(|e| format!("cannot open '{}': {}", escape(rel), io_why(&e)))?;
            self.walk(&sub, &src, name)?;
        } else {
            return Err(format!(
                "'{}' is not a regular file or directory",
                escape(rel)
            ));
        }
        self.check_size()
    }

    /// Everything below `dir` (at `src` on disk, `prefix` in the answer), sorted by name;
    /// symbolic links and special files are left out.
    fn walk(&mut self, dir: &Dir, src: &Path, prefix: &str) -> Result<(), String> {
        let cannot_list =
            |e: std::io::Error| format!("cannot list '{}': {}", escape(prefix), io_why(&e));
        let mut children: Vec<(String, cap_std::fs::Metadata)> = Vec::new();
        for d in dir.entries().map_err(cannot_list)? {
            let Ok(name) = d.map_err(cannot_list)?.file_name().into_string() else {
                continue;
            };
            // The entry's own metadata: not following a link.
            let meta = dir
                .symlink_metadata(&name)
                .map_err(|e| format!("'{}/{name}': {}", escape(prefix), io_why(&e)))?;
            children.push((name, meta));
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, meta) in children {
            let rel = join(prefix, &name);
            let path = src.join(&name);
            let ft = meta.file_type();
            if ft.is_dir() {
                self.plan.push_scanned(rel.clone(), &path, true, &meta);
                let sub = dir
                    .open_dir_nofollow(&name)
                    .map_err(|e| format!("cannot open '{}': {}", escape(&rel), io_why(&e)))?;
                self.walk(&sub, &path, &rel)?;
            } else if ft.is_file() {
                self.plan.push_scanned(rel, &path, false, &meta);
            } else {
                self.plan
                    .skipped
                    .push((path, "symbolic link or special file"));
            }
            self.check_size()?;
        }
        Ok(())
    }

    /// More entries than this server sends per transfer is a refusal.
    fn check_size(&self) -> Result<(), String> {
        if self.plan.manifest.entries.len() > self.max_entries {
            return Err(format!(
                "the request names more than {} entries, more than this server sends per \
                 transfer (serve --max-entries)",
                self.max_entries
            ));
        }
        Ok(())
    }
}

/// Why `name` in `dir` (at `rel`) could not be opened as a directory.
fn why_not_dir(dir: &Dir, name: &str, rel: &str, e: std::io::Error) -> String {
    match dir.symlink_metadata(name) {
        Ok(m) if m.file_type().is_symlink() => format!(
            "'{}' is a symbolic link; the server follows no links",
            escape(rel)
        ),
        Ok(m) if !m.is_dir() => format!("'{}' is not a directory", escape(rel)),
        _ => format!("'{}': {}", escape(rel), io_why(&e)),
    }
}

/// An I/O error in words that name no server path.
fn io_why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => "cannot be read".to_owned(),
    }
}

fn shown(prefix: &str) -> String {
    if prefix.is_empty() {
        ".".to_owned()
    } else {
        escape(prefix)
    }
}

/// The request for `paths` (as the user typed them: relative to what the server lets this
/// client read), each with or without everything below it.
pub fn request(paths: &[String], recursive: bool) -> anyhow::Result<Manifest> {
    let mut entries = Vec::new();
    for p in paths {
        let t = p.trim_end_matches('/');
        let t = t.strip_prefix("./").unwrap_or(t);
        if let Err(why) = spate_proto::manifest::validate_path(t) {
            anyhow::bail!(
                "'{p}' {why}: a daemon's paths are relative to the directory it lets you read \
                 (its --root, or your key's dir=), without '..'"
            );
        }
        entries.push(Entry::request(t, recursive));
    }
    let m = Manifest::new(entries);
    m.validate()
        .map_err(|e| anyhow::anyhow!("cannot ask for these paths: {e}"))?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::create_dir_all(p.join("logs/old")).unwrap();
        for f in [
            "logs/a.gz",
            "logs/b.gz",
            "logs/c.txt",
            "logs/.h.gz",
            "logs/old/z.gz",
        ] {
            std::fs::write(p.join(f), f.as_bytes()).unwrap();
        }
        t
    }

    fn names(plan: &Plan) -> Vec<&str> {
        plan.manifest
            .entries
            .iter()
            .map(|e| e.path.as_str())
            .collect()
    }

    #[test]
    fn globs_and_trees_resolve_beneath_the_root() {
        let t = tree();
        let root = Root::new(t.path()).unwrap();
        let r = request(&["logs/*.gz".into()], false).unwrap();
        let plan = resolve(&root, &r, 100).unwrap();
        assert_eq!(
            names(&plan),
            ["a.gz", "b.gz"],
            "no hidden files, no directories"
        );
        let r = request(&["logs".into()], true).unwrap();
        let plan = resolve(&root, &r, 100).unwrap();
        assert_eq!(
            names(&plan),
            [
                "logs",
                "logs/.h.gz",
                "logs/a.gz",
                "logs/b.gz",
                "logs/c.txt",
                "logs/old",
                "logs/old/z.gz"
            ]
        );
        let r = request(&["*/old/*".into()], false).unwrap();
        assert_eq!(names(&resolve(&root, &r, 100).unwrap()), ["z.gz"]);
        // Limits, misses, directories without -r.
        assert!(resolve(&root, &request(&["logs".into()], true).unwrap(), 3)
            .unwrap_err()
            .contains("more than 3"));
        assert!(
            resolve(&root, &request(&["logs/*.zip".into()], false).unwrap(), 9)
                .unwrap_err()
                .contains("no match")
        );
        assert!(
            resolve(&root, &request(&["logs".into()], false).unwrap(), 9)
                .unwrap_err()
                .contains("add -r")
        );
        assert!(
            resolve(&root, &request(&["nope/x".into()], false).unwrap(), 9)
                .unwrap_err()
                .contains("no such file")
        );
        // Bounds on what a request may cost.
        let many: Vec<String> = (0..=MAX_REQUESTS).map(|i| format!("f{i}")).collect();
        let err = resolve(&root, &request(&many, false).unwrap(), 9).unwrap_err();
        assert!(err.contains("at most 4096"), "{err}");
        let mut r = Resolver {
            root: &root,
            plan: Plan::empty(""),
            max_entries: 9,
            budget: 3,
        };
        let err = r.expand(root.dir(), "", &["logs", "*"], false);
        assert!(err.unwrap_err().contains("more than"));
        // Two matches with one name.
        let r = request(&["logs/a.gz".into(), "logs/*.gz".into()], false).unwrap();
        assert!(resolve(&root, &r, 9).unwrap_err().contains("both named"));
        // What a client cannot even ask for.
        for bad in ["../x", "/etc/passwd", "a/../../b"] {
            assert!(request(&[bad.into()], false).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// A hostile client's paths and patterns — brackets, stars, dots, long and odd
        /// components — never panic the server's resolver, and whatever it finds lies below
        /// the root.
        #[test]
        fn hostile_patterns_never_panic_nor_leave_the_root(
            paths in proptest::collection::vec("[a-z.*?\\[\\]!/-]{1,24}", 1..6),
            recursive in proptest::bool::ANY,
        ) {
            let t = tree();
            let root = Root::new(t.path()).unwrap();
            if let Ok(r) = request(&paths, recursive) {
                if let Ok(plan) = resolve(&root, &r, 100) {
                    for s in plan.sources.iter().flatten() {
                        proptest::prop_assert!(s.path.starts_with(root.path()));
                    }
                }
            }
        }
    }

    /// Links lead nowhere: not as the final name, not on the way, not inside a tree, not
    /// through a glob.
    #[test]
    fn no_link_is_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"secret").unwrap();
        let t = tree();
        let p = t.path();
        std::os::unix::fs::symlink(outside.path(), p.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), p.join("logs/s.gz")).unwrap();
        let root = Root::new(p).unwrap();
        let err = |path: &str, rec: bool| {
            resolve(&root, &request(&[path.into()], rec).unwrap(), 100).unwrap_err()
        };
        assert!(err("out/secret", false).contains("symbolic link"));
        assert!(err("out", true).contains("symbolic link"));
        assert!(err("logs/s.gz", false).contains("symbolic link"));
        assert!(err("*/secret", false).contains("no such file"));
        let plan = resolve(&root, &request(&["logs".into()], true).unwrap(), 100).unwrap();
        assert!(!names(&plan).contains(&"logs/s.gz"));
        assert_eq!(plan.skipped.len(), 1);
        let plan = resolve(&root, &request(&["logs/*.gz".into()], false).unwrap(), 100);
        assert!(
            plan.unwrap_err().contains("symbolic link"),
            "a glob's link is refused"
        );
        // Nothing the plan reads is outside the root.
        let plan = resolve(&root, &request(&["logs".into()], true).unwrap(), 100).unwrap();
        for s in plan.sources.iter().flatten() {
            assert!(s.path.starts_with(root.path()), "{:?}", s.path);
        }
    }
}
