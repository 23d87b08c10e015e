//! README.md's examples, so that the README cannot drift from the programs.
//!
//! Every ```sh block of README.md comes right after a marker line:
//!
//! ```text
//! <!-- README example: run in=SETUP -->       run by this test
//! <!-- README example: not run: REASON -->   cannot run on one machine, and why
//! ```
//!
//! A block that is run runs line by line (empty and `#` lines skipped; each
//! line with `sh -c`) as an unprivileged test user, in a fresh directory of
//! the user's that SETUP prepares (images, trees, a Makefile...), with the
//! installed setuid squashfs-mount, its FUSE server and sqfs (the test
//! prefix) first on PATH, and HOME and SCRATCH directories of the user's.
//! The installation's own paths in examples (`/usr/lib/squashfs-mount/`)
//! are the prefix's. Each line must exit 0 and print nothing on standard
//! error (quiet success). `/user-environment` and `/user-tools` are created
//! by root when missing, as the README says an administrator does, and
//! removed afterwards.
//!
//! Also checked here: the synopsis of `squashfs-mount --help` is the one in
//! README.md and in the man page, and the Rust version README names is
//! Cargo.toml's.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sqfsmnt_test_support::cmd::run_with_timeout;
use sqfsmnt_test_support::{image, install, site, Fixture, Run};

fn case(f: impl FnOnce(&Fixture)) {
    sqfsmnt_test_support::case(env!("CARGO_BIN_EXE_squashfs-mount"), f)
}

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    fs::read_to_string(top().join("README.md")).expect("README.md")
}

const MARKER: &str = "<!-- README example: ";

/// A fenced block of README.md.
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    lang: String,
    /// The marker line before it, without `<!-- README example: ` and ` -->`.
    marker: Option<String>,
    body: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let marker = i
            .checked_sub(1)
            .and_then(|p| lines[p].strip_prefix(MARKER))
            .and_then(|m| m.strip_suffix(" -->"))
            .map(str::to_string);
        let start = i;
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].starts_with("```") {
            body.push(lines[i].to_string());
            i += 1;
        }
        out.push(Block {
            line: start + 1,
            lang: lang.trim().to_string(),
            marker,
            body,
        });
        i += 1;
    }
    out
}

/// The setups a block may ask for (`run in=NAME`).
const SETUPS: &[&str] = &["images", "unions", "trees", "fuse"];

#[test]
fn every_shell_example_is_marked_run_or_not_run_with_a_reason() {
    let text = readme();
    let all = blocks(&text);
    let sh: Vec<&Block> = all.iter().filter(|b| b.lang == "sh").collect();
    assert!(sh.len() >= 5, "{} sh blocks", sh.len());
    let mut run = 0;
    for b in &sh {
        let m = b.marker.as_deref().unwrap_or_else(|| {
            panic!(
                "README.md:{}: a ```sh block without a `{MARKER}run in=SETUP -->` or `{MARKER}not run: REASON -->` line right before it",
                b.line
            )
        });
        if let Some(setup) = m.strip_prefix("run in=") {
            assert!(
                SETUPS.contains(&setup),
                "README.md:{}: unknown setup {setup:?} (known: {SETUPS:?})",
                b.line
            );
            run += 1;
        } else {
            let reason = m.strip_prefix("not run: ").unwrap_or_else(|| {
                panic!(
                    "README.md:{}: marker {m:?} is neither 'run in=SETUP' nor 'not run: REASON'",
                    b.line
                )
            });
            assert!(
                reason.len() > 10,
                "README.md:{}: say why it is not run",
                b.line
            );
        }
    }
    assert!(run >= 4, "only {run} README examples are run");
    // Markers only before shell blocks.
    let markers = text.lines().filter(|l| l.starts_with(MARKER)).count();
    assert_eq!(
        markers,
        sh.len(),
        "a marker line that is not right before a ```sh block"
    );
}

#[test]
fn readme_names_the_rust_version_of_cargo_toml() {
    let toml = fs::read_to_string(top().join("Cargo.toml")).unwrap();
    let version = toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap();
    assert!(
        readme().contains(&format!("Rust >= {version}")),
        "README.md does not name Rust >= {version}"
    );
}

/// A synopsis line without the `<...>` of the usage text, roff's font
/// escapes and `\-`, and runs of spaces.
fn normal(line: &str) -> String {
    let mut s = line.replace("\\-", "-");
    for esc in ["\\fB", "\\fI", "\\fR", "\\fP", "<", ">"] {
        s = s.replace(esc, "");
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The synopsis of `--help`: the lines from `Usage:` to the first empty one.
fn usage_synopsis() -> Vec<String> {
    squashfs_mount::cli::USAGE
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| normal(l.trim_start_matches("Usage:")))
        .collect()
}

#[test]
fn the_usage_synopsis_is_in_the_readme_and_the_man_page() {
    let synopsis = usage_synopsis();
    assert!(synopsis.len() >= 4, "{synopsis:?}");
    // README: the block right after "## Usage".
    let text = readme();
    let after = text.split("\n## Usage\n").nth(1).expect("## Usage");
    let block = blocks(after)
        .into_iter()
        .next()
        .expect("a block after ## Usage");
    let readme_lines: Vec<String> = block.body.iter().map(|l| normal(l)).collect();
    // The man page: SYNOPSIS lines, .br-separated.
    let man = fs::read_to_string(top().join("doc/squashfs-mount.1")).unwrap();
    let section = man
        .split("\n.SH SYNOPSIS\n")
        .nth(1)
        .and_then(|s| s.split("\n.SH ").next())
        .expect("SYNOPSIS");
    let man_lines: Vec<String> = section
        .split("\n.br\n")
        .map(|entry| normal(&entry.replace(".B ", "").replace('\n', " ")))
        .collect();
    for line in &synopsis {
        assert!(
            readme_lines.contains(line),
            "README.md's usage lacks {line:?}: {readme_lines:#?}"
        );
        assert!(
            man_lines.contains(line),
            "the man page's SYNOPSIS lacks {line:?}: {man_lines:#?}"
        );
    }
}

/// A host directory made for the test when missing, removed with the guard.
struct HostDir {
    path: PathBuf,
    made: bool,
}

impl HostDir {
    fn ensure(path: &str) -> HostDir {
        let path = PathBuf::from(path);
        let made = !path.exists();
        if made {
            fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        HostDir { path, made }
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        if self.made {
            let _ = fs::remove_dir(&self.path);
        }
    }
}

/// Writes `content` to `dir/rel` (parents made), with `mode`.
fn put(dir: &Path, rel: &str, content: &str, mode: u32) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, content).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

/// An image of the user's (content owned by the user, as a tree of theirs
/// packed by them would be): `<dir>/<name>`.
fn user_image(fx: &Fixture, dir: &Path, name: &str, files: &[(&str, &str)]) {
    let tree = fx.path(&format!("trees/readme-{name}"));
    let _ = fs::remove_dir_all(&tree);
    image::build(
        &tree,
        &dir.join(name),
        files,
        &format!(
            "chmod 0755 bin/* build.sh 2>/dev/null; chown -R {}:{} .",
            fx.uid, fx.gid
        ),
        &["-comp", "zstd"],
    );
}

const STACK: &[(&str, &str)] = &[
    ("bin/hello", "#!/bin/sh\necho hello from the stack\n"),
    ("lib/libhello.so", "not really a library\n"),
    ("app.py", "print('hello from the image')\n"),
];

/// Prepares `dir` for the blocks marked `run in=<setup>`.
fn setup(fx: &Fixture, name: &str, dir: &Path) -> Vec<HostDir> {
    let mut host = Vec::new();
    match name {
        "images" => {
            host.push(HostDir::ensure("/user-environment"));
            host.push(HostDir::ensure("/user-tools"));
            user_image(fx, dir, "stack.sqfs", STACK);
            user_image(fx, dir, "tools.sqfs", &[("tool.txt", "a tool\n")]);
            fs::copy(dir.join("stack.sqfs"), dir.join("scratch/stack.sqfs")).unwrap();
            put(
                dir,
                "Makefile",
                "all:\n\t@test -x /user-environment/bin/hello && test -f /user-tools/tool.txt\n",
                0o644,
            );
            put(
                dir,
                "app",
                "#!/bin/sh\ntest \"$LD_LIBRARY_PATH\" = /user-environment/lib && test -f /user-environment/lib/libhello.so\n",
                0o755,
            );
        }
        "unions" => {
            for i in 1..=3 {
                user_image(
                    fx,
                    dir,
                    &format!("hcp-{i:02}.sqfs"),
                    &[(&format!("subject-{i:02}/anat.nii"), "voxels\n")],
                );
            }
            user_image(
                fx,
                dir,
                "rootfs.sqfs",
                &[
                    ("etc/os-release", "ID=test\n"),
                    // Writes into the image's top directory (the user's own:
                    // writable through the layer), then checks.
                    ("build.sh", "#!/bin/sh\nset -e\necho built > build.out\ngrep -qx built build.out\n"),
                ],
            );
        }
        "trees" => {
            for (rel, content, mode) in [
                (
                    "stack/bin/python3",
                    "#!/bin/sh\n# the stack's python: the system's, with the stack's packages\nPYTHONPATH=$(dirname \"$0\")/../lib/python exec python3 \"$@\"\n",
                    0o755,
                ),
                ("stack/lib/python/numpy/__init__.py", "version = '0'\n", 0o644),
                ("stack/lib/python/numpy/core.pyc", "compiled\n", 0o644),
                ("stack/app.py", "print('hello')\n", 0o644),
                ("stack/build/obj.o", "object\n", 0o644),
                ("HCP/subject-01/anat.nii", "voxels\n", 0o644),
                ("HCP/subject-02/anat.nii", "voxels\n", 0o644),
            ] {
                put(dir, rel, content, mode);
            }
        }
        "fuse" => user_image(fx, dir, "stack.sqfs", STACK),
        other => panic!("unknown setup {other}"),
    }
    let r = Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", fx.uid, fx.gid))
        .arg(dir)
        .status()
        .unwrap();
    assert!(r.success());
    host
}

/// The block's commands: lines without comments-only and empty ones.
fn commands(b: &Block) -> Vec<String> {
    b.body
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn readme_examples_run_as_written() {
    case(|fx| {
        let _conf = site::no_config();
        let _fuse = site::FuseForUsers::enable();
        let built = Path::new(env!("CARGO_BIN_EXE_squashfs-mount"));
        let sqfs = built.with_file_name("sqfs");
        assert!(
            sqfs.exists(),
            "{} is not built: cargo build --release --workspace first (make test does)",
            sqfs.display()
        );
        let bin = install::install(&sqfs, &fx.root, 0o755);
        let prefix_bin = bin.parent().unwrap().to_path_buf();
        let lib = fx.root.join("lib/squashfs-mount/");
        let text = readme();
        let mut failures = Vec::new();
        let mut ran = 0;
        for (n, b) in blocks(&text).iter().enumerate() {
            let Some(setup_name) = b.marker.as_deref().and_then(|m| m.strip_prefix("run in="))
            else {
                continue;
            };
            let dir = fx.user_dir().join(format!("example-{n}"));
            for sub in ["home", "scratch"] {
                fs::create_dir_all(dir.join(sub)).unwrap();
            }
            let _host = setup(fx, setup_name, &dir);
            for cmd in commands(b) {
                let line = cmd.replace("/usr/lib/squashfs-mount/", &lib.display().to_string());
                let mut c = fx.user.command("sh");
                c.args(["-c", &line])
                    .current_dir(&dir)
                    .env_clear()
                    .env(
                        "PATH",
                        format!("{}:/usr/local/bin:/usr/bin:/bin", prefix_bin.display()),
                    )
                    .env("HOME", dir.join("home"))
                    .env("SCRATCH", dir.join("scratch"))
                    .env("USER", &fx.user.name)
                    .env("LANG", "C.UTF-8");
                let r = Run(run_with_timeout(&mut c, Duration::from_secs(600)));
                ran += 1;
                if !r.success() || !r.stderr().is_empty() {
                    failures.push(format!(
                        "README.md:{} ({setup_name}): {cmd}\n  {:?}\n  stdout: {}\n  stderr: {}",
                        b.line,
                        r.0.status,
                        r.stdout().trim_end(),
                        r.stderr().trim_end()
                    ));
                }
            }
        }
        assert!(ran >= 15, "only {ran} commands ran");
        assert!(
            failures.is_empty(),
            "{} of {ran} README commands failed or printed on stderr:\n{}",
            failures.len(),
            failures.join("\n")
        );
    });
}
