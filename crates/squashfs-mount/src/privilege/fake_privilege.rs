//! Credentials for the engine's unit tests (`cargo test`, any machine):
//! acting as the caller and "root" are the same process, and the thread
//! that holds them runs with the effective uid of nobody when the tests run
//! as root, so that a root-side call that went around the engine's seam
//! (`engine::RootSide`) fails instead of mounting anything.

use std::fmt;

use super::{sealed, ActingAsCaller, AsRoot, Caller, Credentials, Mode};
use crate::system::{self, Gid, Uid};

/// The user the tests act as when they run as root.
const NOBODY: u32 = 65534;

/// Test credentials of the mode `ROOTLESS` selects (setuid otherwise).
pub struct Fake<const ROOTLESS: bool> {
    caller: Caller,
    /// The thread's effective uid was root's: given back on drop.
    was_root: bool,
}

impl<const ROOTLESS: bool> Fake<ROOTLESS> {
    pub(crate) fn new() -> Self {
        let was_root = system::effective_uid().is_root();
        if was_root {
            // Per thread (the raw system call), as every test has its own.
            system::set_effective_uid(Uid::from_raw(NOBODY)).expect("seteuid(nobody)");
        }
        let uid = system::effective_uid();
        Fake {
            caller: Caller {
                uid,
                gid: if was_root {
                    Gid::from_raw(NOBODY)
                } else {
                    system::real_gid()
                },
                groups: Vec::new(),
            },
            was_root,
        }
    }
}

impl<const ROOTLESS: bool> Default for Fake<ROOTLESS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const ROOTLESS: bool> Drop for Fake<ROOTLESS> {
    fn drop(&mut self) {
        if self.was_root {
            let _ = system::set_effective_uid(Uid::ROOT);
        }
    }
}

impl<const ROOTLESS: bool> sealed::Sealed for Fake<ROOTLESS> {}
impl<const ROOTLESS: bool> ActingAsCaller for Fake<ROOTLESS> {}

impl<const ROOTLESS: bool> Credentials for Fake<ROOTLESS> {
    const MODE: Mode = if ROOTLESS {
        Mode::Rootless
    } else {
        Mode::Setuid
    };

    fn caller(&self) -> &Caller {
        &self.caller
    }

    fn as_root<T>(&mut self, f: impl FnOnce(&AsRoot) -> T) -> Result<T, super::PrivilegeError> {
        Ok(f(&AsRoot::new()))
    }

    fn enter_private_mount_namespace(&mut self) -> Result<(), crate::system::error::Failure> {
        Ok(())
    }

    fn stranded(why: &dyn fmt::Display) -> ! {
        panic!("stranded: {why}")
    }
}
