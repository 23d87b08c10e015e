//! `-r`/`--mutable-root`: a mount point or bind destination that does not
//! exist is created in the command's view only.
//!
//! Before a missing mount point is resolved (in path order, so a parent
//! mounted by this call is already there), its deepest existing ancestor D
//! is found as the caller and mirrored: a small tmpfs is mounted over D in
//! the private namespace, holding a recursive bind mount of each of D's
//! entries (symlinks recreated as symlinks), plus the new directories
//! (owned by root, or the caller in rootless mode; mode 0755) for this
//! mount point and for every later one of the call that is missing below
//! D; then the tmpfs is made read-only. When D is the namespace's root the
//! tmpfs becomes the new root (pivot_root).
//!
//! Why it is safe (doc/threat-model.md): nothing is written on the host
//! (the tmpfs and every copy live in the private namespace, whose mounts
//! are slaves); nothing is created where something exists (the name must
//! be absent, not even a dangling symlink); D must be listable and
//! searchable by the caller (checked on the pinned fd, ACLs included), and
//! each entry is opened as the caller, so the mirror shows no name and no
//! file the caller could not reach; the entries keep their own mounts and
//! flags, so nothing becomes more writable; the tmpfs root gets D's mode
//! (owner and group kept only when they are the caller's), and is
//! read-only, so the command cannot add anything there.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use crate::config::paths;
use crate::mounts::overlay::{Owners, RootAttributes};
use crate::privilege::{ActingAsCaller, Credentials};
use crate::system::error::Failure;
use crate::system::{self, Error as Errno};

use super::mirror::{Mirror, MirrorEntry};
use super::mirror::{ViewError, MAX_MIRROR_ENTRIES};
use super::plan::Plan;
use super::root_side::RootSide;

/// A mirror made for the command's view.
pub struct Mirrored {
    /// The kernel's name of the mirrored directory.
    pub dir: OsString,
    /// The directories created, as paths.
    pub created: Vec<OsString>,
    pub entries: usize,
    /// The caller could write D on the host: no longer in the view.
    pub was_writable: bool,
    /// D is the caller's own (their home, a directory of theirs).
    pub callers_own: bool,
}

impl Mirrored {
    /// How much verbosity the note needs: none (a warning) when the
    /// caller loses the right to create files in a directory of their own
    /// (their home, say), which they would not expect; else `-v`.
    pub(crate) fn level(&self) -> u8 {
        if self.was_writable && self.callers_own {
            0
        } else {
            1
        }
    }

    /// The note: a warning line (see [`Mirrored::level`]) or the
    /// `--verbose` line.
    pub(crate) fn note(&self) -> String {
        if self.level() == 0 {
            let created: Vec<_> = self.created.iter().map(|c| c.to_string_lossy()).collect();
            let dir = self.dir.to_string_lossy();
            return format!(
                "warning: -r: to create {} in the command's view, your directory {dir} is shown read-only at its top level: the command cannot create files directly in {dir}; create {} beforehand (mkdir), or mount elsewhere, to avoid this",
                created.join(", "),
                created.join(" ")
            );
        }
        let created: Vec<_> = self.created.iter().map(|c| c.to_string_lossy()).collect();
        let writable = if self.was_writable {
            "; new files cannot be created directly in it for the command"
        } else {
            ""
        };
        let entries = match self.entries {
            1 => "its 1 entry".to_string(),
            n => format!("its {n} entries"),
        };
        format!(
            "-r: created {} in the command's view only: {} is shown through a read-only copy of {entries}{writable}",
            created.join(", "),
            self.dir.to_string_lossy(),
        )
    }
}

/// If the mount `k` of the plan does not exist, makes it (and the other
/// missing ones below the same directory) in the command's view; None
/// when it exists (or cannot be looked up: `MountPoint::resolve` says why).
pub(crate) fn make_missing<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    plan: &Plan,
    k: usize,
    owners: &Owners,
) -> Result<Option<Mirrored>, Failure> {
    let m = &plan.mounts[k];
    if !matches!(system::open_directory_path(&m.key), Err(Errno::NOENT)) {
        return Ok(None);
    }
    let subject = m.subject.as_str();
    let comps = paths::components(m.key.as_bytes());
    if comps.contains(&&b".."[..]) {
        return Err(Failure::about(subject, ViewError::DotDot(m.key.clone())));
    }
    let (depth, dir) = deepest_existing(creds, &comps, subject)?;
    let real = judge_directory(creds, &dir, subject)?;
    let entries = list(creds, &dir, &real, subject)?;
    let names: Vec<&[u8]> = entries.iter().map(|e| e.name().as_bytes()).collect();
    let keys: Vec<Vec<&[u8]>> = plan
        .mounts
        .iter()
        .map(|p| paths::components(p.key.as_bytes()))
        .collect();
    let new = new_directories(&keys, k, depth, &names);
    let was_writable = system::may_write(dir.as_fd()).unwrap_or(false);
    let attrs = system::fstat(dir.as_fd())
        .map_err(|e| Failure::about(subject, ViewError::Stat(real.clone(), e)))?;
    let callers_own = attrs.uid == creds.caller().uid;
    let root = RootAttributes::sanitized(&attrs, owners);
    let count = entries.len();
    let mirror = Mirror {
        dir: &dir,
        real: &real,
        entries,
        new: &new,
        root,
        subject,
    };
    creds.try_as_root(|root| root_side.mirror(root, mirror))?;
    let created = new
        .iter()
        .map(|rel| {
            let mut p = real.as_bytes().to_vec();
            for c in rel {
                if p.last() != Some(&b'/') {
                    p.push(b'/');
                }
                p.extend_from_slice(c);
            }
            OsString::from_vec(p)
        })
        .collect();
    Ok(Some(Mirrored {
        dir: real,
        created,
        entries: count,
        was_writable,
        callers_own,
    }))
}

/// The longest prefix of `comps` that exists, as the caller: (its length,
/// the directory pinned); the next component must not exist at all.
fn deepest_existing(
    _as_caller: &impl ActingAsCaller,
    comps: &[&[u8]],
    subject: &str,
) -> Result<(usize, OwnedFd), Failure> {
    let prefix = |n: usize| {
        let mut p = Vec::new();
        for c in &comps[..n] {
            p.push(b'/');
            p.extend_from_slice(c);
        }
        if p.is_empty() {
            p.push(b'/');
        }
        OsString::from_vec(p)
    };
    for depth in (0..comps.len()).rev() {
        let path = prefix(depth);
        match system::open_directory_path(&path) {
            Ok(dir) => {
                return match system::stat_name_at(dir.as_fd(), OsStr::from_bytes(comps[depth])) {
                    Err(Errno::NOENT) => Ok((depth, dir)),
                    Ok(st) => Err(Failure::about(
                        subject,
                        ViewError::Exists(prefix(depth + 1), st.kind()),
                    )),
                    Err(e) => Err(unreachable_dir(subject, &prefix(depth + 1), e)),
                };
            }
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(unreachable_dir(subject, &path, e)),
        }
    }
    Err(Failure::about(subject, ViewError::NoStart))
}

fn unreachable_dir(subject: &str, path: &OsStr, e: Errno) -> Failure {
    Failure::about(subject, ViewError::Unreachable(path.to_owned(), e))
}

/// Where the directory to mirror really is, refused on a kernel API
/// filesystem or when the caller cannot list and search it.
fn judge_directory(
    _as_caller: &impl ActingAsCaller,
    dir: &OwnedFd,
    subject: &str,
) -> Result<OsString, Failure> {
    let real = system::path_of_fd(dir.as_fd())
        .map_err(|e| Failure::about(subject, ViewError::Unnamed(e)))?;
    let shown = real.to_string_lossy().into_owned();
    let root = paths::components(real.as_bytes()).is_empty();
    if let (false, Some(why)) = (root, paths::forbidden_reason(&real)) {
        return Err(Failure::about(subject, ViewError::Forbidden(why)));
    }
    let magic = system::filesystem_type(dir.as_fd())
        .map_err(|e| Failure::about(subject, ViewError::Statfs(shown.clone(), e)))?;
    if let Some(fs) = paths::forbidden_filesystem(magic) {
        return Err(Failure::about(subject, ViewError::KernelApi(shown, fs)));
    }
    if !system::may_list(dir.as_fd()).unwrap_or(false) {
        return Err(Failure::about(subject, ViewError::Unlistable(shown)));
    }
    Ok(real)
}

/// The entries of `dir`, each opened as the caller (O_PATH, no symlink
/// followed), symlinks read.
fn list(
    _as_caller: &impl ActingAsCaller,
    dir: &OwnedFd,
    real: &OsStr,
    subject: &str,
) -> Result<Vec<MirrorEntry>, Failure> {
    let shown = || real.to_string_lossy().into_owned();
    let (names, more) = system::list_dir(dir.as_fd(), ".", MAX_MIRROR_ENTRIES)
        .map_err(|e| Failure::about(subject, ViewError::List(shown(), e)))?;
    if more {
        return Err(Failure::about(subject, ViewError::TooManyEntries(shown())));
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let fd = match system::open_path_nofollow(dir.as_fd(), &name) {
            Ok(fd) => fd,
            // Gone since it was listed.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(entry_failure(subject, real, &name, e)),
        };
        let st = system::fstat(fd.as_fd()).map_err(|e| entry_failure(subject, real, &name, e))?;
        if st.is_symlink() {
            let target = system::link_target(fd.as_fd())
                .map_err(|e| entry_failure(subject, real, &name, e))?;
            out.push(MirrorEntry::Symlink(name, target));
        } else {
            out.push(MirrorEntry::Tree(name, fd, st.is_dir()));
        }
    }
    Ok(out)
}

fn entry_failure(subject: &str, dir: &OsStr, name: &OsStr, e: Errno) -> Failure {
    Failure::about(
        subject,
        ViewError::Entry(dir.to_owned(), name.to_owned(), e),
    )
}

/// For mount `k` of the plan (by key components, in plan order), missing
/// below the directory at `depth` components, whose entries are `names`:
/// the directories to create there, as components below it. Every later
/// mount below the same directory whose first component there is new is
/// included, unless it lies within another mount of the call from `k` on
/// (it is then looked up inside that mount). Pure.
pub(crate) fn new_directories<'a>(
    keys: &[Vec<&'a [u8]>],
    k: usize,
    depth: usize,
    names: &[&[u8]],
) -> Vec<Vec<&'a [u8]>> {
    let base = &keys[k][..depth];
    let mut out = Vec::new();
    for j in k..keys.len() {
        let c = &keys[j];
        if c.len() <= depth
            || c[..depth] != *base
            || c.contains(&&b".."[..])
            || names.contains(&c[depth])
        {
            continue;
        }
        let nested = (k..j).any(|m| keys[m].len() < c.len() && c[..keys[m].len()] == keys[m][..]);
        if !nested {
            out.push(c[depth..].to_vec());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::new_directories;

    fn keys(list: &[&'static str]) -> Vec<Vec<&'static [u8]>> {
        list.iter()
            .map(|k| crate::config::paths::components(k.as_bytes()))
            .collect()
    }

    fn show(v: Vec<Vec<&[u8]>>) -> Vec<String> {
        v.iter()
            .map(|c| {
                c.iter()
                    .map(|x| String::from_utf8_lossy(x).into_owned())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect()
    }

    #[test]
    fn the_missing_mount_points_below_one_directory() {
        // In path order, as the plan has them.
        let k = keys(&["/a", "/new", "/new/sub", "/new2/x", "/tmp/y", "/usr/z"]);
        // /new missing under "/", whose entries are a, tmp, usr.
        let got = show(new_directories(&k, 1, 0, &[b"a", b"tmp", b"usr"]));
        // /new/sub lies within /new (a mount of the call): looked up there.
        // /tmp/y and /usr/z start with an existing name: mirrored later,
        // in their own directories.
        assert_eq!(got, ["new", "new2/x"]);
        // Deeper: /srv/new/a and /srv/new/b below /srv (depth 1).
        let k = keys(&["/srv/new/a", "/srv/new/b", "/srvx/c"]);
        assert_eq!(
            show(new_directories(&k, 0, 1, &[b"old"])),
            ["new/a", "new/b"]
        );
        // Paths with '..' are never created.
        let k = keys(&["/p/q", "/p/../r"]);
        assert_eq!(show(new_directories(&k, 0, 1, &[])), ["q"]);
    }
}
