//! Configuration and construction of a [`CuckooFilter`].

use super::sizing::buckets_for;
use super::{CuckooFilter, Growth, GrowthPolicy, LayoutKind};
use crate::error::BuildError;
use crate::hash::{HashAlgorithm, KeyHasher};
use crate::raw::geometry::Geometry;
use crate::raw::table::Table;

/// Default capacity when none is given: about a million items (2.2 MB).
pub const DEFAULT_CAPACITY: usize = 1 << 20;

/// Builds a [`CuckooFilter`]; see [`CuckooFilter::builder`].
///
/// | setting | default | meaning |
/// | --- | --- | --- |
/// | [`capacity`](Self::capacity) | 1,048,576 | items the table is sized to hold |
/// | [`fingerprint_bits`](Self::fingerprint_bits) | 16 | 16 (4 tags per bucket, FPR ~1.2e-4) or 12 (5 tags per bucket, FPR ~2.4e-3) |
/// | [`seed`](Self::seed) | random per filter | hash seed |
/// | [`growth`](Self::growth) | [`Growth::Double`] | whether a full table doubles |
/// | [`max_memory`](Self::max_memory) | none | bytes the tables may take, growth included |
/// | [`max_false_positive_rate`](Self::max_false_positive_rate) | 1e-2 | growth stops before the FPR estimate passes it |
#[derive(Clone, Debug)]
#[must_use]
pub struct CuckooFilterBuilder {
    capacity: usize,
    fingerprint_bits: u32,
    seed: Option<u64>,
    /// Set by [`hash_like`](Self::hash_like); else the newest algorithm.
    algorithm: Option<HashAlgorithm>,
    policy: GrowthPolicy,
    /// Levels past the tag bits double (version 3's kind) instead of
    /// growing by regions: [`doubling_levels`](Self::doubling_levels).
    doubling_levels: bool,
    #[cfg(loom)]
    canary: crate::canary::Canary,
}

impl Default for CuckooFilterBuilder {
    fn default() -> Self {
        CuckooFilterBuilder {
            capacity: DEFAULT_CAPACITY,
            fingerprint_bits: 16,
            seed: None,
            algorithm: None,
            policy: GrowthPolicy::default(),
            doubling_levels: false,
            #[cfg(loom)]
            canary: Default::default(),
        }
    }
}

impl CuckooFilterBuilder {
    /// Number of items the filter must hold. The table gets exactly enough
    /// buckets that this many items fit below the layout's load limit (no
    /// power-of-two rounding).
    pub fn capacity(mut self, items: usize) -> Self {
        self.capacity = items;
        self
    }

    /// Tag width: 16 (default; 4 tags per 64-bit bucket) or 12 (5 tags per
    /// bucket, 25% less memory per item, 20x the false-positive rate).
    pub fn fingerprint_bits(mut self, bits: u32) -> Self {
        self.fingerprint_bits = bits;
        self
    }

    /// A fixed hash seed, for reproducible bucket placement. By default
    /// every filter draws a random seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Hash keys exactly as `other` does (its seed and hash algorithm), so
    /// that a hash from [`other.hash`](CuckooFilter::hash) may be passed to
    /// the `*_hash` calls of the new filter: for filters that take the
    /// same keys side by side, such as a chain of filters queried with one
    /// hash. A filter loaded from an older file hashes as that file did,
    /// and so does one built like it (and it saves in that file's format
    /// version).
    ///
    /// ```
    /// let a = koel::CuckooFilter::with_capacity(1000);
    /// let b = koel::CuckooFilter::builder().capacity(50).hash_like(&a).build()?;
    /// assert!(b.hashes_like(&a));
    /// assert_eq!(b.hash(&42u64), a.hash(&42u64));
    /// # Ok::<(), koel::BuildError>(())
    /// ```
    pub fn hash_like(mut self, other: &CuckooFilter) -> Self {
        self.seed = Some(other.seed());
        self.algorithm = Some(other.hash_algorithm());
        self
    }

    /// Whether the table doubles when it is full ([`Growth::Double`], the
    /// default) or inserts then fail ([`Growth::Fixed`]).
    ///
    /// A filter grows only when an insert finds no displacement path, so it
    /// reaches the same load (95% / 96%) before each doubling as a fixed
    /// filter before its first `Full`. Each doubling spends one tag bit on
    /// addressing, so the false-positive rate about doubles: with 16-bit
    /// tags about 1.2e-4, 2.3e-4, 4.6e-4, ... 1.9e-3 after 4 doublings and
    /// 7.4e-3 after 6.
    ///
    /// ```
    /// use koel::{CuckooFilter, Growth};
    /// let f = CuckooFilter::builder().capacity(1000).growth(Growth::Double).build()?;
    /// for k in 0..10_000u32 {
    ///     f.insert(&k)?; // grows from ~1K to ~16K slots on the way
    /// }
    /// assert!(f.generation() >= 3);
    /// assert!((0..10_000u32).all(|k| f.contains(&k)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn growth(mut self, growth: Growth) -> Self {
        self.policy.growth = growth;
        self
    }

    /// An upper bound, in bytes, on the memory the filter holds, all levels
    /// together: its tables, the replaced tables still resident (see
    /// [`Stats::retired_resident_bytes`](crate::Stats::retired_resident_bytes)),
    /// and while a table doubles the old and the new table and the
    /// migration's state. A doubling, a new level or a region level's
    /// growth step that would pass it is refused with
    /// [`InsertError::MemoryLimit`](crate::InsertError::MemoryLimit).
    pub fn max_memory(mut self, bytes: usize) -> Self {
        self.policy.max_memory = Some(bytes);
        self
    }

    /// The false-positive rate the filter may reach, over all its levels
    /// (default 1e-2). The first table doubles until one more doubling
    /// would pass it (6 doublings, 64x, with 16-bit tags; 2, 4x, with
    /// 12-bit tags); then levels of wider tags hold the rest, each within
    /// half of what the levels below left (see [`CuckooFilter::insert`],
    /// "Past the tag bits"). Only a rate too low for even one more level
    /// refuses, with
    /// [`InsertError::FalsePositiveRateLimit`](crate::InsertError::FalsePositiveRateLimit).
    ///
    /// The cap governs growth; it cannot lower the first table's own rate,
    /// which the tag width sets (about 1.2e-4 full for 16-bit tags, 2.4e-3
    /// for 12-bit). A cap below that builds a filter that never grows and
    /// refuses inserts once full, at its layout's rate.
    pub fn max_false_positive_rate(mut self, rate: f64) -> Self {
        self.policy.max_false_positive_rate = rate;
        self
    }

    /// Levels past the tag bits are doubling 21x3 tables, as filters of
    /// format version 3 have them, instead of region levels: for tests of
    /// version 3 files and for comparisons. Hidden, not a stable API.
    #[doc(hidden)]
    pub fn doubling_levels(mut self) -> Self {
        self.doubling_levels = true;
        self
    }

    /// Selects a deliberately broken protocol (loom canaries only).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn canary(mut self, canary: crate::canary::Canary) -> Self {
        self.canary = canary;
        self
    }

    /// Allocates the filter.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`], [`BuildError::CapacityTooLarge`],
    /// [`BuildError::UnsupportedFingerprintBits`],
    /// [`BuildError::InvalidFalsePositiveRate`],
    /// [`BuildError::ExceedsMaxMemory`], or
    /// [`BuildError::AllocationFailed`] if the allocator refuses the table
    /// (never an abort).
    pub fn build(self) -> Result<CuckooFilter, BuildError> {
        let layout = match self.fingerprint_bits {
            16 => LayoutKind::Tags16x4,
            12 => LayoutKind::Tags12x5,
            bits => return Err(BuildError::UnsupportedFingerprintBits(bits)),
        };
        let rate = self.policy.max_false_positive_rate;
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(BuildError::InvalidFalsePositiveRate(rate));
        }
        let m0 = buckets_for(self.capacity, layout)?;
        if let Some(max) = self.policy.max_memory {
            let bytes = Table::bytes_for(m0 as usize);
            if bytes > max {
                return Err(BuildError::ExceedsMaxMemory { bytes, max });
            }
        }
        let hasher = KeyHasher::with_algorithm(
            self.seed.unwrap_or_else(KeyHasher::random_seed),
            self.algorithm.unwrap_or(HashAlgorithm::Fold),
        );
        let addressing = super::addressing_of(hasher.algorithm());
        let mut table = Table::new(Geometry::new(m0, 0, addressing))
            .map_err(|e| BuildError::AllocationFailed { bytes: e.bytes })?;
        #[cfg(loom)]
        {
            table.canary = self.canary;
        }
        #[cfg(not(loom))]
        let _ = &mut table;
        let upper = super::levels::Upper::first(&self.policy, self.doubling_levels);
        Ok(CuckooFilter::assemble(
            table,
            layout,
            hasher,
            self.policy,
            upper,
            0,
        ))
    }
}
