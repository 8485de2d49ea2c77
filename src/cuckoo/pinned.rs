//! What a writer holds for one operation ([`WriterPin`]), and the
//! [`Pinned`] handle kept from when writes pinned the thread.

use super::CuckooFilter;
use crate::error::InsertError;
use crate::raw::writers::{Writers, Writing};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

/// What a writer holds while it may write bucket words without a stripe:
/// its announcement, which keeps a table it loaded from having its pages
/// released under it (see `raw/writers.rs`). Empty on a
/// [`Growth::Fixed`](crate::Growth::Fixed) filter, whose table is never
/// replaced. Writers take it as an argument so that none can forget it.
pub(crate) struct WriterPin<'f>(Option<Writing<'f>>);

impl<'f> WriterPin<'f> {
    /// An announcement in `writers`, if given.
    #[inline(always)]
    pub(crate) fn new(writers: Option<&'f Writers>) -> WriterPin<'f> {
        WriterPin(writers.map(Writers::begin))
    }

    /// Ends this write and announces a new one, so that releases waiting
    /// for it can run (between the tables of a long batch).
    pub(crate) fn renew(&mut self) {
        if let Some(writing) = self.0.take() {
            let writers = writing.writers();
            drop(writing);
            self.0 = Some(writers.begin());
        }
    }
}

/// The operations of a [`CuckooFilter`], from [`CuckooFilter::pin`].
///
/// Writes used to pin the thread in crossbeam-epoch, a full memory
/// barrier per call, which this handle paid once for many. They no longer
/// pin (see the filter's design notes), so the handle is a plain view of
/// the filter: its answers, guarantees and costs are exactly those of the
/// filter's own methods. It cannot be sent to another thread.
#[must_use = "a Pinned handle does nothing unless its operations are called"]
pub struct Pinned<'f> {
    pub(super) filter: &'f CuckooFilter,
    /// Kept `!Send`, as it was.
    pub(super) _not_send: PhantomData<*const ()>,
}

impl Pinned<'_> {
    /// See [`CuckooFilter::insert`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert<K: Hash + ?Sized>(&self, key: &K) -> Result<(), InsertError> {
        self.filter.insert(key)
    }

    /// See [`CuckooFilter::insert_hash`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        self.filter.insert_hash(hash)
    }

    /// See [`CuckooFilter::insert_unique`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert_unique<K: Hash + ?Sized>(&self, key: &K) -> Result<bool, InsertError> {
        self.filter.insert_unique(key)
    }

    /// See [`CuckooFilter::insert_unique_hash`].
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`CuckooFilter::insert`].
    #[inline]
    pub fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        self.filter.insert_unique_hash(hash)
    }

    /// See [`CuckooFilter::contains`].
    #[inline]
    pub fn contains<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.filter.contains(key)
    }

    /// See [`CuckooFilter::contains_hash`].
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.filter.contains_hash(hash)
    }

    /// See [`CuckooFilter::remove`].
    #[inline]
    pub fn remove<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.remove_hash(self.filter.hash(key))
    }

    /// See [`CuckooFilter::remove_hash`].
    #[inline]
    pub fn remove_hash(&self, hash: u64) -> bool {
        self.filter.remove_hash(hash)
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

    /// Does nothing now that the handle holds no pin (it used to unpin
    /// and pin again, letting retired memory be reclaimed).
    pub fn repin(&mut self) {}

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
