//! The filters of a `koel dedup --state`: one cuckoo filter, or a chain of
//! them as earlier versions of koel saved a state that had no room for a
//! run (before a filter could grow past its tag bits by levels).
//!
//! A chain is read as one filter (`query`) and continued (`dedup
//! --state`): a key is maybe present if any filter holds it; the older
//! filters are only read, new keys go to the newest, which grows by levels
//! under the false-positive bound it was saved with. Every filter has the
//! same seed and tag width (the file reader checks it), so a key has one
//! hash, and one tag, in all of them. A chain of one filter is that filter:
//! every call goes to it, and it saves as a plain filter file.
//!
//! `insert_unique` has exactly one winner per key: the older filters never
//! change, so "an older filter holds it" is settled, and the newest
//! filter's own `insert_unique` decides the rest.

use crate::filters::{CliFilter, Snapshot};
use koel::{CuckooFilter, Filter, FilterKind, InsertError};

/// Filters that answer as one; see the module docs.
pub struct Chain {
    /// Oldest first; at least one.
    filters: Vec<CuckooFilter>,
}

impl Chain {
    /// The chain of `filters` (at least one, hashing alike, as
    /// `filter_file::load` returns them), oldest first.
    pub fn new(filters: Vec<CuckooFilter>) -> Self {
        assert!(!filters.is_empty(), "a chain has a filter");
        Chain { filters }
    }

    /// Every filter, oldest first (to save them).
    pub fn filters(&self) -> &[CuckooFilter] {
        &self.filters
    }

    /// The newest filter, which takes the inserts, and the older ones.
    fn split(&self) -> (&CuckooFilter, &[CuckooFilter]) {
        self.filters.split_last().expect("a chain has a filter")
    }

    /// The false-positive rate the chain may reach: the older filters'
    /// rates (final) plus the newest's bound, which its growth keeps.
    pub fn bound(&self) -> f64 {
        let (newest, older) = self.split();
        older.iter().map(|f| f.false_positive_rate()).sum::<f64>()
            + newest.max_false_positive_rate()
    }
}

impl Filter for Chain {
    fn kind(&self) -> FilterKind {
        FilterKind::Cuckoo
    }

    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        Filter::hash_bytes(self.split().0, bytes)
    }

    fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        self.split().0.insert_hash(hash)
    }

    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        let (newest, older) = self.split();
        if older.iter().any(|f| f.contains_hash(hash)) {
            return Ok(false);
        }
        newest.insert_unique_hash(hash)
    }

    fn contains_hash(&self, hash: u64) -> bool {
        self.filters.iter().any(|f| f.contains_hash(hash))
    }

    fn remove_hash(&self, hash: u64) -> Option<bool> {
        Some(self.filters.iter().rev().any(|f| f.remove_hash(hash)))
    }

    fn len(&self) -> usize {
        self.filters.iter().map(CuckooFilter::len).sum()
    }

    fn memory_usage(&self) -> usize {
        self.filters.iter().map(CuckooFilter::memory_usage).sum()
    }

    fn false_positive_rate(&self) -> f64 {
        self.snapshot().false_positive_rate
    }

    fn clear(&self) {
        self.filters.iter().for_each(CuckooFilter::clear);
    }
}

impl CliFilter for Chain {
    fn snapshot(&self) -> Snapshot {
        if let [only] = &self.filters[..] {
            return only.snapshot();
        }
        let mut total = Snapshot::default();
        let mut slots = 0;
        for one in self.filters.iter().map(CliFilter::snapshot) {
            total.len += one.len;
            slots += one.slots.unwrap_or(0);
            total.memory_bytes += one.memory_bytes;
            total.false_positive_rate += one.false_positive_rate;
            total.generation += one.generation;
        }
        total.false_positive_rate = total.false_positive_rate.min(1.0);
        total.slots = Some(slots);
        total.load_factor = Some(total.len as f64 / slots.max(1) as f64);
        total
    }

    fn insert_unique_batch(&self, keys: &[&[u8]], out: &mut [bool]) -> Result<(), InsertError> {
        match &self.filters[..] {
            // The common case, with the batch path's prefetching.
            [only] => only.insert_unique_batch(keys, out),
            _ => {
                for (key, new) in keys.iter().zip(out.iter_mut()) {
                    *new = self.insert_unique_hash(self.hash_bytes(key))?;
                }
                Ok(())
            }
        }
    }

    fn describe(&self) -> String {
        let one = self.split().0.describe();
        match self.filters.len() {
            1 => one,
            n => format!("{n} chained filters ({one})"),
        }
    }

    #[inline]
    fn owner(&self, hash: u64, parts: usize) -> usize {
        self.split().0.owner(hash, parts)
    }
}
