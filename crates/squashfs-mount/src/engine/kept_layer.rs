//! The kept layer (`--writable=DIR`) in the sequence, as the caller; every
//! front end gets its refusals here, and the helper judges again what it
//! opens.
//!
//! - [`check`], stage 1, before anything is opened or mounted: the layer
//!   helper must be installed (next to the FUSE server), and DIR must not
//!   be refused already (`layer::dir::precheck`: another owner, open to
//!   others, a file system that cannot hold an upper layer, no layer).
//! - [`claim`], stage 7, once everything is attached, in the private
//!   namespace (where the helper will look): what needs the mounts made
//!   (`layer::stage::claim`): no mount inside an image's mount point; DIR
//!   (created if missing) judged again; its lock taken, so that a DIR
//!   another launch uses is refused here; its stamp matched with the
//!   identities of the images just attached, so that a layer made on
//!   other images is refused here. The lock, held, goes to the helper
//!   (`layer::start`): no other launch can take DIR in between. A refusal
//!   here unwinds like any failure of the sequence: nothing is exposed,
//!   the command does not run, the lock goes with its fd.

use std::ffi::OsString;

use super::context::{Call, Context, FuseServer, SequenceError};
use super::plan::Plan;
use crate::layer::{self, Kept, LayerError, LayerPlan};
use crate::privilege::Credentials;
use crate::system;
use crate::system::error::Failure;

/// The helper that will stack the layer, when the call keeps one.
pub(crate) fn check<C: Credentials>(
    creds: &C,
    plan: &Plan,
    ctx: &Context<'_>,
) -> Result<Option<OsString>, Failure> {
    let Some(dir) = &plan.layer_dir else {
        return Ok(None);
    };
    let helper = helper(&ctx.fuse_server)?;
    layer::dir::precheck(creds, dir, creds.caller().uid)?;
    Ok(Some(helper))
}

/// DIR claimed for the layer of `view` (see the module documentation).
pub(crate) fn claim<C: Credentials>(
    creds: &C,
    call: &Call<'_>,
    view: Option<LayerPlan>,
) -> Result<Option<Kept>, Failure> {
    let Some(mut plan) = view else {
        return Ok(None);
    };
    let helper = call
        .layer_helper
        .clone()
        .ok_or(SequenceError::Internal("no layer helper"))?;
    let claimed = layer::stage::claim(&plan, creds.caller().uid, None)?;
    plan.dir_made = claimed.dir.created;
    Ok(Some(Kept {
        helper,
        plan,
        lock: claimed.lock,
    }))
}

/// Where the helper is (next to the FUSE server), opened as the caller to
/// see that it is there.
fn helper(server: &FuseServer) -> Result<OsString, Failure> {
    let (helper, plugin) = match server {
        // The plugin: next to its FUSE server, next to the plugin.
        FuseServer::At(server) => {
            let server = server.as_deref().ok_or(LayerError::NoHelperNextToPlugin)?;
            (crate::mounts::installed::helper_next_to(server), true)
        }
        // The command (setuid or rootless): `<prefix>/lib/squashfs-mount/`.
        FuseServer::NextToProgram | FuseServer::Search { .. } => (
            crate::mounts::installed::helper_for_command().ok_or(LayerError::NotInstalled)?,
            false,
        ),
    };
    match system::open_program(&helper) {
        Ok(_) => Ok(helper),
        Err(e) if plugin => Err(Failure::new(LayerError::PluginHelperUnopenable(helper, e))),
        Err(e) => Err(Failure::new(LayerError::NoHelper(helper, e))),
    }
}
