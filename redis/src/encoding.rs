//! The bytes a key is saved as (RDB, DUMP, AOF rewrite, CF.SCANDUMP): a
//! small module header, checksummed, then koel's own checksummed files.
//!
//! | offset | bytes | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `koel-rds` |
//! | 8 | 1 | kind: 1 cuckoo, 2 Bloom |
//! | 9 | 1 | version: 2 written, 1 and 2 read |
//! | 10 | 2 | 0 |
//! | 12 | 4 | `n`: bytes of the kind's fields |
//! | 16 | 8 | total length of the encoding |
//! | 24 | n | the kind's fields (little-endian integers) |
//! | 24 + n | 8 | version 2: XXH3-64 of the koel files (from `40 + n`) |
//! | 24 + n (v1), 32 + n (v2) | 8 | XXH3-64 of every byte before it |
//! | 32 + n (v1), 40 + n (v2) | rest | koel files (`write_to`), each with its own checksum |
//!
//! Every field is checked before anything is allocated from it, so a
//! damaged or foreign payload is refused with a message, never loaded.
//! Version 2 (2026-12-06) ties the header to the files: in version 1 the
//! header of one dump (with, say, a Bloom key's item counts) and the files
//! of another passed their checksums apart and loaded as a key that
//! counted an item it did not hold. Version 1 bytes (RDB files of earlier
//! builds) still load.

use xxhash_rust::xxh3::xxh3_64;

const MAGIC: &[u8; 8] = b"koel-rds";
/// The version written; 1 is still read.
const VERSION: u8 = 2;
/// Bytes before the kind's fields.
pub const PREFIX: usize = 24;
/// The most a kind's fields may take (bounds a hostile length field).
const MAX_FIELDS: usize = 1 << 20;

/// Which filter an encoding holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Cuckoo = 1,
    Bloom = 2,
}

/// Writes the header with `fields`, then lets `payload` append the koel
/// files; returns the finished bytes.
pub fn encode(
    kind: Kind,
    fields: &[u8],
    payload: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(PREFIX + fields.len() + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[kind as u8, VERSION, 0, 0]);
    out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // total, set below
    out.extend_from_slice(fields);
    let files_sum_at = out.len();
    let sum_at = files_sum_at + 8;
    out.extend_from_slice(&[0; 16]); // both checksums, set below
    payload(&mut out)?;
    let total = out.len() as u64;
    out[16..24].copy_from_slice(&total.to_le_bytes());
    let files_sum = xxh3_64(&out[sum_at + 8..]);
    out[files_sum_at..sum_at].copy_from_slice(&files_sum.to_le_bytes());
    let sum = xxh3_64(&out[..sum_at]);
    out[sum_at..sum_at + 8].copy_from_slice(&sum.to_le_bytes());
    Ok(out)
}

/// Checks the header at the start of `bytes` (magic, kind, version,
/// field length, checksum) and returns the total length it announces and
/// where the payload starts. Needs only the header's bytes, so a first
/// LOADCHUNK chunk is checked before it is kept.
pub fn header(kind: Kind, bytes: &[u8]) -> Result<(u64, usize), String> {
    if bytes.len() < PREFIX {
        return Err("too short for a header".into());
    }
    if &bytes[..8] != MAGIC {
        return Err("not a koel filter (bad magic)".into());
    }
    if bytes[8] != kind as u8 {
        return Err("another filter kind".into());
    }
    let version = bytes[9];
    if !(1..=VERSION).contains(&version) || bytes[10..12] != [0, 0] {
        return Err(format!("unsupported encoding version {version}"));
    }
    let n = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
    if n > MAX_FIELDS {
        return Err("header longer than the bytes".into());
    }
    // No overflow: `n` is at most `MAX_FIELDS`.
    let sum_at = PREFIX + n + if version >= 2 { 8 } else { 0 };
    if sum_at + 8 > bytes.len() {
        return Err("header longer than the bytes".into());
    }
    if xxh3_64(&bytes[..sum_at]) != u64_at(bytes, sum_at) {
        return Err("header checksum mismatch".into());
    }
    Ok((u64_at(bytes, 16), sum_at + 8))
}

/// Checks the header of `bytes` and returns the kind's fields and the
/// payload.
pub fn decode(kind: Kind, bytes: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let (total, payload_at) = header(kind, bytes)?;
    if total != bytes.len() as u64 {
        return Err(format!(
            "length {} but the header says {total}",
            bytes.len()
        ));
    }
    let payload = &bytes[payload_at..];
    let mut fields_end = payload_at - 8;
    if bytes[9] >= 2 {
        fields_end -= 8;
        if xxh3_64(payload) != u64_at(bytes, fields_end) {
            return Err("the filter's bytes do not belong to this header".into());
        }
    }
    Ok((&bytes[PREFIX..fields_end], payload))
}

/// The little-endian `u64` at `at` (the caller checked the bounds).
pub fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

/// A reader of little-endian fields that refuses to run past the end.
pub struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Fields { bytes }
    }

    pub fn u64(&mut self) -> Result<u64, String> {
        if self.bytes.len() < 8 {
            return Err("header fields too short".into());
        }
        let v = u64_at(self.bytes, 0);
        self.bytes = &self.bytes[8..];
        Ok(v)
    }

    /// Every field was read.
    pub fn end(&self) -> Result<(), String> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err("unexpected header fields".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_flipped_header_byte_is_refused() {
        let bytes = encode(Kind::Cuckoo, &7u64.to_le_bytes(), |out| {
            out.extend_from_slice(b"payload");
            Ok(())
        })
        .unwrap();
        let (fields, payload) = decode(Kind::Cuckoo, &bytes).unwrap();
        assert_eq!(
            (fields, payload),
            (&7u64.to_le_bytes()[..], &b"payload"[..])
        );
        assert!(decode(Kind::Bloom, &bytes).is_err());
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode(Kind::Cuckoo, &bad).is_err(), "byte {i}");
        }
        assert!(decode(Kind::Cuckoo, &bytes[..bytes.len() - 1]).is_err());
    }

    /// The header of one encoding with the payload of another (same
    /// lengths) is refused: version 1 checked the two apart.
    #[test]
    fn a_header_with_another_encodings_payload_is_refused() {
        let one = |p: &'static [u8]| {
            encode(Kind::Bloom, &1u64.to_le_bytes(), move |out| {
                out.extend_from_slice(p);
                Ok(())
            })
            .unwrap()
        };
        let (a, b) = (one(b"payload-a"), one(b"payload-b"));
        let at = a.len() - 9;
        let spliced = [&a[..at], &b[at..]].concat();
        assert!(decode(Kind::Bloom, &a).is_ok() && decode(Kind::Bloom, &b).is_ok());
        assert!(decode(Kind::Bloom, &spliced).is_err());
    }

    /// Bytes of encoding version 1 (no payload checksum), as earlier
    /// builds wrote them to RDB files, still decode.
    #[test]
    fn version_1_still_decodes() {
        let fields = 7u64.to_le_bytes();
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&[Kind::Cuckoo as u8, 1, 0, 0]);
        v1.extend_from_slice(&8u32.to_le_bytes());
        let total = (PREFIX + 8 + 8 + 7) as u64;
        v1.extend_from_slice(&total.to_le_bytes());
        v1.extend_from_slice(&fields);
        let sum = xxh3_64(&v1);
        v1.extend_from_slice(&sum.to_le_bytes());
        v1.extend_from_slice(b"payload");
        let (f, p) = decode(Kind::Cuckoo, &v1).unwrap();
        assert_eq!((f, p), (&fields[..], &b"payload"[..]));
    }
}
