//! Least privilege while root: the capabilities a task's root phase keeps.
//! At its start (the setuid process in `Privileges::acquire`, the plugin's
//! worker thread in `ThreadCredentials::switch`) every other capability
//! leaves the permitted, effective and bounding sets, for good, and the
//! result is verified; the effective set then follows the effective uid
//! (empty while acting as the caller, these inside `as_root`).
//!
//! Why each one (measured by taking it away; doc/architecture.md):
//!
//! | capability       | needed for                                              |
//! |------------------|---------------------------------------------------------|
//! | CAP_SETUID       | root's real uid while a shared lock is held, back to    |
//! |                  | the caller after; the FUSE server's drop to the caller  |
//! | CAP_SETGID       | gid 0 inside `as_root` (the saved gid is the caller's); |
//! |                  | setgroups when dropping, and in the FUSE server         |
//! | CAP_SYS_ADMIN    | mounts, namespaces (unshare, setns), loop devices,      |
//! |                  | the cache's trusted.* attributes                        |
//! | CAP_SYS_CHROOT   | setns into the cache's mount namespace and the chroot   |
//! |                  | back to the launch's root                               |
//! | CAP_SYS_PTRACE   | which cached instances other users' processes use       |
//! |                  | (their /proc/PID/ns/mnt): without it all read as idle    |
//! | CAP_SYS_RESOURCE | raising the caller's lowered hard limits (the setuid    |
//! |                  | command; best effort)                                   |
//! | CAP_SYS_NICE     | SCHED_OTHER at nice 0 (and the default I/O priority)    |
//! |                  | again while holding a lock other users wait on: the    |
//! |                  | caller may lower its launch's while it is within reach |
//! | CAP_KILL         | ending the server of an evicted FUSE instance that its  |
//! |                  | user stopped (another user's process)                   |
//! | CAP_CHOWN        | `--writable`: copy-up keeps files' owners, the upper    |
//! |                  | layer's directories are the caller's (the servers' log  |
//! |                  | stays root's: doc/threat-model.md)                      |
//! | CAP_DAC_OVERRIDE | `--writable`: overlayfs copies up with root's           |
//! |                  | credentials; `-r`: root fills the copy of a directory   |
//! |                  | that is the caller's                                    |
//! | CAP_FOWNER       | `--writable`: the caller's chmod, `touch -d`, removal   |
//! |                  | in another's sticky directory of its own files reach    |
//! |                  | the upper layer with root's credentials                 |
//!
//! A caller who is root keeps root's capabilities: its command is root's,
//! and no boundary is crossed.

use super::{AsRoot, PrivilegeError};
use crate::system::{self, Capabilities};

/// What the root phase of a task may do: the capabilities it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootPhase(Capabilities);

impl RootPhase {
    /// Switching ids only: `--policy`, and a launch with nothing to mount.
    pub const IDS: RootPhase = RootPhase(Capabilities::SETUID.union(Capabilities::SETGID));

    /// `--gc`, `--cache-status` and the plugin's job epilog: the ids, and
    /// the image cache (evicting a FUSE instance ends its server).
    pub const CACHE: RootPhase = RootPhase(
        Self::IDS
            .0
            .union(Capabilities::SYS_ADMIN)
            .union(Capabilities::SYS_CHROOT)
            .union(Capabilities::SYS_PTRACE)
            .union(Capabilities::SYS_NICE)
            .union(Capabilities::KILL),
    );

    /// Mounting images (both front ends): the cache's, and for
    /// `--writable` and `-r` root's access to files that are not root's.
    pub fn mounts(writable: bool, mutable_root: bool) -> RootPhase {
        let mut caps = Self::CACHE.0;
        if writable || mutable_root {
            caps |= Capabilities::DAC_OVERRIDE;
        }
        if writable {
            caps |= Capabilities::FOWNER | Capabilities::CHOWN;
        }
        RootPhase(caps)
    }

    /// The setuid command also raises the caller's lowered hard limits.
    pub(crate) fn with_limits(self) -> RootPhase {
        RootPhase(self.0 | Capabilities::SYS_RESOURCE)
    }

    /// Leaves the calling thread only these capabilities (those it has of
    /// them), and verifies it: nothing beyond them is effective,
    /// permitted, inheritable or in the bounding set. Needs root's
    /// effective uid and CAP_SETPCAP; refuses otherwise.
    pub(crate) fn enter(self) -> Result<(), PrivilegeError> {
        system::limit_capabilities(self.0)
            .map_err(|(what, e)| PrivilegeError::Capabilities(what, e))?;
        let now = super::sys("capget", system::capability_state())?;
        let beyond = (now.effective | now.permitted | now.inheritable | now.bounding) - self.0;
        if !beyond.is_empty() || !now.inheritable.is_empty() {
            return Err(PrivilegeError::CapabilitiesRemain(beyond.bits()));
        }
        Ok(())
    }
}

/// Runs `f` on a thread that is root already (the Slurm plugin's job
/// epilog, in slurmd), made for this and ending after it: the thread keeps
/// only the capabilities of `phase` (verified), then `f` gets the proof of
/// being root. Refuses on a thread whose effective uid is not root's.
pub(crate) fn on_root_thread<T>(
    phase: RootPhase,
    f: impl FnOnce(&AsRoot) -> T,
) -> Result<T, PrivilegeError> {
    if !system::effective_uid().is_root() {
        return Err(PrivilegeError::NotSetuidRoot);
    }
    phase.enter()?;
    Ok(f(&AsRoot::new()))
}
