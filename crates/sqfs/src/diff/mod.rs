//! `sqfs diff A B`: what changed between two images: the entries added,
//! removed and changed (type, content, mode, owner, group, link target,
//! device number, extended attributes; timestamps with `--times`), read
//! with the shared reader in userspace (no mount, no root).
//!
//! Fast on large images: the two trees are walked together, directory
//! listings merged by name (entries are sorted in the image), so only
//! entries present in both are compared, on every processor. Metadata
//! decides first: a different size is changed content, whatever the data.
//! Files of equal size are compared as stored: their block lists (size
//! words) and the raw bytes of their blocks and fragment blocks, one read
//! of each without decompressing (a fragment block shared by many small
//! files is compared once per pair). Only blocks whose stored bytes differ
//! (a different compressor or block size, a fragment block packed
//! differently since an earlier file changed) are decompressed and
//! compared, so a change is never missed for want of a checksum.
//!
//! - `images.rs`: the two images, as each thread reads them;
//! - `walk.rs`: the merged walk (metadata and the subtrees on one side);
//! - `parallel.rs`: the work shared between threads;
//! - `content.rs`: file contents;
//! - `change.rs`: what is reported, `render.rs`: the text `sqfs diff`
//!   prints; `error.rs`: why two images cannot be compared.

use std::path::Path;
use std::time::Instant;

mod change;
mod content;
mod error;
mod images;
mod parallel;
mod render;
mod walk;

pub use change::{kind_name, Change, Diff, Side, XattrChanges};
pub use error::DiffError;
pub use render::render;

/// What to compare besides the tree's contents.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiffOptions {
    /// Modification times too (left out by default: every rebuild of a
    /// tree changes them).
    pub times: bool,
}

/// Compares image `a` with image `b`.
pub fn diff(a: &Path, b: &Path, opts: DiffOptions) -> Result<Diff, DiffError> {
    let started = Instant::now();
    let name = |p: &Path| p.display().to_string();
    let setup = images::Setup {
        a,
        b,
        a_name: name(a),
        b_name: name(b),
        times: opts.times,
    };
    let contents = {
        let (ar, br) = setup.open()?;
        content::Contents::new(ar.superblock(), br.superblock())
    };
    let walked = walk::walk(&setup, &contents)?;
    let mut changes = walked.changes;
    changes.sort_by(|x, y| x.key.cmp(&y.key));
    let count = |k: &str| changes.iter().filter(|c| c.change == k).count() as u64;
    Ok(Diff {
        a: name(a),
        b: name(b),
        entries_a: walked.entries_a,
        entries_b: walked.entries_b,
        added: count("added"),
        removed: count("removed"),
        changed: count("changed"),
        times: opts.times,
        stored_bytes_compared: contents.stored_bytes(),
        bytes_decompressed: contents.decompressed_bytes(),
        seconds: started.elapsed().as_secs_f64(),
        changes,
    })
}
