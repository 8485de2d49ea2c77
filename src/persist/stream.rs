//! Reading a file's parts from any `io::Read`: the header, a payload that
//! is buffered only as fast as it arrives, and the trailer with the checksum.

use super::error::LoadError;
use super::format::{
    check_prefix, header_len, read_full, HeaderBytes, HEADER_LEN, PREFIX_LEN, TRAILER_LEN,
};
use std::io::Read;
use xxhash_rust::xxh3::Xxh3;

/// Bytes read, checked and written per step: large enough that per-call
/// overhead vanishes, small enough to stay in cache between the read, the
/// checksum and the check.
pub(crate) const CHUNK: usize = 1 << 20;

/// The little-endian word in `bytes` (8 of them).
#[inline(always)]
pub(crate) fn le_word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

/// Turns little-endian words into native ones, in place. On little-endian
/// targets (every target koel is tested on) they are the same bytes and
/// this does nothing: the file's payload is the table's memory image.
#[inline]
pub(crate) fn le_to_native_in_place(bytes: &mut [u8]) {
    #[cfg(target_endian = "big")]
    for w in bytes.chunks_exact_mut(8) {
        let v = le_word(w);
        w.copy_from_slice(&v.to_ne_bytes());
    }
    #[cfg(target_endian = "little")]
    let _ = bytes;
}

/// The header bytes (as long as the file's version says), or `Truncated`
/// if the input ends first. The magic and version are checked before the
/// rest is read: another version may have another length.
pub(crate) fn read_header(r: &mut impl std::io::Read) -> Result<HeaderBytes, LoadError> {
    let mut header = [0u8; HEADER_LEN];
    let got = read_full(r, &mut header[..PREFIX_LEN])?;
    if got < PREFIX_LEN {
        return Err(LoadError::Truncated {
            section: "header",
            expected: HEADER_LEN as u64,
            found: got as u64,
        });
    }
    let len = header_len(check_prefix(&header)?);
    let got = PREFIX_LEN + read_full(r, &mut header[PREFIX_LEN..len])?;
    if got < len {
        return Err(LoadError::Truncated {
            section: "header",
            expected: len as u64,
            found: got as u64,
        });
    }
    Ok(HeaderBytes::new(header, len))
}

/// Reads the trailer, finishes the checksum `sum` (header and payload
/// already in it) and compares it: returns the stored item count if the
/// file is intact.
pub(crate) fn read_trailer(r: &mut impl std::io::Read, mut sum: Xxh3) -> Result<u64, LoadError> {
    let mut trailer = [0u8; TRAILER_LEN];
    let got = read_full(r, &mut trailer)?;
    if got < TRAILER_LEN {
        return Err(LoadError::Truncated {
            section: "trailer",
            expected: TRAILER_LEN as u64,
            found: got as u64,
        });
    }
    sum.update(&trailer[..8]);
    let stored = le_word(&trailer[8..]);
    let computed = sum.digest();
    if stored != computed {
        return Err(LoadError::ChecksumMismatch { stored, computed });
    }
    Ok(le_word(&trailer[..8]))
}

/// Buffers a payload of a length the header claims, allocating only as
/// the bytes arrive: a header that claims terabytes in a 100-byte input
/// costs one chunk, not terabytes.
pub(crate) struct PayloadReader {
    total: u64,
}

impl PayloadReader {
    pub(crate) fn new(total: u64) -> Self {
        PayloadReader { total }
    }

    /// Reads the whole payload, handing each chunk to `each` as it comes.
    pub(crate) fn read_all(
        self,
        r: &mut impl std::io::Read,
        mut each: impl FnMut(&[u8]),
    ) -> Result<Vec<u8>, LoadError> {
        let total = usize::try_from(self.total)
            .map_err(|_| LoadError::AllocationFailed { bytes: self.total })?;
        let mut buf: Vec<u8> = Vec::new();
        while buf.len() < total {
            let want = CHUNK.min(total - buf.len());
            if buf.capacity() - buf.len() < want {
                // Double with the data (amortised O(n) copying), never past
                // what the header claims and never ahead of the input by
                // more than what was already read plus one chunk.
                let target = total.min((buf.len() * 2).max(buf.len() + want));
                buf.try_reserve_exact(target - buf.len())
                    .map_err(|_| LoadError::AllocationFailed { bytes: self.total })?;
            }
            let start = buf.len();
            // `read_to_end` on a `Take` fills the reserved capacity without
            // zeroing it first, stops after `want` bytes, and retries
            // interrupted reads.
            let got = Read::take(&mut *r, want as u64).read_to_end(&mut buf)?;
            if got < want {
                return Err(LoadError::Truncated {
                    section: "payload",
                    expected: self.total,
                    found: (start + got) as u64,
                });
            }
            each(&buf[start..]);
        }
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_claim_in_a_short_input_is_truncated_not_allocated() {
        // Reserving the claimed 1 PiB would fail with AllocationFailed;
        // getting Truncated shows the reader only reserved what arrived.
        let input = [7u8; 100];
        let mut seen = 0;
        let err = PayloadReader::new(1 << 50)
            .read_all(&mut &input[..], |c| seen += c.len())
            .unwrap_err();
        assert_eq!(seen, 0, "a short chunk is not handed on");
        assert!(matches!(
            err,
            LoadError::Truncated {
                section: "payload",
                expected: 1125899906842624,
                found: 100
            }
        ));
    }

    #[test]
    fn payload_arrives_in_chunks_in_order() {
        let input: Vec<u8> = (0..(CHUNK * 2 + 24)).map(|i| i as u8).collect();
        let mut chunks = Vec::new();
        let buf = PayloadReader::new(input.len() as u64)
            .read_all(&mut &input[..], |c| chunks.push(c.len()))
            .unwrap();
        assert_eq!(buf, input);
        assert_eq!(chunks, vec![CHUNK, CHUNK, 24]);
    }
}
