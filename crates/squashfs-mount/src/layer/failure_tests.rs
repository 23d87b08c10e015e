use super::*;

/// The sentences are the ones the single string kind said.
#[test]
fn sentences() {
    let said = |e: LayerError| e.to_string();
    assert_eq!(
        said(LayerError::NotYours { dir: "/l".into(), owner: Uid::from_raw(0) }),
        "the writable layer /l belongs to uid 0 (root), not to you: a writable layer must be a directory of your own; give another directory"
    );
    assert_eq!(
        said(LayerError::Create("/l".into(), Error::NOENT)),
        format!("cannot create the writable layer /l: {}; its parent directory does not exist: create that first", Error::NOENT)
    );
    assert_eq!(
        said(LayerError::InUse { dir: "/l".into(), by: Some(7) }),
        "the writable layer /l is in use by another launch (process 7); one launch at a time can use a layer directory (overlayfs cannot share it): wait for that one to end, or give another directory"
    );
    assert_eq!(
        said(LayerError::NotALayer { dir: "/l".into(), why: Foreign::Holds("x".into()) }),
        "/l is not a writable layer made by squashfs-mount (it holds x but no stamp); give an empty or new directory"
    );
    assert_eq!(
        said(LayerError::PartlyRemoved { dir: "/l".into(), name: "0".into() }),
        "/l is what is left of a writable layer (it holds 0 but no stamp: was it partly removed?); remove the rest with: chmod -R u+rwX /l && rm -rf /l (or give another directory)"
    );
    assert_eq!(
        said(LayerError::OverlayRefused {
            e: Error::INVAL,
            log: vec!["a".into(), "b".into()]
        }),
        format!(
            "overlayfs refused the layer: {} (kernel: a; b)",
            Error::INVAL
        )
    );
    assert_eq!(
        said(LayerError::OpenToOthers { dir: "/l".into(), mode: 0o770 }),
        "the writable layer /l is writable by its group or others (mode 0770), who could change your layer: chmod go-w it, or give another directory"
    );
    assert!(said(LayerError::FileSystem {
        dir: "/l".into(),
        magic: 0x6969
    })
    .starts_with("the writable layer /l is on NFS, which overlayfs"));
    assert_eq!(
        said(LayerError::NoHelperNextToPlugin),
        "--squashfs-writable=DIR needs squashfs-mount-layer installed next to the plugin"
    );
}
