//! One shape for both filter kinds, so the CLI, the benchmarks and user code
//! can be generic over them (or hold a `Box<dyn Filter>`).

use crate::error::InsertError;

/// Which kind of filter a [`Filter`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FilterKind {
    /// [`CuckooFilter`](crate::CuckooFilter): inserts, removes, counts.
    Cuckoo,
    /// A blocked Bloom filter: inserts only.
    Bloom,
}

impl FilterKind {
    /// The kind's lower-case name (`"cuckoo"`, `"bloom"`).
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::Cuckoo => "cuckoo",
            FilterKind::Bloom => "bloom",
        }
    }
}

/// The operations every koel filter shares, on pre-hashed keys.
///
/// Object-safe: keys are hashed once with [`hash_bytes`](Self::hash_bytes)
/// (or the concrete type's generic `hash`), and the `*_hash` methods take
/// that hash. The inherent methods of each filter offer the same operations
/// on any `K: Hash` key and more (batches, pinning, statistics).
///
/// ```
/// use koel::{CuckooFilter, Filter};
///
/// fn seen_before(filter: &dyn Filter, record: &[u8]) -> bool {
///     let hash = filter.hash_bytes(record);
///     !filter.insert_unique_hash(hash).expect("sized for the stream")
/// }
///
/// let f = CuckooFilter::with_capacity(1000);
/// assert!(!seen_before(&f, b"a"));
/// assert!(seen_before(&f, b"a"));
/// ```
pub trait Filter: Send + Sync {
    /// Which kind of filter this is.
    fn kind(&self) -> FilterKind;

    /// The hash of the byte string `bytes` under this filter's seed: the
    /// same value as the concrete type's `hash(bytes)`.
    fn hash_bytes(&self, bytes: &[u8]) -> u64;

    /// Adds one item. A cuckoo filter stores one more copy (it is a
    /// multiset); a Bloom filter sets the item's bits.
    ///
    /// # Errors
    ///
    /// An [`InsertError`] if the filter cannot take the item; it is then
    /// unchanged.
    fn insert_hash(&self, hash: u64) -> Result<(), InsertError>;

    /// Adds the item unless it is (probably) present: `Ok(true)` if it was
    /// new. Exact for the cuckoo filter (one winner per key, even under
    /// races); approximate for a Bloom filter (see its docs).
    ///
    /// # Errors
    ///
    /// As [`insert_hash`](Self::insert_hash).
    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError>;

    /// `false` if the item is definitely absent, `true` if probably present.
    fn contains_hash(&self, hash: u64) -> bool;

    /// Removes one copy: `Some(true)` if one was found, `Some(false)` if
    /// not, `None` if this kind cannot remove (Bloom).
    fn remove_hash(&self, hash: u64) -> Option<bool>;

    /// Items stored. A cuckoo filter reads its counter (O(1); exact
    /// without concurrent writers). A Bloom filter has no counter: this is
    /// [`BloomFilter::len_estimate`](crate::BloomFilter::len_estimate),
    /// which reads the whole bit array (O(memory), about a millisecond per
    /// 10 MB); the Bloom filter has no inherent `len` for that reason.
    fn len(&self) -> usize;

    /// Whether [`len`](Self::len) is 0.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of heap memory the filter's tables use.
    fn memory_usage(&self) -> usize;

    /// Expected false-positive rate at the current fill.
    fn false_positive_rate(&self) -> f64;

    /// Removes every item.
    fn clear(&self);
}

impl Filter for crate::CuckooFilter {
    fn kind(&self) -> FilterKind {
        FilterKind::Cuckoo
    }

    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        self.hash(bytes)
    }

    fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        crate::CuckooFilter::insert_hash(self, hash)
    }

    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        crate::CuckooFilter::insert_unique_hash(self, hash)
    }

    fn contains_hash(&self, hash: u64) -> bool {
        crate::CuckooFilter::contains_hash(self, hash)
    }

    fn remove_hash(&self, hash: u64) -> Option<bool> {
        Some(crate::CuckooFilter::remove_hash(self, hash))
    }

    fn len(&self) -> usize {
        crate::CuckooFilter::len(self)
    }

    fn memory_usage(&self) -> usize {
        crate::CuckooFilter::memory_usage(self)
    }

    fn false_positive_rate(&self) -> f64 {
        crate::CuckooFilter::false_positive_rate(self)
    }

    fn clear(&self) {
        crate::CuckooFilter::clear(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::CuckooFilter;

    #[test]
    fn cuckoo_through_the_trait_object_matches_inherent_calls() {
        let f = CuckooFilter::builder()
            .capacity(1000)
            .seed(7)
            .build()
            .unwrap();
        let dynf: &dyn Filter = &f;
        assert_eq!(dynf.kind(), FilterKind::Cuckoo);
        let h = dynf.hash_bytes(b"key");
        assert_eq!(
            h,
            f.hash(&b"key"[..]),
            "hash_bytes is the inherent hash of a byte slice"
        );
        assert!(!dynf.contains_hash(h));
        assert_eq!(dynf.insert_unique_hash(h), Ok(true));
        assert_eq!(dynf.insert_unique_hash(h), Ok(false));
        dynf.insert_hash(h).unwrap();
        assert_eq!(f.count_hash(h), 2);
        assert_eq!(dynf.len(), 2);
        assert_eq!(dynf.remove_hash(h), Some(true));
        assert!(dynf.contains_hash(h));
        assert!(dynf.memory_usage() >= f.capacity() / 4 * 8);
        dynf.clear();
        assert!(dynf.is_empty());
        assert!(!dynf.contains_hash(h));
    }
}
