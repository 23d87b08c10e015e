//! The options sqfs takes, and the mksquashfs options it does not (with
//! what to use instead).

/// sqfs's long options that take a value (as the next argument unless
/// written `--opt=value`).
pub(super) const VALUE_OPTIONS: &[&str] = &[
    "--comp",
    "--level",
    "--block-size",
    "--processors",
    "--split",
    "--depth",
    "--exclude",
    "--exclude-from",
    "--exclude-quiet",
    "--run",
    "--runs",
    "--mountpoint",
    "--work-dir",
    "--svg",
    "--order",
    "--output",
];

/// mksquashfs 4.5/4.6 options sqfs does not offer (see [`answer`]).
pub(super) const MKSQUASHFS_OPTIONS: &[&str] = &[
    "-tar",
    "-no-strip",
    "-tarstyle",
    "-cpiostyle",
    "-cpiostyle0",
    "-mkfs-time",
    "-fstime",
    "-all-time",
    "-exports",
    "-no-sparse",
    "-noI",
    "-noId",
    "-noD",
    "-noF",
    "-noX",
    "-no-tailends",
    "-tailends",
    "-no-fragments",
    "-always-use-fragments",
    "-no-duplicates",
    "-no-hardlinks",
    "-root-time",
    "-root-mode",
    "-root-uid",
    "-root-gid",
    "-force-uid",
    "-force-gid",
    "-keep-as-directory",
    "-action",
    "-log-action",
    "-true-action",
    "-false-action",
    "-action-file",
    "-log-action-file",
    "-true-action-file",
    "-false-action-file",
    "-p",
    "-pf",
    "-sort",
    "-regex",
    "-one-file-system",
    "-root-becomes",
    "-recover",
    "-recovery-path",
    "-throttle",
    "-limit",
    "-mem",
    "-nopad",
    "-offset",
    "-o",
    "-noInodeCompression",
    "-noIdTableCompression",
    "-noDataCompression",
    "-noFragmentCompression",
    "-noXattrCompression",
    "-Xhelp",
    "-Xbcj",
    "-Xdict-size",
    "-Xwindow-size",
    "-Xstrategy",
    "-Xalgorithm",
];

/// What to say to a mksquashfs option sqfs does not take.
pub(super) fn answer(option: &str, sub: &str) -> String {
    let why = match option {
        "-nopad" => "sqfs pack always pads images to 4 KiB: without padding the kernel cannot read the end of an image from a loop device".to_string(),
        "-mkfs-time" | "-fstime" | "-all-time" | "-root-time" => "sqfs pack sets the image's time stamp to the newest file time in the tree; set SOURCE_DATE_EPOCH to choose it, or use --reproducible to set every file's time too".to_string(),
        "-force-uid" | "-force-gid" | "-root-uid" | "-root-gid" => "sqfs pack keeps owners, or makes root own everything with --all-root (--reproducible does that too)".to_string(),
        "-sort" => "sqfs pack --order FILE takes a list of paths to store first (as 'sqfs trace' writes it) and gives mksquashfs the priorities".to_string(),
        "-regex" => "sqfs pack's --exclude takes glob patterns (*, ?, [..], **), not regular expressions; see 'sqfs pack --help'".to_string(),
        "-o" | "-offset" => "sqfs pack writes images that start at the beginning of the file, as squashfs-mount needs".to_string(),
        _ => format!("sqfs {sub} does not offer it; see 'sqfs {sub} --help' for what it does offer, or run mksquashfs yourself and check the image with 'sqfs inspect'"),
    };
    format!("'{option}' is a mksquashfs option: {why}")
}

pub(super) fn is_value_option(a: &str) -> bool {
    VALUE_OPTIONS.contains(&a)
}

/// Short options sqfs has (`-f`, `-q`, `-h`, `-V`), alone or clustered.
pub(super) fn is_short_cluster(a: &str) -> bool {
    a.len() >= 2
        && a.starts_with('-')
        && !a.starts_with("--")
        && a[1..].chars().all(|c| matches!(c, 'f' | 'q' | 'h' | 'V'))
}
