//! The compressors a SquashFS 4.0 superblock can name.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compressor {
    Gzip,
    Lzma,
    Lzo,
    Xz,
    Lz4,
    Zstd,
}

impl Compressor {
    pub const ALL: [Compressor; 6] = [
        Compressor::Gzip,
        Compressor::Lzma,
        Compressor::Lzo,
        Compressor::Xz,
        Compressor::Lz4,
        Compressor::Zstd,
    ];

    /// The id stored in the superblock.
    pub fn id(self) -> u16 {
        match self {
            Compressor::Gzip => 1,
            Compressor::Lzma => 2,
            Compressor::Lzo => 3,
            Compressor::Xz => 4,
            Compressor::Lz4 => 5,
            Compressor::Zstd => 6,
        }
    }

    pub fn from_id(id: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.id() == id)
    }

    /// mksquashfs' name (`-comp NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Gzip => "gzip",
            Compressor::Lzma => "lzma",
            Compressor::Lzo => "lzo",
            Compressor::Xz => "xz",
            Compressor::Lz4 => "lz4",
            Compressor::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The kernel configuration option that enables this decompressor in the
    /// squashfs driver; `None` for lzma, which Linux never supported.
    pub fn kernel_option(self) -> Option<&'static str> {
        Some(match self {
            Compressor::Gzip => "CONFIG_SQUASHFS_ZLIB",
            Compressor::Lzo => "CONFIG_SQUASHFS_LZO",
            Compressor::Xz => "CONFIG_SQUASHFS_XZ",
            Compressor::Lz4 => "CONFIG_SQUASHFS_LZ4",
            Compressor::Zstd => "CONFIG_SQUASHFS_ZSTD",
            Compressor::Lzma => return None,
        })
    }
}

impl fmt::Display for Compressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for c in Compressor::ALL {
            assert_eq!(Compressor::from_id(c.id()), Some(c));
            assert_eq!(Compressor::from_name(c.name()), Some(c));
        }
        assert_eq!(Compressor::from_id(0), None);
        assert_eq!(Compressor::from_id(7), None);
        assert_eq!(Compressor::from_name("zlib"), None);
        assert_eq!(Compressor::Zstd.id(), 6);
    }
}
