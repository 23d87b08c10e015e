//! What `sqfs bench` reports: the results of each variant, the table and
//! the chart.

use serde::Serialize;

use super::methods::{ColdMethod, MountPath, WarmMethod};
use super::variants::Variant;

#[derive(Clone, Debug, Serialize)]
pub struct VariantResult {
    #[serde(flatten)]
    pub variant: Variant,
    pub bytes: u64,
    pub build_seconds: f64,
    pub cold: Vec<f64>,
    pub warm: Vec<f64>,
    pub walk_cold: Vec<f64>,
    pub walk_warm: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub tree: String,
    pub tree_bytes: u64,
    pub tree_entries: u64,
    pub block_size: u32,
    pub command: Option<String>,
    pub mountpoint: String,
    pub runs: usize,
    pub cold_method: Option<ColdMethod>,
    pub cold_explained: Option<String>,
    pub warm_method: Option<WarmMethod>,
    pub warm_explained: Option<String>,
    /// Which way squashfs-mount mounted the images (kernel or FUSE) and why.
    pub mount_path: Option<MountPath>,
    pub squashfs_mount: Option<String>,
    /// Passed to squashfs-mount for cold runs (and warm runs without the
    /// image cache).
    pub squashfs_mount_flags: Vec<String>,
    pub variants: Vec<VariantResult>,
    pub svg: String,
}
use crate::svg;
use crate::units;

pub(super) fn median(v: &[f64]) -> Option<f64> {
    let s = svg::sorted(v);
    (!s.is_empty()).then(|| svg::quantile(&s, 0.5))
}

fn spread(v: &[f64]) -> String {
    let s = svg::sorted(v);
    match (median(v), s.first(), s.last()) {
        (Some(m), Some(lo), Some(hi)) => format!("{} [{}-{}]", units::seconds(m), ms(*lo), ms(*hi)),
        _ => "-".into(),
    }
}

fn ms(s: f64) -> String {
    if s < 10.0 {
        format!("{:.0}", s * 1000.0)
    } else {
        format!("{s:.1}s")
    }
}

pub fn chart(r: &Report) -> svg::Chart {
    let mut notes = vec![format!(
        "Tree: {} ({}, {} entries), block size {}",
        r.tree,
        units::bytes(r.tree_bytes),
        r.tree_entries,
        units::bytes(u64::from(r.block_size))
    )];
    match (&r.command, r.cold_method) {
        (Some(c), Some(m)) => {
            notes.push(format!("Command: {c}; mounted on {}; {} runs each (box: quartiles, line: median, whiskers: min-max)", r.mountpoint, r.runs));
            if let Some(p) = &r.mount_path {
                notes.push(p.explain());
            }
            notes.push(m.explain().to_string());
            if let Some(w) = &r.warm_explained {
                notes.push(w.clone());
            }
        }
        _ => notes.push("Launch times not measured (--no-run): sizes and build times only".into()),
    }
    svg::Chart {
        title: "sqfs bench: SquashFS compressors compared".into(),
        notes,
        cold_label: r.cold_method.map_or("cold", |m| m.label()).to_string(),
        warm_label: "warm".into(),
        series: r
            .variants
            .iter()
            .map(|v| svg::Series {
                label: v.variant.label.clone(),
                size_bytes: v.bytes,
                build_seconds: v.build_seconds,
                cold: v.cold.clone(),
                warm: v.warm.clone(),
                walk_cold: v.walk_cold.clone(),
                walk_warm: v.walk_warm.clone(),
            })
            .collect(),
    }
}

/// The table `bench` prints.
pub fn table(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = preamble(r);
    let rows = rows(r);
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(s, "{}", cells.join("  ").trim_end());
    }
    if let Some(note) = warm_not_faster(r) {
        let _ = writeln!(s, "{note}");
    }
    let _ = writeln!(s, "chart: {}", r.svg);
    s
}

/// A note when a warm median is not below its cold one: with few runs the
/// machine's noise outweighs what the cache saves (a command that reads
/// little), and the order of the medians means nothing.
pub(super) fn warm_not_faster(r: &Report) -> Option<String> {
    let slower: Vec<String> = r
        .variants
        .iter()
        .flat_map(|v| {
            [
                ("command", &v.cold, &v.warm),
                ("walk", &v.walk_cold, &v.walk_warm),
            ]
            .into_iter()
            .filter(|(_, cold, warm)| match (median(cold), median(warm)) {
                (Some(c), Some(w)) => w >= c,
                _ => false,
            })
            .map(|(what, _, _)| format!("{} {what}", v.variant.label))
        })
        .collect();
    if slower.is_empty() {
        return None;
    }
    Some(format!(
        "note: warm is not faster than cold for {}: the runs vary more than the cache saves there ({} runs each); their order means nothing: measure again with more --runs, on a quieter machine, or with a command that reads more",
        slower.join(", "),
        r.runs
    ))
}

/// The lines above the table: the tree, the command and how it was timed.
fn preamble(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tree: {} ({}, {} entries)",
        r.tree,
        units::bytes(r.tree_bytes),
        r.tree_entries
    );
    let _ = writeln!(s, "block size: {}", units::bytes(u64::from(r.block_size)));
    if let (Some(c), Some(m)) = (&r.command, r.cold_method) {
        let _ = writeln!(
            s,
            "command: {c}  (mounted on {}, {} runs each)",
            r.mountpoint, r.runs
        );
        if let Some(p) = &r.mount_path {
            let _ = writeln!(s, "{}", p.explain());
        }
        let _ = writeln!(s, "{}", m.explain());
        if let Some(w) = &r.warm_explained {
            let _ = writeln!(s, "{w}");
        }
        let _ = writeln!(
            s,
            "times: median [min-max in ms] of the whole squashfs-mount run"
        );
    } else {
        let _ = writeln!(s, "launch times not measured (--no-run)");
    }
    s
}

/// The table's cells, the header first.
fn rows(r: &Report) -> Vec<Vec<String>> {
    let cold = r.cold_method.map_or("cold", |m| {
        if m == ColdMethod::Fadvise {
            "cold*"
        } else {
            "cold"
        }
    });
    let header = [
        "compressor".to_string(),
        "size".into(),
        "% of tree".into(),
        "build".into(),
        format!("{cold} command"),
        "warm command".into(),
        format!("{cold} walk"),
        "warm walk".into(),
    ];
    let mut rows = vec![header.to_vec()];
    for v in &r.variants {
        rows.push(vec![
            v.variant.label.clone(),
            units::bytes(v.bytes),
            if r.tree_bytes > 0 {
                format!("{:.1}%", v.bytes as f64 * 100.0 / r.tree_bytes as f64)
            } else {
                "-".into()
            },
            units::seconds(v.build_seconds),
            spread(&v.cold),
            spread(&v.warm),
            spread(&v.walk_cold),
            spread(&v.walk_warm),
        ]);
    }
    if r.cold_method.is_none() {
        // Sizes and build times only: leave out the empty timing columns.
        for row in &mut rows {
            row.truncate(4);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::warm_not_faster;
    use super::{Report, Variant, VariantResult};

    fn report(cold: &[f64], warm: &[f64]) -> Report {
        let variant = crate::bench::parse_variants("lz4").unwrap().remove(0);
        Report {
            tree: "t".into(),
            tree_bytes: 1,
            tree_entries: 1,
            block_size: 131072,
            command: Some("true".into()),
            mountpoint: "/m".into(),
            runs: cold.len(),
            cold_method: None,
            cold_explained: None,
            warm_method: None,
            warm_explained: None,
            mount_path: None,
            squashfs_mount: None,
            squashfs_mount_flags: Vec::new(),
            variants: vec![VariantResult {
                variant: Variant { ..variant },
                bytes: 1,
                build_seconds: 0.1,
                cold: cold.to_vec(),
                warm: warm.to_vec(),
                walk_cold: vec![0.02, 0.03],
                walk_warm: vec![0.01, 0.01],
            }],
            svg: "x.svg".into(),
        }
    }

    #[test]
    fn a_warm_median_above_the_cold_one_is_called_noise() {
        assert_eq!(warm_not_faster(&report(&[0.05, 0.04], &[0.02, 0.03])), None);
        let note = warm_not_faster(&report(&[0.02, 0.021], &[0.03, 0.02])).unwrap();
        assert!(
            note.starts_with("note: warm is not faster than cold for lz4 command:")
                && note.contains("(2 runs each)")
                && note.contains("more --runs"),
            "{note}"
        );
    }
}
