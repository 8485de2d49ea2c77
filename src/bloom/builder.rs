//! Configuration and construction of a [`BloomFilter`].

use super::storage::Blocks;
use super::{sizing, BloomFilter};
use crate::cuckoo::DEFAULT_CAPACITY;
use crate::error::BuildError;
use crate::hash::{HashAlgorithm, KeyHasher};

/// Default target false-positive rate: one in a thousand.
pub const DEFAULT_FALSE_POSITIVE_RATE: f64 = 1e-3;

/// Builds a [`BloomFilter`]; see [`BloomFilter::builder`].
///
/// | setting | default | meaning |
/// | --- | --- | --- |
/// | [`capacity`](Self::capacity) | 1,048,576 | items the filter is sized for |
/// | [`false_positive_rate`](Self::false_positive_rate) | 0.001 | the rate of `contains` on absent keys once `capacity` items are in, `1e-20..1` |
/// | [`seed`](Self::seed) | random per filter | hash seed (set it to [`union`](BloomFilter::union) filters) |
///
/// The builder picks the number of blocks and of bits per key (8, 16, 24
/// or 32) that meet the rate with the least memory, using the blocked
/// layout's exact false-positive model. About 10.1 bits per item at 1%,
/// 15.7 at 0.1% and 23.6 at 0.01% (the classic unblocked optimum is 9.6,
/// 14.4 and 19.1): the price of one cache line per key.
#[derive(Clone, Debug)]
#[must_use]
pub struct BloomFilterBuilder {
    capacity: usize,
    false_positive_rate: f64,
    seed: Option<u64>,
}

impl Default for BloomFilterBuilder {
    fn default() -> Self {
        BloomFilterBuilder {
            capacity: DEFAULT_CAPACITY,
            false_positive_rate: DEFAULT_FALSE_POSITIVE_RATE,
            seed: None,
        }
    }
}

impl BloomFilterBuilder {
    /// Number of items the filter is sized for. More can be inserted; the
    /// false-positive rate then rises above the target.
    pub fn capacity(mut self, items: usize) -> Self {
        self.capacity = items;
        self
    }

    /// The false-positive rate at `capacity` items, in `1e-20..1`.
    pub fn false_positive_rate(mut self, p: f64) -> Self {
        self.false_positive_rate = p;
        self
    }

    /// A fixed hash seed. By default every filter draws a random one;
    /// [`union`](BloomFilter::union) needs equal seeds.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Allocates the filter.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`], [`BuildError::InvalidFalsePositiveRate`],
    /// [`BuildError::CapacityTooLarge`] if the table would not fit in an
    /// address space, or [`BuildError::AllocationFailed`] if the allocator
    /// refuses it (never an abort).
    pub fn build(self) -> Result<BloomFilter, BuildError> {
        let plan = sizing::plan(self.capacity, self.false_positive_rate)?;
        // `plan` caps blocks so that their bytes fit in an `isize`.
        let blocks = Blocks::zeroed(plan.blocks as usize)
            .map_err(|e| BuildError::AllocationFailed { bytes: e.bytes })?;
        Ok(BloomFilter {
            blocks,
            block_count: plan.blocks,
            rounds: plan.rounds,
            hasher: KeyHasher::with_algorithm(
                self.seed.unwrap_or_else(KeyHasher::random_seed),
                HashAlgorithm::Xxh3,
            ),
            capacity: self.capacity,
            target_fpr: self.false_positive_rate,
        })
    }
}
