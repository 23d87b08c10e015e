//! Unit tests of the command line.

use super::*;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}
fn run(list: &[&str]) -> RunRequest {
    match parse(&args(list)).unwrap() {
        Invocation::Run(r) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn single_pair() {
    let r = run(&["a.sqfs:/mnt", "--", "true"]);
    assert_eq!(r.mounts.len(), 1);
    assert_eq!(r.mounts[0].images, ["a.sqfs"]);
    assert_eq!(r.mounts[0].mount_point, "/mnt");
    assert_eq!(r.command, args(&["true"]));
}

#[test]
fn several_pairs_and_sqfs_list() {
    let r = run(&["--sqfs=a:/x,b:/y", "c:/z", "--", "ls", "-l", "--", "x"]);
    let got: Vec<_> = r.mounts.iter().map(|m| m.describe()).collect();
    assert_eq!(got, ["a:/x", "b:/y", "c:/z"]);
    assert_eq!(r.command, args(&["ls", "-l", "--", "x"]));
    let r = run(&["--sqfs", "a:/x", "--", "true"]);
    assert_eq!(r.mounts.len(), 1);
}

#[test]
fn no_pairs_is_passthrough() {
    assert!(run(&["--", "env"]).mounts.is_empty());
}

#[test]
fn help_and_version() {
    assert_eq!(parse(&args(&["-h"])).unwrap(), Invocation::Help);
    assert_eq!(parse(&args(&["--version"])).unwrap(), Invocation::Version);
    assert_eq!(parse(&args(&["-V"])).unwrap(), Invocation::Version);
    // -v is uenv's --verbose, no longer the C tool's --version: alone it
    // asks for a command.
    assert_eq!(parse(&args(&["-v"])), Err(UsageError::NoCommandAtEnd));
    // After '--' everything belongs to the command.
    assert!(matches!(
        parse(&args(&["--", "x", "-h"])).unwrap(),
        Invocation::Run(_)
    ));
}

#[test]
fn invalid() {
    for bad in [
        &["invalid_argument", "--", "true"][..],
        &["a:/m"],
        &["a:/m", "--"],
        &[":/m", "--", "true"],
        &["a:", "--", "true"],
        &["a:b:c", "--", "true"],
        &["--bogus", "--", "true"],
        &["--sqfs=", "--", "true"],
        &["--sqfs=a:/x,", "--", "true"],
        &["a\n:/m", "--", "true"],
        &[],
    ] {
        assert!(parse(&args(bad)).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn non_utf8_paths_are_kept_exactly() {
    let a = vec![
        OsString::from_vec(b"im\xffg:/mn\xfet".to_vec()),
        "--".into(),
        "true".into(),
    ];
    let Invocation::Run(r) = parse(&a).unwrap() else {
        panic!()
    };
    assert_eq!(r.mounts[0].images[0].as_bytes(), b"im\xffg");
    assert_eq!(r.mounts[0].mount_point.as_bytes(), b"/mn\xfet");
}

#[test]
fn cache_options() {
    assert!(!run(&["a:/m", "--", "true"]).no_cache);
    assert!(run(&["--no-cache", "a:/m", "--", "true"]).no_cache);
    assert!(run(&["a:/m", "--no-cache", "--", "true"]).no_cache);
    // After '--' it belongs to the command.
    assert!(!run(&["a:/m", "--", "true", "--no-cache"]).no_cache);
    let gc = |all, expired, image: Option<&str>| Invocation::Gc {
        all,
        expired,
        image: image.map(OsString::from),
    };
    for (words, want) in [
        (&["--gc"][..], gc(false, false, None)),
        (&["--gc", "--all"], gc(true, false, None)),
        (&["--all", "--gc"], gc(true, false, None)),
        (&["--gc", "a.sqfs"], gc(false, false, Some("a.sqfs"))),
        (&["--gc", "--expired"], gc(false, true, None)),
        (&["--cache-status"], Invocation::CacheStatus { json: false }),
        (
            &["--cache-status", "--json"],
            Invocation::CacheStatus { json: true },
        ),
        (
            &["--policy"],
            Invocation::Policy {
                images: vec![],
                json: false,
            },
        ),
        (
            &["--policy", "a", "b"],
            Invocation::Policy {
                images: args(&["a", "b"]),
                json: false,
            },
        ),
        (
            &["--policy", "--json", "a"],
            Invocation::Policy {
                images: args(&["a"]),
                json: true,
            },
        ),
    ] {
        assert_eq!(parse(&args(words)).unwrap(), want, "{words:?}");
    }
}

#[test]
fn maintenance_mistakes() {
    // A command may be called --gc.
    assert!(matches!(
        parse(&args(&["--", "--gc"])).unwrap(),
        Invocation::Run(_)
    ));
    for bad in [
        &["--gc", "a:/m", "--", "true"][..],
        &["--gc", "--cache-status"],
        &["--cache-status", "--all"],
        &["--all"],
        &["--all", "a:/m", "--", "true"],
        &["--gc", "--no-cache"],
        &["--gc", "--", "true"],
        &["--gc", "a", "b"],
        &["--gc", "--all", "a"],
        &["--gc", "--all", "--expired"],
        &["--expired"],
        &["--json"],
        &["--cache-status", "--json", "--all"],
        &["--policy", "--gc"],
        &["--policy", "--all"],
    ] {
        assert!(parse(&args(bad)).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn mistakes_get_hints() {
    let e = |list: &[&str]| parse(&args(list)).unwrap_err();
    assert_eq!(e(&[]), UsageError::NoCommand);
    assert_eq!(
        e(&[]).to_string(),
        format!("{NO_COMMAND} (see squashfs-mount --help)")
    );
    assert_eq!(e(&["a:/m"]), UsageError::NoCommandAtEnd);
    assert!(e(&["a:/m"])
        .to_string()
        .starts_with("no command given: put the command to run after '--'"));
    assert_eq!(e(&["a:/m", "--"]), UsageError::NoCommandAfterDashes);
    let bare = e(&["img.sqfs:/mnt", "ls", "/mnt"]);
    assert_eq!(bare, UsageError::NotAPair("ls".into()));
    assert!(bare.to_string().contains("did you forget '--'"), "{bare}");
    // A first word without ':' is not "a command after pairs".
    assert_eq!(
        e(&["img.sqfs", "--", "true"]),
        UsageError::NoColon("img.sqfs".into(), "<image>:<mountpoint>")
    );
}

#[test]
fn verbose_quiet_and_version() {
    assert!(run(&["-q", "--verbose", "a:/m", "--", "true"]).quiet);
    assert_eq!(run(&["a:/m", "--", "true"]).verbose, 0);
    for (words, level) in [
        (&["--verbose"][..], 1),
        (&["-v"], 1),
        (&["-vv"], 2),
        (&["-v", "-v"], 2),
        (&["-vvv"], 3),
        (&["-vvvvv"], 3),
        (&["--verbose", "-vv"], 3),
        (&["--verbose=2"], 2),
        (&["--verbose=0"], 0),
        (&["-qv"], 1),
    ] {
        let mut list = words.to_vec();
        list.extend(["a:/m", "--", "true"]);
        assert_eq!(run(&list).verbose, level, "{words:?}");
    }
    assert!(run(&["-qv", "a:/m", "--", "true"]).quiet);
    for bad in ["--verbose=4", "--verbose=", "--verbose=x", "-vx"] {
        assert!(parse(&args(&[bad, "a:/m", "--", "true"])).is_err(), "{bad}");
    }
    assert_eq!(parse(&args(&["-V"])).unwrap(), Invocation::Version);
    // The command's own -v is the command's.
    assert_eq!(run(&["a:/m", "--", "ls", "-v"]).verbose, 0);
}

#[test]
fn uenv_spellings() {
    // -s LIST, -sLIST, --sqfs LIST, --sqfs=LIST
    for words in [
        &["-s", "a:/x,b:/y"][..],
        &["-sa:/x,b:/y"],
        &["--sqfs", "a:/x,b:/y"],
        &["--sqfs=a:/x,b:/y"],
    ] {
        let mut list = words.to_vec();
        list.extend(["--", "true"]);
        let got: Vec<_> = run(&list).mounts.iter().map(|m| m.describe()).collect();
        assert_eq!(got, ["a:/x", "b:/y"], "{words:?}");
    }
    // -r and --mutable-root; combined short flags.
    assert!(!run(&["a:/m", "--", "true"]).mutable_root);
    assert!(run(&["-r", "a:/m", "--", "true"]).mutable_root);
    assert!(run(&["--mutable-root", "a:/m", "--", "true"]).mutable_root);
    let r = run(&["-rvv", "-s", "a:/m", "--", "true"]);
    assert!(r.mutable_root && r.verbose == 2);
}

#[test]
fn bind_mounts() {
    let r = run(&[
        "--bind-mount=/src1:/dst1,/src2:/dst2",
        "--bind-mount",
        "/src3:/dst3",
        "-r",
        "-s",
        "a:/m",
        "--",
        "sh",
        "-c",
        "true",
    ]);
    let got: Vec<_> = r.binds.iter().map(|b| b.describe()).collect();
    assert_eq!(got, ["/src1:/dst1", "/src2:/dst2", "/src3:/dst3"]);
    assert_eq!(r.binds[0].source, "/src1");
    assert_eq!(r.binds[0].destination, "/dst1");
    assert_eq!(r.command, args(&["sh", "-c", "true"]));
    // Binds alone are a request of their own.
    assert_eq!(run(&["--bind-mount=/a:/b", "--", "true"]).binds.len(), 1);
    for bad in [
        &["--bind-mount=", "--", "true"][..],
        &["--bind-mount=/a", "--", "true"],
        &["--bind-mount=:/b", "--", "true"],
        &["--bind-mount=/a:", "--", "true"],
        &["--bind-mount=/a:/b:/c", "--", "true"],
        &["--bind-mount=/a:/b,", "--", "true"],
        &["--bind-mount=/a\n:/b", "--", "true"],
    ] {
        assert!(parse(&args(bad)).is_err(), "{bad:?} accepted");
    }
    let e = parse(&args(&["--bind-mount=/a", "--", "true"])).unwrap_err();
    assert_eq!(
        e,
        UsageError::NoColon("/a".into(), "<source>:<destination>")
    );
}

#[test]
fn options_never_take_the_double_dash() {
    for opt in ["--bind-mount", "--sqfs", "-s", "--union"] {
        let e = parse(&args(&[opt, "--", "sh", "-c", "true"])).unwrap_err();
        assert!(
            matches!(&e, UsageError::NeedsValue(o, _) if o == opt),
            "{opt}: {e}"
        );
        assert!(e.to_string().contains("before '--'"), "{opt}: {e}");
        let e = parse(&args(&[opt])).unwrap_err();
        assert!(matches!(e, UsageError::NeedsValue(..)), "{opt}: {e}");
    }
}

#[test]
fn writable_size_as_the_next_word() {
    assert_eq!(
        run(&["--writable", "1G", "a:/m", "--", "true"]).writable,
        Some(LayerSize::Bytes(1 << 30))
    );
    assert_eq!(
        run(&["--writable", "25%", "a:/m", "--", "true"]).writable,
        Some(LayerSize::PercentOfRam(25))
    );
    // A pair, an option or '--' after it is not its size.
    let r = run(&["--writable", "a:/m", "--", "true"]);
    assert_eq!((r.writable, r.mounts.len()), (Some(LayerSize::DEFAULT), 1));
    assert_eq!(
        run(&["a:/m", "--writable", "--", "true"]).writable,
        Some(LayerSize::DEFAULT)
    );
    assert_eq!(
        run(&["--writable", "--no-cache", "a:/m", "--", "true"]).writable,
        Some(LayerSize::DEFAULT)
    );
    assert!(parse(&args(&["--writable", "1Q", "a:/m", "--", "true"])).is_err());
}

#[test]
fn unions_and_writable() {
    let r = run(&[
        "--union=a,b,c:/u",
        "x:/y",
        "--union",
        "d,e:/v",
        "--writable",
        "--",
        "true",
    ]);
    assert_eq!(r.mounts.len(), 3);
    assert!(r.mounts[0].union && !r.mounts[1].union && r.mounts[2].union);
    assert_eq!(r.mounts[0].images, ["a", "b", "c"]);
    assert_eq!(r.mounts[0].describe(), "a,b,c:/u");
    assert_eq!(r.writable, Some(LayerSize::DEFAULT));
    assert_eq!(
        run(&["--writable=2G", "--", "true"]).writable,
        Some(LayerSize::Bytes(2 << 30))
    );
    assert_eq!(
        run(&["--writable=25%", "--", "true"]).writable,
        Some(LayerSize::PercentOfRam(25))
    );
    for (spelling, bytes) in [
        ("2GB", 2u64 << 30),
        ("2GiB", 2 << 30),
        ("1.5G", 3 << 29),
        ("512m", 512 << 20),
    ] {
        let arg = format!("--writable={spelling}");
        assert_eq!(
            run(&[&arg, "--", "true"]).writable,
            Some(LayerSize::Bytes(bytes)),
            "{spelling}"
        );
    }
    assert_eq!(run(&["a:/m", "--", "true"]).writable, None);
    let many: String = (0..64)
        .map(|i| format!("i{i}"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        run(&[&format!("--union={many}:/d"), "--", "true"]).mounts[0]
            .images
            .len(),
        64
    );
    for bad in [
        "--writable=",
        "--writable=0",
        "--writable=12",
        "--writable=101%",
        "--writable=0%",
        "--writable=1.5%",
        "--writable=1X",
        "--writable=-5",
        "--writable=99999999999999999G",
        "--union=a,,b:/m",
        "--union=a:b:/m",
        "--union=:/m",
    ] {
        assert!(
            parse(&args(&[bad, "--", "true"])).is_err(),
            "{bad} accepted"
        );
    }
    assert_eq!(LayerSize::Bytes(1 << 20).tmpfs_value(), "1048576");
    assert_eq!(LayerSize::PercentOfRam(50).tmpfs_value(), "50%");
}

#[test]
fn forwarding_names() {
    assert_eq!(
        forwarded_name(OsStr::new("SQFSMNT_FWD_LD_LIBRARY_PATH")).unwrap(),
        "LD_LIBRARY_PATH"
    );
    assert_eq!(
        forwarded_name(OsStr::new("SQFSMNT_FWD_BASH_FUNC_f%%")).unwrap(),
        "BASH_FUNC_f%%"
    );
    assert!(forwarded_name(OsStr::new("SQFSMNT_FWD_")).is_none());
    assert!(forwarded_name(OsStr::new("PATH")).is_none());
}

#[test]
fn writable_dir_is_a_value_with_a_slash() {
    for dir in ["./layer", "/scratch/me/layer", "layer/", "../x/y"] {
        let arg = format!("--writable={dir}");
        let r = run(&[&arg, "a:/m", "--", "true"]);
        assert_eq!(r.layer_dir.as_deref(), Some(std::ffi::OsStr::new(dir)));
        assert_eq!(r.writable, None, "{dir}");
    }
    // Sizes stay sizes.
    let r = run(&["--writable=2G", "a:/m", "--", "true"]);
    assert_eq!(
        (r.writable, r.layer_dir),
        (Some(LayerSize::Bytes(2 << 30)), None)
    );
    assert_eq!(run(&["a:/m", "--", "true"]).layer_dir, None);
    // As the next word too, as every option's value (the shell expands a
    // '~' there); not a pair.
    for dir in ["./layer", "/scratch/me/layer", "layer/"] {
        let r = run(&["--writable", dir, "a:/m", "--", "true"]);
        assert_eq!(r.layer_dir.as_deref(), Some(std::ffi::OsStr::new(dir)));
        assert_eq!((r.writable, r.mounts.len()), (None, 1), "{dir}");
    }
    let r = run(&["--writable", "/img.sqfs:/m", "--", "true"]);
    assert_eq!((r.layer_dir, r.mounts.len()), (None, 1));
    // Not both; '~' the shell left alone.
    for (bad, needle) in [
        (
            &["--writable=./l", "--writable=1G", "a:/m", "--", "true"][..],
            "not both",
        ),
        (
            &["--writable", "--writable=/l", "a:/m", "--", "true"][..],
            "not both",
        ),
        (&["--writable=~/layer", "a:/m", "--", "true"][..], "$HOME"),
    ] {
        let e = parse(&args(bad)).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad:?}: {e}");
    }
}

/// `--writable=mylayer` (no '/'): the message shows the directory form.
#[test]
fn a_writable_word_without_slash_points_to_the_directory_form() {
    let e = parse(&args(&["--writable=mylayer", "a:/m", "--", "true"])).unwrap_err();
    let words = e.to_string();
    assert!(words.contains("--writable=./mylayer"), "{words}");
    assert!(words.contains("not a size"), "{words}");
    // Sizes that are wrong keep the size message.
    let e = parse(&args(&["--writable=1Q", "a:/m", "--", "true"])).unwrap_err();
    assert!(matches!(e, UsageError::WritableSize(..)), "{e:?}");
    let r = run(&["--writable=./mylayer", "a:/m", "--", "true"]);
    assert_eq!(r.layer_dir, Some("./mylayer".into()));
}

/// Misspelt options get the option meant.
#[test]
fn misspelt_options_get_a_suggestion() {
    for (given, meant) in [
        ("--bindmount=/a:/b", "--bind-mount"),
        ("--writeable", "--writable"),
        ("--no-cahce", "--no-cache"),
        ("--mutableroot", "--mutable-root"),
        ("--polcy", "--policy"),
    ] {
        let e = parse(&args(&[given, "a:/m", "--", "true"])).unwrap_err();
        assert!(
            e.to_string().contains(&format!("did you mean '{meant}'?")),
            "{given}: {e}"
        );
    }
    let e = parse(&args(&["--frobnicate", "a:/m", "--", "true"])).unwrap_err();
    assert!(!e.to_string().contains("did you mean"), "{e}");
}

#[test]
fn uenvs_join_and_fuse_single() {
    let r = run(&["--join", "--fuse-single", "a:/x", "--", "true"]);
    assert!(r.join);
    assert_eq!(r.mounts.len(), 1);
    assert!(!run(&["a:/x", "--", "--join"]).join);
}
