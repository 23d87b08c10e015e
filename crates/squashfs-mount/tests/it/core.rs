//! Integration tests of the core: the installed setuid binary, run as an
//! unprivileged test user. Needs root (skips loudly otherwise).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sqfsmnt_test_support::cmd::{run, spawn, try_run, wait_until};
use sqfsmnt_test_support::race::SymlinkFlip;
use sqfsmnt_test_support::Fixture;
use sqfsmnt_test_support::{ends, held, pair, s, site};

use crate::case;

fn image_a(fx: &Fixture) -> PathBuf {
    fx.image(
        "a",
        &[("hello.txt", "hello from a\n"), ("sub/.keep", "")],
        "cp /usr/bin/id suid-id && chown root:root suid-id && chmod 4755 suid-id && \
         mknod null c 1 3 && chmod 666 null && \
         cp /bin/cat capcat && setcap cap_dac_read_search+ep capcat",
    )
}
fn image_b(fx: &Fixture) -> PathBuf {
    fx.image("b", &[("b.txt", "bee\n")], "")
}
fn image_c(fx: &Fixture) -> PathBuf {
    fx.image("c", &[("c.txt", "sea\n")], "")
}
fn image_public(fx: &Fixture) -> PathBuf {
    fx.image("public", &[("which", "public\n")], "")
}
/// Mode 0600 root: the test user cannot read it.
fn image_secret(fx: &Fixture) -> PathBuf {
    let p = fx.image("secret", &[("which", "secret\n")], "");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    p
}

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

#[test]
fn single_image() {
    case(|fx| {
        let m = fx.mount_point("single");
        let r = fx.run([
            pair(&image_a(fx), &m),
            "--".into(),
            "cat".into(),
            s(&m.join("hello.txt")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "hello from a\n");
        // Nothing visible on the host.
        assert!(!m.join("hello.txt").exists());
    });
}

#[test]
fn exit_status_is_the_commands() {
    case(|fx| {
        let m = fx.mount_point("status");
        let r = fx.launch_sh(&[pair(&image_b(fx), &m)], "exit 7");
        assert_eq!(r.code(), Some(7));
        let r = fx.run(["--", "/nonexistent/cmd"]);
        assert_eq!(r.code(), Some(127));
        assert!(r.stderr().contains("/nonexistent/cmd"));
    });
}

#[test]
fn several_images_and_mount_list() {
    case(|fx| {
        let (ma, mb) = (fx.mount_point("sev-a"), fx.mount_point("sev-b"));
        let (a, b) = (image_a(fx), image_b(fx));
        let r = fx.launch_sh(
            &[pair(&a, &ma), pair(&b, &mb)],
            &format!(
                "cat {}/hello.txt {}/b.txt; echo \"$UENV_MOUNT_LIST\"",
                s(&ma),
                s(&mb)
            ),
        );
        r.ok();
        assert_eq!(
            r.stdout(),
            format!(
                "hello from a\nbee\n{}:{},{}:{}\n",
                s(&a),
                s(&ma),
                s(&b),
                s(&mb)
            )
        );
        // The --sqfs= form.
        let r = fx.run([
            format!("--sqfs={},{}", pair(&a, &ma), pair(&b, &mb)),
            "--".into(),
            "cat".into(),
            s(&mb.join("b.txt")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "bee\n");
    });
}

#[test]
fn nested_mount_points_in_path_order() {
    case(|fx| {
        let outer = fx.mount_point("nest");
        let inner = outer.join("sub");
        // Given inner first: still mounted after the outer one.
        let r = fx.launch_sh(
            &[pair(&image_c(fx), &inner), pair(&image_a(fx), &outer)],
            &format!(
                "cat {}/hello.txt {}/c.txt; echo \"$UENV_MOUNT_LIST\"",
                s(&outer),
                s(&inner)
            ),
        );
        r.ok();
        let out = r.stdout();
        assert!(out.starts_with("hello from a\nsea\n"), "{out}");
        assert!(
            out.contains(&format!("{}:{},", s(&image_a(fx)), s(&outer))),
            "{out}"
        );
    });
}

#[test]
fn relative_paths_are_made_absolute() {
    case(|fx| {
        let m = fx.mount_point("rel");
        let r = fx.launch_sh(
            &["images/b.sqfs:mnt/rel".to_string()],
            "cat mnt/rel/b.txt; echo $UENV_MOUNT_LIST",
        );
        let _ = image_b(fx);
        r.ok();
        assert_eq!(
            r.stdout(),
            format!("bee\n{}:{}\n", s(&fx.path("images/b.sqfs")), s(&m))
        );
    });
}

#[test]
fn invalid_arguments_exit_1() {
    case(|fx| {
        fx.run(["invalid_argument", "--", "true"])
            .refused(&["<image>:<mountpoint>"]);
        fx.run(["a.sqfs:/m"]).refused(&["--"]);
        fx.run(["--frobnicate", "--", "true"])
            .refused(&["unknown option"]);
        fx.run(["a:b:c", "--", "true"]).refused(&["':'"]);
        fx.run(["--"]).refused(&["no command"]);
    });
}

#[test]
fn help_and_version() {
    case(|fx| {
        let r = fx.run(["--version"]);
        r.ok();
        assert_eq!(r.stdout(), format!("{}\n", env!("CARGO_PKG_VERSION")));
        assert_eq!(fx.run(["-V"]).stdout(), r.stdout());
        // -v is --verbose now (uenv's squashfs-mount): alone, no command.
        fx.run(["-v"]).refused(&["no command given"]);
        let h = fx.run(["--help"]);
        h.ok();
        assert!(h.stdout().contains("Usage: squashfs-mount"));
    });
}

#[test]
fn no_mounts_runs_without_unsharing() {
    case(|fx| {
        let r = fx.user_sh("readlink /proc/self/ns/mnt; \"$SQM\" -- readlink /proc/self/ns/mnt");
        r.ok();
        let lines: Vec<_> = r.stdout().lines().map(String::from).collect();
        assert_eq!(lines.len(), 2, "{}", r.stdout());
        assert_eq!(lines[0], lines[1]);
        // Quiet success: the passthrough says nothing.
        assert!(r.stderr().is_empty(), "{}", r.stderr());
    });
}

#[test]
fn a_mount_uses_a_private_namespace() {
    case(|fx| {
        let m = fx.mount_point("ns");
        let r = fx.user_sh(&format!(
            "readlink /proc/self/ns/mnt; \"$SQM\" {} -- readlink /proc/self/ns/mnt",
            pair(&image_b(fx), &m)
        ));
        r.ok();
        let lines: Vec<_> = r.stdout().lines().map(String::from).collect();
        assert_ne!(lines[0], lines[1]);
    });
}

#[test]
fn forwarded_environment() {
    case(|fx| {
        let m = fx.mount_point("fwd");
        // LD_LIBRARY_PATH itself is removed by the C library for setuid
        // programs; SQFSMNT_FWD_ brings it (and non-identifier names) through.
        let r = fx.user_sh(&format!(
            "env SQFSMNT_FWD_LD_LIBRARY_PATH=foo LD_LIBRARY_PATH=bar 'SQFSMNT_FWD_BASH_FUNC_greet%%=() {{ echo hi; }}' \
             \"$SQM\" {} -- env",
            pair(&image_b(fx), &m)
        ));
        r.ok();
        let out = r.stdout();
        assert!(out.lines().any(|l| l == "LD_LIBRARY_PATH=foo"), "{out}");
        assert!(!out.lines().any(|l| l == "LD_LIBRARY_PATH=bar"), "{out}");
        assert!(
            out.lines()
                .any(|l| l == "BASH_FUNC_greet%%=() { echo hi; }"),
            "{out}"
        );
        assert!(
            out.lines().any(|l| l.starts_with("UENV_MOUNT_LIST=")),
            "{out}"
        );
        // Also without mounts.
        let r = fx.user_sh(
            "SQFSMNT_FWD_LD_LIBRARY_PATH=foo \"$SQM\" -- sh -c 'env | grep ^LD_LIBRARY_PATH'",
        );
        assert_eq!(r.stdout(), "LD_LIBRARY_PATH=foo\n");
    });
}

#[test]
fn preload_reaches_only_the_unprivileged_command() {
    case(|fx| {
        if try_run(Command::new("cc").arg("--version")).is_none() {
            eprintln!("*** SKIPPED preload test: no C compiler ***");
            return;
        }
        let so = fx.path("user/evil.so");
        let src = fx.path("user/evil.c");
        fs::write(
            &src,
            "#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void f(void){fprintf(stderr,\"PRELOADED euid=%d\\n\",(int)geteuid());}\n",
        )
        .unwrap();
        run(Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&src))
        .ok();
        fs::set_permissions(&so, fs::Permissions::from_mode(0o755)).unwrap();
        let m = fx.mount_point("preload");
        let p = pair(&image_b(fx), &m);
        // A directory with a fake C library (the first library the binary
        // needs; the loader stops at it, naming the directory).
        let libdir = fx.path("user/fakelib");
        fs::create_dir_all(&libdir).unwrap();
        fs::copy(&so, libdir.join("libc.so.6")).unwrap();
        fs::set_permissions(&libdir, fs::Permissions::from_mode(0o755)).unwrap();
        let plain = fx.path("user/plain-for-preload");
        fs::copy(&fx.bin, &plain).unwrap();
        fs::set_permissions(&plain, fs::Permissions::from_mode(0o755)).unwrap();
        for (var, value) in [("LD_PRELOAD", s(&so)), ("LD_LIBRARY_PATH", s(&libdir))] {
            // Control: the same binary without the setuid bit is influenced,
            // so the check below can fail.
            let r = fx.user_sh(&format!("{var}='{value}' {} -- /bin/true", s(&plain)));
            assert!(
                r.stderr().contains("PRELOADED") || r.stderr().contains("fakelib"),
                "control run not influenced by {var}: {}",
                r.stderr()
            );
            let r = fx.user_sh(&format!("{var}='{value}' \"$SQM\" {p} -- /bin/true"));
            r.ok();
            assert!(
                !r.stderr().contains("PRELOADED"),
                "{var} influenced the setuid program: {}",
                r.stderr()
            );
        }
        // GLIBC_TUNABLES is the dynamic loader's business (it filters it for
        // setuid programs); we only check that a hostile value does not
        // break or change the run.
        let r = fx.user_sh(&format!("GLIBC_TUNABLES=glibc.malloc.check=3:glibc.malloc.mmap_threshold=1 \"$SQM\" {p} -- cat {}", s(&m.join("b.txt"))));
        r.ok();
        assert_eq!(r.stdout(), "bee\n");
        let r = fx.user_sh(&format!(
            "SQFSMNT_FWD_LD_PRELOAD='{}' \"$SQM\" {p} -- /bin/true",
            s(&so)
        ));
        r.ok();
        assert_eq!(r.stderr().matches("PRELOADED").count(), 1, "{}", r.stderr());
        assert!(
            r.stderr().contains(&format!("PRELOADED euid={}", fx.uid)),
            "{}",
            r.stderr()
        );
    });
}

// ---------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------

#[test]
fn unreadable_image_is_refused() {
    case(|fx| {
        let m = fx.mount_point("secret");
        fx.run([
            pair(&image_secret(fx), &m),
            "--".into(),
            "cat".into(),
            s(&m.join("which")),
        ])
        .refused(&[
            "secret.sqfs",
            "unable to read squashfs",
            "(Permission denied)",
        ]);
        // In a directory the user cannot traverse.
        let hidden = fx.path("private/b.sqfs");
        fs::copy(image_b(fx), &hidden).unwrap();
        fx.launch_true(&hidden, &m)
            .refused(&["private/b.sqfs", "Permission denied"]);
        // Through a symlink the user may follow.
        let link = fx.symlink(image_secret(fx), "secret-link.sqfs");
        fx.launch_true(&link, &m).refused(&["Permission denied"]);
    });
}

#[test]
fn symlink_swap_race_never_mounts_the_secret_image() {
    case(|fx| {
        let m = fx.mount_point("race");
        let (public, secret) = (image_public(fx), image_secret(fx));
        let link = fx.path("user/race.sqfs");
        let flip = SymlinkFlip::start(&link, &secret, &public);
        flip.launches(Duration::from_secs(4), 300, || {
            let r = fx.run([
                pair(&link, &m),
                "--".into(),
                "cat".into(),
                s(&m.join("which")),
            ]);
            assert!(
                !r.stdout().contains("secret"),
                "the secret image was mounted"
            );
            match r.code() {
                Some(0) => {
                    assert_eq!(r.stdout(), "public\n");
                    true
                }
                _ => {
                    r.refused(&[]);
                    false
                }
            }
        });
    });
}

#[test]
fn non_regular_images_are_refused() {
    case(|fx| {
        let m = fx.mount_point("nonreg");
        let fifo = fx.path("user/fifo");
        let _ = fs::remove_file(&fifo);
        run(Command::new("mkfifo").arg(&fifo)).ok();
        let sock = fx.path("user/sock");
        let _ = fs::remove_file(&sock);
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        for (path, what) in [
            (fx.path("trees"), "directory"),
            (fifo.clone(), "FIFO"),
            (PathBuf::from("/dev/null"), "character device"),
            (PathBuf::from("/proc/self/status"), "regular"),
            (sock.clone(), "socket"),
        ] {
            // A launch that hangs on it fails at the run's time limit.
            let r = fx.launch_true(&path, &m);
            if what == "regular" {
                // /proc files are regular but empty: refused by the superblock check.
                r.refused(&["status", "empty"]);
            } else if what == "socket" {
                // A socket cannot even be opened.
                r.refused(&["sock"]);
            } else {
                r.refused(&[what]);
            }
        }
        if Path::new("/dev/loop0").exists() {
            fx.run([
                pair(Path::new("/dev/loop0"), &m),
                "--".into(),
                "true".into(),
            ])
            .refused(&["loop0"]);
        }
    });
}

#[test]
fn corrupt_truncated_and_empty_images() {
    case(|fx| {
        let m = fx.mount_point("corrupt");
        let good = fs::read(image_a(fx)).unwrap();
        let dir = fx.path("user");
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            fs::write(&p, bytes).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
            p
        };
        let mut random = vec![0u8; 65536];
        let mut x: u32 = 12345;
        for b in random.iter_mut() {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            *b = (x >> 16) as u8;
        }
        let mut v3 = good.clone();
        v3[28] = 3;
        let mut lzma = good.clone();
        lzma[20] = 2;
        // No corrupt image past the superblock check ever reaches the
        // kernel's squashfs driver in a test (it is not hardened against
        // crafted images): those are tested through the FUSE path.
        let cases: Vec<(PathBuf, Vec<&str>)> = vec![
            (write("empty.sqfs", &[]), vec!["empty"]),
            (write("short.sqfs", &good[..50]), vec!["shorter"]),
            (write("random.sqfs", &random), vec!["not a SquashFS image"]),
            (
                write("trunc.sqfs", &good[..good.len() / 2]),
                vec!["truncated"],
            ),
            (write("v3.sqfs", &v3), vec!["version 3.0"]),
            (write("lzma.sqfs", &lzma), vec!["lzma"]),
        ];
        for (img, needles) in cases {
            let mut n = needles.clone();
            let name = img.file_name().unwrap().to_string_lossy().into_owned();
            n.push(&name);
            fx.launch_true(&img, &m).refused(&n);
        }
    });
}

#[test]
fn repeated_image_is_quiet() {
    case(|fx| {
        // One image at several mount points is a supported pattern: no
        // warning (quiet success); `--verbose` says what was done.
        let (m1, m2) = (fx.mount_point("rep1"), fx.mount_point("rep2"));
        let b = image_b(fx);
        let r = fx.run([
            pair(&b, &m1),
            pair(&b, &m2),
            "--".into(),
            "cat".into(),
            s(&m1.join("b.txt")),
            s(&m2.join("b.txt")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "bee\nbee\n");
        assert!(r.stderr().is_empty(), "{}", r.stderr());
        let r = fx.run([
            "--verbose".into(),
            pair(&b, &m1),
            "--".into(),
            "true".into(),
        ]);
        r.ok();
        assert!(r.stderr().contains("kernel (trusted"), "{}", r.stderr());
    });
}

// ---------------------------------------------------------------------------
// Mount points
// ---------------------------------------------------------------------------

#[test]
fn kernel_filesystems_and_root_are_refused() {
    case(|fx| {
        let b = image_b(fx);
        let dotdot = format!("{}/{}proc", s(&fx.mount_point("dd")), "../".repeat(12));
        let refused: Vec<(String, &str)> = vec![
            ("/".into(), "root directory"),
            ("//".into(), "root directory"),
            ("/proc".into(), "/proc"),
            ("/proc/self".into(), "/proc"),
            ("/sys".into(), "/sys"),
            ("/sys/kernel".into(), "/sys"),
            ("/dev".into(), "/dev"),
            ("/dev/shm".into(), "/dev"),
            (dotdot, "/proc"),
            (s(&fx.symlink("/proc", "to-proc")), "/proc"),
            (s(&fx.symlink("/sys/fs", "to-sys")), "/sys"),
            (s(&fx.symlink("/dev", "to-dev")), "/dev"),
            (s(&fx.symlink("/", "to-root")), "root directory"),
            (
                format!("{}/..", s(&fx.symlink("/proc/sys", "to-procsys"))),
                "/proc",
            ),
        ];
        for (mnt, why) in refused {
            fx.run([format!("{}:{mnt}", s(&b)), "--".into(), "true".into()])
                .refused(&["refusing", why]);
        }
    });
}

#[test]
fn symlinked_mount_point_mounts_on_its_target() {
    case(|fx| {
        let target = fx.mount_point("real-target");
        let link = fx.symlink(&target, "link-to-target");
        let r = fx.launch_sh(
            &[pair(&image_b(fx), &link)],
            &format!("cat {}/b.txt; echo $UENV_MOUNT_LIST", s(&target)),
        );
        r.ok();
        assert_eq!(
            r.stdout(),
            format!("bee\n{}:{}\n", s(&image_b(fx)), s(&target))
        );
    });
}

#[test]
fn duplicate_mount_points_are_refused() {
    case(|fx| {
        let m = fx.mount_point("dup");
        let (a, b) = (image_a(fx), image_b(fx));
        fx.run([pair(&a, &m), pair(&b, &m), "--".into(), "true".into()])
            .refused(&["is used to mount more than one squashfs"]);
        let twin = format!("{}//.", s(&m));
        fx.run([
            pair(&a, &m),
            format!("{}:{twin}", s(&b)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["more than one squashfs"]);
        // The same directory through a symlink.
        let link = fx.symlink(&m, "dup-link");
        fx.run([pair(&a, &m), pair(&b, &link), "--".into(), "true".into()])
            .refused(&["already a mount point"]);
    });
}

#[test]
fn bad_mount_points() {
    case(|fx| {
        let b = image_b(fx);
        fx.run([
            format!("{}:/nonexistent-dir", s(&b)),
            "--".into(),
            "true".into(),
        ])
        .refused(&[
            "the mount path /nonexistent-dir does not exist",
            "-r (--mutable-root)",
        ]);
        fx.run([
            format!("{}:{}", s(&b), s(&fx.path("bin/squashfs-mount"))),
            "--".into(),
            "true".into(),
        ])
        .refused(&["not a directory"]);
        let long = format!("/{}", "x/".repeat(3000));
        fx.run([format!("{}:{long}", s(&b)), "--".into(), "true".into()])
            .refused(&["too long"]);
        fx.run([
            format!(
                "{}:{}",
                s(&fx.path("private/x.sqfs")),
                s(&fx.mount_point("bmp"))
            ),
            "--".into(),
            "true".into(),
        ])
        .refused(&["Permission denied"]);
    });
}

#[test]
fn non_utf8_paths_work() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    case(|fx| {
        let img = fx
            .path("images")
            .join(std::ffi::OsStr::from_bytes_compat(b"im\xffage.sqfs"));
        fs::copy(image_b(fx), &img).unwrap();
        let mut mnt = fx.mount_point("utf").into_os_string().into_vec();
        mnt.extend_from_slice(b"/d\xfe");
        let mnt = PathBuf::from(OsString::from_vec(mnt));
        fs::create_dir_all(&mnt).unwrap();
        let mut arg = img.clone().into_os_string().into_vec();
        arg.push(b':');
        arg.extend_from_slice(mnt.as_os_str().as_encoded_bytes());
        let mut cat = mnt.clone().into_os_string().into_vec();
        cat.extend_from_slice(b"/b.txt");
        let r = fx.run([
            OsString::from_vec(arg),
            "--".into(),
            "cat".into(),
            OsString::from_vec(cat),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "bee\n");
    });
}

trait FromBytesCompat {
    fn from_bytes_compat(b: &[u8]) -> &std::ffi::OsStr;
}
impl FromBytesCompat for std::ffi::OsStr {
    fn from_bytes_compat(b: &[u8]) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b)
    }
}

// ---------------------------------------------------------------------------
// Inside the command
// ---------------------------------------------------------------------------

#[test]
fn the_command_runs_as_the_caller_without_privileges() {
    case(|fx| {
        let m = fx.mount_point("creds");
        let r = fx.launch_sh(
            &[pair(&image_a(fx), &m)],
            "id -u; id -g; id -G; grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs):' /proc/self/status",
        );
        r.ok();
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 7, "{out}");
        assert_eq!(lines[0], fx.uid.to_string());
        assert_eq!(lines[1], fx.gid.to_string());
        // `id -G` lists the primary group first and may repeat it.
        let groups: std::collections::BTreeSet<String> =
            lines[2].split(' ').map(String::from).collect();
        assert_eq!(
            groups,
            [fx.gid.to_string(), fx.gid2.to_string()]
                .into_iter()
                .collect()
        );
        let mut status: Vec<&str> = lines[3..].to_vec();
        status.sort();
        assert_eq!(
            status,
            [
                "CapAmb:\t0000000000000000",
                "CapEff:\t0000000000000000",
                "CapPrm:\t0000000000000000",
                "NoNewPrivs:\t1"
            ]
        );
    });
}

#[test]
fn setuid_files_capabilities_and_devices_in_images_give_nothing() {
    case(|fx| {
        let m = fx.mount_point("nosuid");
        let r = fx.launch_sh(&[pair(&image_a(fx), &m)], &format!(
                "ls -l {m}/suid-id; {m}/suid-id -u; {m}/capcat /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ; \
                 echo x > {m}/null 2>/dev/null && echo DEV-WRITE; cat {m}/null 2>&1 || echo DEV-DENIED",
                m = s(&m)
            ));
        let out = r.stdout();
        assert!(
            out.contains("rwsr-xr-x"),
            "the image lost its setuid bit: {out}"
        );
        assert!(
            out.lines().any(|l| l == fx.uid.to_string()),
            "setuid binary ran as: {out}"
        );
        assert!(!out.lines().any(|l| l == "0"), "{out}");
        assert!(
            !out.contains("SHADOW-READ"),
            "file capability worked: {out}"
        );
        assert!(!out.contains("DEV-WRITE"), "{out}");
        assert!(out.contains("DEV-DENIED"), "{out}");
    });
}

#[test]
fn the_command_cannot_unmount_or_remount() {
    case(|fx| {
        let m = fx.mount_point("umount");
        let r = fx.launch_sh(&[pair(&image_b(fx), &m)], &format!(
                "umount {m} 2>/dev/null && echo UNMOUNTED; mount -o remount,rw {m} 2>/dev/null && echo REMOUNTED; \
                 touch {m}/new 2>/dev/null && echo WROTE; cat {m}/b.txt",
                m = s(&m)
            ));
        assert_eq!(r.stdout(), "bee\n");
    });
}

#[test]
fn no_fd_of_the_tool_reaches_the_command() {
    case(|fx| {
        let m = fx.mount_point("fds");
        let p = pair(&image_a(fx), &m);
        // The caller's fds (here 5, like a make jobserver) pass through; the
        // set must be exactly the one the caller had.
        let script = format!(
            "exec 5</etc/hostname; ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; \
             \"$SQM\" {p} -- sh -c 'ls /proc/self/fd | sort -n | tr \"\\n\" \" \"; echo; readlink /proc/self/fd/5'"
        );
        let r = fx.user_sh(&script);
        r.ok();
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        // Both listings are made by `ls` of its own process, so they match
        // when nothing was added or removed.
        assert_eq!(lines[0], lines[1], "fds differ");
        assert!(
            lines[0].contains(" 5 ") || lines[0].starts_with("5 "),
            "{}",
            lines[0]
        );
        assert_eq!(lines[2], "/etc/hostname");
    });
}

#[test]
fn closed_standard_streams_at_start() {
    case(|fx| {
        let m = fx.mount_point("closed");
        let out = fx.path("user/closed-out");
        let _ = fs::remove_file(&out);
        let r = fx.user_sh(&format!(
            "exec 0<&- 1>&- 2>&-; \"$SQM\" {} -- sh -c 'cat {}/b.txt > {}'",
            pair(&image_b(fx), &m),
            s(&m),
            s(&out)
        ));
        r.ok();
        assert_eq!(fs::read_to_string(&out).unwrap(), "bee\n");
    });
}

#[test]
fn huge_argument_list() {
    case(|fx| {
        let m = fx.mount_point("huge");
        let mut args = vec![
            pair(&image_b(fx), &m),
            "--".into(),
            "sh".into(),
            "-c".into(),
            "echo $#".into(),
            "x".into(),
        ];
        args.extend((0..50_000).map(|i| format!("argument-{i}")));
        let r = fx.run(args);
        r.ok();
        assert_eq!(r.stdout(), "50000\n");
    });
}

#[test]
fn tiny_open_file_limit() {
    case(|fx| {
        let m = fx.mount_point("nofile");
        for limit in [3, 4, 5, 6, 8] {
            // Only 0-2 open, whatever the suite inherited (`flock ... make
            // test` leaves its lock fd, some CI runners others): the limit
            // counts descriptor numbers, and fds 3-9 are all that lie below
            // it (the shell's exec takes single digits).
            let r = fx.user_sh(&format!(
                "exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; ulimit -n {limit}; \"$SQM\" {} -- cat {}/b.txt",
                pair(&image_b(fx), &m),
                s(&m)
            ));
            if limit == 3 && r.code() == Some(127) {
                // With only 0-2 allowed the dynamic loader cannot even open
                // the C runtime: it exits before any of our code runs.
                assert!(
                    r.stderr().contains("error while loading shared libraries"),
                    "{}",
                    r.stderr()
                );
            } else if r.code() == Some(0) {
                assert_eq!(r.stdout(), "bee\n");
            } else {
                r.refused(&[]);
            }
        }
    });
}

#[test]
fn argc_zero_is_refused() {
    case(|fx| {
        let src = fx.path("user/argc0.c");
        let exe = fx.path("user/argc0");
        fs::write(&src, "#include <unistd.h>\nint main(int c,char**v){char*a[]={0};char*e[]={0};execve(v[1],a,e);return 99;}\n").unwrap();
        match try_run(Command::new("cc").arg("-o").arg(&exe).arg(&src)) {
            Some(r) if r.success() => {}
            _ => {
                eprintln!("*** SKIPPED argc == 0 test: no C compiler ***");
                return;
            }
        }
        let r = fx.user_sh(&format!("{} \"$SQM\"", s(&exe)));
        r.refused(&["argc == 0"]);
    });
}

#[test]
fn ptrace_by_the_caller_gets_no_privileges() {
    case(|fx| {
        if try_run(Command::new("strace").arg("-V")).is_none() {
            eprintln!("*** SKIPPED ptrace test: strace not installed ***");
            return;
        }
        let m = fx.mount_point("ptrace");
        let r = fx.user_sh(&format!(
            "strace -f -o /dev/null \"$SQM\" --quiet {} -- grep -E '^(Uid|CapEff|CapPrm)' /proc/self/status",
            pair(&image_b(fx), &m)
        ));
        // Under ptrace the kernel does not grant the setuid bit: the launch
        // runs rootless (or says why it cannot), never with privileges.
        if r.code() == Some(0) {
            let uid = fx.uid.to_string();
            assert!(
                r.stdout().lines().any(
                    |l| l.starts_with("Uid:") && l.split_whitespace().skip(1).all(|u| u == uid)
                ),
                "{}",
                r.stdout()
            );
            assert!(
                r.stdout()
                    .lines()
                    .filter(|l| l.starts_with("Cap"))
                    .all(|l| l.ends_with("0000000000000000")),
                "{}",
                r.stdout()
            );
        } else {
            r.refused(&["FUSE"]);
        }
    });
}

#[test]
fn sigkill_at_any_point_leaves_nothing_behind() {
    case(|fx| {
        let (ma, mb) = (fx.mount_point("kill-a"), fx.mount_point("kill-b"));
        let (a, b) = (image_a(fx), image_b(fx));
        let launch = || {
            fx.user_cmd([
                pair(&a, &ma),
                pair(&b, &mb),
                "--".into(),
                "sleep".into(),
                "5".into(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
        };
        // At random points of the whole run...
        for i in 0..40u64 {
            let mut child = launch();
            std::thread::sleep(Duration::from_micros((i * 397) % 15_000));
            let _ = child.kill();
            let _ = child.wait();
        }
        // ...and precisely while it holds root: a launch waiting for the
        // user's launch slot, which the test holds, sleeps in its root
        // phase (effective uid 0, between attempts at the slot): killed
        // there, each time (the root phase of a launch that does not wait
        // lasts about a millisecond, which sampling /proc missed on a busy
        // machine).
        let _conf = site::config("max-launches-per-user = 1\nmax-launches-wait = 60s\n");
        // A first launch makes the user's launch slot.
        fx.launch_true(&a, &ma).ok();
        let slot = format!("/run/squashfs-mount/launches/{}.0", fx.uid);
        for round in 0..3 {
            let held = held::hold(&slot);
            let mut child = launch();
            wait_until(
                ends::HANG,
                &format!("round {round}: the launch waiting for its slot as root"),
                || held::waiting_as_root(child.id(), &fx.bin),
            );
            let _ = child.kill();
            let _ = child.wait();
            drop(held);
        }
    });
}

#[test]
fn parallel_launches_all_succeed() {
    case(|fx| {
        let (ma, mb) = (fx.mount_point("par-a"), fx.mount_point("par-b"));
        let (a, b) = (image_a(fx), image_b(fx));
        let children: Vec<_> = (0..24)
            .map(|_| {
                spawn(&mut fx.user_cmd([
                    pair(&a, &ma),
                    pair(&b, &mb),
                    "--".into(),
                    "cat".into(),
                    s(&mb.join("b.txt")),
                ]))
            })
            .collect();
        for c in children {
            let out = c.wait();
            assert_eq!(out.ok().stdout(), "bee\n", "{out:?}");
        }
    });
}

#[test]
fn not_setuid_without_user_namespaces_is_a_clear_error() {
    case(|fx| {
        let plain = fx.path("user/plain-squashfs-mount");
        fs::copy(&fx.bin, &plain).unwrap();
        fs::set_permissions(&plain, fs::Permissions::from_mode(0o755)).unwrap();
        let m = fx.mount_point("plain");
        // Unprivileged user namespaces off (user.max_user_namespaces = 0),
        // in a user namespace of the test's own.
        let (plain, pair) = (s(&plain), pair(&image_b(fx), &m));
        let r = sqfsmnt_test_support::userns::run_without_user_namespaces(
            fx.uid,
            fx.gid,
            &[plain.as_str(), pair.as_str(), "--", "true"],
        );
        r.refused(&[
            "not installed setuid root",
            "user namespaces",
            "user.max_user_namespaces",
            "administrator",
        ]);
    });
}

#[test]
fn mount_point_swapped_for_a_symlink_never_mounts_in_proc() {
    case(|fx| {
        let b = image_b(fx);
        let dir = fx.path("user/swap-dir");
        fs::create_dir_all(&dir).unwrap();
        let link = fx.path("user/swap-mnt");
        let flip = SymlinkFlip::start(&link, &dir, Path::new("/proc/sys"));
        flip.launches(Duration::from_secs(3), 200, || {
            let r = fx.launch_sh(
                &[pair(&b, &link)],
                "grep ' squashfs ' /proc/self/mountinfo | cut -d' ' -f5",
            );
            match r.code() {
                Some(0) => {
                    assert_eq!(r.stdout().trim(), s(&dir), "mounted elsewhere");
                    true
                }
                _ => {
                    r.refused(&[]);
                    false
                }
            }
        });
    });
}

#[test]
fn symlinks_inside_a_mounted_image_cannot_reach_kernel_filesystems() {
    case(|fx| {
        let img = fx.image(
            "links",
            &[("dir/.keep", "")],
            "ln -s /proc toproc && ln -s ../../../../../../../../dev todev && ln -s / toroot",
        );
        let b = image_b(fx);
        let m = fx.mount_point("links");
        for inner in ["toproc", "todev", "toroot/sys", "dir/../toproc/self"] {
            fx.run([
                pair(&img, &m),
                format!("{}:{}/{inner}", s(&b), s(&m)),
                "--".into(),
                "true".into(),
            ])
            .refused(&["refusing"]);
        }
        // An ordinary directory inside it works.
        let r = fx.run([
            pair(&img, &m),
            format!("{}:{}/dir", s(&b), s(&m)),
            "--".into(),
            "cat".into(),
            format!("{}/dir/b.txt", s(&m)),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "bee\n");
    });
}

#[test]
fn relative_mount_point_under_a_parent_mounted_over_the_cwd() {
    case(|fx| {
        let outer = fx.mount_point("cwd-parent");
        let r = fx.user_sh(&format!(
            "cd {o} && \"$SQM\" {a}:{o} {c}:sub -- sh -c 'cat {o}/sub/c.txt; echo $UENV_MOUNT_LIST'",
            o = s(&outer),
            a = s(&image_a(fx)),
            c = s(&image_c(fx))
        ));
        r.ok();
        assert_eq!(
            r.stdout(),
            format!(
                "sea\n{}:{o},{}:{o}/sub\n",
                s(&image_a(fx)),
                s(&image_c(fx)),
                o = s(&outer)
            )
        );
    });
}

#[test]
fn symlinks_that_change_the_nesting_order_are_refused() {
    case(|fx| {
        let parent = fx.mount_point("zz-parent");
        fs::create_dir_all(parent.join("sub")).unwrap();
        let link = fx.symlink(&parent, "aa-link");
        // "aa-link/sub" sorts before "zz-parent" but lies inside it.
        fx.run([
            pair(&image_a(fx), &parent),
            format!("{}:{}/sub", s(&image_c(fx)), s(&link)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["would hide"]);
        fs::remove_dir(parent.join("sub")).unwrap();
    });
}

#[test]
fn a_repeated_image_uses_one_loop_device() {
    case(|fx| {
        let (m1, m2, m3) = (
            fx.mount_point("once1"),
            fx.mount_point("once2"),
            fx.mount_point("once3"),
        );
        let b = image_b(fx);
        let r = fx.launch_sh(&[pair(&b, &m1), pair(&b, &m2), format!("--union={},{}:{}", s(&b), s(&image_c(fx)), s(&m3))], &format!("cat {}/b.txt {}/b.txt {}/b.txt; grep -lF {} /sys/block/loop*/loop/backing_file | wc -l", s(&m1), s(&m2), s(&m3), s(&b)));
        r.ok();
        assert_eq!(r.stdout(), "bee\nbee\nbee\n1\n");
    });
}

#[test]
fn an_image_twice_in_one_union_is_refused() {
    case(|fx| {
        let m = fx.mount_point("twice");
        let b = image_b(fx);
        let link = fx.symlink(&b, "b-again.sqfs");
        fx.run([
            format!("--union={},{}:{}", s(&b), s(&link), s(&m)),
            "--".into(),
            "true".into(),
        ])
        .refused(&["named twice"]);
    });
}

#[test]
fn resolved_paths_with_list_separators_are_refused() {
    case(|fx| {
        let odd = fx.path("user/x:y,z");
        fs::create_dir_all(&odd).unwrap();
        fs::copy(image_b(fx), odd.join("i.sqfs")).unwrap();
        let link = fx.path("user/odd-link.sqfs");
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(odd.join("i.sqfs"), &link).unwrap();
        let m = fx.mount_point("odd");
        fx.launch_true(&link, &m).refused(&["UENV_MOUNT_LIST"]);
    });
}

#[test]
fn a_broken_stderr_never_aborts() {
    case(|fx| {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let m = fx.mount_point("epipe");
        for args in [
            vec![
                format!("{}:{}", s(&fx.path("user/missing.sqfs")), s(&m)),
                "--".into(),
                "true".into(),
            ],
            vec![
                pair(&image_b(fx), &m),
                pair(&image_b(fx), &fx.mount_point("epipe2")),
                "--".into(),
                "true".into(),
            ],
            vec!["--".into(), "true".into()],
            vec!["--help".into()],
        ] {
            let status = fx
                .user_cmd(&args)
                .stderr(writer.try_clone().unwrap())
                .stdout(writer.try_clone().unwrap())
                .status()
                .unwrap();
            assert!(
                status.code().is_some(),
                "{args:?}: killed by a signal: {status:?}"
            );
        }
    });
}
