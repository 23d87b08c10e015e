//! The setuid-root entry point: the program is the library's
//! `run_program` (`commands::program`). The privileged sequence is
//! `engine::mount_all`; `launch::run` puts privileges and limits around it.
//!
//! No Rust runtime start-up (`#![no_main]`): the C library calls [`main`]
//! directly. The runtime's start-up read `/proc/self/maps` (to place a
//! stack-overflow guard handler), installed signal handlers on an
//! alternate stack and checked fds 0-2: about 0.15 ms of every launch
//! (BENCHMARKS.md, "Launch cost"). What of it matters is done here:
//! fds 0-2 are made valid (`start_program`) and SIGPIPE is
//! ignored while the tool runs (EPIPE instead of death; the command gets
//! the default back). A stack overflow now ends the process with SIGSEGV
//! instead of a message.
// (Under `cargo test` the harness's own `main` is kept: this file has no
// tests, and the test binary must not run the tool.)
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(dead_code))]
#![deny(unsafe_code)]

/// The C entry point (argc and argv are read through `std::env`, which
/// the C library hands them to before `main`).
// The attribute is all the `unsafe_code` lint objects to: this binary has
// no Rust `main` (`#![no_main]`), so the C runtime's `main` symbol must be
// this function, and no other item defines it.
#[cfg(not(test))]
#[allow(unsafe_code)]
#[no_mangle]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // Fds 0-2, SIGPIPE and the panic hook, as the runtime would.
    squashfs_mount::start_program();
    let code = squashfs_mount::run_program();
    // exit, not a return: std's exit flushes stdout.
    std::process::exit(i32::from(code))
}
