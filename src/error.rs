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
    /// A Bloom filter's false-positive rate is not a number in
    /// `1e-20..1` (zero, negative, one or more, NaN, or so small that an
    /// exact set is the better tool).
    InvalidFalsePositiveRate,
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
            BuildError::InvalidFalsePositiveRate => write!(
                f,
                "false_positive_rate must be a number at least 1e-20 and below 1"
            ),
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

/// Why two Bloom filters cannot be united: their bits mean different keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnionError {
    /// The filters have different numbers of blocks.
    DifferentSize {
        /// Blocks of the filter united into.
        blocks: u64,
        /// Blocks of the other filter.
        other_blocks: u64,
    },
    /// The filters set different numbers of bits per key.
    DifferentHashes {
        /// Bits per key of the filter united into.
        hashes: u32,
        /// Bits per key of the other filter.
        other_hashes: u32,
    },
    /// The filters hash keys with different seeds.
    DifferentSeed,
}

impl fmt::Display for UnionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnionError::DifferentSize {
                blocks,
                other_blocks,
            } => write!(
                f,
                "cannot unite Bloom filters of {blocks} and {other_blocks} blocks: build both with the same capacity and false-positive rate"
            ),
            UnionError::DifferentHashes {
                hashes,
                other_hashes,
            } => write!(
                f,
                "cannot unite Bloom filters setting {hashes} and {other_hashes} bits per key"
            ),
            UnionError::DifferentSeed => write!(
                f,
                "cannot unite Bloom filters with different hash seeds: build both with the same seed"
            ),
        }
    }
}

impl std::error::Error for UnionError {}

/// Why [`advise`](crate::advise) cannot make a recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdviseError {
    /// `items` is 0.
    ZeroItems,
    /// `false_positive_rate` is negative, NaN, or 1 or more (0 is valid: it
    /// asks for no filter at all).
    InvalidFalsePositiveRate,
    /// The expected growth factor is below 1, infinite or NaN.
    InvalidGrowth,
    /// No filter of the recommended kind for this many items fits in an
    /// address space.
    TooManyItems,
}

impl fmt::Display for AdviseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdviseError::ZeroItems => write!(f, "items must be at least 1"),
            AdviseError::InvalidFalsePositiveRate => {
                write!(f, "false_positive_rate must be at least 0 and below 1")
            }
            AdviseError::TooManyItems => {
                write!(f, "no filter for this many items fits in memory")
            }
            AdviseError::InvalidGrowth => {
                write!(
                    f,
                    "the expected growth factor must be a finite number of at least 1"
                )
            }
        }
    }
}

impl std::error::Error for AdviseError {}
