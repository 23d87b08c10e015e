//! The examples of README.md, of every doc/*.md page and of the man
//! pages' EXAMPLES, so that the documentation cannot drift from the
//! programs.
//!
//! Every ```sh block of the Markdown pages comes right after a marker line,
//! and every `.nf` block of a man page's EXAMPLES section right after a
//! marker comment:
//!
//! ```text
//! <!-- example: run in=SETUP -->          run by this test
//! <!-- example: not run: REASON -->      cannot run on one machine, and why
//! .\" example: run in=SETUP               (man pages)
//! .\" example: not run: REASON
//! ```
//!
//! A block that is run runs as one `sh -e` script (so a variable set on one
//! line is there on the next; empty and `#` lines are comments) as an
//! unprivileged test user, in a fresh directory of the user's that SETUP
//! prepares (images, trees, a venv...), with the installed setuid
//! squashfs-mount, its FUSE server and sqfs (the test prefix) first on
//! PATH, and HOME, SCRATCH and TMPDIR directories of the user's. The
//! installation's own paths in examples (`/usr/lib/squashfs-mount/`) are
//! the prefix's. Every command must succeed and print nothing on standard
//! error (quiet success). `/user-environment` and `/user-tools` are created
//! by root when missing, as an administrator does, and removed afterwards.
//!
//! Also checked here: the synopsis of `squashfs-mount --help` is the one in
//! README.md and in the man page, and the Rust version README names is
//! Cargo.toml's.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sqfsmnt_test_support::cmd::{run_for, Run};
use sqfsmnt_test_support::{image, install, python, site, Fixture};

use crate::case;

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    fs::read_to_string(top().join("README.md")).expect("README.md")
}

/// The marker before a Markdown block, and a man page's.
const MARKER: &str = "<!-- example: ";
const MAN_MARKER: &str = ".\\\" example: ";

/// The pages whose examples are run: README.md, doc/*.md, doc/*.1, by
/// their path from the top of the repository.
fn pages() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = fs::read_dir(top().join("doc"))
        .expect("doc/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") || n.ends_with(".1"))
        .map(|n| format!("doc/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text = fs::read_to_string(top().join(&n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            (n, text)
        })
        .collect()
}

/// The blocks of a page: fenced blocks of Markdown, or the `.nf`/`.fi`
/// blocks of a man page's EXAMPLES section (roff escapes undone).
fn page_blocks(name: &str, text: &str) -> Vec<Block> {
    if name.ends_with(".md") {
        return blocks(text);
    }
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines.iter().position(|l| *l == ".SH EXAMPLES") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < lines.len() && !lines[i].starts_with(".SH ") {
        if lines[i] != ".nf" {
            i += 1;
            continue;
        }
        let marker = lines[i - 1].strip_prefix(MAN_MARKER).map(str::to_string);
        let line = i + 1;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i] != ".fi" {
            body.push(lines[i].replace("\\-", "-").replace("\\\\", "\\"));
            i += 1;
        }
        out.push(Block {
            line,
            lang: "sh".into(),
            marker,
            body,
        });
        i += 1;
    }
    out
}

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
const SETUPS: &[&str] = &["clone", "images", "unions", "trees", "fuse", "pip"];

#[test]
fn every_shell_example_is_marked_run_or_not_run_with_a_reason() {
    let mut run = 0;
    for (name, text) in pages() {
        let all = page_blocks(&name, &text);
        let sh: Vec<&Block> = all.iter().filter(|b| b.lang == "sh").collect();
        for b in &sh {
            let m = b.marker.as_deref().unwrap_or_else(|| {
                panic!(
                    "{name}:{}: a shell example without a `{MARKER}run in=SETUP -->` or `{MARKER}not run: REASON -->` line (man pages: `{MAN_MARKER}...`) right before it",
                    b.line
                )
            });
            if let Some(setup) = m.strip_prefix("run in=") {
                assert!(
                    SETUPS.contains(&setup),
                    "{name}:{}: unknown setup {setup:?} (known: {SETUPS:?})",
                    b.line
                );
                run += 1;
            } else {
                let reason = m.strip_prefix("not run: ").unwrap_or_else(|| {
                    panic!(
                        "{name}:{}: marker {m:?} is neither 'run in=SETUP' nor 'not run: REASON'",
                        b.line
                    )
                });
                assert!(
                    reason.len() > 10,
                    "{name}:{}: say why it is not run",
                    b.line
                );
            }
        }
        // Markers only before shell blocks (Markdown pages); no old ones.
        if name.ends_with(".md") {
            let markers = text.lines().filter(|l| l.starts_with(MARKER)).count();
            assert_eq!(
                markers,
                sh.len(),
                "{name}: a marker line that is not right before a ```sh block"
            );
            assert!(
                !text.contains("<!-- README example: "),
                "{name}: old marker"
            );
        }
    }
    assert!(run >= 12, "only {run} examples are run");
    // README's first 30 lines hold an example that is run in a clone of
    // the repository and nothing else (`in=clone`: what a newcomer has),
    // and it runs a command from an image.
    let text = readme();
    let head: Vec<&str> = text.lines().take(30).collect();
    let first = head
        .iter()
        .position(|l| l.starts_with(&format!("{MARKER}run in=")))
        .expect("README.md's first 30 lines have no example that is run");
    assert!(
        head[first].starts_with(&format!("{MARKER}run in=clone ")),
        "README.md's first run example needs more than a clone: {}",
        head[first]
    );
    assert!(
        head[first..]
            .iter()
            .any(|l| l.starts_with("squashfs-mount ")),
        "README.md's first 30 lines run no command from an image"
    );
    assert!(text.lines().count() <= 250, "README.md is over 250 lines");
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
    squashfs_mount::USAGE
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

/// Two images on two host directories, a Makefile and an app that use
/// them (the setup `images`).
fn setup_images(fx: &Fixture, dir: &Path, host: &mut Vec<HostDir>) {
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

/// Three subjects' images and a root file system (the setup `unions`).
fn setup_unions(fx: &Fixture, dir: &Path) {
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
            (
                "build.sh",
                "#!/bin/sh\nset -e\necho built > build.out\ngrep -qx built build.out\n",
            ),
        ],
    );
}

/// Prepares `dir` for the blocks marked `run in=<setup>`.
fn setup(fx: &Fixture, name: &str, dir: &Path) -> Vec<HostDir> {
    let mut host = Vec::new();
    match name {
        "images" => setup_images(fx, dir, &mut host),
        "unions" => setup_unions(fx, dir),
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
        // A clone of the repository: its examples/ (what the README's
        // first example uses), nothing made for the test.
        "clone" => {
            run_for(
                Command::new("cp")
                    .arg("-a")
                    .arg(top().join("examples"))
                    .arg(dir),
                Duration::from_secs(120),
            )
            .ok();
        }
        "pip" => {
            host.push(HostDir::ensure("/user-environment"));
            // The user's own stack (its venv is theirs: FUSE path) and a
            // site's (root's venv, root's file in root's directory: the
            // kernel path), and a wheel of the user's.
            python::venv_image(
                &fx.path(&format!("trees/readme-venv-{}", fx.uid)),
                &dir.join("mystack.sqfs"),
                fx.uid,
                fx.gid,
            );
            let site = fx.path("images/readme-venv-root.sqfs");
            python::venv_image(&fx.path("trees/readme-venv-root"), &site, 0, 0);
            std::os::unix::fs::symlink(&site, dir.join("site.sqfs")).unwrap();
            python::wheel(dir, "mypkg");
        }
        other => panic!("unknown setup {other}"),
    }
    run_for(
        Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", fx.uid, fx.gid))
            .arg(dir),
        Duration::from_secs(120),
    )
    .ok();
    host
}

/// The block as a script: `set -e`, then its lines.
fn script(b: &Block) -> String {
    let mut text = String::from("set -e\n");
    for l in &b.body {
        text += l;
        text.push('\n');
    }
    text
}

/// The block `b` run as the case's user in `dir` (its home, scratch and
/// tmp inside), with the installed tools first on PATH.
fn run_example(fx: &Fixture, b: &Block, dir: &Path, lib: &Path, prefix_bin: &Path) -> Run {
    let body = script(b).replace("/usr/lib/squashfs-mount/", &lib.display().to_string());
    let mut c = fx.user.command("sh");
    c.args(["-c", &body])
        .current_dir(dir)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", prefix_bin.display()),
        )
        .env("HOME", dir.join("home"))
        .env("SCRATCH", dir.join("scratch"))
        .env("TMPDIR", dir.join("tmp"))
        .env("USER", &fx.user.name)
        .env("LANG", "C.UTF-8");
    run_for(&mut c, Duration::from_secs(900))
}

#[test]
fn examples_run_as_written() {
    case(|fx| {
        let _conf = site::no_config();
        let _fuse = site::FuseForUsers::enable();
        // The README keeps its kept layer in /tmp/$USER-layer, as a user
        // would: it goes with the test user (each run left one behind).
        let _layer = sqfsmnt_test_support::tree::TempDir(PathBuf::from(format!(
            "/tmp/{}-layer",
            fx.user.name
        )));
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
        let have_venv = python::available();
        let mut failures = Vec::new();
        let (mut ran, mut n) = (0, 0);
        for (page, text) in pages() {
            for b in page_blocks(&page, &text) {
                let Some(setup_name) = b.marker.as_deref().and_then(|m| m.strip_prefix("run in="))
                else {
                    continue;
                };
                if setup_name == "pip" && !have_venv {
                    sqfsmnt_test_support::loud_skip(&format!(
                        "{page}:{}: {} cannot make venvs (python3-venv)",
                        b.line,
                        python::PYTHON
                    ));
                    continue;
                }
                n += 1;
                let dir = fx.user_dir().join(format!("example-{n}"));
                for sub in ["home", "scratch", "tmp"] {
                    fs::create_dir_all(dir.join(sub)).unwrap();
                }
                let _host = setup(fx, setup_name, &dir);
                let r = run_example(fx, &b, &dir, &lib, &prefix_bin);
                ran += 1;
                if !r.success() || !r.stderr().is_empty() {
                    failures.push(format!(
                        "{page}:{} ({setup_name}):\n{}  {:?}\n  stdout: {}\n  stderr: {}",
                        b.line,
                        b.body.join("\n"),
                        r.0.status,
                        r.stdout().trim_end(),
                        r.stderr().trim_end()
                    ));
                }
            }
        }
        assert!(ran >= 12, "only {ran} examples ran");
        assert!(
            failures.is_empty(),
            "{} of {ran} examples failed or printed on stderr:\n{}",
            failures.len(),
            failures.join("\n")
        );
    });
}

/// The documents that the configuration file and the man pages name
/// (`policy.md`, `cache.md`...): each is one the packages ship in
/// /usr/share/doc/squashfs-mount/ (debian/*.docs, the spec's `%doc`) and
/// `make install` installs (the Makefile's `DOCS`).
#[test]
fn every_document_the_configuration_and_man_pages_name_is_shipped() {
    let read = |rel: &str| fs::read_to_string(top().join(rel)).unwrap();
    let mut named = std::collections::BTreeSet::new();
    for rel in [
        "etc/squashfs-mount.conf",
        "doc/squashfs-mount.1",
        "doc/sqfs.1",
    ] {
        let mut text = read(rel);
        for esc in ["\\fB", "\\fI", "\\fR", "\\fP"] {
            text = text.replace(esc, " ");
        }
        for word in text.split(|c: char| c.is_whitespace() || "(),;:\"'`".contains(c)) {
            let word = word.trim_end_matches('.');
            if !word.ends_with(".md") || word.contains("fuzz/") {
                continue;
            }
            // Named as a file of the package's documentation directory.
            named.insert(word.rsplit('/').next().unwrap().to_string());
        }
    }
    assert!(
        named.contains("policy.md") && named.contains("cache.md"),
        "{named:?}"
    );
    // (slurm.md is the plugin package's.)
    let debian = read("debian/squashfs-mount.docs") + &read("debian/squashfs-mount-spank.docs");
    let spec = read("packaging/rpm/squashfs-mount.spec");
    let spec_docs: Vec<&str> = spec
        .lines()
        .filter_map(|l| l.strip_prefix("%doc "))
        .flat_map(str::split_whitespace)
        .collect();
    let makefile = read("Makefile");
    let make_docs = makefile
        .split("\nDOCS := ")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .expect("DOCS := in the Makefile")
        .replace("\\\n", " ");
    for doc in &named {
        let shipped = |list: Vec<&str>| {
            list.iter()
                .any(|f| f.rsplit('/').next() == Some(doc.as_str()))
        };
        assert!(
            shipped(debian.split_whitespace().collect()),
            "debian/*.docs lack {doc}, which the configuration or a man page names"
        );
        assert!(shipped(spec_docs.clone()), "the spec's %doc lacks {doc}");
        assert!(
            shipped(make_docs.split_whitespace().collect()),
            "the Makefile's DOCS (make install) lack {doc}"
        );
    }
}

/// The man pages render without a warning, and hold no control
/// character (a `\f` written as a form feed renders as `Bsquashfs-mount`).
#[test]
fn the_man_pages_render_cleanly() {
    for page in ["doc/squashfs-mount.1", "doc/sqfs.1"] {
        let text = fs::read_to_string(top().join(page)).unwrap();
        for (n, line) in text.lines().enumerate() {
            assert!(
                !line.chars().any(|c| c.is_control() && c != '\t'),
                "{page}:{}: a control character: {line:?}",
                n + 1
            );
        }
        if !sqfsmnt_test_support::have("groff") {
            sqfsmnt_test_support::loud_skip(
                "groff is not installed: the man pages' warnings are not checked",
            );
            continue;
        }
        let r = sqfsmnt_test_support::cmd::run(
            Command::new("groff")
                .args(["-man", "-Tutf8", "-ww", "-z"])
                .arg(top().join(page)),
        );
        assert!(
            r.success() && r.stderr().is_empty(),
            "{page}: {}",
            r.stderr()
        );
    }
}

/// `make install-site` (what `make install` leaves out), into a staging
/// directory: the documented configuration (never over an existing one),
/// the tmpfiles entry, and the timer's units calling the program under
/// PREFIX.
#[test]
fn make_install_site_installs_the_configuration_tmpfiles_entry_and_timer() {
    let stage = sqfsmnt_test_support::tree::TempDir::new("install-site");
    let make = |stage: &Path| {
        sqfsmnt_test_support::cmd::run(
            Command::new("make")
                .arg("-s")
                .arg("-C")
                .arg(top())
                .arg("install-site")
                .arg(format!("DESTDIR={}", stage.display()))
                .arg("PREFIX=/opt/sqfsmnt"),
        )
    };
    let r = make(stage.path());
    assert!(r.success(), "{}", r.stderr());
    let conf = stage.path().join("etc/squashfs-mount.conf");
    assert_eq!(
        fs::read(&conf).unwrap(),
        fs::read(top().join("etc/squashfs-mount.conf")).unwrap()
    );
    assert!(stage
        .path()
        .join("etc/tmpfiles.d/squashfs-mount.conf")
        .is_file());
    let service = fs::read_to_string(
        stage
            .path()
            .join("etc/systemd/system/squashfs-mount-gc.service"),
    )
    .unwrap();
    assert!(
        service.contains("\nExecStart=/opt/sqfsmnt/bin/squashfs-mount --gc --expired\n"),
        "{service}"
    );
    assert!(stage
        .path()
        .join("etc/systemd/system/squashfs-mount-gc.timer")
        .is_file());
    assert!(r
        .stdout()
        .contains("systemctl enable --now squashfs-mount-gc.timer"));
    // A site's edited configuration stays.
    fs::write(&conf, "cache = off\n").unwrap();
    let r = make(stage.path());
    assert!(r.success(), "{}", r.stderr());
    assert_eq!(fs::read_to_string(&conf).unwrap(), "cache = off\n");
    assert!(r.stdout().contains("exists: kept"), "{}", r.stdout());
}
