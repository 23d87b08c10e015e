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
//! | file               | concern                                                        |
//! |--------------------|----------------------------------------------------------------|
//! | `mount_order.rs`   | what root mounted, what the caller stacks (pure)               |
//! | `handoff.rs`       | the plan, and the helper's command line (pure)                 |
//! | `layout.rs`        | DIR's file names, the command that removes it (pure)           |
//! | `failure.rs`       | what it refuses or cannot do, one variant per kind             |
//! | `failure_tests.rs` | unit tests of failure.rs                                       |
//! | `filesystem.rs`    | which file systems can hold an upper layer (pure)              |
//! | `dir.rs`           | DIR: created, owned by the caller, judged, its lock, its stamp |
//! | `copies.rs`        | the caller's copies of what overlayfs cannot copy up           |
//! | `copies_tests.rs`  | unit tests of copies.rs                                        |
//! | `stack.rs`         | the overlays, in the user namespace                            |
//! | `stage.rs`         | the caller's stage, in order (the stamp's format is            |
//! |                    | `squashfs_format::stamp`)                                      |
//! | `helper.rs`        | `squashfs-mount-layer`: the command's and Slurm's ways         |
//! | `start.rs`         | the one way each front end starts the helper                   |
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `Kept` (`helper::Kept`), `Start` (`start::Start`), `StepLayer`
//! (`helper::StepLayer`), `run_layer_helper` (`helper::main`),
//! `start_layer` (`start::start`).

pub(crate) mod copies;
pub(crate) mod dir;
pub(crate) mod failure;
pub(crate) mod filesystem;
pub(crate) mod handoff;
pub(crate) mod helper;
pub(crate) mod layout;
pub(crate) mod mount_order;
pub(crate) mod stack;
pub(crate) mod stage;
pub(crate) mod start;

pub(crate) use mount_order::{identity_of, Made, ViewMount};

pub(crate) use failure::{Foreign, LayerError};
pub(crate) use handoff::LayerPlan;
pub(crate) use helper::Kept;
pub(crate) use layout::{removal_command, COPIED_MARK, LOCK_FILE};
pub(crate) use start::{start, Start};

/// The helper's file name (`mounts::installed` says where it is).
pub(crate) use crate::mounts::installed::HELPER_NAME;
pub(crate) use squashfs_format::stamp::STAMP_FILE;
