//! Test data of the sqfs suites: temporary directories, trees with
//! deterministic contents, and what images and trees contain.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cmd::ok;

/// A directory removed on drop (also after a failed assertion).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("sqfsmnt-it-{}-sqfs-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The names of `dir`'s entries for which `keep` holds.
pub fn names_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| keep(n))
        .collect()
}

/// A temporary directory `name`, with its `sub` made by `make`: the
/// directory, the path of `sub`, and what `make` returned.
pub fn temp_with<R>(name: &str, sub: &str, make: impl FnOnce(&Path) -> R) -> (TempDir, PathBuf, R) {
    let t = TempDir::new(name);
    let path = t.0.join(sub);
    let made = make(&path);
    (t, path, made)
}

/// A temporary directory `name` with [`make_tree`]'s tree (forwards) in
/// its `sub`: the directory and the tree's path.
pub fn tree_in(name: &str, sub: &str) -> (TempDir, PathBuf) {
    let t = TempDir::new(name);
    let tree = t.0.join(sub);
    make_tree(&tree, true);
    (t, tree)
}

/// Paths under `dir` not owned by `uid` (`find -xdev ! -user`).
pub fn not_owned_by(dir: &Path, uid: u32) -> String {
    crate::cmd::run(
        Command::new("find")
            .arg(dir)
            .args(["-xdev", "!", "-user", &uid.to_string()]),
    )
    .stdout()
}

/// xorshift64*: deterministic pseudo-random bytes.
pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)] // endless, not an iterator
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
    /// Text-like, compressible bytes.
    pub fn text(&mut self, n: usize) -> Vec<u8> {
        const WORDS: [&str; 12] = [
            "import", "def", "return", "self", "class", "value", "for", "in", "range", "print",
            "None", "\n",
        ];
        let mut v = Vec::with_capacity(n + 16);
        while v.len() < n {
            v.extend_from_slice(WORDS[(self.next() % 12) as usize].as_bytes());
            v.push(b' ');
        }
        v.truncate(n);
        v
    }
}

/// What a test tree contains, to compare with images.
#[derive(Default, Debug)]
pub struct TreeInfo {
    pub regular: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub fifos: u64,
    pub extra_links: u64,
    pub bytes: u64,
}

/// Writes a file with `contents` and a fixed mtime.
pub fn write(path: &Path, contents: &[u8], mtime: u64) {
    std::fs::write(path, contents).unwrap();
    set_mtime(path, mtime);
}

pub fn set_mtime(path: &Path, mtime: u64) {
    let t = std::time::UNIX_EPOCH + Duration::from_secs(mtime);
    let f = std::fs::File::open(path).unwrap();
    f.set_times(std::fs::FileTimes::new().set_modified(t).set_accessed(t))
        .unwrap();
}

/// A small tree with every kind of entry the tests care about: text and
/// random files of many sizes (empty, below, at and above the block size),
/// nested directories, an empty directory, symlinks (also dangling), a hard
/// link, a FIFO and awkward names. Entries are created in `order` (true:
/// forwards, false: backwards) so readdir order differs between copies,
/// and every timestamp is fixed, so two calls give identical trees.
pub fn make_tree(root: &Path, forwards: bool) -> TreeInfo {
    let mut info = TreeInfo::default();
    std::fs::create_dir_all(root).unwrap();
    let mut rng = Rng(0x5eed);
    let mut plan: Vec<(String, Vec<u8>)> = Vec::new();
    for d in 0..4 {
        for f in 0..6 {
            let n = [0usize, 1, 100, 4096, 131_072, 200_000][f];
            let data = if (d + f) % 2 == 0 {
                rng.text(n)
            } else {
                rng.bytes(n)
            };
            plan.push((format!("dir{d}/sub{}/file{f}.dat", f % 2), data));
        }
    }
    plan.push(("top.txt".into(), rng.text(5000)));
    plan.push(("with space and ünïcode.txt".into(), rng.text(300)));
    if !forwards {
        plan.reverse();
    }
    for (rel, data) in &plan {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write(&p, data, 1_600_000_000);
        info.regular += 1;
        info.bytes += data.len() as u64;
    }
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::os::unix::fs::symlink("top.txt", root.join("link-to-top")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/target", root.join("dir0/dangling")).unwrap();
    info.symlinks += 2;
    std::fs::hard_link(
        root.join("dir1/sub0/file2.dat"),
        root.join("dir1/hardlink.dat"),
    )
    .unwrap();
    info.extra_links += 1;
    let fifo = root.join("dir2/fifo");
    crate::cmd::run(Command::new("mkfifo").arg(&fifo)).ok();
    info.fifos += 1;
    // Symbolic links and the FIFO: set their own times without following
    // or opening them.
    for p in [root.join("link-to-top"), root.join("dir0/dangling"), fifo] {
        crate::cmd::run(
            Command::new("touch")
                .args(["-h", "-d", "@1600000050"])
                .arg(&p),
        )
        .ok();
    }
    // Fix every directory's mtime last (creating entries changes it).
    let mut dirs = vec![root.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        let mut subs: Vec<PathBuf> = std::fs::read_dir(&dirs[i])
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.symlink_metadata().unwrap().is_dir())
            .collect();
        subs.sort();
        dirs.extend(subs);
        i += 1;
    }
    info.dirs = dirs.len() as u64; // the root included
    for d in dirs.iter().rev() {
        set_mtime(d, 1_600_000_100);
    }
    info
}

/// The `sqfs` binary built at `bin` (`env!("CARGO_BIN_EXE_sqfs")`), with no
/// `SOURCE_DATE_EPOCH` from the caller's environment.
pub fn sqfs_command(bin: &str) -> Command {
    let mut c = Command::new(bin);
    c.env_remove("SOURCE_DATE_EPOCH");
    c
}

/// Paths of all non-directories in an image, from `unsquashfs -lls`
/// (one per line; the test trees have no newlines in names).
pub fn image_files(image: &Path) -> Vec<String> {
    let o = ok(Command::new("unsquashfs").arg("-lls").arg(image));
    o.stdout()
        .lines()
        .filter(|l| {
            !l.starts_with('d')
                && l.len() > 10
                && l.as_bytes()[1..10].iter().all(|b| b"rwxsStT-".contains(b))
        })
        .map(|l| {
            // "-rw-r--r-- root/root  123 2020-09-13 12:26 path[ -> target]"
            let mut fields = 0;
            let mut prev_space = false;
            let mut start = 0;
            for (i, c) in l.char_indices() {
                if c == ' ' {
                    prev_space = true;
                } else if prev_space {
                    fields += 1;
                    prev_space = false;
                    if fields == 5 {
                        start = i;
                        break;
                    }
                }
            }
            let p = &l[start..];
            let p = if l.starts_with('l') {
                p.split(" -> ").next().unwrap()
            } else {
                p
            };
            p.strip_prefix("squashfs-root/").unwrap_or(p).to_string()
        })
        .collect()
}

/// All non-directories under `root`, relative.
pub fn tree_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.symlink_metadata().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

pub fn os(s: &str) -> &OsStr {
    OsStr::from_bytes(s.as_bytes())
}
