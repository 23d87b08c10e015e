//! What `sqfs bench` is asked to measure.

use std::path::PathBuf;

use super::variants::Variant;

pub struct BenchOptions {
    pub dir: PathBuf,
    pub variants: Vec<Variant>,
    /// The command, run with `sh -c`; `None`: read every file.
    pub run: Option<String>,
    pub runs: usize,
    pub block_size: u32,
    pub mountpoint: Option<PathBuf>,
    pub work_dir: Option<PathBuf>,
    pub svg: PathBuf,
    pub no_run: bool,
    pub keep: bool,
}
