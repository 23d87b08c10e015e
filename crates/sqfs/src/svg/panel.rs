//! One panel of the chart: its frame, axis, labels and box plots.

use std::fmt::Write;

use super::layout::{LEFT, PANEL_H};
use super::scale::*;

pub(super) struct Panel<'a> {
    pub svg: &'a mut String,
    pub top: f64,
    pub plot_w: f64,
}

impl Panel<'_> {
    pub(super) fn y(&self, v: f64, max: f64) -> f64 {
        self.top + PANEL_H - (v / max) * PANEL_H
    }

    pub(super) fn frame(
        &mut self,
        title: &str,
        max: f64,
        step: f64,
        label: &dyn Fn(f64) -> String,
    ) {
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

    pub(super) fn category_labels(&mut self, labels: &[String]) {
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

    /// A dot for every run, spread a little so equal values stay visible.
    fn dots(&mut self, cx: f64, half: f64, values: &[f64], max: f64) {
        for (i, v) in values.iter().enumerate() {
            if !v.is_finite() {
                continue;
            }
            let dx = (i as f64 % 5.0 - 2.0) * half / 6.0;
            let _ = writeln!(
                self.svg,
                r##"<circle cx="{:.1}" cy="{:.1}" r="2.2" fill="#222222" fill-opacity="0.7"/>"##,
                cx + dx,
                self.y(*v, max)
            );
        }
    }

    pub(super) fn boxplot(
        &mut self,
        cx: f64,
        half: f64,
        values: &[f64],
        max: f64,
        color: &str,
        name: &str,
    ) {
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
        self.dots(cx, half, values, max);
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
pub(super) fn legend(svg: &mut String, right: f64, y: f64, items: &[(&str, &str)]) {
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
