//! The steps every filter kind shares: writing header, payload and trailer;
//! reading them back from a reader or a file, with the kind supplying only
//! its header checks, its per-word check and its constructor.

use super::error::LoadError;
use super::format::{self, read_full, Header, HeaderBytes, TRAILER_LEN};
use super::stream::{self, PayloadReader, CHUNK};
use crate::hash::{HashAlgorithm, KeyHasher};
use crate::sync::AtomicU64;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use xxhash_rust::xxh3::Xxh3;

/// The hash probe of `seed` under `algorithm`: this build's hash of the
/// fixed probe input. Both filter kinds hash keys with [`KeyHasher`].
pub(crate) fn probe(seed: u64, algorithm: HashAlgorithm) -> u64 {
    let hasher = KeyHasher::with_algorithm(seed, algorithm);
    let probe = hasher.hash(&format::PROBE_INPUT);
    match algorithm {
        // `Fold` hashes the 24-byte input as XXH3 does: an 8-byte input
        // too, so that the probe tells the two apart.
        HashAlgorithm::Fold => probe ^ hasher.hash(&format::PROBE_INPUT.1),
        HashAlgorithm::Xxh3 | HashAlgorithm::Ahash => probe,
    }
}

/// Refuses a file whose hash probe this build does not reproduce.
pub(crate) fn check_probe(h: &Header) -> Result<(), LoadError> {
    let computed = probe(h.seed, h.algorithm()?);
    if computed != h.probe {
        return Err(LoadError::HashProbeMismatch {
            stored: h.probe,
            computed,
        });
    }
    Ok(())
}

/// Checks payload words as they stream past and counts what the trailer's
/// item count must equal.
pub(crate) trait PayloadCheck {
    /// Takes the next little-endian words (`le_bytes.len()` is a multiple
    /// of 8).
    fn absorb(&mut self, le_bytes: &[u8]);
    /// What was counted so far.
    fn counted(&self) -> u64;
    /// After the checksum matched: the payload's content error, if any,
    /// then whether the trailer's count is the one counted.
    fn verdict(self, stored_count: u64) -> Result<(), LoadError>;
}

/// A filter kind that can be saved.
pub(crate) trait Saved: Sized {
    /// The header fields of this kind, validated.
    type Shape: Copy;
    /// The kind's check of payload words.
    type Check: PayloadCheck;
    /// What one record builds: a level of the filter.
    type Level;
    /// Checks every kind-specific header field except the hash probe, and
    /// that the record may follow `below` (the shape of the record before
    /// it, whose level this one is above; `None` for the first). Allocates
    /// nothing.
    fn shape(h: &Header, below: Option<&Self::Shape>) -> Result<Self::Shape, LoadError>;
    /// Whether the record of the level above follows a record of `shape`.
    fn level_above(shape: &Self::Shape) -> bool;
    /// The filter whose first level `level` is (the first record's).
    fn first(level: Self::Level) -> Result<Self, LoadError>;
    /// Puts `above`, built from the record after this filter's top level,
    /// above that level. Called only when `level_above` said so.
    fn attach(&self, above: Self::Level) -> Result<(), LoadError>;
    /// Payload bytes of a file of this shape.
    fn payload_len(shape: &Self::Shape) -> u64;
    /// A fresh payload check.
    fn check(shape: &Self::Shape) -> Self::Check;
    /// Allocates the level and lets `fill` write the saved payload into it
    /// as native-endian words, piece after piece in payload order (each
    /// call fills the whole slice it gets, a multiple of 8 bytes; the
    /// pieces cover the payload); `count` is the trailer's item count.
    fn build(
        shape: &Self::Shape,
        h: &Header,
        count: u64,
        fill: impl FnMut(&mut [u8]) -> io::Result<()>,
    ) -> Result<Self::Level, LoadError>;
}

/// Writes a whole record: `header`, then `words` in `CHUNK`s, each turned
/// into little-endian bytes by `encode` (which returns what it counted
/// for the trailer), then the trailer.
pub(crate) fn write_file<W: Write>(
    writer: W,
    header: Header,
    words: &[AtomicU64],
    encode: impl FnMut(&[AtomicU64], &mut [u8]) -> u64,
) -> io::Result<()> {
    write_parts(writer, header, &[], &[words], encode)
}

/// Writes a whole record whose payload is `prefix` (little-endian bytes,
/// counted as no items), then every run of `runs` in order, in `CHUNK`s
/// that `encode` turns into little-endian bytes, returning what it
/// counted for the trailer.
pub(crate) fn write_parts<W: Write>(
    mut writer: W,
    header: Header,
    prefix: &[u8],
    runs: &[&[AtomicU64]],
    mut encode: impl FnMut(&[AtomicU64], &mut [u8]) -> u64,
) -> io::Result<()> {
    let header = header.encode();
    let mut sum = Xxh3::new();
    sum.update(&header);
    writer.write_all(&header)?;
    sum.update(prefix);
    writer.write_all(prefix)?;
    let longest = runs.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut buf = vec![0u8; CHUNK.min(longest * 8)];
    let mut count = 0u64;
    for words in runs {
        for chunk in words.chunks(CHUNK / 8) {
            let out = &mut buf[..chunk.len() * 8];
            count += encode(chunk, out);
            sum.update(out);
            writer.write_all(out)?;
        }
    }
    let count = count.to_le_bytes();
    sum.update(&count);
    writer.write_all(&count)?;
    writer.write_all(&sum.digest().to_le_bytes())?;
    writer.flush()
}

/// The header of the input, decoded and checked for kind `F` as the record
/// after `below` (`None`: the first).
fn read_checked_header<F: Saved>(
    r: &mut impl Read,
    below: Option<&F::Shape>,
) -> Result<(HeaderBytes, Header, F::Shape), LoadError> {
    let bytes = stream::read_header(r).map_err(|e| match e {
        // The level below announced this record; say so.
        LoadError::Truncated {
            section: "header",
            expected,
            found,
        } if below.is_some() => LoadError::Truncated {
            section: "header of the level above",
            expected,
            found,
        },
        e => e,
    })?;
    let h = Header::decode(bytes.as_slice())?;
    let shape = F::shape(&h, below)?;
    check_probe(&h)?;
    Ok((bytes, h, shape))
}

/// Reads one record (header, payload, trailer) after `below`, buffering the
/// payload as it arrives, verifies it, then builds its filter.
fn read_record<F: Saved>(
    reader: &mut impl Read,
    below: Option<&F::Shape>,
) -> Result<(F::Level, F::Shape), LoadError> {
    let (bytes, h, shape) = read_checked_header::<F>(reader, below)?;
    let mut sum = Xxh3::new();
    sum.update(bytes.as_slice());
    let mut check = F::check(&shape);
    let payload = PayloadReader::new(F::payload_len(&shape)).read_all(reader, |chunk| {
        sum.update(chunk);
        check.absorb(chunk);
    })?;
    let stored_count = stream::read_trailer(reader, sum)?;
    check.verdict(stored_count)?;
    let mut rest = &payload[..];
    let level = F::build(&shape, &h, stored_count, |dst| {
        let (now, later) = rest.split_at(dst.len());
        dst.copy_from_slice(now);
        stream::le_to_native_in_place(dst);
        rest = later;
        Ok(())
    })?;
    Ok((level, shape))
}

/// `read_from` for any kind: reads records until one without a level
/// above, each verified before its level is built, and stacks them.
/// Reads nothing after the last record.
pub(crate) fn read_from<F: Saved>(reader: impl Read) -> Result<F, LoadError> {
    stack::<F>(read_levels::<F>(reader)?)
}

/// The filter of `levels`, the first level first.
fn stack<F: Saved>(levels: Vec<F::Level>) -> Result<F, LoadError> {
    let mut levels = levels.into_iter();
    let filter = F::first(levels.next().expect("a file has a first record"))?;
    for level in levels {
        filter.attach(level)?;
    }
    Ok(filter)
}

/// Every level of the file `reader` holds, the first first, each verified
/// before it is built. Reads nothing after the last record.
pub(crate) fn read_levels<F: Saved>(mut reader: impl Read) -> Result<Vec<F::Level>, LoadError> {
    let (first, mut shape) = read_record::<F>(&mut reader, None)?;
    let mut levels = vec![first];
    while F::level_above(&shape) {
        let (level, above) = read_record::<F>(&mut reader, Some(&shape))?;
        levels.push(level);
        shape = above;
    }
    Ok(levels)
}

/// Whether `meta`'s file occupies at least its length in storage. A file
/// that does not (sparse, or on a compressing file system) may claim a
/// table far larger than what it took to make it.
fn fully_stored(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // `blocks` counts 512-byte units whatever the file system's block.
        meta.blocks().saturating_mul(512) >= meta.len()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Streams the payload and trailer of `record` through the checksum and
/// the kind's check, in one reused chunk; `Ok` only for an intact, valid
/// record. Leaves `f` anywhere.
fn verify_payload<F: Saved>(
    f: &mut (impl Read + Seek),
    record: &Record<F>,
) -> Result<(), LoadError> {
    let header = record.bytes.as_slice();
    let shape = &record.shape;
    let payload_len = F::payload_len(shape);
    f.seek(SeekFrom::Start(record.at + header.len() as u64))?;
    let mut sum = Xxh3::new();
    sum.update(header);
    finish_verifying::<F>(f, payload_len, 0, sum, F::check(shape))
}

/// Streams payload bytes `done..payload_len` (the rest of a record, `f`
/// at byte `done` of its payload) and the trailer through the checksum
/// `sum` and `check`, in one reused chunk; `Ok` only if the record is
/// intact and valid.
fn finish_verifying<F: Saved>(
    f: &mut impl Read,
    payload_len: u64,
    mut done: u64,
    mut sum: Xxh3,
    mut check: F::Check,
) -> Result<(), LoadError> {
    let left = usize::try_from(payload_len - done).unwrap_or(CHUNK);
    let mut buf = vec![0u8; CHUNK.min(left)];
    while done < payload_len {
        let want = buf
            .len()
            .min(usize::try_from(payload_len - done).unwrap_or(CHUNK));
        let got = read_full(f, &mut buf[..want])?;
        if got < want {
            // The file shrank after its length was read.
            return Err(LoadError::Truncated {
                section: "payload",
                expected: payload_len,
                found: done + got as u64,
            });
        }
        sum.update(&buf[..want]);
        check.absorb(&buf[..want]);
        done += want as u64;
    }
    let stored_count = stream::read_trailer(f, sum)?;
    check.verdict(stored_count)
}

/// A record of a file, its header checked.
struct Record<F: Saved> {
    /// Where it starts in the file.
    at: u64,
    bytes: HeaderBytes,
    h: Header,
    shape: F::Shape,
}

/// `load` for any kind: checks every record's header, and that they add
/// up to the file's length, before allocating (and a sparse file's whole
/// content); then reads each payload straight into its filter.
pub(crate) fn load<F: Saved>(path: &Path) -> Result<F, LoadError> {
    stack::<F>(load_levels::<F>(path)?)
}

/// Every level of the file at `path`, as [`load`] reads them.
pub(crate) fn load_levels<F: Saved>(path: &Path) -> Result<Vec<F::Level>, LoadError> {
    let mut f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    let actual = meta.len();
    let first = header_at::<F>(&mut f, 0, None, actual)?;
    let mut above: Vec<Record<F>> = Vec::new();
    loop {
        let top = above.last().unwrap_or(&first);
        if !F::level_above(&top.shape) {
            break;
        }
        let next = header_at::<F>(&mut f, top.end(), Some(&top.shape), actual)?;
        above.push(next);
    }
    let end = above.last().unwrap_or(&first).end();
    if end != actual {
        return Err(LoadError::FileLengthMismatch {
            expected: end,
            actual,
        });
    }
    if !fully_stored(&meta) {
        // A sparse (or compressed) file's length costs nothing to claim:
        // verify it with one chunk of memory before committing the tables.
        for record in std::iter::once(&first).chain(&above) {
            verify_payload::<F>(&mut f, record)?;
        }
    }
    std::iter::once(&first)
        .chain(&above)
        .map(|record| load_record(&mut f, record))
        .collect()
}

/// The checked header of the record at `at` of a file of `actual` bytes,
/// after `below`; refuses a record that would end past the file.
fn header_at<F: Saved>(
    f: &mut std::fs::File,
    at: u64,
    below: Option<&F::Shape>,
    actual: u64,
) -> Result<Record<F>, LoadError> {
    f.seek(SeekFrom::Start(at))?;
    let (bytes, h, shape) = read_checked_header::<F>(f, below)?;
    let record = Record {
        at,
        bytes,
        h,
        shape,
    };
    if record.end() > actual {
        return Err(LoadError::FileLengthMismatch {
            expected: record.end(),
            actual,
        });
    }
    Ok(record)
}

impl<F: Saved> Record<F> {
    /// Where the record after this one starts.
    fn end(&self) -> u64 {
        self.at.saturating_add(self.h.file_len())
    }
}

/// Reads `record`'s payload straight into its level, verifying it and the
/// checksum.
fn load_record<F: Saved>(f: &mut std::fs::File, record: &Record<F>) -> Result<F::Level, LoadError> {
    let Record {
        at,
        bytes,
        h,
        shape,
    } = record;
    let payload_len = F::payload_len(shape);
    let start = at + h.len() as u64;
    // The item count is in the trailer and the filter wants it up front:
    // read it now, trust it only once the checksum (and the count of the
    // payload) confirm it below.
    let mut trailer = [0u8; TRAILER_LEN];
    f.seek(SeekFrom::Start(start + payload_len))?;
    let got = read_full(f, &mut trailer)?;
    f.seek(SeekFrom::Start(start))?;
    if got < TRAILER_LEN {
        // The file shrank after its length was read.
        return Err(LoadError::Truncated {
            section: "trailer",
            expected: TRAILER_LEN as u64,
            found: got as u64,
        });
    }
    let claimed_count = stream::le_word(&trailer[..8]);
    let mut sum = Xxh3::new();
    sum.update(bytes.as_slice());
    let mut check = F::check(shape);
    // The fill closure reports through io::Error; keep the real cause.
    let mut failure = None;
    let mut done = 0u64;
    let filled = F::build(shape, h, claimed_count, |dst| {
        for part in dst.chunks_mut(CHUNK) {
            let got = read_full(f, part)?;
            if got < part.len() {
                failure = Some(LoadError::Truncated {
                    section: "payload",
                    expected: payload_len,
                    found: done + got as u64,
                });
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            done += got as u64;
            sum.update(part);
            check.absorb(part);
            stream::le_to_native_in_place(part);
        }
        Ok(())
    });
    let level = match filled {
        Ok(level) => level,
        Err(e) => {
            if let Some(cause) = failure {
                return Err(cause);
            }
            if matches!(e, LoadError::Io(_) | LoadError::AllocationFailed { .. }) {
                return Err(e);
            }
            // The kind refused the payload (maybe before it was all read):
            // a damaged file is reported as damaged (checksum) before what
            // the damage did, so read the rest through the checksum first.
            finish_verifying::<F>(f, payload_len, done, sum, check)?;
            return Err(e);
        }
    };
    let stored_count = stream::read_trailer(f, sum)?;
    if stored_count != claimed_count {
        // The file changed between the two reads of its trailer.
        return Err(LoadError::ItemCountMismatch {
            stored: stored_count,
            counted: claimed_count,
        });
    }
    check.verdict(stored_count)?;
    Ok(level)
}
