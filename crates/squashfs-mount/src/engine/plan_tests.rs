//! Unit tests of plan.rs.
use super::*;
use crate::cli::{self, Invocation};

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
fn err(r: Result<Plan, Failure>) -> String {
    r.unwrap_err().0
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

#[test]
fn refusals() {
    assert!(err(plan(&["a:/m", "b:/m/.//", "--", "true"])).contains("more than one squashfs"));
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
    assert!(err(plan(&[
        &format!("--union={half}:/a"),
        &format!("--union={other}:/b"),
        "--",
        "true"
    ]))
    .contains("at most 500"));
    assert!(cli::parse(&[
        format!("--union={many}:/a").into(),
        "--".into(),
        "true".into()
    ])
    .is_err());
    assert!(err(plan(&["--writable=90%", "a:/m", "--", "true"])).contains("at most 50%"));
}

#[test]
fn policy_refusals_name_the_key() {
    let strict = Policy {
        allow_writable: false,
        allow_union: false,
        max_images_per_call: 2,
        mount_points: vec!["/user-environment".into()],
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
    assert!(err(b(&["--writable", "a:/user-environment", "--", "true"])).contains("allow-writable"));
    assert!(err(b(&["--union=a,b:/user-environment", "--", "true"])).contains("allow-union"));
    assert!(err(b(&[
        "a:/user-environment",
        "b:/user-environment/x",
        "c:/user-environment/y",
        "--",
        "true"
    ]))
    .contains("max-images-per-call"));
    assert!(err(b(&["a:/opt", "--", "true"])).contains("mount-points"));
    // A union of one image is a plain mount, allowed without allow-union.
    let p = b(&["--union=a:/user-environment", "--", "true"]).unwrap();
    assert!(!p.mounts[0].union);
}

#[test]
fn front_end_rules() {
    let slurm = FrontEnd {
        require_absolute: true,
        mount_points: vec!["/user-environment".into()],
        mount_points_source: "mountpoints= in plugstack.conf",
        refuse_mutable_root: Some("not here"),
        mutable_root_option: Some("--squashfs-mutable-root"),
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
    assert!(err(b(&["a.sqfs:/user-environment", "--", "true"])).contains("absolute"));
    assert!(err(b(&["/a.sqfs:rel", "--", "true"])).contains("absolute"));
    let e = err(b(&["/a.sqfs:/etc", "--", "true"]));
    assert!(
        e.contains("refusing to mount on /etc") && e.contains("plugstack.conf"),
        "{e}"
    );
    assert!(err(b(&["/a.sqfs:/user-environment2", "--", "true"])).contains("refusing"));
    // `..` is judged on the resolved directory, not here.
    assert!(b(&["/a.sqfs:/user-environment/../etc", "--", "true"]).is_ok());
    assert!(b(&["/a.sqfs:/user-environment/sub", "--", "true"]).is_ok());
    // -r as the front end says; binds only on allowed places, absolute.
    assert_eq!(
        err(b(&["-r", "/a.sqfs:/user-environment", "--", "true"])),
        "not here"
    );
    let e = err(b(&["--bind-mount=/scratch:/etc", "--", "true"]));
    assert!(
        e.starts_with("bind /scratch:/etc: refusing to mount on /etc"),
        "{e}"
    );
    assert!(err(b(&["--bind-mount=scratch:/user-environment", "--", "true"])).contains("absolute"));
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
    assert!(err(r).contains("allow-mutable-root"));
    // A destination is a mount point: given twice is refused, in uenv's
    // words when both are images.
    assert!(err(plan(&["a:/m", "b:/m", "--", "true"]))
        .contains("the mount point /m is used to mount more than one squashfs"));
    assert!(
        err(plan(&["--bind-mount=/s:/m", "a:/m", "--", "true"])).contains("used more than once")
    );
    assert!(err(plan(&["--bind-mount=/s:/m,/t:/m/", "--", "true"])).contains("used more than once"));
    // The policy's mount-points apply to bind destinations too.
    let policy = Policy {
        mount_points: vec!["/user-environment".into()],
        ..Policy::default()
    };
    let r = build(
        &req(&["--bind-mount=/s:/opt", "--", "true"]),
        OsStr::new("/"),
        &policy,
        &FrontEnd::default(),
        8 << 30,
    );
    assert!(err(r).contains("mount-points"));
    let many: Vec<String> = (0..65).map(|i| format!("/s{i}:/d{i}")).collect();
    let arg = format!("--bind-mount={}", many.join(","));
    assert!(err(plan(&[&arg, "--", "true"])).contains("at most 64"));
}

#[test]
fn resolved_checks() {
    let mounted: Vec<OsString> = vec!["/a".into(), "/b/c".into()];
    assert!(check_resolved(&mounted, OsStr::new("/a/x"), "s").is_ok());
    assert!(
        err_of(check_resolved(&mounted, OsStr::new("/a"), "s")).contains("already a mount point")
    );
    assert!(err_of(check_resolved(&mounted, OsStr::new("/b"), "s")).contains("would hide /b/c"));
    assert!(err_of(check_resolved(&mounted, OsStr::new("/x:y"), "s")).contains("UENV_MOUNT_LIST"));
    assert!(err_of(check_resolved(&mounted, OsStr::new("/x,y"), "s")).contains("UENV_MOUNT_LIST"));
    assert!(check_union_layers(&[(1, 2), (1, 3)], &["a".into(), "b".into()], "s").is_ok());
    assert!(err_of(check_union_layers(
        &[(1, 2), (1, 2)],
        &["a".into(), "b".into()],
        "s"
    ))
    .contains("named twice"));
    assert!(tilde_hint(OsStr::new("~/x")).contains("$HOME"));
    assert!(tilde_hint(OsStr::new("/x")).is_empty());
}

fn err_of(r: Result<(), Failure>) -> String {
    r.unwrap_err().0
}
