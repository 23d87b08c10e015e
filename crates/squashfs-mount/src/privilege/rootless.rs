//! Rootless mode: the binary is not setuid root (installed by a user,
//! copied, or on a nosuid file system). The process makes an unprivileged
//! user namespace with the caller mapped to itself and a mount namespace of
//! its own, in which it holds every capability and nothing outside; images
//! are served by FUSE, unions and `--writable` by overlayfs on a tmpfs, all
//! inside. Before the command runs every capability is dropped.

use std::fmt;

use super::{sealed, sys, ActingAsCaller, Caller, Credentials, PrivilegeError};
use crate::error::Failure;
use crate::system;

/// Holding this means: the process is in its own user and mount
/// namespaces, as the caller's uid and gid.
pub struct Rootless {
    caller: Caller,
}

impl sealed::Sealed for Rootless {}
impl ActingAsCaller for Rootless {}

impl Rootless {
    /// Enters the user and mount namespaces, or says why it cannot.
    pub fn enter() -> Result<Rootless, Failure> {
        let caller = Caller::of_this_process()?;
        match system::enter_user_and_mount_namespace(caller.uid.as_raw(), caller.gid.as_raw()) {
            Ok(()) => Ok(Rootless { caller }),
            Err(e @ (system::Error::PERM | system::Error::NOSPC | system::Error::ACCESS | system::Error::INVAL)) => Err(Failure::new(format!(
                "squashfs-mount is not installed setuid root, and unprivileged user namespaces are not available here ({e}: disabled by sysctl user.max_user_namespaces=0 or kernel.unprivileged_userns_clone=0, or by a security module); ask your administrator to install squashfs-mount setuid root (make install, or the package) or to allow user namespaces"
            ))),
            Err(e) => Err(Failure::new(format!("cannot create a user namespace: {e}"))),
        }
    }

    /// Drops every capability (the command runs as the caller, with
    /// no_new_privs), and verifies it.
    pub fn finish(self) -> Result<Caller, PrivilegeError> {
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
    fn caller(&self) -> &Caller {
        &self.caller
    }

    /// Nothing to switch: the capabilities are those of the user namespace.
    fn as_root<T>(&mut self, f: impl FnOnce() -> T) -> Result<T, PrivilegeError> {
        Ok(f())
    }

    /// Entered with the user namespace already.
    fn enter_private_mount_namespace(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    fn stranded(why: &dyn fmt::Display) -> ! {
        crate::error::report(format_args!("fatal: {why}"));
        std::process::exit(1)
    }
}
