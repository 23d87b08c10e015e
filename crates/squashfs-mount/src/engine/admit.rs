//! Stage 0, admission: the site's settings (`/etc/squashfs-mount.conf`),
//! whether the site lets the caller use the tool at all
//! (`allowed-users`, `allowed-groups`), and for the setuid command one of
//! the caller's launch slots (`max-launches-per-user`). The same for every
//! front end: the setuid command and the Slurm plugin.
//!
//! In rootless mode the configuration tunes, but cannot grant anything
//! (there is nothing to grant): it is read as the caller, before the
//! process enters its own user and mount namespaces, in which root's files
//! would show as nobody's.

use super::context::Context;
use super::root_side::RootSide;
use crate::cli::RunRequest;
use crate::config::Settings;
use crate::mounts::budgets::LaunchSlot;
use crate::privilege::{Credentials, Mode};
use crate::system::error::{self, Failure};

/// The caller may go on, under these settings.
pub struct Admitted {
    pub settings: Settings,
    /// Held until the privileged phase ends (the setuid command).
    pub slot: Option<LaunchSlot>,
}

/// What rootless mode says once, unless `--quiet`.
const ROOTLESS_NOTE: &str = "running unprivileged (the binary is not installed setuid root): images are served through FUSE in a user namespace, which is slower than the kernel's squashfs; --quiet hides this note";

pub(crate) fn admit<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    request: &RunRequest,
    ctx: &Context<'_>,
) -> Result<Admitted, Failure> {
    let mut admitted = if C::MODE.has_root() {
        let caller = creds.caller().clone();
        creds.try_as_root(|root| -> Result<Admitted, Failure> {
            let settings = root_side.site_settings();
            settings.policy.admits(&caller)?;
            let slot = match C::MODE {
                Mode::Setuid => Some(root_side.launch_slot(root, &caller, &settings)?),
                _ => None,
            };
            Ok(Admitted { settings, slot })
        })?
    } else {
        let settings = root_side.site_settings();
        creds.enter_own_namespaces()?;
        if !request.quiet {
            error::report(ROOTLESS_NOTE);
        }
        Admitted {
            settings,
            slot: None,
        }
    };
    // A front end may turn the image cache off (the plugin's cache=no).
    admitted.settings.cache &= !ctx.front.cache_off;
    Ok(admitted)
}
