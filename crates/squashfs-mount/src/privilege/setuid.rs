//! The setuid process's credentials.

use std::fmt;

use super::{
    sealed, sys, ActingAsCaller, AsRoot, Caller, Credentials, Mode, PrivilegeError, RootPhase,
};
use crate::system::{self, Gid, Uid};

/// Holding this means: saved uid is 0, effective ids are the caller's, the
/// process is single-threaded and not dumpable, and it holds only the
/// capabilities of its task's root phase (effective only inside
/// `as_root`).
#[derive(Debug)]
pub struct Privileges {
    caller: Caller,
    /// The caller's umask and scheduling, replaced for the root phase.
    process: system::CallerProcessState,
}

impl sealed::Sealed for Privileges {}
impl ActingAsCaller for Privileges {}

impl Privileges {
    /// First thing a task of the setuid process does: makes the process
    /// non-dumpable, records the caller, gives up every capability `phase`
    /// does not keep (verified; unless the caller is root) and switches
    /// the effective ids to the caller's.
    pub(crate) fn acquire(phase: RootPhase) -> Result<Self, PrivilegeError> {
        if !system::effective_uid().is_root() {
            // Not setuid (or the kernel ignored the bit): nothing
            // privileged to protect; rootless mode needs the process to
            // stay dumpable (its own /proc files).
            let setuid_file = system::stat_following(system::working_dir(), "/proc/self/exe")
                .is_ok_and(|st| st.uid.is_root() && st.mode & 0o4000 != 0);
            return Err(
                if setuid_file && sys("prctl(PR_GET_NO_NEW_PRIVS)", system::no_new_privs())? {
                    PrivilegeError::InsideSession
                } else {
                    PrivilegeError::NotSetuidRoot
                },
            );
        }
        sys("prctl(PR_SET_DUMPABLE, 0)", system::set_not_dumpable())?;
        // Before anything is created or held: the caller's umask, policy,
        // nice value and I/O priority never reach what root makes or how
        // long root holds what others wait on (doc/threat-model.md).
        let process = sys(
            "resetting the umask and scheduling",
            system::neutralize_process_state(),
        )?;
        let caller = Caller::of_this_process()?;
        // The credential calls below are per-thread system calls: they
        // change the whole process only while it has one thread. The tool
        // starts no thread, so one check here holds until the drop, which
        // checks again.
        single_threaded()?;
        // A caller who is root crosses no boundary: its command is root's,
        // with root's capabilities.
        if !caller.uid.is_root() {
            phase.enter()?;
        }
        let p = Privileges { caller, process };
        p.become_caller()?;
        Ok(p)
    }

    fn become_caller(&self) -> Result<(), PrivilegeError> {
        // gid first: once euid is not 0 we could no longer change it.
        sys(
            "setresgid(-1, caller, -1)",
            system::set_effective_gid(self.caller.gid),
        )?;
        sys(
            "setresuid(-1, caller, -1)",
            system::set_effective_uid(self.caller.uid),
        )?;
        Ok(())
    }

    /// Gives up root for good: real, effective and saved ids and the groups
    /// become the caller's, no_new_privs is set, and the result is verified.
    /// Returns the caller and the umask and scheduling it had, for the
    /// command (`CallerProcessState::restore`, as the caller).
    pub(crate) fn drop_for_good(
        self,
    ) -> Result<(Caller, system::CallerProcessState), PrivilegeError> {
        // Single-threaded since `acquire` (the tool starts no thread).
        super::drop_to(&self.caller)?;
        Ok((self.caller, self.process))
    }
}

/// Refuses a set-group-ID installation (as uenv's tool does): the tool
/// needs root's uid for its root phase, never a group, and a setgid bit
/// would give every command's launch that group until the drop. The first
/// thing the program does, before its arguments are acted on. Judged by
/// the program file's mode (fstat of /proc/self/exe); where that cannot
/// be read, by the effective gid differing from the real one.
pub(crate) fn refuse_set_group_id() -> Result<(), PrivilegeError> {
    match system::own_program() {
        Ok((st, _)) if st.mode & 0o2000 == 0 => Ok(()),
        Ok((st, fd)) => {
            let path = system::path_of_fd(std::os::fd::AsFd::as_fd(&fd))
                .unwrap_or_else(|_| "/proc/self/exe".into());
            Err(PrivilegeError::SetGroupId(path, st.mode & 0o7777))
        }
        Err(_) => {
            let egid = system::effective_gid();
            if egid == system::real_gid() {
                Ok(())
            } else {
                Err(PrivilegeError::SetGroupIdEffective(egid))
            }
        }
    }
}

fn single_threaded() -> Result<(), PrivilegeError> {
    match system::is_single_threaded() {
        Ok(true) => Ok(()),
        Ok(false) => Err(PrivilegeError::Threads),
        Err(e) => Err(PrivilegeError::Syscall("unshare(CLONE_THREAD)", e)),
    }
}

impl Credentials for Privileges {
    const MODE: Mode = Mode::Setuid;

    fn caller(&self) -> &Caller {
        &self.caller
    }

    fn as_root<T>(&mut self, f: impl FnOnce(&AsRoot) -> T) -> Result<T, PrivilegeError> {
        sys("setresuid(-1, 0, -1)", system::set_effective_uid(Uid::ROOT))?;
        let out = match system::set_effective_gid(Gid::ROOT) {
            Ok(()) => Ok(f(&AsRoot::new())),
            Err(e) => Err(PrivilegeError::Syscall("setresgid(-1, 0, -1)", e)),
        };
        // Whatever happened, go back to the caller's credentials.
        if let Err(e) = self.become_caller() {
            Self::stranded(&format_args!(
                "cannot return to the caller's credentials: {e}"
            ));
        }
        out
    }

    fn stranded(why: &dyn fmt::Display) -> ! {
        crate::system::error::report(format_args!("fatal: {why}"));
        std::process::exit(1)
    }
}
