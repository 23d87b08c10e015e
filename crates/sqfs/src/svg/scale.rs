//! Axes and text: quantiles, round ticks and their labels, escaping and
//! wrapping.

pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Quartiles by linear interpolation between closest ranks.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(|a, b| a.total_cmp(b));
    s
}

/// A round axis: a tick step of 1, 2 or 5 times a power of ten, and the
/// smallest multiple of it that covers `max` (at most about 6 ticks).
pub fn ticks(max: f64) -> (f64, f64) {
    let max = if max > 0.0 && max.is_finite() {
        max
    } else {
        1.0
    };
    let e = (max / 5.0).log10().floor() as i32;
    // m * 10^e, computed so that 0.2 is 2 / 10, not 2 * 0.1.
    let scale = |m: f64| {
        if e >= 0 {
            m * 10f64.powi(e)
        } else {
            m / 10f64.powi(-e)
        }
    };
    let m = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|&m| scale(m) * 5.0 >= max)
        .unwrap_or(10.0);
    let n = (max / scale(m) - 1e-9).ceil();
    (scale(n * m), scale(m))
}

/// Decimals needed to print multiples of `step` exactly.
pub(super) fn decimals(step: f64) -> usize {
    (0..6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d as i32);
            (scaled - scaled.round()).abs() < 1e-6
        })
        .unwrap_or(6)
}

/// A time tick: milliseconds on axes below a second, seconds otherwise.
pub(super) fn time_label(s: f64, step: f64, axis_max: f64) -> String {
    if s == 0.0 {
        return if axis_max < 1.0 { "0 ms" } else { "0 s" }.to_string();
    }
    if axis_max < 1.0 {
        format!("{:.*} ms", decimals(step * 1000.0), s * 1000.0)
    } else {
        format!("{:.*} s", decimals(step), s)
    }
}

/// Size axis: round ticks in the binary unit that fits `max` bytes.
pub(super) fn size_axis(max: f64) -> (f64, f64, f64, &'static str) {
    let mut unit = 1.0;
    let mut name = "B";
    for (u, n) in [
        (1024.0, "KiB"),
        (1048576.0, "MiB"),
        (1073741824.0, "GiB"),
        (1099511627776.0, "TiB"),
    ] {
        if max >= u {
            unit = u;
            name = n;
        }
    }
    let (m, step) = ticks(max / unit);
    (m * unit, step * unit, unit, name)
}

pub(super) fn size_label(b: f64, unit: f64, name: &str, step: f64) -> String {
    if b == 0.0 {
        return format!("0 {name}");
    }
    format!("{:.*} {name}", decimals(step / unit), b / unit)
}

/// Splits `text` into lines of at most `width` characters at spaces.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str("    ");
        } else if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}
