//! Decompression of one block (a metadata block of at most 8 KiB here) with
//! the image's compressor. Output never exceeds the buffer given; data that
//! would expand past it is an error, as in the kernel.

use squashfs_format::Compressor;

/// Decompresses `input` into `out`; returns the number of bytes written.
pub fn decompress(comp: Compressor, input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    if input.is_empty() {
        return Err("no compressed data".into());
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
        Compressor::Lz4 => lz4_flex::block::decompress_into(input, out).map_err(|e| e.to_string()),
        Compressor::Zstd => zstd_block(input, out),
        Compressor::Lzo => crate::lzo::decompress(input, out).map_err(|e| e.to_string()),
    }
}

/// Memory the xz decoder may use. SquashFS dictionaries are at most the
/// block size (1 MiB); a stream asking for more is refused.
const MEMLIMIT: u64 = 64 << 20;

fn zlib(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    loop {
        let (i, o) = (d.total_in() as usize, d.total_out() as usize);
        let status = d
            .decompress(&input[i..], &mut out[o..], FlushDecompress::Finish)
            .map_err(|e| format!("zlib: {e}"))?;
        if status == Status::StreamEnd {
            return Ok(d.total_out() as usize);
        }
        if d.total_in() as usize == i && d.total_out() as usize == o {
            return Err(if o == out.len() {
                format!("zlib: data expands past {} bytes", out.len())
            } else {
                "zlib: stream is truncated".to_string()
            });
        }
    }
}

fn lzma_family(
    stream: Result<liblzma::stream::Stream, liblzma::stream::Error>,
    input: &[u8],
    out: &mut [u8],
) -> Result<usize, String> {
    use liblzma::stream::{Action, Status};
    let mut s = stream.map_err(|e| format!("xz: {e}"))?;
    loop {
        let (i, o) = (s.total_in() as usize, s.total_out() as usize);
        let status = s
            .process(&input[i..], &mut out[o..], Action::Finish)
            .map_err(|e| format!("xz: {e}"))?;
        if status == Status::StreamEnd {
            return Ok(s.total_out() as usize);
        }
        if s.total_in() as usize == i && s.total_out() as usize == o {
            return Err(if o == out.len() {
                format!("xz: data expands past {} bytes", out.len())
            } else {
                "xz: stream is truncated".to_string()
            });
        }
    }
}

fn zstd_block(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        let d = c.as_mut().expect("initialised above");
        d.decompress_to_buffer(input, out)
            .map_err(|e| format!("zstd: {e}"))
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
