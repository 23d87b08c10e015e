//! `--mount`: mounting without squashfs-mount. As an unprivileged user,
//! through libfuse's setuid helper fusermount3 and its `_FUSE_COMMFD`
//! protocol (it mounts, then passes the /dev/fuse descriptor back over a
//! Unix socket). With `auto_unmount` fusermount3 stays until this process
//! ends and then unmounts a dead mount it can still look into (root's, or
//! with allow_other); main unmounts itself on SIGINT/SIGTERM/SIGHUP. As
//! root, directly with mount(2) and the options squashfs-mount uses (as
//! libfuse does for root).

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use rustix::io::{fcntl_setfd, FdFlags};
use rustix::net::{
    recvmsg, socketpair, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags,
    SocketFlags, SocketType,
};

pub const FUSERMOUNT: &str = "fusermount3";

/// Why `--mount` could not mount, in the words the server prints.
#[derive(Debug)]
pub enum MountError {
    /// A call on the way (socketpair, fcntl) and the kernel's answer.
    Step(&'static str, rustix::io::Errno),
    /// fusermount3 cannot be run.
    NoFusermount(std::io::Error),
    /// fusermount3 ran and passed no descriptor back: its status and its
    /// messages.
    NotMounted(String, String),
    /// Waiting for fusermount3 failed.
    Wait(std::io::Error),
    /// Root's /dev/fuse cannot be opened.
    Device(rustix::io::Errno),
    /// The mount options hold a NUL byte.
    Options(std::ffi::NulError),
    /// mount(2) on this directory failed.
    On(std::path::PathBuf, rustix::io::Errno),
}

impl std::fmt::Display for MountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MountError::Step(what, e) => write!(f, "{what}: {e}"),
            MountError::NoFusermount(e) => write!(
                f,
                "cannot run {FUSERMOUNT} (install Debian's fuse3 package): {e}"
            ),
            MountError::NotMounted(status, msg) => {
                write!(f, "{FUSERMOUNT} could not mount it ({status}): {msg}")
            }
            MountError::Wait(e) => write!(f, "{e}"),
            MountError::Device(e) => write!(f, "cannot open /dev/fuse: {e}"),
            MountError::Options(e) => write!(f, "{e}"),
            MountError::On(dir, e) => write!(f, "cannot mount on {}: {e}", dir.display()),
        }
    }
}

impl std::error::Error for MountError {}

/// Mounts a FUSE file system on `dir` and returns the /dev/fuse descriptor
/// descriptor, the socket that keeps fusermount3's auto_unmount watch alive
/// and that fusermount3 process (closing the socket makes it unmount and
/// exit).
pub fn fusermount(
    dir: &Path,
    fsname: &str,
    max_read: usize,
) -> Result<(OwnedFd, OwnedFd, Child), MountError> {
    let (ours, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| MountError::Step("socketpair", e))?;
    fcntl_setfd(&theirs, FdFlags::empty()).map_err(|e| MountError::Step("fcntl", e))?;
    // Commas and backslashes would split or escape mount options.
    let fsname: String = fsname
        .chars()
        .map(|c| {
            if c == ',' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    let mut opts = format!("ro,nosuid,nodev,default_permissions,auto_unmount,subtype=squashfs,fsname={fsname},max_read={max_read}");
    if rustix::process::geteuid().is_root() {
        opts.push_str(",allow_other");
    }
    let mut child = Command::new(FUSERMOUNT)
        .arg("-o")
        .arg(&opts)
        .arg("--")
        .arg(dir)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        // Its messages are shown if mounting fails; once mounted, the
        // watcher's later complaints (e.g. "not mounted" after an explicit
        // unmount) are dropped.
        .stderr(Stdio::piped())
        .spawn()
        .map_err(MountError::NoFusermount)?;
    drop(theirs);
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = recvmsg(
        &ours,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    );
    let mut fd = None;
    if received.is_ok() {
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = m {
                for f in fds {
                    fd.get_or_insert(f);
                }
            }
        }
    }
    match fd {
        Some(fd) => Ok((fd, ours, child)),
        None => {
            let mut msg = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut msg);
            }
            let status = child.wait().map_err(MountError::Wait)?;
            let msg = msg.trim().replace('\n', "; ");
            Err(MountError::NotMounted(status.to_string(), msg))
        }
    }
}

/// Unmounts `dir` (lazily if it is busy).
pub fn fuseunmount(dir: &Path) {
    let ok = Command::new(FUSERMOUNT)
        .arg("-u")
        .arg("-q")
        .arg("--")
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let _ = Command::new(FUSERMOUNT)
            .arg("-u")
            .arg("-z")
            .arg("-q")
            .arg("--")
            .arg(dir)
            .status();
    }
}

/// As root: opens /dev/fuse and mounts it on `dir` with mount(2).
pub fn direct_mount(dir: &Path, fsname: &str, max_read: usize) -> Result<OwnedFd, MountError> {
    use rustix::fs::{open, Mode, OFlags};
    use rustix::mount::{mount, MountFlags};
    let fd = open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
        .map_err(MountError::Device)?;
    let opts = format!(
        "fd={},rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other,max_read={max_read}",
        fd.as_raw_fd()
    );
    let opts = std::ffi::CString::new(opts).map_err(MountError::Options)?;
    let fsname: String = fsname.chars().filter(|c| !c.is_control()).collect();
    mount(
        fsname.as_str(),
        dir,
        "fuse.squashfs",
        MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
        opts.as_c_str(),
    )
    .map_err(|e| MountError::On(dir.to_path_buf(), e))?;
    Ok(fd)
}

/// As root: unmounts `dir` (lazily if it is busy).
pub fn direct_unmount(dir: &Path) {
    use rustix::mount::{unmount, UnmountFlags};
    if unmount(dir, UnmountFlags::empty()).is_err() {
        let _ = unmount(dir, UnmountFlags::DETACH);
    }
}
