//! What a saved file holds, without building a filter from it.

use super::bloom::{self, BitCount};
use super::cuckoo;
use super::cuckoo::RegionsInfo;
use super::error::LoadError;
use super::format::{read_full, Header, TRAILER_LEN};
use super::saved::{self, PayloadCheck};
use super::stream::{self, CHUNK};
use crate::cuckoo::Growth;
use crate::filter::FilterKind;
use std::io::Read;
use xxhash_rust::xxh3::Xxh3;

/// Whether a file's bytes are the ones that were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChecksumStatus {
    /// The checksum over header, payload and item count matches.
    Valid,
    /// The checksum does not match: the file is damaged.
    Mismatch {
        /// The checksum stored in the file.
        stored: u64,
        /// The checksum of the bytes as read.
        computed: u64,
    },
    /// The input ended before the checksum.
    Truncated {
        /// Bytes the header announces for the whole file.
        expected: u64,
        /// Bytes there were.
        found: u64,
    },
}

/// The header of a saved filter and the state of its payload, from
/// [`inspect`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct FileInfo {
    /// Which kind of filter the file holds.
    pub kind: FilterKind,
    /// The record's format version (1 to 4: a level of regions' record is
    /// version 4, every other is in the version of its hash algorithm).
    pub format_version: u16,
    /// The hash algorithm's id in the header: 3 = Fold (every cuckoo
    /// filter this build makes, format version 3), 2 = XXH3 (Bloom filters,
    /// and cuckoo filters of version 2), 1 = `ahash` (format version 1
    /// files and filters loaded from them). See [`hash_algorithm_name`](Self::hash_algorithm_name).
    pub hash_algorithm: u8,
    /// The cuckoo filter's growth setting (`None` for a Bloom filter; a
    /// version 1 file did not save it and loads as [`Growth::Double`]).
    pub growth: Option<Growth>,
    /// The cuckoo filter's `max_false_positive_rate` (`None` for a Bloom
    /// filter; version 1: the default it loads with).
    pub max_false_positive_rate: Option<f64>,
    /// The cuckoo filter's `max_memory` in bytes, if it has one.
    pub max_memory: Option<u64>,
    /// Bits per tag (cuckoo filter; 0 for a Bloom filter).
    pub fingerprint_bits: u32,
    /// Tags per bucket (cuckoo filter; 0 for a Bloom filter).
    pub tags_per_bucket: u32,
    /// Buckets per region (cuckoo filter; 0 for a Bloom filter).
    pub m0: u64,
    /// Growth generation: the table has `m0 << generation` buckets
    /// (cuckoo filter; 0 for a Bloom filter).
    pub generation: u32,
    /// Buckets in the table (cuckoo filter), or 64-byte blocks (Bloom).
    pub buckets: u64,
    /// Bits each key sets (Bloom filter; 0 for a cuckoo filter).
    pub bits_per_key: u32,
    /// The capacity a Bloom filter was sized for (`None` for a cuckoo
    /// filter).
    pub sized_capacity: Option<u64>,
    /// The false-positive rate a Bloom filter was sized for (`None` for a
    /// cuckoo filter).
    pub target_false_positive_rate: Option<f64>,
    /// The hash seed.
    pub seed: u64,
    /// Payload bytes.
    pub payload_bytes: u64,
    /// Whether this build hashes keys as the saving build did (the stored
    /// hash probe matches). If not, [`CuckooFilter::load`](crate::CuckooFilter::load)
    /// refuses the file.
    pub hash_probe_matches: bool,
    /// The count stored in the file's trailer, if the input reached it:
    /// occupied tag slots (cuckoo filter) or set bits (Bloom filter).
    pub item_count: Option<u64>,
    /// The same counted in the payload, if the input held all of it.
    pub counted_items: Option<u64>,
    /// Whether the payload is intact.
    pub checksum: ChecksumStatus,
    /// Levels in the file: 1, or more for a cuckoo filter that grew past
    /// its first table's tag bits (one record per level, back to back). The
    /// fields above then describe the first level, except `checksum`,
    /// `hash_probe_matches`, `item_count` and `counted_items`, which cover
    /// every level: valid only if every level's checksum is (else the first
    /// level's that is not, or the whole file's truncation), matching only
    /// if every level's probe does, and counts summed (`None` if a level's
    /// is missing).
    pub levels: usize,
    /// Each level above the first, bottom up, described by itself (its own
    /// `levels` is 1). Empty for a filter of one level.
    pub upper_levels: Vec<FileInfo>,
    /// For a level of regions (format version 4, a level above the first
    /// of a filter that grew past its tag bits): its regions, their limit,
    /// its steps and split slots, if the input held the level's block and
    /// it is valid. `m0` is then the buckets per region, `generation` 0 and
    /// `buckets` the regions' total. `None` for any other record.
    pub regions: Option<RegionsInfo>,
}

impl FileInfo {
    /// The name of the hash algorithm: `"fold"`, `"xxh3"`, `"ahash"`
    /// (format version 1), or `"unknown"`.
    pub fn hash_algorithm_name(&self) -> &'static str {
        match crate::hash::HashAlgorithm::from_id(self.hash_algorithm) {
            Some(a) => a.name(),
            None => "unknown",
        }
    }
}

/// Reads a saved filter's header and streams its payload to verify the
/// checksum and count the items, without building a filter: memory use is
/// one 1 MiB buffer whatever the file's size.
///
/// A damaged payload, a truncated file or a hash-probe mismatch are
/// reported in the returned [`FileInfo`]; only a header that cannot be
/// interpreted (not koel's, another format version, damaged, invalid
/// fields) is an error.
///
/// ```
/// let f = koel::CuckooFilter::builder().capacity(1000).seed(7).build()?;
/// f.insert("a")?;
/// let mut bytes = Vec::new();
/// f.write_to(&mut bytes)?;
/// let info = koel::inspect(&bytes[..])?;
/// assert_eq!(info.kind, koel::FilterKind::Cuckoo);
/// assert_eq!((info.seed, info.item_count), (7, Some(1)));
/// assert_eq!(info.checksum, koel::ChecksumStatus::Valid);
/// assert!(info.hash_probe_matches);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// A [`LoadError`] for a header that is missing, foreign, of another
/// version, damaged or invalid, or for a read error.
pub fn inspect<R: Read>(mut reader: R) -> Result<FileInfo, LoadError> {
    let header = stream::read_header(&mut reader)?;
    let (mut info, mut shape) = inspect_record(&mut reader, header.as_slice(), None)?;
    let mut uppers = Vec::new();
    // The levels above, while the last record was whole and announces one
    // (a damaged payload's header is still trusted: it has its checksum).
    let mut cut = None;
    while let Some(below) = shape.filter(|s| s.level_above) {
        if matches!(
            uppers.last().unwrap_or(&info).checksum,
            ChecksumStatus::Truncated { .. }
        ) {
            break;
        }
        let header = match stream::read_header(&mut reader) {
            Ok(header) => header,
            Err(LoadError::Truncated {
                expected, found, ..
            }) => {
                cut = Some((expected, found));
                break;
            }
            Err(e) => return Err(e),
        };
        let (upper, above) = inspect_record(&mut reader, header.as_slice(), Some(&below))?;
        uppers.push(upper);
        shape = above;
    }
    if uppers.is_empty() && cut.is_none() {
        return Ok(info);
    }
    // The whole file's summary in the first level's fields.
    let (mut expected, mut found) = (0u64, 0u64);
    let mut first_bad = None;
    for level in std::iter::once(&info).chain(&uppers) {
        expected += level.file_len();
        found += match level.checksum {
            ChecksumStatus::Truncated { found, .. } => found,
            _ => level.file_len(),
        };
        if first_bad.is_none() && level.checksum != ChecksumStatus::Valid {
            first_bad = Some(level.checksum);
        }
    }
    let sum = |f: fn(&FileInfo) -> Option<u64>| {
        std::iter::once(&info)
            .chain(&uppers)
            .map(f)
            .try_fold(0u64, |all, n| Some(all + n?))
    };
    let (item_count, counted_items) = (sum(|i| i.item_count), sum(|i| i.counted_items));
    let probes = std::iter::once(&info)
        .chain(&uppers)
        .all(|i| i.hash_probe_matches);
    info.checksum = match (cut, first_bad) {
        (Some((header, got)), _) => ChecksumStatus::Truncated {
            expected: expected + header,
            found: found + got,
        },
        (None, Some(ChecksumStatus::Truncated { .. })) => {
            ChecksumStatus::Truncated { expected, found }
        }
        (None, Some(bad)) => bad,
        (None, None) => ChecksumStatus::Valid,
    };
    info.item_count = item_count;
    info.counted_items = counted_items;
    info.hash_probe_matches = probes;
    info.levels = 1 + uppers.len();
    info.upper_levels = uppers;
    Ok(info)
}

impl FileInfo {
    /// Bytes of this record: header, payload, trailer.
    fn file_len(&self) -> u64 {
        let header = if self.format_version == 1 {
            super::format::HEADER_LEN_V1
        } else {
            super::format::HEADER_LEN
        };
        self.payload_bytes
            .saturating_add((header + TRAILER_LEN) as u64)
    }
}

/// The record whose header is `header` (read from `reader`, which is now
/// at its payload), after the record of `below` (`None`: the first):
/// its description, and its shape if it is a cuckoo filter's.
fn inspect_record(
    reader: &mut impl Read,
    header: &[u8],
    below: Option<&cuckoo::Shape>,
) -> Result<(FileInfo, Option<cuckoo::Shape>), LoadError> {
    let h = Header::decode(header)?;
    let mut info = FileInfo {
        kind: h.kind()?,
        format_version: h.version,
        hash_algorithm: h.hash_algorithm,
        growth: None,
        max_false_positive_rate: None,
        max_memory: None,
        fingerprint_bits: 0,
        tags_per_bucket: 0,
        m0: 0,
        generation: 0,
        buckets: h.buckets,
        bits_per_key: 0,
        sized_capacity: None,
        target_false_positive_rate: None,
        seed: h.seed,
        payload_bytes: h.payload_len,
        hash_probe_matches: saved::check_probe(&h).is_ok(),
        item_count: None,
        counted_items: None,
        checksum: ChecksumStatus::Truncated {
            expected: h.file_len(),
            found: header.len() as u64,
        },
        levels: 1,
        upper_levels: Vec::new(),
        regions: None,
    };
    match info.kind {
        FilterKind::Cuckoo => {
            let shape = cuckoo::shape(&h, below)?;
            info.fingerprint_bits = shape.layout.tag_bits();
            info.tags_per_bucket = shape.layout.lanes();
            info.m0 = shape.geo.m0();
            info.generation = shape.geo.generation();
            info.growth = Some(shape.policy.growth);
            info.max_false_positive_rate = Some(shape.policy.max_false_positive_rate);
            info.max_memory = shape.policy.max_memory.map(|m| m as u64);
            let mut check = cuckoo::check(&shape);
            let mut info = stream_payload(reader, header, &mut check, info)?;
            if let cuckoo::Check::Regions(c) = &check {
                info.regions = c.info();
            }
            Ok((info, Some(shape)))
        }
        FilterKind::Bloom => {
            let shape = bloom::shape(&h)?;
            info.bits_per_key = shape.parts.hashes;
            info.sized_capacity = Some(shape.parts.capacity);
            info.target_false_positive_rate = Some(shape.parts.target_fpr);
            let info = stream_payload(reader, header, &mut BitCount::default(), info)?;
            Ok((info, None))
        }
    }
}

/// Streams the payload and trailer of a file whose header is `header`
/// (already checked) through the checksum and `check`, filling in the
/// payload half of `info`.
fn stream_payload(
    mut reader: impl Read,
    header: &[u8],
    check: &mut impl PayloadCheck,
    mut info: FileInfo,
) -> Result<FileInfo, LoadError> {
    let mut sum = Xxh3::new();
    sum.update(header);
    let mut buf = vec![0u8; CHUNK];
    let mut left = info.payload_bytes;
    while left > 0 {
        let want = CHUNK.min(usize::try_from(left).unwrap_or(CHUNK));
        let got = read_full(&mut reader, &mut buf[..want])?;
        if let ChecksumStatus::Truncated { found, .. } = &mut info.checksum {
            *found += got as u64;
        }
        if got < want {
            return Ok(info);
        }
        sum.update(&buf[..got]);
        check.absorb(&buf[..got]);
        left -= got as u64;
    }
    info.counted_items = Some(check.counted());
    let mut trailer = [0u8; TRAILER_LEN];
    let got = read_full(&mut reader, &mut trailer)?;
    if got >= 8 {
        info.item_count = Some(stream::le_word(&trailer[..8]));
    }
    if got < TRAILER_LEN {
        if let ChecksumStatus::Truncated { found, .. } = &mut info.checksum {
            *found += got as u64;
        }
        return Ok(info);
    }
    sum.update(&trailer[..8]);
    let stored = stream::le_word(&trailer[8..]);
    let computed = sum.digest();
    info.checksum = if stored == computed {
        ChecksumStatus::Valid
    } else {
        ChecksumStatus::Mismatch { stored, computed }
    };
    Ok(info)
}
