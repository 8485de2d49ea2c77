//! What a saved file holds, without building a filter from it.

use super::bloom::{self, BitCount};
use super::cuckoo::{self, WordCheck};
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
    /// The file's format version (1 or 2).
    pub format_version: u16,
    /// The hash algorithm's id in the header: 2 = XXH3 (every filter this
    /// build makes), 1 = `ahash` (format version 1 files and filters
    /// loaded from them). See [`hash_algorithm_name`](Self::hash_algorithm_name).
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
}

impl FileInfo {
    /// The name of the hash algorithm: `"xxh3"`, `"ahash"` (format version
    /// 1), or `"unknown"`.
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
    let header = header.as_slice();
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
    };
    match info.kind {
        FilterKind::Cuckoo => {
            let shape = cuckoo::shape(&h)?;
            info.fingerprint_bits = shape.layout.tag_bits();
            info.tags_per_bucket = shape.layout.lanes();
            info.m0 = shape.geo.m0();
            info.generation = shape.geo.generation();
            info.growth = Some(shape.policy.growth);
            info.max_false_positive_rate = Some(shape.policy.max_false_positive_rate);
            info.max_memory = shape.policy.max_memory.map(|m| m as u64);
            stream_payload(reader, header, WordCheck::new(&shape), info)
        }
        FilterKind::Bloom => {
            let shape = bloom::shape(&h)?;
            info.bits_per_key = shape.parts.hashes;
            info.sized_capacity = Some(shape.parts.capacity);
            info.target_false_positive_rate = Some(shape.parts.target_fpr);
            stream_payload(reader, header, BitCount::default(), info)
        }
    }
}

/// Streams the payload and trailer of a file whose header is `header`
/// (already checked) through the checksum and `check`, filling in the
/// payload half of `info`.
fn stream_payload(
    mut reader: impl Read,
    header: &[u8],
    mut check: impl PayloadCheck,
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
