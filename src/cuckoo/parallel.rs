//! Parallel bulk operations on the rayon thread pool (feature `rayon`, on
//! by default).
//!
//! Each call splits its keys into chunks of [`CHUNK`] and runs the batch
//! operation of [`batch`](super::batch) on every chunk: one epoch pin and
//! software prefetch per chunk, chunks spread over rayon's workers. Every
//! key gets exactly the guarantees of the single operation; only the order
//! in which keys are applied is unspecified.

use super::CuckooFilter;
use crate::error::InsertError;
use rayon::iter::{
    IndexedParallelIterator, IntoParallelIterator, ParallelExtend, ParallelIterator,
};
use rayon::slice::{ParallelSlice, ParallelSliceMut};
use std::fmt;
use std::hash::Hash;

/// Keys per chunk: large enough that the pin and the prefetch warm-up of a
/// chunk are negligible, small enough to balance load over the workers.
pub(crate) const CHUNK: usize = 4096;

/// A parallel insert could not insert every key.
///
/// Chunks run in parallel and each stops at its first failed key, so the
/// keys that went in are not a prefix of the input: `inserted` of them are
/// in the filter, at least one failed, and the keys after a failure in its
/// chunk were not attempted. Other chunks ran to their end or their own
/// first failure.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ParInsertError {
    /// How many keys this call inserted.
    pub inserted: usize,
    /// Why a key failed (the first failure by key index).
    pub error: InsertError,
}

impl fmt::Display for ParInsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "parallel insert stopped with {} keys inserted: {}",
            self.inserted, self.error
        )
    }
}

impl std::error::Error for ParInsertError {}

/// What one chunk did: keys inserted, and its failure (chunk-absolute key
/// index first, so the reduction keeps the lowest).
type ChunkOutcome = (usize, Option<(usize, InsertError)>);

/// Sums inserted counts and keeps the failure with the lowest key index.
fn merge(a: ChunkOutcome, b: ChunkOutcome) -> ChunkOutcome {
    let failure = match (a.1, b.1) {
        (Some(x), Some(y)) => Some(if x.0 <= y.0 { x } else { y }),
        (x, y) => x.or(y),
    };
    (a.0 + b.0, failure)
}

fn finish((inserted, failure): ChunkOutcome) -> Result<(), ParInsertError> {
    match failure {
        None => Ok(()),
        Some((_, error)) => Err(ParInsertError { inserted, error }),
    }
}

impl CuckooFilter {
    /// `out[i] = self.contains(&keys[i])` for every `i`, computed on the
    /// rayon thread pool: [`contains_many`](Self::contains_many) per chunk
    /// of keys. Same guarantees per key as [`contains`](Self::contains).
    ///
    /// # Panics
    ///
    /// If `out.len() != keys.len()`.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(100_000);
    /// let keys: Vec<u64> = (0..50_000).collect();
    /// f.par_insert(&keys).unwrap();
    /// let mut out = vec![false; keys.len()];
    /// f.par_contains(&keys, &mut out);
    /// assert!(out.iter().all(|&b| b));
    /// ```
    pub fn par_contains<K: Hash + Sync>(&self, keys: &[K], out: &mut [bool]) {
        assert_eq!(
            keys.len(),
            out.len(),
            "par_contains: keys and out differ in length"
        );
        keys.par_chunks(CHUNK)
            .zip(out.par_chunks_mut(CHUNK))
            .for_each(|(k, o)| self.contains_many(k, o));
    }

    /// Inserts every key on the rayon thread pool:
    /// [`insert_many`](Self::insert_many) per chunk of keys, in no
    /// particular order across chunks. Duplicates are stored as copies, as
    /// with [`insert`](Self::insert).
    ///
    /// # Errors
    ///
    /// [`ParInsertError`] if some key could not be inserted (the filter
    /// cannot grow any more, see [`InsertError`]); it says how many did. Which ones did is not a prefix of `keys` (see the error).
    pub fn par_insert<K: Hash + Sync>(&self, keys: &[K]) -> Result<(), ParInsertError> {
        finish(
            keys.par_chunks(CHUNK)
                .enumerate()
                .map(|(c, chunk)| match self.insert_many(chunk) {
                    Ok(()) => (chunk.len(), None),
                    Err(e) => (e.inserted, Some((c * CHUNK + e.inserted, e.error))),
                })
                .reduce(|| (0, None), merge),
        )
    }

    /// [`insert_unique`](Self::insert_unique) for every key on the rayon
    /// thread pool: `out[i]` is `true` iff this call inserted `keys[i]`.
    /// Linearizable per key, so a key repeated anywhere in `keys` (in one
    /// chunk or in several running at once) gets at most one `true`.
    ///
    /// # Errors
    ///
    /// [`ParInsertError`] as for [`par_insert`](Self::par_insert); `out`
    /// is then meaningful only for the keys that were attempted.
    ///
    /// # Panics
    ///
    /// If `out.len() != keys.len()`.
    pub fn par_insert_unique<K: Hash + Sync>(
        &self,
        keys: &[K],
        out: &mut [bool],
    ) -> Result<(), ParInsertError> {
        assert_eq!(
            keys.len(),
            out.len(),
            "par_insert_unique: keys and out differ in length"
        );
        finish(
            keys.par_chunks(CHUNK)
                .zip(out.par_chunks_mut(CHUNK))
                .enumerate()
                .map(|(c, (chunk, o))| match self.insert_unique_many(chunk, o) {
                    Ok(()) => (o.iter().filter(|&&b| b).count(), None),
                    Err(e) => (
                        o[..e.inserted].iter().filter(|&&b| b).count(),
                        Some((c * CHUNK + e.inserted, e.error)),
                    ),
                })
                .reduce(|| (0, None), merge),
        )
    }
}

/// Inserts every item on the rayon thread pool, buffering 4096 keys
/// per worker and inserting each buffer with
/// [`insert_many`](CuckooFilter::insert_many).
///
/// The table grows as for [`insert`](CuckooFilter::insert).
///
/// # Panics
///
/// `ParallelExtend` cannot report errors, so an insert that fails (a full
/// [`Growth::Fixed`](crate::Growth::Fixed) filter, or growth stopped by
/// its limits) panics, naming [`par_insert`](CuckooFilter::par_insert)
/// and [`insert_many`](CuckooFilter::insert_many), the fallible
/// alternatives. Items inserted before the panic stay in the filter.
impl<K: Hash + Send> ParallelExtend<K> for CuckooFilter {
    fn par_extend<I: IntoParallelIterator<Item = K>>(&mut self, items: I) {
        let this = &*self;
        let flush = |buf: &[K]| {
            if let Err(e) = this.insert_many(buf) {
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
}
