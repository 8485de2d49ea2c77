//! Parallel bulk operations on the rayon thread pool (the opt-in feature
//! `rayon`).
//!
//! Each call splits its keys into chunks of [`CHUNK`] and runs the batch
//! operation of [`batch`](super::batch) on every chunk: one writer
//! announcement and software prefetch per chunk, chunks spread over rayon's workers. Every
//! key gets exactly the guarantees of the single operation; only the order
//! in which keys are applied is unspecified.

use super::{BatchInsertError, CuckooFilter};
use crate::error::InsertError;
use rayon::iter::{IndexedParallelIterator, ParallelIterator};
use rayon::slice::{ParallelSlice, ParallelSliceMut};
use std::hash::Hash;

/// Keys per chunk: large enough that the announcement and the prefetch warm-up of a
/// chunk are negligible, small enough to balance load over the workers.
pub(crate) const CHUNK: usize = 4096;

/// The parallel insert error, now the one batch error.
#[deprecated(
    since = "0.1.1",
    note = "use `BatchInsertError`: the one error of the batch and parallel inserts"
)]
#[doc(hidden)]
pub type ParInsertError = BatchInsertError;

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

fn finish((inserted, failure): ChunkOutcome) -> Result<(), BatchInsertError> {
    match failure {
        None => Ok(()),
        Some((failed_at, error)) => Err(BatchInsertError::new(inserted, failed_at, error)),
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
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
    /// [`BatchInsertError`] if some key could not be inserted (the filter
    /// cannot grow any more, see [`InsertError`]); it says how many did.
    /// Which ones did is not a prefix of `keys` (see the error).
    pub fn par_insert<K: Hash + Sync>(&self, keys: &[K]) -> Result<(), BatchInsertError> {
        finish(
            keys.par_chunks(CHUNK)
                .enumerate()
                .map(|(c, chunk)| match self.insert_many(chunk) {
                    Ok(()) => (chunk.len(), None),
                    Err(e) => (e.inserted, Some((c * CHUNK + e.failed_at, e.error))),
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
    /// [`BatchInsertError`] as for [`par_insert`](Self::par_insert); `out`
    /// is then meaningful only for the keys that were attempted.
    ///
    /// # Panics
    ///
    /// If `out.len() != keys.len()`.
    pub fn par_insert_unique<K: Hash + Sync>(
        &self,
        keys: &[K],
        out: &mut [bool],
    ) -> Result<(), BatchInsertError> {
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
                    Err(e) => (e.inserted, Some((c * CHUNK + e.failed_at, e.error))),
                })
                .reduce(|| (0, None), merge),
        )
    }
}
