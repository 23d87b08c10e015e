//! The SPANK plugin against a real Slurm (Debian's 22.05) on a multi-node
//! test cluster (`sqfsmnt_test_support::slurm`): one slurmctld and three
//! slurmd, each node in its own network, UTS and mount namespaces with its
//! own munged; jobs submitted by an unprivileged test user. The cluster is
//! started once for this test binary (a libtest-mimic main, tests run one
//! at a time) and torn down at the end, also after failures.
//!
//! After every test: no job left, and no loop device backed by the
//! cluster's files and no mount of the plugin's on any node or the host.
//!
//! Adding a test: write `fn name(t: &T)` (assert with `assert!`; `t.c` is
//! the cluster, `t.img("a.sqfs")` an image path, `t.user(...)` runs a
//! command as the user on the login node) and add it to `TESTS`.
//!
//! Needs root; skips loudly otherwise, or when Slurm cannot be installed
//! (scripts/deps test installs it).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use sqfsmnt_test_support::cmd::{run, run_for, try_run, Run};
use sqfsmnt_test_support::count::fuse_servers_of;
use sqfsmnt_test_support::ends;
use sqfsmnt_test_support::slurm::{Cluster, Options, TOOLS};
use sqfsmnt_test_support::{have, image};

/// The time limit of a cargo build or a package installation a test runs.
const BUILD_LIMIT: std::time::Duration = std::time::Duration::from_secs(1800);

const NODES: usize = 3;
const UE: &str = "/user-environment";
const UT: &str = "/user-tools";
/// What every test gets.
struct T {
    c: Cluster,
    /// The squashfs-mount command (for `--gc --all` on the nodes).
    cli: PathBuf,
    /// The panic = "abort" build of the plugin.
    abort_plugin: PathBuf,
    host_mnt_ns: PathBuf,
    /// /dev/fuse open to the job user (the plugin opens it as the user).
    _fuse: sqfsmnt_test_support::site::FuseDevice,
}

impl T {
    fn img(&self, name: &str) -> String {
        self.c.dir.join("images").join(name).display().to_string()
    }
    fn user(&self, env: &[(&str, &str)], args: &[&str]) -> Run {
        self.c.user(env, args)
    }
    /// A copy of images/a.sqfs in jobs/`name`, the job user's (their own
    /// image: the FUSE path).
    fn own_image(&self, name: &str) -> PathBuf {
        let own = self.c.dir.join("jobs").join(name);
        fs::copy(self.img("a.sqfs"), &own).expect("copy");
        self.c.user.chown(&own);
        own
    }
    /// `srun -N<nodes> --squashfs=<own copy of a.sqfs>:UE sh -c script`,
    /// which must succeed (the copy removed after): its stdout.
    fn srun_own(&self, name: &str, nodes: &str, script: &str) -> String {
        let own = self.own_image(name);
        let r = self.user(
            &[],
            &[
                "srun",
                nodes,
                &format!("--squashfs={}:{UE}", own.display()),
                "sh",
                "-c",
                script,
            ],
        );
        let _ = fs::remove_file(&own);
        r.ok().stdout()
    }
    /// `--squashfs=<images/name>:<mnt>`.
    fn opt(&self, name: &str, mnt: &str) -> String {
        format!("--squashfs={}:{mnt}", self.img(name))
    }
}

type Test = fn(&T);

const TESTS: &[(&str, Test)] = &[
    (
        "the_users_own_image_is_served_by_fuse_on_every_node_and_no_server_outlives_the_job",
        users_own_image_through_fuse,
    ),
    (
        "a_fuse_server_a_task_stopped_does_not_outlive_the_job",
        stopped_server_does_not_outlive_the_job,
    ),
    (
        "tasks_of_a_step_share_one_fuse_instance_per_node_and_steps_reuse_it",
        fuse_instance_shared_by_tasks_and_steps,
    ),
    (
        "the_site_policy_applies_to_the_plugin",
        site_policy_applies_to_the_plugin,
    ),
    (
        "squashfs_mount_in_a_task_says_it_is_already_inside_a_session",
        squashfs_mount_inside_a_task,
    ),
    ("srun_task_reads_the_image", srun_task_reads_the_image),
    (
        "srun_n2_tasks_share_one_namespace_that_is_not_the_hosts",
        srun_n2_tasks_share_one_namespace,
    ),
    (
        "task_runs_as_the_user_without_privileges_on_a_read_only_loop_mount",
        task_process_state,
    ),
    (
        "srun_without_squashfs_changes_nothing",
        srun_without_squashfs_changes_nothing,
    ),
    (
        "slurm_squashfs_variable_with_two_images",
        slurm_squashfs_variable_with_two_images,
    ),
    (
        "nested_mount_points_are_mounted_parent_first",
        nested_mount_points_parent_first,
    ),
    (
        "image_readable_through_a_supplementary_group",
        image_readable_through_a_supplementary_group,
    ),
    (
        "sbatch_squashfs_seen_by_the_batch_step_and_its_steps_inner_srun_replaces_it",
        sbatch_one_node,
    ),
    (
        "salloc_squashfs_seen_by_a_step",
        salloc_squashfs_seen_by_a_step,
    ),
    ("srun_refuses_unreadable_image", |t| {
        srun_refuses(
            t,
            &format!("{}:{UE}", t.img("secret.sqfs")),
            "(Permission denied)",
        )
    }),
    ("srun_refuses_disallowed_mount_point", |t| {
        srun_refuses(
            t,
            &format!("{}:/tmp", t.img("a.sqfs")),
            "refusing to mount on /tmp",
        )
    }),
    ("srun_refuses_random_bytes", |t| {
        srun_refuses(
            t,
            &format!("{}:{UE}", t.img("random.sqfs")),
            "not a SquashFS image",
        )
    }),
    ("srun_refuses_relative_image_path", |t| {
        srun_refuses(t, "a.sqfs:/user-environment", "must be absolute")
    }),
    ("srun_refuses_bad_syntax", |t| {
        srun_refuses(t, "nonsense", "not of the form <image>:<mountpoint>")
    }),
    (
        "step_fails_mount_point_resolving_outside_through_dotdot",
        |t| {
            step_fails(
                t,
                &format!("{}:{UE}/../tmp", t.img("a.sqfs")),
                "refusing to mount on /tmp",
            )
        },
    ),
    (
        "step_fails_mount_point_resolving_outside_through_a_symlink_in_an_image",
        |t| {
            step_fails(
                t,
                &format!("{}:{UE},{}:{UE}/escape", t.img("c.sqfs"), t.img("a.sqfs")),
                "refusing to mount on /tmp",
            )
        },
    ),
    ("step_fails_truncated_image", step_fails_truncated_image),
    (
        "batch_step_refuses_an_image_made_unreadable_before_it_starts",
        batch_step_refuses_image_unreadable_at_start,
    ),
    (
        "panic_abort_build_of_the_plugin_refuses_to_initialise",
        panic_abort_build_refuses,
    ),
    (
        "srun_n3_every_node_sees_the_image",
        srun_n3_every_node_sees_the_image,
    ),
    (
        "sbatch_n2_steps_see_the_image_on_both_nodes_inner_srun_replaces_it",
        sbatch_two_nodes,
    ),
    (
        "image_corrupt_on_one_node_fails_only_that_nodes_tasks",
        image_corrupt_on_one_node,
    ),
    (
        "a_second_step_reuses_the_cached_instance_one_loop_device_per_node",
        second_step_reuses_the_cache,
    ),
    (
        "unions_and_a_writable_layer_through_the_plugin",
        unions_and_writable,
    ),
    ("the_shared_refusal_table", shared_refusal_table),
    (
        "a_session_flows_into_srun_on_every_node",
        session_flows_into_srun,
    ),
    (
        "sbatch_from_a_session_inner_srun_replaces_it",
        session_flows_into_sbatch,
    ),
    (
        "a_stale_session_list_fails_at_submission_naming_it",
        stale_session_list,
    ),
    (
        "an_empty_squashfs_option_opts_out_of_the_session",
        session_opt_out,
    ),
    (
        "squashfs_bind_shows_a_directory_on_an_allowed_place_only",
        binds_through_the_plugin,
    ),
    (
        "squashfs_mutable_root_only_where_the_site_allows_it_and_only_in_the_job",
        mutable_root_through_the_plugin,
    ),
    (
        "the_worker_threads_capabilities_leave_slurmstepds_alone",
        tasks_keep_slurmstepds_bounding_set,
    ),
    (
        "a_kept_writable_layer_step_1_installs_step_2_sees_it",
        kept_layer_across_steps,
    ),
    (
        "a_tampered_layer_helpers_namespaces_are_refused_before_tasks_join",
        tampered_layer_helper,
    ),
    (
        "a_kept_layer_changes_what_the_image_lets_the_user_change_whoever_owns_it",
        kept_layer_other_owners,
    ),
];

/// Extra plugin arguments in plugstack.conf (read by srun and by each
/// step's slurmstepd), until dropped.
struct PlugstackArgs {
    path: PathBuf,
    before: String,
}

impl PlugstackArgs {
    fn add(t: &T, extra: &str) -> PlugstackArgs {
        let path = t.c.dir.join("plugstack.conf");
        let before = fs::read_to_string(&path).expect("plugstack.conf");
        fs::write(&path, format!("{} {extra}\n", before.trim_end())).expect("plugstack.conf");
        PlugstackArgs { path, before }
    }
}

impl Drop for PlugstackArgs {
    fn drop(&mut self) {
        let _ = fs::write(&self.path, &self.before);
    }
}

/// `--squashfs-bind`: the user's directory shown on an allowed mount
/// point of every task, with the images; anywhere else refused at
/// submission; UENV_MOUNT_LIST lists the images only.
fn binds_through_the_plugin(t: &T) {
    let src = t.c.dir.join("bindsrc");
    fs::create_dir_all(&src).expect("mkdir");
    fs::write(src.join("file"), "bound\n").expect("write");
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).expect("chmod");
    let bind = format!("--squashfs-bind={}:{UT}", src.display());
    let r = t.user(
        &[],
        &[
            "srun",
            "-N2",
            &t.opt("a.sqfs", UE),
            &bind,
            "sh",
            "-c",
            "echo \"$(cat /user-environment/file) $(cat /user-tools/file) $UENV_MOUNT_LIST\"",
        ],
    );
    let line = format!("hello from A bound {}:{UE}", t.img("a.sqfs"));
    assert!(r.success(), "{r:?}");
    assert_eq!(sorted_lines(&r.stdout()), [line.clone(), line], "{r:?}");
    // The variable works as the option.
    let var = format!("{}:{UT}", src.display());
    let r = t.user(
        &[("SLURM_SQUASHFS_BIND", &var)],
        &["srun", "-N1", "cat", "/user-tools/file"],
    );
    assert!(r.success() && r.stdout() == "bound\n", "{r:?}");
    let r = t.user(
        &[],
        &[
            "srun",
            &format!("--squashfs-bind={}:/tmp", src.display()),
            "echo",
            "RAN",
        ],
    );
    assert!(!r.success() && !r.stdout().contains("RAN"), "{r:?}");
    assert!(r.stderr().contains("refusing to mount on /tmp"), "{r:?}");
}

/// `--squashfs-mutable-root`: refused at submission unless plugstack.conf
/// says mutable-root=yes; then a missing mount point below an allowed one
/// and a new top-level one (the copy of / becomes the job's root) exist
/// in the job's view only.
fn mutable_root_through_the_plugin(t: &T) {
    let new = format!("{UE}/sqfsmnt-new");
    let r = t.user(
        &[],
        &[
            "srun",
            "-N1",
            "--squashfs-mutable-root",
            &t.opt("a.sqfs", &new),
            "echo",
            "RAN",
        ],
    );
    assert!(!r.success() && !r.stdout().contains("RAN"), "{r:?}");
    assert!(
        r.stderr()
            .contains("--squashfs-mutable-root is not allowed")
            && r.stderr().contains("mutable-root=yes in plugstack.conf"),
        "{r:?}"
    );
    // Without it, a missing mount point fails on the node in uenv's words.
    step_fails(
        t,
        &format!("{}:{new}", t.img("a.sqfs")),
        &format!("the mount path {new} does not exist"),
    );
    let top = format!("/sqfsmnt-{}-slurm", std::process::id());
    let _args = PlugstackArgs::add(t, &format!("mutable-root=yes mountpoints={UE},{UT},{top}"));
    let r = t.user(
        &[],
        &[
            "srun",
            "-N2",
            "--squashfs-mutable-root",
            &format!("--squashfs={}:{new},{}:{top}", t.img("a.sqfs"), t.img("b.sqfs")),
            "sh",
            "-c",
            &format!("echo \"$(cat {new}/file) $(cat {top}/file) $(touch /x 2>/dev/null || echo ro) $(cat /proc/self/comm)\""),
        ],
    );
    assert!(r.success(), "{r:?}");
    let line = "hello from A hello from B ro cat".to_string();
    assert_eq!(sorted_lines(&r.stdout()), [line.clone(), line], "{r:?}");
    assert!(!Path::new(&top).exists() && !Path::new(&new).exists());
    let r = t.user(
        &[("SLURM_SQUASHFS_MUTABLE_ROOT", "1")],
        &[
            "srun",
            "-N1",
            &t.opt("b.sqfs", &top),
            "cat",
            &format!("{top}/file"),
        ],
    );
    assert!(r.success() && r.stdout() == "hello from B\n", "{r:?}");
    for n in &t.c.nodes {
        assert!(n.mounts_under(Path::new(&top)).is_empty());
    }
}

/// The squashfs-mount command installed setuid root on the login node.
fn setuid_cli(t: &T) -> String {
    let bin = t.c.dir.join("bin/squashfs-mount");
    if !bin.exists() {
        fs::create_dir_all(bin.parent().unwrap()).expect("mkdir");
        fs::copy(&t.cli, &bin).expect("copy squashfs-mount");
        std::os::unix::fs::chown(&bin, Some(0), Some(0)).expect("chown");
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o4755)).expect("chmod");
        sqfsmnt_test_support::install::install_fuse_server(&t.cli, &t.c.dir);
    }
    bin.display().to_string()
}

/// Runs `args` as the user inside `squashfs-mount <image>:/user-environment`.
fn in_session(t: &T, image: &str, args: &[&str]) -> Run {
    let cli = setuid_cli(t);
    let pair = format!("{}:{UE}", t.img(image));
    let mut argv = vec![cli.as_str(), pair.as_str(), "--"];
    argv.extend_from_slice(args);
    t.user(&[], &argv)
}

/// A user works in a session and runs `srun`: the tasks on every node see
/// the session's images, without naming them again.
fn session_flows_into_srun(t: &T) {
    let r = in_session(
        t,
        "a.sqfs",
        &["srun", "-N3", "cat", "/user-environment/file"],
    );
    assert!(
        r.success() && r.stdout() == "hello from A\n".repeat(3),
        "{r:?}"
    );
}

/// `sbatch` from a session: its steps see the images; an inner `srun
/// --squashfs=` replaces them for that step.
fn session_flows_into_sbatch(t: &T) {
    let script = t.c.dir.join("jobs/session.sh");
    let out = t.c.dir.join("jobs/session.out");
    fs::write(
        &script,
        format!("#!/bin/sh\nsrun -N2 cat /user-environment/file\nsrun -N1 --squashfs={}:{UE} cat /user-environment/file\n", t.img("b.sqfs")),
    )
    .expect("script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    let _ = fs::remove_file(&out);
    let r = in_session(
        t,
        "a.sqfs",
        &[
            "sbatch",
            "--wait",
            "-N2",
            "-o",
            &out.display().to_string(),
            &script.display().to_string(),
        ],
    );
    assert!(r.success(), "{r:?}");
    let text = job_output(&out);
    assert_eq!(text, "hello from A\nhello from A\nhello from B\n", "{r:?}");
}

/// A `UENV_MOUNT_LIST` naming an image that is gone: refused before the
/// job is queued, with a message that names the variable.
fn stale_session_list(t: &T) {
    let gone = format!("{}:{UE}", t.c.dir.join("images/deleted.sqfs").display());
    let r = t.user(
        &[("UENV_MOUNT_LIST", gone.as_str())],
        &["srun", "-N1", "echo", "RAN"],
    );
    assert!(!r.success() && !r.stdout().contains("RAN"), "{r:?}");
    assert!(
        r.stderr().contains("deleted.sqfs")
            && r.stderr().contains("No such file or directory")
            && r.stderr().contains("UENV_MOUNT_LIST"),
        "{r:?}"
    );
}

/// What the user sees in `dir` on the host (the login node), as `ls -A`
/// lists it: a task without an image there sees the same (a real site's
/// /user-environment need not be empty).
fn host_listing(t: &T, dir: &str) -> String {
    let r = t.user(&[], &["ls", "-A", dir]);
    assert!(r.success(), "ls -A {dir} on the host: {r:?}");
    r.stdout()
}

/// `--squashfs=` (empty) runs the step without the session's images.
fn session_opt_out(t: &T) {
    let r = in_session(
        t,
        "a.sqfs",
        &[
            "srun",
            "-N1",
            "--squashfs=",
            "sh",
            "-c",
            "ls -A /user-environment; echo END; echo ${UENV_MOUNT_LIST:-none}",
        ],
    );
    let want = format!("{}END\n", host_listing(t, UE));
    assert!(
        r.success() && r.stdout().starts_with(&want),
        "want {want:?}: {r:?}"
    );
}

/// Loop devices backed by `image` (on any node: they are the kernel's).
fn loops_of(image: &str) -> usize {
    sqfsmnt_test_support::count::loops_under(Path::new(image)).len()
}

/// The image cache on each node: the first step mounts one instance per
/// node, the second attaches the kept ones (one loop device per node, not
/// more); with `cache=no` in plugstack.conf nothing would stay.
fn second_step_reuses_the_cache(t: &T) {
    let img = t.img("a.sqfs");
    for round in 0..2 {
        let r = t.user(
            &[],
            &[
                "srun",
                "-N3",
                &t.opt("a.sqfs", UE),
                "cat",
                "/user-environment/file",
            ],
        );
        assert!(
            r.success() && r.stdout() == "hello from A\nhello from A\nhello from A\n",
            "round {round}: {r:?}"
        );
        assert_eq!(
            loops_of(&img),
            3,
            "round {round}: one cached instance per node"
        );
    }
}

/// `--squashfs-union` and `--squashfs-writable`, with the command's grammar.
fn unions_and_writable(t: &T) {
    // A world-writable directory in the top image, to write into.
    let w = t.img("w.sqfs");
    image::build(
        &t.c.dir.join("src/w"),
        Path::new(&w),
        &[("w.txt", "top\n")],
        "mkdir scratch && chmod 1777 scratch",
        &["-all-root"],
    );
    let union = format!("--squashfs-union={w},{}:{UE}", t.img("a.sqfs"));
    let script = "cat /user-environment/file /user-environment/w.txt && echo new > /user-environment/scratch/new && cat /user-environment/scratch/new";
    let r = t.user(
        &[],
        &[
            "srun",
            "-N2",
            &union,
            "--squashfs-writable=64M",
            "sh",
            "-c",
            script,
        ],
    );
    let mut lines: Vec<String> = r.stdout().lines().map(String::from).collect();
    lines.sort();
    assert!(
        r.success() && lines == ["hello from A", "hello from A", "new", "new", "top", "top"],
        "{r:?}"
    );
    // Without --squashfs-writable the union is read-only.
    let r = t.user(
        &[],
        &[
            "srun",
            "-N1",
            &union,
            "sh",
            "-c",
            "echo new > /user-environment/scratch/new",
        ],
    );
    assert!(
        !r.success() && r.stderr().contains("Read-only file system"),
        "{r:?}"
    );
    // The writable layer was the task's own: the image is unchanged.
    let r = t.user(
        &[],
        &[
            "srun",
            "-N1",
            &format!("--squashfs={w}:{UE}"),
            "ls",
            "/user-environment/scratch",
        ],
    );
    assert!(r.success() && r.stdout().is_empty(), "{r:?}");
}

/// `--squashfs-writable=DIR`: in a batch job, step 1 pip-installs a wheel
/// into the image's venv (a layer kept in DIR, mounted by the job user),
/// step 2 (two tasks, one user namespace) imports it; the files in DIR are
/// the user's; a step holding DIR makes another step on it fail with the
/// reason; the image is unchanged.
fn kept_layer_across_steps(t: &T) {
    use sqfsmnt_test_support::python::{self, DEMO_MODULE, DEMO_VALUE};
    if !python::available() {
        eprintln!("*** SKIPPED kept layer test: /usr/bin/python3 cannot make venvs ***");
        return;
    }
    let venv = t.img("venv.sqfs");
    python::venv_image(
        &t.c.dir.join("src/venv"),
        Path::new(&venv),
        t.c.user.uid,
        t.c.user.gid,
    );
    let jobs = t.c.dir.join("jobs");
    let wheel = python::demo_wheel(&jobs);
    let dir = jobs.join("layer");
    let _ = fs::remove_dir_all(&dir);
    let opts = format!(
        "--squashfs={venv}:{UE} --squashfs-writable={}",
        dir.display()
    );
    let script = format!(
        "#!/bin/sh
#SBATCH -N1 -n2
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
srun -N1 -n1 {opts} {UE}/venv/bin/python -m pip install -q --no-index --no-deps {wheel} && echo step1: installed
srun -N1 -n2 {opts} sh -c '{UE}/venv/bin/python -c \"import {DEMO_MODULE}; print({DEMO_MODULE}.VALUE)\"; readlink /proc/self/ns/user' | sed 's/^/step2: /'
srun -N1 -n1 --squashfs={venv}:{UE} {UE}/venv/bin/python -c 'import {DEMO_MODULE}' 2>&1 | grep -o 'No module named' | sed 's/^/step3: /'
",
        wheel = wheel.display()
    );
    let (job, state, out) = sbatch(t, "kept-layer", &script);
    assert_eq!(state, "COMPLETED", "job {job}: {out}");
    assert!(out.contains("step1: installed\n"), "job {job}: {out}");
    let step2: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("step2: "))
        .collect();
    assert_eq!(
        step2.iter().filter(|l| **l == DEMO_VALUE).count(),
        2,
        "job {job}: {out}"
    );
    let namespaces: Vec<&&str> = step2.iter().filter(|l| l.starts_with("user:[")).collect();
    assert_eq!(namespaces.len(), 2, "job {job}: {out}");
    assert_eq!(
        namespaces[0], namespaces[1],
        "two user namespaces in one step: {out}"
    );
    assert!(out.contains("step3: No module named"), "job {job}: {out}");
    assert_all_the_job_users(t, &dir);
    // A step holding DIR: another step on DIR fails, saying why. The
    // second step starts once the first says it holds DIR (a file in the
    // shared directory), and the first holds it until the second has been
    // tried.
    let (held, tried) = (jobs.join("busy-held"), jobs.join("busy-tried"));
    for f in [&held, &tried] {
        let _ = fs::remove_file(f);
    }
    let (held, tried) = (held.display(), tried.display());
    let script = format!(
        "#!/bin/sh
#SBATCH -N1 -n2
srun -N1 -n1 --overlap {opts} sh -c 'echo holding; touch {held}; while [ ! -e {tried} ]; do sleep 0.1; done' &
first=$!
while [ ! -e {held} ] && kill -0 $first 2>/dev/null; do sleep 0.1; done
srun -N1 -n1 --overlap {opts} echo RAN 2>&1 | sed 's/^/second: /'
touch {tried}
wait
"
    );
    let (job, state, out) = sbatch(t, "kept-layer-busy", &script);
    assert_eq!(state, "COMPLETED", "job {job}: {out}");
    assert!(out.contains("holding"), "job {job}: {out}");
    assert!(!out.contains("second: RAN"), "job {job}: {out}");
    assert!(
        out.contains("is in use by another launch"),
        "job {job}: {out}"
    );
}

/// Issue 27 through the plugin: a kept layer over a root image changes
/// what the image lets the job user change, whoever owns it: root's and
/// another user's world-writable files may be appended to (their copies in
/// DIR are the user's), root's 0644 file stays `Permission denied`, as
/// with `--squashfs-writable=SIZE`; never EOVERFLOW.
fn kept_layer_other_owners(t: &T) {
    use std::os::unix::fs::PermissionsExt as _;
    let src = t.c.dir.join("src/owners");
    let _ = fs::remove_dir_all(&src);
    fs::create_dir_all(src.join("d")).expect("mkdir");
    for (name, mode, owner) in [
        ("open", 0o666, 0),
        ("theirs", 0o666, 65534),
        ("closed", 0o644, 0),
    ] {
        let f = src.join("d").join(name);
        fs::write(&f, format!("{name}\n")).expect("write");
        fs::set_permissions(&f, fs::Permissions::from_mode(mode)).expect("chmod");
        std::os::unix::fs::chown(&f, Some(owner), Some(owner)).expect("chown");
    }
    let img = t.img("owners.sqfs");
    let _ = fs::remove_file(&img);
    run(Command::new("mksquashfs").args([
        src.as_os_str(),
        img.as_ref(),
        "-quiet".as_ref(),
        "-no-progress".as_ref(),
    ]))
    .ok();
    let dir = t.c.dir.join("jobs").join("owners-layer");
    let _ = fs::remove_dir_all(&dir);
    let change = |layer: &str| {
        let r = t.user(
            &[],
            &[
                "srun",
                "-N1",
                "-n1",
                &format!("--squashfs={img}:{UE}"),
                &format!("--squashfs-writable={layer}"),
                "sh",
                "-c",
                &format!(
                    "for f in open theirs closed; do echo more >> {UE}/d/$f && echo $f:changed; done 2>&1; cat {UE}/d/theirs"
                ),
            ],
        );
        format!("{}{}", r.stdout(), r.stderr())
    };
    let kept = change(&dir.display().to_string());
    let tmpfs = change("16M");
    eprintln!("kept layer: {kept}\ntmpfs layer: {tmpfs}");
    for out in [&kept, &tmpfs] {
        assert!(
            out.contains("open:changed") && out.contains("theirs:changed"),
            "{out}"
        );
        assert!(
            !out.contains("closed:changed") && out.contains("Permission denied"),
            "{out}"
        );
        assert!(!out.contains("Value too large"), "{out}");
        assert!(out.contains("theirs\nmore\n"), "{out}");
    }
    assert_all_the_job_users(t, &dir);
}

/// Every file in the kept layer's `dir` is the job user's.
fn assert_all_the_job_users(t: &T, dir: &Path) {
    let foreign =
        run(Command::new("find")
            .arg(dir)
            .args(["!", "-user", &t.c.user.uid.to_string()]));
    assert!(foreign.0.stdout.is_empty(), "{foreign:?}");
}

/// The kept-layer helper in place of the real one while alive.
struct SwappedHelper {
    at: PathBuf,
    real: PathBuf,
}

impl Drop for SwappedHelper {
    fn drop(&mut self) {
        let _ = fs::rename(&self.real, &self.at);
    }
}

/// Issue 26, finding 8: the helper runs as the job user, who may make it
/// report any descriptor they hold. One that reports the host's user
/// namespace (root's), the step's mount namespace and a program file is
/// refused by root before any task joins them, with one line saying what
/// is wrong.
fn tampered_layer_helper(t: &T) {
    // <target>/<profile>/deps/<test exe>
    let exe = std::env::current_exe().expect("current_exe");
    let target = exe.ancestors().nth(3).expect("target dir").to_path_buf();
    run_for(
        Command::new(env!("CARGO"))
            // The whole workspace, as `make test` built it before the
            // tests: up to date there (one package alone would unify
            // other features and be built again).
            .args(["build", "--locked", "--release", "--workspace"])
            .arg("--target-dir")
            .arg(&target)
            .current_dir(workspace()),
        BUILD_LIMIT,
    )
    .ok_as("cargo build --release --workspace (sqfsmnt-tampered-layer)");
    let at = t.c.dir.join(sqfsmnt_test_support::install::LAYER_HELPER);
    let real = t.c.dir.join("real-layer-helper");
    fs::rename(&at, &real).expect("move the real helper aside");
    let _swap = SwappedHelper {
        at: at.clone(),
        real,
    };
    let fake = target.join("release/sqfsmnt-tampered-layer");
    sqfsmnt_test_support::install::copy_as_root(&fake, &at, 0o755);
    let dir = t.c.dir.join("jobs/tampered-layer");
    let r = t.user(
        &[],
        &[
            "srun",
            "-N1",
            "-n1",
            &format!("--squashfs={}:{UE}", t.img("a.sqfs")),
            &format!("--squashfs-writable={}", dir.display()),
            "echo",
            "RAN",
        ],
    );
    assert!(!r.success() && !r.stdout().contains("RAN"), "{r:?}");
    assert!(
        r.stderr()
            .contains("the helper handed over a user namespace owned by uid 0, not by you"),
        "{r:?}"
    );
}

/// The table the setuid command passes too (crates/squashfs-mount/tests/refusals.rs).
fn shared_refusal_table(t: &T) {
    use sqfsmnt_test_support::refusals::{self, TABLE};
    let dir = t.c.dir.join("refusals");
    let _busy = refusals::make_images(&dir, &t.c.user, Path::new(UE));
    // Every refusal is the sequence's: the layer helper never runs.
    let helper = t.c.dir.join(sqfsmnt_test_support::install::LAYER_HELPER);
    let _helper = refusals::HelperMustNotRun::at(&helper);
    for r in TABLE {
        let _site = r.site.map(sqfsmnt_test_support::site::config);
        let mut args: Vec<String> = vec!["srun".into(), "-N1".into()];
        if r.mutable_root {
            args.push("--squashfs-mutable-root".into());
        }
        if let Some(w) = r.writable {
            args.push(format!(
                "--squashfs-writable={}",
                refusals::writable(&dir, w)
            ));
        }
        if !r.pairs.is_empty() {
            let pairs = refusals::pairs(r, &dir, Path::new(UE));
            args.push(format!("--squashfs={}", pairs.join(",")));
        }
        if !r.union.is_empty() {
            let list = refusals::union(r, &dir);
            args.push(format!("--squashfs-union={list}:{UE}"));
        }
        if !r.binds.is_empty() {
            let binds = refusals::binds(r, &dir, Path::new(UE));
            args.push(format!("--squashfs-bind={}", binds.join(",")));
        }
        args.extend(["echo".into(), "RAN".into()]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = t.user(&[], &argv);
        assert!(
            !run.success() && !run.stdout().contains("RAN"),
            "{}: {run:?}",
            r.name
        );
        for want in r.expect {
            assert!(
                run.stderr().contains("squashfs-mount: ") && run.stderr().contains(want),
                "{}: want {want:?}: {run:?}",
                r.name
            );
        }
        refusals::assert_no_lock_left(&dir, r);
    }
}

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1); // one cluster, one test at a time
                                 // --ignored would "run" the placeholders below.
    args.ignored = false;
    args.include_ignored = false;
    let selected = TESTS.iter().any(|(name, _)| {
        args.filter.as_ref().is_none_or(|f| {
            if args.exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        }) && !args.skip.iter().any(|s| {
            if args.exact {
                name == s
            } else {
                name.contains(s.as_str())
            }
        })
    });
    let placeholder = |ignore: bool| -> Vec<Trial> {
        TESTS
            .iter()
            .map(|(name, _)| Trial::test(*name, || Ok(())).with_ignored_flag(ignore))
            .collect()
    };
    if args.list || !selected {
        libtest_mimic::run(&args, placeholder(true)).exit();
    }
    let Some(t) = setup() else {
        libtest_mimic::run(&args, placeholder(true)).exit();
    };
    let t = Arc::new(t);
    let trials = TESTS
        .iter()
        .map(|&(name, f)| {
            let t = t.clone();
            Trial::test(name, move || run_one(&t, f))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    drop(t); // the last reference: tears the cluster down
    conclusion.exit();
}

/// Runs one test, then cancels what it left running and checks that no
/// loop device or mount is left on the host or any node.
fn run_one(t: &T, f: Test) -> Result<(), Failed> {
    let outcome = catch_unwind(AssertUnwindSafe(|| f(t)));
    t.c.quiesce();
    // The plugin keeps image instances cached on each node (by design):
    // evict them before looking for leftovers.
    for n in &t.c.nodes {
        let _ = try_run(n.command(&t.cli).args(["--gc", "--all"]));
    }
    // And on the login node (the sessions' launches).
    let _ = try_run(Command::new(&t.cli).args(["--gc", "--all"]));
    let left = t.c.leftovers(&[Path::new(UE), Path::new(UT)]);
    match outcome {
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("{msg}\nleft behind: {left:?}\n{}", t.c.logs()).into())
        }
        Ok(()) if !left.is_empty() => Err(format!("left behind after the test: {left:?}").into()),
        Ok(()) => Ok(()),
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The squashfs-mount command, built into the target directory this test
/// was built in.
fn build_cli() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    run_for(
        Command::new(env!("CARGO"))
            // The whole workspace, as `make test` built it before the
            // tests (see tampered_layer_helper).
            .args([
                "build",
                "--locked",
                "--release",
                "--workspace",
                "--target-dir",
            ])
            .arg(&target)
            .current_dir(workspace()),
        BUILD_LIMIT,
    )
    .ok_as("cargo build --release --workspace");
    target.join("release/squashfs-mount")
}

/// Builds the plugin with cargo profile `profile` into the target directory
/// this test was built in, and checks the build marker for `panic`.
fn build_plugin(profile: &str, panic: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // <target>/<profile>/deps/<test exe>
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    let mut build = Command::new(env!("CARGO"));
    // As `make test` built it before the tests: the plugin alone in its
    // spank profile, the whole workspace in release (see
    // tampered_layer_helper).
    build
        .args(["build", "--locked", "--profile", profile])
        .args(if profile == "spank" {
            ["-p", "spank-squashfs-mount"].as_slice()
        } else {
            ["--workspace"].as_slice()
        })
        .arg("--target-dir")
        .arg(&target)
        .current_dir(workspace());
    run_for(&mut build, BUILD_LIMIT)
        .ok_as(&format!("cargo build --profile {profile} (the plugin)"));
    let so = target.join(profile).join("libspank_squashfs_mount.so");
    let bytes = fs::read(&so).expect("plugin .so");
    let marker = format!("squashfs-mount-spank panic={panic}");
    assert!(
        bytes.windows(marker.len()).any(|w| w == marker.as_bytes()),
        "{} is not a panic={panic} build",
        so.display()
    );
    so
}

/// The cluster and the images; `None` (after a loud skip) when it cannot
/// run here.
fn setup() -> Option<T> {
    let mut tools = TOOLS.to_vec();
    tools.push("mksquashfs");
    if sqfsmnt_test_support::is_root() && !tools.iter().all(|c| have(c)) {
        eprintln!("slurm test: installing Slurm (scripts/deps test)");
        let _ = run_for(
            Command::new(workspace().join("scripts/deps")).arg("test"),
            BUILD_LIMIT,
        );
    }
    if !sqfsmnt_test_support::privileged("Slurm plugin tests (crates/spank/tests/slurm.rs)", &tools)
    {
        return None;
    }
    let plugin = build_plugin("spank", "unwind");
    let cli = build_cli();
    let abort_plugin = build_plugin("release", "abort");
    let c = Cluster::start(&Options {
        nodes: NODES,
        plugin,
        fuse_server: Some(cli.with_file_name(sqfsmnt_test_support::install::FUSE_SERVER)),
        plugin_args: String::new(),
        mount_points: vec![PathBuf::from(UE), PathBuf::from(UT)],
    });
    let images = c.dir.join("images");
    let img = |n: &str| images.join(n);
    let src = c.dir.join("src");
    for (name, content) in [("a", "hello from A"), ("b", "hello from B")] {
        image::build(
            &src.join(name),
            &img(&format!("{name}.sqfs")),
            &[("file", &format!("{content}\n"))],
            "",
            &["-all-root"],
        );
    }
    // An image whose symlink leads out of the allowed mount points.
    image::build(
        &src.join("c"),
        &img("c.sqfs"),
        &[("sub/.keep", "")],
        "ln -s /tmp escape",
        &["-all-root"],
    );
    // Readable only by root.
    fs::copy(img("a.sqfs"), img("secret.sqfs")).expect("copy");
    fs::set_permissions(img("secret.sqfs"), fs::Permissions::from_mode(0o600)).expect("chmod");
    // Readable through the user's supplementary group only.
    fs::copy(img("b.sqfs"), img("group.sqfs")).expect("copy");
    std::os::unix::fs::chown(img("group.sqfs"), Some(0), Some(c.gid2)).expect("chown");
    fs::set_permissions(img("group.sqfs"), fs::Permissions::from_mode(0o640)).expect("chmod");
    // Random bytes: refused by the superblock check.
    let mut noise = vec![0u8; 8192];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut noise))
        .expect("urandom");
    fs::write(img("random.sqfs"), &noise).expect("write");
    fs::set_permissions(img("random.sqfs"), fs::Permissions::from_mode(0o644)).expect("chmod");
    let host_mnt_ns = fs::read_link("/proc/self/ns/mnt").expect("mnt ns");
    Some(T {
        cli,
        c,
        abort_plugin,
        host_mnt_ns,
        _fuse: sqfsmnt_test_support::site::FuseDevice::open_to_all(),
    })
}

// ---------------------------------------------------------------------------
// One node at a time
// ---------------------------------------------------------------------------

/// The job user's FUSE servers all end once the job is over (the job's
/// epilog evicts their instances): each one's end is waited for on its
/// pidfd; only a server that never ends reaches the hang limit.
fn no_server_outlives_the_job(t: &T) {
    let left = ends::wait_ended(&fuse_servers_of(t.c.user.uid), ends::HANG);
    assert!(left.is_empty(), "FUSE servers outlived the job: {left:?}");
}

fn users_own_image_through_fuse(t: &T) {
    let out = t.srun_own(
        "own-a.sqfs",
        "-N3",
        "echo $(stat -f -c %T /user-environment) $(cat /user-environment/file)",
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["fuseblk hello from A"; 3],
        "{out}"
    );
    // "squashfs-mount-fuse" as the kernel names it (15 characters).
    no_server_outlives_the_job(t);
}

/// Issue 19, finding 3: a task stops its FUSE server (SIGSTOP, which it
/// may: the server runs as the user); once the job is over no server of
/// the user is left (the instance is cached for the job's next steps; the
/// plugin's job epilog evicts the user's unused instances, and their
/// servers, stopped or not, end with them).
fn stopped_server_does_not_outlive_the_job(t: &T) {
    let out = t.srun_own(
        "own-stop.sqfs",
        "-N1",
        "cat /user-environment/file; p=$(pgrep -r R,S,D -u $(id -u) -x squashfs-mount-); kill -STOP $p && echo stopped $p",
    );
    assert!(out.contains("hello from A\nstopped "), "{out}");
    let left = ends::wait_ended(&fuse_servers_of(t.c.user.uid), ends::HANG);
    if !left.is_empty() {
        for pid in &left {
            let _ = try_run(Command::new("kill").args(["-KILL", &pid.to_string()]));
        }
        panic!("a stopped FUSE server outlived its job: {left:?}");
    }
}

/// Issue 21: the tasks of a step (2 per node on 3 nodes) share one cached
/// FUSE instance per node, the job's next step reuses it (the same
/// servers), and after the job none is left.
fn fuse_instance_shared_by_tasks_and_steps(t: &T) {
    let own = t.own_image("own-steps.sqfs");
    let step = format!(
        "srun -N3 -n6 --squashfs={}:{UE} sh -c 'cat {UE}/file' | sort | uniq -c",
        own.display()
    );
    // Zombies left out: an earlier test's server that ended may wait
    // seconds for PID 1 of this machine to reap it (and uids are reused).
    let servers = "pgrep -r R,S,D,T -u $(id -u) -x squashfs-mount- | sort -n | tr '\\n' ' '";
    let script = format!(
        "#!/bin/sh\n#SBATCH -N3 --ntasks-per-node=2\n{step}\necho \"after1: $({servers})\"\n{step}\necho \"after2: $({servers})\"\n"
    );
    let (job, state, out) = sbatch(t, "fuse-steps", &script);
    let _ = fs::remove_file(&own);
    assert_eq!(state, "COMPLETED", "job {job}: {out}");
    assert_eq!(out.matches("6 hello from A").count(), 2, "job {job}: {out}");
    let pids = |after: &str| -> Vec<String> {
        out.lines()
            .find_map(|l| l.strip_prefix(after))
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let (first, second) = (pids("after1:"), pids("after2:"));
    assert_eq!(first.len(), NODES, "one server per node: {out}");
    assert_eq!(second, first, "the second step reused the servers: {out}");
    no_server_outlives_the_job(t);
}

/// A task of a step with --squashfs (no_new_privs) runs squashfs-mount to
/// add an image: told it is inside a session and to name all images in one
/// call, not that the tool is not installed setuid.
fn squashfs_mount_inside_a_task(t: &T) {
    let cli = setuid_cli(t);
    let pair = format!("{}:{UT}", t.img("b.sqfs"));
    let r = t.user(
        &[],
        &[
            "srun",
            "-N1",
            &t.opt("a.sqfs", UE),
            &cli,
            &pair,
            "--",
            "true",
        ],
    );
    assert!(!r.success(), "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains("already inside a squashfs-mount session")
            && err.contains("name all images in one call")
            && !err.contains("not installed setuid"),
        "{r:?}"
    );
}

fn site_policy_applies_to_the_plugin(t: &T) {
    let step = |opt: &str| {
        t.user(
            &[],
            &[
                "srun",
                "-N1",
                opt,
                "sh",
                "-c",
                "echo $(stat -f -c %T /user-environment) $(cat /user-environment/file)",
            ],
        )
    };
    {
        // Root's image: the kernel by default, FUSE with kernel-images = none.
        let r = step(&t.opt("a.sqfs", UE));
        assert_eq!(r.stdout(), "squashfs hello from A\n", "{r:?}");
        let _conf = sqfsmnt_test_support::site::config("kernel-images = none\n");
        let r = step(&t.opt("a.sqfs", UE));
        assert_eq!(r.stdout(), "fuseblk hello from A\n", "{r:?}");
    }
    let _conf = sqfsmnt_test_support::site::config("allow-union = no\n");
    let r = step(&format!(
        "--squashfs-union={},{}:{UE}",
        t.img("b.sqfs"),
        t.img("a.sqfs")
    ));
    assert!(!r.success(), "{r:?}");
    assert!(
        r.stderr().contains("allow-union") && r.stderr().contains("/etc/squashfs-mount.conf"),
        "{r:?}"
    );
}

fn srun_task_reads_the_image(t: &T) {
    let r = t.user(
        &[],
        &[
            "srun",
            &t.opt("a.sqfs", UE),
            "cat",
            "/user-environment/file",
        ],
    );
    assert!(r.success() && r.stdout() == "hello from A\n", "{r:?}");
}

fn srun_n2_tasks_share_one_namespace(t: &T) {
    let r = t.user(
        &[],
        &[
            "srun",
            "-N1",
            "-n2",
            &t.opt("a.sqfs", UE),
            "sh",
            "-c",
            "cat /user-environment/file; readlink /proc/self/ns/mnt",
        ],
    );
    let out = r.stdout();
    let lines: Vec<&str> = out.lines().collect();
    let ns: Vec<&&str> = lines.iter().filter(|l| l.starts_with("mnt:")).collect();
    assert!(r.success(), "{r:?}");
    assert_eq!(
        lines.iter().filter(|l| **l == "hello from A").count(),
        2,
        "{r:?}"
    );
    assert_eq!(ns.len(), 2, "{r:?}");
    assert_eq!(
        ns[0], ns[1],
        "the tasks of a step on a node share one namespace: {r:?}"
    );
    assert_ne!(OsStr::new(ns[0]), t.host_mnt_ns.as_os_str(), "{r:?}");
}

fn task_process_state(t: &T) {
    let r = t.user(
        &[],
        &[
            "srun",
            &t.opt("a.sqfs", UE),
            "sh",
            "-c",
            "id -u; grep -E '^(NoNewPrivs|CapEff|CapPrm|CapAmb)' /proc/self/status; echo \"UENV=$UENV_MOUNT_LIST\"; \
             grep ' /user-environment ' /proc/self/mountinfo; pwd; cat /sys/block/loop*/loop/backing_file 2>/dev/null; \
             if umount /user-environment 2>/dev/null; then echo UMOUNTED; else echo UMOUNT-REFUSED; fi",
        ],
    );
    let out = r.stdout();
    let mountinfo = out
        .lines()
        .find(|l| l.contains(" /user-environment "))
        .unwrap_or("");
    assert!(r.success(), "{r:?}");
    assert_eq!(
        out.lines().next(),
        Some(t.c.user.uid.to_string().as_str()),
        "the user's uid: {r:?}"
    );
    for want in [
        "NoNewPrivs:\t1",
        "CapEff:\t0000000000000000",
        "CapPrm:\t0000000000000000",
        "CapAmb:\t0000000000000000",
        "UMOUNT-REFUSED",
    ] {
        assert!(out.contains(want), "{want}: {r:?}");
    }
    assert!(
        out.contains(&format!("UENV={}:/user-environment\n", t.img("a.sqfs"))),
        "{r:?}"
    );
    assert!(mountinfo.contains(" ro,nosuid,nodev"), "{mountinfo}");
    assert!(mountinfo.contains(" - squashfs /dev/loop"), "{mountinfo}");
    assert!(
        out.contains(&format!("{}\n", t.c.dir.display())),
        "the working directory is kept: {r:?}"
    );
    // (also shows that the leak check recognises our loop devices)
    assert!(
        out.lines().any(|l| l == t.img("a.sqfs")),
        "a loop device backed by the image: {r:?}"
    );
}

/// The worker thread gives up what its root phase does not need for
/// itself alone: the tasks, forked by slurmstepd's main thread, have the
/// bounding set they have without --squashfs (slurmstepd's), which holds
/// more than the worker's root phase keeps.
fn tasks_keep_slurmstepds_bounding_set(t: &T) {
    let bounding = |with: &[&str]| {
        let mut args = vec!["srun"];
        args.extend(with);
        args.extend(["grep", "^CapBnd", "/proc/self/status"]);
        let r = t.user(&[], &args);
        assert!(r.success(), "{r:?}");
        let v = r
            .stdout()
            .trim()
            .trim_start_matches("CapBnd:")
            .trim()
            .to_string();
        u64::from_str_radix(&v, 16).unwrap_or_else(|_| panic!("{r:?}"))
    };
    let opt = t.opt("a.sqfs", UE);
    let with = bounding(&[&opt]);
    let without = bounding(&[]);
    assert_eq!(
        with, without,
        "CapBnd {with:#x} with --squashfs, {without:#x} without"
    );
    // CAP_NET_ADMIN (12), CAP_SYS_MODULE (16), CAP_MKNOD (27): none is
    // kept by the worker's root phase.
    assert_ne!(with & (1 << 12 | 1 << 16 | 1 << 27), 0, "{with:#x}");
}

fn srun_without_squashfs_changes_nothing(t: &T) {
    let r = t.user(&[], &["srun", "sh", "-c", "grep NoNewPrivs /proc/self/status; echo \"UENV=$UENV_MOUNT_LIST\"; grep -c ' /user-environment ' /proc/self/mountinfo"]);
    let out = r.stdout();
    assert!(
        out.contains("NoNewPrivs:\t0") && out.contains("UENV=\n") && out.trim_end().ends_with('0'),
        "{r:?}"
    );
}

fn slurm_squashfs_variable_with_two_images(t: &T) {
    let spec = format!("{}:{UE},{}:{UT}", t.img("a.sqfs"), t.img("b.sqfs"));
    let r = t.user(
        &[("SLURM_SQUASHFS", &spec)],
        &["srun", "cat", "/user-environment/file", "/user-tools/file"],
    );
    assert!(
        r.success() && r.stdout() == "hello from A\nhello from B\n",
        "{r:?}"
    );
}

fn nested_mount_points_parent_first(t: &T) {
    let spec = format!(
        "--squashfs={}:{UE}/sub,{}:{UE}",
        t.img("a.sqfs"),
        t.img("c.sqfs")
    );
    let r = t.user(
        &[],
        &[
            "srun",
            &spec,
            "sh",
            "-c",
            "cat /user-environment/sub/file; echo $UENV_MOUNT_LIST",
        ],
    );
    assert!(r.success(), "{r:?}");
    assert_eq!(
        r.stdout(),
        format!(
            "hello from A\n{}:{UE},{}:{UE}/sub\n",
            t.img("c.sqfs"),
            t.img("a.sqfs")
        )
    );
}

fn image_readable_through_a_supplementary_group(t: &T) {
    let r = t.user(
        &[],
        &["srun", &t.opt("group.sqfs", UT), "cat", "/user-tools/file"],
    );
    assert!(r.success() && r.stdout() == "hello from B\n", "{r:?}");
}

/// Submits `script` with sbatch as the user; (job id, final state, output).
fn sbatch(t: &T, name: &str, script: &str) -> (String, String, String) {
    let path = t.c.dir.join("jobs").join(format!("{name}.sh"));
    fs::write(&path, script).expect("script");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = t.c.dir.join("jobs").join(format!("{name}.out"));
    let r = t.user(
        &[],
        &[
            "sbatch",
            "--parsable",
            "-o",
            &out.display().to_string(),
            &path.display().to_string(),
        ],
    );
    assert!(r.success(), "sbatch: {r:?}");
    let job = r.stdout().trim().to_string();
    let state = t.c.wait_job(&job);
    (job.clone(), state, job_output(&out))
}

/// A batch job's output file, without the lines srun writes when a step
/// waits for the nodes the job's previous step still holds ("step creation
/// temporarily disabled, retrying", then "Step created"): Slurm's timing,
/// not the job's output.
fn job_output(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            let waited =
                l.starts_with("srun: Job ") && l.contains("step creation temporarily disabled");
            !(waited || l.starts_with("srun: Step created for job"))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn sbatch_one_node(t: &T) {
    let script = format!(
        "#!/bin/sh
#SBATCH --squashfs={a}:/user-environment
echo \"batch: $(cat /user-environment/file)\"
srun cat /user-environment/file | sed 's/^/step1: /'
srun --squashfs={b}:/user-environment cat /user-environment/file | sed 's/^/step2: /'
srun --squashfs={b}:/user-tools sh -c 'cat /user-tools/file; ls -A /user-environment | tr \"\\n\" \" \"; echo' | sed 's/^/step3: /'
",
        a = t.img("a.sqfs"),
        b = t.img("b.sqfs")
    );
    let (job, state, out) = sbatch(t, "one-node", &script);
    assert_eq!(state, "COMPLETED", "job {job}: {out}");
    // Step 3 has no image on /user-environment: the host's directory.
    let host = host_listing(t, UE).replace('\n', " ");
    for want in [
        "batch: hello from A\n".to_string(),
        "step1: hello from A\n".into(),
        "step2: hello from B\n".into(),
        format!("step3: hello from B\nstep3: {host}\n"),
    ] {
        assert!(out.contains(&want), "job {job}: no {want:?} in {out:?}");
    }
}

fn salloc_squashfs_seen_by_a_step(t: &T) {
    let r = t.user(
        &[],
        &[
            "salloc",
            &t.opt("a.sqfs", UE),
            "srun",
            "cat",
            "/user-environment/file",
        ],
    );
    assert!(r.success() && r.stdout() == "hello from A\n", "{r:?}");
}

/// srun refuses `spec` before the job is queued, with squashfs-mount's
/// message `msg`.
fn srun_refuses(t: &T, spec: &str, msg: &str) {
    let r = t.user(&[], &["srun", &format!("--squashfs={spec}"), "echo", "RAN"]);
    assert!(!r.success() && !r.stdout().contains("RAN"), "{r:?}");
    assert!(
        r.stderr().contains("squashfs-mount: ") && r.stderr().contains(msg),
        "want {msg:?}: {r:?}"
    );
}

/// The step fails in slurmstepd: every task exits 1 with the plugin's
/// message `msg`.
fn step_fails(t: &T, spec: &str, msg: &str) {
    let r = t.user(
        &[],
        &[
            "srun",
            "-N1",
            "-n2",
            &format!("--squashfs={spec}"),
            "echo",
            "RAN",
        ],
    );
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(!r.stdout().contains("RAN"), "{r:?}");
    assert!(
        r.stderr().contains("squashfs-mount: ") && r.stderr().contains(msg),
        "want {msg:?}: {r:?}"
    );
}

/// A truncated image: refused by the superblock check in slurmstepd, before
/// the kernel sees it (no corrupt image reaches the kernel's squashfs
/// driver in a test).
fn step_fails_truncated_image(t: &T) {
    image::truncated_copy(
        Path::new(&t.img("a.sqfs")),
        Path::new(&t.img("truncated.sqfs")),
    );
    fs::set_permissions(t.img("truncated.sqfs"), fs::Permissions::from_mode(0o644)).expect("chmod");
    step_fails(t, &format!("{}:{UE}", t.img("truncated.sqfs")), "truncated");
}

/// slurmstepd (root) must open the image as the user, and refuse one the
/// user cannot read any more when the job starts.
fn batch_step_refuses_image_unreadable_at_start(t: &T) {
    fs::copy(t.img("a.sqfs"), t.img("later.sqfs")).expect("copy");
    fs::set_permissions(t.img("later.sqfs"), fs::Permissions::from_mode(0o644)).expect("chmod");
    let out_file = t.c.dir.join("jobs/later.out");
    let r = t.user(
        &[],
        &[
            "sbatch",
            "--parsable",
            "--hold",
            "-o",
            &out_file.display().to_string(),
            &t.opt("later.sqfs", UE),
            "--wrap",
            "cat /user-environment/file; echo RAN",
        ],
    );
    assert!(r.success(), "{r:?}");
    let job = r.stdout().trim().to_string();
    fs::set_permissions(t.img("later.sqfs"), fs::Permissions::from_mode(0o600)).expect("chmod");
    let released = t.c.root(&["scontrol", "release", &job]);
    assert!(released.success(), "{released:?}");
    let state = t.c.wait_job(&job);
    let out = fs::read_to_string(&out_file).unwrap_or_default();
    assert_eq!(state, "FAILED", "job {job}: {out}");
    assert!(
        !out.contains("RAN")
            && out.contains("unable to read squashfs")
            && out.contains("(Permission denied)"),
        "job {job}: {out:?}"
    );
}

/// A panic = "abort" build (cargo build --release) refuses to run rather
/// than risk aborting slurmstepd; srun loads the plugin stack itself, so a
/// second configuration naming that build shows it.
fn panic_abort_build_refuses(t: &T) {
    let d = &t.c.dir;
    let abort_so = d.join("abort.so");
    fs::copy(&t.abort_plugin, &abort_so).expect("copy");
    fs::set_permissions(&abort_so, fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::write(
        d.join("plugstack-abort.conf"),
        format!("required {}\n", abort_so.display()),
    )
    .expect("write");
    let conf2 = d.join("slurm-abort.conf");
    let conf = fs::read_to_string(&t.c.conf).expect("read");
    fs::write(
        &conf2,
        conf.replace("/plugstack.conf", "/plugstack-abort.conf"),
    )
    .expect("write");
    for f in [&conf2, &d.join("plugstack-abort.conf")] {
        fs::set_permissions(f, fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let r = t.user(
        &[("SLURM_CONF", &conf2.display().to_string())],
        &["srun", "echo", "RAN"],
    );
    assert!(
        !r.success() && !r.stdout().contains("RAN") && r.stderr().contains("aborts on a panic"),
        "{r:?}"
    );
}

// ---------------------------------------------------------------------------
// Several nodes
// ---------------------------------------------------------------------------

/// `<host>: <content>` lines, sorted.
fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

fn srun_n3_every_node_sees_the_image(t: &T) {
    let r = t.user(
        &[],
        &[
            "srun",
            "-N3",
            &t.opt("a.sqfs", UE),
            "sh",
            "-c",
            "echo \"$(hostname): $(cat /user-environment/file)\"",
        ],
    );
    assert!(r.success(), "{r:?}");
    assert_eq!(
        sorted_lines(&r.stdout()),
        ["n1: hello from A", "n2: hello from A", "n3: hello from A"],
        "{r:?}"
    );
}

fn sbatch_two_nodes(t: &T) {
    let script = format!(
        "#!/bin/sh
#SBATCH -N2
#SBATCH --squashfs={a}:/user-environment
echo \"batch $(hostname): $(cat /user-environment/file)\"
srun -N2 sh -c 'echo \"step1 $(hostname): $(cat /user-environment/file)\"'
srun -N2 --squashfs={b}:/user-environment sh -c 'echo \"step2 $(hostname): $(cat /user-environment/file)\"'
",
        a = t.img("a.sqfs"),
        b = t.img("b.sqfs")
    );
    let (job, state, out) = sbatch(t, "two-nodes", &script);
    assert_eq!(state, "COMPLETED", "job {job}: {out}");
    let hosts = |step: &str, content: &str| -> Vec<String> {
        let mut h: Vec<String> = out
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{step} ")))
            .filter_map(|l| l.strip_suffix(&format!(": {content}")))
            .map(str::to_string)
            .collect();
        h.sort();
        h
    };
    let (batch, step1, step2) = (
        hosts("batch", "hello from A"),
        hosts("step1", "hello from A"),
        hosts("step2", "hello from B"),
    );
    // The tasks' lines only: on a busy machine srun adds its own ("srun:
    // Job N step creation temporarily disabled, retrying (Requested nodes
    // are busy)" while the previous step's nodes are released).
    let task_lines = out.lines().filter(|l| !l.starts_with("srun: ")).count();
    assert_eq!(task_lines, 5, "job {job}: {out}");
    assert_eq!(batch.len(), 1, "the batch step sees A: {out}");
    assert_eq!(step1.len(), 2, "both nodes' tasks of step 1 see A: {out}");
    assert_ne!(step1[0], step1[1], "two nodes: {out}");
    assert!(step1.contains(&batch[0]), "{out}");
    assert_eq!(
        step2, step1,
        "step 2 sees B instead, on the same two nodes: {out}"
    );
}

fn image_corrupt_on_one_node(t: &T) {
    // The same path everywhere: valid on the login node, n1 and n3;
    // truncated (refused by the plugin's superblock check, never given to
    // the kernel) in n2's mount namespace.
    let good = PathBuf::from(t.img("pernode.sqfs"));
    fs::copy(t.img("a.sqfs"), &good).expect("copy");
    fs::set_permissions(&good, fs::Permissions::from_mode(0o644)).expect("chmod");
    let bad = t.c.dir.join("images/pernode-truncated.sqfs");
    image::truncated_copy(&good, &bad);
    let n2 = t.c.nodes.iter().find(|n| n.name == "n2").expect("node n2");
    let _bind = n2.bind(&bad, &good);
    let r = t.user(
        &[],
        &[
            "srun",
            "-N3",
            &t.opt("pernode.sqfs", UE),
            "sh",
            "-c",
            "echo \"$(hostname): $(cat /user-environment/file)\"",
        ],
    );
    let err = r.stderr();
    assert_ne!(r.code(), Some(0), "{r:?}");
    assert_eq!(
        sorted_lines(&r.stdout()),
        ["n1: hello from A", "n3: hello from A"],
        "only n2's task fails: {r:?}"
    );
    let refusal: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("squashfs-mount: "))
        .collect();
    assert!(!refusal.is_empty(), "the plugin's message: {r:?}");
    assert!(
        refusal
            .iter()
            .all(|l| l.contains("n2") && l.contains("pernode.sqfs") && l.contains("truncated")),
        "{r:?}"
    );
    assert!(
        err.contains("n2: task") && !err.contains("n1: task") && !err.contains("n3: task"),
        "{r:?}"
    );
}
