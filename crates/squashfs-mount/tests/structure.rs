//! The crates' shape stays as doc/architecture.md draws it.
//!
//! In every crate of the workspace: no non-test source file over 450 lines,
//! no function over 80 lines, no `Result<_, String>` outside tests (errors
//! are typed). In the setuid crate also: the privileged sequence
//! (`mount_all`) under 40 lines and made of its stages, no loop between
//! its modules, the crate root holding only entry points and rooms, every
//! room importing only rooms below it, and no file name used twice. Read
//! from the sources (as rustfmt lays them out); no root needed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

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

/// The Rust files below `dir`, named relative to `base`, with their text.
fn sources_in(base: &Path, dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(base)
                .expect("below the base")
                .display()
                .to_string();
            (rel, fs::read_to_string(&p).expect("read"))
        })
        .collect()
}

/// The setuid crate's sources, named relative to its src/.
fn sources() -> Vec<(String, String)> {
    sources_in(Path::new(SRC), Path::new(SRC))
}

/// The name of the function a line declares, and its indentation.
fn function(line: &str) -> Option<(&str, usize)> {
    let indent = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    for prefix in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some((&name[..end], indent))
}

/// A function with a body: its file, name, first line (1-based) and
/// length from `fn` to its `}`.
struct Function {
    file: String,
    name: String,
    line: usize,
    len: usize,
}

/// Every function with a body in `files`.
fn functions_in(files: &[(String, String)]) -> Vec<Function> {
    let mut out = Vec::new();
    for (file, text) in files {
        let lines: Vec<&str> = text.lines().collect();
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
            out.push(Function {
                file: file.clone(),
                name: name.to_string(),
                line: i + 1,
                len,
            });
        }
    }
    out
}

/// Every function with a body in the setuid crate.
fn functions() -> Vec<Function> {
    functions_in(&sources())
}

#[test]
fn mount_all_is_its_stages() {
    let all = functions();
    let mount_all = all
        .iter()
        .find(|f| f.file == "engine/mod.rs" && f.name == "mount_all")
        .expect("engine::mount_all");
    assert!(mount_all.len < 40, "mount_all has {} lines", mount_all.len);
    let text = fs::read_to_string(format!("{SRC}/engine/mod.rs")).expect("read");
    let body = &text[text.find("pub fn mount_all").expect("mount_all")..];
    // Each stage, a call into its own file, in order.
    let mut at = 0;
    for stage in [
        "admit::admit(",
        "plan::stage(",
        "kept_layer::check(",
        "route::open_and_route(",
        "Binds::pin(",
        "flight::open_cache(",
        "fuse_path::start(",
        "KernelSource::new(",
        "binds.copy(",
        "enter_private_mount_namespace(",
        "kernel.instances(",
        "attach::writable_layer(",
        "attach::all(",
        "report::mounted(",
    ] {
        let found = body[at..]
            .find(stage)
            .unwrap_or_else(|| panic!("{stage} is not (in order) in mount_all"));
        at += found + stage.len();
    }
}

/// The plugin goes through the sequence: it calls `mount_all` (on the
/// nodes) and `check` (its dry run, on the login node), never a stage
/// itself (issue 38).
#[test]
fn the_plugin_assembles_no_stage_of_the_sequence() {
    let spank = Path::new(WORKSPACE).join("crates/spank/src");
    let stages = [
        "config::load(",
        "admit(",
        "plan::build(",
        "plan::stage(",
        "Image::open(",
        "open_and_route(",
        "open_only(",
        "Binds::pin(",
        "open_sources(",
    ];
    for (file, text) in sources_in(&spank, &spank) {
        for stage in stages {
            assert!(
                !text.contains(stage),
                "crates/spank/src/{file} calls {stage}: a stage of the sequence; call engine::check or engine::mount_all"
            );
        }
    }
}

/// The crate's top-level modules (files and folders of src/, but lib.rs
/// and main.rs), and which of them each one names (`crate::module`).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let module = |file: &str| {
        let first = file.split('/').next().unwrap_or(file);
        first.trim_end_matches(".rs").to_string()
    };
    let names: BTreeSet<String> = files
        .iter()
        .map(|(f, _)| module(f))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in &files {
        let from = module(file);
        if !names.contains(&from) {
            continue;
        }
        let edges = graph.entry(from.clone()).or_default();
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let to = &rest[..end];
            if to != from && names.contains(to) {
                edges.insert(to.to_string());
            }
        }
    }
    graph
}

#[test]
fn no_module_imports_itself_through_others() {
    let graph = module_graph();
    assert!(graph.len() >= ROOMS.len(), "{graph:?}");
    // A depth-first search from each module for a way back to it.
    for start in graph.keys() {
        let mut stack: Vec<Vec<&String>> = vec![vec![start]];
        let mut seen = BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path[path.len() - 1];
            for next in graph.get(last).into_iter().flatten() {
                assert!(next != start, "a module loop: {path:?} -> {next}");
                if seen.insert(next) {
                    let mut longer = path.clone();
                    longer.push(next);
                    stack.push(longer);
                }
            }
        }
    }
}

// ---- The same rules for every crate of the workspace ----

/// Longest non-test source file, in lines.
const FILE_LINES_MAX: usize = 450;
/// Longest function, in lines (from `fn` to its closing `}`).
const FUNCTION_LINES_MAX: usize = 80;

/// The workspace's members (crates/NAME), from its Cargo.toml.
fn members() -> Vec<String> {
    let manifest = fs::read_to_string(format!("{WORKSPACE}/Cargo.toml")).expect("Cargo.toml");
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("members = [...]")
        .0;
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(|m| m.trim_start_matches("crates/").to_string())
        .collect()
}

/// The `mod NAME;` a line declares (any visibility), if it does.
fn module_declared(line: &str) -> Option<&str> {
    let mut rest = line.trim();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = match after.strip_prefix('(') {
            Some(v) => v.split_once(") ")?.1,
            None => after.strip_prefix(' ')?,
        };
    }
    let name = rest.strip_prefix("mod ")?.strip_suffix(';')?;
    name.chars()
        .all(|c| c.is_alphanumeric() || c == '_')
        .then_some(name)
}

/// The files (workspace-relative) of modules declared `#[cfg(test)]`, and
/// of the modules they declare: test code, whatever the file is called.
fn test_only_files(files: &[(String, String)]) -> BTreeSet<String> {
    let known: BTreeSet<&str> = files.iter().map(|(f, _)| f.as_str()).collect();
    let mut test_only = BTreeSet::new();
    loop {
        let before = test_only.len();
        for (file, text) in files {
            let (dir, stem) = file.rsplit_once('/').expect("a file in a folder");
            let stem = stem.trim_end_matches(".rs");
            // Where `mod x;` looks: beside mod.rs/lib.rs/main.rs, else in a
            // folder named after the file.
            let home = if ["mod", "lib", "main", "build"].contains(&stem) {
                dir.to_string()
            } else {
                format!("{dir}/{stem}")
            };
            let file_is_test = test_only.contains(file);
            let (mut cfg_test, mut path_attr) = (false, None);
            for line in text.lines() {
                let t = line.trim();
                if t == "#[cfg(test)]" {
                    cfg_test = true;
                } else if let Some(p) = t.strip_prefix("#[path = \"") {
                    path_attr = p.strip_suffix("\"]").map(str::to_string);
                } else if t.starts_with("#[") {
                } else {
                    if let Some(name) = module_declared(t).filter(|_| cfg_test || file_is_test) {
                        let candidates = match &path_attr {
                            Some(p) => vec![format!("{dir}/{p}")],
                            None => {
                                vec![format!("{home}/{name}.rs"), format!("{home}/{name}/mod.rs")]
                            }
                        };
                        for c in candidates
                            .into_iter()
                            .filter(|c| known.contains(c.as_str()))
                        {
                            test_only.insert(c);
                        }
                    }
                    cfg_test = false;
                    path_attr = None;
                }
            }
        }
        if test_only.len() == before {
            return test_only;
        }
    }
}

/// The lines (0-based) of `#[cfg(test)]` items: the attribute, the item and
/// its body, up to the `}` at the item's indentation (or its `;`).
fn test_lines(lines: &[&str]) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            i += 1;
            continue;
        }
        let start = i;
        let mut item = i + 1;
        while item < lines.len() && lines[item].trim_start().starts_with("#[") {
            item += 1;
        }
        let Some(first) = lines.get(item) else { break };
        let indent = first.len() - first.trim_start().len();
        let close = format!("{}}}", " ".repeat(indent));
        let end = if first.trim_end().ends_with(';') || first.trim_end().ends_with('}') {
            item
        } else {
            (item..lines.len())
                .find(|&j| {
                    lines[j].trim_end() == close || lines[j].trim_end() == format!("{close};")
                })
                .unwrap_or(lines.len() - 1)
        };
        out.extend(start..=end);
        i = end + 1;
    }
    out
}

/// The top-level type arguments of the generic that opens at `text[0]`
/// (`<`), and whether it closed.
fn type_arguments(text: &str) -> Option<Vec<String>> {
    let mut depth = 0usize;
    let mut args = vec![String::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '-' if chars.peek() == Some(&'>') => {
                chars.next();
                args.last_mut()?.push_str("->");
                continue;
            }
            '<' | '(' | '[' => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            '>' | ')' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(args.iter().map(|a| a.trim().to_string()).collect());
                }
            }
            ',' if depth == 1 => {
                args.push(String::new());
                continue;
            }
            _ => {}
        }
        args.last_mut()?.push(c);
    }
    None
}

/// The 1-based lines of `text` that write `Result<_, String>` outside test
/// code and comments.
fn string_results(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let tests = test_lines(&lines);
    // The code without tests and comments, each line kept (so the numbers
    // stay), joined: a type may span lines.
    let code: Vec<&str> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if tests.contains(&i) || l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect();
    let joined = code.join("\n");
    let mut found = Vec::new();
    for (at, _) in joined.match_indices("Result<") {
        let before = joined[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(args) = type_arguments(&joined[at + "Result".len()..]) else {
            continue;
        };
        if args.len() == 2 && ["String", "std::string::String"].contains(&args[1].as_str()) {
            found.push(joined[..at].matches('\n').count() + 1);
        }
    }
    found
}

/// Every place where crate `name` (crates/NAME) breaks a rule, as
/// `file:line: what`.
fn rule_breaks(name: &str) -> Vec<String> {
    let base = Path::new(WORKSPACE);
    let root = base.join("crates").join(name);
    let mut files = sources_in(base, &root.join("src"));
    if root.join("build.rs").exists() {
        let text = fs::read_to_string(root.join("build.rs")).expect("build.rs");
        files.push((format!("crates/{name}/build.rs"), text));
    }
    assert!(!files.is_empty(), "crates/{name}: no source files");
    // test-support is a crate of test code (a dev-dependency only): its
    // files are test files, but its functions stay short too.
    let test_crate = name == "test-support";
    let test_only = test_only_files(&files);
    let mut breaks = Vec::new();
    for (file, text) in &files {
        if test_crate || test_only.contains(file) {
            continue;
        }
        let n = text.lines().count();
        if n > FILE_LINES_MAX {
            breaks.push(format!(
                "{file}:1: {n} lines; a non-test file has at most {FILE_LINES_MAX} (split it by concern)"
            ));
        }
        for line in string_results(text) {
            breaks.push(format!(
                "{file}:{line}: Result<_, String> outside tests; return a typed error"
            ));
        }
    }
    let functions = functions_in(&files);
    assert!(!functions.is_empty(), "crates/{name}: no functions found");
    for f in functions.iter().filter(|f| f.len > FUNCTION_LINES_MAX) {
        breaks.push(format!(
            "{}:{}: fn {} is {} lines; a function has at most {FUNCTION_LINES_MAX}",
            f.file, f.line, f.name, f.len
        ));
    }
    // By file, then line.
    breaks.sort_by_key(|b| {
        let mut parts = b.splitn(3, ':');
        let file = parts.next().unwrap_or_default().to_string();
        let line: usize = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        (file, line)
    });
    breaks
}

fn assert_rules_hold(name: &str) {
    let breaks = rule_breaks(name);
    assert!(
        breaks.is_empty(),
        "crates/{name} breaks {} rule(s):\n{}",
        breaks.len(),
        breaks.join("\n")
    );
}

/// One test per crate, so a failure names the crate.
macro_rules! rules_hold_in {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                assert_rules_hold($name);
            }
        )*
        const CHECKED: &[&str] = &[$($name),*];
    };
}

rules_hold_in! {
    rules_hold_in_format => "format",
    rules_hold_in_reader => "reader",
    rules_hold_in_fuse => "fuse",
    rules_hold_in_sqfs => "sqfs",
    rules_hold_in_spank => "spank",
    rules_hold_in_squashfs_mount => "squashfs-mount",
    rules_hold_in_test_support => "test-support",
}

#[test]
fn every_crate_is_checked() {
    let members = members();
    assert!(members.len() >= 7, "{members:?}");
    for m in &members {
        assert!(
            CHECKED.contains(&m.as_str()),
            "crates/{m} is not checked: add it to rules_hold_in!"
        );
    }
}

/// The checks find what they look for (so the rules above can fail).
#[test]
fn the_checks_see_each_rule_broken() {
    let text = "\
fn a() -> Result<(), String> {
    Ok(())
}
type R<T> = std::result::Result<T,
    String>;
// fn c() -> Result<(), String> (a comment)
fn d(f: impl Fn() -> Result<u8, String>) -> io::Result<()> {}
fn e() -> Result<Vec<String>, Error> {}
#[cfg(test)]
mod tests {
    fn t() -> Result<(), String> {}
}
";
    assert_eq!(string_results(text), [1, 4, 7]);
    let long = format!("fn long() {{\n{}}}\n", "    x();\n".repeat(80));
    let found = functions_in(&[("f.rs".into(), long)]);
    assert_eq!((found[0].line, found[0].len), (1, 82));
    let files = [
        (
            "c/src/lib.rs".to_string(),
            "#[cfg(test)]\nmod fake;\nmod real;\n".to_string(),
        ),
        ("c/src/fake.rs".to_string(), "mod inner;\n".to_string()),
        ("c/src/fake/inner.rs".to_string(), String::new()),
        (
            "c/src/real.rs".to_string(),
            "#[cfg(test)]\n#[path = \"real_tests.rs\"]\nmod tests;\n".to_string(),
        ),
        ("c/src/real_tests.rs".to_string(), String::new()),
    ];
    let test_only: Vec<_> = test_only_files(&files).into_iter().collect();
    assert_eq!(
        test_only,
        [
            "c/src/fake.rs",
            "c/src/fake/inner.rs",
            "c/src/real_tests.rs"
        ]
    );
}

/// The rooms of the crate (folders of src/), lowest first: a room may
/// import only rooms before it (doc/architecture.md, "Rooms").
const ROOMS: [&str; 10] = [
    "system",
    "privilege",
    "config",
    "cli",
    "mounts",
    "cache",
    "layer",
    "engine",
    "join",
    "commands",
];
/// The files the crate root may hold: the entry points.
const ENTRY_POINTS: [&str; 3] = ["lib.rs", "main.rs", "layer_main.rs"];

#[test]
fn the_crate_root_holds_only_entry_points_and_rooms() {
    for entry in fs::read_dir(SRC).expect("src") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            assert!(
                ROOMS.contains(&name.as_str()),
                "src/{name}/ is not a room of ROOMS"
            );
        } else {
            assert!(
                ENTRY_POINTS.contains(&name.as_str()),
                "src/{name}: the crate root holds only entry points; put it in a room"
            );
        }
    }
}

#[test]
fn every_room_imports_only_rooms_below_it() {
    let rank = |room: &str| ROOMS.iter().position(|r| *r == room);
    for (from, to) in module_graph() {
        let Some(from_rank) = rank(&from) else {
            continue; // an entry point
        };
        for room in to {
            let to_rank =
                rank(&room).unwrap_or_else(|| panic!("{from} imports {room}, not a room"));
            assert!(
                to_rank < from_rank,
                "{from} imports {room}, which stands above it (ROOMS is lowest first)"
            );
        }
    }
}

#[test]
fn no_file_name_is_used_twice() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (file, _) in sources() {
        let name = file.rsplit('/').next().unwrap_or(&file).to_string();
        if name == "mod.rs" {
            continue;
        }
        if let Some(first) = seen.insert(name.clone(), file.clone()) {
            panic!("{name} is used twice: {first} and {file}");
        }
    }
}

#[test]
fn no_type_name_is_declared_twice() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (file, text) in sources() {
        for line in text.lines() {
            let rest = line.trim_start();
            let rest = rest
                .strip_prefix("pub(crate) ")
                .or_else(|| rest.strip_prefix("pub(super) "))
                .or_else(|| rest.strip_prefix("pub "))
                .unwrap_or(rest);
            let Some(name) = ["struct ", "enum ", "trait "]
                .iter()
                .find_map(|kind| rest.strip_prefix(kind))
            else {
                continue;
            };
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if let Some(first) = seen.insert(name.clone(), file.clone()) {
                panic!("{name} is declared twice: in {first} and in {file}");
            }
        }
    }
}
