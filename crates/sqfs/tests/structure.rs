//! The sqfs crate keeps the workspace's shape rules (issue 29): no non-test
//! source file over 450 lines, no function over 80 lines (from its `fn` line
//! to its closing brace), and no `Result<_, String>` outside tests. Read
//! from the sources as rustfmt lays them out; a file's trailing
//! `#[cfg(test)] mod tests` block and files named `*tests.rs` do not count.

use std::fs;
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const MAX_FILE: usize = 450;
const MAX_FN: usize = 80;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path.to_string_lossy().ends_with("tests.rs")
        {
            out.push(path);
        }
    }
}

/// Each non-test source file (path below src/) with its lines, cut before a
/// `#[cfg(test)]` that opens the tests module at the end of the file.
fn sources() -> Vec<(String, Vec<String>)> {
    let mut files = Vec::new();
    rust_files(Path::new(SRC), &mut files);
    files.sort();
    assert!(files.len() > 15, "only {} files found", files.len());
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(SRC).expect("below src").display();
            let text = fs::read_to_string(&p).expect("read");
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            if let Some(i) = tests_at_end(&lines) {
                lines.truncate(i);
            }
            (rel.to_string(), lines)
        })
        .collect()
}

/// Where a `#[cfg(test)] mod tests { ... }` that closes the file starts.
fn tests_at_end(lines: &[String]) -> Option<usize> {
    let i = lines
        .windows(2)
        .position(|w| w[0] == "#[cfg(test)]" && w[1].starts_with("mod tests"))?;
    let close = (i + 2..lines.len()).find(|&j| lines[j] == "}")?;
    lines[close + 1..]
        .iter()
        .all(|l| l.trim().is_empty())
        .then_some(i)
}

/// The name of the function a line declares, and its indentation.
fn function(line: &str) -> Option<(&str, usize)> {
    let indent = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    for prefix in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some((&name[..end], indent))
}

/// Every function with a body: (file, name, lines from `fn` to its `}`).
fn functions() -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (file, lines) in sources() {
        for (i, line) in lines.iter().enumerate() {
            let Some((name, indent)) = function(line) else {
                continue;
            };
            // The signature ends with the body's `{`, or `;` (no body).
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
fn no_source_file_is_longer_than_450_lines() {
    let files = sources();
    let largest = files
        .iter()
        .map(|(f, l)| (l.len(), f))
        .max()
        .expect("files");
    eprintln!("largest file: {} ({} lines)", largest.1, largest.0);
    let long: Vec<_> = files
        .iter()
        .filter(|(_, l)| l.len() > MAX_FILE)
        .map(|(f, l)| (f, l.len()))
        .collect();
    assert!(long.is_empty(), "files over {MAX_FILE} lines: {long:?}");
}

#[test]
fn no_function_is_longer_than_80_lines() {
    let all = functions();
    assert!(all.len() > 150, "only {} functions found", all.len());
    let longest = all.iter().max_by_key(|(_, _, n)| *n).expect("functions");
    eprintln!(
        "longest function: {}::{} ({} lines)",
        longest.0, longest.1, longest.2
    );
    let long: Vec<_> = all.iter().filter(|(_, _, n)| *n > MAX_FN).collect();
    assert!(long.is_empty(), "functions over {MAX_FN} lines: {long:?}");
}

#[test]
fn no_error_is_a_bare_string() {
    let mut found = Vec::new();
    for (file, lines) in sources() {
        for (i, line) in lines.iter().enumerate() {
            // `Result<T, String>` and `Result<(), String>`, also split over lines.
            let joined = format!("{} {}", line, lines.get(i + 1).map_or("", |l| l.trim()));
            if line.contains("Result<")
                && (line.contains(", String>") || joined.contains(", String>"))
            {
                found.push(format!("{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "Result<_, String> in sqfs: {found:#?}");
}
