//! The mechanisms below the engine, one room each: what `engine::mount_all`
//! and the cache use to make an instance of an image and put it in place.
//!
//! - [`image`]: the caller's image, opened as the caller and pinned as an fd.
//! - [`loop_device`]: a loop device bound to that fd.
//! - [`loop_records`]: which loop devices are the tool's and whose; each
//!   device claimed, never waited for.
//! - [`squashfs`]: the kernel's squashfs superblock on a loop device.
//! - [`instance`]: a kernel instance (loop device + superblock) as a detached mount.
//! - [`fuse`]: a FUSE instance and the server that serves it.
//! - [`fuse_log`]: the caller's FUSE log, and the reporter that reads it.
//! - [`installed`]: where our installed programs are.
//! - [`overlay`]: overlayfs unions and layers over instances.
//! - [`mount_point`]: where an instance is attached, pinned as an fd.
//! - [`budgets`]: launch slots, loop devices and cached instances one user
//!   may hold.
//! - [`shared_lock`]: waiting for a lock another launch holds.
//! - [`state_dir`]: the root-only directory in /run that launches share.
//! - [`prefetch`]: reading an image's hot files while the command starts.

pub mod budgets;
pub mod fuse;
pub mod fuse_log;
pub mod fuse_report;
pub mod image;
pub mod installed;
pub mod instance;
pub mod loop_device;
pub mod loop_records;
pub mod mount_point;
pub mod overlay;
pub mod prefetch;
pub mod shared_lock;
pub mod squashfs;
pub mod state_dir;
