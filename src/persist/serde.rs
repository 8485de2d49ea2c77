//! `Serialize` / `Deserialize` for both filters (feature `serde`): a filter
//! is the bytes [`write_to`](crate::CuckooFilter::write_to) writes, as one
//! serde byte string, so every check of the file format (checksums, field
//! and payload checks, hash probe) also guards a deserialized filter.
//!
//! Serializing copies the whole file into memory first (serde wants the
//! bytes at once); for large filters `write_to` streams instead.

use crate::bloom::BloomFilter;
use crate::cuckoo::CuckooFilter;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{self, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The file bytes `write` produces, as a serde byte string.
fn serialize_with<S: Serializer>(
    s: S,
    write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
) -> Result<S::Ok, S::Error> {
    let mut bytes = Vec::new();
    write(&mut bytes).map_err(ser::Error::custom)?;
    s.serialize_bytes(&bytes)
}

/// Collects a byte string, whether the format hands it over as bytes or
/// (like JSON) as a sequence of numbers.
struct FileBytes;

/// Elements reserved up front for a sequence, whatever length it claims:
/// more is allocated only as elements arrive.
const RESERVE_AT_MOST: usize = 1 << 20;

impl<'de> Visitor<'de> for FileBytes {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the bytes of a koel filter file")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(RESERVE_AT_MOST));
        while let Some(b) = seq.next_element::<u8>()? {
            v.push(b);
        }
        Ok(v)
    }
}

/// The filter in `d`'s byte string, read by `read`; any load error
/// (damaged, truncated, foreign bytes) and bytes after the file become a
/// serde error.
fn deserialize_with<'de, D: Deserializer<'de>, F>(
    d: D,
    read: impl FnOnce(&mut &[u8]) -> Result<F, crate::LoadError>,
) -> Result<F, D::Error> {
    let bytes = d.deserialize_bytes(FileBytes)?;
    let mut rest = &bytes[..];
    let filter =
        read(&mut rest).map_err(|e| de::Error::custom(format_args!("invalid koel filter: {e}")))?;
    if !rest.is_empty() {
        return Err(de::Error::custom(format_args!(
            "invalid koel filter: {} bytes after the end of the file",
            rest.len()
        )));
    }
    Ok(filter)
}

impl Serialize for CuckooFilter {
    /// The bytes [`write_to`](CuckooFilter::write_to) writes (format
    /// version 3, or 2 for a filter loaded from a version 2 file;
    /// checksummed), as one byte string. Concurrency as in
    /// `write_to`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_with(s, |b| self.write_to(b))
    }
}

impl<'de> Deserialize<'de> for CuckooFilter {
    /// A filter from the bytes [`Serialize`] wrote, with every check of
    /// [`read_from`](CuckooFilter::read_from): damaged or foreign bytes
    /// are a serde error, never a panic or a wrong filter.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_with(d, |r| CuckooFilter::read_from(r))
    }
}

impl Serialize for BloomFilter {
    /// The bytes [`write_to`](BloomFilter::write_to) writes, as one byte
    /// string.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_with(s, |b| self.write_to(b))
    }
}

impl<'de> Deserialize<'de> for BloomFilter {
    /// A filter from the bytes [`Serialize`] wrote, with every check of
    /// [`read_from`](BloomFilter::read_from).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_with(d, |r| BloomFilter::read_from(r))
    }
}
