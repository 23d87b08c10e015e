//! `scripts/deps`: the Rust toolchain check. The workspace needs Cargo.toml's
//! rust-version; a missing or older cargo or rustc (Debian 12's are 1.65
//! and 1.63) stops the script at once, with what to install, and Debian's
//! cargo is never installed. Run with a PATH of stand-ins: fake cargo and
//! rustc printing a chosen version, and a fake apt-get that records how it
//! was called (the real one is never reached).

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sqfsmnt_test_support::cmd::{run_for, Run};
use sqfsmnt_test_support::is_root;
use sqfsmnt_test_support::tree::TempDir;

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Cargo.toml's rust-version, e.g. "1.89".
fn required() -> String {
    let toml = fs::read_to_string(top().join("Cargo.toml")).unwrap();
    toml.lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in Cargo.toml")
        .to_string()
}

fn script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A PATH of its own: `fake/` (cargo and rustc as asked, apt-get that
/// records) and `tools/` (links to the few programs scripts/deps runs).
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new(name: &str, cargo: Option<&str>, rustc: Option<&str>) -> Sandbox {
        let dir = TempDir::new(&format!("deps-{name}"));
        let fake = dir.path().join("fake");
        let tools = dir.path().join("tools");
        fs::create_dir_all(&fake).unwrap();
        fs::create_dir_all(&tools).unwrap();
        for (name, version) in [("cargo", cargo), ("rustc", rustc)] {
            if let Some(v) = version {
                script(&fake.join(name), &format!("echo '{name} {v}'"));
            }
        }
        script(
            &fake.join("apt-get"),
            &format!(
                "echo \"$*\" >> {}",
                dir.path().join("apt-get.log").display()
            ),
        );
        for tool in ["sed", "head", "dirname", "cat", "id"] {
            let found = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("{tool} not found"));
            symlink(found, tools.join(tool)).unwrap();
        }
        Sandbox { dir }
    }

    /// `scripts/deps <target>`, with no Slurm headers (an empty include
    /// directory) so that something besides Rust is missing.
    /// (It stops "at once": before any apt-get, which the fake records;
    /// the run's limit catches a hang.)
    fn deps(&self, target: &str) -> Run {
        let path = format!(
            "{}:{}",
            self.dir.path().join("fake").display(),
            self.dir.path().join("tools").display()
        );
        run_for(
            Command::new("/bin/sh")
                .arg(top().join("scripts/deps"))
                .arg(target)
                .env_clear()
                .env("PATH", path)
                .env("SLURM_INCLUDE_DIR", self.dir.path()),
            Duration::from_secs(30),
        )
    }

    fn apt_get_calls(&self) -> String {
        fs::read_to_string(self.dir.path().join("apt-get.log")).unwrap_or_default()
    }
}

fn stops_with_advice(r: &Run, needles: &[&str]) {
    assert_eq!(r.code(), Some(1), "{r:?}");
    let err = r.stderr();
    for n in [
        &format!("Rust >= {}", required()) as &str,
        "rustup",
        "Debian 12",
    ]
    .iter()
    .chain(needles)
    {
        assert!(err.contains(n), "no {n:?} in: {err}");
    }
}

#[test]
fn too_old_cargo_stops_at_once_and_installs_nothing() {
    for target in ["build", "test", "deb", "demo"] {
        let s = Sandbox::new(
            &format!("old-{target}"),
            Some("1.65.0 (4ed4fb6 2022-09-20)"),
            Some("1.63.0"),
        );
        let r = s.deps(target);
        let fake = s.dir.path().join("fake");
        stops_with_advice(
            &r,
            &[
                &format!("{} is 1.65", fake.join("cargo").display()),
                &format!("{} is 1.63", fake.join("rustc").display()),
            ],
        );
        assert_eq!(s.apt_get_calls(), "", "{target}: apt-get was run");
    }
}

#[test]
fn missing_cargo_stops_at_once_and_installs_nothing() {
    let s = Sandbox::new("missing", None, Some("1.95.0 (59807616e 2026-04-14)"));
    let r = s.deps("build");
    stops_with_advice(&r, &["cargo: not found on PATH"]);
    assert!(!r.stderr().contains("rustc: not found"), "{r:?}");
    assert_eq!(s.apt_get_calls(), "");
}

#[test]
fn a_new_enough_toolchain_passes_and_cargo_is_never_installed() {
    let req = required();
    let next = {
        let (major, minor) = req.split_once('.').unwrap();
        format!(
            "{major}.{}.0-nightly (abc 2026-01-01)",
            minor.parse::<u32>().unwrap() + 1
        )
    };
    for (cargo, rustc) in [
        (format!("{req}.0 (x)"), format!("{req}.1")),
        (next.clone(), next),
    ] {
        let s = Sandbox::new("new", Some(&cargo), Some(&rustc));
        let r = s.deps("build");
        assert!(!r.stderr().contains("Rust >="), "{r:?}");
        // What is missing besides Rust: the C compiler and the Slurm headers.
        if is_root() {
            r.ok();
            let calls = s.apt_get_calls();
            let install = calls
                .lines()
                .find(|l| l.contains(" install "))
                .unwrap_or_else(|| panic!("no install: {calls}"));
            assert!(install.ends_with(" gcc libslurm-dev"), "{install}");
            assert!(
                !calls.contains("cargo") && !calls.contains("rustc"),
                "{calls}"
            );
        } else {
            assert_eq!(r.code(), Some(1), "{r:?}");
            assert!(r.stderr().contains("missing: gcc libslurm-dev;"), "{r:?}");
            assert_eq!(s.apt_get_calls(), "");
        }
    }
}
