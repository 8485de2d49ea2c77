//! Why a saved filter could not be loaded.

use crate::filter::FilterKind;
use std::fmt;
use std::io;

/// Why a saved filter could not be loaded (or inspected).
///
/// Every field of a file is checked before anything is allocated for it,
/// so a damaged or hostile file gets one of these, never a panic, never a
/// wrong filter and never an allocation larger than the input justifies.
/// The [`Display`](fmt::Display) text says what is wrong in words.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// Reading failed for a reason other than the input ending.
    Io(io::Error),
    /// The input ended early.
    Truncated {
        /// The part being read: `"header"`, `"payload"` or `"trailer"`.
        section: &'static str,
        /// Bytes that part needs.
        expected: u64,
        /// Bytes of it that were there.
        found: u64,
    },
    /// The first 8 bytes are not koel's magic: not a koel file at all.
    NotKoelFile {
        /// The bytes found instead.
        found: [u8; 8],
    },
    /// A koel file of a format version this build cannot read.
    UnsupportedVersion {
        /// The file's version.
        found: u16,
        /// The newest version this build reads (it reads 1 up to this one)
        /// and the one it writes.
        supported: u16,
    },
    /// The header's checksum does not match its bytes: the header is
    /// damaged.
    HeaderChecksumMismatch {
        /// The checksum stored in the file.
        stored: u64,
        /// The checksum of the header bytes as read.
        computed: u64,
    },
    /// The filter-kind byte names no kind this build knows.
    UnknownKind(u8),
    /// The file holds another kind of filter than the one asked for.
    WrongKind {
        /// The kind the caller asked to load.
        expected: FilterKind,
        /// The kind in the file.
        found: FilterKind,
    },
    /// The hash-algorithm byte names no algorithm this build implements
    /// for the file's format version and filter kind.
    UnknownHashAlgorithm(u8),
    /// Flag bits this build does not understand are set.
    UnknownFlags(u32),
    /// A reserved header field is not zero.
    ReservedNotZero {
        /// Byte offset of the field in the header.
        offset: usize,
        /// Its value.
        value: u64,
    },
    /// Tag bits and tags per bucket (and words per bucket) are not a layout
    /// this build supports.
    UnsupportedLayout {
        /// Bits per tag in the file.
        tag_bits: u8,
        /// Tags per bucket in the file.
        tags_per_bucket: u8,
        /// 64-bit words per bucket in the file.
        words_per_bucket: u8,
    },
    /// Bits per key or words per block are not a Bloom layout this build
    /// supports.
    UnsupportedBloomLayout {
        /// Bits each key sets, in the file.
        bits_per_key: u8,
        /// 64-bit words per block, in the file.
        words_per_block: u8,
    },
    /// The Bloom filter was saved by a build that maps keys to bits
    /// differently: loading it would lose items.
    UnsupportedBitMapping {
        /// The file's mapping version.
        found: u32,
        /// This build's.
        supported: u32,
    },
    /// A Bloom filter's block count is zero or beyond an address space.
    InvalidBlockCount {
        /// The file's block count.
        blocks: u64,
    },
    /// A Bloom filter's sizing capacity is zero or beyond `usize`.
    InvalidCapacity {
        /// The file's capacity.
        capacity: u64,
    },
    /// A Bloom filter's target false-positive rate is outside `1e-20..1`.
    InvalidFalsePositiveRate {
        /// The file's rate.
        rate: f64,
    },
    /// `m0` (buckets per region) is odd or out of range.
    InvalidM0 {
        /// The file's `m0`.
        m0: u64,
    },
    /// The generation leaves fewer than 4 tag bits to discriminate keys, or
    /// makes the table too large to address.
    InvalidGeneration {
        /// The file's generation.
        generation: u8,
        /// The file's tag bits.
        tag_bits: u8,
    },
    /// The bucket count is not `m0 << generation`.
    BucketCountMismatch {
        /// The bucket count stored in the file.
        stored: u64,
        /// `m0 << generation`.
        expected: u64,
    },
    /// The payload length does not match the bucket count.
    PayloadLengthMismatch {
        /// The payload length stored in the file.
        stored: u64,
        /// The length the bucket count requires.
        expected: u64,
    },
    /// The file's length does not match the length its header announces.
    FileLengthMismatch {
        /// Bytes the header announces (header, payload and trailer).
        expected: u64,
        /// Bytes in the file.
        actual: u64,
    },
    /// The hash probe differs: this build hashes keys differently from the
    /// one that saved the file (a format version 1 file hashed with
    /// another `ahash` version or CPU features), so loading it would answer
    /// "absent" for keys that are in it.
    HashProbeMismatch {
        /// The probe stored in the file.
        stored: u64,
        /// This build's hash of the probe input under the file's seed.
        computed: u64,
    },
    /// The checksum over header, payload and item count does not match:
    /// the file is damaged.
    ChecksumMismatch {
        /// The checksum stored in the file.
        stored: u64,
        /// The checksum of the bytes as read.
        computed: u64,
    },
    /// A bucket word holds a value no filter writes (the checksum matched,
    /// so the file was written so, not damaged later).
    CorruptPayload {
        /// Index of the first bad bucket word.
        word: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The item count in the trailer differs from the occupied slots in
    /// the payload.
    ItemCountMismatch {
        /// The count stored in the file.
        stored: u64,
        /// Occupied slots counted in the payload.
        counted: u64,
    },
    /// The cuckoo filter's growth setting (offset 20, version 2) is
    /// neither 0 (double) nor 1 (fixed).
    UnknownGrowth(u32),
    /// The cuckoo filter's saved `max_false_positive_rate` is not in
    /// `(0, 1]` (the builder's range).
    InvalidMaxFalsePositiveRate {
        /// The file's rate.
        rate: f64,
    },
    /// A record of a filter with levels does not fit where it is: a first
    /// level of 21-bit tags, a level above of another layout, seed, hash
    /// or growth than the filter's, settings no level above could have,
    /// or more levels than any filter grows.
    InvalidLevel {
        /// The record's level: 0 for the first record, 1 for the level
        /// above it, ...
        level: usize,
        /// What does not fit.
        reason: &'static str,
    },
    /// A level of regions (format version 4) has counts no level has: no
    /// region, more regions than its limit or than the map has slots,
    /// more steps than regions added, or a map of another size than this
    /// build's.
    InvalidRegionLevel {
        /// The field: `"regions"`, `"region limit"`, `"steps"` or `"map
        /// slots"`.
        field: &'static str,
        /// Its value in the file.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },
    /// An entry of a level of regions' slot map is not one the filter
    /// writes (a region the level does not have, a split slot whose new
    /// region is not the newer one, bits that must be 0).
    InvalidSlotEntry {
        /// The slot, `0..16384`.
        slot: usize,
        /// Its entry: the region new tags go to in the low 16 bits, the
        /// region it is leaving in the high 16.
        entry: u32,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A level of regions' slot order (the order in which its next step
    /// considers the slots) is not every slot once, grouped by region.
    InvalidSlotOrder {
        /// The position in the order.
        position: usize,
        /// The slot there.
        slot: u16,
        /// What is wrong.
        reason: &'static str,
    },
    /// The file is valid, but the allocator refused the table.
    AllocationFailed {
        /// Bytes requested.
        bytes: u64,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io(e) => write!(f, "could not read the filter: {e}"),
            LoadError::Truncated {
                section,
                expected,
                found,
            } => write!(
                f,
                "file is truncated: the {section} needs {expected} bytes, only {found} are there"
            ),
            LoadError::NotKoelFile { found } => write!(
                f,
                "not a koel filter file: it starts with {found:02x?} instead of koel's magic bytes"
            ),
            LoadError::UnsupportedVersion { found, supported } => write!(
                f,
                "koel file format version {found} is not supported: this build reads versions 1 to {supported}"
            ),
            LoadError::HeaderChecksumMismatch { stored, computed } => write!(
                f,
                "header is damaged: its checksum is {computed:#018x}, the file says {stored:#018x}"
            ),
            LoadError::UnknownKind(k) => write!(f, "unknown filter kind {k} in the header"),
            LoadError::WrongKind { expected, found } => write!(
                f,
                "the file holds a {} filter, not a {} filter",
                found.name(),
                expected.name()
            ),
            LoadError::UnknownHashAlgorithm(id) => write!(
                f,
                "unknown hash algorithm {id} for this format version and filter kind: this build \
                 knows Fold (id 3) in version 3 cuckoo filter files, XXH3 (id 2) in version 2, \
                 and ahash (id 1) in versions 1 and 2"
            ),
            LoadError::UnknownGrowth(code) => write!(
                f,
                "unknown growth setting {code} in the header: this build knows 0 (double) and 1 (fixed)"
            ),
            LoadError::InvalidMaxFalsePositiveRate { rate } => write!(
                f,
                "cuckoo max_false_positive_rate {} is outside (0, 1]",
                crate::error::Rate(*rate)
            ),
            LoadError::UnknownFlags(flags) => write!(
                f,
                "header flags {flags:#x} are not understood by this build (it knows only bit 0, \
                 a cuckoo filter's level above, in format version 2)"
            ),
            LoadError::InvalidLevel { level, reason } => {
                write!(f, "level {level} of the filter is invalid: {reason}")
            }
            LoadError::ReservedNotZero { offset, value } => write!(
                f,
                "reserved header field at byte {offset} is {value:#x}, must be 0"
            ),
            LoadError::UnsupportedLayout {
                tag_bits,
                tags_per_bucket,
                words_per_bucket,
            } => write!(
                f,
                "unsupported cuckoo bucket layout: {tag_bits}-bit tags, {tags_per_bucket} per bucket, \
                 {words_per_bucket} word(s) per bucket (supported: 16 x 4 and 12 x 5 in 1 word)"
            ),
            LoadError::UnsupportedBloomLayout {
                bits_per_key,
                words_per_block,
            } => write!(
                f,
                "unsupported Bloom layout: {bits_per_key} bits per key, {words_per_block} words \
                 per block (supported: 8, 16, 24 or 32 bits in 8 words)"
            ),
            LoadError::UnsupportedBitMapping { found, supported } => write!(
                f,
                "the Bloom filter was saved with key-to-bit mapping {found}, this build uses \
                 {supported}: loading it would lose items, so it is refused"
            ),
            LoadError::InvalidBlockCount { blocks } => write!(
                f,
                "Bloom block count {blocks} is impossible (it must be at least 1 and fit in memory)"
            ),
            LoadError::InvalidCapacity { capacity } => {
                write!(f, "Bloom capacity {capacity} is impossible (it must be at least 1)")
            }
            LoadError::InvalidFalsePositiveRate { rate } => write!(
                f,
                "Bloom target false-positive rate {} is outside 1e-20..1",
                crate::error::Rate(*rate)
            ),
            LoadError::InvalidM0 { m0 } => write!(
                f,
                "buckets per region (m0) is {m0}: it must be even and between 64 and 2^32"
            ),
            LoadError::InvalidGeneration {
                generation,
                tag_bits,
            } => write!(
                f,
                "generation {generation} is impossible with {tag_bits}-bit tags \
                 (at most {} keeps 4 tag bits)",
                tag_bits.saturating_sub(4)
            ),
            LoadError::BucketCountMismatch { stored, expected } => write!(
                f,
                "bucket count {stored} does not match m0 << generation = {expected}"
            ),
            LoadError::PayloadLengthMismatch { stored, expected } => write!(
                f,
                "payload length {stored} does not match the bucket count, which needs {expected} bytes"
            ),
            LoadError::FileLengthMismatch { expected, actual } => {
                let what = if actual < expected {
                    "truncated"
                } else {
                    "longer than its header says"
                };
                write!(
                    f,
                    "file is {what}: the header announces {expected} bytes, the file has {actual}"
                )
            }
            LoadError::HashProbeMismatch { stored, computed } => write!(
                f,
                "this build hashes keys differently from the one that saved the file \
                 (probe {computed:#018x}, file says {stored:#018x}; a version 1 file from another \
                 ahash version or CPU features?): loading it would lose items, so it is refused"
            ),
            LoadError::ChecksumMismatch { stored, computed } => write!(
                f,
                "file is damaged: its checksum is {computed:#018x}, the file says {stored:#018x}"
            ),
            LoadError::CorruptPayload { word, reason } => {
                write!(f, "bucket word {word} is invalid: {reason}")
            }
            LoadError::ItemCountMismatch { stored, counted } => write!(
                f,
                "item count {stored} in the file does not match the {counted} occupied slots in its payload"
            ),
            LoadError::InvalidRegionLevel {
                field,
                value,
                reason,
            } => write!(f, "the level of regions' {field} is {value}: {reason}"),
            LoadError::InvalidSlotEntry {
                slot,
                entry,
                reason,
            } => write!(
                f,
                "the level of regions' map entry {entry:#010x} of slot {slot} is invalid: {reason}"
            ),
            LoadError::InvalidSlotOrder {
                position,
                slot,
                reason,
            } => write!(
                f,
                "the level of regions' slot order is invalid at position {position} (slot {slot}): {reason}"
            ),
            LoadError::AllocationFailed { bytes } => {
                write!(f, "could not allocate {bytes} bytes for the filter's table")
            }
        }
    }
}

/// The message of every variant is complete, I/O cause included, so
/// `source()` is `None`: an error reporter that prints the chain (anyhow's
/// `{:#}`) would otherwise print the cause twice. The I/O error itself is
/// in [`LoadError::Io`].
impl std::error::Error for LoadError {}

impl From<io::Error> for LoadError {
    fn from(e: io::Error) -> Self {
        LoadError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant's position: the match fails to compile when a variant
    /// is added, and `every_variant_has_a_sample` then fails until the new
    /// one gets a sample below.
    fn variant(e: &LoadError) -> usize {
        match e {
            LoadError::Io(_) => 0,
            LoadError::Truncated { .. } => 1,
            LoadError::NotKoelFile { .. } => 2,
            LoadError::UnsupportedVersion { .. } => 3,
            LoadError::HeaderChecksumMismatch { .. } => 4,
            LoadError::UnknownKind(_) => 5,
            LoadError::WrongKind { .. } => 6,
            LoadError::UnknownHashAlgorithm(_) => 7,
            LoadError::UnknownFlags(_) => 8,
            LoadError::ReservedNotZero { .. } => 9,
            LoadError::UnsupportedLayout { .. } => 10,
            LoadError::UnsupportedBloomLayout { .. } => 11,
            LoadError::UnsupportedBitMapping { .. } => 12,
            LoadError::InvalidBlockCount { .. } => 13,
            LoadError::InvalidCapacity { .. } => 14,
            LoadError::InvalidFalsePositiveRate { .. } => 15,
            LoadError::InvalidM0 { .. } => 16,
            LoadError::InvalidGeneration { .. } => 17,
            LoadError::BucketCountMismatch { .. } => 18,
            LoadError::PayloadLengthMismatch { .. } => 19,
            LoadError::FileLengthMismatch { .. } => 20,
            LoadError::HashProbeMismatch { .. } => 21,
            LoadError::ChecksumMismatch { .. } => 22,
            LoadError::CorruptPayload { .. } => 23,
            LoadError::ItemCountMismatch { .. } => 24,
            LoadError::AllocationFailed { .. } => 25,
            LoadError::UnknownGrowth(_) => 26,
            LoadError::InvalidMaxFalsePositiveRate { .. } => 27,
            LoadError::InvalidLevel { .. } => 28,
            LoadError::InvalidRegionLevel { .. } => 29,
            LoadError::InvalidSlotEntry { .. } => 30,
            LoadError::InvalidSlotOrder { .. } => 31,
        }
    }
    const VARIANTS: usize = 32;

    /// One value of every variant, with the words its message must hold
    /// (what is wrong, and the values that say by how much).
    fn samples() -> Vec<(LoadError, &'static [&'static str])> {
        vec![
            (
                LoadError::Io(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "access denied",
                )),
                &["could not read the filter", "access denied"],
            ),
            (
                LoadError::Truncated {
                    section: "payload",
                    expected: 4096,
                    found: 17,
                },
                &["truncated", "payload", "4096", "17"],
            ),
            (
                LoadError::NotKoelFile {
                    found: *b"PK\x03\x04abcd",
                },
                &["not a koel filter file", "50, 4b, 03, 04"],
            ),
            (
                LoadError::UnsupportedVersion {
                    found: 9,
                    supported: 2,
                },
                &["version 9 is not supported", "reads versions 1 to 2"],
            ),
            (
                LoadError::HeaderChecksumMismatch {
                    stored: 0xabc,
                    computed: 0xdef,
                },
                &[
                    "header is damaged",
                    "0x0000000000000abc",
                    "0x0000000000000def",
                ],
            ),
            (LoadError::UnknownKind(7), &["unknown filter kind 7"]),
            (
                LoadError::WrongKind {
                    expected: FilterKind::Cuckoo,
                    found: FilterKind::Bloom,
                },
                &["holds a bloom filter, not a cuckoo filter"],
            ),
            (
                LoadError::UnknownHashAlgorithm(4),
                &[
                    "unknown hash algorithm 4",
                    "Fold (id 3)",
                    "XXH3 (id 2)",
                    "ahash (id 1)",
                ],
            ),
            (
                LoadError::UnknownGrowth(5),
                &["unknown growth setting 5", "0 (double)", "1 (fixed)"],
            ),
            (
                LoadError::InvalidMaxFalsePositiveRate { rate: 2.5 },
                &["max_false_positive_rate 2.5", "outside"],
            ),
            (LoadError::UnknownFlags(0x30), &["flags 0x30", "bit 0"]),
            (
                LoadError::InvalidLevel {
                    level: 2,
                    reason: "another seed than the level below",
                },
                &["level 2", "invalid", "another seed"],
            ),
            (
                LoadError::ReservedNotZero {
                    offset: 20,
                    value: 0x9,
                },
                &["reserved header field at byte 20", "0x9", "must be 0"],
            ),
            (
                LoadError::UnsupportedLayout {
                    tag_bits: 9,
                    tags_per_bucket: 7,
                    words_per_bucket: 2,
                },
                &[
                    "unsupported cuckoo bucket layout",
                    "9-bit tags",
                    "7 per bucket",
                    "2 word",
                ],
            ),
            (
                LoadError::UnsupportedBloomLayout {
                    bits_per_key: 5,
                    words_per_block: 3,
                },
                &["unsupported Bloom layout", "5 bits per key", "3 words"],
            ),
            (
                LoadError::UnsupportedBitMapping {
                    found: 4,
                    supported: 1,
                },
                &["mapping 4", "uses 1", "lose items"],
            ),
            (
                LoadError::InvalidBlockCount { blocks: 0 },
                &["block count 0"],
            ),
            (LoadError::InvalidCapacity { capacity: 0 }, &["capacity 0"]),
            (
                LoadError::InvalidFalsePositiveRate { rate: 1e-300 },
                &["false-positive rate 1e-300 is outside"],
            ),
            (LoadError::InvalidM0 { m0: 63 }, &["m0) is 63"]),
            (
                LoadError::InvalidGeneration {
                    generation: 14,
                    tag_bits: 16,
                },
                &["generation 14", "16-bit tags", "at most 12"],
            ),
            (
                LoadError::BucketCountMismatch {
                    stored: 100,
                    expected: 128,
                },
                &["bucket count 100", "128"],
            ),
            (
                LoadError::PayloadLengthMismatch {
                    stored: 10,
                    expected: 1024,
                },
                &["payload length 10", "1024"],
            ),
            (
                LoadError::FileLengthMismatch {
                    expected: 2000,
                    actual: 1000,
                },
                &["truncated", "2000", "1000"],
            ),
            (
                LoadError::HashProbeMismatch {
                    stored: 1,
                    computed: 2,
                },
                &[
                    "hashes keys differently",
                    "0x0000000000000001",
                    "0x0000000000000002",
                ],
            ),
            (
                LoadError::ChecksumMismatch {
                    stored: 5,
                    computed: 6,
                },
                &[
                    "file is damaged",
                    "0x0000000000000005",
                    "0x0000000000000006",
                ],
            ),
            (
                LoadError::CorruptPayload {
                    word: 77,
                    reason: "a reserved all-ones tag",
                },
                &["bucket word 77", "reserved all-ones tag"],
            ),
            (
                LoadError::ItemCountMismatch {
                    stored: 9,
                    counted: 8,
                },
                &["item count 9", "8 occupied slots"],
            ),
            (
                LoadError::AllocationFailed { bytes: 1 << 40 },
                &["allocate 1099511627776 bytes"],
            ),
            (
                LoadError::InvalidRegionLevel {
                    field: "steps",
                    value: 12,
                    reason: "each step adds a region",
                },
                &["level of regions", "steps is 12", "each step adds"],
            ),
            (
                LoadError::InvalidSlotEntry {
                    slot: 77,
                    entry: 0x0005_0009,
                    reason: "it names a region the level does not have",
                },
                &["map entry 0x00050009", "slot 77", "does not have"],
            ),
            (
                LoadError::InvalidSlotOrder {
                    position: 5,
                    slot: 9,
                    reason: "the slot appears twice",
                },
                &["slot order", "position 5", "slot 9", "twice"],
            ),
        ]
    }

    #[test]
    fn every_variant_has_a_sample() {
        let mut seen = [false; VARIANTS];
        for (e, _) in samples() {
            seen[variant(&e)] = true;
        }
        let missing: Vec<usize> = (0..VARIANTS).filter(|&i| !seen[i]).collect();
        assert!(missing.is_empty(), "variants without a sample: {missing:?}");
    }

    #[test]
    fn every_message_is_one_complete_line_naming_its_cause() {
        use std::error::Error;
        for (e, words) in samples() {
            let text = e.to_string();
            for w in words {
                assert!(
                    text.contains(w),
                    "{e:?} displays as {text:?}, lacking {w:?}"
                );
            }
            assert!(!text.contains('\n'), "{text:?}");
            assert!(text.len() < 300, "{text:?}");
            assert!(!text.ends_with('.'), "{text:?}");
            // The message is complete: a chain printer (anyhow `{:#}`)
            // must not find the cause a second time.
            assert!(
                e.source().is_none(),
                "{e:?} has a source: its cause prints twice"
            );
        }
    }

    #[test]
    fn the_io_cause_is_printed_once_in_a_chain() {
        let e = LoadError::from(io::Error::from_raw_os_error(2));
        let chain = format!("{:#}", ChainOf(&e));
        let cause = io::Error::from_raw_os_error(2).to_string();
        assert_eq!(chain.matches(&cause).count(), 1, "{chain}");
    }

    /// Prints an error and its sources, as `anyhow`'s `{:#}` does.
    struct ChainOf<'a>(&'a dyn std::error::Error);

    impl fmt::Display for ChainOf<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}", self.0)?;
            let mut source = self.0.source();
            while let Some(s) = source {
                write!(f, ": {s}")?;
                source = s.source();
            }
            Ok(())
        }
    }
}
