//! The benchmark chart: a self-contained SVG file a browser can open. Box
//! plots of cold and warm times per variant (box = quartiles, line =
//! median, whiskers = min..max, dots = every run) and bars of image size.

use std::fmt::Write;

mod layout;
mod panel;
mod scale;

use layout::{COLD, FONT, GAP, LEFT, PANEL_H, RIGHT, SIZE, WARM, WIDTH};
use panel::{legend, Panel};
pub use scale::{escape, quantile, sorted, ticks, wrap};
use scale::{size_axis, size_label, time_label};

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
    let mut svg = heading(c, &notes, height);
    let plot_w = WIDTH - LEFT - RIGHT;
    let mut layout = Layout {
        labels: c.series.iter().map(|s| s.label.clone()).collect(),
        slot: plot_w / c.series.len().max(1) as f64,
        plot_w,
        top: header + 20.0,
    };
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
        if present {
            time_panel(&mut svg, c, &layout, title, pick);
            layout.top += PANEL_H + GAP;
        }
    }
    size_panel(&mut svg, c, &layout);
    let _ = writeln!(svg, "</svg>");
    svg
}

/// Where the panels go: the variants' labels, the width of each one's
/// slot, the plot's width, and the top of the next panel.
struct Layout {
    labels: Vec<String>,
    slot: f64,
    plot_w: f64,
    top: f64,
}

/// The cold and warm times a time panel shows of a series.
type Pick = fn(&Series) -> (&[f64], &[f64]);

/// The SVG's start: its size, the title and the notes.
fn heading(c: &Chart, notes: &[String], height: f64) -> String {
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
    svg
}

/// A panel of box plots, cold and warm side by side for every variant.
fn time_panel(svg: &mut String, c: &Chart, at: &Layout, title: &str, pick: Pick) {
    let half = (at.slot / 6.0).min(28.0);
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
        svg,
        LEFT + at.plot_w,
        at.top - 14.0,
        &[(COLD, &c.cold_label), (WARM, &c.warm_label)],
    );
    let mut p = Panel {
        svg,
        top: at.top,
        plot_w: at.plot_w,
    };
    p.frame(title, axis_max, step, &|v| time_label(v, step, axis_max));
    p.category_labels(&at.labels);
    for (i, s) in c.series.iter().enumerate() {
        let cx = LEFT + at.slot * (i as f64 + 0.5);
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
}

/// The panel of image sizes, with build times.
fn size_panel(svg: &mut String, c: &Chart, at: &Layout) {
    let top = at.top;
    let max = c
        .series
        .iter()
        .map(|s| s.size_bytes as f64)
        .fold(0.0, f64::max);
    let (axis_max, step, unit, unit_name) = size_axis(max * 1.12);
    let mut p = Panel {
        svg,
        top,
        plot_w: at.plot_w,
    };
    p.frame(
        "Image size (lower is better), with build time",
        axis_max,
        step,
        &|v| size_label(v, unit, unit_name, step),
    );
    p.category_labels(&at.labels);
    let bar_w = (at.slot * 0.5).min(90.0);
    for (i, s) in c.series.iter().enumerate() {
        let cx = LEFT + at.slot * (i as f64 + 0.5);
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
}

#[cfg(test)]
mod tests {
    use super::scale::*;
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
