//! The symbols Slurm looks up in the plugin (what the SPANK_PLUGIN(name, 1)
//! macro defines), the callbacks it calls, and the option table: the top of
//! the plugin, handing each callback to `plugin.rs`.
//!
//! Every callback goes through `guard::boundary`: a panic never crosses into C
//! (caught and turned into -1 with a logged message). That only works when
//! the plugin is built with panic = "unwind" (the `spank` profile); a build
//! with panic = "abort" refuses to initialise instead of risking an abort of
//! slurmstepd.
//!
//! Return values: Slurm 22.05 tests `< 0` after most callbacks; a positive
//! ESPANK_ERROR (3000) is logged but the step goes on (measured). So the
//! callbacks return 0 or -1.
#![allow(unsafe_code)]
#![allow(non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_uint, CStr};

use crate::guard;
use crate::plugin;
use crate::spank_api::{error, OptionTable, Spank, SpankOption, SpankT};

// ---------------------------------------------------------------------------
// Symbols Slurm looks up (what the SPANK_PLUGIN(name, 1) macro defines)
// ---------------------------------------------------------------------------

/// Also names the option in the environment Slurm uses to pass it on:
/// `_SLURM_SPANK_OPTION_squashfs_mount_squashfs`.
#[no_mangle]
pub static plugin_name: [u8; 15] = *b"squashfs_mount\0";
#[no_mangle]
pub static plugin_type: [u8; 6] = *b"spank\0";
/// SLURM_VERSION_NUMBER of the headers built against (build.rs); Slurm
/// refuses plugins from another release series.
#[no_mangle]
pub static plugin_version: c_uint = parse_version(env!("SQFSMNT_SLURM_VERSION_NUMBER"));
#[no_mangle]
pub static spank_plugin_version: c_uint = 1;

/// Marker the test suite reads from the .so to tell how it was built.
#[used]
#[no_mangle]
pub static squashfs_mount_spank_build: [u8; 36] = if cfg!(panic = "unwind") {
    *b"squashfs-mount-spank panic=unwind \0\0"
} else {
    *b"squashfs-mount-spank panic=abort  \0\0"
};

const fn parse_version(s: &str) -> c_uint {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n: c_uint = 0;
    while i < b.len() {
        n = n.wrapping_mul(10).wrapping_add((b[i] - b'0') as c_uint);
        i += 1;
    }
    n
}

// ---------------------------------------------------------------------------
// The C boundary
// ---------------------------------------------------------------------------

fn boundary(callback: &str, f: impl FnOnce() -> Result<(), ()>) -> c_int {
    guard::boundary(callback, error, f)
}

/// Plugin arguments from plugstack.conf.
///
/// # Safety
/// `argv` must hold `argc` valid NUL-terminated strings (as Slurm passes).
unsafe fn arguments(argc: c_int, argv: *mut *mut c_char) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if argv.is_null() {
        return out;
    }
    for i in 0..argc.max(0) as usize {
        // SAFETY: i < argc and Slurm's argv has argc entries (caller's
        // contract); each non-null entry is a NUL-terminated string that
        // outlives this call. We copy the bytes out.
        let p = unsafe { *argv.add(i) };
        if !p.is_null() {
            // SAFETY: as above.
            out.push(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec());
        }
    }
    out
}

#[no_mangle]
pub extern "C" fn slurm_spank_init(spank: SpankT, argc: c_int, argv: *mut *mut c_char) -> c_int {
    boundary("slurm_spank_init", || {
        // SAFETY: Slurm passes its plugstack.conf argument vector.
        let args = unsafe { arguments(argc, argv) };
        let handle = Spank::from_callback(spank);
        plugin::init(&handle, &args, || handle.register_options(&OPTIONS))
    })
}

#[no_mangle]
pub extern "C" fn slurm_spank_init_post_opt(
    spank: SpankT,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    boundary("slurm_spank_init_post_opt", || {
        plugin::init_post_opt(&Spank::from_callback(spank))
    })
}

#[no_mangle]
pub extern "C" fn slurm_spank_task_init_privileged(
    spank: SpankT,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    boundary("slurm_spank_task_init_privileged", || {
        plugin::task_init_privileged(&Spank::from_callback(spank))
    })
}

#[no_mangle]
pub extern "C" fn slurm_spank_task_init(
    spank: SpankT,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    boundary("slurm_spank_task_init", || {
        plugin::task_init(&Spank::from_callback(spank))
    })
}

#[no_mangle]
pub extern "C" fn slurm_spank_exit(spank: SpankT, _argc: c_int, _argv: *mut *mut c_char) -> c_int {
    boundary("slurm_spank_exit", || {
        plugin::exit(&Spank::from_callback(spank))
    })
}

/// Called on each node of a job once it has ended (Slurm's job epilog, as
/// root): the user's FUSE instances no other job uses go.
#[no_mangle]
pub extern "C" fn slurm_spank_job_epilog(
    spank: SpankT,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    boundary("slurm_spank_job_epilog", || {
        plugin::job_epilog(&Spank::from_callback(spank))
    })
}

extern "C" fn option_callback(val: c_int, optarg: *const c_char, remote: c_int) -> c_int {
    boundary("a --squashfs* option", || {
        let which = match val {
            0 => plugin::JobOption::Pairs,
            1 => plugin::JobOption::Unions,
            3 => plugin::JobOption::Bind,
            4 => plugin::JobOption::MutableRoot,
            _ => plugin::JobOption::Writable,
        };
        let value = if optarg.is_null() {
            Vec::new()
        } else {
            // SAFETY: Slurm passes the option's argument as a NUL-terminated
            // string valid for the call; we copy it.
            unsafe { CStr::from_ptr(optarg) }.to_bytes().to_vec()
        };
        plugin::option_given(which, value, remote != 0)
    })
}

// ---------------------------------------------------------------------------
// Safe wrappers
// ---------------------------------------------------------------------------

/// The options' descriptions (registered by `plugin::init`).
static OPTIONS: OptionTable<5> = OptionTable::new([
    SpankOption {
        name: c"squashfs".as_ptr(),
        arginfo: c"image:mountpoint[,image:mountpoint...]".as_ptr(),
        usage: c"Mount SquashFS images (read-only) for every task of the job step; images are opened with your rights. Default: $SLURM_SQUASHFS"
            .as_ptr(),
        has_arg: 1,
        val: 0,
        cb: Some(option_callback),
    },
    SpankOption {
        name: c"squashfs-union".as_ptr(),
        arginfo: c"image,image[,...]:mountpoint[;...]".as_ptr(),
        usage: c"Stack SquashFS images at one mount point (the first named on top), as squashfs-mount --union. Default: $SLURM_SQUASHFS_UNION"
            .as_ptr(),
        has_arg: 1,
        val: 1,
        cb: Some(option_callback),
    },
    SpankOption {
        name: c"squashfs-writable".as_ptr(),
        arginfo: c"SIZE|DIR".as_ptr(),
        usage: c"Give every --squashfs mount a private writable layer on a tmpfs of SIZE (default 50% of RAM), or one kept in your directory DIR (a value with a '/', on a node-local disk), as squashfs-mount --writable. Default: $SLURM_SQUASHFS_WRITABLE"
            .as_ptr(),
        has_arg: 2,
        val: 2,
        cb: Some(option_callback),
    },
    SpankOption {
        name: c"squashfs-bind".as_ptr(),
        arginfo: c"source:destination[,source:destination...]".as_ptr(),
        usage: c"Show your directory source also at destination (an allowed mount point) for every task, as squashfs-mount --bind-mount. Default: $SLURM_SQUASHFS_BIND"
            .as_ptr(),
        has_arg: 1,
        val: 3,
        cb: Some(option_callback),
    },
    SpankOption {
        name: c"squashfs-mutable-root".as_ptr(),
        arginfo: std::ptr::null(),
        usage: c"Create missing mount points in the job's view only, as squashfs-mount -r (if the cluster allows it). Default: $SLURM_SQUASHFS_MUTABLE_ROOT"
            .as_ptr(),
        has_arg: 0,
        val: 4,
        cb: Some(option_callback),
    },
]);
