//! The new mount API (fsopen, fsconfig, fsmount, move_mount, open_tree) and
//! mount propagation: no option strings, no paths of users.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags, CWD};
use rustix::io::Errno;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags,
};

use super::{Gid, SysResult, Uid};

/// A filesystem's refusal to create a superblock: the errno, and the
/// kernel's own explanation (the fs_context log, e.g. "squashfs: Filesystem
/// uses "xz" compression...").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub errno: Errno,
    pub log: Vec<String>,
}

impl Refused {
    /// "errno log-lines" (the log joined by "; ").
    pub(crate) fn with_log(&self) -> String {
        format!("{} {}", self.errno, self.log.join("; "))
    }

    /// " (kernel: log-lines)", or nothing when the kernel said nothing.
    pub(crate) fn kernel_said(&self) -> String {
        if self.log.is_empty() {
            String::new()
        } else {
            format!(" (kernel: {})", self.log.join("; "))
        }
    }
}

/// A filesystem context from fsopen(2).
pub struct FsContext {
    fd: OwnedFd,
}

/// Mount attributes every mount made by the tool gets.
pub(crate) fn safe_mount_attributes() -> MountAttrFlags {
    MountAttrFlags::MOUNT_ATTR_RDONLY
        | MountAttrFlags::MOUNT_ATTR_NOSUID
        | MountAttrFlags::MOUNT_ATTR_NODEV
}

impl FsContext {
    pub(crate) fn open(fs_type: &str) -> SysResult<Self> {
        Ok(FsContext {
            fd: rustix::mount::fsopen(fs_type, FsOpenFlags::FSOPEN_CLOEXEC)?,
        })
    }
    pub(crate) fn set_string(&self, key: &str, value: &OsStr) -> SysResult<()> {
        rustix::mount::fsconfig_set_string(&self.fd, key, value)
    }
    pub(crate) fn set_flag(&self, key: &str) -> SysResult<()> {
        rustix::mount::fsconfig_set_flag(&self.fd, key)
    }
    pub(crate) fn set_fd(&self, key: &str, fd: BorrowedFd<'_>) -> SysResult<()> {
        rustix::mount::fsconfig_set_fd(&self.fd, key, fd)
    }
    /// Creates the superblock; on failure with the kernel's explanation.
    pub(crate) fn create(&self) -> Result<(), Refused> {
        rustix::mount::fsconfig_create(&self.fd).map_err(|errno| Refused {
            errno,
            log: self.messages(),
        })
    }
    /// Drains the kernel's message log of this context.
    pub(crate) fn messages(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = [0u8; 512];
        for _ in 0..16 {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(n) if n > 0 => {
                    out.push(String::from_utf8_lossy(&buf[..n]).trim_end().to_string())
                }
                _ => break,
            }
        }
        out
    }
    /// fsmount(2): a detached mount of the superblock with `attrs`.
    pub(crate) fn mount(&self, attrs: MountAttrFlags) -> SysResult<OwnedFd> {
        rustix::mount::fsmount(&self.fd, FsMountFlags::FSMOUNT_CLOEXEC, attrs)
    }
}

/// Makes directory `name` (a fixed name chosen by the tool) inside the
/// directory `dir`, with `mode`, owned by `uid`:`gid`, and returns it pinned
/// as an O_PATH fd. Used only inside a fresh tmpfs the tool created.
pub(crate) fn make_directory_in(
    dir: BorrowedFd<'_>,
    name: &str,
    mode: u32,
    uid: Uid,
    gid: Gid,
) -> SysResult<OwnedFd> {
    rustix::fs::mkdirat(dir, name, Mode::from_bits_truncate(mode))?;
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // The mode first (mkdir's was narrowed by the umask), while root owns
    // the directory: changing another owner's mode would need CAP_FOWNER,
    // which the root phase does not keep. chown leaves a directory's mode
    // as it is (it clears set-id bits of files only).
    rustix::fs::fchmod(&fd, Mode::from_bits_truncate(mode))?;
    rustix::fs::fchown(&fd, Some(uid.sys()), Some(gid.sys()))?;
    Ok(fd)
}

/// move_mount(2): attaches the detached mount `mount` onto the directory
/// pinned by `target` (no path lookup).
pub(crate) fn attach_mount(mount: BorrowedFd<'_>, target: BorrowedFd<'_>) -> SysResult<()> {
    rustix::mount::move_mount(
        mount,
        "",
        target,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
}

/// open_tree(2) with OPEN_TREE_CLONE: a detached copy of the mount at `fd`.
pub(crate) fn clone_mount(fd: BorrowedFd<'_>) -> SysResult<OwnedFd> {
    rustix::mount::open_tree(
        fd,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH,
    )
}

/// statfs f_type of nsfs (a bind-mounted namespace file).
pub const NSFS_MAGIC: u64 = 0x6e73_6673;
/// statfs f_type of squashfs.
pub const SQUASHFS_MAGIC: u64 = 0x7371_7368;
/// statfs f_type of FUSE.
pub const FUSE_MAGIC: u64 = 0x6573_5546;
/// The subtype of this tool's own FUSE mounts: mountinfo names their type
/// `fuse.squashfs-mount`.
pub const OUR_FUSE_SUBTYPE: &str = "squashfs-mount";

/// STATX_ATTR_MOUNT_ROOT; symlinks not followed).
pub(crate) fn is_mount_root<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<bool> {
    use rustix::fs::{AtFlags, StatxAttributes, StatxFlags};
    let st = rustix::fs::statx(
        dir,
        path,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS,
    )?;
    if !st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
        return Err(Errno::NOSYS);
    }
    Ok(st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
}

/// Bind-mounts the directory `dir` onto itself (open_tree clone +
/// move_mount), so that it becomes a mount of its own.
pub(crate) fn bind_onto_itself(dir: BorrowedFd<'_>) -> SysResult<()> {
    let copy = clone_mount(dir)?;
    attach_mount(copy.as_fd(), dir)
}

/// Makes the mount at `path` (root's own absolute path) private: nothing
/// mounted under it propagates to or from other mounts.
pub(crate) fn make_private(path: &str) -> SysResult<()> {
    rustix::mount::mount_change(path, MountPropagationFlags::PRIVATE)
}

/// Bind-mounts the namespace `ns` (an nsfs fd) onto the file `target` (an
/// O_PATH fd). ELOOP means the kernel refused it as a possible reference
/// loop (see `cache::cache_namespace`).
pub(crate) fn bind_namespace(ns: BorrowedFd<'_>, target: BorrowedFd<'_>) -> SysResult<()> {
    let copy = clone_mount(ns)?;
    attach_mount(copy.as_fd(), target)
}

/// A detached clone of the mount whose root is `path` (relative to the
/// current root; no symlink followed).
pub(crate) fn clone_mount_at(path: &str) -> SysResult<OwnedFd> {
    rustix::mount::open_tree(
        CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_SYMLINK_NOFOLLOW,
    )
}

/// umount2(path, MNT_DETACH).
pub(crate) fn detach_mount(path: &str) -> SysResult<()> {
    rustix::mount::unmount(
        path,
        rustix::mount::UnmountFlags::DETACH | rustix::mount::UnmountFlags::NOFOLLOW,
    )
}

/// The per-mount flags of the mount holding `fd`: (read-only, nosuid, nodev).
pub(crate) fn mount_flags(fd: BorrowedFd<'_>) -> SysResult<(bool, bool, bool)> {
    use rustix::fs::StatVfsMountFlags as F;
    let f = rustix::fs::fstatvfs(fd)?.f_flag;
    Ok((
        f.contains(F::RDONLY),
        f.contains(F::NOSUID),
        f.contains(F::NODEV),
    ))
}

/// fusectl's superblock magic (FUSE_CTL_SUPER_MAGIC).
pub const FUSECTL_MAGIC: u64 = 0x6573_5543;

/// A detached mount of fusectl, the machine's one control file system of
/// FUSE connections (nosuid, nodev, noexec, read-only).
pub(crate) fn fuse_control_mount() -> SysResult<OwnedFd> {
    let ctx = FsContext::open("fusectl")?;
    ctx.create().map_err(|r| r.errno)?;
    ctx.mount(
        MountAttrFlags::MOUNT_ATTR_RDONLY
            | MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV
            | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )
}

/// Whether the kernel still has the FUSE connection of the file system on
/// device `dev`: its directory in `control`, a fusectl mount. The
/// connection lives while the superblock does: while any mount or open
/// file of the file system remains, whatever namespace it is in. The
/// kernel's own answer to "is this FUSE instance used?", which no scan of
/// /proc can give for sure.
pub(crate) fn fuse_connection_in(control: BorrowedFd<'_>, dev: u64) -> SysResult<bool> {
    // The connection's name is the kernel's dev_t (major << 20 | minor).
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let name = ((u64::from(major) << 20) | u64::from(minor)).to_string();
    match rustix::fs::statat(
        control,
        name.as_str(),
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(_) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(e),
    }
}
