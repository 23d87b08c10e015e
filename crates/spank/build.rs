//! Reads SLURM_VERSION_NUMBER from the Slurm headers the plugin is built
//! against: Slurm refuses a plugin whose `plugin_version` is from another
//! release series ("Incompatible Slurm plugin version").
//! Headers: $SLURM_INCLUDE_DIR/slurm/slurm_version.h, else /usr/include or
//! /usr/local/include (Debian: package libslurm-dev).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("SLURM_INCLUDE_DIR") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(PathBuf::from("/usr/include"));
    dirs.push(PathBuf::from("/usr/local/include"));
    for dir in &dirs {
        let header = dir.join("slurm").join("slurm_version.h");
        let Ok(text) = std::fs::read_to_string(&header) else {
            continue;
        };
        println!("cargo:rerun-if-changed={}", header.display());
        let number = text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            match (w.next(), w.next(), w.next()) {
                (Some("#define"), Some("SLURM_VERSION_NUMBER"), Some(v)) => {
                    u32::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16)
                        .ok()
                }
                _ => None,
            }
        });
        if let Some(n) = number {
            println!("cargo:rustc-env=SQFSMNT_SLURM_VERSION_NUMBER={n}");
            println!("cargo:rustc-env=SQFSMNT_SLURM_HEADER={}", header.display());
            return;
        }
    }
    // Built again once the headers are installed (a missing file counts
    // as changed), not left with plugin_version 0.
    for dir in &dirs {
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("slurm").join("slurm_version.h").display()
        );
    }
    println!("cargo:warning=Slurm headers (slurm/slurm_version.h) not found: the SPANK plugin is built with plugin_version 0 and Slurm will refuse to load it. Install libslurm-dev or set SLURM_INCLUDE_DIR.");
    println!("cargo:rustc-env=SQFSMNT_SLURM_VERSION_NUMBER=0");
    println!("cargo:rustc-env=SQFSMNT_SLURM_HEADER=");
}
