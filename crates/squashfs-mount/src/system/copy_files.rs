//! `--writable=DIR`: the caller's own copies of an image's files and
//! directories in a layer's upper directory (`layer::copies`), made as
//! the caller: directories opened without following symlinks, files
//! created exclusively (an existing name is never replaced), modes set
//! exactly (the umask does not apply).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{Mode, OFlags, Timespec, Timestamps};
use rustix::io::Errno;

use super::{FileId, SysResult};

/// Opens the directory `name` in `dir` for listing (and fchmod), refusing
/// a symlink.
pub(crate) fn open_listable_dir<Fd: AsFd>(dir: Fd, name: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Every name in the open directory `dir` (without `.` and `..`).
pub(crate) fn names_in(dir: BorrowedFd<'_>) -> SysResult<Vec<OsString>> {
    let mut names = Vec::new();
    let mut d = rustix::fs::Dir::read_from(dir)?;
    while let Some(e) = d.read() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name.to_vec()));
        }
    }
    Ok(names)
}

/// mkdirat(2) of `name` in `dir` with `mode` (the umask applies: set the
/// mode afterwards with [`set_mode`]).
pub(crate) fn make_dir_named<Fd: AsFd>(dir: Fd, name: &OsStr, mode: u32) -> SysResult<()> {
    rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))
}

/// fchmod(2).
pub(crate) fn set_mode(fd: BorrowedFd<'_>, mode: u32) -> SysResult<()> {
    rustix::fs::fchmod(fd, Mode::from_raw_mode(mode))
}

/// Whether overlayfs marked the directory `dir` opaque (`userxattr`: a
/// directory the layer made over a removed one hides the image's).
pub(crate) fn is_opaque_dir(dir: BorrowedFd<'_>) -> bool {
    let mut buf = [0u8; 4];
    matches!(
        rustix::fs::fgetxattr(dir, "user.overlay.opaque", &mut buf[..]),
        Ok(n) if buf[..n].starts_with(b"y")
    )
}

/// Copies the regular file `name` of `from` (opened without following a
/// symlink, never blocking) to a new file `name` in `to` with `mode` and
/// the modification time of `st`; EEXIST when `to` has that name.
/// Returns the bytes copied. A partial copy is removed.
pub(crate) fn copy_file_named(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    name: &OsStr,
    st: &FileId,
    mode: u32,
) -> SysResult<u64> {
    let src = rustix::fs::openat(
        from,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let dst = rustix::fs::openat(
        to,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let copied = (|| {
        let (mut src, mut dst) = (File::from(src), File::from(dst));
        let n = std::io::copy(&mut src, &mut dst)
            .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
        let dst = OwnedFd::from(dst);
        rustix::fs::fchmod(&dst, Mode::from_raw_mode(mode))?;
        let time = Timespec {
            tv_sec: st.mtime.0,
            tv_nsec: st.mtime.1 as _,
        };
        rustix::fs::futimens(
            &dst,
            &Timestamps {
                last_access: time,
                last_modification: time,
            },
        )?;
        Ok(n)
    })();
    if copied.is_err() {
        let _ = rustix::fs::unlinkat(to, name, rustix::fs::AtFlags::empty());
    }
    copied
}

/// Makes in `to` a symlink `name` with the target of the symlink `name`
/// of `from`; EEXIST when `to` has that name.
pub(crate) fn copy_symlink_named(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    name: &OsStr,
) -> SysResult<()> {
    let target = rustix::fs::readlinkat(from, name, Vec::new())?;
    rustix::fs::symlinkat(target.as_c_str(), to, name)
}

/// Makes in `to` a FIFO or socket `name` (`kind`: the file type bits)
/// with `mode`; EEXIST when `to` has that name.
pub(crate) fn make_special_named(
    to: BorrowedFd<'_>,
    name: &OsStr,
    kind: u32,
    mode: u32,
) -> SysResult<()> {
    let file_type = rustix::fs::FileType::from_raw_mode(kind);
    rustix::fs::mknodat(to, name, file_type, Mode::from_raw_mode(0o600), 0)?;
    // In the caller's own DIR (0700), just made: nobody else can have
    // replaced it.
    rustix::fs::chmodat(
        to,
        name,
        Mode::from_raw_mode(mode),
        rustix::fs::AtFlags::empty(),
    )
}
