//! `--exact`: the store behind the filter that confirms its "maybe seen".
//!
//! It holds a 128-bit XXH3 hash of every distinct key, not the key: 16
//! bytes a record whatever its length, in a hash table at most 7/8 full
//! (17 bytes a slot with its control byte), so 19.4 to 38.9 bytes per
//! distinct record depending on where the table is between two doublings
//! (plus, briefly, the old table while it doubles). Its allocation is
//! fallible: running out of memory is an error message, not an abort.
//!
//! Two distinct keys with one hash would make the second a duplicate: for
//! `n` distinct keys that happens with probability about `n^2 / 2^129`
//! (1.5e-21 for a billion keys), far below the rate of undetected memory
//! errors. XXH3 is not a keyed cryptographic hash, so this bound is for
//! input that was not crafted, with the seed in hand, to collide.
//!
//! Each dedup worker owns the set of its own partition of keys (every
//! occurrence of a key goes to one worker), so no two threads ever look up
//! or insert one key: the first occurrence in input order is the one kept.

use std::collections::{HashSet, TryReserveError};
use std::hash::{BuildHasherDefault, Hasher};
use xxhash_rust::xxh3::xxh3_128_with_seed;

/// The table's own hash of a stored 128-bit hash: its low 64 bits (already
/// uniform; hashing them again would only cost time).
#[derive(Default)]
struct LowBits(u64);

impl Hasher for LowBits {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u128 keys are hashed")
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = v as u64;
    }
}

/// The distinct keys one worker has seen (as hashes).
pub struct ExactSet {
    seed: u64,
    seen: HashSet<u128, BuildHasherDefault<LowBits>>,
}

/// Bytes of one table slot: a 16-byte hash and a control byte.
const SLOT_BYTES: usize = 17;

impl ExactSet {
    /// An empty set hashing with `seed`.
    pub fn new(seed: u64) -> Self {
        ExactSet {
            seed,
            seen: HashSet::default(),
        }
    }

    /// Records `key`; `true` if it was not there yet (an error if the
    /// table must double and the allocator refuses).
    #[inline]
    pub fn insert(&mut self, key: &[u8]) -> Result<bool, TryReserveError> {
        self.seen.try_reserve(1)?;
        Ok(self.seen.insert(xxh3_128_with_seed(key, self.seed)))
    }

    /// Distinct keys held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Bytes of the table (slots, not counting the allocator's rounding).
    pub fn memory_bytes(&self) -> usize {
        // `capacity()` is 7/8 of the slots (the table's maximum load).
        self.seen.capacity() * 8 / 7 * SLOT_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_reports_only_the_first_of_each_key() {
        let mut s = ExactSet::new(1);
        assert_eq!(s.insert(b"a"), Ok(true));
        assert_eq!(s.insert(b"b"), Ok(true));
        assert_eq!(s.insert(b"a"), Ok(false));
        assert_eq!(s.insert(b""), Ok(true));
        assert_eq!(s.insert(b""), Ok(false));
        assert_eq!(s.len(), 3);
        assert!(s.memory_bytes() >= 3 * 16);
    }
}
