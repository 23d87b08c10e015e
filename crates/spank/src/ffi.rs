//! The plugin's whole contact with Slurm's C API (<slurm/spank.h>): the
//! symbols Slurm looks up, the callbacks it calls, and safe wrappers around
//! the few SPANK functions used. Declarations are written by hand from
//! spank.h of Slurm 22.05; the numbers are in `abi.rs`, whose test checks
//! them against the installed header.
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

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_uint, CStr, CString};

use crate::guard;
use crate::plugin;

// ---------------------------------------------------------------------------
// Types and constants from <slurm/spank.h> and <slurm/slurm_errno.h>
// ---------------------------------------------------------------------------

/// `struct spank_handle`, opaque.
#[repr(C)]
pub struct SpankHandle {
    _opaque: [u8; 0],
}
/// `spank_t`.
pub type SpankT = *mut SpankHandle;

/// `spank_opt_cb_f`.
type SpankOptCb = extern "C" fn(val: c_int, optarg: *const c_char, remote: c_int) -> c_int;

/// `struct spank_option`.
#[repr(C)]
struct SpankOption {
    name: *const c_char,
    arginfo: *const c_char,
    usage: *const c_char,
    has_arg: c_int,
    val: c_int,
    cb: Option<SpankOptCb>,
}

use crate::abi::{
    ESPANK_ENV_NOEXIST, ESPANK_NOSPACE, ESPANK_SUCCESS, S_CTX_ALLOCATOR, S_CTX_LOCAL, S_CTX_REMOTE,
    S_JOB_GID, S_JOB_STEPID, S_JOB_SUPPLEMENTARY_GIDS, S_JOB_UID, S_TASK_ID,
};

extern "C" {
    fn spank_context() -> c_int;
    fn spank_option_register(spank: SpankT, opt: *mut SpankOption) -> c_int;
    fn spank_get_item(spank: SpankT, item: c_int, ...) -> c_int;
    fn spank_getenv(spank: SpankT, var: *const c_char, buf: *mut c_char, len: c_int) -> c_int;
    fn spank_setenv(
        spank: SpankT,
        var: *const c_char,
        val: *const c_char,
        overwrite: c_int,
    ) -> c_int;
    fn slurm_error(format: *const c_char, ...);
    fn slurm_info(format: *const c_char, ...);
    fn slurm_verbose(format: *const c_char, ...);
}

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
        plugin::init(&Spank(spank), &args)
    })
}

#[no_mangle]
pub extern "C" fn slurm_spank_init_post_opt(
    spank: SpankT,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    boundary("slurm_spank_init_post_opt", || {
        plugin::init_post_opt(&Spank(spank))
    })
}

#[no_mangle]
pub extern "C" fn slurm_spank_task_init_privileged(
    spank: SpankT,
    _argc: c_int,
    _argv: *mut *mut c_char,
) -> c_int {
    boundary("slurm_spank_task_init_privileged", || {
        plugin::task_init_privileged(&Spank(spank))
    })
}

#[no_mangle]
pub extern "C" fn slurm_spank_exit(spank: SpankT, _argc: c_int, _argv: *mut *mut c_char) -> c_int {
    boundary("slurm_spank_exit", || plugin::exit(&Spank(spank)))
}

extern "C" fn option_callback(val: c_int, optarg: *const c_char, remote: c_int) -> c_int {
    boundary("a --squashfs* option", || {
        let which = match val {
            0 => plugin::Option_::Pairs,
            1 => plugin::Option_::Unions,
            _ => plugin::Option_::Writable,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// srun
    Local,
    /// slurmstepd
    Remote,
    /// sbatch, salloc
    Allocator,
    /// slurmd, prolog/epilog, or unknown
    Other,
}

pub fn context() -> Context {
    // SAFETY: spank_context takes no arguments and only reads global state.
    match unsafe { spank_context() } {
        S_CTX_LOCAL => Context::Local,
        S_CTX_REMOTE => Context::Remote,
        S_CTX_ALLOCATOR => Context::Allocator,
        _ => Context::Other,
    }
}

/// The options' descriptions; Slurm may keep the pointers, so they live in
/// a static (in writable memory: the C prototype takes a non-const pointer).
struct OptionCell(UnsafeCell<[SpankOption; 3]>);
// SAFETY: the cell is only handed to Slurm (spank_option_register), which
// reads it; Rust never reads or writes it after initialisation.
unsafe impl Sync for OptionCell {}

static OPTIONS: OptionCell = OptionCell(UnsafeCell::new([
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
        arginfo: c"SIZE".as_ptr(),
        usage: c"Give every --squashfs mount a private writable layer on a tmpfs of SIZE (default 50% of RAM), as squashfs-mount --writable. Default: $SLURM_SQUASHFS_WRITABLE"
            .as_ptr(),
        has_arg: 2,
        val: 2,
        cb: Some(option_callback),
    },
]));

/// Forwards a message to Slurm's log (and, in srun/sbatch or for the
/// task's stderr, to the user).
fn log_with(f: unsafe extern "C" fn(*const c_char, ...), msg: &str) {
    let c = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: the format is the literal "%s" and the one argument is a valid
    // NUL-terminated string, so the variadic call reads exactly one char*.
    unsafe { f(c"%s".as_ptr(), c.as_ptr()) };
}

pub fn error(msg: &str) {
    log_with(slurm_error, msg)
}
pub fn info(msg: &str) {
    log_with(slurm_info, msg)
}
pub fn verbose(msg: &str) {
    log_with(slurm_verbose, msg)
}

/// A SPANK handle, valid for the duration of one callback.
pub struct Spank(SpankT);

impl Spank {
    pub fn register_options(&self) -> Result<(), c_int> {
        let options = OPTIONS.0.get() as *mut SpankOption;
        for i in 0..3 {
            // SAFETY: `self.0` is the handle of the running callback;
            // OPTIONS is a static array of 3, valid for the life of the
            // process, so `options.add(i)` for i < 3 points into it.
            let rc = unsafe { spank_option_register(self.0, options.add(i)) };
            if rc != ESPANK_SUCCESS {
                return Err(rc);
            }
        }
        Ok(())
    }

    fn item_u32(&self, item: c_int) -> Option<u32> {
        let mut v: u32 = 0;
        // SAFETY: for S_JOB_UID (uid_t *), S_JOB_GID (gid_t *) and
        // S_JOB_STEPID (uint32_t *) spank_get_item writes one 32-bit value
        // through the pointer, which points to a local.
        let rc = unsafe { spank_get_item(self.0, item, &mut v as *mut u32) };
        (rc == ESPANK_SUCCESS).then_some(v)
    }

    pub fn uid(&self) -> Option<u32> {
        self.item_u32(S_JOB_UID)
    }
    pub fn gid(&self) -> Option<u32> {
        self.item_u32(S_JOB_GID)
    }
    pub fn step_id(&self) -> Option<u32> {
        self.item_u32(S_JOB_STEPID)
    }

    /// Local task id (task callbacks only).
    pub fn task_id(&self) -> Option<i32> {
        let mut v: c_int = 0;
        // SAFETY: S_TASK_ID takes an int *; it points to a local.
        let rc = unsafe { spank_get_item(self.0, S_TASK_ID, &mut v as *mut c_int) };
        (rc == ESPANK_SUCCESS).then_some(v)
    }

    pub fn supplementary_groups(&self) -> Option<Vec<u32>> {
        let mut list: *const u32 = std::ptr::null();
        let mut n: c_int = 0;
        // SAFETY: S_JOB_SUPPLEMENTARY_GIDS takes (gid_t **, int *): Slurm
        // stores a pointer to its array and the count through two pointers
        // to locals.
        let rc = unsafe {
            spank_get_item(
                self.0,
                S_JOB_SUPPLEMENTARY_GIDS,
                &mut list as *mut *const u32,
                &mut n as *mut c_int,
            )
        };
        if rc != ESPANK_SUCCESS {
            return None;
        }
        if list.is_null() || n <= 0 {
            return Some(Vec::new());
        }
        // SAFETY: Slurm's array holds `n` gid_t (u32) and stays valid during
        // the callback; we copy it out at once.
        Some(unsafe { std::slice::from_raw_parts(list, n as usize) }.to_vec())
    }

    /// A variable of the job's environment.
    pub fn getenv(&self, name: &str) -> Result<Option<Vec<u8>>, c_int> {
        let name = CString::new(name).map_err(|_| -1)?;
        let mut len: usize = 4096;
        loop {
            let mut buf = vec![0u8; len];
            // SAFETY: `buf` has `len` writable bytes and `len` fits in c_int
            // (bounded below); spank_getenv writes at most `len` bytes
            // including the NUL.
            let rc = unsafe {
                spank_getenv(
                    self.0,
                    name.as_ptr(),
                    buf.as_mut_ptr() as *mut c_char,
                    len as c_int,
                )
            };
            match rc {
                ESPANK_SUCCESS => {
                    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                    buf.truncate(end);
                    return Ok(Some(buf));
                }
                ESPANK_ENV_NOEXIST => return Ok(None),
                ESPANK_NOSPACE if len < (1 << 24) => len *= 4,
                other => return Err(other),
            }
        }
    }

    /// Sets a variable in the job's environment (overwriting).
    pub fn setenv(&self, name: &str, value: &[u8]) -> Result<(), c_int> {
        let name = CString::new(name).map_err(|_| -1)?;
        let value = CString::new(value.to_vec()).map_err(|_| -1)?;
        // SAFETY: both are valid NUL-terminated strings; Slurm copies them.
        let rc = unsafe { spank_setenv(self.0, name.as_ptr(), value.as_ptr(), 1) };
        if rc == ESPANK_SUCCESS {
            Ok(())
        } else {
            Err(rc)
        }
    }
}
