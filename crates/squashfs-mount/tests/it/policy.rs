//! The site policy (issue 10, doc/policy.md): which images the kernel's
//! squashfs driver may mount and which go to the FUSE path, who may use the
//! tool, where images may be mounted, and a configuration file that cannot
//! be trusted. As unprivileged test users against the installed setuid
//! binary; each test sets the configuration it needs and restores the
//! machine's afterwards.
//!
//! Which way an image went is read from inside the command
//! (`stat -f -c %T`: "squashfs" for the kernel, "fuse…" for FUSE), not
//! from the tool's own words.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sqfsmnt_test_support::cmd::{run, Run};
use sqfsmnt_test_support::{kernel, site, Fixture};
use sqfsmnt_test_support::{pair, s};

use crate::{case, fs_type_of};

/// A root-owned image in the fixture's root-only images/ directory.
fn rooted(fx: &Fixture) -> PathBuf {
    fx.image("rooted", &[("which", "root\n")], "")
}

/// The way each mount point was mounted, seen by the command, and what
/// it reads from `which` there: "kernel root", "fuse own", ...
fn ways(fx: &Fixture, pairs: &[(PathBuf, PathBuf)]) -> Vec<String> {
    let mut args: Vec<String> = pairs.iter().map(|(i, m)| pair(i, m)).collect();
    let script = pairs
        .iter()
        .map(|(_, m)| {
            format!(
                "t=$(stat -f -c %T {0}); case $t in squashfs) w=kernel;; fuse*) w=fuse;; *) w=$t;; esac; echo \"$w $(cat {0}/which)\"",
                s(m)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    args.extend(["--".into(), "sh".into(), "-c".into(), script]);
    let r = fx.run(&args);
    assert!(r.success(), "{}", r.stderr());
    assert!(
        r.stderr().is_empty(),
        "a successful launch prints nothing: {}",
        r.stderr()
    );
    r.stdout().lines().map(String::from).collect()
}

/// `squashfs-mount --policy IMAGE` as the user: the image's line.
fn policy_line(fx: &Fixture, image: &Path) -> String {
    let r = fx.run(["--policy".to_string(), s(image)]);
    assert!(r.success(), "{}", r.stderr());
    r.stdout()
        .lines()
        .find(|l| l.starts_with(&format!("{}:", image.display())))
        .unwrap_or_else(|| panic!("no line for {} in\n{}", image.display(), r.stdout()))
        .to_string()
}

#[test]
fn with_no_configuration_own_images_go_to_fuse_and_roots_to_the_kernel() {
    case(|fx| {
        let _conf = site::no_config();
        let own = fx.user_image("own", &[("which", "own\n")]);
        let (m1, m2) = (fx.mount_point("p1"), fx.mount_point("p2"));
        assert_eq!(
            ways(fx, &[(own.clone(), m1.clone()), (rooted(fx), m2.clone())]),
            ["fuse own", "kernel root"]
        );
        // --policy says the same, with the reason.
        let line = policy_line(fx, &own);
        assert!(
            line.contains("FUSE") && line.contains(&format!("owned by uid {}", fx.uid)),
            "{line}"
        );
        let line = policy_line(fx, &rooted(fx));
        assert!(
            line.contains("kernel") && line.contains("trusted-owners"),
            "{line}"
        );
        // A root-owned image the user may write (mode 0666) is not
        // trusted either: anyone could change it under the kernel.
        let open = fx.path("user/open.sqfs");
        fs::copy(rooted(fx), &open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(ways(fx, &[(open, m1)]), ["fuse root"]);
    });
}

#[test]
fn the_crash_image_is_served_by_fuse_and_the_kernel_stays_intact() {
    case(|fx| {
        let _conf = site::no_config();
        let img = fx.path("user/crash.sqfs");
        fs::copy(kernel::crash_image(), &img).unwrap();
        fx.user.chown(&img);
        // Never go further unless the policy sends it to FUSE.
        let line = policy_line(fx, &img);
        assert!(
            line.contains(": FUSE ("),
            "STOP: the crash image would reach the kernel: {line}"
        );
        let before = kernel::problems();
        let m = fx.mount_point("crash");
        let r = fx.launch_sh(&[pair(&img, &m)], &format!(
                "stat -f -c %T {0}; ls -laR {0} >/dev/null 2>&1; find {0} -type f -exec cat {{}} + >/dev/null 2>/tmp/.crash-$$; echo cat=$?; grep -c 'Input/output error' /tmp/.crash-$$; rm -f /tmp/.crash-$$",
                s(&m)
            ));
        assert!(r.success(), "{}", r.stderr());
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("fuse"), "{out}");
        assert_eq!(lines[1], "cat=1", "reading the damaged files fails: {out}");
        assert!(
            lines[2].parse::<u32>().unwrap() > 0,
            "with EIO, in the reader: {out}"
        );
        assert_eq!(kernel::problems(), before, "the kernel log changed");
    });
}

#[test]
fn trusted_directories_and_what_the_caller_can_write() {
    case(|fx| {
        let trusted = fx.path("trusted");
        let _ = fs::remove_dir_all(&trusted);
        fs::create_dir_all(trusted.join("shared")).unwrap();
        fs::set_permissions(&trusted, fs::Permissions::from_mode(0o755)).unwrap();
        let _conf = site::config(&format!(
            "trusted-owners =\ntrusted-dirs = {}\n",
            trusted.display()
        ));
        // Root's image below the trusted directory: the kernel.
        let inside = trusted.join("stack.sqfs");
        fs::copy(rooted(fx), &inside).unwrap();
        // The same bytes outside it: no rule trusts them.
        let outside = fx.path("images/rooted.sqfs");
        // The user's own image in a directory of theirs below the trusted one.
        let theirs = trusted.join("shared");
        fx.user.chown(&theirs);
        let own = theirs.join("own.sqfs");
        fs::copy(fx.image("own", &[("which", "own\n")], ""), &own).unwrap();
        fx.user.chown(&own);
        // Root's image in that directory: the user could replace it.
        let planted = theirs.join("rooted.sqfs");
        fs::copy(rooted(fx), &planted).unwrap();
        let (m1, m2, m3, m4) = (
            fx.mount_point("t1"),
            fx.mount_point("t2"),
            fx.mount_point("t3"),
            fx.mount_point("t4"),
        );
        assert_eq!(
            ways(
                fx,
                &[
                    (inside, m1),
                    (outside, m2),
                    (own, m3),
                    (planted.clone(), m4)
                ]
            ),
            ["kernel root", "fuse root", "fuse own", "fuse root"]
        );
        let line = policy_line(fx, &planted);
        assert!(
            line.contains("shared") && line.contains("replace"),
            "{line}"
        );
        fs::remove_dir_all(&trusted).unwrap();
    });
}

#[test]
fn kernel_images_none_and_all() {
    case(|fx| {
        let own = fx.user_image("own", &[("which", "own\n")]);
        let (m1, m2) = (fx.mount_point("n1"), fx.mount_point("n2"));
        {
            let _conf = site::config("kernel-images = none\n");
            assert_eq!(
                ways(fx, &[(rooted(fx), m1.clone()), (own.clone(), m2.clone())]),
                ["fuse root", "fuse own"]
            );
            assert!(policy_line(fx, &rooted(fx)).contains("kernel-images = none"));
        }
        // "all" (the C tool's behaviour) with a valid image only.
        let _conf = site::config("kernel-images = all\n");
        assert_eq!(
            ways(fx, &[(rooted(fx), m1), (own, m2)]),
            ["kernel root", "kernel own"]
        );
    });
}

#[test]
fn who_may_use_the_tool_and_where() {
    case(|fx| {
        let img = rooted(fx);
        let allowed = fx.mount_point("allowed");
        let other = fx.mount_point("other");
        let run = |m: &Path| fx.run([pair(&img, m), "--".into(), "true".into()]);
        {
            let _conf = site::config("allowed-groups = 0\n");
            run(&allowed).refused(&[
                "allowed-users",
                "allowed-groups",
                "/etc/squashfs-mount.conf",
            ]);
        }
        {
            // The user's supplementary group is enough.
            let _conf = site::config(&format!("allowed-groups = {}\n", fx.gid2));
            run(&allowed).ok();
        }
        {
            let _conf = site::config(&format!("allowed-users = {}\n", fx.uid));
            run(&allowed).ok();
        }
        let _conf = site::config(&format!("mount-points = {}\n", allowed.display()));
        run(&allowed).ok();
        run(&other).refused(&["mount-points", &s(&other)]);
    });
}

#[test]
fn writable_union_and_image_count_can_be_forbidden() {
    case(|fx| {
        let img = rooted(fx);
        let m = fx.mount_point("forbid");
        let _conf =
            site::config("allow-writable = no\nallow-union = no\nmax-images-per-call = 2\n");
        fx.run([
            "--writable".into(),
            pair(&img, &m),
            "--".into(),
            "true".into(),
        ])
        .refused(&["--writable", "allow-writable"]);
        fx.run([
            format!(
                "--union={},{}:{}",
                s(&img),
                s(&fx.image("u2", &[("x", "x\n")], "")),
                s(&m)
            ),
            "--".into(),
            "true".into(),
        ])
        .refused(&["--union", "allow-union"]);
        let three: Vec<String> = ["f1", "f2", "f3"]
            .iter()
            .map(|n| pair(&img, &fx.mount_point(n)))
            .collect();
        fx.run(three.iter().cloned().chain(["--".into(), "true".into()]))
            .refused(&["max-images-per-call"]);
        fx.launch_true(&img, &m).ok();
    });
}

#[test]
fn an_untrustworthy_configuration_file_is_ignored_with_a_warning() {
    case(|fx| {
        let m = fx.mount_point("conf");
        for (mode, owner) in [(0o664, 0), (0o646, 0), (0o644, fx.uid)] {
            let _conf = site::config("kernel-images = none\n");
            fs::set_permissions("/etc/squashfs-mount.conf", fs::Permissions::from_mode(mode))
                .unwrap();
            std::os::unix::fs::chown("/etc/squashfs-mount.conf", Some(owner), None).unwrap();
            let r = fx.run([
                pair(&rooted(fx), &m),
                "--".into(),
                "stat".into(),
                "-f".into(),
                "-c".into(),
                "%T".into(),
                s(&m),
            ]);
            assert!(r.success(), "{}", r.stderr());
            // The built-in defaults: root's image goes to the kernel.
            assert_eq!(r.stdout(), "squashfs\n", "mode {mode:o} owner {owner}");
            let err = r.stderr();
            assert_eq!(err.lines().count(), 1, "one warning: {err}");
            assert!(
                err.contains("/etc/squashfs-mount.conf")
                    && err.contains("ignored")
                    && err.contains("owned by root"),
                "{err}"
            );
            std::os::unix::fs::chown("/etc/squashfs-mount.conf", Some(0), None).unwrap();
        }
    });
}

/// Flips `link` between `a` and `b` (atomically, by renaming a fresh
/// symlink over it) until `stop`.
fn flipper(
    link: PathBuf,
    a: PathBuf,
    b: PathBuf,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let tmp = link.with_extension("flip");
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let _ = fs::remove_file(&tmp);
            std::os::unix::fs::symlink(if n.is_multiple_of(2) { &a } else { &b }, &tmp).unwrap();
            fs::rename(&tmp, &link).unwrap();
            n += 1;
        }
        let _ = fs::remove_file(&tmp);
    })
}

#[test]
fn swapping_the_image_or_a_directory_while_launching_never_fools_the_decision() {
    case(|fx| {
        let _conf = site::no_config();
        let own = fx.user_image("own", &[("which", "own\n")]);
        let root_img = rooted(fx);
        // A directory of the user's holding an image with the same name as
        // root's, for the directory swap.
        let mine = fx.path("user/mine");
        fs::create_dir_all(&mine).unwrap();
        fx.user.chown(&mine);
        fs::copy(&own, mine.join("rooted.sqfs")).unwrap();
        fx.user.chown(&mine.join("rooted.sqfs"));
        let m = fx.mount_point("swap");
        let cases = [
            // The image itself.
            (
                fx.path("user/img.sqfs"),
                own.clone(),
                root_img.clone(),
                fx.path("user/img.sqfs"),
            ),
            // A directory on its path.
            (
                fx.path("user/dir"),
                mine.clone(),
                root_img.parent().unwrap().to_path_buf(),
                fx.path("user/dir/rooted.sqfs"),
            ),
        ];
        for (link, a, b, image) in cases {
            let stop = Arc::new(AtomicBool::new(false));
            std::os::unix::fs::symlink(&a, &link).unwrap();
            let t = flipper(link.clone(), a, b, stop.clone());
            let mut seen = std::collections::BTreeMap::new();
            for _ in 0..60 {
                let r = fx.launch_sh(
                    &[pair(&image, &m)],
                    &format!("echo $(stat -f -c %T {0}) $(cat {0}/which)", s(&m)),
                );
                if !r.success() {
                    // The path may dangle for an instant; a refusal is fine.
                    continue;
                }
                let out = r.stdout();
                let got = out.trim();
                *seen.entry(got.to_string()).or_insert(0) += 1;
                // The user's bytes never reach the kernel; root's may go
                // either way (FUSE is always safe).
                assert!(
                    got == "squashfs root" || got.starts_with("fuse"),
                    "the decision did not match the opened file: {got}"
                );
            }
            stop.store(true, Ordering::Relaxed);
            t.join().unwrap();
            fs::remove_file(&link).unwrap();
            assert!(!seen.is_empty(), "no launch succeeded");
            eprintln!("{}: {seen:?}", image.display());
        }
    });
}

/// `squashfs-mount --policy IMAGE` as user A (the case's user), as another
/// user B and as root: whether each would mount it with the kernel, and
/// B's line (with the reasons).
fn verdicts(
    fx: &Fixture,
    b: &sqfsmnt_test_support::users::User,
    image: &Path,
) -> ([bool; 3], String) {
    let line_of = |out: Run| {
        let text = out.ok().stdout();
        text.lines()
            .find(|l| l.starts_with(&format!("{}:", image.display())))
            .unwrap_or_else(|| panic!("no line for {} in\n{text}", image.display()))
            .to_string()
    };
    let policy =
        |mut c: std::process::Command| line_of(run(c.args(["--policy".to_string(), s(image)])));
    let lines = [
        policy_line(fx, image),
        policy(b.command(&fx.bin)),
        policy(std::process::Command::new(&fx.bin)),
    ];
    (
        lines.clone().map(|l| l.contains(": kernel (")),
        lines[1].clone(),
    )
}

/// Gives `uid` read and write on `path` through its POSIX access ACL
/// (written as the raw extended attribute: no setfacl needed).
fn acl_grant_write(path: &Path, uid: u32) {
    set_acl(path, uid, [6, 6, 6, 6, 4]);
}

/// Sets the POSIX access ACL of `path`: owner, `uid`, group, mask and
/// others get `perms`, in that order.
fn set_acl(path: &Path, uid: u32, perms: [u16; 5]) {
    let mut acl = 2u32.to_le_bytes().to_vec();
    let tags = [0x01u16, 0x02, 0x04, 0x10, 0x20];
    for ((tag, perm), id) in
        tags.into_iter()
            .zip(perms)
            .zip([u32::MAX, uid, u32::MAX, u32::MAX, u32::MAX])
    {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&id.to_le_bytes());
    }
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: setxattr with a valid path, name and value buffer.
    let rc = unsafe {
        libc::setxattr(
            c.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            acl.as_ptr().cast(),
            acl.len(),
            0,
        )
    };
    assert_eq!(rc, 0, "setxattr: {}", std::io::Error::last_os_error());
}

/// Issue 19, finding 2: an image is trusted only if nobody outside the
/// trusted owners and groups can change its bytes, and the verdict is the
/// same for every caller: user A, user B and root. A's image in A's own
/// directory below a `trusted-dirs` directory (the kernel for B and root
/// before), a directory or file an untrusted group can write, and a POSIX
/// ACL that lets another user write a file whose group is trusted.
#[test]
fn trust_is_the_same_for_every_caller() {
    case(|fx| {
        let other = sqfsmnt_test_support::users::Users::create(1, false);
        let b = other.first();
        let top = fx.path("trusted");
        let _ = fs::remove_dir_all(&top);
        for d in ["a", "grp", "acl"] {
            fs::create_dir_all(top.join(d)).unwrap();
        }
        let _conf = site::config(&format!("trusted-dirs = {}\n", top.display()));
        // A's image in A's directory below the trusted one, and root's
        // image planted there.
        fx.user.chown(&top.join("a"));
        let own = top.join("a/own.sqfs");
        fs::copy(fx.image("own", &[("which", "own\n")], ""), &own).unwrap();
        fx.user.chown(&own);
        let planted = top.join("a/rooted.sqfs");
        fs::copy(rooted(fx), &planted).unwrap();
        let (seen, why) = verdicts(fx, b, &own);
        assert_eq!(seen, [false; 3], "A's image: {why}");
        assert!(why.contains(&format!("owned by uid {}", fx.uid)), "{why}");
        let (seen, why) = verdicts(fx, b, &planted);
        assert_eq!(seen, [false; 3], "root's image in A's directory: {why}");
        assert!(
            why.contains(&s(&top.join("a"))) && why.contains("replace"),
            "{why}"
        );
        // Mounted by B: FUSE, read from inside the command.
        let m = fx.mount_point("every");
        let out = fx.run_as(b, fs_type_of(&own, &m));
        assert!(out.ok().stdout().starts_with("fuse"), "{out:?}");

        // Root's image in a directory of root's that group gid2 (A's
        // supplementary group) can write.
        let grp = top.join("grp");
        std::os::unix::fs::chown(&grp, Some(0), Some(fx.gid2)).unwrap();
        fs::set_permissions(&grp, fs::Permissions::from_mode(0o775)).unwrap();
        let in_grp = grp.join("rooted.sqfs");
        fs::copy(rooted(fx), &in_grp).unwrap();
        let (seen, why) = verdicts(fx, b, &in_grp);
        assert_eq!(seen, [false; 3], "{why}");
        assert!(why.contains(&format!("group {}", fx.gid2)), "{why}");

        // A file of group gid2 (g+w), with or without an ACL that lets B
        // write it; the group is trusted from here on.
        let with_acl = top.join("acl/rooted.sqfs");
        fs::copy(rooted(fx), &with_acl).unwrap();
        std::os::unix::fs::chown(&with_acl, Some(0), Some(fx.gid2)).unwrap();
        fs::set_permissions(&with_acl, fs::Permissions::from_mode(0o664)).unwrap();
        let _conf = site::config(&format!(
            "trusted-dirs = {}\ntrusted-groups = {}\n",
            top.display(),
            fx.gid2
        ));
        assert_eq!(verdicts(fx, b, &in_grp).0, [true; 3]);
        assert_eq!(verdicts(fx, b, &with_acl).0, [true; 3]);
        acl_grant_write(&with_acl, b.uid);
        let (seen, why) = verdicts(fx, b, &with_acl);
        assert_eq!(seen, [false; 3], "{why}");
        assert!(why.contains(&format!("uid {} (its ACL)", b.uid)), "{why}");
        fs::remove_dir_all(&top).unwrap();
    });
}

/// Issue 19, finding 6: a FUSE mount made by this tool never counts as
/// root's file system. Root launches a user's image (FUSE: its bytes are
/// the user's); from inside, root's `--policy` and a real launch of a
/// valid image packed inside it both take the FUSE path, never the kernel.
#[test]
fn an_image_inside_this_tools_fuse_mount_is_never_roots() {
    case(|fx| {
        let _conf = site::no_config();
        let inner = fx.image("nested-inner", &[("which", "inner\n")], "");
        let built = fx.image("nested-outer", &[], &format!("cp {} inner.sqfs", s(&inner)));
        let outer = fx.path("user/outer.sqfs");
        fs::copy(&built, &outer).unwrap();
        fx.user.chown(&outer);
        let (m, m2) = (fx.mount_point("outer"), fx.mount_point("nested"));
        let nested = m.join("inner.sqfs");
        let script = format!(
            "stat -f -c %T {m}; {bin} --policy {n}; {bin} --verbose {n}:{m2} -- stat -f -c %T {m2}",
            m = s(&m),
            m2 = s(&m2),
            n = s(&nested),
            bin = s(&fx.bin)
        );
        let r = sqfsmnt_test_support::cmd::run(
            std::process::Command::new(&fx.bin)
                .args([
                    pair(&outer, &m),
                    "--".into(),
                    "sh".into(),
                    "-c".into(),
                    script,
                ])
                .current_dir(&fx.root),
        );
        assert!(r.success(), "{}", r.stderr());
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("fuse"),
            "root's launch of the user's image: {out}"
        );
        let policy = lines
            .iter()
            .find(|l| l.starts_with(&format!("{}:", nested.display())))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            policy.contains(": FUSE (") && policy.contains("FUSE file system"),
            "{policy}"
        );
        assert!(
            lines.last().unwrap().starts_with("fuse"),
            "the nested launch: {out}"
        );
        assert!(r.stderr().contains(": FUSE ("), "{}", r.stderr());
    });
}

/// Issue 29: the ACL of each directory on an image's path is read with one
/// call (getxattrat on "." of its O_PATH fd) instead of a refused
/// fgetxattr first; it is still read. A root-owned directory below a
/// `trusted-dirs` directory is trusted until its POSIX ACL lets user B
/// write it: then nobody gets the kernel path for the image in it, and
/// the verdict names B through that ACL.
#[test]
fn a_directory_acl_that_lets_another_user_write_is_seen() {
    case(|fx| {
        let other = sqfsmnt_test_support::users::Users::create(1, false);
        let b = other.first();
        let top = fx.path("trusted-acl-dir");
        let _ = fs::remove_dir_all(&top);
        let dir = top.join("shared");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let image = dir.join("rooted.sqfs");
        fs::copy(rooted(fx), &image).unwrap();
        let _conf = site::config(&format!("trusted-dirs = {}\n", top.display()));
        let (seen, why) = verdicts(fx, b, &image);
        assert_eq!(seen, [true; 3], "{why}");
        // rwx for the owner and B (and the mask), r-x for group and others.
        set_acl(&dir, b.uid, [7, 7, 5, 7, 5]);
        let (seen, why) = verdicts(fx, b, &image);
        assert_eq!(seen, [false; 3], "{why}");
        assert!(why.contains(&format!("uid {} (its ACL)", b.uid)), "{why}");
        fs::remove_dir_all(&top).unwrap();
    });
}

/// Issue 37, finding 5: root's FUSE mounts are trusted for the kernel path
/// only for the file systems the site names (`trusted-fuse`; by default
/// GlusterFS's and CephFS's clients, whose servers enforce ownership).
/// Root's squashfuse here shows every file as root's, as an s3fs or rclone
/// mount would while users change the bytes by another road: by default
/// its root image goes to FUSE, and `--policy` names the file system and
/// the key; once the site lists it, to the kernel.
#[test]
fn roots_fuse_mounts_are_trusted_only_where_the_site_says_so() {
    if !sqfsmnt_test_support::have("squashfuse") {
        return sqfsmnt_test_support::loud_skip(
            "root's FUSE mounts test: squashfuse missing (scripts/deps test installs it)",
        );
    }
    case(|fx| {
        let inner = fx.image("fuse-trust-inner", &[("which", "inner\n")], "");
        let outer = fx.image(
            "fuse-trust-outer",
            &[],
            &format!("cp {} root.sqfs && chmod 0644 root.sqfs", s(&inner)),
        );
        let m = fx.mount_point("fuse-trust");
        let roots =
            crate::fuse_homes::Squashfuse::mount(fx, None, &outer, &fx.path("fuse-trust/root"));
        let image = roots.dir.join("root.sqfs");
        let launch = [(image.clone(), m.clone())];
        {
            let _conf = site::no_config();
            assert_eq!(ways(fx, &launch), ["fuse inner"]);
            let line = policy_line(fx, &image);
            assert!(
                line.contains(": FUSE (")
                    && line.contains("fuse.squashfuse")
                    && line.contains("trusted-fuse: glusterfs, ceph-fuse"),
                "{line}"
            );
        }
        {
            let _conf = site::config("trusted-fuse = squashfuse\n");
            assert_eq!(ways(fx, &launch), ["kernel inner"]);
            let line = policy_line(fx, &image);
            assert!(line.contains(": kernel (trusted"), "{line}");
        }
        drop(roots);
    });
}

/// The documented configuration file's settings, `(key, value)`, in order.
fn documented_settings() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../etc/squashfs-mount.conf");
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.strip_prefix('#')?.split_once('=')?;
            let k = k.trim();
            let key = !k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
            key.then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// `--policy`'s `key = value` lines (notes after `#` left out).
fn shown_settings(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('/'))
        .filter_map(|l| {
            let (k, v) = l.split_once(" =")?;
            let v = v.split("  #").next().unwrap_or("").trim();
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// Issue 39, item 5: `--policy` (text and `--json`) says whether the
/// configuration file was read or ignored, and why, and shows every key
/// in force, the cache and resource keys included: with no file, exactly
/// the defaults the documented file lists, in its order.
#[test]
fn policy_says_whether_the_file_was_read_and_shows_every_key() {
    case(|fx| {
        let documented = documented_settings();
        assert!(documented.len() > 20, "{documented:?}");
        {
            let _conf = site::no_config();
            let r = fx.run(["--policy"]);
            r.ok();
            assert_eq!(shown_settings(&r.stdout()), documented, "{}", r.stdout());
        }
        {
            let _conf = site::config("kernel-images = none\n");
            fs::set_permissions(
                "/etc/squashfs-mount.conf",
                fs::Permissions::from_mode(0o664),
            )
            .unwrap();
            let r = fx.run(["--policy"]);
            r.ok();
            let out = r.stdout();
            assert!(r.stderr().contains("ignored"), "{}", r.stderr());
            assert!(!out.contains("in force: /etc/squashfs-mount.conf"), "{out}");
            assert!(
                out.contains("the built-in defaults (/etc/squashfs-mount.conf is ignored: it is writable by its group (mode 0664)"),
                "{out}"
            );
            assert!(out.contains("\nkernel-images = trusted\n"), "{out}");
            let r = fx.run(["--policy", "--json"]);
            let out = r.stdout();
            assert!(out.contains("\"config_file_state\":\"ignored\""), "{out}");
            assert!(
                out.contains("\"config_file_ignored_because\":\"it is writable by its group"),
                "{out}"
            );
        }
        {
            let _conf = site::config(
                "cache-max-idle = 2m\nno-such-key = 1\nmax-loop-devices = 300\nmax-loop-devices-per-user = 10%\n",
            );
            let r = fx.run(["--policy"]);
            r.ok();
            let out = r.stdout();
            assert!(
                out.contains("# site policy in force: /etc/squashfs-mount.conf (built-in defaults where it sets nothing)\n# it sets: max-loop-devices, max-loop-devices-per-user, cache-max-idle\n# skipped: line 2: unknown key 'no-such-key'; skipped\n"),
                "{out}"
            );
            let shown = shown_settings(&out);
            let keys: Vec<&String> = shown.iter().map(|(k, _)| k).collect();
            let listed: Vec<&String> = documented.iter().map(|(k, _)| k).collect();
            assert_eq!(keys, listed, "{out}");
            for (k, v) in [("cache-max-idle", "2m"), ("max-loop-devices", "300")] {
                assert!(shown.contains(&(k.into(), v.into())), "{k}: {out}");
            }
            assert!(
                out.contains("max-loop-devices-per-user = 10%  # 30 loop devices"),
                "{out}"
            );
            let r = fx.run(["--policy", "--json"]);
            let out = r.stdout();
            assert!(out.contains("\"config_file_state\":\"read\""), "{out}");
            assert!(
                out.contains("\"config_file_sets\":[\"max-loop-devices\",\"max-loop-devices-per-user\",\"cache-max-idle\"]"),
                "{out}"
            );
            for (k, _) in &documented {
                assert!(out.contains(&format!("\"{k}\":")), "{k}: {out}");
            }
            assert!(out.contains("\"cache-max-idle\":\"2m\""), "{out}");
        }
    });
}
