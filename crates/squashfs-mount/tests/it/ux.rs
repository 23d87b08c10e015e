//! The rough edges a new user hits (issue 13): messages for the usual
//! mistakes, quiet success, the cache commands, and one convention with
//! sqfs. As an unprivileged test user against the installed setuid binary.

use std::fs;
use std::path::Path;

use sqfsmnt_test_support::s;
use sqfsmnt_test_support::Fixture;

use crate::case;

fn image(fx: &Fixture) -> std::path::PathBuf {
    fx.image("ux", &[("x.txt", "ex\n"), ("dir/y.txt", "why\n")], "")
}

#[test]
fn no_arguments_print_the_usage_and_no_command_given() {
    case(|fx| {
        let r = fx.run(std::iter::empty::<&str>());
        assert_eq!(r.code(), Some(1));
        let err = r.stderr();
        assert!(err.starts_with("Usage: squashfs-mount"), "{err}");
        assert!(
            err.trim_end().ends_with("squashfs-mount: no command given"),
            "{err}"
        );
        assert!(r.stdout().is_empty());
    });
}

#[test]
fn images_without_a_command_and_a_command_without_dashes() {
    case(|fx| {
        let m = fx.mount_point("nocmd");
        let pair = format!("{}:{}", s(&image(fx)), s(&m));
        fx.run([pair.as_str()])
            .refused(&["no command given", "after '--'"]);
        // A bare word where a pair was expected: the '--' was forgotten.
        fx.run([pair.as_str(), "ls", s(&m).as_str()])
            .refused(&["'ls'", "did you forget '--' before the command?"]);
    });
}

#[test]
fn inside_a_session_says_so() {
    case(|fx| {
        let (m1, m2) = (fx.mount_point("outer"), fx.mount_point("inner"));
        let img = s(&image(fx));
        let r = fx.user_sh(&format!(
            "\"$SQM\" {img}:{} -- \"$SQM\" {img}:{} -- true",
            s(&m1),
            s(&m2)
        ));
        r.refused(&[
            "already inside a squashfs-mount session",
            "no_new_privs",
            "name all images in one call",
        ]);
    });
}

#[test]
fn a_union_of_one_image_is_a_plain_mount() {
    case(|fx| {
        let m = fx.mount_point("union1");
        let r = fx.run([
            format!("--union={}:{}", s(&image(fx)), s(&m)),
            "--".into(),
            "cat".into(),
            s(&m.join("x.txt")),
        ]);
        r.ok();
        assert_eq!(r.stdout(), "ex\n");
        assert!(r.stderr().is_empty(), "{}", r.stderr());
    });
}

#[test]
fn the_command_starts_in_the_mounted_tree() {
    case(|fx| {
        let m = fx.mount_point("cwd");
        fs::create_dir_all(m.join("dir")).unwrap();
        fs::write(m.join("hidden.txt"), "hidden\n").unwrap();
        let img = s(&image(fx));
        // At the mount point, and below it.
        let r = fx.user_sh(&format!(
            "cd {0} && \"$SQM\" {img}:{0} -- sh -c 'ls; pwd'",
            s(&m)
        ));
        r.ok();
        assert_eq!(r.stdout(), format!("dir\nx.txt\n{}\n", s(&m)));
        let r = fx.user_sh(&format!(
            "cd {0}/dir && \"$SQM\" {img}:{0} -- cat y.txt",
            s(&m)
        ));
        r.ok();
        assert_eq!(r.stdout(), "why\n");
        assert!(r.stderr().is_empty(), "{}", r.stderr());
        fs::remove_file(m.join("hidden.txt")).unwrap();
    });
}

#[test]
fn writable_size_as_a_separate_word_and_byte_units() {
    case(|fx| {
        let m = fx.mount_point("wsize");
        let pair = format!("{}:{}", s(&image(fx)), s(&m));
        for size in [
            ["--writable", "64M"],
            ["--writable=64MiB", "--no-cache"],
            ["--writable=64MB", "--no-cache"],
        ] {
            let r = fx.run([
                size[0],
                size[1],
                pair.as_str(),
                "--",
                "sh",
                "-c",
                &format!("df -B1 --output=size {} | tail -1", s(&m)),
            ]);
            r.ok();
            assert_eq!(r.stdout().trim(), (64u64 << 20).to_string(), "{size:?}");
        }
        fx.run(["--writable", "64Q", pair.as_str(), "--", "true"])
            .refused(&["64Q", "size"]);
    });
}

#[test]
fn an_unexpanded_tilde_gets_a_hint() {
    case(|fx| {
        fx.run([
            format!("{}:~/mnt", s(&image(fx))),
            "--".into(),
            "true".into(),
        ])
        .refused(&["'~' was not expanded", "$HOME"]);
        fx.run(["~/img.sqfs:/tmp", "--", "true"])
            .refused(&["'~' was not expanded"]);
    });
}

#[test]
fn version_forms_and_usage_errors() {
    case(|fx| {
        let want = format!("{}\n", env!("CARGO_PKG_VERSION"));
        for flag in ["-V", "--version"] {
            let r = fx.run([flag]);
            r.ok();
            assert_eq!(r.stdout(), want, "{flag}");
        }
        let r = fx.run(["--bogus", "--", "true"]);
        r.refused(&["unknown option '--bogus'"]);
        // No "(os error N)" in messages.
        let r = fx.run(["/nonexistent.sqfs:/tmp", "--", "true"]);
        r.refused(&["No such file or directory"]);
        assert!(!r.stderr().contains("os error"), "{}", r.stderr());
    });
}

#[test]
fn cache_commands_for_one_user() {
    case(|fx| {
        let m = fx.mount_point("gcimg");
        let img = image(fx);
        let pair = format!("{}:{}", s(&img), s(&m));
        fx.run([pair.as_str(), "--", "true"]).ok();
        // --cache-status: a table with a human-readable size, and JSON.
        let table = fx.run(["--cache-status"]);
        table.ok();
        assert!(
            table.stdout().contains(&s(&img)) && table.stdout().contains(" KiB"),
            "{}",
            table.stdout()
        );
        let json = fx.run(["--cache-status", "--json"]);
        json.ok();
        let j = json.stdout();
        assert!(
            j.starts_with("[{\"state\":\"idle\"")
                && j.contains(&format!("\"image\":\"{}\"", s(&img)))
                && j.contains(&format!("\"created_by\":{}", fx.uid)),
            "{j}"
        );
        // --gc IMAGE evicts that image's instance.
        let r = fx.run(["--gc", s(&img).as_str()]);
        r.ok();
        assert!(
            r.stdout().contains(&format!("evicted {}", s(&img))),
            "{}",
            r.stdout()
        );
        assert_eq!(fx.run(["--cache-status", "--json"]).stdout(), "[]\n");
        // A usage error of the cache commands.
        fx.run(["--gc", "--all", s(&img).as_str()])
            .refused(&["cannot be combined with --gc"]);
    });
}

#[test]
fn the_command_gets_the_callers_signal_dispositions() {
    case(|fx| {
        // As with nohup: a signal the caller ignores stays ignored for the
        // command (only what the tool itself changed is given back).
        let m = fx.mount_point("signals");
        let r = fx.user_sh(&format!(
            "trap '' HUP; \"$SQM\" {}:{} -- sh -c 'kill -HUP $$; echo alive'",
            s(&image(fx)),
            s(&m)
        ));
        r.ok();
        assert_eq!(r.stdout(), "alive\n");
        // SIGPIPE as the caller had it: the default (the tool ignores it
        // while it runs).
        let r = fx.user_sh(&format!(
            "\"$SQM\" {}:{} -- sh -c 'yes | head -1'",
            s(&image(fx)),
            s(&m)
        ));
        r.ok();
        assert_eq!(r.stdout(), "y\n");
        // (With SIGPIPE ignored, yes would report "Broken pipe".)
        assert!(r.stderr().is_empty(), "{}", r.stderr());
        // And a caller who ignores SIGPIPE passes that on.
        let r = fx.user_sh(&format!(
            "trap '' PIPE; \"$SQM\" {}:{} -- sh -c 'yes | head -1'",
            s(&image(fx)),
            s(&m)
        ));
        r.ok();
        assert!(r.stderr().contains("Broken pipe"), "{}", r.stderr());
    });
}

/// `make demo` (scripts/demo, on the built programs), run beside another
/// user's cached instances (a kernel one and a FUSE one): it succeeds, also
/// where /dev/fuse is kept from users (mode 0600: it opens it for its run
/// and gives its mode back), says where its directory stays, and leaves no
/// setuid binary, no demo user, no file of the removed user's uid, no FUSE
/// log of it, no loop device and no mount behind. It evicts only its own
/// instances: the other user's stay cached, their server running (an
/// administrator may try the demo on a login node).
#[test]
fn the_demo_leaves_its_directory_and_nothing_else() {
    case(|fx| {
        // The other user's warm instances: root's image (kernel) and the
        // user's own (FUSE, its server running for the user).
        let _users_fuse = sqfsmnt_test_support::site::FuseForUsers::enable();
        let theirs = image(fx);
        let own = fx.user_image("ux-own", &[("own.txt", "own\n")]);
        let m = fx.mount_point("demo-beside");
        for img in [&theirs, &own] {
            fx.run([format!("{}:{}", s(img), s(&m)), "--".into(), "true".into()])
                .ok();
        }
        let cached = || fx.run(["--cache-status", "--json"]).stdout();
        let before = cached();
        assert!(
            before.contains(&s(&theirs)) && before.contains(&s(&own)),
            "{before}"
        );
        let serving = || {
            !sqfsmnt_test_support::count::processes_named(
                fx.uid,
                sqfsmnt_test_support::count::FUSE_SERVER_NAME,
            )
            .is_empty()
        };
        assert!(serving(), "no FUSE server of the user's");
        let _fuse = sqfsmnt_test_support::site::FuseDevice::with(0, 0o600);
        let built = Path::new(env!("CARGO_BIN_EXE_squashfs-mount"));
        let target = built.parent().and_then(Path::parent).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/demo");
        let out = sqfsmnt_test_support::cmd::run(
            std::process::Command::new(&script).env("CARGO_TARGET_DIR", target),
        );
        let stdout = out.ok().stdout();
        assert!(stdout.contains("file system type: fuse"), "{stdout}");
        // The other user's instances: still cached, the server still theirs.
        let after = cached();
        assert!(
            after.contains(&s(&theirs)) && after.contains(&s(&own)),
            "the demo evicted another user's instances:\nbefore: {before}\nafter: {after}"
        );
        assert!(serving(), "the demo ended the other user's FUSE server");
        let dir = stdout
            .lines()
            .find_map(|l| l.strip_prefix("The demo directory stays in "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or_else(|| {
                panic!("the demo does not say where it left its directory:\n{stdout}")
            });
        let demo_uid: u32 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("the demo user: sqfsmnt-demo (uid "))
            .and_then(|l| l.strip_suffix(')'))
            .and_then(|u| u.parse().ok())
            .unwrap_or_else(|| panic!("the demo does not name its user's uid:\n{stdout}"));
        the_demo_left_only_its_directory(Path::new(dir), demo_uid);
    });
}

/// The demo's directory `dir` holds no setuid binary and no file of the
/// removed demo user `demo_uid`, and no demo user, FUSE log, loop device
/// or mount is left; /dev/fuse has its mode back. Removes `dir`.
fn the_demo_left_only_its_directory(dir: &Path, demo_uid: u32) {
    let bin = dir.join("prefix/bin/squashfs-mount");
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(&bin).unwrap().permissions().mode();
    assert_eq!(mode & 0o4000, 0, "{} is still setuid", bin.display());
    assert!(dir.join("stack.sqfs").exists());
    let user = sqfsmnt_test_support::cmd::run(std::process::Command::new("id").arg("sqfsmnt-demo"));
    assert!(!user.success(), "the demo user is left: {user:?}");
    let log = format!("/run/squashfs-mount-fuse/{demo_uid}.log");
    assert!(!Path::new(&log).exists(), "the demo left {log}");
    let orphans = sqfsmnt_test_support::cmd::run(
        std::process::Command::new("find")
            .arg(dir)
            .args(["-uid", &demo_uid.to_string()]),
    );
    assert!(
        orphans.stdout().is_empty(),
        "files of the removed user's uid:\n{}",
        orphans.stdout()
    );
    assert!(sqfsmnt_test_support::count::loops_under(dir).is_empty());
    assert!(sqfsmnt_test_support::count::mounts_under(dir).is_empty());
    let fuse_mode = fs::metadata("/dev/fuse").unwrap().permissions().mode() & 0o7777;
    assert_eq!(
        fuse_mode, 0o600,
        "the demo did not give /dev/fuse its mode back"
    );
    fs::remove_dir_all(dir).unwrap();
}
