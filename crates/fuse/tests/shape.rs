//! The crate's shape, as for every crate of the workspace (issue 29): no
//! non-test source file over 450 lines, no function over 80 lines, and
//! typed errors (no `Result<_, String>`) outside tests. Read from the
//! sources as rustfmt lays them out; no root needed.

use std::fs;
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each source file and its text up to its tests (`#[cfg(test)]`).
fn sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(Path::new(SRC), &mut files);
    files.sort();
    assert!(files.len() >= 8, "only {} files found", files.len());
    files
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(&p).expect("read");
            let code = match text.find("\n#[cfg(test)]") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            (p.display().to_string(), code)
        })
        .collect()
}

/// The name of the function a line declares, and its indentation.
fn function(line: &str) -> Option<(&str, usize)> {
    let indent = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    for prefix in ["const ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some((&name[..end], indent))
}

/// Every function with a body: (file, name, lines from `fn` to its `}`).
fn functions() -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (file, text) in sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some((name, indent)) = function(line) else {
                continue;
            };
            let Some(end) = (i..lines.len()).find(|&j| {
                let l = lines[j].trim_end();
                l.ends_with('{') || l.ends_with('}') || l.ends_with(';')
            }) else {
                continue;
            };
            let last = lines[end].trim_end();
            let len = if last.ends_with(';') {
                continue;
            } else if last.ends_with('}') {
                end - i + 1
            } else {
                let close = format!("{}}}", " ".repeat(indent));
                match (end..lines.len()).find(|&j| lines[j] == close) {
                    Some(j) => j - i + 1,
                    None => panic!("{file}: no end of fn {name}"),
                }
            };
            out.push((file.clone(), name.to_string(), len));
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_80_lines() {
    let all = functions();
    assert!(all.len() > 60, "only {} functions found", all.len());
    let long: Vec<_> = all.iter().filter(|(_, _, n)| *n > 80).collect();
    assert!(long.is_empty(), "functions over 80 lines: {long:?}");
}

#[test]
fn no_file_is_longer_than_450_lines() {
    let long: Vec<_> = sources()
        .into_iter()
        .map(|(f, text)| (f, text.lines().count()))
        .filter(|(_, n)| *n > 450)
        .collect();
    assert!(long.is_empty(), "files over 450 lines: {long:?}");
}

#[test]
fn errors_are_typed() {
    let untyped: Vec<_> = sources()
        .into_iter()
        .flat_map(|(f, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.contains("Result<") && l.contains(", String>"))
                .map(|(n, l)| format!("{f}:{}: {}", n + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(untyped.is_empty(), "Result<_, String>: {untyped:?}");
}
