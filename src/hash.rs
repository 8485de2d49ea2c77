//! Key hashing: one seeded 64-bit `ahash` per key.
//!
//! The seed is random per filter by default, so keys cannot be aimed at one
//! bucket pair by someone who does not know it; a fixed seed is a builder
//! option. `ahash` output may differ across its versions and CPU features
//! (AES-NI or not), and `Hash` for `usize` differs across pointer widths: a
//! seed fixes the hash function of one build on one kind of machine only.
//! Fixed-width integers and byte strings hash the same on every platform of
//! one build.

use ahash::RandomState;
use std::hash::Hash;

/// A seeded key hasher.
#[derive(Clone)]
pub(crate) struct KeyHasher {
    state: RandomState,
    seed: u64,
}

/// SplitMix64: expands one seed into the four `ahash` keys.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl KeyHasher {
    pub(crate) fn new(seed: u64) -> Self {
        let mut s = seed;
        let keys = [(); 4].map(|_| splitmix64(&mut s));
        KeyHasher {
            state: RandomState::with_seeds(keys[0], keys[1], keys[2], keys[3]),
            seed,
        }
    }

    /// A fresh random seed (from the OS, through `ahash`'s random state).
    pub(crate) fn random_seed() -> u64 {
        RandomState::new().hash_one(0x6b6f_656c_u64)
    }

    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    #[inline(always)]
    pub(crate) fn hash<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.state.hash_one(key)
    }
}
