//! Explicit privilege state of the setuid process.
//!
//! ```text
//!   exec (euid 0) --acquire()--> ActingAsCaller --as_root(f)--> Root --(f returns)--> ActingAsCaller
//!                                      |
//!                                 drop_for_good()  (consumes the value)
//!                                      v
//!                                 Unprivileged (verified: regaining root fails)
//! ```
//! While `ActingAsCaller` the effective uid/gid are the caller's real ones
//! and the supplementary groups are the caller's (the kernel keeps them
//! across a setuid exec), so every file lookup and open is done with exactly
//! the caller's rights. Root is held only inside `as_root` closures.

use crate::system::{self, Gid, Uid};

/// Who ran us: real uid, real gid and supplementary groups at exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: Uid,
    pub gid: Gid,
    pub groups: Vec<Gid>,
}

#[derive(Debug)]
pub enum PrivilegeError {
    NotSetuidRoot,
    Threads,
    Syscall(&'static str, system::Error),
    StillPrivileged(&'static str),
}

impl std::fmt::Display for PrivilegeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrivilegeError::NotSetuidRoot => write!(
                f,
                "squashfs-mount is not running with root privileges: it must be installed owned by root with mode 4755 (make install) on a filesystem mounted without nosuid"
            ),
            PrivilegeError::Threads => write!(f, "refusing to change credentials of a multi-threaded process"),
            PrivilegeError::Syscall(what, e) => write!(f, "{what} failed: {e}"),
            PrivilegeError::StillPrivileged(what) => {
                write!(f, "privileges were not fully dropped ({what}); refusing to run the command")
            }
        }
    }
}

fn sys<T>(what: &'static str, r: Result<T, system::Error>) -> Result<T, PrivilegeError> {
    r.map_err(|e| PrivilegeError::Syscall(what, e))
}

/// Proof, checked by the compiler, that effective credentials are the
/// caller's own: functions that open or resolve user-supplied paths take a
/// `&impl ActingAsCaller`. `Privileges` is one (a `&Privileges` cannot exist
/// while `as_root` holds `&mut Privileges`); the SPANK plugin has its own.
pub trait ActingAsCaller {}

impl ActingAsCaller for Privileges {}

/// Holding this means: saved uid is 0, effective ids are the caller's.
#[derive(Debug)]
pub struct Privileges {
    caller: Caller,
}

impl Privileges {
    /// First thing `main` does: makes the process non-dumpable, records the
    /// caller and switches the effective ids to the caller's.
    pub fn acquire() -> Result<Self, PrivilegeError> {
        sys("prctl(PR_SET_DUMPABLE, 0)", system::set_not_dumpable())?;
        let caller = Caller {
            uid: system::real_uid(),
            gid: system::real_gid(),
            groups: sys("getgroups", system::supplementary_groups())?,
        };
        if !system::effective_uid().is_root() {
            return Err(PrivilegeError::NotSetuidRoot);
        }
        let p = Privileges { caller };
        p.become_caller()?;
        Ok(p)
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    fn single_threaded() -> Result<(), PrivilegeError> {
        match system::thread_count() {
            Ok(1) => Ok(()),
            Ok(_) => Err(PrivilegeError::Threads),
            Err(e) => Err(PrivilegeError::Syscall("counting threads", e)),
        }
    }

    fn become_caller(&self) -> Result<(), PrivilegeError> {
        Self::single_threaded()?;
        // gid first: once euid is not 0 we could no longer change it.
        sys("setresgid(-1, caller, -1)", system::set_effective_gid(self.caller.gid))?;
        sys("setresuid(-1, caller, -1)", system::set_effective_uid(self.caller.uid))?;
        Ok(())
    }

    /// Runs `f` with effective uid and gid 0, then returns to acting as the
    /// caller. If switching back fails the process exits at once: it must
    /// never continue as root by accident.
    pub fn as_root<T>(&mut self, f: impl FnOnce() -> T) -> Result<T, PrivilegeError> {
        Self::single_threaded()?;
        sys("setresuid(-1, 0, -1)", system::set_effective_uid(Uid::ROOT))?;
        let out = match system::set_effective_gid(Gid::ROOT) {
            Ok(()) => Ok(f()),
            Err(e) => Err(PrivilegeError::Syscall("setresgid(-1, 0, -1)", e)),
        };
        // Whatever happened, go back to the caller's credentials.
        if let Err(e) = self.become_caller() {
            crate::error::report(format_args!("fatal: cannot return to the caller's credentials: {e}"));
            std::process::exit(1);
        }
        out
    }

    /// Gives up root for good: real, effective and saved ids and the groups
    /// become the caller's, no_new_privs is set, and the result is verified.
    pub fn drop_for_good(self) -> Result<Caller, PrivilegeError> {
        drop_to(&self.caller)?;
        Ok(self.caller)
    }
}

/// Sets all ids to `caller`'s and verifies that root cannot be regained.
/// Needs root (or to already be `caller`).
pub fn drop_to(caller: &Caller) -> Result<(), PrivilegeError> {
    Privileges::single_threaded()?;
    // Regain root for the changes that need it (no-op when we already are).
    if !caller.uid.is_root() {
        let _ = system::set_effective_uid(Uid::ROOT);
    }
    sys("setgroups", system::set_groups(&caller.groups))?;
    sys("setresgid", system::set_all_gids(caller.gid))?;
    sys("setresuid", system::set_all_uids(caller.uid))?;
    sys("prctl(PR_SET_NO_NEW_PRIVS)", system::set_no_new_privs())?;
    verify_dropped(caller)
}

/// Checks, without trusting `geteuid()` alone, that the process holds only
/// the caller's credentials.
pub fn verify_dropped(caller: &Caller) -> Result<(), PrivilegeError> {
    let (u, g) = (caller.uid.as_raw(), caller.gid.as_raw());
    if sys("getresuid", system::res_uid())? != (u, u, u) {
        return Err(PrivilegeError::StillPrivileged("uid"));
    }
    if sys("getresgid", system::res_gid())? != (g, g, g) {
        return Err(PrivilegeError::StillPrivileged("gid"));
    }
    let mut groups = sys("getgroups", system::supplementary_groups())?;
    let mut want = caller.groups.clone();
    groups.sort_by_key(|g| g.as_raw());
    want.sort_by_key(|g| g.as_raw());
    if groups != want {
        return Err(PrivilegeError::StillPrivileged("supplementary groups"));
    }
    if !caller.uid.is_root() {
        if system::set_effective_uid(Uid::ROOT).is_ok() {
            return Err(PrivilegeError::StillPrivileged("root could be regained"));
        }
        if caller.gid.as_raw() != 0 && system::set_effective_gid(Gid::ROOT).is_ok() {
            return Err(PrivilegeError::StillPrivileged("gid 0 could be regained"));
        }
        if !sys("capget", system::has_no_capabilities())? {
            return Err(PrivilegeError::StillPrivileged("capabilities remain"));
        }
    }
    Ok(())
}
