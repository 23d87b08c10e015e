//! The SquashFS format as `sqfs` reads it: the shared reader's tables
//! (`squashfs_reader::table`) and the superblock crate, plus serde glue.

pub use squashfs_reader::table::*;

/// Serialises a compressor as its mksquashfs name (`"zstd"`).
pub fn serialize_compressor<S: serde::Serializer>(c: &Compressor, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.name())
}
