//! The text `sqfs inspect` prints.

use super::report::Report;
use crate::format::CompressorOptions;
use crate::units;

/// The human-readable form of a report.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    render_format(&mut s, r);
    render_contents(&mut s, r);
    render_mountable(&mut s, r);
    s
}

/// The compressor's options, or "none".
fn compressor_options(o: &CompressorOptions) -> String {
    let mut opts = Vec::new();
    if let Some(l) = o.level {
        opts.push(format!("level {l}"));
    }
    if let Some(w) = o.window_size {
        opts.push(format!("window size {w}"));
    }
    if !o.strategies.is_empty() {
        opts.push(format!("strategies {}", o.strategies.join(",")));
    }
    if let Some(d) = o.dictionary_size {
        opts.push(format!("dictionary {}", units::bytes(u64::from(d))));
    }
    if !o.filters.is_empty() {
        opts.push(format!("filters {}", o.filters.join(",")));
    }
    if let Some(a) = o.algorithm {
        opts.push(format!("algorithm {a}"));
    }
    if let Some(hc) = o.high_compression {
        opts.push(if hc {
            "high compression (-Xhc)".into()
        } else {
            "fast (not -Xhc)".into()
        });
    }
    if opts.is_empty() {
        "none".to_string()
    } else {
        opts.join(", ")
    }
}

/// What the image is: format, compressor, blocks, time.
fn render_format(s: &mut String, r: &Report) {
    use std::fmt::Write;
    let o = &r.compressor_options;
    let opts = compressor_options(o);
    let source = if o.stored {
        "stored in the image"
    } else {
        "mksquashfs defaults"
    };
    let _ = writeln!(s, "Image:            {}", r.image);
    let _ = writeln!(s, "Format:           SquashFS {}", r.version);
    let _ = writeln!(s, "Compressor:       {} ({opts}; {source})", r.compressor);
    let _ = writeln!(
        s,
        "Block size:       {}",
        units::bytes(u64::from(r.block_size))
    );
    let _ = writeln!(
        s,
        "Fragments:        {} ({} fragment blocks{})",
        if r.flags.fragments { "on" } else { "off" },
        r.fragments,
        if r.flags.always_use_fragments {
            ", always used"
        } else {
            ""
        }
    );
    let time_is = if r.mkfs_time == r.newest_file_time {
        "the newest file time in the image, as sqfs pack sets it".to_string()
    } else {
        format!(
            "set when the image was built (or by -mkfs-time, SOURCE_DATE_EPOCH); the newest file is from {}",
            units::utc(i64::from(r.newest_file_time))
        )
    };
    let _ = writeln!(
        s,
        "Image time:       {} ({}): {time_is}",
        r.mkfs_time_utc, r.mkfs_time
    );
}

/// What the image holds: sizes, files, owners, attributes, options.
fn render_contents(s: &mut String, r: &Report) {
    use std::fmt::Write;
    let yes = |b: bool| if b { "yes" } else { "no" };
    let f = &r.files;
    let _ = writeln!(
        s,
        "Image size:       {} ({} bytes; file {} bytes)",
        units::bytes(r.bytes_used),
        r.bytes_used,
        r.file_size
    );
    let _ = writeln!(
        s,
        "File data:        {} uncompressed{}",
        units::bytes(f.file_bytes),
        match r.ratio {
            Some(x) if x < 1.0 => format!(", image is {:.1}% of it", x * 100.0),
            Some(_) => ", less than the image's metadata".to_string(),
            None => String::new(),
        }
    );
    let _ = writeln!(s, "Inodes:           {}", r.inodes);
    let _ = writeln!(
        s,
        "Files:            {} regular, {} directories, {} symlinks, {} devices, {} fifos, {} sockets",
        f.regular_files,
        f.directories,
        f.symlinks,
        f.block_devices + f.char_devices,
        f.fifos,
        f.sockets
    );
    let _ = writeln!(s, "Hard links:       {} extra names", f.extra_links);
    let _ = writeln!(s, "Owners (ids):     {}", crate::names::ids(&r.ids));
    let x = &r.xattrs;
    let _ = writeln!(
        s,
        "Xattrs:           {}",
        if x.left_out {
            "none (left out when it was built: -no-xattrs)".to_string()
        } else if x.sets == 0 && x.inodes == 0 {
            "none".to_string()
        } else {
            format!("{} distinct sets, on {} inodes", x.sets, x.inodes)
        }
    );
    let _ = writeln!(
        s,
        "Options:          duplicates removed: {}, NFS-exportable: {}, compressed inodes/data/fragments: {}/{}/{}",
        yes(r.flags.duplicates_removed),
        yes(r.flags.exportable),
        yes(r.flags.compressed_inodes),
        yes(r.flags.compressed_data),
        yes(r.flags.compressed_fragments)
    );
}

/// Whether this machine can mount it, and which way.
fn render_mountable(s: &mut String, r: &Report) {
    use std::fmt::Write;
    let word = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "NO, not mountable here",
        None => "unknown",
    };
    match &r.mount_path {
        None => {
            let _ = writeln!(
                s,
                "Mountable here:   {}: {}",
                word(r.kernel.can_mount),
                r.kernel.reason
            );
        }
        Some(p) => {
            let (v, why) =
                crate::mountable::verdict(p, (r.kernel.can_mount, r.kernel.reason.as_str()));
            let _ = writeln!(s, "Mountable here:   {}: {why}", word(v));
            if p.path != "kernel" {
                let _ = writeln!(
                    s,
                    "Kernel squashfs:  {}: {}",
                    word(r.kernel.can_mount),
                    r.kernel.reason
                );
            }
        }
    }
}
