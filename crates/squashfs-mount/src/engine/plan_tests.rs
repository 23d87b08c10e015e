//! Unit tests of plan.rs.
use super::*;
use crate::cli::{self, Invocation};
use crate::mounts::overlay::OverlayError;

fn req(args: &[&str]) -> RunRequest {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    match cli::parse(&args).unwrap() {
        Invocation::Run(r) => r,
        other => panic!("{other:?}"),
    }
}
fn plan(args: &[&str]) -> Result<Plan, Failure> {
    build(
        &req(args),
        OsStr::new("/home/u"),
        &Policy::default(),
        &FrontEnd::default(),
        8 << 30,
    )
}
/// The refusal of a plan.
fn err(r: Result<Plan, Failure>) -> Failure {
    r.expect_err("refused")
}

/// Its kind, when the plan step refused it.
fn plan_error(r: Result<Plan, Failure>) -> PlanError {
    let e = err(r);
    match e.kind::<PlanError>() {
        Some(k) => k.clone(),
        None => panic!("not a PlanError: {e}"),
    }
}

#[test]
fn order_and_keys() {
    let p = plan(&["a:/x/y/z", "b:/x", "c:rel", "d:/x/y", "--", "true"]).unwrap();
    let keys: Vec<_> = p
        .mounts
        .iter()
        .map(|m| m.key.to_string_lossy().into_owned())
        .collect();
    assert_eq!(keys, ["/home/u/rel", "/x", "/x/y", "/x/y/z"]);
    assert_eq!(p.images().count(), 4);
}

/// `--writable=DIR` without an image is refused by the plan, for every
/// front end, whatever the site allows (bind mounts are not images).
#[test]
fn a_kept_layer_without_images_is_refused_whatever_the_site_allows() {
    let src = "--bind-mount=/srv/data:/data";
    for args in [
        &["--writable=/x/l", "--", "true"][..],
        &["--writable=/x/l", src, "--", "true"],
    ] {
        assert_eq!(plan_error(plan(args)), PlanError::LayerWithoutImages);
        let closed = Policy {
            allow_writable: false,
            ..Policy::default()
        };
        let e = build(
            &req(args),
            OsStr::new("/"),
            &closed,
            &FrontEnd::default(),
            0,
        );
        assert_eq!(plan_error(e), PlanError::LayerWithoutImages);
    }
}

#[test]
fn refusals() {
    assert_eq!(
        plan_error(plan(&["a:/m", "b:/m/.//", "--", "true"])),
        PlanError::DuplicateMountPoint {
            key: "/m".into(),
            binds: false
        }
    );
    let many: String = (0..501)
        .map(|i| format!("i{i}"))
        .collect::<Vec<_>>()
        .join(",");
    // The parser allows 500 per union; 501 in all across two mounts.
    let half: String = (0..300)
        .map(|i| format!("i{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let other: String = (0..201)
        .map(|i| format!("j{i}"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        plan_error(plan(&[
            &format!("--union={half}:/a"),
            &format!("--union={other}:/b"),
            "--",
            "true"
        ])),
        PlanError::TooManyImages {
            given: 501,
            max: 500,
            by_site: false
        }
    );
    assert!(cli::parse(&[
        format!("--union={many}:/a").into(),
        "--".into(),
        "true".into()
    ])
    .is_err());
    let e = err(plan(&["--writable=90%", "a:/m", "--", "true"]));
    assert!(
        matches!(e.kind(), Some(OverlayError::TooLarge { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("at most 50%"));
}

#[test]
fn policy_refusals_name_the_key() {
    let strict = Policy {
        allow_writable: false,
        allow_union: false,
        max_images_per_call: 2,
        mount_points: vec!["/user-environment".into()].into(),
        ..Policy::default()
    };
    let b = |args: &[&str]| {
        build(
            &req(args),
            OsStr::new("/"),
            &strict,
            &FrontEnd::default(),
            8 << 30,
        )
    };
    let e = plan_error(b(&["--writable", "a:/user-environment", "--", "true"]));
    assert_eq!(e, PlanError::WritableNotAllowed);
    assert!(e.to_string().contains("allow-writable"));
    let e = plan_error(b(&["--union=a,b:/user-environment", "--", "true"]));
    assert_eq!(e, PlanError::UnionNotAllowed);
    assert!(e.to_string().contains("allow-union"));
    let e = plan_error(b(&[
        "a:/user-environment",
        "b:/user-environment/x",
        "c:/user-environment/y",
        "--",
        "true",
    ]));
    assert_eq!(
        e,
        PlanError::TooManyImages {
            given: 3,
            max: 2,
            by_site: true
        }
    );
    assert!(e.to_string().contains("max-images-per-call"));
    let e = err(b(&["a:/opt", "--", "true"]));
    assert!(
        matches!(
            e.kind(),
            Some(PolicyError::MountPointNotAllowed { path, .. }) if path == "/opt"
        ),
        "{e}"
    );
    assert!(e.to_string().contains("mount-points"));
    // A union of one image is a plain mount, allowed without allow-union.
    let p = b(&["--union=a:/user-environment", "--", "true"]).unwrap();
    assert!(!p.mounts[0].union);
}

#[test]
fn front_end_rules() {
    let slurm = FrontEnd {
        require_absolute: true,
        mount_points: vec!["/user-environment".into()].into(),
        mount_points_source: "mountpoints= in plugstack.conf",
        refuse_mutable_root: Some("not here"),
        mutable_root_option: Some("--squashfs-mutable-root"),
        cache_off: false,
    };
    let b = |args: &[&str]| {
        build(
            &req(args),
            OsStr::new("/"),
            &Policy::default(),
            &slurm,
            8 << 30,
        )
    };
    assert_eq!(
        plan_error(b(&["a.sqfs:/user-environment", "--", "true"])),
        PlanError::RelativeImage("a.sqfs".into())
    );
    assert_eq!(
        plan_error(b(&["/a.sqfs:rel", "--", "true"])),
        PlanError::RelativeMountPoint
    );
    let e = err(b(&["/a.sqfs:/etc", "--", "true"]));
    assert!(
        matches!(e.kind(), Some(PlanError::NotAmongFrontEnds { path, .. }) if path == "/etc"),
        "{e}"
    );
    assert!(
        e.to_string().contains("refusing to mount on /etc")
            && e.to_string().contains("plugstack.conf"),
        "{e}"
    );
    assert!(matches!(
        plan_error(b(&["/a.sqfs:/user-environment2", "--", "true"])),
        PlanError::NotAmongFrontEnds { .. }
    ));
    // `..` is judged on the resolved directory, not here.
    assert!(b(&["/a.sqfs:/user-environment/../etc", "--", "true"]).is_ok());
    assert!(b(&["/a.sqfs:/user-environment/sub", "--", "true"]).is_ok());
    // -r as the front end says; binds only on allowed places, absolute.
    let e = err(b(&["-r", "/a.sqfs:/user-environment", "--", "true"]));
    assert_eq!(
        e.kind::<PlanError>(),
        Some(&PlanError::MutableRootRefused("not here"))
    );
    assert_eq!(e.to_string(), "not here");
    let e = err(b(&["--bind-mount=/scratch:/etc", "--", "true"]));
    assert_eq!(e.subject(), Some("bind /scratch:/etc"));
    assert!(
        e.to_string()
            .starts_with("bind /scratch:/etc: refusing to mount on /etc"),
        "{e}"
    );
    assert_eq!(
        plan_error(b(&["--bind-mount=scratch:/user-environment", "--", "true"])),
        PlanError::RelativeBind
    );
    assert!(b(&["--bind-mount=/scratch:/user-environment/in", "--", "true"]).is_ok());
}

#[test]
fn binds_in_path_order_with_the_images() {
    let p = plan(&[
        "--bind-mount=/src:/x/y/in,data:/z",
        "-s",
        "a:/x/y,b:/x",
        "--",
        "true",
    ])
    .unwrap();
    let got: Vec<_> = p
        .mounts
        .iter()
        .map(|m| (m.key.to_string_lossy().into_owned(), m.bind.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("/x".into(), None),
            ("/x/y".into(), None),
            ("/x/y/in".into(), Some("/src".into())),
            ("/z".into(), Some("/home/u/data".into())),
        ]
    );
    assert_eq!(p.images().count(), 2);
    assert!(!p.mutable_root);
    assert!(plan(&["-r", "a:/m", "--", "true"]).unwrap().mutable_root);
    let no_r = Policy {
        allow_mutable_root: false,
        ..Policy::default()
    };
    let r = build(
        &req(&["-r", "a:/m", "--", "true"]),
        OsStr::new("/"),
        &no_r,
        &FrontEnd::default(),
        8 << 30,
    );
    assert_eq!(plan_error(r), PlanError::MutableRootNotAllowed);
    // A destination is a mount point: given twice is refused, in uenv's
    // words when both are images.
    let e = plan_error(plan(&["a:/m", "b:/m", "--", "true"]));
    assert!(e
        .to_string()
        .contains("the mount point /m is used to mount more than one squashfs"));
    for twice in [
        &["--bind-mount=/s:/m", "a:/m", "--", "true"][..],
        &["--bind-mount=/s:/m,/t:/m/", "--", "true"],
    ] {
        let e = plan_error(plan(twice));
        assert!(
            matches!(e, PlanError::DuplicateMountPoint { binds: true, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("used more than once"));
    }
    // The policy's mount-points apply to bind destinations too.
    let policy = Policy {
        mount_points: vec!["/user-environment".into()].into(),
        ..Policy::default()
    };
    let r = build(
        &req(&["--bind-mount=/s:/opt", "--", "true"]),
        OsStr::new("/"),
        &policy,
        &FrontEnd::default(),
        8 << 30,
    );
    assert!(matches!(
        err(r).kind(),
        Some(PolicyError::MountPointNotAllowed { .. })
    ));
    let many: Vec<String> = (0..65).map(|i| format!("/s{i}:/d{i}")).collect();
    let arg = format!("--bind-mount={}", many.join(","));
    assert_eq!(
        plan_error(plan(&[&arg, "--", "true"])),
        PlanError::TooManyBinds { given: 65, max: 64 }
    );
}

#[test]
fn resolved_checks() {
    let mounted: Vec<OsString> = vec!["/a".into(), "/b/c".into()];
    let kind = |r: Result<(), Failure>| r.err().and_then(|e| e.kind::<PlanError>().cloned());
    assert!(check_resolved(&mounted, OsStr::new("/a/x"), "s").is_ok());
    assert_eq!(
        kind(check_resolved(&mounted, OsStr::new("/a"), "s")),
        Some(PlanError::AlreadyMounted("/a".into()))
    );
    assert_eq!(
        kind(check_resolved(&mounted, OsStr::new("/b"), "s")),
        Some(PlanError::HidesEarlier {
            real: "/b".into(),
            hidden: "/b/c".into()
        })
    );
    for bad in ["/x:y", "/x,y"] {
        assert!(matches!(
            kind(check_resolved(&mounted, OsStr::new(bad), "s")),
            Some(PlanError::Separators {
                what: "mount point",
                ..
            })
        ));
    }
    assert!(check_union_layers(&[(1, 2), (1, 3)], &["a".into(), "b".into()], "s").is_ok());
    assert_eq!(
        kind(check_union_layers(
            &[(1, 2), (1, 2)],
            &["a".into(), "b".into()],
            "s"
        )),
        Some(PlanError::UnionTwice("b".into()))
    );
    assert!(paths::tilde_hint(OsStr::new("~/x")).contains("$HOME"));
    assert!(paths::tilde_hint(OsStr::new("/x")).is_empty());
}
