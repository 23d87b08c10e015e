//! The command's environment, built only after privileges are gone.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::cli::forwarded_name;

/// The caller's environment, plus `NAME=value` for each
/// `SQFSMNT_FWD_NAME=value`, plus `UENV_MOUNT_LIST` (when given).
pub(crate) fn for_command(
    caller_env: impl IntoIterator<Item = (OsString, OsString)>,
    mount_list: Option<&OsStr>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut forwarded = Vec::new();
    for (name, value) in caller_env {
        if let Some(target) = forwarded_name(&name) {
            forwarded.push((target.to_owned(), value.clone()));
        }
        env.push((name, value));
    }
    let mut set = |name: OsString, value: OsString| {
        env.retain(|(n, _)| n != &name);
        env.push((name, value));
    };
    for (name, value) in forwarded {
        set(name, value);
    }
    if let Some(list) = mount_list {
        set("UENV_MOUNT_LIST".into(), list.to_owned());
    }
    env
}

/// `image:mountpoint,...` with absolute paths, in mount order.
pub(crate) fn mount_list<'a>(pairs: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>) -> OsString {
    let mut out: Vec<u8> = Vec::new();
    for (image, mount_point) in pairs {
        if !out.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(image.as_bytes());
        out.push(b':');
        out.extend_from_slice(mount_point.as_bytes());
    }
    OsStr::from_bytes(&out).to_owned()
}

/// Says why the command `program` did not run (`err`, from exec), with
/// [`not_found_hint`] when it was not found or not executable, and returns
/// the shell's status for it: 127 when it was not found, 126 otherwise.
pub(crate) fn exec_failed(program: &OsStr, err: &std::io::Error, mount_list: Option<&OsStr>) -> u8 {
    use std::io::ErrorKind::{NotFound, PermissionDenied};
    let hint = if matches!(err.kind(), NotFound | PermissionDenied) {
        not_found_hint(program, mount_list)
    } else {
        String::new()
    };
    crate::system::error::report(format_args!(
        "cannot run {}: {}{hint}",
        program.to_string_lossy(),
        crate::system::error::io_message(err)
    ));
    if err.kind() == NotFound {
        127
    } else {
        126
    }
}

/// For a command that was not found, or only in directories of PATH the
/// caller cannot search (`program`, no '/' in it): where the
/// mounted images have it, or that their programs are under their mount
/// points (`mount_list`: UENV_MOUNT_LIST, `image:mountpoint,...`), which
/// the caller's PATH does not name. Empty when there is nothing to add.
fn not_found_hint(program: &OsStr, mount_list: Option<&OsStr>) -> String {
    if program.as_bytes().contains(&b'/') {
        return String::new();
    }
    let points: Vec<&std::path::Path> = mount_list
        .map(|l| l.as_bytes())
        .unwrap_or_default()
        .split(|&b| b == b',')
        .filter_map(|pair| {
            let at = pair.iter().rposition(|&b| b == b':')?;
            Some(std::path::Path::new(OsStr::from_bytes(&pair[at + 1..])))
        })
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let Some(first) = points.first() else {
        return String::new();
    };
    for point in &points {
        for dir in ["bin", "usr/bin", "env/bin", "venv/bin", ""] {
            let candidate = point.join(dir).join(program);
            if candidate.is_file() {
                return format!(
                    "; it is not on your PATH, but the image has {}: run it by that path",
                    candidate.display()
                );
            }
        }
    }
    format!(
        "; it is not on your PATH, and the images' programs are under their mount points: run them by their path (e.g. {}/bin/{}), or put their directory first on PATH inside the command",
        first.display(),
        program.to_string_lossy()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter().map(|(a, b)| (a.into(), b.into())).collect()
    }

    #[test]
    fn forwarding_overrides_and_keeps_the_rest() {
        let out = for_command(
            e(&[
                ("PATH", "/bin"),
                ("SQFSMNT_FWD_LD_LIBRARY_PATH", "foo"),
                ("LD_LIBRARY_PATH", "old"),
                ("SQFSMNT_FWD_BASH_FUNC_f%%", "() { :; }"),
            ]),
            Some(OsStr::new("/a.sqfs:/m")),
        );
        let get = |n: &str| {
            out.iter()
                .filter(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(get("LD_LIBRARY_PATH"), ["foo"]);
        assert_eq!(get("PATH"), ["/bin"]);
        assert_eq!(get("BASH_FUNC_f%%"), ["() { :; }"]);
        assert_eq!(get("UENV_MOUNT_LIST"), ["/a.sqfs:/m"]);
        assert_eq!(get("SQFSMNT_FWD_LD_LIBRARY_PATH"), ["foo"]);
    }

    #[test]
    fn mount_list_format() {
        let l = mount_list([
            (OsStr::new("/a"), OsStr::new("/x")),
            (OsStr::new("/b"), OsStr::new("/y")),
        ]);
        assert_eq!(l, "/a:/x,/b:/y");
    }
}
