//! Bounds-checked byte reading and writing.
//!
//! Every parser in Spate reads through [`Reader`], whose accessors return
//! [`WireError::Truncated`] instead of panicking, so no packet, however hostile, can index out of
//! bounds. Integers are big-endian (network order). Variable-length integers use the encoding of
//! RFC 9000 §16 (the two high bits of the first byte give the length: 1, 2, 4 or 8 bytes; values
//! up to 2^62 − 1). We use that encoding rather than inventing one because independent
//! implementers already have it.

use crate::wire::WireError;

/// Largest value a variable-length integer can hold (2^62 − 1).
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// Number of bytes `v` takes as a variable-length integer.
pub const fn varint_len(v: u64) -> usize {
    if v < 1 << 6 {
        1
    } else if v < 1 << 14 {
        2
    } else if v < 1 << 30 {
        4
    } else {
        8
    }
}

/// A cursor over received bytes; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Read `buf` from the start.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::Truncated);
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Bytes `start..end` of the underlying buffer (already read; clamped to the buffer).
    pub fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        let end = end.min(self.buf.len());
        &self.buf[start.min(end)..end]
    }

    /// Everything not yet read.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// Fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let b = self.bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    /// Big-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Big-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Big-endian 48-bit unsigned integer.
    pub fn u48(&mut self) -> Result<u64, WireError> {
        let b: [u8; 6] = self.array()?;
        Ok(b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }

    /// Big-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// RFC 9000 variable-length integer.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let first = self.u8()?;
        let len = 1usize << (first >> 6);
        let mut v = u64::from(first & 0x3f);
        for _ in 1..len {
            v = (v << 8) | u64::from(self.u8()?);
        }
        Ok(v)
    }

    /// A varint that must fit in `u32`.
    pub fn varint_u32(&mut self) -> Result<u32, WireError> {
        u32::try_from(self.varint()?).map_err(|_| WireError::Invalid("value exceeds 32 bits"))
    }
}

/// A cursor over a caller-supplied output buffer; every write is bounds-checked.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// Write into `buf` from the start.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    /// Bytes written.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// True if nothing was written.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Room left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Append bytes.
    pub fn put(&mut self, bytes: &[u8]) -> Result<(), WireError> {
        if self.remaining() < bytes.len() {
            return Err(WireError::BufferTooSmall);
        }
        self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
        Ok(())
    }

    /// Reserve `n` bytes and return them for the caller to fill.
    pub fn reserve(&mut self, n: usize) -> Result<&mut [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::BufferTooSmall);
        }
        let start = self.pos;
        self.pos += n;
        Ok(&mut self.buf[start..start + n])
    }

    /// Overwrite two already-written bytes at `at` (big-endian); ignored if out of range.
    pub fn patch_u16(&mut self, at: usize, v: u16) {
        if at + 2 <= self.pos {
            self.buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Append `n` zero bytes.
    pub fn zeros(&mut self, n: usize) -> Result<(), WireError> {
        self.reserve(n)?.fill(0);
        Ok(())
    }

    /// One byte.
    pub fn u8(&mut self, v: u8) -> Result<(), WireError> {
        self.put(&[v])
    }

    /// Big-endian u16.
    pub fn u16(&mut self, v: u16) -> Result<(), WireError> {
        self.put(&v.to_be_bytes())
    }

    /// Big-endian u32.
    pub fn u32(&mut self, v: u32) -> Result<(), WireError> {
        self.put(&v.to_be_bytes())
    }

    /// Big-endian 48-bit integer; `v` must be below 2^48.
    pub fn u48(&mut self, v: u64) -> Result<(), WireError> {
        if v >= 1 << 48 {
            return Err(WireError::Invalid("value exceeds 48 bits"));
        }
        self.put(&v.to_be_bytes()[2..])
    }

    /// Big-endian u64.
    pub fn u64(&mut self, v: u64) -> Result<(), WireError> {
        self.put(&v.to_be_bytes())
    }

    /// RFC 9000 variable-length integer (shortest form).
    pub fn varint(&mut self, v: u64) -> Result<(), WireError> {
        if v > VARINT_MAX {
            return Err(WireError::Invalid("value exceeds 2^62-1"));
        }
        match varint_len(v) {
            1 => self.u8(v as u8),
            2 => self.u16(v as u16 | 0x4000),
            4 => self.u32(v as u32 | 0x8000_0000),
            _ => self.u64(v | 0xc000_0000_0000_0000),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_matches_rfc9000_examples() {
        // RFC 9000 Appendix A.1 sample encodings.
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, value) in cases {
            assert_eq!(Reader::new(bytes).varint().unwrap(), value);
            let mut out = [0u8; 8];
            let mut w = Writer::new(&mut out);
            w.varint(value).unwrap();
            let n = w.len();
            assert_eq!(&out[..n], bytes);
        }
        // A two-byte encoding of 37 is also valid on input.
        assert_eq!(Reader::new(&[0x40, 0x25]).varint().unwrap(), 37);
    }

    #[test]
    fn reads_past_end_are_errors_not_panics() {
        let mut r = Reader::new(&[0x80, 0x01]);
        assert_eq!(r.varint(), Err(WireError::Truncated));
        assert_eq!(Reader::new(&[1, 2]).u48(), Err(WireError::Truncated));
        let mut small = [0u8; 3];
        assert_eq!(
            Writer::new(&mut small).u32(7),
            Err(WireError::BufferTooSmall)
        );
    }

    #[test]
    fn u48_round_trip_and_range() {
        let mut out = [0u8; 6];
        Writer::new(&mut out).u48(0x0102_0304_0506).unwrap();
        assert_eq!(out, [1, 2, 3, 4, 5, 6]);
        assert_eq!(Reader::new(&out).u48().unwrap(), 0x0102_0304_0506);
        assert!(Writer::new(&mut out).u48(1 << 48).is_err());
    }
}
