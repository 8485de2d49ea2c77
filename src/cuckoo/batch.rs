//! Batch operations: one pin and software prefetch across many keys.

use super::{with_layout, CuckooFilter, LayoutKind};
use crate::error::InsertError;
use crate::raw::batch;
use crate::raw::bucket::{L12x5, L16x4};
use crate::raw::ops::{self, InsertFailure, Sealed, Search};
use crate::raw::table::Table;

use std::convert::Infallible;
use std::fmt;
use std::hash::Hash;

/// A batch insert stopped at a key that could not be inserted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchInsertError {
    /// Keys inserted before the failure: `keys[..inserted]` are in the
    /// filter, `keys[inserted]` is the key that failed, the rest were not
    /// attempted.
    pub inserted: usize,
    /// Why `keys[inserted]` failed.
    pub error: InsertError,
}

impl fmt::Display for BatchInsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "batch insert stopped after {} keys: {}",
            self.inserted, self.error
        )
    }
}

impl std::error::Error for BatchInsertError {}

impl CuckooFilter {
    /// `out[i] = self.contains(&keys[i])` for every `i`, faster: one pin
    /// for the batch, and both buckets of each key prefetched a few keys
    /// ahead so that cache misses overlap. Same guarantees per key as
    /// [`contains`](Self::contains).
    ///
    /// # Panics
    ///
    /// If `out.len() != keys.len()`.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(1000);
    /// f.insert_many(&[1u32, 2, 3]).unwrap();
    /// let mut out = [false; 4];
    /// f.contains_many(&[1u32, 2, 3, 4], &mut out);
    /// assert_eq!(out[..3], [true, true, true]);
    /// ```
    pub fn contains_many<K: Hash>(&self, keys: &[K], out: &mut [bool]) {
        assert_eq!(
            keys.len(),
            out.len(),
            "contains_many: keys and out differ in length"
        );
        let t = self.table();
        let hash = |i: usize| self.hash(&keys[i]);
        let _ = with_layout!(self, L => batch::for_each::<L, Infallible>(t, 0, keys.len(), hash, |i, at| {
            out[i] = match ops::contains::<L>(t, at) {
                Ok(found) => found,
                // The table is migrating: this key takes the general path.
                Err(Sealed) => self.contains_in(hash(i)),
            };
            Ok(())
        }));
    }

    /// Inserts every key, in order, like [`insert`](Self::insert) in a loop
    /// but with one pin and prefetching.
    ///
    /// # Errors
    ///
    /// Stops at the first key that cannot be inserted; the error says how
    /// many keys went in before it.
    pub fn insert_many<K: Hash>(&self, keys: &[K]) -> Result<(), BatchInsertError> {
        self.insert_batch(keys, false, |_, _| {})
    }

    /// [`insert_unique`](Self::insert_unique) for every key, in order:
    /// `out[i]` is `true` iff this call inserted `keys[i]` (a key repeated
    /// within the batch is inserted once).
    ///
    /// # Errors
    ///
    /// Stops at the first key that cannot be inserted, as
    /// [`insert_many`](Self::insert_many); `out` is filled up to it.
    ///
    /// # Panics
    ///
    /// If `out.len() != keys.len()`.
    pub fn insert_unique_many<K: Hash>(
        &self,
        keys: &[K],
        out: &mut [bool],
    ) -> Result<(), BatchInsertError> {
        assert_eq!(
            keys.len(),
            out.len(),
            "insert_unique_many: keys and out differ in length"
        );
        self.insert_batch(keys, true, |i, new| out[i] = new)
    }

    /// The loop under `insert_many` and `insert_unique_many`: prefetching
    /// runs over the current table; a key that needs more (a full table,
    /// a migration) takes the general path, and the batch then resumes on
    /// whatever table is current.
    fn insert_batch<K: Hash>(
        &self,
        keys: &[K],
        unique: bool,
        mut done: impl FnMut(usize, bool),
    ) -> Result<(), BatchInsertError> {
        let mut pin = self.writer_pin();
        let hash = |i: usize| self.hash(&keys[i]);
        let mut start = 0;
        let mut refused = None;
        while start < keys.len() {
            let t = self.table();
            let table_before = t as *const Table;
            let stopped = if t.migration().is_some() {
                Err(start)
            } else {
                with_layout!(self, L => batch::for_each::<L, usize>(t, start, keys.len(), hash, |i, at| {
                    match ops::insert::<L>(t, at, unique, Search::UnlessHinted, &self.counters) {
                        Ok(inserted) => {
                            done(i, inserted);
                            Ok(())
                        }
                        Err(InsertFailure::Sealed) => Err(i),
                        Err(failure) => {
                            // Start the doubling (or learn why not) here, so
                            // the general path below does not search again.
                            match self.after_insert_failure(t, at, unique, failure) {
                                Ok(Some(inserted)) => {
                                    done(i, inserted);
                                    Ok(())
                                }
                                Ok(None) => Err(i),
                                Err(error) => {
                                    refused = Some(error);
                                    Err(i)
                                }
                            }
                        }
                    }
                }))
            };
            let Err(i) = stopped else {
                break;
            };
            if let Some(error) = refused {
                return Err(BatchInsertError { inserted: i, error });
            }
            let inserted = self
                .insert_in(hash(i), unique, &pin)
                .map_err(|error| BatchInsertError { inserted: i, error })?;
            done(i, inserted);
            start = i + 1;
            // A table replaced during this batch has its pages released
            // only once no pin from before its replacement remains: re-pin,
            // so a long batch through several doublings does not keep them.
            if !std::ptr::eq(self.table(), table_before) {
                pin.repin();
            }
        }
        Ok(())
    }
}

/// Keys buffered per `insert_many` call by `Extend` and `FromIterator`.
const EXTEND_CHUNK: usize = 1024;

/// Inserts every item, buffering keys and inserting each buffer with
/// [`insert_many`](CuckooFilter::insert_many). Duplicates are stored as
/// copies, as with [`insert`](CuckooFilter::insert).
///
/// The table grows as for [`insert`](CuckooFilter::insert) (with the
/// default [`Growth::Double`](crate::Growth::Double)).
///
/// # Panics
///
/// `Extend` cannot report errors, so an insert that fails (a
/// [`Growth::Fixed`](crate::Growth::Fixed) filter that is full, or growth
/// stopped by its false-positive or memory limit) panics with a message
/// naming [`insert_many`](CuckooFilter::insert_many), the fallible
/// alternative. Items inserted before the panic stay in the filter.
///
/// ```
/// let mut f = koel::CuckooFilter::with_capacity(1000);
/// f.extend(0..500u32);
/// assert_eq!(f.len(), 500);
/// assert!(f.contains(&499u32));
/// ```
impl<K: Hash> Extend<K> for CuckooFilter {
    fn extend<I: IntoIterator<Item = K>>(&mut self, items: I) {
        let mut buf = Vec::with_capacity(EXTEND_CHUNK);
        let flush = |buf: &mut Vec<K>| {
            if let Err(e) = self.insert_many(buf) {
                panic!("CuckooFilter::extend: {e}; use insert_many to handle a full filter");
            }
            buf.clear();
        };
        for k in items {
            buf.push(k);
            if buf.len() == EXTEND_CHUNK {
                flush(&mut buf);
            }
        }
        flush(&mut buf);
    }
}

/// A filter with the default layout and a random seed holding every item
/// (duplicates as copies), sized for the number of items.
///
/// The items are collected first, so the table is sized exactly for them
/// and does not need to grow. Should an insert still fail, the filter is
/// rebuilt an eighth larger until they all fit.
///
/// # Panics
///
/// If the table cannot be allocated, like `Vec`'s `FromIterator`, or if
/// one key occurs more than `2 * tags_per_bucket` times (8), the most
/// copies a filter holds ([`InsertError::TooManyCopies`]). Use
/// [`builder`](CuckooFilter::builder) and
/// [`insert_many`](CuckooFilter::insert_many) to get errors instead.
///
/// ```
/// let f: koel::CuckooFilter = (0..10_000u64).collect();
/// assert_eq!(f.len(), 10_000);
/// assert!((0..10_000u64).all(|k| f.contains(&k)));
/// ```
impl<K: Hash> FromIterator<K> for CuckooFilter {
    fn from_iter<I: IntoIterator<Item = K>>(items: I) -> Self {
        let keys: Vec<K> = items.into_iter().collect();
        let mut capacity = keys.len().max(1);
        loop {
            let f = match CuckooFilter::builder().capacity(capacity).build() {
                Ok(f) => f,
                Err(e) => panic!("CuckooFilter::from_iter({} items): {e}", keys.len()),
            };
            match f.insert_many(&keys) {
                Ok(()) => return f,
                // A larger table would not hold it either.
                Err(
                    e @ BatchInsertError {
                        error: InsertError::TooManyCopies { .. },
                        ..
                    },
                ) => panic!("CuckooFilter::from_iter: {e}"),
                Err(_) => {}
            }
            capacity = capacity.saturating_add(capacity / 8 + 64);
        }
    }
}
