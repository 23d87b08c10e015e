//! Extended attributes: the xattr id table (checked when the image is
//! opened) and the key/value table an inode's set is read from.

use squashfs_format::superblock::{flags, le32, le64, METADATA_SIZE};
use squashfs_format::{FormatError, Superblock};

use super::stream::{corrupt, read_index, Position, Tables};
use crate::table::Source;

/// Largest xattr value (Linux's XATTR_SIZE_MAX).
pub const XATTR_VALUE_MAX: u32 = 65536;
/// At most this many xattrs per inode, and this many bytes of them.
const XATTR_COUNT_MAX: u32 = 65536;
const XATTR_TOTAL_MAX: usize = 4 << 20;

/// An extended attribute: full name (with its prefix) and value.
pub type Xattr = (Vec<u8>, Vec<u8>);

pub(super) struct XattrTables {
    /// Start of the key/value table.
    kv_start: u64,
    /// Start of the xattr id table header (end of what it indexes).
    id_table_at: u64,
    pub(super) count: u32,
    /// Locations of the metadata blocks of xattr id entries.
    locations: Vec<u64>,
}

impl XattrTables {
    /// The xattr id table's header and index, checked (none when the image
    /// has no xattrs).
    pub(super) fn open(src: &impl Source, sb: &Superblock) -> Result<Option<Self>, FormatError> {
        let end = sb.bytes_used;
        let at = match sb.xattr_table() {
            Some(at) if !sb.has(flags::NO_XATTRS) => at,
            _ => return Ok(None),
        };
        if at.checked_add(16).is_none_or(|e| e > end) {
            return Err(corrupt(
                "xattr id table",
                "its header lies past the end of the image",
            ));
        }
        let mut h = [0u8; 16];
        src.read_at(at, &mut h)?;
        let kv_start = le64(&h, 0);
        let count = le32(&h, 8);
        if kv_start >= at || kv_start < sb.directory_table_start {
            return Err(corrupt(
                "xattr id table",
                format!("the xattr table start {kv_start} is not below its index"),
            ));
        }
        if count == 0 {
            return Err(corrupt("xattr id table", "it lists no xattr sets"));
        }
        let n = (u64::from(count) * 16).div_ceil(METADATA_SIZE as u64);
        let locations = read_index(src, at + 16, n, end, "xattr id table")?;
        for &l in &locations {
            if l < kv_start || l >= at {
                return Err(corrupt(
                    "xattr id table",
                    format!("a block at byte {l} lies outside the xattr tables"),
                ));
            }
        }
        Ok(Some(XattrTables {
            kv_start,
            id_table_at: at,
            count,
            locations,
        }))
    }

    /// Entry `id` of the xattr id table: (reference of the set's first
    /// key, count, size in bytes).
    pub(super) fn entry<S: Source>(
        &self,
        tables: &Tables<S>,
        id: u32,
    ) -> Result<(u64, u32, u32), FormatError> {
        const WHAT: &str = "xattr id table";
        let t = self;
        let byte = u64::from(id) * 16;
        let loc = *t
            .locations
            .get((byte / METADATA_SIZE as u64) as usize)
            .ok_or_else(|| corrupt(WHAT, format!("xattr set {id} does not exist")))?;
        let mut ic = tables.resume(
            Position {
                block: loc,
                pos: (byte % METADATA_SIZE as u64) as usize,
            },
            t.id_table_at,
            WHAT,
        )?;
        Ok((ic.u64()?, ic.u32()?, ic.u32()?))
    }

    /// The xattrs of set `id`, which inode `number` names (names with
    /// their prefix, e.g. `user.mime`).
    pub(super) fn read<S: Source>(
        &self,
        tables: &Tables<S>,
        id: u32,
        number: u32,
    ) -> Result<Vec<Xattr>, FormatError> {
        const WHAT: &str = "xattr table";
        let t = self;
        let (r, count, _size) = self.entry(tables, id)?;
        if count > XATTR_COUNT_MAX {
            return Err(corrupt(WHAT, format!("inode {number} has {count} xattrs")));
        }
        let mut c = tables.cursor(
            t.kv_start,
            r >> 16,
            (r & 0xffff) as usize,
            t.id_table_at,
            WHAT,
        )?;
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut name = [0u8; 256];
        for _ in 0..count {
            let kind = c.u16()?;
            let len = usize::from(c.u16()?);
            if len > 255 {
                return Err(corrupt(WHAT, format!("an xattr name of {len} bytes")));
            }
            c.read(&mut name[..len])?;
            let vsize = c.u32()?;
            let value = if kind & 0x100 != 0 {
                if vsize != 8 {
                    return Err(corrupt(
                        WHAT,
                        format!("an out-of-line xattr reference of {vsize} bytes"),
                    ));
                }
                let vr = c.u64()?;
                let mut vc = tables.cursor(
                    t.kv_start,
                    vr >> 16,
                    (vr & 0xffff) as usize,
                    t.id_table_at,
                    WHAT,
                )?;
                let vsize = vc.u32()?;
                if vsize > XATTR_VALUE_MAX {
                    return Err(corrupt(WHAT, format!("an xattr value of {vsize} bytes")));
                }
                vc.bytes(vsize as usize)?
            } else {
                if vsize > XATTR_VALUE_MAX {
                    return Err(corrupt(WHAT, format!("an xattr value of {vsize} bytes")));
                }
                c.bytes(vsize as usize)?
            };
            let prefix: &[u8] = match kind & 0xff {
                0 => b"user.",
                1 => b"trusted.",
                2 => b"security.",
                _ => continue, // unknown prefixes are skipped, as the kernel does
            };
            total += len + value.len() + prefix.len();
            if total > XATTR_TOTAL_MAX {
                return Err(corrupt(
                    WHAT,
                    format!("inode {number} has more than {XATTR_TOTAL_MAX} bytes of xattrs"),
                ));
            }
            let mut full = prefix.to_vec();
            full.extend_from_slice(&name[..len]);
            out.push((full, value));
        }
        Ok(out)
    }
}
