//! Configuration and construction of a [`CuckooFilter`].

use super::{CuckooFilter, LayoutKind};
use crate::error::BuildError;
use crate::hash::KeyHasher;
use crate::raw::counters::Counters;
use crate::raw::geometry::{Geometry, MAX_M0, MIN_M0};
use crate::raw::table::Table;
use crate::sync::epoch;

/// Default capacity when none is given: about a million items (2.2 MB).
pub const DEFAULT_CAPACITY: usize = 1 << 20;

/// Builds a [`CuckooFilter`]; see [`CuckooFilter::builder`].
///
/// | setting | default | meaning |
/// | --- | --- | --- |
/// | [`capacity`](Self::capacity) | 1,048,576 | items the table is sized to hold |
/// | [`fingerprint_bits`](Self::fingerprint_bits) | 16 | 16 (4 tags per bucket, FPR ~1.2e-4) or 12 (5 tags per bucket, FPR ~2.4e-3) |
/// | [`seed`](Self::seed) | random per filter | hash seed |
#[derive(Clone, Debug)]
#[must_use]
pub struct CuckooFilterBuilder {
    capacity: usize,
    fingerprint_bits: u32,
    seed: Option<u64>,
    #[cfg(loom)]
    canary: crate::loom_support::Canary,
}

impl Default for CuckooFilterBuilder {
    fn default() -> Self {
        CuckooFilterBuilder {
            capacity: DEFAULT_CAPACITY,
            fingerprint_bits: 16,
            seed: None,
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

    /// Selects a deliberately broken protocol (loom canaries only).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn canary(mut self, canary: crate::loom_support::Canary) -> Self {
        self.canary = canary;
        self
    }

    /// Allocates the filter.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`], [`BuildError::CapacityTooLarge`],
    /// [`BuildError::UnsupportedFingerprintBits`], or
    /// [`BuildError::AllocationFailed`] if the allocator refuses the table
    /// (never an abort).
    pub fn build(self) -> Result<CuckooFilter, BuildError> {
        let layout = match self.fingerprint_bits {
            16 => LayoutKind::Tags16x4,
            12 => LayoutKind::Tags12x5,
            bits => return Err(BuildError::UnsupportedFingerprintBits(bits)),
        };
        let m0 = buckets_for(self.capacity, layout)?;
        let mut table = Table::new(Geometry::new(m0, 0))
            .map_err(|e| BuildError::AllocationFailed { bytes: e.bytes })?;
        #[cfg(loom)]
        {
            table.canary = self.canary;
        }
        #[cfg(not(loom))]
        let _ = &mut table;
        let hasher = KeyHasher::new(self.seed.unwrap_or_else(KeyHasher::random_seed));
        Ok(CuckooFilter {
            table: epoch::Atomic::new(table),
            layout,
            hasher,
            counters: Counters::default(),
        })
    }
}

/// Buckets (even, at least `MIN_M0`) so that `capacity` items fit at the
/// layout's sizing load.
pub(crate) fn buckets_for(capacity: usize, layout: LayoutKind) -> Result<u64, BuildError> {
    if capacity == 0 {
        return Err(BuildError::ZeroCapacity);
    }
    let per_bucket = layout.lanes() as f64 * layout.sizing_load();
    let max = (MAX_M0 as f64 * per_bucket) as usize;
    if capacity > max {
        return Err(BuildError::CapacityTooLarge {
            requested: capacity,
            max,
        });
    }
    let buckets = (capacity as f64 / per_bucket).ceil() as u64;
    let even = buckets + (buckets & 1);
    Ok(even.clamp(MIN_M0, MAX_M0))
}
