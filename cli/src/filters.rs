//! The filters the commands run on: koel's kinds behind one trait, plus a
//! deliberately broken test double that proves the stress checker can fail.

use crate::human::HumanCount;
use koel::{BloomFilter, CuckooFilter, Filter, InsertError};
use std::sync::atomic::{AtomicU64, Ordering};

/// What the commands report about a filter at one moment: the fields of
/// koel's `Stats` of the same names; `None` where a kind does not track one.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Snapshot {
    pub len: usize,
    /// Tag slots (`Stats::capacity`).
    pub slots: Option<usize>,
    pub load_factor: Option<f64>,
    pub memory_bytes: usize,
    pub false_positive_rate: f64,
    pub generation: u32,
    pub displacements: Option<u64>,
    pub insert_failures: Option<u64>,
    pub growth_refusals: Option<u64>,
}

impl Snapshot {
    /// `, load 80.4% of 1,052,632 slots`, or nothing for a kind without
    /// slots (Bloom).
    pub fn load_text(&self) -> String {
        match (self.load_factor, self.slots) {
            (Some(load), Some(slots)) => format!(
                ", load {:.1}% of {} slots",
                load * 100.0,
                HumanCount(slots as u64)
            ),
            _ => String::new(),
        }
    }
}

/// A [`Filter`] as the commands use it, with a statistics snapshot and a
/// batch dedup insert. The defaults work for any `Filter` (a test double
/// needs nothing more); koel's own kinds override them.
pub trait CliFilter: Filter {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            len: self.len(),
            memory_bytes: self.memory_usage(),
            false_positive_rate: self.false_positive_rate(),
            ..Snapshot::default()
        }
    }

    /// `out[i] = insert_unique(keys[i])`, in order; a key repeated within
    /// `keys` is inserted once. On an error, `out` is filled up to the
    /// insert that failed.
    fn insert_unique_batch(&self, keys: &[&[u8]], out: &mut [bool]) -> Result<(), InsertError> {
        for (key, new) in keys.iter().zip(out.iter_mut()) {
            *new = self.insert_unique_hash(self.hash_bytes(key))?;
        }
        Ok(())
    }

    /// Kind and layout, on one line.
    fn describe(&self) -> String {
        self.kind().name().to_string()
    }

    /// Times the table has doubled (cheap: no table scan).
    fn generation(&self) -> u32 {
        0
    }

    /// Which of `parts` workers owns the key of `hash` (dedup sends every
    /// occurrence of a key to its owner). Keys whose tags can collide
    /// should share an owner, so that which new keys a false positive
    /// drops does not depend on thread timing.
    #[inline]
    fn owner(&self, hash: u64, parts: usize) -> usize {
        (((hash >> 32) * parts as u64) >> 32) as usize
    }
}

impl CliFilter for CuckooFilter {
    fn snapshot(&self) -> Snapshot {
        let s = self.stats();
        Snapshot {
            len: s.len,
            slots: Some(s.capacity),
            load_factor: Some(s.load_factor),
            memory_bytes: s.memory_bytes,
            false_positive_rate: s.false_positive_rate,
            generation: s.generation,
            displacements: Some(s.displacements),
            insert_failures: Some(s.insert_failures),
            growth_refusals: Some(s.growth_refusals),
        }
    }

    fn insert_unique_batch(&self, keys: &[&[u8]], out: &mut [bool]) -> Result<(), InsertError> {
        // `&[u8]` hashes exactly like `[u8]`, so this is `hash_bytes`'s
        // hash, with one pin and prefetching for the whole batch.
        self.insert_unique_many(keys, out).map_err(|e| e.error)
    }

    fn generation(&self) -> u32 {
        CuckooFilter::generation(self)
    }

    fn describe(&self) -> String {
        let levels = match self.levels_count() {
            1 => String::new(),
            n => format!(", {n} levels (21-bit tags above the first)"),
        };
        format!(
            "cuckoo, {}-bit tags x {} per bucket{levels}",
            self.fingerprint_bits(),
            self.tags_per_bucket()
        )
    }

    /// By tag: two keys can only collide if their tags are equal, so every
    /// key a false positive could match has the same owner, whose inserts
    /// come in input order. Doubling does not change which keys collide
    /// (the region bits are tag bits), so a seeded run drops the same
    /// records on any number of threads, unless the filter had to add a
    /// level (which keys land there depends on timing).
    #[inline]
    fn owner(&self, hash: u64, parts: usize) -> usize {
        let bits = self.fingerprint_bits();
        ((self.fingerprint(hash) * parts as u64) >> bits) as usize
    }
}

impl CliFilter for BloomFilter {
    fn describe(&self) -> String {
        format!(
            "bloom, {} bits set per key in one of {} 64-byte blocks",
            self.bits_per_key(),
            self.blocks()
        )
    }
}

/// A broken filter for testing the testers (`stress --kind
/// lossy-test-double`): a [`CuckooFilter`] that drops every
/// `drop_every`-th insert and reports success. `koel stress` must fail.
pub struct LossyFilter {
    inner: CuckooFilter,
    drop_every: u64,
    inserts: AtomicU64,
}

impl LossyFilter {
    pub fn new(inner: CuckooFilter, drop_every: u64) -> Self {
        LossyFilter {
            inner,
            drop_every: drop_every.max(1),
            inserts: AtomicU64::new(0),
        }
    }

    fn lose(&self) -> bool {
        // Relaxed: a plain counter; which insert is lost does not matter.
        (self.inserts.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(self.drop_every)
    }
}

impl Filter for LossyFilter {
    fn kind(&self) -> koel::FilterKind {
        self.inner.kind()
    }
    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        Filter::hash_bytes(&self.inner, bytes)
    }
    fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        if self.lose() {
            return Ok(());
        }
        Filter::insert_hash(&self.inner, hash)
    }
    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        if self.lose() {
            return Ok(!Filter::contains_hash(&self.inner, hash));
        }
        Filter::insert_unique_hash(&self.inner, hash)
    }
    fn contains_hash(&self, hash: u64) -> bool {
        Filter::contains_hash(&self.inner, hash)
    }
    fn remove_hash(&self, hash: u64) -> Option<bool> {
        Filter::remove_hash(&self.inner, hash)
    }
    fn len(&self) -> usize {
        Filter::len(&self.inner)
    }
    fn memory_usage(&self) -> usize {
        Filter::memory_usage(&self.inner)
    }
    fn false_positive_rate(&self) -> f64 {
        Filter::false_positive_rate(&self.inner)
    }
    fn clear(&self) {
        Filter::clear(&self.inner)
    }
}

impl CliFilter for LossyFilter {
    fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }
    fn generation(&self) -> u32 {
        self.inner.generation()
    }
    fn describe(&self) -> String {
        format!(
            "lossy test double (drops 1 insert in {}) over {}",
            self.drop_every,
            self.inner.describe()
        )
    }
}

/// The kind of filter to build, from `--kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    /// The concurrent cuckoo filter (insert, remove, count).
    Cuckoo,
    /// The concurrent blocked Bloom filter (insert only; no remove).
    Bloom,
    /// A cuckoo filter that drops 1 insert in 1000: for testing the checker.
    #[value(hide = true)]
    LossyTestDouble,
}

/// A new cuckoo filter's false-positive rate at the load where it must
/// grow (95%, 96% with 12-bit tags): what a layout reaches without growing.
pub fn full_load_rate(fingerprint_bits: u32) -> f64 {
    // Tag values (0 and all-ones are reserved), tags per bucket, load.
    let (values, lanes, load) = if fingerprint_bits == 12 {
        (4094.0f64, 5.0, 0.96)
    } else {
        (65534.0f64, 4.0, 0.95)
    };
    1.0 - (1.0 - 1.0 / values).powf(2.0 * lanes * load)
}

fn items(capacity: u64) -> anyhow::Result<usize> {
    usize::try_from(capacity)
        .map_err(|_| anyhow::anyhow!("a filter for {capacity} items does not fit in memory"))
}

/// A cuckoo filter for `capacity` items (it doubles if more arrive, while
/// its rate stays under `max_rate`): the one place the commands build one.
pub fn cuckoo(
    capacity: u64,
    fingerprint_bits: u32,
    seed: Option<u64>,
    max_rate: Option<f64>,
) -> anyhow::Result<CuckooFilter> {
    let mut builder = CuckooFilter::builder()
        .capacity(items(capacity)?)
        .fingerprint_bits(fingerprint_bits);
    if let Some(seed) = seed {
        builder = builder.seed(seed);
    }
    if let Some(rate) = max_rate {
        builder = builder.max_false_positive_rate(rate.min(1.0));
    }
    builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build a filter for {capacity} items: {e}"))
}

/// A Bloom filter for `capacity` items at `fpr`.
pub fn bloom(capacity: u64, fpr: f64, seed: Option<u64>) -> anyhow::Result<BloomFilter> {
    let mut builder = BloomFilter::builder()
        .capacity(items(capacity)?)
        .false_positive_rate(fpr);
    if let Some(seed) = seed {
        builder = builder.seed(seed);
    }
    builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build a Bloom filter for {capacity} items: {e}"))
}

/// The filter `kind` for `capacity` items (`stress`); a Bloom filter gets
/// the rate the cuckoo layout `fingerprint_bits` reaches at full load.
pub fn build(
    kind: KindArg,
    capacity: u64,
    fingerprint_bits: u32,
    seed: Option<u64>,
) -> anyhow::Result<Box<dyn CliFilter>> {
    let cuckoo = || cuckoo(capacity, fingerprint_bits, seed, None);
    Ok(match kind {
        KindArg::Bloom => Box::new(bloom(capacity, full_load_rate(fingerprint_bits), seed)?),
        KindArg::Cuckoo => Box::new(cuckoo()?),
        KindArg::LossyTestDouble => Box::new(LossyFilter::new(cuckoo()?, 1000)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_follow_the_filters_own_tags() {
        for bits in [16, 12] {
            let f = cuckoo(10_000, bits, Some(5), None).unwrap();
            for h in (0..100_000).map(crate::keys::mix64) {
                assert_eq!(
                    f.fingerprint(h),
                    f.placement(h).0,
                    "bits {bits}, hash {h:x}"
                );
                assert!(f.owner(h, 7) < 7);
            }
        }
    }
}
