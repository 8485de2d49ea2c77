//! The hooks persistence needs: a filter's parameters and raw words, and a
//! filter rebuilt from saved ones.
//!
//! Not public API: `crate::persist` owns the file format.

// Used by persistence, which lands later; until then only the tests call it.
#![allow(dead_code)]

use super::block::MAX_ROUNDS;
use super::storage::{Blocks, BLOCK_BYTES};
use super::{sizing, BloomFilter};
use crate::hash::{HashAlgorithm, KeyHasher};
use crate::sync::AtomicU64;

/// Version of the key-to-bits mapping (`block::block_of` and
/// `block::masks`). A saved filter records it; change it whenever that
/// mapping changes, or old files would load with false negatives.
pub(crate) const BIT_MAPPING_VERSION: u32 = 1;

/// Everything besides the words that defines a filter's answers (and the
/// sizing it was built with).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BloomParts {
    /// 64-byte blocks (8 words each).
    pub(crate) blocks: u64,
    /// Bits per key, `k`: 8, 16, 24 or 32.
    pub(crate) hashes: u32,
    pub(crate) seed: u64,
    /// How keys are hashed (format version 1 files: `ahash`).
    pub(crate) algorithm: HashAlgorithm,
    /// The capacity it was sized for (informational; at least 1).
    pub(crate) capacity: u64,
    /// The rate it was sized for (informational; in the builder's range).
    pub(crate) target_fpr: f64,
}

impl BloomParts {
    /// Whether these parameters make a filter every operation can run on:
    /// the one definition `from_parts` and the loader's header check share.
    pub(crate) fn check(&self) -> Result<(), FromPartsError> {
        let rounds = self.hashes / 8;
        if self.hashes % 8 != 0 || !(1..=MAX_ROUNDS).contains(&rounds) {
            return Err(FromPartsError::BadHashes(self.hashes));
        }
        if self.capacity == 0 || usize::try_from(self.capacity).is_err() {
            return Err(FromPartsError::BadCapacity(self.capacity));
        }
        if !sizing::valid_rate(self.target_fpr) {
            return Err(FromPartsError::BadRate(self.target_fpr));
        }
        let max_blocks = (isize::MAX as usize / BLOCK_BYTES) as u64;
        if self.blocks == 0 || self.blocks > max_blocks {
            return Err(FromPartsError::BadBlocks(self.blocks));
        }
        Ok(())
    }
}

/// Why saved parts cannot make a filter.
#[derive(Debug)]
pub(crate) enum FromPartsError {
    /// Zero blocks, or more than an address space holds.
    BadBlocks(u64),
    /// Not one of 8, 16, 24, 32.
    BadHashes(u32),
    /// Zero, or more than `usize` holds.
    BadCapacity(u64),
    /// Outside the builder's range (or NaN).
    BadRate(f64),
    /// The allocator refused `bytes`.
    Allocation { bytes: usize },
    /// `fill` failed.
    Fill(std::io::Error),
}

impl BloomFilter {
    /// The parameters to save next to [`words`](Self::words).
    pub(crate) fn parts(&self) -> BloomParts {
        BloomParts {
            blocks: self.block_count,
            hashes: self.bits_per_key(),
            seed: self.seed(),
            algorithm: self.hasher.algorithm(),
            capacity: self.capacity as u64,
            target_fpr: self.target_fpr,
        }
    }

    /// The bit array, `8 * blocks` words in block order. Inserts may still
    /// set bits while it is read (`Relaxed` loads): a copy then holds every
    /// item whose insert completed before the copy began.
    pub(crate) fn words(&self) -> &[AtomicU64] {
        self.blocks.words()
    }

    /// A filter from saved parts: `fill` receives the zeroed words as
    /// native-endian bytes (`64 * blocks` of them, little-endian on every
    /// supported target) and writes the saved words into them.
    ///
    /// Validates every parameter before allocating anything.
    pub(crate) fn from_parts(
        parts: BloomParts,
        fill: impl FnOnce(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<BloomFilter, FromPartsError> {
        parts.check()?;
        let rounds = parts.hashes / 8;
        let capacity = parts.capacity as usize;
        let mut blocks = Blocks::zeroed(parts.blocks as usize)
            .map_err(|e| FromPartsError::Allocation { bytes: e.bytes })?;
        fill(blocks.as_bytes_mut()).map_err(FromPartsError::Fill)?;
        Ok(BloomFilter {
            blocks,
            block_count: parts.blocks,
            rounds,
            hasher: KeyHasher::with_algorithm(parts.seed, parts.algorithm),
            capacity,
            target_fpr: parts.target_fpr,
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Ordering::Relaxed;

    #[test]
    fn parts_round_trip_gives_identical_answers() {
        let f = BloomFilter::builder()
            .capacity(5000)
            .false_positive_rate(1e-6)
            .seed(9)
            .build()
            .unwrap();
        for k in 0..5000u32 {
            f.insert(&k);
        }
        let bytes: Vec<u8> = f
            .words()
            .iter()
            .flat_map(|w| w.load(Relaxed).to_ne_bytes())
            .collect();
        let g = BloomFilter::from_parts(f.parts(), |dst| {
            dst.copy_from_slice(&bytes);
            Ok(())
        })
        .unwrap();
        assert_eq!(g.parts(), f.parts());
        assert_eq!(g.bits_per_key(), 16);
        assert!((0..5000u32).all(|k| g.contains(&k)));
        for k in 0..100_000u32 {
            assert_eq!(f.contains(&k), g.contains(&k), "key {k}");
        }
    }

    #[test]
    fn bad_parts_are_refused_before_allocating() {
        let good = BloomParts {
            blocks: 16,
            hashes: 8,
            seed: 0,
            algorithm: HashAlgorithm::Xxh3,
            capacity: 100,
            target_fpr: 0.01,
        };
        let never = |_: &mut [u8]| -> std::io::Result<()> { panic!("must not fill") };
        let with = |change: fn(&mut BloomParts)| {
            let mut p = good;
            change(&mut p);
            BloomFilter::from_parts(p, never)
        };
        assert!(matches!(
            with(|p| p.blocks = 0),
            Err(FromPartsError::BadBlocks(0))
        ));
        assert!(matches!(
            with(|p| p.blocks = u64::MAX),
            Err(FromPartsError::BadBlocks(_))
        ));
        for bad in [0, 7, 12, 40] {
            let mut p = good;
            p.hashes = bad;
            assert!(matches!(
                BloomFilter::from_parts(p, never),
                Err(FromPartsError::BadHashes(h)) if h == bad
            ));
        }
        assert!(matches!(
            with(|p| p.capacity = 0),
            Err(FromPartsError::BadCapacity(0))
        ));
        assert!(matches!(
            with(|p| p.target_fpr = f64::NAN),
            Err(FromPartsError::BadRate(_))
        ));
        assert!(matches!(
            with(|p| p.target_fpr = 1.0),
            Err(FromPartsError::BadRate(_))
        ));
        // 2^56 blocks (4 EiB) pass the checks, and the allocator refuses them.
        assert!(matches!(
            with(|p| p.blocks = 1 << 56),
            Err(FromPartsError::Allocation { .. })
        ));
        // A failing fill is reported, not unwrapped.
        let err = BloomFilter::from_parts(good, |_| Err(std::io::ErrorKind::UnexpectedEof.into()));
        assert!(matches!(err, Err(FromPartsError::Fill(_))));
    }
}
