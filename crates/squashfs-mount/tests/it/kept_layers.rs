//! `--writable=DIR` (issue 23): a writable layer kept in the caller's
//! directory, mounted by the caller in a user namespace. As the
//! unprivileged test user against the installed setuid binary (and, for
//! rootless mode, a copy without the setuid bit). Needs root (skips
//! loudly).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sqfsmnt_test_support::cmd::{run, try_run, wait_until, Run};
use sqfsmnt_test_support::python::{self, DEMO_MODULE, DEMO_VALUE};
use sqfsmnt_test_support::tree::not_owned_by;
use sqfsmnt_test_support::{pair, s, site, Fixture};

use crate::case;

/// `squashfs-mount <args>` as the case's user with pip quiet and offline.
fn launch(fx: &Fixture, bin: &Path, args: &[String]) -> Run {
    run(fx
        .user
        .command(bin)
        .args(args)
        .current_dir(&fx.root)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_CACHE_DIR", "1")
        .env("PIP_NO_INPUT", "1")
        .stdin(Stdio::null()))
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// A venv (with pip) in an image whose files are the case's user's, in the
/// prefix's images/ (root's: the kernel path) and a copy in the user's
/// directory (the FUSE path).
fn venv_images(fx: &Fixture) -> (PathBuf, PathBuf) {
    let kernel = fx.path(&format!("images/venv-{}.sqfs", fx.uid));
    python::venv_image(
        &fx.path(&format!("trees/venv-{}", fx.uid)),
        &kernel,
        fx.uid,
        fx.gid,
    );
    let own = fx.user_dir().join("venv.sqfs");
    fs::copy(&kernel, &own).unwrap();
    fx.user.chown(&own);
    (kernel, own)
}

/// The path (`kernel` or `FUSE`) squashfs-mount -v says an image took.
fn path_taken(r: &Run, image: &Path) -> &'static str {
    let err = r.stderr();
    let line = err
        .lines()
        .find(|l| l.contains(&format!("{}: ", s(image))))
        .unwrap_or_else(|| panic!("no -v line for {}: {err}", s(image)));
    if line.contains(": kernel (") {
        "kernel"
    } else {
        "FUSE"
    }
}

#[test]
fn pip_install_into_a_venv_is_kept_and_the_layer_is_the_callers() {
    if python::skipped_without_venv("kept layers") {
        return;
    }
    case(|fx| {
        let (kernel, own) = venv_images(fx);
        let wheel = python::demo_wheel(&fx.user_dir());
        let m = fx.mount_point("venv");
        for (image, way) in [(&kernel, "kernel"), (&own, "FUSE")] {
            let dir = fx.user_dir().join(format!("layer-{way}"));
            let r = launch(
                fx,
                &fx.bin,
                &[
                    vec![
                        "-v".into(),
                        format!("--writable={}", s(&dir)),
                        pair(image, &m),
                        "--".into(),
                    ],
                    python::pip_install(&m.join("venv/bin/python"), &wheel),
                ]
                .concat(),
            );
            r.ok();
            assert_eq!(path_taken(&r, image), way, "{}", r.stderr());
            // The next launch imports it; the image is unchanged.
            let import = format!(
                "import {DEMO_MODULE} as d; print(d.VALUE, d.__file__.startswith('{}'))",
                s(&m)
            );
            let r = launch(
                fx,
                &fx.bin,
                &[
                    format!("--writable={}", s(&dir)),
                    pair(image, &m),
                    "--".into(),
                    s(&m.join("venv/bin/python")),
                    "-c".into(),
                    import.clone(),
                ],
            );
            r.ok();
            assert_eq!(r.stdout(), format!("{DEMO_VALUE} True\n"), "{way}");
            assert!(r.stderr().is_empty(), "{way}: {}", r.stderr());
            let r = launch(
                fx,
                &fx.bin,
                &[
                    pair(image, &m),
                    "--".into(),
                    s(&m.join("venv/bin/python")),
                    "-c".into(),
                    import,
                ],
            );
            assert!(r.stderr().contains("No module named"), "{way}: {r:?}");
            // Everything in DIR is the caller's, the package among it.
            assert_eq!(not_owned_by(&dir, fx.uid), "", "{way}");
            let installed = dir.join(format!(
                "0/upper/venv/lib/python3.11/site-packages/{DEMO_MODULE}/__init__.py"
            ));
            let st = fs::metadata(&installed)
                .unwrap_or_else(|e| panic!("{way}: {}: {e}", installed.display()));
            assert_eq!((st.uid(), st.gid()), (fx.uid, fx.gid), "{way}");
            assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700, "{way}");
        }
    });
}

/// A tree of the user's with a setuid-root copy of id(1) and a file to
/// delete.
fn user_tree_image(fx: &Fixture, name: &str) -> PathBuf {
    let tree_name = format!("{name}-{}", fx.uid);
    let image = fx.image(
        &tree_name,
        &[("data/keep", "keep\n"), ("data/gone", "gone\n"), ("dir/old", "old\n")],
        &format!(
            "chown -R {u}:{g} . && cp /usr/bin/id suid-id && chown 0:0 suid-id && chmod 4755 suid-id",
            u = fx.uid,
            g = fx.gid
        ),
    );
    // The image has the set-user-ID file; its source tree, which others
    // can reach, keeps none.
    let source = fx.path(&format!("trees/{tree_name}/suid-id"));
    let _ = fs::set_permissions(&source, fs::Permissions::from_mode(0o755));
    image
}

#[test]
fn setuid_files_stay_without_effect_and_whiteouts_persist() {
    case(|fx| {
        let kernel = user_tree_image(fx, "suid");
        let own = fx.user_dir().join("suid.sqfs");
        fs::copy(&kernel, &own).unwrap();
        fx.user.chown(&own);
        let m = fx.mount_point("suid");
        for (image, way) in [(&kernel, "kernel"), (&own, "FUSE")] {
            let dir = fx.user_dir().join(format!("layer-{way}"));
            let w = format!("--writable={}", s(&dir));
            // The setuid-root file runs as the caller; root's 0755 file
            // cannot be written or chmodded, on either path (as without a
            // layer). Deleting a file and replacing a directory.
            let script = format!(
                "cd {m}; ./suid-id -u; cat /usr/bin/id > suid-id 2>/dev/null && echo written; ./suid-id -u; \
                 chmod 4755 suid-id 2>/dev/null; ./suid-id -u; \
                 rm data/gone && rm -r dir && mkdir dir && echo new > dir/new && echo changed",
                m = s(&m)
            );
            let r = launch(
                fx,
                &fx.bin,
                &[
                    w.clone(),
                    pair(image, &m),
                    "--".into(),
                    "sh".into(),
                    "-c".into(),
                    script,
                ],
            );
            r.ok();
            let uid = fx.uid.to_string();
            let out = r.stdout();
            let ids: Vec<&str> = out
                .lines()
                .filter(|l| l.chars().all(|c| c.is_ascii_digit()))
                .collect();
            assert_eq!(ids, [uid.as_str(); 3], "{way}: {out}");
            assert!(!out.contains("written"), "{way}: {out}");
            assert!(out.ends_with("changed\n"), "{way}: {out}");
            // No setuid-root file, no root-owned file in DIR; the copied
            // file run from the host gives nothing either.
            assert_eq!(not_owned_by(&dir, fx.uid), "", "{way}");
            let copied = dir.join("0/upper/suid-id");
            if let Ok(st) = fs::metadata(&copied) {
                assert_eq!(st.uid(), fx.uid, "{way}");
                let r = run(fx.user.command(&copied).arg("-u"));
                assert_eq!(r.stdout().trim(), uid, "{way}");
            }
            // Whiteouts and the replaced directory, kept.
            let r = launch(
                fx,
                &fx.bin,
                &[
                    w,
                    pair(image, &m),
                    "--".into(),
                    "sh".into(),
                    "-c".into(),
                    format!("cd {}; ls data dir | tr '\\n' ' '; ./suid-id -u", s(&m)),
                ],
            );
            r.ok();
            assert_eq!(r.stdout(), format!("data: keep  dir: new {uid}\n"), "{way}");
        }
    });
}

/// Root's image `u<n>` of a union, with a root directory open to all
/// (0777): the layer lets the caller write there, as --writable would.
fn union_image(fx: &Fixture, n: u32) -> PathBuf {
    fx.image(
        &format!("u{n}"),
        &[
            (&format!("only{n}"), &format!("{n}\n")),
            ("which", &format!("top{n}\n")),
            (&format!("common/c{n}"), ""),
        ],
        "chmod 0777 .",
    )
}

#[test]
fn a_union_of_three_images_and_the_stamp() {
    case(|fx| {
        let (a, b, c) = (union_image(fx, 1), union_image(fx, 2), union_image(fx, 3));
        let m = fx.mount_point("u3");
        let dir = fx.user_dir().join("layer");
        let union = format!("--union={},{},{}:{}", s(&a), s(&b), s(&c), s(&m));
        let w = format!("--writable={}", s(&dir));
        let sh = |mounts: &[String], script: String| {
            let mut a = vec![w.clone()];
            a.extend_from_slice(mounts);
            a.extend(["--".into(), "sh".into(), "-c".into(), script]);
            let r = launch(fx, &fx.bin, &a);
            r.ok().stdout()
        };
        // New files at the top; a file of the middle image deleted.
        let out = sh(std::slice::from_ref(&union), format!("cd {}; cat which; ls common | tr '\\n' ' '; rm only2 && echo mine > mine; ls | tr '\\n' ' '", s(&m)));
        assert_eq!(out, "top1\nc1 c2 c3 common mine only1 only3 which ");
        let out = sh(
            std::slice::from_ref(&union),
            format!("ls {} | tr '\\n' ' '", s(&m)),
        );
        assert_eq!(out, "common mine only1 only3 which ");
        // The stamp names the three images, top first.
        let stamp = fs::read_to_string(dir.join("stamp")).unwrap();
        let images: Vec<&str> = stamp
            .lines()
            .filter(|l| l.starts_with("image "))
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect();
        assert_eq!(images, [s(&a), s(&b), s(&c)], "{stamp}");
        // Another order, another image: refused, naming them.
        let swapped = format!("--union={},{},{}:{}", s(&b), s(&a), s(&c), s(&m));
        for (mount, needles) in [
            (
                swapped,
                &["does not belong to the images on", "not on", "delete"][..],
            ),
            (pair(&a, &m), &["does not belong to the images on"]),
        ] {
            launch(fx, &fx.bin, &[w.clone(), mount, "--".into(), "true".into()]).refused(needles);
        }
        // A second mount point side by side gets a sub-layer of its own.
        let m2 = fx.mount_point("u3-side");
        let out = sh(
            &[union.clone(), pair(&c, &m2)],
            format!(
                "touch {0}/side; ls {1} | wc -l; ls {0} | wc -l",
                s(&m2),
                s(&m)
            ),
        );
        assert_eq!(out, "5\n4\n");
        assert!(dir.join("1/upper/side").exists());
        // A rebuilt image (same path, other bytes) is told apart.
        let rebuilt = fx.path("images/u3.sqfs");
        sqfsmnt_test_support::image::build(
            &fx.path("trees/u3-rebuilt"),
            &rebuilt,
            &[("other", "x\n")],
            "",
            &["-comp", "zstd"],
        );
        launch(fx, &fx.bin, &[w, union, "--".into(), "true".into()])
            .refused(&["u3.sqfs changed (rebuilt or replaced)"]);
        let _ = fs::remove_file(&rebuilt);
    });
}

#[test]
fn a_second_launch_on_the_same_dir_is_refused() {
    case(|fx| {
        let img = fx.image("conc", &[("f", "f\n")], "");
        let (m, m2) = (fx.mount_point("conc"), fx.mount_point("conc2"));
        let dir = fx.user_dir().join("layer");
        let w = format!("--writable={}", s(&dir));
        let started = fx.user_dir().join("started");
        let mut first = fx
            .user_cmd([
                w.clone(),
                pair(&img, &m),
                "--".into(),
                "sh".into(),
                "-c".into(),
                format!("touch {}; exec sleep 30", s(&started)),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until(sqfsmnt_test_support::ends::HANG, "the first launch", || {
            started.exists()
        });
        launch(
            fx,
            &fx.bin,
            &[w.clone(), pair(&img, &m2), "--".into(), "true".into()],
        )
        .refused(&["is in use by another launch", "(process "]);
        // SAFETY: kill(2) of the child we spawned (a process group of its
        // own is not needed: setpriv execs the tool, which execs sh).
        unsafe { libc::kill(first.id() as i32, libc::SIGKILL) };
        let _ = first.wait();
        // The lock went with it (and whatever of the command held it).
        wait_until(
            sqfsmnt_test_support::ends::HANG,
            "the lock to be free",
            || {
                launch(
                    fx,
                    &fx.bin,
                    &[w.clone(), pair(&img, &m), "--".into(), "true".into()],
                )
                .success()
            },
        );
    });
}

#[test]
fn dirs_the_caller_cannot_own_or_use_are_refused() {
    case(|fx| {
        let (img, m) = fx.image_at("refuse", &[("f", "f\n")]);
        let try_dir = |dir: &Path| {
            launch(
                fx,
                &fx.bin,
                &[
                    format!("--writable={}", s(dir)),
                    pair(&img, &m),
                    "--".into(),
                    "echo".into(),
                    "RAN".into(),
                ],
            )
        };
        let (refused, magic_new, magic_old, full) = layer_dirs_refused(fx, &m);
        for (dir, needles) in &refused {
            try_dir(dir).refused(needles);
        }
        // Without an image; with a size too.
        launch(fx, &fx.bin, &args(&["--writable=/tmp/x", "--", "true"]))
            .refused(&["give at least one image"]);
        launch(
            fx,
            &fx.bin,
            &[
                format!("--writable={}", s(&fx.user_dir().join("l"))),
                "--writable=1G".into(),
                pair(&img, &m),
                "--".into(),
                "true".into(),
            ],
        )
        .refused(&["not both"]);
        // Nothing was made in the places refused.
        assert!(!fx.path("mnt/new-layer").exists());
        assert!(!magic_new.exists());
        assert_eq!(fs::read_dir(&magic_old).unwrap().count(), 0);
        assert_eq!(fs::read_dir(&full).unwrap().count(), 1);
    });
}

/// A directory `--writable` refuses, and what the refusal says.
type Refusal = (PathBuf, &'static [&'static str]);

/// The directories `--writable` refuses (another user's, one the caller
/// cannot write, writable by the group, not a layer, not a directory,
/// inside the mount point `m`, reached through /proc's magic links, which
/// lead into what the launch holds open: for a new DIR and an existing
/// one), each with what the refusal says; and the new and the existing
/// magic one and the full one (nothing may be made in them).
#[allow(clippy::type_complexity)]
fn layer_dirs_refused(
    fx: &Fixture,
    m: &Path,
) -> (
    Vec<(PathBuf, &'static [&'static str])>,
    PathBuf,
    PathBuf,
    PathBuf,
) {
    let roots = fx.path("mnt/roots-layer");
    fs::create_dir_all(&roots).unwrap();
    let nobodys = fx.user_dir().join("nobodys");
    fs::create_dir_all(&nobodys).unwrap();
    std::os::unix::fs::chown(&nobodys, Some(65534), Some(65534)).unwrap();
    let group = fx.user_dir().join("group-writable");
    fs::create_dir_all(&group).unwrap();
    fx.user.chown(&group);
    fs::set_permissions(&group, fs::Permissions::from_mode(0o770)).unwrap();
    let full = fx.user_dir().join("full");
    fs::create_dir_all(&full).unwrap();
    fs::write(full.join("precious"), "x").unwrap();
    fx.user.chown(&full);
    fx.user.chown(&full.join("precious"));
    let file = fx.user_dir().join("a-file");
    fs::write(&file, "x").unwrap();
    fx.user.chown(&file);
    let via_proc = |dir: &Path| PathBuf::from(format!("/proc/self/root{}", s(dir)));
    let magic_new = fx.user_dir().join("magic-new");
    let magic_old = fx.user_dir().join("magic-old");
    fs::create_dir_all(&magic_old).unwrap();
    fx.user.chown(&magic_old);
    fs::set_permissions(&magic_old, fs::Permissions::from_mode(0o700)).unwrap();
    let refused: Vec<Refusal> = vec![
        (roots, &["roots-layer belongs to uid 0 (root), not to you"]),
        (nobodys, &["belongs to uid 65534"]),
        (
            fx.path("mnt/new-layer"),
            &["cannot create the writable layer", "Permission denied"],
        ),
        (group, &["writable by its group or others (mode 0770)"]),
        (
            full.clone(),
            &[
                "is not a writable layer made by squashfs-mount",
                "precious",
                "no stamp",
            ],
        ),
        (file, &["a-file"]),
        (m.join("layer"), &["are inside one another"]),
        (
            via_proc(&magic_new),
            &[
                "cannot create the writable layer /proc/self/root",
                "a path through /proc/self/fd or /dev/fd",
            ],
        ),
        (
            via_proc(&magic_old),
            &[
                "cannot open the writable layer /proc/self/root",
                "a path through /proc/self/fd or /dev/fd",
            ],
        ),
    ];
    (refused, magic_new, magic_old, full)
}

/// Mounts (as root) a file system of `kind` on `at` with a directory of
/// the user's in it; unmounted when dropped.
struct HostMount(PathBuf);

impl HostMount {
    fn overlay(fx: &Fixture, at: &Path) -> HostMount {
        let base = fx.path("ovl");
        for d in ["lower", "upper", "work"] {
            fs::create_dir_all(base.join(d)).unwrap();
        }
        fs::create_dir_all(at).unwrap();
        let st = run(Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "lowerdir={},upperdir={},workdir={}",
                s(&base.join("lower")),
                s(&base.join("upper")),
                s(&base.join("work"))
            ))
            .arg(at));
        st.ok_as("mount overlay");
        HostMount(at.to_path_buf())
    }

    fn fuse(fx: &Fixture, at: &Path) -> Option<HostMount> {
        if !sqfsmnt_test_support::have("squashfuse") {
            return None;
        }
        let img = fx.image(
            &format!("fusehost-{}", fx.uid),
            &[("mine/.keep", "")],
            &format!("chown {}:{} mine && chmod 700 mine", fx.uid, fx.gid),
        );
        fs::create_dir_all(at).unwrap();
        run(Command::new("squashfuse")
            .args(["-o", "allow_other"])
            .arg(&img)
            .arg(at))
        .ok_as("squashfuse");
        Some(HostMount(at.to_path_buf()))
    }
}

impl Drop for HostMount {
    fn drop(&mut self) {
        let _ = try_run(Command::new("umount").arg("-l").arg(&self.0));
    }
}

#[test]
fn unsupported_file_systems_are_refused_before_anything_is_mounted() {
    case(|fx| {
        // Its root directory open to all: the layer may hold a new file.
        let img = fx.image("fsref", &[("f", "f\n")], "chmod 0777 .");
        let m = fx.mount_point("fsref");
        let cached = || {
            let r = run(Command::new(&fx.bin).args(["--cache-status"]));
            r.stdout().contains(&s(&img))
        };
        let ovl = HostMount::overlay(fx, &fx.path("mnt/host-ovl"));
        let mine = ovl.0.join("mine");
        fs::create_dir_all(&mine).unwrap();
        fx.user.chown(&mine);
        fs::set_permissions(&mine, fs::Permissions::from_mode(0o700)).unwrap();
        for dir in [mine.join("layer"), mine.clone()] {
            launch(
                fx,
                &fx.bin,
                &[
                    format!("--writable={}", s(&dir)),
                    pair(&img, &m),
                    "--".into(),
                    "true".into(),
                ],
            )
            .refused(&["is on overlay", "node-local"]);
        }
        assert!(!cached(), "the image was mounted before the refusal");
        drop(ovl);
        match HostMount::fuse(fx, &fx.path("mnt/host-fuse")) {
            Some(fuse) => {
                launch(
                    fx,
                    &fx.bin,
                    &[
                        format!("--writable={}", s(&fuse.0.join("mine"))),
                        pair(&img, &m),
                        "--".into(),
                        "true".into(),
                    ],
                )
                .refused(&["is on FUSE", "node-local"]);
            }
            None => eprintln!("*** SKIPPED the FUSE half: squashfuse not installed ***"),
        }
        assert!(!cached());
        // tmpfs is accepted.
        let shm = PathBuf::from(format!("/dev/shm/sqfsmnt-layer-{}", std::process::id()));
        let r = launch(
            fx,
            &fx.bin,
            &[
                format!("--writable={}", s(&shm)),
                pair(&img, &m),
                "--".into(),
                "sh".into(),
                "-c".into(),
                format!("echo x > {}/x && echo ok", s(&m)),
            ],
        );
        let _ = fs::remove_dir_all(&shm);
        r.ok();
        assert_eq!(r.stdout(), "ok\n");
    });
}

#[test]
fn nested_mount_points_are_refused_and_side_by_side_work() {
    case(|fx| {
        // Its root directory open to all: the layer may hold a new file.
        let a = fx.image("nest-a", &[("sub/.keep", ""), ("a", "a\n")], "chmod 0777 .");
        let b = fx.image("nest-b", &[("b", "b\n")], "");
        let m = fx.mount_point("nest");
        let dir = fx.user_dir().join("layer");
        let w = format!("--writable={}", s(&dir));
        launch(
            fx,
            &fx.bin,
            &[
                w.clone(),
                pair(&a, &m),
                pair(&b, &m.join("sub")),
                "--".into(),
                "true".into(),
            ],
        )
        .refused(&[
            "nothing can be mounted inside an image's mount point",
            "sub is inside",
            "side by side",
        ]);
        let src = fx.user_dir().join("bindsrc");
        fs::create_dir_all(&src).unwrap();
        fx.user.chown(&src);
        launch(
            fx,
            &fx.bin,
            &[
                w.clone(),
                pair(&a, &m),
                format!("--bind-mount={}:{}/sub", s(&src), s(&m)),
                "--".into(),
                "true".into(),
            ],
        )
        .refused(&["the bind mount on"]);
        launch(
            fx,
            &fx.bin,
            &[
                w.clone(),
                "-r".into(),
                pair(&a, &m),
                pair(&b, &m.join("missing")),
                "--".into(),
                "true".into(),
            ],
        )
        .refused(&["-r made"]);
        // An image inside a bind mount (not inside an image) is fine, with
        // -r making its mount point in the bind's view.
        let top = PathBuf::from(format!("/sqfsmnt-{}-kept", std::process::id()));
        let r = launch(
            fx,
            &fx.bin,
            &[
                w,
                "-r".into(),
                pair(&a, &top),
                pair(&b, &fx.mount_point("nest-side")),
                "--".into(),
                "sh".into(),
                "-c".into(),
                format!("echo x > {}/x && cat {}/a", s(&top), s(&top)),
            ],
        );
        r.ok();
        assert_eq!(r.stdout(), "a\n");
        assert!(!top.exists());
    });
}

#[test]
fn the_command_gets_the_callers_fds_and_the_lock_only() {
    case(|fx| {
        let (img, m) = fx.image_at("fds", &[("f", "f\n")]);
        let dir = fx.user_dir().join("layer");
        let script = format!(
            "exec 5</etc/hostname; ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; \
             \"$SQM\" --writable={d} {p} -- sh -c 'ls /proc/self/fd | sort -n | tr \"\\n\" \" \"; echo; \
             for f in /proc/self/fd/*; do echo \"${{f##*/}} $(readlink $f)\"; done'",
            d = s(&dir),
            p = pair(&img, &m)
        );
        let r = fx.user_sh(&script);
        r.ok();
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        let before: Vec<u32> = lines[0]
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        let after: Vec<u32> = lines[1]
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        // The caller's fds (5 among them) pass through; one is added: DIR's
        // lock, at 64 or above. Nothing of the tool's (mounts, namespaces,
        // loop devices, /dev/fuse) reaches the command.
        let extra: Vec<&u32> = after.iter().filter(|n| !before.contains(n)).collect();
        assert!(before.iter().all(|n| after.contains(n)), "{out}");
        assert!(before.contains(&5), "{out}");
        assert_eq!(extra.len(), 1, "{out}");
        assert!(*extra[0] >= 64, "{out}");
        let link = format!("{} {}/lock", extra[0], s(&dir));
        assert!(lines[2..].contains(&link.as_str()), "{out}");
        // The command runs as the caller with no capability, in a user
        // namespace that maps only the caller.
        let r = launch(fx, &fx.bin, &[format!("--writable={}", s(&dir)), pair(&img, &m), "--".into(), "sh".into(), "-c".into(),
            "id -u; grep -E '^Cap(Eff|Prm)' /proc/self/status; cat /proc/self/uid_map /proc/self/setgroups".into()]);
        r.ok();
        let want = format!(
            "{u}\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n{:>10} {:>10} {:>10}\ndeny\n",
            fx.uid,
            fx.uid,
            1,
            u = fx.uid
        );
        assert_eq!(r.stdout(), want);
    });
}

#[test]
fn rootless_mode_keeps_a_layer_on_root_owned_images() {
    if python::skipped_without_venv("kept layers") {
        return;
    }
    case(|fx| {
        let _conf = site::no_config();
        let _fuse = site::FuseForUsers::enable();
        let bin = fx.rootless_copy();
        // Root's venv: every file shows as the caller's in rootless mode,
        // so pip can write into it through the layer.
        let image = fx.path("images/venv-root.sqfs");
        python::venv_image(&fx.path("trees/venv-root"), &image, 0, 0);
        let wheel = python::demo_wheel(&fx.user_dir());
        let m = fx.mount_point("rootless-venv");
        let dir = fx.user_dir().join("layer");
        let w = format!("--writable={}", s(&dir));
        launch(
            fx,
            &bin,
            &[
                vec!["-q".into(), w.clone(), pair(&image, &m), "--".into()],
                python::pip_install(&m.join("venv/bin/python"), &wheel),
            ]
            .concat(),
        )
        .ok();
        let r = launch(
            fx,
            &bin,
            &[
                "-q".into(),
                w,
                pair(&image, &m),
                "--".into(),
                s(&m.join("venv/bin/python")),
                "-c".into(),
                format!("import {DEMO_MODULE}; print({DEMO_MODULE}.VALUE)"),
            ],
        );
        r.ok();
        assert_eq!(r.stdout(), format!("{DEMO_VALUE}\n"));
        assert_eq!(not_owned_by(&dir, fx.uid), "");
    });
}

#[test]
fn sqfs_folds_a_layer_into_an_image_to_stack_on_top() {
    let sqfs = Path::new(env!("CARGO_BIN_EXE_squashfs-mount")).with_file_name("sqfs");
    if !sqfs.exists() {
        sqfsmnt_test_support::loud_skip(
            "kept layers: sqfs is not built (cargo build --release --workspace)",
        );
        return;
    }
    case(|fx| {
        let built = user_tree_image(fx, "fold");
        let own = fx.user_dir().join("fold.sqfs");
        fs::copy(&built, &own).unwrap();
        fx.user.chown(&own);
        let m = fx.mount_point("fold");
        let dir = fx.user_dir().join("layer");
        let w = format!("--writable={}", s(&dir));
        // A deleted file, a directory deleted and made again (opaque), new
        // directories, a changed file.
        let sh = |mounts: Vec<String>, script: String| {
            let mut a = mounts;
            a.extend(["--".into(), "sh".into(), "-c".into(), script]);
            let r = launch(fx, &fx.bin, &a);
            r.ok().stdout()
        };
        sh(vec![w.clone(), pair(&own, &m)], format!("cd {}; rm data/gone; rm -r dir; mkdir dir; echo new > dir/new; mkdir -p add/x; echo f > add/x/f; echo kept > data/keep", s(&m)));
        let listing = format!("cd {}; find . | sort; cat data/keep dir/new add/x/f", s(&m));
        let merged = sh(vec![w.clone(), pair(&own, &m)], listing.clone());
        assert!(
            !merged.contains("./dir/old") && !merged.contains("./data/gone"),
            "{merged}"
        );
        // Packed twice: the same bytes; stacked on its image: the same tree.
        let (a, b) = (
            fx.user_dir().join("layer-a.sqfs"),
            fx.user_dir().join("layer-b.sqfs"),
        );
        let pack_layer = |option: &str, out: &Path| {
            run(fx
                .user
                .command(&sqfs)
                .args(["pack", "--layer", option])
                .arg(&dir)
                .arg(out))
        };
        for out in [&a, &b] {
            pack_layer("-q", out).ok();
        }
        assert_eq!(
            fs::read(&a).unwrap(),
            fs::read(&b).unwrap(),
            "not deterministic"
        );
        let r = pack_layer("-f", &a);
        r.ok();
        assert!(
            r.stdout()
                .contains("1 deleted names, 1 directories made again (1 whiteouts added"),
            "{}",
            r.stdout()
        );
        let stacked = sh(
            vec![format!("--union={},{}:{}", s(&a), s(&own), s(&m))],
            listing,
        );
        assert_eq!(stacked, merged);
        // The image below changed: which names the opaque directory hides
        // can no longer be known.
        let other = fx.image("fold-other", &[("x", "x\n")], "");
        fs::copy(&other, &own).unwrap();
        let r = pack_layer("-f", &a);
        assert!(
            !r.success() && r.stderr().contains("changed since the layer was made"),
            "{r:?}"
        );
    });
}

/// Issue 39, item 4: a kept layer is removed with the one command
/// doc/user-guide.md gives; `rm -rf DIR` alone stops at the caller's
/// read-only copies of root's directories (as in the image, they are
/// 0555), and the layer it leaves is then refused with a message that
/// says what it is and gives that command, which removes the rest. As the
/// case's user, the way a user would.
#[test]
fn a_kept_layer_is_removed_with_the_documented_command() {
    case(|fx| {
        let img = fx.image(
            "removal",
            &[("sys/open", "open\n"), ("sys/sub/f", "f\n")],
            "chown -R 0:0 . && chmod 0755 sys sys/sub && chmod 0666 sys/open",
        );
        let m = fx.mount_point("removal");
        let dir = fx.user_dir().join("layer");
        let use_layer = || {
            launch(
                fx,
                &fx.bin,
                &[
                    format!("--writable={}", s(&dir)),
                    pair(&img, &m),
                    "--".into(),
                    "sh".into(),
                    "-c".into(),
                    format!("echo more >> {}", s(&m.join("sys/open"))),
                ],
            )
        };
        let guide = fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../doc/user-guide.md"
        ))
        .unwrap();
        let documented = "chmod -R u+rwX DIR && rm -rf DIR";
        assert!(
            guide.contains(&format!("`{documented}`")),
            "doc/user-guide.md"
        );
        let remove = documented.replace("DIR", &s(&dir));
        // The documented command on a whole layer.
        use_layer().ok();
        fx.user_sh(&remove).ok();
        assert!(!dir.exists(), "{} is left after: {remove}", s(&dir));
        // `rm -rf` alone, half-way; then what the next launch says.
        use_layer().ok();
        let rm = fx.user_sh(&format!("rm -rf {}", s(&dir)));
        assert!(!rm.success() && dir.exists(), "{rm:?}");
        let said = use_layer();
        said.refused(&["what is left of a writable layer", "partly removed"]);
        let err = said.stderr();
        let given = err
            .split("remove the rest with: ")
            .nth(1)
            .and_then(|rest| rest.split(" (or give").next())
            .unwrap_or_else(|| panic!("no command in: {err}"));
        assert_eq!(given, remove, "{err}");
        fx.user_sh(given).ok();
        assert!(!dir.exists(), "{} is left after: {given}", s(&dir));
        // A fresh layer in its place.
        use_layer().ok();
        fx.user_sh(&remove).ok();
        data_is_no_layer_to_remove(fx, &img, &m);
    });
}

/// A directory of the user's data with numbered directories is no layer to
/// remove: the message never offers to delete it.
fn data_is_no_layer_to_remove(fx: &Fixture, img: &Path, m: &Path) {
    let data = fx.user_dir().join("results");
    fx.user_sh(&format!(
        "mkdir -p {d}/1 {d}/2 && echo r > {d}/1/out",
        d = s(&data)
    ))
    .ok();
    launch(
        fx,
        &fx.bin,
        &[
            format!("--writable={}", s(&data)),
            pair(img, m),
            "--".into(),
            "true".into(),
        ],
    )
    .refused(&[
        "is not a writable layer made by squashfs-mount",
        "give an empty or new directory",
    ]);
    assert!(data.join("1/out").exists());
}
