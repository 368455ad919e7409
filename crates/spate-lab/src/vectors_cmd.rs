//! `spate-lab test-vectors`: write (or check) the spec's byte-exact test vectors.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use spate_proto::vectors;

/// Write the test vectors of docs/spec.md Appendix B (every packet type, a manifest, a
/// FEEDBACK with several ranges, a HAVE) as annotated hex and JSON.
///
/// Each vector is first checked against the reference parser and encoders; nothing is written
/// if one does not match. With --check, nothing is written at all: the files in the directory
/// are compared with what would be written, and the exit status is 1 if any differs or is
/// missing (a test runs the same comparison).
#[derive(Args)]
#[command(
    after_help = "Examples:\n  spate-lab test-vectors                 # rewrite docs/test-vectors/\n  spate-lab test-vectors --check         # are they current?\n  spate-lab test-vectors --out /tmp/tv"
)]
pub struct VectorsArgs {
    /// Directory to write into (created if absent).
    #[arg(long, default_value = "docs/test-vectors")]
    out: PathBuf,
    /// Compare the files with the reference instead of writing them.
    #[arg(long)]
    check: bool,
}

pub fn run(a: VectorsArgs) -> Result<()> {
    for v in vectors::all() {
        if let Err(e) = vectors::check(&v) {
            bail!("the reference implementation disagrees with a vector: {e}");
        }
    }
    let files = vectors::files();
    if a.check {
        let mut stale = Vec::new();
        for (name, text) in &files {
            let path = a.out.join(name);
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        }
        if !stale.is_empty() {
            bail!(
                "{} file(s) differ from the reference: {}; run `spate-lab test-vectors --out {}` to rewrite them",
                stale.len(),
                stale.join(", "),
                a.out.display()
            );
        }
        eprintln!(
            "{} test-vector files in {} are current",
            files.len(),
            a.out.display()
        );
        return Ok(());
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create '{}'", a.out.display()))?;
    for (name, text) in &files {
        let path = a.out.join(name);
        std::fs::write(&path, text)
            .with_context(|| format!("cannot write '{}'", path.display()))?;
    }
    eprintln!("wrote {} files to {}", files.len(), a.out.display());
    Ok(())
}
