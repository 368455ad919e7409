//! Reading scenario files for `sim`, `emu` and `compare`, with the options they share.

use std::path::Path;

use anyhow::{bail, Context, Result};
use spate_sim::Scenario;

/// Read a scenario file, scale its rates by `scale` and override its seed.
pub fn load(path: &Path, scale: f64, seed: Option<u64>) -> Result<Scenario> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read scenario file {}", path.display()))?;
    let mut s = match Scenario::parse(&text) {
        Ok(s) => s,
        Err(e) => bail!("{}: {e}", path.display()),
    };
    if !(scale.is_finite() && scale > 0.0 && scale <= 1000.0) {
        bail!("--scale must be a number above 0 (got {scale})");
    }
    if scale != 1.0 {
        s = s.scaled(scale);
    }
    if let Some(seed) = seed {
        s.seed = seed;
    }
    Ok(s)
}
