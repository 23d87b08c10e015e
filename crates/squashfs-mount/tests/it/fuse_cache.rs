//! Cached FUSE instances (issue 21): a user's FUSE instance (server +
//! mount) outlives the command in the image cache and the user's next
//! launch of the same file attaches a clone of it. As unprivileged test
//! users against the installed setuid binary; every case evicts what it
//! made, and the fixture checks that no mount or loop device is left.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sqfsmnt_test_support::cmd::{run, spawn, try_run, wait_until};
use sqfsmnt_test_support::count::{processes_named, CORRUPT_FUSE_SERVER_NAME, FUSE_SERVER_NAME};
use sqfsmnt_test_support::ends;
use sqfsmnt_test_support::users::{User, Users};
use sqfsmnt_test_support::{kernel, pair, s, site, Fixture};

use crate::case;

/// Pids of the FUSE servers whose real uid is `uid` (those that found
/// their image corrupt too). A launch's reporter is the same program
/// (`--report`), under the server's name from its exec until it names
/// itself: not a server.
fn servers_of(uid: u32) -> Vec<u32> {
    let mut all = processes_named(uid, FUSE_SERVER_NAME);
    all.extend(processes_named(uid, CORRUPT_FUSE_SERVER_NAME));
    all.retain(|pid| {
        !fs::read(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .split(|&b| b == 0)
            .any(|arg| arg == b"--report")
    });
    all
}

/// A process as a failed assertion shows it: its pid, state and command
/// line.
fn described(pid: u32) -> String {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim().chars().next();
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    format!("{pid} {state:?} {}", args.join(" "))
}

/// Waits until `uid` has no FUSE server (evicted servers exit at once):
/// each one's end, on its pidfd (up to the hang limit); those left.
fn wait_no_server(uid: u32) -> Vec<u32> {
    ends::wait_ended(&servers_of(uid), ends::HANG);
    servers_of(uid)
}

/// The image `name` copied into a directory of `user`'s, owned by them
/// (the FUSE path serves it).
fn own_image(fx: &Fixture, user: &User, name: &str) -> PathBuf {
    let dir = fx.user_dir().join(format!("own-{}", user.uid));
    fs::create_dir_all(&dir).unwrap();
    user.chown(&dir);
    let img = dir.join(format!("{name}.sqfs"));
    fs::copy(fx.image(name, &[("f", &format!("{name}\n"))], ""), &img).unwrap();
    user.chown(&img);
    img
}

fn launch(user: &User, fx: &Fixture, args: &[String]) -> (bool, String, String) {
    let out = fx.run_as(user, args);
    (out.success(), out.stdout(), out.stderr())
}

fn cat(img: &Path, m: &Path) -> Vec<String> {
    vec![pair(img, m), "--".into(), "cat".into(), s(&m.join("f"))]
}

/// The user's second launch reuses the instance: same server, one server,
/// and `--verbose` says so; the server holds none of the launch's
/// descriptors (a command substitution returns at once); `--cache-status`
/// lists it with the server's pid; `--gc` evicts it and the server is gone.
/// The user's `--gc` evicts their instances: no server of theirs is
/// left.
fn gc_ends_every_server(fx: &Fixture) {
    fx.run(["--gc"]).ok();
    assert!(wait_no_server(fx.uid).is_empty());
}

#[test]
fn a_second_launch_reuses_the_users_fuse_instance() {
    case(|fx| {
        let _conf = site::no_config();
        let img = own_image(fx, &fx.user, "reuse");
        let m = fx.mount_point("fuse-cache");
        let r = fx.run(cat(&img, &m));
        r.ok();
        assert_eq!(r.stdout(), "reuse\n");
        assert!(r.stderr().is_empty(), "{}", r.stderr());
        let first = servers_of(fx.uid);
        assert_eq!(first.len(), 1, "one server kept: {first:?}");
        let mut args = vec!["-v".to_string()];
        args.extend(cat(&img, &m));
        let r = fx.run(&args);
        r.ok();
        assert!(
            r.stderr().contains("your cached FUSE instance reused"),
            "{}",
            r.stderr()
        );
        assert_eq!(servers_of(fx.uid), first, "the same server, no new one");
        // Had the server the substitution's pipe, it would wait for the
        // server's end, which comes only with --gc: the run's time limit
        // would end it.
        let sub = fx.user_sh(&format!(
            "out=$(\"$SQM\" {} -- true); echo \"[$out]\"",
            pair(&img, &m)
        ));
        sub.ok();
        assert_eq!(sub.stdout(), "[]\n");
        let status = fx.run(["--cache-status"]);
        status.ok();
        let line = status
            .stdout()
            .lines()
            .find(|l| l.contains(&s(&img)))
            .map(String::from)
            .unwrap_or_default();
        assert!(
            line.contains("FUSE") && line.contains(&format!("pid {}", first[0])),
            "{}",
            status.stdout()
        );
        assert!(
            status.stdout().contains("/run/squashfs-mount-fuse/"),
            "the log is named"
        );
        fx.run(["--gc"]).ok();
        assert!(wait_no_server(fx.uid).is_empty(), "--gc left the server");
    });
}

/// Another user of the same file never gets the first user's server: they
/// get one of their own, running as them.
#[test]
fn another_user_never_gets_the_first_users_server() {
    case(|fx| {
        let _conf = site::no_config();
        let others = Users::create(1, false);
        let b = others.first();
        let img = own_image(fx, &fx.user, "shared");
        let m = fx.mount_point("fuse-other");
        fx.run(cat(&img, &m)).ok();
        let mine = servers_of(fx.uid);
        assert_eq!(mine.len(), 1);
        let (ok, out, err) = launch(b, fx, &cat(&img, &m));
        assert!(ok, "{err}");
        assert_eq!(out, "shared\n");
        assert_eq!(servers_of(fx.uid), mine, "user a's server untouched");
        assert_eq!(
            servers_of(b.uid).len(),
            1,
            "user b has a server of their own"
        );
        let (ok, _, err) = launch(b, fx, &["--gc".to_string()]);
        assert!(ok, "{err}");
        assert!(wait_no_server(b.uid).is_empty());
        assert_eq!(
            servers_of(fx.uid),
            mine,
            "user b's --gc leaves user a's instance"
        );
        gc_ends_every_server(fx);
    });
}

/// A modified image gets a new instance; the old one is evicted (unused)
/// and its server gone. Idle instances go with the timer's collection
/// (`--gc --expired`, here with `cache-max-idle = 0`).
#[test]
fn a_modified_image_gets_a_new_instance_and_idle_ones_expire() {
    case(|fx| {
        let _conf = site::config("cache-max-idle = 1h\n");
        let img = own_image(fx, &fx.user, "modified");
        let m = fx.mount_point("fuse-mod");
        fx.run(cat(&img, &m)).ok();
        let old = servers_of(fx.uid);
        assert_eq!(old.len(), 1);
        // Same bytes, new times: another file as far as the cache knows.
        fx.user_sh(&format!("touch {}", s(&img))).ok();
        let r = fx.run(cat(&img, &m));
        r.ok();
        // The stale instance was evicted: its server exits once its mount
        // is gone (its end, on its pidfd).
        ends::wait_ended(&old, ends::HANG);
        let new = servers_of(fx.uid);
        assert_eq!(
            new.len(),
            1,
            "the stale instance's server was ended: {new:?}"
        );
        assert_ne!(new, old);
        drop(_conf);
        let _conf = site::config("cache-max-idle = 0\n");
        run(Command::new(&fx.bin).args(["--gc", "--expired"])).ok();
        assert!(
            wait_no_server(fx.uid).is_empty(),
            "--gc --expired left the idle server"
        );
    });
}

/// SIGKILL of the server: a command using it gets an error, not a hang,
/// and the next launch starts a new instance with one line saying why.
#[test]
fn a_killed_server_is_replaced_by_the_next_launch() {
    case(|fx| {
        let _conf = site::no_config();
        let img = own_image(fx, &fx.user, "killed");
        let m = fx.mount_point("fuse-kill");
        fx.run(cat(&img, &m)).ok();
        let server = servers_of(fx.uid);
        assert_eq!(server.len(), 1);
        // A command that reads after the server is gone; it says when it
        // runs (on the reused instance), and the server is killed then.
        let running = fx.user_dir().join("running");
        let script = format!(
            "\"$SQM\" {} -- sh -c 'touch {running}; while [ ! -e {go} ]; do sleep 0.05; done; ls {m}/x 2>&1; cat {m}/f 2>&1; echo done'",
            pair(&img, &m),
            running = s(&running),
            go = s(&fx.user_dir().join("go")),
            m = s(&m)
        );
        let child = spawn(
            fx.user
                .command("sh")
                .args(["-c", &script])
                .env("SQM", &fx.bin)
                .current_dir(&fx.root),
        );
        wait_until(ends::HANG, "the command to run", || running.exists());
        run(Command::new("kill").args(["-KILL", &server[0].to_string()]));
        fx.user_sh(&format!("touch {}", s(&fx.user_dir().join("go"))))
            .ok();
        assert!(
            ends::wait_ended(&[child.id()], ends::HANG).is_empty(),
            "the command hung"
        );
        let text = child.wait().stdout();
        assert!(
            text.contains("Transport endpoint is not connected")
                || text.contains("Input/output error"),
            "{text}"
        );
        assert!(text.contains("done"), "{text}");
        let r = fx.run(cat(&img, &m));
        r.ok();
        assert_eq!(r.stdout(), "killed\n");
        let err = r.stderr();
        assert!(
            err.contains(&format!("server (pid {}) is gone", server[0])),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        gc_ends_every_server(fx);
    });
}

/// The image that oopsed this kernel, owned by the user, is served and
/// refused by our reader through a cached instance, twice; the kernel log
/// does not change. Issue 28: each launch says, in one line on exit, why
/// its command's reads failed and where the server's log is (the server
/// of a cached instance has no stderr); and the server that found the
/// image corrupt is not reused: the second launch starts a fresh one,
/// without a word about the first.
#[test]
fn the_crash_image_through_a_cached_instance() {
    case(|fx| {
        let _conf = site::no_config();
        let dir = fx.user_dir().join("crash");
        fs::create_dir_all(&dir).unwrap();
        fx.user.chown(&dir);
        let img = dir.join("crash.sqfs");
        fs::copy(kernel::crash_image(), &img).unwrap();
        fx.user.chown(&img);
        let policy = fx.run(["--policy".to_string(), s(&img)]);
        assert!(policy.stdout().contains("FUSE"), "{}", policy.stdout());
        let before = kernel::problems();
        let m = fx.mount_point("fuse-crash");
        let log = format!("/run/squashfs-mount-fuse/{}.log", fx.uid);
        let mut marked = Vec::new();
        for round in 0..2 {
            let mut args = vec!["-v".to_string(), pair(&img, &m), "--".into()];
            args.extend([
                "sh".into(),
                "-c".into(),
                format!("cat $(find {} -type f) >/dev/null; echo $?", s(&m)),
            ]);
            let r = fx.run(&args);
            // The server accepts the image (its superblock is sound) and
            // the reads fail: never a kernel mount.
            r.ok();
            assert_ne!(
                r.stdout().trim(),
                "0",
                "round {round}: every read succeeded"
            );
            let err = r.stderr();
            let told: Vec<&str> = err
                .lines()
                .filter(|l| l.contains("the image is corrupt"))
                .collect();
            assert_eq!(told.len(), 1, "round {round}: {err}");
            let line = told[0];
            assert!(
                line.starts_with(&format!("squashfs-mount: {}: corrupt ", s(&img)))
                    && line.contains("Input/output error")
                    && line.contains("'sqfs check' on the image names the damaged files")
                    && line.ends_with(&format!("(its FUSE server's log: {log})")),
                "round {round}: {line}"
            );
            // The fresh instance of each round, kept in the cache.
            assert!(
                err.contains("a FUSE server of yours started") && !err.contains("reused"),
                "round {round}: {err}"
            );
            assert!(!err.contains("is gone"), "round {round}: {err}");
            let now = processes_named(fx.uid, CORRUPT_FUSE_SERVER_NAME);
            assert!(
                now.iter().any(|p| !marked.contains(p)),
                "round {round}: no newly marked server among {now:?} (before: {marked:?})"
            );
            marked = now;
        }
        assert_eq!(kernel::problems(), before, "the kernel log changed");
        gc_ends_every_server(fx);
    });
}

/// 128 concurrent launches of the user's image: one server and one
/// instance.
#[test]
fn a_burst_of_launches_starts_one_server() {
    case(|fx| {
        // (A waiter gives up on the maker after cache-lock-timeout and starts
        // a server of its own, which a loaded machine reached with 128
        // launches: out of reach here, so the outcome does not depend on
        // the machine's speed.)
        let _conf = site::config("max-launches-per-user = 128\ncache-lock-timeout = 10m\n");
        let img = own_image(fx, &fx.user, "fuse-burst");
        let m = fx.mount_point("fuse-burst");
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let uid = fx.uid;
        let sampler = {
            let done = done.clone();
            std::thread::spawn(move || {
                // The most seen at once, and what they were the first time
                // there were more than one (their command lines).
                let (mut most, mut seen) = (0, Vec::new());
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let now = servers_of(uid);
                    if now.len() > most {
                        most = now.len();
                        if most > 1 && seen.is_empty() {
                            seen = now.iter().map(|pid| described(*pid)).collect();
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                (most, seen)
            })
        };
        let children: Vec<_> = (0..128)
            .map(|_| spawn(&mut fx.user_cmd(cat(&img, &m))))
            .collect();
        let mut failed = Vec::new();
        for c in children {
            let o = c.wait();
            if !o.success() || o.stdout() != "fuse-burst\n" {
                failed.push(o.stderr());
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (most, seen) = sampler.join().unwrap();
        assert!(
            failed.is_empty(),
            "{} failed: {:?}",
            failed.len(),
            &failed[..failed.len().min(3)]
        );
        assert_eq!(
            most, 1,
            "{most} servers of the user at once during the burst: {seen:?}"
        );
        let servers = servers_of(fx.uid);
        assert_eq!(servers.len(), 1, "{servers:?}");
        gc_ends_every_server(fx);
    });
}

/// Issue 26, finding 5: no user-writable file in root's /run. A user's
/// cached FUSE instances log to a file of root's (mode 0640: an ACL entry
/// lets its user read it), which the user can read but not write, and
/// another user cannot read; a log an older version gave its user is
/// replaced. No warning, and the instance is kept.
#[test]
fn the_users_fuse_log_is_roots_and_only_readable_by_them() {
    case(|fx| {
        use std::os::unix::fs::MetadataExt;
        let _conf = site::no_config();
        let log = PathBuf::from(format!("/run/squashfs-mount-fuse/{}.log", fx.uid));
        // As an older version left it: the user's own file.
        let _ = fs::create_dir_all("/run/squashfs-mount-fuse");
        fs::write(&log, "old\n").unwrap();
        fx.user.chown(&log);
        let img = own_image(fx, &fx.user, "first-log");
        let m = fx.mount_point("fuse-log");
        let r = fx.run(cat(&img, &m));
        r.ok();
        assert_eq!(r.stderr(), "", "no warning");
        assert_eq!(servers_of(fx.uid).len(), 1, "the instance is kept");
        let st = fs::metadata(&log).expect("the user's log");
        assert_eq!((st.uid(), st.gid(), st.mode() & 0o7777), (0, 0, 0o640));
        let read = fx.user_sh(&format!("cat {}", s(&log)));
        read.ok();
        assert!(read.stdout().contains("serving"), "{}", read.stdout());
        let write = fx.user_sh(&format!("echo fill >> {}", s(&log)));
        assert!(!write.success(), "the user could write root's log");
        let others = Users::create(1, false);
        let peek = others.first().sh(&format!("cat {}", s(&log)));
        assert!(!peek.success(), "another user could read the log");
        let again = fx.run(cat(&img, &m));
        again.ok();
        assert_eq!(again.stderr(), "");
        gc_ends_every_server(fx);
        let _ = fs::remove_file(&log);
    });
}

/// A server its user stopped (SIGSTOP) cannot exit by itself once its
/// instance is evicted: the launch of another user that evicts it ends it
/// (CAP_KILL in the root phase).
#[test]
fn a_stopped_server_ends_when_another_users_launch_evicts_it() {
    case(|fx| {
        // Idle at once: the next launch evicts it.
        let _conf = site::config("cache-max-idle = 0\n");
        let others = Users::create(1, false);
        let b = others.first();
        let a_img = own_image(fx, &fx.user, "stopped-a");
        let b_img = own_image(fx, b, "stopped-b");
        let (ma, mb) = (fx.mount_point("fuse-stop-a"), fx.mount_point("fuse-stop-b"));
        fx.run(cat(&a_img, &ma)).ok();
        let mine = servers_of(fx.uid);
        assert_eq!(mine.len(), 1);
        let pid = mine[0].to_string();
        fx.user_sh(&format!("kill -STOP {pid}")).ok();
        let (ok, out, err) = launch(b, fx, &cat(&b_img, &mb));
        let gone = wait_no_server(fx.uid);
        // Whatever happened, leave no stopped process behind.
        let _ = try_run(Command::new("kill").args(["-KILL", &pid]));
        assert!(ok, "{err}");
        assert_eq!(out, "stopped-b\n");
        assert!(
            gone.is_empty(),
            "user a's stopped server was not ended: {gone:?}"
        );
        let (ok, _, err) = launch(b, fx, &["--gc".to_string()]);
        assert!(ok, "{err}");
        assert!(wait_no_server(b.uid).is_empty());
    });
}

/// The timer's `--gc --expired` (root) keeps an idle kernel instance until
/// it has expired, then evicts it and says so (the package test's check,
/// without a package).
#[test]
fn gc_expired_evicts_an_expired_kernel_instance() {
    case(|fx| {
        let _conf = site::config("cache-max-idle = 1h\n");
        let (img, m) = fx.image_at("expire-kernel", &[("f", "expire-kernel\n")]);
        fx.run(cat(&img, &m)).ok();
        let gc = || {
            run(Command::new(&fx.bin).args(["--gc", "--expired"]))
                .ok()
                .stdout()
        };
        let evicted = format!("evicted {}", s(&img));
        let first = gc();
        assert!(
            !first.contains(&evicted),
            "evicted before it expired: {first}"
        );
        drop(_conf);
        let _conf = site::config("cache-max-idle = 0\n");
        let second = gc();
        assert!(
            second.contains(&evicted),
            "not evicted once expired: {second}"
        );
    });
}

/// Tasks (processes and threads) whose real uid is `uid`: what
/// RLIMIT_NPROC counts.
fn tasks_of(uid: u32) -> usize {
    let real_uid = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u32>().ok())
    };
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .flat_map(|e| {
            fs::read_dir(e.path().join("task"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|t| {
            fs::read_to_string(t.path().join("status"))
                .ok()
                .and_then(|s| real_uid(&s))
                == Some(uid)
        })
        .count()
}

/// Issue 26, finding 7: each user has a share of the cache, which bounds
/// their cached FUSE servers (`cache-max-instances-per-user`): beyond it
/// their launches' servers end with the launch, and another user still
/// gets one cached.
#[test]
fn a_users_cached_fuse_servers_are_bounded_by_their_share() {
    case(|fx| {
        let _conf = site::config("cache-max-instances-per-user = 2\n");
        let m = fx.mount_point("fuse-share");
        let mut said = String::new();
        for i in 0..4 {
            let img = own_image(fx, &fx.user, &format!("fshare{i}"));
            let r = fx.run(cat(&img, &m));
            r.ok();
            said.push_str(&r.stderr());
        }
        // Those not kept end with their launch's mount (waited for up to
        // the hang limit; a server that ended is not counted, reaped or
        // not).
        let deadline = Instant::now() + ends::HANG;
        while servers_of(fx.uid).len() > 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let kept = servers_of(fx.uid);
        let others = Users::create(1, false);
        let b = others.first();
        let img_b = own_image(fx, b, "fshare-b");
        let (ok, _, err) = launch(b, fx, &cat(&img_b, &m));
        assert!(ok, "{err}");
        let b_kept = servers_of(b.uid).len();
        let (ok, _, err) = launch(b, fx, &["--gc".to_string()]);
        assert!(ok, "{err}");
        gc_ends_every_server(fx);
        assert!(wait_no_server(b.uid).is_empty());
        assert_eq!(kept.len(), 2, "user a's cached servers: {kept:?}");
        assert_eq!(said, "", "no warning");
        assert_eq!(b_kept, 1, "user b's server is cached");
    });
}

/// Issue 26, finding 7: a user's FUSE servers, started as root, count
/// under the user's RLIMIT_NPROC as if the user had forked them: a user
/// with `ulimit -u 12` who launches one FUSE-served image after another
/// (each leaving a cached server) never has more than 12 tasks; the
/// launches beyond say why.
#[test]
fn fuse_servers_respect_the_users_process_limit() {
    case(|fx| {
        let _conf = site::no_config();
        let m = fx.mount_point("fuse-nproc");
        let imgs: Vec<String> = (0..10)
            .map(|i| s(&own_image(fx, &fx.user, &format!("fnproc{i}"))))
            .collect();
        let script = format!(
            "ulimit -u 12; for i in {}; do \"$SQM\" \"$i:{}\" -- true 2>>{}/errs; done; true",
            imgs.join(" "),
            s(&m),
            s(&fx.user_dir()),
        );
        run(fx
            .user
            .command("bash")
            .args(["-c", &script])
            .env("SQM", &fx.bin)
            .current_dir(&fx.root))
        .ok();
        let tasks = tasks_of(fx.uid);
        let servers = servers_of(fx.uid).len();
        let errs = fs::read_to_string(fx.user_dir().join("errs")).unwrap_or_default();
        gc_ends_every_server(fx);
        assert!(
            tasks <= 12,
            "user a has {tasks} tasks ({servers} FUSE servers) with ulimit -u 12: {errs}"
        );
        assert!(
            errs.contains("ulimit -u"),
            "no launch said why ({tasks} tasks, {servers} servers): {errs}"
        );
    });
}
