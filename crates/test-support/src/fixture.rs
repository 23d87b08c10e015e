//! The fixture of the squashfs-mount suites: the setuid binary installed
//! (root, 4755) into a temporary prefix, images built with mksquashfs, a
//! fresh unprivileged test user per case (member of a supplementary group),
//! and [`case`], which checks that a case leaves no loop device and no
//! mount behind.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::cleanup::{at_exit, run_dir};
use crate::cmd::{run, Run};
use crate::count::{fuse_servers, loops_under, mounts_under};
use crate::unmount::remove_tree;
use crate::users::{User, Users};

/// The tools the squashfs-mount suites need.
pub const TOOLS: &[&str] = &[
    "mksquashfs",
    "setpriv",
    "useradd",
    "userdel",
    "groupadd",
    "groupdel",
];

/// The installed tool, once per process.
pub struct Installed {
    /// The prefix: bin/ (the tool), images/, trees/, mnt/, private/ (0700),
    /// user/ (the case's user's).
    pub root: PathBuf,
    /// `<root>/bin/squashfs-mount`, setuid root.
    pub bin: PathBuf,
}

static INSTALLED: OnceLock<Option<Installed>> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

/// The serialising lock of this process's privileged tests (the image
/// cache and the loop devices are one per machine), and the installed
/// tool (built at `built`, normally `env!("CARGO_BIN_EXE_squashfs-mount")`).
/// `None`, after a loud skip, when the suites cannot run here.
pub fn installed(built: &str) -> Option<(MutexGuard<'static, ()>, &'static Installed)> {
    // Lock first: no other test thread may fork while the setuid binary
    // is being written.
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let inst = INSTALLED
        .get_or_init(|| {
            if !crate::privileged("squashfs-mount integration tests", TOOLS) {
                return None;
            }
            let root = run_dir("tool");
            remove_tree(&root);
            for d in ["bin", "images", "mnt", "trees", "private", "user"] {
                fs::create_dir_all(root.join(d)).expect("mkdir");
            }
            fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod");
            fs::set_permissions(root.join("private"), fs::Permissions::from_mode(0o700))
                .expect("chmod");
            let bin = crate::install::install_setuid(Path::new(built), &root);
            let (r, b) = (root.clone(), bin.clone());
            at_exit(move || {
                let _ = crate::cmd::try_run(Command::new(&b).args(["--gc", "--all"]));
                remove_tree(&r);
            });
            Some(Installed { root, bin })
        })
        .as_ref()?;
    Some((guard, inst))
}

/// What a case gets.
pub struct Fixture {
    pub root: PathBuf,
    pub bin: PathBuf,
    /// The case's user, its primary group and its supplementary group.
    pub uid: u32,
    pub gid: u32,
    pub gid2: u32,
    pub user: User,
    _users: Users,
}

/// Evicts every cached instance (as root).
pub fn evict_cached_instances(bin: &Path) {
    let gc = run(Command::new(bin).args(["--gc", "--all"]));
    assert!(gc.success(), "root --gc --all: {}", gc.stderr());
}

/// Runs one test case: serialised, with a user made for it (beside the
/// case before: [`crate::users::for_case`]; removed afterwards, also when
/// the case panics); afterwards the number of
/// attached loop devices backed by files under the prefix, and of mounts
/// under it in the host namespace, must be what it was before. The image
/// cache keeps an instance of each image launched (by design), so the
/// cache is emptied (`--gc --all` as root) before the case and before
/// counting; autoclear may lag the exit of a command a little.
pub fn case(built: &str, f: impl FnOnce(&Fixture)) {
    let mut times = crate::times::CaseTimes::start();
    let Some((_serial, inst)) = installed(built) else {
        return;
    };
    times.mark("wait");
    let users = crate::users::for_case();
    times.mark("user");
    let user = users.first().clone();
    let user_dir = inst.root.join("user");
    remove_tree(&user_dir);
    fs::create_dir(&user_dir).expect("mkdir user");
    user.chown(&user_dir);
    let fx = Fixture {
        root: inst.root.clone(),
        bin: inst.bin.clone(),
        uid: user.uid,
        gid: user.gid,
        gid2: users.gid2(),
        user,
        _users: users,
    };
    evict_cached_instances(&fx.bin);
    let (loops, mounts) = (loops_under(&fx.root).len(), mounts_under(&fx.root).len());
    let servers = fuse_servers();
    // The FUSE path opens /dev/fuse as the user.
    let fuse = crate::site::FuseDevice::open_to_all();
    times.mark("setup");
    f(&fx);
    times.mark("body");
    drop(fuse);
    evict_cached_instances(&fx.bin);
    // Autoclear detaches a loop device once its last mount is gone (a
    // namespace goes with its last process): waited for, not sampled once.
    let detached = || loops_under(&fx.root).len() == loops;
    let deadline = std::time::Instant::now() + crate::ends::HANG;
    while !detached() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        loops_under(&fx.root).len(),
        loops,
        "loop devices leaked: {:?}",
        loops_under(&fx.root)
    );
    // Every FUSE server the case started ends once its instance is evicted
    // (the machine lock keeps other launches out meanwhile): each one's end
    // is waited for on its pidfd.
    let started: Vec<u32> = fuse_servers()
        .into_iter()
        .filter(|p| !servers.contains(p))
        .collect();
    assert_eq!(
        crate::ends::wait_ended(&started, crate::ends::HANG),
        Vec::<u32>::new(),
        "FUSE servers left running after --gc --all"
    );
    assert_eq!(
        mounts_under(&fx.root).len(),
        mounts,
        "mounts leaked into the host namespace: {:?}",
        mounts_under(&fx.root)
    );
    times.mark("checks");
}

impl Fixture {
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The case's user's own directory (`<root>/user`, fresh for each case).
    pub fn user_dir(&self) -> PathBuf {
        self.root.join("user")
    }

    /// The installed binary and its FUSE server copied into the user's
    /// directory without the setuid bit, as a user installs it (rootless
    /// mode). Returns the copy of the binary.
    pub fn rootless_copy(&self) -> PathBuf {
        let prefix = self.path("user/own-prefix");
        let bin = crate::install::install(&self.bin, &prefix, 0o755);
        // The server installed next to the setuid binary (install_fuse_server
        // takes a program beside it).
        let installed_server = self
            .root
            .join("lib/squashfs-mount")
            .join(crate::install::FUSE_SERVER);
        crate::install::install_fuse_server(&installed_server, &prefix);
        for p in [&bin, &prefix] {
            std::os::unix::fs::chown(p, Some(self.uid), Some(self.gid)).unwrap();
        }
        bin
    }

    /// Builds `images/<name>.sqfs` (zstd) from files given as (path,
    /// content), once per process; `extra` runs in the tree (as root)
    /// before packing.
    pub fn image(&self, name: &str, files: &[(&str, &str)], extra: &str) -> PathBuf {
        let image = self.root.join("images").join(format!("{name}.sqfs"));
        if !image.exists() {
            crate::image::build(
                &self.root.join("trees").join(name),
                &image,
                files,
                extra,
                &["-comp", "zstd"],
            );
        }
        image
    }

    /// The image `name` (see [`Fixture::image`]) copied into the user's own
    /// directory and owned by the user: by default the FUSE path serves it.
    pub fn user_image(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let built = self.image(name, files, "");
        let own = self.user_dir().join(format!("{name}.sqfs"));
        fs::copy(&built, &own).expect("copy image");
        self.user.chown(&own);
        own
    }

    /// A root-owned 0755 directory to mount on.
    pub fn mount_point(&self, name: &str) -> PathBuf {
        let p = self.root.join("mnt").join(name);
        fs::create_dir_all(&p).expect("mkdir");
        p
    }

    pub fn symlink(&self, target: impl AsRef<Path>, name: &str) -> PathBuf {
        let p = self.root.join("mnt").join(name);
        let _ = fs::remove_file(&p);
        symlink(target, &p).expect("symlink");
        p
    }

    /// `squashfs-mount <args>` as the case's user, in the prefix.
    pub fn user_cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = self.user.command(&self.bin);
        c.args(args).current_dir(&self.root).stdin(Stdio::null());
        c
    }

    /// [`Fixture::user_cmd`], run (with a time limit).
    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run(&mut self.user_cmd(args))
    }

    /// Root's image `name` of `files` ([`Fixture::image`]) and a mount
    /// point of the same name.
    pub fn image_at(&self, name: &str, files: &[(&str, &str)]) -> (PathBuf, PathBuf) {
        (self.image(name, files, ""), self.mount_point(name))
    }

    /// `squashfs-mount IMAGE:MOUNT_POINT -- true` as the case's user.
    pub fn launch_true(&self, image: &Path, mount_point: &Path) -> Run {
        self.run([crate::pair(image, mount_point), "--".into(), "true".into()])
    }

    /// `squashfs-mount MOUNTS... -- sh -c SCRIPT` as the case's user (see
    /// [`Fixture::run`]).
    pub fn launch_sh<S: AsRef<OsStr>>(&self, mounts: &[S], script: &str) -> Run {
        let mut c = self.user_cmd(mounts);
        c.args(["--", "sh", "-c", script]);
        run(&mut c)
    }

    /// The installed binary with `args` as `user` (another user than the
    /// case's), in the prefix, stdin from /dev/null, run with a time limit.
    pub fn run_as<I, S>(&self, user: &crate::users::User, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = user.command(&self.bin);
        c.args(args).current_dir(&self.root).stdin(Stdio::null());
        run(&mut c)
    }

    /// A shell command line run as the case's user in the prefix, with
    /// `$SQM` the installed tool (for redirections etc).
    pub fn user_sh(&self, script: &str) -> Run {
        run(self
            .user
            .command("sh")
            .args(["-c", script])
            .env("SQM", &self.bin)
            .current_dir(&self.root))
    }
}
