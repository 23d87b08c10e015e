//! The rough edges a new user met (issue 28), against the installed
//! setuid binary as an unprivileged test user. Each test fails on the code
//! before the fix.

use std::io::Write;
use std::process::{Command, Stdio};

use sqfsmnt_test_support::cmd::run_for;
use sqfsmnt_test_support::{s, site, Fixture};

use crate::case;

/// An image with a program, bin/hello.
fn edges_image(fx: &Fixture) -> std::path::PathBuf {
    fx.image(
        "edges",
        &[("bin/hello", "#!/bin/sh\necho hi\n")],
        "chmod 755 bin/hello",
    )
}

/// Whether `text` is one JSON value (python3's parser; the crate has none).
fn is_json(text: &str) -> bool {
    let mut c = Command::new("python3")
        .args(["-c", "import json, sys; json.load(sys.stdin)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    c.wait().unwrap().success()
}

/// `-r` with a mount point in a directory of the user's (their home):
/// one warning line without -v, since the command cannot create files
/// there any more; said once with -v too. Elsewhere (a root-owned
/// directory), nothing without -v.
#[test]
fn mutable_root_in_your_own_directory_warns() {
    case(|fx| {
        let _conf = site::no_config();
        let img = edges_image(fx);
        let home = fx.user_dir();
        let m = home.join("stack");
        let pair = format!("{}:{}", s(&img), s(&m));
        let r = fx.run(["-r", pair.as_str(), "--", "true"]);
        r.ok();
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("warning: -r")
                && err.contains(&format!("{} is shown read-only", s(&home)))
                && err.contains("mkdir"),
            "{err}"
        );
        let r = fx.run(["-v", "-r", pair.as_str(), "--", "true"]);
        r.ok();
        assert_eq!(r.stderr().matches("-r: ").count(), 1, "{}", r.stderr());
        assert!(!m.exists(), "nothing made on the host");
        // A root-owned directory: quiet.
        let m = fx.mount_point("edges-parent").join("sub");
        let pair = format!("{}:{}", s(&img), s(&m));
        let r = fx.run(["-r", pair.as_str(), "--", "true"]);
        r.ok();
        assert!(r.stderr().is_empty(), "{}", r.stderr());
    });
}

/// A command that is not on the caller's PATH: the image's program is
/// named by its path; otherwise the mount point is named.
#[test]
fn a_command_not_found_points_into_the_image() {
    case(|fx| {
        let _conf = site::no_config();
        let img = edges_image(fx);
        let m = fx.mount_point("edges-cmd");
        let pair = format!("{}:{}", s(&img), s(&m));
        let run = |cmd: &str| {
            let mut c = fx.user_cmd([pair.as_str(), "--", cmd]);
            c.env("PATH", "/usr/bin:/bin");
            run_for(&mut c, std::time::Duration::from_secs(120))
        };
        let r = run("hello");
        assert_eq!(r.code(), Some(127), "{}", r.stderr());
        assert!(
            r.stderr().contains(&format!("{}/bin/hello", s(&m))),
            "{}",
            r.stderr()
        );
        let r = run("nosuchprogram");
        assert_eq!(r.code(), Some(127), "{}", r.stderr());
        assert!(
            r.stderr().contains("not on your PATH") && r.stderr().contains(&s(&m)),
            "{}",
            r.stderr()
        );
        // A path is not second-guessed.
        let r = run("/nonexistent/prog");
        assert!(!r.stderr().contains("PATH"), "{}", r.stderr());
    });
}

/// `--policy`: says whether the configuration file exists and whether the
/// caller can use FUSE, has --json, and fails for an image the caller
/// cannot read.
#[test]
fn policy_tells_the_caller_what_applies_to_them() {
    case(|fx| {
        let own = fx.user_image("edges-own", &[("a", "a\n")]);
        let closed = fx.image("edges-closed", &[("a", "a\n")], "");
        std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        {
            let _conf = site::no_config();
            let _fuse = site::FuseDevice::with(0, 0o600);
            let r = fx.run(["--policy", s(&own).as_str()]);
            r.ok();
            let out = r.stdout();
            assert!(
                out.contains("/etc/squashfs-mount.conf does not exist"),
                "{out}"
            );
            assert!(
                out.contains("FUSE path") && out.contains("NOT usable by you"),
                "{out}"
            );
            assert!(out.contains(&format!("{}: FUSE (", s(&own))), "{out}");
            assert!(out.contains("a launch is refused here"), "{out}");
            let r = fx.run(["--policy", "--json", s(&own).as_str()]);
            r.ok();
            assert!(is_json(&r.stdout()), "{}", r.stdout());
            for n in [
                "\"fuse_usable\":false",
                "\"config_file_exists\":false",
                "\"mountable_here\":false",
            ] {
                assert!(r.stdout().contains(n), "{n}: {r:?}");
            }
        }
        {
            let _conf = site::config("kernel-images = trusted\n");
            let _fuse = site::FuseDevice::open_to_all();
            let r = fx.run(["--policy", "--json", s(&own).as_str()]);
            r.ok();
            for n in [
                "\"fuse_usable\":true",
                "\"config_file_exists\":true",
                "\"path\":\"FUSE\"",
                "\"mountable_here\":true",
            ] {
                assert!(r.stdout().contains(n), "{n}: {r:?}");
            }
            let r = fx.run(["--policy", s(&own).as_str()]);
            assert!(r.stdout().contains("usable by you") && !r.stdout().contains("NOT usable"));
            assert!(r
                .stdout()
                .contains("/etc/squashfs-mount.conf (built-in defaults where it sets nothing)"));
            // An image the caller cannot read: named on stderr, exit 1.
            let r = fx.run(["--policy", s(&own).as_str(), s(&closed).as_str()]);
            r.refused(&[&s(&closed), "Permission denied"]);
            assert!(
                r.stdout().contains(&format!("{}: FUSE (", s(&own))),
                "{}",
                r.stdout()
            );
        }
    });
}

/// `--help` shows the `-r --bind-mount` form, says where a user's own
/// images go, and points to the manual.
#[test]
fn help_shows_the_bind_form_and_the_manual() {
    case(|fx| {
        let r = fx.run(["--help"]);
        r.ok();
        let out = r.stdout();
        let synopsis: Vec<&str> = out.lines().take_while(|l| !l.is_empty()).collect();
        assert!(
            synopsis.iter().any(|l| l.contains("[-r] --bind-mount=")),
            "{out}"
        );
        assert!(out.contains("squashfs-mount(1)"), "{out}");
        assert!(out.contains("your own images"), "{out}");
        // A misspelt option gets a suggestion.
        fx.run(["--bindmount=/a:/b", "--", "true"])
            .refused(&["did you mean '--bind-mount'?"]);
        fx.run(["--writable=mylayer", "x:/m", "--", "true"])
            .refused(&["--writable=./mylayer"]);
    });
}

/// Issue 39: `--help` lists `--verbose=N` and `--writable DIR`, and a kept
/// layer's directory may be the next word, as every option's value (the
/// man page says so; the shell expands a `~` there): the launch mounts the
/// layer kept in that directory.
#[test]
fn writable_dir_as_the_next_word_and_help_lists_verbose_n() {
    case(|fx| {
        let help = fx.run(["--help"]);
        help.ok();
        for want in ["--verbose=N", "--writable DIR"] {
            assert!(help.stdout().contains(want), "--help lacks {want}");
        }
        let _conf = site::no_config();
        let (img, m) = fx.image_at("rough-layer", &[("x.txt", "ex\n")]);
        let layer = fx.user_dir().join("next-word-layer");
        let r = fx.launch_sh(
            &[
                "--writable".to_string(),
                s(&layer),
                format!("{}:{}", s(&img), s(&m)),
            ],
            &format!(
                "cat {0}/x.txt; grep -q ' {0} .* - overlay ' /proc/self/mountinfo && echo overlay",
                s(&m)
            ),
        );
        r.ok();
        assert_eq!(r.stdout(), "ex\noverlay\n");
        assert!(r.stderr().is_empty(), "{}", r.stderr());
        assert!(layer.is_dir(), "no layer kept in {}", layer.display());
    });
}

/// Issue 39: messages name users, not bare ids: the route of a user's own
/// image names its owner (`owned by uid N (NAME)`), and the policy in
/// force lists its trusted owners by name (`trusted-owners = root`).
#[test]
fn messages_name_users_not_bare_ids() {
    case(|fx| {
        let _conf = site::no_config();
        let own = fx.user_image("rough-named", &[("x.txt", "ex\n")]);
        let r = fx.run(["--policy".to_string(), s(&own)]);
        r.ok();
        let out = r.stdout();
        assert!(
            out.contains(&format!("owned by uid {} ({})", fx.uid, fx.user.name)),
            "{out}"
        );
        // (`--policy` notes after a `#` what a value does not say.)
        assert!(
            out.lines()
                .any(|l| l.split('#').next().map(str::trim_end) == Some("trusted-owners = root")),
            "{out}"
        );
    });
}
