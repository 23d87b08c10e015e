//! `squashfs-mount-layer`: the caller's stage of `--writable=DIR`
//! (`layer::helper`). Started by squashfs-mount after every privilege is
//! gone, or by the Slurm plugin as the job user; it holds no privilege.
//!
//! No Rust runtime start-up (`#![no_main]`), as for squashfs-mount: the
//! runtime would set SIGPIPE to ignored before `main`, and the command
//! must get the caller's disposition.
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(dead_code))]
#![deny(unsafe_code)]

/// The C entry point (argv is read through `std::env`).
// As in main.rs: this binary has no Rust `main`, so the C runtime's
// `main` symbol must be this function.
#[cfg(not(test))]
#[allow(unsafe_code)]
#[no_mangle]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    squashfs_mount::start_program();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = squashfs_mount::run_layer_helper(&args);
    std::process::exit(i32::from(code))
}
