//! Sizes, times and durations, parsed and printed.

pub use squashfs_format::size::format_bytes as bytes;

/// Parses a size with the grammar both tools share (`squashfs_format::size`).
pub use squashfs_format::size::{parse_size, SizeError};

/// An I/O error's message without Rust's " (os error N)" suffix:
/// "Permission denied", "No such file or directory".
pub fn io_error(e: &std::io::Error) -> String {
    without_os_error(&e.to_string())
}

/// Removes every " (os error N)" from a message.
pub fn without_os_error(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(" (os error ") {
        let tail = &rest[i + " (os error ".len()..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with(')') {
            out.push_str(&rest[..i]);
            rest = &tail[digits + 1..];
        } else {
            out.push_str(&rest[..i + 1]);
            rest = &rest[i + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Seconds as `0.123 s` / `12.3 s` / `2 min 03 s`.
pub fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if s < 100.0 {
        format!("{s:.2} s")
    } else {
        let m = (s / 60.0).floor();
        format!("{m:.0} min {:02.0} s", s - m * 60.0)
    }
}

/// Unix time as an ISO 8601 UTC timestamp.
pub use squashfs_format::time::utc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("128K"), Ok(131072));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("100MiB"), Ok(100 << 20));
        assert_eq!(parse_size("2tb"), Ok(2 << 40));
        assert!(parse_size("K").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999P").is_err());
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(148 << 20), "148 MiB");
    }

    #[test]
    fn os_error_codes_are_removed() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(io_error(&e), "No such file or directory");
        assert_eq!(
            without_os_error("a: Permission denied (os error 13); b (os error x) (os error 2)"),
            "a: Permission denied; b (os error x)"
        );
        assert_eq!(without_os_error("plain"), "plain");
    }

    #[test]
    fn times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(315_532_800), "1980-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc(4_294_967_295), "2106-02-07T06:28:15Z");
        assert_eq!(seconds(0.4432), "443 ms");
        assert_eq!(seconds(38.0), "38.00 s");
        assert_eq!(seconds(125.0), "2 min 05 s");
    }
}
