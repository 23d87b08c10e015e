//! One table of refusals, run through every front end (the setuid command
//! and the Slurm plugin): they share one privileged sequence, so they must
//! refuse the same requests with the same words.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::image;

/// A request, in terms both front ends can spell: images by name (in the
/// table's directory), a mount point below the front end's allowed root.
pub struct Refusal {
    pub name: &'static str,
    /// Plain pairs: (image, mount point below the root: "" is the root).
    pub pairs: &'static [(&'static str, &'static str)],
    /// One union: its images, on the root.
    pub union: &'static [&'static str],
    pub writable: Option<&'static str>,
    /// Words the one-line refusal must contain.
    pub expect: &'static [&'static str],
}

pub const TABLE: &[Refusal] = &[
    Refusal {
        name: "duplicate mount point",
        pairs: &[("a.sqfs", ""), ("b.sqfs", ".")],
        union: &[],
        writable: None,
        expect: &["more than once"],
    },
    Refusal {
        name: "image the user cannot read",
        pairs: &[("secret.sqfs", "")],
        union: &[],
        writable: None,
        expect: &["secret.sqfs", "permission denied"],
    },
    Refusal {
        name: "missing image",
        pairs: &[("missing.sqfs", "")],
        union: &[],
        writable: None,
        expect: &["missing.sqfs", "no such file or directory"],
    },
    Refusal {
        name: "image that is a directory",
        pairs: &[("dir.sqfs", "")],
        union: &[],
        writable: None,
        expect: &["dir.sqfs", "not a regular file"],
    },
    Refusal {
        name: "random bytes",
        pairs: &[("random.sqfs", "")],
        union: &[],
        writable: None,
        expect: &["random.sqfs", "not a SquashFS image"],
    },
    Refusal {
        name: "truncated image",
        pairs: &[("truncated.sqfs", "")],
        union: &[],
        writable: None,
        expect: &["truncated.sqfs", "truncated"],
    },
    Refusal {
        name: "image whose real path has a comma",
        pairs: &[("comma-link.sqfs", "")],
        union: &[],
        writable: None,
        expect: &["UENV_MOUNT_LIST cannot carry"],
    },
    Refusal {
        name: "the same image twice in a union",
        pairs: &[],
        union: &["a.sqfs", "a.sqfs"],
        writable: None,
        expect: &["named twice in one union"],
    },
    Refusal {
        name: "writable layer beyond the RAM ceiling",
        pairs: &[("a.sqfs", "")],
        union: &[],
        writable: Some("90%"),
        expect: &["--writable", "at most 50% of RAM"],
    },
];

/// Makes the table's images in `dir` (root-owned, world-readable unless
/// said otherwise; nothing corrupt past its superblock).
pub fn make_images(dir: &Path) {
    fs::create_dir_all(dir).expect("mkdir");
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).expect("chmod");
    let img = |n: &str| dir.join(n);
    let src = dir.join("src");
    for (name, content) in [("a", "A"), ("b", "B")] {
        image::build(
            &src.join(name),
            &img(&format!("{name}.sqfs")),
            &[("file", content)],
            "",
            &["-all-root"],
        );
    }
    fs::copy(img("a.sqfs"), img("secret.sqfs")).expect("copy");
    fs::set_permissions(img("secret.sqfs"), fs::Permissions::from_mode(0o600)).expect("chmod");
    fs::create_dir_all(img("dir.sqfs")).expect("mkdir");
    fs::write(img("random.sqfs"), pseudo_random(8192)).expect("write");
    image::truncated_copy(&img("a.sqfs"), &img("truncated.sqfs"));
    fs::copy(img("a.sqfs"), img("with,comma.sqfs")).expect("copy");
    let _ = fs::remove_file(img("comma-link.sqfs"));
    symlink(img("with,comma.sqfs"), img("comma-link.sqfs")).expect("symlink");
    for f in ["random.sqfs", "truncated.sqfs", "with,comma.sqfs"] {
        fs::set_permissions(img(f), fs::Permissions::from_mode(0o644)).expect("chmod");
    }
}

/// The mount point of `sub` below `root` (`.` and "" are the root).
pub fn mount_point(root: &Path, sub: &str) -> PathBuf {
    match sub {
        "" => root.to_path_buf(),
        s => root.join(s),
    }
}

fn pseudo_random(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
