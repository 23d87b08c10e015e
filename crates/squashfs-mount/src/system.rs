//! Every system call the privileged path makes, in one place.
//!
//! Nothing outside this module calls `rustix`, `libc` or contains `unsafe`
//! (the crate root has `#![deny(unsafe_code)]`; only this module lifts it).
//! Each `unsafe` block carries a `// SAFETY:` note. The functions here are
//! thin: they name the operation in the domain's words and convert errors,
//! but make no decisions; the order of privileged steps lives in
//! `launch::run`.
#![allow(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use rustix::fs::{Mode, OFlags, CWD};
use rustix::io::Errno;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags,
    OpenTreeFlags,
};
pub use rustix::process::{Gid, Uid};

/// An errno from the kernel, with the operation that produced it.
pub type SysResult<T> = Result<T, Errno>;
pub use rustix::io::Errno as Error;

/// File metadata the tool relies on (from `fstat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub size: u64,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub rdev: u64,
}

impl FileId {
    pub fn is_regular(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }
    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
    pub fn kind(&self) -> &'static str {
        match self.mode & libc::S_IFMT {
            libc::S_IFREG => "regular file",
            libc::S_IFDIR => "directory",
            libc::S_IFIFO => "FIFO",
            libc::S_IFSOCK => "socket",
            libc::S_IFBLK => "block device",
            libc::S_IFCHR => "character device",
            libc::S_IFLNK => "symbolic link",
            _ => "special file",
        }
    }
}

// ---------------------------------------------------------------------------
// Credentials and process state
// ---------------------------------------------------------------------------

pub fn real_uid() -> Uid {
    rustix::process::getuid()
}
pub fn real_gid() -> Gid {
    rustix::process::getgid()
}
pub fn effective_uid() -> Uid {
    rustix::process::geteuid()
}
pub fn supplementary_groups() -> SysResult<Vec<Gid>> {
    rustix::process::getgroups()
}

/// Returns (real, effective, saved) uids.
pub fn res_uid() -> SysResult<(u32, u32, u32)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: getresuid writes three uid_t through valid, exclusive pointers
    // to locals; it has no other effect.
    let rc = unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    if rc != 0 {
        return Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO));
    }
    Ok((r, e, s))
}

/// Returns (real, effective, saved) gids.
pub fn res_gid() -> SysResult<(u32, u32, u32)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: as for getresuid above: three valid out-pointers to locals.
    let rc = unsafe { libc::getresgid(&mut r, &mut e, &mut s) };
    if rc != 0 {
        return Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO));
    }
    Ok((r, e, s))
}

// The process is single-threaded whenever these run (checked in
// `privilege`), so the per-thread credential syscalls of rustix change the
// credentials of the whole process.

/// Sets only the effective uid (real and saved stay).
pub fn set_effective_uid(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(None, uid, None)
}
/// Sets only the effective gid (real and saved stay).
pub fn set_effective_gid(gid: Gid) -> SysResult<()> {
    rustix::thread::set_thread_res_gid(None, gid, None)
}
/// Sets real, effective and saved uid.
pub fn set_all_uids(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(uid, uid, uid)
}
/// Sets real, effective and saved gid.
pub fn set_all_gids(gid: Gid) -> SysResult<()> {
    rustix::thread::set_thread_res_gid(gid, gid, gid)
}
pub fn set_groups(groups: &[Gid]) -> SysResult<()> {
    rustix::thread::set_thread_groups(groups)
}

pub fn set_not_dumpable() -> SysResult<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
}
pub fn set_no_new_privs() -> SysResult<()> {
    rustix::thread::set_no_new_privs(true)
}

/// True when the effective, permitted and ambient capability sets are empty.
pub fn has_no_capabilities() -> SysResult<bool> {
    let sets = rustix::thread::capabilities(None)?;
    if !sets.effective.is_empty() || !sets.permitted.is_empty() {
        return Ok(false);
    }
    // The ambient set cannot hold what is not permitted, so an empty
    // permitted set implies an empty ambient set.
    Ok(true)
}

/// Total RAM in bytes (sysinfo).
pub fn total_memory() -> u64 {
    let info = rustix::system::sysinfo();
    (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)))
}

/// Number of threads of this process (from /proc/self/stat is not needed:
/// /proc/self/task has one entry per thread).
pub fn thread_count() -> SysResult<usize> {
    let dir = rustix::fs::openat(
        CWD,
        "/proc/self/task",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut n = 0;
    let mut d = rustix::fs::Dir::read_from(&dir)?;
    while let Some(e) = d.read() {
        let e = e?;
        if e.file_name().to_bytes().first() != Some(&b'.') {
            n += 1;
        }
    }
    Ok(n)
}

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

pub fn fstat(fd: BorrowedFd<'_>) -> SysResult<FileId> {
    Ok(file_id(&rustix::fs::fstat(fd)?))
}

/// Filesystem magic (statfs f_type) of the filesystem holding `fd`.
pub fn filesystem_type(fd: BorrowedFd<'_>) -> SysResult<u64> {
    Ok(rustix::fs::fstatfs(fd)?.f_type as u64)
}

/// Opens an image for reading: never blocks on a FIFO, never becomes a
/// controlling terminal, closed on exec.
pub fn open_image(path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
}

/// Resolves `path` (following symlinks, as any lookup by the caller would)
/// to a directory and pins it as an O_PATH fd.
pub fn open_directory_path(path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Reads exactly `buf.len()` bytes at offset 0 unless the file is shorter;
/// returns how many were read.
pub fn read_head(fd: BorrowedFd<'_>, buf: &mut [u8]) -> SysResult<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Where `fd` really is, as the kernel names it in this mount namespace
/// (`/proc/self/fd/N`). This is the kernel's answer about an fd we hold, not
/// a lookup of a user-supplied string.
pub fn path_of_fd(fd: BorrowedFd<'_>) -> SysResult<OsString> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let target = rustix::fs::readlinkat(CWD, link.as_str(), Vec::new())?;
    Ok(OsString::from_vec(target.into_bytes()))
}

/// The current working directory.
pub fn current_dir() -> SysResult<OsString> {
    let cwd = rustix::process::getcwd(Vec::new())?;
    Ok(OsString::from_vec(cwd.into_bytes()))
}

pub fn read_small_file(path: &str, limit: usize) -> SysResult<Vec<u8>> {
    let fd = rustix::fs::openat(CWD, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let mut out = vec![0u8; limit];
    let mut done = 0;
    while done < limit {
        match rustix::io::read(&fd, &mut out[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
    out.truncate(done);
    Ok(out)
}

// ---------------------------------------------------------------------------
// Loop devices
// ---------------------------------------------------------------------------

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
pub const LO_FLAGS_READ_ONLY: u32 = 1;
pub const LO_FLAGS_AUTOCLEAR: u32 = 4;
pub const LO_FLAGS_DIRECT_IO: u32 = 16;
const LO_NAME_SIZE: usize = 64;

/// `struct loop_info64` from <linux/loop.h>.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LoopInfo64 {
    pub lo_device: u64,
    pub lo_inode: u64,
    pub lo_rdevice: u64,
    pub lo_offset: u64,
    pub lo_sizelimit: u64,
    pub lo_number: u32,
    pub lo_encrypt_type: u32,
    pub lo_encrypt_key_size: u32,
    pub lo_flags: u32,
    pub lo_file_name: [u8; LO_NAME_SIZE],
    pub lo_crypt_name: [u8; LO_NAME_SIZE],
    pub lo_encrypt_key: [u8; 32],
    pub lo_init: [u64; 2],
}

/// `struct loop_config` from <linux/loop.h>.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

impl LoopInfo64 {
    fn zeroed() -> Self {
        LoopInfo64 {
            lo_device: 0,
            lo_inode: 0,
            lo_rdevice: 0,
            lo_offset: 0,
            lo_sizelimit: 0,
            lo_number: 0,
            lo_encrypt_type: 0,
            lo_encrypt_key_size: 0,
            lo_flags: 0,
            lo_file_name: [0; LO_NAME_SIZE],
            lo_crypt_name: [0; LO_NAME_SIZE],
            lo_encrypt_key: [0; 32],
            lo_init: [0; 2],
        }
    }
}

fn errno() -> Errno {
    Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO)
}

pub fn open_loop_control() -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        "/dev/loop-control",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// LOOP_CTL_GET_FREE: number of a free loop device (creating one if needed).
pub fn loop_get_free(control: BorrowedFd<'_>) -> SysResult<u32> {
    // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns the device
    // number; `control` is a valid open fd for the duration of the call.
    let rc = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
    if rc < 0 {
        return Err(errno());
    }
    Ok(rc as u32)
}

pub fn open_loop_device(number: u32) -> SysResult<OwnedFd> {
    let path = format!("/dev/loop{number}");
    rustix::fs::openat(
        CWD,
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
}

/// LOOP_CONFIGURE: binds `backing` (an fd the caller opened) to `device`.
pub fn loop_configure(
    device: BorrowedFd<'_>,
    backing: BorrowedFd<'_>,
    flags: u32,
    block_size: u32,
    name: &[u8],
) -> SysResult<()> {
    let mut info = LoopInfo64::zeroed();
    info.lo_flags = flags;
    let n = name.len().min(LO_NAME_SIZE - 1);
    info.lo_file_name[..n].copy_from_slice(&name[..n]);
    let config = LoopConfig {
        fd: backing.as_raw_fd() as u32,
        block_size,
        info,
        reserved: [0; 8],
    };
    // SAFETY: LOOP_CONFIGURE reads a `struct loop_config`, which `LoopConfig`
    // mirrors field for field with #[repr(C)]; the pointer is valid and the
    // kernel only reads through it. Both fds are open for the whole call.
    let rc = unsafe {
        libc::ioctl(
            device.as_raw_fd(),
            LOOP_CONFIGURE,
            &config as *const LoopConfig,
        )
    };
    if rc < 0 {
        return Err(errno());
    }
    Ok(())
}

/// LOOP_GET_STATUS64: what the loop device is backed by.
pub fn loop_status(device: BorrowedFd<'_>) -> SysResult<LoopInfo64> {
    let mut info = LoopInfo64::zeroed();
    // SAFETY: LOOP_GET_STATUS64 writes one `struct loop_info64`, which
    // `LoopInfo64` mirrors with #[repr(C)]; the pointer is valid, exclusive
    // and properly aligned for the duration of the call.
    let rc = unsafe {
        libc::ioctl(
            device.as_raw_fd(),
            LOOP_GET_STATUS64,
            &mut info as *mut LoopInfo64,
        )
    };
    if rc < 0 {
        return Err(errno());
    }
    Ok(info)
}

/// LOOP_CLR_FD: detaches a loop device we configured but could not use.
pub fn loop_clear(device: BorrowedFd<'_>) -> SysResult<()> {
    // SAFETY: LOOP_CLR_FD takes no argument; `device` is open for the call.
    let rc = unsafe { libc::ioctl(device.as_raw_fd(), LOOP_CLR_FD, 0) };
    if rc < 0 {
        return Err(errno());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Mount namespace and the new mount API
// ---------------------------------------------------------------------------

/// unshare(CLONE_NEWNS), then make every mount a slave of the host's, so
/// nothing mounted here propagates out while host mounts still propagate in.
pub fn enter_private_mount_namespace() -> SysResult<()> {
    // SAFETY: `unshare_unsafe` is unsafe because unsharing CLONE_FILES or
    // CLONE_FS under other threads' feet can invalidate their fds; we only
    // unshare the mount namespace, and the caller (`privilege`) has checked
    // that this process is single-threaded.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS)? };
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
    )
}

/// A filesystem context from fsopen(2).
pub struct FsContext {
    fd: OwnedFd,
}

/// Mount attributes every mount made by the tool gets.
pub fn safe_mount_attributes() -> MountAttrFlags {
    MountAttrFlags::MOUNT_ATTR_RDONLY
        | MountAttrFlags::MOUNT_ATTR_NOSUID
        | MountAttrFlags::MOUNT_ATTR_NODEV
}

impl FsContext {
    pub fn open(fs_type: &str) -> SysResult<Self> {
        Ok(FsContext {
            fd: rustix::mount::fsopen(fs_type, FsOpenFlags::FSOPEN_CLOEXEC)?,
        })
    }
    pub fn set_string(&self, key: &str, value: &OsStr) -> SysResult<()> {
        rustix::mount::fsconfig_set_string(&self.fd, key, value)
    }
    pub fn set_flag(&self, key: &str) -> SysResult<()> {
        rustix::mount::fsconfig_set_flag(&self.fd, key)
    }
    pub fn set_fd(&self, key: &str, fd: BorrowedFd<'_>) -> SysResult<()> {
        rustix::mount::fsconfig_set_fd(&self.fd, key, fd)
    }
    /// Creates the superblock. On failure the kernel's own explanation (the
    /// fs_context log, e.g. "squashfs: Filesystem uses "xz" compression...")
    /// is returned alongside the errno.
    pub fn create(&self) -> Result<(), (Errno, Vec<String>)> {
        match rustix::mount::fsconfig_create(&self.fd) {
            Ok(()) => Ok(()),
            Err(e) => Err((e, self.messages())),
        }
    }
    /// Drains the kernel's message log of this context.
    pub fn messages(&self) -> Vec<String> {
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
    pub fn mount(&self, attrs: MountAttrFlags) -> SysResult<OwnedFd> {
        rustix::mount::fsmount(&self.fd, FsMountFlags::FSMOUNT_CLOEXEC, attrs)
    }
}

/// Makes directory `name` (a fixed name chosen by the tool) inside the
/// directory `dir`, with `mode`, owned by `uid`:`gid`, and returns it pinned
/// as an O_PATH fd. Used only inside a fresh tmpfs the tool created.
pub fn make_directory_in(
    dir: BorrowedFd<'_>,
    name: &str,
    mode: u32,
    uid: u32,
    gid: u32,
) -> SysResult<OwnedFd> {
    rustix::fs::mkdirat(dir, name, Mode::from_bits_truncate(mode))?;
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))?;
    // chmod after chown: chown clears set-id bits.
    rustix::fs::fchmod(&fd, Mode::from_bits_truncate(mode))?;
    Ok(fd)
}

/// move_mount(2): attaches the detached mount `mount` onto the directory
/// pinned by `target` (no path lookup).
pub fn attach_mount(mount: BorrowedFd<'_>, target: BorrowedFd<'_>) -> SysResult<()> {
    rustix::mount::move_mount(
        mount,
        "",
        target,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
}

/// open_tree(2) with OPEN_TREE_CLONE: a detached copy of the mount at `fd`.
pub fn clone_mount(fd: BorrowedFd<'_>) -> SysResult<OwnedFd> {
    rustix::mount::open_tree(
        fd,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_EMPTY_PATH,
    )
}

// ---------------------------------------------------------------------------
// Image cache: root-only files, locks, the cache's mount namespace
// ---------------------------------------------------------------------------

/// statfs f_type of nsfs (a bind-mounted namespace file).
pub const NSFS_MAGIC: u64 = 0x6e73_6673;
/// statfs f_type of squashfs.
pub const SQUASHFS_MAGIC: u64 = 0x7371_7368;
/// statfs f_type of tmpfs.
pub const TMPFS_MAGIC: u64 = 0x0102_1994;

/// The current working directory as a directory fd for the `*_at`
/// functions below (AT_FDCWD).
pub fn working_dir() -> BorrowedFd<'static> {
    CWD
}

/// Creates the directory `path` (absolute, root's own path) with `mode`
/// unless it exists, then opens it without following a symlink in its last
/// component. The caller judges owner and mode from `fstat`.
pub fn open_or_create_dir(path: &str, mode: u32) -> SysResult<OwnedFd> {
    match rustix::fs::mkdirat(CWD, path, Mode::from_raw_mode(mode)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    open_dir_nofollow(CWD, path)
}

/// Opens an existing directory `path` relative to `dir` as an O_PATH fd,
/// refusing a symlink in the last component.
pub fn open_dir_nofollow<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `path` relative to `dir` as an O_PATH fd (any file type), refusing
/// a symlink in the last component.
pub fn open_path_nofollow<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<OwnedFd> {
    rustix::fs::openat(dir, path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
}

/// Opens `path` relative to `dir` for reading: no symlink in the last
/// component, never blocks on a FIFO.
pub fn open_read_nofollow<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
}

/// Opens (creating with `mode` if missing) the lock file `name` in `dir`.
pub fn open_lock_file<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::from_raw_mode(mode),
    )
}

/// Creates the empty file `name` in `dir` with `mode` unless it exists.
pub fn create_file_if_missing<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<()> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::CREATE | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::from_raw_mode(mode),
    )
    .map(drop)
}

/// Shared or exclusive `flock`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Shared,
    Exclusive,
}

/// flock(LOCK_NB): Ok(true) when the lock was taken, Ok(false) when another
/// process holds a conflicting one.
pub fn try_lock(fd: BorrowedFd<'_>, kind: LockKind) -> SysResult<bool> {
    use rustix::fs::FlockOperation as Op;
    let op = match kind {
        LockKind::Shared => Op::NonBlockingLockShared,
        LockKind::Exclusive => Op::NonBlockingLockExclusive,
    };
    match rustix::fs::flock(fd, op) {
        Ok(()) => Ok(true),
        Err(Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

pub fn unlock(fd: BorrowedFd<'_>) -> SysResult<()> {
    rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock)
}

/// Whether `path` relative to `dir` is the root of a mount (statx
/// STATX_ATTR_MOUNT_ROOT; symlinks not followed).
pub fn is_mount_root<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<bool> {
    use rustix::fs::{AtFlags, StatxAttributes, StatxFlags};
    let st = rustix::fs::statx(dir, path, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::BASIC_STATS)?;
    if !st.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) {
        return Err(Errno::NOSYS);
    }
    Ok(st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
}

/// Bind-mounts the directory `dir` onto itself (open_tree clone +
/// move_mount), so that it becomes a mount of its own.
pub fn bind_onto_itself(dir: BorrowedFd<'_>) -> SysResult<()> {
    let copy = clone_mount(dir)?;
    attach_mount(copy.as_fd(), dir)
}

/// Makes the mount at `path` (root's own absolute path) private: nothing
/// mounted under it propagates to or from other mounts.
pub fn make_private(path: &str) -> SysResult<()> {
    rustix::mount::mount_change(path, MountPropagationFlags::PRIVATE)
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
/// one that chose it.
fn change_dir_as_root_or_caller(dir: BorrowedFd<'_>) -> SysResult<()> {
    match rustix::process::fchdir(dir) {
        Err(Errno::ACCESS) | Err(Errno::PERM) => {}
        other => return other,
    }
    let (uid, gid) = (real_uid().as_raw(), real_gid().as_raw());
    // SAFETY: setfsuid/setfsgid only change this thread's file system ids
    // (the process is single-threaded); they take plain integers and
    // cannot fail in a way that touches memory. Both are set back to 0
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
        crate::error::report("fatal: cannot restore the file system ids");
        std::process::exit(1);
    }
    r
}

impl NamespaceReturn {
    /// Takes the namespace, root and working directory as fds (the working
    /// directory through /proc/thread-self/cwd, which needs no search
    /// permission on it), and checks that going back to them will work.
    fn capture() -> SysResult<Self> {
        let back = NamespaceReturn {
            ns: rustix::fs::openat(CWD, "/proc/thread-self/ns/mnt", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?,
            root: rustix::fs::openat(CWD, "/proc/thread-self/root", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?,
            cwd: rustix::fs::openat(CWD, "/proc/thread-self/cwd", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?,
        };
        // Check that going back will work, changing nothing if it will
        // not: first the working directory alone (entering the directory
        // we are in changes nothing), then the whole sequence, which only
        // re-enters where we are. A working directory that refuses both root
        // and the caller's file system ids (a FUSE mount without allow_root
        // checks the real and saved uids too) means: do not leave.
        change_dir_as_root_or_caller(back.cwd.as_fd())?;
        back.restore_directories()?;
        Ok(back)
    }

    /// Root (setns resets it to the namespace's root, which would escape a
    /// chroot), then the working directory (relative paths given by the
    /// caller resolve against it, and the command starts in it).
    fn restore_directories(&self) -> SysResult<()> {
        change_dir_as_root_or_caller(self.root.as_fd())?;
        rustix::process::chroot(".")?;
        change_dir_as_root_or_caller(self.cwd.as_fd())
    }

    /// setns back, then restore root and working directory. If any of this
    /// fails the process exits at once: it must never go on in the wrong
    /// namespace or with the wrong root.
    fn go_back(self) {
        let r = rustix::thread::move_into_link_name_space(self.ns.as_fd(), Some(rustix::thread::LinkNameSpaceType::Mount))
            .and_then(|()| self.restore_directories());
        if let Err(e) = r {
            crate::error::report(format_args!("fatal: cannot return to the launch's mount namespace: {e}"));
            std::process::exit(1);
        }
    }
}

/// Runs `f` inside the mount namespace `ns` (an nsfs file), then returns to
/// the current namespace, root and working directory. Needs root and a
/// single-threaded process (checked by `privilege`).
pub fn in_mount_namespace<T>(ns: BorrowedFd<'_>, f: impl FnOnce() -> T) -> SysResult<T> {
    let back = NamespaceReturn::capture()?;
    rustix::thread::move_into_link_name_space(ns, Some(rustix::thread::LinkNameSpaceType::Mount))?;
    let out = f();
    back.go_back();
    Ok(out)
}

/// Creates a new mount namespace (a copy of the current one), runs `f`
/// inside it, returns to the current namespace and hands back an nsfs fd
/// of the new namespace (it lives as long as that fd or a bind mount of it).
pub fn in_new_mount_namespace<T>(f: impl FnOnce() -> T) -> SysResult<(OwnedFd, T)> {
    let back = NamespaceReturn::capture()?;
    // SAFETY: as in `enter_private_mount_namespace`: only the mount
    // namespace is unshared, in a process checked to be single-threaded.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS)? };
    let ns = match rustix::fs::openat(CWD, "/proc/thread-self/ns/mnt", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
        Ok(ns) => ns,
        Err(e) => {
            back.go_back();
            return Err(e);
        }
    };
    let out = f();
    back.go_back();
    Ok((ns, out))
}

/// Inside a fresh mount namespace: makes every mount private, mounts a
/// small tmpfs (mode 0700, nosuid, nodev, noexec) on `onto` and makes it the
/// namespace's root with pivot_root, detaching everything else, so that the
/// namespace holds no reference to any other filesystem.
pub fn become_tmpfs_rooted(onto: &str, size: &str) -> SysResult<()> {
    rustix::mount::mount_change("/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)?;
    let ctx = FsContext::open("tmpfs")?;
    ctx.set_string("mode", OsStr::new("0700"))?;
    ctx.set_string("size", OsStr::new(size))?;
    ctx.set_string("nr_inodes", OsStr::new("16k"))?;
    ctx.create().map_err(|(e, _)| e)?;
    let tmpfs = ctx.mount(
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )?;
    let target = open_dir_nofollow(CWD, onto)?;
    attach_mount(tmpfs.as_fd(), target.as_fd())?;
    rustix::process::fchdir(&tmpfs)?;
    rustix::process::pivot_root(".", ".")?;
    rustix::mount::unmount(".", rustix::mount::UnmountFlags::DETACH)?;
    rustix::process::chdir("/")
}

/// Bind-mounts the namespace `ns` (an nsfs fd) onto the file `target` (an
/// O_PATH fd). ELOOP means the kernel refused it as a possible reference
/// loop (see `cache`).
pub fn bind_namespace(ns: BorrowedFd<'_>, target: BorrowedFd<'_>) -> SysResult<()> {
    let copy = clone_mount(ns)?;
    attach_mount(copy.as_fd(), target)
}

/// A detached clone of the mount whose root is `path` (relative to the
/// current root; no symlink followed).
pub fn clone_mount_at(path: &str) -> SysResult<OwnedFd> {
    rustix::mount::open_tree(
        CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_SYMLINK_NOFOLLOW,
    )
}

/// umount2(path, MNT_DETACH).
pub fn detach_mount(path: &str) -> SysResult<()> {
    rustix::mount::unmount(path, rustix::mount::UnmountFlags::DETACH | rustix::mount::UnmountFlags::NOFOLLOW)
}

/// The per-mount flags of the mount holding `fd`: (read-only, nosuid, nodev).
pub fn mount_flags(fd: BorrowedFd<'_>) -> SysResult<(bool, bool, bool)> {
    use rustix::fs::StatVfsMountFlags as F;
    let f = rustix::fs::fstatvfs(fd)?.f_flag;
    Ok((f.contains(F::RDONLY), f.contains(F::NOSUID), f.contains(F::NODEV)))
}

pub fn make_dir<Fd: AsFd>(dir: Fd, path: &str, mode: u32) -> SysResult<()> {
    rustix::fs::mkdirat(dir, path, Mode::from_raw_mode(mode))
}

pub fn remove_dir<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    rustix::fs::unlinkat(dir, path, rustix::fs::AtFlags::REMOVEDIR)
}

pub fn remove_file<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    rustix::fs::unlinkat(dir, path, rustix::fs::AtFlags::empty())
}

pub fn rename<Fd: AsFd>(dir: Fd, from: &str, to: &str) -> SysResult<()> {
    rustix::fs::renameat(&dir, from, &dir, to)
}

/// Writes `bytes` to the new file `path` (must not exist) with `mode`.
pub fn write_new_file<Fd: AsFd>(dir: Fd, path: &str, bytes: &[u8], mode: u32) -> SysResult<()> {
    let fd = rustix::fs::openat(
        dir,
        path,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    let mut done = 0;
    while done < bytes.len() {
        match rustix::io::write(&fd, &bytes[done..]) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => done += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads at most `limit` bytes of `path` relative to `dir` (no symlink in
/// the last component); the flag tells whether the file was longer.
pub fn read_file_at<Fd: AsFd>(dir: Fd, path: &str, limit: usize) -> SysResult<(Vec<u8>, bool)> {
    let fd = rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let mut out = vec![0u8; limit.saturating_add(1)];
    let mut done = 0;
    while done < out.len() {
        match rustix::io::read(&fd, &mut out[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
    let longer = done > limit;
    out.truncate(done.min(limit));
    Ok((out, longer))
}

fn file_id(st: &rustix::fs::Stat) -> FileId {
    FileId {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        size: st.st_size as u64,
        nlink: st.st_nlink,
        uid: st.st_uid,
        gid: st.st_gid,
        mtime: (st.st_mtime, st.st_mtime_nsec as i64),
        ctime: (st.st_ctime, st.st_ctime_nsec as i64),
        rdev: st.st_rdev,
    }
}

/// fstatat without following a symlink in the last component.
pub fn stat_at<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
    let st = rustix::fs::statat(dir, path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(file_id(&st))
}

/// fstatat following symlinks (e.g. the magic links in /proc/<pid>/ns).
pub fn stat_following<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
    let st = rustix::fs::statat(dir, path, rustix::fs::AtFlags::empty())?;
    Ok(file_id(&st))
}

/// Sets the modification time of `path` relative to `dir` to now.
pub fn touch<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    use rustix::fs::{Timespec, Timestamps, UTIME_NOW};
    let now = Timespec { tv_sec: 0, tv_nsec: UTIME_NOW };
    rustix::fs::utimensat(
        dir,
        path,
        &Timestamps { last_access: now, last_modification: now },
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
}

/// Names in the directory `path` relative to `dir` (without `.` and `..`),
/// at most `limit` of them; the flag tells whether there were more.
pub fn list_dir<Fd: AsFd>(dir: Fd, path: &str, limit: usize) -> SysResult<(Vec<OsString>, bool)> {
    let fd = rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    let mut d = rustix::fs::Dir::read_from(&fd)?;
    while let Some(e) = d.read() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if names.len() == limit {
            return Ok((names, true));
        }
        names.push(OsString::from_vec(name.to_vec()));
    }
    Ok((names, false))
}

/// Opens `/dev/loop<number>` relative to a directory fd of /dev (so that
/// it works from inside the cache's namespace, which has no /dev).
pub fn open_loop_device_at(dev_dir: BorrowedFd<'_>, number: u32) -> SysResult<OwnedFd> {
    let name = format!("loop{number}");
    rustix::fs::openat(
        dev_dir,
        name.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOFOLLOW,
        Mode::empty(),
    )
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_time() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Sleeps for `ms` milliseconds.
pub fn pause_millis(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// The CPUs this process may run on (its affinity), to be restored with
/// [`set_cpu_affinity`].
pub struct CpuAffinity(rustix::thread::CpuSet);

pub fn cpu_affinity() -> SysResult<CpuAffinity> {
    rustix::thread::sched_getaffinity(None).map(CpuAffinity)
}

pub fn set_cpu_affinity(a: &CpuAffinity) -> SysResult<()> {
    rustix::thread::sched_setaffinity(None, &a.0)
}

/// Restricts this process to run on `cpu` only (fails for a CPU that is
/// offline, beyond the kernel's limit or outside the process's cpuset).
pub fn pin_to_cpu(cpu: usize) -> SysResult<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(Errno::INVAL);
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
}

// ---------------------------------------------------------------------------
// Signals and exec
// ---------------------------------------------------------------------------

/// Resets every signal disposition to default and unblocks all signals, so
/// the command starts as if exec'd from a clean shell (the Rust runtime
/// ignores SIGPIPE; a caller may have blocked or ignored signals to disturb
/// us, which must not reach the command either... except that is theirs to
/// choose: we reset to defaults like a fresh process).
pub fn reset_signals() {
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: installing SIG_DFL needs no handler code; an invalid or
        // reserved signal number only makes signal() fail, which we ignore.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    // SAFETY: `set` is a properly initialised sigset_t local; sigprocmask
    // only reads it. The old-set pointer is null (not requested).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

pub fn as_bytes(s: &OsStr) -> &[u8] {
    s.as_bytes()
}

// ---------------------------------------------------------------------------
// For the SPANK plugin: one thread of a multi-threaded process (slurmstepd)
// ---------------------------------------------------------------------------
// slurmstepd runs several threads when SPANK calls the plugin. The credential
// functions above are per-thread raw syscalls, so a plugin can switch the
// effective ids of its own worker thread without touching slurmstepd's
// other threads. The functions below complete that: a mount namespace made
// by one thread, and joined later by a single-threaded child (a task).

/// unshare(CLONE_NEWNS) for the calling thread only, then make every mount a
/// slave of the host's. CLONE_NEWNS implies CLONE_FS: in a multi-threaded
/// process the kernel gives the calling thread its own copy of the
/// cwd/root/umask (it does not fail), and only this thread moves into the
/// new namespace; the other threads keep theirs.
pub fn enter_private_mount_namespace_of_thread() -> SysResult<()> {
    // SAFETY: `unshare_unsafe` is unsafe because unsharing CLONE_FILES could
    // leave other threads unable to use fds this thread creates (or the other
    // way round). We unshare only the mount namespace and, implied, the
    // fs_struct (cwd, root, umask): the fd table stays shared, so every fd
    // remains valid in every thread; no memory is involved.
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

/// True when the calling thread's effective capability set is empty (as it
/// is after the effective uid changed from 0 to another uid).
pub fn effective_capabilities_empty() -> SysResult<bool> {
    Ok(rustix::thread::capabilities(None)?.effective.is_empty())
}
