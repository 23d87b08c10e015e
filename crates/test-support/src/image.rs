//! SquashFS images built with mksquashfs from (path, content) lists.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::cmd::{must, run};

/// Writes `files` (relative path, content) into the directory `tree`
/// (created; parents of each file too), runs `extra` there as a shell
/// line (as root) when it is not empty, makes everything world-readable
/// and packs it into `image` with `mksquashfs <tree> <image> <args>`
/// (through a temporary name, so `image` appears complete). The image is
/// mode 0644, owned by root.
pub fn build(tree: &Path, image: &Path, files: &[(&str, &str)], extra: &str, args: &[&str]) {
    fs::create_dir_all(tree).unwrap_or_else(|e| panic!("mkdir {}: {e}", tree.display()));
    for (p, content) in files {
        let f = tree.join(p);
        fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
        fs::write(&f, content).unwrap_or_else(|e| panic!("write {}: {e}", f.display()));
    }
    if !extra.is_empty() {
        must(&format!("cd '{}' && {extra}", tree.display()));
    }
    must(&format!("chmod -R a+rX '{}'", tree.display()));
    let tmp = image.with_extension("sqfs-tmp");
    let r = run(Command::new("mksquashfs")
        .arg(tree)
        .arg(&tmp)
        .args(["-quiet", "-noappend", "-no-progress"])
        .args(args));
    assert!(
        r.success(),
        "mksquashfs {}: {}{}",
        tree.display(),
        r.stdout(),
        r.stderr()
    );
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).expect("chmod image");
    fs::rename(&tmp, image).expect("rename image");
}

/// The `bytes_used` field of a SquashFS 4 superblock (offset 40).
pub fn bytes_used(image: &Path) -> u64 {
    let b = fs::read(image).expect("read image");
    assert!(b.len() >= 96, "{} has no superblock", image.display());
    u64::from_le_bytes(b[40..48].try_into().expect("8 bytes"))
}

/// A copy of the valid image `good` cut to half of the `bytes_used` its
/// superblock declares (at least the 96-byte superblock): squashfs-mount and
/// the plugin refuse it as truncated before the kernel sees it.
pub fn truncated_copy(good: &Path, to: &Path) {
    let bytes = fs::read(good).expect("read image");
    let len = (bytes_used(good) / 2).max(96) as usize;
    assert!(
        (len as u64) < bytes_used(good),
        "{} is too small to truncate after its superblock",
        good.display()
    );
    fs::write(to, &bytes[..len]).expect("write truncated image");
    fs::set_permissions(to, fs::Permissions::from_mode(0o644)).expect("chmod");
}
