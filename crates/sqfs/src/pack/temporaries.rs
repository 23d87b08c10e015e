//! The files a build writes beside its image (exclusions, sort
//! priorities, the hot list, a stage directory), removed when dropped.

use std::path::{Path, PathBuf};

/// The files a build writes beside its image, removed when dropped.
pub(super) struct Temporaries {
    /// The exclusions, one a line (`-ef`).
    pub exclude: PathBuf,
    /// The `-sort` priorities of `--order`.
    pub sort: PathBuf,
    /// The hot list stored in the image.
    pub list: PathBuf,
    /// The directory mksquashfs runs in with `--order`.
    pub stage: PathBuf,
}

impl Temporaries {
    pub(super) fn beside(tmp: &Path) -> Self {
        let with = |suffix: &str| {
            let mut p = tmp.to_path_buf().into_os_string();
            p.push(suffix);
            PathBuf::from(p)
        };
        Temporaries {
            exclude: with(".exclude"),
            sort: with(".sort"),
            list: with(".hot"),
            stage: with(".stage"),
        }
    }
}

impl Drop for Temporaries {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.exclude);
        let _ = std::fs::remove_file(&self.sort);
        let _ = std::fs::remove_file(&self.list);
        let _ = std::fs::remove_dir_all(&self.stage);
    }
}
