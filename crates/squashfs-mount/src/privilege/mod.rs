//! Explicit privilege state: who the caller is, and the one sealed
//! abstraction the privileged sequence (`engine::mount_all`) runs under.
//!
//! ```text
//!   exec (euid 0) --acquire()--> acting as caller --as_root(f)--> root --(f returns)--> acting as caller
//!                                      |
//!                                 drop_for_good()  (consumes the value)
//!                                      v
//!                                 unprivileged (verified: regaining root fails)
//! ```
//!
//! | type                  | who                                        | file           |
//! |-----------------------|--------------------------------------------|----------------|
//! | [`Privileges`]        | the setuid process                         | `setuid.rs`    |
//! | [`ThreadCredentials`] | the SPANK plugin's worker thread           | `thread.rs`    |
//! | [`Unprivileged`]      | a plain process (srun's checks)            | `unprivileged.rs` |
//! | [`Rootless`]          | not setuid: a user namespace of its own    | `rootless.rs`  |
//!
//! While acting as the caller, the effective uid, gid and groups are the
//! caller's, so every lookup and open of a user's path is made with exactly
//! the caller's rights; root is held only inside `as_root` closures. Both
//! traits are sealed: only this module can say "this value proves we act as
//! the caller".

mod rootless;
mod setuid;
mod thread;
mod unprivileged;
mod verify;

use std::fmt;

use crate::error::Failure;
use crate::system::{self, Gid, Uid};

pub use rootless::Rootless;
pub use setuid::Privileges;
pub use thread::ThreadCredentials;
pub use unprivileged::Unprivileged;
pub use verify::{drop_to, verify_dropped};

/// Who asked: real uid, real gid and supplementary groups (at exec for the
/// setuid process; Slurm's job user for the plugin).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: Uid,
    pub gid: Gid,
    pub groups: Vec<Gid>,
}

impl Caller {
    /// The caller's gid and supplementary groups, raw.
    pub fn all_gids(&self) -> Vec<u32> {
        std::iter::once(self.gid.as_raw())
            .chain(self.groups.iter().map(|g| g.as_raw()))
            .collect()
    }
}

#[derive(Debug)]
pub enum PrivilegeError {
    NotSetuidRoot,
    /// no_new_privs was already set when the setuid binary started: the
    /// kernel ignored the setuid bit (inside a squashfs-mount session or a
    /// Slurm task).
    InsideSession,
    Threads,
    Syscall(&'static str, system::Error),
    StillPrivileged(&'static str),
    /// A job user Slurm reported that is no user (-1).
    InvalidUser,
    /// The job user's credentials did not take effect on the worker thread.
    NotTakenEffect,
}

impl fmt::Display for PrivilegeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrivilegeError::NotSetuidRoot => write!(
                f,
                "not running with root privileges: the program must be installed owned by root with mode 4755 (make install) on a filesystem mounted without nosuid"
            ),
            PrivilegeError::InsideSession => write!(
                f,
                "already inside a squashfs-mount session (no_new_privs is set, so the kernel ignores the setuid bit): images cannot be added from inside; name all images in one call (squashfs-mount a.sqfs:/a b.sqfs:/b -- cmd, or srun --squashfs=a.sqfs:/a,b.sqfs:/b)"
            ),
            PrivilegeError::Threads => write!(f, "refusing to change credentials of a multi-threaded process"),
            PrivilegeError::Syscall(what, e) => write!(f, "{what} failed: {e}"),
            PrivilegeError::StillPrivileged(what) => {
                write!(f, "privileges were not fully dropped ({what}); refusing to run the command")
            }
            PrivilegeError::InvalidUser => write!(f, "invalid uid or gid for the job's user; refusing to open images"),
            PrivilegeError::NotTakenEffect => {
                write!(f, "the job user's credentials did not take effect; refusing to open images")
            }
        }
    }
}

impl From<PrivilegeError> for Failure {
    fn from(e: PrivilegeError) -> Self {
        Failure::new(e.to_string())
    }
}

fn sys<T>(what: &'static str, r: Result<T, system::Error>) -> Result<T, PrivilegeError> {
    r.map_err(|e| PrivilegeError::Syscall(what, e))
}

mod sealed {
    pub trait Sealed {}
}

/// Proof, checked by the compiler, that the effective credentials are the
/// caller's own: functions that open or resolve user-supplied paths take a
/// `&impl ActingAsCaller`. A `&` of a [`Credentials`] cannot exist while its
/// `as_root` holds it mutably. Sealed: code outside this module cannot
/// implement it.
pub trait ActingAsCaller: sealed::Sealed {}

/// The credentials the privileged sequence runs under: acting as the
/// caller, root only inside [`Credentials::as_root`]. Sealed.
pub trait Credentials: ActingAsCaller {
    fn caller(&self) -> &Caller;

    /// Runs `f` with root's effective ids, then acts as the caller again.
    /// If switching back fails, [`Credentials::stranded`] ends whatever
    /// holds these credentials: it must never go on as root by accident.
    fn as_root<T>(&mut self, f: impl FnOnce() -> T) -> Result<T, PrivilegeError>;

    /// Gives what follows a mount namespace of its own (all mounts slaves
    /// of the host's): the process's, or only the worker thread's.
    fn enter_private_mount_namespace(&mut self) -> Result<(), Failure> {
        self.as_root(system::enter_private_mount_namespace)?
            .map_err(|e| Failure::new(format!("cannot create a private mount namespace: {e}")))
    }

    /// Ends the process (setuid tool) or the worker thread (SPANK plugin)
    /// that could not return to a safe state (its namespace, directories
    /// or ids). Never returns.
    fn stranded(why: &dyn fmt::Display) -> !;
}
