//! `--writable=DIR` over an image whose files have many owners (issue
//! 27): what the caller may change is what `--writable` (a layer in
//! memory) lets them change, on the kernel and FUSE paths, and every file
//! in DIR is the caller's. As the unprivileged case user, a member of a
//! project group (the fixture's gid2), against the installed setuid
//! binary. Needs root (skips loudly).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sqfsmnt_test_support::cmd::{run, Run};
use sqfsmnt_test_support::tree::not_owned_by;
use sqfsmnt_test_support::{pair, s, Fixture};

use crate::case;

/// Another user's id (not the case user's, not root).
const OTHER: u32 = 65534;

/// The image, built by root: the case user's directory with group root;
/// a project directory root:gid2 2775 with a group-writable file; root's
/// directory with a 0644 and a 0666 file; another user's directory with a
/// world-writable file; root's tree with nothing the caller may change. In the prefix's images/ (root's: the kernel path)
/// and a copy in the user's directory (the FUSE path).
fn images(fx: &Fixture) -> [(PathBuf, &'static str); 2] {
    let name = format!("owners-{}-{}", fx.uid, fx.gid2);
    let kernel = fx.image(
        &name,
        &[
            ("mine/notes", "notes\n"),
            ("proj/shared", "shared\n"),
            ("sys/conf", "conf\n"),
            ("sys/open", "open\n"),
            ("theirs/board", "board\n"),
            ("ro/deep/file", "ro\n"),
        ],
        &format!(
            "chown -R 0:0 . && chown -R {u}:0 mine && chmod 0755 mine && chmod 0644 mine/notes && \
             chown -R 0:{g2} proj && chmod 2775 proj && chmod 0664 proj/shared && \
             chmod 0755 sys && chmod 0644 sys/conf && chmod 0666 sys/open && \
             chown -R {o}:{o} theirs && chmod 0755 theirs && chmod 0666 theirs/board",
            u = fx.uid,
            g2 = fx.gid2,
            o = OTHER
        ),
    );
    let own = fx.user_dir().join("owners.sqfs");
    fs::copy(&kernel, &own).unwrap();
    fx.user.chown(&own);
    [(kernel, "kernel"), (own, "FUSE")]
}

/// `squashfs-mount <layer> -v? IMAGE:M -- sh -c SCRIPT` as the case user.
fn sh(fx: &Fixture, layer: &str, image: &Path, m: &Path, script: &str, verbose: bool) -> Run {
    let mut c = fx.user.command(&fx.bin);
    if verbose {
        c.arg("-v");
    }
    run(c
        .args([layer, &pair(image, m), "--", "sh", "-c", script])
        .current_dir(&fx.root)
        .stdin(Stdio::null()))
}

/// The lines of squashfs-mount's stderr but the image cache's warning
/// (the cache is not this test's concern, and the machine's FUSE logs may
/// be another test's meanwhile).
fn about_the_layer(r: &Run) -> Vec<&str> {
    r.0.stderr
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| std::str::from_utf8(l).ok())
        .filter(|l| !l.contains("image cache unavailable"))
        .collect()
}

/// Runs `change` (in the mount point) on both paths with `--writable` and
/// with a kept layer: the same output, status and messages, which must
/// contain each of `shows`; then `check` in a second launch on the kept
/// layer prints `kept` (the change persisted); every file in DIR is the
/// caller's.
fn like_tmpfs(fx: &Fixture, change: &str, shows: &[&str], check: &str, kept: &str) {
    like_tmpfs_on(fx, images(fx), change, shows, check, kept)
}

/// [`like_tmpfs`] on `images` (the image on each path).
fn like_tmpfs_on(
    fx: &Fixture,
    images: [(PathBuf, &'static str); 2],
    change: &str,
    shows: &[&str],
    check: &str,
    kept: &str,
) {
    let m = fx.mount_point("owners");
    for (image, way) in images {
        let in_m = |script: &str| format!("cd {} && {{ {script}; }} 2>&1", s(&m));
        let tmpfs = sh(fx, "--writable", &image, &m, &in_m(change), false);
        let dir = fx.user_dir().join(format!("layer-{way}"));
        let w = format!("--writable={}", s(&dir));
        let layer = sh(fx, &w, &image, &m, &in_m(change), true);
        let route = layer
            .stderr()
            .lines()
            .find(|l| l.contains(&format!("{}: ", s(&image))))
            .map(|l| l.contains(": kernel ("));
        assert_eq!(route, Some(way == "kernel"), "{way}: {}", layer.stderr());
        let said = |r: &Run| (r.stdout(), r.code());
        assert_eq!(
            said(&layer),
            said(&tmpfs),
            "{way}: kept layer vs --writable"
        );
        for needle in shows {
            assert!(tmpfs.stdout().contains(needle), "{way}: {}", tmpfs.stdout());
        }
        // No warning or error about the layer: only -v's notes.
        for line in about_the_layer(&layer) {
            assert!(
                !line.contains("warning") && !line.contains("error"),
                "{way}: {}",
                layer.stderr()
            );
        }
        let again = sh(fx, &w, &image, &m, &in_m(check), false);
        assert_eq!(again.stdout(), kept, "{way}: {}", again.stderr());
        assert_eq!(about_the_layer(&again), [] as [&str; 0], "{way}");
        assert_eq!(
            not_owned_by(&dir, fx.uid),
            "",
            "{way}: not the caller's in DIR"
        );
    }
}

#[test]
fn the_callers_own_files_with_another_group() {
    case(|fx| {
        like_tmpfs(
            fx,
            "echo more >> mine/notes && echo new > mine/new && chmod 0600 mine/notes && echo done",
            &["done"],
            "cat mine/notes mine/new",
            "notes\nmore\nnew\n",
        );
    });
}

#[test]
fn the_callers_groups_files_and_directories() {
    case(|fx| {
        like_tmpfs(
            fx,
            "echo more >> proj/shared && echo new > proj/new && mv proj/new proj/renamed && echo done",
            &["done"],
            "cat proj/shared proj/renamed",
            "shared\nmore\nnew\n",
        );
    });
}

#[test]
fn roots_0644_file_stays_permission_denied() {
    case(|fx| {
        like_tmpfs(
            fx,
            "echo more >> sys/conf; echo new > sys/new; chmod 0666 sys/conf; rm -f sys/conf; cat sys/conf",
            &[
                "sys/conf: Permission denied",
                "sys/new: Permission denied",
                "Operation not permitted",
                "conf",
            ],
            "cat sys/conf; ls sys",
            "conf\nconf\nopen\n",
        );
        // Root's directories with nothing the caller may change get no
        // copy (the layer stays as small, and lookups as fast, as before).
        for way in ["kernel", "FUSE"] {
            let layer = fx.user_dir().join(format!("layer-{way}/0/upper"));
            assert!(layer.join("sys").is_dir(), "{way}");
            assert!(!layer.join("ro").exists(), "{way}");
        }
    });
}

#[test]
fn roots_world_writable_file_is_writable() {
    case(|fx| {
        like_tmpfs(
            fx,
            "echo more >> sys/open && echo done",
            &["done"],
            "cat sys/open",
            "open\nmore\n",
        );
    });
}

#[test]
fn another_users_world_writable_file_becomes_the_callers_copy() {
    case(|fx| {
        like_tmpfs(
            fx,
            "echo more >> theirs/board; echo new > theirs/new; echo done",
            &["theirs/new: Permission denied", "done"],
            "cat theirs/board",
            "board\nmore\n",
        );
        // The copy in DIR (checked to be the caller's above) holds it.
        let copy = fx.user_dir().join("layer-kernel/0/upper/theirs/board");
        assert_eq!(fs::read_to_string(copy).unwrap(), "board\nmore\n");
    });
}

#[test]
fn what_cannot_be_copied_is_named_with_its_owner() {
    case(|fx| {
        // Root's FIFO and character device in the project's directory,
        // which the caller may write: the FIFO is made again as the
        // caller's (it can be renamed, as with --writable); the device
        // cannot be, and the launch says so once, naming it and its owner.
        let name = format!("owners-dev-{}-{}", fx.uid, fx.gid2);
        let kernel = fx.image(
            &name,
            &[("proj/shared", "shared\n")],
            &format!(
                "mkfifo proj/fifo && mknod proj/null c 1 3 && chown -R 0:{g2} proj && \
                 chown 0:0 proj/null && chmod 2775 proj",
                g2 = fx.gid2
            ),
        );
        let own = fx.user_dir().join("owners-dev.sqfs");
        fs::copy(&kernel, &own).unwrap();
        fx.user.chown(&own);
        let m = fx.mount_point("owners-dev");
        for (image, way) in [(kernel, "kernel"), (own, "FUSE")] {
            let dir = fx.user_dir().join(format!("layer-dev-{way}"));
            let w = format!("--writable={}", s(&dir));
            let script = format!("cd {} && mv proj/fifo proj/moved && ls proj", s(&m));
            let r = sh(fx, &w, &image, &m, &script, false);
            r.ok();
            assert_eq!(r.stdout(), "moved\nnull\nshared\n", "{way}");
            let said = format!(
                "squashfs-mount: warning: {}/proj/null (owner uid 0, group gid 0): a character device of another owner cannot be made as yours; in the writable layer it cannot be changed or renamed (it can be removed)\n",
                s(&m)
            );
            assert_eq!(about_the_layer(&r), [said.trim_end()], "{way}");
            // Said once: the next launch finds the sub-layer complete.
            let r = sh(fx, &w, &image, &m, &format!("ls {}/proj", s(&m)), false);
            r.ok();
            assert_eq!(about_the_layer(&r), [] as [&str; 0], "{way}");
            assert_eq!(not_owned_by(&dir, fx.uid), "", "{way}");
        }
    });
}

/// Issue 37, finding 6: a sticky directory's rule holds for the caller's
/// copies. Root's 0644 file in a world-writable sticky directory of the
/// image (a `/tmp` in it) gets no copy of the caller's: chmod, write and
/// rename are refused with a kept layer as with `--writable`, on both
/// paths, while the caller still makes files of their own there.
#[test]
fn a_sticky_directory_protects_roots_file_in_a_kept_layer() {
    case(|fx| {
        let kernel = fx.image(
            "owners-sticky",
            &[("tmp/rootfile", "conf\n")],
            "chown -R 0:0 . && chmod 1777 tmp && chmod 0644 tmp/rootfile",
        );
        let own = fx.user_dir().join("owners-sticky.sqfs");
        fs::copy(&kernel, &own).unwrap();
        fx.user.chown(&own);
        let tried = |what: &str, op: &str| {
            format!("if {op} 2>/dev/null; then echo {what}-done; else echo {what}-refused; fi")
        };
        let change = [
            tried("chmod", "chmod 0666 tmp/rootfile"),
            tried("write", "echo more >> tmp/rootfile"),
            tried("rename", "mv tmp/rootfile tmp/moved"),
            tried("new", "echo mine > tmp/mine"),
        ]
        .join("; ");
        like_tmpfs_on(
            fx,
            [(kernel, "kernel"), (own, "FUSE")],
            &change,
            &[
                "chmod-refused",
                "write-refused",
                "rename-refused",
                "new-done",
            ],
            "cat tmp/rootfile tmp/mine; ls tmp",
            "conf\nmine\nmine\nrootfile\n",
        );
        for way in ["kernel", "FUSE"] {
            let upper = fx.user_dir().join(format!("layer-{way}/0/upper/tmp"));
            assert!(upper.is_dir(), "{way}: the caller's copy of tmp");
            assert!(
                !upper.join("rootfile").exists(),
                "{way}: no copy of root's file in the sticky directory"
            );
        }
    });
}
