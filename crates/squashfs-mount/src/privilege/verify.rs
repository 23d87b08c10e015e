//! Dropping root for good, and verifying it without trusting `geteuid()`.

use super::{sys, Caller, PrivilegeError};
use crate::system::{self, Gid, Uid};

/// Sets all ids and the groups to `caller`'s, sets no_new_privs and
/// verifies that root cannot be regained. Needs root (or to already be
/// `caller`); the process must be single-threaded.
pub(crate) fn drop_to(caller: &Caller) -> Result<(), PrivilegeError> {
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

/// Checks that the process holds only the caller's credentials: real,
/// effective and saved ids, groups, no capability, root not regainable.
pub(crate) fn verify_dropped(caller: &Caller) -> Result<(), PrivilegeError> {
    let (u, g) = (caller.uid, caller.gid);
    if sys("getresuid", system::res_uid())? != (u, u, u) {
        return Err(PrivilegeError::StillPrivileged("uid"));
    }
    if sys("getresgid", system::res_gid())? != (g, g, g) {
        return Err(PrivilegeError::StillPrivileged("gid"));
    }
    let mut groups = sys("getgroups", system::supplementary_groups())?;
    let mut want = caller.groups.clone();
    groups.sort();
    want.sort();
    if groups != want {
        return Err(PrivilegeError::StillPrivileged("supplementary groups"));
    }
    if !caller.uid.is_root() {
        if system::set_effective_uid(Uid::ROOT).is_ok() {
            return Err(PrivilegeError::StillPrivileged("root could be regained"));
        }
        if !caller.gid.is_root() && system::set_effective_gid(Gid::ROOT).is_ok() {
            return Err(PrivilegeError::StillPrivileged("gid 0 could be regained"));
        }
        if !sys("capget", system::has_no_capabilities())? {
            return Err(PrivilegeError::StillPrivileged("capabilities remain"));
        }
    }
    Ok(())
}
