//! The mksquashfs spellings people type (`-comp xz`, `-b 1M`, `-e ...`,
//! `-ef FILE`, `-wildcards`, `-all-root`, `-noappend`...), translated into
//! sqfs's options before the command line is parsed, or answered with what
//! to use instead. Without this, clap reads `-comp` as `-c -o -m -p` and
//! answers with a misleading tip.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

mod error;
mod exclusions;
mod options;

pub use error::CompatError;

use exclusions::{exclude_file_lines, mksquashfs_exclude};
use options::{is_short_cluster, is_value_option, MKSQUASHFS_OPTIONS};

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

/// Rewrites `args` (without `argv[0]`). Errors are usage errors.
pub fn translate(args: &[OsString]) -> Result<Vec<OsString>, CompatError> {
    // The subcommand: the first word that is not an option.
    let sub_at = args
        .iter()
        .position(|a| !a.to_string_lossy().starts_with('-'));
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let line = Line {
        args,
        sub: sub_at
            .map(|i| args[i].to_string_lossy().into_owned())
            .unwrap_or_default(),
        end,
        wildcards: args[..end].iter().any(|a| a == "-wildcards"),
        dir: positionals(args, sub_at, end).first().map(PathBuf::from),
    };
    let sub = &line.sub;
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
            _ if line.spelling(&a, &mut i, &mut out)? => {}
            _ if MKSQUASHFS_OPTIONS.contains(&&*a) || a.starts_with("-X") => {
                return Err(CompatError::Mksquashfs(a.into_owned(), sub.clone()));
            }
            _ => return Err(CompatError::Unknown(a.into_owned(), sub.clone())),
        }
    }
    Ok(out)
}

/// The positional arguments of the subcommand (for pack: DIR first).
fn positionals(args: &[OsString], sub_at: Option<usize>, end: usize) -> Vec<&OsStr> {
    let mut positionals: Vec<&OsStr> = Vec::new();
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
    positionals
}

/// A command line being translated.
struct Line<'a> {
    args: &'a [OsString],
    /// The subcommand ("" for none).
    sub: String,
    /// Where `--` is (or the end).
    end: usize,
    /// `-wildcards` was given.
    wildcards: bool,
    /// pack's DIR.
    dir: Option<PathBuf>,
}

impl Line<'_> {
    /// The value of option `a` at `i`, or what it needs.
    fn value(&self, i: usize, a: &str, what: &'static str) -> Result<OsString, CompatError> {
        self.args
            .get(i)
            .filter(|v| i < self.end && !v.is_empty())
            .cloned()
            .ok_or_else(|| CompatError::NeedsValue(a.to_string(), what))
    }

    /// Translates the mksquashfs spelling `a` (its value at `*i`) into
    /// `out`; false if `a` is not one sqfs translates for this subcommand.
    fn spelling(
        &self,
        a: &str,
        i: &mut usize,
        out: &mut Vec<OsString>,
    ) -> Result<bool, CompatError> {
        let sub = self.sub.as_str();
        let pack = sub == "pack";
        let option = match a {
            "-comp" if pack || sub == "bench" => {
                Some(("--comp", "a compressor name (zstd, gzip, lz4, lzo or xz)"))
            }
            "-b" if pack || sub == "bench" => {
                Some(("--block-size", "a block size such as 128K or 1M"))
            }
            "-processors" if pack => Some(("--processors", "a number")),
            "-Xcompression-level" if pack => Some(("--level", "a level")),
            _ => None,
        };
        if let Some((long, what)) = option {
            out.extend([long.into(), self.value(*i, a, what)?]);
            *i += 1;
            return Ok(true);
        }
        match a {
            "-Xhc" if pack => out.extend(["--level".into(), "9".into()]),
            "-all-root" | "-root-owned" if pack => out.push("--all-root".into()),
            "-no-xattrs" if pack => out.push("--no-xattrs".into()),
            "-quiet" if pack => out.push("--quiet".into()),
            "-no-progress" if pack => out.push("--no-progress".into()),
            // What sqfs pack always does: nothing to translate.
            "-noappend" | "-no-exports" | "-xattrs" | "-exit-on-error" | "-no-recovery"
            | "-reproducible" | "-not-reproducible" | "-info" | "-progress" | "-wildcards"
                if pack => {}
            "-ef" if pack => {
                let file = PathBuf::from(self.value(*i, a, "a file of paths to exclude")?);
                *i += 1;
                let lines = exclude_file_lines(&file)?;
                self.exclusions(lines.iter().map(String::as_str), out)?;
            }
            "-e" if pack => {
                if *i >= self.end {
                    return Err(CompatError::NoPathsAfterE);
                }
                let paths: Vec<String> = self.args[*i..self.end]
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                self.exclusions(paths.iter().map(String::as_str), out)?;
                *i = self.end;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// mksquashfs exclusions as `--exclude-quiet` patterns.
    fn exclusions<'b>(
        &self,
        texts: impl Iterator<Item = &'b str>,
        out: &mut Vec<OsString>,
    ) -> Result<(), CompatError> {
        for text in texts {
            if let Some(p) = mksquashfs_exclude(text, self.wildcards, self.dir.as_deref())? {
                out.extend(["--exclude-quiet".into(), p.into()]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str]) -> Result<Vec<String>, String> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        translate(&args).map_err(|e| e.to_string()).map(|v| {
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
