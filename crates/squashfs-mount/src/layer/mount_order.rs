//! What root mounted (in the order it was mounted, parents before
//! children) and what the caller's stage does with each mount. Pure.
//!
//! An image's mount point may hold no other mount of the call (an image,
//! a bind mount, a directory made by `-r`): the copy of root's mounts in
//! the caller's user namespace locks every mount to its parent, and
//! overlayfs refuses a lower layer with locked mounts inside it (the
//! kernel would have to show what they cover: "failed to clone
//! lowerpath"). Mounts side by side, or an image inside a bind mount,
//! are fine.

use std::ffi::OsString;
use std::os::fd::AsFd;

use super::LayerError;
use crate::config::paths;
use crate::mounts::image::Image;
use crate::system;
use crate::system::error::Failure;

pub(crate) use squashfs_format::stamp::ImageId;

/// What root made at a place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Made {
    /// An image, or a union's images (top first).
    Images(Vec<ImageId>),
    /// A bind mount (`--bind-mount`).
    Bind,
    /// A directory made with `-r` (a read-only copy of a directory's
    /// entries, with the new mount points).
    Directory,
}

/// One mount of the view: its real path and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewMount {
    pub path: OsString,
    pub made: Made,
}

/// What the caller's stage does with the mount at the same index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Stack an overlay with a sub-layer of DIR on it.
    Overlay,
    /// Nothing: no layer goes on it.
    Leave,
}

/// The step for each mount, or why the view cannot take a kept layer.
pub(crate) fn steps(mounts: &[ViewMount]) -> Result<Vec<Step>, LayerError> {
    let mut out: Vec<Step> = Vec::with_capacity(mounts.len());
    for (i, m) in mounts.iter().enumerate() {
        let holder = mounts[..i]
            .iter()
            .find(|h| matches!(h.made, Made::Images(_)) && paths::is_within(&m.path, &h.path));
        if let Some(holder) = holder {
            let what = match m.made {
                Made::Images(_) => "the image mounted on",
                Made::Bind => "the bind mount on",
                Made::Directory => "the directory -r made for a mount point,",
            };
            return Err(LayerError::Nested {
                what,
                path: m.path.to_string_lossy().into_owned(),
                holder: holder.path.to_string_lossy().into_owned(),
            });
        }
        out.push(if matches!(m.made, Made::Images(_)) {
            Step::Overlay
        } else {
            Step::Leave
        });
    }
    Ok(out)
}

/// The image mount points of the view with their images, in order.
pub(crate) fn image_mounts(mounts: &[ViewMount]) -> Vec<(&OsString, &[ImageId])> {
    mounts
        .iter()
        .filter_map(|m| match &m.made {
            Made::Images(ids) => Some((&m.path, ids.as_slice())),
            _ => None,
        })
        .collect()
}

/// The identity of an opened image (`squashfs_format::identity`), read
/// from the caller's fd.
pub(crate) fn identity_of(image: &Image, subject: &str) -> Result<ImageId, Failure> {
    let fail = |e: system::Error| {
        let image = image.path.to_string_lossy().into_owned();
        Failure::about(subject, LayerError::Identity { image, e })
    };
    let mut superblock = [0u8; squashfs_format::SUPERBLOCK_SIZE];
    system::read_at(image.fd.as_fd(), 0, &mut superblock).map_err(fail)?;
    let (start, end) = squashfs_format::identity::tail_range(image.superblock.bytes_used);
    let mut tail = vec![0u8; (end - start) as usize];
    let got = system::read_at(image.fd.as_fd(), start, &mut tail).map_err(fail)?;
    tail.truncate(got);
    Ok(ImageId {
        identity: squashfs_format::identity::identity(&superblock, &tail),
        size: image.id.size,
        path: image.path.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(path: &str) -> ViewMount {
        ViewMount {
            path: path.into(),
            made: Made::Images(vec![ImageId {
                identity: "x".into(),
                size: 1,
                path: "/i".into(),
            }]),
        }
    }
    fn bind(path: &str) -> ViewMount {
        ViewMount {
            path: path.into(),
            made: Made::Bind,
        }
    }
    fn dir(path: &str) -> ViewMount {
        ViewMount {
            path: path.into(),
            made: Made::Directory,
        }
    }

    #[test]
    fn side_by_side_and_inside_binds() {
        use Step::*;
        let v = [
            dir("/"),
            bind("/b"),
            image("/b/i"),
            image("/a"),
            bind("/ab"),
            image("/c"),
        ];
        assert_eq!(
            steps(&v).unwrap(),
            [Leave, Leave, Overlay, Overlay, Leave, Overlay]
        );
    }

    #[test]
    fn nothing_inside_an_image() {
        for inner in [image("/a/x"), bind("/a/x"), dir("/a"), dir("/a/y")] {
            let e = steps(&[dir("/"), image("/a"), inner.clone()])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("is inside /a") && e.contains("side by side"),
                "{e}"
            );
        }
        assert!(steps(&[image("/a"), bind("/b"), image("/b/c")]).is_ok());
    }
}
