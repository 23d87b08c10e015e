//! sqfs: the unprivileged companion of squashfs-mount. Builds SquashFS
//! images with mksquashfs (`pack`, `pack --split`), reads them (`inspect`,
//! `check`), compares two of them (`diff`) and compares compressors
//! (`bench`). Nothing here needs privileges.
#![forbid(unsafe_code)]

pub mod bench;
pub mod check;
pub mod compat;
pub mod diff;
pub use squashfs_reader::decompress;
pub mod error;
pub mod exclude;
pub mod format;
pub mod inspect;
pub mod kernel;
pub mod layer;
pub mod mountable;
pub mod names;
pub mod order;
pub mod output;
pub use squashfs_reader::lzo;
pub mod pack;
pub mod progress;
pub mod source;
pub mod split;
pub mod stored;
pub mod svg;
pub mod trace;
pub mod tree;
pub mod units;
