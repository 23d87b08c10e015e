//! Rootless mode: the binary is not setuid root (installed by a user,
//! copied, or on a nosuid file system). The process makes an unprivileged
//! user namespace with the caller mapped to itself and a mount namespace of
//! its own, in which it holds every capability and nothing outside; images
//! are served by FUSE, unions and `--writable` by overlayfs on a tmpfs, all
//! inside. Before the command runs every capability is dropped.

use std::fmt;

use super::{sealed, sys, ActingAsCaller, AsRoot, Caller, Credentials, Mode, PrivilegeError};
use crate::system;
use crate::system::error::Failure;

/// Holding this means: the process is the caller's (real, effective and
/// saved ids), and once [`Credentials::enter_own_namespaces`] has run, it
/// is in its own user and mount namespaces.
pub struct Rootless {
    caller: Caller,
}

impl sealed::Sealed for Rootless {}
impl ActingAsCaller for Rootless {}

impl Rootless {
    /// The caller, before the namespaces are entered (the site's
    /// configuration is read first: inside the user namespace root's files
    /// would show as nobody's).
    pub(crate) fn new() -> Result<Rootless, Failure> {
        Ok(Rootless {
            caller: Caller::of_this_process()?,
        })
    }

    /// Drops every capability (the command runs as the caller, with
    /// no_new_privs), and verifies it.
    pub(crate) fn finish(self) -> Result<Caller, PrivilegeError> {
        sys("capset", system::clear_capabilities())?;
        sys("prctl(PR_SET_NO_NEW_PRIVS)", system::set_no_new_privs())?;
        if !sys("capget", system::has_no_capabilities())? {
            return Err(PrivilegeError::StillPrivileged(
                "capabilities remain in the user namespace",
            ));
        }
        Ok(self.caller)
    }
}

impl Credentials for Rootless {
    const MODE: Mode = Mode::Rootless;

    fn caller(&self) -> &Caller {
        &self.caller
    }

    /// Nothing to switch: the capabilities are those of the user namespace.
    fn as_root<T>(&mut self, f: impl FnOnce(&AsRoot) -> T) -> Result<T, PrivilegeError> {
        Ok(f(&AsRoot::new()))
    }

    /// Enters the user and mount namespaces, or says why it cannot.
    fn enter_own_namespaces(&mut self) -> Result<(), Failure> {
        let (uid, gid) = (self.caller.uid, self.caller.gid);
        use system::Error as E;
        system::enter_user_and_mount_namespace(uid, gid).map_err(|e| {
            Failure::new(match e {
                E::PERM | E::NOSPC | E::ACCESS | E::INVAL => PrivilegeError::NoUserNamespaces(e),
                e => PrivilegeError::UserNamespace(e),
            })
        })
    }

    /// Entered with the user namespace already.
    fn enter_private_mount_namespace(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    fn stranded(why: &dyn fmt::Display) -> ! {
        crate::system::error::report(format_args!("fatal: {why}"));
        std::process::exit(1)
    }
}
