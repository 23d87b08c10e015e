//! `--writable=DIR`: a writable layer that persists in a directory of the
//! caller's, mounted with the caller's credentials, never root's.
//!
//! Root's steps do not change: the images are mounted read-only (kernel or
//! FUSE instances, unions) and attached by root as without a writable
//! layer; root never touches DIR. Then every privilege is dropped and the
//! launch executes `squashfs-mount-layer` (fresh memory; only the caller's
//! own fds and DIR's lock cross the exec), which, as the caller: checks
//! DIR again, adopts the lock the launch took (`engine::kept_layer`
//! claimed DIR as the caller before the drop: a DIR in use, or made on
//! other images, is refused there), checks its stamp, makes its own copies of what overlayfs could not copy
//! up (`copies.rs`), makes a user namespace of its own (the caller mapped
//! to itself, setgroups denied) with a mount namespace, and stacks an
//! overlay (lower: what root mounted there; upper and work: in DIR) on
//! each image mount point, in path order, before executing the command.
//! Overlayfs copies up with the mounter's credentials, which are the
//! caller's: the layer can hold nothing the caller could not make.
//!
//! | file            | concern                                                |
//! |-----------------|--------------------------------------------------------|
//! | `view.rs`       | what root mounted, and what the caller stacks (pure)   |
//! | `handoff.rs`    | the helper's command line (pure)                       |
//! | `failure.rs`    | what it refuses or cannot do, one variant per kind     |
//! | `filesystem.rs` | which file systems can hold an upper layer (pure)      |
//! | `dir.rs`        | DIR: created, owned by the caller, its lock            |
//! | `copies.rs`     | the caller's copies of what overlayfs cannot copy up |
//! | `stack.rs`      | the overlays, in the user namespace                    |
//! | `stage.rs`      | the caller's stage, in order (the stamp's format is    |
//! |                 | `squashfs_format::stamp`)                              |
//! | `helper.rs`     | `squashfs-mount-layer`: the command's and Slurm's ways |
//! | `start.rs`      | the one way each front end starts the helper           |

pub mod copies;
pub mod dir;
pub mod failure;
pub mod filesystem;
pub mod handoff;
pub mod helper;
pub mod mount_order;
pub mod stack;
pub mod stage;
pub mod start;

use std::ffi::OsString;
use std::os::fd::AsFd;

use crate::mounts::image::Image;
use crate::system;
use crate::system::error::Failure;

pub use mount_order::{ImageId, Made, ViewMount};

pub use failure::{Foreign, LayerError};
pub use start::{start, Kept, Start};

/// The helper's file name (`mounts::installed` says where it is).
pub use crate::mounts::installed::HELPER_NAME;

/// The files of a layer directory.
pub const LOCK_FILE: &str = "lock";
/// In `DIR/<n>`: the caller's copies (`copies.rs`) are complete.
pub const COPIED_MARK: &str = "copied";
pub use squashfs_format::stamp::STAMP_FILE;

/// What the caller's stage needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPlan {
    /// The layer directory: absolute (made so against the working directory
    /// the launch started in), lexically tidy.
    pub dir: OsString,
    /// What root mounted, in the order it was mounted (path order).
    pub mounts: Vec<ViewMount>,
    /// The working directory the command starts in (entered again by path
    /// once the overlays are mounted).
    pub cwd: OsString,
    /// What `-v` asks to be told.
    pub verbose: u8,
    /// The fd number at which the helper finds DIR's lock, taken by the
    /// launch (`engine::kept_layer::claim`) and handed over locked, so
    /// that no other launch can take DIR in between; set by `start.rs`.
    pub lock_fd: Option<std::os::fd::RawFd>,
    /// DIR was made by this launch (for `-v`).
    pub dir_made: bool,
}

/// The one command line that removes the layer directory `dir` (when no
/// launch uses it): the caller's copies of read-only directories are
/// read-only to the caller too, as in the image, so `rm -rf` alone stops
/// at them. Shell-quoted when `dir` needs it.
pub fn removal_command(dir: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"/._-+,:@%".contains(&b);
    let dir = match !dir.is_empty() && dir.bytes().all(plain) {
        true => dir.to_string(),
        false => format!("'{}'", dir.replace('\'', "'\\''")),
    };
    format!("chmod -R u+rwX {dir} && rm -rf {dir}")
}

/// The identity of an opened image (`squashfs_format::identity`), read
/// from the caller's fd.
pub fn identity_of(image: &Image, subject: &str) -> Result<ImageId, Failure> {
    let fail = |e: system::Error| {
        let image = image.path.to_string_lossy().into_owned();
        Failure::about(subject, LayerError::Identity { image, e })
    };
    let mut superblock = [0u8; squashfs_format::SUPERBLOCK_SIZE];
    system::read_at(image.fd.as_fd(), 0, &mut superblock).map_err(fail)?;
    let (start, end) = squashfs_format::identity::tail_range(image.superblock.bytes_used);
    let mut tail = vec![0u8; (end - start) as usize];
    let got = system::read_at(image.fd.as_fd(), start, &mut tail).map_err(fail)?;
    tail.truncate(got);
    Ok(ImageId {
        identity: squashfs_format::identity::identity(&superblock, &tail),
        size: image.id.size,
        path: image.path.clone(),
    })
}
