//! The integration tests of the test support's scripts, one test binary
//! (`cargo test -p sqfsmnt-test-support --test it`). A new file
//! `tests/it/<name>.rs` is added with `mod <name>;` below.

mod deps;
mod setuid_check;
