//! mksquashfs's exclusions (`-e`, `-ef`, `-wildcards`) as sqfs patterns.

use std::ffi::OsStr;
use std::path::Path;

use super::error::CompatError;
use crate::error::FileError;
use crate::exclude;

/// The lines of a mksquashfs exclude file, read as mksquashfs reads them:
/// leading white space skipped, `#` lines skipped, a leading `\` removed.
pub(super) fn exclude_file_lines(file: &Path) -> Result<Vec<String>, CompatError> {
    let text =
        std::fs::read(file).map_err(|e| CompatError::ExcludeFile(FileError::new(file, e)))?;
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
pub(super) fn mksquashfs_exclude(
    text: &str,
    wildcards: bool,
    dir: Option<&Path>,
) -> Result<Option<String>, CompatError> {
    if wildcards {
        if text.starts_with('/') || text.starts_with("./") || text.starts_with("../") {
            return Err(CompatError::NotRelative(text.to_string()));
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
