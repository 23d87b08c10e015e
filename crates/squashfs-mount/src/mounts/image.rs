//! Images, opened once with the caller's rights and used by fd from then
//! on; what is known about where they come from (`provenance`), judged on
//! that fd.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use squashfs_format::kernel::KernelConfig;
use squashfs_format::{parse_superblock, FormatError, Superblock, SUPERBLOCK_SIZE};

use crate::config::acl::{self, AclWriters};
use crate::config::paths::{self, tilde_hint};
use crate::config::provenance::{CallerAccess, PathDir, Provenance, Writers};
use crate::privilege::{ActingAsCaller, Caller};
use crate::system::error::{errno_hint, errno_words, Failure};
use crate::system::{self, Error as Errno, FileId, Uid};

/// What is wrong with an image (the path as given, where it matters).
#[derive(Debug)]
pub enum ImageError {
    /// uenv's words: `unable to read squashfs <path> (<strerror>)`.
    Unreadable {
        given: OsString,
        errno: Errno,
    },
    Stat(Errno),
    NotRegular {
        given: OsString,
        kind: &'static str,
    },
    Read(Errno),
    /// uenv's words for a file without the magic number.
    NotSquashfs {
        given: OsString,
        error: FormatError,
    },
    Format(FormatError),
    /// The kernel cannot decompress it (the verdict's reason).
    KernelLacks(String),
    /// Its last block does not fill 1 KiB (`mksquashfs -nopad`).
    NotPadded {
        given: OsString,
        size: u64,
        needed: u64,
    },
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::Unreadable { given, errno } => write!(
                f,
                "unable to read squashfs {} ({}){}{}",
                given.to_string_lossy(),
                errno_words(*errno),
                errno_hint(*errno),
                tilde_hint(given)
            ),
            ImageError::Stat(e) => write!(f, "cannot stat the image: {e}"),
            ImageError::NotRegular { given, kind } => write!(
                f,
                "invalid squashfs {} (is not a regular file: it is a {kind}); give the path of a SquashFS image file",
                given.to_string_lossy()
            ),
            ImageError::Read(e) => write!(f, "cannot read the image: {e}"),
            ImageError::NotSquashfs { given, error } => write!(
                f,
                "unable to read squashfs {} (not a valid squashfs file): {error}",
                given.to_string_lossy()
            ),
            ImageError::Format(e) => write!(f, "{e}"),
            ImageError::KernelLacks(reason) => f.write_str(reason),
            ImageError::NotPadded { given, size, needed } => write!(
                f,
                "the image is {size} bytes long, not padded to whole 1 KiB blocks (built with mksquashfs -nopad?), so the kernel cannot read its end from a loop device; pad it with 'truncate -s %4096 {}' (or rebuild it without -nopad); {needed} bytes would do",
                given.to_string_lossy()
            ),
        }
    }
}

crate::error_kind!(ImageError);

/// An image file the caller could open for reading.
#[derive(Debug)]
pub struct Image {
    /// The path as given on the command line (for messages).
    pub given: OsString,
    /// Where the opened file really is (the kernel's name for our fd).
    pub path: OsString,
    pub fd: OwnedFd,
    pub id: FileId,
    pub superblock: Superblock,
}

impl Image {
    /// Opens `given` with the caller's credentials (the `ActingAsCaller`
    /// borrow proves we are not inside an `as_root` section), refuses
    /// anything but a regular file, and checks the superblock read from that
    /// same fd.
    pub(crate) fn open(
        _as_caller: &impl ActingAsCaller,
        given: &OsStr,
        subject: &str,
    ) -> Result<Image, Failure> {
        let fail = |e: ImageError| Failure::about(subject, e);
        let fd = system::open_image(given).map_err(|errno| {
            fail(ImageError::Unreadable {
                given: given.to_owned(),
                errno,
            })
        })?;
        let id = system::fstat(fd.as_fd()).map_err(|e| fail(ImageError::Stat(e)))?;
        if !id.is_regular() {
            return Err(fail(ImageError::NotRegular {
                given: given.to_owned(),
                kind: id.kind(),
            }));
        }
        let mut head = [0u8; SUPERBLOCK_SIZE];
        let n = system::read_head(fd.as_fd(), &mut head).map_err(|e| fail(ImageError::Read(e)))?;
        let superblock = parse_superblock(&head[..n], id.size).map_err(|error| match error {
            FormatError::Empty | FormatError::BadMagic { .. } => fail(ImageError::NotSquashfs {
                given: given.to_owned(),
                error,
            }),
            e => fail(ImageError::Format(e)),
        })?;
        let path = system::path_of_fd(fd.as_fd()).unwrap_or_else(|_| given.to_owned());
        Ok(Image {
            given: given.to_owned(),
            path,
            fd,
            id,
            superblock,
        })
    }

    /// Refuses images whose compressor the running kernel cannot decompress,
    /// when the kernel configuration says so (the same verdict as `sqfs
    /// inspect`'s). Without a readable configuration only lzma, which no
    /// Linux kernel can decompress, is refused here; the kernel's own
    /// refusal of any other compressor it lacks is explained by
    /// `mount::MountError::Refused`.
    pub(crate) fn check_kernel_support(
        &self,
        kernel: Option<&KernelConfig>,
        subject: &str,
    ) -> Result<(), Failure> {
        let comp = self.superblock.compressor;
        let unknown = KernelConfig {
            source: String::new(),
            text: "CONFIG_SQUASHFS=y\n".into(),
        };
        let verdict = match kernel {
            Some(kernel) => kernel.squashfs_verdict(comp, &[]),
            None if comp.kernel_option().is_none() => unknown.squashfs_verdict(comp, &[]),
            None => return Ok(()),
        };
        if !verdict.can_mount {
            return Err(Failure::about(
                subject,
                ImageError::KernelLacks(verdict.reason),
            ));
        }
        Ok(())
    }

    /// Refuses an image whose last block a loop device cannot hold
    /// (`mksquashfs -nopad`), saying how to pad it.
    pub(crate) fn check_loop_fit(&self, subject: &str) -> Result<(), Failure> {
        match squashfs_format::superblock::loop_padding_needed(
            self.superblock.bytes_used,
            self.id.size,
        ) {
            None => Ok(()),
            Some(needed) => Err(Failure::about(
                subject,
                ImageError::NotPadded {
                    given: self.given.clone(),
                    size: self.id.size,
                    needed,
                },
            )),
        }
    }

    /// Where the image comes from, judged on the opened fd, as the caller:
    /// who owns and who may write it and every directory on its real path
    /// (walked from `/` without following symlinks, and checked to lead to
    /// this very file), what the kernel says the caller may write, whether
    /// a FUSE server provides it, and whether its path is open to everyone.
    pub(crate) fn provenance(
        &self,
        _as_caller: &impl ActingAsCaller,
        caller: &Caller,
    ) -> (Provenance, bool) {
        let fd = self.fd.as_fd();
        // Root may write everything: the kernel's answer says nothing then.
        let ask = (!caller.uid.is_root()).then_some(caller.uid);
        let (mut prov, public) = facts(fd, &self.path, &self.id, ask);
        prov.caller.uid = caller.uid;
        prov.caller.gids = caller.all_gids();
        prov.caller.can_write_file = ask.is_some() && system::may_write(fd).unwrap_or(true);
        (prov, public)
    }
}

/// Who can change the file `fd` (named `real` by the kernel, with
/// metadata `id`) and every directory on its path, judged as for an image
/// (the caller's part left empty).
pub(crate) fn provenance_of(fd: BorrowedFd<'_>, real: &OsStr, id: &FileId) -> Provenance {
    facts(fd, real, id, None).0
}

/// The facts of [`Image::provenance`], and whether the path is open to
/// everyone; with `ask` (the caller's uid), the first directory where the
/// kernel lets the caller replace the entry on the path.
fn facts(fd: BorrowedFd<'_>, real: &OsStr, id: &FileId, ask: Option<Uid>) -> (Provenance, bool) {
    let walk = walk_path(real, id, ask);
    let fuse = fuse_home(fd);
    let prov = Provenance {
        real_path: real.to_owned(),
        file: writers(fd, id),
        dirs: walk.dirs,
        caller: CallerAccess {
            writable_dir: walk.caller_writable_dir,
            ..CallerAccess::default()
        },
        user_filesystem: matches!(fuse, FuseHome::Users),
        root_fuse: match fuse {
            FuseHome::Roots(name) => Some(name),
            _ => None,
        },
        path_unverified: !walk.verified,
    };
    // Its path is no secret when every directory on it lets anyone pass
    // (the file's own mode does not hide its name).
    let public = walk.verified && walk.searchable_by_all;
    (prov, public)
}

/// Who can change the inode `fd` (owner, group, mode, ACL); an ACL that
/// cannot be read counts as letting anyone write.
fn writers(fd: BorrowedFd<'_>, id: &FileId) -> Writers {
    let acl = match system::access_acl(fd, id.is_dir()) {
        Ok(None) => AclWriters::default(),
        Ok(Some(bytes)) => acl::writers(&bytes),
        Err(_) => AclWriters {
            unknown: true,
            ..AclWriters::default()
        },
    };
    Writers {
        uid: id.uid,
        gid: id.gid,
        mode: id.mode & 0o7777,
        acl,
    }
}

struct Walk {
    verified: bool,
    dirs: Vec<PathDir>,
    caller_writable_dir: Option<OsString>,
    searchable_by_all: bool,
}

/// Walks the kernel's name of the file from `/`, one directory at a time
/// with O_PATH|O_NOFOLLOW, noting who can change each directory and, for a
/// caller other than root (`ask`), the first one where the kernel lets
/// the caller replace the entry on the path; checks that the walk ends at
/// the file `id`.
fn walk_path(real: &OsStr, id: &FileId, ask: Option<Uid>) -> Walk {
    let mut walk = Walk {
        verified: false,
        dirs: Vec::new(),
        caller_writable_dir: None,
        searchable_by_all: true,
    };
    let comps = paths::components(real.as_bytes());
    let Some((last, dirs)) = comps.split_last() else {
        return walk;
    };
    if !real.as_bytes().starts_with(b"/")
        || real.as_bytes().ends_with(b" (deleted)")
        || comps.contains(&&b".."[..])
    {
        return walk;
    }
    let Ok(mut dir) = system::open_dir_nofollow(system::working_dir(), "/") else {
        return walk;
    };
    let Ok(mut dir_id) = system::fstat(dir.as_fd()) else {
        return walk;
    };
    let mut prefix: Vec<u8> = Vec::new();
    let mut dir_name: Vec<u8> = b"/".to_vec();
    for name in dirs {
        let Ok(next) = system::open_dir_nofollow(dir.as_fd(), OsStr::from_bytes(name)) else {
            return walk;
        };
        let Ok(next_id) = system::fstat(next.as_fd()) else {
            return walk;
        };
        note(&mut walk, &dir, &dir_id, next_id.uid, &dir_name, ask);
        prefix.push(b'/');
        prefix.extend_from_slice(name);
        dir_name = prefix.clone();
        (dir, dir_id) = (next, next_id);
    }
    note(&mut walk, &dir, &dir_id, id.uid, &dir_name, ask);
    walk.verified = match system::open_path_nofollow(dir.as_fd(), OsStr::from_bytes(last))
        .and_then(|f| system::fstat(f.as_fd()))
    {
        Ok(st) => st.dev == id.dev && st.ino == id.ino,
        Err(_) => false,
    };
    walk
}

/// Notes the directory `dir` (named `path`) and who can change it, given
/// the owner of its entry on the path (`entry_uid`).
fn note(
    walk: &mut Walk,
    dir: &OwnedFd,
    st: &FileId,
    entry_uid: Uid,
    path: &[u8],
    ask: Option<Uid>,
) {
    if st.mode & 0o001 == 0 {
        walk.searchable_by_all = false;
    }
    let path = OsString::from_vec(path.to_vec());
    if let Some(caller) = ask.filter(|_| walk.caller_writable_dir.is_none()) {
        let sticky = st.mode & 0o1000 != 0;
        if system::may_write(dir.as_fd()).unwrap_or(true) && (!sticky || entry_uid == caller) {
            walk.caller_writable_dir = Some(path.clone());
        }
    }
    walk.dirs.push(PathDir {
        path,
        writers: writers(dir.as_fd(), st),
        entry_uid,
    });
}

/// Which FUSE mount, if any, serves a file.
enum FuseHome {
    /// None: a disk, tmpfs, a network file system the kernel serves.
    NotFuse,
    /// One root made (`user_id=0`) that is not one of this tool's: named
    /// by its subtype (`fuse.NAME`), or its source when it has none.
    Roots(String),
    /// One root did not make for itself (its server decides every byte
    /// and can stall every read): one of this tool's own (type
    /// `fuse.squashfs-mount`: its server serves a user's image, even for
    /// root), or one whose `user_id=` is not 0; or one whose maker cannot
    /// be told.
    Users,
}

/// The FUSE mount serving `fd`, judged from this namespace's mountinfo,
/// read up to a bound; anything unclear counts as a user's.
fn fuse_home(fd: BorrowedFd<'_>) -> FuseHome {
    if system::filesystem_type(fd).ok() != Some(system::FUSE_MAGIC) {
        return FuseHome::NotFuse;
    }
    let Ok(id) = system::mount_id(fd) else {
        return FuseHome::Users;
    };
    let Ok((text, false)) = system::read_file_at(
        system::working_dir(),
        "/proc/thread-self/mountinfo",
        8 << 20,
    ) else {
        return FuseHome::Users;
    };
    let prefix = format!("{id} ");
    let Some(line) = text
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(prefix.as_bytes()))
    else {
        return FuseHome::Users;
    };
    let line = String::from_utf8_lossy(line);
    // "... - fstype source super_options": spaces inside fields are
    // escaped (\040).
    let Some((_, tail)) = line.split_once(" - ") else {
        return FuseHome::Users;
    };
    let mut fields = tail.split(' ');
    let (fs_type, source) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
    let super_options = fields.next().unwrap_or("");
    let subtype = fs_type
        .strip_prefix("fuse.")
        .or_else(|| fs_type.strip_prefix("fuseblk."));
    let ours = subtype == Some(system::OUR_FUSE_SUBTYPE);
    if ours || !super_options.split(',').any(|o| o == "user_id=0") {
        return FuseHome::Users;
    }
    FuseHome::Roots(subtype.unwrap_or(source).to_string())
}

/// The running kernel's configuration, when it is readable as plain text.
pub(crate) fn kernel_config() -> Option<KernelConfig> {
    KernelConfig::running(None)
}
