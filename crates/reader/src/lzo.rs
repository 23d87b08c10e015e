//! LZO1X decompression (the format liblzo2's lzo1x_* compressors write and
//! the kernel's lzo1x_decompress_safe reads), written from the format's
//! public description in safe Rust. No crate on the registry offered a
//! permissively licensed, bounds-checked decoder; this one checks every read
//! of the input, every back-reference and every write to the output.
//!
//! Instruction summary (state = literals copied by the previous instruction):
//! - first byte 18..=255: copy `byte - 17` literals (state 1..3, or 4 if >= 4)
//! - 0..=15 in state 0: long literal run of 3 + length (length 0 = extended)
//! - 0..=15 in state 1..=3: 2-byte match, distance (H << 2) + D + 1
//! - 0..=15 in state 4: 3-byte match, distance (H << 2) + D + 2049
//! - 16..=31 (M4): match of 2 + length at distance 16384 + (H << 14) + D;
//!   distance exactly 16384 ends the stream
//! - 32..=63 (M3): match of 2 + length at distance D + 1 (14-bit D)
//! - 64..=255 (M2): match of 3..=8 bytes at distance (H << 3) + D + 1
//!
//! Every match is followed by 0..=3 literals given in its low two bits.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LzoError {
    InputOverrun,
    OutputOverrun,
    LookBehind { distance: usize, available: usize },
    TrailingInput(usize),
    NoEndMarker,
}

impl fmt::Display for LzoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LzoError::InputOverrun => write!(f, "lzo: compressed data ends early"),
            LzoError::OutputOverrun => write!(f, "lzo: data expands past the block size"),
            LzoError::LookBehind {
                distance,
                available,
            } => {
                write!(
                    f,
                    "lzo: back-reference {distance} bytes behind, only {available} decoded"
                )
            }
            LzoError::TrailingInput(n) => write!(f, "lzo: {n} bytes after the end marker"),
            LzoError::NoEndMarker => write!(f, "lzo: no end marker"),
        }
    }
}

struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Result<u8, LzoError> {
        let b = *self.data.get(self.pos).ok_or(LzoError::InputOverrun)?;
        self.pos += 1;
        Ok(b)
    }
    fn le16(&mut self) -> Result<usize, LzoError> {
        let lo = self.byte()?;
        let hi = self.byte()?;
        Ok(usize::from(u16::from_le_bytes([lo, hi])))
    }
    fn take(&mut self, n: usize) -> Result<&[u8], LzoError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(LzoError::InputOverrun)?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// An extended length: zero bytes add 255 each, then a non-zero byte.
    /// `max` bounds the result (the output left), so a run of zero bytes
    /// can never overflow or loop for long.
    fn extended(&mut self, base: usize, max: usize) -> Result<usize, LzoError> {
        let mut n = base;
        loop {
            let b = self.byte()?;
            if b != 0 {
                n += usize::from(b);
                return Ok(n);
            }
            n += 255;
            if n > max {
                return Err(LzoError::OutputOverrun);
            }
        }
    }
}

struct Output<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Output<'_> {
    fn literals(&mut self, src: &[u8]) -> Result<(), LzoError> {
        let end = self
            .len
            .checked_add(src.len())
            .filter(|&e| e <= self.buf.len())
            .ok_or(LzoError::OutputOverrun)?;
        self.buf[self.len..end].copy_from_slice(src);
        self.len = end;
        Ok(())
    }
    /// Copies `n` bytes from `distance` bytes back; overlapping copies
    /// repeat the pattern, byte by byte, as LZ77 requires.
    fn back_copy(&mut self, distance: usize, n: usize) -> Result<(), LzoError> {
        if distance == 0 || distance > self.len {
            return Err(LzoError::LookBehind {
                distance,
                available: self.len,
            });
        }
        if n > self.buf.len() - self.len {
            return Err(LzoError::OutputOverrun);
        }
        let from = self.len - distance;
        for i in 0..n {
            self.buf[self.len + i] = self.buf[from + i];
        }
        self.len += n;
        Ok(())
    }
    fn room(&self) -> usize {
        self.buf.len() - self.len
    }
}

/// Decompresses an LZO1X stream into `out`; returns the decompressed length.
pub fn decompress(input: &[u8], out: &mut [u8]) -> Result<usize, LzoError> {
    let mut ip = Input {
        data: input,
        pos: 0,
    };
    let mut op = Output { buf: out, len: 0 };
    let mut state = leading_literals(&mut ip, &mut op)?;
    loop {
        let t = usize::from(ip.byte()?);
        let (distance, length, next);
        if t < 16 {
            match state {
                0 => {
                    let n = if t == 0 {
                        ip.extended(15, op.room())? + 3
                    } else {
                        t + 3
                    };
                    op.literals(ip.take(n)?)?;
                    state = 4;
                    continue;
                }
                1..=3 => {
                    distance = (t >> 2) + (usize::from(ip.byte()?) << 2) + 1;
                    length = 2;
                }
                _ => {
                    distance = (t >> 2) + (usize::from(ip.byte()?) << 2) + 2049;
                    length = 3;
                }
            }
            next = t & 3;
        } else if t < 32 {
            length = 2 + if t & 7 == 0 {
                ip.extended(7, op.room())?
            } else {
                t & 7
            };
            let d = ip.le16()?;
            next = d & 3;
            let far = ((t & 8) << 11) + (d >> 2);
            if far == 0 {
                // End of stream marker.
                if ip.pos != input.len() {
                    return Err(LzoError::TrailingInput(input.len() - ip.pos));
                }
                return Ok(op.len);
            }
            distance = far + 16384;
        } else if t < 64 {
            length = 2 + if t & 31 == 0 {
                ip.extended(31, op.room())?
            } else {
                t & 31
            };
            let d = ip.le16()?;
            next = d & 3;
            distance = (d >> 2) + 1;
        } else {
            distance = ((t >> 2) & 7) + (usize::from(ip.byte()?) << 3) + 1;
            length = (t >> 5) + 1;
            next = t & 3;
        }
        op.back_copy(distance, length)?;
        op.literals(ip.take(next)?)?;
        state = next;
        if ip.pos == input.len() {
            return Err(LzoError::NoEndMarker);
        }
    }
}

/// A first byte of 18..=255 copies `byte - 17` literals; returns the state
/// they leave (0 when the stream does not start so).
fn leading_literals(ip: &mut Input<'_>, op: &mut Output<'_>) -> Result<usize, LzoError> {
    match ip.data.first() {
        Some(&first) if first > 17 => {
            ip.pos = 1;
            let t = usize::from(first - 17);
            op.literals(ip.take(t)?)?;
            Ok(if t < 4 { t } else { 4 })
        }
        _ => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_only_stream() {
        // 22 - 17 = 5 literals, then the end marker (M4 with distance 16384).
        let s = [22u8, b'h', b'e', b'l', b'l', b'o', 0x11, 0, 0];
        let mut out = [0u8; 16];
        assert_eq!(decompress(&s, &mut out), Ok(5));
        assert_eq!(&out[..5], b"hello");
    }

    #[test]
    fn overlapping_match() {
        // 4 literals "abcd", then M2: t = 0b010_000_00 -> length 3, distance
        // ((t>>2)&7) + (h<<3) + 1 = 4 with h = 0 and D = 3 -> t = 0x4c.
        let s = [21u8, b'a', b'b', b'c', b'd', 0x4c, 0x00, 0x11, 0, 0];
        // 21 -> 4 literals? No: 21 - 17 = 4 literals, state 4.
        let mut out = [0u8; 16];
        assert_eq!(decompress(&s, &mut out), Ok(7));
        assert_eq!(&out[..7], b"abcdabc");
    }

    #[test]
    fn malformed_streams_fail_cleanly() {
        let mut out = [0u8; 32];
        assert_eq!(decompress(&[], &mut out), Err(LzoError::InputOverrun));
        // back-reference before the start
        assert!(matches!(
            decompress(&[21, 1, 2, 3, 4, 0xfc, 0xff, 0x11, 0, 0], &mut out),
            Err(LzoError::LookBehind { .. })
        ));
        // too much output
        let mut lit = vec![255u8 - 17 + 17];
        lit.extend(std::iter::repeat_n(7u8, 238));
        lit.extend([0x11, 0, 0]);
        assert_eq!(decompress(&lit, &mut out), Err(LzoError::OutputOverrun));
        // trailing garbage after the end marker
        assert_eq!(
            decompress(&[18, b'x', 0x11, 0, 0, 9], &mut out),
            Err(LzoError::TrailingInput(1))
        );
        // a long run of zero length bytes stops at the output bound
        let mut zeros = vec![0u8, 0];
        zeros.extend(std::iter::repeat_n(0u8, 10_000));
        assert!(decompress(&zeros, &mut out).is_err());
        // every short random stream fails or succeeds without panicking
        let mut x: u32 = 12345;
        for _ in 0..20_000 {
            let len = (x % 40) as usize;
            let mut s = Vec::with_capacity(len);
            for _ in 0..len {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                s.push((x >> 16) as u8);
            }
            let _ = decompress(&s, &mut out);
        }
    }
}
