//! Hardening (issue 11): no user can stall, exhaust or spy on other users
//! through the tool. As unprivileged test users against the installed
//! setuid binary; every test is bounded in time and undoes what it
//! changed (site configuration, user namespaces, locks).

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqfsmnt_test_support::cmd::{run, try_run};
use sqfsmnt_test_support::count::loops_under;
use sqfsmnt_test_support::users::Users;
use sqfsmnt_test_support::{ends, have, loud_skip, site, Fixture};
use sqfsmnt_test_support::{pair, s};

use crate::case;

/// Images `n` (distinct content), root-owned, in the fixture's images/.
fn images(fx: &Fixture, prefix: &str, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| fx.image(&format!("{prefix}{i}"), &[("n", &format!("{i}\n"))], ""))
        .collect()
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A user namespace whose mountinfo is larger than any bound of the tool
/// (1200 bind mounts with ~3.7 KB paths: about 9 MB) must not stop the
/// cache's eviction: beyond `cache-max-instances` the least recently used
/// unused instances go, whatever the scan of other namespaces could not
/// read in time.
#[test]
fn a_huge_mountinfo_does_not_stop_eviction() {
    case(|fx| {
        let _conf = site::config("cache-max-instances = 2\n");
        let script = r#"
            set -e
            chain="$PWD/chain"
            for i in $(seq 14); do chain="$chain/$(printf 'd%.0s' $(seq 250))$i"; done
            mkdir -p "$chain/src"
            for i in $(seq 1200); do mkdir "$chain/t$i"; mount --bind "$chain/src" "$chain/t$i"; done
            echo ready
            exec sleep 120
        "#;
        let dir = fx.user_dir();
        let holder = fx
            .user
            .command("unshare")
            .args(["-Urm", "sh", "-c", script])
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("unshare");
        let mut holder = Kill(holder);
        let mut line = String::new();
        BufReader::new(holder.0.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "ready",
            "the user namespace with many mounts could not be made"
        );
        let size = fs::read(format!("/proc/{}/mountinfo", holder.0.id()))
            .map(|b| b.len())
            .unwrap_or(0);
        assert!(
            size > 8 << 20,
            "the namespace's mountinfo is only {size} bytes"
        );
        let m = fx.mount_point("huge");
        for img in images(fx, "evict", 4) {
            fx.launch_true(&img, &m).ok();
        }
        let kept = loops_under(&fx.root);
        assert!(
            kept.len() <= 2,
            "cache-max-instances = 2, but {} instances stayed: {kept:?}",
            kept.len()
        );
        drop(holder);
        let _ = fs::remove_dir_all(dir.join("chain"));
    });
}

/// `max-loop-devices` bounds the loop devices the tool attaches (every
/// user's together), with a message that names it. (The user's own share,
/// `max-loop-devices-per-user`, is the whole here: tests/it/fairness.rs.)
#[test]
fn loop_devices_are_capped() {
    case(|fx| {
        let _conf = site::config("max-loop-devices = 3\nmax-loop-devices-per-user = 100%\n");
        let imgs = images(fx, "cap", 4);
        let mnts: Vec<PathBuf> = (0..4).map(|i| fx.mount_point(&format!("cap{i}"))).collect();
        let pairs: Vec<String> = imgs.iter().zip(&mnts).map(|(i, m)| pair(i, m)).collect();
        let mut args: Vec<String> = vec!["--no-cache".into()];
        args.extend(pairs.iter().cloned());
        args.extend(["--".into(), "true".into()]);
        fx.run(&args).refused(&["max-loop-devices", "3"]);
        // Three fit.
        let mut args: Vec<String> = vec!["--no-cache".into()];
        args.extend(pairs[..3].iter().cloned());
        args.extend(["--".into(), "true".into()]);
        fx.run(&args).ok();
    });
}

/// `max-launches-per-user`: a user's launches beyond it wait for a slot
/// (`max-launches-wait`), then give up with a message; other users are
/// not affected.
#[test]
fn launches_per_user_are_capped() {
    case(|fx| {
        let _conf = site::config("max-launches-per-user = 1\nmax-launches-wait = 1s\n");
        let (img, m) = fx.image_at("slot", &[("x", "x\n")]);
        fx.launch_true(&img, &m).ok();
        // A launch of the user's stuck in its setup, holding the one slot
        // (the test takes the slot's lock as that launch would).
        let slot = format!("/run/squashfs-mount/launches/{}.0", fx.uid);
        let held = fs::File::open(&slot).expect("the user's launch slot");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&held);
        // SAFETY: flock on an fd we own, open for the whole call.
        let locked = unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(locked, 0);
        let started = Instant::now();
        fx.launch_true(&img, &m)
            .refused(&["max-launches-per-user", "max-launches-wait"]);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the wait is bounded by max-launches-wait"
        );
        // Another user is not affected.
        let other = Users::create(1, false);
        fx.run_as(other.first(), [pair(&img, &m), "--".into(), "true".into()])
            .ok();
        drop(held);
        fx.launch_true(&img, &m).ok();
    });
}

/// `ulimit -f 0` (a caller's file size limit) cannot stop the privileged
/// phase half-way: the launch works, the command gets the caller's limit
/// back, and the cache holds no half-made entry.
#[test]
fn a_lowered_file_size_limit_changes_nothing() {
    case(|fx| {
        let (img, m) = fx.image_at("fsize", &[("x", "x\n")]);
        let script = format!(
            "ulimit -f 0; \"$SQM\" {} -- sh -c 'ulimit -f; cat {}/x'",
            pair(&img, &m),
            s(&m)
        );
        for round in 0..2 {
            let r = fx.user_sh(&script);
            r.ok();
            assert_eq!(r.stdout(), "0\nx\n", "round {round}");
            assert!(r.stderr().is_empty(), "round {round}: {}", r.stderr());
            assert_eq!(
                loops_under(&img).len(),
                1,
                "round {round}: the instance is cached and reused"
            );
        }
        let status = run(Command::new(&fx.bin).arg("--cache-status")).stdout();
        assert!(
            status.contains("idle") && !status.contains("broken"),
            "{status}"
        );
    });
}

/// What other users can learn: an image whose path is not open to everyone
/// is not kept in the cache (a loop device's backing file is visible to
/// all in /sys and `losetup -l` for as long as it is attached), and the
/// cache namespace names its entries by a keyed hash, not by device and
/// inode.
#[test]
fn what_other_users_can_learn() {
    case(|fx| {
        // A directory the user reaches through their group only.
        let dir = fx.path("grouponly");
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(0), Some(fx.gid)).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
        let private = dir.join("private.sqfs");
        fs::copy(fx.image("learn", &[("x", "x\n")], ""), &private).unwrap();
        let m = fx.mount_point("learn");
        let r = fx.run([
            pair(&private, &m),
            "--".into(),
            "cat".into(),
            s(&m.join("x")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "x\n");
        // Its loop device detaches once the command's namespace is gone.
        let deadline = Instant::now() + ends::HANG;
        while !loops_under(&dir).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            loops_under(&dir).is_empty(),
            "an image below a non-public directory must not be cached"
        );
        // A public one is cached, under an opaque name.
        let public = fx.image("learn-public", &[("x", "x\n")], "");
        fx.launch_true(&public, &m).ok();
        assert_eq!(loops_under(&public).len(), 1);
        let names = sqfsmnt_test_support::cachens::names();
        let meta = fs::metadata(&public).unwrap();
        let old_style = format!("{:x}-{:x}", meta.dev(), meta.ino());
        assert!(!names.iter().any(|n| n.contains(&old_style)), "{names:?}");
        let entries: Vec<&String> = names
            .iter()
            .filter(|n| *n != "squashfs-mount-cache" && !n.starts_with('.'))
            .collect();
        assert!(
            !entries.is_empty()
                && entries
                    .iter()
                    .all(|n| n.len() == 32 && n.bytes().all(|b| b.is_ascii_hexdigit())),
            "{names:?}"
        );
        fs::remove_dir_all(&dir).unwrap();
    });
}

/// `--cache-status` and `--gc` of one user never open another user's
/// recorded image path (its owner could stall them, or see who ran them):
/// watched with inotify while a second user runs them.
#[test]
fn cache_commands_never_open_other_users_paths() {
    case(|fx| {
        if !have("inotifywait") {
            loud_skip(
                "cache_commands_never_open_other_users_paths: inotifywait (inotify-tools) missing",
            );
            return;
        }
        let (img, m) = fx.image_at("watched", &[("x", "x\n")]);
        fx.launch_true(&img, &m).ok();
        // The events `f` caused: those before the test's own open of a
        // file watched too, which the watch reports after them (one inotify
        // queue keeps its events in order): no delay guessed.
        let sentinel = fx.path("user/watch-sentinel");
        fs::write(&sentinel, "").unwrap();
        let watch = |f: &dyn Fn()| -> String {
            let mut w = Command::new("inotifywait")
                .args(["-m", "-e", "open", "--format", "%w %e"])
                .arg(&img)
                .arg(&sentinel)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Wait until the watch is set.
            let mut err = BufReader::new(w.stderr.take().unwrap());
            let mut line = String::new();
            while err.read_line(&mut line).unwrap() > 0 && !line.contains("Watches established") {}
            f();
            drop(fs::File::open(&sentinel).unwrap());
            let mut seen = String::new();
            let mut out = BufReader::new(w.stdout.take().unwrap());
            loop {
                let mut event = String::new();
                if out.read_line(&mut event).unwrap() == 0 || event.starts_with(&s(&sentinel)) {
                    break;
                }
                seen += event.rsplit(' ').next().unwrap_or("");
            }
            let _ = w.kill();
            let _ = w.wait();
            seen
        };
        let other = Users::create(1, false);
        let b = other.first();
        let seen = watch(&|| {
            for args in [
                &["--cache-status"][..],
                &["--cache-status", "--json"],
                &["--gc"],
            ] {
                let out = run(b.command(&fx.bin).args(args));
                assert!(
                    !out.ok().stdout().contains(&s(&img)),
                    "{args:?} shows another user's image"
                );
            }
        });
        assert!(
            seen.is_empty(),
            "another user's cache commands opened the image: {seen}"
        );
        // Control: the watch sees an open (the owner's own --gc IMAGE opens it).
        let seen = watch(&|| {
            fx.run(["--gc", s(&img).as_str()]).ok();
        });
        assert!(seen.contains("OPEN"), "the watch saw nothing: {seen:?}");
    });
}

/// The case user's own squashfuse server of `outer` on `fusemnt`, in the
/// foreground, once it serves `inner.sqfs`: stopped (SIGSTOP).
fn stopped_fuse_server(fx: &Fixture, outer: &Path, fusemnt: &Path) -> Kill {
    let server = Kill(
        fx.user
            .command("squashfuse")
            .args(["-f", "-o", "allow_other"])
            .arg(outer)
            .arg(fusemnt)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let image = fusemnt.join("inner.sqfs");
    let deadline = Instant::now() + ends::HANG;
    while !image.exists() {
        assert!(Instant::now() < deadline, "squashfuse did not mount");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the server we started.
    let stopped = unsafe { libc::kill(server.0.id() as i32, libc::SIGSTOP) };
    assert_eq!(stopped, 0);
    server
}

/// An image on a FUSE file system its user controls (squashfuse with
/// `allow_other`), whose server is stopped: the user's own launch may wait
/// for it, but stays killable (root's SIGKILL ends it), and another user's
/// launch meanwhile completes at once (no lock is held across a read of
/// the stalled image). Under the default policy and under
/// `kernel-images = all`, where the image would go to the kernel.
#[test]
fn a_stalled_fuse_image_stalls_only_its_own_launch() {
    if !have("squashfuse") || !have("fusermount3") {
        return loud_skip("stalled FUSE image test: squashfuse or fusermount3 missing (scripts/deps test installs them)");
    }
    case(|fx| {
        let _fuse = site::FuseForUsers::enable();
        let inner = fx.image("stall-inner", &[("x", "x\n")], "");
        let outer = fx.image("stall-outer", &[], &format!("cp {} inner.sqfs", s(&inner)));
        let other = Users::create(1, false);
        let other = other.first();
        let root_img = fx.image("stall-other", &[("y", "y\n")], "");
        let m = fx.mount_point("stall");
        for conf in ["", "kernel-images = all\n"] {
            let _conf = site::config(conf);
            let fusemnt = fx.path("user/fusemnt");
            fs::create_dir_all(&fusemnt).unwrap();
            fx.user.chown(&fusemnt);
            let server = stopped_fuse_server(fx, &outer, &fusemnt);
            let image = fusemnt.join("inner.sqfs");
            // Dropped from the page cache, so that a read must ask the server.
            let drop_caches = fs::write("/proc/sys/vm/drop_caches", "3");
            let mut launch = Kill(
                fx.user_cmd([pair(&image, &m), "--".into(), "true".into()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            std::thread::sleep(Duration::from_millis(500));
            let still_waiting = launch.0.try_wait().unwrap().is_none();
            // Another user's launch is not held up: it completes, silently.
            // A launch that waited for a lock the stalled one holds would
            // carry on after cache-lock-timeout with a line on stderr
            // saying why (doc/cache.md), or not at all (the run's limit).
            let r = run(other.command(&fx.bin).args([
                pair(&root_img, &m),
                "--".into(),
                "cat".into(),
                s(&m.join("y")),
            ]));
            assert_eq!(r.ok().stdout(), "y\n");
            assert_eq!(
                r.stderr(),
                "",
                "conf {conf:?}: another user's launch waited for a stalled image"
            );
            // Root's SIGKILL ends the stalled launch (its end, on its pidfd).
            if still_waiting {
                let _ = launch.0.kill();
                assert!(
                    ends::wait_ended(&[launch.0.id()], ends::HANG).is_empty(),
                    "conf {conf:?}: a stalled launch survives SIGKILL"
                );
            }
            let how = if still_waiting {
                "waited, was killed"
            } else {
                "had finished"
            };
            eprintln!(
                "conf {conf:?}: stalled launch {how} (drop_caches {:?})",
                drop_caches.is_ok()
            );
            // SAFETY: kill(2) on the server we started.
            unsafe { libc::kill(server.0.id() as i32, libc::SIGCONT) };
            let _ = try_run(Command::new("fusermount3").arg("-u").arg(&fusemnt));
            drop(server);
            let _ = try_run(Command::new("umount").arg("-l").arg(&fusemnt));
        }
    });
}
