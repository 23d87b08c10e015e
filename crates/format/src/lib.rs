//! What squashfs-mount (setuid) and sqfs (unprivileged) both need to know
//! about SquashFS images, in one place: the superblock and its checks
//! ([`superblock`]), the compressor table ([`Compressor`]), whether the
//! running kernel can mount an image ([`kernel`]), the one size grammar
//! both tools accept ([`size`]), the time stamps both print ([`time`]), an
//! image's identity for a kept writable layer ([`identity`]) and the stamp
//! that names them ([`stamp`]), and why an image cannot be read
//! ([`error`]).
//!
//! Pure code without dependencies (the setuid binary links it): every
//! function here works on bytes it is given, checked before use; the only
//! file it ever reads is the kernel's configuration
//! ([`kernel::KernelConfig::running`]).
#![forbid(unsafe_code)]

pub mod compressor;
pub mod error;
pub mod identity;
pub mod kernel;
pub mod size;
pub mod stamp;
pub mod superblock;
pub mod time;

pub use compressor::Compressor;
pub use error::FormatError;
pub use superblock::{parse_superblock, Superblock, SUPERBLOCK_SIZE};
