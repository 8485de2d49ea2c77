//! The standard traits: `Clone`, `Default`, `Extend` and `FromIterator`,
//! and (feature `rayon`) `ParallelExtend`.
//!
//! `Extend` is implemented for `&BloomFilter` as well as for the owned
//! filter: a shared filter lives behind an `Arc`, which gives no `&mut`.

use super::storage::Blocks;
use super::BloomFilter;
use crate::hash::{HashAlgorithm, KeyHasher};
use crate::sync::Ordering::Relaxed;
use std::hash::Hash;

/// A copy with the same size, bits per key, seed and bits.
///
/// Taken while other threads insert, the copy still holds every item
/// whose insert completed before `clone` began: an insert sets its bits
/// with atomic `fetch_or`s, bits are only ever set (until a `clear`), and
/// each word is read once after the insert's last `fetch_or`, so the read
/// sees that bit or a later value of the word, which keeps it. An insert
/// racing the clone may or may not be in it; a racing `clear` may leave
/// part of the bits.
///
/// # Panics
///
/// If the copy cannot be allocated, like `Vec::clone`.
///
/// ```
/// let f = koel::BloomFilter::with_capacity(1000);
/// f.insert("a");
/// let g = f.clone();
/// f.insert("b");
/// assert!(g.contains("a"));
/// assert_eq!(g.seed(), f.seed());
/// ```
impl Clone for BloomFilter {
    fn clone(&self) -> Self {
        let blocks = match Blocks::zeroed(self.block_count as usize) {
            Ok(b) => b,
            Err(e) => panic!("BloomFilter::clone: cannot allocate {} bytes", e.bytes),
        };
        for (dst, src) in blocks.words().iter().zip(self.blocks.words()) {
            // Relaxed: the bits order no other memory (as in `insert`);
            // `blocks` is not shared yet, and publishing the copy orders
            // these stores.
            dst.store(src.load(Relaxed), Relaxed);
        }
        BloomFilter {
            blocks,
            block_count: self.block_count,
            rounds: self.rounds,
            hasher: self.hasher.clone(),
            capacity: self.capacity,
            target_fpr: self.target_fpr,
        }
    }
}

/// [`BloomFilter::with_capacity`]`(`[`DEFAULT_CAPACITY`](crate::DEFAULT_CAPACITY)`)`:
/// 1,048,576 items at the default false-positive rate
/// ([`DEFAULT_FALSE_POSITIVE_RATE`](crate::DEFAULT_FALSE_POSITIVE_RATE),
/// 0.1%), a random seed; about 2 MB.
///
/// # Panics
///
/// If the bits cannot be allocated, like `Vec::with_capacity`.
///
/// ```
/// let f = koel::BloomFilter::default();
/// assert_eq!(f.capacity(), koel::DEFAULT_CAPACITY);
/// assert_eq!(f.target_false_positive_rate(), koel::DEFAULT_FALSE_POSITIVE_RATE);
/// ```
impl Default for BloomFilter {
    fn default() -> Self {
        BloomFilter::with_capacity(crate::DEFAULT_CAPACITY)
    }
}

/// Keys buffered per `insert_many` call by `Extend`, for prefetching.
const EXTEND_CHUNK: usize = 1024;

/// The body of both `Extend` impls.
fn extend<K: Hash>(filter: &BloomFilter, items: impl IntoIterator<Item = K>) {
    let mut buf = Vec::with_capacity(EXTEND_CHUNK);
    for k in items {
        buf.push(k);
        if buf.len() == EXTEND_CHUNK {
            filter.insert_many(&buf);
            buf.clear();
        }
    }
    filter.insert_many(&buf);
}

/// Inserts every item, as [`insert`](BloomFilter::insert) does (a key
/// given twice is the same as once). Never fails and never panics: past
/// its capacity a Bloom filter's false-positive rate rises instead.
///
/// ```
/// let mut f = koel::BloomFilter::with_capacity(1000);
/// f.extend(0..500u32);
/// assert!((0..500u32).all(|k| f.contains(&k)));
/// ```
impl<K: Hash> Extend<K> for BloomFilter {
    fn extend<I: IntoIterator<Item = K>>(&mut self, items: I) {
        extend(self, items)
    }
}

/// `Extend` on a shared filter, e.g. one behind an `Arc`: the same as on
/// the owned filter.
///
/// ```
/// use std::sync::Arc;
///
/// let f = Arc::new(koel::BloomFilter::with_capacity(1000));
/// (&*f).extend(["a", "b", "c"]);
/// assert!(f.contains("b"));
/// ```
impl<K: Hash> Extend<K> for &BloomFilter {
    fn extend<I: IntoIterator<Item = K>>(&mut self, items: I) {
        extend(self, items)
    }
}

/// A filter holding every item, sized for their number at the default
/// false-positive rate
/// ([`DEFAULT_FALSE_POSITIVE_RATE`](crate::DEFAULT_FALSE_POSITIVE_RATE),
/// 0.1%), with a random seed. The keys are hashed first (8 bytes each are
/// buffered, not the keys), so the filter is sized for the number of keys
/// given, counting repeats.
///
/// # Panics
///
/// If the bits cannot be allocated, like `Vec`'s `FromIterator`.
///
/// ```
/// let f: koel::BloomFilter = (0..10_000u64).collect();
/// assert_eq!(f.capacity(), 10_000);
/// assert!((0..10_000u64).all(|k| f.contains(&k)));
/// ```
impl<K: Hash> FromIterator<K> for BloomFilter {
    fn from_iter<I: IntoIterator<Item = K>>(items: I) -> Self {
        let seed = KeyHasher::random_seed();
        let hasher = KeyHasher::with_algorithm(seed, HashAlgorithm::Xxh3);
        let hashes: Vec<u64> = items.into_iter().map(|k| hasher.hash(&k)).collect();
        let f = match BloomFilter::builder()
            .capacity(hashes.len().max(1))
            .seed(seed)
            .build()
        {
            Ok(f) => f,
            Err(e) => panic!("BloomFilter::from_iter({} items): {e}", hashes.len()),
        };
        for h in hashes {
            f.insert_hash(h);
        }
        f
    }
}

#[cfg(all(feature = "rayon", not(loom)))]
mod parallel {
    use super::BloomFilter;
    use rayon::iter::{IntoParallelIterator, ParallelExtend, ParallelIterator};
    use std::hash::Hash;

    /// The body of both `ParallelExtend` impls.
    fn par_extend<K: Hash + Send>(
        filter: &BloomFilter,
        items: impl IntoParallelIterator<Item = K>,
    ) {
        items.into_par_iter().for_each(|k| {
            filter.insert(&k);
        });
    }

    /// Inserts every item on the rayon thread pool, as
    /// [`insert`](BloomFilter::insert) does. Never fails.
    ///
    /// ```
    /// use rayon::prelude::*;
    ///
    /// let mut f = koel::BloomFilter::with_capacity(100_000);
    /// f.par_extend((0..50_000u64).into_par_iter());
    /// assert!((0..50_000u64).all(|k| f.contains(&k)));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    impl<K: Hash + Send> ParallelExtend<K> for BloomFilter {
        fn par_extend<I: IntoParallelIterator<Item = K>>(&mut self, items: I) {
            par_extend(self, items)
        }
    }

    /// `ParallelExtend` on a shared filter, e.g. one behind an `Arc`.
    ///
    /// ```
    /// use rayon::prelude::*;
    /// use std::sync::Arc;
    ///
    /// let f = Arc::new(koel::BloomFilter::with_capacity(100_000));
    /// (&*f).par_extend((0..50_000u64).into_par_iter());
    /// assert!((0..50_000u64).all(|k| f.contains(&k)));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    impl<K: Hash + Send> ParallelExtend<K> for &BloomFilter {
        fn par_extend<I: IntoParallelIterator<Item = K>>(&mut self, items: I) {
            par_extend(self, items)
        }
    }
}
