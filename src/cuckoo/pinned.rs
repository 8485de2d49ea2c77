//! Epoch pins for writers: one per operation ([`WriterPin`]), or one for
//! many ([`Pinned`]).

use super::CuckooFilter;
use crate::error::InsertError;
use crate::sync::epoch;
use std::fmt;
use std::hash::Hash;

/// What a writer holds while it may write bucket words without a stripe:
/// an epoch pin, which keeps a table it loaded from having its pages
/// released under it (see `raw/tables.rs`). Empty on a
/// [`Growth::Fixed`](crate::Growth::Fixed) filter, whose table is never
/// replaced. Writers take it as an argument so that none can forget it.
pub(crate) struct WriterPin(Option<epoch::Guard>);

impl WriterPin {
    /// A pin if `needed`.
    #[inline(always)]
    pub(crate) fn new(needed: bool) -> WriterPin {
        WriterPin(needed.then(epoch::pin))
    }

    /// Unpins and pins again (if pinned), letting retired pages go.
    pub(crate) fn repin(&mut self) {
        if let Some(guard) = &mut self.0 {
            guard.repin();
        }
    }
}

/// The operations of a [`CuckooFilter`] under one epoch pin, from
/// [`CuckooFilter::pin`].
///
/// Every insert or remove on a growable filter pins the thread (so that a
/// table it writes is not released under it); pinning costs a full memory
/// barrier. A `Pinned` handle pays that once. Lookups never pin. Its
/// answers and guarantees are exactly those of the filter's own methods.
/// It cannot be sent to another thread.
#[must_use = "a Pinned handle does nothing unless its operations are called"]
pub struct Pinned<'f> {
    pub(super) filter: &'f CuckooFilter,
    pub(super) pin: WriterPin,
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
        self.filter.insert_in(hash, false, &self.pin).map(|_| ())
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
        self.filter.insert_in(hash, true, &self.pin)
    }

    /// See [`CuckooFilter::contains`].
    #[inline]
    pub fn contains<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.contains_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::contains_hash`].
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.filter.contains_in(hash)
    }

    /// See [`CuckooFilter::remove`].
    #[inline]
    pub fn remove<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.remove_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::remove_hash`].
    #[inline]
    pub fn remove_hash(&self, hash: u64) -> bool {
        self.filter.remove_in(hash, &self.pin)
    }

    /// See [`CuckooFilter::count`].
    #[inline]
    pub fn count<K: Hash + ?Sized>(&self, key: &K) -> usize {
        self.count_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::count_hash`].
    #[inline]
    pub fn count_hash(&self, hash: u64) -> usize {
        self.filter.count_in(hash)
    }

    /// Unpins and re-pins, letting retired memory be reclaimed; call it
    /// between long batches.
    pub fn repin(&mut self) {
        self.pin.repin();
    }

    /// The filter this handle operates on.
    pub fn filter(&self) -> &CuckooFilter {
        self.filter
    }
}

impl fmt::Debug for Pinned<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pinned")
            .field("filter", self.filter)
            .finish_non_exhaustive()
    }
}
