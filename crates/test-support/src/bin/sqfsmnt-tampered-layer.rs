//! A stand-in for `squashfs-mount-layer` that its user tampered with (the
//! Slurm plugin starts the helper as the job user, who may trace it and
//! make it report any descriptor they hold): it reports, as the kept
//! layer's user namespace, mount namespace and lock, the user namespace it
//! runs in (the host's, root's), its mount namespace (the step's) and its
//! own program file, then waits for end of file on the wait descriptor as
//! the real helper does. For crates/spank/tests/slurm.rs.
#![allow(unsafe_code)]

use std::io::{Read, Write};

fn main() {
    let open = |path: &str| std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let held = [
        open("/proc/self/ns/user"),
        open("/proc/self/ns/mnt"),
        open("/proc/self/exe"),
    ];
    let numbers: Vec<String> = held
        .iter()
        .map(|f| {
            let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(f));
            link.rsplit('/').next().unwrap_or_default().to_string()
        })
        .collect();
    // The descriptors the plugin gave: report on 3, wait on 4 (pipes of
    // root's: they cannot be opened again through /proc).
    // SAFETY: the plugin placed its pipes at 3 and 4 before exec; nothing
    // else in this process owns them.
    let (mut report, mut wait) = unsafe {
        use std::os::fd::FromRawFd;
        (std::fs::File::from_raw_fd(3), std::fs::File::from_raw_fd(4))
    };
    let _ = writeln!(report, "ok {}", numbers.join(" "));
    drop(report);
    let _ = wait.read_to_end(&mut Vec::new());
    drop(held);
}
