//! The setuid crate's integration tests, one test binary (`cargo test -p
//! squashfs-mount --test it`): one link instead of one per file, and one
//! installed setuid binary, one stale-state sweep and one machine-wide lock
//! for the whole run. Each file is a module; run one with a filter, e.g.
//! `cargo test --release -p squashfs-mount --test it -- kept_layers::`.
//!
//! A new file `tests/it/<name>.rs` is added with `mod <name>;` below; it
//! can be written as a stand-alone test file would be (its own `use`s of
//! `sqfsmnt_test_support`), and uses [`case`] for a privileged case.
//! Privileged cases run one at a time whatever module they are in (the
//! fixture's mutex in `sqfsmnt_test_support::fixture`), so a file must not
//! make a serialising lock of its own. The image names of `Fixture::image`
//! are one namespace for the whole binary (the images are built once per
//! process): a name means the same content in every module.
//! `tests/structure.rs` stays a binary of its own (it reads the sources,
//! needs no root, and other work edits it), and so does `tests/join.rs`
//! (a Slurm cluster whose image cache must not overlap these tests').

mod cache;
mod capabilities;
mod completions;
mod core;
mod fairness;
mod fuse_cache;
mod fuse_homes;
mod fuse_server;
mod hardening;
mod kept_layer_owners;
mod kept_layers;
mod layers;
mod paths;
mod policy;
mod prefetch;
mod readme;
mod refusals;
mod rough_edges;
mod shared_state;
mod starvation;
mod symlinked_dataset;
mod uenv;
mod ux;
mod views;

use std::path::Path;

use sqfsmnt_test_support::{pair, s, Fixture};

/// One case against the installed setuid binary, as a fresh test user
/// (see `sqfsmnt_test_support::fixture::case`).
pub fn case(f: impl FnOnce(&Fixture)) {
    sqfsmnt_test_support::case(env!("CARGO_BIN_EXE_squashfs-mount"), f)
}

/// `img:m -- stat -f -c %T m`: the file system type the launch sees.
pub fn fs_type_of(img: &Path, m: &Path) -> Vec<String> {
    vec![
        pair(img, m),
        "--".into(),
        "stat".into(),
        "-f".into(),
        "-c".into(),
        "%T".into(),
        s(m),
    ]
}
