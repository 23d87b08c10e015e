//! User and group ids: the domain's types (what policy, provenance,
//! launch slots, cache records and loop devices speak of), turned into the
//! system's only at the system call.

use std::fmt;

/// A user id. Never -1, which the set*id calls read as "leave unchanged"
/// (the constructors refuse it).
/// (The default is root's.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uid(u32);

/// A group id. Never -1 (the constructors refuse it). (The default is
/// root's.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gid(u32);

impl Uid {
    pub const ROOT: Uid = Uid(0);

    /// `raw` as a user id, or None for u32::MAX (-1), which is no id:
    /// the set*id calls read it as "leave unchanged". Every id that enters
    /// from outside (the configuration, /proc, a kernel structure, a
    /// record, Slurm) comes through here.
    pub const fn checked(raw: u32) -> Option<Uid> {
        if raw == u32::MAX {
            None
        } else {
            Some(Uid(raw))
        }
    }

    /// A user id known to be one (a constant, a test's): panics on
    /// u32::MAX. Ids from outside go through [`Uid::checked`].
    pub const fn from_raw(raw: u32) -> Uid {
        match Uid::checked(raw) {
            Some(id) => id,
            None => panic!("-1 is no user id"),
        }
    }

    pub(crate) const fn as_raw(self) -> u32 {
        self.0
    }

    pub(crate) const fn is_root(self) -> bool {
        self.0 == 0
    }

    pub(super) fn sys(self) -> rustix::process::Uid {
        rustix::process::Uid::from_raw(self.0)
    }

    /// One of this process's own ids, as the kernel reported it (never -1).
    pub(super) fn from_sys(id: rustix::process::Uid) -> Uid {
        Uid(id.as_raw())
    }
}

impl Gid {
    pub const ROOT: Gid = Gid(0);

    /// `raw` as a group id, or None for u32::MAX (-1), which is no id:
    /// the set*id calls read it as "leave unchanged". Every id that enters
    /// from outside (the configuration, /proc, a kernel structure, a
    /// record, Slurm) comes through here.
    pub const fn checked(raw: u32) -> Option<Gid> {
        if raw == u32::MAX {
            None
        } else {
            Some(Gid(raw))
        }
    }

    /// A group id known to be one (a constant, a test's): panics on
    /// u32::MAX. Ids from outside go through [`Gid::checked`].
    pub const fn from_raw(raw: u32) -> Gid {
        match Gid::checked(raw) {
            Some(id) => id,
            None => panic!("-1 is no group id"),
        }
    }

    pub(crate) const fn as_raw(self) -> u32 {
        self.0
    }

    pub(crate) const fn is_root(self) -> bool {
        self.0 == 0
    }

    pub(super) fn sys(self) -> rustix::process::Gid {
        rustix::process::Gid::from_raw(self.0)
    }

    /// One of this process's own ids, as the kernel reported it (never -1).
    pub(super) fn from_sys(id: rustix::process::Gid) -> Gid {
        Gid(id.as_raw())
    }
}

/// An id in a kernel structure (a stat, an ioctl's answer, getres*id):
/// the kernel shows an id it cannot map as the overflow id, never as -1;
/// if it ever did, the call fails with EOVERFLOW rather than carry it on.
pub(super) fn kernel_uid(raw: u32) -> super::SysResult<Uid> {
    Uid::checked(raw).ok_or(rustix::io::Errno::OVERFLOW)
}

/// As [`kernel_uid`], for a group id.
pub(super) fn kernel_gid(raw: u32) -> super::SysResult<Gid> {
    Gid::checked(raw).ok_or(rustix::io::Errno::OVERFLOW)
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minus_one_is_no_id() {
        assert_eq!(Uid::checked(u32::MAX), None);
        assert_eq!(Gid::checked(u32::MAX), None);
        assert_eq!(
            Uid::checked(u32::MAX - 1).map(Uid::as_raw),
            Some(u32::MAX - 1)
        );
        assert_eq!(Gid::checked(0), Some(Gid::ROOT));
        assert!(std::panic::catch_unwind(|| Uid::from_raw(u32::MAX)).is_err());
        assert!(std::panic::catch_unwind(|| Gid::from_raw(u32::MAX)).is_err());
    }
}
