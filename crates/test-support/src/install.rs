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
    copy_as_root(built, &to, mode);
    to
}

/// The FUSE server's file name.
pub const FUSE_SERVER: &str = "squashfs-mount-fuse";
/// The `--writable=DIR` helper's file name (installed next to the server).
pub const LAYER_HELPER: &str = "squashfs-mount-layer";

/// Copies `from` to `to`, owned by root, with `mode`, through a temporary
/// name in the same directory (never a half-written program).
pub fn copy_as_root(from: &Path, to: &Path, mode: u32) {
    let tmp = to.with_file_name(".installing");
    fs::copy(from, &tmp).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    std::os::unix::fs::chown(&tmp, Some(0), Some(0)).expect("chown root");
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).expect("chmod");
    fs::rename(&tmp, to).expect("rename");
}

/// Installs the FUSE server and the `--writable=DIR` helper built next to
/// `built` (cargo's output directory) into `<prefix>/lib/squashfs-mount/`,
/// where squashfs-mount installed in `<prefix>/bin` looks for them, as
/// `make install` does. Returns the server's path.
pub fn install_fuse_server(built: &Path, prefix: &Path) -> PathBuf {
    let server = built.with_file_name(FUSE_SERVER);
    assert!(
        server.exists(),
        "{} is not built: run cargo build --release --workspace first (make test does)",
        server.display()
    );
    let dir = prefix.join("lib/squashfs-mount");
    fs::create_dir_all(&dir).expect("mkdir lib/squashfs-mount");
    for d in [prefix.join("lib"), dir.clone()] {
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let to = dir.join(FUSE_SERVER);
    copy_as_root(&server, &to, 0o755);
    let helper = built.with_file_name(LAYER_HELPER);
    assert!(
        helper.exists(),
        "{} is not built: run cargo build --release --workspace first (make test does)",
        helper.display()
    );
    copy_as_root(&helper, &dir.join(LAYER_HELPER), 0o755);
    to
}

/// Installs the setuid tool (mode 4755, root) and, next to it, the FUSE
/// server.
pub fn install_setuid(built: &Path, prefix: &Path) -> PathBuf {
    install_fuse_server(built, prefix);
    install(built, prefix, 0o4755)
}
