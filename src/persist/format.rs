//! The koel file format, version 1: byte layout, header encoding and the
//! checks every header passes before anything is allocated.
//!
//! The table below gives the cuckoo filter's fields; a Bloom filter
//! (kind 2) uses bytes 16..40 and 64..72 differently, as `bloom.rs` lists.
//!
//! Every integer is little-endian. A file is a fixed 80-byte header, the
//! payload, and a 16-byte trailer:
//!
//! | offset | size | field | value in version 1 |
//! | ---: | ---: | --- | --- |
//! | 0 | 8 | magic | `89 4B 4F 45 4C 0D 0A 1A` (`\x89KOEL\r\n\x1a`) |
//! | 8 | 2 | format version | `1` |
//! | 10 | 1 | filter kind | `1` = cuckoo filter, `2` = Bloom filter (its fields: `bloom.rs`) |
//! | 11 | 1 | hash algorithm | `1` = `ahash` 0.8 `RandomState::with_seeds`, its four keys drawn from SplitMix64 of the seed, fed through `std::hash::Hash` |
//! | 12 | 4 | flags | `0`; a file with any bit set is refused (reserved for growth-policy options) |
//! | 16 | 1 | tag bits | `16` or `12` |
//! | 17 | 1 | tags per bucket | `4` (with 16 tag bits) or `5` (with 12) |
//! | 18 | 1 | words per bucket | `1` (a bucket is one 64-bit word) |
//! | 19 | 1 | generation `g` | `0..=tag_bits - 4`: the table has `m0 * 2^g` buckets |
//! | 20 | 4 | kind-specific | cuckoo: `0` (reserved) |
//! | 24 | 8 | `m0` | buckets per region: even, `64..=2^32` |
//! | 32 | 8 | bucket count | `m0 << g` |
//! | 40 | 8 | seed | the filter's hash seed |
//! | 48 | 8 | hash probe | the filter's hash of [`PROBE_INPUT`] under the seed |
//! | 56 | 8 | payload length | bytes: `8 * words per bucket * bucket count` |
//! | 64 | 8 | kind-specific | cuckoo: `0` (reserved for growth settings) |
//! | 72 | 8 | header checksum | XXH3-64 (seed 0) of bytes `0..72` |
//! | 80 | payload length | payload | the bucket words in index order, each a `u64` |
//! | 80 + P | 8 | item count | occupied tag slots in the payload |
//! | 88 + P | 8 | checksum | XXH3-64 (seed 0) of bytes `0..88 + P`: header, payload and item count |
//!
//! A bucket word holds its tags in lanes from the least significant bit up:
//! lane `k` is bits `k*w .. (k+1)*w`. A lane of 0 is empty; the all-ones
//! tag is reserved and never stored; in the 12-bit layout the top 4 bits
//! are 0. In a table of generation `g`, bucket `i` lies in region
//! `i / m0`, and every tag in it has that region as its low `g` bits (a
//! key's two buckets are in its tag's region); a file that breaks this is
//! refused.
//!
//! Why this shape:
//!
//! * The magic starts with a non-ASCII byte and holds `\r\n` and `^Z`, so a
//!   file mangled by a text-mode transfer or taken for text fails at once
//!   (the PNG trick).
//! * The version comes right after the magic and is checked before
//!   anything else is read, so a future version can change every other
//!   byte.
//! * The header has its own checksum so that a reader can trust (and
//!   [`inspect`](crate::inspect) can print) the header before streaming a
//!   payload of gigabytes; torn or flipped header bytes are reported as such.
//! * The item count is a trailer, not a header field: a filter is saved
//!   while inserts may still fill free slots, and a writer that streams to
//!   a plain `io::Write` knows the exact count of what it wrote only at the
//!   end. The loader counts occupied slots itself and refuses a file whose
//!   trailer disagrees.
//! * XXH3-64 checksums run at tens of GB/s, far above disk and memory-copy
//!   speed, so verifying costs nothing noticeable; 64 bits keep the chance
//!   that a random corruption goes unnoticed at 2^-64 even for multi-GB
//!   payloads.
//! * The hash probe makes a build whose `ahash` output differs (another
//!   `ahash` version, CPU features) refuse the file instead of answering
//!   "absent" for keys that are in it.

use super::error::LoadError;
use crate::filter::FilterKind;
use xxhash_rust::xxh3::xxh3_64;

/// First 8 bytes of every koel file.
pub(crate) const MAGIC: [u8; 8] = *b"\x89KOEL\r\n\x1a";
/// The format version this build writes and reads.
pub(crate) const FORMAT_VERSION: u16 = 1;
/// Bytes of the fixed header, its checksum included.
pub(crate) const HEADER_LEN: usize = 80;
/// Bytes after the payload: item count and checksum.
pub(crate) const TRAILER_LEN: usize = 16;
/// The input whose hash under the file's seed is stored as the probe:
/// a string and a fixed-width integer, both of which hash the same on
/// every platform of one build (no `usize` in it).
pub(crate) const PROBE_INPUT: (&str, u64) = ("koel hash probe", 0x6b6f_656c_7072_6f62);

/// The hash-algorithm id of `ahash` 0.8 seeded as koel seeds it.
pub(crate) const HASH_AHASH_V1: u8 = 1;
/// Kind byte of a cuckoo filter.
pub(crate) const KIND_CUCKOO: u8 = 1;
/// Kind byte of a Bloom filter.
pub(crate) const KIND_BLOOM: u8 = 2;

/// Byte offsets of the header fields, as in the table above.
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
    pub(crate) const HEADER_CHECKSUM: usize = 72;
}

/// The header fields, decoded but not yet checked against a filter kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
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
}

fn u16_at(b: &[u8; HEADER_LEN], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8; HEADER_LEN], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8; HEADER_LEN], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

impl Header {
    /// The 80 header bytes, checksum included.
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[offset::VERSION..offset::VERSION + 2].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
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
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        let sum = xxh3_64(&b[..offset::HEADER_CHECKSUM]);
        b[offset::HEADER_CHECKSUM..].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes `b`, checking in this order: magic, version, header checksum,
    /// then the fields that do not depend on the filter kind (kind, hash
    /// algorithm, flags); the kind-specific fields are checked by the kind's
    /// loader. The magic and version come first
    /// because another version may lay out (and checksum) its header
    /// differently; everything else is trusted only once the checksum holds.
    pub(crate) fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, LoadError> {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[..8]);
        if magic != MAGIC {
            return Err(LoadError::NotKoelFile { found: magic });
        }
        let version = u16_at(b, offset::VERSION);
        if version != FORMAT_VERSION {
            return Err(LoadError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let stored = u64_at(b, offset::HEADER_CHECKSUM);
        let computed = xxh3_64(&b[..offset::HEADER_CHECKSUM]);
        if stored != computed {
            return Err(LoadError::HeaderChecksumMismatch { stored, computed });
        }
        let h = Header {
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
        };
        h.kind()?;
        if h.hash_algorithm != HASH_AHASH_V1 {
            return Err(LoadError::UnknownHashAlgorithm(h.hash_algorithm));
        }
        if h.flags != 0 {
            return Err(LoadError::UnknownFlags(h.flags));
        }
        Ok(h)
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
            .saturating_add((HEADER_LEN + TRAILER_LEN) as u64)
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
            kind: KIND_CUCKOO,
            hash_algorithm: HASH_AHASH_V1,
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
        }
    }

    #[test]
    fn header_round_trips_and_sits_at_the_documented_offsets() {
        let h = sample();
        let b = h.encode();
        assert_eq!(Header::decode(&b).unwrap(), h);
        assert_eq!(&b[..8], b"\x89KOEL\r\n\x1a");
        assert_eq!(&b[8..10], &[1, 0], "version 1, little-endian");
        assert_eq!(b[10], 1, "kind: cuckoo");
        assert_eq!(b[11], 1, "hash algorithm: ahash v1");
        assert_eq!(&b[12..16], &[0; 4], "flags");
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
        assert_eq!(&b[72..], &xxh3_64(&b[..72]).to_le_bytes());
    }

    #[test]
    fn decode_checks_magic_then_version_then_checksum() {
        let good = sample().encode();
        let mut b = good;
        b[0] = b'P';
        // Even with the checksum also wrong, a wrong magic is reported.
        b[75] ^= 1;
        assert!(matches!(
            Header::decode(&b),
            Err(LoadError::NotKoelFile { .. })
        ));
        let mut b = good;
        b[8] = 2;
        assert!(matches!(
            Header::decode(&b),
            Err(LoadError::UnsupportedVersion {
                found: 2,
                supported: 1
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
