//! Shared fixture of the integration suites: a temporary prefix with the
//! setuid binary installed (root, 4755), an unprivileged test user, images
//! built with mksquashfs, and a per-test check that no loop device or mount
//! is left behind.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub const USER: &str = "sqfsmnt-test";
pub const GROUP2: &str = "sqfsmnt-test2";

pub struct Fixture {
    pub root: PathBuf,
    pub bin: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub gid2: u32,
}

static FIXTURE: OnceLock<Option<Fixture>> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

fn sh(cmd: &str) -> Output {
    Command::new("sh").arg("-c").arg(cmd).output().expect("sh")
}

fn must(cmd: &str) {
    let out = sh(cmd);
    assert!(
        out.status.success(),
        "setup command failed: {cmd}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn id_of(flag: &str, name: &str) -> u32 {
    let out = sh(&format!("id {flag} {name}"));
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("id")
}

pub fn is_root() -> bool {
    sh("id -u").stdout == b"0\n"
}

/// The fixture, or `None` (after saying so loudly) when not root.
pub fn fixture() -> Option<&'static Fixture> {
    FIXTURE
        .get_or_init(|| {
            if !is_root() {
                eprintln!(
                    "\n*** SKIPPED: the squashfs-mount integration tests need root (they install a setuid binary and create a test user). Run `make test` as root. ***\n"
                );
                return None;
            }
            Some(setup())
        })
        .as_ref()
}

fn setup() -> Fixture {
    // Remove what earlier runs of this suite left (their process is gone).
    if let Ok(entries) = fs::read_dir("/tmp") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("sqfsmnt-it-") {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }
    must(&format!("getent group {GROUP2} >/dev/null || groupadd --system {GROUP2}"));
    must(&format!(
        "id {USER} >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/sh {USER}"
    ));
    let root = PathBuf::from(format!("/tmp/sqfsmnt-it-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    for d in ["bin", "images", "mnt", "trees", "private", "user"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    let bin = root.join("bin/squashfs-mount");
    fs::copy(env!("CARGO_BIN_EXE_squashfs-mount"), &bin).unwrap();
    must(&format!("chown root:root {0} && chmod 4755 {0}", bin.display()));
    must(&format!("chmod 700 {}", root.join("private").display()));
    let fx = Fixture {
        uid: id_of("-u", USER),
        gid: id_of("-g", USER),
        gid2: {
            let out = sh(&format!("getent group {GROUP2} | cut -d: -f3"));
            String::from_utf8_lossy(&out.stdout).trim().parse().expect("group id")
        },
        bin,
        root,
    };
    must(&format!("chown {}:{} {}", fx.uid, fx.gid, fx.user_dir().display()));
    fx
}

impl Fixture {
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
    pub fn user_dir(&self) -> PathBuf {
        self.root.join("user")
    }

    /// Builds `images/<name>.sqfs` from files given as (path, content);
    /// `extra` runs in the tree (as root) before packing.
    pub fn image(&self, name: &str, files: &[(&str, &str)], extra: &str) -> PathBuf {
        let tree = self.root.join("trees").join(name);
        let image = self.root.join("images").join(format!("{name}.sqfs"));
        if image.exists() {
            return image;
        }
        fs::create_dir_all(&tree).unwrap();
        for (p, content) in files {
            let f = tree.join(p);
            fs::create_dir_all(f.parent().unwrap()).unwrap();
            fs::write(&f, content).unwrap();
        }
        if !extra.is_empty() {
            must(&format!("cd {} && {extra}", tree.display()));
        }
        must(&format!(
            "chmod -R a+rX {t} && mksquashfs {t} {i} -quiet -noappend -no-progress -comp zstd >/dev/null",
            t = tree.display(),
            i = image.display()
        ));
        image
    }

    /// A root-owned 0755 directory to mount on.
    pub fn mount_point(&self, name: &str) -> PathBuf {
        let p = self.root.join("mnt").join(name);
        fs::create_dir_all(&p).unwrap();
        p
    }

    pub fn symlink(&self, target: impl AsRef<Path>, name: &str) -> PathBuf {
        let p = self.root.join("mnt").join(name);
        let _ = fs::remove_file(&p);
        symlink(target, &p).unwrap();
        p
    }

    /// `squashfs-mount <args>` as the test user.
    pub fn user_cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg(format!("--groups={}", self.gid2))
            .arg("--")
            .arg(&self.bin)
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null());
        c
    }

    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Run(self.user_cmd(args).output().expect("run squashfs-mount"))
    }

    /// A shell command line run as the test user (for redirections etc).
    pub fn user_sh(&self, script: &str) -> Run {
        let out = Command::new("setpriv")
            .arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg(format!("--groups={}", self.gid2))
            .args(["--", "sh", "-c", script])
            .env("SQM", &self.bin)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output()
            .expect("sh");
        Run(out)
    }
}

pub struct Run(pub Output);

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    pub fn code(&self) -> Option<i32> {
        self.0.status.code()
    }
    #[track_caller]
    pub fn ok(&self) -> &Self {
        assert!(
            self.0.status.success(),
            "expected success, got {:?}\nstdout: {}\nstderr: {}",
            self.0.status,
            self.stdout(),
            self.stderr()
        );
        self
    }
    /// Refused by squashfs-mount itself: exit 1, one line on stderr that
    /// contains every word of `needles`, and no internal error.
    #[track_caller]
    pub fn refused(&self, needles: &[&str]) -> &Self {
        let err = self.stderr();
        assert_eq!(self.code(), Some(1), "expected exit 1\nstdout: {}\nstderr: {err}", self.stdout());
        assert!(!err.contains("internal error"), "panic: {err}");
        assert!(err.starts_with("squashfs-mount: "), "stderr: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "more than one line: {err}");
        for n in needles {
            assert!(err.contains(n), "stderr lacks {n:?}: {err}");
        }
        self
    }
}

/// Attached loop devices (those with a backing file) whose backing file is
/// under `prefix` (all of this suite's images are under its fixture root;
/// other programs on the machine may attach their own meanwhile).
pub fn attached_loop_devices_under(prefix: &Path) -> usize {
    let prefix = prefix.to_string_lossy().into_owned();
    fs::read_dir("/sys/block")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
                .filter_map(|e| fs::read_to_string(e.path().join("loop/backing_file")).ok())
                .filter(|backing| backing.starts_with(&prefix))
                .count()
        })
        .unwrap_or(0)
}

/// Mounts in this (the host's) namespace on or below the fixture root.
fn tool_mounts(root: &Path) -> usize {
    let root = root.to_string_lossy().into_owned();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').nth(4).is_some_and(|mp| mp.starts_with(&root)))
        .count()
}

fn evict_cached_instances(fx: &Fixture) {
    let gc = Command::new(&fx.bin).args(["--gc", "--all"]).output().expect("squashfs-mount --gc --all");
    assert!(gc.status.success(), "root --gc --all: {}", String::from_utf8_lossy(&gc.stderr));
}

/// Runs one test case: serialised, and afterwards the number of attached
/// loop devices backed by the suite's images, and of mounts under its root
/// in the host namespace, must be what it was before (autoclear may lag the
/// exit of the command a little).
pub fn case(f: impl FnOnce(&Fixture)) {
    let Some(fx) = fixture() else { return };
    let _serial: MutexGuard<'_, ()> = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The image cache keeps an instance of each image launched (by design):
    // start from an empty cache (a case that failed may have left some), and
    // evict what the case cached, as root, before counting what is left.
    evict_cached_instances(fx);
    let (loops, mounts) = (attached_loop_devices_under(&fx.root), tool_mounts(&fx.root));
    f(fx);
    evict_cached_instances(fx);
    let deadline = Instant::now() + Duration::from_secs(5);
    while attached_loop_devices_under(&fx.root) != loops && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(attached_loop_devices_under(&fx.root), loops, "loop devices leaked");
    assert_eq!(tool_mounts(&fx.root), mounts, "mounts leaked into the host namespace");
}
