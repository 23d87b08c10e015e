//! The built binaries installed into a temporary prefix, as `make install`
//! would: squashfs-mount setuid root (4755), others 0755.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Copies `built` to `<prefix>/bin/<file name>`, owned by root, with `mode`
/// (4755 for the setuid tool). Creates `<prefix>/bin` (0755).
pub fn install(built: &Path, prefix: &Path, mode: u32) -> PathBuf {
    let bin = prefix.join("bin");
    fs::create_dir_all(&bin).expect("mkdir bin");
    for d in [prefix, bin.as_path()] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let to = bin.join(built.file_name().expect("file name"));
    // Callers install before their tests fork anything (a child forked
    // while the write fd is open would hold it until its exec, and an exec
    // of the binary then fails with ETXTBSY): the fixtures hold their
    // serialising mutex meanwhile.
    let tmp = bin.join(".installing");
    fs::copy(built, &tmp).unwrap_or_else(|e| panic!("copy {}: {e}", built.display()));
    std::os::unix::fs::chown(&tmp, Some(0), Some(0)).expect("chown root");
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).expect("chmod");
    fs::rename(&tmp, &to).expect("rename");
    to
}

/// Installs the setuid tool (mode 4755, root).
pub fn install_setuid(built: &Path, prefix: &Path) -> PathBuf {
    install(built, prefix, 0o4755)
}
