//! A reader that closes sqfs's standard output early (`sqfs inspect IMG |
//! head -5`): every subcommand that prints stops quietly with status 141
//! (what a shell reports for a program killed by SIGPIPE), never a panic
//! ("failed printing to stdout"), and what it was asked to do is done
//! (the image is written, the list saved). The pipe's read end is closed
//! before sqfs starts, so every write fails with EPIPE.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sqfsmnt_test_support::cmd::{ok, run_for, Run};
use sqfsmnt_test_support::tree::{sqfs_command, temp_with, write, Rng, TempDir};
use sqfsmnt_test_support::{have, loud_skip};

fn sqfs() -> Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}

fn tree(root: &Path) {
    let mut rng = Rng(7);
    for d in ["a", "b"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
        for i in 0..4 {
            write(
                &root.join(format!("{d}/f{i}")),
                &rng.text(5_000),
                1_600_000_000,
            );
        }
    }
}

/// `cmd` with its standard output a pipe nobody reads any more.
/// (Its stdout is what is under test: not [`run`]'s pipe.)
fn closed_stdout(cmd: &mut Command) -> Run {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // (No time limit needed beyond the test's: nothing here waits on input.)
    let stderr = {
        let mut v = Vec::new();
        std::io::Read::read_to_end(child.stderr.as_mut().unwrap(), &mut v).unwrap();
        v
    };
    let status = child.wait().unwrap();
    let out = Output {
        status,
        stdout: Vec::new(),
        stderr,
    };
    Run::of(cmd, out)
}

#[track_caller]
fn quiet_141(what: &str, o: &Run) {
    let err = o.stderr();
    assert_eq!(o.code(), Some(141), "{what}: {o:?}");
    assert!(err.is_empty(), "{what}: stderr: {err}");
}

#[test]
fn every_printing_subcommand_ends_quietly_with_141() {
    if !have("mksquashfs") {
        loud_skip("closed standard output of sqfs: mksquashfs (squashfs-tools) missing");
        return;
    }
    let (t, dir, ()) = temp_with("closed-stdout", "tree", tree);
    let image = t.path().join("a.sqfs");
    ok(sqfs().args(["pack", "--quiet"]).arg(&dir).arg(&image));

    for json in [false, true] {
        let mut c = sqfs();
        c.arg("inspect").arg(&image);
        if json {
            c.arg("--json");
        }
        quiet_141(&format!("inspect json={json}"), &closed_stdout(&mut c));
    }
    for json in [false, true] {
        let out = t.path().join(format!("p{json}.sqfs"));
        let mut c = sqfs();
        c.args(["pack", "--no-progress"]).arg(&dir).arg(&out);
        if json {
            c.arg("--json");
        }
        quiet_141(&format!("pack json={json}"), &closed_stdout(&mut c));
        assert!(out.is_file(), "pack json={json}: the image was not written");
    }
    let prefix = t.path().join("part");
    quiet_141(
        "pack --split",
        &closed_stdout(
            sqfs()
                .args(["pack", "--no-progress", "--split", "1M"])
                .arg(&dir)
                .arg(&prefix),
        ),
    );
    assert!(t.path().join("part-01.sqfs").is_file());
    quiet_141(
        "bench --no-run",
        &closed_stdout(
            sqfs()
                .args(["bench", "--no-run", "--comp", "lz4", "--svg"])
                .arg(t.path().join("c.svg"))
                .arg("--work-dir")
                .arg(t.path())
                .arg(&dir),
        ),
    );
    for args in [
        &["completions", "bash"][..],
        &["--version"],
        &["-V"],
        &["--help"],
        &["inspect", "--help"],
    ] {
        quiet_141(&args.join(" "), &closed_stdout(sqfs().args(args)));
    }
    if have("fincore") {
        let list = t.path().join("hot.list");
        quiet_141(
            "trace",
            &closed_stdout(
                sqfs()
                    .args(["trace", "--output"])
                    .arg(&list)
                    .arg(&dir)
                    .args(["--", "cat"])
                    .arg(dir.join("a/f1")),
            ),
        );
        assert!(list.is_file(), "trace: the list was not written");
    } else {
        loud_skip("sqfs trace with a closed standard output: fincore (util-linux) missing");
    }
}

/// A failure is still reported as one: the error goes to standard error
/// (open) with status 1, even when standard output is closed.
#[test]
fn errors_still_say_what_went_wrong() {
    let t = TempDir::new("closed-stdout-error");
    let o = closed_stdout(sqfs().arg("inspect").arg(t.path().join("missing.sqfs")));
    assert_eq!(o.code(), Some(1));
    assert!(o.stderr().contains("missing.sqfs"), "{}", o.stderr());
    // And an open standard output still gets everything.
    let o = run_for(sqfs().arg("--version"), Duration::from_secs(10));
    assert_eq!(o.stdout(), format!("{}\n", env!("CARGO_PKG_VERSION")));
}
