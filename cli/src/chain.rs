//! The filters of a `koel dedup` run: one cuckoo filter, or a chain of
//! them. A filter grows by doubling and then by levels while its
//! false-positive bound allows; only when the newest filter may not grow
//! within its bound (a `--fpr` near the tag width's floor) is a new filter
//! chained after it, so that a run never stops halfway. Earlier versions
//! of koel also chained filters whenever a state had no room for a run
//! (before a filter could grow past its tag bits); such chains are read
//! and continued.
//!
//! A chain is read as one filter (`query`): a key is maybe present if any
//! filter holds it; the older filters are only read, new keys go to the
//! newest. Every filter has the same seed, tag width and hash algorithm
//! (the file reader checks it; a chained filter is built `hash_like` the
//! first), so a key has one hash, and one tag, in all of them. A chain
//! of one filter is that filter: every call goes to it, and it saves as a
//! plain filter file.
//!
//! `insert_unique` has exactly one winner per key: the older filters never
//! change, so "an older filter holds it" is settled, and the newest
//! filter's own `insert_unique` decides the rest. A key chained past the
//! newest filter by one thread while another inserts it is the one race
//! left: the dedup engine sends every occurrence of a key to one worker,
//! so it does not happen there.

use crate::filters::{full_load_rate, CliFilter, Snapshot};
use koel::{CuckooFilter, Filter, FilterKind, InsertError};
use std::sync::OnceLock;

/// Default bound on the false-positive rate of a dedup run: what 16-bit
/// tags reach after 64x growth; levels stay under it beyond that.
pub const DEFAULT_FPR_BUDGET: f64 = 1e-2;

/// Filters that answer as one; see the module docs.
pub struct Chain {
    first: Link,
    /// The bound of the chain's false-positive rate, which filters chained
    /// from now on share (`--fpr`).
    pub budget: f64,
}

/// One filter of a chain and the one chained after it, once there is one.
struct Link {
    filter: CuckooFilter,
    next: OnceLock<Box<Link>>,
}

impl Link {
    fn new(filter: CuckooFilter) -> Link {
        Link {
            filter,
            next: OnceLock::new(),
        }
    }
}

impl Chain {
    /// The chain of `filters` (at least one, hashing alike, as
    /// `filter_file::load` returns them), oldest first; filters chained
    /// later share `budget`.
    pub fn new(filters: Vec<CuckooFilter>, budget: f64) -> Self {
        let mut filters = filters.into_iter().rev();
        let mut link = Link::new(filters.next().expect("a chain has a filter"));
        for older in filters {
            let newer = std::mem::replace(&mut link, Link::new(older));
            let _ = link.next.set(Box::new(newer));
        }
        Chain {
            first: link,
            budget,
        }
    }

    fn links(&self) -> impl Iterator<Item = &Link> {
        std::iter::successors(Some(&self.first), |l| l.next.get().map(|n| &**n))
    }

    /// Every filter, oldest first (to save them).
    pub fn filters(&self) -> Vec<&CuckooFilter> {
        self.links().map(|l| &l.filter).collect()
    }

    /// The newest filter's link, which takes the inserts.
    fn newest(&self) -> &Link {
        self.links().last().expect("a chain has a filter")
    }

    /// The filters older than `newest`.
    fn older<'a>(&'a self, newest: &'a Link) -> impl Iterator<Item = &'a CuckooFilter> {
        let older = self.links().take_while(move |l| !std::ptr::eq(*l, newest));
        older.map(|l| &l.filter)
    }

    /// The false-positive rate the chain may reach: the older filters'
    /// rates (final) plus the newest's bound, which its growth keeps.
    pub fn bound(&self) -> f64 {
        let newest = self.newest();
        let older: f64 = self.older(newest).map(|f| f.false_positive_rate()).sum();
        older + newest.filter.max_false_positive_rate()
    }

    /// After `newest` refused with `error`: the link chained after it (by
    /// this call or another thread's), or `error` if the refusal is not
    /// one a new filter cures, or none can be built. The new filter holds
    /// twice what the chain holds, and may reach what the budget has left
    /// (at least its own rate when full: past the budget, which the run's
    /// summary then says).
    fn chain_after<'a>(
        &'a self,
        newest: &'a Link,
        error: InsertError,
    ) -> Result<&'a Link, InsertError> {
        if !matches!(
            error,
            InsertError::FalsePositiveRateLimit { .. } | InsertError::Full
        ) {
            return Err(error);
        }
        if let Some(next) = newest.next.get() {
            return Ok(next);
        }
        let first = &self.first.filter;
        let bits = first.fingerprint_bits();
        let rates: f64 = self.links().map(|l| l.filter.false_positive_rate()).sum();
        let left = self.budget - rates;
        let rate = (left / 2.0).max(full_load_rate(bits) * 1.01);
        // Hashing as the first filter does (seed and algorithm): every key
        // of the chain is hashed once, by the first.
        let filter = CuckooFilter::builder()
            .capacity(self.len().saturating_mul(2).max(1024))
            .fingerprint_bits(bits)
            .hash_like(first)
            .max_false_positive_rate(rate.min(1.0))
            .build()
            .map_err(|_| error)?;
        Ok(newest.next.get_or_init(|| Box::new(Link::new(filter))))
    }

    /// `insert` into `newest`, and into the filter chained after each one
    /// that refuses.
    fn insert_into_newest<'a, R>(
        &'a self,
        mut newest: &'a Link,
        insert: impl Fn(&CuckooFilter) -> Result<R, InsertError>,
    ) -> Result<R, InsertError> {
        loop {
            match insert(&newest.filter) {
                Err(e) => newest = self.chain_after(newest, e)?,
                done => return done,
            }
        }
    }
}

impl Filter for Chain {
    fn kind(&self) -> FilterKind {
        FilterKind::Cuckoo
    }

    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        Filter::hash_bytes(&self.first.filter, bytes)
    }

    fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        self.insert_into_newest(self.newest(), |f| f.insert_hash(hash))
    }

    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        let newest = self.newest();
        if self.older(newest).any(|f| f.contains_hash(hash)) {
            return Ok(false);
        }
        // A refusing filter becomes an older one, and does not hold it.
        self.insert_into_newest(newest, |f| f.insert_unique_hash(hash))
    }

    fn contains_hash(&self, hash: u64) -> bool {
        self.links().any(|l| l.filter.contains_hash(hash))
    }

    fn remove_hash(&self, hash: u64) -> Option<bool> {
        Some(self.filters().iter().rev().any(|f| f.remove_hash(hash)))
    }

    fn len(&self) -> usize {
        self.links().map(|l| l.filter.len()).sum()
    }

    fn memory_usage(&self) -> usize {
        self.links().map(|l| l.filter.memory_usage()).sum()
    }

    fn false_positive_rate(&self) -> f64 {
        // The links' own rates (from their counts; a snapshot may scan).
        let sum: f64 = self.links().map(|l| l.filter.false_positive_rate()).sum();
        sum.min(1.0)
    }

    fn clear(&self) {
        self.links().for_each(|l| l.filter.clear());
    }
}

impl CliFilter for Chain {
    fn snapshot(&self) -> Snapshot {
        if let [only] = &self.filters()[..] {
            return only.snapshot();
        }
        let mut total = Snapshot::default();
        let mut slots = 0;
        for one in self.links().map(|l| l.filter.snapshot()) {
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
        let newest = self.newest();
        let mut done = 0;
        if std::ptr::eq(newest, &self.first) {
            // The common case, with the batch path's prefetching; keys
            // after one the filter refused go on one by one.
            match newest.filter.insert_unique_many(keys, out) {
                Ok(()) => return Ok(()),
                Err(e) => done = self.chain_after(newest, e.error).map(|_| e.failed_at)?,
            }
        }
        for (key, new) in keys.iter().zip(out.iter_mut()).skip(done) {
            *new = self.insert_unique_hash(self.hash_bytes(key))?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        let one = self.newest().filter.describe();
        match self.links().count() {
            1 => one,
            n => format!("{n} chained filters ({one})"),
        }
    }

    #[inline]
    fn owner(&self, hash: u64, parts: usize) -> usize {
        self.first.filter.owner(hash, parts)
    }
}
