//! `sqfs`: pack, inspect and benchmark SquashFS images. Unprivileged.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};

use sqfs::exclude::{Excludes, Origin};

use sqfs::format::Compressor;
use sqfs::output::{self, eprint_line, Unprinted};
use sqfs::{bench, inspect, layer, order, pack, split, trace, units};

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
inspect reads images with your own permissions.",
    after_help = "See 'sqfs <command> --help' and the sqfs(1) manual page."
)]
struct Cli {
    /// Print the version and exit
    #[arg(short = 'V', long, global = true, display_order = 1000)]
    version: bool,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build an image from a directory with mksquashfs (or several with --split)
    #[command(after_long_help = PACK_DEFAULTS)]
    Pack(PackArgs),
    /// Show what an image is made of and whether this kernel can mount it
    Inspect(InspectArgs),
    /// Read every block of an image in userspace; name the first bad one and its files
    Check(CheckArgs),
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
struct BuildArgs {
    /// Compressor: zstd, gzip, lz4, lzo or xz
    #[arg(long, value_name = "NAME", default_value = "zstd", value_parser = pack::parse_compressor)]
    comp: Compressor,
    /// Compression level: zstd 1-22 (default 15), gzip 1-9 (default 9), lzo 1-9 (lzo1x_999,
    /// default 8), lz4 1 (default) or 9 (high compression); xz has none
    #[arg(long, value_name = "N")]
    level: Option<u32>,
    /// Data block size, a power of two from 4K to 1M
    #[arg(long, value_name = "SIZE", default_value = "128K", value_parser = pack::parse_block_size)]
    block_size: u32,
}

#[derive(Args)]
struct PackArgs {
    /// The directory to pack (its contents become the image's root)
    dir: PathBuf,
    /// The image to write (with --split: the prefix of the images and manifest)
    #[arg(value_name = "IMAGE|OUT_PREFIX")]
    output: PathBuf,
    #[command(flatten)]
    build: BuildArgs,
    /// Also normalise timestamps (SOURCE_DATE_EPOCH, else 1980-01-01), owners (root) and drop
    /// xattrs, so the image depends only on the tree's contents; see --help
    #[arg(long)]
    reproducible: bool,
    /// Number of processors mksquashfs may use (the image is the same for any number)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    processors: Option<u32>,
    /// Replace existing output files
    #[arg(short, long)]
    force: bool,
    /// Split into images of at most MAX_SIZE each (e.g. 500G; the compressed image files), written
    /// as OUT_PREFIX-01.sqfs, OUT_PREFIX-02.sqfs... with OUT_PREFIX.manifest.json
    #[arg(long, value_name = "MAX_SIZE", value_parser = units::parse_size)]
    split: Option<u64>,
    /// With --split: the directory depth at which the tree is cut; entries at this depth
    /// (and files above it) are never divided between images
    #[arg(long, value_name = "N", default_value_t = 1, requires = "split")]
    depth: usize,
    /// Leave out what PATTERN matches (repeatable). A pattern without '/' matches names at
    /// any depth ('*.pyc', '__pycache__'), one with '/' the path from DIR ('/build',
    /// 'docs/*.pdf'); a trailing '/' matches directories only; *, ?, [a-z], {a,b}, **
    #[arg(long, value_name = "PATTERN")]
    exclude: Vec<String>,
    /// Leave out what the patterns in FILE match, one a line ('#' starts a comment)
    #[arg(long, value_name = "FILE")]
    exclude_from: Vec<PathBuf>,
    /// mksquashfs's -e/-ef exclusions, translated (silent when they match nothing)
    #[arg(long, value_name = "PATTERN", hide = true)]
    exclude_quiet: Vec<String>,
    /// Make root own every file (mksquashfs -all-root); --reproducible does this too
    #[arg(long)]
    all_root: bool,
    /// Leave extended attributes out (mksquashfs -no-xattrs); --reproducible does this too
    #[arg(long)]
    no_xattrs: bool,
    /// Print nothing when all goes well (no summary, no progress bar)
    #[arg(short, long)]
    quiet: bool,
    /// Show no progress bar
    #[arg(long)]
    no_progress: bool,
    /// Store the files listed in FILE first and together, in its order (a hot list, as
    /// 'sqfs trace' writes it: one path a line, relative to DIR), so a cold start reads
    /// a few contiguous blocks
    #[arg(long, value_name = "FILE", conflicts_with = "split")]
    order: Option<PathBuf>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
    /// DIR is a kept writable layer (squashfs-mount --writable=DIR): pack what it changed,
    /// as an image to stack on top of the images it was made on (--union=IMAGE,<those>:M)
    #[arg(long, conflicts_with_all = ["split", "order"])]
    layer: bool,
    /// With --layer: the mount point whose layer to pack, when DIR holds several
    #[arg(
        long,
        value_name = "PATH",
        requires = "layer",
        visible_alias = "mountpoint"
    )]
    mount_point: Option<PathBuf>,
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
struct TraceArgs {
    /// Where to write the hot list
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// The tree whose files are traced (a plain directory or a mounted image)
    dir: PathBuf,
    /// The command to run, after --
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<std::ffi::OsString>,
    /// Print the result as JSON (the command's standard output then goes to standard error)
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CheckArgs {
    /// The image file
    image: PathBuf,
    /// Print the result as JSON (the exit status still says whether it is damaged)
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct InspectArgs {
    /// The image file
    image: PathBuf,
    /// Print everything as JSON
    #[arg(long)]
    json: bool,
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
struct BenchArgs {
    /// The tree to pack; by default it is also the mount point, so the command sees the
    /// image where the tree was
    dir: PathBuf,
    /// Comma-separated compressors, each NAME or NAME:LEVEL, optionally with @BLOCK_SIZE
    /// (zstd:15@32K) to compare block sizes too
    #[arg(long, value_name = "LIST", default_value = bench::DEFAULT_VARIANTS)]
    comp: String,
    /// The command to time inside the image, run with sh -c (default: read every file)
    #[arg(long, value_name = "COMMAND")]
    run: Option<String>,
    /// Measured runs of each kind (cold, warm) per compressor
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    runs: u64,
    /// Data block size of every image
    #[arg(long, value_name = "SIZE", default_value = "128K", value_parser = pack::parse_block_size)]
    block_size: u32,
    /// Where to mount the images (default: DIR itself)
    #[arg(long, value_name = "DIR", visible_alias = "mountpoint")]
    mount_point: Option<PathBuf>,
    /// Where to build the images (default: the temporary directory)
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Where to write the chart
    #[arg(long, value_name = "FILE", default_value = "sqfs-bench.svg")]
    svg: PathBuf,
    /// Only build: measure sizes and build times, run nothing
    #[arg(long)]
    no_run: bool,
    /// Keep the images (their directory is printed)
    #[arg(long)]
    keep: bool,
    /// Print the results as JSON instead of a table
    #[arg(long)]
    json: bool,
}

/// The command line as completions offer it: clap_complete's generators
/// list hidden subcommands too, so they are left out here (and
/// `completions` itself, which the installed scripts make needless).
fn completion_command() -> clap::Command {
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

/// Why a command did not succeed.
enum Failure {
    /// What went wrong, for standard error (exit status 1).
    Message(String),
    /// The reader closed standard output: end quietly (status 141).
    Closed,
}

impl From<String> for Failure {
    fn from(m: String) -> Self {
        Failure::Message(m)
    }
}

impl From<&str> for Failure {
    fn from(m: &str) -> Self {
        Failure::Message(m.to_string())
    }
}

impl From<Unprinted> for Failure {
    fn from(u: Unprinted) -> Self {
        match u {
            Unprinted::Closed => Failure::Closed,
            Unprinted::Failed(m) => Failure::Message(m),
        }
    }
}

/// `text` on standard output.
fn out(text: impl AsRef<[u8]>) -> Result<(), Failure> {
    Ok(output::print(text)?)
}

fn print_json(v: &impl serde::Serialize) -> Result<(), Failure> {
    let s = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    out(format!("{s}\n"))
}

fn run(command: Cmd) -> Result<(), Failure> {
    match command {
        Cmd::Pack(a) => {
            let opts = pack::PackOptions {
                comp: a.build.comp,
                level: a.build.level,
                block_size: a.build.block_size,
                reproducible: a.reproducible,
                all_root: a.all_root,
                no_xattrs: a.no_xattrs,
                processors: a.processors,
                force: a.force,
                order: a.order.as_deref().map(order::read).transpose()?,
                pseudo: Vec::new(),
            };
            pack::compressor_args(opts.comp, opts.level)?;
            if a.quiet || a.no_progress {
                sqfs::progress::disable();
            }
            let mut excludes = Excludes::new();
            for p in &a.exclude {
                excludes.add(p, Origin::CommandLine)?;
            }
            for p in &a.exclude_quiet {
                excludes.add(p, Origin::Quiet)?;
            }
            for f in &a.exclude_from {
                excludes.add_file(f, Origin::Quiet)?;
            }
            if let Some(max) = a.split {
                let m = split::split(&a.dir, &a.output, max, a.depth, &opts, &excludes)?;
                if a.json {
                    return print_json(&m);
                }
                if a.quiet {
                    return Ok(());
                }
                let mut text = String::new();
                for img in &m.images {
                    text += &format!(
                        "{}: {} ({:.0}% of the limit; {}), {} entries at depth {}\n",
                        img.image,
                        units::bytes(img.file_size),
                        img.file_size as f64 * 100.0 / m.max_size as f64,
                        pack::ratio_phrase(img.bytes_used, img.file_bytes),
                        img.entries.len(),
                        m.depth
                    );
                }
                let mut manifest = a.output.into_os_string();
                manifest.push(".manifest.json");
                text += &format!("manifest: {}\n", PathBuf::from(manifest).display());
                text += &format!(
                    "mount them all with: squashfs-mount --union={}:<mountpoint> -- <command>\n",
                    m.union
                );
                return out(text);
            }
            let (p, layer) = if a.layer {
                let l = layer::prepare(&a.dir, a.mount_point.as_deref().map(|m| m.as_os_str()))?;
                let opts = pack::PackOptions {
                    no_xattrs: true,
                    pseudo: l.pseudo.clone(),
                    ..opts
                };
                (pack::pack(&l.upper, &a.output, &opts, &excludes)?, Some(l))
            } else {
                (pack::pack(&a.dir, &a.output, &opts, &excludes)?, None)
            };
            if a.json {
                return print_json(&p);
            }
            if a.quiet {
                return Ok(());
            }
            if let Some(l) = &layer {
                let images: Vec<String> = l
                    .images
                    .iter()
                    .map(|i| i.to_string_lossy().into_owned())
                    .collect();
                println!(
                    "the layer of {}: {} deleted names, {} directories made again ({} whiteouts added for what they hide); use it on top of its images: squashfs-mount --union={},{}:{} -- <command>",
                    l.mount_point.to_string_lossy(),
                    l.whiteouts,
                    l.opaque,
                    l.pseudo.len(),
                    a.output.display(),
                    images.join(","),
                    l.mount_point.to_string_lossy()
                );
            }
            let level = p.level.map(|l| format!(" level {l}")).unwrap_or_default();
            let excluded = match p.excluded {
                0 => String::new(),
                1 => ", 1 excluded".to_string(),
                n => format!(", {n} excluded"),
            };
            let ordered = match p.ordered {
                Some(n) => format!(", {n} listed files first"),
                None => String::new(),
            };
            out(format!(
                "{}: {} ({}), {} {}{excluded}{ordered}, {}{level}, {} blocks, built in {}{}\n",
                p.image,
                units::bytes(p.file_size),
                pack::ratio_phrase(p.bytes_used, p.file_bytes),
                p.entries,
                if p.entries == 1 { "entry" } else { "entries" },
                p.compressor,
                units::bytes(u64::from(p.block_size)),
                units::seconds(p.seconds),
                if p.reproducible { ", reproducible" } else { "" }
            ))
        }
        Cmd::Trace(a) => {
            let t = trace::trace(&a.dir, &a.output, &a.command, a.json)?;
            if a.json {
                print_json(&t)?;
            } else {
                out(format!(
                    "{}: {} of {} files read ({}){}\n",
                    t.output,
                    t.hot,
                    t.files,
                    units::bytes(t.hot_bytes),
                    if t.stayed_cached > 0 {
                        format!(
                            "; {} files stayed cached while programs used them and are not listed",
                            t.stayed_cached
                        )
                    } else {
                        String::new()
                    }
                ))?;
            }
            match t.exit_status {
                Some(0) => Ok(()),
                Some(n) => Err(format!(
                    "the command exited with status {n}; the list of what it read is written anyway"
                )
                .into()),
                None => Err(
                    "the command was killed by a signal; the list of what it read is written anyway"
                        .into(),
                ),
            }
        }
        Cmd::Inspect(a) => {
            let mut r = inspect::inspect_file(&a.image)
                .map_err(|e| format!("{}: {e}", a.image.display()))?;
            r.mount_path = sqfs::mountable::ask(&a.image);
            if a.json {
                print_json(&r)
            } else {
                out(inspect::render(&r))
            }
        }
        Cmd::Check(a) => {
            let c =
                sqfs::check::check(&a.image).map_err(|e| format!("{}: {e}", a.image.display()))?;
            if a.json {
                print_json(&c)?;
            } else if c.first_bad.is_none() {
                out(format!("{}\n", sqfs::check::summary(&c)))?;
            }
            match c.first_bad {
                None => Ok(()),
                Some(_) => Err(sqfs::check::summary(&c).into()),
            }
        }
        Cmd::Bench(a) => {
            let o = bench::BenchOptions {
                dir: a.dir,
                variants: bench::parse_variants(&a.comp)?,
                run: a.run,
                runs: a.runs as usize,
                block_size: a.block_size,
                mountpoint: a.mount_point,
                work_dir: a.work_dir,
                svg: a.svg,
                no_run: a.no_run,
                keep: a.keep,
            };
            if !o.no_run && bench::find_squashfs_mount().is_none() {
                return Err("squashfs-mount not found next to sqfs nor on PATH; install it (make install), or pass --no-run to measure only sizes and build times".into());
            }
            let r = bench::bench(&o)?;
            if a.json {
                print_json(&r)
            } else {
                out(bench::table(&r))
            }
        }
        Cmd::Completions { shell } => {
            // Into memory first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut completion_command(), "sqfs", &mut script);
            out(script)
        }
        Cmd::Tree { what, dir } => {
            if what == "read" {
                sqfs::tree::read_all(&dir)?;
            } else {
                sqfs::tree::stat_all(&dir)?;
            }
            Ok(())
        }
    }
}

/// Usage errors exit with 1, as squashfs-mount's do.
const USAGE_ERROR: u8 = 1;

/// Prints clap's help, or a usage error without clap's tip to pass an
/// unknown option "as a value, use '-- --x'" (which misleads here).
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue};
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                // clap's own printing, in colour.
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            match output::print(e.render().to_string()) {
                Err(Unprinted::Closed) => ExitCode::from(output::CLOSED_STATUS),
                _ => ExitCode::SUCCESS,
            }
        }
        ErrorKind::UnknownArgument => {
            let arg = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(s)) => s.clone(),
                _ => String::new(),
            };
            let what = if arg.starts_with('-') {
                "unknown option"
            } else {
                "unexpected argument"
            };
            let hint = match e.get(ContextKind::SuggestedArg) {
                Some(ContextValue::String(s)) => format!(" (did you mean '{s}'?)"),
                _ => String::new(),
            };
            eprint_line(format_args!(
                "sqfs: {what} '{arg}'{hint}; see 'sqfs {}--help'",
                subcommand_given()
            ));
            ExitCode::from(USAGE_ERROR)
        }
        _ => {
            eprint_line(format_args!(
                "sqfs: {}; see 'sqfs {}--help'",
                one_line(&e.render().to_string()),
                subcommand_given()
            ));
            ExitCode::from(USAGE_ERROR)
        }
    }
}

/// The subcommand on the command line, with a space (for "see 'sqfs
/// pack --help'"), or nothing.
fn subcommand_given() -> String {
    std::env::args()
        .skip(1)
        .find(|a| {
            ["pack", "inspect", "check", "bench", "trace", "completions"].contains(&a.as_str())
        })
        .map(|s| format!("{s} "))
        .unwrap_or_default()
}

/// clap's error block as one line in sqfs's style: its first paragraph
/// without "error: ", lines joined, and its tip (a suggestion), if any.
fn one_line(block: &str) -> String {
    let mut paragraphs = block.split("\n\n");
    let first = paragraphs.next().unwrap_or_default();
    let mut line = first
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start_matches("error: ")
        .to_string();
    for p in paragraphs {
        if let Some(tip) = p.trim().strip_prefix("tip: ") {
            line += &format!(" ({})", tip.trim());
        }
    }
    line
}

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "sqfs".into());
    let args: Vec<OsString> = args.collect();
    let args = match sqfs::compat::translate(&args) {
        Ok(a) => a,
        Err(e) => {
            eprint_line(format_args!("sqfs: {}", units::without_os_error(&e)));
            return ExitCode::from(USAGE_ERROR);
        }
    };
    if sqfs::compat::wants_version(&args) {
        // The version alone, as squashfs-mount prints it (scripts parse it).
        return match output::print(concat!(env!("CARGO_PKG_VERSION"), "\n")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(Unprinted::Closed) => ExitCode::from(output::CLOSED_STATUS),
            Err(Unprinted::Failed(e)) => {
                eprint_line(format_args!("sqfs: {e}"));
                ExitCode::from(1)
            }
        };
    }
    let cli = match Cli::try_parse_from(std::iter::once(argv0).chain(args)) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let Some(command) = cli.command else {
        let mut help = Cli::command();
        eprint_line(format_args!(
            "{}\nsqfs: no command given; see 'sqfs --help'",
            help.render_usage()
        ));
        return ExitCode::from(USAGE_ERROR);
    };
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Closed) => ExitCode::from(output::CLOSED_STATUS),
        Err(Failure::Message(e)) => {
            eprint_line(format_args!("sqfs: {}", units::without_os_error(&e)));
            ExitCode::from(1)
        }
    }
}
