//! A seeded random source for the property tests (`properties`,
//! `http_decoder`): deterministic, so a failure names a reproducible seed.
#![allow(dead_code)]

/// xorshift64*: deterministic, so a failure names a reproducible seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = self.below(max + 1);
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// A word over `alphabet`, up to `max` characters.
    pub fn word(&mut self, alphabet: &str, max: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        let len = self.below(max + 1);
        (0..len).map(|_| chars[self.below(chars.len())]).collect()
    }

    /// `seed` with a few bytes flipped, inserted or removed.
    pub fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut out = seed.to_vec();
        for _ in 0..1 + self.below(8) {
            let at = if out.is_empty() {
                0
            } else {
                self.below(out.len())
            };
            match self.below(3) {
                0 if !out.is_empty() => out[at] = self.next() as u8,
                1 => out.insert(at, self.next() as u8),
                _ if !out.is_empty() => {
                    out.remove(at);
                }
                _ => {}
            }
        }
        out
    }
}
