//! Where our installed programs are: the FUSE server
//! (`squashfs-mount-fuse`), the layer helper (`squashfs-mount-layer`, next
//! to the server) and the plugin's directory. The one place that works
//! them out; every front end asks here.
//!
//! - Setuid: only `<prefix>/lib/squashfs-mount/` next to the installed
//!   binary ([`server_for_command`], [`helper_for_command`]), a place root
//!   installed; never PATH or anything else a user chooses (the server is
//!   started by a process that holds root, before it drops it). The
//!   binary's place is the kernel's name of our own executable, never the
//!   environment.
//! - The plugin: the directory its shared object was loaded from
//!   ([`plugin_directory`], from this process's memory map), a place root
//!   installed (slurmstepd loads it from plugstack.conf);
//!   [`server_for_plugin`] there, the helper next to that server.
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

use std::os::unix::ffi::OsStringExt;

use crate::mounts::fuse::SERVER_NAME;
use crate::system;

/// The layer helper's file name, installed next to the FUSE server.
pub const HELPER_NAME: &str = "squashfs-mount-layer";

/// `name` in the directory `dir`.
fn in_dir(dir: &[u8], name: &str) -> OsString {
    let mut p = dir.to_vec();
    p.push(b'/');
    p.extend_from_slice(name.as_bytes());
    OsString::from_vec(p)
}

/// The directory part of `path` (before its last slash).
fn parent(path: &[u8]) -> Option<&[u8]> {
    path.iter().rposition(|&b| b == b'/').map(|at| &path[..at])
}

/// The server in the directory `dir`.
pub(crate) fn server_next_to(dir: &OsStr) -> OsString {
    in_dir(dir.as_bytes(), SERVER_NAME)
}

/// The helper next to the FUSE server `server`.
pub(crate) fn helper_next_to(server: &OsStr) -> OsString {
    match parent(server.as_bytes()) {
        Some(dir) => in_dir(dir, HELPER_NAME),
        None => OsString::from(HELPER_NAME),
    }
}

/// `<prefix>/lib/squashfs-mount` for the program at `exe`
/// (`<prefix>/bin/squashfs-mount`).
fn lib_dir_of(exe: &[u8]) -> Option<Vec<u8>> {
    let prefix = parent(parent(exe)?)?;
    Some([prefix, b"/lib/squashfs-mount"].concat())
}

/// The server for the setuid command: `<exe dir>/../lib/squashfs-mount/`.
pub(crate) fn server_for_command() -> Option<OsString> {
    let exe = system::own_executable().ok()?;
    Some(server_next_to(OsStr::from_bytes(&lib_dir_of(
        exe.as_bytes(),
    )?)))
}

/// The helper for the command: next to its FUSE server.
pub(crate) fn helper_for_command() -> Option<OsString> {
    Some(helper_next_to(&server_for_command()?))
}

/// The directory the shared object holding this code was loaded from
/// (for the plugin: its own directory), from this process's memory map.
pub(crate) fn plugin_directory() -> Option<OsString> {
    let here = plugin_directory as fn() -> Option<OsString> as usize;
    let (maps, _) =
        system::read_file_at(system::working_dir(), "/proc/self/maps", 16 << 20).ok()?;
    directory_of_mapping(&maps, here)
}

/// The server next to the plugin.
pub fn server_for_plugin() -> Option<OsString> {
    plugin_directory().map(|d| server_next_to(&d))
}

/// In `maps` (the text of /proc/self/maps), the directory of the file
/// mapped at `address`.
fn directory_of_mapping(maps: &[u8], address: usize) -> Option<OsString> {
    maps.split(|&b| b == b'\n').find_map(|line| {
        let range = line.split(|&b| b == b' ').next()?;
        let (start, end) = std::str::from_utf8(range).ok()?.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        if !(start..end).contains(&address) {
            return None;
        }
        let path = &line[line.iter().position(|&b| b == b'/')?..];
        Some(OsString::from_vec(parent(path)?.to_vec()))
    })
}

/// The packages' places for the server, whatever the program's own place.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/lib/squashfs-mount",
    "/usr/lib/squashfs-mount",
    "/usr/libexec/squashfs-mount",
];

/// The places rootless mode tries, in order, for the program at `exe`
/// with `path` the caller's PATH.
pub(crate) fn rootless_candidates(exe: &OsStr, path: Option<&OsStr>) -> Vec<OsString> {
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
pub(crate) fn find_for_rootless(path: Option<&OsStr>) -> Result<OsString, Vec<OsString>> {
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
pub(crate) fn not_found(image: &str, looked: &[OsString]) -> String {
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
    fn the_installed_places() {
        let lib = lib_dir_of(b"/usr/local/bin/squashfs-mount").unwrap();
        assert_eq!(lib, b"/usr/local/lib/squashfs-mount");
        let server = server_next_to(OsStr::from_bytes(&lib));
        assert_eq!(server, "/usr/local/lib/squashfs-mount/squashfs-mount-fuse");
        assert_eq!(
            helper_next_to(&server),
            "/usr/local/lib/squashfs-mount/squashfs-mount-layer"
        );
        assert_eq!(lib_dir_of(b"squashfs-mount"), None);
        let maps = b"5600-5700 r-xp 00000000 08:01 12 /usr/bin/slurmstepd\n\
            7f00-7f80 r-xp 00001000 08:01 34 /usr/lib/squashfs-mount/spank.so\n\
            7f80-7f90 rw-p 00000000 00:00 0 \n";
        let dir = |a| directory_of_mapping(maps, a);
        assert_eq!(dir(0x7f10).unwrap(), "/usr/lib/squashfs-mount");
        assert_eq!(dir(0x5600).unwrap(), "/usr/bin");
        assert_eq!(dir(0x7f85), None);
        assert_eq!(dir(0x7f80 - 1).unwrap(), "/usr/lib/squashfs-mount");
        assert_eq!(dir(0x9000), None);
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
