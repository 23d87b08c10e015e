//! Links GCC's unwinder (libgcc_eh.a) into the setuid binary instead of
//! loading libgcc_s.so.1 at every launch. The binary is built with
//! panic = "abort" and never unwinds; the standard library still refers
//! to the unwinder's symbols (backtraces), and rustc asks for them from
//! the shared libgcc_s, which the dynamic loader then maps and
//! initialises at every start: its constructor probes the CPU with
//! `cpuid`, which a virtual machine traps. Measured on the development VM
//! (BENCHMARKS.md, "Launch cost"): 0.10-0.15 ms of every launch. With the
//! symbols defined in the binary the linker (--as-needed) records no
//! dependency on libgcc_s; the C library stays a shared library (its
//! security updates apply), as for any C program built with
//! `gcc -static-libgcc`.
fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    // A static build (-C target-feature=+crt-static) links libgcc_eh.a
    // itself.
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|f| f.split(',').any(|f| f == "crt-static"));
    if linux_gnu && !crt_static {
        println!(
            "cargo:rustc-link-arg-bin=squashfs-mount=-Wl,--whole-archive,-lgcc_eh,--no-whole-archive"
        );
    }
    println!("cargo:rerun-if-changed=build.rs");
}
