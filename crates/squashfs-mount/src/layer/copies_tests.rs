use super::*;

fn me() -> CallerRights {
    CallerRights {
        uid: Uid::from_raw(1000),
        gid: Gid::from_raw(1000),
        groups: vec![Gid::from_raw(1000), Gid::from_raw(500)],
    }
}

/// (owner, group) of an entry.
fn ids(uid: u32, gid: u32) -> (Uid, Gid) {
    (Uid::from_raw(uid), Gid::from_raw(gid))
}

fn rights(c: &CallerRights, (uid, gid): (Uid, Gid), mode: u32) -> u32 {
    c.rights(uid, gid, mode)
}

fn copy_mode(c: &CallerRights, (uid, gid): (Uid, Gid), mode: u32) -> u32 {
    c.copy_mode(uid, gid, mode)
}

fn needs(c: &CallerRights, (uid, gid): (Uid, Gid), mode: u32, dir_writable: bool) -> Need {
    need(c, uid, gid, mode, dir_writable)
}

#[test]
fn rights_as_the_kernel_judges_them() {
    let c = me();
    assert_eq!(rights(&c, ids(1000, 0), 0o604), 6);
    assert_eq!(rights(&c, ids(0, 500), 0o664), 6);
    assert_eq!(
        rights(&c, ids(0, 500), 0o606),
        0,
        "group bits, not the others'"
    );
    assert_eq!(rights(&c, ids(0, 0), 0o644), 4);
    assert_eq!(rights(&c, ids(0, 0), 0o666), 6);
    assert_eq!(rights(&c, ids(7, 7), 0o777), 7);
    assert_eq!(copy_mode(&c, ids(0, 0), 0o4755), 0o555);
    assert_eq!(copy_mode(&c, ids(0, 500), 0o2775), 0o755);
    assert_eq!(copy_mode(&c, ids(0, 0), 0o1777), 0o755);
    assert_eq!(copy_mode(&c, ids(0, 0), 0o644), 0o444);
}

#[test]
fn what_needs_a_copy() {
    let c = me();
    // Overlayfs copies the caller's own (uid and primary gid) itself.
    assert_eq!(needs(&c, ids(1000, 1000), 0o644, true), Need::Nothing);
    // The caller's with another group: may chmod it.
    assert_eq!(needs(&c, ids(1000, 0), 0o444, false), Need::Copy);
    assert_eq!(needs(&c, ids(0, 500), 0o664, false), Need::Copy);
    assert_eq!(needs(&c, ids(0, 500), 0o644, false), Need::Nothing);
    assert_eq!(needs(&c, ids(0, 0), 0o666, false), Need::Copy);
    assert_eq!(needs(&c, ids(0, 0), 0o644, false), Need::Nothing);
    // In a directory the caller may write: may be renamed or removed.
    assert_eq!(needs(&c, ids(0, 0), 0o644, true), Need::Copy);
    assert_eq!(needs(&c, ids(7, 7), 0o600, true), Need::Copy);
}

/// Issue 37, finding 6: a sticky directory the caller may write lets them
/// rename or remove only their own entries (or all, when it is theirs):
/// another owner's file there gets no copy unless the caller may write it.
#[test]
fn a_sticky_directory_protects_other_owners_entries() {
    let c = me();
    let (root, mine) = (ids(0, 0), ids(1000, 1000));
    let may = |(uid, gid): (Uid, Gid), mode| c.may_replace_entries_in(uid, gid, mode);
    assert!(may(root, 0o777));
    assert!(!may(root, 0o1777));
    assert!(may(mine, 0o1777));
    assert!(!may(root, 0o755));
    assert!(!may(root, 0o772), "write without search");
    let in_tmp = may(root, 0o1777);
    assert_eq!(needs(&c, root, 0o644, in_tmp), Need::Nothing);
    assert_eq!(needs(&c, ids(7, 7), 0o600, in_tmp), Need::Nothing);
    // What the caller may write still needs a copy to be written.
    assert_eq!(needs(&c, root, 0o666, in_tmp), Need::Copy);
    assert_eq!(
        c.dir_copy_mode(Uid::from_raw(0), Gid::from_raw(0), 0o1777),
        0o1755
    );
    assert_eq!(
        c.dir_copy_mode(Uid::from_raw(0), Gid::from_raw(0), 0o755),
        0o555
    );
}
