//! Integration tests of the image cache, run as unprivileged users against
//! the setuid binary installed into a temporary prefix.
//!
//! Needs root (to install the setuid binary, create two test users per test
//! and run `--gc --all`); without root every test prints why it is skipped.
//! Tests run one at a time (the fixture's mutex, and the machine-wide lock
//! across processes): the cache is one per machine. Each ends with a root
//! `--gc --all` and checks that no loop device backed by its files is left;
//! its users are removed when it ends, also when it fails.
//!
//! Loop devices are counted by their backing file (under the test's own
//! directory) rather than in total, so that other processes on the machine
//! cannot disturb the count; the totals are printed for reference.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::MutexGuard;
use std::time::Duration;

use sqfsmnt_test_support::cleanup::run_dir;
use sqfsmnt_test_support::cmd::{run, spawn, try_run, Run};
use sqfsmnt_test_support::count::{attached_loops, loops_under};
use sqfsmnt_test_support::unmount::remove_tree;
use sqfsmnt_test_support::{have, loud_skip, User, Users};

/// The serialising lock and the installed tool; None (after saying why,
/// loudly) when the tests cannot run here.
fn setup() -> Option<(MutexGuard<'static, ()>, PathBuf)> {
    let (guard, inst) =
        sqfsmnt_test_support::fixture::installed(env!("CARGO_BIN_EXE_squashfs-mount"))?;
    for tool in ["unshare", "nsenter", "taskset"] {
        if !have(tool) {
            loud_skip(&format!(
                "(cache integration test): {tool} is missing (scripts/deps test installs it)"
            ));
            return None;
        }
    }
    Some((guard, inst.bin.clone()))
}

/// A scratch directory and two users for one test; on drop (also after a
/// failed assertion) evicts every cached instance as root, removes the
/// files and the users.
struct Scratch {
    dir: PathBuf,
    bin: PathBuf,
    u1: User,
    u2: User,
    _users: Users,
}

impl Scratch {
    fn new(name: &str, bin: PathBuf) -> Scratch {
        let dir = run_dir(&format!("cache-{name}"));
        remove_tree(&dir);
        fs::create_dir_all(dir.join("m")).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.join("m"), fs::Permissions::from_mode(0o755)).unwrap();
        let users = Users::create(2, false);
        let s = Scratch {
            dir,
            bin,
            u1: users.users[0].clone(),
            u2: users.users[1].clone(),
            _users: users,
        };
        // Start from an empty cache.
        s.root_gc_all();
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn mnt(&self) -> String {
        self.path("m").display().to_string()
    }

    /// Builds an image whose file `hello` holds `content`, owned by root
    /// (so that the default site policy lets the kernel mount it: its
    /// users cannot change its bytes) with `owner`'s group; `mode`'s owner
    /// bits go to the group (0600: readable by `owner` only).
    fn image(&self, name: &str, content: &str, owner: &User, mode: u32) -> PathBuf {
        let src = self.path(&format!("{name}.src"));
        let _ = fs::remove_dir_all(&src);
        let mut files: Vec<(String, String)> = vec![("hello".into(), content.into())];
        files.extend((0..20).map(|i| (format!("dir/f{i}"), format!("{i}\n"))));
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        let img = self.path(name);
        sqfsmnt_test_support::image::build(&src, &img, &files, "", &["-comp", "gzip"]);
        std::os::unix::fs::chown(&img, Some(0), Some(owner.gid)).unwrap();
        fs::set_permissions(
            &img,
            fs::Permissions::from_mode(
                (mode & 0o700) | ((mode & 0o700) >> 3) & 0o050 | (mode & 0o007),
            ),
        )
        .unwrap();
        img
    }

    /// Loop devices whose backing file is under this test's directory.
    fn loops(&self) -> Vec<String> {
        loops_under(&self.dir)
    }

    fn root_gc_all(&self) {
        self.as_root(&["--gc", "--all"]).ok_as("root --gc --all");
    }

    /// Runs the installed tool as root with `args`.
    fn as_root(&self, args: &[&str]) -> Run {
        run(Command::new(&self.bin).args(args))
    }

    /// Runs the installed tool as `user` with `args`.
    fn as_user(&self, user: &User, args: &[&str]) -> Run {
        run(&mut user_command(user, &self.bin, args))
    }

    /// `squashfs-mount <img>:<mnt> -- cat <mnt>/hello` as `user`.
    fn cat_hello(&self, user: &User, img: &Path, extra: &[&str]) -> Run {
        let pair = format!("{}:{}", img.display(), self.mnt());
        let file = format!("{}/hello", self.mnt());
        let mut args: Vec<&str> = extra.to_vec();
        args.extend([pair.as_str(), "--", "cat", file.as_str()]);
        self.as_user(user, &args)
    }

    /// [`Scratch::cat_hello`] as `u1`, as a shell command line for root
    /// (setpriv).
    fn cat_hello_line(&self, img: &Path) -> String {
        format!(
            "setpriv --reuid={} --regid={} --clear-groups {} {}:{} -- cat {}/hello",
            self.u1.uid,
            self.u1.gid,
            self.bin.display(),
            img.display(),
            self.mnt(),
            self.mnt()
        )
    }

    /// `u1`'s launch of `img` on the mount point that runs `first` (`{}`
    /// is the mount point), then waits for `done` (in this test's
    /// directory), once its loop device is attached.
    fn held_launch(&self, img: &Path, first: &str) -> Held {
        let pair = format!("{}:{}", img.display(), self.mnt());
        let done = self.path("done");
        // The command says it started (its clone is mounted and the
        // instance in the cache) in a directory of the user's: an attached
        // loop device comes before both.
        let ready = self.path("ready");
        let _ = fs::remove_dir_all(&ready);
        fs::create_dir(&ready).unwrap();
        std::os::unix::fs::chown(&ready, Some(self.u1.uid), Some(self.u1.gid)).unwrap();
        let started = ready.join("started");
        let script = format!(
            "{}; : > {}; while [ ! -e {} ]; do sleep 0.05; done",
            first.replace("{}", &self.mnt()),
            started.display(),
            done.display()
        );
        let launch = spawn(&mut user_command(
            &self.u1,
            &self.bin,
            &[pair.as_str(), "--", "sh", "-c", script.as_str()],
        ));
        wait_until(|| started.exists(), "the launch's command to start");
        Held { launch, done }
    }

    /// Evicts everything as root and checks that no loop device of this
    /// test is left.
    fn finish(&self) {
        self.root_gc_all();
        wait_until(
            || self.loops().is_empty(),
            "the test's loop devices to detach after root --gc --all",
        );
        eprintln!("attached loop devices in total: {}", attached_loops().len());
    }
}

/// A launch that runs until [`Held::release`].
struct Held {
    launch: sqfsmnt_test_support::cmd::Started,
    done: PathBuf,
}

impl Held {
    /// Lets the launch end; it must succeed.
    fn release(self) {
        fs::write(&self.done, "").unwrap();
        self.launch.wait().ok();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = try_run(Command::new(&self.bin).args(["--gc", "--all"]));
        remove_tree(&self.dir);
    }
}

fn user_command(user: &User, bin: &Path, args: &[impl AsRef<OsStr>]) -> Command {
    let mut c = user.command(bin);
    c.args(args);
    c
}

/// Autoclear detaches a loop device asynchronously after its last user is
/// gone: polled until it has (the hang limit only catches a leak).
fn wait_until(cond: impl FnMut() -> bool, what: &str) {
    sqfsmnt_test_support::cmd::wait_until(sqfsmnt_test_support::ends::HANG, what, cond)
}

/// The stdout of a command that must succeed.
#[track_caller]
fn ok(out: &Run) -> String {
    out.ok().stdout()
}

fn stderr(out: &Run) -> String {
    out.stderr()
}

#[test]
fn launches_share_one_loop_device() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("share", bin);
    // 40 launches at once on a loaded machine can keep the cache's lock
    // beyond the default 100 ms, and a launch that gives up mounts
    // privately and says so: this test is about sharing, so it waits.
    let _conf = sqfsmnt_test_support::site::config("cache-lock-timeout = 10m\n");
    let img = s.image("a.sqfs", "one\n", &s.u1, 0o644);

    // Sequential: the second launch reuses the first one's instance.
    assert_eq!(ok(&s.cat_hello(&s.u1, &img, &[])), "one\n");
    let first = s.loops();
    assert_eq!(
        first.len(),
        1,
        "one loop device after the first launch: {first:?}"
    );
    let out = s.cat_hello(&s.u1, &img, &[]);
    assert_eq!(ok(&out), "one\n");
    assert!(
        stderr(&out).is_empty(),
        "unexpected warning: {}",
        stderr(&out)
    );
    assert_eq!(
        s.loops(),
        first,
        "the second launch must reuse the loop device"
    );
    // Another user who can open the file reuses it too.
    assert_eq!(ok(&s.cat_hello(&s.u2, &img, &[])), "one\n");
    assert_eq!(s.loops(), first);

    // Concurrent, from an empty cache: 40 launches of one image, exactly one
    // loop device, no failure.
    s.root_gc_all();
    wait_until(|| s.loops().is_empty(), "eviction");
    let pair = format!("{}:{}", img.display(), s.mnt());
    let file = format!("{}/hello", s.mnt());
    let children: Vec<_> = (0..40)
        .map(|i| {
            let user = if i % 2 == 0 { &s.u1 } else { &s.u2 };
            spawn(&mut user_command(
                user,
                &s.bin,
                &[pair.as_str(), "--", "cat", file.as_str()],
            ))
        })
        .collect();
    let mut failures = Vec::new();
    for c in children {
        let out = c.wait();
        if !out.success() || out.stdout() != "one\n" || !out.0.stderr.is_empty() {
            failures.push(format!("{out:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 40 concurrent launches failed or warned: {failures:?}",
        failures.len()
    );
    assert_eq!(
        s.loops().len(),
        1,
        "40 concurrent launches must share one loop device: {:?}",
        s.loops()
    );
    s.finish();
}

#[test]
fn a_user_who_cannot_read_the_image_is_refused_although_it_is_cached() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("refuse", bin);
    let img = s.image("private.sqfs", "secret\n", &s.u1, 0o600);
    assert_eq!(ok(&s.cat_hello(&s.u1, &img, &[])), "secret\n");
    assert_eq!(s.loops().len(), 1);

    let out = s.cat_hello(&s.u2, &img, &[]);
    out.fails();
    assert!(!out.stdout().contains("secret"), "{out:?}");
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );

    // Neither listed to nor evictable by user2; listed to its owner and root.
    let name = img.display().to_string();
    let status2 = ok(&s.as_user(&s.u2, &["--cache-status"]));
    assert!(!status2.contains(&name), "path leaked to user2: {status2}");
    assert!(
        !status2.contains("private"),
        "path leaked to user2: {status2}"
    );
    ok(&s.as_user(&s.u2, &["--gc"]));
    assert_eq!(
        s.loops().len(),
        1,
        "user2's --gc must not evict user1's instance"
    );
    assert!(ok(&s.as_user(&s.u1, &["--cache-status"])).contains(&name));
    let root_status = ok(&s.as_root(&["--cache-status"]));
    assert!(
        root_status.contains(&name) && root_status.contains("created by uid"),
        "{root_status}"
    );
    // --gc --all is root's.
    s.as_user(&s.u1, &["--gc", "--all"]).fails();
    assert_eq!(s.loops().len(), 1);
    s.finish();
}

#[test]
fn modified_replaced_and_deleted_images() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("modify", bin);
    let img = s.image("a.sqfs", "first\n", &s.u1, 0o644);
    assert_eq!(ok(&s.cat_hello(&s.u1, &img, &[])), "first\n");
    let ino = fs::metadata(&img).unwrap().ino();

    // Modified (same inode, new mtime and ctime): a new instance. The
    // bytes stay the same: rewriting a file under a mounted instance would
    // hand the kernel's squashfs driver bytes that changed under it, which
    // no test does.
    let before = s.loops();
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&img)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(fs::metadata(&img).unwrap().ino(), ino);
    assert_eq!(ok(&s.cat_hello(&s.u1, &img, &[])), "first\n");
    wait_until(|| s.loops().len() == 1, "the stale instance to be evicted");
    assert_ne!(
        s.loops(),
        before,
        "a modified image must get a new instance"
    );

    // Replaced (rename over it): new inode, the old one deleted.
    let third = s.image("c.sqfs", "third\n", &s.u1, 0o644);
    fs::rename(&third, &img).unwrap();
    assert_ne!(fs::metadata(&img).unwrap().ino(), ino);
    assert_eq!(ok(&s.cat_hello(&s.u1, &img, &[])), "third\n");
    wait_until(
        || s.loops().len() == 1,
        "the replaced image's instance to be evicted",
    );
    // Again: served from the cache now.
    let before = s.loops();
    assert_eq!(ok(&s.cat_hello(&s.u2, &img, &[])), "third\n");
    assert_eq!(s.loops(), before);

    // Deleted: still listed to the user who made the instance (not to
    // others, who can no longer open it), and a user's --gc detaches it.
    fs::remove_file(&img).unwrap();
    let name = img.display().to_string();
    assert!(ok(&s.as_user(&s.u1, &["--cache-status"])).contains(&name));
    assert!(!ok(&s.as_user(&s.u2, &["--cache-status"])).contains(&name));
    ok(&s.as_user(&s.u2, &["--gc"]));
    wait_until(
        || s.loops().is_empty(),
        "the deleted image's loop device to detach after --gc",
    );
    s.finish();
}

#[test]
fn no_cache_leaves_nothing_behind() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("nocache", bin);
    let img = s.image("a.sqfs", "plain\n", &s.u1, 0o644);
    // While it runs there is a loop device; afterwards none, and no entry.
    let pair = format!("{}:{}", img.display(), s.mnt());
    let out = s.as_user(
        &s.u1,
        &[
            "--no-cache",
            &pair,
            "--",
            "sh",
            "-c",
            &format!("cat {}/hello; ls /sys/block/ > /dev/null", s.mnt()),
        ],
    );
    assert_eq!(ok(&out), "plain\n");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    wait_until(
        || s.loops().is_empty(),
        "the --no-cache loop device to detach",
    );
    let status = ok(&s.as_root(&["--cache-status"]));
    assert!(
        !status.contains(&img.display().to_string()),
        "--no-cache must not fill the cache: {status}"
    );
    // A cached launch after it still works.
    assert_eq!(ok(&s.cat_hello(&s.u1, &img, &[])), "plain\n");
    assert_eq!(s.loops().len(), 1);
    s.finish();
}

#[test]
fn instances_in_use_survive_gc_until_released() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("inuse", bin);
    let img = s.image("a.sqfs", "busy\n", &s.u1, 0o644);
    // A launch that keeps its clone mounted until it is released.
    let held = s.held_launch(&img, "cat {}/hello");
    let status = ok(&s.as_user(&s.u1, &["--cache-status"]));
    assert!(status.contains("in-use"), "{status}");
    ok(&s.as_user(&s.u1, &["--gc"]));
    ok(&s.as_root(&["--gc"]));
    assert!(
        ok(&s.as_root(&["--cache-status"])).contains(&img.display().to_string()),
        "in-use instance evicted"
    );
    held.release();
    // Released: the user's own --gc evicts it.
    let out = ok(&s.as_user(&s.u1, &["--gc"]));
    assert!(out.contains("evicted"), "{out}");
    wait_until(
        || s.loops().is_empty(),
        "the released instance's loop device to detach",
    );
    s.finish();
}

/// Every path to a cached instance a process could try: prints
/// `REACHED <path>` for each that reaches one, then `probed, found=0|1`.
const REACH_PROBE: &str = r#"
        found=0
        for p in /run/squashfs-mount /run/squashfs-mount/ns /run/squashfs-mount/lock; do
            if ls "$p" >/dev/null 2>&1 || cat "$p" >/dev/null 2>&1; then echo "REACHED $p"; found=1; fi
        done
        if nsenter --mount=/run/squashfs-mount/ns true 2>/dev/null; then echo "REACHED nsenter"; found=1; fi
        for d in /proc/[0-9]*; do
            for r in root cwd; do
                if [ -e "$d/$r/squashfs-mount-cache" ]; then echo "REACHED $d/$r (cache namespace)"; found=1; fi
            done
            [ -r "$d/mountinfo" ] || continue
            while read -r id parent dev root mp rest; do
                for base in "$d/root$mp" "$mp"; do
                    if [ -e "$base/hello" ] && cat "$base/hello" 2>/dev/null | grep -q secret; then echo "REACHED $base"; found=1; fi
                done
            done < "$d/mountinfo" 2>/dev/null
        done
        for d in /proc/[0-9]*/root/*/mnt; do
            if [ -e "$d/hello" ]; then echo "REACHED $d"; found=1; fi
        done
        echo "probed, found=$found"
    "#;

#[test]
fn cached_instances_are_unreachable_outside_the_tool() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("reach", bin);
    let img = s.image("private.sqfs", "secret\n", &s.u1, 0o600);
    // User 1 has it cached and a launch of it running.
    let held = s.held_launch(&img, "cat {}/hello >/dev/null");

    // User 2 tries every path they have.
    let probe = REACH_PROBE;
    let text = run(&mut user_command(
        &s.u2,
        Path::new("/bin/sh"),
        &["-c", probe],
    ))
    .stdout();
    assert!(
        text.contains("probed, found=0"),
        "user2 reached the cached instance:\n{text}"
    );
    // Controls, showing the probe finds what is there: the owner reaches
    // their own running launch's mount through /proc/<pid>/root, and root
    // reaches the state directory (but no process's root is the cache's).
    let text = run(&mut user_command(
        &s.u1,
        Path::new("/bin/sh"),
        &["-c", probe],
    ))
    .stdout();
    assert!(
        text.lines()
            .any(|l| l.starts_with("REACHED /proc/") && l.contains("/root/")),
        "control failed, the probe reaches nothing:\n{text}"
    );
    assert!(
        !text.contains("cache namespace") && !text.contains("/run/squashfs-mount"),
        "{text}"
    );
    let text = run(Command::new("sh").args(["-c", probe])).stdout();
    assert!(
        text.contains("REACHED /run/squashfs-mount\n"),
        "control failed:\n{text}"
    );
    assert!(
        !text.contains("cache namespace"),
        "a process sits in the cache namespace:\n{text}"
    );
    // The mount table user2 sees names no instance and no cache entry.
    let mi = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mi.lines()
            .any(|l| l.contains(" squashfs ") && l.contains(&s.dir.display().to_string())),
        "{mi}"
    );

    held.release();
    s.finish();
}

/// A small deterministic PRNG (no dependencies); the seed is printed.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
fn sigkill_at_any_point_leaves_a_working_cache() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("kill", bin);
    let img = s.image("a.sqfs", "alive\n", &s.u1, 0o644);
    let pair = format!("{}:{}", img.display(), s.mnt());
    // Kill delays are drawn below a bound that adapts to how long launches
    // take on this (possibly busy) machine: it shrinks when a launch
    // finished before the kill and grows when the kill came first, so the
    // kills spread over the whole of the setup, creation included.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill delays seed: {seed}");
    let mut rng = Lcg(seed);
    let mut bound_us: u64 = 8000;
    let (mut rounds, mut killed_early) = (0, 0);
    while killed_early < 30 && rounds < 400 {
        // Half the rounds start from an empty cache (the kill hits creation).
        if rounds % 2 == 0 {
            s.root_gc_all();
        }
        rounds += 1;
        let mut child = user_command(&s.u1, &s.bin, &[pair.as_str(), "--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % bound_us.max(1)));
        let _ = child.kill();
        if child.wait().unwrap().code().is_none() {
            killed_early += 1;
            bound_us = bound_us * 11 / 10 + 1;
        } else {
            bound_us = bound_us * 9 / 10;
        }
    }
    eprintln!("{killed_early} of {rounds} launches were killed before they finished (final bound {bound_us} us)");
    assert!(
        killed_early >= 30,
        "the kills came too late to test anything ({killed_early} of {rounds} early)"
    );
    // A normal launch works and sees the content; a second reuses it.
    let out = s.cat_hello(&s.u1, &img, &[]);
    assert_eq!(ok(&out), "alive\n");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let one = s.loops();
    assert_eq!(one.len(), 1, "{one:?}");
    assert_eq!(ok(&s.cat_hello(&s.u2, &img, &[])), "alive\n");
    assert_eq!(s.loops(), one);
    let status = ok(&s.as_root(&["--cache-status"]));
    assert!(!status.contains("broken"), "{status}");
    s.finish();
}

#[test]
fn without_a_usable_cache_directory_launches_fall_back_with_one_warning() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("fallback", bin);
    let img = s.image("a.sqfs", "fallback\n", &s.u1, 0o644);
    let launch = s.cat_hello_line(&img);
    // A read-only /run in a private mount namespace.
    let out = run(Command::new("unshare").args([
        "-m",
        "sh",
        "-c",
        &format!("mount -t tmpfs -o ro tmpfs /run && {launch}"),
    ]));
    assert_eq!(ok(&out), "fallback\n");
    let warn = stderr(&out);
    assert_eq!(warn.lines().count(), 1, "exactly one warning line: {warn}");
    assert!(warn.contains("warning") && warn.contains("cache"), "{warn}");
    wait_until(
        || s.loops().is_empty(),
        "the private instance's loop device to detach",
    );
}

#[test]
fn a_cache_in_a_non_initial_mount_namespace_works_and_dies_with_it() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("nested", bin);
    let img = s.image("a.sqfs", "nested\n", &s.u1, 0o644);
    let launch = s.cat_hello_line(&img);
    let count = format!(
        "cat /sys/block/loop*/loop/backing_file 2>/dev/null | grep -c '^{}/' || true",
        s.dir.display()
    );
    // A job-container-like namespace with its own /run: its cache lives in
    // it and goes away with it. The namespace is made on CPU `a` and the
    // launches start confined to CPU `b`: since Linux 6.18 namespace ids
    // come in per-CPU batches, so for one of the orders the kernel refuses
    // the first bind of the cache namespace (ELOOP) and the tool must retry
    // on other CPUs.
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(3);
    for (a, b) in (0..cpus).flat_map(|a| (0..cpus).map(move |b| (a, b))) {
        let cpu = format!("{a}->{b}");
        let script = format!(
            "mount -t tmpfs tmpfs /run && taskset -c {b} {launch} && taskset -c {b} {launch} && {launch} && echo loops=$({count})"
        );
        let out = run(Command::new("taskset").args([
            "-c",
            &a.to_string(),
            "unshare",
            "-m",
            "sh",
            "-c",
            &script,
        ]));
        let text = ok(&out);
        assert_eq!(
            text,
            "nested\nnested\nnested\nloops=1\n",
            "cpu {cpu}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).is_empty(),
            "cpu {cpu}: unexpected warning: {}",
            stderr(&out)
        );
        wait_until(
            || s.loops().is_empty(),
            "the namespace's cache to go away with it",
        );
    }
}

/// The first launches on a node start together (srun's tasks): however
/// they interleave, the node gets one cache namespace. A launch that opened
/// the state directory before another made it a mount of its own, and then
/// judged the cache absent through that stale descriptor, stacked a second
/// state directory and cache namespace over the first; `--gc --all` then
/// reached only the top one, and the instances of the one below held their
/// loop devices until the node's namespace went away.
#[test]
fn a_burst_of_first_launches_makes_one_cache_namespace() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("firstburst", bin);
    // What is checked is the one namespace the burst makes; a launch that
    // gives up the lock after the default 100 ms (and says so) on a loaded
    // machine is the fairness tests' business, not this one's.
    let _conf = sqfsmnt_test_support::site::config("cache-lock-timeout = 10m\n");
    let img = s.image("a.sqfs", "first\n", &s.u1, 0o644);
    let launch = s.cat_hello_line(&img);
    // Several rounds, each on a fresh /run in a namespace of its own (the
    // host's state directory, copied into it, is unmounted there first, so
    // that only the round's own mounts are counted): the stale-descriptor
    // window is a few milliseconds wide.
    for round in 0..4 {
        let script = format!(
            "while grep -q ' /run/squashfs-mount ' /proc/self/mountinfo; do umount -l /run/squashfs-mount || exit 1; done; \
             mount -t tmpfs tmpfs /run && \
             for i in $(seq 16); do {launch} > /dev/null & done; wait; \
             echo ns=$(awk '$5 == \"/run/squashfs-mount/ns\"' /proc/self/mountinfo | wc -l) \
             dirs=$(awk '$5 == \"/run/squashfs-mount\"' /proc/self/mountinfo | wc -l) && \
             {bin} --gc --all > /dev/null && echo loops=$(cat /sys/block/loop*/loop/backing_file 2>/dev/null | grep -c '^{dir}/' || true)",
            bin = s.bin.display(),
            dir = s.dir.display()
        );
        let out = run(Command::new("unshare").args(["-m", "sh", "-c", &script]));
        assert_eq!(
            ok(&out),
            "ns=1 dirs=1\nloops=0\n",
            "round {round}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).is_empty(), "round {round}: {}", stderr(&out));
        wait_until(
            || s.loops().is_empty(),
            "the namespace's cache to go away with it",
        );
    }
}

/// Runs `work` in a child process (single-threaded after fork, as setns
/// into a mount namespace needs) inside the cache namespace, as root.
/// `work` may only make raw system calls on data prepared before the fork.
fn in_cache_namespace(work: impl Fn() -> bool + Send + Sync + 'static) {
    use std::os::unix::process::CommandExt;
    let ns = std::ffi::CString::new("/run/squashfs-mount/ns").unwrap();
    let mut cmd = Command::new("/bin/true");
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe system calls (open, setns, mkdir, mount,
    // _exit) on CStrings allocated before the fork. It never returns to
    // exec: it ends the child with _exit (0 = work done), which the parent
    // sees as a successful spawn and reads back as the exit status.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(ns.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::setns(fd, libc::CLONE_NEWNS) != 0 {
                libc::_exit(2);
            }
            libc::_exit(if work() { 0 } else { 3 });
        });
    }
    let r = run(&mut cmd);
    assert_eq!(
        r.code(),
        Some(0),
        "could not plant the entries in the cache namespace: {r:?}"
    );
}

#[test]
fn half_made_entries_are_cleaned_up() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("halfmade", bin);
    let a = s.image("a.sqfs", "a\n", &s.u1, 0o644);
    let b = s.image("b.sqfs", "b\n", &s.u1, 0o644);
    // Make sure the cache namespace exists, then empty it.
    assert_eq!(ok(&s.cat_hello(&s.u1, &a, &[])), "a\n");
    s.root_gc_all();
    let c = |s: String| std::ffi::CString::new(s).unwrap();
    // What a launch killed half-way leaves: an entry directory with an
    // empty mnt and no meta; an entry with a tmpfs mounted on mnt and a
    // meta that does not parse; and a name an earlier version of the tool
    // used (`<dev>-<ino>`).
    let m = fs::metadata(&a).unwrap();
    let (k1, k2, old) = (
        "0123456789abcdef0123456789abcdef".to_string(),
        "fedcba9876543210fedcba9876543210".to_string(),
        format!("{:x}-{:x}", m.dev(), m.ino()),
    );
    let dirs = [
        c(format!("/{k1}")),
        c(format!("/{k1}/mnt")),
        c(format!("/{k2}")),
        c(format!("/{k2}/mnt")),
        c(format!("/{old}")),
    ];
    let (tmpfs_on, meta) = (c(format!("/{k2}/mnt")), c(format!("/{k2}/meta")));
    // A stray file (an earlier version kept its key in /secret).
    let stray = c("/secret".into());
    let tmpfs = c("tmpfs".into());
    in_cache_namespace(move || unsafe {
        // SAFETY: raw system calls on CStrings owned by this closure.
        dirs.iter().all(|d| libc::mkdir(d.as_ptr(), 0o700) == 0)
            && libc::mount(
                tmpfs.as_ptr(),
                tmpfs_on.as_ptr(),
                tmpfs.as_ptr(),
                0,
                std::ptr::null(),
            ) == 0
            && {
                let fd = libc::open(
                    meta.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o600,
                );
                fd >= 0
                    && libc::write(fd, b"garbage\n".as_ptr().cast(), 8) == 8
                    && libc::close(fd) == 0
            }
            && {
                let fd = libc::open(
                    stray.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o600,
                );
                fd >= 0 && libc::close(fd) == 0
            }
    });
    let status = ok(&s.as_root(&["--cache-status"]));
    assert_eq!(
        status.matches("broken").count(),
        4,
        "the planted entries must show as broken:\n{status}"
    );

    // The launches that make new entries collect the broken ones.
    assert_eq!(ok(&s.cat_hello(&s.u1, &a, &[])), "a\n");
    assert_eq!(ok(&s.cat_hello(&s.u1, &b, &[])), "b\n");
    let status = ok(&s.as_root(&["--cache-status"]));
    assert!(!status.contains("broken"), "{status}");
    assert_eq!(status.matches("idle").count(), 2, "{status}");
    assert_eq!(s.loops().len(), 2);
    // Reused afterwards.
    assert_eq!(ok(&s.cat_hello(&s.u2, &a, &[])), "a\n");
    assert_eq!(s.loops().len(), 2);
    s.finish();
}

#[test]
fn the_working_directory_survives_visits_to_the_cache() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("cwd", bin);
    let img = s.image("a.sqfs", "cwd\n", &s.u1, 0o644);
    // A relative image path and mount point, resolved after the launch has
    // been in the cache namespace (creation, then reuse), and the command
    // starts in the caller's directory.
    for round in 0..2 {
        let out = run(user_command(
            &s.u1,
            &s.bin,
            &[
                "a.sqfs:m",
                "--",
                "sh",
                "-c",
                "readlink /proc/self/cwd; cat m/hello",
            ],
        )
        .current_dir(&s.dir));
        assert_eq!(
            ok(&out),
            format!("{}\ncwd\n", s.dir.display()),
            "round {round}"
        );
        assert!(stderr(&out).is_empty(), "{}", stderr(&out));
        assert_eq!(s.loops().len(), 1);
    }
    cwd_that_root_cannot_enter(&s, &img);
    s.finish();
}

/// A working directory that root cannot enter (a FUSE mount of the
/// caller's, without allow_root): the launch must not lose it; it mounts
/// a private instance with one warning.
fn cwd_that_root_cannot_enter(s: &Scratch, img: &Path) {
    let _fuse = sqfsmnt_test_support::site::FuseForUsers::enable();
    let fuse_usable = run(&mut user_command(
        &s.u1,
        Path::new("/bin/sh"),
        &["-c", "test -r /dev/fuse -a -w /dev/fuse"],
    ))
    .success();
    if !have("squashfuse") || !have("fusermount3") || !fuse_usable {
        loud_skip(&format!("(FUSE part of the working-directory cache test): squashfuse or fusermount3 missing, or /dev/fuse not usable by {}", s.u1.name));
        return;
    }
    let fuse = s.path("fuse");
    fs::create_dir(&fuse).unwrap();
    s.u1.chown(&fuse);
    run(&mut user_command(
        &s.u1,
        Path::new("squashfuse"),
        &[img.as_os_str(), fuse.as_os_str()],
    ))
    .ok_as("squashfuse as the test user");
    struct Unmount(PathBuf, User);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = try_run(&mut user_command(
                &self.1,
                Path::new("fusermount3"),
                &["-u".as_ref(), self.0.as_os_str()],
            ));
        }
    }
    let _unmount = Unmount(fuse.clone(), s.u1.clone());
    let pair = format!("{}:{}", img.display(), s.mnt());
    // (cd as the user: root cannot enter the FUSE mount.)
    let script = format!(
        "cd {}/dir && exec {} {pair} -- sh -c 'readlink /proc/self/cwd; cat {}/hello; ls'",
        fuse.display(),
        s.bin.display(),
        s.mnt()
    );
    let out = run(&mut user_command(
        &s.u1,
        Path::new("/bin/sh"),
        &["-c", script.as_str()],
    ));
    let text = ok(&out);
    assert!(
        text.starts_with(&format!("{}/dir\ncwd\nf0\n", fuse.display())),
        "{text}"
    );
    let warn = stderr(&out);
    assert_eq!(warn.lines().count(), 1, "{warn}");
    assert!(warn.contains("private instance"), "{warn}");
}

#[test]
fn unions_and_repeated_images_use_the_cached_instances() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("union", bin);
    let a = s.image("a.sqfs", "a\n", &s.u1, 0o644);
    let b = s.image("b.sqfs", "b\n", &s.u1, 0o644);
    let m2 = s.path("m2");
    fs::create_dir(&m2).unwrap();
    fs::set_permissions(&m2, fs::Permissions::from_mode(0o755)).unwrap();
    // The same image twice in one call (the second is a clone of the cached
    // clone, made in the cache namespace), and a union of two images on top.
    let plain = format!("{}:{}", a.display(), m2.display());
    let union = format!("--union={},{}:{}", b.display(), a.display(), s.mnt());
    let script = format!(
        "cat {}/hello {}/hello {}/dir/f1",
        m2.display(),
        s.mnt(),
        s.mnt()
    );
    for round in 0..2 {
        let out = s.as_user(
            &s.u1,
            &[
                plain.as_str(),
                union.as_str(),
                "--",
                "sh",
                "-c",
                script.as_str(),
            ],
        );
        assert_eq!(ok(&out), "a\nb\n1\n", "round {round}");
        let warn = stderr(&out);
        assert!(!warn.contains("image cache"), "round {round}: {warn}");
        assert_eq!(
            s.loops().len(),
            2,
            "round {round}: one loop device per image, kept: {:?}",
            s.loops()
        );
    }
    s.finish();
}

/// A package upgrade (or downgrade) replaces the binary while instances are
/// cached; an entry whose `meta` is of another format version must not make
/// the next launch fail: it is evicted and a new instance made, without a
/// warning.
#[test]
fn entries_of_another_format_version_are_evicted_and_recreated() {
    let Some((_g, bin)) = setup() else { return };
    let s = Scratch::new("format", bin);
    let a = s.image("a.sqfs", "a\n", &s.u1, 0o644);
    assert_eq!(ok(&s.cat_hello(&s.u1, &a, &[])), "a\n");
    assert_eq!(s.loops().len(), 1);
    // The same entry as a version with another on-disk format would have
    // left it (a package upgrade while instances are cached): the same
    // fields under another header. A version that ignored the header would
    // reuse it; one that choked on it would fail.
    assert_eq!(
        sqfsmnt_test_support::cachens::rewrite_record_headers(b"squashfs-mount-cache 2"),
        1
    );
    let status = ok(&s.as_root(&["--cache-status"]));
    assert_eq!(
        status.matches("broken").count(),
        1,
        "the entry must show as broken:\n{status}"
    );
    // The next launch evicts it and caches a new instance, quietly.
    let out = s.cat_hello(&s.u1, &a, &[]);
    assert_eq!(ok(&out), "a\n");
    assert_eq!(stderr(&out), "", "no warning expected");
    let status = ok(&s.as_root(&["--cache-status"]));
    assert!(!status.contains("broken"), "{status}");
    assert_eq!(status.matches("idle").count(), 1, "{status}");
    // The old instance's loop device is released; the new one is reused.
    wait_until(
        || s.loops().len() == 1,
        "the evicted instance's loop device to detach",
    );
    let before = s.loops();
    assert_eq!(ok(&s.cat_hello(&s.u2, &a, &[])), "a\n");
    assert_eq!(s.loops(), before, "the recreated instance must be reused");
    s.finish();
}
