//! A process that holds no privilege at all (srun, sbatch and salloc on the
//! login node, where the plugin checks images before a job is queued).

use super::{sealed, sys, ActingAsCaller, PrivilegeError};
use crate::system;

/// Holding this means: real, effective and saved ids are equal and no
/// capability is effective or permitted, so every open is the caller's own.
pub struct Unprivileged {
    _checked: (),
}

impl sealed::Sealed for Unprivileged {}
impl ActingAsCaller for Unprivileged {}

impl Unprivileged {
    /// Checks that the calling process holds no privilege.
    pub fn check() -> Result<Self, PrivilegeError> {
        let (ru, eu, su) = sys("getresuid", system::res_uid())?;
        let (rg, eg, sg) = sys("getresgid", system::res_gid())?;
        if ru != eu || eu != su || rg != eg || eg != sg {
            return Err(PrivilegeError::StillPrivileged(
                "real, effective and saved ids differ",
            ));
        }
        if !ru.is_root() && !sys("capget", system::has_no_capabilities())? {
            return Err(PrivilegeError::StillPrivileged("capabilities are held"));
        }
        Ok(Unprivileged { _checked: () })
    }
}
