//! uenv's squashfs-mount, test by test: the behaviours its integration
//! suite (test/integration/squashfs-mount.bats in eth-cscs/uenv) checks,
//! written again here against the installed setuid binary as an
//! unprivileged test user (the same command lines, the same expected
//! words). Where the bats file uses `/user-environment` or fresh top-level
//! names, these tests use mount points of their own: fixture directories,
//! and top-level names unique to the run that must not exist on the host
//! before or after.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sqfsmnt_test_support::Fixture;
use sqfsmnt_test_support::{pair, s};

use crate::case;

/// uenv's `app42.squashfs`: `env/app/bin/app` prints "hello app".
fn app(fx: &Fixture) -> PathBuf {
    fx.image(
        "uenv-app",
        &[("env/app/bin/app", "#!/bin/sh\necho hello app\n")],
        "chmod 755 env/app/bin/app",
    )
}

/// uenv's `tool.squashfs`: `env/tool/bin/tool` prints "hello tool", and
/// `meta/` to mount another image on.
fn tool(fx: &Fixture) -> PathBuf {
    fx.image(
        "uenv-tool",
        &[
            ("env/tool/bin/tool", "#!/bin/sh\necho hello tool\n"),
            ("meta/.keep", ""),
        ],
        "chmod 755 env/tool/bin/tool",
    )
}

/// A top-level name unique to this run, which must not exist on the host.
fn fresh_top_level(what: &str) -> PathBuf {
    let p = PathBuf::from(format!("/sqfsmnt-{}-{what}", std::process::id()));
    assert!(!p.exists(), "{} exists on the host", p.display());
    p
}

fn assert_absent_on_host(p: &Path) {
    assert!(
        fs::symlink_metadata(p).is_err(),
        "{} was created on the host",
        p.display()
    );
}

#[test]
fn noargs_and_version() {
    case(|fx| {
        let r = fx.run(std::iter::empty::<&str>());
        assert_eq!(r.code(), Some(1));
        assert!(r.stderr().contains("no command given"), "{r:?}");
        let r = fx.run(["--version"]);
        r.ok();
        assert_eq!(r.stdout(), format!("{}\n", env!("CARGO_PKG_VERSION")));
    });
}

#[test]
fn noop_unshares_nothing_and_drops_to_the_caller() {
    case(|fx| {
        let r = fx.user_sh("readlink /proc/$$/ns/mnt; \"$SQM\" -- readlink /proc/$$/ns/mnt");
        r.ok();
        let lines: Vec<String> = r.stdout().lines().map(String::from).collect();
        assert_eq!(lines.len(), 2, "{r:?}");
        assert_eq!(lines[0], lines[1]);
        let r = fx.run([
            "--",
            "sh",
            "-c",
            "id -u; id -ru; grep NoNewPrivs /proc/self/status",
        ]);
        r.ok();
        let uid = fx.uid.to_string();
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..2], [uid.as_str(), uid.as_str()], "{out}");
        assert!(
            lines[2].starts_with("NoNewPrivs:") && lines[2].ends_with('1'),
            "{out}"
        );
    });
}

#[test]
fn after_mounting_the_caller_keeps_uid_gid_and_no_new_privs() {
    case(|fx| {
        let m = fx.mount_point("uenv-ids");
        let r = fx.launch_sh(
            &[format!("--sqfs={}", pair(&app(fx), &m))],
            "id -u; id -ru; id -g; id -rg; grep NoNewPrivs /proc/self/status",
        );
        r.ok();
        let (u, g) = (fx.uid.to_string(), fx.gid.to_string());
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..4],
            [u.as_str(), u.as_str(), g.as_str(), g.as_str()],
            "{out}"
        );
        assert!(
            lines[4].starts_with("NoNewPrivs:") && lines[4].ends_with('1'),
            "{out}"
        );
    });
}

#[test]
fn forwarded_and_non_posix_variables() {
    case(|fx| {
        let r = fx.user_sh(
            "SQFSMNT_FWD_LD_LIBRARY_PATH=foo \"$SQM\" -- sh -c 'env | grep ^LD_LIBRARY_PATH='",
        );
        assert_eq!(r.stdout(), "LD_LIBRARY_PATH=foo\n", "{r:?}");
        // An exported bash function: a variable whose name is not POSIX.
        let r = fx.user_sh(
            "exec bash -c 'hello() { echo \"hello world $1\"; }; export -f hello; \"$SQM\" -- bash -c \"hello hpc\"'",
        );
        assert_eq!(r.stdout(), "hello world hpc\n", "{r:?}");
        let r = fx.user_sh(
            "env 'SCRATCH.OLD=/capstor/scratch/robert' \"$SQM\" -- printenv 'SCRATCH.OLD'",
        );
        assert_eq!(r.stdout(), "/capstor/scratch/robert\n", "{r:?}");
    });
}

#[test]
fn one_image_two_images_and_their_mounts() {
    case(|fx| {
        let (ue, ut) = (fx.mount_point("uenv-ue"), fx.mount_point("uenv-ut"));
        let r = fx.run([
            format!("--sqfs={}", pair(&app(fx), &ue)),
            "--".into(),
            s(&ue.join("env/app/bin/app")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "hello app\n");
        let mounts = format!("{},{}", pair(&app(fx), &ue), pair(&tool(fx), &ut));
        for (bin, want) in [
            (ue.join("env/app/bin/app"), "hello app\n"),
            (ut.join("env/tool/bin/tool"), "hello tool\n"),
        ] {
            // uenv's -s spelling as well as --sqfs=.
            let r = fx.run(["-s".into(), mounts.clone(), "--".into(), s(&bin)]);
            r.ok();
            assert_eq!(r.stdout(), want);
        }
        let r = fx.run([
            format!("--sqfs={mounts}"),
            "--".into(),
            "findmnt".into(),
            "--noheadings".into(),
            s(&ue),
        ]);
        r.ok();
        let line = r.stdout();
        let kernel = line.contains(" squashfs ") && line.contains("ro,") && line.contains("nosuid");
        let fuse = line.contains(" fuse") && line.contains("nosuid");
        assert!(kernel || fuse, "{line}");
    });
}

#[test]
fn repeated_mount_point_in_uenvs_words() {
    case(|fx| {
        let m = fx.mount_point("uenv-rep");
        fx.run([
            format!("--sqfs={},{}", pair(&app(fx), &m), pair(&tool(fx), &m)),
            "--".into(),
            "true".into(),
        ])
        .refused(&[&format!(
            "the mount point {} is used to mount more than one squashfs",
            s(&m)
        )]);
    });
}

#[test]
fn recursive_mount_given_out_of_order() {
    case(|fx| {
        let m = fx.mount_point("uenv-rec");
        let t = tool(fx);
        let mut list = Vec::new();
        for sub in ["meta/meta", "meta", "meta/meta/meta", ""] {
            let mp = if sub.is_empty() {
                m.clone()
            } else {
                m.join(sub)
            };
            list.push(pair(&t, &mp));
        }
        let r = fx.run([
            format!("--sqfs={}", list.join(",")),
            "--".into(),
            "realpath".into(),
            s(&m.join("meta/meta/meta/meta")),
        ]);
        r.ok();
        assert_eq!(
            r.stdout(),
            format!("{}\n", s(&m.join("meta/meta/meta/meta")))
        );
    });
}

#[test]
fn unreadable_and_untraversable_images_say_permission_denied() {
    case(|fx| {
        let m = fx.mount_point("uenv-perm");
        let unreadable = fx.user_dir().join("unreadable.squashfs");
        fs::copy(app(fx), &unreadable).unwrap();
        fx.user.chown(&unreadable);
        fs::set_permissions(&unreadable, fs::Permissions::from_mode(0o000)).unwrap();
        fx.run([
            format!("--sqfs={}", pair(&unreadable, &m)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["Permission denied"]);
        // It failed before mounting: nothing is on the mount point.
        assert!(fs::read_dir(&m).unwrap().next().is_none());
        let closed = fx.user_dir().join("closed");
        fs::create_dir(&closed).unwrap();
        fs::copy(app(fx), closed.join("image.squashfs")).unwrap();
        fs::set_permissions(
            closed.join("image.squashfs"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        fx.user.chown(&closed);
        fs::set_permissions(&closed, fs::Permissions::from_mode(0o000)).unwrap();
        fx.run([
            format!("--sqfs={}", pair(&closed.join("image.squashfs"), &m)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["Permission denied"]);
        fs::set_permissions(&closed, fs::Permissions::from_mode(0o700)).unwrap();
    });
}

#[test]
fn a_root_owned_image_is_refused_and_not_an_existence_oracle() {
    case(|fx| {
        let m = fx.mount_point("uenv-oracle");
        // root-owned, in a root-owned mode-700 directory
        let rootonly = fx.path("private");
        let image = rootonly.join("app.squashfs");
        fs::copy(app(fx), &image).unwrap();
        for img in [image.clone(), rootonly.join("absent.squashfs")] {
            let r = fx.run([
                format!("--sqfs={}", pair(&img, &m)),
                "--".into(),
                "true".into(),
            ]);
            r.refused(&["Permission denied"]);
            assert!(!r.stderr().contains("No such file"), "{r:?}");
            assert!(!r.stdout().contains("hello app"), "{r:?}");
        }
        fs::remove_file(&image).unwrap();
    });
}

#[test]
fn group_readable_image_mounts() {
    case(|fx| {
        let m = fx.mount_point("uenv-group");
        let dir = fx.path("uenv-group-dir");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let image = dir.join("group.squashfs");
        fs::copy(app(fx), &image).unwrap();
        std::os::unix::fs::chown(&image, Some(0), Some(fx.gid2)).unwrap();
        fs::set_permissions(&image, fs::Permissions::from_mode(0o640)).unwrap();
        let r = fx.run([
            format!("--sqfs={}", pair(&image, &m)),
            "--".into(),
            s(&m.join("env/app/bin/app")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "hello app\n");
        fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn mutable_root_mounts_on_a_mount_point_that_does_not_exist() {
    case(|fx| {
        let mnt = fresh_top_level("mutable-root-mount");
        let r = fx.run([
            "-r".into(),
            format!("--sqfs={}", pair(&app(fx), &mnt)),
            "--".into(),
            s(&mnt.join("env/app/bin/app")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "hello app\n");
        assert_absent_on_host(&mnt);
        // Without -r: refused, in uenv's words.
        let mnt = fresh_top_level("no-mutable-root-mount");
        fx.run([
            format!("--sqfs={}", pair(&app(fx), &mnt)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["does not exist"]);
        assert_absent_on_host(&mnt);
    });
}

#[test]
fn bind_mounts_as_uenv_has_them() {
    case(|fx| {
        let tmp = fx.user_dir();
        for d in [
            "bindsrc", "binddst", "bindsrc1", "bindsrc2", "binddst1", "binddst2",
        ] {
            fs::create_dir(tmp.join(d)).unwrap();
            fx.user.chown(&tmp.join(d));
        }
        fs::write(tmp.join("bindsrc/file.txt"), "bind-mount-content\n").unwrap();
        fs::write(tmp.join("bindsrc1/file.txt"), "first\n").unwrap();
        fs::write(tmp.join("bindsrc2/file.txt"), "second\n").unwrap();
        let t = |p: &str| s(&tmp.join(p));
        // To a destination that exists.
        let r = fx.run([
            format!("--bind-mount={}:{}", t("bindsrc"), t("binddst")),
            "--".into(),
            "cat".into(),
            t("binddst/file.txt"),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "bind-mount-content\n");
        // Without -r, a destination that does not exist is refused.
        let missing = fresh_top_level("no-mutable-root-bind");
        fx.run([
            format!("--bind-mount={}:{}", t("bindsrc"), s(&missing)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["does not exist"]);
        // With -r it is created in the command's view only.
        let bind = fresh_top_level("mutable-root-bind");
        let r = fx.run([
            "-r".into(),
            format!("--bind-mount={}:{}", t("bindsrc"), s(&bind)),
            "--".into(),
            "cat".into(),
            s(&bind.join("file.txt")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "bind-mount-content\n");
        assert_absent_on_host(&bind);
        // Repeated, and as a comma-separated list.
        let both = "cat $0/binddst1/file.txt && cat $0/binddst2/file.txt";
        for args in [
            vec![
                format!("--bind-mount={}:{}", t("bindsrc1"), t("binddst1")),
                format!("--bind-mount={}:{}", t("bindsrc2"), t("binddst2")),
            ],
            vec![format!(
                "--bind-mount={}:{},{}:{}",
                t("bindsrc1"),
                t("binddst1"),
                t("bindsrc2"),
                t("binddst2")
            )],
        ] {
            let mut a = args.clone();
            a.extend(["--".into(), "sh".into(), "-c".into(), both.into(), s(&tmp)]);
            let r = fx.run(a);
            r.ok();
            assert_eq!(r.stdout(), "first\nsecond\n", "{args:?}");
        }
    });
}

#[test]
fn mutable_root_sqfs_bind_and_a_command_with_its_own_flags() {
    case(|fx| {
        let tmp = fx.user_dir();
        fs::create_dir(tmp.join("bindsrc")).unwrap();
        fs::write(tmp.join("bindsrc/file.txt"), "bind-mount-content\n").unwrap();
        let (mnt, bind) = (
            fresh_top_level("combo-mount"),
            fresh_top_level("combo-bind"),
        );
        // --bind-mount never takes the "--" that starts the command, so
        // `sh -c` stays the command's.
        let r = fx.launch_sh(
            &[
                "-r".into(),
                format!("--sqfs={}", pair(&app(fx), &mnt)),
                "--bind-mount".into(),
                format!("{}:{}", s(&tmp.join("bindsrc")), s(&bind)),
            ],
            &format!("cat {}/file.txt && {}/env/app/bin/app", s(&bind), s(&mnt)),
        );
        r.ok();
        assert_eq!(r.stdout(), "bind-mount-content\nhello app\n");
        assert_absent_on_host(&mnt);
        assert_absent_on_host(&bind);
    });
}
