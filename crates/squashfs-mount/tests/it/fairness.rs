//! Fairness between users (issue 19, findings 1, 4 and 5): no user can
//! stop or starve another user's launch through what launches share (the
//! image cache's lock, the loop-device budget, the making of an instance).
//! As unprivileged test users against the installed setuid binary; bounded
//! in time; every process, configuration and cgroup made is undone.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqfsmnt_test_support::cmd::{run, run_for, spawn, try_run, wait_until, Run};
use sqfsmnt_test_support::count::{attached_loops, loops_under};
use sqfsmnt_test_support::held;
use sqfsmnt_test_support::users::{User, Users};
use sqfsmnt_test_support::{ends, loud_skip, pair, s, site, Fixture};

use crate::case;

/// The pids holding a lock every user's launches share (the cache's
/// lock, a loop device's claim; read anew: claims are made as devices are).
fn shared_holders() -> Vec<u32> {
    held::holders(&held::shared_lock_ids(), "")
}

/// The pids holding the image cache's lock: the one shared lock that
/// other users' launches wait for (a loop device's claim is never waited
/// for: a launch that finds it taken takes another device).
fn cache_lock_holders() -> Vec<u32> {
    held::holders(&held::lock_ids(&["/run/squashfs-mount/lock"]), "")
}

fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

use std::os::unix::process::CommandExt;

use sqfsmnt_test_support::held::Group as Kill;

/// User `a` launching in a loop, in a process group of its own: fresh
/// private instances (the loop-device lock), cached launches of a fresh
/// image each round (the cache lock, exclusively), and `--gc` (the same).
/// It starts once its stdin is closed (after the caller put it where it
/// wants it).
fn adversary(fx: &Fixture, a: &User, imgs: &[PathBuf], m: &Path) -> Kill {
    let list: Vec<String> = imgs.iter().map(|i| s(i)).collect();
    let script = format!(
        "read _ <&0 || true\n\
         while :; do for i in {list}; do \
           \"$SQM\" --no-cache \"$i:{m}\" -- true 2>/dev/null; \
           \"$SQM\" \"$i:{m}\" -- true 2>/dev/null; \
           \"$SQM\" --gc >/dev/null 2>&1; \
         done; done",
        list = list.join(" "),
        m = s(m)
    );
    let child = a
        .command("sh")
        .args(["-c", &script])
        .env("SQM", &fx.bin)
        .current_dir(&fx.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("adversary");
    Kill(child)
}

/// User `b`'s launches of a root image while the shared state may be held
/// by a stalled process of another user: a cached launch and a private one
/// both succeed without waiting for it. A launch that waited for a lock
/// until its timeout says so ("it was busy for N s"); one that waited
/// without a bound is ended by the hang limit. Returns their stderr.
fn others_are_served(fx: &Fixture, b: &User, img: &Path, m: &Path) -> Vec<String> {
    let mut errs = Vec::new();
    for cache in [true, false] {
        let mut args = vec![];
        if !cache {
            args.push("--no-cache".to_string());
        }
        args.extend([pair(img, m), "--".into(), "true".into()]);
        let out = run_for(
            b.command(&fx.bin).args(&args).current_dir(&fx.root),
            ends::HANG,
        );
        out.ok_as("user b's launch");
        let err = out.stderr();
        assert!(
            !err.contains("was busy for"),
            "user b's launch {args:?} waited for a lock: {err}"
        );
        errs.push(err);
    }
    errs
}

/// Finding 1: a user who stops (SIGSTOP) their own launch at the moment it
/// holds the cache's or the loop devices' lock stalls nobody. The holder
/// is out of its caller's reach (its real uid is 0 while it holds them):
/// the stop is refused, or lands only once the lock is released.
#[test]
fn a_stopped_launch_holds_nothing_others_wait_on() {
    case(|fx| {
        let others = Users::create(1, false);
        let b = others.first();
        let imgs: Vec<PathBuf> = (0..4)
            .map(|i| fx.image(&format!("stop{i}"), &[("n", &format!("{i}\n"))], ""))
            .collect();
        let img_b = fx.image("stop-b", &[("b", "b\n")], "");
        let (ma, mb) = (fx.mount_point("stop-a"), fx.mount_point("stop-b"));
        // The state directory and its locks exist before we watch them.
        fx.launch_true(&img_b, &mb).ok();
        assert!(
            !held::shared_lock_ids().is_empty(),
            "the cache's lock was not made"
        );
        let mut a = adversary(fx, &fx.user, &imgs, &ma);
        drop(a.0.stdin.take());
        let (mut tried, mut stopped) = (0, 0);
        // 20 s of tries, or more until 10 were made (a loaded machine
        // launches less often), up to 40 tries or the hang limit.
        let started = Instant::now();
        let enough = |tried: usize| {
            let t = started.elapsed();
            tried >= 40 || (tried >= 10 && t >= Duration::from_secs(20)) || t >= ends::HANG
        };
        while !enough(tried) {
            let Some(&pid) = shared_holders().first() else {
                continue;
            };
            tried += 1;
            let kill = run(fx.user.command("kill").args(["-STOP", &pid.to_string()]));
            if !kill.success() {
                continue;
            }
            // Stopped: give the signal time to land, then look (one that
            // lands later is not counted: a try all the same).
            let t = Instant::now();
            while state(pid).is_some_and(|c| c != 'T') && t.elapsed() < Duration::from_millis(200) {
                std::thread::sleep(Duration::from_millis(1));
            }
            if state(pid) == Some('T') {
                stopped += 1;
                let still = shared_holders().contains(&pid);
                if !still {
                    others_are_served(fx, b, &img_b, &mb);
                }
                let _ = try_run(Command::new("kill").args(["-KILL", &pid.to_string()]));
                assert!(
                    !still,
                    "user a stopped its launch {pid} while it held a shared lock"
                );
            }
        }
        assert!(
            tried >= 10,
            "only {tried} launches of user a were seen holding a lock"
        );
        // Whatever was stopped, user b is served now.
        others_are_served(fx, b, &img_b, &mb);
        eprintln!("fairness: {tried} stops tried on lock holders, {stopped} landed after release");
        drop(a);
    });
}

/// A cgroup v2 of the test's own, whose freezer user `a` may use (as a
/// delegated cgroup of a systemd user session is).
struct Freezer {
    dir: PathBuf,
}

impl Freezer {
    fn make(a: &User) -> Option<Freezer> {
        let base = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .find(|b| Path::new(b).join("cgroup.controllers").exists())?;
        let dir = Path::new(base).join(format!("sqfsmnt-freeze-{}", std::process::id()));
        fs::create_dir(&dir).ok()?;
        if !dir.join("cgroup.freeze").exists() {
            let _ = fs::remove_dir(&dir);
            return None;
        }
        a.chown(&dir.join("cgroup.freeze"));
        Some(Freezer { dir })
    }

    fn enter(&self, pid: u32) {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("move into the cgroup");
    }

    fn frozen(&self) -> bool {
        fs::read_to_string(self.dir.join("cgroup.events"))
            .unwrap_or_default()
            .lines()
            .any(|l| l == "frozen 1")
    }

    fn thaw(&self) {
        let _ = fs::write(self.dir.join("cgroup.freeze"), "0");
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        self.thaw();
        let _ = fs::write(self.dir.join("cgroup.kill"), "1");
        let t = Instant::now();
        while fs::remove_dir(&self.dir).is_err() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Finding 1, the way signals cannot reach: a user with a cgroup of their
/// own (systemd delegates one to every session) freezes it while their
/// launch holds a shared lock. Other users' launches see the frozen holder,
/// do not wait for it, and run (a private instance, one line saying why).
#[test]
fn a_frozen_launch_stalls_nobody() {
    case(|fx| {
        let Some(freezer) = Freezer::make(&fx.user) else {
            loud_skip("a_frozen_launch_stalls_nobody: no cgroup v2 with cgroup.freeze here");
            return;
        };
        let others = Users::create(1, false);
        let b = others.first();
        let imgs: Vec<PathBuf> = (0..4)
            .map(|i| fx.image(&format!("frz{i}"), &[("n", &format!("{i}\n"))], ""))
            .collect();
        let img_b = fx.image("frz-b", &[("b", "b\n")], "");
        let (ma, mb) = (fx.mount_point("frz-a"), fx.mount_point("frz-b"));
        fx.launch_true(&img_b, &mb).ok();
        let mut a = adversary(fx, &fx.user, &imgs, &ma);
        freezer.enter(a.0.id());
        drop(a.0.stdin.take());
        let (mut caught, mut tries) = (0, 0);
        // 30 s of tries for 3 catches, or more until one (a loaded machine
        // launches less often), up to the hang limit. Each try freezes the
        // cgroup, then looks for a holder among the frozen: seeing a holder
        // first and freezing after missed it on a loaded machine (the lock
        // is held for milliseconds; a freeze can take longer).
        let started = Instant::now();
        let enough = |caught: usize| {
            let t = started.elapsed();
            caught >= 3 || (caught >= 1 && t >= Duration::from_secs(30)) || t >= ends::HANG
        };
        while !enough(caught) {
            tries += 1;
            let froze = fx.user.sh(&format!(
                "echo 1 > {}",
                s(&freezer.dir.join("cgroup.freeze"))
            ));
            assert!(
                froze.success(),
                "user a cannot use its cgroup's freezer: {}",
                froze.stderr()
            );
            wait_until(ends::HANG, "user a's cgroup to be frozen", || {
                freezer.frozen()
            });
            if freezer.frozen() && !cache_lock_holders().is_empty() {
                caught += 1;
                let mut errs = others_are_served(fx, b, &img_b, &mb);
                // A warm launch takes no lock (the cache's reuse is
                // lock-free): a fresh image of b's is what waits for the
                // cache's lock.
                let fresh = fx.image(&format!("frz-b{tries}"), &[("b", "b\n")], "");
                errs.extend(others_are_served(fx, b, &fresh, &mb).into_iter().take(1));
                let said = errs.iter().filter(|e| e.contains("frozen")).count();
                assert!(said >= 1, "no launch said why it did not wait: {errs:?}");
                for e in &errs {
                    assert!(e.lines().count() <= 1, "more than one line: {e}");
                }
            }
            freezer.thaw();
        }
        assert!(
            caught >= 1,
            "user a's launch was never frozen while holding a shared lock ({tries} tries)"
        );
        drop(a);
        drop(freezer);
    });
}

/// Finding 5: 128 concurrent cold launches of one image share one fresh
/// instance: at no moment is more than one loop device backed by it.
#[test]
fn a_burst_of_cold_launches_attaches_one_loop_device() {
    case(|fx| {
        // (A waiter gives up on the maker after cache-lock-timeout and makes
        // an instance of its own, which a loaded machine reached with 128
        // launches: out of reach here, so the outcome does not depend on
        // the machine's speed.)
        let _conf = site::config("max-launches-per-user = 128\ncache-lock-timeout = 10m\n");
        let (img, m) = fx.image_at("burst", &[("x", "x\n")]);
        let path = s(&img);
        let done = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let sampler = {
            let (done, most, path) = (done.clone(), most.clone(), path.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let n = attached_loops().iter().filter(|(_, f)| *f == path).count();
                    most.fetch_max(n, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_micros(500));
                }
            })
        };
        let launches: Vec<_> = (0..128)
            .map(|_| {
                spawn(&mut fx.user_cmd([
                    pair(&img, &m),
                    "--".into(),
                    "cat".into(),
                    s(&m.join("x")),
                ]))
            })
            .collect();
        let mut failed = Vec::new();
        for c in launches {
            let out = c.wait();
            if !out.success() || out.stdout() != "x\n" || !out.0.stderr.is_empty() {
                failed.push(out.stderr());
            }
        }
        done.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        assert!(
            failed.is_empty(),
            "{} launches failed or spoke: {:?}",
            failed.len(),
            &failed[..failed.len().min(3)]
        );
        let most = most.load(Ordering::Relaxed);
        assert!(most >= 1, "the sampler never saw the image's loop device");
        assert_eq!(
            most, 1,
            "{most} loop devices were backed by the image at once"
        );
        assert_eq!(loops_under(&img).len(), 1, "the cache keeps one instance");
    });
}

/// Finding 4: one user's private instances are capped by their share
/// (`max-loop-devices-per-user`), with a refusal that names it; another
/// user's launches are not affected.
#[test]
fn each_user_has_a_share_of_the_loop_devices() {
    case(|fx| {
        let _conf = site::config("max-loop-devices-per-user = 2\n");
        let (img, m) = fx.image_at("share", &[("x", "x\n")]);
        let hold = |u: &User| {
            Kill::quiet(u.command(&fx.bin).args([
                "--no-cache".into(),
                pair(&img, &m),
                "--".into(),
                "sleep".into(),
                "60".into(),
            ]))
        };
        // Cached before: reusing it later takes no loop device.
        fx.launch_true(&img, &m).ok();
        let held = [hold(&fx.user), hold(&fx.user)];
        wait_until(ends::HANG, "three loop devices", || {
            loops_under(&img).len() >= 3
        });
        assert_eq!(
            loops_under(&img).len(),
            3,
            "the cached instance and two private instances of user a"
        );
        fx.run([
            "--no-cache".into(),
            pair(&img, &m),
            "--".into(),
            "true".into(),
        ])
        .refused(&["max-loop-devices-per-user", "2"]);
        // The cache is not the user's share: a launch that reuses the
        // cached instance works.
        fx.launch_true(&img, &m).ok();
        let others = Users::create(1, false);
        private_launch(fx, others.first(), &img, &m).ok();
        drop(held);
    });
}

/// Whom a loop device counts for, without renaming it (round 34): the
/// device keeps the name of the user whose launch attached it; while the
/// cache holds its instance it counts for the cache (the cache's records
/// say so), and once evicted while still in use, for that user again.
#[test]
fn a_cached_device_counts_for_the_cache_and_once_evicted_in_use_for_its_maker() {
    case(|fx| {
        let _conf = site::config("max-loop-devices-per-user = 1\n");
        let (img, m) = fx.image_at("maker", &[("x", "x\n")]);
        // A cached launch that keeps using its instance.
        let _hold = Kill::quiet(&mut fx.user_cmd([
            pair(&img, &m),
            "--".into(),
            "sleep".into(),
            "60".into(),
        ]));
        // Once its launch offered it, the cache lists it.
        wait_until(ends::HANG, "the instance in --cache-status", || {
            let status = fx.run(["--cache-status"]);
            status.ok();
            status.stdout().contains(&s(&img))
        });
        // The cached device is not the user's: their share of 1 is free.
        let private = || {
            fx.run([
                "--no-cache".into(),
                pair(&img, &m),
                "--".into(),
                "true".into(),
            ])
        };
        private().ok();
        // Evicted while the launch above still uses it: it is theirs now.
        fx.run(["--gc".to_string(), s(&img)]).ok();
        assert_eq!(loops_under(&img).len(), 1, "the held device stays");
        private().refused(&["max-loop-devices-per-user", "1"]);
    });
}

/// User `a`'s signaller: for each pid it reads, sends SIGSTOP as user `a`
/// until one lands (the launch is out of reach, EPERM, while it holds a
/// shared lock) or the process is gone, then answers a line.
struct Signaller {
    child: Kill,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Signaller {
    fn start(a: &User) -> Signaller {
        let script = "while read p; do \
             while [ -d /proc/$p ] && ! kill -STOP $p 2>/dev/null; do :; done; \
             echo x; done";
        let mut child = a
            .command("sh")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("signaller");
        let out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        Signaller {
            child: Kill(child),
            out,
        }
    }

    fn stop(&mut self, pid: u32) {
        use std::io::{BufRead, Write};
        let stdin = self.child.0.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{pid}").expect("to the signaller");
        let mut line = String::new();
        self.out.read_line(&mut line).expect("from the signaller");
    }
}

/// Issue 26, finding 4: a fresh instance made for the cache counts for
/// the user whose launch attached it until the cache takes it, and the
/// cache holds at most their share of the instances they made. User `a`
/// stops (SIGSTOP, as `a`) each of their cold launches as soon as it can
/// after its attach (before the cache takes the instance, or after if it
/// is quick): `a` ends up with at most their loop share plus their cache
/// share, and user `b`'s fresh instance still gets a loop device. Since
/// round 35 a launch stopped before its instances are offered keeps its
/// user's hold, and their next launch is refused at once, naming it.
#[test]
fn a_user_stopping_their_launches_keeps_within_their_share() {
    case(|fx| {
        let _conf = site::config(
            "max-loop-devices = 4\nmax-loop-devices-per-user = 2\ncache-max-instances-per-user = 1\n",
        );
        let dir_a = fx.path("images/share-a");
        fs::create_dir_all(&dir_a).unwrap();
        let imgs: Vec<PathBuf> = (0..6)
            .map(|i| {
                let img = fx.image(&format!("share-a{i}"), &[("n", &format!("{i}\n"))], "");
                let moved = dir_a.join(format!("{i}.sqfs"));
                fs::rename(&img, &moved).unwrap();
                moved
            })
            .collect();
        let img_b = fx.image("share-b", &[("b", "b\n")], "");
        let (ma, mb) = (fx.mount_point("share-a"), fx.mount_point("share-b"));
        // The state directory and its locks exist before we watch them.
        fx.run([
            "--no-cache".into(),
            pair(&img_b, &mb),
            "--".into(),
            "true".into(),
        ])
        .ok();
        // Devices of earlier launches (autoclear lags a little) are gone.
        wait_until(ends::HANG, "earlier loop devices to detach", || {
            loops_under(&fx.root).is_empty()
        });
        let mut signaller = Signaller::start(&fx.user);
        let (launches, refused) = stop_launches_as_they_attach(fx, &mut signaller, &imgs, &ma);
        let held_by_a = loops_under(&dir_a).len();
        eprintln!(
            "share: {} launches stopped; a holds {held_by_a} loop devices; refused: {refused:?}",
            launches.len()
        );
        let out = private_launch(fx, Users::create(1, false).first(), &img_b, &mb);
        let loops = attached_loops();
        drop(launches);
        drop(signaller);
        assert!(
            out.success(),
            "user b was refused a loop device: {out:?} (attached: {loops:?})"
        );
        assert!(
            held_by_a <= 3,
            "user a holds {held_by_a} loop devices, beyond their share of 2 and cache share of 1"
        );
        let refused = refused.expect("user a was never refused");
        assert!(
            refused.contains("max-loop-devices-per-user") || refused.contains("holds your share"),
            "{refused}"
        );
    });
}

/// User a's launches of `imgs` (`sleep 60`), each stopped (SIGSTOP, by
/// `signaller`) as soon as its loop device is attached, until one is
/// refused: the stopped launches (killed on drop) and the refusal's stderr.
fn stop_launches_as_they_attach(
    fx: &Fixture,
    signaller: &mut Signaller,
    imgs: &[PathBuf],
    ma: &Path,
) -> (Vec<Kill>, Option<String>) {
    let (mut launches, mut refused, mut window) = (Vec::new(), None, 0);
    for img in imgs {
        let mut c = fx
            .user_cmd([pair(img, ma), "--".into(), "sleep".into(), "60".into()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("launch");
        let pid = c.id();
        let t = Instant::now();
        // Its device is configured under the loop-device lock, while
        // the launch is out of reach: the stop lands once it is back.
        let attached = loop {
            if !loops_under(img).is_empty() {
                break true;
            }
            if matches!(c.try_wait(), Ok(Some(_))) || t.elapsed() > ends::HANG {
                break false;
            }
        };
        if !attached {
            let _ = c.kill();
            let out = c.wait_with_output().expect("wait");
            refused = Some(String::from_utf8_lossy(&out.stderr).into_owned());
            break;
        }
        signaller.stop(pid);
        let cached = fx.run(["--cache-status"]).stdout().contains(&s(img));
        if state(pid) == Some('T') && !cached && !loops_under(img).is_empty() {
            window += 1;
        }
        launches.push(Kill(c));
    }
    eprintln!(
        "share: {} launches stopped, {window} between attach and cache",
        launches.len()
    );
    (launches, refused)
}

/// `squashfs-mount --no-cache img:m -- true` as `user`.
fn private_launch(fx: &Fixture, user: &User, img: &Path, m: &Path) -> Run {
    run(user
        .command(&fx.bin)
        .args([
            "--no-cache".into(),
            pair(img, m),
            "--".into(),
            "true".into(),
        ])
        .current_dir(&fx.root))
}
