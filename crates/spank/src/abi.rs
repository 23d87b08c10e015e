//! Numbers from <slurm/spank.h> and <slurm/slurm_errno.h> (Slurm 22.05; the
//! enums have only grown at the end since). The test below checks them
//! against the installed headers.
use std::ffi::c_int;

// enum spank_item
pub const S_JOB_UID: c_int = 0;
pub const S_JOB_GID: c_int = 1;
pub const S_JOB_STEPID: c_int = 3;
pub const S_TASK_ID: c_int = 11;
pub const S_JOB_SUPPLEMENTARY_GIDS: c_int = 19;

// enum spank_context
pub const S_CTX_LOCAL: c_int = 1;
pub const S_CTX_REMOTE: c_int = 2;
pub const S_CTX_ALLOCATOR: c_int = 3;

// slurm_errno.h
pub const ESPANK_SUCCESS: c_int = 0;
pub const ESPANK_ENV_NOEXIST: c_int = 3004;
pub const ESPANK_NOSPACE: c_int = 3005;

/// Step id of the "extern" step (SLURM_EXTERN_CONT in <slurm/slurm.h>).
pub const SLURM_EXTERN_CONT: u32 = 0xffff_fffc;

#[cfg(test)]
mod tests {
    use super::*;

    /// Position of `name` in the C enum whose body contains it (members
    /// without explicit values only, as in spank.h), or its explicit value.
    fn enum_value(header: &str, name: &str) -> Option<i64> {
        let at = header
            .find(&format!("{name},"))
            .or_else(|| header.find(&format!("{name} ")))?;
        let start = header[..at].rfind('{')? + 1;
        let body = &header[start..];
        let body = &body[..body.find('}')?];
        // Strip comments (they may contain commas), then split members.
        let mut text = String::new();
        let mut rest = body;
        while let Some(c) = rest.find("/*") {
            text.push_str(&rest[..c]);
            rest = rest[c..]
                .find("*/")
                .map(|e| &rest[c + e + 2..])
                .unwrap_or("");
        }
        text.push_str(rest);
        let mut next: i64 = 0;
        for member in text.split(',') {
            let member = member.trim();
            if member.is_empty() {
                continue;
            }
            let (ident, value) = match member.split_once('=') {
                Some((i, v)) => (i.trim(), v.trim().parse::<i64>().ok()?),
                None => (member, next),
            };
            if ident == name {
                return Some(value);
            }
            next = value + 1;
        }
        None
    }

    fn define(header: &str, name: &str) -> Option<u64> {
        header.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            if w.next()? != "#define" || w.next()? != name {
                return None;
            }
            let v = w.next()?.trim_start_matches('(').trim_end_matches(')');
            u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()
        })
    }

    #[test]
    fn matches_the_installed_slurm_headers() {
        let dir = std::env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/slurm/{f}"));
        let (Ok(spank), Ok(errno), Ok(slurm)) =
            (read("spank.h"), read("slurm_errno.h"), read("slurm.h"))
        else {
            eprintln!("SKIPPED: Slurm headers not found in {dir}/slurm (install libslurm-dev); ABI numbers not checked");
            return;
        };
        for (name, ours) in [
            ("S_JOB_UID", S_JOB_UID),
            ("S_JOB_GID", S_JOB_GID),
            ("S_JOB_STEPID", S_JOB_STEPID),
            ("S_TASK_ID", S_TASK_ID),
            ("S_JOB_SUPPLEMENTARY_GIDS", S_JOB_SUPPLEMENTARY_GIDS),
            ("S_CTX_LOCAL", S_CTX_LOCAL),
            ("S_CTX_REMOTE", S_CTX_REMOTE),
            ("S_CTX_ALLOCATOR", S_CTX_ALLOCATOR),
        ] {
            assert_eq!(enum_value(&spank, name), Some(ours as i64), "{name}");
        }
        for (name, ours) in [
            ("ESPANK_ENV_NOEXIST", ESPANK_ENV_NOEXIST),
            ("ESPANK_NOSPACE", ESPANK_NOSPACE),
        ] {
            assert_eq!(enum_value(&errno, name), Some(ours as i64), "{name}");
        }
        assert_eq!(
            define(&slurm, "SLURM_EXTERN_CONT"),
            Some(SLURM_EXTERN_CONT as u64)
        );
        // struct spank_option is name, arginfo, usage, has_arg, val, cb.
        let s = spank
            .find("struct spank_option {")
            .expect("struct spank_option");
        let body: Vec<&str> = spank[s..]
            .lines()
            .skip(1)
            .take(6)
            .map(|l| l.trim())
            .collect();
        for (line, field) in body
            .iter()
            .zip(["name;", "arginfo;", "usage;", "has_arg;", "val;", "cb;"])
        {
            assert!(line.contains(field), "{line} / {field}");
        }
    }
}
