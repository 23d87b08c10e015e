//! Prefetch at launch (`--prefetch`, on by default): the background reader
//! of an image's `/.squashfs-mount/hot.list` runs with the caller's ids and
//! groups and no capability, holds none of the command's descriptors, never
//! delays the command and ends with it. As the unprivileged test user
//! against the installed setuid binary; needs root (skips loudly).

use std::time::{Duration, Instant};

use sqfsmnt_test_support::Fixture;

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

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Err(_) => true,
        Ok(s) => s
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z')),
    }
}

const STATUS: &str = "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):'";

#[test]
fn the_prefetcher_runs_as_the_caller_and_ends_with_the_command() {
    case(|fx| {
        let img = slow_image(fx);
        let mp = fx.mount_point("prefetch");
        let pid_file = fx.user_dir().join("prefetcher");
        let script = format!(
            "sleep 0.3; P=$(pgrep -x -r R,S,D -u $(id -u) sqfs-prefetch); echo \"pid $P\"; \
             {STATUS} /proc/$P/status | sed 's/^/prefetcher /'; \
             {STATUS} /proc/self/status | sed 's/^/command /'; \
             echo $P > {0}.tmp && mv {0}.tmp {0}; sleep 1",
            pid_file.display()
        );
        let started = Instant::now();
        let child = fx
            .user_cmd([
                format!("{}:{}", img.display(), mp.display()),
                "--".into(),
                "sh".into(),
                "-c".into(),
                script,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // While the command sleeps: the prefetcher's descriptors (it is not
        // dumpable, so only root may look).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pid_file.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let p = std::fs::read_to_string(&pid_file).unwrap_or_default();
        let mut fds: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{}/fd", p.trim()))
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
        let o = child.wait_with_output().unwrap();
        let took = started.elapsed();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{out} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let pid = out
            .lines()
            .find_map(|l| l.strip_prefix("pid "))
            .unwrap_or_default()
            .trim()
            .to_string();
        assert!(
            !pid.is_empty(),
            "no prefetcher was running 0.3 s after the start: {out}"
        );
        // Same ids and groups as the command, no capability, no_new_privs.
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
        let uid = fx.uid.to_string();
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
        // Its work takes seconds; the command (1.3 s) did not wait for it...
        assert!(took < Duration::from_secs(4), "the launch took {took:?}");
        // ...and it ends with the command.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !gone(&pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(&pid), "the prefetcher {pid} outlived the command");
    });
}

#[test]
fn a_pipe_reader_is_not_delayed_and_no_prefetch_means_none() {
    case(|fx| {
        let img = slow_image(fx);
        let mp = fx.mount_point("prefetch");
        // The command's output read through a pipe: EOF comes when the
        // command exits, not when the prefetch would have finished.
        let started = Instant::now();
        let r = fx.user_sh(&format!(
            "$SQM {}:{} -- sh -c 'sleep 0.2; cat {}/hello' | cat",
            img.display(),
            mp.display(),
            mp.display()
        ));
        let took = started.elapsed();
        r.ok();
        assert_eq!(r.stdout(), "hello\n");
        assert!(
            took < Duration::from_secs(3),
            "the pipe's reader waited {took:?}"
        );
        // --no-prefetch: nothing runs besides the command.
        let r = fx.run([
            "--no-prefetch".to_string(),
            format!("{}:{}", img.display(), mp.display()),
            "--".into(),
            "sh".into(),
            "-c".into(),
            "sleep 0.3; pgrep -x -r R,S,D -u $(id -u) sqfs-prefetch || echo none".into(),
        ]);
        r.ok();
        assert_eq!(r.stdout().trim(), "none");
    });
}
