//! Batch operations: one writer announcement and software prefetch across
//! many keys.

use super::levels::Level;
use super::{with_layout, CuckooFilter};
use crate::error::InsertError;
use crate::raw::batch;
use crate::raw::ops::{self, InsertFailure, Sealed, Search};
use crate::raw::table::Table;

use std::convert::Infallible;
use std::fmt;
use std::hash::Hash;

/// A batch insert could not insert every key: the one error of
/// [`insert_many`](CuckooFilter::insert_many),
/// [`insert_unique_many`](CuckooFilter::insert_unique_many) and (feature
/// `rayon`) `par_insert` and `par_insert_unique`.
///
/// What went in when it fails:
///
/// * sequential calls (`insert_many`, `insert_unique_many`) apply the keys
///   in order and stop at the first failure: every key before
///   `keys[failed_at]` was applied (inserted, or for `insert_unique_many`
///   found present), `keys[failed_at]` was not, and none after it was
///   attempted;
/// * parallel calls split the keys into chunks that run at once, each
///   stopping at its own first failure: `failed_at` is the lowest failed
///   index, and the keys that went in are not a prefix of the input
///   (other chunks ran to their end or their own first failure).
///
/// In both, `inserted` keys were added by this call, and nothing was
/// changed for the failed key. More fields may be added
/// (`#[non_exhaustive]`).
///
/// ```
/// let f = koel::CuckooFilter::builder()
///     .capacity(1000)
///     .growth(koel::Growth::Fixed)
///     .build()?;
/// let keys: Vec<u32> = (0..100_000).collect();
/// let err = f.insert_many(&keys).unwrap_err();
/// assert_eq!(err.inserted, err.failed_at); // in order: a prefix went in
/// assert_eq!(f.len(), err.inserted);
/// assert!(keys[..err.failed_at].iter().all(|k| f.contains(k)));
/// # Ok::<(), koel::BuildError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct BatchInsertError {
    /// Keys this call added to the filter. For `insert_many` it equals
    /// `failed_at`; for the `*_unique_*` calls keys found present do not
    /// count.
    pub inserted: usize,
    /// Index in the input of the key that failed (the lowest such index
    /// for the parallel calls).
    pub failed_at: usize,
    /// Why `keys[failed_at]` failed.
    pub error: InsertError,
}

impl BatchInsertError {
    /// `keys[failed_at]` failed with `error` after `inserted` keys went in.
    pub(crate) fn new(inserted: usize, failed_at: usize, error: InsertError) -> Self {
        BatchInsertError {
            inserted,
            failed_at,
            error,
        }
    }
}

impl fmt::Display for BatchInsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "batch insert stopped at key {} with {} keys inserted: {}",
            self.failed_at, self.inserted, self.error
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
        // Loaded once: a level published during the call holds only keys
        // inserted during it.
        let leveled = self.upper.exists();
        let _ = with_layout!(self, L => batch::for_each::<L, Infallible>(t, 0, keys.len(), hash, |i, at| {
            out[i] = match ops::contains::<L>(t, at) {
                Ok(found) => found || (leveled && self.contains_above(hash(i))),
                // The table is migrating: this key takes the general path.
                Err(Sealed) => self.contains_in(|_| hash(i)),
            };
            Ok(())
        }));
    }

    /// Inserts every key, in order, like [`insert`](Self::insert) in a loop
    /// but with one writer announcement and prefetching.
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
        // Keys this call added, for the error.
        let added = std::cell::Cell::new(0);
        let mut done = |i: usize, inserted: bool| {
            added.set(added.get() + usize::from(inserted));
            done(i, inserted);
        };
        let mut start = 0;
        let mut refused = None;
        while start < keys.len() {
            if self.upper.get().is_some() {
                return self.insert_leveled_batch(keys, start, unique, &added, &mut done);
            }
            let t = self.table();
            let table_before = t as *const Table;
            let stopped = if t.migration().is_some() {
                Err(start)
            } else {
                with_layout!(self, L => batch::for_each::<L, usize>(t, start, keys.len(), hash, |i, at| {
                    let above = || self.contains_above(hash(i));
                    match ops::insert::<L>(t, at, unique, above, Search::UnlessHinted, &self.counters) {
                        Ok(inserted) => {
                            done(i, inserted);
                            Ok(())
                        }
                        Err(InsertFailure::Sealed) => Err(i),
                        // A level appeared since the batch began: the key
                        // goes where a single insert would put it (below).
                        Err(_) if self.upper.get().is_some() => Err(i),
                        Err(failure) => {
                            // Start the doubling (or learn why not) here, so
                            // the general path below does not search again.
                            match self.after_insert_failure(t, at, hash(i), unique, failure) {
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
                return Err(BatchInsertError::new(added.get(), i, error));
            }
            let inserted = match self.insert_in(|_| hash(i), unique, &pin) {
                Ok(inserted) => inserted,
                Err(error) => return Err(BatchInsertError::new(added.get(), i, error)),
            };
            done(i, inserted);
            start = i + 1;
            // A table replaced during this batch has its pages released
            // only once no write announced before its replacement remains:
            // announce anew, so a long batch through several doublings does
            // not keep them.
            if !std::ptr::eq(self.table(), table_before) {
                pin.renew();
            }
        }
        Ok(())
    }

    /// The rest of a batch from `start` on a filter with levels, each key
    /// as a single insert would take it ([`insert_leveled`](Self::insert_leveled)):
    /// first trying this level, whose table may not grow, would count a
    /// refused growth and a failed insert for every key.
    #[cold]
    fn insert_leveled_batch<K: Hash>(
        &self,
        keys: &[K],
        start: usize,
        unique: bool,
        added: &std::cell::Cell<usize>,
        done: &mut dyn FnMut(usize, bool),
    ) -> Result<(), BatchInsertError> {
        if let (false, Level::Table(newest)) = (unique, self.newest()) {
            // Plain keys go to the newest level (a doubling one), as a
            // batch of its own. (`dyn`: the closure would otherwise nest
            // one type per call.) A region level takes them one by one.
            let shifted: &mut dyn FnMut(usize, bool) = &mut |i, new| done(start + i, new);
            let rest = newest.insert_batch(&keys[start..], false, shifted);
            return rest
                .map_err(|e| BatchInsertError::new(added.get(), start + e.failed_at, e.error));
        }
        for (i, key) in keys.iter().enumerate().skip(start) {
            match self.insert_leveled(self.hash(key), unique) {
                Ok(inserted) => done(i, inserted),
                Err(error) => return Err(BatchInsertError::new(added.get(), i, error)),
            }
        }
        Ok(())
    }
}
