//! The image cache: one read-only instance (loop device + squashfs
//! superblock) per image file is kept mounted after a launch ends, so that
//! the next launch of the same file attaches a clone of it and finds the
//! kernel's page and dentry caches warm. No daemon. See doc/cache.md.
//!
//! Where instances live: in a mount namespace of their own (the *cache
//! namespace*) whose root is a small private tmpfs; nothing else is mounted
//! in it, and no process stays in it. It is kept alive by a bind mount of
//! its nsfs file on `/run/squashfs-mount/ns` (a root-only directory, made a
//! private mount so the bind never propagates). Only a root process can
//! enter it (setns needs CAP_SYS_ADMIN), and the tool enters it only inside
//! `as_root` sections, non-dumpable, for a few system calls.
//!
//! Layout inside the cache namespace:
//!
//! ```text
//! /squashfs-mount-cache      marker: this namespace is ours; its
//!                            attribute trusted.squashfs-mount.secret holds
//!                            32 random bytes, the key of entry names
//! /<name>/                   an entry: its attribute
//!                            trusted.squashfs-mount.meta records the image
//!                            file's identity, loop device, creator, path
//!                            (set last); its mtime is the time of last use
//! /<name>/mnt                the instance, mounted ro,nosuid,nodev
//! ```
//! Records are extended attributes, not file contents: nothing the tool
//! writes there is subject to the caller's RLIMIT_FSIZE (see `limits`).
//! `<name>` is a keyed hash of the image file's device and inode
//! (`meta::entry_name`): a process that visits the namespace shows its
//! mounts in /proc/<pid>/mountinfo, which anyone can read, and the names
//! must not tell which files are cached.
//!
//! | file          | concern                                        |
//! |---------------|------------------------------------------------|
//! | `meta.rs`     | records and entry names (pure)                 |
//! | `evict.rs`    | the eviction plan and limits (pure)            |
//! | `usage.rs`    | which instances are in use (bounded scan)      |
//! | `kinds.rs`    | kernel or FUSE instance: cost, deleted, ending |
//! | `store.rs`    | reuse, place, list, collect (root)             |
//! | `namespace.rs`| creating the cache namespace (root)            |
//! | `commands.rs` | `--gc` and `--cache-status`                    |

pub mod claim;
pub mod commands;
mod entries;
pub mod evict;
mod kinds;
mod lock;
pub mod meta;
mod namespace;
pub mod store;
pub mod usage;

use std::fmt;
use std::os::fd::BorrowedFd;

use crate::system;

pub use evict::{Limits, Mode};
pub use kinds::fuse_cost;
pub use meta::{Identity, Key, Kind, Meta};
pub use store::{Entry, Offer, Placed, Store};

/// Compiled-in state directory (root-only, 0700).
pub const CACHE_DIR: &str = "/run/squashfs-mount";
const NS_FILE: &str = "ns";
const LOCK_FILE: &str = "lock";
const GC_STAMP: &str = "gc-stamp";
/// Marker at the root of the cache namespace.
const MARKER: &str = "/squashfs-mount-cache";
/// The attribute of the marker holding the key of entry names.
const SECRET_ATTRIBUTE: &str = "trusted.squashfs-mount.secret";
/// The attribute of an entry's directory holding its record.
const META_ATTRIBUTE: &str = "trusted.squashfs-mount.meta";
/// Seconds between two opportunistic collections at launch.
pub const GC_INTERVAL: i64 = 10;

/// Why the cache could not be used. A launch then mounts private
/// instances (see `engine::source`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// Something is wrong with the cache's state or the system.
    Unavailable(String),
    /// The lock could not be taken in time (see `shared_lock`).
    Busy(crate::shared_lock::Busy),
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Unavailable(why) => f.write_str(why),
            CacheError::Busy(why) => write!(f, "its lock cannot be taken now: {why}"),
        }
    }
}

/// Refuses a state directory that is not root's and private.
pub fn root_only(fd: BorrowedFd<'_>) -> Result<(), CacheError> {
    let id = system::fstat(fd)
        .map_err(|e| CacheError::Unavailable(format!("cannot stat {CACHE_DIR}: {e}")))?;
    if !id.is_dir() || id.uid != 0 || id.mode & 0o077 != 0 {
        return Err(CacheError::Unavailable(format!(
            "{CACHE_DIR} is not a directory owned by root with mode 0700"
        )));
    }
    Ok(())
}
