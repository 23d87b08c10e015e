//! `squashfs-mount --gc [--all | --expired | IMAGE]`: evicts cached image
//! instances. What a user may evict is decided from the recorded creator
//! only: a user's own instances (root: all), and what any launch would
//! evict anyway.

use std::ffi::OsStr;

use super::{open_existing, shown_path, visible, CommandError};
use crate::cache::evict::Mode;
use crate::cache::{usage, CacheError, Entry};
use crate::error::{print_stdout, Failure};
use crate::image::Image;
use crate::privilege::{Credentials, Privileges, RootPhase};
use crate::system::Uid;

/// `squashfs-mount --gc [--all | --expired]`, or `--gc IMAGE` for one
/// image's instance.
pub fn gc_command(all: bool, expired: bool, image: Option<&OsStr>) -> Result<(), Failure> {
    let mut privileges = Privileges::acquire(RootPhase::CACHE)?;
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
    let result = privileges
        .as_root(|root| -> Result<_, CacheError> {
            // Loads the namespace's secret, so that the image's entry name is known.
            store.entries(root)?;
            let name = target
                .as_ref()
                .and_then(|t| store.name_of(t.id.dev, t.id.ino));
            let mode = match (&target, all) {
                (Some(_), _) => Mode::Image,
                (None, true) => Mode::All,
                (None, false) if expired => Mode::Expired,
                (None, false) if uid.is_root() => Mode::Root,
                (None, false) => Mode::User,
            };
            store.collect(root, mode, Some(uid), name.as_deref(), usage::ON_REQUEST)
        })?
        .map_err(|e| Failure::new(CommandError::Cache(e)))?;
    drop(store);
    privileges.drop_for_good()?;
    print_stdout(&report(&result, uid, target.as_ref()));
    Ok(())
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
