//! Deterministic pseudo-random bytes (xorshift64, 8 bytes per step) for the demo's generated
//! file, the benchmark's data and tests: incompressible, cheap, the same for the same seed.
//! Not for anything secret.

/// A stream of pseudo-random bytes.
#[derive(Debug, Clone)]
pub struct Noise(u64);

impl Noise {
    /// A stream; different seeds give different streams.
    pub fn new(seed: u64) -> Noise {
        Noise(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Fill `buf` with the next bytes of the stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let x = &mut self.0;
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
        }
    }
}

/// `len` bytes of the stream of `seed`.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    Noise::new(seed).fill(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_differ_by_seed() {
        assert_eq!(bytes(1, 100), bytes(1, 100));
        assert_ne!(bytes(1, 100), bytes(2, 100));
        // Filling in pieces continues the same stream.
        let mut n = Noise::new(1);
        let mut a = vec![0; 64];
        n.fill(&mut a[..24]);
        n.fill(&mut a[24..]);
        assert_eq!(a, bytes(1, 64));
    }
}
