//! Why two images cannot be compared.

use squashfs_format::FormatError;

#[derive(Debug)]
pub enum DiffError {
    /// An image cannot be opened, or its tables read.
    Open(String, crate::stored::StoredError),
    /// An entry of an image cannot be read.
    Read {
        image: String,
        path: String,
        error: FormatError,
    },
}

impl std::fmt::Display for DiffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiffError::Open(image, e) => write!(f, "{image}: {e}"),
            DiffError::Read { image, path, error } => write!(
                f,
                "{image}: {path}: {error}; 'sqfs check {image}' names the bad block"
            ),
        }
    }
}

impl std::error::Error for DiffError {}
