//! The kernel's health around tests that feed damaged images to userspace
//! readers, and the damaged image itself.

use std::path::PathBuf;
use std::process::Command;

/// The image that oopsed Linux 6.18's squashfs driver (testdata/README.md).
/// Only ever for the FUSE path or userspace readers.
pub fn crash_image() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/crash-squashfs_copy_data.sqfs");
    assert!(p.exists(), "{} is missing from the checkout", p.display());
    p
}

/// Kernel log lines that report an oops, a BUG or a WARNING (the boot-time
/// CPU vulnerability note "Speculative Return Stack Overflow: WARNING" is
/// not one).
pub fn problems() -> Vec<String> {
    let out = crate::cmd::try_run(&mut Command::new("dmesg"))
        .map(|r| r.stdout())
        .unwrap_or_default();
    out.lines()
        .filter(|l| {
            let l8 = l.to_ascii_lowercase();
            (l8.contains("oops")
                || l.contains("BUG:")
                || l.contains("WARNING:")
                || l8.contains("general protection"))
                && !l.contains("Speculative Return Stack Overflow")
        })
        .map(String::from)
        .collect()
}
