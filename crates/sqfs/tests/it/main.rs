//! The integration tests of `sqfs`, one test binary (`cargo test -p sqfs
//! --test it`): one link instead of one per file. Each file is a module;
//! run one with a filter, e.g. `cargo test --release -p sqfs --test it --
//! pack::`. A new file `tests/it/<name>.rs` is added with `mod <name>;`
//! below, written as a stand-alone test file would be.

mod bench;
mod check;
mod closed_stdout;
mod completions;
mod diff;
mod inspect;
mod order;
mod pack;
mod rough_edges;
mod split;
mod symlinked_source;
