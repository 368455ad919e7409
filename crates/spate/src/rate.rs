//! RATE arguments: bits per second with an optional SI suffix, as `ascp -l` takes them.
//!
//! `800k` = 800 000 bit/s, `200M` = 200 000 000, `1.5G` = 1 500 000 000, `2T`; a plain number
//! is bit/s. Suffixes are decimal (k = 1000) and case-insensitive; a trailing `bps` or `bit/s`
//! is accepted (`100Mbps`). Decimal, because link rates are.

/// Parse a RATE. The error says what was wrong and shows the accepted forms.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let core = lower
        .strip_suffix("bit/s")
        .or_else(|| lower.strip_suffix("bps"))
        .unwrap_or(&lower);
    let bad =
        || format!("invalid rate '{text}': expected bits per second such as 800k, 200M, 1.5G");
    let (value, power) = split_suffix(core).ok_or_else(bad)?;
    let bps = value * 1000f64.powi(power);
    if !bps.is_finite() || !(1.0..=1e14).contains(&bps) {
        return Err(format!(
            "rate '{text}' out of range: give 1 bit/s to 100T (for example 800k, 200M, 1.5G)"
        ));
    }
    Ok(bps.round() as u64)
}

/// A rate for humans: `1.50 Gbit/s`, `200 Mbit/s`, `800 kbit/s`.
pub fn format_rate(bps: f64) -> String {
    let (v, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

/// SIZE arguments for the demo: bytes with binary suffixes (`64M` = 64 MiB, `1G`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (v, power) = split_suffix(t).ok_or_else(|| {
        format!("invalid size '{text}': expected bytes such as 512k, 64M, 1G, 4T")
    })?;
    if !(0.0..=1e15).contains(&v) {
        return Err(format!("size '{text}' out of range"));
    }
    Ok((v * 1024f64.powi(power)) as u64)
}

/// A lower-case number with an optional k/m/g/t suffix: (number, power of the unit, 0–4).
fn split_suffix(t: &str) -> Option<(f64, i32)> {
    let power = match t.chars().last()? {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        't' => 4,
        _ => 0,
    };
    let num = if power > 0 { &t[..t.len() - 1] } else { t };
    Some((num.trim().parse().ok()?, power))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_like_ascp() {
        assert_eq!(parse_rate("800k"), Ok(800_000));
        assert_eq!(parse_rate("200M"), Ok(200_000_000));
        assert_eq!(parse_rate("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_rate("100Mbps"), Ok(100_000_000));
        assert_eq!(parse_rate("10000"), Ok(10_000));
        assert_eq!(parse_rate(" 2g "), Ok(2_000_000_000));
    }

    #[test]
    fn bad_rates_say_what_is_accepted() {
        for bad in ["", "fast", "1.2.3M", "-5M", "0", "NaNM", "infG", "1e20"] {
            let e = parse_rate(bad).unwrap_err();
            assert!(e.contains("800k") || e.contains("range"), "{bad}: {e}");
        }
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4T"), Ok(4 << 40));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn rates_format_for_humans() {
        assert_eq!(format_rate(1.5e9), "1.50 Gbit/s");
        assert_eq!(format_rate(200e6), "200 Mbit/s");
    }
}
