//! The three paths an image can take (issue 10, README "Security model"):
//! the kernel's squashfs driver (root's images), the FUSE path (the
//! caller's own images, served by squashfs-mount-fuse with the caller's
//! rights) and rootless mode (the binary without its setuid bit: a user
//! namespace, everything through FUSE). Each passes the same behaviour
//! table, as an unprivileged test user; then what is particular to FUSE:
//! a killed command leaves no server and no mount, damaged images give a
//! clear error and never a hang.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqfsmnt_test_support::cmd::run;
use sqfsmnt_test_support::{ends, image, install, site, Fixture, Run};
use sqfsmnt_test_support::{pair, s};

use crate::case;

/// One path: the program to run and the images it gets.
struct Way<'a> {
    fx: &'a Fixture,
    bin: PathBuf,
    /// The images: the user's own (FUSE) or root's (kernel).
    own_images: bool,
    /// What `stat -f -c %T` says on a mount point: "squashfs" or "fuse…".
    fs_type: &'static str,
    /// Options given first (rootless: -q).
    first: Vec<String>,
}

impl Way<'_> {
    /// The image `name`, with a directory anyone may write (`scratch`,
    /// mode 1777) for the writable layer.
    fn image(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let built = self.fx.image(name, files, "mkdir -m 1777 scratch");
        if !self.own_images {
            return built;
        }
        let own = self.fx.user_dir().join(format!("{name}.sqfs"));
        fs::copy(&built, &own).unwrap();
        self.fx.user.chown(&own);
        own
    }

    fn command(&self) -> Command {
        let mut c = self.fx.user.command(&self.bin);
        c.args(&self.first)
            .current_dir(&self.fx.root)
            .stdin(Stdio::null());
        c
    }

    fn run<I: IntoIterator<Item = String>>(&self, args: I) -> Run {
        run(self.command().args(args))
    }

    /// Runs and expects success with nothing on stderr; returns stdout.
    fn ok<I: IntoIterator<Item = String>>(&self, args: I) -> String {
        let r = self.run(args);
        assert!(r.success(), "{}: {}", self.bin.display(), r.stderr());
        assert!(
            r.stderr().is_empty(),
            "a successful launch prints nothing: {}",
            r.stderr()
        );
        r.stdout()
    }

    fn is_our_fs(&self, t: &str) -> bool {
        t.trim().starts_with(self.fs_type)
    }
}

/// The images and mount points of the behaviour table.
struct TableImages {
    a: PathBuf,
    b: PathBuf,
    m: PathBuf,
    m2: PathBuf,
}

/// The behaviour table every path passes: a row a behaviour.
const BEHAVIOUR_TABLE: &[fn(&Way, &TableImages)] = &[
    row_contents_type_and_status,
    row_nested_images,
    row_union,
    row_writable_layer,
    row_uenv_bind_mount,
    row_forwarded_environment,
    row_caller_without_capabilities,
];

fn behaviour_table(w: &Way) {
    let fx = w.fx;
    let a = w.image(
        "ta",
        &[
            ("hello.txt", "hello from a\n"),
            ("which", "a\n"),
            ("sub/.keep", ""),
        ],
    );
    let b = w.image("tb", &[("b.txt", "bee\n"), ("which", "b\n")]);
    let t = TableImages {
        a,
        b,
        m: fx.mount_point("table"),
        m2: fx.mount_point("table2"),
    };
    for row in BEHAVIOUR_TABLE {
        row(w, &t);
    }
}

/// Contents, the file system type, and the command's exit status.
fn row_contents_type_and_status(w: &Way, t: &TableImages) {
    let (a, m) = (&t.a, &t.m);
    let r = w.run([
        pair(a, m),
        "--".into(),
        "sh".into(),
        "-c".into(),
        format!("cat {0}/hello.txt; stat -f -c %T {0}; exit 7", s(m)),
    ]);
    assert_eq!(r.code(), Some(7), "{}", r.stderr());
    assert!(r.stderr().is_empty(), "{}", r.stderr());
    let out = r.stdout();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "hello from a");
    assert!(w.is_our_fs(lines[1]), "{out}");
}

/// Several images, one nested in the other, and UENV_MOUNT_LIST.
fn row_nested_images(w: &Way, t: &TableImages) {
    let (a, b, m) = (&t.a, &t.b, &t.m);
    let nested = m.join("sub");
    let out = w.ok([
        pair(a, m),
        pair(b, &nested),
        "--".into(),
        "sh".into(),
        "-c".into(),
        format!(
            "cat {}/hello.txt {}/b.txt; echo \"$UENV_MOUNT_LIST\"",
            s(m),
            s(&nested)
        ),
    ]);
    assert_eq!(
        out,
        format!(
            "hello from a\nbee\n{}:{},{}:{}\n",
            s(a),
            s(m),
            s(b),
            s(&nested)
        )
    );
}

/// A union: the first image on top; both images' files.
fn row_union(w: &Way, t: &TableImages) {
    let (a, b, m2) = (&t.a, &t.b, &t.m2);
    let out = w.ok([
        format!("--union={},{}:{}", s(b), s(a), s(m2)),
        "--".into(),
        "sh".into(),
        "-c".into(),
        format!(
            "cat {0}/which {0}/hello.txt {0}/b.txt; touch {0}/x 2>/dev/null || echo read-only",
            s(m2)
        ),
    ]);
    assert_eq!(out, "b\nhello from a\nbee\nread-only\n");
}

/// A writable layer: writes succeed, the image is unchanged, and the
/// next launch starts clean.
fn row_writable_layer(w: &Way, t: &TableImages) {
    let (a, m) = (&t.a, &t.m);
    let script = format!(
        "test -e {0}/scratch/new && echo stale; echo written > {0}/scratch/new && cat {0}/scratch/new {0}/hello.txt",
        s(m)
    );
    for _ in 0..2 {
        let out = w.ok([
            "--writable=16M".into(),
            pair(a, m),
            "--".into(),
            "sh".into(),
            "-c".into(),
            script.clone(),
        ]);
        assert_eq!(out, "written\nhello from a\n");
    }
}

/// -r and --bind-mount (uenv's squashfs-mount): a mount point that does
/// not exist, and a bind destination missing inside the image, are
/// created in the command's view only; the bind is written through as
/// the caller; UENV_MOUNT_LIST lists the image only.
fn row_uenv_bind_mount(w: &Way, t: &TableImages) {
    let fx = w.fx;
    let a = &t.a;
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let top = PathBuf::from(format!("/sqfsmnt-{}-table-{n}", std::process::id()));
    let src = fx.user_dir().join(format!("bindsrc-{n}"));
    fs::create_dir(&src).unwrap();
    fs::write(src.join("f"), "bound\n").unwrap();
    fx.user.chown(&src);
    let out = w.ok([
        "-r".into(),
        pair(a, &top),
        format!("--bind-mount={}:{}/bound", s(&src), s(&top)),
        "--".into(),
        "sh".into(),
        "-c".into(),
        format!(
            "cat {0}/hello.txt {0}/bound/f; echo \"$UENV_MOUNT_LIST\"; echo w > {0}/bound/w; touch /new 2>/dev/null || echo read-only",
            s(&top)
        ),
    ]);
    assert_eq!(
        out,
        format!("hello from a\nbound\n{}:{}\nread-only\n", s(a), s(&top))
    );
    assert!(
        fs::symlink_metadata(&top).is_err(),
        "{} made on the host",
        s(&top)
    );
    assert_eq!(fs::read_to_string(src.join("w")).unwrap(), "w\n");
    let st = fs::metadata(src.join("w")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((st.uid(), st.gid()), (fx.uid, fx.gid));
}

/// The environment: SQFSMNT_FWD_ names reach the command.
fn row_forwarded_environment(w: &Way, t: &TableImages) {
    let (a, m) = (&t.a, &t.m);
    let out = run(w
        .command()
        .env("SQFSMNT_FWD_LD_LIBRARY_PATH", "fwd")
        .env("SQFSMNT_FWD_MY_VAR", "mine")
        .args([pair(a, m), "--".into(), "env".into()]));
    assert!(out.success(), "{}", out.stderr());
    let env = out.stdout();
    assert!(env.lines().any(|l| l == "LD_LIBRARY_PATH=fwd"), "{env}");
    assert!(env.lines().any(|l| l == "MY_VAR=mine"), "{env}");
}

/// The command runs as the caller with no capabilities.
fn row_caller_without_capabilities(w: &Way, t: &TableImages) {
    let fx = w.fx;
    let (a, m) = (&t.a, &t.m);
    let out = w.ok([
        pair(a, m),
        "--".into(),
        "sh".into(),
        "-c".into(),
        "id -u; grep ^CapEff /proc/self/status".into(),
    ]);
    assert_eq!(
        out,
        format!("{}\nCapEff:\t0000000000000000\n", fx.uid),
        "{out}"
    );
}

#[test]
fn kernel_path_behaviour_table() {
    case(|fx| {
        let _conf = site::no_config();
        behaviour_table(&Way {
            fx,
            bin: fx.bin.clone(),
            own_images: false,
            fs_type: "squashfs",
            first: vec![],
        });
    });
}

#[test]
fn fuse_path_behaviour_table() {
    case(|fx| {
        let _conf = site::no_config();
        behaviour_table(&Way {
            fx,
            bin: fx.bin.clone(),
            own_images: true,
            fs_type: "fuse",
            first: vec![],
        });
    });
}

#[test]
fn rootless_behaviour_table() {
    case(|fx| {
        let _conf = site::no_config();
        let _fuse = site::FuseForUsers::enable();
        let bin = fx.rootless_copy();
        for own_images in [false, true] {
            behaviour_table(&Way {
                fx,
                bin: bin.clone(),
                own_images,
                fs_type: "fuse",
                first: vec!["-q".into()],
            });
        }
        // Every file shows as the caller's: the user namespace maps no
        // other id (root's files would be "nobody", and could not be copied
        // up into a writable layer).
        let m = fx.mount_point("owner");
        let r = run(fx.user.command(&bin).args([
            "-q".into(),
            pair(&fx.image("ta", &[], ""), &m),
            "--".into(),
            "stat".into(),
            "-c".into(),
            "%u:%g".into(),
            s(&m.join("hello.txt")),
        ]));
        assert_eq!(
            r.stdout(),
            format!("{}:{}\n", fx.uid, fx.gid),
            "{}",
            r.stderr()
        );
        // Without -q: one note on stderr, saying why it is slower.
        let m = fx.mount_point("note");
        let r = run(fx.user.command(&bin).args([
            pair(&fx.image("ta", &[], ""), &m),
            "--".into(),
            "true".into(),
        ]));
        assert!(r.success(), "{}", r.stderr());
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("not installed setuid root")
                && err.contains("FUSE")
                && err.contains("--quiet"),
            "{err}"
        );
    });
}

/// Processes of `uid` (from /proc).
fn processes_of(uid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(status) = fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let owner = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse::<u32>().ok());
        let ended = status
            .lines()
            .find_map(|l| l.strip_prefix("State:"))
            .is_some_and(|st| matches!(st.trim().chars().next(), Some('Z' | 'X')));
        if owner == Some(uid) && !ended {
            let name = status
                .lines()
                .find_map(|l| l.strip_prefix("Name:"))
                .unwrap_or("")
                .trim()
                .to_string();
            out.push(format!("{} {name}", e.file_name().to_string_lossy()));
        }
    }
    out
}

#[test]
fn sigkill_of_the_command_leaves_no_fuse_server_and_no_mount() {
    case(|fx| {
        let _conf = site::no_config();
        let own = fx.user_image("kill", &[("which", "own\n")]);
        let m = fx.mount_point("kill");
        for rootless in [false, true] {
            let _fuse = rootless.then(site::FuseForUsers::enable);
            let bin = if rootless {
                fx.rootless_copy()
            } else {
                fx.bin.clone()
            };
            let mut child = fx
                .user
                .command(&bin)
                .args([
                    "-q".into(),
                    pair(&own, &m),
                    "--".into(),
                    "sleep".into(),
                    "600".into(),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            // runuser forks the tool: wait for the command (sleep) and the
            // server to run as the user.
            let deadline = Instant::now() + ends::HANG;
            let mut procs;
            loop {
                procs = processes_of(fx.uid);
                let sleeping = procs.iter().any(|p| p.ends_with(" sleep"));
                let serving = procs.iter().any(|p| p.contains("squashfs-mount-"));
                if sleeping && serving {
                    break;
                }
                assert!(Instant::now() < deadline, "rootless={rootless}: {procs:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
            let sleep_pid: i32 = procs
                .iter()
                .find(|p| p.ends_with(" sleep"))
                .and_then(|p| p.split(' ').next())
                .and_then(|p| p.parse().ok())
                .unwrap();
            // SAFETY: kill(2) with a pid read from /proc and a signal number.
            let killed = unsafe { libc::kill(sleep_pid, libc::SIGKILL) };
            assert_eq!(killed, 0);
            let _ = child.wait();
            if !rootless {
                // The setuid path keeps the user's FUSE instance in the
                // image cache, server and all (until evicted): the user's
                // --gc ends it.
                fx.run(["--gc"]).ok();
            }
            // Each of the user's processes ends: waited for on its pidfd (a
            // zombie PID 1 has yet to reap has ended).
            let pids: Vec<u32> = processes_of(fx.uid)
                .iter()
                .filter_map(|p| p.split(' ').next()?.parse().ok())
                .collect();
            ends::wait_ended(&pids, ends::HANG);
            assert_eq!(
                processes_of(fx.uid),
                Vec::<String>::new(),
                "rootless={rootless}: left running after SIGKILL of the command"
            );
            let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
            assert!(
                !mounts
                    .lines()
                    .any(|l| l.contains(" fuse") && l.contains(&s(&own))),
                "{mounts}"
            );
        }
    });
}

#[test]
fn damaged_own_images_give_a_clear_error_and_never_hang() {
    case(|fx| {
        let _conf = site::no_config();
        let good = fx.user_image("dmg", &[("which", "own\n"), ("sub/f", "f\n")]);
        let m = fx.mount_point("damaged");
        let bytes = fs::read(&good).unwrap();
        let write = |name: &str, b: &[u8]| {
            let p = fx.path(&format!("user/{name}"));
            fs::write(&p, b).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
            fx.user.chown(&p);
            p
        };
        // Truncated: refused by the tool's own checks before any mount.
        let trunc = fx.path("user/trunc.sqfs");
        image::truncated_copy(&good, &trunc);
        fx.user.chown(&trunc);
        // Its inode table overwritten (superblock intact): only a reader
        // that parses the metadata sees the damage; by policy that is the
        // FUSE path here, never the kernel.
        let mut crafted = bytes.clone();
        let it = u64::from_le_bytes(crafted[64..72].try_into().unwrap()) as usize;
        let dt = u64::from_le_bytes(crafted[72..80].try_into().unwrap()) as usize;
        crafted[it..dt].fill(0xff);
        let crafted = write("crafted.sqfs", &crafted);
        for (img, needle) in [(trunc, "truncated"), (crafted, "corrupt")] {
            let policy = fx.run(["--policy".to_string(), s(&img)]);
            assert!(
                !policy.stdout().contains(": kernel ("),
                "STOP: would reach the kernel: {}",
                policy.stdout()
            );
            // (A launch that hangs fails at the run's time limit.)
            let name = img.file_name().unwrap().to_string_lossy().into_owned();
            fx.launch_true(&img, &m).refused(&[needle, &name]);
        }
    });
}

/// Copies `from` to `to` (mode 0755) owned by the case's user, creating
/// the directories on the way as the user's.
fn user_copy(fx: &Fixture, from: &std::path::Path, to: &std::path::Path) {
    let mut missing = Vec::new();
    let mut d = to.parent().unwrap();
    while !d.exists() {
        missing.push(d.to_path_buf());
        d = d.parent().unwrap();
    }
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    for d in missing {
        fx.user.chown(&d);
    }
    fs::copy(from, to).unwrap();
    fs::set_permissions(to, fs::Permissions::from_mode(0o755)).unwrap();
    fx.user.chown(to);
}

/// The installed FUSE server (next to the fixture's setuid binary).
fn installed_server(fx: &Fixture) -> PathBuf {
    fx.root
        .join("lib/squashfs-mount")
        .join(install::FUSE_SERVER)
}

/// The FUSE server installed in a system place, if there is one.
fn system_fuse_server() -> Option<PathBuf> {
    ["/usr/local/lib", "/usr/lib", "/usr/libexec"]
        .iter()
        .map(|d| {
            PathBuf::from(d)
                .join("squashfs-mount")
                .join(install::FUSE_SERVER)
        })
        .find(|p| p.exists())
}

/// A rootless copy of squashfs-mount alone (no server beside it) finds its
/// server next to itself, in `../libexec/squashfs-mount/` or on PATH, and
/// when there is none it says where it looked. The setuid binary never
/// looks on PATH: only its fixed, root-owned place.
#[test]
fn rootless_mode_finds_its_fuse_server_and_says_where_it_looked() {
    case(|fx| {
        let _conf = site::no_config();
        let _fuse = site::FuseForUsers::enable();
        let base = fx.path("user/alone");
        let bin = base.join("bin/squashfs-mount");
        user_copy(fx, &fx.bin, &bin);
        let img = fx.user_image("alone", &[("hello.txt", "alone\n")]);
        let m = fx.mount_point("alone");
        let launch = |bin: &std::path::Path, path: &str| {
            run(fx
                .user
                .command(bin)
                .args([
                    "-q".into(),
                    pair(&img, &m),
                    "--".into(),
                    "cat".into(),
                    s(&m.join("hello.txt")),
                ])
                .env("PATH", path)
                .current_dir(&fx.root))
        };
        let system_server = system_fuse_server();
        let tools = base.join("tools");
        let path = format!("{}:/usr/bin:/bin", tools.display());
        match &system_server {
            Some(p) => sqfsmnt_test_support::loud_skip(&format!(
                "rootless mode without a server: this host has {} installed, which rootless mode finds",
                p.display()
            )),
            None => {
                let r = launch(&bin, &path);
                r.refused(&[
                    "rootless mode",
                    "squashfs-mount-fuse was not found",
                    &format!("{}/lib/squashfs-mount/squashfs-mount-fuse", base.display()),
                    &format!("{}/libexec/squashfs-mount/squashfs-mount-fuse", base.display()),
                    &format!("{}/bin/squashfs-mount-fuse", base.display()),
                    &format!("{}/squashfs-mount-fuse", tools.display()),
                    "install it next to squashfs-mount or on PATH",
                ]);
            }
        }
        // Each place on its own.
        let server = installed_server(fx);
        for place in [
            base.join("bin"),
            base.join("libexec/squashfs-mount"),
            tools.clone(),
        ] {
            let copy = place.join(install::FUSE_SERVER);
            user_copy(fx, &server, &copy);
            let r = launch(&bin, &path);
            assert!(
                r.success() && r.stdout() == "alone\n",
                "server in {}: {r:?}",
                place.display()
            );
            fs::remove_file(&copy).unwrap();
        }

        // The setuid binary: a copy whose own place has no server, with
        // one on PATH; it is not used.
        let prefix = fx.path("setuid-alone");
        let setuid = install::install(&fx.bin, &prefix, 0o4755);
        user_copy(fx, &server, &tools.join(install::FUSE_SERVER));
        let r = launch(&setuid, &path);
        fs::remove_dir_all(&prefix).unwrap();
        r.refused(&[&format!(
            "{}/lib/squashfs-mount/squashfs-mount-fuse cannot be opened",
            prefix.display()
        )]);
        assert!(!r.stderr().contains(&tools.display().to_string()), "{r:?}");
    });
}

/// Rootless mode keeps no image cache: `--cache-status` and `--gc` say so
/// and succeed (they used to fail, naming the program twice).
#[test]
fn rootless_mode_has_no_image_cache_to_show_or_evict() {
    case(|fx| {
        let _conf = site::no_config();
        let bin = fx.rootless_copy();
        let img = fx.user_image("nocache", &[]);
        for args in [
            vec!["--cache-status".to_string()],
            vec!["--gc".into()],
            vec!["--gc".into(), "--expired".into()],
            vec!["--gc".into(), "--all".into()],
            vec!["--gc".into(), s(&img)],
        ] {
            let r = run(fx.user.command(&bin).args(&args));
            assert!(r.success(), "{args:?}: {r:?}");
            assert!(r.stderr().is_empty(), "{args:?}: {r:?}");
            assert!(
                r.stdout().starts_with(
                    "no image cache: squashfs-mount is not installed setuid root here"
                ) && r.stdout().contains("rootless mode keeps no cache"),
                "{args:?}: {r:?}"
            );
        }
        let r = run(fx.user.command(&bin).args(["--cache-status", "--json"]));
        assert!(
            r.success() && r.stdout() == "[]\n" && r.stderr().is_empty(),
            "{r:?}"
        );
    });
}
