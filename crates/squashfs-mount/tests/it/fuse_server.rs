//! The FUSE server is the caller's process in every way (issue 19): the
//! caller's resource limits, not dumpable (the caller cannot trace it,
//! read or write its memory, or take its /dev/fuse descriptor), /dev/fuse
//! opened with the caller's rights, and no image path in anything other
//! users can read. As unprivileged test users against the installed
//! setuid binary; every test undoes what it changed (fs.suid_dumpable,
//! /dev/fuse's mode and group).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use sqfsmnt_test_support::count::{fuse_servers_of, processes_named};
use sqfsmnt_test_support::ends;
use sqfsmnt_test_support::site::FuseDevice;
use sqfsmnt_test_support::users::{User, Users};
use sqfsmnt_test_support::{pair, s};
use sqfsmnt_test_support::{site, Fixture};

use crate::{case, fs_type_of};

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A value of a sysctl for the guard's lifetime.
struct Sysctl {
    path: &'static str,
    old: String,
}
impl Sysctl {
    fn set(path: &'static str, value: &str) -> Sysctl {
        let old = fs::read_to_string(path).unwrap();
        fs::write(path, value).unwrap();
        Sysctl { path, old }
    }
}
impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = fs::write(self.path, self.old.trim());
    }
}

/// Runs `script` (a shell command line with `$SQM` the tool, whose
/// command is `sleep`) as `user` in the background, and waits for the
/// command to run (its FUSE server is then ready): the server's pid.
fn serving(fx: &Fixture, user: &User, script: &str) -> (Kill, u32) {
    let child = user
        .command("sh")
        .args(["-c", script])
        .env("SQM", &fx.bin)
        .current_dir(&fx.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let launch = Kill(child);
    let deadline = Instant::now() + ends::HANG;
    loop {
        // (Not the launch's reporter, under the server's name for a moment.)
        let server = fuse_servers_of(user.uid);
        if !server.is_empty() && !processes_named(user.uid, "sleep").is_empty() {
            return (launch, server[0]);
        }
        assert!(
            Instant::now() < deadline,
            "no FUSE server of uid {}",
            user.uid
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The user's own image below a directory of theirs (FUSE path).
fn own_image(fx: &Fixture, dir: &str) -> PathBuf {
    let d = fx.user_dir().join(dir);
    fs::create_dir_all(&d).unwrap();
    fx.user.chown(&d);
    let img = d.join("own.sqfs");
    fs::copy(fx.image("server", &[("which", "own\n")], ""), &img).unwrap();
    fx.user.chown(&img);
    img
}

/// A `/proc/PID` line of `file` that starts with `key`.
fn proc_line(pid: u32, file: &str, key: &str) -> String {
    fs::read_to_string(format!("/proc/{pid}/{file}"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_default()
        .to_string()
}

/// Issue 19, finding 3: with fs.suid_dumpable 0, 1 and 2, the server of a
/// user's launch runs as the user, with the user's own resource limits
/// (a soft limit lowered below the hard one stays lowered: the privileged
/// phase raises it), and is not dumpable: its
/// /proc/PID files are root's, and the user can neither open its memory, nor
/// list or take its descriptors, nor read its environment.
#[test]
fn the_server_has_the_callers_limits_and_cannot_be_taken_over() {
    case(|fx| {
        let _conf = site::no_config();
        let img = own_image(fx, "limits");
        let m = fx.mount_point("server");
        for dumpable in ["0", "1", "2"] {
            let _sysctl = Sysctl::set("/proc/sys/fs/suid_dumpable", dumpable);
            let script = format!(
                "ulimit -S -n 300; exec \"$SQM\" {} -- sleep 600",
                pair(&img, &m)
            );
            let (launch, pid) = serving(fx, &fx.user, &script);
            // (The /proc/PID directory itself is always the effective
            // uid's; the files in it are root's when not dumpable.)
            let owner = fs::metadata(format!("/proc/{pid}/environ")).unwrap().uid();
            let uids = proc_line(pid, "status", "Uid:");
            let files = proc_line(pid, "limits", "Max open files");
            let tries = fx.user.sh(&format!(
                "for f in mem environ; do cat /proc/{pid}/$f >/dev/null 2>&1 && echo $f; done; ls /proc/{pid}/fd >/dev/null 2>&1 && echo fd; echo done"
            ));
            drop(launch);
            let u = fx.uid;
            // The soft limit the user set, the hard one they had (the
            // privileged phase raises both, or the soft one to the hard one
            // where root may not raise hard limits).
            let hard = proc_line(std::process::id(), "limits", "Max open files");
            let hard = hard.split_whitespace().nth(4).unwrap_or_default();
            assert_eq!(
                files.split_whitespace().collect::<Vec<_>>()[3..5],
                ["300", hard],
                "suid_dumpable={dumpable}: {files}"
            );
            assert_eq!(owner, 0, "suid_dumpable={dumpable}: /proc/{pid}/environ is not root's: the server is dumpable");
            assert_eq!(
                tries.stdout(),
                "done\n",
                "suid_dumpable={dumpable}: the user reached into the server"
            );
            assert_eq!(
                uids.split_whitespace().collect::<Vec<_>>(),
                [
                    "Uid:",
                    &u.to_string(),
                    &u.to_string(),
                    &u.to_string(),
                    &u.to_string()
                ],
                "suid_dumpable={dumpable}"
            );
            // ptrace itself, where strace is installed.
            if sqfsmnt_test_support::have("strace") {
                let (launch, pid) = serving(fx, &fx.user, &script);
                let r = fx.user.sh(&format!(
                    "timeout 5 strace -p {pid} -e trace=none 2>&1; echo rc=$?"
                ));
                drop(launch);
                assert!(
                    r.stdout().contains("Operation not permitted"),
                    "suid_dumpable={dumpable}: {}",
                    r.stdout()
                );
            }
        }
    });
}

/// Issue 19, finding 8: while a user's image is served by FUSE, another
/// user finds its path in no process's command line and no mount table
/// (the image is in a 0700 directory: its path is the user's secret).
#[test]
fn other_users_see_no_image_path() {
    case(|fx| {
        let _conf = site::no_config();
        let img = own_image(fx, "secret-dir-4711");
        fs::set_permissions(img.parent().unwrap(), fs::Permissions::from_mode(0o700)).unwrap();
        let m = fx.mount_point("secret");
        let (launch, pid) = serving(
            fx,
            &fx.user,
            &format!("exec \"$SQM\" {} -- sleep 600", pair(&img, &m)),
        );
        let other = Users::create(1, false);
        let seen = other.first().sh(
            "for p in /proc/[0-9]*; do cat $p/cmdline $p/mountinfo $p/mounts 2>/dev/null | tr '\\0' ' '; done | grep -c 'secret-dir-47[1]1'",
        );
        let server_args = fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        drop(launch);
        assert_eq!(
            seen.stdout().trim(),
            "0",
            "another user can see the image's path"
        );
        assert!(
            !String::from_utf8_lossy(&server_args).contains("secret-dir-4711"),
            "{server_args:?}"
        );
    });
}

/// The way `user`'s launch of `img` ends: the command's output, or the
/// error.
fn launch_as(fx: &Fixture, user: &User, img: &Path) -> Result<String, String> {
    let m = fx.mount_point("device");
    let out = fx.run_as(user, fs_type_of(img, &m));
    if out.success() {
        Ok(out.stdout())
    } else {
        Err(out.stderr())
    }
}

/// Issue 19, finding 7: /dev/fuse is opened with the caller's rights. With
/// mode 0600 a user's own image (the FUSE path) is refused, saying why and
/// what to ask; root's images (the kernel path) still work, and root may
/// still use FUSE. With a group, its members may and others may not.
#[test]
fn dev_fuse_is_opened_with_the_callers_rights() {
    case(|fx| {
        let _conf = site::no_config();
        let img = own_image(fx, "device");
        let other = Users::create(1, false);
        let b = other.first();
        let theirs = fx.user_dir().join("device/theirs.sqfs");
        fs::copy(&img, &theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(b.uid), Some(b.gid)).unwrap();
        {
            let _dev = FuseDevice::with(0, 0o600);
            let e = launch_as(fx, &fx.user, &img).unwrap_err();
            for needle in ["/dev/fuse", "mode 0600", "administrator", "own.sqfs"] {
                assert!(e.contains(needle), "{needle}: {e}");
            }
            let root_img = fx.image("device-root", &[("x", "x\n")], "");
            assert_eq!(launch_as(fx, &fx.user, &root_img).unwrap(), "squashfs\n");
            let root = User {
                name: "root".into(),
                uid: 0,
                gid: 0,
            };
            assert!(launch_as(fx, &root, &img).unwrap().starts_with("fuse"));
        }
        let _dev = FuseDevice::with(fx.gid2, 0o660);
        assert!(launch_as(fx, &fx.user, &img).unwrap().starts_with("fuse"));
        let e = launch_as(fx, b, &theirs).unwrap_err();
        // The group by name, as ls -l shows it (its id where it has none).
        let group = fs::read_to_string("/etc/group")
            .unwrap()
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.get(2) == Some(&fx.gid2.to_string().as_str())).then(|| f[0].to_string())
            })
            .unwrap_or_else(|| fx.gid2.to_string());
        assert!(
            e.contains("/dev/fuse") && e.contains(&format!("group {group})")),
            "{e}"
        );
    });
}

/// Issue 30: a FUSE instance's superblock is read-only, not only its
/// mount. Otherwise the kernel marks a directory's atime stale at every
/// READDIR, and the next stat of the directory asks the server again
/// (GETATTR) although attributes are cached for a year: the second scan
/// of a dataset through a cached instance sent one request per directory.
#[test]
fn the_fuse_superblock_is_read_only() {
    case(|fx| {
        let _conf = site::no_config();
        let img = own_image(fx, "superblock");
        let m = fx.mount_point("server");
        let info = fx
            .run([
                pair(&img, &m),
                "--".into(),
                "cat".into(),
                "/proc/self/mountinfo".into(),
            ])
            .ok()
            .stdout();
        let line = info
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(s(&m).as_str()))
            .unwrap_or_else(|| panic!("no mount on {}: {info}", m.display()));
        let (_, fs_part) = line.split_once(" - ").unwrap();
        let mut fields = fs_part.split(' ');
        assert!(fields.next().unwrap_or("").starts_with("fuse"), "{line}");
        let super_options = fields.nth(1).unwrap_or("");
        assert!(super_options.split(',').any(|o| o == "ro"), "{line}");
    });
}
