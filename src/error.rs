//! Error types.

use std::fmt;

/// Why a filter could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A capacity of zero items was requested.
    ZeroCapacity,
    /// The requested capacity needs more buckets than one table can address
    /// (`2^32` buckets, i.e. about 16 billion items with 16-bit tags).
    CapacityTooLarge {
        /// The capacity asked for, in items.
        requested: usize,
        /// The largest capacity this layout supports, in items.
        max: usize,
    },
    /// `fingerprint_bits` is not one of the supported layouts (16 or 12).
    UnsupportedFingerprintBits(u32),
    /// The allocator refused the table.
    AllocationFailed {
        /// Bytes that were requested.
        bytes: usize,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroCapacity => write!(f, "capacity must be at least 1 item"),
            BuildError::CapacityTooLarge { requested, max } => write!(
                f,
                "capacity of {requested} items is too large: this layout holds at most {max} items"
            ),
            BuildError::UnsupportedFingerprintBits(bits) => write!(
                f,
                "unsupported fingerprint_bits {bits}: use 16 (4 tags per bucket) or 12 (5 tags per bucket)"
            ),
            BuildError::AllocationFailed { bytes } => {
                write!(f, "could not allocate a table of {bytes} bytes")
            }
        }
    }
}

impl std::error::Error for BuildError {}

/// Why an insert did not happen. In every case the filter is unchanged: no
/// item was evicted or lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InsertError {
    /// Both candidate buckets are full and no displacement path within the
    /// search bounds frees a slot: the table is at its load limit (about 95%
    /// of `capacity()` slots with 16-bit tags, 96% with 12-bit tags).
    Full,
}

impl fmt::Display for InsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::Full => write!(
                f,
                "filter is full: no displacement path frees a slot for this key (nothing was changed)"
            ),
        }
    }
}

impl std::error::Error for InsertError {}
