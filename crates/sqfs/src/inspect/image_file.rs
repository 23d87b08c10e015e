//! The image file `sqfs inspect` reads, opened as the caller, through a
//! small read-ahead window; and why it cannot be inspected.

use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::format::{FormatError, Source};
use crate::units;

/// An image opened for reading, with a small read-ahead window so the
/// metadata walk does not issue one system call per block.
pub struct ImageFile {
    file: File,
    len: u64,
    window: std::cell::RefCell<(u64, Vec<u8>)>,
}

const WINDOW: usize = 256 << 10;

/// Why an image cannot be inspected.
#[derive(Debug)]
pub enum InspectError {
    Open(std::io::Error),
    Stat(std::io::Error),
    DeviceSize(std::io::Error),
    /// Neither a regular file nor a block device: what it is.
    NotAnImage(&'static str),
    Image(FormatError),
}

impl std::fmt::Display for InspectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InspectError::Open(e) => write!(f, "cannot open it: {e}"),
            InspectError::Stat(e) => write!(f, "cannot stat it: {}", units::io_error(e)),
            InspectError::DeviceSize(e) => {
                write!(f, "cannot size the block device: {}", units::io_error(e))
            }
            InspectError::NotAnImage(kind) => write!(f, "it is {kind}, not an image file"),
            InspectError::Image(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for InspectError {}

impl ImageFile {
    /// Opens `path` as the caller; refuses anything but a regular file or a
    /// block device (a FIFO must not make us wait, so open non-blocking).
    pub fn open(path: &Path) -> Result<Self, InspectError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(
                rustix::fs::OFlags::NONBLOCK.bits() as i32
                    | rustix::fs::OFlags::NOCTTY.bits() as i32,
            )
            .open(path)
            .map_err(InspectError::Open)?;
        let meta = file.metadata().map_err(InspectError::Stat)?;
        let ft = meta.file_type();
        let len = if ft.is_file() {
            meta.len()
        } else if ft.is_block_device() {
            use std::io::{Seek, SeekFrom};
            let mut f = &file;
            f.seek(SeekFrom::End(0)).map_err(InspectError::DeviceSize)?
        } else {
            let kind = if ft.is_dir() {
                "a directory"
            } else if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_char_device() {
                "a character device"
            } else {
                "not a regular file"
            };
            return Err(InspectError::NotAnImage(kind));
        };
        Ok(ImageFile {
            file,
            len,
            window: std::cell::RefCell::new((0, Vec::new())),
        })
    }
}

impl Source for ImageFile {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                FormatError::Io(format!(
                    "read of {} bytes at {offset} is past the end of the file",
                    buf.len()
                ))
            })?;
        let mut w = self.window.borrow_mut();
        let (start, data) = &mut *w;
        if offset < *start || end > *start + data.len() as u64 {
            if buf.len() > WINDOW {
                return self
                    .file
                    .read_exact_at(buf, offset)
                    .map_err(|e| FormatError::Io(units::io_error(&e)));
            }
            let n = (self.len - offset).min(WINDOW as u64) as usize;
            data.resize(n, 0);
            self.file
                .read_exact_at(data, offset)
                .map_err(|e| FormatError::Io(units::io_error(&e)))?;
            *start = offset;
        }
        let at = (offset - *start) as usize;
        buf.copy_from_slice(&data[at..at + buf.len()]);
        Ok(())
    }
}
