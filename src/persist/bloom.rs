//! Saving and loading a [`BloomFilter`]: the same file shape as the cuckoo
//! filter, kind byte 2; its header fields are specified in
//! `docs/format.md` ("Bloom filter (kind 2)").

use super::error::LoadError;
use super::file;
use super::format::{self, Header};
use super::saved::{self, PayloadCheck, Saved};
use super::stream;
use crate::bloom::parts::{BloomParts, FromPartsError, BIT_MAPPING_VERSION};
use crate::bloom::BloomFilter;
use crate::filter::FilterKind;
use crate::hash::HashAlgorithm;
use crate::sync::Ordering;
use std::io::{self, Read, Write};
use std::path::Path;

/// Bytes per block.
const BLOCK_BYTES: u64 = 64;

/// A Bloom header's parameters, validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) parts: BloomParts,
    pub(crate) payload_len: u64,
}

/// Checks every Bloom-specific header field except the hash probe.
/// Allocates nothing.
pub(crate) fn shape(h: &Header) -> Result<Shape, LoadError> {
    let found = h.kind()?;
    if found != FilterKind::Bloom {
        return Err(LoadError::WrongKind {
            expected: FilterKind::Bloom,
            found,
        });
    }
    // Version 4 is a cuckoo filter's level of regions only.
    if h.version == format::REGIONS_VERSION {
        return Err(LoadError::UnsupportedVersion {
            found: h.version,
            supported: 2,
        });
    }
    for (offset, value) in [
        (format::offset::TAG_BITS, h.tag_bits),
        (format::offset::GENERATION, h.generation),
    ] {
        if value != 0 {
            return Err(LoadError::ReservedNotZero {
                offset,
                value: u64::from(value),
            });
        }
    }
    // A Bloom filter has no levels: no record may follow it.
    if h.flags != 0 {
        return Err(LoadError::UnknownFlags(h.flags));
    }
    if h.words_per_bucket != 8 {
        return Err(LoadError::UnsupportedBloomLayout {
            bits_per_key: h.tags_per_bucket,
            words_per_block: h.words_per_bucket,
        });
    }
    if h.param32 != BIT_MAPPING_VERSION {
        return Err(LoadError::UnsupportedBitMapping {
            found: h.param32,
            supported: BIT_MAPPING_VERSION,
        });
    }
    if h.max_memory != 0 {
        return Err(LoadError::ReservedNotZero {
            offset: format::offset::MAX_MEMORY,
            value: h.max_memory,
        });
    }
    // `Fold` (and with it version 3) is a cuckoo filter's hash only: no
    // build writes a Bloom filter with it, and the probe cannot tell it
    // from XXH3 (`saved::probe`), so refuse it by its id.
    let algorithm = match h.algorithm()? {
        HashAlgorithm::Fold => return Err(LoadError::UnknownHashAlgorithm(h.hash_algorithm)),
        a => a,
    };
    let parts = BloomParts {
        blocks: h.buckets,
        hashes: u32::from(h.tags_per_bucket),
        seed: h.seed,
        algorithm,
        capacity: h.m0,
        target_fpr: f64::from_bits(h.param64),
    };
    // The filter's own definition of parameters it can run on.
    parts.check().map_err(parts_error)?;
    // `check` keeps `64 * blocks` below `isize::MAX`: no overflow.
    let payload_len = h.buckets * BLOCK_BYTES;
    if h.payload_len != payload_len {
        return Err(LoadError::PayloadLengthMismatch {
            stored: h.payload_len,
            expected: payload_len,
        });
    }
    Ok(Shape { parts, payload_len })
}

/// The load error for parameters `BloomParts::check` refused, or for a
/// failed allocation or fill.
fn parts_error(e: FromPartsError) -> LoadError {
    match e {
        FromPartsError::BadBlocks(blocks) => LoadError::InvalidBlockCount { blocks },
        FromPartsError::BadHashes(k) => LoadError::UnsupportedBloomLayout {
            bits_per_key: k.min(255) as u8,
            words_per_block: 8,
        },
        FromPartsError::BadCapacity(capacity) => LoadError::InvalidCapacity { capacity },
        FromPartsError::BadRate(rate) => LoadError::InvalidFalsePositiveRate { rate },
        FromPartsError::Allocation { bytes } => LoadError::AllocationFailed {
            bytes: bytes as u64,
        },
        FromPartsError::Fill(e) => LoadError::Io(e),
    }
}

/// Counts set bits; every bit pattern is a possible Bloom filter.
#[derive(Default)]
pub(crate) struct BitCount {
    counted: u64,
}

impl PayloadCheck for BitCount {
    fn absorb(&mut self, bytes: &[u8]) {
        self.counted += set_bits(bytes);
    }

    fn counted(&self) -> u64 {
        self.counted
    }

    fn verdict(self, stored_count: u64) -> Result<(), LoadError> {
        if stored_count != self.counted {
            return Err(LoadError::ItemCountMismatch {
                stored: stored_count,
                counted: self.counted,
            });
        }
        Ok(())
    }
}

/// Set bits in `bytes`.
fn set_bits(bytes: &[u8]) -> u64 {
    bytes
        .chunks_exact(8)
        .map(|w| u64::from(stream::le_word(w).count_ones()))
        .sum()
}

impl Saved for BloomFilter {
    type Shape = Shape;
    type Check = BitCount;
    type Level = BloomFilter;

    fn shape(h: &Header, _below: Option<&Shape>) -> Result<Shape, LoadError> {
        shape(h)
    }

    fn level_above(_: &Shape) -> bool {
        false
    }

    fn first(level: BloomFilter) -> Result<BloomFilter, LoadError> {
        Ok(level)
    }

    fn attach(&self, _above: BloomFilter) -> Result<(), LoadError> {
        // `level_above` is false for every Bloom shape (`shape` refuses
        // the flag), so the loaders never read a second record.
        Err(LoadError::InvalidLevel {
            level: 1,
            reason: "a Bloom filter has no levels",
        })
    }

    fn payload_len(shape: &Shape) -> u64 {
        shape.payload_len
    }

    fn check(_: &Shape) -> BitCount {
        BitCount::default()
    }

    fn build(
        shape: &Shape,
        _: &Header,
        _count: u64,
        fill: impl FnMut(&mut [u8]) -> io::Result<()>,
    ) -> Result<Self, LoadError> {
        BloomFilter::from_parts(shape.parts, fill).map_err(|e| match e {
            FromPartsError::Allocation { .. } => LoadError::AllocationFailed {
                bytes: shape.payload_len,
            },
            e => parts_error(e),
        })
    }
}

impl BloomFilter {
    /// Writes the filter in koel's file format (specified in
    /// `docs/format.md`) to `writer`, streaming the bits in 1 MiB chunks.
    ///
    /// Other threads may keep inserting: the file holds every item whose
    /// insert happened before this call (bits are only ever set, until
    /// `clear`); an item inserted during the call may or may not be in it.
    /// Nothing waits for the save.
    ///
    /// # Errors
    ///
    /// Any error of `writer`; what was written until then is not a valid
    /// file.
    ///
    /// ```
    /// let f = koel::BloomFilter::builder().capacity(1000).seed(1).build()?;
    /// f.insert("a");
    /// let mut bytes = Vec::new();
    /// f.write_to(&mut bytes)?;
    /// let g = koel::BloomFilter::read_from(&bytes[..])?;
    /// assert!(g.contains("a"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_to<W: Write>(&self, writer: W) -> io::Result<()> {
        let p = self.parts();
        let header = Header {
            version: format::written_version(p.algorithm.id()),
            kind: format::KIND_BLOOM,
            hash_algorithm: p.algorithm.id(),
            flags: 0,
            tag_bits: 0,
            tags_per_bucket: p.hashes as u8,
            words_per_bucket: 8,
            generation: 0,
            m0: p.capacity,
            buckets: p.blocks,
            seed: p.seed,
            probe: saved::probe(p.seed, p.algorithm),
            payload_len: p.blocks * BLOCK_BYTES,
            param32: BIT_MAPPING_VERSION,
            param64: p.target_fpr.to_bits(),
            max_memory: 0,
            reserved: 0,
        };
        saved::write_file(writer, header, self.words(), |chunk, out| {
            for (dst, word) in out.chunks_exact_mut(8).zip(chunk) {
                // Relaxed: bits are only set; an insert racing this load
                // may or may not be seen, as documented. Each word is
                // loaded once, and the bits are counted from the bytes
                // written, so file and count agree.
                dst.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
            }
            set_bits(out)
        })
    }

    /// Reads a filter written by [`write_to`](Self::write_to) or
    /// [`save`](Self::save), checking every field and the checksum before
    /// the filter is returned. Reads exactly the file's bytes. Buffers the
    /// payload as it arrives, so it never allocates more than the input
    /// justifies (memory peaks at twice the bit array).
    ///
    /// # Errors
    ///
    /// A [`LoadError`] saying what is wrong.
    pub fn read_from<R: Read>(reader: R) -> Result<BloomFilter, LoadError> {
        saved::read_from(reader)
    }

    /// Saves the filter to `path` atomically (temporary file in the same
    /// directory, sync, rename, sync of the directory), as
    /// [`CuckooFilter::save`](crate::CuckooFilter::save), with the same
    /// rules: permissions kept, symbolic links followed, anything but a
    /// regular file refused, nothing partial left behind by a killed
    /// process on Linux.
    ///
    /// # Errors
    ///
    /// Any I/O error (the old file at `path` is then untouched);
    /// `InvalidInput` for a path that names no file, something other than
    /// a regular file, or a loop of symbolic links; `PermissionDenied` for
    /// an existing file the caller may not write (it is not replaced).
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        file::replace_atomically(path.as_ref(), |f| self.write_to(f))
    }

    /// Loads a filter saved with [`save`](Self::save): checks the header
    /// and the file's length before allocating, then reads the bits
    /// straight into the filter. A sparse file is verified before the bit
    /// array is allocated, as in
    /// [`CuckooFilter::load`](crate::CuckooFilter::load).
    ///
    /// # Errors
    ///
    /// As [`read_from`](Self::read_from), plus
    /// [`LoadError::FileLengthMismatch`].
    pub fn load(path: impl AsRef<Path>) -> Result<BloomFilter, LoadError> {
        saved::load(path.as_ref())
    }
}
