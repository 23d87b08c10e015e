//! What the command's view may and may not become (issue 22): `-r`
//! (`--mutable-root`) creates missing mount points in the view only,
//! `--bind-mount` shows the caller's directories elsewhere, and neither
//! changes the host, reveals what the caller cannot list, or lets the
//! command write what the caller could not. Also what `--verbose` says.
//! As an unprivileged test user against the installed setuid binary.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sqfsmnt_test_support::cmd::must;
use sqfsmnt_test_support::count::mounts_under;
use sqfsmnt_test_support::Fixture;
use sqfsmnt_test_support::{pair, s};

use crate::case;

fn image(fx: &Fixture) -> PathBuf {
    fx.image("views", &[("x.txt", "ex\n"), ("sub/.keep", "")], "")
}

/// A top-level name unique to this run, absent on the host.
fn fresh_top_level(what: &str) -> PathBuf {
    let p = PathBuf::from(format!("/sqfsmnt-{}-{what}", std::process::id()));
    assert!(fs::symlink_metadata(&p).is_err(), "{} exists", p.display());
    p
}

/// A directory of the user's own, with one file.
fn own_dir(fx: &Fixture, name: &str) -> PathBuf {
    let d = fx.user_dir().join(name);
    fs::create_dir_all(&d).unwrap();
    fs::write(d.join("file"), format!("{name}\n")).unwrap();
    fx.user.chown(&d);
    fx.user.chown(&d.join("file"));
    d
}

/// The mount options (field 6 of mountinfo) of the mount on `at`, as the
/// command sees it.
fn options_script(at: &Path) -> String {
    format!(
        "awk '$5 == \"{}\" {{ print $6 }}' /proc/self/mountinfo | tail -1",
        s(at)
    )
}

#[test]
fn mutable_root_leaves_the_host_alone_and_the_view_read_only() {
    case(|fx| {
        let (one, two) = (fresh_top_level("r-one"), fresh_top_level("r-two"));
        let img = image(fx);
        let r = fx.launch_sh(
            &[
                "-v".into(),
                "-r".into(),
                pair(&img, &one),
                pair(&img, &two.join("deeper")),
            ],
            &format!(
                "cat {0}/x.txt {1}/deeper/x.txt; touch /new 2>&1; mkdir {1}/more 2>&1; \
                 echo w > /tmp/sqfsmnt-views-$$ && rm /tmp/sqfsmnt-views-$$ && echo tmp-writable; \
                 cat /proc/self/comm; stat -c '%U %a' / {1}; pwd",
                s(&one),
                s(&two)
            ),
        );
        r.ok();
        let out = r.stdout();
        assert!(out.starts_with("ex\nex\n"), "{out}");
        // The view's root is read-only; the new directories are root's
        // 0755 on a read-only tmpfs: the command can add nothing there.
        assert!(
            out.contains("touch: cannot touch '/new': Read-only file system"),
            "{out}"
        );
        assert!(out.contains("mkdir: cannot create directory"), "{out}");
        // The entries keep what they were: /tmp is as writable as before.
        assert!(out.contains("tmp-writable"), "{out}");
        // The mounts below / are there (proc, a mount of its own).
        assert!(out.contains("cat\nroot 755\nroot 755\n"), "{out}");
        // The command starts where it was called.
        assert!(out.ends_with(&format!("{}\n", s(&fx.root))), "{out}");
        // One copy of / for both missing mount points.
        let err = r.stderr();
        assert_eq!(err.matches("-r: created").count(), 1, "{err}");
        assert!(
            err.contains(&format!("created {}, {}/deeper", s(&one), s(&two))),
            "{err}"
        );
        for p in [&one, &two] {
            assert!(
                fs::symlink_metadata(p).is_err(),
                "{} made on the host",
                s(p)
            );
        }
    });
}

#[test]
fn mutable_root_creates_nothing_where_something_exists() {
    case(|fx| {
        let img = image(fx);
        // A dangling symlink is something: never replaced.
        let dangling = fx.user_dir().join("dangling");
        symlink("/nonexistent-target", &dangling).unwrap();
        fx.run([
            "-r".into(),
            pair(&img, &dangling.join("m")),
            "--".into(),
            "true".into(),
        ])
        .refused(&["creates nothing where something exists", "symbolic link"]);
        // A file on the path is not a directory.
        let file = fx.user_dir().join("a-file");
        fs::write(&file, "").unwrap();
        fx.run([
            "-r".into(),
            pair(&img, &file.join("m")),
            "--".into(),
            "true".into(),
        ])
        .refused(&["a-file/m is not a directory"]);
        // '..' is never created; nor anything in /proc, /sys or /dev:
        // (mount point, what the refusal says).
        let m = fx.mount_point("views-dotdot");
        for (target, needle) in [
            (format!("{}/missing/../x", s(&m)), "without '..'"),
            ("/dev/sqfsmnt-new".to_string(), "/dev"),
            ("/proc/sqfsmnt-new".to_string(), "/proc"),
        ] {
            fx.run([
                "-r".into(),
                format!("{}:{target}", s(&img)),
                "--".into(),
                "true".into(),
            ])
            .refused(&[needle]);
        }
    });
}

#[test]
fn mutable_root_reveals_no_name_the_caller_cannot_list() {
    case(|fx| {
        let img = image(fx);
        // Searchable but not listable (0711), and neither (0700, root's).
        let hidden = fx.path("views-hidden");
        fs::create_dir_all(hidden.join("secret-name")).unwrap();
        for (mode, words) in [
            (0o711, &["which you cannot list", "(Permission denied)"][..]),
            (0o700, &["Permission denied"][..]),
        ] {
            fs::set_permissions(&hidden, fs::Permissions::from_mode(mode)).unwrap();
            let r = fx.run([
                "-r".into(),
                pair(&img, &hidden.join("new")),
                "--".into(),
                "ls".into(),
                s(&hidden),
            ]);
            r.refused(words);
            assert!(!r.stdout().contains("secret-name"), "{r:?}");
        }
        fs::remove_dir_all(&hidden).unwrap();
    });
}

#[test]
fn mutable_root_in_an_own_directory_and_inside_an_image() {
    case(|fx| {
        let img = image(fx);
        let home = own_dir(fx, "home");
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
        let m = fx.mount_point("views-in-image");
        // In the user's own 0700 directory: the copy keeps owner and mode,
        // and says that new files cannot be made directly in it. Inside
        // the image (read-only): a directory the image lacks.
        let r = fx.launch_sh(&["-v".into(), "-r".into(), pair(&img, &home.join("mnt")), pair(&img, &m), pair(&img, &m.join("not-in-image"))], &format!(
                "stat -c '%u %a' {0}; cat {0}/file {0}/mnt/x.txt; ls {1}; cat {1}/not-in-image/x.txt; echo $UENV_MOUNT_LIST",
                s(&home),
                s(&m)
            ));
        r.ok();
        assert_eq!(
            r.stdout(),
            format!(
                "{} 700\nhome\nex\nnot-in-image\nsub\nx.txt\nex\n{},{},{}\n",
                fx.uid,
                // In path order: <root>/mnt/... before <root>/user/...
                pair(&img, &m),
                pair(&img, &m.join("not-in-image")),
                pair(&img, &home.join("mnt"))
            )
        );
        let err = r.stderr();
        assert!(
            err.contains(&format!(
                "warning: -r: to create {}/mnt in the command's view, your directory {} is shown read-only",
                s(&home),
                s(&home)
            )) && err.contains("the command cannot create files directly in"),
            "{err}"
        );
        assert!(fs::symlink_metadata(home.join("mnt")).is_err());
        assert!(fs::symlink_metadata(m.join("not-in-image")).is_err());
    });
}

#[test]
fn bind_mounts_are_nosuid_nodev_and_writable_only_where_the_source_is() {
    case(|fx| {
        let src = own_dir(fx, "bsrc");
        let dst = fx.mount_point("views-bdst");
        // A root-owned directory: the user cannot write it through the bind.
        let root_dir = fx.path("views-root-dir");
        fs::create_dir_all(&root_dir).unwrap();
        let dst2 = fx.mount_point("views-bdst2");
        // A read-only mount on the host stays read-only.
        let ro = fx.user_dir().join("ro");
        fs::create_dir_all(&ro).unwrap();
        must(&format!(
            "mount -t tmpfs -o size=1m,mode=0777 sqfsmnt-ro {0} && echo ro > {0}/file && mount -o remount,ro {0}",
            s(&ro)
        ));
        let dst3 = fx.mount_point("views-bdst3");
        let r = fx.run([
            format!(
                "--bind-mount={}:{},{}:{}",
                s(&src),
                s(&dst),
                s(&root_dir),
                s(&dst2)
            ),
            "--bind-mount".into(),
            format!("{}:{}", s(&ro), s(&dst3)),
            "--".into(),
            "sh".into(),
            "-c".into(),
            format!(
                "{}; echo new > {1}/new && echo own-writable; touch {2}/x 2>&1; touch {3}/x 2>&1; cat {3}/file; echo \"[$UENV_MOUNT_LIST]\"",
                options_script(&dst),
                s(&dst),
                s(&dst2),
                s(&dst3)
            ),
        ]);
        must(&format!("umount {}", s(&ro)));
        r.ok();
        let out = r.stdout();
        let opts = out.lines().next().unwrap_or_default();
        assert!(opts.contains("nosuid") && opts.contains("nodev"), "{out}");
        assert!(out.contains("own-writable"), "{out}");
        assert!(
            out.contains(&format!(
                "touch: cannot touch '{}/x': Permission denied",
                s(&dst2)
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "touch: cannot touch '{}/x': Read-only file system",
                s(&dst3)
            )),
            "{out}"
        );
        assert!(out.contains("ro\n"), "{out}");
        // Binds are not images: UENV_MOUNT_LIST lists none.
        assert!(out.ends_with("[]\n"), "{out}");
        let st = fs::metadata(src.join("new")).unwrap();
        assert_eq!((st.uid(), st.gid()), (fx.uid, fx.gid));
    });
}

#[test]
fn binds_and_images_nest_both_ways_and_nothing_propagates_to_the_host() {
    case(|fx| {
        let img = image(fx);
        let src = own_dir(fx, "nest");
        fs::create_dir_all(src.join("inner")).unwrap();
        fx.user.chown(&src.join("inner"));
        let m = fx.mount_point("views-nest");
        let other = own_dir(fx, "other");
        // The source is a shared mount on the host (as / is on systemd
        // machines): a copy in its peer group would send back whatever is
        // mounted on it.
        must(&format!(
            "mount --bind {0} {0} && mount --make-shared {0}",
            s(&src)
        ));
        // An image mounted inside a bind, and a bind inside an image.
        let r = fx.run([
            format!(
                "--bind-mount={}:{},{}:{}/sub",
                s(&src),
                s(&m),
                s(&other),
                s(&m.join("inner"))
            ),
            pair(&img, &m.join("inner")),
            "--".into(),
            "sh".into(),
            "-c".into(),
            format!("cat {0}/file {0}/inner/x.txt {0}/inner/sub/file", s(&m)),
        ]);
        // The image was mounted on the bind's copy of src/inner: a mount
        // that had propagated to the host would still be there.
        let leaked = mounts_under(&src.join("inner"));
        must(&format!("umount -R {}", s(&src)));
        r.ok();
        assert_eq!(r.stdout(), "nest\nex\nother\n");
        assert!(leaked.is_empty(), "propagated to the host: {leaked:?}");
        // A bind below a missing destination, with -r.
        let top = fresh_top_level("bind-r");
        let r = fx.run([
            "-r".into(),
            format!("--bind-mount={}:{}/a/b", s(&src), s(&top)),
            "--".into(),
            "cat".into(),
            s(&top.join("a/b/file")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "nest\n");
        assert!(fs::symlink_metadata(&top).is_err());
    });
}

#[test]
fn bind_refusals() {
    case(|fx| {
        let src = own_dir(fx, "bref");
        for (dst, why) in [
            ("/", "root directory"),
            ("/proc", "/proc"),
            ("/sys/kernel", "/sys"),
            ("/dev", "/dev"),
        ] {
            fx.run([
                format!("--bind-mount={}:{dst}", s(&src)),
                "--".into(),
                "true".into(),
            ])
            .refused(&[why]);
        }
        let m = fx.mount_point("views-bref");
        fx.run([
            format!("--bind-mount=/proc/self:{}", s(&m)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["kernel API filesystem"]);
        fx.run([
            format!("--bind-mount={}:{}", s(&src.join("file")), s(&m)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["is not a directory"]);
        // The destination must be a directory.
        fx.run([
            format!("--bind-mount={}:{}", s(&src), s(&src.join("file"))),
            "--".into(),
            "true".into(),
        ])
        .refused(&["the bind destination", "is not a directory"]);
    });
}

/// `squashfs-mount OPTIONS img:m -- true`, which must succeed: its stderr,
/// checked to hold every one of `needles`.
fn verbose_says(fx: &Fixture, options: &[&str], img: &Path, m: &Path, needles: &[&str]) -> String {
    let mut a: Vec<String> = options.iter().map(|x| x.to_string()).collect();
    a.extend([pair(img, m), "--".into(), "true".into()]);
    let r = fx.run(a);
    let err = r.ok().stderr();
    for n in needles {
        assert!(err.contains(n), "{options:?}: no {n:?} in {r:?}");
    }
    err
}

#[test]
fn verbose_says_which_path_and_which_instance() {
    case(|fx| {
        let img = image(fx);
        let m = fx.mount_point("views-verbose");
        // Quiet without -v.
        assert_eq!(verbose_says(fx, &[], &img, &m, &[]), "");
        fx.run(["--gc"]).ok();
        let kernel = format!("{}: kernel (trusted", s(&img));
        // In order (each launch finds the cache as the one before left
        // it): (options, what -v says).
        for (options, needles) in [
            (
                &["-v"][..],
                &[kernel.as_str(), "new instance, kept in the image cache"][..],
            ),
            (&["--verbose"], &["cached instance reused"]),
            (
                &["-v", "--no-cache"],
                &["new private instance, not cached: --no-cache"],
            ),
        ] {
            verbose_says(fx, options, &img, &m, needles);
        }
        {
            let _conf = sqfsmnt_test_support::site::config("cache = no\n");
            verbose_says(
                fx,
                &["-v"],
                &img,
                &m,
                &["not cached: the image cache is off for this launch (cache = no)"],
            );
        }
        // -vv: where the mount point resolved; -vvv: the time of each step.
        let resolved = format!("mount path resolved to {}", s(&m));
        let vv = verbose_says(fx, &["-vv"], &img, &m, &[&resolved]);
        assert!(!vv.contains(" us: "), "{vv}");
        verbose_says(fx, &["-vvv"], &img, &m, &[" us: plan"]);
        // The user's own image: FUSE, and why; never cached.
        let own = fx.user_image("views-own", &[("y", "y\n")]);
        for (options, needles) in [
            (
                &["-v"][..],
                &[
                    "FUSE (not trusted: the file is owned by uid",
                    "not a trusted owner",
                    "its instance kept in the image cache for your next launches",
                ][..],
            ),
            (&["-v"], &["your cached FUSE instance reused"]),
            (
                &["-v", "--no-cache"],
                &["a FUSE server of yours started for this launch only, not cached: --no-cache"],
            ),
        ] {
            verbose_says(fx, options, &own, &m, needles);
        }
        fx.run(["--gc"]).ok();
        // An image whose path is not open to everyone is not shared.
        let dir = fx.path("views-group-only");
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(0), Some(fx.gid2)).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
        let hidden = dir.join("img.sqfs");
        fs::copy(&img, &hidden).unwrap();
        let r = fx.run(["-v".into(), pair(&hidden, &m), "--".into(), "true".into()]);
        r.ok();
        assert!(
            r.stderr()
                .contains("not cached: its path is not open to everyone"),
            "{r:?}"
        );
        fs::remove_dir_all(&dir).unwrap();
    });
}
