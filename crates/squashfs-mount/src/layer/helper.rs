//! `squashfs-mount-layer`, the program the caller's stage runs in, and the
//! two ways it is started:
//!
//! - by the launch, after every privilege is gone (`--  COMMAND`): the
//!   stage, then it becomes the command, keeping DIR's lock open (at fd 64
//!   or above) for as long as the command and what it starts keep it;
//! - by the Slurm plugin's worker, as the job user (`--report-fd`), with
//!   DIR's lock the launch took at fd 5: the stage, then it writes `ok USERNS MNTNS LOCK` (fd numbers) and waits;
//!   the worker, as root, copies those fds (pidfd_getfd), closes the wait
//!   pipe and the helper exits. Each task of the step joins both
//!   namespaces in `slurm_spank_task_init`, once Slurm has made it the job
//!   user (the user namespace's owner): one user namespace per step, which
//!   all its tasks share.
//!
//! It refuses to run with privileges it was not started with by its
//! caller (a setuid start): it only does what the caller could do.

use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;

use super::failure::Tampered;
use super::handoff::{self, Then};
use super::stage;
use super::{LayerError, LayerPlan};
use crate::privilege::Caller;
use crate::system;
use crate::system::error::{self, Failure};
use crate::system::Uid;

/// A kept layer to stack: the helper that stacks it (found and opened
/// before anything was mounted, `engine::mount_all`), what it stacks, and
/// DIR's lock, taken by the launch as the caller once the mounts were
/// made (`engine::kept_layer::claim`), handed to the helper held.
#[derive(Debug)]
pub struct Kept {
    pub helper: OsString,
    pub plan: LayerPlan,
    pub lock: OwnedFd,
}

/// The lowest fd number DIR's lock is kept at in the command (out of the
/// way of the small numbers scripts use).
pub const LOCK_FD_AT_LEAST: RawFd = 64;

/// The program's work, after `argv[0]`; returns the exit status when it
/// does not become the command.
pub fn main(args: &[OsString]) -> u8 {
    if let Err(e) = unelevated() {
        error::report(e);
        return 1;
    }
    let (plan, then) = match handoff::decode(args) {
        Ok(x) => x,
        Err(e) => {
            error::report(format_args!(
                "{}: {e}; it is started by squashfs-mount --writable=DIR, not by hand",
                super::HELPER_NAME
            ));
            return 1;
        }
    };
    match then {
        Then::Command(command) => become_command(&plan, &command),
        Then::Report { report_fd, wait_fd } => report(&plan, report_fd, wait_fd),
    }
}

/// Why the helper refuses to start: its ids cannot be read, or the exec
/// gave it ids other than its caller's (a setuid bit).
#[derive(Debug)]
enum Elevated {
    Unreadable(system::Error),
    Gained,
}

impl std::fmt::Display for Elevated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Elevated::Unreadable(e) => write!(f, "{e}"),
            Elevated::Gained => write!(
                f,
                "{} must not run with ids other than its caller's; refusing",
                super::HELPER_NAME
            ),
        }
    }
}

/// All ids equal: nothing was gained by the exec (a setuid bit).
fn unelevated() -> Result<(), Elevated> {
    let (r, e, s) = system::res_uid().map_err(Elevated::Unreadable)?;
    let (rg, eg, sg) = system::res_gid().map_err(Elevated::Unreadable)?;
    if r != e || e != s || rg != eg || eg != sg {
        return Err(Elevated::Gained);
    }
    Ok(())
}

fn become_command(plan: &LayerPlan, command: &[OsString]) -> u8 {
    let entered = match stage::enter(plan) {
        Ok(e) => e,
        Err(e) => {
            error::report(e);
            return 1;
        }
    };
    for warning in &entered.warnings {
        error::warn(warning);
    }
    if plan.verbose > 0 {
        for note in &entered.notes {
            error::report(note);
        }
    }
    if let Err(e) = system::keep_across_exec(entered.lock, LOCK_FD_AT_LEAST) {
        error::report(format_args!("cannot keep the writable layer's lock: {e}"));
        return 1;
    }
    exec(command)
}

/// Executes `command` with this process's environment (the launch built
/// it) and the caller's SIGPIPE disposition.
pub(crate) fn exec(command: &[OsString]) -> u8 {
    let program = &command[0];
    let mut c = std::process::Command::new(program);
    c.args(&command[1..]).env_clear().envs(std::env::vars_os());
    system::keep_callers_pipe_signal(&mut c);
    let err = c.exec();
    crate::cli::environment::exec_failed(
        program,
        &err,
        std::env::var_os("UENV_MOUNT_LIST").as_deref(),
    )
}

/// The Slurm plugin's way: see the module documentation.
fn report(plan: &LayerPlan, report_fd: RawFd, wait_fd: RawFd) -> u8 {
    // The plugin's spawn placed them at these numbers; owned from here on.
    let (Some(out), Some(wait)) = (system::take_fd(report_fd), system::take_fd(wait_fd)) else {
        error::report("the report and wait fds are not open");
        return 1;
    };
    let line = match stage::enter(plan).and_then(|entered| {
        let (user, mnt) = system::own_namespaces().map_err(LayerError::OwnNamespaces)?;
        Ok((entered, user, mnt))
    }) {
        Ok((entered, user, mnt)) => {
            // The warnings first, one line each, then the fds: one write.
            let mut line: String = entered
                .warnings
                .iter()
                .map(|w| format!("warning {}\n", w.replace('\n', " ")))
                .collect();
            line.push_str(&format!(
                "ok {} {} {}\n",
                user.as_raw_fd(),
                mnt.as_raw_fd(),
                entered.lock.as_raw_fd()
            ));
            let _ = system::write_all(out.as_fd(), line.as_bytes());
            drop(out);
            // Until the plugin has its copies.
            let _ = system::wait_readable(wait.as_fd(), 120_000);
            drop((entered, user, mnt));
            return 0;
        }
        Err(e) => format!("error {e}\n"),
    };
    let _ = system::write_all(out.as_fd(), line.as_bytes());
    1
}

/// What the plugin holds for a step with a kept layer: the namespaces the
/// tasks join and DIR's lock; and what the helper warned of.
#[derive(Debug)]
pub struct StepLayer {
    pub user: OwnedFd,
    pub mnt: OwnedFd,
    pub lock: OwnedFd,
    pub warnings: Vec<String>,
}

/// The helper's report (see the module documentation): its warnings, and
/// `Ok(fd numbers)` or `Err(why)`; `None` when it said neither.
fn parse_report(text: &str) -> (Vec<String>, Option<Result<&str, &str>>) {
    let mut warnings = Vec::new();
    for line in text.lines() {
        if let Some(w) = line.strip_prefix("warning ") {
            warnings.push(w.to_string());
        } else if let Some(fds) = line.strip_prefix("ok ") {
            return (warnings, Some(Ok(fds)));
        } else if let Some(why) = line.strip_prefix("error ") {
            return (warnings, Some(Err(why)));
        }
    }
    (warnings, None)
}

/// The fd number at which the Slurm plugin's helper gets DIR's lock.
const STEP_LOCK_FD: RawFd = 5;

/// For the Slurm plugin's worker thread, acting as root in the step's
/// mount namespace: starts the helper of `kept` as the job user (`uid`,
/// `gid`, `groups`) with DIR's lock the launch holds, waits for its
/// report and takes copies of the fds it names. Front ends call
/// `start::start`.
pub(super) fn start_for_step(kept: &Kept, user: &Caller) -> Result<StepLayer, Failure> {
    let program = kept.helper.as_os_str();
    let mut plan = kept.plan.clone();
    plan.lock_fd = Some(STEP_LOCK_FD);
    let plan = &plan;
    let dir = || plan.dir.to_string_lossy().into_owned();
    let fail = |what: &'static str, e: system::Error| {
        Failure::new(LayerError::StepHelper {
            dir: dir(),
            what,
            e,
        })
    };
    let pinned = system::open_program(program)
        .map_err(|e| LayerError::PluginHelperUnopenable(program.to_owned(), e))?;
    let (report_read, report_write) = system::pipe().map_err(|e| fail("pipe", e))?;
    let (wait_read, wait_write) = system::pipe().map_err(|e| fail("pipe", e))?;
    let mut argv = vec![CString::new(super::HELPER_NAME).unwrap_or_default()];
    for a in handoff::encode(
        plan,
        &Then::Report {
            report_fd: 3,
            wait_fd: 4,
        },
    ) {
        argv.push(CString::new(a.as_bytes()).map_err(|_| LayerError::Nul)?);
    }
    let keep = [
        (report_write.as_fd(), 3),
        (wait_read.as_fd(), 4),
        (kept.lock.as_fd(), STEP_LOCK_FD),
    ];
    let helper = system::spawn_detached(&system::Helper {
        program: pinned.as_fd(),
        argv: &argv,
        keep: &keep,
        as_root: false,
        limits: None,
        as_user: Some((user.uid, user.gid, &user.groups[..])),
    })
    .map_err(|e| fail("starting the helper", e))?;
    drop((report_write, wait_read));
    let answered =
        system::wait_readable(report_read.as_fd(), 120_000).map_err(|e| fail("waiting", e))?;
    let line = if answered {
        system::read_some(report_read.as_fd(), 16 << 10).unwrap_or_default()
    } else {
        Vec::new()
    };
    let line = String::from_utf8_lossy(&line);
    let (warnings, said) = parse_report(&line);
    let result = match said {
        Some(Ok(fds)) => take_fds(helper.as_fd(), fds, kept.lock.as_fd())
            .map(|layer| StepLayer { warnings, ..layer })
            .map_err(|e| fail("taking the layer's fds from the helper", e))
            .and_then(|layer| {
                check_step_layer(&layer, user.uid)
                    .map_err(|why| LayerError::Tampered { dir: dir(), why })?;
                Ok(layer)
            }),
        Some(Err(why)) => Err(LayerError::Helper(why.to_string()).into()),
        None => Err(LayerError::NoAnswer {
            dir: dir(),
            program: program.to_string_lossy().into_owned(),
        }
        .into()),
    };
    // Its work is done either way (copies taken, or failed): one that a
    // user stopped would not exit by itself.
    drop(wait_write);
    let _ = system::kill_by_pidfd(helper.as_fd());
    result
}

/// The namespaces the helper reports; DIR's lock is not taken from it
/// (the job user may make their helper report any file) but is a copy of
/// the one the launch took, `lock`.
fn take_fds(
    helper: BorrowedFd<'_>,
    fds: &str,
    lock: BorrowedFd<'_>,
) -> Result<StepLayer, system::Error> {
    let n: Vec<RawFd> = fds.split(' ').filter_map(|x| x.parse().ok()).collect();
    let [user, mnt, _reported_lock] = n[..] else {
        return Err(system::Error::INVAL);
    };
    let layer = StepLayer {
        user: system::fd_of_process(helper, user)?,
        mnt: system::fd_of_process(helper, mnt)?,
        lock: system::private_copy(lock)?,
        warnings: Vec::new(),
    };
    Ok(layer)
}

/// What the tasks will join must be what the helper was to make: the
/// helper runs as the job user, who may make it report any descriptor
/// they hold. The user namespace must be one `uid` owns, the mount
/// namespace one that user namespace owns, the lock a regular file.
/// Checked before any task joins them; says what is wrong.
pub(crate) fn check_step_layer(layer: &StepLayer, uid: Uid) -> Result<(), Tampered> {
    let (user, mnt) = (layer.user.as_fd(), layer.mnt.as_fd());
    if system::namespace_type(user) != Ok(system::USER_NAMESPACE) {
        return Err(Tampered::NotUserNamespace);
    }
    match system::user_namespace_owner(user) {
        Ok(owner) if owner == uid => {}
        Ok(owner) => return Err(Tampered::OwnedBy(owner)),
        Err(e) => return Err(Tampered::OwnerUnreadable(e)),
    }
    if system::namespace_type(mnt) != Ok(system::MOUNT_NAMESPACE) {
        return Err(Tampered::NotMountNamespace);
    }
    let same = |a: BorrowedFd<'_>, b: BorrowedFd<'_>| matches!((system::fstat(a), system::fstat(b)), (Ok(x), Ok(y)) if (x.dev, x.ino) == (y.dev, y.ino));
    let owner = system::owning_user_namespace(mnt);
    if !owner.as_ref().is_ok_and(|o| same(o.as_fd(), user)) {
        return Err(Tampered::NotOwned);
    }
    if !system::is_regular_file(&layer.lock) {
        return Err(Tampered::LockNotFile);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &str) -> OwnedFd {
        std::fs::File::open(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .into()
    }

    /// Issue 26, finding 8: the namespaces a (possibly tampered) helper
    /// hands over are checked for type and owner before tasks join them.
    #[test]
    fn a_step_layer_is_the_job_users_namespaces_or_refused() {
        let me = rustix::process::getuid().as_raw();
        let Ok(mut child) = std::process::Command::new("unshare")
            .args(["-Urm", "sleep", "30"])
            .spawn()
        else {
            eprintln!(
                "*** SKIPPED a_step_layer_is_the_job_users_namespaces_or_refused: no unshare ***"
            );
            return;
        };
        // unshare(1) execs sleep once the namespaces exist.
        let ns = |kind: &str| format!("/proc/{}/ns/{kind}", child.id());
        let t = std::time::Instant::now();
        while std::fs::read_link(ns("user")).ok() == std::fs::read_link("/proc/self/ns/user").ok()
            && t.elapsed() < std::time::Duration::from_secs(5)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let dir = std::env::temp_dir().join(format!("sqfs-layer-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("lock"), "").unwrap();
        let lock = || open(dir.join("lock").to_str().unwrap());
        let layer = |user: &str, mnt: &str, lock: OwnedFd| StepLayer {
            user: open(user),
            mnt: open(mnt),
            lock,
            warnings: Vec::new(),
        };
        let (user, mnt) = (ns("user"), ns("mnt"));
        let checked = |l: StepLayer, uid: u32| check_step_layer(&l, Uid::from_raw(uid));
        let good = checked(layer(&user, &mnt, lock()), me);
        let other_owner = checked(layer(&user, &mnt, lock()), me + 12345);
        let swapped = checked(layer(&mnt, &user, lock()), me);
        let host_mnt = checked(layer(&user, "/proc/self/ns/mnt", lock()), me);
        let dir_lock = checked(layer(&user, &mnt, open(dir.to_str().unwrap())), me);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(good.is_ok(), "{good:?}");
        assert!(other_owner.unwrap_err().to_string().contains("not by you"));
        assert!(swapped
            .unwrap_err()
            .to_string()
            .contains("not a user namespace"));
        assert!(host_mnt.unwrap_err().to_string().contains("does not own"));
        assert!(dir_lock
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
    }

    #[test]
    fn the_helpers_report() {
        let (w, said) =
            parse_report("warning /m/a (owner uid 0, group gid 0): x\nwarning b\nok 3 4 5\n");
        assert_eq!(w, ["/m/a (owner uid 0, group gid 0): x", "b"]);
        assert_eq!(said, Some(Ok("3 4 5")));
        let (w, said) = parse_report("error writable layer /d: no\n");
        assert!(w.is_empty());
        assert_eq!(said, Some(Err("writable layer /d: no")));
        assert_eq!(parse_report("").1, None);
        assert_eq!(parse_report("warning a\n").1, None);
    }
}
