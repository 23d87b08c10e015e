//! Random access to an image's bytes.

use std::fs::File;
use std::os::unix::fs::FileExt;

pub use crate::table::Source;
use squashfs_format::FormatError;

/// An image file read with `pread`, safe to share between threads. The
/// length is fixed when it is opened: bytes past it are never read.
pub struct FileSource {
    file: File,
    len: u64,
}

impl FileSource {
    pub fn new(file: File) -> std::io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(FileSource { file, len })
    }
}

impl Source for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.len)
        {
            return Err(FormatError::corrupt(
                "image",
                format!(
                    "a read of {} bytes at byte {offset} lies past its end ({} bytes)",
                    buf.len(),
                    self.len
                ),
            ));
        }
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| FormatError::Io(e.to_string()))
    }
}

impl Source for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError> {
        self.as_slice().read_at(offset, buf)
    }
}
