//! What is known about where an opened file comes from: who owns and who
//! may write it and every directory on its real path, what the kernel
//! says the caller may write, and whether a FUSE server provides it.
//! Gathered on the opened fd (`image::Image::provenance`), judged by the
//! site policy (`config::trust`). Pure data.

use std::ffi::OsString;

use crate::config::acl::AclWriters;
use crate::system::{Gid, Uid};

/// Who can change an inode, as the inode itself says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Writers {
    pub uid: Uid,
    pub gid: Gid,
    /// Permission bits, sticky bit included.
    pub mode: u32,
    pub acl: AclWriters,
}

/// A directory on the image's real path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathDir {
    pub path: OsString,
    pub writers: Writers,
    /// The owner of its entry on the path (the next directory, or the file).
    pub entry_uid: Uid,
}

/// What the kernel says the caller may write (faccessat2: modes, ACLs,
/// and whatever else the file system decides). Only asked for callers
/// other than root (root may write everything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallerAccess {
    pub uid: Uid,
    pub gids: Vec<Gid>,
    pub can_write_file: bool,
    /// The first directory on the path where the caller could replace the
    /// next entry.
    pub writable_dir: Option<OsString>,
}

/// What is known about an opened image file, judged on its fd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The kernel's name of the opened file.
    pub real_path: OsString,
    pub file: Writers,
    /// The directories from `/` down to the file's, as walked.
    pub dirs: Vec<PathDir>,
    pub caller: CallerAccess,
    /// The file system serving the file is a FUSE mount root did not make
    /// for itself (a user's, or one of this tool's for any caller): its
    /// server, not the file's owner, decides every byte.
    pub user_filesystem: bool,
    /// The file system serving the file is a FUSE mount root made (not one
    /// of this tool's): its name, the mount table's subtype (`fuse.NAME`),
    /// or its source when it has none. Its server decides every byte; the
    /// policy trusts it only when the site lists it (`trusted-fuse`).
    pub root_fuse: Option<String>,
    /// The path could not be walked from `/` to the same file (renamed or
    /// replaced meanwhile, or a directory on it cannot be searched).
    pub path_unverified: bool,
}
