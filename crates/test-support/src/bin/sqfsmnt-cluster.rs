//! The Slurm test cluster of the plugin's tests, by hand and for the
//! benchmark (as root):
//!
//!   sqfsmnt-cluster [--nodes N] [--plugin SO] shell
//!       starts a cluster, runs an interactive shell (as root) with
//!       SLURM_CONF set, and tears the cluster down when the shell exits;
//!   sqfsmnt-cluster [--nodes N] [--plugin SO] run -- COMMAND...
//!       the same around COMMAND;
//!   sqfsmnt-cluster [--nodes N] [--plugin SO] bench [--runs N]
//!       median time of `srun -N<nodes> --squashfs=<img>:/user-environment true`
//!       against `srun -N<nodes> true`, run by the cluster's user.
//!
//! The shell and COMMAND get SLURM_CONF, SQFSMNT_CLUSTER_DIR, SQFSMNT_USER
//! (the unprivileged user: `setpriv --reuid=$SQFSMNT_USER --regid=$SQFSMNT_USER
//! --init-groups srun ...`) and SQFSMNT_NODE_PIDS (the processes holding
//! each node's namespaces: `nsenter -t PID -n -u -m` enters node `n<i>`).
//! The plugin defaults to target/spank/libspank_squashfs_mount.so next to
//! this binary's target directory.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use sqfsmnt_test_support::slurm::{Cluster, Options, TOOLS};

fn usage() -> ExitCode {
    eprintln!("usage: sqfsmnt-cluster [--nodes N] [--plugin SO] shell | run -- COMMAND... | bench [--runs N]");
    ExitCode::from(2)
}

fn default_plugin() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // <target>/<profile>/sqfsmnt-cluster
    let target = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("spank/libspank_squashfs_mount.so")
}

/// What the command line asks for.
struct Request {
    nodes: usize,
    plugin: PathBuf,
    runs: usize,
    /// `shell`, `run` or `bench`.
    sub: String,
    /// What follows the subcommand (run's COMMAND).
    args: Vec<String>,
}

/// The command line (without the program's name), or None where the
/// answer is [`usage`].
fn parse_args(mut args: Vec<String>) -> Option<Request> {
    let mut nodes = 3;
    let mut plugin = default_plugin();
    let mut runs = 15;
    while args.first().is_some_and(|a| a.starts_with("--")) && args[0] != "--" {
        let flag = args.remove(0);
        let value = (!args.is_empty()).then(|| args.remove(0))?;
        match flag.as_str() {
            "--nodes" => nodes = value.parse().unwrap_or(0),
            "--plugin" => plugin = PathBuf::from(value),
            _ => return None,
        }
    }
    let sub = (!args.is_empty()).then(|| args.remove(0))?;
    if sub == "bench" {
        while args.len() >= 2 && args[0] == "--runs" {
            runs = args[1].parse().unwrap_or(0);
            args.drain(..2);
        }
        if runs == 0 || !args.is_empty() {
            return None;
        }
    }
    if sub == "run" {
        if args.first().map(String::as_str) == Some("--") {
            args.remove(0);
        }
        if args.is_empty() {
            return None;
        }
    }
    if !matches!(sub.as_str(), "shell" | "run" | "bench") || !(1..=9).contains(&nodes) {
        return None;
    }
    Some(Request {
        nodes,
        plugin,
        runs,
        sub,
        args,
    })
}

/// Whether the plugin is there and this process may start a cluster
/// (root, with every tool a cluster and the benchmark need); says why not.
fn can_start(plugin: &Path) -> bool {
    if !plugin.exists() {
        eprintln!(
            "sqfsmnt-cluster: no plugin at {} (cargo build --profile spank -p spank-squashfs-mount, or --plugin SO)",
            plugin.display()
        );
        return false;
    }
    let mut tools = TOOLS.to_vec();
    tools.push("mksquashfs");
    sqfsmnt_test_support::privileged("sqfsmnt-cluster", &tools)
}

/// The FUSE server beside this binary, if built.
fn fuse_server_beside() -> Option<PathBuf> {
    Some(
        std::env::current_exe()
            .unwrap_or_default()
            .with_file_name(sqfsmnt_test_support::install::FUSE_SERVER),
    )
    .filter(|s| s.exists())
}

fn start_cluster(nodes: usize, plugin: PathBuf) -> Cluster {
    Cluster::start(&Options {
        nodes,
        fuse_server: fuse_server_beside(),
        plugin,
        plugin_args: String::new(),
        mount_points: vec![
            PathBuf::from("/user-environment"),
            PathBuf::from("/user-tools"),
        ],
    })
}

/// The shell (`sub` is `shell`) or `args` (`run`), with the cluster's
/// environment; its exit code.
fn run_in_cluster(cluster: &Cluster, sub: &str, args: &[String]) -> i32 {
    let mut cmd = if sub == "shell" {
        Command::new(std::env::var("SHELL").unwrap_or_else(|_| "/bin/bash".into()))
    } else {
        let mut c = Command::new(&args[0]);
        c.args(&args[1..]);
        c
    };
    let pids: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("{}={}", n.name, n.pid()))
        .collect();
    cmd.env("SLURM_CONF", &cluster.conf)
        .env("SQFSMNT_CLUSTER_DIR", &cluster.dir)
        .env("SQFSMNT_USER", &cluster.user.name)
        .env("SQFSMNT_NODE_PIDS", pids.join(" "));
    if sub == "shell" {
        eprintln!(
            "sqfsmnt-cluster: SLURM_CONF={}; user {} (setpriv --reuid={u} --regid={u} --init-groups srun ...); nodes {}; exit the shell to tear down",
            cluster.conf.display(),
            cluster.user.name,
            pids.join(" "),
            u = cluster.user.name
        );
    }
    match cmd.status() {
        Ok(s) => s.code().unwrap_or(1),
        Err(e) => {
            eprintln!(
                "sqfsmnt-cluster: {}: {e}",
                args.first().map(String::as_str).unwrap_or("shell")
            );
            1
        }
    }
}

fn main() -> ExitCode {
    let Some(req) = parse_args(std::env::args().skip(1).collect()) else {
        return usage();
    };
    if !can_start(&req.plugin) {
        return ExitCode::from(1);
    }
    let cluster = start_cluster(req.nodes, req.plugin);
    let code = match req.sub.as_str() {
        "bench" => bench(&cluster, req.runs),
        _ => run_in_cluster(&cluster, &req.sub, &req.args),
    };
    drop(cluster);
    ExitCode::from(code.clamp(0, 255) as u8)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Interleaved runs (plain, with the image, plain, ...) so that drift of
/// the machine's load affects both alike; one warm-up of each first.
fn bench(c: &Cluster, runs: usize) -> i32 {
    let tree = c.dir.join("images/bench-tree");
    let image = c.dir.join("images/bench.sqfs");
    sqfsmnt_test_support::image::build(
        &tree,
        &image,
        &[("bin/hello", "hello\n")],
        "",
        &["-comp", "zstd"],
    );
    let n = format!("-N{}", c.nodes.len());
    let spec = format!("--squashfs={}:/user-environment", image.display());
    let plain: Vec<&str> = vec!["srun", &n, "true"];
    let with: Vec<&str> = vec!["srun", &n, &spec, "true"];
    let time = |args: &[&str]| -> Option<f64> {
        let t = Instant::now();
        let r = c.user(&[], args);
        let s = t.elapsed().as_secs_f64() * 1000.0;
        if !r.success() {
            eprintln!("sqfsmnt-cluster: {} failed: {}", args.join(" "), r.stderr());
            return None;
        }
        Some(s)
    };
    for args in [&plain, &with] {
        if time(args).is_none() {
            return 1;
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (Some(x), Some(y)) = (time(&plain), time(&with)) else {
            return 1;
        };
        a.push(x);
        b.push(y);
        std::thread::sleep(Duration::from_millis(50));
    }
    let (min_a, max_a) = (
        a.iter().cloned().fold(f64::MAX, f64::min),
        a.iter().cloned().fold(0.0, f64::max),
    );
    let (min_b, max_b) = (
        b.iter().cloned().fold(f64::MAX, f64::min),
        b.iter().cloned().fold(0.0, f64::max),
    );
    let (ma, mb) = (median(&mut a), median(&mut b));
    println!(
        "slurm cluster: {} nodes, {runs} runs each (interleaved), milliseconds",
        c.nodes.len()
    );
    println!("  srun {n} true                                    median {ma:7.1}  min {min_a:7.1}  max {max_a:7.1}");
    println!("  srun {n} --squashfs=<img>:/user-environment true median {mb:7.1}  min {min_b:7.1}  max {max_b:7.1}");
    println!("  difference of the medians: {:+.1} ms", mb - ma);
    // The plugin keeps image instances cached on each node (by design):
    // evict them before looking for leftovers.
    let cli = std::env::current_exe()
        .unwrap_or_default()
        .with_file_name("squashfs-mount");
    for node in &c.nodes {
        let _ = node.command(&cli).args(["--gc", "--all"]).output();
    }
    let left = c.leftovers(&[Path::new("/user-environment")]);
    if !left.is_empty() {
        eprintln!("sqfsmnt-cluster: left behind: {left:?}");
        return 1;
    }
    0
}
