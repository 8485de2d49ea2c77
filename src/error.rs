//! Error types.
//!
//! One rule for all of them: the message (`Display`) is one complete line,
//! causes included, and `source()` is `None`, so that a reporter printing
//! the chain shows each cause once.

use std::fmt;

/// A rate in an error message, in as few digits as say it exactly:
/// `0.01`, `2.5e-7`, `1e-300` (never hundreds of zeros).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rate(pub(crate) f64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0;
        if p == 0.0 || !p.is_finite() || (1e-3..1e6).contains(&p.abs()) {
            write!(f, "{p}")
        } else {
            write!(f, "{p:e}")
        }
    }
}

/// Why a filter could not be built.
#[derive(Debug, Clone, PartialEq)]
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
    /// A false-positive rate out of range: a cuckoo filter's
    /// `max_false_positive_rate` must be in `(0, 1]`, a Bloom filter's
    /// `false_positive_rate` in `1e-20..1` (below that an exact set is the
    /// better tool).
    InvalidFalsePositiveRate(f64),
    /// The first table alone is larger than `max_memory`.
    ExceedsMaxMemory {
        /// Bytes the first table needs.
        bytes: usize,
        /// The configured `max_memory`.
        max: usize,
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
            BuildError::InvalidFalsePositiveRate(p) => write!(
                f,
                "false-positive rate {} is out of range: a cuckoo filter's max_false_positive_rate must be in (0, 1], a Bloom filter's false_positive_rate at least 1e-20 and below 1",
                Rate(*p)
            ),
            BuildError::ExceedsMaxMemory { bytes, max } => write!(
                f,
                "the table for this capacity needs {bytes} bytes, more than max_memory ({max} bytes)"
            ),
        }
    }
}

impl std::error::Error for BuildError {}

/// Why an insert did not happen. In every case the filter is unchanged: no
/// item was evicted or lost, and it keeps working at its current size.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum InsertError {
    /// Both candidate buckets are full, no displacement path within the
    /// search bounds frees a slot (the table is at its load limit: about 95%
    /// of `capacity()` slots with 16-bit tags, 96% with 12-bit tags), and
    /// the filter does not grow ([`Growth::Fixed`](crate::Growth::Fixed), or
    /// the table already has the most regions its tags can address).
    /// After the first such refusal, later inserts into full buckets are
    /// refused without a search until the next remove (see
    /// [`CuckooFilter::insert`](crate::CuckooFilter::insert)); this holds
    /// for the two limit errors below too.
    Full,
    /// The filter is full and growing it (doubling its table, a new
    /// level or a new region) would pass its `max_false_positive_rate`.
    FalsePositiveRateLimit {
        /// The configured bound.
        max: f64,
        /// The estimate at full load after growing.
        next: f64,
    },
    /// The filter is full and growing it (doubling its table: old and new
    /// table are both alive while it migrates; a new level; a new region)
    /// would pass its `max_memory`.
    MemoryLimit {
        /// The configured bound, in bytes.
        max: usize,
        /// Bytes the filter would hold while the doubling migrates (the
        /// old and the doubled table, the migration's state and the
        /// replaced tables still resident), or once the new level exists.
        needed: usize,
    },
    /// The table is full and the allocator refused the doubled table.
    AllocationFailed {
        /// Bytes requested.
        bytes: usize,
    },
    /// The key's two buckets take no more copies of its fingerprint: it
    /// already has `copies` (counting keys that share its fingerprint and
    /// buckets), at most `2 * tags_per_bucket - 1` (7 with 16-bit tags, 9
    /// with 12-bit, 5 in a level of 21-bit tags), or from `tags_per_bucket`
    /// on when the rest of its buckets hold other keys' tags that no
    /// displacement can move. Copies never leave their pair, and a doubling
    /// sends them all to one successor pair, so growing would not help and
    /// the filter does not try. The last lane of a pair is kept for other
    /// keys: a pair holding nothing but one fingerprint would stay full at
    /// every size, and keys sharing its buckets would make the table double
    /// at any load. Remove a copy to insert another, or deduplicate with
    /// [`insert_unique`](crate::CuckooFilter::insert_unique).
    TooManyCopies {
        /// Copies already stored in the key's two buckets.
        copies: usize,
    },
}

/// `a` and `b` in scientific notation with the fewest digits (from three)
/// that tell them apart: a rate just above its cap must not read as equal
/// to it ("2.00e-4, above 2.00e-4").
fn distinct_rates(a: f64, b: f64) -> (String, String) {
    for digits in 2..16 {
        let (x, y) = (format!("{a:.digits$e}"), format!("{b:.digits$e}"));
        if x != y {
            return (x, y);
        }
    }
    (format!("{a:e}"), format!("{b:e}"))
}

impl fmt::Display for InsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::Full => write!(
                f,
                "filter is full: no displacement path frees a slot for this key and the filter cannot grow (nothing was changed)"
            ),
            InsertError::FalsePositiveRateLimit { max, next } => {
                let (next, max) = distinct_rates(*next, *max);
                write!(
                    f,
                    "filter is full: growing it would raise the false-positive rate to {next}, above max_false_positive_rate {max} (nothing was changed)"
                )
            }
            InsertError::MemoryLimit { max, needed } => write!(
                f,
                "filter is full: growing it needs {needed} bytes, above max_memory {max} (nothing was changed)"
            ),
            InsertError::AllocationFailed { bytes } => write!(
                f,
                "filter is full and the doubled table ({bytes} bytes) could not be allocated (nothing was changed)"
            ),
            InsertError::TooManyCopies { copies } => write!(
                f,
                "this key already has {copies} copies, the most its two buckets take: copies never leave them, so growing would not help (nothing was changed; remove a copy first, or use insert_unique)"
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
    /// The filters hash keys with different algorithms (one loaded from a
    /// format version 1 file, which hashes with `ahash`, the other built
    /// today).
    DifferentHashAlgorithm {
        /// The algorithm of the filter united into (`"ahash"`, `"xxh3"`).
        algorithm: &'static str,
        /// The other filter's.
        other_algorithm: &'static str,
    },
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
            UnionError::DifferentHashAlgorithm {
                algorithm,
                other_algorithm,
            } => write!(
                f,
                "cannot unite Bloom filters hashing with {algorithm} and {other_algorithm}: rebuild the older one from its keys"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_print_in_few_digits() {
        assert_eq!(Rate(0.01).to_string(), "0.01");
        assert_eq!(Rate(0.001).to_string(), "0.001");
        assert_eq!(Rate(2.5e-7).to_string(), "2.5e-7");
        assert_eq!(Rate(1e-300).to_string(), "1e-300");
        assert_eq!(Rate(5e-324).to_string(), "5e-324");
        assert_eq!(Rate(0.0).to_string(), "0");
        assert_eq!(Rate(f64::NAN).to_string(), "NaN");
        assert_eq!(Rate(1.5).to_string(), "1.5");
        assert_eq!(Rate(1e300).to_string(), "1e300");
    }

    /// Each variant's position per type: the matches fail to compile when
    /// a variant is added, and `every_error_message_names_its_cause` then
    /// fails until the new one gets a sample. (`LoadError` has its own in
    /// `persist/error.rs`.)
    fn build_variant(e: &BuildError) -> usize {
        match e {
            BuildError::ZeroCapacity => 0,
            BuildError::CapacityTooLarge { .. } => 1,
            BuildError::UnsupportedFingerprintBits(_) => 2,
            BuildError::AllocationFailed { .. } => 3,
            BuildError::InvalidFalsePositiveRate(_) => 4,
            BuildError::ExceedsMaxMemory { .. } => 5,
        }
    }

    fn insert_variant(e: &InsertError) -> usize {
        match e {
            InsertError::Full => 0,
            InsertError::FalsePositiveRateLimit { .. } => 1,
            InsertError::MemoryLimit { .. } => 2,
            InsertError::AllocationFailed { .. } => 3,
            InsertError::TooManyCopies { .. } => 4,
        }
    }

    fn union_variant(e: &UnionError) -> usize {
        match e {
            UnionError::DifferentSize { .. } => 0,
            UnionError::DifferentHashes { .. } => 1,
            UnionError::DifferentSeed => 2,
            UnionError::DifferentHashAlgorithm { .. } => 3,
        }
    }

    fn advise_variant(e: &AdviseError) -> usize {
        match e {
            AdviseError::ZeroItems => 0,
            AdviseError::InvalidFalsePositiveRate => 1,
            AdviseError::InvalidGrowth => 2,
            AdviseError::TooManyItems => 3,
        }
    }

    type Samples<E> = Vec<(E, &'static [&'static str])>;

    fn build_samples() -> Samples<BuildError> {
        vec![
            (BuildError::ZeroCapacity, &["capacity must be at least 1"]),
            (
                BuildError::CapacityTooLarge {
                    requested: 1 << 40,
                    max: 1 << 34,
                },
                &["1099511627776 items is too large", "at most 17179869184"],
            ),
            (
                BuildError::UnsupportedFingerprintBits(9),
                &["fingerprint_bits 9", "16", "12"],
            ),
            (
                BuildError::AllocationFailed { bytes: 4096 },
                &["could not allocate", "4096 bytes"],
            ),
            (
                BuildError::InvalidFalsePositiveRate(1.5),
                &["false-positive rate 1.5 is out of range"],
            ),
            (
                BuildError::ExceedsMaxMemory {
                    bytes: 8192,
                    max: 1000,
                },
                &["needs 8192 bytes", "max_memory (1000 bytes)"],
            ),
        ]
    }

    fn insert_samples() -> Samples<InsertError> {
        vec![
            (
                InsertError::Full,
                &["full", "cannot grow", "nothing was changed"],
            ),
            (
                InsertError::FalsePositiveRateLimit {
                    max: 0.01,
                    next: 0.02,
                },
                &[
                    "full",
                    "false-positive rate to 2.00e-2",
                    "max_false_positive_rate 1.00e-2",
                    "nothing was changed",
                ],
            ),
            (
                InsertError::MemoryLimit {
                    max: 1000,
                    needed: 3000,
                },
                &[
                    "full",
                    "3000 bytes",
                    "max_memory 1000",
                    "nothing was changed",
                ],
            ),
            (
                InsertError::AllocationFailed { bytes: 5000 },
                &[
                    "full",
                    "5000 bytes",
                    "could not be allocated",
                    "nothing was changed",
                ],
            ),
            (
                InsertError::TooManyCopies { copies: 7 },
                &[
                    "7 copies",
                    "remove a copy",
                    "insert_unique",
                    "nothing was changed",
                ],
            ),
        ]
    }

    fn union_samples() -> Samples<UnionError> {
        vec![
            (
                UnionError::DifferentSize {
                    blocks: 16,
                    other_blocks: 32,
                },
                &["16 and 32 blocks"],
            ),
            (
                UnionError::DifferentHashes {
                    hashes: 8,
                    other_hashes: 16,
                },
                &["setting 8 and 16 bits per key"],
            ),
            (UnionError::DifferentSeed, &["different hash seeds"]),
            (
                UnionError::DifferentHashAlgorithm {
                    algorithm: "ahash",
                    other_algorithm: "xxh3",
                },
                &["hashing with ahash and xxh3"],
            ),
        ]
    }

    fn advise_samples() -> Samples<AdviseError> {
        vec![
            (AdviseError::ZeroItems, &["items must be at least 1"]),
            (
                AdviseError::InvalidFalsePositiveRate,
                &["false_positive_rate must be at least 0 and below 1"],
            ),
            (AdviseError::InvalidGrowth, &["growth factor", "at least 1"]),
            (
                AdviseError::TooManyItems,
                &["this many items", "fits in memory"],
            ),
        ]
    }

    /// Every variant of `E` has a sample, and each sample's message is one
    /// complete line holding its words (what is wrong, and the values).
    fn check<E: std::error::Error>(
        samples: &Samples<E>,
        variant: fn(&E) -> usize,
        variants: usize,
    ) {
        let mut seen = vec![false; variants];
        for (e, words) in samples {
            seen[variant(e)] = true;
            let text = e.to_string();
            for w in *words {
                assert!(
                    text.contains(w),
                    "{e:?} displays as {text:?}, lacking {w:?}"
                );
            }
            assert!(!text.contains('\n') && !text.ends_with('.'), "{text:?}");
            assert!(
                e.source().is_none(),
                "{e:?} has a source: its cause prints twice"
            );
        }
        let missing: Vec<usize> = (0..variants).filter(|&i| !seen[i]).collect();
        assert!(missing.is_empty(), "variants without a sample: {missing:?}");
    }

    #[test]
    fn every_error_message_names_its_cause() {
        check(&build_samples(), build_variant, 6);
        check(&insert_samples(), insert_variant, 5);
        check(&union_samples(), union_variant, 4);
        check(&advise_samples(), advise_variant, 4);
        // The batch error wraps an `InsertError`: its whole message, and
        // how far the batch got.
        for (error, _) in insert_samples() {
            let batch = crate::BatchInsertError::new(17, 20, error);
            assert_eq!(
                batch.to_string(),
                format!("batch insert stopped at key 20 with 17 keys inserted: {error}")
            );
            assert!(std::error::Error::source(&batch).is_none());
        }
    }

    /// A rate just above its cap is printed with the digits that tell
    /// them apart (an outside test saw "raise ... to 2.00e-4, above
    /// max_false_positive_rate 2.00e-4"), and the message says growing,
    /// not doubling: levels and regions refuse with it too.
    #[test]
    fn a_rate_just_above_its_cap_reads_above_it() {
        let e = InsertError::FalsePositiveRateLimit {
            max: 2e-4,
            next: 2.0004e-4,
        };
        let text = e.to_string();
        assert!(
            text.contains("to 2.0004e-4, above max_false_positive_rate 2.0000e-4"),
            "{text}"
        );
        assert!(text.starts_with("filter is full: growing it"), "{text}");
        let e = InsertError::FalsePositiveRateLimit {
            max: 1e-2,
            next: 1.5e-2,
        };
        assert!(e
            .to_string()
            .contains("to 1.50e-2, above max_false_positive_rate 1.00e-2"));
    }

    #[test]
    fn a_tiny_rate_is_not_hundreds_of_digits() {
        let e = BuildError::InvalidFalsePositiveRate(1e-300);
        let text = e.to_string();
        assert!(text.contains("1e-300"), "{text}");
        assert!(text.len() < 250, "{} chars: {text}", text.len());
    }
}
