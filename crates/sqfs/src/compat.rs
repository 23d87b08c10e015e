//! The mksquashfs spellings people type (`-comp xz`, `-b 1M`, `-e ...`,
//! `-ef FILE`, `-wildcards`, `-all-root`, `-noappend`...), translated into
//! sqfs's options before the command line is parsed, or answered with what
//! to use instead. Without this, clap reads `-comp` as `-c -o -m -p` and
//! answers with a misleading tip.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::exclude;

/// sqfs's long options that take a value (as the next argument unless
/// written `--opt=value`).
const VALUE_OPTIONS: &[&str] = &[
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
const MKSQUASHFS_OPTIONS: &[&str] = &[
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
fn answer(option: &str, sub: &str) -> String {
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

fn is_value_option(a: &str) -> bool {
    VALUE_OPTIONS.contains(&a)
}

/// Short options sqfs has (`-f`, `-q`, `-h`, `-V`), alone or clustered.
fn is_short_cluster(a: &str) -> bool {
    a.len() >= 2
        && a.starts_with('-')
        && !a.starts_with("--")
        && a[1..].chars().all(|c| matches!(c, 'f' | 'q' | 'h' | 'V'))
}

/// Whether `args` (translated) ask for the version: `--version` or `-V`
/// anywhere before `--`, except as the value of an option, so that
/// `sqfs pack --version` works as `sqfs --version` does.
pub fn wants_version(args: &[OsString]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a == "--" {
            return false;
        }
        if a == "--version" || (is_short_cluster(&a) && a.contains('V')) {
            return true;
        }
        i += if is_value_option(&a) { 2 } else { 1 };
    }
    false
}

/// Rewrites `args` (without argv[0]). Errors are usage errors.
pub fn translate(args: &[OsString]) -> Result<Vec<OsString>, String> {
    // The subcommand: the first word that is not an option.
    let sub_at = args
        .iter()
        .position(|a| !a.to_string_lossy().starts_with('-'));
    let sub = sub_at
        .map(|i| args[i].to_string_lossy().into_owned())
        .unwrap_or_default();
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let wildcards = args[..end].iter().any(|a| a == "-wildcards");
    // The positional arguments of the subcommand (for pack: DIR first).
    let mut positionals: Vec<&OsStr> = Vec::new();
    {
        let mut i = sub_at.map_or(args.len(), |i| i + 1);
        while i < end {
            let a = args[i].to_string_lossy();
            if a == "-e" {
                break;
            }
            if is_value_option(&a)
                || matches!(
                    &*a,
                    "-comp" | "-b" | "-ef" | "-processors" | "-Xcompression-level"
                )
            {
                i += 2;
                continue;
            }
            if !a.starts_with('-') || a == "-" {
                positionals.push(&args[i]);
            }
            i += 1;
        }
    }
    let dir = positionals.first().map(PathBuf::from);
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let raw = &args[i];
        let a = raw.to_string_lossy();
        i += 1;
        if i > end {
            out.push(raw.clone());
            continue;
        }
        let value = |i: usize, what: &str| -> Result<OsString, String> {
            args.get(i)
                .filter(|v| i < end && !v.is_empty())
                .cloned()
                .ok_or_else(|| format!("'{a}' needs {what}"))
        };
        let before_sub = sub_at.is_none_or(|s| i - 1 < s);
        match &*a {
            "-version" => out.push("--version".into()),
            "-help" => out.push("--help".into()),
            _ if before_sub => out.push(raw.clone()),
            _ if a.starts_with("--") || a == "-" || !a.starts_with('-') => {
                out.push(raw.clone());
                if is_value_option(&a) {
                    if let Some(v) = args.get(i) {
                        out.push(v.clone());
                        i += 1;
                    }
                }
            }
            _ if is_short_cluster(&a) => out.push(raw.clone()),
            "-comp" if sub == "pack" || sub == "bench" => {
                out.extend([
                    "--comp".into(),
                    value(i, "a compressor name (zstd, gzip, lz4, lzo or xz)")?,
                ]);
                i += 1;
            }
            "-b" if sub == "pack" || sub == "bench" => {
                out.extend([
                    "--block-size".into(),
                    value(i, "a block size such as 128K or 1M")?,
                ]);
                i += 1;
            }
            "-processors" if sub == "pack" => {
                out.extend(["--processors".into(), value(i, "a number")?]);
                i += 1;
            }
            "-Xcompression-level" if sub == "pack" => {
                out.extend(["--level".into(), value(i, "a level")?]);
                i += 1;
            }
            "-Xhc" if sub == "pack" => out.extend(["--level".into(), "9".into()]),
            "-all-root" | "-root-owned" if sub == "pack" => out.push("--all-root".into()),
            "-no-xattrs" if sub == "pack" => out.push("--no-xattrs".into()),
            "-quiet" if sub == "pack" => out.push("--quiet".into()),
            "-no-progress" if sub == "pack" => out.push("--no-progress".into()),
            // What sqfs pack always does: nothing to translate.
            "-noappend" | "-no-exports" | "-xattrs" | "-exit-on-error" | "-no-recovery"
            | "-reproducible" | "-not-reproducible" | "-info" | "-progress" | "-wildcards"
                if sub == "pack" => {}
            "-ef" if sub == "pack" => {
                let file = PathBuf::from(value(i, "a file of paths to exclude")?);
                i += 1;
                for line in exclude_file_lines(&file)? {
                    if let Some(p) = mksquashfs_exclude(&line, wildcards, dir.as_deref())? {
                        out.extend(["--exclude-quiet".into(), p.into()]);
                    }
                }
            }
            "-e" if sub == "pack" => {
                if i >= end {
                    return Err("'-e' needs the paths to exclude after it (it takes the rest of the command line, as in mksquashfs)".into());
                }
                for path in &args[i..end] {
                    let path = path.to_string_lossy();
                    if let Some(p) = mksquashfs_exclude(&path, wildcards, dir.as_deref())? {
                        out.extend(["--exclude-quiet".into(), p.into()]);
                    }
                }
                i = end;
            }
            _ if MKSQUASHFS_OPTIONS.contains(&&*a) || a.starts_with("-X") => {
                return Err(answer(&a, &sub));
            }
            _ => {
                return Err(format!(
                    "unknown option '{a}'; sqfs's options start with '--' (see 'sqfs {}--help')",
                    if sub.is_empty() {
                        String::new()
                    } else {
                        format!("{sub} ")
                    }
                ))
            }
        }
    }
    Ok(out)
}

/// The lines of a mksquashfs exclude file, read as mksquashfs reads them:
/// leading white space skipped, `#` lines skipped, a leading `\` removed.
fn exclude_file_lines(file: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read(file)
        .map_err(|e| format!("-ef {}: {}", file.display(), crate::units::io_error(&e)))?;
    Ok(String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            if l.starts_with('#') {
                return None;
            }
            let l = l.strip_prefix('\\').unwrap_or(l);
            (!l.is_empty()).then(|| l.to_string())
        })
        .collect())
}

/// One mksquashfs exclusion as an sqfs pattern. Without -wildcards it is a
/// path (relative to DIR, or starting with /, ./ or ../ relative to the
/// current directory); with it, a wildcard pattern anchored at DIR, or at
/// any depth after "... ". `None`: it cannot name anything in DIR.
fn mksquashfs_exclude(
    text: &str,
    wildcards: bool,
    dir: Option<&Path>,
) -> Result<Option<String>, String> {
    if wildcards {
        if text.starts_with('/') || text.starts_with("./") || text.starts_with("../") {
            return Err(format!(
                "-e '{text}': with -wildcards, exclusions are relative to the packed directory (as in mksquashfs)"
            ));
        }
        return Ok(Some(match text.strip_prefix("... ") {
            Some(rest) if rest.contains('/') => format!("**/{rest}"),
            Some(rest) => rest.to_string(),
            None => format!("/{text}"),
        }));
    }
    if text.starts_with('/') || text.starts_with("./") || text.starts_with("../") {
        let (Some(dir), Ok(path)) = (dir, Path::new(text).canonicalize()) else {
            return Ok(None);
        };
        let Ok(top) = dir.canonicalize() else {
            return Ok(None);
        };
        return Ok(path
            .strip_prefix(&top)
            .ok()
            .filter(|r| !r.as_os_str().is_empty())
            .map(|r| exclude::literal(r.as_os_str())));
    }
    Ok(Some(exclude::literal(OsStr::new(
        text.trim_end_matches('/'),
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str]) -> Result<Vec<String>, String> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        translate(&args).map(|v| {
            v.into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        })
    }

    #[test]
    fn mksquashfs_spellings_become_sqfs_options() {
        assert_eq!(
            t(&[
                "pack",
                "d",
                "i.sqfs",
                "-comp",
                "xz",
                "-b",
                "1M",
                "-noappend",
                "-all-root",
                "-no-xattrs"
            ])
            .unwrap(),
            [
                "pack",
                "d",
                "i.sqfs",
                "--comp",
                "xz",
                "--block-size",
                "1M",
                "--all-root",
                "--no-xattrs"
            ]
        );
        assert_eq!(
            t(&[
                "pack",
                "-Xcompression-level",
                "19",
                "-processors",
                "2",
                "-quiet",
                "d",
                "i"
            ])
            .unwrap(),
            [
                "pack",
                "--level",
                "19",
                "--processors",
                "2",
                "--quiet",
                "d",
                "i"
            ]
        );
        assert_eq!(
            t(&["bench", "-comp", "lz4", "d"]).unwrap(),
            ["bench", "--comp", "lz4", "d"]
        );
        assert_eq!(t(&["-version"]).unwrap(), ["--version"]);
        // sqfs's own options and their values pass through untouched.
        assert_eq!(
            t(&["pack", "--exclude", "-x", "--level=3", "-f", "d", "i"]).unwrap(),
            ["pack", "--exclude", "-x", "--level=3", "-f", "d", "i"]
        );
    }

    #[test]
    fn excludes_keep_mksquashfs_meaning() {
        assert_eq!(
            t(&["pack", "d", "i", "-e", "a/b", "c*"]).unwrap(),
            [
                "pack",
                "d",
                "i",
                "--exclude-quiet",
                "/a/b",
                "--exclude-quiet",
                "/c\\*"
            ]
        );
        assert_eq!(
            t(&[
                "pack",
                "d",
                "i",
                "-wildcards",
                "-e",
                "a/*.o",
                "... *.pyc",
                "... x/y"
            ])
            .unwrap(),
            [
                "pack",
                "d",
                "i",
                "--exclude-quiet",
                "/a/*.o",
                "--exclude-quiet",
                "*.pyc",
                "--exclude-quiet",
                "**/x/y"
            ]
        );
        assert!(t(&["pack", "d", "i", "-wildcards", "-e", "/abs"]).is_err());
        assert!(t(&["pack", "d", "i", "-e"]).unwrap_err().contains("needs"));
    }

    #[test]
    fn exclude_files_are_read_like_mksquashfs() {
        let dir = std::env::temp_dir().join(format!("sqfs-compat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ex");
        std::fs::write(&f, "# comment\n  lead\n\\#hash\n\n tail/\n").unwrap();
        let got = t(&["pack", "d", "i", "-ef", f.to_str().unwrap()]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            got,
            [
                "pack",
                "d",
                "i",
                "--exclude-quiet",
                "/lead",
                "--exclude-quiet",
                "/#hash",
                "--exclude-quiet",
                "/tail"
            ]
        );
    }

    #[test]
    fn other_options_get_an_answer() {
        let e = t(&["pack", "d", "i", "-nopad"]).unwrap_err();
        assert!(
            e.contains("mksquashfs option") && e.contains("loop device"),
            "{e}"
        );
        let e = t(&["pack", "d", "i", "-mkfs-time", "5"]).unwrap_err();
        assert!(e.contains("SOURCE_DATE_EPOCH"), "{e}");
        let e = t(&["pack", "d", "i", "-regex", "-e", "x"]).unwrap_err();
        assert!(e.contains("glob"), "{e}");
        let e = t(&["pack", "d", "i", "-no-fragments"]).unwrap_err();
        assert!(e.contains("does not offer"), "{e}");
        let e = t(&["pack", "-xyz", "d", "i"]).unwrap_err();
        assert!(
            e.contains("unknown option '-xyz'") && e.contains("sqfs pack --help"),
            "{e}"
        );
        let e = t(&["inspect", "-s", "i"]).unwrap_err();
        assert!(e.contains("unknown option '-s'"), "{e}");
        assert_eq!(
            t(&["pack", "-fq", "d", "i"]).unwrap(),
            ["pack", "-fq", "d", "i"]
        );
    }

    #[test]
    fn version_anywhere() {
        let v = |a: &[&str]| wants_version(&a.iter().map(OsString::from).collect::<Vec<_>>());
        assert!(v(&["--version"]));
        assert!(v(&["-V"]));
        assert!(v(&["pack", "--version"]));
        assert!(!v(&["pack", "--exclude", "--version", "d", "i"]));
        assert!(!v(&["bench", "d", "--run", "-V"]));
        assert!(!v(&["pack", "d", "i"]));
    }
}
