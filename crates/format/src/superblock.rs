//! The SquashFS 4.0 superblock: the first 96 bytes of an image, and the
//! checks every tool applies before anything else reads the image (the
//! setuid squashfs-mount, before the kernel sees it; sqfs, before it walks
//! the tables). Pure; fuzzed.

use crate::compressor::Compressor;
use crate::error::FormatError;

pub const SUPERBLOCK_SIZE: usize = 96;
pub const MAGIC: u32 = 0x7371_7368; // "hsqs"
const MAGIC_BIG_ENDIAN: u32 = 0x6873_7173; // "sqsh"
/// Uncompressed size of a metadata block.
pub const METADATA_SIZE: usize = 8192;
/// A table start that says "no such table".
pub const NO_TABLE: u64 = u64::MAX;

/// Superblock flags.
pub mod flags {
    pub const UNCOMPRESSED_INODES: u16 = 0x0001;
    pub const UNCOMPRESSED_DATA: u16 = 0x0002;
    pub const UNCOMPRESSED_FRAGMENTS: u16 = 0x0008;
    pub const NO_FRAGMENTS: u16 = 0x0010;
    pub const ALWAYS_FRAGMENTS: u16 = 0x0020;
    pub const DUPLICATES: u16 = 0x0040;
    pub const EXPORTABLE: u16 = 0x0080;
    pub const UNCOMPRESSED_XATTRS: u16 = 0x0100;
    pub const NO_XATTRS: u16 = 0x0200;
    pub const COMPRESSOR_OPTIONS: u16 = 0x0400;
    pub const UNCOMPRESSED_IDS: u16 = 0x0800;
}

pub fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
pub fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub inodes: u32,
    pub mkfs_time: u32,
    pub block_size: u32,
    pub fragments: u32,
    pub compressor: Compressor,
    pub flags: u16,
    pub ids: u16,
    pub root_inode: u64,
    pub bytes_used: u64,
    pub id_table_start: u64,
    pub xattr_id_table_start: u64,
    pub inode_table_start: u64,
    pub directory_table_start: u64,
    pub fragment_table_start: u64,
    pub export_table_start: u64,
}

impl Superblock {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
    pub fn xattr_table(&self) -> Option<u64> {
        (self.xattr_id_table_start != NO_TABLE).then_some(self.xattr_id_table_start)
    }
}

/// Names what a non-SquashFS file looks like, for the error message.
pub fn guess_format(head: &[u8]) -> Option<&'static str> {
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
    } else if head.len() >= 0x43a && head[0x438..0x43a] == [0x53, 0xef] {
        Some("an ext2/3/4 file system")
    } else if head.starts_with(b"\xe2\xe1\xf5\xe0")
        || (head.len() >= 1028 && head[1024..1028] == [0xe2, 0xe1, 0xf5, 0xe0])
    {
        Some("an EROFS image")
    } else {
        None
    }
}

/// Parses and checks the superblock at the start of `head` (the first bytes of
/// a file of `file_size` bytes; pass at least 1080 bytes for the best guess of
/// what a non-SquashFS file is).
pub fn parse_superblock(head: &[u8], file_size: u64) -> Result<Superblock, FormatError> {
    let (compressor, block_size) = check_header(head, file_size)?;
    let sb = Superblock {
        inodes: le32(head, 4),
        mkfs_time: le32(head, 8),
        block_size,
        fragments: le32(head, 16),
        compressor,
        flags: le16(head, 24),
        ids: le16(head, 26),
        root_inode: le64(head, 32),
        bytes_used: le64(head, 40),
        id_table_start: le64(head, 48),
        xattr_id_table_start: le64(head, 56),
        inode_table_start: le64(head, 64),
        directory_table_start: le64(head, 72),
        fragment_table_start: le64(head, 80),
        export_table_start: le64(head, 88),
    };
    check_tables(&sb, file_size)?;
    Ok(sb)
}

/// Whether `head` is a SquashFS 4.0 superblock this reader understands: the
/// magic, its length, version, compressor and block size.
fn check_header(head: &[u8], file_size: u64) -> Result<(Compressor, u32), FormatError> {
    if file_size == 0 || head.is_empty() {
        return Err(FormatError::Empty);
    }
    if head.len() < 4 {
        return Err(FormatError::TooShort(file_size.min(head.len() as u64)));
    }
    let magic = le32(head, 0);
    if magic == MAGIC_BIG_ENDIAN {
        return Err(FormatError::BigEndian);
    }
    if magic != MAGIC {
        return Err(FormatError::BadMagic {
            looks_like: guess_format(head),
        });
    }
    if head.len() < SUPERBLOCK_SIZE || file_size < SUPERBLOCK_SIZE as u64 {
        return Err(FormatError::TooShort(file_size.min(head.len() as u64)));
    }
    let (major, minor) = (le16(head, 28), le16(head, 30));
    if (major, minor) != (4, 0) {
        return Err(FormatError::UnsupportedVersion(major, minor));
    }
    let id = le16(head, 20);
    let compressor = Compressor::from_id(id).ok_or(FormatError::UnknownCompressor(id))?;
    let block_size = le32(head, 12);
    let block_log = le16(head, 22);
    if !(4096..=1 << 20).contains(&block_size)
        || !block_size.is_power_of_two()
        || u32::from(block_log) != block_size.trailing_zeros()
    {
        return Err(FormatError::BadBlockSize(block_size));
    }
    Ok((compressor, block_size))
}

/// Whether the image's length and its tables' starts lie where they must.
fn check_tables(sb: &Superblock, file_size: u64) -> Result<(), FormatError> {
    if sb.bytes_used > file_size {
        return Err(FormatError::Truncated {
            bytes_used: sb.bytes_used,
            file_size,
        });
    }
    if sb.bytes_used < SUPERBLOCK_SIZE as u64 {
        return Err(FormatError::corrupt(
            "superblock",
            format!("it says the image is only {} bytes long", sb.bytes_used),
        ));
    }
    // The tables follow each other in this order; each must lie in the image.
    let end = sb.bytes_used;
    let order = [
        ("inode table start", sb.inode_table_start),
        ("directory table start", sb.directory_table_start),
    ];
    let mut prev = SUPERBLOCK_SIZE as u64;
    for (name, at) in order {
        if at < prev || at >= end {
            return Err(FormatError::corrupt(
                "superblock",
                format!("{name} {at} is outside {prev}..{end}"),
            ));
        }
        prev = at;
    }
    for (name, at) in [
        ("id table start", sb.id_table_start),
        ("fragment table start", sb.fragment_table_start),
        ("export table start", sb.export_table_start),
        ("xattr id table start", sb.xattr_id_table_start),
    ] {
        if at != NO_TABLE && (at < sb.directory_table_start || at >= end) {
            return Err(FormatError::corrupt(
                "superblock",
                format!("{name} {at} is outside the image ({end} bytes)"),
            ));
        }
    }
    if sb.id_table_start == NO_TABLE || sb.ids == 0 {
        return Err(FormatError::corrupt(
            "superblock",
            "the image has no uid/gid table",
        ));
    }
    if sb.inodes == 0 {
        return Err(FormatError::corrupt(
            "superblock",
            "the image has no inodes",
        ));
    }
    Ok(())
}

/// The kernel's squashfs reads its device in blocks of 1 KiB (or of the
/// loop device's logical block size, when larger), and a loop device is as
/// large as its backing file rounded down to whole 512-byte sectors. An
/// image whose last 1 KiB block does not fit (`mksquashfs -nopad` writes no
/// padding) cannot be mounted from a loop device: its superblock reads fail.
/// Returns the smallest file size that would fit when `file_size` does not.
pub fn loop_padding_needed(bytes_used: u64, file_size: u64) -> Option<u64> {
    const SECTOR: u64 = 512;
    const DEVICE_BLOCK: u64 = 1024;
    let device_size = file_size - file_size % SECTOR;
    let needed = bytes_used
        .div_ceil(DEVICE_BLOCK)
        .saturating_mul(DEVICE_BLOCK);
    (needed > device_size).then_some(needed)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal valid superblock with compressor `comp` (an id, so that
    /// unknown ids can be tested) and `bytes_used`.
    pub fn superblock_bytes(comp: u16, bytes_used: u64) -> Vec<u8> {
        let mut b = vec![0u8; SUPERBLOCK_SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&1u32.to_le_bytes());
        b[12..16].copy_from_slice(&131072u32.to_le_bytes());
        b[20..22].copy_from_slice(&comp.to_le_bytes());
        b[22..24].copy_from_slice(&17u16.to_le_bytes());
        b[26..28].copy_from_slice(&1u16.to_le_bytes());
        b[28..30].copy_from_slice(&4u16.to_le_bytes());
        b[40..48].copy_from_slice(&bytes_used.to_le_bytes());
        for (at, v) in [
            (48, 200u64),
            (56, u64::MAX),
            (64, 96),
            (72, 150),
            (80, u64::MAX),
            (88, u64::MAX),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn good() {
        let sb = parse_superblock(&superblock_bytes(6, 4096), 4096).unwrap();
        assert_eq!(sb.compressor, Compressor::Zstd);
        assert_eq!(sb.block_size, 131072);
        assert_eq!(sb.inodes, 1);
        assert_eq!(sb.xattr_table(), None);
    }

    #[test]
    fn superblock_errors() {
        assert_eq!(parse_superblock(&[], 0), Err(FormatError::Empty));
        assert_eq!(parse_superblock(b"hsq", 3), Err(FormatError::TooShort(3)));
        assert_eq!(
            parse_superblock(&superblock_bytes(6, 4096)[..50], 50),
            Err(FormatError::TooShort(50))
        );
        assert!(matches!(
            parse_superblock(b"\x1f\x8b\x08\x00xxxxxxxx", 12),
            Err(FormatError::BadMagic {
                looks_like: Some("a gzip file")
            })
        ));
        assert!(matches!(
            parse_superblock(&[0u8; 96], 96),
            Err(FormatError::BadMagic { looks_like: None })
        ));
        let mut be = superblock_bytes(6, 4096);
        be[0..4].copy_from_slice(b"sqsh");
        assert_eq!(parse_superblock(&be, 4096), Err(FormatError::BigEndian));
        let mut v3 = superblock_bytes(6, 4096);
        v3[28] = 3;
        assert_eq!(
            parse_superblock(&v3, 4096),
            Err(FormatError::UnsupportedVersion(3, 0))
        );
        assert_eq!(
            parse_superblock(&superblock_bytes(9, 4096), 4096),
            Err(FormatError::UnknownCompressor(9))
        );
        let mut bs = superblock_bytes(6, 4096);
        bs[22] = 16;
        assert_eq!(
            parse_superblock(&bs, 4096),
            Err(FormatError::BadBlockSize(131072))
        );
        assert_eq!(
            parse_superblock(&superblock_bytes(6, 10000), 4096),
            Err(FormatError::Truncated {
                bytes_used: 10000,
                file_size: 4096
            })
        );
        let mut t = superblock_bytes(6, 4096);
        t[72..80].copy_from_slice(&5000u64.to_le_bytes());
        assert!(matches!(
            parse_superblock(&t, 4096),
            Err(FormatError::Corrupt { .. })
        ));
    }

    #[test]
    fn loop_padding() {
        // mksquashfs pads to 4 KiB by default: fits.
        assert_eq!(loop_padding_needed(1_272_171, 1_273_856), None);
        // -nopad: measured on Linux 6.18, 1272171 and 1272320 bytes fail
        // to mount from a loop device, 1272832 (1 KiB multiple) mounts.
        assert_eq!(loop_padding_needed(1_272_171, 1_272_171), Some(1_272_832));
        assert_eq!(loop_padding_needed(1_272_171, 1_272_320), Some(1_272_832));
        assert_eq!(loop_padding_needed(1_272_171, 1_272_832), None);
        assert_eq!(loop_padding_needed(4096, 4096), None);
        assert_eq!(loop_padding_needed(1024, 1100), None);
    }

    #[test]
    fn messages_say_what_to_do() {
        let e = FormatError::Truncated {
            bytes_used: 2,
            file_size: 1,
        }
        .to_string();
        assert!(e.contains("truncated") && e.contains("copy it again"));
        assert!(FormatError::BadMagic { looks_like: None }
            .to_string()
            .contains("mksquashfs"));
        assert!(FormatError::TooShort(3)
            .to_string()
            .contains(&format!("({SUPERBLOCK_SIZE} bytes)")));
    }
}
