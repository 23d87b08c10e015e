//! User and group ids: the domain's types (what policy, provenance,
//! launch slots, cache records and loop devices speak of), turned into the
//! system's only at the system call.

use std::fmt;

/// A user id. Never -1, which the set*id calls read as "leave unchanged".
/// (The default is root's.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uid(u32);

/// A group id. Never -1. (The default is root's.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gid(u32);

impl Uid {
    pub const ROOT: Uid = Uid(0);

    pub const fn from_raw(raw: u32) -> Uid {
        Uid(raw)
    }

    pub const fn as_raw(self) -> u32 {
        self.0
    }

    pub const fn is_root(self) -> bool {
        self.0 == 0
    }

    pub(super) fn sys(self) -> rustix::process::Uid {
        rustix::process::Uid::from_raw(self.0)
    }
}

impl Gid {
    pub const ROOT: Gid = Gid(0);

    pub const fn from_raw(raw: u32) -> Gid {
        Gid(raw)
    }

    pub const fn as_raw(self) -> u32 {
        self.0
    }

    pub const fn is_root(self) -> bool {
        self.0 == 0
    }

    pub(super) fn sys(self) -> rustix::process::Gid {
        rustix::process::Gid::from_raw(self.0)
    }
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
