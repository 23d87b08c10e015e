//! Which units go into which image: first-fit decreasing, and the
//! exclusions that make an image hold exactly its units.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::cut::Cut;

/// Places groups (with their estimated costs) into images of `room` bytes:
/// largest first, each into the first image where it fits (first-fit
/// decreasing), so every image but the last is nearly full. Returns the
/// image of each group, or the index of a group larger than `room`.
pub fn plan(costs: &[u64], room: u64) -> Result<Vec<usize>, usize> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    // Largest first; ties in input order, so the plan is deterministic.
    order.sort_by(|&a, &b| costs[b].cmp(&costs[a]).then(a.cmp(&b)));
    let mut load: Vec<u64> = Vec::new();
    let mut assign = vec![0usize; costs.len()];
    for g in order {
        if costs[g] > room {
            return Err(g);
        }
        let bin = match load.iter().position(|&l| l + costs[g] <= room) {
            Some(b) => b,
            None => {
                load.push(0);
                load.len() - 1
            }
        };
        load[bin] += costs[g];
        assign[g] = bin;
    }
    Ok(assign)
}

/// The exclusions that make the image for `bin` hold exactly its units:
/// the largest subtrees (units, or containers with nothing for this image)
/// that are not its own. Empty containers go to image 0.
pub fn excludes_for(cut: &Cut, unit_bin: &[usize], bin: usize) -> Vec<PathBuf> {
    // Does a container hold (at any depth) something for this bin?
    let mut needed: HashMap<&Path, bool> = HashMap::new();
    let mut has_units: HashMap<&Path, bool> = HashMap::new();
    for (u, &b) in cut.units.iter().zip(unit_bin) {
        let mut p = u.rel.parent();
        while let Some(dir) = p {
            if dir.as_os_str().is_empty() {
                break;
            }
            has_units.insert(dir, true);
            if b == bin {
                needed.insert(dir, true);
            }
            p = dir.parent();
        }
    }
    let keep = |dir: &Path| -> bool {
        needed.get(dir).copied().unwrap_or(false)
            || (bin == 0 && !has_units.get(dir).copied().unwrap_or(false))
    };
    let mut out = Vec::new();
    let parent_kept = |p: &Path| -> bool {
        match p.parent() {
            None => true,
            Some(q) if q.as_os_str().is_empty() => true,
            Some(q) => keep(q),
        }
    };
    for dir in &cut.containers {
        if !keep(dir) && parent_kept(dir) {
            out.push(dir.clone());
        }
    }
    for (u, &b) in cut.units.iter().zip(unit_bin) {
        if b != bin && parent_kept(&u.rel) {
            out.push(u.rel.clone());
        }
    }
    out.sort();
    out
}
