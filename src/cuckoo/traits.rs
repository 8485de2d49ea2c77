//! The standard traits: `Clone` (a consistent copy, also while other
//! threads write), `Default`, `Extend` and `FromIterator`, and (feature
//! `rayon`) `ParallelExtend`.
//!
//! `Extend` is implemented for `&CuckooFilter` as well as for the owned
//! filter: a shared filter lives behind an `Arc`, which gives no `&mut`.

use super::{with_layout_kind, BatchInsertError, CuckooFilter, DEFAULT_CAPACITY};
use crate::error::InsertError;
use crate::raw::bucket::{self};
use crate::raw::geometry::Geometry;
use crate::raw::table::Table;
use crate::sync::{AtomicU64, Ordering::Relaxed};
use std::hash::Hash;

/// A consistent copy: the same layout, seed, growth settings and items.
///
/// The copy holds every item whose insert completed before `clone` began
/// and that no remove completed before it began took; an insert or remove
/// racing the clone may or may not be in it. Its [`len`](CuckooFilter::len)
/// is the number of items it holds, counted from its table. It is taken as
/// [`write_to`](CuckooFilter::write_to) takes its snapshot: a doubling under
/// way is finished first, then every bucket-pair stripe is held (frozen:
/// lookups and inserts into free slots go on; removes, displacements and
/// `insert_unique` wait) while the words are copied. Operation statistics
/// ([`stats`](CuckooFilter::stats)) start from zero in the copy.
///
/// # Panics
///
/// If the copy's table cannot be allocated, like `Vec::clone`. The table
/// is allocated before the stripes are taken.
///
/// ```
/// let f = koel::CuckooFilter::with_capacity(1000);
/// f.insert("a")?;
/// let g = f.clone();
/// f.insert("b")?;
/// assert!(g.contains("a"));
/// assert_eq!((f.len(), g.len()), (2, 1));
/// assert_eq!(g.seed(), f.seed());
/// # Ok::<(), koel::InsertError>(())
/// ```
impl Clone for CuckooFilter {
    fn clone(&self) -> Self {
        let mut geo = *self.table().geometry();
        loop {
            let table = match Table::new(geo) {
                Ok(t) => t,
                Err(e) => panic!("CuckooFilter::clone: cannot allocate {} bytes", e.bytes),
            };
            // The geometry the snapshot holds: a doubling finished since
            // the allocation means a larger table (rare; allocate again).
            let copied = self.with_snapshot(|view| {
                if (view.m0, view.generation) != (geo.m0(), geo.generation()) {
                    return Err(Geometry::new(view.m0, view.generation, geo.addressing()));
                }
                Ok(with_layout_kind!(view.layout, L => copy_words::<L>(view.words, table.words())))
            });
            match copied {
                Ok(items) => {
                    return CuckooFilter::assemble(
                        table,
                        self.layout,
                        self.hasher.clone(),
                        self.policy,
                        self.upper.deep_clone(),
                        items as u64,
                    );
                }
                Err(grown) => geo = grown,
            }
        }
    }
}

/// Copies `from` into the unshared `to`, word by word; returns the
/// occupied slots copied.
fn copy_words<L: bucket::Layout>(from: &[AtomicU64], to: &[AtomicU64]) -> usize {
    debug_assert_eq!(from.len(), to.len());
    from.iter()
        .zip(to)
        .map(|(src, dst)| {
            // Relaxed: the snapshot's stripe holds (Acquire) order every
            // move and remove before this load, as in `write_to`; a plain
            // insert racing it may or may not be seen. Each word is loaded
            // once, so the count agrees with what was copied. `to` is not
            // shared yet; publishing the filter orders these stores.
            let w = src.load(Relaxed);
            dst.store(w, Relaxed);
            bucket::occupied::<L>(w) as usize
        })
        .sum()
}

/// [`CuckooFilter::with_capacity`]`(`[`DEFAULT_CAPACITY`]`)`: the default
/// layout (16-bit tags), a random seed, room for 1,048,576 items (about
/// 2.2 MB), growth on.
///
/// # Panics
///
/// If the table cannot be allocated, like `Vec::with_capacity`.
///
/// ```
/// let f = koel::CuckooFilter::default();
/// assert!(f.capacity() >= koel::DEFAULT_CAPACITY);
/// assert!(f.is_empty());
/// ```
impl Default for CuckooFilter {
    fn default() -> Self {
        CuckooFilter::with_capacity(DEFAULT_CAPACITY)
    }
}

/// Keys buffered per `insert_many` call by `Extend`.
const EXTEND_CHUNK: usize = 1024;

/// The body of both `Extend` impls.
fn extend<K: Hash>(filter: &CuckooFilter, items: impl IntoIterator<Item = K>) {
    let mut buf = Vec::with_capacity(EXTEND_CHUNK);
    let flush = |buf: &mut Vec<K>| {
        if let Err(e) = filter.insert_many(buf) {
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

/// Inserts every item, as [`insert`](CuckooFilter::insert) does: a key
/// given twice is stored twice. Keys are buffered and inserted with
/// [`insert_many`](CuckooFilter::insert_many), 1024 at a time.
///
/// The table grows as for [`insert`](CuckooFilter::insert) (with the
/// default [`Growth::Double`](crate::Growth::Double)).
///
/// # Panics
///
/// `Extend` cannot report errors, so an insert that fails (a
/// [`Growth::Fixed`](crate::Growth::Fixed) filter that is full, growth
/// stopped by its false-positive or memory limit, or a key with too many
/// copies) panics with a message naming
/// [`insert_many`](CuckooFilter::insert_many), the fallible alternative.
/// Items inserted before the panic stay in the filter.
///
/// ```
/// let mut f = koel::CuckooFilter::with_capacity(1000);
/// f.extend(0..500u32);
/// assert_eq!(f.len(), 500);
/// assert!(f.contains(&499u32));
/// ```
impl<K: Hash> Extend<K> for CuckooFilter {
    fn extend<I: IntoIterator<Item = K>>(&mut self, items: I) {
        extend(self, items)
    }
}

/// `Extend` on a shared filter, e.g. one behind an `Arc`: the same as on
/// the owned filter (see there for growth and `# Panics`).
///
/// ```
/// use std::sync::Arc;
///
/// let f = Arc::new(koel::CuckooFilter::with_capacity(1000));
/// (&*f).extend(["a", "b", "c"]);
/// assert!(f.contains("b"));
/// assert_eq!(f.len(), 3);
/// ```
impl<K: Hash> Extend<K> for &CuckooFilter {
    fn extend<I: IntoIterator<Item = K>>(&mut self, items: I) {
        extend(self, items)
    }
}

/// A filter with the default layout and a random seed holding every item
/// (a key given twice is stored twice), sized for the number of items.
///
/// The items are collected first, so the table is sized exactly for them
/// and does not need to grow (a grown table spends tag bits: a higher
/// false-positive rate). Should an insert still fail, the filter is
/// rebuilt an eighth larger until they all fit. The built filter has
/// growth on ([`Growth::Double`](crate::Growth::Double)), like
/// [`with_capacity`](CuckooFilter::with_capacity).
///
/// # Panics
///
/// If the table cannot be allocated, like `Vec`'s `FromIterator`, or if
/// one key occurs more than `2 * tags_per_bucket - 1` times (7), the most
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

#[cfg(all(feature = "rayon", not(loom)))]
mod parallel {
    use super::super::parallel::CHUNK;
    use super::CuckooFilter;
    use rayon::iter::{IntoParallelIterator, ParallelExtend, ParallelIterator};
    use std::hash::Hash;

    /// The body of both `ParallelExtend` impls.
    fn par_extend<K: Hash + Send>(
        filter: &CuckooFilter,
        items: impl IntoParallelIterator<Item = K>,
    ) {
        let flush = |buf: &[K]| {
            if let Err(e) = filter.insert_many(buf) {
                panic!(
                    "CuckooFilter::par_extend: {e}; use par_insert or insert_many to handle a full filter"
                );
            }
        };
        items
            .into_par_iter()
            .fold(Vec::new, |mut buf, k| {
                buf.push(k);
                if buf.len() == CHUNK {
                    flush(&buf);
                    buf.clear();
                }
                buf
            })
            .for_each(|buf| flush(&buf));
    }

    /// Inserts every item on the rayon thread pool (a key given twice is
    /// stored twice), buffering 4096 keys per worker and inserting each
    /// buffer with [`insert_many`](CuckooFilter::insert_many).
    ///
    /// The table grows as for [`insert`](CuckooFilter::insert).
    ///
    /// # Panics
    ///
    /// `ParallelExtend` cannot report errors, so an insert that fails (a
    /// full [`Growth::Fixed`](crate::Growth::Fixed) filter, or growth
    /// stopped by its limits) panics, naming
    /// [`par_insert`](CuckooFilter::par_insert) and
    /// [`insert_many`](CuckooFilter::insert_many), the fallible
    /// alternatives. Items inserted before the panic stay in the filter.
    ///
    /// ```
    /// use rayon::prelude::*;
    ///
    /// let mut f = koel::CuckooFilter::with_capacity(100_000);
    /// f.par_extend((0..50_000u64).into_par_iter());
    /// assert_eq!(f.len(), 50_000);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    impl<K: Hash + Send> ParallelExtend<K> for CuckooFilter {
        fn par_extend<I: IntoParallelIterator<Item = K>>(&mut self, items: I) {
            par_extend(self, items)
        }
    }

    /// `ParallelExtend` on a shared filter, e.g. one behind an `Arc`: the
    /// same as on the owned filter (see there for growth and `# Panics`).
    ///
    /// ```
    /// use rayon::prelude::*;
    /// use std::sync::Arc;
    ///
    /// let f = Arc::new(koel::CuckooFilter::with_capacity(100_000));
    /// (&*f).par_extend((0..50_000u64).into_par_iter());
    /// assert!((0..50_000u64).all(|k| f.contains(&k)));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    impl<K: Hash + Send> ParallelExtend<K> for &CuckooFilter {
        fn par_extend<I: IntoParallelIterator<Item = K>>(&mut self, items: I) {
            par_extend(self, items)
        }
    }
}
