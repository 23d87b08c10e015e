//! The two trees walked together: directory listings merged by name, on
//! every processor (a shared queue of directory pairs, `parallel.rs`;
//! each thread reads the images through readers of its own, so that no
//! cache, lock or allocation is shared between threads but the queue). Entries on one
//! side only are added or removed with everything below them; entries on
//! both sides are compared by their inodes, and files of equal size by
//! their contents (`content.rs`), in the same pass.

use std::sync::Arc;

use squashfs_reader::{DirEntry, Inode, InodeData, Kind};

use super::change::{Change, XattrChanges};
use super::content::{Bufs, Contents, File};
use super::error::DiffError;
use super::images::{Images, Setup, Which};
use super::parallel::parallel;

/// What the walk found (one thread's share, then all of it).
#[derive(Default)]
pub(super) struct Walked {
    pub changes: Vec<Change>,
    pub entries_a: u64,
    pub entries_b: u64,
    bufs: Bufs,
}

/// A directory on both sides, to merge: its path and its inodes' places
/// in each image (read again by the thread that merges it).
struct Pair {
    path: Arc<[u8]>,
    a: u64,
    b: u64,
}

/// Walks both images from their roots.
pub(super) fn walk(setup: &Setup, contents: &Contents) -> Result<Walked, DiffError> {
    let root = b"/";
    let mut first = Walked::default();
    let pairs = {
        let readers = setup.open()?;
        let im = setup.images(&readers);
        let ra = im.inode(Which::A, im.a.root(), root)?;
        let rb = im.inode(Which::B, im.b.root(), root)?;
        compare(&im, contents, (b"", None), ra, rb, &mut first)?
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(16);
    let mut parts = parallel(
        pairs,
        threads,
        || setup.open(),
        |readers, pair, acc: &mut Walked| merge(&setup.images(readers), contents, pair, acc),
    )?;
    parts.push(first);
    let mut all = Walked::default();
    for p in parts {
        all.changes.extend(p.changes);
        all.entries_a += p.entries_a;
        all.entries_b += p.entries_b;
    }
    Ok(all)
}

/// The path of `name` in directory `dir`.
fn child(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    p.extend_from_slice(dir);
    if dir != b"/" {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// An entry's path: the root (no name), or `name` in directory `dir`.
fn path_of((dir, name): Named<'_>) -> Vec<u8> {
    match name {
        None => b"/".to_vec(),
        Some(n) => child(dir, n),
    }
}

/// An entry compared on both sides, by its directory's path and its name
/// there (None: the root); its path is made only where needed.
type Named<'n> = (&'n [u8], Option<&'n [u8]>);

/// The indexes of a listing's entries in name order (mksquashfs writes
/// them sorted already).
fn sorted(entries: &[DirEntry]) -> Vec<usize> {
    let mut v: Vec<usize> = (0..entries.len()).collect();
    if !entries.windows(2).all(|w| w[0].name <= w[1].name) {
        v.sort_by(|&x, &y| entries[x].name.cmp(&entries[y].name));
    }
    v
}

/// Merges the listings of a directory pair; returns the pairs below it.
fn merge(
    im: &Images,
    contents: &Contents,
    pair: Pair,
    acc: &mut Walked,
) -> Result<Vec<Pair>, DiffError> {
    let da = im.inode(Which::A, pair.a, &pair.path)?;
    let db = im.inode(Which::B, pair.b, &pair.path)?;
    let la = im.a.listing(&da).map_err(im.failed(Which::A, &pair.path))?;
    let lb = im.b.listing(&db).map_err(im.failed(Which::B, &pair.path))?;
    acc.entries_a += la.entries.len() as u64;
    acc.entries_b += lb.entries.len() as u64;
    let (ea, eb) = (sorted(&la.entries), sorted(&lb.entries));
    let (mut i, mut j) = (0, 0);
    let mut below = Vec::new();
    while i < ea.len() || j < eb.len() {
        let x = ea.get(i).map(|&k| &la.entries[k]);
        let y = eb.get(j).map(|&k| &lb.entries[k]);
        let order = match (x, y) {
            (Some(x), Some(y)) => x.name.cmp(&y.name),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match (order, x, y) {
            (std::cmp::Ordering::Less, Some(x), _) => {
                let p = child(&pair.path, &x.name);
                let inode = im.inode(Which::A, x.inode, &p)?;
                one_side(im, Which::A, p, inode, acc)?;
                i += 1;
            }
            (std::cmp::Ordering::Greater, _, Some(y)) => {
                let p = child(&pair.path, &y.name);
                let inode = im.inode(Which::B, y.inode, &p)?;
                one_side(im, Which::B, p, inode, acc)?;
                j += 1;
            }
            (_, Some(x), Some(y)) => {
                let named = (&pair.path[..], Some(&x.name[..]));
                let a = im.a.inode(x.inode);
                let b = im.b.inode(y.inode);
                let (a, b) = match (a, b) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) => return Err(im.failed(Which::A, &path_of(named))(e)),
                    (_, Err(e)) => return Err(im.failed(Which::B, &path_of(named))(e)),
                };
                below.extend(compare(im, contents, named, a, b, acc)?);
                i += 1;
                j += 1;
            }
            _ => unreachable!("the merge ends when both listings do"),
        }
    }
    Ok(below)
}

/// An entry of one image only, and everything below it: removed (A) or
/// added (B).
fn one_side(
    im: &Images,
    w: Which,
    path: Vec<u8>,
    inode: Arc<Inode>,
    acc: &mut Walked,
) -> Result<(), DiffError> {
    let (ar, _) = im.side(w);
    let mut stack = vec![(path, inode)];
    while let Some((path, inode)) = stack.pop() {
        let change = match w {
            Which::A => Change::new(&path, "removed", Some(&inode), None),
            Which::B => Change::new(&path, "added", None, Some(&inode)),
        };
        acc.changes.push(change);
        if inode.kind != Kind::Dir {
            continue;
        }
        let listing = ar.listing(&inode).map_err(im.failed(w, &path))?;
        match w {
            Which::A => acc.entries_a += listing.entries.len() as u64,
            Which::B => acc.entries_b += listing.entries.len() as u64,
        }
        for e in listing.entries.iter().rev() {
            let p = child(&path, &e.name);
            let i = im.inode(w, e.inode, &p)?;
            stack.push((p, i));
        }
    }
    Ok(())
}

/// Compares an entry on both sides: records what differs (the contents
/// of files of equal size included), and returns the directory pair to
/// merge.
fn compare(
    im: &Images,
    contents: &Contents,
    named: Named<'_>,
    a: Arc<Inode>,
    b: Arc<Inode>,
    acc: &mut Walked,
) -> Result<Option<Pair>, DiffError> {
    if a.kind != b.kind {
        changed_type(im, &path_of(named), &a, &b, acc)?;
        return Ok(None);
    }
    let mut what = Vec::new();
    if a.perm & 0o7777 != b.perm & 0o7777 {
        what.push("mode");
    }
    if a.uid != b.uid {
        what.push("owner");
    }
    if a.gid != b.gid {
        what.push("group");
    }
    if let (InodeData::Symlink { target: x }, InodeData::Symlink { target: y }) = (&a.data, &b.data)
    {
        if x != y {
            what.push("target");
        }
    }
    if a.rdev() != b.rdev() {
        what.push("device");
    }
    let xattrs = xattr_changes(im, named, &a, &b)?;
    if xattrs.is_some() {
        what.push("xattrs");
    }
    if im.times && a.mtime != b.mtime {
        what.push("mtime");
    }
    if a.kind == Kind::File {
        let differ = a.size != b.size || {
            let path = || path_of(named);
            let f = File {
                im,
                a: &a,
                b: &b,
                path: &path,
            };
            a.size > 0 && contents.differ(&f, &mut acc.bufs)?
        };
        if differ {
            what.insert(0, "content");
        }
    }
    if !what.is_empty() {
        let mut c = Change::new(&path_of(named), "changed", Some(&a), Some(&b));
        c.what = what;
        c.xattrs = xattrs;
        acc.changes.push(c);
    }
    Ok((a.kind == Kind::Dir).then(|| Pair {
        path: Arc::from(path_of(named)),
        a: a.reference,
        b: b.reference,
    }))
}

/// An entry whose type changed: what was below the old directory went,
/// what is below the new one came.
fn changed_type(
    im: &Images,
    path: &[u8],
    a: &Arc<Inode>,
    b: &Arc<Inode>,
    acc: &mut Walked,
) -> Result<(), DiffError> {
    let mut c = Change::new(path, "changed", Some(a), Some(b));
    c.what.push("type");
    acc.changes.push(c);
    for (w, dir) in [(Which::A, a), (Which::B, b)] {
        if dir.kind != Kind::Dir {
            continue;
        }
        let (ar, _) = im.side(w);
        let listing = ar.listing(dir).map_err(im.failed(w, path))?;
        for e in &listing.entries {
            let p = child(path, &e.name);
            let i = im.inode(w, e.inode, &p)?;
            one_side(im, w, p, i, acc)?;
        }
        match w {
            Which::A => acc.entries_a += listing.entries.len() as u64,
            Which::B => acc.entries_b += listing.entries.len() as u64,
        }
    }
    Ok(())
}

/// The extended attributes that differ, by name (none read when neither
/// inode has any).
fn xattr_changes(
    im: &Images,
    named: Named<'_>,
    a: &Inode,
    b: &Inode,
) -> Result<Option<XattrChanges>, DiffError> {
    if a.xattr.is_none() && b.xattr.is_none() {
        return Ok(None);
    }
    let mut xa =
        im.a.xattrs(a)
            .map_err(|e| im.failed(Which::A, &path_of(named))(e))?;
    let mut xb =
        im.b.xattrs(b)
            .map_err(|e| im.failed(Which::B, &path_of(named))(e))?;
    xa.sort();
    xb.sort();
    if xa == xb {
        return Ok(None);
    }
    let name = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    let mut c = XattrChanges::default();
    for (n, v) in &xa {
        match xb.iter().find(|(m, _)| m == n) {
            None => c.removed.push(name(n)),
            Some((_, w)) if w != v => c.changed.push(name(n)),
            Some(_) => {}
        }
    }
    for (n, _) in &xb {
        if !xa.iter().any(|(m, _)| m == n) {
            c.added.push(name(n));
        }
    }
    Ok(Some(c))
}
