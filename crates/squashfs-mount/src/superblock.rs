//! The fixed-size (96-byte) SquashFS 4.0 superblock: the only part of an
//! image the privileged tool ever interprets. Pure; fuzzed.

pub const SUPERBLOCK_SIZE: usize = 96;
const MAGIC: u32 = 0x7371_7368; // "hsqs" little-endian
const MAGIC_BIG_ENDIAN: u32 = 0x6873_7173; // "sqsh" read as little-endian

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compressor {
    Gzip,
    Lzma,
    Lzo,
    Xz,
    Lz4,
    Zstd,
}

impl Compressor {
    pub fn from_id(id: u16) -> Option<Self> {
        Some(match id {
            1 => Compressor::Gzip,
            2 => Compressor::Lzma,
            3 => Compressor::Lzo,
            4 => Compressor::Xz,
            5 => Compressor::Lz4,
            6 => Compressor::Zstd,
            _ => return None,
        })
    }
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
    /// The kernel configuration option that enables this decompressor.
    pub fn kernel_config(self) -> Option<&'static str> {
        Some(match self {
            Compressor::Gzip => "CONFIG_SQUASHFS_ZLIB",
            Compressor::Lzo => "CONFIG_SQUASHFS_LZO",
            Compressor::Xz => "CONFIG_SQUASHFS_XZ",
            Compressor::Lz4 => "CONFIG_SQUASHFS_LZ4",
            Compressor::Zstd => "CONFIG_SQUASHFS_ZSTD",
            Compressor::Lzma => return None, // never supported by Linux
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub inodes: u32,
    pub mkfs_time: u32,
    pub block_size: u32,
    pub fragments: u32,
    pub compressor: Compressor,
    pub flags: u16,
    pub bytes_used: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SuperblockError {
    Empty,
    TooShort(usize),
    BadMagic { looks_like: Option<&'static str> },
    BigEndian,
    UnsupportedVersion(u16, u16),
    UnknownCompressor(u16),
    BadBlockSize(u32),
    Truncated { bytes_used: u64, file_size: u64 },
}

impl std::fmt::Display for SuperblockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SuperblockError::Empty => write!(f, "the image file is empty (0 bytes)"),
            SuperblockError::TooShort(n) => write!(
                f,
                "the image is only {n} bytes long, shorter than a SquashFS superblock ({SUPERBLOCK_SIZE} bytes)"
            ),
            SuperblockError::BadMagic { looks_like: Some(kind) } => write!(
                f,
                "not a SquashFS image (bad magic number; it looks like {kind}); build images with mksquashfs or 'sqfs pack'"
            ),
            SuperblockError::BadMagic { looks_like: None } => write!(
                f,
                "not a SquashFS image (bad magic number); build images with mksquashfs or 'sqfs pack'"
            ),
            SuperblockError::BigEndian => write!(
                f,
                "big-endian SquashFS image, which Linux cannot mount; rebuild it with a current mksquashfs"
            ),
            SuperblockError::UnsupportedVersion(major, minor) => write!(
                f,
                "SquashFS version {major}.{minor} is not supported (Linux mounts version 4.0); rebuild it with a current mksquashfs"
            ),
            SuperblockError::UnknownCompressor(id) => write!(
                f,
                "unknown compressor id {id} in the superblock (corrupt image?)"
            ),
            SuperblockError::BadBlockSize(b) => write!(
                f,
                "invalid block size {b} in the superblock (corrupt image?)"
            ),
            SuperblockError::Truncated { bytes_used, file_size } => write!(
                f,
                "the image is truncated: its superblock says {bytes_used} bytes but the file has {file_size}; copy it again"
            ),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn guess_format(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x1f\x8b") {
        Some("a gzip file")
    } else if head.starts_with(b"\xfd7zXZ\x00") {
        Some("an xz file")
    } else if head.starts_with(b"\x28\xb5\x2f\xfd") {
        Some("a zstd file")
    } else if head.starts_with(b"\x7fELF") {
        Some("an ELF executable")
    } else if head.len() > 262 && &head[257..262] == b"ustar" {
        Some("a tar archive")
    } else if head.starts_with(b"PK\x03\x04") {
        Some("a zip archive")
    } else {
        None
    }
}

/// Checks the superblock `head` (the first bytes of the image, at most
/// `SUPERBLOCK_SIZE` are looked at) of a file of `file_size` bytes.
pub fn check(head: &[u8], file_size: u64) -> Result<Superblock, SuperblockError> {
    if file_size == 0 || head.is_empty() {
        return Err(SuperblockError::Empty);
    }
    if head.len() < 4 {
        return Err(SuperblockError::TooShort(head.len()));
    }
    let magic = u32_at(head, 0);
    if magic == MAGIC_BIG_ENDIAN {
        return Err(SuperblockError::BigEndian);
    }
    if magic != MAGIC {
        return Err(SuperblockError::BadMagic { looks_like: guess_format(head) });
    }
    if head.len() < SUPERBLOCK_SIZE {
        return Err(SuperblockError::TooShort(head.len()));
    }
    let (major, minor) = (u16_at(head, 28), u16_at(head, 30));
    if (major, minor) != (4, 0) {
        return Err(SuperblockError::UnsupportedVersion(major, minor));
    }
    let id = u16_at(head, 20);
    let compressor = Compressor::from_id(id).ok_or(SuperblockError::UnknownCompressor(id))?;
    let block_size = u32_at(head, 12);
    let block_log = u16_at(head, 22);
    if !(4096..=1 << 20).contains(&block_size)
        || !block_size.is_power_of_two()
        || u32::from(block_log) != block_size.trailing_zeros()
    {
        return Err(SuperblockError::BadBlockSize(block_size));
    }
    let bytes_used = u64_at(head, 40);
    if bytes_used > file_size || bytes_used < SUPERBLOCK_SIZE as u64 {
        return Err(SuperblockError::Truncated { bytes_used, file_size });
    }
    Ok(Superblock {
        inodes: u32_at(head, 4),
        mkfs_time: u32_at(head, 8),
        block_size,
        fragments: u32_at(head, 16),
        compressor,
        flags: u16_at(head, 24),
        bytes_used,
    })
}

/// Which compressors the running kernel's squashfs can decompress, when the
/// kernel configuration can be read (plain text `/boot/config-<release>`).
/// `None` when it cannot be known.
pub fn kernel_supports(config: &[u8], compressor: Compressor) -> Option<bool> {
    let Some(option) = compressor.kernel_config() else {
        return Some(false);
    };
    let text = String::from_utf8_lossy(config);
    if !text.lines().any(|l| l.starts_with("CONFIG_SQUASHFS=")) {
        return None;
    }
    let enabled = format!("{option}=y");
    Some(text.lines().any(|l| l.trim() == enabled))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample(comp: u16, bytes_used: u64) -> Vec<u8> {
        let mut b = vec![0u8; SUPERBLOCK_SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&3u32.to_le_bytes());
        b[12..16].copy_from_slice(&131072u32.to_le_bytes());
        b[20..22].copy_from_slice(&comp.to_le_bytes());
        b[22..24].copy_from_slice(&17u16.to_le_bytes());
        b[28..30].copy_from_slice(&4u16.to_le_bytes());
        b[40..48].copy_from_slice(&bytes_used.to_le_bytes());
        b
    }

    #[test]
    fn good() {
        let sb = check(&sample(6, 4096), 4096).unwrap();
        assert_eq!(sb.compressor, Compressor::Zstd);
        assert_eq!(sb.block_size, 131072);
        assert_eq!(sb.inodes, 3);
    }

    #[test]
    fn errors() {
        assert_eq!(check(&[], 0), Err(SuperblockError::Empty));
        assert_eq!(check(&sample(6, 4096)[..50], 50), Err(SuperblockError::TooShort(50)));
        assert!(matches!(check(b"\x1f\x8b\x08\x00xxxxxxxx", 12), Err(SuperblockError::BadMagic { looks_like: Some(_) })));
        assert!(matches!(check(&[0u8; 96], 96), Err(SuperblockError::BadMagic { looks_like: None })));
        let mut be = sample(6, 4096);
        be[0..4].copy_from_slice(b"sqsh");
        assert_eq!(check(&be, 4096), Err(SuperblockError::BigEndian));
        let mut v3 = sample(6, 4096);
        v3[28] = 3;
        assert_eq!(check(&v3, 4096), Err(SuperblockError::UnsupportedVersion(3, 0)));
        assert_eq!(check(&sample(9, 4096), 4096), Err(SuperblockError::UnknownCompressor(9)));
        let mut bs = sample(6, 4096);
        bs[22] = 16;
        assert_eq!(check(&bs, 4096), Err(SuperblockError::BadBlockSize(131072)));
        assert_eq!(
            check(&sample(6, 10000), 4096),
            Err(SuperblockError::Truncated { bytes_used: 10000, file_size: 4096 })
        );
    }

    #[test]
    fn messages_say_what_to_do() {
        let e = SuperblockError::Truncated { bytes_used: 2, file_size: 1 }.to_string();
        assert!(e.contains("truncated"));
        assert!(SuperblockError::BadMagic { looks_like: None }.to_string().contains("mksquashfs"));
    }

    #[test]
    fn kernel_config() {
        let cfg = b"CONFIG_SQUASHFS=y\nCONFIG_SQUASHFS_ZSTD=y\n# CONFIG_SQUASHFS_XZ is not set\n";
        assert_eq!(kernel_supports(cfg, Compressor::Zstd), Some(true));
        assert_eq!(kernel_supports(cfg, Compressor::Xz), Some(false));
        assert_eq!(kernel_supports(cfg, Compressor::Lzma), Some(false));
        assert_eq!(kernel_supports(b"nothing", Compressor::Zstd), None);
    }
}
