//! The concurrent blocked Bloom filter: the cuckoo filter's sibling for
//! insert-only sets.
//!
//! Each key maps to one 64-byte block (one cache line) and sets `R` bits in
//! each of its eight 64-bit words with atomic `fetch_or` (`k = 8R` bits in
//! all); `contains` reads that one cache line and never writes. See
//! `block` for the bit pattern and orderings, `sizing` for the
//! false-positive model the builder sizes with.

mod batch;
mod block;
mod builder;
mod estimate;
pub(crate) mod parts;
mod sizing;
mod storage;
mod traits;

pub use builder::{BloomFilterBuilder, DEFAULT_FALSE_POSITIVE_RATE};

use crate::error::{InsertError, UnionError};
use crate::filter::{Filter, FilterKind};
use crate::hash::KeyHasher;
use crate::sync::Ordering::Relaxed;
use std::fmt;
use std::hash::Hash;
use storage::Blocks;

pub(crate) use sizing::plan;

/// Runs `$body` with the const `$R` bound to the filter's bits per word
/// per key (1..=4, validated at construction). Fixed at build time, so the
/// branch is perfectly predicted, and each arm is fully unrolled.
macro_rules! with_rounds {
    ($rounds:expr, $R:ident => $body:expr) => {
        match $rounds {
            1 => {
                const $R: u32 = 1;
                $body
            }
            2 => {
                const $R: u32 = 2;
                $body
            }
            3 => {
                const $R: u32 = 3;
                $body
            }
            _ => {
                const $R: u32 = 4;
                $body
            }
        }
    };
}
use with_rounds;

/// A concurrent blocked Bloom filter: approximate set membership for
/// insert-only sets, shared by many threads as `Arc<BloomFilter>`.
///
/// `contains` answers `false` if the key is definitely absent (no false
/// negatives, under any interleaving of threads) and `true` if it is
/// probably present, at the false-positive rate the filter was sized for
/// once it holds its capacity. It cannot remove items (use
/// [`CuckooFilter`](crate::CuckooFilter) for that).
///
/// It is a set: inserting a key twice is the same as once (as
/// `HashSet::insert`), and there is no count and no remove. Like the
/// cuckoo filter it has [`with_capacity`](Self::with_capacity), batch
/// calls, `Clone`, `Default`, `FromIterator` and `Extend` on `&BloomFilter`
/// (for a filter behind an `Arc`); its inserts never fail, so its batch
/// insert returns a count rather than a
/// [`BatchInsertError`](crate::BatchInsertError).
///
/// Each key touches one cache-line-aligned 64-byte block: `contains` reads
/// that one cache line (one word of it for most absent keys) and never
/// writes; `insert` sets `k`
/// bits in that block with at most eight atomic `fetch_or`s, and none for
/// words whose bits are set already.
///
/// # Concurrency
///
/// Every method takes `&self`; the filter is `Send + Sync`.
///
/// | operation | progress | consistency |
/// | --- | --- | --- |
/// | `contains` | wait-free: at most eight loads, no writes, no retries | sees every insert that happens-before it; a racing insert is seen once its last bit is set (bits never clear, so the answer then stays `true`) |
/// | `insert` | wait-free: at most eight `fetch_or`s, no retries, no locks | its bits are never lost to a racing insert (each word is set by an atomic read-modify-write) |
/// | `insert`'s `bool` | — | **not exact under races**: see below |
/// | `len_estimate`, `false_positive_rate` | read every word | estimates; racing inserts may or may not be counted |
/// | `clear` | stores zero to every word | not atomic: a racing insert may keep some of its bits and lose others (then it is not found); clear while no other thread inserts |
/// | `union` | `fetch_or`s the other filter's words in | as a racing insert of each of the other filter's keys |
///
/// `insert` returns `true` if it set at least one bit that was 0 ("the key
/// was probably new"). When several threads insert the same new key at the
/// same moment, **at least one** of them gets `true`, but more than one may
/// (each may set a different one of the key's missing bits); and a new key
/// whose bits all happen to be set already (a false positive) gets `false`
/// everywhere. So it cannot deduplicate a stream exactly: for that use
/// [`CuckooFilter::insert_unique`](crate::CuckooFilter::insert_unique),
/// where exactly one of the racing threads wins.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
///
/// let filter = Arc::new(
///     koel::BloomFilter::builder()
///         .capacity(100_000)
///         .false_positive_rate(0.001)
///         .build()?,
/// );
/// let workers: Vec<_> = (0..4u64)
///     .map(|t| {
///         let filter = Arc::clone(&filter);
///         thread::spawn(move || {
///             for i in 0..10_000u64 {
///                 filter.insert(&(t * 10_000 + i));
///             }
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap();
/// }
/// assert!((0..40_000u64).all(|k| filter.contains(&k)));
/// let n = filter.len_estimate() as f64;
/// assert!((n - 40_000.0).abs() < 0.05 * 40_000.0);
/// # Ok::<(), koel::BuildError>(())
/// ```
pub struct BloomFilter {
    blocks: Blocks,
    /// Number of 64-byte blocks, at least 1.
    block_count: u64,
    /// Bits per word per key, 1..=4 (`k = 8 * rounds`).
    rounds: u32,
    hasher: KeyHasher,
    /// The capacity it was sized for, in items.
    capacity: usize,
    /// The false-positive rate it was sized for, at `capacity` items.
    target_fpr: f64,
}

impl BloomFilter {
    /// A builder; see [`BloomFilterBuilder`] for the defaults.
    ///
    /// ```
    /// let f = koel::BloomFilter::builder()
    ///     .capacity(1_000_000)
    ///     .false_positive_rate(1e-4)
    ///     .seed(42)
    ///     .build()?;
    /// assert!(f.memory_usage() < 1_000_000 * 24 / 8);
    /// # Ok::<(), koel::BuildError>(())
    /// ```
    pub fn builder() -> BloomFilterBuilder {
        BloomFilterBuilder::default()
    }

    /// A filter for `capacity` items at false-positive rate `p`, with a
    /// random seed.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0, `p` is not in `1e-20..1`, or the table is too
    /// large to allocate, like `Vec::with_capacity`. Use
    /// [`builder`](Self::builder) to get a [`BuildError`](crate::BuildError)
    /// instead.
    ///
    /// ```
    /// let f = koel::BloomFilter::new(1000, 0.01);
    /// f.insert("x");
    /// assert!(f.contains("x"));
    /// ```
    pub fn new(capacity: usize, p: f64) -> Self {
        match Self::builder()
            .capacity(capacity)
            .false_positive_rate(p)
            .build()
        {
            Ok(f) => f,
            Err(e) => panic!(
                "BloomFilter::new({capacity}, {}): {e}",
                crate::error::Rate(p)
            ),
        }
    }

    /// A filter for `items` items at the default false-positive rate
    /// ([`DEFAULT_FALSE_POSITIVE_RATE`], 0.1%), with a random seed: the
    /// Bloom counterpart of
    /// [`CuckooFilter::with_capacity`](crate::CuckooFilter::with_capacity).
    ///
    /// # Panics
    ///
    /// If `items` is 0 or the table is too large to allocate, like
    /// `Vec::with_capacity`. Use [`builder`](Self::builder) to get a
    /// [`BuildError`](crate::BuildError) instead.
    ///
    /// ```
    /// let f = koel::BloomFilter::with_capacity(1000);
    /// assert_eq!(f.target_false_positive_rate(), koel::DEFAULT_FALSE_POSITIVE_RATE);
    /// f.insert("x");
    /// assert!(f.contains("x"));
    /// ```
    pub fn with_capacity(items: usize) -> Self {
        match Self::builder().capacity(items).build() {
            Ok(f) => f,
            Err(e) => panic!("BloomFilter::with_capacity({items}): {e}"),
        }
    }

    /// The 64-bit hash of `key` under this filter's seed, for the `*_hash`
    /// methods. Hashing a byte slice gives the same value as
    /// [`Filter::hash_bytes`].
    #[inline]
    pub fn hash<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.hasher.hash(key)
    }

    /// Adds `key`, idempotently: inserting the same key twice is the same
    /// as once (a set, as `HashSet::insert`; there is no count and no
    /// remove). Returns `true` if it set at least one bit that was 0 (the
    /// key was probably new). Wait-free, and never fails: past its
    /// capacity the false-positive rate rises instead. Under races on the same key, at least
    /// one inserter gets `true` but several may: see the
    /// [type docs](Self#concurrency).
    ///
    /// ```
    /// let f = koel::BloomFilter::new(1000, 0.001);
    /// assert!(f.insert(&17u64));
    /// assert!(!f.insert(&17u64));
    /// ```
    #[inline]
    pub fn insert<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.insert_hash(self.hash(key))
    }

    /// [`insert`](Self::insert) for a hash from [`hash`](Self::hash).
    #[inline]
    pub fn insert_hash(&self, hash: u64) -> bool {
        let blk = self.blocks.block_of(hash);
        with_rounds!(self.rounds, R => block::insert(blk, &block::masks::<R>(hash)))
    }

    /// `false` if `key` is definitely absent, `true` if it is probably
    /// present. Wait-free; reads one cache line and never writes.
    #[inline]
    pub fn contains<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// [`contains`](Self::contains) for a hash from [`hash`](Self::hash).
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        let blk = self.blocks.block_of(hash);
        with_rounds!(self.rounds, R => block::contains::<R>(blk, hash))
    }

    /// The number of distinct items inserted, estimated from the bits set
    /// (the standard Bloom estimate `-ln(1 - X/64) / (R·-ln(1 - 1/64))` per
    /// 64-bit word, averaged over each block's words). Within a few percent
    /// up to the capacity; it saturates far beyond it. Reads every word:
    /// O(memory), about a millisecond per 10 MB.
    pub fn len_estimate(&self) -> usize {
        estimate::items(self.blocks.words(), self.rounds).round() as usize
    }

    /// The false-positive rate of `contains` for a random absent key at the
    /// current fill: the mean over blocks of the chance that all `k` probed
    /// bits are set, from each word's actual bit count. Reads every word.
    pub fn false_positive_rate(&self) -> f64 {
        estimate::false_positive_rate(self.blocks.words(), self.rounds)
    }

    /// The capacity the filter was sized for, in items.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The false-positive rate the filter was sized for, at
    /// [`capacity`](Self::capacity) items.
    pub fn target_false_positive_rate(&self) -> f64 {
        self.target_fpr
    }

    /// The false-positive rate the sizing model predicts at `items`
    /// items (for `items = capacity()` it is at most the target).
    pub fn expected_false_positive_rate(&self, items: usize) -> f64 {
        sizing::model_fpr(items as f64 / self.block_count as f64, self.rounds)
    }

    /// Bits each key sets: `k`, one of 8, 16, 24 or 32 (all in one
    /// 64-byte block, from one 64-bit hash).
    ///
    /// ```
    /// let f = koel::BloomFilter::new(1000, 0.01);
    /// assert!([8, 16, 24, 32].contains(&f.bits_per_key()));
    /// ```
    pub fn bits_per_key(&self) -> u32 {
        8 * self.rounds
    }

    /// The old name of [`bits_per_key`](Self::bits_per_key): each key
    /// sets that many bits from one hash, it does not compute that many
    /// hashes.
    #[deprecated(since = "0.1.1", note = "renamed to `bits_per_key`")]
    #[doc(hidden)]
    pub fn hashes(&self) -> u32 {
        self.bits_per_key()
    }

    /// Number of 64-byte blocks.
    pub fn blocks(&self) -> u64 {
        self.block_count
    }

    /// Bytes of the bit array (64 per block).
    pub fn memory_usage(&self) -> usize {
        self.blocks.words().len() * std::mem::size_of::<u64>()
    }

    /// Bits of memory per item of [`capacity`](Self::capacity).
    pub fn bits_per_item(&self) -> f64 {
        self.memory_usage() as f64 * 8.0 / self.capacity as f64
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.hasher.seed()
    }

    /// Removes every item. Not atomic with respect to concurrent inserts:
    /// one racing `clear` may keep only part of its bits (and then not be
    /// found). Call it while no other thread inserts if that matters.
    pub fn clear(&self) {
        for w in self.blocks.words() {
            // Relaxed: no other memory is ordered by the bits; callers that
            // need inserts after the clear to be seen synchronise anyway.
            w.store(0, Relaxed);
        }
    }

    /// Adds every item of `other` to `self` (bitwise OR), as if each of its
    /// keys were inserted here. Both must have the same size, bits per key,
    /// seed and hash algorithm: build them with the same builder settings
    /// and an explicit [`seed`](BloomFilterBuilder::seed) (a filter loaded
    /// from a format version 1 file hashes with `ahash`, and unites only
    /// with another such filter).
    ///
    /// ```
    /// let a = koel::BloomFilter::builder().capacity(1000).seed(7).build()?;
    /// let b = koel::BloomFilter::builder().capacity(1000).seed(7).build()?;
    /// a.insert("left");
    /// b.insert("right");
    /// a.union(&b)?;
    /// assert!(a.contains("left") && a.contains("right"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`UnionError`] saying which parameter differs; `self` is then
    /// unchanged.
    pub fn union(&self, other: &BloomFilter) -> Result<(), UnionError> {
        if self.block_count != other.block_count {
            return Err(UnionError::DifferentSize {
                blocks: self.block_count,
                other_blocks: other.block_count,
            });
        }
        if self.rounds != other.rounds {
            return Err(UnionError::DifferentHashes {
                hashes: self.bits_per_key(),
                other_hashes: other.bits_per_key(),
            });
        }
        if self.seed() != other.seed() {
            return Err(UnionError::DifferentSeed);
        }
        let (mine, theirs) = (self.hasher.algorithm(), other.hasher.algorithm());
        if mine != theirs {
            return Err(UnionError::DifferentHashAlgorithm {
                algorithm: mine.name(),
                other_algorithm: theirs.name(),
            });
        }
        for (mine, theirs) in self.blocks.words().iter().zip(other.blocks.words()) {
            // Relaxed, both: as in `block::insert`, the RMW keeps racing
            // inserts' bits and nothing else is published.
            let add = theirs.load(Relaxed);
            if mine.load(Relaxed) & add != add {
                mine.fetch_or(add, Relaxed);
            }
        }
        Ok(())
    }
}

impl Filter for BloomFilter {
    fn kind(&self) -> FilterKind {
        FilterKind::Bloom
    }

    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        self.hash(bytes)
    }

    /// Always `Ok`: a Bloom filter never refuses an item (past its
    /// capacity its false-positive rate rises instead).
    fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        BloomFilter::insert_hash(self, hash);
        Ok(())
    }

    /// `Ok(true)` if some bit was newly set: approximate, see
    /// [`BloomFilter::insert`].
    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        Ok(BloomFilter::insert_hash(self, hash))
    }

    fn contains_hash(&self, hash: u64) -> bool {
        BloomFilter::contains_hash(self, hash)
    }

    /// `None`: a Bloom filter cannot remove.
    fn remove_hash(&self, _hash: u64) -> Option<bool> {
        None
    }

    /// [`BloomFilter::len_estimate`]: an estimate that reads every word
    /// of the bit array (O(memory), about a millisecond per 10 MB). A
    /// Bloom filter has no item counter (one would be a cache line every
    /// insert writes); call `len_estimate` to make the cost visible.
    fn len(&self) -> usize {
        self.len_estimate()
    }

    fn memory_usage(&self) -> usize {
        BloomFilter::memory_usage(self)
    }

    fn false_positive_rate(&self) -> f64 {
        BloomFilter::false_positive_rate(self)
    }

    fn clear(&self) {
        BloomFilter::clear(self)
    }
}

impl fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BloomFilter")
            .field("capacity", &self.capacity)
            .field("target_false_positive_rate", &self.target_fpr)
            .field("blocks", &self.block_count)
            .field("bits_per_key", &self.bits_per_key())
            .finish_non_exhaustive()
    }
}

impl TryFrom<BloomFilterBuilder> for BloomFilter {
    type Error = crate::error::BuildError;

    fn try_from(builder: BloomFilterBuilder) -> Result<Self, Self::Error> {
        builder.build()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn words(f: &BloomFilter) -> Vec<u64> {
        f.blocks.words().iter().map(|w| w.load(Relaxed)).collect()
    }

    #[test]
    fn contains_never_writes() {
        let f = BloomFilter::builder()
            .capacity(1000)
            .seed(1)
            .build()
            .unwrap();
        for k in 0..500u32 {
            f.insert(&k);
        }
        let before = words(&f);
        let hits = (0..100_000u32).filter(|k| f.contains(k)).count();
        assert!(hits >= 500);
        assert_eq!(before, words(&f), "contains changed the bits");
    }

    #[test]
    fn a_key_sets_k_bits_in_one_block() {
        for p in [0.01, 1e-6] {
            let f = BloomFilter::builder()
                .capacity(10_000)
                .false_positive_rate(p)
                .seed(3)
                .build()
                .unwrap();
            f.insert("only");
            let w = words(&f);
            let touched: Vec<usize> = (0..w.len() / 8)
                .filter(|b| w[b * 8..b * 8 + 8].iter().any(|&x| x != 0))
                .collect();
            assert_eq!(touched.len(), 1, "one block per key");
            let b = touched[0];
            for &x in &w[b * 8..b * 8 + 8] {
                let ones = x.count_ones();
                assert!((1..=f.rounds).contains(&ones), "{ones} bits in a word");
            }
            let total: u32 = w.iter().map(|x| x.count_ones()).sum();
            assert!(total <= f.bits_per_key() && total >= f.bits_per_key() - 2);
        }
    }
}
