use super::*;
use crate::config::acl::AclWriters;
use crate::config::provenance::PathDir;

fn u(raw: u32) -> Uid {
    Uid::from_raw(raw)
}
fn g(raw: u32) -> Gid {
    Gid::from_raw(raw)
}
fn us(raw: &[u32]) -> Vec<Uid> {
    raw.iter().copied().map(u).collect()
}
fn gs(raw: &[u32]) -> Vec<Gid> {
    raw.iter().copied().map(g).collect()
}

const A: u32 = 1000;
const B: u32 = 1001;

fn writers(uid: u32, gid: u32, mode: u32) -> Writers {
    Writers {
        uid: u(uid),
        gid: g(gid),
        mode,
        acl: AclWriters::default(),
    }
}

fn dir(path: &str, w: Writers, entry_uid: u32) -> PathDir {
    PathDir {
        path: path.into(),
        writers: w,
        entry_uid: u(entry_uid),
    }
}

/// `/apps/stack.sqfs`, root's, in root's 0755 directories, as `caller`
/// sees it (nothing writable for them).
fn prov(caller: u32) -> Provenance {
    Provenance {
        real_path: "/apps/stack.sqfs".into(),
        file: writers(0, 0, 0o644),
        dirs: vec![
            dir("/", writers(0, 0, 0o755), 0),
            dir("/apps", writers(0, 0, 0o755), 0),
        ],
        caller: CallerAccess {
            uid: u(caller),
            gids: vec![g(caller)],
            ..CallerAccess::default()
        },
        user_filesystem: false,
        root_fuse: None,
        path_unverified: false,
    }
}

/// The verdict for callers A, B and root of the image `p` (A's view).
fn for_everyone(policy: &Policy, p: &Provenance) -> [bool; 3] {
    [A, B, 0].map(|c| {
        let mut seen = p.clone();
        if c != A {
            seen.caller = CallerAccess {
                uid: u(c),
                gids: vec![g(c)],
                ..CallerAccess::default()
            };
        }
        policy.route(&seen).kernel
    })
}

#[test]
fn roots_image_in_roots_directories_is_trusted() {
    let r = Policy::default().route(&prov(A));
    assert!(r.kernel, "{}", r.reason);
    assert!(r.reason.contains("trusted-owners"), "{}", r.reason);
}

#[test]
fn a_users_image_below_a_trusted_directory_is_fuse_for_every_caller() {
    let p = Policy {
        trusted_dirs: vec!["/apps".into()].into(),
        ..Policy::default()
    };
    // A's own file in A's directory below /apps.
    let mut own = prov(A);
    own.real_path = "/apps/a/own.sqfs".into();
    own.dirs.push(dir("/apps/a", writers(A, A, 0o755), A));
    own.file = writers(A, A, 0o644);
    own.caller.can_write_file = true;
    assert_eq!(for_everyone(&p, &own), [false; 3]);
    let named = crate::config::names::Table(&[(1000, "alice")]);
    let mine = Provenance {
        caller: CallerAccess::default(),
        ..own.clone()
    };
    let why = p.route_named(&mine, &named).reason;
    // Users by name (and id), not by id alone.
    assert!(
        why.contains("owned by uid 1000 (alice)") && why.contains("/apps/a"),
        "{why}"
    );
    let why = p
        .route_named(&mine, &crate::config::names::Table(&[]))
        .reason;
    assert!(why.contains("owned by uid 1000"), "{why}");
    // Root's file in that directory: A can replace it.
    own.file = writers(0, 0, 0o644);
    own.caller.can_write_file = false;
    assert_eq!(for_everyone(&p, &own), [false; 3]);
    // Root's file outside the trusted directory: restricted.
    let mut outside = prov(B);
    outside.real_path = "/opt/x.sqfs".into();
    let why = p.route(&outside).reason;
    assert!(why.contains("trusted-dirs"), "{why}");
}

#[test]
fn group_and_other_write_on_the_file() {
    let g = Policy {
        trusted_groups: gs(&[42]),
        ..Policy::default()
    };
    for (mode, gid, kernel) in [
        (0o666, 0, false),
        (0o664, 0, false),
        (0o664, 42, true),
        (0o644, 7, true),
    ] {
        let mut p = prov(A);
        p.file = writers(0, gid, mode);
        assert_eq!(for_everyone(&g, &p), [kernel; 3], "{mode:o} {gid}");
    }
    // An owner that is not trusted, whatever its group.
    let mut p = prov(A);
    p.file = writers(7, 42, 0o644);
    assert_eq!(for_everyone(&g, &p), [false; 3]);
    let owners = Policy {
        trusted_owners: us(&[7]),
        ..g.clone()
    };
    assert_eq!(for_everyone(&owners, &p), [true; 3]);
}

#[test]
fn acl_writers_must_be_trusted() {
    let g = Policy {
        trusted_groups: gs(&[42]),
        trusted_owners: us(&[0, 7]),
        ..Policy::default()
    };
    let mut p = prov(A);
    for (users, groups, kernel) in [
        (vec![B], Vec::<u32>::new(), false),
        (vec![], vec![43], false),
        (vec![7], vec![42], true),
    ] {
        p.file.acl = AclWriters {
            users: us(&users),
            groups: gs(&groups),
            unknown: false,
        };
        assert_eq!(for_everyone(&g, &p), [kernel; 3], "{users:?} {groups:?}");
    }
    p.file.acl = AclWriters {
        unknown: true,
        ..AclWriters::default()
    };
    assert!(g.route(&p).reason.contains("ACL"));
    // The same on a directory of the path.
    let mut p = prov(A);
    p.dirs[1].writers.acl.users = vec![u(B)];
    let why = g.route(&p).reason;
    assert!(
        !g.route(&p).kernel && why.contains("/apps") && why.contains("uid 1001"),
        "{why}"
    );
}

#[test]
fn directories_owners_writers_and_sticky() {
    let pol = Policy {
        trusted_groups: gs(&[42]),
        ..Policy::default()
    };
    let with_dir = |w: Writers, entry: u32| {
        let mut p = prov(A);
        p.dirs[1] = dir("/apps", w, entry);
        for_everyone(&pol, &p)
    };
    assert_eq!(with_dir(writers(A, 0, 0o755), 0), [false; 3]);
    assert_eq!(with_dir(writers(0, 7, 0o775), 0), [false; 3]);
    assert_eq!(with_dir(writers(0, 42, 0o775), 0), [true; 3]);
    assert_eq!(with_dir(writers(0, 0, 0o777), 0), [false; 3]);
    // /tmp: sticky protects root's entries, not a user's.
    assert_eq!(with_dir(writers(0, 0, 0o1777), 0), [true; 3]);
    assert_eq!(with_dir(writers(0, 0, 0o1777), A), [false; 3]);
}

#[test]
fn the_kernels_word_about_the_caller_counts_for_untrusted_callers() {
    let pol = Policy {
        trusted_groups: gs(&[42]),
        ..Policy::default()
    };
    let mut p = prov(A);
    p.caller.can_write_file = true;
    assert!(!pol.route(&p).kernel);
    p.caller.can_write_file = false;
    p.caller.writable_dir = Some("/apps".into());
    assert!(pol.route(&p).reason.contains("you can replace"));
    // A member of a trusted group may write by design.
    p.caller.gids.push(g(42));
    assert!(pol.route(&p).kernel);
}

#[test]
fn restrictions_filesystems_and_modes() {
    let all = Policy {
        trusted_match: TrustedMatch::All,
        trusted_groups: gs(&[42]),
        ..Policy::default()
    };
    let mut p = prov(A);
    assert!(all.route(&p).reason.contains("trusted-match = all"));
    p.file.gid = g(42);
    assert!(all.route(&p).kernel);
    for flag in [true, false] {
        let q = Provenance {
            user_filesystem: flag,
            path_unverified: !flag,
            ..prov(A)
        };
        assert!(!Policy::default().route(&q).kernel);
    }
    let mut own = prov(A);
    own.file = writers(A, A, 0o644);
    let k = |kernel_images| Policy {
        kernel_images,
        ..Policy::default()
    };
    assert!(k(KernelImages::All).route(&own).kernel);
    assert!(!k(KernelImages::None).route(&prov(A)).kernel);
    // trusted-owners empty: root is still trusted.
    let empty = Policy {
        trusted_owners: us(&[]),
        ..Policy::default()
    };
    assert!(empty.route(&prov(A)).kernel);
}

/// Issue 37, finding 5: root's FUSE mounts are trusted as a disk only
/// when the site lists their file system (by default GlusterFS's and
/// CephFS's clients); the reason names the file system and the key.
#[test]
fn roots_fuse_mounts_are_trusted_only_where_listed() {
    let on = |name: &str| Provenance {
        root_fuse: Some(name.into()),
        ..prov(A)
    };
    let default = Policy::default();
    assert!(default.route(&on("glusterfs")).kernel);
    assert!(default.route(&on("ceph-fuse")).kernel);
    for name in ["s3fs", "rclone", "sshfs", "squashfuse"] {
        let r = default.route(&on(name));
        assert!(!r.kernel, "{name}");
        assert!(
            r.reason.contains(&format!("fuse.{name}"))
                && r.reason.contains("trusted-fuse: glusterfs, ceph-fuse"),
            "{}",
            r.reason
        );
    }
    let site = Policy {
        trusted_fuse: vec!["s3fs".into()],
        ..Policy::default()
    };
    assert!(site.route(&on("s3fs")).kernel);
    assert!(!site.route(&on("glusterfs")).kernel);
    let none = Policy {
        trusted_fuse: Vec::new(),
        ..Policy::default()
    };
    assert!(none
        .route(&on("glusterfs"))
        .reason
        .contains("trusted-fuse: none"));
    // Listed, the rest of the invariant still holds.
    let mut theirs = on("glusterfs");
    theirs.file = writers(A, A, 0o644);
    assert!(!default.route(&theirs).kernel);
    // kernel-images = all still takes everything.
    let all = Policy {
        kernel_images: KernelImages::All,
        ..Policy::default()
    };
    assert!(all.route(&on("s3fs")).kernel);
}
