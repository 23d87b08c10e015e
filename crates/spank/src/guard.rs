//! The C boundary's safety net: no panic unwinds into Slurm.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs a callback body and converts its outcome for C: `Ok` is 0, `Err` is
/// -1 (Slurm 22.05 treats only negative values as failure), and a panic is
/// caught, reported through `log` and becomes -1. Catching needs a
/// panic = "unwind" build (the `spank` profile); see `plugin::init` for
/// what an abort build does.
pub fn boundary(callback: &str, log: impl Fn(&str), f: impl FnOnce() -> Result<(), ()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(())) => -1,
        Err(_) => {
            log(&format!(
                "squashfs-mount: internal error in {callback}; please report it"
            ));
            -1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn outcomes_become_c_return_values() {
        let logged = RefCell::new(Vec::new());
        let log = |m: &str| logged.borrow_mut().push(m.to_string());
        assert_eq!(boundary("cb", log, || Ok(())), 0);
        assert_eq!(boundary("cb", log, || Err(())), -1);
        assert!(logged.borrow().is_empty());
        let r = boundary("slurm_spank_init", log, || {
            let v: Vec<u8> = Vec::new();
            if v.is_empty() {
                panic!("boom");
            }
            Ok(())
        });
        assert_eq!(r, -1);
        assert_eq!(
            logged.borrow().as_slice(),
            ["squashfs-mount: internal error in slurm_spank_init; please report it"]
        );
    }
}
