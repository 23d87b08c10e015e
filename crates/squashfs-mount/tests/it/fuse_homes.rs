//! Images on FUSE file systems and the image cache (issue 30, item 4): an
//! image on a FUSE mount root made for everyone (a cluster file system's
//! client such as GlusterFS; here squashfuse run by root with
//! `allow_other`, named in `trusted-fuse`) is cached like one on root's disk, on both paths, so a
//! second launch is warm; one on a FUSE mount a user made, or on one of
//! this tool's own FUSE mounts, never is. As unprivileged test users
//! against the installed setuid binary.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sqfsmnt_test_support::cmd::run;
use sqfsmnt_test_support::fixture::evict_cached_instances;
use sqfsmnt_test_support::users::User;
use sqfsmnt_test_support::{have, loud_skip, pair, s, site, Fixture};

use crate::case;

/// A squashfuse mount of `image` on `dir` by `user` (root when `None`),
/// with `allow_other`, `default_permissions` and `ro` (as GlusterFS mounts
/// it: the kernel checks modes); unmounted (after evicting every cached instance,
/// which may hold files of it open) when dropped.
pub(crate) struct Squashfuse {
    pub(crate) dir: PathBuf,
    bin: PathBuf,
}

impl Squashfuse {
    pub(crate) fn mount(fx: &Fixture, user: Option<&User>, image: &Path, dir: &Path) -> Squashfuse {
        fs::create_dir_all(dir).unwrap();
        let mut cmd = match user {
            Some(u) => {
                u.chown(dir);
                u.command("squashfuse")
            }
            None => Command::new("squashfuse"),
        };
        let r = run(cmd
            .args(["-o", "allow_other,default_permissions,ro"])
            .arg(image)
            .arg(dir));
        assert!(
            r.success(),
            "squashfuse {}: {}",
            image.display(),
            r.stderr()
        );
        let deadline = Instant::now() + sqfsmnt_test_support::ends::HANG;
        while !dir.join("root.sqfs").exists() {
            assert!(
                Instant::now() < deadline,
                "squashfuse did not mount {}",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Squashfuse {
            dir: dir.to_path_buf(),
            bin: fx.bin.clone(),
        }
    }
}

impl Drop for Squashfuse {
    fn drop(&mut self) {
        evict_cached_instances(&self.bin);
        let r = run(Command::new("umount").arg(&self.dir));
        if !r.success() {
            let _ = run(Command::new("umount").arg("-l").arg(&self.dir));
        }
    }
}

/// The outer image: `root.sqfs` (root's, mode 0644) and `own.sqfs` (the
/// same bytes, owned by the case's user), both holding `f`.
fn outer(fx: &Fixture) -> PathBuf {
    let inner = fx.image("homes-inner", &[("f", "inner\n")], "");
    fx.image(
        "homes-outer",
        &[],
        &format!(
            "cp {i} root.sqfs && cp {i} own.sqfs && chown {u}:{g} own.sqfs",
            i = s(&inner),
            u = fx.uid,
            g = fx.gid
        ),
    )
}

/// Two launches of `image` by the case's user with `--verbose`: both read
/// `f`; returns what each said on stderr.
fn twice(fx: &Fixture, image: &Path, m: &Path) -> [String; 2] {
    let args = [
        "-v".to_string(),
        pair(image, m),
        "--".into(),
        "cat".into(),
        s(&m.join("f")),
    ];
    [0, 1].map(|_| {
        let r = fx.run(&args);
        assert!(r.success(), "{}: {}", image.display(), r.stderr());
        assert_eq!(r.stdout(), "inner\n");
        r.stderr()
    })
}

/// On root's FUSE mount, the second launch reuses the first one's
/// instance: root's image through the kernel, the user's own copy through
/// the user's FUSE server. On the user's own FUSE mount of the same
/// image, both go to FUSE (its server decides their bytes) and neither
/// is kept.
#[test]
fn images_on_roots_fuse_mount_are_cached_and_on_a_users_are_not() {
    if !have("squashfuse") {
        return loud_skip("FUSE homes test: squashfuse missing (scripts/deps test installs it)");
    }
    case(|fx| {
        // Root's squashfuse stands for a cluster file system's client: the
        // site names it as one whose server enforces ownership (by default
        // only GlusterFS's and CephFS's are: policy.rs,
        // roots_fuse_mounts_are_trusted_only_where_the_site_says_so).
        let _conf = site::config("trusted-fuse = squashfuse\n");
        let outer = outer(fx);
        let m = fx.mount_point("homes");
        {
            let roots = Squashfuse::mount(fx, None, &outer, &fx.path("fuse-homes/root"));
            let [first, second] = twice(fx, &roots.dir.join("root.sqfs"), &m);
            assert!(first.contains(": kernel (trusted"), "{first}");
            assert!(first.contains("kept in the image cache"), "{first}");
            assert!(second.contains("cached instance reused"), "{second}");
            let [first, second] = twice(fx, &roots.dir.join("own.sqfs"), &m);
            assert!(first.contains(": FUSE ("), "{first}");
            assert!(first.contains("kept in the image cache"), "{first}");
            assert!(
                second.contains("your cached FUSE instance reused"),
                "{second}"
            );
        }
        let _fuse = site::FuseForUsers::enable();
        let users = Squashfuse::mount(fx, Some(&fx.user), &outer, &fx.path("user/fuse-homes"));
        for name in ["root.sqfs", "own.sqfs"] {
            let said = twice(fx, &users.dir.join(name), &m);
            for line in &said {
                assert!(line.contains(": FUSE ("), "{name}: {line}");
                assert!(
                    line.contains("not cached: the file is on a FUSE file system that a user, or this tool, serves"),
                    "{name}: {line}"
                );
                assert!(!line.contains("reused"), "{name}: {line}");
            }
        }
    });
}

/// This tool's own FUSE mount never counts as root's, also for root: root
/// launches the user's outer image (FUSE path) and, inside, launches the
/// image packed in it twice; neither launch is kept.
#[test]
fn an_image_inside_this_tools_fuse_mount_is_never_cached() {
    case(|fx| {
        let _conf = site::no_config();
        let built = outer(fx);
        let user_outer = fx.path("user/homes-outer.sqfs");
        fs::copy(&built, &user_outer).unwrap();
        fx.user.chown(&user_outer);
        let (m, m2) = (
            fx.mount_point("homes-outer"),
            fx.mount_point("homes-nested"),
        );
        let nested = s(&m.join("root.sqfs"));
        let launch = format!(
            "{} -v {nested}:{} -- cat {}",
            s(&fx.bin),
            s(&m2),
            s(&m2.join("f"))
        );
        let r = run(Command::new(&fx.bin)
            .args([pair(&user_outer, &m), "--".into(), "sh".into(), "-c".into()])
            .arg(format!("{launch} && {launch}"))
            .current_dir(&fx.root));
        assert!(r.success(), "{}", r.stderr());
        assert_eq!(r.stdout(), "inner\ninner\n");
        let err = r.stderr();
        let said: Vec<&str> = err.lines().filter(|l| l.contains(&nested)).collect();
        assert_eq!(said.len(), 2, "{err}");
        for line in said {
            assert!(line.contains(": FUSE ("), "{line}");
            assert!(line.contains("not cached"), "{line}");
        }
    });
}
