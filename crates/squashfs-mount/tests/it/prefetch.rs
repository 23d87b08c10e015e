//! Prefetch at launch (`--prefetch`, on by default): the background reader
//! of an image's `/.squashfs-mount/hot.list` runs with the caller's ids and
//! groups and no capability, holds none of the command's descriptors, never
//! delays the command and ends with it. As the unprivileged test user
//! against the installed setuid binary; needs root (skips loudly).

use sqfsmnt_test_support::cmd::{spawn, wait_until};
use sqfsmnt_test_support::{ends, Fixture};

use crate::case;

/// An image whose hot list makes a slow prefetch: one 64 MiB file listed
/// 400 times (about 25 GiB read from the page cache, seconds of work).
fn slow_image(fx: &Fixture) -> std::path::PathBuf {
    fx.image(
        "prefetch-slow",
        &[("hello", "hello\n")],
        "head -c 64M /dev/zero > big && mkdir .squashfs-mount && \
         for i in $(seq 400); do echo big; done > .squashfs-mount/hot.list",
    )
}

/// The state letter of process `pid` (`None` once it is gone).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim().chars().next()
}

/// The bytes process `pid` has read so far (`rchar` of /proc/PID/io).
fn bytes_read(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("rchar:"))?
        .trim()
        .parse()
        .ok()
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    let p = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    rustix::process::kill_process(p, sig).expect("kill");
}

/// Stops the prefetcher `pid` (SIGSTOP, as root) and waits until it is.
fn stop(pid: u32) {
    signal(pid, rustix::process::Signal::STOP);
    wait_until(ends::HANG, "the prefetcher to stop", || {
        state(pid) == Some('T')
    });
}

/// The prefetcher `pid`, stopped while the command ran, is let go once the
/// command has ended: it ends before it has read 64 MiB more (it checks
/// between reads of at most 256 KiB; its list is about 25 GiB), whatever
/// the time that takes on this machine.
fn ends_once_resumed(pid: u32) {
    let fd = ends::pidfd(pid);
    let before = bytes_read(pid).unwrap_or(0);
    signal(pid, rustix::process::Signal::CONT);
    let Some(fd) = fd else { return };
    wait_until(ends::HANG, "the prefetcher to end", || {
        if ends::ended(&fd) {
            return true;
        }
        let more = bytes_read(pid).unwrap_or(0).saturating_sub(before);
        assert!(
            more < 64 << 20,
            "the prefetcher {pid} outlived the command: it read {more} bytes after it"
        );
        false
    });
}

const STATUS: &str = "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):'";

/// The command finds the prefetcher (a loop on pgrep in the command: no
/// fixed delay), shows both credentials and writes the prefetcher's pid to
/// `pid_file`, then waits for `go`.
fn wait_for_prefetcher(pid_file: &std::path::Path, go: &std::path::Path) -> String {
    format!(
        "until P=$(pgrep -x -r R,S,D -u $(id -u) sqfs-prefetch); do sleep 0.02; done; echo \"pid $P\"; \
         {STATUS} /proc/$P/status | sed 's/^/prefetcher /'; \
         {STATUS} /proc/self/status | sed 's/^/command /'; \
         echo $P > {0}.tmp && mv {0}.tmp {0}; \
         until [ -e {1} ]; do sleep 0.02; done",
        pid_file.display(),
        go.display()
    )
}

/// The prefetcher's pid, once the command wrote it (up to the hang limit).
fn prefetcher_of(pid_file: &std::path::Path) -> u32 {
    wait_until(ends::HANG, "the command to find the prefetcher", || {
        pid_file.exists()
    });
    std::fs::read_to_string(pid_file)
        .unwrap_or_default()
        .trim()
        .parse()
        .expect("the prefetcher's pid")
}

/// The descriptors of `pid`: (number, target), sorted.
fn descriptors_of(pid: u32) -> Vec<(String, String)> {
    let mut fds: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let t = std::fs::read_link(e.path()).map(|t| t.display().to_string());
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        t.unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    fds.sort();
    fds
}

/// In `out` (the lines `prefetcher ...` and `command ...` of the
/// launch), the prefetcher has the same ids and groups as the command
/// (`uid`), no capability, and no_new_privs.
fn same_credentials_as_the_command(out: &str, uid: u32) {
    let of = |who: &str| -> Vec<String> {
        out.lines()
            .filter_map(|l| l.strip_prefix(who))
            .map(str::to_string)
            .collect()
    };
    let (p, c) = (of("prefetcher "), of("command "));
    assert_eq!(p.len(), 8, "{out}");
    assert_eq!(
        p, c,
        "the prefetcher's credentials differ from the command's"
    );
    let uid = uid.to_string();
    assert!(
        p.iter()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().skip(1).all(|u| u == uid)),
        "{out}"
    );
    for cap in ["CapPrm:", "CapEff:", "CapAmb:", "CapInh:"] {
        assert!(
            p.iter()
                .any(|l| l.starts_with(cap) && l.ends_with("0000000000000000")),
            "{cap} {out}"
        );
    }
    assert!(p.iter().any(|l| l == "NoNewPrivs:\t1"), "{out}");
}

/// Its credentials are the command's, it holds none of the command's
/// descriptors, the launch does not wait for it (it ends while the
/// prefetcher is stopped, its work far from done) and it ends with the
/// command (once resumed, within a few reads).
#[test]
fn the_prefetcher_runs_as_the_caller_and_ends_with_the_command() {
    case(|fx| {
        let img = slow_image(fx);
        let mp = fx.mount_point("prefetch");
        let pid_file = fx.user_dir().join("prefetcher");
        let go = fx.user_dir().join("go");
        let child = spawn(&mut fx.user_cmd([
            format!("{}:{}", img.display(), mp.display()),
            "--".into(),
            "sh".into(),
            "-c".into(),
            wait_for_prefetcher(&pid_file, &go),
        ]));
        // While the command waits: the prefetcher, stopped, and its
        // descriptors (it is not dumpable, so only root may look).
        let prefetcher = prefetcher_of(&pid_file);
        stop(prefetcher);
        let fds = descriptors_of(prefetcher);
        std::fs::write(&go, "").unwrap();
        // The launch ends with its command, the prefetcher stopped: it did
        // not wait for it (had it, the hang limit would end this).
        let waited = ends::wait_ended(&[child.id()], ends::HANG);
        if !waited.is_empty() {
            signal(prefetcher, rustix::process::Signal::CONT);
            panic!("the launch waits for its stopped prefetcher");
        }
        let o = child.wait();
        let out = o.ok().stdout();
        assert_eq!(
            state(prefetcher),
            Some('T'),
            "the prefetcher ended before the launch did"
        );
        ends_once_resumed(prefetcher);
        let pid = out
            .lines()
            .find_map(|l| l.strip_prefix("pid "))
            .unwrap_or_default()
            .trim()
            .to_string();
        assert_eq!(pid, prefetcher.to_string(), "{out}");
        same_credentials_as_the_command(&out, fx.uid);
        // Only /dev/null on 0-2, its own pidfd and the file it reads:
        // nothing of the command's (no pipe, no terminal).
        assert!(fds.len() >= 4, "{fds:?}");
        for (n, target) in &fds {
            match n.as_str() {
                "0" | "1" | "2" => assert_eq!(target, "/dev/null", "{fds:?}"),
                _ => assert!(
                    target == "anon_inode:[pidfd]" || target.starts_with(&mp.display().to_string()),
                    "the prefetcher holds {fds:?}"
                ),
            }
        }
    });
}

#[test]
fn a_pipe_reader_is_not_delayed_and_no_prefetch_means_none() {
    case(|fx| {
        let img = slow_image(fx);
        let mp = fx.mount_point("prefetch");
        // The command's output read through a pipe: EOF comes when the
        // command exits, not when the prefetch would have finished. The
        // prefetcher is stopped meanwhile: had it the pipe, EOF would
        // never come (the hang limit would end this).
        let pid_file = fx.user_dir().join("prefetcher");
        let go = fx.user_dir().join("go");
        let script = format!(
            "{}; cat {}/hello",
            wait_for_prefetcher(&pid_file, &go),
            mp.display()
        );
        let child = spawn(
            fx.user
            .command("sh")
            .arg("-c")
            .arg(format!(
                "\"$SQM\" {}:{} -- sh -c \"$SCRIPT\" | grep -v -e '^prefetcher ' -e '^command ' -e '^pid '",
                img.display(),
                mp.display()
            ))
            .env("SQM", &fx.bin)
            .env("SCRIPT", &script)
            .current_dir(&fx.root),
        );
        let prefetcher = prefetcher_of(&pid_file);
        stop(prefetcher);
        std::fs::write(&go, "").unwrap();
        let waited = ends::wait_ended(&[child.id()], ends::HANG);
        if !waited.is_empty() {
            signal(prefetcher, rustix::process::Signal::CONT);
            panic!("the pipe's reader waits for the stopped prefetcher");
        }
        let o = child.wait();
        assert_eq!(o.ok().stdout(), "hello\n", "{o:?}");
        ends_once_resumed(prefetcher);
        // --no-prefetch: nothing runs besides the command.
        let r = fx.launch_sh(
            &[
                "--no-prefetch".to_string(),
                format!("{}:{}", img.display(), mp.display()),
            ],
            "sleep 0.3; pgrep -x -r R,S,D -u $(id -u) sqfs-prefetch || echo none",
        );
        r.ok();
        assert_eq!(r.stdout().trim(), "none");
    });
}
