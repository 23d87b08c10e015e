//! The mechanisms below the engine, one file each: what `engine::mount_all`
//! and the cache use to make an instance of an image and put it in place.
//!
//! | file              | concern                                                      |
//! |-------------------|--------------------------------------------------------------|
//! | `image.rs`        | the caller's image, opened as the caller and pinned as an fd |
//! | `loop_device.rs`  | a loop device bound to that fd                               |
//! | `loop_records.rs` | which loop devices are the tool's and whose; each claimed,   |
//! |                   | never waited for                                             |
//! | `squashfs.rs`     | the kernel's squashfs superblock on a loop device            |
//! | `instance.rs`     | a kernel instance (loop device + superblock), detached       |
//! | `fuse.rs`         | a FUSE instance and the server that serves it                |
//! | `fuse_log.rs`     | the caller's FUSE log                                        |
//! | `fuse_report.rs`  | the reporter that reads that log for a launch                |
//! | `installed.rs`    | where our installed programs are                             |
//! | `overlay.rs`      | overlayfs unions and layers over instances                   |
//! | `mount_point.rs`  | where an instance is attached, pinned as an fd               |
//! | `budgets.rs`      | launch slots, loop devices and cached instances one user     |
//! |                   | may hold                                                     |
//! | `shared_lock.rs`  | waiting for a lock another launch holds                      |
//! | `state_dir.rs`    | the root-only directory in /run that launches share          |
//! | `prefetch.rs`     | reading an image's hot files while the command starts        |
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `server_for_plugin` (`installed::server_for_plugin`).

pub(crate) mod budgets;
pub(crate) mod fuse;
pub(crate) mod fuse_log;
pub(crate) mod fuse_report;
pub(crate) mod image;
pub(crate) mod installed;
pub(crate) mod instance;
pub(crate) mod loop_device;
pub(crate) mod loop_records;
pub(crate) mod mount_point;
pub(crate) mod overlay;
pub(crate) mod prefetch;
pub(crate) mod shared_lock;
pub(crate) mod squashfs;
pub(crate) mod state_dir;
