//! The rough edges of `sqfs` a new user met (issue 28): each fails on the
//! code before the fix.

use sqfsmnt_test_support::cmd::{ok, run};
use sqfsmnt_test_support::tree::{sqfs_command, tree_in, Rng, TempDir};

fn sqfs() -> std::process::Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// `sqfs pack` onto a directory is refused at once, with or without
/// --force (it used to say "pass --force", then fail after the build).
#[test]
fn pack_onto_a_directory_is_refused_before_building() {
    let (t, a) = tree_in("edge-pack-dir", "a");
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for force in [false, true] {
        let mut c = sqfs();
        c.arg("pack");
        if force {
            c.arg("--force");
        }
        let o = run(c.arg(&a).arg(&out));
        let err = o.stderr();
        assert_eq!(o.code(), Some(1), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("{} is a directory", out.display()))
                && err.contains("out/image.sqfs"),
            "force={force}: {err}"
        );
        assert!(o.0.stdout.is_empty());
    }
    // Nothing was built next to it.
    let names: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// Into a directory the caller cannot write: one line naming the
/// directory (it used to be mksquashfs's two lines, without the path).
#[test]
fn pack_into_an_unwritable_directory_names_it() {
    let (t, a) = tree_in("edge-pack-unwritable", "a");
    let closed = t.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o555)).unwrap();
    for d in [t.path(), a.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let image = closed.join("x.sqfs");
    let mut inner = sqfs();
    inner.arg("pack").arg(&a).arg(&image);
    let mut cmd = if is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(inner.get_program())
            .args(inner.get_args());
        c
    } else {
        inner
    };
    let o = run(&mut cmd);
    let err = o.stderr();
    assert_eq!(o.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(&closed.display().to_string()) && err.contains("Permission denied"),
        "{err}"
    );
    assert!(!image.exists());
}

/// Data that does not compress is called so, with its percentage; only a
/// tiny tree's overhead is "metadata outweighs it".
#[test]
fn incompressible_data_is_not_called_metadata() {
    let t = TempDir::new("edge-pack-random");
    let a = t.path().join("a");
    std::fs::create_dir(&a).unwrap();
    std::fs::write(a.join("scan.nii.gz"), Rng(7).bytes(3 << 20)).unwrap();
    let o = ok(sqfs().arg("pack").arg(&a).arg(t.path().join("r.sqfs")));
    let line = o.stdout();
    assert!(!line.contains("metadata outweighs"), "{line}");
    assert!(
        line.contains("does not compress") && line.contains('%'),
        "{line}"
    );
}

/// `sqfs trace --json`: standard output is the JSON alone, whatever the
/// command prints (its output goes to standard error).
#[test]
fn trace_json_is_only_json() {
    if sqfsmnt_test_support::cmd::try_run(std::process::Command::new("fincore").arg("--version"))
        .is_none()
    {
        eprintln!(
            "\n*** SKIPPED trace_json_is_only_json: fincore (util-linux) is not installed ***\n"
        );
        return;
    }
    let (t, tree) = tree_in("edge-trace-json", "tree");
    let o = run(sqfs()
        .args(["trace", "--json", "--output"])
        .arg(t.path().join("hot.list"))
        .arg(&tree)
        .args(["--", "echo", "hello from the command"]));
    o.ok();
    let j: Result<serde_json::Value, _> = serde_json::from_slice(&o.0.stdout);
    assert!(j.is_ok(), "not JSON: {}", o.stdout());
    assert!(o.stderr().contains("hello from the command"));
}

/// `--mount-point` is the spelling of both `pack --layer` and `bench`;
/// `--mountpoint` is its alias in both.
#[test]
fn mount_point_is_spelt_one_way_with_an_alias() {
    for sub in ["pack", "bench"] {
        let o = ok(sqfs().args([sub, "--help"]));
        let help = o.stdout();
        assert!(help.contains("--mount-point <"), "{sub}: {help}");
        assert!(help.contains("--mountpoint"), "{sub}: {help}");
    }
    // The alias is accepted (the error is about the missing layer, not the option).
    let t = TempDir::new("edge-mount-point");
    let o = run(sqfs()
        .args(["pack", "--layer", "--mountpoint", "/m"])
        .arg(t.path().join("nolayer"))
        .arg(t.path().join("x.sqfs")));
    assert!(!o.stderr().contains("unknown option"), "{}", o.stderr());
}

/// `sqfs completions` is listed in --help; misspelt options and commands
/// get a suggestion, on one line, in sqfs's style.
#[test]
fn completions_are_listed_and_mistakes_get_suggestions() {
    let o = ok(sqfs().arg("--help"));
    let help = o.stdout();
    assert!(help.contains("\n  completions "), "{help}");
    for (args, want) in [
        (
            &["pack", "--forse", "a", "b"][..],
            "did you mean '--force'?",
        ),
        (&["pakc"], "'pack'"),
        (&["pack"], "see 'sqfs pack --help'"),
    ] {
        let o = run(sqfs().args(args));
        let err = o.stderr();
        assert_eq!(o.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("sqfs: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// Every example of `sqfs trace --help` pastes as it is: lines are not
/// wrapped inside a quoted argument (each line has balanced quotes).
#[test]
fn trace_help_examples_paste() {
    for width in ["80", "100"] {
        let o = ok(sqfs().args(["trace", "--help"]).env("COLUMNS", width));
        let help = o.stdout();
        let examples = help.split("Examples:\n").nth(1).expect("Examples");
        let mut n = 0;
        for line in examples.lines().take_while(|l| l.starts_with("  ")) {
            n += 1;
            assert!(
                line.matches('\'').count() % 2 == 0,
                "width {width}: {line:?}"
            );
            assert!(line.len() <= 78, "width {width}: {line:?}");
        }
        assert!(n >= 3, "{help}");
    }
}
