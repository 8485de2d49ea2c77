//! A filter handle that keeps the thread pinned across many operations.

use super::CuckooFilter;
use crate::error::InsertError;
use crate::sync::epoch;
use std::fmt;
use std::hash::Hash;

/// The operations of a [`CuckooFilter`] under one epoch pin, from
/// [`CuckooFilter::pin`].
///
/// Every `CuckooFilter` call pins the thread (so the table it reads cannot
/// be freed under it); pinning costs a full memory barrier, which also stops
/// the CPU from overlapping one lookup's cache misses with the next. A
/// `Pinned` handle pays that once. Its answers and guarantees are exactly
/// those of the filter's own methods. It cannot be sent to another thread.
pub struct Pinned<'f> {
    pub(super) filter: &'f CuckooFilter,
    pub(super) guard: epoch::Guard,
}

impl Pinned<'_> {
    /// See [`CuckooFilter::insert`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert<K: Hash + ?Sized>(&self, key: &K) -> Result<(), InsertError> {
        self.insert_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::insert_hash`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        self.filter.insert_in(hash, false, &self.guard).map(|_| ())
    }

    /// See [`CuckooFilter::insert_unique`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert_unique<K: Hash + ?Sized>(&self, key: &K) -> Result<bool, InsertError> {
        self.insert_unique_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::insert_unique_hash`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        self.filter.insert_in(hash, true, &self.guard)
    }

    /// See [`CuckooFilter::contains`].
    #[inline]
    pub fn contains<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.contains_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::contains_hash`].
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.filter.contains_in(hash, &self.guard)
    }

    /// See [`CuckooFilter::remove`].
    #[inline]
    pub fn remove<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.remove_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::remove_hash`].
    #[inline]
    pub fn remove_hash(&self, hash: u64) -> bool {
        self.filter.remove_in(hash, &self.guard)
    }

    /// See [`CuckooFilter::count`].
    #[inline]
    pub fn count<K: Hash + ?Sized>(&self, key: &K) -> usize {
        self.count_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::count_hash`].
    #[inline]
    pub fn count_hash(&self, hash: u64) -> usize {
        self.filter.count_in(hash, &self.guard)
    }

    /// Unpins and re-pins, letting retired memory be reclaimed; call it
    /// between long batches.
    pub fn repin(&mut self) {
        self.guard.repin();
    }

    /// The filter this handle operates on.
    pub fn filter(&self) -> &CuckooFilter {
        self.filter
    }

    /// Loom models only: the address of the filter's current table, as
    /// seen under this handle's guard.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_table_addr(&self) -> usize {
        self.filter.table(&self.guard) as *const _ as usize
    }
}

impl fmt::Debug for Pinned<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pinned")
            .field("filter", self.filter)
            .finish_non_exhaustive()
    }
}
