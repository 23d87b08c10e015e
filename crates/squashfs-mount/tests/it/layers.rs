//! Integration tests of `--writable` and `--union`, as the unprivileged test
//! user against the installed setuid binary. Needs root (skips loudly).

use std::fs;
use std::path::Path;
use std::process::Command;

use sqfsmnt_test_support::cmd::{run, try_run};
use sqfsmnt_test_support::s;
use sqfsmnt_test_support::Fixture;

use crate::case;

fn sha256(p: &Path) -> String {
    run(Command::new("sha256sum").arg(p))
        .ok()
        .stdout()
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

/// A root-owned image with a world-writable tmp/, a root-only etc/, a
/// setuid-root binary that anyone may write (mode 4777) and a normal one.
fn sandbox_image(fx: &Fixture) -> std::path::PathBuf {
    fx.image(
        "sandbox",
        &[("etc/motd", "pristine\n"), ("data/keep.txt", "keep\n")],
        "mkdir -p tmp && chmod 1777 tmp && chmod 755 etc && \
         cp /usr/bin/id suid-id && chmod 4755 suid-id && \
         cp /usr/bin/id suid-writable && chmod 4777 suid-writable && \
         chmod 777 data",
    )
}

fn setuid_files_on_host(fx: &Fixture) -> Vec<String> {
    let found = run(Command::new("find")
        .args(["/tmp", "/var/tmp", "/dev/shm"])
        .arg(fx.user_dir())
        .args(["-xdev", "-perm", "-4000", "-print"]))
    .stdout();
    // The package builds that `make test` runs beside the tests stage
    // root's setuid binary in the repository's build/ (scripts/check-setuid
    // checks that tree on its own); a clone may sit under /tmp.
    let builds = concat!(env!("CARGO_MANIFEST_DIR"), "/../../build/");
    let builds = fs::canonicalize(builds)
        .map(|p| format!("{}/", p.display()))
        .unwrap_or_else(|_| builds.to_string());
    let mut v: Vec<String> = found
        .lines()
        .filter(|l| !l.contains("/trees/")) // the test's own image sources
        .filter(|l| !l.starts_with(&builds))
        .map(String::from)
        .collect();
    v.sort();
    v
}

#[test]
fn writes_succeed_and_vanish() {
    case(|fx| {
        let img = sandbox_image(fx);
        let before = sha256(&img);
        let m = fx.mount_point("w-vanish");
        let r = fx.launch_sh(&["--writable".to_string(), format!("{}:{}", s(&img), s(&m))], &format!(
                "set -e; cd {m}; echo new > tmp/new.txt; rm data/keep.txt; echo changed > data/keep.txt; \
                 mkdir data/sub; echo deep > data/sub/f; cat tmp/new.txt data/sub/f data/keep.txt; \
                 ! touch etc/forbidden 2>/dev/null; ! touch newtop 2>/dev/null; echo ok",
                m = s(&m)
            ));
        r.ok();
        assert_eq!(r.stdout(), "new\ndeep\nchanged\nok\n");
        // Next launch: pristine again.
        let r = fx.launch_sh(
            &["--writable".to_string(), format!("{}:{}", s(&img), s(&m))],
            &format!("cat {m}/data/keep.txt; ls {m}/tmp | wc -l", m = s(&m)),
        );
        r.ok();
        assert_eq!(r.stdout(), "keep\n0\n");
        assert_eq!(sha256(&img), before, "the image changed");
        assert!(
            fs::read_dir(&m).unwrap().next().is_none(),
            "something appeared on the host mount point"
        );
    });
}

#[test]
fn without_writable_a_union_is_read_only() {
    case(|fx| {
        let a = fx.image("ro-a", &[("a.txt", "a\n")], "chmod 777 .");
        let b = fx.image("ro-b", &[("b.txt", "b\n")], "");
        let m = fx.mount_point("ro-union");
        let r = fx.launch_sh(
            &[format!("--union={},{}:{}", s(&a), s(&b), s(&m))],
            &format!(
                "cat {m}/a.txt {m}/b.txt; touch {m}/x 2>&1 | grep -c 'Read-only'",
                m = s(&m)
            ),
        );
        r.ok();
        assert_eq!(r.stdout(), "a\nb\n1\n");
    });
}

#[test]
fn user_owned_image_root_stays_writable_by_its_owner() {
    case(|fx| {
        let img = fx.image(
            "userroot",
            &[("f", "x\n")],
            &format!("chown -R {}:{} . && chmod 755 .", fx.uid, fx.gid),
        );
        let m = fx.mount_point("w-userroot");
        let r = fx.launch_sh(
            &[
                "--writable=16M".to_string(),
                format!("{}:{}", s(&img), s(&m)),
            ],
            &format!("touch {m}/top && stat -c '%u %a' {m}", m = s(&m)),
        );
        r.ok();
        assert_eq!(r.stdout(), format!("{} 755\n", fx.uid));
    });
}

#[test]
fn setuid_files_give_no_privilege_and_nothing_setuid_reaches_the_host() {
    case(|fx| {
        let img = sandbox_image(fx);
        let before = setuid_files_on_host(fx);
        let m = fx.mount_point("w-suid");
        let r = fx.launch_sh(&["--writable".to_string(), format!("{}:{}", s(&img), s(&m))], &format!(
                "cd {m}; ./suid-id -u; cat /usr/bin/id > suid-writable; ls -l suid-writable | cut -c1-10; ./suid-writable -u; \
                 chmod 4755 suid-writable 2>/dev/null; ./suid-writable -u; \
                 cp -p suid-id {u}/copied-suid 2>/dev/null; cp suid-id tmp/c && chmod 4755 tmp/c && ./tmp/c -u",
                m = s(&m),
                u = s(&fx.user_dir())
            ));
        let out = r.stdout();
        let uid = fx.uid.to_string();
        let ids: Vec<&str> = out
            .lines()
            .filter(|l| l.chars().all(|c| c.is_ascii_digit()))
            .collect();
        assert_eq!(ids.len(), 4, "{out}\n{}", r.stderr());
        assert!(
            ids.iter().all(|i| *i == uid),
            "a setuid file ran with other ids: {out}"
        );
        // Writing to the setuid file cleared its setuid bit.
        assert!(out.contains("-rwxrwxrwx"), "{out}");
        let after = setuid_files_on_host(fx);
        assert_eq!(before, after, "new setuid files on the host");
        let copied = fx.user_dir().join("copied-suid");
        if let Ok(meta) = fs::metadata(&copied) {
            use std::os::unix::fs::MetadataExt;
            assert_ne!(meta.uid(), 0, "a root-owned file reached the host");
            let _ = fs::remove_file(&copied);
        }
    });
}

#[test]
fn filling_the_layer_gives_enospc_and_the_next_launch_is_clean() {
    case(|fx| {
        let img = sandbox_image(fx);
        let m = fx.mount_point("w-full");
        let r = fx.launch_sh(&["--writable=4M".to_string(), format!("{}:{}", s(&img), s(&m))], &format!("dd if=/dev/zero of={m}/tmp/big bs=1M count=64 2>&1 | grep -o 'No space left on device' | head -1", m = s(&m)));
        r.ok();
        assert_eq!(r.stdout(), "No space left on device\n");
        // The inode limit: 16M gives 4096 inodes; 5000 empty files do not fit.
        let r = fx.launch_sh(&["--writable=16M".to_string(), format!("{}:{}", s(&img), s(&m))], &format!("cd {m}/tmp && i=0; while [ $i -lt 5000 ]; do touch f$i 2>/dev/null || break; i=$((i+1)); done; echo $i; touch last 2>&1 | grep -o 'No space left on device'", m = s(&m)));
        r.ok();
        let out = r.stdout();
        let created: u32 = out.lines().next().unwrap().parse().unwrap();
        assert!(created > 3000 && created < 4096, "{out}");
        assert!(out.contains("No space left on device"), "{out}");
        // And the next launch is clean.
        let r = fx.launch_sh(
            &["--writable".to_string(), format!("{}:{}", s(&img), s(&m))],
            &format!("ls {m}/tmp | wc -l", m = s(&m)),
        );
        assert_eq!(r.stdout(), "0\n");
        // Nothing reached the host: the mount point and the image's source
        // tree hold no file called big.
        let found = run(Command::new("find")
            .arg(&m)
            .arg(fx.path("trees"))
            .args(["-name", "big"]));
        assert!(found.0.stdout.is_empty(), "{found:?}");
    });
}

#[test]
fn union_of_64_images_lists_every_subject() {
    case(|fx| {
        let images: Vec<String> = (0..64)
            .map(|i| {
                s(&fx.image(
                    &format!("subject{i:02}"),
                    &[
                        (
                            &format!("subject-{i:02}/scan.dat"),
                            &format!("subject {i}\n"),
                        ),
                        ("README", &format!("from {i}\n")),
                    ],
                    "",
                ))
            })
            .collect();
        let m = fx.mount_point("u64");
        for writable in [false, true] {
            let mut args = vec![format!("--union={}:{}", images.join(","), s(&m))];
            if writable {
                args.push("--writable".into());
            }
            args.extend(["--".into(), "sh".into(), "-c".into(), format!(
                "ls {m} | grep -c '^subject-'; cat {m}/subject-63/scan.dat {m}/README; echo \"$UENV_MOUNT_LIST\" | tr ',' '\\n' | wc -l",
                m = s(&m)
            )]);
            let r = fx.run(args);
            r.ok();
            // The first image named is on top: its README wins.
            assert_eq!(
                r.stdout(),
                "64\nsubject 63\nfrom 0\n64\n",
                "writable={writable}"
            );
        }
    });
}

#[test]
fn overlapping_directories_merge_and_unions_mix_with_pairs() {
    case(|fx| {
        let a = fx.image(
            "merge-a",
            &[("common/from-a", "a\n"), ("common/both", "top\n")],
            "",
        );
        let b = fx.image(
            "merge-b",
            &[
                ("common/from-b", "b\n"),
                ("common/both", "bottom\n"),
                ("only-b/x", "x\n"),
            ],
            "",
        );
        let c = fx.image("merge-c", &[("c.txt", "c\n")], "");
        let (mu, mc) = (fx.mount_point("merge-u"), fx.mount_point("merge-c"));
        let r = fx.launch_sh(
            &[
                format!("--union={},{}:{}", s(&a), s(&b), s(&mu)),
                format!("{}:{}", s(&c), s(&mc)),
            ],
            &format!(
                "ls {u}/common | tr '\\n' ' '; cat {u}/common/both {u}/only-b/x {c}/c.txt",
                u = s(&mu),
                c = s(&mc)
            ),
        );
        r.ok();
        assert_eq!(r.stdout(), "both from-a from-b top\nx\nc\n");
    });
}

#[test]
fn crafted_overlay_xattrs_do_nothing() {
    case(|fx| {
        if try_run(Command::new("setfattr").arg("--version")).is_none() {
            eprintln!(
                "*** SKIPPED crafted xattr test: setfattr (Debian package attr) not installed ***"
            );
            return;
        }
        // Bottom layer holds a "hidden" directory; the top layer tries to
        // reach it or anything else through redirect and metacopy xattrs,
        // and hides a directory with an opaque xattr.
        let bottom = fx.image(
            "x-bottom",
            &[
                ("hidden/secret.txt", "hidden\n"),
                ("shared/bottom.txt", "b\n"),
            ],
            "",
        );
        let top = fx.image(
            "x-top",
            &[("evil/.keep", ""), ("shared/top.txt", "t\n"), ("meta", "")],
            "setfattr -n trusted.overlay.redirect -v /hidden evil && \
             setfattr -n trusted.overlay.redirect -v /etc shared && \
             setfattr -n trusted.overlay.metacopy -v '' meta && \
             setfattr -n trusted.overlay.redirect -v /hidden/secret.txt meta && \
             mkdir opaque && setfattr -n trusted.overlay.opaque -v y opaque",
        );
        let m = fx.mount_point("x-union");
        for writable in [false, true] {
            let mut args = vec![format!("--union={},{}:{}", s(&top), s(&bottom), s(&m))];
            if writable {
                args.push("--writable".into());
            }
            args.extend(["--".into(), "sh".into(), "-c".into(), format!(
                "cd {m}; ls evil | tr '\\n' ' '; echo; ls shared | tr '\\n' ' '; echo; cat meta | wc -c; ls /etc | head -1 >/dev/null; \
                 find . -type f | sort | tr '\\n' ' '",
                m = s(&m)
            )]);
            let r = fx.run(args);
            r.ok();
            let out = r.stdout();
            let lines: Vec<&str> = out.lines().collect();
            // overlayfs refuses (EPERM) entries whose redirect or metacopy
            // it is told not to follow: they show nothing, certainly not
            // the redirect's target.
            assert!(!lines[0].contains("secret"), "redirect followed: {out}");
            assert!(
                ["", "bottom.txt top.txt"].contains(&lines[1].trim()),
                "redirect to /etc followed: {out}"
            );
            assert_eq!(lines[2].trim(), "0", "metacopy followed: {out}");
            // Only files that are in the images, nothing from outside them.
            let allowed = [
                "./hidden/secret.txt",
                "./meta",
                "./shared/bottom.txt",
                "./shared/top.txt",
                "./evil/.keep",
            ];
            for f in lines[3].split_whitespace() {
                assert!(allowed.contains(&f), "{f} is not in the images: {out}");
            }
            assert!(lines[3].contains("./hidden/secret.txt"), "{out}");
        }
    });
}

#[test]
fn bad_union_and_size_arguments_are_refused() {
    case(|fx| {
        let m = fx.mount_point("bad-union");
        fx.run([format!("--union=:{}", s(&m)), "--".into(), "true".into()])
            .refused(&["empty"]);
        fx.run(["--writable=12".to_string(), "--".into(), "true".into()])
            .refused(&["too small"]);
        fx.run(["--writable=lots".to_string(), "--".into(), "true".into()])
            .refused(&["--writable=lots is not a size", "--writable=./lots"]);
        let b = fx.image("ro-b", &[("b.txt", "b\n")], "");
        for huge in ["--writable=1000T", "--writable=51%"] {
            fx.run([
                huge.to_string(),
                format!("{}:{}", s(&b), s(&m)),
                "--".into(),
                "true".into(),
            ])
            .refused(&["50% of RAM"]);
        }
        let secret = fx.path("private/u.sqfs");
        let pubimg = fx.image("ro-b", &[("b.txt", "b\n")], "");
        fx.run([
            format!("--union={},{}:{}", s(&pubimg), s(&secret), s(&m)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["u.sqfs", "Permission denied"]);
    });
}
