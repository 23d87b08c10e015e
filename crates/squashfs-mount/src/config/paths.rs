//! Path logic without system calls: making a path absolute, ordering mount
//! points, and judging where a pinned mount point really is.
//! Paths are bytes (Linux paths need not be UTF-8); comparisons are by whole
//! components, never by string prefix.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Components of `path` with empty and `.` components removed (`//` and
/// `/./` collapse); `..` is kept, because what it means depends on symlinks
/// that only the kernel's lookup resolves.
pub fn components(path: &[u8]) -> Vec<&[u8]> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect()
}

/// `path` made absolute against `cwd` and lexically tidied (`//`, `.`); the
/// key used to detect duplicate mount points and to order nested ones.
pub fn absolute(cwd: &OsStr, path: &OsStr) -> OsString {
    let p = path.as_bytes();
    let mut parts: Vec<&[u8]> = Vec::new();
    if !p.starts_with(b"/") {
        parts.extend(components(cwd.as_bytes()));
    }
    parts.extend(components(p));
    let mut out = Vec::with_capacity(p.len() + 1);
    for c in &parts {
        out.push(b'/');
        out.extend_from_slice(c);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    OsString::from_vec(out)
}

/// Directories a path must be at or below (none listed: no restriction):
/// the site's `mount-points` and `trusted-dirs`, the plugin's
/// `mountpoints=`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Places(Vec<OsString>);

impl From<Vec<OsString>> for Places {
    fn from(dirs: Vec<OsString>) -> Places {
        Places(dirs)
    }
}

impl Places {
    #[cfg(test)]
    pub(crate) fn dirs(&self) -> &[OsString] {
        &self.0
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The one `path` is at or below, if any.
    pub(crate) fn containing(&self, path: &OsStr) -> Option<&OsString> {
        self.0.iter().find(|d| is_within(path, d))
    }

    /// Whether `path` may be there: at or below one of them, or anywhere
    /// when none is listed.
    pub(crate) fn allow(&self, path: &OsStr) -> bool {
        self.0.is_empty() || self.containing(path).is_some()
    }

    /// `a, b` for messages.
    pub(crate) fn list(&self) -> String {
        let names: Vec<_> = self.0.iter().map(|d| d.to_string_lossy()).collect();
        names.join(", ")
    }
}

/// A hint for a path the shell did not expand (`~` after `:` or `=`).
pub(crate) fn tilde_hint(given: &OsStr) -> &'static str {
    if given.as_bytes().starts_with(b"~") {
        "; '~' was not expanded by the shell (it is not, after ':' or '='): write $HOME instead"
    } else {
        ""
    }
}

/// Whether `inner` is `outer` or lies below it, component-wise.
pub fn is_within(inner: &OsStr, outer: &OsStr) -> bool {
    let (i, o) = (components(inner.as_bytes()), components(outer.as_bytes()));
    i.len() >= o.len() && i[..o.len()] == o[..]
}

/// Trees of kernel API filesystems nobody may mount over.
pub const FORBIDDEN_TREES: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Why a resolved mount point (the kernel's name for the pinned directory)
/// is refused, if it is.
pub fn forbidden_reason(real: &OsStr) -> Option<String> {
    let comps = components(real.as_bytes());
    if comps.is_empty() {
        return Some("it is the root directory '/'".into());
    }
    if real.as_bytes().ends_with(b" (deleted)") {
        return Some("the directory has been deleted".into());
    }
    for tree in FORBIDDEN_TREES {
        if is_within(real, OsStr::new(tree)) {
            return Some(format!(
                "it resolves to {} which is inside {tree}, a kernel API filesystem",
                real.to_string_lossy()
            ));
        }
    }
    None
}

/// Filesystem types (statfs f_type) of kernel API filesystems: mounting over
/// any directory on them is refused wherever they are mounted.
pub(crate) fn forbidden_filesystem(magic: u64) -> Option<&'static str> {
    Some(match magic {
        0x9fa0 => "proc",
        0x6265_6572 => "sysfs",
        0x1cd1 => "devpts",
        0x0027_e0eb => "cgroup",
        0x6367_7270 => "cgroup2",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0xcafe_4a11 => "bpf",
        0x6165_676c => "pstore",
        0xde5e_81e4 => "efivarfs",
        0x6265_6570 => "configfs",
        0x1980_0202 => "mqueue",
        0x4249_4e4d => "binfmt_misc",
        0x6573_5543 => "fusectl",
        0xf97c_ff8c => "selinuxfs",
        0x6e73_6673 => "nsfs",
        0x4249_4e4f => "binderfs",
        _ => return None,
    })
}

/// Sorts mount requests so that a mount point comes after every mount point
/// it lies within (path order), keeping the given order otherwise.
pub(crate) fn mount_order(keys: &[OsString]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by(|&a, &b| components(keys[a].as_bytes()).cmp(&components(keys[b].as_bytes())));
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> &OsStr {
        OsStr::new(x)
    }

    #[test]
    fn absolute_paths() {
        assert_eq!(absolute(s("/home/u"), s("mnt")), "/home/u/mnt");
        assert_eq!(absolute(s("/home/u"), s("/a//b/./c/")), "/a/b/c");
        assert_eq!(absolute(s("/home/u"), s("../x")), "/home/u/../x");
        assert_eq!(absolute(s("/"), s(".")), "/");
    }

    #[test]
    fn within_is_by_component() {
        assert!(is_within(s("/scratch/a"), s("/scratch")));
        assert!(is_within(s("/scratch"), s("/scratch")));
        assert!(!is_within(s("/scratch2"), s("/scratch")));
        assert!(!is_within(s("/devices"), s("/dev")));
        assert!(is_within(s("/x"), s("/")));
    }

    #[test]
    fn forbidden() {
        assert!(forbidden_reason(s("/")).is_some());
        assert!(forbidden_reason(s("/proc")).is_some());
        assert!(forbidden_reason(s("/proc/self")).is_some());
        assert!(forbidden_reason(s("/sys/kernel")).is_some());
        assert!(forbidden_reason(s("/dev/shm")).is_some());
        assert!(forbidden_reason(s("/tmp/x (deleted)")).is_some());
        assert!(forbidden_reason(s("/devices")).is_none());
        assert!(forbidden_reason(s("/user-environment")).is_none());
        assert_eq!(forbidden_filesystem(0x9fa0), Some("proc"));
        assert_eq!(forbidden_filesystem(0x7371_7368), None);
    }

    #[test]
    fn nested_mounts_come_after_their_parents() {
        let keys: Vec<OsString> = ["/a/b/c", "/z", "/a", "/a/b"]
            .iter()
            .map(OsString::from)
            .collect();
        let order: Vec<_> = mount_order(&keys)
            .into_iter()
            .map(|i| keys[i].clone())
            .collect();
        assert_eq!(order, ["/a", "/a/b", "/a/b/c", "/z"]);
    }
}
