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
//! | type                  | who                                     | file              |
//! |-----------------------|-----------------------------------------|-------------------|
//! | [`Privileges`]        | the setuid process                      | `setuid.rs`       |
//! | [`ThreadCredentials`] | the SPANK plugin's worker thread        | `thread.rs`       |
//! | [`Unprivileged`]      | a plain process (srun's checks)         | `unprivileged.rs` |
//! | [`Rootless`]          | not setuid: a user namespace of its own | `rootless.rs`     |
//!
//! While acting as the caller, the effective uid, gid and groups are the
//! caller's, so every lookup and open of a user's path is made with exactly
//! the caller's rights; root is held only inside `as_root` closures. Both
//! traits are sealed: only this module can say "this value proves we act as
//! the caller".
//!
//! | file                | concern                                                    |
//! |---------------------|------------------------------------------------------------|
//! | `root_phase.rs`     | the capabilities a root phase keeps; a thread root already |
//! | `verify.rs`         | dropping root for good, verified                           |
//! | `fake_privilege.rs` | credentials for the engine's unit tests (tests only)       |
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `Caller`, `Credentials`, `PrivilegeError`, `RootPhase`,
//! `ThreadCredentials`, `Unprivileged`.

mod root_phase;
mod rootless;
mod setuid;
mod thread;
mod unprivileged;
mod verify;

use std::fmt;
use std::marker::PhantomData;

use crate::system::error::Failure;
use crate::system::{self, Gid, Uid};

pub(crate) use root_phase::on_root_thread;
pub use root_phase::RootPhase;
pub(crate) use rootless::Rootless;
pub(crate) use setuid::{refuse_set_group_id, Privileges};
pub use thread::ThreadCredentials;
pub use unprivileged::Unprivileged;
pub(crate) use verify::drop_to;

/// Who asked: real uid, real gid and supplementary groups (at exec for the
/// setuid process; Slurm's job user for the plugin).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: Uid,
    pub gid: Gid,
    pub groups: Vec<Gid>,
}

impl Caller {
    /// The user who started this process: its real uid and gid, and its
    /// supplementary groups.
    pub(crate) fn of_this_process() -> Result<Caller, PrivilegeError> {
        Ok(Caller {
            uid: system::real_uid(),
            gid: system::real_gid(),
            groups: sys("getgroups", system::supplementary_groups())?,
        })
    }

    /// The user of these raw ids (from outside: Slurm's), or None if any
    /// of them is -1, which is no id (the set*id calls would read it as
    /// "leave unchanged").
    pub fn checked(uid: u32, gid: u32, groups: &[u32]) -> Option<Caller> {
        Some(Caller {
            uid: Uid::checked(uid)?,
            gid: Gid::checked(gid)?,
            groups: groups
                .iter()
                .map(|&g| Gid::checked(g))
                .collect::<Option<_>>()?,
        })
    }

    /// The caller's gid and supplementary groups.
    pub(crate) fn all_gids(&self) -> Vec<Gid> {
        std::iter::once(self.gid)
            .chain(self.groups.iter().copied())
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
    /// The job user's credentials did not take effect on the worker thread.
    NotTakenEffect,
    /// The capabilities the task does not need could not be given up.
    Capabilities(&'static str, system::Error),
    /// Capabilities beyond those the task needs remained (their mask).
    CapabilitiesRemain(u64),
    PrivateNamespace(system::Error),
    /// Rootless mode, where user namespaces are not available.
    NoUserNamespaces(system::Error),
    UserNamespace(system::Error),
    /// The program file is set-group-ID (its path and mode).
    SetGroupId(std::ffi::OsString, u32),
    /// Where /proc/self/exe cannot be read: the process runs with this
    /// effective gid, which is not its real one.
    SetGroupIdEffective(Gid),
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
            PrivilegeError::NotTakenEffect => {
                write!(f, "the job user's credentials did not take effect; refusing to open images")
            }
            PrivilegeError::Capabilities(what, e) => write!(
                f,
                "cannot give up the capabilities this task does not need ({what} failed: {e}); refusing to run with more privilege than it needs"
            ),
            PrivilegeError::PrivateNamespace(e) => {
                write!(f, "cannot create a private mount namespace: {e}")
            }
            PrivilegeError::NoUserNamespaces(e) => write!(
                f,
                "squashfs-mount is not installed setuid root, and unprivileged user namespaces are not available here ({e}: disabled by sysctl user.max_user_namespaces=0 or kernel.unprivileged_userns_clone=0, or by a security module); ask your administrator to install squashfs-mount setuid root (make install, or the package) or to allow user namespaces"
            ),
            PrivilegeError::UserNamespace(e) => write!(f, "cannot create a user namespace: {e}"),
            PrivilegeError::CapabilitiesRemain(mask) => write!(
                f,
                "capabilities this task does not need remain after giving them up (mask {mask:#x}); refusing to run with more privilege than it needs"
            ),
            PrivilegeError::SetGroupId(path, mode) => write!(
                f,
                "{} is installed set-group-ID (mode {mode:o}), which this tool never needs; refusing to run: as root, chmod g-s {}",
                path.to_string_lossy(),
                path.to_string_lossy()
            ),
            PrivilegeError::SetGroupIdEffective(egid) => write!(
                f,
                "running with effective group ID {egid}, not the caller's: the program is installed set-group-ID, which this tool never needs; refusing to run: as root, chmod g-s on the installed squashfs-mount"
            ),
        }
    }
}

crate::error_kind!(PrivilegeError);

fn sys<T>(what: &'static str, r: Result<T, system::Error>) -> Result<T, PrivilegeError> {
    r.map_err(|e| PrivilegeError::Syscall(what, e))
}

mod sealed {
    pub trait Sealed {}
}

/// Who runs the privileged sequence: carried by the credential type
/// ([`Credentials::MODE`]), it decides which of the sequence's steps exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The setuid command ([`Privileges`]): root's steps, admission by the
    /// site, one of the caller's launch slots.
    Setuid,
    /// The Slurm plugin's worker thread in slurmstepd
    /// ([`ThreadCredentials`]): root's steps, admission by the site.
    PluginThread,
    /// Not setuid root ([`Rootless`]): a user namespace of its own, every
    /// image through FUSE, no image cache, nothing the site could grant.
    Rootless,
}

impl Mode {
    /// Whether root's steps exist: the site's admission, the kernel path,
    /// the image cache, FUSE servers that start as root and drop to the
    /// caller by themselves.
    pub(crate) const fn has_root(self) -> bool {
        !matches!(self, Mode::Rootless)
    }
}

/// Proof, checked by the compiler, that the effective ids are root's: the
/// root-side operations (doc/architecture.md lists them) take a
/// `&AsRoot`, so none can be called while acting as the caller. Only
/// [`Credentials::as_root`] makes one, and lends it to its closure for the
/// closure's duration: it cannot be copied, kept, or sent to another
/// thread. The mirror of [`ActingAsCaller`].
pub struct AsRoot {
    _this_thread_only: PhantomData<*const ()>,
}

impl AsRoot {
    /// Only the credential types of this module call it, inside `as_root`
    /// (and [`on_root_thread`]).
    fn new() -> AsRoot {
        AsRoot {
            _this_thread_only: PhantomData,
        }
    }
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
    /// Who holds them, which decides what the sequence does.
    const MODE: Mode;

    fn caller(&self) -> &Caller;

    /// Runs `f` with root's effective ids (and the capabilities the task
    /// kept), lending it the proof of it, then acts as the caller again.
    /// If switching back fails, [`Credentials::stranded`] ends whatever
    /// holds these credentials: it must never go on as root by accident.
    fn as_root<T>(&mut self, f: impl FnOnce(&AsRoot) -> T) -> Result<T, PrivilegeError>;

    /// [`Credentials::as_root`] for root's work that may fail: a failure
    /// to switch and the work's own flow out as one error.
    fn try_as_root<T, E>(&mut self, f: impl FnOnce(&AsRoot) -> Result<T, E>) -> Result<T, Failure>
    where
        Failure: From<E>,
    {
        self.as_root(f)?.map_err(Failure::from)
    }

    /// Rootless mode: enters the process's own user and mount namespaces
    /// (everything after happens inside them). Called once the site's
    /// settings are read, before anything is opened; the others have
    /// nothing to do here (their private namespace comes later).
    fn enter_own_namespaces(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    /// Gives what follows a mount namespace of its own (all mounts slaves
    /// of the host's): the process's, or only the worker thread's.
    fn enter_private_mount_namespace(&mut self) -> Result<(), Failure> {
        self.as_root(|_root| system::enter_private_mount_namespace())?
            .map_err(|e| Failure::new(PrivilegeError::PrivateNamespace(e)))
    }

    /// Ends the process (setuid tool) or the worker thread (SPANK plugin)
    /// that could not return to a safe state (its namespace, directories
    /// or ids). Never returns.
    fn stranded(why: &dyn fmt::Display) -> !;
}

#[cfg(test)]
pub(crate) mod fake_privilege;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_of_minus_one_is_none() {
        let c = Caller::checked(1000, 100, &[100, 7]).expect("a user");
        assert_eq!((c.uid, c.gid), (Uid::from_raw(1000), Gid::from_raw(100)));
        assert_eq!(c.groups, [Gid::from_raw(100), Gid::from_raw(7)]);
        assert_eq!(Caller::checked(u32::MAX, 100, &[]), None);
        assert_eq!(Caller::checked(1000, u32::MAX, &[]), None);
        assert_eq!(Caller::checked(1000, 100, &[7, u32::MAX]), None);
    }
}
