//! The command line: sqfs's subcommands and their options (clap).

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

use sqfs::format::Compressor;
use sqfs::{bench, pack, units};

const PACK_DEFAULTS: &str = "\
Defaults, chosen for software stacks (many small files, started often):
  --comp zstd --level 15: zstd decompresses several times faster than xz and
      about as fast as lz4/lzo while compressing nearly as well as xz (a study
      of snap packages found cold start-up from xz about twice as slow;
      reading all of /usr/lib/python3.11 cold took 1.0 s from xz, 0.13 s from
      zstd here). Level 15 (mksquashfs's default) gives images 6-15% smaller
      than levels 3-9 at no cost when reading; only building is slower (use
      --level 3 for quick builds).
  --block-size 128K: mksquashfs's default; every read of a block decompresses
      all of it, so small blocks keep random reads of large files (shared
      libraries) cheap; 1M blocks give images 1-10% smaller and suit large
      files read from start to end; datasets of small files read one by one:
      16K (the kernel's squashfs readahead fills a whole block of page cache
      for each small file it reads). Measure with 'sqfs bench --block-size'.
  Fragments on (small files share blocks), duplicates merged, no NFS export
      table (-no-exports: these images are mounted privately, never exported).

Reproducibility: two packs of the same tree (same contents, names, modes,
owners, timestamps) give byte-identical images: the creation time is the newest
modification time in the tree (or SOURCE_DATE_EPOCH), entries are stored in
sorted order, and the output does not depend on the number of processors.
--reproducible also makes the image independent of when and by whom the
tree was made: every timestamp becomes SOURCE_DATE_EPOCH (else 1980-01-01),
every file is owned by root (0:0) and extended attributes are left out.
Python's timestamp-based .pyc files go stale when timestamps change; install
with SOURCE_DATE_EPOCH set (pip and compileall then write hash-based .pyc)
before using --reproducible on a Python tree. Owners becoming root makes files
that only their owner could read (mode 0600/0700) unreadable in the image.

Exclusions (--exclude, --exclude-from) are glob patterns as in .gitignore:
'*.pyc' and '__pycache__' (no '/') match names at any depth, '/build' and
'docs/*.pdf' (with '/') the path from DIR; 'cache/' matches directories only;
* and ? stop at '/', ** spans directories, [a-z] and {a,b} as in the shell.
Files that cannot be read are named before mksquashfs starts: make them
readable or exclude them.

mksquashfs spellings work too: -comp NAME, -b SIZE, -processors N,
-Xcompression-level N, -Xhc, -all-root (-root-owned), -no-xattrs, -quiet and
-no-progress mean the options above; -noappend, -no-exports, -xattrs,
-exit-on-error, -no-recovery and -reproducible are what sqfs pack always does;
-e PATH... (last, as in mksquashfs), -ef FILE and -wildcards ('... NAME' for
any depth) exclude as mksquashfs does. Other mksquashfs options are answered
with what to use instead.";

#[derive(Parser)]
#[command(
    name = "sqfs",
    disable_version_flag = true,
    about = "Build, inspect and compare SquashFS images (unprivileged companion of squashfs-mount)",
    long_about = "Build, inspect and compare SquashFS images. sqfs is the unprivileged companion of \
squashfs-mount: it never needs root. Images are built by mksquashfs (squashfs-tools); \
inspect, check and diff read images with your own permissions.",
    after_help = "See 'sqfs <command> --help' and the sqfs(1) manual page."
)]
pub(crate) struct Cli {
    /// Print the version and exit
    #[arg(short = 'V', long, global = true, display_order = 1000)]
    pub(crate) version: bool,
    #[command(subcommand)]
    pub(crate) command: Option<Cmd>,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
    /// Build an image from a directory with mksquashfs (or several with --split)
    #[command(after_long_help = PACK_DEFAULTS)]
    Pack(PackArgs),
    /// Show what an image is made of and whether this kernel can mount it
    Inspect(InspectArgs),
    /// Read every block of an image in userspace; name the first bad one and its files
    Check(CheckArgs),
    /// Show what changed between two images: entries added, removed and changed
    #[command(after_long_help = DIFF_HELP)]
    Diff(DiffArgs),
    /// Compare compressors: size, build time, cold and warm launch times
    Bench(BenchArgs),
    /// Record which files of a tree a command reads (a hot list for 'pack --order')
    #[command(after_long_help = TRACE_HELP)]
    Trace(TraceArgs),
    /// Print a completion script for bash, zsh or fish (installed by make install)
    Completions {
        /// bash, zsh or fish (also elvish, powershell)
        shell: clap_complete::Shell,
    },
    /// Internal: the commands `bench` runs inside the image
    #[command(name = "__tree", hide = true)]
    Tree {
        /// read: read every file to the end; stat: stat every entry
        #[arg(value_parser = ["read", "stat"])]
        what: String,
        dir: PathBuf,
    },
}

#[derive(Args)]
pub(crate) struct BuildArgs {
    /// Compressor: zstd, gzip, lz4, lzo or xz
    #[arg(long, value_name = "NAME", default_value = "zstd", value_parser = pack::parse_compressor)]
    pub(crate) comp: Compressor,
    /// Compression level: zstd 1-22 (default 15), gzip 1-9 (default 9), lzo 1-9 (lzo1x_999,
    /// default 8), lz4 1 (default) or 9 (high compression); xz has none
    #[arg(long, value_name = "N")]
    pub(crate) level: Option<u32>,
    /// Data block size, a power of two from 4K to 1M
    #[arg(long, value_name = "SIZE", default_value = "128K", value_parser = pack::parse_block_size)]
    pub(crate) block_size: u32,
}

#[derive(Args)]
pub(crate) struct PackArgs {
    /// The directory to pack (its contents become the image's root). A symbolic link to a
    /// directory packs that directory, the same with or without a trailing '/'
    pub(crate) dir: PathBuf,
    /// The image to write (with --split: the prefix of the images and manifest)
    #[arg(value_name = "IMAGE|OUT_PREFIX")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) build: BuildArgs,
    /// Also normalise timestamps (SOURCE_DATE_EPOCH, else 1980-01-01), owners (root) and drop
    /// xattrs, so the image depends only on the tree's contents; see --help
    #[arg(long)]
    pub(crate) reproducible: bool,
    /// Number of processors mksquashfs may use (the image is the same for any number)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) processors: Option<u32>,
    /// Replace existing output files
    #[arg(short, long)]
    pub(crate) force: bool,
    /// Split into images of at most MAX_SIZE each (e.g. 500G; the compressed image files), written
    /// as OUT_PREFIX-01.sqfs, OUT_PREFIX-02.sqfs... with OUT_PREFIX.manifest.json
    #[arg(long, value_name = "MAX_SIZE", value_parser = units::parse_size)]
    pub(crate) split: Option<u64>,
    /// With --split: the directory depth at which the tree is cut; entries at this depth
    /// (and files above it) are never divided between images
    #[arg(long, value_name = "N", default_value_t = 1, requires = "split")]
    pub(crate) depth: usize,
    /// Leave out what PATTERN matches (repeatable). A pattern without '/' matches names at
    /// any depth ('*.pyc', '__pycache__'), one with '/' the path from DIR ('/build',
    /// 'docs/*.pdf'); a trailing '/' matches directories only; *, ?, [a-z], {a,b}, **
    #[arg(long, value_name = "PATTERN")]
    pub(crate) exclude: Vec<String>,
    /// Leave out what the patterns in FILE match, one a line ('#' starts a comment)
    #[arg(long, value_name = "FILE")]
    pub(crate) exclude_from: Vec<PathBuf>,
    /// mksquashfs's -e/-ef exclusions, translated (silent when they match nothing)
    #[arg(long, value_name = "PATTERN", hide = true)]
    pub(crate) exclude_quiet: Vec<String>,
    /// Make root own every file (mksquashfs -all-root); --reproducible does this too
    #[arg(long)]
    pub(crate) all_root: bool,
    /// Leave extended attributes out (mksquashfs -no-xattrs); --reproducible does this too
    #[arg(long)]
    pub(crate) no_xattrs: bool,
    /// Print nothing when all goes well (no summary, no progress bar)
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// Show no progress bar
    #[arg(long)]
    pub(crate) no_progress: bool,
    /// Store the files listed in FILE first and together, in its order (a hot list, as
    /// 'sqfs trace' writes it: one path a line, relative to DIR), so a cold start reads
    /// a few contiguous blocks
    #[arg(long, value_name = "FILE", conflicts_with = "split")]
    pub(crate) order: Option<PathBuf>,
    /// Print the result as JSON
    #[arg(long)]
    pub(crate) json: bool,
    /// DIR is a kept writable layer (squashfs-mount --writable=DIR): pack what it changed,
    /// as an image to stack on top of the images it was made on (--union=IMAGE,<those>:M)
    #[arg(long, conflicts_with_all = ["split", "order"])]
    pub(crate) layer: bool,
    /// With --layer: the mount point whose layer to pack, when DIR holds several
    #[arg(
        long,
        value_name = "PATH",
        requires = "layer",
        visible_alias = "mountpoint"
    )]
    pub(crate) mount_point: Option<PathBuf>,
}

const TRACE_HELP: &str = "\
Evicts the files under DIR from the page cache (posix_fadvise DONTNEED, which
any user may do to files they can open), runs COMMAND (without a shell), and
lists the files that are in the page cache afterwards (util-linux fincore):
the files COMMAND read, readahead included. Works as an ordinary user on a
plain directory, on an image squashfs-mount mounted (through the kernel or
FUSE) and on any other file system with a page cache. Files that stay cached
while programs use them cannot be traced and are left out (counted).

The list (one path a line, relative to DIR, in the order the image stores
files; '#' lines are comments) is what 'sqfs pack --order' takes.

Examples:
  sqfs trace --output hot.list ./stack -- \\
    ./stack/bin/python3 -c 'import numpy'
  squashfs-mount stack.sqfs:/user-environment -- \\
    sqfs trace --output hot.list /user-environment -- \\
    /user-environment/bin/python3 -c 'import numpy'
  sqfs pack --order hot.list ./stack stack.sqfs";

#[derive(Args)]
pub(crate) struct TraceArgs {
    /// Where to write the hot list
    #[arg(long, value_name = "FILE")]
    pub(crate) output: PathBuf,
    /// The tree whose files are traced (a plain directory or a mounted image)
    pub(crate) dir: PathBuf,
    /// The command to run, after --
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<std::ffi::OsString>,
    /// Print the result as JSON (the command's standard output then goes to standard error)
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The image file
    pub(crate) image: PathBuf,
    /// Print the result as JSON (the exit status still says whether it is damaged)
    #[arg(long)]
    pub(crate) json: bool,
}

const DIFF_HELP: &str = "\
Lists, one line each, every entry of A that B does not have (removed), every
entry of B that A does not have (added, each entry below a new directory
too), and every entry both have that differs in type, content, permission
bits (mode), owner, group, symbolic link target, device number or extended
attributes (changed, with what changed: 'content (1.20 KiB -> 1.31 KiB)',
'mode 0644 -> 0755', 'owner uid 1000 (alice) -> uid 0 (root)'), then a line
of totals. Modification times are compared only with --times (every rebuild
of a tree changes them).

The images are read in userspace with your rights (nothing is mounted), and
quickly: the two trees are walked together, listings merged by name, on every
processor; a file whose size differs has changed content without a byte of it
read; files of the same size are compared as stored (the sizes of their
compressed blocks, then the blocks' raw bytes, each fragment block once per
pair), and only blocks whose stored bytes differ are decompressed and
compared, so no change is missed.

Examples:
  sqfs diff stack-2024.sqfs stack-2025.sqfs
  sqfs diff --json old.sqfs new.sqfs | jq -r '.changes[] | select(.change == \"added\") | .path'
  sqfs diff --exit-code release.sqfs rebuilt.sqfs && echo same tree";

#[derive(Args)]
pub(crate) struct DiffArgs {
    /// The image to compare from (the old one)
    pub(crate) a: PathBuf,
    /// The image to compare to (the new one)
    pub(crate) b: PathBuf,
    /// Print the result as JSON: totals and every change with both sides' type, mode, owner,
    /// size and target
    #[arg(long)]
    pub(crate) json: bool,
    /// Compare modification times too
    #[arg(long)]
    pub(crate) times: bool,
    /// Exit with status 1 when the images differ, 0 when they hold the same tree (errors
    /// then exit with 2, as diff(1))
    #[arg(long)]
    pub(crate) exit_code: bool,
}

#[derive(Args)]
pub(crate) struct InspectArgs {
    /// The image file
    pub(crate) image: PathBuf,
    /// Print everything as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
#[command(after_long_help = "\
For each compressor the image is built (as 'sqfs pack' would, without --reproducible) and
then, through squashfs-mount (found next to sqfs, else on PATH), the command is run --runs
times cold and --runs times warm, and so is a walk that stats every entry of the tree.
Times are the wall time of the whole squashfs-mount run, mount included.

Which way squashfs-mount mounts the images is asked with 'squashfs-mount --policy'
and printed with the table: the kernel's squashfs, or its FUSE server for images the
site policy keeps from the kernel (by default every image you own or could change,
so the images bench builds as you; built by root, they take the kernel path).

Cold runs use squashfs-mount's --no-cache (a fresh mount) and drop the page cache
first (echo 3 > /proc/sys/vm/drop_caches) when you may (root). Otherwise the image's
cached pages are evicted with posix_fadvise(DONTNEED); files outside the image stay
cached. The table and chart label such runs cold*. Warm runs are a second launch
through squashfs-mount's image cache (what users get when they start something
again) where the cache works (for the kernel path and, for your own images, the
FUSE path alike); otherwise a fresh mount right after the cold run, whose page
cache it finds filled; the table says which, and why. All images are built first, then
measured in rounds that visit every compressor once, so a passing disturbance on
the machine spreads over all of them.

Examples:
  sqfs bench /usr/lib/python3.11 --run 'python3.11 -c \"import email, json, asyncio\"'
  sqfs bench ./stack --comp zstd:3,zstd:19,lz4 --runs 10 --svg stack.svg
  sqfs bench ./stack --comp zstd:15@32K,zstd:15@128K,lz4 --run './stack/bin/app --version'")]
pub(crate) struct BenchArgs {
    /// The tree to pack; by default it is also the mount point, so the command sees the
    /// image where the tree was
    pub(crate) dir: PathBuf,
    /// Comma-separated compressors, each NAME or NAME:LEVEL, optionally with @BLOCK_SIZE
    /// (zstd:15@32K) to compare block sizes too
    #[arg(long, value_name = "LIST", default_value = bench::DEFAULT_VARIANTS)]
    pub(crate) comp: String,
    /// The command to time inside the image, run with sh -c (default: read every file)
    #[arg(long, value_name = "COMMAND")]
    pub(crate) run: Option<String>,
    /// Measured runs of each kind (cold, warm) per compressor; with fewer than 5 the machine's
    /// noise can put a warm median above a cold one (the table says so when it does)
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(crate) runs: u64,
    /// Data block size of every image
    #[arg(long, value_name = "SIZE", default_value = "128K", value_parser = pack::parse_block_size)]
    pub(crate) block_size: u32,
    /// Where to mount the images (default: DIR itself)
    #[arg(long, value_name = "DIR", visible_alias = "mountpoint")]
    pub(crate) mount_point: Option<PathBuf>,
    /// Where to build the images (default: the temporary directory)
    #[arg(long, value_name = "DIR")]
    pub(crate) work_dir: Option<PathBuf>,
    /// Where to write the chart
    #[arg(long, value_name = "FILE", default_value = "sqfs-bench.svg")]
    pub(crate) svg: PathBuf,
    /// Only build: measure sizes and build times, run nothing
    #[arg(long)]
    pub(crate) no_run: bool,
    /// Keep the images (their directory is printed)
    #[arg(long)]
    pub(crate) keep: bool,
    /// Print the results as JSON instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

/// The command line as completions offer it: clap_complete's generators
/// list hidden subcommands too, so they are left out here (and
/// `completions` itself, which the installed scripts make needless).
pub(crate) fn completion_command() -> clap::Command {
    let full = Cli::command();
    let visible: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "completions")
        .cloned()
        .collect();
    clap::Command::new("sqfs")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .subcommands(visible)
}
