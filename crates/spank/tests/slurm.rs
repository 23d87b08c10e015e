//! The SPANK plugin against a real Slurm (Debian's 22.05): a one-node
//! cluster with its own munged, slurmctld and slurmd, configured in a
//! temporary directory (SLURM_CONF points there; no system configuration is
//! touched), jobs run by an unprivileged test user.
//!
//! Needs root; skips loudly otherwise, or when Slurm cannot be installed
//! (scripts/deps test installs it). Stops exactly the daemons it started,
//! by pid, also when a check fails (Drop guard). Takes ~30 s.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const USER: &str = "sqfsmnt-slurm";
/// A group the test user is in only as a supplementary group.
const GROUP: &str = "sqfsmnt-slurm-grp";
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

fn have(cmd: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {cmd}")]).stdout(Stdio::null()).status().map(|s| s.success()).unwrap_or(false)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sh(cmd: &str) -> Output {
    Command::new("sh").args(["-c", cmd]).output().expect("sh")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Backing files of all attached loop devices.
fn loop_backing_files() -> Vec<String> {
    fs::read_dir("/sys/block")
        .map(|d| d.flatten().filter_map(|e| fs::read_to_string(e.path().join("loop/backing_file")).ok()).collect())
        .unwrap_or_default()
}

/// Builds the plugin with cargo profile `profile` into the target directory
/// this test was built in, and checks the build marker for `panic`.
fn build_plugin(profile: &str, panic: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // <target>/<profile>/deps/<test exe>
    let target = exe.parent().and_then(Path::parent).and_then(Path::parent).expect("target dir").to_path_buf();
    let status = Command::new(env!("CARGO"))
        .args(["build", "--locked", "--profile", profile, "-p", "spank-squashfs-mount", "--target-dir"])
        .arg(&target)
        .current_dir(workspace())
        .status()
        .expect("cargo build");
    assert!(status.success(), "cargo build --profile {profile} -p spank-squashfs-mount failed");
    let so = target.join(profile).join("libspank_squashfs_mount.so");
    let bytes = fs::read(&so).expect("plugin .so");
    let marker = format!("squashfs-mount-spank panic={panic}");
    assert!(bytes.windows(marker.len()).any(|w| w == marker.as_bytes()), "{} is not a panic={panic} build", so.display());
    so
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn group_id(name: &str) -> u32 {
    let (out, _) = text(&sh(&format!("getent group {name}")));
    out.split(':').nth(2).and_then(|g| g.trim().parse().ok()).expect("group id")
}

fn id_of(flag: &str, name: &str) -> u32 {
    let o = Command::new("id").args([flag, name]).output().expect("id");
    String::from_utf8_lossy(&o.stdout).trim().parse().expect("numeric id")
}

/// Everything the test set up; Drop undoes it (daemons by pid, directories
/// it created), also on panic.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<(&'static str, Child)>,
    created_dirs: Vec<PathBuf>,
}

impl Cluster {
    fn root_cmd(&self, args: &[&str]) -> Output {
        Command::new("timeout")
            .args(["-k", "5", "60"])
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .expect("command")
    }

    /// Runs `args` as the test user with a clean environment plus `env`.
    fn user(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut c = Command::new("timeout");
        c.args(["-k", "5", "90", "setpriv", "--reuid", USER, "--regid", USER, "--init-groups", "env", "-i"]);
        c.arg(format!("PATH={PATH}"));
        c.arg(format!("SLURM_CONF={}", self.conf.display()));
        c.arg(format!("HOME={}", self.dir.display()));
        for (k, v) in env {
            c.arg(format!("{k}={v}"));
        }
        c.args(args).current_dir(&self.dir).output().expect("setpriv")
    }

    fn job_state(&self, id: &str) -> String {
        let (out, _) = text(&self.root_cmd(&["scontrol", "-o", "show", "job", id]));
        out.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).unwrap_or("").to_string()
    }

    fn wait_job(&self, id: &str) -> String {
        let t = Instant::now();
        loop {
            let s = self.job_state(id);
            if !matches!(s.as_str(), "PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING" | "") {
                return s;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "job {id} did not finish (state {s})");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for f in ["slurmd.log", "slurmctld.log"] {
            let log = fs::read_to_string(self.dir.join(f)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            s += &format!("--- last lines of {f}:\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        s
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.daemons.is_empty() {
            // Jobs of this cluster only (SLURM_CONF is ours).
            let _ = self.root_cmd(&["scancel", "--full", "--user", USER]);
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                let (out, _) = text(&self.root_cmd(&["squeue", "-h"]));
                if out.trim().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        // slurmd, slurmctld, then munged: SIGTERM by pid, then SIGKILL.
        for (name, child) in self.daemons.iter_mut().rev() {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if let Ok(None) = child.try_wait() {
                eprintln!("slurm test: {name} (pid {}) ignored SIGTERM; killing it", child.id());
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for d in self.created_dirs.iter().rev() {
            let _ = fs::remove_dir(d);
        }
        if std::thread::panicking() {
            eprintln!("slurm test: kept {} for inspection (logs there)", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn start_cluster(plugin: &Path) -> Cluster {
    let stamp = format!("{}-{}", std::process::id(), Instant::now().elapsed().as_nanos());
    let dir = std::env::temp_dir().join(format!("sqfsmnt-slurm-{stamp}"));
    fs::create_dir(&dir).expect("temp dir");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let mut cluster = Cluster { conf: dir.join("slurm.conf"), dir: dir.clone(), daemons: Vec::new(), created_dirs: Vec::new() };

    for m in ["/user-environment", "/user-tools"] {
        if !Path::new(m).exists() {
            fs::create_dir(m).expect("mount point");
            fs::set_permissions(m, fs::Permissions::from_mode(0o755)).unwrap();
            cluster.created_dirs.push(PathBuf::from(m));
        }
    }

    for (d, mode) in [("munge", 0o700), ("msock", 0o755), ("state", 0o700), ("spool", 0o755), ("images", 0o755), ("jobs", 0o755)] {
        fs::create_dir(dir.join(d)).unwrap();
        fs::set_permissions(dir.join(d), fs::Permissions::from_mode(mode)).unwrap();
    }
    std::os::unix::fs::chown(dir.join("jobs"), Some(id_of("-u", USER)), Some(id_of("-g", USER))).unwrap();

    // The plugin, where the daemons and the user's srun can load it.
    let so = dir.join("spank_squashfs_mount.so");
    fs::copy(plugin, &so).expect("copy plugin");
    fs::set_permissions(&so, fs::Permissions::from_mode(0o755)).unwrap();

    // munged with its own key and socket.
    let mut key = vec![0u8; 1024];
    fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key)).unwrap();
    let key_path = dir.join("munge/munge.key");
    fs::write(&key_path, &key).unwrap();
    fs::set_permissions(&key_path, fs::Permissions::from_mode(0o600)).unwrap();
    let socket = dir.join("msock/munge.socket");
    let log = |name: &str| fs::File::create(dir.join(name)).expect("log file");
    let munged = Command::new("munged")
        .arg("--foreground")
        .arg("--force")
        .arg(format!("--key-file={}", key_path.display()))
        .arg(format!("--socket={}", socket.display()))
        .arg(format!("--pid-file={}", dir.join("munge/munged.pid").display()))
        .arg(format!("--seed-file={}", dir.join("munge/munged.seed").display()))
        .arg(format!("--log-file={}", dir.join("munged.log").display()))
        .stdout(log("munged.out"))
        .stderr(log("munged.err"))
        .spawn()
        .expect("munged");
    cluster.daemons.push(("munged", munged));
    let t = Instant::now();
    while !socket.exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "munged did not start: {}", fs::read_to_string(dir.join("munged.err")).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(50));
    }

    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let host = host.split('.').next().unwrap_or("localhost").to_string();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let d = dir.display();
    let conf = format!(
        "ClusterName=sqfsmnttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
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
PlugStackConfig={d}/plugstack.conf
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
",
        ctld = free_port(),
        slurmd = free_port(),
        socket = socket.display(),
    );
    fs::write(&cluster.conf, conf).unwrap();
    fs::write(dir.join("plugstack.conf"), format!("required {} cache=no\n", so.display())).unwrap();
    for f in ["slurm.conf", "plugstack.conf"] {
        fs::set_permissions(dir.join(f), fs::Permissions::from_mode(0o644)).unwrap();
    }

    let ctld = Command::new("slurmctld")
        .args(["-D", "-f"])
        .arg(&cluster.conf)
        .stdout(log("slurmctld.out"))
        .stderr(log("slurmctld.err"))
        .spawn()
        .expect("slurmctld");
    cluster.daemons.push(("slurmctld", ctld));
    let slurmd = Command::new("slurmd")
        .args(["-D", "-N", &host, "-f"])
        .arg(&cluster.conf)
        .stdout(log("slurmd.out"))
        .stderr(log("slurmd.err"))
        .spawn()
        .expect("slurmd");
    cluster.daemons.push(("slurmd", slurmd));

    let t = Instant::now();
    loop {
        let (out, _) = text(&cluster.root_cmd(&["sinfo", "-h", "-o", "%t"]));
        if out.trim() == "idle" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "the node did not become idle (sinfo: {out})\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("slurm test: cluster up in {:?} ({})", t.elapsed(), dir.display());
    cluster
}

fn mksquashfs(src: &Path, img: &Path) {
    let o = Command::new("mksquashfs").arg(src).arg(img).args(["-quiet", "-noappend", "-all-root", "-no-progress"]).output().expect("mksquashfs");
    assert!(o.status.success(), "mksquashfs: {}", text(&o).1);
    fs::set_permissions(img, fs::Permissions::from_mode(0o644)).unwrap();
}

/// Failures are collected so that one run shows all of them.
struct Checks {
    failed: Vec<String>,
}

impl Checks {
    fn check(&mut self, name: &str, ok: bool, o: &Output) {
        let (out, err) = text(o);
        if ok {
            eprintln!("ok   {name}");
        } else {
            eprintln!("FAIL {name}: status {:?}\n  stdout: {out}\n  stderr: {err}", o.status.code());
            self.failed.push(name.to_string());
        }
    }
}

fn ensure_user() {
    if !Command::new("id").arg(USER).stdout(Stdio::null()).stderr(Stdio::null()).status().map(|s| s.success()).unwrap_or(false) {
        let st = Command::new("useradd").args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER]).status().expect("useradd");
        assert!(st.success(), "useradd {USER}");
    }
    if !sh(&format!("getent group {GROUP}")).status.success() {
        assert!(sh(&format!("groupadd --system {GROUP}")).status.success(), "groupadd");
    }
    let (groups, _) = text(&sh(&format!("id -nG {USER}")));
    if !groups.split_whitespace().any(|g| g == GROUP) {
        assert!(sh(&format!("usermod -a -G {GROUP} {USER}")).status.success(), "usermod");
    }
}

#[test]
fn slurm_spank_plugin() {
    if !is_root() {
        eprintln!("SKIPPED slurm_spank_plugin: needs root (it starts munged, slurmctld and slurmd and mounts); run make test as root");
        return;
    }
    if !["munged", "slurmctld", "slurmd", "srun", "sbatch", "mksquashfs"].iter().all(|c| have(c)) {
        eprintln!("slurm test: installing Slurm (scripts/deps test)");
        let _ = Command::new(workspace().join("scripts/deps")).arg("test").status();
    }
    let missing: Vec<&str> = ["munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "mksquashfs", "setpriv"]
        .into_iter()
        .filter(|c| !have(c))
        .collect();
    if !missing.is_empty() {
        eprintln!("SKIPPED slurm_spank_plugin: Slurm could not be installed (missing: {}); apt-get install slurmctld slurmd slurm-client munge", missing.join(" "));
        return;
    }
    let started = Instant::now();
    let plugin = build_plugin("spank", "unwind");
    let abort_plugin = build_plugin("release", "abort");
    ensure_user();
    let loops_before = loop_backing_files().len();
    let cluster = start_cluster(&plugin);
    let dir = cluster.dir.clone();
    let img = |n: &str| dir.join("images").join(n).display().to_string();

    // Images.
    let src = dir.join("src");
    for (name, content) in [("a", "hello from A"), ("b", "hello from B")] {
        fs::create_dir_all(src.join(name)).unwrap();
        fs::write(src.join(name).join("file"), format!("{content}\n")).unwrap();
        mksquashfs(&src.join(name), Path::new(&img(&format!("{name}.sqfs"))));
    }
    // An image whose symlink leads out of the allowed mount points.
    fs::create_dir_all(src.join("c")).unwrap();
    std::os::unix::fs::symlink("/tmp", src.join("c/escape")).unwrap();
    fs::create_dir_all(src.join("c/sub")).unwrap();
    mksquashfs(&src.join("c"), Path::new(&img("c.sqfs")));
    // Readable only by root.
    fs::copy(img("a.sqfs"), img("secret.sqfs")).unwrap();
    fs::set_permissions(img("secret.sqfs"), fs::Permissions::from_mode(0o600)).unwrap();
    // Readable through a supplementary group only.
    fs::copy(img("b.sqfs"), img("group.sqfs")).unwrap();
    std::os::unix::fs::chown(img("group.sqfs"), Some(0), Some(group_id(GROUP))).unwrap();
    fs::set_permissions(img("group.sqfs"), fs::Permissions::from_mode(0o640)).unwrap();
    // Random bytes, and a truncated image: both refused by the superblock
    // check before the kernel sees them (no corrupt image ever reaches the
    // kernel's squashfs driver in a test).
    let mut noise = vec![0u8; 8192];
    fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut noise)).unwrap();
    fs::write(img("random.sqfs"), &noise).unwrap();
    let whole = fs::read(img("a.sqfs")).unwrap();
    fs::write(img("badbody.sqfs"), &whole[..whole.len() / 2]).unwrap();
    for f in ["random.sqfs", "badbody.sqfs"] {
        fs::set_permissions(img(f), fs::Permissions::from_mode(0o644)).unwrap();
    }

    let uid = id_of("-u", USER).to_string();
    let a_ue = format!("--squashfs={}:/user-environment", img("a.sqfs"));
    let host_ns = fs::read_link("/proc/self/ns/mnt").unwrap();
    let mut c = Checks { failed: Vec::new() };

    // 1. A task sees the image.
    let o = cluster.user(&[], &["srun", &a_ue, "cat", "/user-environment/file"]);
    c.check("srun --squashfs: the task reads the image", o.status.success() && text(&o).0 == "hello from A\n", &o);

    // 2. Two tasks: both see it, in one namespace that is not the host's.
    let o = cluster.user(&[], &["srun", "-n2", &a_ue, "sh", "-c", "cat /user-environment/file; readlink /proc/self/ns/mnt"]);
    let out = text(&o).0;
    let lines: Vec<&str> = out.lines().collect();
    let ns: Vec<&&str> = lines.iter().filter(|l| l.starts_with("mnt:")).collect();
    c.check(
        "srun -n2: both tasks see the image in the step's own namespace",
        o.status.success()
            && lines.iter().filter(|l| **l == "hello from A").count() == 2
            && ns.len() == 2
            && ns[0] == ns[1]
            && OsStr::new(ns[0]) != host_ns.as_os_str(),
        &o,
    );

    // 3. The task's process state.
    let o = cluster.user(
        &[],
        &[
            "srun",
            &a_ue,
            "sh",
            "-c",
            "id -u; grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb)' /proc/self/status; echo \"UENV=$UENV_MOUNT_LIST\"; \
             grep ' /user-environment ' /proc/self/mountinfo; pwd; cat /sys/block/loop*/loop/backing_file 2>/dev/null; \
             if umount /user-environment 2>/dev/null; then echo UMOUNTED; else echo UMOUNT-REFUSED; fi",
        ],
    );
    let out = text(&o).0;
    let mountinfo = out.lines().find(|l| l.contains(" /user-environment ")).unwrap_or("");
    c.check(
        "task: user's uid, NoNewPrivs=1, no capabilities, UENV_MOUNT_LIST, ro,nosuid,nodev squashfs on a loop device backed by the image, cwd kept, umount refused",
        o.status.success()
            && out.lines().next() == Some(uid.as_str())
            && out.contains("NoNewPrivs:\t1")
            && out.contains("CapEff:\t0000000000000000")
            && out.contains("CapPrm:\t0000000000000000")
            && out.contains("CapAmb:\t0000000000000000")
            && out.contains(&format!("UENV={}:/user-environment\n", img("a.sqfs")))
            && mountinfo.contains(" ro,nosuid,nodev")
            && mountinfo.contains(" - squashfs /dev/loop")
            && out.contains(&format!("{}\n", dir.display()))
            && out.contains("UMOUNT-REFUSED")
            // (also shows that the final leak check recognises our loop devices)
            && out.lines().any(|l| l == img("a.sqfs")),
        &o,
    );

    // 4. Without --squashfs the plugin changes nothing.
    let o = cluster.user(&[], &["srun", "sh", "-c", "grep NoNewPrivs /proc/self/status; echo \"UENV=$UENV_MOUNT_LIST\"; grep -c ' /user-environment ' /proc/self/mountinfo"]);
    let out = text(&o).0;
    c.check(
        "srun without --squashfs: no mount, no UENV_MOUNT_LIST, no_new_privs untouched",
        out.contains("NoNewPrivs:\t0") && out.contains("UENV=\n") && out.trim_end().ends_with('0'),
        &o,
    );

    // 5. $SLURM_SQUASHFS when no option is given; two images.
    let spec = format!("{}:/user-environment,{}:/user-tools", img("a.sqfs"), img("b.sqfs"));
    let o = cluster.user(&[("SLURM_SQUASHFS", &spec)], &["srun", "cat", "/user-environment/file", "/user-tools/file"]);
    c.check("SLURM_SQUASHFS with two images", o.status.success() && text(&o).0 == "hello from A\nhello from B\n", &o);

    // Nested mount points, given child first: mounted parent first.
    let spec = format!("--squashfs={}:/user-environment/sub,{}:/user-environment", img("a.sqfs"), img("c.sqfs"));
    let o = cluster.user(&[], &["srun", &spec, "sh", "-c", "cat /user-environment/sub/file; echo $UENV_MOUNT_LIST"]);
    c.check(
        "nested mount points are mounted parent first",
        o.status.success()
            && text(&o).0
                == format!("hello from A\n{}:/user-environment,{}:/user-environment/sub\n", img("c.sqfs"), img("a.sqfs")),
        &o,
    );

    // 6. An image readable through a supplementary group of the user.
    let o = cluster.user(&[], &["srun", &format!("--squashfs={}:/user-tools", img("group.sqfs")), "cat", "/user-tools/file"]);
    c.check("image readable via a supplementary group", o.status.success() && text(&o).0 == "hello from B\n", &o);

    // 7. sbatch --squashfs: the batch script and its steps see it; an inner
    //    srun --squashfs replaces it.
    let script = dir.join("jobs/job.sh");
    let mut f = fs::File::create(&script).unwrap();
    write!(
        f,
        "#!/bin/sh
#SBATCH --squashfs={a}:/user-environment
echo \"batch: $(cat /user-environment/file)\"
srun cat /user-environment/file | sed 's/^/step1: /'
srun --squashfs={b}:/user-environment cat /user-environment/file | sed 's/^/step2: /'
srun --squashfs={b}:/user-tools sh -c 'cat /user-tools/file; ls /user-environment | wc -l' | sed 's/^/step3: /'
",
        a = img("a.sqfs"),
        b = img("b.sqfs")
    )
    .unwrap();
    drop(f);
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let out_file = dir.join("jobs/job.out");
    let o = cluster.user(&[], &["sbatch", "--parsable", "-o", &out_file.display().to_string(), &script.display().to_string()]);
    let job = text(&o).0.trim().to_string();
    let state = if o.status.success() { cluster.wait_job(&job) } else { String::new() };
    let out = fs::read_to_string(&out_file).unwrap_or_default();
    c.check(
        &format!("sbatch --squashfs: batch step and inner srun see it; inner srun --squashfs replaces it (job {job} {state}; output: {out:?})"),
        state == "COMPLETED"
            && out.contains("batch: hello from A\n")
            && out.contains("step1: hello from A\n")
            && out.contains("step2: hello from B\n")
            && out.contains("step3: hello from B\nstep3: 0\n"),
        &o,
    );

    // salloc --squashfs: the srun steps inside the allocation see it.
    let o = cluster.user(&[], &["salloc", &a_ue, "srun", "cat", "/user-environment/file"]);
    c.check("salloc --squashfs: a step in the allocation sees it", o.status.success() && text(&o).0 == "hello from A\n", &o);

    // 8. Refused in srun before the job is queued, with squashfs-mount's messages.
    for (name, spec, msg) in [
        ("unreadable image (0600 root)", format!("{}:/user-environment", img("secret.sqfs")), "cannot open the image: permission denied"),
        ("disallowed mount point", format!("{}:/tmp", img("a.sqfs")), "refusing to mount on /tmp"),
        ("random bytes", format!("{}:/user-environment", img("random.sqfs")), "not a SquashFS image"),
        ("relative image path", "a.sqfs:/user-environment".to_string(), "must be absolute"),
        ("syntax", "nonsense".to_string(), "not of the form <image>:<mountpoint>"),
    ] {
        let o = cluster.user(&[], &["srun", &format!("--squashfs={spec}"), "echo", "RAN"]);
        let (out, err) = text(&o);
        c.check(
            &format!("srun refuses: {name}"),
            !o.status.success() && !out.contains("RAN") && err.contains("squashfs-mount: ") && err.contains(msg),
            &o,
        );
    }

    // 9. Refused in slurmstepd: the step fails with the plugin's message.
    for (name, spec, msg) in [
        ("mount point resolving outside (..)", format!("{}:/user-environment/../tmp", img("a.sqfs")), "refusing to mount on /tmp"),
        (
            "mount point resolving outside (symlink in an image)",
            format!("{}:/user-environment,{}:/user-environment/escape", img("c.sqfs"), img("a.sqfs")),
            "refusing to mount on /tmp",
        ),
        ("truncated image", format!("{}:/user-environment", img("badbody.sqfs")), "truncated"),
    ] {
        let o = cluster.user(&[], &["srun", "-n2", &format!("--squashfs={spec}"), "echo", "RAN"]);
        let (out, err) = text(&o);
        c.check(
            &format!("step fails: {name}"),
            o.status.code() == Some(1) && !out.contains("RAN") && err.contains("squashfs-mount: ") && err.contains(msg),
            &o,
        );
    }

    // 10. An image that becomes unreadable between submission and start:
    //     slurmstepd (root) must open it as the user, and refuse.
    fs::copy(img("a.sqfs"), img("later.sqfs")).unwrap();
    fs::set_permissions(img("later.sqfs"), fs::Permissions::from_mode(0o644)).unwrap();
    let later_out = dir.join("jobs/later.out");
    let o = cluster.user(
        &[],
        &[
            "sbatch",
            "--parsable",
            "--hold",
            "-o",
            &later_out.display().to_string(),
            &format!("--squashfs={}:/user-environment", img("later.sqfs")),
            "--wrap",
            "cat /user-environment/file; echo RAN",
        ],
    );
    let job = text(&o).0.trim().to_string();
    fs::set_permissions(img("later.sqfs"), fs::Permissions::from_mode(0o600)).unwrap();
    let released = cluster.root_cmd(&["scontrol", "release", &job]);
    let state = if o.status.success() && released.status.success() { cluster.wait_job(&job) } else { String::new() };
    let out = fs::read_to_string(&later_out).unwrap_or_default();
    c.check(
        &format!("batch step refuses an image the user cannot read at start (job {job} {state}; output: {out:?})"),
        state == "FAILED" && !out.contains("RAN") && out.contains("cannot open the image: permission denied"),
        &o,
    );

    // 11. A panic = "abort" build (cargo build --release) refuses to run
    //     rather than risk aborting slurmstepd; srun loads the plugin stack
    //     itself, so a second configuration naming that build shows it.
    let abort_so = dir.join("abort.so");
    fs::copy(&abort_plugin, &abort_so).unwrap();
    fs::set_permissions(&abort_so, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("plugstack-abort.conf"), format!("required {}\n", abort_so.display())).unwrap();
    let conf2 = dir.join("slurm-abort.conf");
    let conf_text = fs::read_to_string(&cluster.conf).unwrap();
    fs::write(&conf2, conf_text.replace("/plugstack.conf", "/plugstack-abort.conf")).unwrap();
    for f in [&conf2, &dir.join("plugstack-abort.conf")] {
        fs::set_permissions(f, fs::Permissions::from_mode(0o644)).unwrap();
    }
    let o = cluster.user(&[("SLURM_CONF", &conf2.display().to_string())], &["srun", "echo", "RAN"]);
    let (out, err) = text(&o);
    c.check(
        "a panic=abort build of the plugin refuses to initialise",
        !o.status.success() && !out.contains("RAN") && err.contains("aborts on a panic"),
        &o,
    );

    // 12. Nothing left behind: no loop devices, nothing mounted on the host.
    //     Other tests may attach loop devices meanwhile, so ours are
    //     recognised by their backing files (all in this test's directory).
    let ours = || loop_backing_files().into_iter().filter(|f| f.starts_with(&dir.display().to_string())).collect::<Vec<_>>();
    let t = Instant::now();
    while !ours().is_empty() && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = ours();
    let after = loop_backing_files().len();
    let host_mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let o = sh("true");
    c.check(
        &format!("no loop devices left {left:?} ({loops_before} attached before, {after} after, all users) and no mounts on the host"),
        left.is_empty() && !host_mounts.contains(" /user-environment ") && !host_mounts.contains(" /user-tools "),
        &o,
    );

    eprintln!("slurm test: {} checks failed, took {:?}", c.failed.len(), started.elapsed());
    if !c.failed.is_empty() {
        eprintln!("{}", cluster.logs());
        panic!("failed: {}", c.failed.join("; "));
    }
}
