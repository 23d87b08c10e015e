//! `-r`, root's side: the read-only copy of a directory, mounted over it
//! in the private namespace (see `view.rs` for what is judged, as the
//! caller, before). Entries arrive opened as the caller; nothing here
//! looks a user's path up.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::config::paths;
use crate::mounts::overlay::RootAttributes;
use crate::privilege::AsRoot;
use crate::system::error::{errno_hint, errno_words, Failure};
use crate::system::{self, AttributeScope, Error as Errno};

/// The most entries a mirrored directory may have (each becomes a mount).
pub const MAX_MIRROR_ENTRIES: usize = 4096;

/// What `-r` refuses, or what failed making the copy (paths as the kernel
/// names them).
#[derive(Debug)]
pub enum ViewError {
    DotDot(OsString),
    /// Something of this kind is where a directory would be made.
    Exists(OsString, &'static str),
    NoStart,
    Unreachable(OsString, Errno),
    Unnamed(Errno),
    Forbidden(String),
    Statfs(String, Errno),
    KernelApi(String, &'static str),
    Unlistable(String),
    List(String, Errno),
    TooManyEntries(String),
    /// An entry (directory, name) that cannot be shown.
    Entry(OsString, OsString, Errno),
    Stat(OsString, Errno),
    /// A step of making the copy (what, of which directory).
    Build(&'static str, OsString, Errno),
}

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewError::DotDot(key) => write!(
                f,
                "-r cannot create {}: give the path without '..'",
                key.to_string_lossy()
            ),
            ViewError::Exists(path, kind) => write!(
                f,
                "-r creates nothing where something exists: {} is a {kind}",
                path.to_string_lossy()
            ),
            ViewError::NoStart => f.write_str("-r found no existing directory to start from"),
            ViewError::Unreachable(path, e) => write!(
                f,
                "unable to access {} ({}){}",
                path.to_string_lossy(),
                errno_words(*e),
                errno_hint(*e)
            ),
            ViewError::Unnamed(e) => write!(f, "cannot tell where -r would create: {e}"),
            ViewError::Forbidden(why) => write!(f, "-r cannot create there: {why}"),
            ViewError::Statfs(shown, e) => write!(f, "cannot statfs {shown}: {e}"),
            ViewError::KernelApi(shown, fs) => write!(
                f,
                "-r cannot create there: {shown} is on {fs}, a kernel API filesystem"
            ),
            ViewError::Unlistable(shown) => write!(
                f,
                "-r would show the names in {shown}, which you cannot list ({}); create the directory, or choose a place you can list",
                errno_words(Errno::ACCESS)
            ),
            ViewError::List(shown, e) => {
                write!(f, "-r cannot list {shown} ({})", errno_words(*e))
            }
            ViewError::TooManyEntries(shown) => write!(
                f,
                "-r would have to copy more than {MAX_MIRROR_ENTRIES} entries of {shown}; create the directory, or choose a place with fewer neighbours"
            ),
            ViewError::Entry(dir, name, e) => write!(
                f,
                "-r cannot show {}/{} in the command's view ({})",
                dir.to_string_lossy().trim_end_matches('/'),
                name.to_string_lossy(),
                errno_words(*e)
            ),
            ViewError::Stat(real, e) => write!(f, "cannot stat {}: {e}", real.to_string_lossy()),
            ViewError::Build(what, real, e) => {
                write!(f, "-r: {what} {} failed: {e}", real.to_string_lossy())
            }
        }
    }
}

crate::error_kind!(ViewError);

/// One entry of the mirrored directory, opened as the caller: a file or
/// directory (is it a directory), or a symlink and its target.
pub enum MirrorEntry {
    Tree(OsString, OwnedFd, bool),
    Symlink(OsString, OsString),
}

impl MirrorEntry {
    pub(crate) fn name(&self) -> &OsStr {
        match self {
            MirrorEntry::Tree(n, ..) | MirrorEntry::Symlink(n, _) => n,
        }
    }
}

/// An entry ready for the tmpfs: the copy of a file or directory (is it
/// a directory), or a symlink to recreate.
enum ReadyEntry {
    Tree(OsString, OwnedFd, bool),
    Symlink(OsString, OsString),
}

/// What root builds for one mirrored directory.
pub struct Mirror<'a> {
    /// The directory, pinned as the caller.
    pub dir: &'a OwnedFd,
    /// Its kernel name.
    pub real: &'a OsStr,
    pub entries: Vec<MirrorEntry>,
    /// The directories to create in it, as components below it.
    pub new: &'a [Vec<&'a [u8]>],
    /// The tmpfs root's owner and mode.
    pub root: RootAttributes,
    pub subject: &'a str,
}

/// The copies of the entries, the tmpfs over the directory holding them
/// and the new directories, made read-only; the namespace's new root when
/// the directory is the root.
pub(crate) fn build(_root: &AsRoot, m: Mirror<'_>) -> Result<(), Failure> {
    let Mirror {
        dir,
        real,
        entries,
        new,
        root,
        subject,
    } = m;
    let fail = |what: &'static str, e: Errno| {
        Failure::about(subject, ViewError::Build(what, real.to_owned(), e))
    };
    // The copies first (of what the caller opened), then the tmpfs.
    let mut placed = Vec::with_capacity(entries.len());
    for entry in entries {
        placed.push(match entry {
            MirrorEntry::Tree(name, fd, is_dir) => {
                let copy =
                    system::clone_tree(fd.as_fd()).map_err(|e| fail("copying an entry of", e))?;
                system::set_tree_attributes(
                    copy.as_fd(),
                    system::no_attributes(),
                    true,
                    AttributeScope::Tree,
                )
                .map_err(|e| fail("copying an entry of", e))?;
                ReadyEntry::Tree(name, copy, is_dir)
            }
            MirrorEntry::Symlink(name, target) => ReadyEntry::Symlink(name, target),
        });
    }
    let inodes = placed.len() + new.iter().map(Vec::len).sum::<usize>() + 16;
    let tmpfs = system::small_tmpfs(root.uid, root.gid, root.mode, inodes)
        .map_err(|e| fail("a tmpfs for", e))?;
    system::attach_mount(tmpfs.as_fd(), dir.as_fd()).map_err(|e| fail("mounting a tmpfs on", e))?;
    for p in placed {
        match p {
            ReadyEntry::Symlink(name, target) => {
                system::make_symlink_in(tmpfs.as_fd(), &name, &target)
                    .map_err(|e| fail("recreating a symlink of", e))?
            }
            ReadyEntry::Tree(name, copy, is_dir) => {
                let spot = if is_dir {
                    system::make_dir_in(tmpfs.as_fd(), &name, 0o755)
                } else {
                    system::make_file_in(tmpfs.as_fd(), &name)
                }
                .map_err(|e| fail("placing an entry of", e))?;
                system::attach_mount(copy.as_fd(), spot.as_fd())
                    .map_err(|e| fail("mounting an entry of", e))?;
            }
        }
    }
    for rel in new {
        let mut at: Option<OwnedFd> = None;
        for c in rel {
            let parent = at.as_ref().map_or(tmpfs.as_fd(), |d| d.as_fd());
            at = Some(
                system::make_dir_in(parent, OsStr::from_bytes(c), 0o755)
                    .map_err(|e| fail("creating a directory in", e))?,
            );
        }
    }
    system::set_tree_attributes(
        tmpfs.as_fd(),
        system::read_only(),
        false,
        AttributeScope::Mount,
    )
    .map_err(|e| fail("making read-only the copy of", e))?;
    if paths::components(real.as_bytes()).is_empty() {
        system::pivot_onto(tmpfs.as_fd()).map_err(|e| fail("making the new root of", e))?;
    }
    Ok(())
}
