//! What each subcommand does with its parsed options, and what it prints.

use std::path::PathBuf;

use sqfs::exclude::{Excludes, Origin};
use sqfs::output::{self, Unprinted};
use sqfs::{bench, inspect, layer, order, pack, split, trace, units};

use crate::cli::{
    completion_command, BenchArgs, CheckArgs, Cmd, DiffArgs, InspectArgs, PackArgs, TraceArgs,
};

/// Why a command did not succeed.
pub(crate) enum Failure {
    /// What went wrong, for standard error (exit status 1).
    Message(String),
    /// The reader closed standard output: end quietly (status 141).
    Closed,
    /// End with this status, saying nothing more (`diff --exit-code`:
    /// the images differ).
    Status(u8),
    /// What went wrong, with this exit status (`diff --exit-code`: 2).
    MessageWithStatus(String, u8),
}

impl From<String> for Failure {
    fn from(m: String) -> Self {
        Failure::Message(m)
    }
}

/// Each module's error becomes its sentence.
macro_rules! failures {
    ($($error:ty),* $(,)?) => {
        $(impl From<$error> for Failure {
            fn from(e: $error) -> Self {
                Failure::Message(e.to_string())
            }
        })*
    };
}

failures!(
    sqfs::error::FileError,
    sqfs::exclude::ExcludeError,
    sqfs::order::OrderError,
    sqfs::pack::PackError,
    sqfs::split::SplitError,
    sqfs::layer::LayerError,
    sqfs::trace::TraceError,
    sqfs::bench::BenchError,
    sqfs::diff::DiffError,
    serde_json::Error,
);

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
    let s = serde_json::to_string_pretty(v)?;
    out(format!("{s}\n"))
}

pub(crate) fn run(command: Cmd) -> Result<(), Failure> {
    match command {
        Cmd::Pack(a) => pack(a),
        Cmd::Trace(a) => trace(&a),
        Cmd::Inspect(a) => inspect(&a),
        Cmd::Check(a) => check(&a),
        Cmd::Diff(a) => diff(&a),
        Cmd::Bench(a) => bench(a),
        Cmd::Completions { shell } => {
            out(crate::completions::script(shell, &mut completion_command()))
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

/// The exclusion patterns of `pack`'s command line.
fn excludes(a: &PackArgs) -> Result<Excludes, Failure> {
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
    Ok(excludes)
}

fn pack(a: PackArgs) -> Result<(), Failure> {
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
    let excludes = excludes(&a)?;
    if let Some(max) = a.split {
        let m = split::split(&a.dir, &a.output, max, a.depth, &opts, &excludes)?;
        return if a.json {
            print_json(&m)
        } else if a.quiet {
            Ok(())
        } else {
            out(split_summary(&m, a.output))
        };
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
        println!("{}", layer_line(l, &a.output));
    }
    out(pack_summary(&p))
}

/// What `pack --split` prints: a line per image, the manifest, and how to
/// mount them.
fn split_summary(m: &split::Manifest, output: PathBuf) -> String {
    let mut text = String::new();
    for img in &m.images {
        text +=
            &format!(
            "{}: {} ({:.0}% of the limit; {}), {} {} ({} at depth {}, with what is below them)\n",
            img.image,
            units::bytes(img.file_size),
            img.file_size as f64 * 100.0 / m.max_size as f64,
            pack::ratio_phrase(img.bytes_used, img.file_bytes),
            img.stored_entries,
            if img.stored_entries == 1 { "entry" } else { "entries" },
            img.entries.len(),
            m.depth
        );
    }
    let mut manifest = output.into_os_string();
    manifest.push(".manifest.json");
    text += &format!("manifest: {}\n", PathBuf::from(manifest).display());
    text += &format!(
        "mount them all with: squashfs-mount --union={}:<mountpoint> -- <command>\n",
        m.union
    );
    text
}

/// What `pack --layer` says about the layer, before the image's line.
fn layer_line(l: &layer::Layer, output: &std::path::Path) -> String {
    let images: Vec<String> = l
        .images
        .iter()
        .map(|i| i.to_string_lossy().into_owned())
        .collect();
    format!(
        "the layer of {}: {} deleted names, {} directories made again ({} whiteouts added for what they hide); use it on top of its images: squashfs-mount --union={},{}:{} -- <command>",
        l.mount_point.to_string_lossy(),
        l.whiteouts,
        l.opaque,
        l.pseudo.len(),
        output.display(),
        images.join(","),
        l.mount_point.to_string_lossy()
    )
}

/// The line `pack` prints about the image it built.
fn pack_summary(p: &pack::Packed) -> String {
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
    format!(
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
    )
}

fn trace(a: &TraceArgs) -> Result<(), Failure> {
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
                .to_string()
                .into(),
        ),
    }
}

fn inspect(a: &InspectArgs) -> Result<(), Failure> {
    let mut r =
        inspect::inspect_file(&a.image).map_err(|e| format!("{}: {e}", a.image.display()))?;
    r.mount_path = sqfs::mountable::ask(&a.image);
    if a.json {
        print_json(&r)
    } else {
        out(inspect::render(&r))
    }
}

fn check(a: &CheckArgs) -> Result<(), Failure> {
    let c = sqfs::check::check(&a.image).map_err(|e| format!("{}: {e}", a.image.display()))?;
    if a.json {
        print_json(&c)?;
    } else if !c.failed() {
        out(format!("{}\n", sqfs::check::summary(&c)))?;
    }
    if c.failed() {
        return Err(sqfs::check::summary(&c).into());
    }
    Ok(())
}

fn diff(a: &DiffArgs) -> Result<(), Failure> {
    let opts = sqfs::diff::DiffOptions { times: a.times };
    let d = match sqfs::diff::diff(&a.a, &a.b, opts) {
        Ok(d) => d,
        Err(e) if a.exit_code => return Err(Failure::MessageWithStatus(e.to_string(), 2)),
        Err(e) => return Err(e.into()),
    };
    if a.json {
        print_json(&d)?;
    } else {
        out(sqfs::diff::render(&d))?;
    }
    if a.exit_code && !d.changes.is_empty() {
        return Err(Failure::Status(1));
    }
    Ok(())
}

fn bench(a: BenchArgs) -> Result<(), Failure> {
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
    if !o.no_run && sqfs::mountable::find_squashfs_mount().is_none() {
        return Err(bench::BenchError::NoSquashfsMount.into());
    }
    let r = bench::bench(&o)?;
    if a.json {
        print_json(&r)
    } else {
        out(bench::table(&r))
    }
}
