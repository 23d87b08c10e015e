//! Which file systems can hold an overlay's upper layer (`dir::judge`
//! judges DIR by statfs before anything is mounted), and the refusal's
//! words. Pure.
//!
//! Overlayfs needs an upper file system with xattrs (user.overlay.* here),
//! RENAME_WHITEOUT and tmpfiles: local disks have them; network and
//! cluster file systems (where home and project directories usually are)
//! do not, FUSE and overlay are refused by the kernel (the reason only in
//! its log, or a read-only mount). An allow-list, so that an unknown file
//! system is refused with its magic number rather than failing later.

/// File systems accepted as the upper layer (statfs f_type, name).
pub const ACCEPTED: [(u64, &str); 5] = [
    (0xEF53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0xF2F5_2010, "f2fs"),
    (0x0102_1994, "tmpfs"),
];

/// Known file systems overlayfs cannot keep an upper layer on.
pub const REFUSED: [(u64, &str); 11] = [
    (0x6969, "NFS"),
    (0x0BD0_0BD0, "Lustre"),
    (0x4750_4653, "GPFS (Spectrum Scale)"),
    (0x1983_0326, "BeeGFS"),
    (0x00C3_6400, "CephFS"),
    (0xFF53_4D42, "CIFS"),
    (0xFE53_4D42, "SMB2"),
    (0x0102_1997, "9p"),
    (0x6573_5546, "FUSE"),
    (0x794C_7630, "overlay"),
    (0x7371_7368, "squashfs (read-only)"),
];

/// Ok(name) for an accepted file system; otherwise the refusal of `dir`.
pub(crate) fn refusal(f: &mut std::fmt::Formatter<'_>, magic: u64, dir: &str) -> std::fmt::Result {
    let what = match REFUSED.iter().find(|(m, _)| *m == magic) {
        Some((_, name)) => format!("is on {name}"),
        None => format!(
            "is on a file system (statfs type {magic:#x}) not known to hold an overlay upper layer"
        ),
    };
    let accepted: Vec<&str> = ACCEPTED.iter().map(|(_, n)| *n).collect();
    write!(
        f,
        "the writable layer {dir} {what}, which overlayfs cannot keep a writable layer on; give a directory on a node-local disk or in memory ({}), e.g. --writable=/tmp/$USER-layer or a directory under $TMPDIR on a compute node",
        accepted.join(", ")
    )
}
