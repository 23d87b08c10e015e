//! Shared state that no user can poison, starve or kill (issue 26,
//! findings 1-3): the root phase starts from a state its caller cannot set
//! (umask, scheduling), root's state in /run has the modes root gives it,
//! a FUSE server whose mount is in use is never killed, and a launch its
//! caller starves of CPU stalls nobody. As unprivileged test users against
//! the installed setuid binary; every process, cgroup and namespace made is
//! undone.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sqfsmnt_test_support::cmd::{spawn, try_run};
use sqfsmnt_test_support::held::{self, lock_ids, Group};
use sqfsmnt_test_support::users::{User, Users};
use sqfsmnt_test_support::{ends, loud_skip, pair, s, site, Fixture};

use crate::case;

const STATE: &str = "/run/squashfs-mount";

/// The pids holding a lock every user's launches share (the cache's, a
/// loop device's claim).
fn shared_holders() -> Vec<u32> {
    held::holders(&held::shared_lock_ids(), "")
}

/// The pids holding an exclusive lock on one of `paths`.
fn exclusive_holders(paths: &[&str]) -> Vec<u32> {
    held::holders(&lock_ids(paths), " WRITE ")
}

/// `script` as `user` in a process group of its own (`$SQM` the tool).
fn spawn_as(fx: &Fixture, user: &User, script: &str) -> Group {
    Group::quiet(
        user.command("sh")
            .args(["-c", script])
            .env("SQM", &fx.bin)
            .current_dir(&fx.root),
    )
}

/// User `a` launching in a loop: cached launches of fresh images (the
/// cache's lock, exclusively) and private ones (the loop devices' lock).
fn adversary(fx: &Fixture, a: &User, imgs: &[PathBuf], m: &Path, prefix: &str) -> Group {
    let list: Vec<String> = imgs.iter().map(|i| s(i)).collect();
    let script = format!(
        "while :; do for i in {list}; do \
           {prefix} \"$SQM\" \"$i:{m}\" -- true; \
           {prefix} \"$SQM\" --no-cache \"$i:{m}\" -- true; \
           {prefix} \"$SQM\" --gc >/dev/null; \
         done; done",
        list = list.join(" "),
        m = s(m)
    );
    spawn_as(fx, a, &script)
}

/// Waits (bounded) until some process holds one of the shared locks.
fn a_holder(within: Duration) -> Option<u32> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(&pid) = shared_holders().first() {
            return Some(pid);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

/// Removes root's state that launches make again when they need it, so
/// that the next launch creates it (as after a boot).
fn fresh_state() {
    for p in ["launches", "making", "users", "devices"] {
        let _ = fs::remove_dir_all(Path::new(STATE).join(p));
    }
    let _ = fs::remove_file(Path::new(STATE).join("loop-lock"));
}

/// The permission bits of `path` (without following a symlink).
fn mode(path: &Path) -> Option<u32> {
    fs::symlink_metadata(path).ok().map(|m| m.mode() & 0o7777)
}

/// Every entry of root's state, and of the cache namespace's root, with a
/// mode other than the one root gives it: `path mode`.
fn wrong_modes() -> Vec<String> {
    let mut wrong = Vec::new();
    let mut check = |p: PathBuf, want: u32| match mode(&p) {
        Some(m) if m != want => wrong.push(format!("{} {m:04o}", p.display())),
        _ => {}
    };
    check(PathBuf::from(STATE), 0o700);
    check(Path::new(STATE).join("lock"), 0o600);
    check(Path::new(STATE).join("loop-lock"), 0o600);
    for dir in ["launches", "making", "users", "devices"] {
        let d = Path::new(STATE).join(dir);
        check(d.clone(), 0o700);
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            // The claims of single flight are in a directory per user.
            if e.path().is_dir() {
                check(e.path(), 0o700);
                for f in fs::read_dir(e.path()).into_iter().flatten().flatten() {
                    check(f.path(), 0o600);
                }
            } else {
                check(e.path(), 0o600);
            }
        }
    }
    // The cache's entries (directories, and the namespace's own files).
    for (name, m) in sqfsmnt_test_support::cachens::entry_modes(None) {
        if name.len() == 32 && m != 0o700 {
            wrong.push(format!("cache entry {name} {m:04o}"));
        }
    }
    wrong
}

/// Finding 1: a launch whose caller has `umask 0777` creates root's shared
/// state (the launch slots, the user's hold, the loop devices' claims and
/// records, the claims, a cache entry made with `-r`) with root's modes, and every other user's launches
/// use it, silently, as before.
#[test]
fn root_never_creates_shared_state_with_the_callers_umask() {
    case(|fx| {
        let others = Users::create(1, false);
        let b = others.first();
        let img = fx.image("umask", &[("f", "umask\n")], "");
        let img_r = fx.image("umask-r", &[("g", "mutable\n")], "");
        let m = fx.mount_point("umask");
        fresh_state();
        let a = fx.user_sh(&format!(
            "umask 0777; \"$SQM\" {} -- true && \"$SQM\" -r {} -- true",
            pair(&img, &m),
            pair(&img_r, &m)
        ));
        assert!(
            a.success(),
            "user a's launches with umask 0777: {}",
            a.stderr()
        );
        assert_eq!(
            wrong_modes(),
            Vec::<String>::new(),
            "root's state has the caller's umask"
        );
        for (image, extra) in [
            (&img, None),
            (&img_r, Some("-r")),
            (&img, Some("--no-cache")),
        ] {
            let mut args: Vec<String> = extra.into_iter().map(String::from).collect();
            args.extend([pair(image, &m), "--".into(), "true".into()]);
            let out = fx.run_as(b, &args);
            assert!(
                out.success() && out.0.stderr.is_empty(),
                "user b's launch ({extra:?}) after user a's umask 0777: {out:?}"
            );
        }
    });
}

/// Finding 1, "nothing repairs the modes": root's state left with a mode
/// that shuts root out (made under a caller's umask by an earlier version)
/// is given root's mode back by the next launch, and `--gc` as root evicts
/// an entry whose directory had mode 0000.
#[test]
fn roots_state_with_a_wrong_mode_is_repaired() {
    case(|fx| {
        let (img, m) = fx.image_at("repair", &[("f", "repair\n")]);
        fx.launch_true(&img, &m).ok();
        for p in ["launches", "lock", "making", "users", "devices"] {
            let _ =
                fs::set_permissions(Path::new(STATE).join(p), fs::Permissions::from_mode(0o000));
        }
        let zeroed = sqfsmnt_test_support::cachens::entry_modes(Some(0));
        assert!(
            zeroed.iter().any(|(n, m)| n.len() == 32 && *m == 0),
            "no cache entry to break: {zeroed:?}"
        );
        let again = fx.run([
            "--no-cache".into(),
            pair(&img, &m),
            "--".into(),
            "true".into(),
        ]);
        assert!(
            again.success() && again.stderr().is_empty(),
            "a launch after root's state got mode 0000: {}",
            again.stderr()
        );
        // With an image not cached yet, so that the launch also claims the
        // making of an instance (`making`). (The --no-cache launch above
        // already read the cache's records, which gives entries their mode
        // back, to count loop devices.)
        let (fresh, m2) = fx.image_at("repair-fresh", &[("f", "fresh\n")]);
        let warm = fx.run([
            pair(&img, &m),
            pair(&fresh, &m2),
            "--".into(),
            "true".into(),
        ]);
        assert!(
            warm.success() && warm.stderr().is_empty(),
            "a cached launch after its entry got mode 0000: {}",
            warm.stderr()
        );
        // The entry got its mode back, and is reused again.
        assert_eq!(wrong_modes(), Vec::<String>::new(), "not repaired");
        let again = fx.run(["-v".into(), pair(&img, &m), "--".into(), "true".into()]);
        assert!(
            again.success() && again.stderr().contains("cached instance reused"),
            "the repaired entry is not reused: {}",
            again.stderr()
        );
        let gc = sqfsmnt_test_support::cmd::run(Command::new(&fx.bin).args(["--gc", "--all"]));
        assert!(gc.success(), "root's --gc --all: {}", gc.stderr());
        let left: Vec<String> = sqfsmnt_test_support::cachens::names()
            .into_iter()
            .filter(|n| n.len() == 32)
            .collect();
        assert_eq!(left, Vec::<String>::new(), "entries left after --gc --all");
        assert_eq!(wrong_modes(), Vec::<String>::new());
    });
}

/// A field of /proc/PID/stat (1-based, counted after the command name).
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(n - 3)
        .map(str::to_string)
}

fn umask_of(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Umask:").map(|v| v.trim().to_string()))
}

/// Finding 1 and 3: while a launch holds what other users wait on, it runs
/// with umask 077, SCHED_OTHER and nice 0, whatever its caller set (umask
/// 0777, `nice -n 19`, `chrt -i 0`).
#[test]
fn the_root_phase_does_not_run_with_the_callers_umask_or_scheduling() {
    case(|fx| {
        let imgs: Vec<PathBuf> = (0..3)
            .map(|i| fx.image(&format!("sched{i}"), &[("n", &format!("{i}\n"))], ""))
            .collect();
        let m = fx.mount_point("sched");
        fx.run([pair(&imgs[0], &m), "--".into(), "true".into()])
            .ok();
        let _a = adversary(fx, &fx.user, &imgs, &m, "umask 0777; nice -n 19 chrt -i 0");
        // And while each launch is within its reach, user a lowers its
        // priority again from outside (chrt -p, renice, ionice).
        let _lowering = spawn_as(
            fx,
            &fx.user,
            &format!(
                "while :; do for p in $(pgrep -U {} -x squashfs-mount); do \
                   chrt -i -p 0 $p; renice -n 19 -p $p; ionice -c 3 -p $p; \
                 done >/dev/null 2>&1; done",
                fx.uid
            ),
        );
        let mut seen = 0;
        // 20 s of looks for 5, or more until one (a loaded machine
        // launches less often), up to the hang limit.
        let started = Instant::now();
        let enough = |seen: usize| {
            let t = started.elapsed();
            seen >= 5 || (seen >= 1 && t >= Duration::from_secs(20)) || t >= ends::HANG
        };
        while !enough(seen) {
            let Some(pid) = a_holder(Duration::from_secs(2)) else {
                continue;
            };
            let (umask, nice, policy) = (umask_of(pid), stat_field(pid, 19), stat_field(pid, 41));
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            // Still the launch, still holding: what was read is its root phase's.
            if comm.trim() != "squashfs-mount" || !shared_holders().contains(&pid) {
                continue;
            }
            seen += 1;
            assert_eq!(
                (umask.as_deref(), nice.as_deref(), policy.as_deref()),
                (Some("0077"), Some("0"), Some("0")),
                "a lock holder's (umask, nice, policy) are the caller's"
            );
        }
        assert!(
            seen >= 1,
            "no launch of user a was seen holding a shared lock"
        );
    });
}

/// The command gets back what the caller had: its umask, nice value and
/// scheduling policy (the root phase's reset never reaches it). The
/// caller's nice value is 7 more than the test's own (a test run under
/// `nice` starts above 0).
#[test]
fn the_command_gets_the_callers_umask_and_scheduling_back() {
    case(|fx| {
        let (img, m) = fx.image_at("back", &[("f", "back\n")]);
        // (This thread's: nice values are per thread.)
        let ours: i32 = fs::read_to_string("/proc/thread-self/stat")
            .ok()
            .and_then(|st| {
                st.rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .nth(16)?
                    .parse()
                    .ok()
            })
            .expect("our nice value");
        let callers = (ours + 7).min(19).to_string();
        let r = fx.user_sh(&format!(
            "umask 0027; nice -n 7 chrt -i 0 \"$SQM\" {} -- sh -c 'umask; cut -d\" \" -f19 /proc/self/stat; chrt -p $$'",
            pair(&img, &m)
        ));
        assert!(r.success() && r.stderr().is_empty(), "{}", r.stderr());
        let out = r.stdout();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first().copied(), Some("0027"), "{out}");
        assert_eq!(lines.get(1).copied(), Some(callers.as_str()), "{out}");
        assert!(out.contains("SCHED_IDLE"), "{out}");
    });
}

/// Finding 2: a user who makes the usage scan blind (namespaces with a
/// large mountinfo, at pids before the victim's) and then evicts the
/// victim's idle cached FUSE instance does not end its server while the
/// victim's job still reads its image: no "Transport endpoint is not
/// connected". The server ends by itself once the job is over.
#[test]
fn a_fuse_server_whose_mount_is_in_use_is_never_killed() {
    case(|fx| {
        let _cfg = site::config("cache-max-idle = 1s\n");
        let others = Users::create(1, false);
        let a = others.first();
        let blind = sqfsmnt_test_support::blind::namespaces_with_large_mountinfo(&fx.root, a, 20);
        let own = fx.user_image("victim", &[("data", "still here\n")]);
        let mv = fx.mount_point("victim");
        // The job reads its image once user a's launch has evicted the
        // instance (a file says so), not after a guessed delay.
        let go = fx.user_dir().join("go");
        let job = spawn(&mut fx.user_cmd([
            pair(&own, &mv),
            "--".into(),
            "sh".into(),
            "-c".into(),
            format!(
                "while [ ! -e {go} ]; do sleep 0.05; done; cat {}/data",
                s(&mv),
                go = s(&go)
            ),
        ]));
        // The victim's instance is idle by the rules after 1 s; user a's
        // cold cached launch then evicts it.
        std::thread::sleep(Duration::from_millis(2500));
        let fresh = fx.image("attacker-fresh", &[("x", "x\n")], "");
        let ma = fx.mount_point("attacker");
        // A launch collects at most every 10 s (the gc-stamp), and the
        // victim's launch just made it recent: set back, a's launch collects.
        sqfsmnt_test_support::cachens::collect_at_next_launch();
        let evict = a.sh(&format!("\"{}\" {} -- true", s(&fx.bin), pair(&fresh, &ma)));
        assert!(evict.success(), "user a's launch: {}", evict.stderr());
        fs::write(&go, "").expect("go");
        let out = job.wait();
        drop(blind);
        assert!(
            out.success() && out.stdout() == "still here\n",
            "the victim's job lost its image: {out:?}"
        );
    });
}

/// A cgroup of the test's own in which user `a`'s processes get 1 ms of CPU
/// time a second (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`), as a
/// user can do to a delegated cgroup of their own.
struct CpuQuota {
    dir: PathBuf,
}

impl CpuQuota {
    fn make() -> Option<CpuQuota> {
        let name = format!("sqfsmnt-starve-{}", std::process::id());
        let v2 = Path::new("/sys/fs/cgroup");
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let dir = if fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.contains("cpu"))
        {
            let d = v2.join(&name);
            fs::create_dir(&d).ok()?;
            fs::write(d.join("cpu.max"), "1000 1000000").ok()?;
            d
        } else if v1.join("cpu.cfs_quota_us").exists() {
            let d = v1.join(&name);
            fs::create_dir(&d).ok()?;
            fs::write(d.join("cpu.cfs_period_us"), "1000000").ok()?;
            fs::write(d.join("cpu.cfs_quota_us"), "1000").ok()?;
            d
        } else {
            return None;
        };
        Some(CpuQuota { dir })
    }

    fn enter(&self, pid: u32) {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("move into the cgroup");
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        let procs = fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = try_run(Command::new("kill").args(["-KILL", pid]));
        }
        let t = Instant::now();
        while fs::remove_dir(&self.dir).is_err() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// User `b`'s launches while user `a`'s launch holds the cache's lock and
/// is starved of CPU: the warm one reuses the cache without waiting and
/// says nothing; a cold one does not wait out the lock's timeout (it
/// carries on, saying the holder makes no progress, or says nothing).
fn b_is_served(fx: &Fixture, b: &User, warm: &Path, cold: &Path, m: &Path) {
    for (img, warm) in [(warm, true), (cold, false)] {
        let out = fx.run_as(b, [pair(img, m), "--".into(), "true".into()]);
        out.ok_as("user b's launch");
        let err = out.stderr();
        if warm {
            assert!(
                err.is_empty(),
                "user b's warm launch waited for user a's: {err}"
            );
        } else {
            assert!(
                err.is_empty() || (err.lines().count() == 1 && err.contains("makes no progress")),
                "user b's cold launch: {err}"
            );
        }
    }
}

/// Finding 3: a user who starves their own launch of CPU while it holds the
/// cache's lock exclusively (a CPU quota on a cgroup of their own; or
/// SCHED_IDLE with busy loops of their own) stalls nobody. The lock's
/// timeout is 1 s here: a launch that waited it out says so ("busy"),
/// which is what the earlier code did.
#[test]
fn a_launch_starved_of_cpu_stalls_nobody() {
    case(|fx| {
        let _cfg = site::config("cache-lock-timeout = 1s\n");
        let others = Users::create(1, false);
        let b = others.first();
        let imgs: Vec<PathBuf> = (0..4)
            .map(|i| fx.image(&format!("starve{i}"), &[("n", &format!("{i}\n"))], ""))
            .collect();
        let warm = fx.image("starve-warm", &[("w", "w\n")], "");
        let (ma, mb) = (fx.mount_point("starve-a"), fx.mount_point("starve-b"));
        fx.run_as(b, [pair(&warm, &mb), "--".into(), "true".into()])
            .ok();
        let cache_lock = ["/run/squashfs-mount/lock"];
        let mut round = 0;
        // Round 0: SCHED_IDLE and two busy loops; round 1: a CPU quota.
        for technique in ["idle", "quota"] {
            let quota = match technique {
                "quota" => match CpuQuota::make() {
                    Some(q) => Some(q),
                    None => {
                        loud_skip(
                            "a_launch_starved_of_cpu_stalls_nobody: no cgroup CPU quota here",
                        );
                        continue;
                    }
                },
                _ => None,
            };
            let prefix = if quota.is_some() { "" } else { "chrt -i 0" };
            let _busy = (quota.is_none())
                .then(|| spawn_as(fx, &fx.user, "while :; do :; done & while :; do :; done"));
            let a = adversary(fx, &fx.user, &imgs, &ma, prefix);
            if let Some(q) = &quota {
                q.enter(a.0.id());
            }
            // Three rounds of user b's launches, each at a moment one of
            // user a's launches holds the cache's lock when one is seen in
            // time. A holder in a's quota holds it long (a's launches get
            // there slowly: 1 ms of CPU a second); since round 35 one under
            // `chrt -i 0` is not starved (root's shared work runs out of
            // its caller's scheduling reach) and holds it for a moment only.
            let starved = quota.is_some();
            let wait = Duration::from_secs(if starved { 30 } else { 5 });
            let mut caught = 0;
            for _ in 0..3 {
                let t = Instant::now();
                while exclusive_holders(&cache_lock).is_empty() && t.elapsed() < wait {
                    std::thread::sleep(Duration::from_millis(1));
                }
                caught += usize::from(!exclusive_holders(&cache_lock).is_empty());
                round += 1;
                let cold = fx.image(&format!("starve-cold{round}"), &[("c", "c\n")], "");
                b_is_served(fx, b, &warm, &cold, &mb);
            }
            drop(a);
            drop(quota);
            assert!(
                caught >= 1 || !starved,
                "{technique}: user a's launch never held the cache's lock"
            );
        }
    });
}
