//! Machine settings a test changes for its duration, restored when the
//! guard is dropped (also when the test panics): the site configuration
//! of squashfs-mount, and what unprivileged users need for FUSE.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A file replaced for the test's duration (or created, then removed).
pub struct FileGuard {
    path: PathBuf,
    old: Option<(Vec<u8>, u32)>,
}

impl FileGuard {
    pub fn replace(path: &Path, content: &str, mode: u32) -> FileGuard {
        let old = fs::read(path).ok().map(|b| {
            (
                b,
                fs::metadata(path)
                    .map(|m| m.permissions().mode())
                    .unwrap_or(0o644),
            )
        });
        fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
        FileGuard {
            path: path.to_path_buf(),
            old,
        }
    }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        match &self.old {
            Some((bytes, mode)) => {
                let _ = fs::write(&self.path, bytes);
                let _ = std::os::unix::fs::chown(&self.path, Some(0), Some(0));
                let _ = fs::set_permissions(&self.path, fs::Permissions::from_mode(*mode));
            }
            None => {
                let _ = fs::remove_file(&self.path);
            }
        }
    }
}

impl FileGuard {
    /// The file removed for the test's duration (restored afterwards).
    pub fn absent(path: &Path) -> FileGuard {
        let old = fs::read(path).ok().map(|b| {
            (
                b,
                fs::metadata(path)
                    .map(|m| m.permissions().mode())
                    .unwrap_or(0o644),
            )
        });
        let _ = fs::remove_file(path);
        FileGuard {
            path: path.to_path_buf(),
            old,
        }
    }
}

/// No `/etc/squashfs-mount.conf`: the built-in defaults.
pub fn no_config() -> FileGuard {
    FileGuard::absent(Path::new("/etc/squashfs-mount.conf"))
}

/// `/etc/squashfs-mount.conf` with `text` (root-owned, 0644).
pub fn config(text: &str) -> FileGuard {
    FileGuard::replace(Path::new("/etc/squashfs-mount.conf"), text, 0o644)
}

/// /dev/fuse open to every user (mode 0666, Debian's default) for the
/// guard's lifetime, its mode restored afterwards: squashfs-mount opens it
/// with the caller's rights, and some machines have it 0600.
pub struct FuseDevice {
    mode: u32,
    gid: u32,
}

impl FuseDevice {
    pub fn open_to_all() -> FuseDevice {
        FuseDevice::with(0, 0o666)
    }

    /// /dev/fuse of group `gid` with `mode` for the guard's lifetime.
    pub fn with(gid: u32, mode: u32) -> FuseDevice {
        use std::os::unix::fs::MetadataExt;
        let (old_mode, old_gid) = fs::metadata("/dev/fuse")
            .map(|m| (m.permissions().mode() & 0o7777, m.gid()))
            .unwrap_or((0o666, 0));
        std::os::unix::fs::chown("/dev/fuse", None, Some(gid)).expect("chgrp /dev/fuse");
        fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(mode))
            .expect("chmod /dev/fuse");
        FuseDevice {
            mode: old_mode,
            gid: old_gid,
        }
    }
}

impl Drop for FuseDevice {
    fn drop(&mut self) {
        let _ = std::os::unix::fs::chown("/dev/fuse", None, Some(self.gid));
        let _ = fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(self.mode));
    }
}

/// What an unprivileged user needs to mount FUSE file systems with
/// `allow_other` (Debian's defaults are /dev/fuse 0666 and no
/// `user_allow_other`; some machines have /dev/fuse 0600).
pub struct FuseForUsers {
    dev_mode: u32,
    _conf: FileGuard,
}

impl FuseForUsers {
    pub fn enable() -> FuseForUsers {
        let dev_mode = fs::metadata("/dev/fuse")
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o666);
        fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(0o666))
            .expect("chmod /dev/fuse");
        let mut conf = fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
        conf.push_str("\nuser_allow_other\n");
        FuseForUsers {
            dev_mode,
            _conf: FileGuard::replace(Path::new("/etc/fuse.conf"), &conf, 0o644),
        }
    }
}

impl Drop for FuseForUsers {
    fn drop(&mut self) {
        let _ = fs::set_permissions("/dev/fuse", fs::Permissions::from_mode(self.dev_mode));
    }
}
