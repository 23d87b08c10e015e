//! One table of refusals, run through every front end (the setuid command
//! and the Slurm plugin): they share one privileged sequence, so they must
//! refuse the same requests with the same words. Every refusal of a kept
//! writable layer (`--writable=DIR`) is here: the sequence makes them all
//! (`engine/kept_layer.rs`), before anything is mounted, or once the
//! mounts are attached for what needs them (a DIR in use, a layer made on
//! other images, a mount inside an image's mount point), never the layer
//! helper: the front ends run the table with a helper that must not run
//! ([`HelperMustNotRun`]).

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::image;
use crate::users::User;

/// A request, in terms both front ends can spell: images by name (in the
/// table's directory), a mount point below the front end's allowed root.
pub struct Refusal {
    pub name: &'static str,
    /// Plain pairs: (image, mount point below the root: "" is the root).
    pub pairs: &'static [(&'static str, &'static str)],
    /// One union: its images, on the root.
    pub union: &'static [&'static str],
    /// Bind mounts: (source directory in the table's directory, destination
    /// below the root: "" is the root).
    pub binds: &'static [(&'static str, &'static str)],
    /// `--writable=` (the plugin: `--squashfs-writable=`); `table/NAME` is
    /// NAME in the table's directory ([`writable`]).
    pub writable: Option<&'static str>,
    /// `-r` (the plugin: `--squashfs-mutable-root`).
    pub mutable_root: bool,
    /// `/etc/squashfs-mount.conf` while the row runs (None: as it is).
    pub site: Option<&'static str>,
    /// Words the one-line refusal must contain.
    pub expect: &'static [&'static str],
}

/// What a row leaves out: no pair, no union, no bind mount, no kept
/// layer, no `-r`, the site's configuration as it is.
const ROW: Refusal = Refusal {
    name: "",
    pairs: &[],
    union: &[],
    binds: &[],
    writable: None,
    mutable_root: false,
    site: None,
    expect: &[],
};

pub const TABLE: &[Refusal] = &[
    Refusal {
        name: "duplicate mount point",
        pairs: &[("a.sqfs", ""), ("b.sqfs", ".")],
        expect: &["is used to mount more than one squashfs"],
        ..ROW
    },
    Refusal {
        name: "image the user cannot read",
        pairs: &[("secret.sqfs", "")],
        expect: &[
            "unable to read squashfs",
            "secret.sqfs",
            "(Permission denied)",
        ],
        ..ROW
    },
    Refusal {
        name: "missing image",
        pairs: &[("missing.sqfs", "")],
        expect: &[
            "unable to read squashfs",
            "missing.sqfs",
            "(No such file or directory)",
        ],
        ..ROW
    },
    Refusal {
        name: "image that is a directory",
        pairs: &[("dir.sqfs", "")],
        expect: &["invalid squashfs", "dir.sqfs", "is not a regular file"],
        ..ROW
    },
    Refusal {
        name: "random bytes",
        pairs: &[("random.sqfs", "")],
        expect: &[
            "random.sqfs",
            "not a valid squashfs file",
            "not a SquashFS image",
        ],
        ..ROW
    },
    Refusal {
        name: "truncated image",
        pairs: &[("truncated.sqfs", "")],
        expect: &["truncated.sqfs", "truncated"],
        ..ROW
    },
    Refusal {
        name: "image whose real path has a comma",
        pairs: &[("comma-link.sqfs", "")],
        expect: &["UENV_MOUNT_LIST cannot carry"],
        ..ROW
    },
    Refusal {
        name: "the same image twice in a union",
        union: &["a.sqfs", "a.sqfs"],
        expect: &["named twice in one union"],
        ..ROW
    },
    Refusal {
        name: "kept writable layer on a file system that cannot hold one",
        pairs: &[("a.sqfs", "")],
        writable: Some("/proc/sqfsmnt-layer"),
        expect: &["the writable layer /proc/sqfsmnt-layer is on", "node-local"],
        ..ROW
    },
    Refusal {
        name: "kept writable layer that is another user's directory",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/layer-roots"),
        expect: &["layer-roots belongs to uid 0 (root), not to you"],
        ..ROW
    },
    Refusal {
        name: "kept writable layer that is a file",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/a.sqfs"),
        expect: &["cannot open the writable layer", "a.sqfs: Not a directory"],
        ..ROW
    },
    Refusal {
        name: "kept writable layer writable by others",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/layer-open"),
        expect: &["layer-open is writable by its group or others (mode 0770)"],
        ..ROW
    },
    Refusal {
        name: "kept writable layer that is not a layer",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/layer-foreign"),
        expect: &[
            "layer-foreign is not a writable layer made by squashfs-mount",
            "it holds precious but no stamp",
        ],
        ..ROW
    },
    Refusal {
        name: "kept writable layer the user cannot create",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/layer-new"),
        expect: &[
            "cannot create the writable layer",
            "layer-new",
            "Permission denied",
        ],
        ..ROW
    },
    Refusal {
        name: "kept writable layer behind a directory the user cannot enter",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/private/layer"),
        expect: &[
            "cannot create the writable layer",
            "private/layer",
            "Permission denied",
        ],
        ..ROW
    },
    Refusal {
        name: "kept writable layer whose parent does not exist",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/no-such-dir/layer"),
        expect: &["no-such-dir/layer", "its parent directory does not exist"],
        ..ROW
    },
    Refusal {
        name: "kept writable layer in use by another launch",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/layer-busy"),
        expect: &[
            "the writable layer",
            "layer-busy is in use by another launch",
            "wait for that one to end, or give another directory",
        ],
        ..ROW
    },
    Refusal {
        name: "kept writable layer made on other images",
        pairs: &[("a.sqfs", "")],
        writable: Some("table/layer-other"),
        expect: &[
            "layer-other does not belong to the images on",
            "the layer was made on /elsewhere/b.sqfs there",
            "Use another directory for these images",
        ],
        ..ROW
    },
    Refusal {
        name: "kept writable layer with a mount inside an image's mount point",
        pairs: &[("a.sqfs", "")],
        binds: &[("bindsrc", "sub")],
        writable: Some("table/layer-nest"),
        expect: &[
            "nothing can be mounted inside an image's mount point",
            "the bind mount on",
            "mount them side by side",
        ],
        ..ROW
    },
    Refusal {
        name: "writable layer beyond the RAM ceiling",
        pairs: &[("a.sqfs", "")],
        writable: Some("90%"),
        expect: &["--writable", "at most 50% of RAM"],
        ..ROW
    },
    Refusal {
        name: "mount point that does not exist (without -r)",
        pairs: &[("a.sqfs", "missing")],
        expect: &["the mount path", "/missing does not exist"],
        ..ROW
    },
    Refusal {
        name: "missing bind source",
        binds: &[("no-such-dir", "")],
        expect: &[
            "the bind source",
            "no-such-dir",
            "(No such file or directory)",
        ],
        ..ROW
    },
    Refusal {
        name: "bind source that is a file",
        binds: &[("a.sqfs", "")],
        expect: &["the bind source", "a.sqfs is not a directory"],
        ..ROW
    },
    Refusal {
        name: "bind source the user cannot reach",
        binds: &[("private/inner", "")],
        expect: &["the bind source", "private/inner", "(Permission denied)"],
        ..ROW
    },
    Refusal {
        name: "bind destination that does not exist (without -r)",
        binds: &[("bindsrc", "missing")],
        expect: &["the bind destination", "/missing does not exist"],
        ..ROW
    },
    Refusal {
        name: "bind destination that is an image's mount point",
        pairs: &[("a.sqfs", "")],
        binds: &[("bindsrc", ".")],
        expect: &["is used more than once"],
        ..ROW
    },
    Refusal {
        name: "-r where the site policy does not allow it",
        pairs: &[("a.sqfs", "missing")],
        mutable_root: true,
        site: Some("allow-mutable-root = no\n"),
        expect: &["is not allowed by the site policy", "allow-mutable-root"],
        ..ROW
    },
];

/// The `--writable=` value of a row: `table/NAME` is NAME in `dir`.
pub fn writable(dir: &Path, value: &str) -> String {
    match value.strip_prefix("table/") {
        Some(name) => dir.join(name).display().to_string(),
        None => value.to_string(),
    }
}

/// Makes the table's images in `dir` (root-owned, world-readable unless
/// said otherwise; nothing corrupt past its superblock), and the layer
/// directories of the kept-layer rows (some of them `user`'s, who runs
/// the table); `root` is the front end's mount point for "" (the rows'
/// stamp names it). Returns the lock of `layer-busy`, held until dropped.
#[must_use = "the busy layer's lock is held only while this lives"]
pub fn make_images(dir: &Path, user: &User, root: &Path) -> fs::File {
    fs::create_dir_all(dir).expect("mkdir");
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).expect("chmod");
    let img = |n: &str| dir.join(n);
    let src = dir.join("src");
    for (name, content) in [("a", "A"), ("b", "B")] {
        image::build(
            &src.join(name),
            &img(&format!("{name}.sqfs")),
            &[("file", content), ("sub/.keep", "")],
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
    // Bind sources: one anyone may reach, one inside a root-only directory.
    fs::create_dir_all(img("bindsrc")).expect("mkdir");
    fs::create_dir_all(img("private/inner")).expect("mkdir");
    fs::set_permissions(img("private"), fs::Permissions::from_mode(0o700)).expect("chmod");
    make_layer_dirs(dir, user, root)
}

/// The kept-layer rows' directories: root's; the user's, open to the
/// group; the user's, holding a file and no stamp; none at `layer-new`;
/// the user's layers: one whose lock is held (the returned file), one
/// made on other images at `root`, one empty.
fn make_layer_dirs(dir: &Path, user: &User, root: &Path) -> fs::File {
    let own = |path: &Path, mode: u32| {
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)).expect("chown");
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
    };
    let _ = fs::remove_dir_all(dir.join("layer-new"));
    fs::create_dir_all(dir.join("layer-roots")).expect("mkdir");
    fs::create_dir_all(dir.join("layer-open")).expect("mkdir");
    own(&dir.join("layer-open"), 0o770);
    let foreign = dir.join("layer-foreign");
    fs::create_dir_all(&foreign).expect("mkdir");
    fs::write(foreign.join("precious"), "x").expect("write");
    own(&foreign.join("precious"), 0o600);
    own(&foreign, 0o700);
    for name in ["layer-busy", "layer-other", "layer-nest"] {
        let _ = fs::remove_dir_all(dir.join(name));
        fs::create_dir_all(dir.join(name)).expect("mkdir");
        own(&dir.join(name), 0o700);
    }
    // The layer's stamp names its mount point's real path.
    let root = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let stamp = dir.join("layer-other/stamp");
    let text = format!(
        "squashfs-mount writable layer 1\nmount 0 {}\nimage {} 4096 /elsewhere/b.sqfs\n",
        root.display(),
        "0".repeat(64)
    );
    fs::write(&stamp, text).expect("write the stamp");
    own(&stamp, 0o600);
    let lock = dir.join("layer-busy/lock");
    let held = fs::File::create(&lock).expect("create the lock");
    own(&lock, 0o600);
    rustix::fs::flock(&held, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .expect("hold the busy layer's lock");
    held
}

/// After a row ran: the lock of its layer directory (`table/NAME`, but
/// `layer-busy`, whose lock the table holds) is not held by anything the
/// row left (a process, an fd of the plugin's). Panics with the row's name.
pub fn assert_no_lock_left(dir: &Path, r: &Refusal) {
    let Some(name) = r.writable.and_then(|w| w.strip_prefix("table/")) else {
        return;
    };
    if name == "layer-busy" {
        return;
    }
    let Ok(lock) = fs::File::open(dir.join(name).join("lock")) else {
        return;
    };
    let free = rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive);
    assert!(free.is_ok(), "{}: the layer's lock is left held", r.name);
}

/// The kept-layer helper at `at` replaced by a copy of false(1) while this
/// lives (then put back): a row the helper refused rather than the
/// sequence would fail, without the row's words.
pub struct HelperMustNotRun {
    at: PathBuf,
    real: PathBuf,
}

impl HelperMustNotRun {
    pub fn at(at: &Path) -> HelperMustNotRun {
        let real = at.with_file_name("real-layer-helper");
        fs::rename(at, &real).expect("move the helper aside");
        let swapped = HelperMustNotRun {
            at: at.to_path_buf(),
            real,
        };
        let false_ = ["/bin/false", "/usr/bin/false"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists())
            .expect("false(1)");
        crate::install::copy_as_root(false_, at, 0o755);
        swapped
    }
}

impl Drop for HelperMustNotRun {
    fn drop(&mut self) {
        let _ = fs::rename(&self.real, &self.at);
    }
}

/// The row's images, as `IMAGE:MOUNT POINT` with the images in `dir` and
/// the mount points below `root` (each front end joins them its way).
pub fn pairs(r: &Refusal, dir: &Path, root: &Path) -> Vec<String> {
    specs(r.pairs, dir, root)
}

/// The row's bind mounts, as `SOURCE:DESTINATION` (see [`pairs`]).
pub fn binds(r: &Refusal, dir: &Path, root: &Path) -> Vec<String> {
    specs(r.binds, dir, root)
}

/// The row's union's images, in `dir`, joined by commas.
pub fn union(r: &Refusal, dir: &Path) -> String {
    let list: Vec<String> = r
        .union
        .iter()
        .map(|i| dir.join(i).display().to_string())
        .collect();
    list.join(",")
}

fn specs(list: &[(&str, &str)], dir: &Path, root: &Path) -> Vec<String> {
    list.iter()
        .map(|(from, sub)| {
            format!(
                "{}:{}",
                dir.join(from).display(),
                mount_point(root, sub).display()
            )
        })
        .collect()
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
