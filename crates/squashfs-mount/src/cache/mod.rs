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
//!                            (set last); trusted.squashfs-mount.shared is
//!                            set once another user than the creator cloned
//!                            it; its mtime is the time of last use
//! /<name>/mnt                the instance, mounted ro,nosuid,nodev
//! /.fusectl                  the machine's fusectl, mounted once: asks the
//!                            kernel whether an evicted FUSE instance's
//!                            connection is gone (`servers.rs`)
//! ```
//! Records are extended attributes, not file contents: nothing the tool
//! writes there is subject to the caller's RLIMIT_FSIZE (see `limits`).
//! `<name>` is a keyed hash of the image file's device and inode
//! (`entry_names::entry_name`): a process that visits the namespace shows its
//! mounts in `/proc/<pid>/mountinfo`, which anyone can read, and the names
//! must not tell which files are cached.
//!
//! | file                 | concern                                               |
//! |----------------------|-------------------------------------------------------|
//! | `meta.rs`            | records and device numbers (pure)                     |
//! | `entry_names.rs`     | entry names: keyed hashes (pure)                      |
//! | `evict.rs`           | the eviction plan and limits (pure)                   |
//! | `eviction_view.rs`   | what an eviction sees: usage, candidates, what stays  |
//! | `usage_scan.rs`      | which instances are in use (bounded scan)             |
//! | `kinds.rs`           | kernel or FUSE instance: cost, deleted, ending        |
//! | `entries.rs`         | the entries, seen from inside: read, cloned, inserted |
//! | `store.rs`           | open, reuse, place (root)                             |
//! | `collection.rs`      | collecting: `--gc`, the limits, at launch (root)      |
//! | `lock.rs`            | the cache's lock: shared to list, exclusive to change |
//! | `servers.rs`         | ending evicted FUSE instances' servers (root)         |
//! | `cache_namespace.rs` | creating the cache namespace (root)                   |
//! | `claim.rs`           | single flight: one launch makes an instance           |
//!
//! Front: none (nothing here is used outside the crate; `lib.rs`).
//!
//! `--gc` and `--cache-status` are in `commands/`.

mod cache_namespace;
pub(crate) mod claim;
mod collection;
mod entries;
pub(crate) mod entry_names;
pub(crate) mod evict;
mod eviction_view;
mod kinds;
mod lock;
pub(crate) mod meta;
mod servers;
pub(crate) mod store;
pub(crate) mod usage_scan;

use std::fmt;

use crate::mounts::state_dir::StateDirError;
use crate::system;

pub(crate) use entry_names::Key;
pub(crate) use kinds::{cost, fuse_cost};
pub(crate) use meta::{Identity, Kind, Meta};
pub(crate) use store::{Entry, Offer, Placed, Reused, Store, Want};

/// Compiled-in state directory (root-only, 0700).
pub(crate) use crate::mounts::state_dir::{root_only, STATE_DIR};
const NS_FILE: &str = "ns";
const LOCK_FILE: &str = "lock";
const GC_STAMP: &str = "gc-stamp";
/// Marker at the root of the cache namespace.
const MARKER: &str = "/squashfs-mount-cache";
/// The attribute of the marker holding the key of entry names.
const SECRET_ATTRIBUTE: &str = "trusted.squashfs-mount.secret";
/// The attribute of an entry's directory holding its record.
const META_ATTRIBUTE: &str = "trusted.squashfs-mount.meta";
/// Set on a kernel entry's directory once a user other than its maker
/// cloned its instance: evicted, its loop device may be theirs, and counts
/// for the cache rather than its maker (`mounts::loop_records`).
const SHARED_ATTRIBUTE: &str = "trusted.squashfs-mount.shared";
/// Seconds between two opportunistic collections at launch.
pub const GC_INTERVAL: i64 = 10;

/// Why the cache could not be used. A launch then mounts private
/// instances (see `engine::kernel`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// A system call on the cache's state failed: what was being done.
    System(String, system::Error),
    /// The state directory is not root's and private.
    NotRootOnly,
    /// The namespace bound on the state directory is not the cache's.
    NotOurs,
    /// No namespace is bound there even after creating it.
    NotNamespace,
    /// The kernel refused to keep the cache namespace (ELOOP).
    Loop,
    SecretUnreadable,
    NoSecret,
    /// The launch does not use the cache.
    NotOpen,
    /// The lock could not be taken in time (see `shared_lock`).
    Busy(crate::mounts::shared_lock::Busy),
    /// Root's work on the cache could not start out of the caller's reach.
    OwnSession(system::OwnSession),
}

impl CacheError {
    /// A failed system call, said as "`what`: errno".
    pub(crate) fn system(what: impl Into<String>) -> impl FnOnce(system::Error) -> CacheError {
        let what = what.into();
        move |e| CacheError::System(what, e)
    }
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::System(what, e) => write!(f, "{what}: {e}"),
            CacheError::NotRootOnly => write!(
                f,
                "{STATE_DIR} is not a directory owned by root with mode 0700"
            ),
            CacheError::NotOurs => write!(
                f,
                "{STATE_DIR}/{NS_FILE} is not squashfs-mount's cache namespace"
            ),
            CacheError::NotNamespace => write!(
                f,
                "{STATE_DIR}/{NS_FILE} is not a namespace after creating it"
            ),
            CacheError::Loop => {
                f.write_str("the kernel refused to keep the cache namespace (ELOOP)")
            }
            CacheError::SecretUnreadable => {
                f.write_str("the cache namespace's secret is unreadable")
            }
            CacheError::NoSecret => f.write_str("the cache namespace has no secret"),
            CacheError::NotOpen => f.write_str("the image cache is not open"),
            CacheError::Busy(why) => write!(f, "its lock cannot be taken now: {why}"),
            CacheError::OwnSession(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CacheError {}

impl From<StateDirError> for CacheError {
    fn from(e: StateDirError) -> Self {
        match e {
            StateDirError::Stat(e) => CacheError::System(format!("cannot stat {STATE_DIR}"), e),
            StateDirError::NotRootOnly => CacheError::NotRootOnly,
            StateDirError::Subdir(name, e) => {
                CacheError::System(format!("cannot use {STATE_DIR}/{name}"), e)
            }
        }
    }
}
