//! A bounds-checked SquashFS 4.0 reader, safe on hostile images.
//!
//! - [`table`]: metadata blocks and the tables `sqfs inspect` reads
//!   (compressor options, id table, xattr id table, inode census).
//! - [`archive`]: the whole file system as the kernel driver reads it: every
//!   inode type, directories (with the directory index), file data blocks
//!   (compressed, uncompressed, sparse), fragments, xattrs; with bounded
//!   caches, usable from several threads.
//! - [`decompress`], [`lzo`]: one block through the image's compressor.
//! - [`readahead`]: a source whose metadata region is read ahead in large
//!   sequential reads and held, within a budget.
//! - [`source`]: an image file as a source of bytes; [`cache`]: the
//!   bounded, thread-safe cache the archive keeps what it read in.
//!
//! Every offset, length and count read from an image is checked before use;
//! no allocation is sized from an untrusted value without a bound; every loop
//! is bounded by bytes present; nothing recurses. Fuzzed (fuzz/).
#![forbid(unsafe_code)]

pub mod archive;
pub mod cache;
pub mod decompress;
pub mod lzo;
pub mod readahead;
pub mod source;
pub mod table;

pub use archive::{Archive, DirEntry, FileLayout, Inode, InodeData, InodeRef, Kind, Listing};
pub use readahead::ReadAhead;
pub use source::FileSource;
pub use squashfs_format::{Compressor, FormatError, Superblock};
