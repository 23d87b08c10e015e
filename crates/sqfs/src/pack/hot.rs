//! `--order`: every file gets a mksquashfs `-sort` priority (see
//! order.rs), and the hot list goes into the image for squashfs-mount's
//! prefetch.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::temporaries::Temporaries;
use super::PackError;
use crate::error::FileError;
use crate::order::{self, HotList, SortPlan};

/// Adds the sort file (and the stored list) to `cmd`; returns how many
/// hot files are stored first.
pub(super) fn store_first(
    cmd: &mut Command,
    dir: &Path,
    excludes: &[&OsStr],
    hot: &HotList,
    files: &Temporaries,
    mkfs_time: u32,
) -> Result<usize, PackError> {
    let excluded: Vec<PathBuf> = excludes.iter().map(PathBuf::from).collect();
    let in_order = order::files_in_pack_order(dir, &excluded)?;
    let plan = order::sort_file(&in_order, hot);
    warn_about(&plan, hot, dir);
    std::fs::write(&files.sort, &plan.text)
        .map_err(|e| PackError::SortFile(FileError::new(&files.sort, e)))?;
    cmd.arg("-sort").arg(&files.sort);
    // The list goes into the image too, unless it is empty or the tree
    // has its own.
    if plan.hot == 0 {
        // Nothing to prefetch.
    } else if dir.join(order::IMAGE_LIST_DIR).symlink_metadata().is_ok() {
        eprintln!(
            "sqfs: warning: {} has its own {}; the hot list is not stored in the image",
            dir.display(),
            order::IMAGE_LIST_DIR
        );
    } else {
        store_list(cmd, &plan, files, mkfs_time)?;
    }
    Ok(plan.hot)
}

/// Warns about hot list entries that are not packed, and names the
/// sort file cannot express.
fn warn_about(plan: &SortPlan, hot: &HotList, dir: &Path) {
    if plan.missing_count > 0 {
        let shown: Vec<String> = plan
            .missing
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        eprintln!(
            "sqfs: warning: {} of the {} entries of the hot list are not files packed from {} ({}{}); they are ignored",
            plan.missing_count,
            hot.paths.len(),
            dir.display(),
            shown.join(", "),
            if plan.missing_count > shown.len() { ", ..." } else { "" }
        );
    }
    if plan.unlisted > 0 {
        eprintln!(
            "sqfs: warning: {} file names contain a newline, which mksquashfs's sort file cannot express; they are stored after the hot files",
            plan.unlisted
        );
    }
}

/// Stores the list as pseudo files with the image's time. mksquashfs 4.5
/// reads pseudo files by their path relative to its working directory
/// when -sort is given (instead of running their command), so it runs in
/// a staging directory that holds the list at that path.
fn store_list(
    cmd: &mut Command,
    plan: &SortPlan,
    files: &Temporaries,
    mkfs_time: u32,
) -> Result<(), PackError> {
    let stage = &files.stage;
    let in_stage = stage.join(order::IMAGE_LIST_DIR);
    std::fs::create_dir_all(&in_stage)
        .and_then(|()| std::fs::write(&files.list, &plan.list))
        .and_then(|()| std::fs::write(stage.join(order::IMAGE_LIST), &plan.list))
        // What mksquashfs stores is this file's time (see above).
        .and_then(|()| {
            std::fs::File::options()
                .write(true)
                .open(stage.join(order::IMAGE_LIST))?
                .set_modified(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(mkfs_time)),
                )
        })
        .map_err(|e| PackError::HotList(FileError::new(&files.list, e)))?;
    cmd.current_dir(stage);
    let quoted = format!(
        "'{}'",
        files.list.display().to_string().replace('\'', "'\\''")
    );
    cmd.arg("-p")
        .arg(format!("{} D {mkfs_time} 755 0 0", order::IMAGE_LIST_DIR));
    cmd.arg("-p").arg(format!(
        "{} F {mkfs_time} 644 0 0 cat {quoted}",
        order::IMAGE_LIST
    ));
    Ok(())
}
