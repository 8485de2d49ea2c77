// The byte layout, the loader's checks and the rationale are specified
// once, in docs/format.md; this module's documentation is that file.
#![doc = include_str!("../../docs/format.md")]

use super::error::LoadError;
use crate::filter::FilterKind;
use crate::hash::HashAlgorithm;
use xxhash_rust::xxh3::xxh3_64;

/// First 8 bytes of every koel file.
pub(crate) const MAGIC: [u8; 8] = *b"\x89KOEL\r\n\x1a";
/// The newest format version this build reads (it reads 1 to 4) and
/// writes.
pub(crate) const FORMAT_VERSION: u16 = 4;

/// The version of a level of regions' record (and of no other record):
/// a file is written in it only where a filter has such a level.
pub(crate) const REGIONS_VERSION: u16 = 4;

/// The version a record hashed with the algorithm of id `hash_algorithm`
/// is written in: 3 for `Fold`, which version 3 introduced (with its
/// addressing), 2 for the others, so that a filter loaded from a version
/// 2 file saves back to the bytes it was read from and older builds still
/// read the Bloom filters this one writes. Both lay out the same header.
pub(crate) fn written_version(hash_algorithm: u8) -> u16 {
    if hash_algorithm == HashAlgorithm::Fold.id() {
        3
    } else {
        2
    }
}

/// Bytes of a version 2, 3 or 4 header, its checksum included; the longest.
pub(crate) const HEADER_LEN: usize = 96;
/// Bytes of a version 1 header, its checksum included.
pub(crate) const HEADER_LEN_V1: usize = 80;
/// Bytes that say how long the rest of the header is: magic and version.
pub(crate) const PREFIX_LEN: usize = 10;
/// Bytes after the payload: item count and checksum.
pub(crate) const TRAILER_LEN: usize = 16;
/// The input whose hash under the file's seed is stored as the probe:
/// a string and a fixed-width integer.
pub(crate) const PROBE_INPUT: (&str, u64) = ("koel hash probe", 0x6b6f_656c_7072_6f62);

/// Flag bit 0 (version 2, cuckoo filters): another whole record follows
/// this one and is the level above it. Every other bit is refused.
pub(crate) const FLAG_LEVEL_ABOVE: u32 = 1;
/// The most levels a file may hold: each level above the first has at
/// most half the false-positive budget of the one below and needs at
/// least the rate of a first 21-bit table, so no filter has more than
/// about 20.
pub(crate) const MAX_LEVELS: usize = 64;

/// Kind byte of a cuckoo filter.
pub(crate) const KIND_CUCKOO: u8 = 1;
/// Kind byte of a Bloom filter.
pub(crate) const KIND_BLOOM: u8 = 2;

/// Byte offsets of the header fields, as in the table of `docs/format.md`.
pub(crate) mod offset {
    pub(crate) const VERSION: usize = 8;
    pub(crate) const KIND: usize = 10;
    pub(crate) const HASH_ALGORITHM: usize = 11;
    pub(crate) const FLAGS: usize = 12;
    pub(crate) const TAG_BITS: usize = 16;
    pub(crate) const TAGS_PER_BUCKET: usize = 17;
    pub(crate) const WORDS_PER_BUCKET: usize = 18;
    pub(crate) const GENERATION: usize = 19;
    pub(crate) const PARAM32: usize = 20;
    pub(crate) const M0: usize = 24;
    pub(crate) const BUCKETS: usize = 32;
    pub(crate) const SEED: usize = 40;
    pub(crate) const PROBE: usize = 48;
    pub(crate) const PAYLOAD_LEN: usize = 56;
    pub(crate) const PARAM64: usize = 64;
    pub(crate) const MAX_MEMORY: usize = 72;
    pub(crate) const RESERVED: usize = 80;
    pub(crate) const HEADER_CHECKSUM: usize = 88;
}

/// The header length of format `version` (1 to 4).
pub(crate) fn header_len(version: u16) -> usize {
    if version == 1 {
        HEADER_LEN_V1
    } else {
        HEADER_LEN
    }
}

/// A header as read: the bytes of its version's length.
#[derive(Clone, Copy)]
pub(crate) struct HeaderBytes {
    buf: [u8; HEADER_LEN],
    len: usize,
}

impl HeaderBytes {
    pub(crate) fn new(buf: [u8; HEADER_LEN], len: usize) -> Self {
        HeaderBytes { buf, len }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Checks the magic and the version in the first `PREFIX_LEN` bytes;
/// returns the version. Done before the rest of the header is read,
/// since another version may lay it out (and checksum it) differently.
pub(crate) fn check_prefix(b: &[u8]) -> Result<u16, LoadError> {
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&b[..8]);
    if magic != MAGIC {
        return Err(LoadError::NotKoelFile { found: magic });
    }
    let version = u16::from_le_bytes([b[offset::VERSION], b[offset::VERSION + 1]]);
    if !(1..=FORMAT_VERSION).contains(&version) {
        return Err(LoadError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    Ok(version)
}

/// The header fields, decoded but not yet checked against a filter kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// The record's format version (1 to 4); `encode` writes 4 for 4 and
    /// else the one of the hash algorithm ([`written_version`]).
    pub(crate) version: u16,
    pub(crate) kind: u8,
    pub(crate) hash_algorithm: u8,
    pub(crate) flags: u32,
    pub(crate) tag_bits: u8,
    pub(crate) tags_per_bucket: u8,
    pub(crate) words_per_bucket: u8,
    pub(crate) generation: u8,
    pub(crate) m0: u64,
    pub(crate) buckets: u64,
    pub(crate) seed: u64,
    pub(crate) probe: u64,
    pub(crate) payload_len: u64,
    /// The kind-specific 32-bit field at offset 20.
    pub(crate) param32: u32,
    /// The kind-specific 64-bit field at offset 64.
    pub(crate) param64: u64,
    /// Version 2: the cuckoo filter's `max_memory` (0: none) at offset 72.
    pub(crate) max_memory: u64,
    /// Version 2: the reserved field at offset 80.
    pub(crate) reserved: u64,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

impl Header {
    /// The header bytes, checksum included: a level of regions' record in
    /// [`REGIONS_VERSION`], any other in the version of its hash algorithm
    /// ([`written_version`]).
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(&MAGIC);
        let version = if self.version == REGIONS_VERSION {
            REGIONS_VERSION
        } else {
            written_version(self.hash_algorithm)
        };
        b[offset::VERSION..offset::VERSION + 2].copy_from_slice(&version.to_le_bytes());
        b[offset::KIND] = self.kind;
        b[offset::HASH_ALGORITHM] = self.hash_algorithm;
        b[offset::FLAGS..offset::FLAGS + 4].copy_from_slice(&self.flags.to_le_bytes());
        b[offset::TAG_BITS] = self.tag_bits;
        b[offset::TAGS_PER_BUCKET] = self.tags_per_bucket;
        b[offset::WORDS_PER_BUCKET] = self.words_per_bucket;
        b[offset::GENERATION] = self.generation;
        b[offset::PARAM32..offset::PARAM32 + 4].copy_from_slice(&self.param32.to_le_bytes());
        for (at, v) in [
            (offset::M0, self.m0),
            (offset::BUCKETS, self.buckets),
            (offset::SEED, self.seed),
            (offset::PROBE, self.probe),
            (offset::PAYLOAD_LEN, self.payload_len),
            (offset::PARAM64, self.param64),
            (offset::MAX_MEMORY, self.max_memory),
            (offset::RESERVED, self.reserved),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        let sum = xxh3_64(&b[..offset::HEADER_CHECKSUM]);
        b[offset::HEADER_CHECKSUM..].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes a whole header of its version's length, checking in this
    /// order: magic, version, header checksum, then the fields that do not
    /// depend on the filter kind (kind, hash algorithm, flags); the
    /// kind-specific fields are checked by the kind's loader. The magic and
    /// version come first because another version may lay out (and
    /// checksum) its header differently; everything else is trusted only
    /// once the checksum holds.
    pub(crate) fn decode(b: &[u8]) -> Result<Header, LoadError> {
        let version = check_prefix(b)?;
        if b.len() != header_len(version) {
            return Err(LoadError::Truncated {
                section: "header",
                expected: header_len(version) as u64,
                found: b.len() as u64,
            });
        }
        let sum_at = header_len(version) - 8;
        let stored = u64_at(b, sum_at);
        let computed = xxh3_64(&b[..sum_at]);
        if stored != computed {
            return Err(LoadError::HeaderChecksumMismatch { stored, computed });
        }
        let v2 = version >= 2;
        let h = Header {
            version,
            kind: b[offset::KIND],
            hash_algorithm: b[offset::HASH_ALGORITHM],
            flags: u32_at(b, offset::FLAGS),
            tag_bits: b[offset::TAG_BITS],
            tags_per_bucket: b[offset::TAGS_PER_BUCKET],
            words_per_bucket: b[offset::WORDS_PER_BUCKET],
            generation: b[offset::GENERATION],
            m0: u64_at(b, offset::M0),
            buckets: u64_at(b, offset::BUCKETS),
            seed: u64_at(b, offset::SEED),
            probe: u64_at(b, offset::PROBE),
            payload_len: u64_at(b, offset::PAYLOAD_LEN),
            param32: u32_at(b, offset::PARAM32),
            param64: u64_at(b, offset::PARAM64),
            max_memory: if v2 { u64_at(b, offset::MAX_MEMORY) } else { 0 },
            reserved: if v2 { u64_at(b, offset::RESERVED) } else { 0 },
        };
        h.kind()?;
        h.algorithm()?;
        // Version 1 had no flags; the kind's loader decides whether its
        // filters may have levels.
        let known = if v2 { FLAG_LEVEL_ABOVE } else { 0 };
        if h.flags & !known != 0 {
            return Err(LoadError::UnknownFlags(h.flags));
        }
        if h.reserved != 0 {
            return Err(LoadError::ReservedNotZero {
                offset: offset::RESERVED,
                value: h.reserved,
            });
        }
        Ok(h)
    }

    /// The hash algorithm the header names. Version 1 files were all
    /// hashed with `ahash`; version 2 has `ahash` or XXH3; version 3 is
    /// `Fold` (the version also fixes how a cuckoo filter addresses);
    /// version 4, a level of regions, has its filter's, any of them (the
    /// level checks that it is the level below's).
    pub(crate) fn algorithm(&self) -> Result<HashAlgorithm, LoadError> {
        match (self.version, HashAlgorithm::from_id(self.hash_algorithm)) {
            (1, Some(a @ HashAlgorithm::Ahash))
            | (2, Some(a @ (HashAlgorithm::Ahash | HashAlgorithm::Xxh3)))
            | (3, Some(a @ HashAlgorithm::Fold))
            | (REGIONS_VERSION, Some(a)) => Ok(a),
            _ => Err(LoadError::UnknownHashAlgorithm(self.hash_algorithm)),
        }
    }

    /// Whether the level above follows this record ([`FLAG_LEVEL_ABOVE`]).
    pub(crate) fn level_above(&self) -> bool {
        self.flags & FLAG_LEVEL_ABOVE != 0
    }

    /// Bytes of this header in its file.
    pub(crate) fn len(&self) -> usize {
        header_len(self.version)
    }

    /// The filter kind named by the kind byte.
    pub(crate) fn kind(&self) -> Result<FilterKind, LoadError> {
        match self.kind {
            KIND_CUCKOO => Ok(FilterKind::Cuckoo),
            KIND_BLOOM => Ok(FilterKind::Bloom),
            other => Err(LoadError::UnknownKind(other)),
        }
    }

    /// Total file length this header announces: header, payload, trailer.
    /// Saturates, so an unchecked absurd payload length cannot overflow
    /// (once validated, the payload length is far below `u64::MAX`).
    pub(crate) fn file_len(&self) -> u64 {
        self.payload_len
            .saturating_add((self.len() + TRAILER_LEN) as u64)
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
/// Unlike `read_exact`, it tells how much of a truncated input there was.
pub(crate) fn read_full(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            version: 2,
            kind: KIND_CUCKOO,
            hash_algorithm: 2,
            flags: 0,
            tag_bits: 16,
            tags_per_bucket: 4,
            words_per_bucket: 1,
            generation: 2,
            m0: 1 << 20,
            buckets: 1 << 22,
            seed: 0x0123_4567_89AB_CDEF,
            probe: 42,
            payload_len: 8 << 22,
            param32: 0xA1B2_C3D4,
            param64: 0x1122_3344_5566_7788,
            max_memory: 0x99AA_BBCC_DDEE_FF00,
            reserved: 0,
        }
    }

    #[test]
    fn header_round_trips_and_sits_at_the_documented_offsets() {
        let h = sample();
        let b = h.encode();
        assert_eq!(Header::decode(&b).unwrap(), h);
        assert_eq!(&b[..8], b"\x89KOEL\r\n\x1a");
        assert_eq!(&b[8..10], &[2, 0], "version 2, little-endian");
        assert_eq!(b[10], 1, "kind: cuckoo");
        assert_eq!(b[11], 2, "hash algorithm: XXH3");
        assert_eq!(&b[12..16], &[0; 4], "flags");
        // A `Fold` record is version 3, laid out the same.
        let fold = Header {
            version: 3,
            hash_algorithm: 3,
            ..h
        };
        let b3 = fold.encode();
        assert_eq!(&b3[8..10], &[3, 0], "version 3 for the Fold hash");
        assert_eq!(Header::decode(&b3).unwrap(), fold);
        assert_eq!(
            &b3[12..88],
            &b[12..88],
            "the same fields at the same offsets"
        );
        assert_eq!(&b[16..20], &[16, 4, 1, 2]);
        assert_eq!(&b[20..24], &[0xD4, 0xC3, 0xB2, 0xA1], "param32");
        assert_eq!(&b[24..32], &(1u64 << 20).to_le_bytes());
        assert_eq!(&b[32..40], &(1u64 << 22).to_le_bytes());
        assert_eq!(
            &b[40..48],
            &[0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01]
        );
        assert_eq!(&b[48..56], &42u64.to_le_bytes());
        assert_eq!(&b[56..64], &(8u64 << 22).to_le_bytes());
        assert_eq!(&b[64..72], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&b[72..80], &0x99AA_BBCC_DDEE_FF00u64.to_le_bytes());
        assert_eq!(&b[80..88], &[0; 8], "reserved");
        assert_eq!(&b[88..], &xxh3_64(&b[..88]).to_le_bytes());
    }

    /// A version 1 header (80 bytes, checksum at 72) as version 1 wrote it.
    fn v1_bytes(algorithm: u8) -> Vec<u8> {
        let mut b = sample().encode()[..80].to_vec();
        b[8] = 1;
        b[11] = algorithm;
        let sum = xxh3_64(&b[..72]);
        b[72..].copy_from_slice(&sum.to_le_bytes());
        b
    }

    #[test]
    fn version_1_headers_decode_with_their_own_length_and_algorithm() {
        let h = Header::decode(&v1_bytes(1)).unwrap();
        assert_eq!((h.version, h.len(), h.max_memory), (1, 80, 0));
        assert_eq!(h.algorithm().unwrap(), HashAlgorithm::Ahash);
        // Version 1 never wrote the XXH3 id.
        assert!(matches!(
            Header::decode(&v1_bytes(2)),
            Err(LoadError::UnknownHashAlgorithm(2))
        ));
    }

    #[test]
    fn unknown_hash_algorithms_and_reserved_bits_are_refused() {
        let mut h = sample();
        h.hash_algorithm = 7;
        assert!(matches!(
            Header::decode(&h.encode()),
            Err(LoadError::UnknownHashAlgorithm(7))
        ));
        let mut h = sample();
        h.reserved = 1;
        assert!(matches!(
            Header::decode(&h.encode()),
            Err(LoadError::ReservedNotZero {
                offset: 80,
                value: 1
            })
        ));
    }

    #[test]
    fn only_the_level_above_flag_is_known_and_only_in_version_2() {
        let mut h = sample();
        h.flags = FLAG_LEVEL_ABOVE;
        let back = Header::decode(&h.encode()).unwrap();
        assert!(back.level_above());
        assert_eq!(&h.encode()[12..16], &[1, 0, 0, 0]);
        for flags in [2, 3, 0x8000_0000] {
            h.flags = flags;
            assert!(matches!(
                Header::decode(&h.encode()),
                Err(LoadError::UnknownFlags(f)) if f == flags
            ));
        }
        let mut b = v1_bytes(1);
        b[12] = 1;
        let sum = xxh3_64(&b[..72]);
        b[72..].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(
            Header::decode(&b),
            Err(LoadError::UnknownFlags(1))
        ));
    }

    #[test]
    fn each_version_names_only_its_own_hash_algorithms() {
        let with = |version, hash_algorithm| Header {
            version,
            hash_algorithm,
            ..sample()
        };
        assert_eq!(with(1, 1).algorithm().unwrap(), HashAlgorithm::Ahash);
        assert_eq!(with(2, 1).algorithm().unwrap(), HashAlgorithm::Ahash);
        assert_eq!(with(2, 2).algorithm().unwrap(), HashAlgorithm::Xxh3);
        assert_eq!(with(3, 3).algorithm().unwrap(), HashAlgorithm::Fold);
        // `Fold` addresses differently: a version 2 file cannot name it,
        // nor a version 3 file the older hashes.
        for (version, id) in [(1, 2), (1, 3), (2, 3), (3, 1), (3, 2), (2, 0), (3, 4)] {
            assert!(
                matches!(
                    with(version, id).algorithm(),
                    Err(LoadError::UnknownHashAlgorithm(got)) if got == id
                ),
                "version {version}, algorithm {id}"
            );
        }
    }

    #[test]
    fn decode_checks_magic_then_version_then_checksum() {
        let good = sample().encode();
        let mut b = good;
        b[0] = b'P';
        // Even with the checksum also wrong, a wrong magic is reported.
        b[91] ^= 1;
        assert!(matches!(
            Header::decode(&b),
            Err(LoadError::NotKoelFile { .. })
        ));
        let mut b = good;
        b[8] = 5;
        assert!(matches!(
            Header::decode(&b),
            Err(LoadError::UnsupportedVersion {
                found: 5,
                supported: 4
            })
        ));
        let mut b = good;
        b[40] ^= 0x10;
        assert!(matches!(
            Header::decode(&b),
            Err(LoadError::HeaderChecksumMismatch { .. })
        ));
    }
}
