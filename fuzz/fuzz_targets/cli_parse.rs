//! Arguments are NUL-separated chunks of the input; parsing must never
//! panic, and whatever it accepts must describe itself consistently.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use squashfs_mount::{parse, Invocation};

fuzz_target!(|data: &[u8]| {
    let args: Vec<OsString> = data.split(|&b| b == 0).map(|a| OsString::from_vec(a.to_vec())).collect();
    if let Ok(Invocation::Run(r)) = parse(&args) {
        assert!(!r.command.is_empty());
        for m in &r.mounts {
            assert!(!m.images.is_empty() && !m.mount_point.is_empty());
            let _ = m.describe();
        }
        for b in &r.binds {
            assert!(!b.source.is_empty() && !b.destination.is_empty());
            let _ = b.describe();
        }
        assert!(r.verbose <= squashfs_mount::MAX_VERBOSITY);
    }
});
