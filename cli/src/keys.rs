//! Key streams for `koel stress`: which key index each operation touches,
//! and the bytes of that key.
//!
//! A key is an index in `0..items`; its bytes are the index's 8
//! little-endian bytes, or for `strings` an e-mail-like string of about 30
//! bytes built from it. Drawing an index must cost far less than a filter
//! operation, so uniform indices come from a tiny inline generator and Zipf
//! indices from a ring of draws made before the run starts.

use anyhow::{bail, Context};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use std::fmt;
use std::str::FromStr;

/// How keys are chosen, from `--keys`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipf with exponent `s`: key rank `r` has weight `1 / r^s`, so a few
    /// hot keys take most operations.
    Zipf(f64),
    /// Each thread walks the key space in order from its own offset.
    Sequential,
    /// Uniform over string keys of about 30 bytes (longer keys to hash).
    Strings,
}

impl FromStr for KeyDist {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s {
            "uniform" => Ok(KeyDist::Uniform),
            "sequential" => Ok(KeyDist::Sequential),
            "strings" => Ok(KeyDist::Strings),
            _ => {
                let Some(exponent) = s.strip_prefix("zipf:") else {
                    bail!("unknown key distribution {s:?}: use uniform, zipf:S (e.g. zipf:0.99), sequential or strings");
                };
                let s: f64 = exponent
                    .parse()
                    .with_context(|| format!("zipf exponent {exponent:?} is not a number"))?;
                if !(s.is_finite() && s > 0.0 && s <= 10.0) {
                    bail!("zipf exponent must be in (0, 10], got {s}");
                }
                Ok(KeyDist::Zipf(s))
            }
        }
    }
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::Uniform => write!(f, "uniform"),
            KeyDist::Zipf(s) => write!(f, "zipf:{s}"),
            KeyDist::Sequential => write!(f, "sequential"),
            KeyDist::Strings => write!(f, "strings"),
        }
    }
}

/// Draws of a Zipf ring before it repeats: long enough that the repetition
/// does not matter, small enough (4 MiB) to make in well under a second.
const ZIPF_RING: usize = 1 << 20;

/// A fast, non-cryptographic generator (wyrand): one multiply per draw.
#[derive(Clone, Debug)]
pub struct FastRng(u64);

impl FastRng {
    pub fn new(seed: u64) -> Self {
        FastRng(mix64(seed))
    }

    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    }

    /// A value in `0..n` (fast range reduction; bias below 2^-32 for the
    /// sizes used here).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// SplitMix64 finaliser: a well-mixed function of `z`.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seed from the OS's randomness (through std's hash-map keys).
pub fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x6b6f_656c_u64)
}

/// One thread's stream of key indices.
pub struct KeyGen {
    items: u64,
    kind: GenKind,
}

enum GenKind {
    Uniform,
    Sequential { next: u64 },
    Zipf { ring: Vec<u32>, at: usize },
}

impl KeyGen {
    /// The stream of thread `thread` of `threads` over `items` keys (Zipf
    /// takes at most `u32::MAX`).
    pub fn new(
        dist: KeyDist,
        items: u64,
        thread: usize,
        threads: usize,
        seed: u64,
    ) -> anyhow::Result<Self> {
        let kind = match dist {
            KeyDist::Uniform | KeyDist::Strings => GenKind::Uniform,
            KeyDist::Sequential => GenKind::Sequential {
                next: items / threads as u64 * thread as u64,
            },
            KeyDist::Zipf(s) => {
                if items > u64::from(u32::MAX) {
                    bail!("--keys zipf supports at most {} items", u32::MAX);
                }
                let zipf = Zipf::new(items as f64, s)
                    .map_err(|e| anyhow::anyhow!("zipf:{s} over {items} keys: {e}"))?;
                let mut rng = SmallRng::seed_from_u64(mix64(seed ^ thread as u64));
                // Rank 1 is the hottest key; ranks become indices 0..items,
                // which the hash scatters over the table.
                let ring = (0..ZIPF_RING)
                    .map(|_| (zipf.sample(&mut rng) as u64 - 1).min(items - 1) as u32)
                    .collect();
                GenKind::Zipf {
                    ring,
                    at: rng.random_range(0..ZIPF_RING),
                }
            }
        };
        Ok(KeyGen { items, kind })
    }

    /// The next key index, in `0..items`.
    #[inline(always)]
    pub fn next(&mut self, rng: &mut FastRng) -> u64 {
        match &mut self.kind {
            GenKind::Uniform => rng.below(self.items),
            GenKind::Sequential { next } => {
                let k = *next;
                *next = if k + 1 == self.items { 0 } else { k + 1 };
                k
            }
            GenKind::Zipf { ring, at } => {
                let k = ring[*at];
                *at = (*at + 1) & (ZIPF_RING - 1);
                u64::from(k)
            }
        }
    }
}

/// Writes the bytes of key `index` into `buf` and returns them.
#[inline(always)]
pub fn key_bytes(dist: KeyDist, index: u64, buf: &mut [u8; 32]) -> &[u8] {
    match dist {
        KeyDist::Strings => {
            // "user-" + 16 hex digits of a mixed index + "@koel.test": 31
            // bytes, unique per index (mix64 is a bijection).
            const PREFIX: &[u8] = b"user-";
            const SUFFIX: &[u8] = b"@koel.test";
            const HEX: &[u8; 16] = b"0123456789abcdef";
            buf[..PREFIX.len()].copy_from_slice(PREFIX);
            let v = mix64(index);
            for (i, b) in buf[PREFIX.len()..PREFIX.len() + 16].iter_mut().enumerate() {
                *b = HEX[((v >> (60 - 4 * i)) & 0xf) as usize];
            }
            buf[PREFIX.len() + 16..PREFIX.len() + 16 + SUFFIX.len()].copy_from_slice(SUFFIX);
            &buf[..PREFIX.len() + 16 + SUFFIX.len()]
        }
        _ => {
            buf[..8].copy_from_slice(&index.to_le_bytes());
            &buf[..8]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_distribution_and_rejects_bad_ones() {
        assert_eq!("uniform".parse::<KeyDist>().unwrap(), KeyDist::Uniform);
        assert_eq!("zipf:0.99".parse::<KeyDist>().unwrap(), KeyDist::Zipf(0.99));
        assert_eq!(
            "sequential".parse::<KeyDist>().unwrap(),
            KeyDist::Sequential
        );
        assert_eq!("strings".parse::<KeyDist>().unwrap(), KeyDist::Strings);
        for bad in [
            "zipf", "zipf:", "zipf:x", "zipf:-1", "zipf:0", "zipf:inf", "normal",
        ] {
            assert!(bad.parse::<KeyDist>().is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn zipf_stream_favours_low_ranks_and_stays_in_range() {
        let mut g = KeyGen::new(KeyDist::Zipf(1.2), 1000, 0, 1, 1).unwrap();
        let mut rng = FastRng::new(1);
        let draws: Vec<u64> = (0..100_000).map(|_| g.next(&mut rng)).collect();
        assert!(draws.iter().all(|&k| k < 1000));
        let hottest = draws.iter().filter(|&&k| k == 0).count();
        let coldest = draws.iter().filter(|&&k| k == 999).count();
        assert!(
            hottest > 100 * coldest.max(1),
            "rank 1 drawn {hottest} times, rank 1000 {coldest} times"
        );
    }

    #[test]
    fn sequential_stream_wraps_around() {
        let mut g = KeyGen::new(KeyDist::Sequential, 5, 1, 2, 0).unwrap();
        let mut rng = FastRng::new(0);
        let got: Vec<u64> = (0..6).map(|_| g.next(&mut rng)).collect();
        assert_eq!(got, [2, 3, 4, 0, 1, 2]);
    }

    #[test]
    fn string_keys_differ_per_index() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        let ka = key_bytes(KeyDist::Strings, 1, &mut a).to_vec();
        let kb = key_bytes(KeyDist::Strings, 2, &mut b).to_vec();
        assert_ne!(ka, kb);
        assert_eq!(ka.len(), 31);
        assert!(ka.starts_with(b"user-") && ka.ends_with(b"@koel.test"));
    }
}
