//! The benchmark chart: a self-contained SVG file a browser can open. Box
//! plots of cold and warm times per variant (box = quartiles, line =
//! median, whiskers = min..max, dots = every run) and bars of image size.

use std::fmt::Write;

#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub size_bytes: u64,
    pub build_seconds: f64,
    pub cold: Vec<f64>,
    pub warm: Vec<f64>,
    pub walk_cold: Vec<f64>,
    pub walk_warm: Vec<f64>,
}

#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    /// Lines under the title (tree, command, method).
    pub notes: Vec<String>,
    pub cold_label: String,
    pub warm_label: String,
    pub series: Vec<Series>,
}

const WIDTH: f64 = 1100.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const PANEL_H: f64 = 200.0;
const GAP: f64 = 80.0;
const COLD: &str = "#3b6fb6";
const WARM: &str = "#e08a2c";
const SIZE: &str = "#5a9e6f";
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

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
fn decimals(step: f64) -> usize {
    (0..6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d as i32);
            (scaled - scaled.round()).abs() < 1e-6
        })
        .unwrap_or(6)
}

/// A time tick: milliseconds on axes below a second, seconds otherwise.
fn time_label(s: f64, step: f64, axis_max: f64) -> String {
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
fn size_axis(max: f64) -> (f64, f64, f64, &'static str) {
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

fn size_label(b: f64, unit: f64, name: &str, step: f64) -> String {
    if b == 0.0 {
        return format!("0 {name}");
    }
    format!("{:.*} {name}", decimals(step / unit), b / unit)
}

struct Panel<'a> {
    svg: &'a mut String,
    top: f64,
    plot_w: f64,
}

impl Panel<'_> {
    fn y(&self, v: f64, max: f64) -> f64 {
        self.top + PANEL_H - (v / max) * PANEL_H
    }

    fn frame(&mut self, title: &str, max: f64, step: f64, label: &dyn Fn(f64) -> String) {
        let (top, w) = (self.top, self.plot_w);
        let _ = writeln!(
            self.svg,
            r#"<text x="{LEFT}" y="{:.1}" font-size="15" font-weight="bold">{}</text>"#,
            top - 14.0,
            escape(title)
        );
        let n = (max / step).round() as usize;
        for i in 0..=n {
            let v = i as f64 * step;
            let y = self.y(v, max);
            let _ = writeln!(
                self.svg,
                r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#dddddd" stroke-width="1"/>"##,
                LEFT + w
            );
            let _ = writeln!(
                self.svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                y + 4.0,
                escape(&label(v))
            );
        }
        let _ = writeln!(
            self.svg,
            r##"<line x1="{LEFT}" x2="{LEFT}" y1="{top:.1}" y2="{:.1}" stroke="#333333" stroke-width="1"/>"##,
            top + PANEL_H
        );
        let _ = writeln!(
            self.svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333333" stroke-width="1"/>"##,
            LEFT + w,
            top + PANEL_H,
            top + PANEL_H
        );
    }

    fn category_labels(&mut self, labels: &[String]) {
        let slot = self.plot_w / labels.len().max(1) as f64;
        for (i, l) in labels.iter().enumerate() {
            let x = LEFT + slot * (i as f64 + 0.5);
            let _ = writeln!(
                self.svg,
                r#"<text x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
                self.top + PANEL_H + 18.0,
                escape(l)
            );
        }
    }

    fn boxplot(&mut self, cx: f64, half: f64, values: &[f64], max: f64, color: &str, name: &str) {
        let s = sorted(values);
        if s.is_empty() {
            let _ = writeln!(
                self.svg,
                r##"<text x="{cx:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#888888">n/a</text>"##,
                self.top + PANEL_H - 6.0
            );
            return;
        }
        let (lo, q1, med, q3, hi) = (
            s[0],
            quantile(&s, 0.25),
            quantile(&s, 0.5),
            quantile(&s, 0.75),
            s[s.len() - 1],
        );
        let (ylo, yq1, ymed, yq3, yhi) = (
            self.y(lo, max),
            self.y(q1, max),
            self.y(med, max),
            self.y(q3, max),
            self.y(hi, max),
        );
        let _ = writeln!(
            self.svg,
            r#"<g class="box" data-series="{}"><title>{}: median {} (min {}, max {}, {} runs)</title>"#,
            escape(name),
            escape(name),
            crate::units::seconds(med),
            crate::units::seconds(lo),
            crate::units::seconds(hi),
            s.len()
        );
        let _ = writeln!(
            self.svg,
            r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{yhi:.1}" y2="{ylo:.1}" stroke="{color}" stroke-width="1.5"/>"#
        );
        for y in [ylo, yhi] {
            let _ = writeln!(
                self.svg,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{color}" stroke-width="1.5"/>"#,
                cx - half / 2.0,
                cx + half / 2.0
            );
        }
        let _ = writeln!(
            self.svg,
            r#"<rect x="{:.1}" y="{yq3:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="0.35" stroke="{color}" stroke-width="1.5"/>"#,
            cx - half,
            2.0 * half,
            (yq1 - yq3).max(1.0)
        );
        let _ = writeln!(
            self.svg,
            r#"<line x1="{:.1}" x2="{:.1}" y1="{ymed:.1}" y2="{ymed:.1}" stroke="{color}" stroke-width="3"/>"#,
            cx - half,
            cx + half
        );
        for (i, v) in values.iter().enumerate() {
            if !v.is_finite() {
                continue;
            }
            // Spread the dots a little so equal values stay visible.
            let dx = (i as f64 % 5.0 - 2.0) * half / 6.0;
            let _ = writeln!(
                self.svg,
                r##"<circle cx="{:.1}" cy="{:.1}" r="2.2" fill="#222222" fill-opacity="0.7"/>"##,
                cx + dx,
                self.y(*v, max)
            );
        }
        let _ = writeln!(
            self.svg,
            r#"<text x="{cx:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="{color}">{}</text>"#,
            yhi - 5.0,
            escape(&crate::units::seconds(med))
        );
        let _ = writeln!(self.svg, "</g>");
    }
}

/// A legend whose right end is at `right`.
fn legend(svg: &mut String, right: f64, y: f64, items: &[(&str, &str)]) {
    let width: f64 = items
        .iter()
        .map(|(_, l)| 30.0 + 7.0 * l.chars().count() as f64)
        .sum();
    let mut x = right - width;
    for (color, label) in items {
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="14" height="14" fill="{color}" fill-opacity="0.5" stroke="{color}"/>"#,
            y - 11.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{y:.1}" font-size="12">{}</text>"#,
            x + 20.0,
            escape(label)
        );
        x += 30.0 + 7.0 * label.chars().count() as f64;
    }
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

/// Renders the chart. Panels without data (e.g. no timings) are left out.
pub fn render(c: &Chart) -> String {
    // About 6.5 px per character at 12 px: keep notes inside the picture.
    let notes: Vec<String> = c.notes.iter().flat_map(|n| wrap(n, 150)).collect();
    let has_times = c
        .series
        .iter()
        .any(|s| !s.cold.is_empty() || !s.warm.is_empty());
    let has_walk = c
        .series
        .iter()
        .any(|s| !s.walk_cold.is_empty() || !s.walk_warm.is_empty());
    let panels = 1 + usize::from(has_times) + usize::from(has_walk);
    let header = 60.0 + 16.0 * notes.len() as f64 + 20.0;
    let height = header + panels as f64 * (PANEL_H + GAP) + 10.0;
    let mut svg = String::new();
    let _ = writeln!(svg, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="{FONT}">"#
    );
    let _ = writeln!(svg, "<title>{}</title>", escape(&c.title));
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="32" font-size="20" font-weight="bold">{}</text>"#,
        escape(&c.title)
    );
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{LEFT}" y="{:.1}" font-size="12" fill="#444444">{}</text>"##,
            54.0 + 16.0 * i as f64,
            escape(n)
        );
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let labels: Vec<String> = c.series.iter().map(|s| s.label.clone()).collect();
    let n = c.series.len().max(1) as f64;
    let slot = plot_w / n;
    let half = (slot / 6.0).min(28.0);
    let mut top = header + 20.0;
    type Pick = fn(&Series) -> (&[f64], &[f64]);
    let time_panels: [(&str, bool, Pick); 2] = [
        (
            "Launch time of the command (lower is better)",
            has_times,
            |s| (&s.cold, &s.warm),
        ),
        (
            "Full-tree walk: stat every entry (lower is better)",
            has_walk,
            |s| (&s.walk_cold, &s.walk_warm),
        ),
    ];
    for (title, present, pick) in time_panels {
        if !present {
            continue;
        }
        let max = c
            .series
            .iter()
            .flat_map(|s| {
                let (a, b) = pick(s);
                a.iter().chain(b.iter()).copied()
            })
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max);
        let (axis_max, step) = ticks(max * 1.08);
        legend(
            &mut svg,
            LEFT + plot_w,
            top - 14.0,
            &[(COLD, &c.cold_label), (WARM, &c.warm_label)],
        );
        let mut p = Panel {
            svg: &mut svg,
            top,
            plot_w,
        };
        p.frame(title, axis_max, step, &|v| time_label(v, step, axis_max));
        p.category_labels(&labels);
        for (i, s) in c.series.iter().enumerate() {
            let cx = LEFT + slot * (i as f64 + 0.5);
            let (cold, warm) = pick(s);
            p.boxplot(
                cx - half * 1.25,
                half,
                cold,
                axis_max,
                COLD,
                &format!("{} {}", s.label, c.cold_label),
            );
            p.boxplot(
                cx + half * 1.25,
                half,
                warm,
                axis_max,
                WARM,
                &format!("{} {}", s.label, c.warm_label),
            );
        }
        top += PANEL_H + GAP;
    }
    // Size panel.
    let max = c
        .series
        .iter()
        .map(|s| s.size_bytes as f64)
        .fold(0.0, f64::max);
    let (axis_max, step, unit, unit_name) = size_axis(max * 1.12);
    let mut p = Panel {
        svg: &mut svg,
        top,
        plot_w,
    };
    p.frame(
        "Image size (lower is better), with build time",
        axis_max,
        step,
        &|v| size_label(v, unit, unit_name, step),
    );
    p.category_labels(&labels);
    let bar_w = (slot * 0.5).min(90.0);
    for (i, s) in c.series.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let y = p.y(s.size_bytes as f64, axis_max);
        let _ = writeln!(
            p.svg,
            r#"<g class="bar" data-series="{}"><title>{}: {} bytes, built in {}</title>"#,
            escape(&s.label),
            escape(&s.label),
            s.size_bytes,
            crate::units::seconds(s.build_seconds)
        );
        let _ = writeln!(
            p.svg,
            r#"<rect x="{:.1}" y="{y:.1}" width="{bar_w:.1}" height="{:.1}" fill="{SIZE}" fill-opacity="0.8"/>"#,
            cx - bar_w / 2.0,
            (top + PANEL_H - y).max(0.5)
        );
        let _ = writeln!(
            p.svg,
            r#"<text x="{cx:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
            y - 18.0,
            escape(&crate::units::bytes(s.size_bytes))
        );
        let _ = writeln!(
            p.svg,
            r##"<text x="{cx:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#555555">built in {}</text>"##,
            y - 5.0,
            escape(&crate::units::seconds(s.build_seconds))
        );
        let _ = writeln!(p.svg, "</g>");
    }
    let _ = writeln!(svg, "</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_ticks() {
        let s = sorted(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(quantile(&s, 0.5), 3.0);
        assert_eq!(quantile(&s, 0.25), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.5), 1.5);
        assert!(quantile(&[], 0.5).is_nan());
        for max in [0.0123, 0.083, 0.83, 1.6, 3.7, 12.0, 250.0, 1.6e8] {
            let (m, st) = ticks(max);
            assert!(m >= max && (m / st).round() <= 6.0, "{max}: {m} {st}");
            // Round steps: 1, 2 or 5 times a power of ten.
            let mant = st / 10f64.powf(st.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|x| (mant - x).abs() < 1e-9),
                "{max}: step {st}"
            );
        }
        assert_eq!(ticks(0.83), (1.0, 0.2));
        assert_eq!(ticks(0.083), (0.1, 0.02));
        assert_eq!(ticks(3.7), (4.0, 1.0));
    }

    #[test]
    fn tick_labels_are_round() {
        let labels = |max: f64| {
            let (m, st) = ticks(max);
            (0..=(m / st).round() as usize)
                .map(|i| time_label(i as f64 * st, st, m))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            labels(0.083),
            ["0 ms", "20 ms", "40 ms", "60 ms", "80 ms", "100 ms"]
        );
        assert_eq!(
            labels(0.83),
            ["0 s", "0.2 s", "0.4 s", "0.6 s", "0.8 s", "1.0 s"]
        );
        assert_eq!(labels(0.0123), ["0 ms", "5 ms", "10 ms", "15 ms"]);
        assert_eq!(labels(3.7), ["0 s", "1 s", "2 s", "3 s", "4 s"]);
        let (m, st, unit, name) = size_axis(1.6e8 * 1.12);
        let sizes: Vec<String> = (0..=(m / st).round() as usize)
            .map(|i| size_label(i as f64 * st, unit, name, st))
            .collect();
        assert_eq!(sizes, ["0 MiB", "50 MiB", "100 MiB", "150 MiB", "200 MiB"]);
    }

    #[test]
    fn wraps_long_notes() {
        let w = wrap("aaa bbb ccc ddd", 8);
        assert_eq!(w, vec!["aaa bbb", "    ccc", "    ddd"]);
        assert_eq!(wrap("short", 80), vec!["short"]);
    }

    #[test]
    fn escapes_text() {
        assert_eq!(escape("a<b & \"c\"\n"), "a&lt;b &amp; &quot;c&quot; ");
        let svg = render(&Chart {
            title: "t <x>".into(),
            series: vec![Series {
                label: "zstd:3".into(),
                size_bytes: 10,
                ..Series::default()
            }],
            ..Chart::default()
        });
        assert!(svg.contains("t &lt;x&gt;"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
