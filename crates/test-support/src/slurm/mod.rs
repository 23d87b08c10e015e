//! A real multi-node Slurm cluster for the SPANK plugin's tests (Debian's
//! Slurm 22.05), started and stopped by the test run.
//!
//! - One `slurmctld` in the host's namespaces; `SlurmctldHost` is the host's
//!   short name with the bridge address in parentheses.
//! - `nodes` compute nodes `n1`, `n2`, ...: each a holder process in its own
//!   network namespace (address `<net>.1<i>` on a veth pair to a bridge in
//!   the host, which has `<net>.1`; no default route), UTS namespace (host
//!   name `n<i>`) and mount namespace (slave of the host's), with its own
//!   `munged` and `slurmd` started in those namespaces with `nsenter`
//!   (`ip netns exec` would remount /sys, and slurmd then fails on cgroups).
//! - One munge key for all; a `munged` in the host too (slurmctld, and the
//!   users' srun/sbatch/salloc there, the "login node").
//! - Everything is configured in a temporary directory `dir`
//!   (`/tmp/sqfsmnt-slurm-<pid>-<n>`, `SLURM_CONF` points there); no system
//!   configuration and none of the packages' services are used. `dir` acts as
//!   the shared filesystem: every node sees it. Its `node/` is each node's
//!   own: in a node's mount namespace `nodes/n<i>/` is bind-mounted over it,
//!   so one `slurm.conf` names each node's munge socket, spool and log.
//! - Daemons start in parallel; readiness is polled (munge sockets, then
//!   `sinfo` until every node is idle).
//! - Drop stops everything, also after a panic: jobs cancelled, slurmctld
//!   and every slurmd signalled together (one by one takes 15 s), leftover
//!   processes in the nodes' namespaces killed by pid, munged, the holders
//!   (their namespaces go with them), the veth pairs and the bridge, the
//!   temporary directory, the mount points it created and the test users.
//!   A test process killed outright leaves a `teardown` list in `dir`, which
//!   the next run's [`remove_stale`] uses.

mod net;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::cmd::Run;
use crate::count::{loops_under, mounts_under_in};
use crate::users::{pid_alive, User, Users};

/// The programs a cluster needs.
pub const TOOLS: &[&str] = &[
    "munged",
    "slurmctld",
    "slurmd",
    "srun",
    "sbatch",
    "salloc",
    "scontrol",
    "sinfo",
    "squeue",
    "scancel",
    "ip",
    "nsenter",
    "unshare",
    "setpriv",
];

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// slurmd's port: each node has its own network namespace, so one fixed
/// port serves all.
const SLURMD_PORT: u16 = 6818;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// How to build a cluster.
pub struct Options {
    /// Compute nodes (1 to 9).
    pub nodes: usize,
    /// The plugin to load (copied into the cluster's directory).
    pub plugin: PathBuf,
    /// The FUSE server (and the `--writable=DIR` helper built beside it),
    /// copied next to the plugin (where the plugin looks
    /// for it).
    pub fuse_server: Option<PathBuf>,
    /// Arguments of the plugin's line in plugstack.conf.
    pub plugin_args: String,
    /// Mount points to create in the host (and so on every node) when
    /// missing; removed at the end if created.
    pub mount_points: Vec<PathBuf>,
}

/// A compute node.
pub struct Node {
    pub name: String,
    pub addr: String,
    holder: Child,
    /// Its own directory (seen as `<dir>/node` inside the node).
    pub own: PathBuf,
}

impl Node {
    /// The pid of the process holding its namespaces.
    pub fn pid(&self) -> u32 {
        self.holder.id()
    }
    /// `program` run (as root) in the node's network, UTS and mount
    /// namespaces.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = net::nsenter(self.pid(), &["net", "uts", "mount"]);
        c.arg(program);
        c
    }
    /// Mount points of the node's mount namespace under `prefix`.
    pub fn mounts_under(&self, prefix: &Path) -> Vec<String> {
        mounts_under_in(Some(self.pid()), prefix)
    }
    /// Mounts of type squashfs in the node's mount namespace.
    pub fn squashfs_mounts(&self) -> Vec<String> {
        fs::read_to_string(format!("/proc/{}/mountinfo", self.pid()))
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                l.split(" - ")
                    .nth(1)
                    .is_some_and(|t| t.starts_with("squashfs "))
            })
            .map(str::to_string)
            .collect()
    }
    /// Bind-mounts `file` over `target` in this node's mount namespace only
    /// (so that this node sees another file at the same path); undone when
    /// the guard is dropped.
    pub fn bind(&self, file: &Path, target: &Path) -> NodeBind {
        let r = net::in_node(
            self.pid(),
            &["mount"],
            &[
                "mount",
                "--bind",
                &file.to_string_lossy(),
                &target.to_string_lossy(),
            ],
        );
        assert!(
            r.success(),
            "bind {} on {} in {}: {}",
            file.display(),
            target.display(),
            self.name,
            r.stderr()
        );
        NodeBind {
            pid: self.pid(),
            target: target.to_path_buf(),
        }
    }
}

/// A bind mount inside one node; unmounted on drop.
pub struct NodeBind {
    pid: u32,
    target: PathBuf,
}

impl Drop for NodeBind {
    fn drop(&mut self) {
        let _ = net::in_node(
            self.pid,
            &["mount"],
            &["umount", &self.target.to_string_lossy()],
        );
    }
}

struct Daemon {
    name: String,
    child: Child,
}

/// A running cluster. Dropping it tears everything down.
pub struct Cluster {
    /// The cluster's directory (the "shared filesystem").
    pub dir: PathBuf,
    pub conf: PathBuf,
    pub nodes: Vec<Node>,
    /// The unprivileged user who submits jobs (in a supplementary group).
    pub user: User,
    /// That supplementary group's gid.
    pub gid2: u32,
    /// The host's address on the bridge (slurmctld's).
    pub controller_addr: String,
    bridge: String,
    veths: Vec<String>,
    munged: Vec<Daemon>,
    slurm: Vec<Daemon>,
    created_dirs: Vec<PathBuf>,
    users: Option<Users>,
    /// Mounts under `dir` in each node at start (the `node/` bind).
    baseline: Vec<Vec<String>>,
    /// Squashfs mounts each node had at start (the host's own, such as
    /// snaps, copied into the node's namespace): not the tests'.
    squashfs_baseline: Vec<Vec<String>>,
    teardown: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn mkdir(p: &Path, mode: u32) {
    fs::create_dir_all(p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The start time of a process (field 22 of /proc/<pid>/stat), to tell it
/// from a later process with the same pid.
fn start_time(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(19).map(str::to_string)
}

/// munged's arguments (the same everywhere: `node/` is each one's own).
fn munged_args(d: &Path, key_path: &Path, log: &str) -> Vec<String> {
    vec![
        "--foreground".into(),
        "--force".into(),
        format!("--key-file={}", key_path.display()),
        format!("--socket={}/node/munge/munge.socket", d.display()),
        format!("--pid-file={}/node/munge/munged.pid", d.display()),
        format!("--seed-file={}/node/munge/munged.seed", d.display()),
        format!("--log-file={}/node/munge/{log}", d.display()),
    ]
}

impl Cluster {
    /// Starts a cluster (the caller has called [`crate::privileged`] with
    /// [`TOOLS`]). Panics, after tearing down what it started, if the
    /// cluster does not come up within 60 s.
    pub fn start(opts: &Options) -> Cluster {
        assert!((1..=9).contains(&opts.nodes), "1 to 9 nodes");
        let t0 = Instant::now();
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let dir = PathBuf::from(format!("/tmp/sqfsmnt-slurm-{pid}-{seq}"));
        crate::unmount::remove_tree(&dir);
        mkdir(&dir, 0o755);
        let users = Users::create(1, true);
        let user = users.first().clone();
        let mut c = Cluster {
            conf: dir.join("slurm.conf"),
            teardown: dir.join("teardown"),
            dir: dir.clone(),
            nodes: Vec::new(),
            user: user.clone(),
            gid2: users.gid2(),
            controller_addr: String::new(),
            bridge: format!("sqb{pid}c{seq}"),
            veths: Vec::new(),
            munged: Vec::new(),
            slurm: Vec::new(),
            created_dirs: Vec::new(),
            users: Some(users),
            baseline: Vec::new(),
            squashfs_baseline: Vec::new(),
        };
        c.setup(opts, seq);
        eprintln!(
            "slurm cluster: {} nodes up in {:.1} s ({}; SLURM_CONF={})",
            c.nodes.len(),
            t0.elapsed().as_secs_f64(),
            c.dir.display(),
            c.conf.display()
        );
        c
    }
}

impl Cluster {
    fn setup(&mut self, opts: &Options, seq: u32) {
        self.create_dirs(opts);
        self.install_plugin(opts);
        let key_path = self.write_munge_key();
        self.start_nodes(opts, seq);
        self.start_munged(&key_path);
        self.write_slurm_conf();
        self.start_slurm();
        self.record_baselines();
    }

    /// The missing mount points (in the host), the cluster directory's
    /// folders, and `jobs/` the user's.
    fn create_dirs(&mut self, opts: &Options) {
        let d = self.dir.clone();
        for m in &opts.mount_points {
            if !m.exists() {
                mkdir(m, 0o755);
                self.created_dirs.push(m.clone());
            }
        }
        for sub in ["node", "ctld", "ctld/state", "nodes", "images", "jobs"] {
            mkdir(&d.join(sub), 0o755);
        }
        self.user.chown(&d.join("jobs"));
    }

    /// The plugin (and the FUSE server and layer helper), where the
    /// daemons and the users' srun can load it, and plugstack.conf.
    fn install_plugin(&self, opts: &Options) {
        let d = &self.dir;
        let so = d.join("spank_squashfs_mount.so");
        fs::copy(&opts.plugin, &so)
            .unwrap_or_else(|e| panic!("copy {}: {e}", opts.plugin.display()));
        fs::set_permissions(&so, fs::Permissions::from_mode(0o755)).expect("chmod");
        if let Some(server) = &opts.fuse_server {
            crate::install::copy_as_root(server, &d.join(crate::install::FUSE_SERVER), 0o755);
            // The --squashfs-writable=DIR helper, built beside the server.
            let helper = server.with_file_name(crate::install::LAYER_HELPER);
            if helper.exists() {
                crate::install::copy_as_root(&helper, &d.join(crate::install::LAYER_HELPER), 0o755);
            }
        }
        fs::write(
            d.join("plugstack.conf"),
            format!("required {} {}\n", so.display(), opts.plugin_args),
        )
        .expect("plugstack");
    }

    /// One munge key for every munged; its path.
    fn write_munge_key(&self) -> PathBuf {
        let mut key = vec![0u8; 1024];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key))
            .expect("urandom");
        let key_path = self.dir.join("munge.key");
        fs::write(&key_path, &key).expect("key");
        fs::set_permissions(&key_path, fs::Permissions::from_mode(0o600)).expect("chmod");
        key_path
    }

    /// The network (the bridge, then each node's holder and veth pair) and
    /// each node's own munge and spool folders.
    fn start_nodes(&mut self, opts: &Options, seq: u32) {
        let d = self.dir.clone();
        let net_prefix = net::free_subnet(std::process::id() + seq);
        self.controller_addr = format!("{net_prefix}.1");
        net::bridge(&self.bridge, &net_prefix);
        self.record();
        for i in 1..=opts.nodes {
            let name = format!("n{i}");
            let own = d.join("nodes").join(&name);
            mkdir(&own, 0o755);
            let holder = net::holder(&name, &own, &d.join("node"));
            let node = Node {
                name: name.clone(),
                addr: format!("{net_prefix}.1{i}"),
                holder,
                own,
            };
            let veth = format!("sqv{}c{seq}n{i}", std::process::id());
            self.veths.push(veth.clone());
            self.nodes.push(node);
            self.record();
            let n = self.nodes.last().expect("node");
            net::wire(n.pid(), &self.bridge, &veth, &n.addr);
        }
        for n in &self.nodes {
            for sub in ["munge", "spool"] {
                mkdir(&n.own.join(sub), 0o755);
            }
        }
        mkdir(&d.join("node/munge"), 0o755);
    }

    /// munged everywhere (the same arguments: `node/` is each one's own),
    /// until every one has its socket.
    fn start_munged(&mut self, key_path: &Path) {
        let d = self.dir.clone();
        let mut host_munged = Command::new("munged");
        host_munged.args(munged_args(&d, key_path, "munged.log"));
        self.spawn_munged("munged (host)", host_munged, &d.join("node"));
        for i in 0..self.nodes.len() {
            let mut cmd = self.nodes[i].command("munged");
            cmd.args(munged_args(&d, key_path, "munged.log"));
            let (name, own) = (
                format!("munged ({})", self.nodes[i].name),
                self.nodes[i].own.clone(),
            );
            self.spawn_munged(&name, cmd, &own);
        }
        self.record();
        let sockets: Vec<PathBuf> = std::iter::once(d.join("node"))
            .chain(self.nodes.iter().map(|n| n.own.clone()))
            .map(|p| p.join("munge/munge.socket"))
            .collect();
        self.poll(
            crate::ends::HANG,
            "munged to create its socket on every node",
            |_| sockets.iter().all(|s| s.exists()),
        );
    }

    /// slurm.conf (and plugstack.conf) readable by all.
    fn write_slurm_conf(&self) {
        let d = &self.dir;
        let host = fs::read_to_string("/proc/sys/kernel/hostname")
            .expect("hostname")
            .trim()
            .to_string();
        let host = host.split('.').next().unwrap_or("localhost").to_string();
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let dd = d.display();
        let mut conf = format!(
            "ClusterName=sqfsmnttest
SlurmctldHost={host}({ctl})
SlurmctldPort={ctld_port}
SlurmdPort={SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dd}/node/munge/munge.socket
StateSaveLocation={dd}/ctld/state
SlurmctldPidFile={dd}/ctld/slurmctld.pid
SlurmctldLogFile={dd}/ctld/slurmctld.log
SlurmdSpoolDir={dd}/node/spool
SlurmdPidFile={dd}/node/slurmd.pid
SlurmdLogFile={dd}/node/slurmd.log
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
PlugStackConfig={dd}/plugstack.conf
",
            ctl = self.controller_addr,
            ctld_port = free_port(),
        );
        for n in &self.nodes {
            conf += &format!(
                "NodeName={} NodeHostname={} NodeAddr={} CPUs={cpus} State=UNKNOWN\n",
                n.name, n.name, n.addr
            );
        }
        conf += "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
        fs::write(&self.conf, conf).expect("slurm.conf");
        for f in ["slurm.conf", "plugstack.conf"] {
            fs::set_permissions(d.join(f), fs::Permissions::from_mode(0o644)).expect("chmod");
        }
    }

    /// slurmctld and every slurmd at once, until every node is idle.
    fn start_slurm(&mut self) {
        let d = self.dir.clone();
        let log = |p: PathBuf| fs::File::create(p).expect("log file");
        let mut ctld = Command::new("slurmctld");
        ctld.args(["-D", "-f"])
            .arg(&self.conf)
            .stdout(log(d.join("ctld/slurmctld.out")))
            .stderr(log(d.join("ctld/slurmctld.err")));
        self.spawn_slurm("slurmctld", ctld);
        for i in 0..self.nodes.len() {
            let n = &self.nodes[i];
            let mut cmd = n.command("slurmd");
            cmd.args(["-D", "-N", &n.name, "-f"])
                .arg(&self.conf)
                .stdout(log(n.own.join("slurmd.out")))
                .stderr(log(n.own.join("slurmd.err")));
            let name = format!("slurmd ({})", n.name);
            self.spawn_slurm(&name, cmd);
        }
        self.record();
        let want = self.nodes.len();
        self.poll(Duration::from_secs(60), "every node to be idle", |c| {
            let r = c.root(&["sinfo", "-h", "-N", "-o", "%N %t"]);
            r.stdout().lines().filter(|l| l.ends_with(" idle")).count() == want
        });
    }

    /// What each node has mounted at start: not the tests' doing.
    fn record_baselines(&mut self) {
        self.baseline = self
            .nodes
            .iter()
            .map(|n| n.mounts_under(&self.dir))
            .collect();
        self.squashfs_baseline = self.nodes.iter().map(Node::squashfs_mounts).collect();
    }

    fn spawn_munged(&mut self, name: &str, mut cmd: Command, own: &Path) {
        cmd.stdin(Stdio::null())
            .stdout(fs::File::create(own.join("munged.out")).expect("log"))
            .stderr(fs::File::create(own.join("munged.err")).expect("log"));
        net::die_with_parent(&mut cmd);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("{name}: {e}"));
        self.munged.push(Daemon {
            name: name.to_string(),
            child,
        });
    }

    fn spawn_slurm(&mut self, name: &str, mut cmd: Command) {
        cmd.stdin(Stdio::null());
        net::die_with_parent(&mut cmd);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("{name}: {e}"));
        self.slurm.push(Daemon {
            name: name.to_string(),
            child,
        });
    }

    /// Polls `cond` every 50 ms; panics with the daemons' logs if it does
    /// not hold within `limit` or a daemon died.
    fn poll(&mut self, limit: Duration, what: &str, cond: impl Fn(&Cluster) -> bool) {
        let t = Instant::now();
        while !cond(self) {
            let dead: Vec<String> = self
                .munged
                .iter_mut()
                .chain(self.slurm.iter_mut())
                .filter_map(|d| matches!(d.child.try_wait(), Ok(Some(_))).then(|| d.name.clone()))
                .collect();
            assert!(
                dead.is_empty(),
                "waiting for {what}: {} exited\n{}",
                dead.join(", "),
                self.logs()
            );
            assert!(
                t.elapsed() < limit,
                "timed out after {limit:?} waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Writes what a later run needs to tear this cluster down if this
    /// process is killed: processes (pid and start time) and links.
    fn record(&self) {
        let mut s = String::new();
        let pids = self.nodes.iter().map(|n| n.pid()).chain(
            self.munged
                .iter()
                .chain(self.slurm.iter())
                .map(|d| d.child.id()),
        );
        for pid in pids {
            if let Some(t) = start_time(pid) {
                s += &format!("pid {pid} {t}\n");
            }
        }
        s += &format!("link {}\n", self.bridge);
        for v in &self.veths {
            s += &format!("link {v}\n");
        }
        for m in &self.created_dirs {
            s += &format!("dir {}\n", m.display());
        }
        let _ = fs::write(&self.teardown, s);
    }

    /// The last lines of every daemon's log.
    pub fn logs(&self) -> String {
        let mut files = vec![
            self.dir.join("ctld/slurmctld.log"),
            self.dir.join("ctld/slurmctld.err"),
            self.dir.join("node/munge/munged.log"),
        ];
        for n in &self.nodes {
            for f in ["slurmd.log", "slurmd.err", "munge/munged.log", "munged.err"] {
                files.push(n.own.join(f));
            }
        }
        let mut s = String::new();
        for f in files {
            let Ok(text) = fs::read_to_string(&f) else {
                continue;
            };
            let tail: Vec<&str> = text.lines().rev().take(25).collect();
            if !tail.is_empty() {
                s += &format!(
                    "--- last lines of {}:\n{}\n",
                    f.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        }
        s
    }

    /// A Slurm command as root, against this cluster (60 s limit).
    pub fn root(&self, args: &[&str]) -> Run {
        crate::cmd::run_for(
            Command::new(args[0])
                .args(&args[1..])
                .env("SLURM_CONF", &self.conf),
            Duration::from_secs(60),
        )
    }

    /// `args` run as the cluster's user in the host (the login node), in
    /// `dir`, with a clean environment: PATH, SLURM_CONF, HOME=`dir`, plus
    /// `env`. 120 s limit.
    pub fn user(&self, env: &[(&str, &str)], args: &[&str]) -> Run {
        let mut c = self.user.command("env");
        c.arg("-i")
            .arg(format!("PATH={PATH}"))
            .arg(format!("SLURM_CONF={}", self.conf.display()))
            .arg(format!("HOME={}", self.dir.display()));
        for (k, v) in env {
            c.arg(format!("{k}={v}"));
        }
        c.args(args).current_dir(&self.dir);
        crate::cmd::run_for(&mut c, Duration::from_secs(120))
    }

    /// The state of job `id` (empty when Slurm no longer knows it).
    pub fn job_state(&self, id: &str) -> String {
        let r = self.root(&["scontrol", "-o", "show", "job", id]);
        r.stdout()
            .split_whitespace()
            .find_map(|w| w.strip_prefix("JobState="))
            .unwrap_or("")
            .to_string()
    }

    /// Waits (up to 90 s) until job `id` has ended; its final state.
    pub fn wait_job(&self, id: &str) -> String {
        let t = Instant::now();
        loop {
            let s = self.job_state(id);
            if !matches!(
                s.as_str(),
                "PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING" | ""
            ) {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(90),
                "job {id} did not finish (state {s})"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Cancels every job and waits until none is left and every node is
    /// idle again (the hang limit only catches a node that never is).
    pub fn quiesce(&self) {
        let _ = self.root(&["scancel", "--user", &self.user.name]);
        let t = Instant::now();
        while t.elapsed() < crate::ends::HANG {
            let q = self.root(&["squeue", "-h"]).stdout();
            let busy = self
                .root(&["sinfo", "-h", "-N", "-o", "%t"])
                .stdout()
                .lines()
                .any(|l| l != "idle");
            if q.trim().is_empty() && !busy {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What a job or step left behind, on the host and every node: loop
    /// devices backed by files in the cluster's directory (waiting for
    /// autoclear up to the hang limit), squashfs mounts and mounts on `mount_points` in
    /// each node's namespace and in the host's, and mounts under the
    /// cluster's directory beyond those made at start. Empty when clean.
    pub fn leftovers(&self, mount_points: &[&Path]) -> Vec<String> {
        let t = Instant::now();
        while !loops_under(&self.dir).is_empty() && t.elapsed() < crate::ends::HANG {
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut left: Vec<String> = loops_under(&self.dir)
            .into_iter()
            .map(|l| format!("loop device {l}"))
            .collect();
        for m in mount_points {
            left.extend(
                crate::count::mounts_under(m)
                    .into_iter()
                    .map(|x| format!("host: mount {x}")),
            );
        }
        for ((n, base), sq_base) in self
            .nodes
            .iter()
            .zip(&self.baseline)
            .zip(&self.squashfs_baseline)
        {
            left.extend(
                n.squashfs_mounts()
                    .into_iter()
                    .filter(|x| !sq_base.contains(x))
                    .map(|x| format!("{}: squashfs mount {x}", n.name)),
            );
            for m in mount_points {
                left.extend(
                    n.mounts_under(m)
                        .into_iter()
                        .map(|x| format!("{}: mount {x}", n.name)),
                );
            }
            let now = n.mounts_under(&self.dir);
            if &now != base {
                left.push(format!(
                    "{}: mounts under {} were {base:?}, now {now:?}",
                    n.name,
                    self.dir.display()
                ));
            }
        }
        left
    }

    fn stop(&mut self) {
        if self
            .slurm
            .iter_mut()
            .any(|d| matches!(d.child.try_wait(), Ok(None)))
        {
            self.quiesce();
        }
        // slurmctld and every slurmd together, then munged, then the holders.
        stop_all(&mut self.slurm, Duration::from_secs(10));
        // Whatever still runs in a node's namespaces (a slurmstepd of a
        // cancelled step): by pid.
        for n in &self.nodes {
            for pid in pids_in_netns_of(n.pid()) {
                kill(pid, rustix::process::Signal::KILL);
            }
        }
        stop_all(&mut self.munged, Duration::from_secs(5));
        for n in &mut self.nodes {
            let _ = n.holder.kill();
            let _ = n.holder.wait();
        }
        for v in self.veths.iter().chain(std::iter::once(&self.bridge)) {
            let _ = crate::cmd::try_run(Command::new("ip").args(["link", "del", v]));
        }
        for m in self.created_dirs.iter().rev() {
            let _ = fs::remove_dir(m);
        }
        if std::env::var_os("SQFSMNT_KEEP_CLUSTER_DIR").is_some() {
            eprintln!(
                "slurm cluster: kept {} (SQFSMNT_KEEP_CLUSTER_DIR)",
                self.dir.display()
            );
        } else {
            crate::unmount::remove_tree(&self.dir);
        }
        self.users.take();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "slurm cluster: tearing down after a failure\n{}",
                self.logs()
            );
        }
        self.stop();
    }
}

fn kill(pid: u32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// SIGTERM to all of `daemons` at once; SIGKILL to those still running
/// after `grace`.
fn stop_all(daemons: &mut [Daemon], grace: Duration) {
    for d in daemons.iter() {
        kill(d.child.id(), rustix::process::Signal::TERM);
    }
    let t = Instant::now();
    while t.elapsed() < grace
        && daemons
            .iter_mut()
            .any(|d| matches!(d.child.try_wait(), Ok(None)))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    for d in daemons.iter_mut() {
        if let Ok(None) = d.child.try_wait() {
            eprintln!(
                "slurm cluster: {} (pid {}) ignored SIGTERM for {grace:?}; killing it",
                d.name,
                d.child.id()
            );
            let _ = d.child.kill();
        }
        let _ = d.child.wait();
    }
}

/// Processes (other than `holder`) in the network namespace of `holder`.
fn pids_in_netns_of(holder: u32) -> Vec<u32> {
    let Ok(ns) = fs::read_link(format!("/proc/{holder}/ns/net")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid != holder && fs::read_link(e.path().join("ns/net")).is_ok_and(|n| n == ns) {
            out.push(pid);
        }
    }
    out
}

/// Tears down the clusters of test processes that are gone (from their
/// `teardown` lists), and links named like ours whose process is gone.
/// Call only with the machine-wide lock held.
pub fn remove_stale() {
    for e in fs::read_dir("/tmp").into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("sqfsmnt-slurm-")
            .and_then(|r| r.split('-').next()?.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || pid_alive(pid) {
            continue;
        }
        let list = fs::read_to_string(e.path().join("teardown")).unwrap_or_default();
        let mut by_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for l in list.lines() {
            if let Some((k, v)) = l.split_once(' ') {
                by_kind.entry(k).or_default().push(v);
            }
        }
        for p in by_kind.get("pid").into_iter().flatten() {
            let mut f = p.split(' ');
            if let (Some(Ok(pid)), Some(t)) = (f.next().map(str::parse::<u32>), f.next()) {
                if start_time(pid).as_deref() == Some(t) {
                    kill(pid, rustix::process::Signal::KILL);
                }
            }
        }
        for l in by_kind.get("link").into_iter().flatten() {
            let _ = crate::cmd::try_run(Command::new("ip").args(["link", "del", l]));
        }
        for d in by_kind.get("dir").into_iter().flatten() {
            let _ = fs::remove_dir(d);
        }
        crate::unmount::remove_tree(&e.path());
    }
    let links = crate::cmd::try_run(Command::new("ip").args(["-o", "link"]))
        .map(|r| r.stdout())
        .unwrap_or_default();
    for l in links.lines() {
        let Some(name) = l
            .split(": ")
            .nth(1)
            .map(|n| n.split('@').next().unwrap_or(n))
        else {
            continue;
        };
        let pid = ["sqb", "sqv"]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .and_then(|r| r.split('c').next()?.parse::<u32>().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && !pid_alive(pid) {
                let _ = crate::cmd::try_run(Command::new("ip").args(["link", "del", name]));
            }
        }
    }
    let _ = std::io::stderr().flush();
}
