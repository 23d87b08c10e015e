//! uenv's `--join` contract: its test/integration/join.bats (eth-cscs/uenv),
//! test by test, on the Slurm test cluster (`sqfsmnt_test_support::slurm`,
//! one node), against the setuid binary, as the cluster's unprivileged
//! user inside an allocation. Each bats test body is kept as it is, with
//! `uenv run --join $IMG --` written as the `squashfs-mount --join
//! $IMG:$MNT --` call it stands for, and the paths made the cluster's.
//! Test 3 (a planted, too small shared-memory object) becomes its point
//! for our design, which shares no object: a planted keeper is refused
//! cleanly. And a second user can neither make a job's `--join` fail nor
//! join it.
//!
//! One cluster for all the cases (it takes a while to start): one `#[test]`
//! that runs each case and names the ones that failed. A test binary of
//! its own (not a module of `tests/it/`): its cluster and its `--gc --all`
//! runs must not overlap the other privileged tests, which share the
//! host's image cache and loop devices (as part of `it` it once evicted
//! their instances and found a loop device of its image still attached).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use sqfsmnt_test_support::cmd::Run;
use sqfsmnt_test_support::slurm::{Cluster, Options, TOOLS};
use sqfsmnt_test_support::users::Users;

/// What every case gets: the cluster and the bats file's variables.
struct J {
    c: Cluster,
    /// The bats setup: PATH (the setuid squashfs-mount first), IMG, MNT,
    /// TMP, SRUN.
    setup: String,
    bin: PathBuf,
}

impl J {
    /// `body` as the cluster's user, in an allocation of 4 tasks on the
    /// node (what join.bats runs under), after the bats `setup`.
    fn bats(&self, body: &str) -> Run {
        let script = format!("{}\n{body}\n", self.setup);
        self.c.user(
            &[],
            &[
                "salloc",
                "-N1",
                "-n4",
                "--overcommit",
                "-Q",
                "bash",
                "-c",
                &script,
            ],
        )
    }
}

/// The bats `run`: prints the command's output and status in a form the
/// Rust side reads (`output` then `STATUS=n`).
const RUN: &str =
    r#"run() { output=$("$@" 2>&1); status=$?; printf '%s\nSTATUS=%s\n' "$output" "$status"; }"#;

fn status(r: &Run) -> Option<i32> {
    r.stdout()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("STATUS=")?.parse().ok())
}

fn output(r: &Run) -> String {
    r.stdout()
}

fn lines_starting(out: &str, prefix: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// @test "--join mounts once and every task shares it"
fn mounts_once_and_every_task_shares_it(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
run $SRUN -n4 squashfs-mount --join $IMG:$MNT -- \
    bash -c 'mp=${{UENV_MOUNT_LIST##*:}}; echo "SEEN $(stat -c %d $mp) $(ls -1 $mp | wc -l)"'"#
    ));
    let out = output(&r);
    let seen = lines_starting(&out, "SEEN ");
    let devs: std::collections::BTreeSet<&str> =
        seen.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    check(
        status(&r) == Some(0) && seen.len() == 4 && devs.len() == 1 && !out.contains("SEEN 0"),
        &r,
    )
}

/// @test "--join leaves every task in the working directory it started in"
fn leaves_every_task_in_its_working_directory(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
cd $TMP
touch marker
run $SRUN -n4 squashfs-mount --join $IMG:$MNT -- \
    bash -c 'echo "PWD $(pwd) $(test -e marker && echo found || echo missing)"'"#
    ));
    let out = output(&r);
    let pwd = lines_starting(&out, "PWD ");
    let distinct: std::collections::BTreeSet<&String> = pwd.iter().collect();
    check(
        status(&r) == Some(0)
            && pwd.len() == 4
            && distinct.len() == 1
            && out.contains("found")
            && !out.contains("missing"),
        &r,
    )
}

/// @test "--join rejects a shared memory segment that is too small", for
/// this design: what can be planted is a process of the user's own that
/// claims to keep the step's mount (here a real keeper of this program,
/// started by hand, unprivileged, outside any namespace of the step's).
/// The tasks refuse it cleanly: a failure that names it, never a crash.
fn a_planted_keeper_is_refused_cleanly(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
tag=jointest$$
# (not in join.bats) the plant's "step" (fd 4): a pipe from a process
# ended with it; the plant says "ready" on fd 3 once it can be found,
# which the tasks are started after (a fixed sleep was a window)
exec 5< <(exec sleep 600 2>/dev/null)
step=$!
setpriv --no-new-privs {bin} --join-keeper $SLURM_JOBID.$tag.0 2 3 4 - $IMG:$MNT 3>$TMP/plant.ready 4<&5 &
planted=$!
exec 5<&-
until grep -q '^ready$' $TMP/plant.ready 2>/dev/null; do kill -0 $planted || break; sleep 0.05; done
run $SRUN -n2 bash -c \
    "export SLURM_STEPID=$tag; exec squashfs-mount --join $IMG:$MNT -- true"
kill $planted $step"#,
        bin = j.bin.display()
    ));
    let out = output(&r);
    check(
        status(&r).is_some_and(|s| s != 0)
            && out.contains("its namespaces are not yours; refusing to join it")
            && !out.contains("Bus error")
            && !out.contains("panicked"),
        &r,
    )
}

/// Issue 37, finding 7: a task that does not lead mounts nothing of its
/// own (nothing it would throw away: here its command line even names
/// another image, and `-v` says what it did), and its command sees
/// `UENV_MOUNT_LIST` as it is: the leading task's mounts, which it sees.
fn a_task_that_does_not_lead_mounts_nothing_and_sees_the_leaders_list(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
cat >$TMP/task.sh <<'EOF'
#!/bin/bash
show='echo "TASK $SLURM_LOCALID $UENV_MOUNT_LIST $(ls $MNT | tr "\n" " ")"'
if [ "$SLURM_LOCALID" = 0 ]; then
    exec squashfs-mount --join $IMG:$MNT -- bash -c "$show"
fi
exec squashfs-mount -v --join $IMG2:$MNT -- bash -c "$show"
EOF
chmod +x $TMP/task.sh
run $SRUN -n3 $TMP/task.sh"#
    ));
    let out = output(&r);
    let tasks = lines_starting(&out, "TASK ");
    let img = j.c.dir.join("images/tool.squashfs");
    let img2 = j.c.dir.join("images/other.squashfs");
    let seen = format!(
        "{}:{} env meta ",
        img.display(),
        j.c.dir.join("mnt").display()
    );
    let as_leader = tasks.iter().filter(|t| t.ends_with(&seen)).count();
    check(
        status(&r) == Some(0)
            && tasks.len() == 3
            && as_leader == 3
            && out.matches("--join: this task mounted nothing").count() == 2
            && !out.contains(&img2.display().to_string()),
        &r,
    )
}

/// @test "--join without the Slurm environment is refused"
fn refused_without_the_slurm_environment(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
run env -u SLURM_STEPID -u SLURM_STEP_ID -u SLURM_JOBID -u SLURM_JOB_ID \
    -u SLURM_STEP_TASKS_PER_NODE -u SLURM_NODEID \
    squashfs-mount --join $IMG:$MNT -- true"#
    ));
    check(
        status(&r).is_some_and(|s| s != 0) && output(&r).contains("--join requires SLURM"),
        &r,
    )
}

/// @test "--join inside a uenv session is refused"
fn refused_inside_a_session(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
run squashfs-mount $IMG:$MNT -- squashfs-mount --join $IMG:$MNT -- true"#
    ));
    check(
        status(&r).is_some_and(|s| s != 0) && output(&r).contains("already running"),
        &r,
    )
}

/// @test "--join keeps the mount alive when the leader exits first"
fn keeps_the_mount_alive_when_the_leader_exits_first(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
cat >$TMP/leader-exit.sh <<'EOF'
#!/bin/bash
mnt=${{UENV_MOUNT_LIST##*:}}
# the leader is the rank whose command still owns the forked squashfuse daemon
# (not in join.bats: ours is the task with SLURM_LOCALID=0, which made the
# mount; its keeper may be gone already once every task joined, so ps
# cannot tell)
role=follower
if [ "$SLURM_LOCALID" = 0 ]; then
    role=leader
fi
# (not in join.bats) each rank says its role (the leader its pid)
echo "$role $$" > $TMP/role.tmp.$SLURM_PROCID && mv $TMP/role.tmp.$SLURM_PROCID $TMP/role.$SLURM_PROCID
if [[ $role == leader ]]; then
    echo "LEADER rank=${{SLURM_PROCID}} exiting immediately"
    exit 0
fi
# outlive the leader, then keep using the mount
# (not in join.bats: there, sleep 5) once every rank said its role and
# the leader, if any, has ended
until [ $(ls $TMP/role.[0-9]* 2>/dev/null | wc -l) -ge $SLURM_NTASKS ]; do sleep 0.05; done
leader=$(cat $TMP/role.[0-9]* | awk '$1=="leader"{{print $2}}')
for p in $leader; do
    while [ -e /proc/$p ] && [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" != Z ]; do sleep 0.05; done
done
if out=$(ls -1 "$mnt" 2>&1) && [[ -n $out ]]; then
    echo "FOLLOWER rank=${{SLURM_PROCID}} ok nfiles=$(echo "$out" | wc -l)"
else
    echo "FOLLOWER rank=${{SLURM_PROCID}} lost [${{out//$'\n'/ }}]"
fi
EOF
chmod +x $TMP/leader-exit.sh
rm -f $TMP/role.*
run $SRUN -n4 squashfs-mount --join $IMG:$MNT -- $TMP/leader-exit.sh"#
    ));
    let out = output(&r);
    let ok = lines_starting(&out, "FOLLOWER ")
        .iter()
        .filter(|l| l.contains(" ok "))
        .count();
    check(
        status(&r) == Some(0)
            && lines_starting(&out, "LEADER ").len() == 1
            && ok == 3
            && !out.contains("Transport endpoint"),
        &r,
    )
}

/// @test "--join releases the mount once the step ends"
fn releases_the_mount_once_the_step_ends(j: &J) -> Result<(), String> {
    let r = j.bats(&format!(
        r#"{RUN}
run $SRUN -n4 squashfs-mount --join $IMG:$MNT -- true
[ "$status" -eq 0 ] || echo FIRST_FAILED
run $SRUN -n1 bash -c \
    'pgrep -x squashfs-mount || echo NO_DAEMONS; ls /dev/shm/uenv-run* 2>/dev/null || echo NO_IPC'
# (not in join.bats) the state of what pgrep saw, at once: pid 1 of this
# test machine reaps orphans late, and pgrep lists their zombies too
ps -eo pid=,stat=,comm= | awk '$3=="squashfs-mount"{{print "PS", $1, $2}}'"#
    ));
    let out = output(&r);
    // pgrep's pids (the lines of digits only), and the state ps saw
    let listed: Vec<&str> = out
        .lines()
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    // (ps's state is a letter and flags: a zombie is "Z", or "ZN" when
    // the run is niced.)
    let running = |pid: &str| {
        out.lines().any(|l| {
            l.strip_prefix(&format!("PS {pid} "))
                .is_some_and(|state| !state.starts_with('Z'))
        })
    };
    // None left, or only exited ones (zombies, or gone when ps looked).
    let none_running = out.contains("NO_DAEMONS") || listed.iter().all(|p| !running(p));
    let ok = status(&r) == Some(0)
        && !out.contains("FIRST_FAILED")
        && none_running
        && out.contains("NO_IPC");
    check(ok, &r).map_err(|e| {
        let ps = sqfsmnt_test_support::cmd::run(
            Command::new("ps").args(["-eo", "pid,ppid,user,etimes,args"]),
        );
        let all = ps.stdout();
        let named: Vec<&str> = all
            .lines()
            .filter(|l| l.contains("squashfs-mount"))
            .map(|l| l.trim())
            .collect::<Vec<_>>();
        format!("{e}\nprocesses named squashfs-mount now: {named:#?}")
    })
}

/// A second user on the node knows the job's and step's ids (squeue shows
/// them). It plants a keeper for the job's next step before it starts,
/// and, while the step runs, tries to join it. The step's tasks ignore the
/// plant and share their own mount; the second user finds nothing to join.
/// Each stage waits for the event of the one before: the job starts its
/// step once the plant said it is ready (the job waits for a file; a job
/// held and released waited for Slurm's next scheduling pass, a minute),
/// and the second user tries once both tasks run the command.
fn a_second_user_cannot_break_or_join_a_step(j: &J, other: &Users) -> Result<(), String> {
    let user2 = other.first();
    let done = j.c.dir.join("jobs/join-other-done");
    let planted = j.c.dir.join("jobs/join-other-planted");
    let running = j.c.dir.join("jobs/join-other-running");
    for f in [&done, &planted] {
        let _ = fs::remove_file(f);
    }
    for rank in 0..2 {
        let _ = fs::remove_file(format!("{}.{rank}", running.display()));
    }
    // The job's first step is step 0 of the allocation: known in advance.
    let victim = j.c.dir.join("jobs/join-victim.out");
    let job = submit_victim(j, &victim, &planted, &running, &done)?;
    let env_for = |local: &str| {
        vec![
            ("SLURM_STEP_TASKS_PER_NODE".to_string(), "2".to_string()),
            ("SLURM_NODEID".into(), "0".into()),
            ("SLURM_JOBID".into(), job.clone()),
            ("SLURM_STEPID".into(), "0".into()),
            ("SLURM_LOCALID".into(), local.into()),
        ]
    };
    let img = j.c.dir.join("images/tool.squashfs");
    let pair = format!("{}:{}", img.display(), j.c.dir.join("mnt").display());
    let (mut planted_keeper, said) = plant_keeper(j, user2, &job, &pair)?;
    fs::write(&planted, "").map_err(|e| e.to_string())?;
    // Both tasks run the command: the step's own keeper holds their
    // namespace (waited for up to the hang limit).
    let tasks_up = both_tasks_run(j, &job, &running);

    // The plant has had its chance; the second user now tries to join the
    // running step (its own plant, were it left, would be refused too).
    let _ = planted_keeper.kill();
    let _ = planted_keeper.wait();
    // The second user tries to join the running step.
    let mut join = user2.command("env");
    for (k, v) in env_for("1") {
        join.arg(format!("{k}={v}"));
    }
    join.arg(&j.bin).args(["--join", &pair, "--", "true"]);
    let joined = sqfsmnt_test_support::cmd::run(&mut join);
    fs::write(&done, "").map_err(|e| e.to_string())?;
    let state = j.c.wait_job(&job);
    let out = fs::read_to_string(&victim).unwrap_or_default();
    let tasks = lines_starting(&out, "TASK ");
    let namespaces: std::collections::BTreeSet<&str> =
        tasks.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    let refused = !joined.success() && joined.stderr().contains("made no mount to join");
    let plant_ready = said == "ready\n";
    if plant_ready
        && tasks_up
        && state == "COMPLETED"
        && tasks.len() == 2
        && namespaces.len() == 1
        && refused
    {
        Ok(())
    } else {
        Err(format!(
            "plant said {said:?}; both tasks seen running: {tasks_up}; job {job}: {state}: {out}\nsecond user's --join: {joined:?}"
        ))
    }
}

/// The victim's job, submitted: once `planted` exists, a step of two tasks
/// that join one mount, touch `running.RANK` and wait for `done`; its
/// output in `victim`. Its id.
fn submit_victim(
    j: &J,
    victim: &Path,
    planted: &Path,
    running: &Path,
    done: &Path,
) -> Result<String, String> {
    let script = format!(
        r#"{setup}
echo "JOB $SLURM_JOBID"
while [ ! -e {planted} ]; do sleep 0.05; done
$SRUN -n2 squashfs-mount --join $IMG:$MNT -- \
    bash -c 'touch {running}.$SLURM_PROCID; while [ ! -e {done} ]; do sleep 0.2; done; echo "TASK $(readlink /proc/self/ns/mnt) $(ls $MNT | wc -l)"'
"#,
        setup = j.setup,
        planted = planted.display(),
        running = running.display(),
        done = done.display()
    );
    let path = j.c.dir.join("jobs/join-victim.sh");
    fs::write(&path, format!("#!/bin/bash\n{script}")).map_err(|e| e.to_string())?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    let r = j.c.user(
        &[],
        &[
            "sbatch",
            "--parsable",
            "-N1",
            "-n2",
            "--overcommit",
            "-o",
            &victim.display().to_string(),
            &path.display().to_string(),
        ],
    );
    let job = r.stdout().trim().to_string();
    if !r.success() || job.is_empty() {
        return Err(format!("sbatch: {r:?}"));
    }
    Ok(job)
}

/// The plant: a keeper of `user2`'s, for the job's step 0; it says
/// "ready" (fd 3: its stdout here) once it can be found. The keeper (its
/// "step", fd 4, is a pipe the test holds open) and what it said.
fn plant_keeper(
    j: &J,
    user2: &sqfsmnt_test_support::users::User,
    job: &str,
    pair: &str,
) -> Result<(std::process::Child, String), String> {
    let mut plant = user2.command("bash");
    plant
        .arg("-c")
        .arg(format!(
            "exec setpriv --no-new-privs {} --join-keeper {job}.0.0 2 3 4 - {pair} 3>&1 4<&0",
            j.bin.display()
        ))
        // Its "step" (fd 4): a pipe the test holds open.
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut planted_keeper = plant.spawn().map_err(|e| e.to_string())?;
    let mut said = String::new();
    let _ = std::io::BufRead::read_line(
        &mut std::io::BufReader::new(planted_keeper.stdout.take().expect("stdout")),
        &mut said,
    );
    Ok((planted_keeper, said))
}

/// Whether both tasks of `job` ran their command (`running.RANK`), waited
/// for while the job is active, up to the hang limit.
fn both_tasks_run(j: &J, job: &str, running: &Path) -> bool {
    let both = || (0..2).all(|rank| Path::new(&format!("{}.{rank}", running.display())).exists());
    let deadline = std::time::Instant::now() + sqfsmnt_test_support::ends::HANG;
    let active = || {
        matches!(
            j.c.job_state(job).as_str(),
            "PENDING" | "RUNNING" | "CONFIGURING"
        )
    };
    while !both() && std::time::Instant::now() < deadline && active() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    both()
}

fn check(ok: bool, r: &Run) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{r:?}"))
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The plugin the cluster loads (it needs one; these tests do not use it).
fn plugin() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let target = exe.ancestors().nth(3).expect("target dir").to_path_buf();
    sqfsmnt_test_support::cmd::run_for(
        Command::new(env!("CARGO"))
            .args([
                "build",
                "--locked",
                "--profile",
                "spank",
                "-p",
                "spank-squashfs-mount",
                "--target-dir",
            ])
            .arg(&target)
            .current_dir(workspace()),
        std::time::Duration::from_secs(1800),
    )
    .ok_as("building the plugin");
    target.join("spank/libspank_squashfs_mount.so")
}

type Case = fn(&J) -> Result<(), String>;

const CASES: &[(&str, Case)] = &[
    (
        "--join mounts once and every task shares it",
        mounts_once_and_every_task_shares_it,
    ),
    (
        "--join leaves every task in the working directory it started in",
        leaves_every_task_in_its_working_directory,
    ),
    (
        "--join rejects a planted rendezvous (keeper) cleanly",
        a_planted_keeper_is_refused_cleanly,
    ),
    (
        "--join without the Slurm environment is refused",
        refused_without_the_slurm_environment,
    ),
    (
        "--join inside a uenv session is refused",
        refused_inside_a_session,
    ),
    (
        "--join keeps the mount alive when the leader exits first",
        keeps_the_mount_alive_when_the_leader_exits_first,
    ),
    (
        "--join releases the mount once the step ends",
        releases_the_mount_once_the_step_ends,
    ),
    (
        "--join: a task that does not lead mounts nothing and sees the leader's UENV_MOUNT_LIST",
        a_task_that_does_not_lead_mounts_nothing_and_sees_the_leaders_list,
    ),
];

/// The setuid program, first on the user's PATH, the images, the mount
/// point and a scratch directory on the cluster `c`: the shell lines that
/// set a job up to use them, and the program.
fn set_the_cluster_up(c: &Cluster) -> (String, PathBuf) {
    let bin = c.dir.join("bin/squashfs-mount");
    fs::create_dir_all(bin.parent().unwrap()).expect("mkdir");
    fs::copy(env!("CARGO_BIN_EXE_squashfs-mount"), &bin).expect("copy");
    std::os::unix::fs::chown(&bin, Some(0), Some(0)).expect("chown");
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o4755)).expect("chmod");
    let img = c.dir.join("images/tool.squashfs");
    sqfsmnt_test_support::image::build(
        &c.dir.join("src/tool"),
        &img,
        &[
            ("env/tool/bin/tool", "#!/bin/sh\necho hello tool\n"),
            ("meta/.keep", ""),
        ],
        "chmod 755 env/tool/bin/tool",
        &["-all-root"],
    );
    // Another image, which only the tasks that do not lead name.
    let img2 = c.dir.join("images/other.squashfs");
    sqfsmnt_test_support::image::build(
        &c.dir.join("src/other"),
        &img2,
        &[("other/file", "other\n")],
        "",
        &["-all-root"],
    );
    let mnt = c.dir.join("mnt");
    fs::create_dir_all(&mnt).expect("mkdir");
    let tmp = c.dir.join("jobs/scratch");
    fs::create_dir_all(&tmp).expect("mkdir");
    c.user.chown(&tmp);
    let setup = format!(
        "set -u\nexport PATH={bin}:$PATH\nunset UENV_MOUNT_LIST\nexport IMG={img} IMG2={img2} MNT={mnt} TMP={tmp}\nexport SRUN=\"srun --oversubscribe -N1\"",
        bin = bin.parent().unwrap().display(),
        img = img.display(),
        img2 = img2.display(),
        mnt = mnt.display(),
        tmp = tmp.display()
    );
    (setup, bin)
}

/// What the cluster of `j` still holds of `mnt` once every cached
/// instance was evicted, with the processes and namespaces that hold it.
fn leftovers_after_eviction(j: &J, mnt: &Path) -> Vec<String> {
    // The image cache keeps instances on the node and the login node (by
    // design): evict them before looking for leftovers.
    // An instance a namespace still used at the first eviction (a keeper
    // that ends with its step) is evicted at a later one; a namespace's
    // mounts go (and their loop device with them) after its last process
    // has been reaped, which pid 1 here does a moment later: look again
    // until they are gone (the hang limit only catches a leak).
    let mut left = Vec::new();
    let mut said = Vec::new();
    let deadline = std::time::Instant::now() + sqfsmnt_test_support::ends::HANG;
    for attempt in 0.. {
        if attempt > 0 {
            if std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        for n in &j.c.nodes {
            said.push(sqfsmnt_test_support::cmd::try_run(
                n.command(&j.bin).args(["--gc", "--all"]),
            ));
        }
        said.push(sqfsmnt_test_support::cmd::try_run(
            Command::new(&j.bin).args(["--gc", "--all"]),
        ));
        left = j.c.leftovers(&[mnt]);
        if left.is_empty() {
            break;
        }
    }
    if !left.is_empty() {
        let ps = sqfsmnt_test_support::cmd::run(
            Command::new("ps").args(["-eo", "pid,ppid,user,etimes,args"]),
        );
        let all = ps.stdout();
        let ours: Vec<&str> = all
            .lines()
            .filter(|l| l.contains("sqfsmnt") || l.contains("squashfs-mount"))
            .collect();
        let holders = sqfsmnt_test_support::cmd::run(Command::new("sh").args([
            "-c",
            "for f in /proc/[0-9]*/mountinfo; do grep -q ' /dev/loop' $f 2>/dev/null && grep -q squashfs $f && p=${f#/proc/} && echo \"${p%%/*} $(readlink /proc/${p%%/*}/ns/mnt) $(tr '\\0' ' ' < /proc/${p%%/*}/cmdline | cut -c1-80)\"; done | sort -k2 | uniq -f1",
        ]));
        left.push(format!(
            "processes: {ours:#?}; mount namespaces with a squashfs on a loop device: {}",
            holders.stdout()
        ));
    }
    left
}

#[test]
fn join_bats_on_the_slurm_cluster() {
    let mut tools = TOOLS.to_vec();
    tools.extend(["mksquashfs", "pgrep", "perl"]);
    if !sqfsmnt_test_support::privileged(
        "--join tests (crates/squashfs-mount/tests/join.rs)",
        &tools,
    ) {
        return;
    }
    let plugin = plugin();
    let c = Cluster::start(&Options {
        nodes: 1,
        plugin,
        fuse_server: None,
        plugin_args: String::new(),
        mount_points: Vec::new(),
    });
    let (setup, bin) = set_the_cluster_up(&c);
    let j = J { c, setup, bin };
    let other = Users::create(1, false);
    let mut failed = Vec::new();
    for (name, case) in CASES {
        let outcome = case(&j);
        j.c.quiesce();
        report(name, outcome, &mut failed);
    }
    let outcome = a_second_user_cannot_break_or_join_a_step(&j, &other);
    j.c.quiesce();
    report(
        "a second user can neither make a step's --join fail nor join it",
        outcome,
        &mut failed,
    );
    drop(other);
    let left = leftovers_after_eviction(&j, &j.c.dir.join("mnt"));
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n\n"));
    assert!(left.is_empty(), "left behind: {left:?}");
}

fn report(name: &str, outcome: Result<(), String>, failed: &mut Vec<String>) {
    match outcome {
        Ok(()) => eprintln!("ok: {name}"),
        Err(why) => {
            eprintln!("FAILED: {name}: {why}");
            failed.push(format!("{name}: {why}"));
        }
    }
}
