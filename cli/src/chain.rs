//! A chain of cuckoo filters that never runs out of room: when the newest
//! filter refuses an insert (full, or its growth would pass its share of
//! the false-positive budget or of memory), a new filter is chained after
//! it. Lookups check every filter; inserts go to the newest.
//!
//! Every filter of a chain has the same seed and tag width, so a key has
//! one hash for all of them (and one tag, which the dedup engine
//! partitions on). A key is reported new only if no filter holds it, so
//! the chain's false-positive rate is at most the sum of its filters'
//! rates: filter `k` may grow while its rate stays below `budget /
//! 2^(k+1)` (but never less than a new filter's own rate at full load),
//! so the sum stays under the budget until the input outgrows the first
//! estimate about a million times.
//!
//! Exactly-one-winner of `insert_unique` holds per key owner: the engine
//! sends every occurrence of a key to one worker, so two threads never
//! race on one key across a rotation.

use crate::filters::{self, full_load, full_load_rate, CliFilter, Snapshot};
use koel::{CuckooFilter, Filter, FilterKind, InsertError};
use std::sync::{Arc, RwLock};

/// Default bound on the false-positive rate of the chained filters
/// together: the rate a single filter reaches after 64x growth.
pub const DEFAULT_FPR_BUDGET: f64 = 1e-2;

/// One filter of the chain and how far it may grow.
struct Stage {
    filter: CuckooFilter,
    /// A stage that grows past this generation is closed (a loaded state
    /// may not grow past what it had: its rate would pass a fresh one's).
    max_generation: u32,
}

/// Filters that answer as one; see the module docs.
pub struct FilterChain {
    stages: RwLock<Arc<Vec<Arc<Stage>>>>,
    /// The first stage, which hashes for all (read per key without the
    /// lock: the engine hashes every key to partition it).
    first: Arc<Stage>,
    seed: u64,
    fingerprint_bits: u32,
    budget: f64,
}

impl FilterChain {
    /// A chain of one new filter for `capacity` items.
    pub fn new(
        capacity: u64,
        fingerprint_bits: u32,
        seed: Option<u64>,
        budget: f64,
    ) -> anyhow::Result<Self> {
        let seed = seed.unwrap_or_else(|| CuckooFilter::with_capacity(1).seed());
        let first = build_stage(
            capacity,
            fingerprint_bits,
            seed,
            stage_budget(budget, fingerprint_bits, 0),
        )?;
        Ok(Self::from_stages(
            vec![first],
            seed,
            fingerprint_bits,
            budget,
        ))
    }

    fn from_stages(stages: Vec<Stage>, seed: u64, fingerprint_bits: u32, budget: f64) -> Self {
        let stages: Vec<Arc<Stage>> = stages.into_iter().map(Arc::new).collect();
        FilterChain {
            first: Arc::clone(&stages[0]),
            stages: RwLock::new(Arc::new(stages)),
            seed,
            fingerprint_bits,
            budget,
        }
    }

    /// A chain of loaded `filters` (at least one, hashing alike, as
    /// `filter_file::load` returns them), which may not grow.
    pub fn from_filters(filters: Vec<CuckooFilter>, budget: f64) -> Self {
        let (seed, bits) = (filters[0].seed(), filters[0].fingerprint_bits());
        let stages = filters
            .into_iter()
            .map(|filter| Stage {
                max_generation: filter.generation(),
                filter,
            })
            .collect();
        Self::from_stages(stages, seed, bits, budget)
    }

    /// Calls `f` with every filter, oldest first (to save them).
    pub fn with_filters<R>(&self, f: impl FnOnce(&[&CuckooFilter]) -> R) -> R {
        let stages = self.snapshot_stages();
        let filters: Vec<&CuckooFilter> = stages.iter().map(|s| &s.filter).collect();
        f(&filters)
    }

    /// The hash seed shared by every filter.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Tag width shared by every filter.
    pub fn fingerprint_bits(&self) -> u32 {
        self.fingerprint_bits
    }

    /// Filters in the chain.
    pub fn stages(&self) -> usize {
        self.snapshot_stages().len()
    }

    /// The false-positive rate of every filter but the newest (which takes
    /// no more inserts, so its rate is final).
    pub fn closed_rate(&self) -> f64 {
        let stages = self.snapshot_stages();
        stages[..stages.len() - 1]
            .iter()
            .map(|s| s.filter.false_positive_rate())
            .sum()
    }

    /// The newest filter's rate when full at its present size (each
    /// doubling so far about doubled it).
    pub fn newest_full_rate(&self) -> f64 {
        let stages = self.snapshot_stages();
        let generation = stages[stages.len() - 1].filter.generation();
        full_load_rate(self.fingerprint_bits) * 2f64.powi(generation as i32)
    }

    /// Items the newest filter can still take without growing.
    pub fn room(&self) -> u64 {
        let stages = self.snapshot_stages();
        let newest = &stages[stages.len() - 1].filter;
        let load = full_load(self.fingerprint_bits);
        ((newest.capacity() as f64 * load) as u64).saturating_sub(newest.len() as u64)
    }

    /// Closes the newest filter and chains one for `capacity` items (at
    /// least twice what the chain holds, so that chains stay short).
    pub fn chain_new(&self, capacity: u64) -> anyhow::Result<()> {
        let seen = self.snapshot_stages();
        self.rotate(&seen, capacity)
    }

    fn snapshot_stages(&self) -> Arc<Vec<Arc<Stage>>> {
        Arc::clone(&self.stages.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Chains a new filter after `seen`'s newest, unless another thread
    /// already did.
    fn rotate(&self, seen: &Arc<Vec<Arc<Stage>>>, capacity: u64) -> anyhow::Result<()> {
        let mut current = self.stages.write().unwrap_or_else(|e| e.into_inner());
        if current.len() != seen.len() {
            return Ok(());
        }
        let held: u64 = current.iter().map(|s| s.filter.len() as u64).sum();
        let k = current.len() as u32;
        let stage = build_stage(
            capacity.max(held.saturating_mul(2)).max(1024),
            self.fingerprint_bits,
            self.seed,
            stage_budget(self.budget, self.fingerprint_bits, k),
        )?;
        let mut next: Vec<Arc<Stage>> = current.iter().cloned().collect();
        next.push(Arc::new(stage));
        *current = Arc::new(next);
        Ok(())
    }

    /// Rotates after `error` from `seen`'s newest filter; the error back
    /// if no filter can be built.
    fn rotate_after(
        &self,
        seen: &Arc<Vec<Arc<Stage>>>,
        error: InsertError,
    ) -> Result<(), InsertError> {
        self.rotate(seen, 0).map_err(|_| error)
    }

    /// Closes the newest stage if it grew past what it may.
    fn close_if_grown(&self, seen: &Arc<Vec<Arc<Stage>>>) -> Result<(), InsertError> {
        let newest = &seen[seen.len() - 1];
        if newest.filter.generation() > newest.max_generation {
            self.rotate_after(seen, InsertError::Full)?;
        }
        Ok(())
    }
}

/// Filter `k`'s share of the budget, at least what a new filter has at
/// full load (a stage cannot do better).
fn stage_budget(budget: f64, fingerprint_bits: u32, k: u32) -> f64 {
    (budget / 2f64.powi(k as i32 + 1)).max(full_load_rate(fingerprint_bits) * 1.01)
}

fn build_stage(
    capacity: u64,
    fingerprint_bits: u32,
    seed: u64,
    max_rate: f64,
) -> anyhow::Result<Stage> {
    Ok(Stage {
        filter: filters::cuckoo(capacity, fingerprint_bits, Some(seed), Some(max_rate))?,
        max_generation: u32::MAX,
    })
}

impl Filter for FilterChain {
    fn kind(&self) -> FilterKind {
        FilterKind::Cuckoo
    }

    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        Filter::hash_bytes(&self.first.filter, bytes)
    }

    fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        loop {
            let stages = self.snapshot_stages();
            match stages[stages.len() - 1].filter.insert_hash(hash) {
                Ok(()) => return self.close_if_grown(&stages),
                Err(e) => self.rotate_after(&stages, e)?,
            }
        }
    }

    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        loop {
            let stages = self.snapshot_stages();
            let (newest, older) = stages.split_last().expect("a chain has a filter");
            if older.iter().any(|s| s.filter.contains_hash(hash)) {
                return Ok(false);
            }
            match newest.filter.insert_unique_hash(hash) {
                Ok(new) => {
                    self.close_if_grown(&stages)?;
                    return Ok(new);
                }
                Err(e) => self.rotate_after(&stages, e)?,
            }
        }
    }

    fn contains_hash(&self, hash: u64) -> bool {
        self.snapshot_stages()
            .iter()
            .any(|s| s.filter.contains_hash(hash))
    }

    fn remove_hash(&self, hash: u64) -> Option<bool> {
        let stages = self.snapshot_stages();
        Some(stages.iter().rev().any(|s| s.filter.remove_hash(hash)))
    }

    fn len(&self) -> usize {
        self.snapshot_stages().iter().map(|s| s.filter.len()).sum()
    }

    fn memory_usage(&self) -> usize {
        self.snapshot_stages()
            .iter()
            .map(|s| s.filter.memory_usage())
            .sum()
    }

    fn false_positive_rate(&self) -> f64 {
        let stages = self.snapshot_stages();
        stages
            .iter()
            .map(|s| s.filter.false_positive_rate())
            .sum::<f64>()
            .min(1.0)
    }

    fn clear(&self) {
        for s in self.snapshot_stages().iter() {
            s.filter.clear();
        }
    }
}

impl CliFilter for FilterChain {
    fn snapshot(&self) -> Snapshot {
        let stages = self.snapshot_stages();
        let mut total = Snapshot::default();
        let mut slots = 0;
        for s in stages.iter() {
            let one = s.filter.snapshot();
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
        let mut done = 0;
        loop {
            let stages = self.snapshot_stages();
            let (newest, older) = stages.split_last().expect("a chain has a filter");
            let (keys, out) = (&keys[done..], &mut out[done..]);
            let result = if older.is_empty() {
                // The common case: one filter, the batch path with prefetching.
                newest
                    .filter
                    .insert_unique_many(keys, out)
                    .map_err(|e| (e.failed_at, e.error))
            } else {
                insert_unique_each(&newest.filter, older, keys, out)
            };
            match result {
                Ok(()) => return self.close_if_grown(&stages),
                Err((at, e)) => {
                    done += at;
                    self.rotate_after(&stages, e)?;
                }
            }
        }
    }

    fn describe(&self) -> String {
        let n = self.stages();
        let one = self.first.filter.describe();
        if n == 1 {
            one
        } else {
            format!("{n} chained filters ({one})")
        }
    }

    fn generation(&self) -> u32 {
        self.snapshot_stages()
            .iter()
            .map(|s| s.filter.generation())
            .sum()
    }

    /// By tag: two keys can only collide if their tags are equal, so every
    /// key a false positive could match has the same owner, whose inserts
    /// come in input order. Growth does not change which keys collide (the
    /// region bits are tag bits), so a seeded run drops the same records
    /// on any number of threads, unless filters had to be chained (when
    /// depends on timing).
    #[inline]
    fn owner(&self, hash: u64, parts: usize) -> usize {
        let tag = tag_of(hash, self.fingerprint_bits);
        ((tag * parts as u64) >> self.fingerprint_bits) as usize
    }
}

/// `insert_unique` of each of `keys` into `newest` unless an `older`
/// filter holds it; on an error, the index of the key that failed.
fn insert_unique_each(
    newest: &CuckooFilter,
    older: &[Arc<Stage>],
    keys: &[&[u8]],
    out: &mut [bool],
) -> Result<(), (usize, InsertError)> {
    for (i, (key, new)) in keys.iter().zip(out.iter_mut()).enumerate() {
        let hash = Filter::hash_bytes(newest, key);
        *new = !older.iter().any(|s| s.filter.contains_hash(hash))
            && newest.insert_unique_hash(hash).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// The tag koel's cuckoo filter derives from `hash` (its top bits onto
/// `1..=2^w - 2`); a test checks it against the filter's own.
#[inline]
fn tag_of(hash: u64, bits: u32) -> u64 {
    let top = hash >> (64 - bits);
    1 + ((top * ((1u64 << bits) - 2)) >> bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_takes_far_more_than_its_first_filter_and_forgets_nothing() {
        // 100 slots' worth, 12-bit tags (growth capped after 2 doublings).
        let chain = FilterChain::new(100, 12, Some(3), 1e-2).unwrap();
        let keys: Vec<Vec<u8>> = (0..50_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut out = vec![false; refs.len()];
        for (k, o) in refs.chunks(1000).zip(out.chunks_mut(1000)) {
            chain.insert_unique_batch(k, o).unwrap();
        }
        // The first table cannot hold 50K: the chain grew, by a stage or
        // (since the engine has levels) by a level of its first filter.
        assert!(
            chain.stages() > 1 || chain.first.filter.levels_count() > 1,
            "the first table cannot hold 50K"
        );
        assert!(refs
            .iter()
            .all(|k| chain.contains_hash(chain.hash_bytes(k))));
        let new = out.iter().filter(|&&n| n).count();
        assert!(new > 49_000, "{new}");
        let mut again = vec![true; refs.len()];
        chain.insert_unique_batch(&refs, &mut again).unwrap();
        assert!(again.iter().all(|&n| !n), "a second pass finds every key");
    }

    #[test]
    fn owners_follow_the_filters_own_tags() {
        for bits in [16, 12] {
            let chain = FilterChain::new(10_000, bits, Some(5), 1e-2).unwrap();
            let first = &chain.first.filter;
            for h in (0..100_000).map(crate::keys::mix64) {
                assert_eq!(
                    tag_of(h, bits),
                    first.placement(h).0,
                    "bits {bits}, hash {h:x}"
                );
                assert!(chain.owner(h, 7) < 7);
            }
        }
    }
}
