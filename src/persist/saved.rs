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
    KeyHasher::with_algorithm(seed, algorithm).hash(&format::PROBE_INPUT)
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
    fn verdict(&self, stored_count: u64) -> Result<(), LoadError>;
}

/// A filter kind that can be saved.
pub(crate) trait Saved: Sized {
    /// The header fields of this kind, validated.
    type Shape: Copy;
    /// The kind's check of payload words.
    type Check: PayloadCheck;
    /// Checks every kind-specific header field except the hash probe.
    /// Allocates nothing.
    fn shape(h: &Header) -> Result<Self::Shape, LoadError>;
    /// Payload bytes of a file of this shape.
    fn payload_len(shape: &Self::Shape) -> u64;
    /// A fresh payload check.
    fn check(shape: &Self::Shape) -> Self::Check;
    /// Allocates the filter and lets `fill` write the saved words (as
    /// native-endian bytes) into it; `count` is the verified item count.
    fn build(
        shape: &Self::Shape,
        h: &Header,
        count: u64,
        fill: impl FnOnce(&mut [u8]) -> io::Result<()>,
    ) -> Result<Self, LoadError>;
}

/// Writes a whole file: `header`, then `words` in `CHUNK`s, each turned
/// into little-endian bytes by `encode` (which returns what it counted
/// for the trailer), then the trailer.
pub(crate) fn write_file<W: Write>(
    mut writer: W,
    header: Header,
    words: &[AtomicU64],
    mut encode: impl FnMut(&[AtomicU64], &mut [u8]) -> u64,
) -> io::Result<()> {
    let header = header.encode();
    let mut sum = Xxh3::new();
    sum.update(&header);
    writer.write_all(&header)?;
    let mut buf = vec![0u8; CHUNK.min(words.len() * 8)];
    let mut count = 0u64;
    for chunk in words.chunks(CHUNK / 8) {
        let out = &mut buf[..chunk.len() * 8];
        count += encode(chunk, out);
        sum.update(out);
        writer.write_all(out)?;
    }
    let count = count.to_le_bytes();
    sum.update(&count);
    writer.write_all(&count)?;
    writer.write_all(&sum.digest().to_le_bytes())?;
    writer.flush()
}

/// The header of the input, decoded and checked for kind `F`.
fn read_checked_header<F: Saved>(
    r: &mut impl Read,
) -> Result<(HeaderBytes, Header, F::Shape), LoadError> {
    let bytes = stream::read_header(r)?;
    let h = Header::decode(bytes.as_slice())?;
    let shape = F::shape(&h)?;
    check_probe(&h)?;
    Ok((bytes, h, shape))
}

/// `read_from` for any kind: buffers the payload as it arrives, verifies
/// it, then builds the filter.
pub(crate) fn read_from<F: Saved>(mut reader: impl Read) -> Result<F, LoadError> {
    let (bytes, h, shape) = read_checked_header::<F>(&mut reader)?;
    let mut sum = Xxh3::new();
    sum.update(bytes.as_slice());
    let mut check = F::check(&shape);
    let payload = PayloadReader::new(F::payload_len(&shape)).read_all(&mut reader, |chunk| {
        sum.update(chunk);
        check.absorb(chunk);
    })?;
    let stored_count = stream::read_trailer(&mut reader, sum)?;
    check.verdict(stored_count)?;
    F::build(&shape, &h, stored_count, |dst| {
        dst.copy_from_slice(&payload);
        stream::le_to_native_in_place(dst);
        Ok(())
    })
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

/// Streams the payload and trailer after `header` through the checksum
/// and the kind's check, in one reused chunk; `Ok` only for an intact,
/// valid file. Leaves `f` anywhere.
fn verify_payload<F: Saved>(
    f: &mut (impl Read + Seek),
    header: &[u8],
    shape: &F::Shape,
) -> Result<(), LoadError> {
    let payload_len = F::payload_len(shape);
    f.seek(SeekFrom::Start(header.len() as u64))?;
    let mut sum = Xxh3::new();
    sum.update(header);
    let mut check = F::check(shape);
    let mut buf = vec![0u8; CHUNK.min(usize::try_from(payload_len).unwrap_or(CHUNK))];
    let mut done = 0u64;
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

/// `load` for any kind: checks the file's length against the header before
/// allocating (and a sparse file's whole content), then reads the payload
/// straight into the filter.
pub(crate) fn load<F: Saved>(path: &Path) -> Result<F, LoadError> {
    let mut f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    let actual = meta.len();
    let (bytes, h, shape) = read_checked_header::<F>(&mut f)?;
    if actual != h.file_len() {
        return Err(LoadError::FileLengthMismatch {
            expected: h.file_len(),
            actual,
        });
    }
    let payload_len = F::payload_len(&shape);
    if !fully_stored(&meta) {
        // A sparse (or compressed) file's length costs nothing to claim:
        // verify it with one chunk of memory before committing the table.
        verify_payload::<F>(&mut f, bytes.as_slice(), &shape)?;
    }
    // The item count is in the trailer and the filter wants it up front:
    // read it now, trust it only once the checksum (and the count of the
    // payload) confirm it below.
    let mut trailer = [0u8; TRAILER_LEN];
    f.seek(SeekFrom::Start(h.len() as u64 + payload_len))?;
    let got = read_full(&mut f, &mut trailer)?;
    f.seek(SeekFrom::Start(h.len() as u64))?;
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
    let mut check = F::check(&shape);
    // The fill closure reports through io::Error; keep the real cause.
    let mut failure = None;
    let mut payload_read = false;
    let filled = F::build(&shape, &h, claimed_count, |dst| {
        let mut done = 0u64;
        for part in dst.chunks_mut(CHUNK) {
            let got = read_full(&mut f, part)?;
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
        payload_read = true;
        Ok(())
    });
    let filter = match filled {
        Ok(filter) => filter,
        Err(e) => {
            if let Some(cause) = failure {
                return Err(cause);
            }
            if !payload_read {
                return Err(e);
            }
            // The payload was read but the kind refused it: a damaged file
            // is reported as damaged (checksum) before what the damage did.
            let stored_count = stream::read_trailer(&mut f, sum)?;
            check.verdict(stored_count)?;
            return Err(e);
        }
    };
    let stored_count = stream::read_trailer(&mut f, sum)?;
    if stored_count != claimed_count {
        // The file changed between the two reads of its trailer.
        return Err(LoadError::ItemCountMismatch {
            stored: stored_count,
            counted: claimed_count,
        });
    }
    check.verdict(stored_count)?;
    Ok(filter)
}
