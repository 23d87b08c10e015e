//! The SPANK plugin's worker thread: it alone switches its effective ids
//! to the job user's, with per-thread system calls, inside slurmstepd (a
//! multi-threaded root process whose other threads never change).

use std::fmt;
use std::marker::PhantomData;

use super::{sealed, ActingAsCaller, AsRoot, Caller, Credentials, Mode, PrivilegeError, RootPhase};
use crate::system::{self, Gid, Uid};

/// Holding this means: this thread's effective ids and groups are the job
/// user's, its fs_struct (cwd, root, umask) is its own, root is its saved
/// uid, and it holds only the capabilities of the root phase (its own
/// capability and bounding sets: slurmstepd's other threads keep theirs). Not `Send`: the credentials belong to the thread that made
/// them.
pub struct ThreadCredentials {
    user: Caller,
    root_groups: Vec<Gid>,
    _this_thread_only: PhantomData<*const ()>,
}

impl sealed::Sealed for ThreadCredentials {}
impl ActingAsCaller for ThreadCredentials {}

impl ThreadCredentials {
    /// Switches the calling thread (and only it) to `user`'s effective ids,
    /// after giving it its own fs_struct (so that it can visit other mount
    /// namespaces without moving slurmstepd's other threads), after giving
    /// up every capability `phase` does not keep. Run only on a thread made
    /// for this, which ends when the work is done. (`user`'s ids are never
    /// -1, "leave unchanged" to the set*id calls: `Uid` and `Gid` refuse
    /// it.)
    pub fn switch(user: Caller, phase: RootPhase) -> Result<Self, PrivilegeError> {
        super::sys("unshare(CLONE_FS)", system::unshare_fs_of_thread())?;
        // This thread's own umask (its fs_struct) and scheduling: what
        // slurmstepd or the job had never reaches what root makes or how
        // long it holds what others wait on. The thread ends with the work.
        super::sys(
            "resetting the umask and scheduling",
            system::neutralize_process_state(),
        )?;
        let root_groups = super::sys("getgroups", system::supplementary_groups())?;
        phase.enter()?;
        let me = ThreadCredentials {
            user,
            root_groups,
            _this_thread_only: PhantomData,
        };
        me.become_user()?;
        Ok(me)
    }

    fn become_user(&self) -> Result<(), PrivilegeError> {
        // Groups and gid first: once the effective uid is not 0 they can no
        // longer be changed.
        super::sys("setgroups", system::set_groups(&self.user.groups))?;
        super::sys("setresgid", system::set_effective_gid(self.user.gid))?;
        super::sys("setresuid", system::set_effective_uid(self.user.uid))?;
        // Verify rather than trust: the effective ids are the user's and, for
        // a non-root user, no capability is effective.
        let (_, euid, _) = super::sys("getresuid", system::res_uid())?;
        let (_, egid, _) = super::sys("getresgid", system::res_gid())?;
        if euid != self.user.uid || egid != self.user.gid {
            return Err(PrivilegeError::NotTakenEffect);
        }
        if !self.user.uid.is_root()
            && !super::sys("capget", system::effective_capabilities_empty())?
        {
            return Err(PrivilegeError::StillPrivileged(
                "capabilities remain effective as the job user",
            ));
        }
        Ok(())
    }
}

impl Credentials for ThreadCredentials {
    const MODE: Mode = Mode::PluginThread;

    fn caller(&self) -> &Caller {
        &self.user
    }

    fn as_root<T>(&mut self, f: impl FnOnce(&AsRoot) -> T) -> Result<T, PrivilegeError> {
        super::sys("setresuid", system::set_effective_uid(Uid::ROOT))?;
        super::sys("setresgid", system::set_effective_gid(Gid::ROOT))?;
        super::sys("setgroups", system::set_groups(&self.root_groups))?;
        let out = f(&AsRoot::new());
        if let Err(e) = self.become_user() {
            Self::stranded(&format_args!(
                "cannot return to the job user's credentials: {e}"
            ));
        }
        Ok(out)
    }

    /// Unwinds the worker thread (the plugin is built with panic = unwind
    /// and joins it): its credentials, fs_struct and namespace end with it;
    /// slurmstepd's other threads never had them.
    fn stranded(why: &dyn fmt::Display) -> ! {
        panic!("squashfs-mount worker thread stopped: {why}")
    }
}
