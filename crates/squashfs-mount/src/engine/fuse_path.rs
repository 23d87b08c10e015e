//! Stage 3, the FUSE path, in the namespace the launch started in: for
//! every image routed to FUSE, a FUSE mount on a connection the caller
//! opened and its server (started as root, it becomes the caller by
//! itself; in rootless mode it already is), with as many clones as the
//! call needs; then the wait until every server has checked its image.

use std::os::fd::OwnedFd;

use super::context::Call;
use super::images::Images;
use super::root_side::RootSide;
use crate::error::Failure;
use crate::fuse;
use crate::privilege::Credentials;

/// The FUSE instances of the images routed to FUSE, in their records;
/// returns the servers' pidfds once every server is ready.
pub fn start<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    images: &mut Images,
    call: &Call<'_>,
) -> Result<Vec<OwnedFd>, Failure> {
    let Some(first) = images.records.iter().find(|r| r.is_fuse()) else {
        return Ok(Vec::new());
    };
    let Some(server) = call.ctx.fuse_server.locate() else {
        return Err(Failure::new(fuse::FuseError::NotInstalled(
            first.image.path.clone(),
        )));
    };
    let caller = creds.caller().clone();
    let drop_to_caller = C::MODE.has_root();
    let program = fuse::Server::pin(&*creds, &server, drop_to_caller)?;
    let launcher = fuse::Launcher {
        server: &program,
        caller: &caller,
        drop_to_caller,
        threads: call.settings.fuse_threads,
        limits: call.ctx.caller_limits,
    };
    let mut starting = Vec::new();
    for r in images.records.iter_mut().filter(|r| r.is_fuse()) {
        let subject = r.image.given.to_string_lossy().into_owned();
        let device = fuse::open_device(&*creds, &subject)?;
        r.instances = creds.as_root(|root| -> Result<Vec<OwnedFd>, Failure> {
            let (mount, s) =
                root_side.fuse_instance(root, &r.image, device, &launcher, &subject)?;
            starting.push(s);
            root_side.copies(root, mount, r.copies, &r.image, &subject)
        })??;
    }
    fuse::wait_ready(starting, &program)
}
