//! The one size grammar of both tools (`squashfs-mount --writable=SIZE`,
//! `sqfs pack -b SIZE`, `--split SIZE`, ...): a number, optionally with a
//! decimal fraction, and an optional unit, case-insensitive:
//! `4096`, `64k`, `128K`, `1M`, `1.5G`, `2GB`, `2GiB`, `1T`. Units are
//! binary multiples (K = KB = KiB = 1024), as in mksquashfs and tmpfs.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// Not a number with an optional unit.
    NotASize(String),
    UnknownUnit {
        text: String,
        unit: String,
    },
    TooLarge(String),
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeError::NotASize(t) => write!(
                f,
                "'{t}' is not a size (examples: 4096, 128K, 1M, 1.5G, 2GiB)"
            ),
            SizeError::UnknownUnit { text, unit } => {
                write!(f, "unknown size unit '{unit}' in '{text}' (use K, M, G or T, optionally followed by B or iB)")
            }
            SizeError::TooLarge(t) => write!(f, "size '{t}' is too large"),
        }
    }
}

impl std::error::Error for SizeError {}

/// The multiplier of a unit, `None` when it is not one.
fn unit_multiplier(unit: &str) -> Option<u64> {
    let u = unit.to_ascii_uppercase();
    let base = u
        .strip_suffix("IB")
        .or_else(|| u.strip_suffix('B'))
        .unwrap_or(&u);
    let shift = match base {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "P" => 50,
        _ => return None,
    };
    // "B" alone means bytes; "IB" alone is not a unit.
    if u == "IB" {
        return None;
    }
    Some(1 << shift)
}

/// Parses a size in bytes. A fraction is rounded to the nearest byte.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let not_a_size = || SizeError::NotASize(text.to_string());
    let mult = unit_multiplier(unit.trim()).ok_or_else(|| SizeError::UnknownUnit {
        text: text.to_string(),
        unit: unit.trim().to_string(),
    })?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(not_a_size());
    }
    if fraction.contains('.') || whole.len() > 20 || fraction.len() > 18 {
        return Err(not_a_size());
    }
    let too_large = || SizeError::TooLarge(text.to_string());
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| not_a_size())?
    };
    let mut bytes = whole.checked_mul(u128::from(mult)).ok_or_else(too_large)?;
    if !fraction.is_empty() {
        let digits: u128 = fraction.parse().map_err(|_| not_a_size())?;
        let scale = 10u128.pow(fraction.len() as u32);
        bytes += (digits * u128::from(mult) + scale / 2) / scale;
    }
    u64::try_from(bytes).map_err(|_| too_large())
}

/// `1536` -> `1.50 KiB`; exact bytes below 1 KiB.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else if v >= 10.0 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        for (text, want) in [
            ("4096", 4096),
            ("0", 0),
            ("64k", 64 << 10),
            ("128K", 131072),
            ("1M", 1 << 20),
            ("1m", 1 << 20),
            ("1.5G", 3 << 29),
            ("2GB", 2 << 30),
            ("2GiB", 2 << 30),
            ("2gib", 2 << 30),
            ("100MiB", 100 << 20),
            ("2tb", 2 << 40),
            ("512B", 512),
            (".5K", 512),
            (" 8M ", 8 << 20),
            ("1.0009765625K", 1025),
        ] {
            assert_eq!(parse_size(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refusals() {
        for bad in [
            "", "K", "M", ".", "1.2.3", "12Q", "1 2", "-5", "+5", "1iB", "0x10", "1e3", "1GG",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
        assert!(matches!(
            parse_size("99999999999P"),
            Err(SizeError::TooLarge(_))
        ));
        assert!(matches!(
            parse_size("12Q"),
            Err(SizeError::UnknownUnit { .. })
        ));
        assert!(parse_size("12Q").unwrap_err().to_string().contains("'Q'"));
    }

    #[test]
    fn formatting() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(148 << 20), "148 MiB");
        assert_eq!(format_bytes(12 << 30), "12.0 GiB");
    }
}
