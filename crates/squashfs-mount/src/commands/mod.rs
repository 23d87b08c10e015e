//! The maintenance commands: `--gc`, `--cache-status` and `--policy`.
//! Each acquires the setuid process's privileges for its own small root
//! phase, opens what the caller names with the caller's rights, and drops
//! every privilege before it prints anything.
//!
//! What a user sees and may evict is decided from the recorded creator
//! only: a user's own instances (root: all). No recorded path of another
//! user is ever opened (its owner could stall the command, or learn who ran
//! it), and no other user's path is shown.
//!
//! | file               | concern                                                  |
//! |--------------------|----------------------------------------------------------|
//! | `launch.rs`        | the setuid and rootless front end of `engine::mount_all` |
//! | `program.rs`       | the `squashfs-mount` program: command line, launch, exec |
//! | `gc.rs`            | `--gc`: evicting cached instances                        |
//! | `status.rs`        | `--cache-status`: the caller's cached instances          |
//! | `policy_report.rs` | `--policy`: the policy in force, each image's route      |
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `job_epilog` (`gc::job_epilog`), `run_program` (`program::run`).

pub(crate) mod gc;
pub(crate) mod launch;
pub(crate) mod policy_report;
pub(crate) mod program;
pub(crate) mod status;

use std::fmt;

use crate::cache::{CacheError, Entry, Store};
use crate::config;
use crate::privilege::{Credentials, PrivilegeError, Privileges, RootPhase};
use crate::system::error::Failure;
use crate::system::Uid;

/// What `--gc` and `--cache-status` say without the setuid bit.
const ROOTLESS: &str = "no image cache: squashfs-mount is not installed setuid root here, and rootless mode keeps no cache (every image is served through FUSE, for the command's lifetime only)\n";

/// The setuid process's privileges for a cache command; None in rootless
/// mode (the binary is not setuid root), where there is no cache to show
/// or evict.
fn acquire() -> Result<Option<Privileges>, Failure> {
    match Privileges::acquire(RootPhase::CACHE) {
        Ok(p) => Ok(Some(p)),
        Err(PrivilegeError::NotSetuidRoot) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// What a maintenance command could not do.
#[derive(Debug)]
pub enum CommandError {
    /// `--gc --all` by a user other than root.
    GcAllNotRoot,
    Cache(CacheError),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::GcAllNotRoot => f.write_str("--gc --all evicts instances other users may be about to reuse; only root may use it"),
            CommandError::Cache(e) => write!(f, "image cache: {e}"),
        }
    }
}

crate::error_kind!(CommandError);

/// Root's work on the cache (its lock, evictions) in a process of its own
/// session, out of the caller's scheduling reach, as a launch's.
fn on_the_cache<T>(work: impl FnOnce() -> Result<T, CacheError>) -> Result<T, Failure> {
    crate::engine::shared_work(true, work)
        .map_err(|e| Failure::new(CommandError::Cache(CacheError::OwnSession(e))))?
        .map_err(|e| Failure::new(CommandError::Cache(e)))
}

/// Opens the existing cache as root; None when there is none.
fn open_existing(privileges: &mut Privileges) -> Result<Option<Store>, Failure> {
    privileges
        .as_root(|root| {
            let settings = config::load();
            Store::open(
                root,
                settings.cache_limits(),
                settings.cache_lock_timeout_ms,
                false,
                Privileges::stranded,
            )
        })?
        .map_err(|e| Failure::new(CommandError::Cache(e)))
}

/// The image path an entry records, for its creator and root.
fn shown_path(e: &Entry) -> String {
    match &e.meta {
        Some(m) => String::from_utf8_lossy(&m.path).escape_debug().to_string(),
        None => format!("(incomplete entry {})", e.name),
    }
}

/// Whether the user `uid` may see (and evict) the entry.
fn visible(uid: Uid, e: &Entry) -> bool {
    uid.is_root() || e.meta.as_ref().is_some_and(|m| m.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_user_sees() {
        let e = |uid: u32| Entry {
            name: "0".repeat(32),
            meta: Some(crate::cache::Meta::new(
                &crate::cache::Identity {
                    dev: 1,
                    ino: 2,
                    size: 3,
                    mtime: (0, 0),
                    ctime: (0, 0),
                },
                crate::cache::Kind::Kernel {
                    loop_number: 1,
                    block_size: 131072,
                },
                0x701,
                Uid::from_raw(uid),
                0,
                b"/x",
            )),
            valid: true,
            last_used: 0,
            shared: false,
        };
        assert!(visible(Uid::from_raw(1000), &e(1000)));
        assert!(!visible(Uid::from_raw(1001), &e(1000)));
        assert!(visible(Uid::ROOT, &e(1000)));
    }
}
