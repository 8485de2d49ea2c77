//! Internals the `loom-tests` crate needs, compiled only under `cfg(loom)`.
//!
//! The canaries break one protocol rule each, so a model can show that it
//! detects the failure that rule prevents.

use crate::raw::bucket::{L12x5, L16x4};
use crate::raw::geometry::Geometry;

/// A deliberately broken protocol, for canary models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Canary {
    /// The real protocol.
    #[default]
    None,
    /// A displacement hop clears the source before copying to the
    /// destination: the tag is briefly in neither bucket.
    RemoveBeforeCopy,
    /// `contains` trusts a negative read without the stripe validation.
    UnvalidatedNegative,
    /// `insert_unique` checks and inserts without holding the pair's stripe.
    UnlockedUnique,
    /// `remove` searches and clears without holding the pair's stripe.
    UnlockedRemove,
}

/// The tag and candidate buckets of hash `h` in a table of `m0` buckets, for
/// the 16-bit (`fingerprint_bits == 16`) or 12-bit layout.
pub fn locate(fingerprint_bits: u32, m0: u64, h: u64) -> (u64, usize, usize) {
    let geo = Geometry::new(m0, 0);
    let at = match fingerprint_bits {
        12 => geo.locate::<L12x5>(h),
        _ => geo.locate::<L16x4>(h),
    };
    (at.tag, at.i1, at.i2)
}

/// Buckets per region of the smallest table (loom builds shrink it).
pub const MIN_BUCKETS: u64 = crate::raw::geometry::MIN_M0;
