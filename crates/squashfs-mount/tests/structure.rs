//! The crates' shape stays as doc/architecture.md draws it.
//!
//! In every crate of the workspace: no non-test source file over 450 lines,
//! no function over 80 lines, no `Result<_, String>` outside tests (errors
//! are typed). In the setuid crate also: the privileged sequence
//! (`mount_all`) under 40 lines and made of its stages, no loop between
//! its modules, the crate root holding only entry points and rooms, every
//! room importing only rooms below it, and no file name used twice; its
//! rooms behind doors (`structure/doors.rs`). Read from the sources (as
//! rustfmt lays them out); no root needed.

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

// ---- Inside a room: each file's imports go one way ----
//
// A room is a folder whose `mod.rs` (its parent) declares the files beside
// it, or a crate's src/ (its parent: lib.rs, else main.rs). A file names a
// file beside it through `super::` (or `crate::<room>::`): its module, or
// an item the parent re-exports from it. An item defined in the parent
// itself is the parent's. The parent uses a file when its own code (not
// its `mod` and `pub use` lines, which are the room's door) names the
// file (`file::`), imports from it privately, or names a type or constant
// it imports from it. Test code is left out.

/// The parent's node in a room's graph.
const PARENT: &str = "(parent)";

/// The paths of a `use` tree (`a::{b, c::{d as e}}`), each as its segments
/// and the name it binds (the alias, the last segment, or `*`).
fn use_tree(tree: &str) -> Vec<(Vec<String>, String)> {
    fn walk(tree: &str, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
        let tree = tree.trim();
        if tree.is_empty() {
            return;
        }
        let (path, group) = match tree.find('{') {
            Some(at) => (
                &tree[..at],
                Some(&tree[at + 1..tree.rfind('}').unwrap_or(tree.len())]),
            ),
            None => (tree, None),
        };
        let (path, alias) = match path.split_once(" as ") {
            Some((p, a)) => (p, Some(a.trim().to_string())),
            None => (path, None),
        };
        let mut segments = prefix.to_vec();
        segments.extend(
            path.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        match group {
            Some(inner) => {
                let mut depth = 0;
                let mut item = String::new();
                for c in inner.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            walk(&item, &segments, out);
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    item.push(c);
                }
                walk(&item, &segments, out);
            }
            None => {
                if segments.last().is_some_and(|s| s == "self") {
                    segments.pop();
                }
                let Some(last) = segments.last().cloned() else {
                    return;
                };
                out.push((segments, alias.unwrap_or(last)));
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &[], &mut out);
    out
}

/// A file's code: its `use` statements (whether public, and the tree),
/// and its other lines.
type Code = (Vec<(bool, String)>, Vec<String>);

/// The code of a file without its tests and comments, as
/// (`use` statements: their visibility word and tree, the other lines).
fn code_of(text: &str) -> Code {
    let lines: Vec<&str> = text.lines().collect();
    let tests = test_lines(&lines);
    let (mut uses, mut other) = (Vec::new(), Vec::new());
    let mut open: Option<(bool, String)> = None;
    for (i, line) in lines.iter().enumerate() {
        let code = line.split(" // ").next().unwrap_or(line);
        let t = code.trim();
        if tests.contains(&i) || t.starts_with("//") {
            continue;
        }
        if let Some((public, mut tree)) = open.take() {
            tree.push_str(t);
            match tree.strip_suffix(';') {
                Some(done) => uses.push((public, done.to_string())),
                None => open = Some((public, tree)),
            }
            continue;
        }
        let mut rest = t;
        let mut public = false;
        if let Some(after) = rest.strip_prefix("pub") {
            public = true;
            rest = match after.strip_prefix('(') {
                Some(v) => v.split_once(") ").map_or(after, |(_, r)| r),
                None => after.trim_start(),
            };
        }
        match rest.strip_prefix("use ") {
            Some(tree) => match tree.strip_suffix(';') {
                Some(done) => uses.push((public, done.to_string())),
                None => open = Some((public, tree.to_string())),
            },
            None => other.push(code.to_string()),
        }
    }
    (uses, other)
}

/// The identifiers of `code`, with the segment before each (`a::b`: b's is
/// `a`).
fn identifiers(code: &str) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    let mut word = String::new();
    let mut after_path = false;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            let before = after_path
                .then(|| out.last().map(|(w, _)| w.clone()))
                .flatten();
            out.push((std::mem::take(&mut word), before));
        }
        after_path = c == ':' && chars.peek() == Some(&':');
        if after_path {
            chars.next();
        }
    }
    if !word.is_empty() {
        let before = after_path
            .then(|| out.last().map(|(w, _)| w.clone()))
            .flatten();
        out.push((word, before));
    }
    out
}

/// The names a file defines at its top level (`pub fn x`, `struct X`, ...).
fn defined_names(code: &[String]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in code {
        if line.starts_with(' ') {
            continue;
        }
        let words = identifiers(line);
        let kinds = [
            "fn",
            "struct",
            "enum",
            "trait",
            "type",
            "const",
            "static",
            "macro_rules",
        ];
        for pair in words.windows(2) {
            if kinds.contains(&pair[0].0.as_str()) {
                names.insert(pair[1].0.clone());
                break;
            }
        }
    }
    names
}

/// What a room's parent offers and uses of its files.
#[derive(Default)]
struct Parent {
    /// A name the parent imports from one of its files -> that file.
    imported: BTreeMap<String, String>,
    /// Files the parent re-exports whole (`pub use x::*`).
    globs: Vec<String>,
    /// Names defined in the parent itself.
    defined: BTreeSet<String>,
    /// The files the parent's own code uses, and through which names.
    uses: BTreeMap<String, BTreeSet<String>>,
}

/// One room: its modules (files, and folders with a mod.rs: those hold all
/// the code below them), each with its code, and its parent.
struct Room {
    dir: String,
    parent_file: String,
    parent: Parent,
    /// module -> (`use` statements, other lines), of every file it holds.
    modules: BTreeMap<String, Code>,
    /// The prefixes that name the room from inside it.
    prefixes: Vec<String>,
}

/// The rooms of crate `name` (crates/NAME/src and its folders).
fn rooms_of(name: &str) -> Vec<Room> {
    let base = Path::new(WORKSPACE);
    let src = base.join("crates").join(name).join("src");
    let files = sources_in(base, &src);
    let test_only = test_only_files(&files);
    let src_rel = format!("crates/{name}/src");
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    for (file, _) in &files {
        if let Some(dir) = file.strip_suffix("/mod.rs") {
            dirs.insert(dir.to_string());
        }
    }
    let root_parent = if files.iter().any(|(f, _)| *f == format!("{src_rel}/lib.rs")) {
        "lib.rs"
    } else {
        "main.rs"
    };
    let mut rooms = Vec::new();
    for dir in std::iter::once(src_rel.clone()).chain(dirs.iter().cloned()) {
        let is_root = dir == src_rel;
        let parent_file = if is_root { root_parent } else { "mod.rs" };
        let module_path = dir
            .strip_prefix(&src_rel)
            .unwrap_or("")
            .trim_start_matches('/')
            .replace('/', "::");
        let prefixes = if is_root {
            vec!["crate".to_string()]
        } else {
            vec!["super".to_string(), format!("crate::{module_path}")]
        };
        let mut modules: BTreeMap<String, Code> = BTreeMap::new();
        let mut parent_code = None;
        for (file, text) in &files {
            let Some(rest) = file.strip_prefix(&format!("{dir}/")) else {
                continue;
            };
            if test_only.contains(file) {
                continue;
            }
            let (first, deeper) = match rest.split_once('/') {
                Some((d, _)) if dirs.contains(&format!("{dir}/{d}")) => (d.to_string(), true),
                Some(_) => continue, // a folder that is no module (src/bin)
                None => (rest.trim_end_matches(".rs").to_string(), false),
            };
            if !deeper
                && (rest == parent_file || (is_root && ["lib.rs", "main.rs"].contains(&rest)))
            {
                if rest == parent_file {
                    parent_code = Some(code_of(text));
                }
                continue;
            }
            let (uses, other) = code_of(text);
            let entry = modules.entry(first).or_default();
            // Deeper files name the room by its full path only.
            let uses = uses
                .into_iter()
                .filter(|(_, u)| !deeper || !u.starts_with("super::"));
            entry.0.extend(uses);
            entry.1.extend(other);
        }
        let Some((uses, other)) = parent_code else {
            continue;
        };
        let parent = parent_of(&(uses, other), &modules, is_root);
        rooms.push(Room {
            dir,
            parent_file: parent_file.to_string(),
            parent,
            modules,
            prefixes,
        });
    }
    rooms
}

/// What a room's parent (its `code`) offers and uses of the room's
/// `modules`.
fn parent_of(code: &Code, modules: &BTreeMap<String, Code>, is_root: bool) -> Parent {
    let (uses, other) = code;
    let mut parent = Parent {
        defined: defined_names(other),
        ..Parent::default()
    };
    for (public, tree) in uses {
        for (mut segments, bound) in use_tree(tree) {
            if segments.first().is_some_and(|s| s == "self")
                || (is_root && segments.first().is_some_and(|s| s == "crate"))
            {
                segments.remove(0);
            }
            let Some(first) = segments.first().filter(|f| modules.contains_key(*f)) else {
                continue;
            };
            if bound == "*" {
                parent.globs.push(first.clone());
            } else {
                parent.imported.insert(bound.clone(), first.clone());
            }
            if !public {
                parent.uses.entry(first.clone()).or_default().insert(bound);
            }
        }
    }
    uses_in_code(&mut parent, other, modules, is_root);
    parent
}

/// The files the parent's own lines (`other`, its `use` lines apart) use:
/// by `file::` paths, or by the types and constants it imports from them.
fn uses_in_code(
    parent: &mut Parent,
    other: &[String],
    modules: &BTreeMap<String, Code>,
    is_root: bool,
) {
    for line in other {
        if module_declared(line.trim()).is_some() {
            continue;
        }
        // An enum's variant (`    Name,`, `    Name(..)`) is no use of
        // a type of that name.
        let variant = line
            .strip_prefix("    ")
            .filter(|l| !l.starts_with(' '))
            .and_then(|l| {
                let end = l.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
                [",", "(", " {"]
                    .iter()
                    .any(|s| l[end..].starts_with(s))
                    .then(|| &l[..end])
            });
        for (word, before) in identifiers(line) {
            if variant == Some(word.as_str()) && before.is_none() {
                continue;
            }
            let via = match &before {
                Some(b) if modules.contains_key(b) && (b != "crate" || is_root) => Some(b.clone()),
                Some(b) if is_root && b == "crate" && modules.contains_key(&word) => {
                    Some(word.clone())
                }
                Some(_) => None,
                // A type or constant by the name it was imported as (a
                // lower-case word may be a local variable).
                None if word.starts_with(|c: char| c.is_ascii_uppercase()) => {
                    parent.imported.get(&word).cloned()
                }
                None => None,
            };
            if let Some(module) = via {
                parent.uses.entry(module).or_default().insert(word);
            }
        }
    }
}

/// The first segments after `prefix::` in `code` (`super::{a, b::c}`: a, b).
fn named_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let needle = format!("{prefix}::");
    for (at, _) in code.match_indices(&needle) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + needle.len()..];
        if rest.starts_with('{') {
            let mut depth = 0;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(rest.len(), |(i, _)| i + 1);
            for (segments, bound) in use_tree(&format!("x::{}", &rest[..end])) {
                if let Some(first) = segments.get(1) {
                    out.push(if first == "*" { bound } else { first.clone() });
                }
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '*'))
                .unwrap_or(rest.len());
            out.push(rest[..end].to_string());
        }
    }
    out
}

/// A room's graph: (from, to) -> the names that make the arrow. Files are
/// named `x.rs` (a folder `x/`), the parent [`PARENT`].
fn room_graph(room: &Room) -> BTreeMap<(String, String), BTreeSet<String>> {
    let node = |m: &str| {
        if room.modules.contains_key(m) && Path::new(WORKSPACE).join(&room.dir).join(m).is_dir() {
            format!("{m}/")
        } else {
            format!("{m}.rs")
        }
    };
    let mut definitions: BTreeMap<&String, BTreeSet<String>> = BTreeMap::new();
    for glob in &room.parent.globs {
        if let Some((_, other)) = room.modules.get(glob) {
            definitions.insert(glob, defined_names(other));
        }
    }
    let mut graph: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (module, (uses, other)) in &room.modules {
        let mut code: String = uses.iter().map(|(_, u)| format!("use {u};\n")).collect();
        code.push_str(&other.join("\n"));
        for prefix in &room.prefixes {
            for name in named_after(&code, prefix) {
                let to = if room.modules.contains_key(&name) {
                    Some(name.clone())
                } else if let Some(m) = room.parent.imported.get(&name) {
                    Some(m.clone())
                } else if name == "*" || room.parent.defined.contains(&name) {
                    Some(PARENT.to_string())
                } else {
                    definitions
                        .iter()
                        .find(|(_, d)| d.contains(&name))
                        .map(|(m, _)| (*m).clone())
                };
                match to {
                    Some(to) if to == *module || name == "super" || name == "self" => {}
                    Some(to) if to == PARENT => {
                        graph
                            .entry((node(module), PARENT.to_string()))
                            .or_default()
                            .insert(name);
                    }
                    Some(to) => {
                        graph
                            .entry((node(module), node(&to)))
                            .or_default()
                            .insert(name);
                    }
                    None => {}
                }
            }
        }
    }
    for (module, names) in &room.parent.uses {
        graph
            .entry((PARENT.to_string(), node(module)))
            .or_default()
            .extend(names.iter().cloned());
    }
    graph
}

/// The nodes `from` reaches in `graph` (itself only through a loop).
fn reached(graph: &BTreeMap<(String, String), BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(at) = stack.pop() {
        for (a, b) in graph.keys() {
            if *a == at && seen.insert(b.clone()) {
                stack.push(b.clone());
            }
        }
    }
    seen
}

/// The loops of a room's graph, each as its files and the arrows between
/// them (`a.rs -> b.rs (Name, other)`); with or without the parent.
fn loops_in(room: &Room, with_parent: bool) -> Vec<String> {
    let mut graph = room_graph(room);
    if !with_parent {
        graph.retain(|(a, b), _| a != PARENT && b != PARENT);
    }
    let nodes: BTreeSet<String> = graph
        .keys()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    let reach: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (n, reached(&graph, n))).collect();
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for n in &nodes {
        let component: Vec<String> = nodes
            .iter()
            .filter(|m| reach[n].contains(*m) && reach[*m].contains(n))
            .cloned()
            .collect();
        if component.len() > 1 && (component.contains(&PARENT.to_string()) == with_parent) {
            found.insert(component);
        }
    }
    found
        .into_iter()
        .map(|component| {
            let arrows: Vec<String> = graph
                .iter()
                .filter(|((a, b), _)| component.contains(a) && component.contains(b))
                .map(|((a, b), names)| {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    let a = if a == PARENT { &room.parent_file } else { a };
                    let b = if b == PARENT { &room.parent_file } else { b };
                    format!("{a} -> {b} ({})", names.join(", "))
                })
                .collect();
            format!("{}/: {}", room.dir, arrows.join("; "))
        })
        .collect()
}

/// Every loop between the files of a room of crate `name`.
fn loops_in_crate(name: &str) -> Vec<String> {
    rooms_of(name)
        .iter()
        .flat_map(|r| loops_in(r, false))
        .collect()
}

/// One test per crate, so a failure names the crate.
macro_rules! files_import_one_way_in {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let loops = loops_in_crate($name);
                assert!(
                    loops.is_empty(),
                    "crates/{}: {} import loop(s) between the files of a room (split at a seam: \
                     what both use goes into a file of its own, so each file's imports go one way):\n{}",
                    $name,
                    loops.len(),
                    loops.join("\n")
                );
            }
        )*
        const LOOPS_CHECKED: &[&str] = &[$($name),*];
    };
}

files_import_one_way_in! {
    files_import_one_way_in_format => "format",
    files_import_one_way_in_reader => "reader",
    files_import_one_way_in_fuse => "fuse",
    files_import_one_way_in_sqfs => "sqfs",
    files_import_one_way_in_spank => "spank",
    files_import_one_way_in_squashfs_mount => "squashfs-mount",
    files_import_one_way_in_test_support => "test-support",
}

#[test]
fn every_crate_is_checked_for_loops() {
    for m in members() {
        assert!(
            LOOPS_CHECKED.contains(&m.as_str()),
            "crates/{m} is not checked: add it to files_import_one_way_in!"
        );
    }
}

/// In the setuid crate, no file imports its room's mod.rs back: what the
/// parent's own code uses, and the files use too, lives in a file of its
/// own (mod.rs declares, re-exports and may use its files, not the other
/// way round as well).
#[test]
fn no_file_imports_its_room_back() {
    let found: Vec<String> = rooms_of("squashfs-mount")
        .iter()
        .flat_map(|r| loops_in(r, true))
        .collect();
    assert!(
        found.is_empty(),
        "{} room(s) whose files import their mod.rs, which uses them:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The loop checks see a loop: between files, through a parent's
/// re-export, and through the parent itself.
#[test]
fn the_room_checks_see_loops() {
    let room = |modules: &[(&str, &str)], parent: &str| {
        let modules: BTreeMap<String, Code> = modules
            .iter()
            .map(|(m, text)| (m.to_string(), code_of(text)))
            .collect();
        let parent_info = parent_of(&code_of(parent), &modules, false);
        Room {
            dir: "r".into(),
            parent_file: "mod.rs".into(),
            parent: parent_info,
            modules,
            prefixes: vec!["super".into(), "crate::r".into()],
        }
    };
    let parent = "pub use b::Thing;\nconst C: u8 = 1;\n";
    let r = room(
        &[
            ("a", "use super::Thing;\n"),
            ("b", "use crate::r::{a::f, c};\n"),
        ],
        parent,
    );
    assert_eq!(
        loops_in(&r, false),
        ["r/: a.rs -> b.rs (Thing); b.rs -> a.rs (a)"]
    );
    let r = room(
        &[
            (
                "a",
                "fn f() { super::C }\n#[cfg(test)]\nmod tests {\n    use super::b;\n}\n",
            ),
            ("b", ""),
        ],
        parent,
    );
    assert!(loops_in(&r, false).is_empty());
    assert!(loops_in(&r, true).is_empty());
    let parent = "pub use a::Thing;\nconst C: u8 = 1;\nfn g(t: Thing) {}\n";
    let r = room(&[("a", "fn f() { super::C }\n")], parent);
    assert_eq!(
        loops_in(&r, true),
        ["r/: mod.rs -> a.rs (Thing); a.rs -> mod.rs (C)"]
    );
}

// ---- Each room's mod.rs names its files ----

/// The files a room's mod.rs names in its table(s): in its `//!` comment, a
/// Markdown table with a `file` column, one file a row (`name.rs`, in
/// backticks), or that cell empty (the row above, continued). Also what
/// breaks that format.
fn table_files(mod_rs: &str) -> (BTreeSet<String>, Vec<String>) {
    let (mut named, mut wrong) = (BTreeSet::new(), Vec::new());
    let cells = |row: &str| -> Vec<String> {
        let row = row.trim().trim_start_matches('|').trim_end_matches('|');
        row.split('|').map(|c| c.trim().to_string()).collect()
    };
    let mut column: Option<usize> = None;
    for line in mod_rs.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if !doc.starts_with('|') {
            column = None;
            continue;
        }
        let row = cells(doc);
        match column {
            None => column = row.iter().position(|c| c == "file"),
            Some(_)
                if row
                    .iter()
                    .all(|c| c.chars().all(|ch| ch == '-' || ch == ':')) => {}
            Some(at) => match row.get(at).map(String::as_str) {
                Some("") => {}
                Some(cell) => match cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
                    Some(name) if name.ends_with(".rs") && !name.contains(['/', ' ']) => {
                        named.insert(name.to_string());
                    }
                    _ => wrong.push(format!("{cell} is not a file (`name.rs`, in backticks)")),
                },
                None => wrong.push(format!("a row without a file cell: {doc}")),
            },
        }
    }
    (named, wrong)
}

#[test]
fn every_room_table_names_exactly_its_files() {
    let mut problems = Vec::new();
    for room in ROOMS {
        let dir = Path::new(SRC).join(room);
        let text = fs::read_to_string(dir.join("mod.rs")).expect("mod.rs");
        let (named, wrong) = table_files(&text);
        let present: BTreeSet<String> = fs::read_dir(&dir)
            .expect("room")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".rs") && n != "mod.rs")
            .collect();
        if named.is_empty() {
            problems.push(format!(
                "{room}/mod.rs has no table with a `file` column naming its files"
            ));
        }
        problems.extend(wrong.iter().map(|w| format!("{room}/mod.rs: {w}")));
        for gone in named.difference(&present) {
            problems.push(format!(
                "{room}/mod.rs names {gone}, which is not in {room}/"
            ));
        }
        for missing in present.difference(&named) {
            problems.push(format!(
                "{room}/mod.rs does not name {missing} in its table"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) with the rooms' tables:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_table_check_reads_the_tables() {
    let text = "\
//! | file      | concern  |
//! |-----------|----------|
//! | `a.rs`    | one      |
//! |           | more     |
//! | `b`       | no .rs   |
//!
//! | type   | file     |
//! |--------|----------|
//! | [`X`]  | `c.rs`   |
// | `d.rs` | not the doc |
";
    let (named, wrong) = table_files(text);
    assert_eq!(named.into_iter().collect::<Vec<_>>(), ["a.rs", "c.rs"]);
    assert_eq!(wrong, ["`b` is not a file (`name.rs`, in backticks)"]);
}

#[path = "structure/doors.rs"]
mod doors;
