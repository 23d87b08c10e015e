//! The SPANK functions the plugin calls (<slurm/spank.h>), behind safe
//! wrappers: the context, job items, the job's environment, option
//! registration and Slurm's log. Declarations are written by hand from
//! spank.h of Slurm 22.05; the numbers are in `abi.rs`, whose test checks
//! them against the installed header. The symbols and callbacks Slurm looks
//! up are in `exports.rs`, above this file.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, CString};

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
pub type SpankOptCb = extern "C" fn(val: c_int, optarg: *const c_char, remote: c_int) -> c_int;

/// `struct spank_option`.
#[repr(C)]
pub struct SpankOption {
    pub name: *const c_char,
    pub arginfo: *const c_char,
    pub usage: *const c_char,
    pub has_arg: c_int,
    pub val: c_int,
    pub cb: Option<SpankOptCb>,
}

/// The plugin's options; Slurm may keep the pointers, so a table lives in
/// a static (in writable memory: the C prototype takes a non-const
/// pointer).
pub struct OptionTable<const N: usize>(UnsafeCell<[SpankOption; N]>);
// SAFETY: the cell is only handed to Slurm (spank_option_register), which
// reads it; Rust never reads or writes it after initialisation.
unsafe impl<const N: usize> Sync for OptionTable<N> {}

impl<const N: usize> OptionTable<N> {
    pub const fn new(options: [SpankOption; N]) -> Self {
        OptionTable(UnsafeCell::new(options))
    }
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
    /// The handle Slurm passed to the running callback.
    pub fn from_callback(handle: SpankT) -> Spank {
        Spank(handle)
    }

    pub fn register_options<const N: usize>(
        &self,
        table: &'static OptionTable<N>,
    ) -> Result<(), c_int> {
        let options = table.0.get() as *mut SpankOption;
        for i in 0..N {
            // SAFETY: `self.0` is the handle of the running callback; the
            // table is a static array of N, valid for the life of the
            // process, so `options.add(i)` for i < N points into it.
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
