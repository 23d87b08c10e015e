//! Where `squashfs-mount-fuse` is.
//!
//! - Setuid: only `<prefix>/lib/squashfs-mount/` next to the installed
//!   binary ([`crate::mounts::fuse::server_for_command`]), a place root installed;
//!   never PATH or anything else a user chooses (the server is started by
//!   a process that holds root, before it drops it).
//! - Rootless (no setuid bit: the process has the caller's rights only, so
//!   a program found anywhere is one the caller could run anyway): the
//!   package's places next to the program (`../lib/squashfs-mount/`,
//!   `../libexec/squashfs-mount/`), the program's own directory (two files
//!   copied into `~/bin`), the packages' system places, then each directory
//!   of PATH. The first executable file wins; when there is none, the
//!   message lists every place looked at.
//!
//! Why not one file holding both programs: the server links the image
//! reader and its decompressors (zstd, xz, lz4, lzo, zlib, partly C code);
//! in the setuid binary they would join its short dependency list (rustix,
//! libc, squashfs-format) and a server mode would be one more way in
//! before the privileges are dropped. README.md, "FUSE server".

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::mounts::fuse::{server_next_to, SERVER_NAME};
use crate::system;

/// The packages' places for the server, whatever the program's own place.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/lib/squashfs-mount",
    "/usr/lib/squashfs-mount",
    "/usr/libexec/squashfs-mount",
];

/// The places rootless mode tries, in order, for the program at `exe`
/// with `path` the caller's PATH.
pub fn rootless_candidates(exe: &OsStr, path: Option<&OsStr>) -> Vec<OsString> {
    let mut dirs: Vec<Vec<u8>> = Vec::new();
    let exe = exe.as_bytes();
    if let Some(at) = exe.iter().rposition(|&b| b == b'/') {
        let bin = if at == 0 { &b"/"[..] } else { &exe[..at] };
        let prefix = match bin.iter().rposition(|&b| b == b'/') {
            Some(0) | None => &b""[..],
            Some(p) => &bin[..p],
        };
        for sub in ["lib/squashfs-mount", "libexec/squashfs-mount"] {
            dirs.push([prefix, b"/", sub.as_bytes()].concat());
        }
        dirs.push(bin.to_vec());
    }
    dirs.extend(SYSTEM_DIRS.iter().map(|d| d.as_bytes().to_vec()));
    if let Some(path) = path {
        // Empty entries mean the current directory in a shell's lookup;
        // relative entries too: neither is a place to start a server from.
        dirs.extend(
            path.as_bytes()
                .split(|&b| b == b':')
                .filter(|d| d.starts_with(b"/"))
                .map(<[u8]>::to_vec),
        );
    }
    // Without trailing slashes ("/" becomes "", which server_next_to joins
    // to "/squashfs-mount-fuse"), each place once.
    let mut seen: Vec<Vec<u8>> = Vec::new();
    for mut d in dirs {
        while d.last() == Some(&b'/') {
            d.pop();
        }
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    seen.into_iter()
        .map(|d| server_next_to(OsStr::from_bytes(&d)))
        .collect()
}

/// The server for rootless mode, or every place looked at.
pub fn find_for_rootless(path: Option<&OsStr>) -> Result<OsString, Vec<OsString>> {
    let exe = system::own_executable().unwrap_or_default();
    let candidates = rootless_candidates(&exe, path);
    candidates
        .iter()
        .find(|c| system::is_executable_file(c))
        .cloned()
        .ok_or(candidates)
}

/// Rootless mode found no server: the image the FUSE path serves first,
/// and every place looked at.
#[derive(Debug)]
pub struct NotFound {
    pub image: String,
    pub looked: Vec<OsString>,
}

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&not_found(&self.image, &self.looked))
    }
}

crate::error_kind!(NotFound);

/// The message for a server that is nowhere: `looked` is every place tried.
pub fn not_found(image: &str, looked: &[OsString]) -> String {
    let places: Vec<String> = looked
        .iter()
        .map(|p| String::from_utf8_lossy(OsStr::as_bytes(p)).into_owned())
        .collect();
    format!(
        "{image}: rootless mode serves every image through FUSE, but {SERVER_NAME} was not found (looked for {}); install it next to squashfs-mount or on PATH",
        places.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn os(b: &[u8]) -> OsString {
        OsString::from_vec(b.to_vec())
    }

    fn names(v: &[OsString]) -> Vec<String> {
        v.iter().map(|p| p.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn places_in_order() {
        let c = rootless_candidates(
            OsStr::new("/home/u/bin/squashfs-mount"),
            Some(OsStr::new("/home/u/bin:/usr/bin::rel/bin:/opt/x/")),
        );
        assert_eq!(
            names(&c),
            [
                "/home/u/lib/squashfs-mount/squashfs-mount-fuse",
                "/home/u/libexec/squashfs-mount/squashfs-mount-fuse",
                "/home/u/bin/squashfs-mount-fuse",
                "/usr/local/lib/squashfs-mount/squashfs-mount-fuse",
                "/usr/lib/squashfs-mount/squashfs-mount-fuse",
                "/usr/libexec/squashfs-mount/squashfs-mount-fuse",
                "/usr/bin/squashfs-mount-fuse",
                "/opt/x/squashfs-mount-fuse",
            ]
        );
        // A program in / and no PATH.
        let c = rootless_candidates(OsStr::new("/squashfs-mount"), None);
        assert_eq!(
            names(&c)[..3],
            [
                "/lib/squashfs-mount/squashfs-mount-fuse",
                "/libexec/squashfs-mount/squashfs-mount-fuse",
                "/squashfs-mount-fuse"
            ]
        );
        // Non-UTF-8 bytes are kept.
        let c = rootless_candidates(&os(b"/h/\xff/bin/squashfs-mount"), None);
        assert_eq!(c[2], os(b"/h/\xff/bin/squashfs-mount-fuse"));
    }

    #[test]
    fn the_message_lists_every_place() {
        let m = not_found(
            "a.sqfs",
            &[os(b"/x/squashfs-mount-fuse"), os(b"/y/squashfs-mount-fuse")],
        );
        assert!(m.starts_with("a.sqfs: "), "{m}");
        assert!(
            m.contains("(looked for /x/squashfs-mount-fuse, /y/squashfs-mount-fuse)"),
            "{m}"
        );
        assert!(
            m.contains("install it next to squashfs-mount or on PATH"),
            "{m}"
        );
    }
}
