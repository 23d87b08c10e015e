//! Stage 1, the kept layer (`--writable=DIR`), as the caller, before
//! anything is opened or mounted: the layer helper must be installed
//! (next to the FUSE server), and DIR must not be refused already
//! (`layer::dir::precheck`: another owner, open to others, a file system
//! that cannot hold an upper layer). Every front end gets these refusals
//! here, in the one sequence; the helper judges again what it opens.

use std::ffi::OsString;

use super::context::{Context, FuseServer};
use super::plan::Plan;
use crate::layer::{self, LayerError};
use crate::privilege::Credentials;
use crate::system;
use crate::system::error::Failure;

/// The helper that will stack the layer, when the call keeps one.
pub fn check<C: Credentials>(
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
