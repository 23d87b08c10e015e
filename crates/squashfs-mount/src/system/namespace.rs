//! Mount namespaces: the private one the command runs in, visits to the
//! image cache's, and joining one made by another thread (SPANK tasks).
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags, CWD};
use rustix::io::Errno;
use rustix::mount::{MountAttrFlags, MountPropagationFlags};

use super::credentials::{real_gid, real_uid};
use super::files::open_dir_nofollow;
use super::mount_api::{attach_mount, FsContext};
use super::{Gid, SysResult, Uid};

/// The calling thread could not return to its own mount namespace, root,
/// working directory or file system ids after a visit. It must not go on:
/// the privilege layer ends the process (or the SPANK worker thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stranded {
    pub what: &'static str,
    pub errno: Errno,
}

impl fmt::Display for Stranded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot return to {}: {}", self.what, self.errno)
    }
}

/// Why a visit to another mount namespace failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VisitError {
    /// Nothing changed: the visit could not start.
    Enter(Errno),
    /// The visit happened but the way back failed.
    Stranded(Stranded),
}

impl fmt::Display for VisitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VisitError::Enter(e) => write!(f, "{e}"),
            VisitError::Stranded(s) => write!(f, "{s}"),
        }
    }
}

/// unshare(CLONE_NEWNS) for the calling thread, then make every mount a
/// slave of the host's, so nothing mounted here propagates out while host
/// mounts still propagate in. In a single-threaded process this is the
/// process's namespace; in a multi-threaded one (slurmstepd) CLONE_NEWNS
/// implies CLONE_FS, so the calling thread gets its own copy of cwd, root
/// and umask and only it moves; the other threads keep theirs.
pub(crate) fn enter_private_mount_namespace() -> SysResult<()> {
    // SAFETY: `unshare_unsafe` is unsafe because unsharing CLONE_FILES
    // under other threads' feet can invalidate fds they use. Only the mount
    // namespace (and, implied, the fs_struct: cwd, root, umask) is
    // unshared: the fd table stays shared, so every fd remains valid in
    // every thread; no memory is involved.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS)? };
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
    )
}

/// An fd for the calling thread's mount namespace; it keeps the namespace
/// and its mounts alive after the thread is gone.
pub fn open_thread_mount_namespace() -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        "/proc/thread-self/ns/mnt",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// setns(ns, CLONE_NEWNS): moves the calling process into the mount
/// namespace `ns` (its root and cwd become the namespace's root). The kernel
/// refuses (EINVAL) while the fs_struct is shared with other threads, so
/// this is for single-threaded processes such as a freshly forked task.
pub fn join_mount_namespace(ns: BorrowedFd<'_>) -> SysResult<()> {
    rustix::thread::move_into_link_name_space(ns, Some(rustix::thread::LinkNameSpaceType::Mount))
}

/// unshare(CLONE_FS): gives the calling thread its own cwd, root and umask,
/// which setns(CLONE_NEWNS) needs in a multi-threaded process.
pub fn unshare_fs_of_thread() -> SysResult<()> {
    // SAFETY: as in `enter_private_mount_namespace`: only the fs_struct is
    // unshared, never the fd table; no memory is involved.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::FS) }
}

/// Where to go back to after a visit to another mount namespace: the
/// namespace, root and working directory held as fds.
struct NamespaceReturn {
    ns: OwnedFd,
    root: OwnedFd,
    cwd: OwnedFd,
}

/// fchdir(2) to `dir`; if root is refused (a directory on a network
/// filesystem that squashes root, or a FUSE mount without allow_root),
/// again with the file system ids of the caller (the real ids), who is the
/// one that chose it. Err(Ok(errno)): refused, nothing changed;
/// Err(Err(Stranded)): the file system ids could not be restored.
fn change_dir_as_root_or_caller(dir: BorrowedFd<'_>) -> Result<(), Result<Errno, Stranded>> {
    match rustix::process::fchdir(dir) {
        Err(Errno::ACCESS) | Err(Errno::PERM) => {}
        Ok(()) => return Ok(()),
        Err(e) => return Err(Ok(e)),
    }
    let (uid, gid) = (real_uid().as_raw(), real_gid().as_raw());
    // SAFETY: setfsuid/setfsgid only change this thread's file system ids;
    // they take plain integers and touch no memory. Both are set back to 0
    // (the effective ids, as euid is 0 here) right after.
    unsafe {
        libc::setfsgid(gid);
        libc::setfsuid(uid);
    }
    let r = rustix::process::fchdir(dir);
    // SAFETY: as above.
    let restored = unsafe {
        libc::setfsuid(0);
        libc::setfsgid(0);
        // setfsuid returns the previous value: asking again with an invalid
        // id (-1 is never valid) changes nothing and reports the current one.
        libc::setfsuid(u32::MAX) == 0 && libc::setfsgid(u32::MAX) == 0
    };
    if !restored {
        return Err(Err(Stranded {
            what: "root's file system ids",
            errno: Errno::PERM,
        }));
    }
    r.map_err(Ok)
}

/// The working directory, held as an fd while the process works from "/"
/// (see [`leave_working_dir`]); None: the process stayed where it was.
pub struct AwayFromWorkingDir(Option<OwnedFd>);

impl AwayFromWorkingDir {
    /// Nothing to return to: the process stayed where it was.
    #[cfg(test)]
    pub(crate) fn stayed() -> AwayFromWorkingDir {
        AwayFromWorkingDir(None)
    }
}

/// Pins the working directory as an fd and moves to "/". For the steps
/// that hold the cache lock: a working directory on a file system the
/// caller serves (FUSE) could otherwise stall root's later fchdir back into
/// it while the lock is held, and with it every other user's launch.
/// Leaves only if coming back will work (checked by entering the directory
/// it is in, which changes nothing); otherwise stays, and the cache visits
/// see for themselves that they could not come back. Come back with
/// [`return_to_working_dir`] once the lock is released, in the same mount
/// namespace (an fd taken before unshare names the old namespace's mounts).
pub(crate) fn leave_working_dir() -> SysResult<AwayFromWorkingDir> {
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(CWD, ".", dir, Mode::empty()) {
        Ok(fd) => fd,
        Err(_) => rustix::fs::openat(CWD, "/proc/thread-self/cwd", dir, Mode::empty())?,
    };
    match change_dir_as_root_or_caller(fd.as_fd()) {
        Ok(()) => {}
        Err(Ok(_)) => return Ok(AwayFromWorkingDir(None)),
        Err(Err(stranded)) => return Err(stranded.errno),
    }
    rustix::process::chdir("/")?;
    Ok(AwayFromWorkingDir(Some(fd)))
}

/// Back to the working directory [`leave_working_dir`] left (as root, or
/// with the caller's file system ids where root is refused).
pub(crate) fn return_to_working_dir(away: AwayFromWorkingDir) -> Result<(), Stranded> {
    let Some(fd) = away.0 else {
        return Ok(());
    };
    change_dir_as_root_or_caller(fd.as_fd()).map_err(|e| {
        e.map_or_else(
            |s| s,
            |errno| Stranded {
                what: "the working directory",
                errno,
            },
        )
    })
}

impl NamespaceReturn {
    /// Takes the namespace, root and working directory as fds (the working
    /// directory through /proc/thread-self/cwd, which needs no search
    /// permission on it), and checks that going back to them will work.
    fn capture() -> Result<Self, VisitError> {
        let open = |path: &str, flags: OFlags| {
            rustix::fs::openat(CWD, path, flags | OFlags::CLOEXEC, Mode::empty())
        };
        let dir = OFlags::PATH | OFlags::DIRECTORY;
        // "/" and "." name the root and working directory as well as the
        // /proc links do, without a /proc lookup (each about 5 us in a new
        // process); "." needs search permission on the working directory,
        // which root can lack (NFS with root squashing, FUSE without
        // allow_root): then through /proc, which needs none.
        let cwd = match open(".", dir) {
            Ok(fd) => fd,
            Err(_) => open("/proc/thread-self/cwd", dir).map_err(VisitError::Enter)?,
        };
        let back = NamespaceReturn {
            ns: open("/proc/thread-self/ns/mnt", OFlags::RDONLY).map_err(VisitError::Enter)?,
            root: open("/", dir).map_err(VisitError::Enter)?,
            cwd,
        };
        // Check that going back will work, changing nothing if it will
        // not: first the working directory alone (entering the directory
        // we are in changes nothing), then the whole sequence, which only
        // re-enters where we are. A working directory that refuses both root
        // and the caller's file system ids (a FUSE mount without allow_root
        // checks the real and saved uids too) means: do not leave.
        let lift = |r: Result<(), Result<Errno, Stranded>>| match r {
            Ok(()) => Ok(()),
            Err(Ok(e)) => Err(VisitError::Enter(e)),
            Err(Err(s)) => Err(VisitError::Stranded(s)),
        };
        lift(change_dir_as_root_or_caller(back.cwd.as_fd()))?;
        back.restore_directories().map_err(VisitError::Stranded)?;
        Ok(back)
    }

    /// Root (setns resets it to the namespace's root, which would escape a
    /// chroot), then the working directory (relative paths given by the
    /// caller resolve against it, and the command starts in it).
    fn restore_directories(&self) -> Result<(), Stranded> {
        let stranded = |what| {
            move |e: Result<Errno, Stranded>| e.map_or_else(|s| s, |errno| Stranded { what, errno })
        };
        change_dir_as_root_or_caller(self.root.as_fd()).map_err(stranded("the root directory"))?;
        rustix::process::chroot(".").map_err(|errno| Stranded {
            what: "the root directory",
            errno,
        })?;
        change_dir_as_root_or_caller(self.cwd.as_fd()).map_err(stranded("the working directory"))
    }

    /// setns back, then restore root and working directory.
    fn go_back(self) -> Result<(), Stranded> {
        rustix::thread::move_into_link_name_space(
            self.ns.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Mount),
        )
        .map_err(|errno| Stranded {
            what: "the launch's mount namespace",
            errno,
        })?;
        self.restore_directories()
    }
}

/// Runs `f` inside the mount namespace `ns` (an nsfs file), then returns to
/// the current namespace, root and working directory. Needs root, and a
/// single-threaded process or a thread with its own fs_struct.
pub(crate) fn in_mount_namespace<T>(
    ns: BorrowedFd<'_>,
    f: impl FnOnce() -> T,
) -> Result<T, VisitError> {
    let back = NamespaceReturn::capture()?;
    rustix::thread::move_into_link_name_space(ns, Some(rustix::thread::LinkNameSpaceType::Mount))
        .map_err(VisitError::Enter)?;
    let out = f();
    back.go_back().map_err(VisitError::Stranded)?;
    Ok(out)
}

/// Creates a new mount namespace (a copy of the current one), runs `f`
/// inside it, returns to the current namespace and hands back an nsfs fd
/// of the new namespace (it lives as long as that fd or a bind mount of it).
pub(crate) fn in_new_mount_namespace<T>(f: impl FnOnce() -> T) -> Result<(OwnedFd, T), VisitError> {
    let back = NamespaceReturn::capture()?;
    // SAFETY: as in `enter_private_mount_namespace`: only the mount
    // namespace (and the fs_struct) is unshared, never the fd table.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }
        .map_err(VisitError::Enter)?;
    let ns = match open_thread_mount_namespace() {
        Ok(ns) => ns,
        Err(e) => {
            back.go_back().map_err(VisitError::Stranded)?;
            return Err(VisitError::Enter(e));
        }
    };
    let out = f();
    back.go_back().map_err(VisitError::Stranded)?;
    Ok((ns, out))
}

/// Inside a fresh mount namespace: makes every mount private, mounts a
/// small tmpfs (mode 0700, nosuid, nodev, noexec) on `onto` and makes it the
/// namespace's root with pivot_root, detaching everything else, so that the
/// namespace holds no reference to any other filesystem.
pub(crate) fn become_tmpfs_rooted(onto: &str, size: &str) -> SysResult<()> {
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    let ctx = FsContext::open("tmpfs")?;
    ctx.set_string("mode", OsStr::new("0700"))?;
    ctx.set_string("size", OsStr::new(size))?;
    ctx.set_string("nr_inodes", OsStr::new("16k"))?;
    ctx.create().map_err(|r| r.errno)?;
    let tmpfs = ctx.mount(
        MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV
            | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )?;
    let target = open_dir_nofollow(CWD, onto)?;
    attach_mount(tmpfs.as_fd(), target.as_fd())?;
    rustix::process::fchdir(&tmpfs)?;
    rustix::process::pivot_root(".", ".")?;
    rustix::mount::unmount(".", rustix::mount::UnmountFlags::DETACH)?;
    rustix::process::chdir("/")
}

/// Makes `new_root`, the root directory of a mount attached on top of the
/// namespace's root, the root of the mount namespace (pivot_root with the
/// old root stacked on the new one, then detached, as the namespace's
/// other mounts copied into the new root do not need it). The calling
/// thread's root and working directory become the new root.
pub(crate) fn pivot_onto(new_root: BorrowedFd<'_>) -> SysResult<()> {
    rustix::process::fchdir(new_root)?;
    rustix::process::pivot_root(".", ".")?;
    rustix::mount::unmount(".", rustix::mount::UnmountFlags::DETACH)?;
    rustix::process::chdir("/")
}

/// unshare(CLONE_NEWUSER | CLONE_NEWNS) with the caller mapped to itself
/// (uid and gid; setgroups denied, as an unprivileged user namespace
/// requires), then every mount a slave of the host's. The calling process
/// then has every capability over its new mount namespace, none outside.
pub(crate) fn enter_user_and_mount_namespace(uid: Uid, gid: Gid) -> SysResult<()> {
    // SAFETY: as in `enter_private_mount_namespace`: the fd table is not
    // unshared and no memory is involved. CLONE_NEWUSER needs a
    // single-threaded process, which the kernel checks (EINVAL).
    unsafe {
        rustix::thread::unshare_unsafe(
            rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWNS,
        )?
    };
    write_proc("/proc/self/setgroups", b"deny")?;
    write_proc("/proc/self/uid_map", format!("{uid} {uid} 1").as_bytes())?;
    write_proc("/proc/self/gid_map", format!("{gid} {gid} 1").as_bytes())?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
    )
}

fn write_proc(path: &str, bytes: &[u8]) -> SysResult<()> {
    let fd = rustix::fs::openat(CWD, path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let n = rustix::io::write(&fd, bytes)?;
    if n != bytes.len() {
        return Err(Errno::IO);
    }
    Ok(())
}
