//! Least privilege while root (issue 20): each task's root phase keeps only
//! the capabilities it needs, in its permitted, effective and bounding
//! sets, from its start. Read from /proc/PID/status of the installed
//! setuid binary held in its root phase (a launch waiting for the launch
//! slot the test holds; `--gc` waiting for the cache lock the test holds),
//! and from the command's own status after the drop; and, for the Slurm
//! plugin's worker thread, from the thread's status while the other
//! threads of the process keep theirs.

use std::fs;
use std::time::Duration;

use sqfsmnt_test_support::cmd::{spawn, wait_until};
use sqfsmnt_test_support::held::hold;
use sqfsmnt_test_support::{is_root, loud_skip, pair, site};

use squashfs_mount::{Caller, Credentials, RootPhase, ThreadCredentials};
use squashfs_mount::{Gid, Uid};

use crate::case;

// The kernel's numbers (linux/capability.h).
const CHOWN: u64 = 1 << 0;
const DAC_OVERRIDE: u64 = 1 << 1;
const FOWNER: u64 = 1 << 3;
const KILL: u64 = 1 << 5;
const SETGID: u64 = 1 << 6;
const SETUID: u64 = 1 << 7;
const SYS_CHROOT: u64 = 1 << 18;
const SYS_PTRACE: u64 = 1 << 19;
const SYS_ADMIN: u64 = 1 << 21;
const SYS_NICE: u64 = 1 << 23;
const SYS_RESOURCE: u64 = 1 << 24;

const IDS: u64 = SETUID | SETGID;
const CACHE: u64 = IDS | SYS_ADMIN | SYS_CHROOT | SYS_PTRACE | SYS_NICE | KILL;
/// Mounting: the cache's (the user's log of cached FUSE instances is
/// root's: no CAP_CHOWN).
const MOUNTS: u64 = CACHE;

/// The capability sets of a status file's text.
#[derive(Debug, PartialEq, Eq)]
struct Sets {
    effective: u64,
    permitted: u64,
    inheritable: u64,
    bounding: u64,
}

fn sets(status: &str) -> Sets {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| u64::from_str_radix(v.trim(), 16).expect("hex"))
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    Sets {
        effective: field("CapEff:"),
        permitted: field("CapPrm:"),
        inheritable: field("CapInh:"),
        bounding: field("CapBnd:"),
    }
}

/// What the setuid binary gets at most here: the test's own bounding set
/// (a container may lack some, e.g. CAP_SYS_RESOURCE).
fn here() -> u64 {
    sets(&fs::read_to_string("/proc/self/status").expect("status")).bounding
}

/// The root phase of `caps`: effective (inside `as_root`), permitted and
/// bounding, nothing inheritable.
fn root_phase(caps: u64) -> Sets {
    let caps = caps & here();
    Sets {
        effective: caps,
        permitted: caps,
        inheritable: 0,
        bounding: caps,
    }
}

/// Waits until `child` (the installed tool, exec'd by setpriv) shows its
/// root phase, and returns its sets then: the launch's, or those of the
/// process of its own session that does root's work on shared state (a
/// child of the launch, with the launch's credentials), whichever sleeps
/// between attempts at the held lock or slot.
fn in_root_phase(launch: u32, what: &str) -> Sets {
    let mut seen = None;
    // Sampled only while it sleeps between attempts at the held lock or
    // slot: right after exec a set-user-ID program still has every
    // capability, before it gives them up.
    let sleeping = |pid: u32| {
        let call = fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        let number = call.split_whitespace().next().unwrap_or("");
        number == libc::SYS_nanosleep.to_string() || number == libc::SYS_clock_nanosleep.to_string()
    };
    let candidates = || {
        let children = fs::read_to_string(format!("/proc/{launch}/task/{launch}/children"))
            .unwrap_or_default();
        let mut all = vec![launch];
        all.extend(
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
        all
    };
    wait_until(Duration::from_secs(20), what, || {
        candidates().into_iter().any(|pid| {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() != "squashfs-mount" || !sleeping(pid) {
                return false;
            }
            let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
                return false;
            };
            if !sleeping(pid) {
                return false;
            }
            let s = sets(&status);
            let done = s.effective != 0;
            seen = Some(s);
            done
        })
    });
    seen.expect("status")
}

#[test]
fn a_launch_keeps_only_what_its_root_phase_needs() {
    case(|fx| {
        let _conf = site::config("max-launches-per-user = 1\nmax-launches-wait = 60s\n");
        let (img, m) = fx.image_at("caps", &[("x", "x\n")]);
        // A first launch makes the user's launch slot.
        fx.launch_true(&img, &m).ok();
        let slot = format!("/run/squashfs-mount/launches/{}.0", fx.uid);
        let missing = fx.mount_point("caps-r").join("new");
        let mounts = MOUNTS | SYS_RESOURCE;
        for (option, target, caps) in [
            ("--no-prefetch", pair(&img, &m), mounts),
            (
                "--writable=16M",
                pair(&img, &m),
                mounts | CHOWN | DAC_OVERRIDE | FOWNER,
            ),
            ("-r", pair(&img, &missing), mounts | DAC_OVERRIDE),
        ] {
            let held = hold(&slot);
            let child = spawn(&mut fx.user_cmd([
                option,
                &target,
                "--",
                "grep",
                "^Cap",
                "/proc/self/status",
            ]));
            let seen = in_root_phase(child.id(), &format!("the root phase of {option}"));
            drop(held);
            let out = child.wait();
            out.ok_as(option);
            assert_eq!(seen, root_phase(caps), "{option}: the root phase");
            // The command: no capability, the root phase's bounding set.
            let command = sets(&out.stdout());
            assert_eq!(
                command,
                Sets {
                    effective: 0,
                    permitted: 0,
                    inheritable: 0,
                    bounding: caps & here(),
                },
                "{option}: the command"
            );
        }
        // Nothing to mount: the ids only.
        let run = fx.run(["--", "grep", "^CapBnd", "/proc/self/status"]);
        run.ok();
        assert_eq!(sets_of_bounding(&run.stdout()), IDS & here());
    });
}

fn sets_of_bounding(line: &str) -> u64 {
    let v = line.trim().strip_prefix("CapBnd:").expect("CapBnd");
    u64::from_str_radix(v.trim(), 16).expect("hex")
}

#[test]
fn gc_keeps_only_what_the_cache_needs() {
    case(|fx| {
        let _conf = site::config("cache-lock-timeout = 60s\n");
        let (img, m) = fx.image_at("gc-caps", &[("x", "x\n")]);
        fx.launch_true(&img, &m).ok();
        let held = hold("/run/squashfs-mount/lock");
        let child = spawn(&mut fx.user_cmd(["--gc"]));
        let seen = in_root_phase(child.id(), "the root phase of --gc");
        drop(held);
        child.wait().ok();
        assert_eq!(seen, root_phase(CACHE));
    });
}

/// The Slurm plugin's worker thread gives up what it does not need for
/// itself alone: slurmstepd's other threads keep their capabilities and
/// bounding set.
#[test]
fn the_plugin_thread_limits_itself_alone() {
    if !is_root() {
        loud_skip("the plugin thread's capabilities: needs root");
        return;
    }
    let main_before = sets(&fs::read_to_string("/proc/thread-self/status").expect("status"));
    let worker = std::thread::spawn(|| {
        let nobody = Caller {
            uid: Uid::from_raw(65534),
            gid: Gid::from_raw(65534),
            groups: Vec::new(),
        };
        let mut creds =
            ThreadCredentials::switch(nobody, RootPhase::mounts(true, false)).expect("switch");
        let read = || sets(&fs::read_to_string("/proc/thread-self/status").expect("status"));
        let as_caller = read();
        let as_root = creds.as_root(|_root| read()).expect("as root");
        (as_caller, as_root)
    });
    let (as_caller, as_root) = worker.join().expect("worker");
    let caps = MOUNTS | CHOWN | DAC_OVERRIDE | FOWNER;
    assert_eq!(as_root, root_phase(caps));
    assert_eq!(
        as_caller,
        Sets {
            effective: 0,
            ..root_phase(caps)
        }
    );
    let main_after = sets(&fs::read_to_string("/proc/thread-self/status").expect("status"));
    assert_eq!(main_after, main_before, "the other threads keep theirs");
}
