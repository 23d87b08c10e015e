//! Decompression of one block (a metadata block of at most 8 KiB here) with
//! the image's compressor. Output never exceeds the buffer given; data that
//! would expand past it is an error, as in the kernel.

use std::fmt;

use squashfs_format::Compressor;

use crate::lzo::LzoError;

/// Why a block does not decompress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecompressError {
    /// The block holds no bytes.
    Empty,
    /// The data would expand past the `limit` bytes of the output.
    ExpandsPast {
        codec: &'static str,
        limit: usize,
    },
    /// The stream ends before its end marker.
    Truncated {
        codec: &'static str,
    },
    /// The codec refused the data, saying `detail`.
    Refused {
        codec: &'static str,
        detail: String,
    },
    /// lz4 refused the data (its message names the problem).
    Lz4(String),
    Lzo(LzoError),
}

impl fmt::Display for DecompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecompressError::Empty => write!(f, "no compressed data"),
            DecompressError::ExpandsPast { codec, limit } => {
                write!(f, "{codec}: data expands past {limit} bytes")
            }
            DecompressError::Truncated { codec } => write!(f, "{codec}: stream is truncated"),
            DecompressError::Refused { codec, detail } => write!(f, "{codec}: {detail}"),
            DecompressError::Lz4(detail) => write!(f, "{detail}"),
            DecompressError::Lzo(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DecompressError {}

fn refused(codec: &'static str, e: impl fmt::Display) -> DecompressError {
    DecompressError::Refused {
        codec,
        detail: e.to_string(),
    }
}

/// Decompresses `input` into `out`; returns the number of bytes written.
pub fn decompress(
    comp: Compressor,
    input: &[u8],
    out: &mut [u8],
) -> Result<usize, DecompressError> {
    if input.is_empty() {
        return Err(DecompressError::Empty);
    }
    match comp {
        Compressor::Gzip => zlib(input, out),
        Compressor::Xz => lzma_family(
            liblzma::stream::Stream::new_stream_decoder(MEMLIMIT, 0),
            input,
            out,
        ),
        Compressor::Lzma => lzma_family(
            liblzma::stream::Stream::new_lzma_decoder(MEMLIMIT),
            input,
            out,
        ),
        Compressor::Lz4 => lz4_flex::block::decompress_into(input, out)
            .map_err(|e| DecompressError::Lz4(e.to_string())),
        Compressor::Zstd => zstd_block(input, out),
        Compressor::Lzo => crate::lzo::decompress(input, out).map_err(DecompressError::Lzo),
    }
}

/// Memory the xz decoder may use. SquashFS dictionaries are at most the
/// block size (1 MiB); a stream asking for more is refused.
const MEMLIMIT: u64 = 64 << 20;

fn zlib(input: &[u8], out: &mut [u8]) -> Result<usize, DecompressError> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    loop {
        let (i, o) = (d.total_in() as usize, d.total_out() as usize);
        let status = d
            .decompress(&input[i..], &mut out[o..], FlushDecompress::Finish)
            .map_err(|e| refused("zlib", e))?;
        if status == Status::StreamEnd {
            return Ok(d.total_out() as usize);
        }
        if d.total_in() as usize == i && d.total_out() as usize == o {
            return Err(stalled("zlib", o, out.len()));
        }
    }
}

fn lzma_family(
    stream: Result<liblzma::stream::Stream, liblzma::stream::Error>,
    input: &[u8],
    out: &mut [u8],
) -> Result<usize, DecompressError> {
    use liblzma::stream::{Action, Status};
    let mut s = stream.map_err(|e| refused("xz", e))?;
    loop {
        let (i, o) = (s.total_in() as usize, s.total_out() as usize);
        let status = s
            .process(&input[i..], &mut out[o..], Action::Finish)
            .map_err(|e| refused("xz", e))?;
        if status == Status::StreamEnd {
            return Ok(s.total_out() as usize);
        }
        if s.total_in() as usize == i && s.total_out() as usize == o {
            return Err(stalled("xz", o, out.len()));
        }
    }
}

/// A stream that makes no progress: its output is full (`written` of
/// `limit` bytes), or its input is used up.
fn stalled(codec: &'static str, written: usize, limit: usize) -> DecompressError {
    if written == limit {
        DecompressError::ExpandsPast { codec, limit }
    } else {
        DecompressError::Truncated { codec }
    }
}

fn zstd_block(input: &[u8], out: &mut [u8]) -> Result<usize, DecompressError> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = Some(zstd::bulk::Decompressor::new().map_err(|e| refused("zstd", e))?);
        }
        let d = c.as_mut().expect("initialised above");
        d.decompress_to_buffer(input, out)
            .map_err(|e| refused("zstd", e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn round_trips_and_limits() {
        let data: Vec<u8> = (0..6000u32)
            .map(|i| (i % 251) as u8 ^ (i / 97) as u8)
            .collect();
        let gz = {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(&data).unwrap();
            e.finish().unwrap()
        };
        let xz = {
            let mut out = Vec::new();
            let mut e = liblzma::write::XzEncoder::new(&mut out, 6);
            e.write_all(&data).unwrap();
            e.finish().unwrap();
            out
        };
        let lz4 = lz4_flex::block::compress(&data);
        let zs = zstd::bulk::compress(&data, 19).unwrap();
        for (comp, packed) in [
            (Compressor::Gzip, &gz),
            (Compressor::Xz, &xz),
            (Compressor::Lz4, &lz4),
            (Compressor::Zstd, &zs),
        ] {
            let mut out = vec![0u8; 8192];
            let n = decompress(comp, packed, &mut out).unwrap();
            assert_eq!(&out[..n], &data[..], "{comp}");
            // Too small an output buffer is an error, never a panic.
            let mut small = vec![0u8; 100];
            assert!(decompress(comp, packed, &mut small).is_err(), "{comp}");
            // Truncated and garbage inputs are errors.
            assert!(
                decompress(comp, &packed[..packed.len() / 2], &mut out).is_err(),
                "{comp}"
            );
            assert!(decompress(comp, &[0x55; 40], &mut out).is_err(), "{comp}");
            assert!(decompress(comp, &[], &mut out).is_err(), "{comp}");
        }
    }
}
