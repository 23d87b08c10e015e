//! The cluster's network: a bridge in the host's namespace, and per node a
//! holder process in new network, UTS and mount namespaces, joined to the
//! bridge by a veth pair.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::cmd::{run, Run};

/// Runs `ip <args>` and panics unless it succeeds.
#[track_caller]
pub(super) fn ip(args: &[&str]) {
    let r = run(Command::new("ip").args(args));
    assert!(r.success(), "ip {}: {}", args.join(" "), r.stderr());
}

/// A /24 in 10.213.0.0/16 that no route of the host uses, preferring one
/// derived from `seed`; returns its first three octets, e.g. "10.213.42".
pub(super) fn free_subnet(seed: u32) -> String {
    let routes = run(Command::new("ip").args(["-4", "route", "show", "table", "all"])).stdout();
    let addrs = run(Command::new("ip").args(["-4", "-o", "addr"])).stdout();
    for k in 0..250 {
        let net = format!("10.213.{}", (seed + k) % 250 + 1);
        let probe = format!("{net}.");
        if !routes.contains(&probe) && !addrs.contains(&probe) && !routes.contains("10.213.0.0/16")
        {
            return net;
        }
    }
    panic!("no free /24 in 10.213.0.0/16 for the test cluster's bridge");
}

/// Creates the bridge `name` with address `<net>.1/24`, up.
pub(super) fn bridge(name: &str, net: &str) {
    ip(&["link", "add", name, "type", "bridge"]);
    ip(&["addr", "add", &format!("{net}.1/24"), "dev", name]);
    ip(&["link", "set", name, "up"]);
}

/// Starts the holder of a node's namespaces: new network, UTS and mount
/// namespaces (mounts slave to the host's), the host name `hostname`, the
/// node's own directory `own` bind-mounted over `shared` (so that the same
/// configured path is each node's own), a tmpfs of its own on /run (a
/// node's runtime state, squashfs-mount's image cache among it, is its
/// own, as on separate machines), loopback up. Returns once they are
/// ready. The holder sleeps until it is killed; it dies with this process
/// (parent-death signal).
pub(super) fn holder(hostname: &str, own: &Path, shared: &Path) -> Child {
    let script = format!(
        "echo {hostname} > /proc/sys/kernel/hostname && mount --bind '{}' '{}' && mount -t tmpfs -o mode=0755,size=16m tmpfs /run && ip link set lo up && echo ready && exec sleep infinity",
        own.display(),
        shared.display()
    );
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--net",
        "--uts",
        "--mount",
        "--propagation",
        "slave",
        "--",
        "sh",
        "-c",
        &script,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().expect("unshare");
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.as_mut().expect("stdout")).read_line(&mut line);
    if line.trim() != "ready" {
        let _ = child.kill();
        let out = child.wait_with_output().expect("wait");
        panic!(
            "the namespaces of node {hostname} could not be set up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    child
}

/// Joins the holder `pid`'s network namespace to `bridge` with the veth pair
/// `host_end` (in the host, on the bridge) / `eth0` (in the node, `addr`/24).
pub(super) fn wire(pid: u32, bridge: &str, host_end: &str, addr: &str) {
    ip(&[
        "link",
        "add",
        host_end,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &pid.to_string(),
    ]);
    ip(&["link", "set", host_end, "master", bridge, "up"]);
    let r = in_node(
        pid,
        &["net"],
        &[
            "sh",
            "-c",
            &format!("ip addr add {addr}/24 dev eth0 && ip link set eth0 up"),
        ],
    );
    assert!(r.success(), "address of {addr}: {}", r.stderr());
}

/// `nsenter` into the namespaces `kinds` ("net", "uts", "mount") of `pid`.
pub(super) fn nsenter(pid: u32, kinds: &[&str]) -> Command {
    let mut c = Command::new("nsenter");
    for k in kinds {
        let file = if *k == "mount" { "mnt" } else { k };
        c.arg(format!("--{k}=/proc/{pid}/ns/{file}"));
    }
    c.arg("--");
    c
}

/// Runs `args` in the namespaces `kinds` of `pid`, as root.
pub(super) fn in_node(pid: u32, kinds: &[&str], args: &[&str]) -> Run {
    run(nsenter(pid, kinds).args(args))
}

/// Sets a parent-death signal (SIGKILL) on the child: the daemons and
/// holders die with the test process even if it is killed outright. The
/// signal comes when the *thread* that spawned them ends: start a cluster
/// on a thread that outlives it (the main thread of a `harness = false`
/// test or of a binary).
pub(super) fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only
    // makes the prctl system call, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
}
