//! `squashfs-mount --gc [--all | --expired | IMAGE]`: evicts cached image
//! instances. What a user may evict is decided from the recorded creator
//! only: a user's own instances (root: all), and what any launch would
//! evict anyway.

use std::ffi::OsStr;

use super::{acquire, on_the_cache, open_existing, shown_path, visible, CommandError, ROOTLESS};
use crate::cache::evict::Occasion;
use crate::cache::{usage_scan, Entry, Store};
use crate::config;
use crate::mounts::image::Image;
use crate::privilege::{AsRoot, Credentials, RootPhase};
use crate::system::error::{print_stdout, Failure};
use crate::system::Uid;

/// `squashfs-mount --gc [--all | --expired]`, or `--gc IMAGE` for one
/// image's instance.
pub(crate) fn gc_command(all: bool, expired: bool, image: Option<&OsStr>) -> Result<(), Failure> {
    let Some(mut privileges) = acquire()? else {
        print_stdout(ROOTLESS);
        return Ok(());
    };
    let uid = privileges.caller().uid;
    if all && !uid.is_root() {
        return Err(Failure::new(CommandError::GcAllNotRoot));
    }
    // The image is opened with the caller's rights, like for a launch.
    let target = match image {
        Some(given) => Some(Image::open(&privileges, given, &given.to_string_lossy())?),
        None => None,
    };
    let Some(store) = open_existing(&mut privileges)? else {
        privileges.drop_for_good()?;
        print_stdout("no image cache\n");
        return Ok(());
    };
    let result = privileges.try_as_root(|root| {
        let file = target.as_ref().map(|t| (t.id.dev, t.id.ino));
        let mode = match (&target, all) {
            (Some(_), _) => Occasion::Image,
            (None, true) => Occasion::All,
            (None, false) if expired => Occasion::Expired,
            (None, false) if uid.is_root() => Occasion::Root,
            (None, false) => Occasion::User,
        };
        on_the_cache(|| store.collect(root, mode, Some(uid), file, usage_scan::ON_REQUEST))
    })?;
    drop(store);
    privileges.drop_for_good()?;
    print_stdout(&report(&result, uid, target.as_ref()));
    Ok(())
}

/// The plugin's job epilog (slurmd, root) for a job of user `uid`, on a
/// thread of its own with its own fs_struct, which keeps only the cache
/// commands' capabilities: [`end_of_job`].
pub fn job_epilog(uid: Uid) -> Result<usize, Failure> {
    crate::privilege::on_root_thread(RootPhase::CACHE, |root| end_of_job(root, uid))?
}

/// A Slurm job of user `uid` ended on this node (the plugin's job epilog,
/// root): evicts the user's unused FUSE instances, whose servers end with
/// them (also one a task stopped). Instances another job of the user still
/// uses stay. Returns how many were evicted. Needs root, on a thread with
/// its own fs_struct (the cache's namespace is visited).
pub(crate) fn end_of_job(root: &AsRoot, uid: Uid) -> Result<usize, Failure> {
    let settings = config::load();
    let store = Store::open(
        root,
        settings.cache_limits(),
        settings.cache_lock_timeout_ms,
        false,
        |why| panic!("squashfs-mount job epilog stopped: {why}"),
    )
    .map_err(|e| Failure::new(CommandError::Cache(e)))?;
    let Some(store) = store else { return Ok(0) };
    let result = store
        .collect(
            root,
            Occasion::JobEnd,
            Some(uid),
            None,
            usage_scan::ON_REQUEST,
        )
        .map_err(|e| Failure::new(CommandError::Cache(e)))?;
    Ok(result.iter().filter(|(_, gone)| *gone).count())
}

/// What `--gc` prints: the caller's own evicted instances, and how many
/// of other users' stale ones went.
fn report(result: &[(Entry, bool)], uid: Uid, target: Option<&Image>) -> String {
    let mut out = String::new();
    let (mut evicted, mut kept, mut others) = (0, 0, 0);
    for (e, gone) in result {
        if !visible(uid, e) {
            others += usize::from(*gone);
            continue;
        }
        if *gone {
            evicted += 1;
            out += &format!("evicted {}\n", shown_path(e));
        } else {
            kept += 1;
        }
    }
    if let (Some(t), 0) = (target, evicted) {
        out += &format!(
            "{}: no cached instance of yours\n",
            t.given.to_string_lossy()
        );
    }
    out += &format!("{evicted} evicted, {kept} kept");
    if others > 0 {
        out += &format!("; also evicted {others} stale instance(s) of other users");
    }
    out.push('\n');
    out
}
