//! What the caller's stage of `--writable=DIR` needs (`layer`): the
//! descriptors that may cross into it, the user namespace's descriptors
//! handed to the Slurm plugin, joining them from a task, and the overlay
//! the caller mounts.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::fs::{Mode, OFlags, CWD};
use rustix::io::Errno;

use super::SysResult;

/// The numbers of the fds open in this process (from /proc/self/fd), in
/// increasing order, without the one used to list them.
pub(crate) fn open_fd_numbers() -> SysResult<Vec<RawFd>> {
    let dir = rustix::fs::openat(
        CWD,
        "/proc/self/fd",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let own = dir.as_raw_fd();
    let mut out = Vec::new();
    let mut entries = rustix::fs::Dir::read_from(&dir)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        if let Some(n) = std::str::from_utf8(entry.file_name().to_bytes())
            .ok()
            .and_then(|s| s.parse::<RawFd>().ok())
        {
            if n != own {
                out.push(n);
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Marks every fd from 3 up close-on-exec, except those in `keep`
/// (close_range(2) with CLOSE_RANGE_CLOEXEC on the gaps between them):
/// an exec then drops all of them at once. Nothing is closed now, so no
/// owner of an fd in this process is surprised.
pub(crate) fn close_on_exec_all_but(keep: &[RawFd]) -> SysResult<()> {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|&fd| fd >= 3).collect();
    keep.sort_unstable();
    keep.dedup();
    let mut from: u32 = 3;
    for fd in keep.into_iter().chain(std::iter::once(-1)) {
        let to = if fd < 0 { u32::MAX } else { fd as u32 - 1 };
        if from <= to {
            // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets the
            // close-on-exec flag of the fds in the range; it closes
            // nothing and touches no memory.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    from as libc::c_uint,
                    to as libc::c_uint,
                    libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
                )
            };
            if rc != 0 {
                return Err(super::last_errno());
            }
        }
        if fd < 0 {
            break;
        }
        from = fd as u32 + 1;
    }
    Ok(())
}

/// Moves `fd` to the lowest free number at or above `at_least` (or any,
/// if that is not allowed), without close-on-exec: it stays open in the
/// command. Returns its number; the fd is no longer owned by anything in
/// this process.
pub(crate) fn keep_across_exec(fd: OwnedFd, at_least: RawFd) -> SysResult<RawFd> {
    keep_copy_across_exec(fd.as_fd(), at_least)
}

/// [`keep_across_exec`] of a copy of `fd` (the same open file), which
/// stays open here too.
pub(crate) fn keep_copy_across_exec(fd: BorrowedFd<'_>, at_least: RawFd) -> SysResult<RawFd> {
    let moved = rustix::io::fcntl_dupfd_cloexec(fd, at_least)
        .or_else(|_| rustix::io::fcntl_dupfd_cloexec(fd, 3))?;
    rustix::io::fcntl_setfd(&moved, rustix::io::FdFlags::empty())?;
    let n = moved.as_raw_fd();
    std::mem::forget(moved);
    Ok(n)
}

/// Whether the file system holding `fd` is mounted read-only (statvfs).
pub(crate) fn on_read_only_filesystem(fd: BorrowedFd<'_>) -> SysResult<bool> {
    Ok(rustix::fs::fstatvfs(fd)?
        .f_flag
        .contains(rustix::fs::StatVfsMountFlags::RDONLY))
}

/// fchdir(2) to the directory `dir`.
pub(crate) fn change_dir_to(dir: BorrowedFd<'_>) -> SysResult<()> {
    rustix::process::fchdir(dir)
}

/// The calling process's user and mount namespaces, as nsfs fds.
pub(crate) fn own_namespaces() -> SysResult<(OwnedFd, OwnedFd)> {
    let open =
        |path: &str| rustix::fs::openat(CWD, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty());
    Ok((open("/proc/self/ns/user")?, open("/proc/self/ns/mnt")?))
}

/// A copy of the fd `number` of the process `pidfd` (pidfd_getfd(2),
/// close-on-exec): needs the right to trace it.
pub(crate) fn fd_of_process(pidfd: BorrowedFd<'_>, number: RawFd) -> SysResult<OwnedFd> {
    rustix::process::pidfd_getfd(pidfd, number, rustix::process::PidfdGetfdFlags::empty())
}

/// In a forked Slurm task, as the job user: joins the user namespace
/// `user` (its owner, the job user, has every capability over it), then
/// the mount namespace `mnt` it owns. The kernel refuses it in a
/// multi-threaded process or one sharing its fs_struct.
pub fn join_user_and_mount_namespaces(user: BorrowedFd<'_>, mnt: BorrowedFd<'_>) -> SysResult<()> {
    use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
    move_into_link_name_space(user, Some(LinkNameSpaceType::User))?;
    move_into_link_name_space(mnt, Some(LinkNameSpaceType::Mount))
}

/// `namespace_type` of a user namespace, and of a mount namespace.
pub const USER_NAMESPACE: i32 = libc::CLONE_NEWUSER;
pub const MOUNT_NAMESPACE: i32 = libc::CLONE_NEWNS;

/// ioctl(2) requests on nsfs files (linux/nsfs.h): `_IO(0xb7, n)`.
const NS_GET_USERNS: libc::c_ulong = 0xb701;
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
const NS_GET_OWNER_UID: libc::c_ulong = 0xb704;

/// The kind of namespace the nsfs fd `ns` is (NS_GET_NSTYPE: a
/// `CLONE_NEW*` value); an error for any other file.
pub(crate) fn namespace_type(ns: BorrowedFd<'_>) -> SysResult<i32> {
    // SAFETY: NS_GET_NSTYPE takes no argument and returns the type; the
    // kernel refuses (ENOTTY) any fd that is not an nsfs file.
    let rc = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_NSTYPE) };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(rc)
}

/// The uid that owns the user namespace `ns` (NS_GET_OWNER_UID), as seen
/// from this process's user namespace.
pub(crate) fn user_namespace_owner(ns: BorrowedFd<'_>) -> SysResult<super::Uid> {
    let mut uid: libc::uid_t = 0;
    // SAFETY: NS_GET_OWNER_UID writes one uid_t through the pointer, which
    // is valid and exclusive for the call; EINVAL unless `ns` is a user
    // namespace.
    let rc = unsafe {
        libc::ioctl(
            ns.as_raw_fd(),
            NS_GET_OWNER_UID,
            &mut uid as *mut libc::uid_t,
        )
    };
    if rc < 0 {
        return Err(super::last_errno());
    }
    super::ids::kernel_uid(uid)
}

/// The user namespace that owns the namespace `ns` (NS_GET_USERNS), as a
/// new nsfs fd.
pub(crate) fn owning_user_namespace(ns: BorrowedFd<'_>) -> SysResult<OwnedFd> {
    // SAFETY: NS_GET_USERNS takes no argument and returns a new fd (or
    // fails); the fd is owned by nothing else yet.
    let rc = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS) };
    if rc < 0 {
        return Err(super::last_errno());
    }
    // SAFETY: `rc` is a new, open fd that only this value owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(rc) })
}

/// Whether `fd` is a regular file (for a lock handed over by a helper).
pub(crate) fn is_regular_file<Fd: AsFd>(fd: Fd) -> bool {
    super::fstat(fd.as_fd()).is_ok_and(|st| st.is_regular())
}

/// Takes ownership of the fd `n` this process inherited at that number
/// (a helper's pipes); None when it is not open.
pub(crate) fn take_fd(n: RawFd) -> Option<OwnedFd> {
    if n < 3 {
        return None;
    }
    // SAFETY: F_GETFD only reads the fd's flags (EBADF when closed); no
    // memory is involved.
    if unsafe { libc::fcntl(n, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: `n` is open (checked above) and nothing else in this
    // process owns it: it was placed at this number for this program
    // before exec, and is taken once, at start.
    Some(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(n) })
}

/// Writes all of `bytes` to `fd`.
pub(crate) fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> SysResult<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
