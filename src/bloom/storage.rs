//! The filter's bits: a fallible, zeroed, cache-line-aligned array of
//! `AtomicU64` words, eight per 64-byte block, from the same allocator as
//! the cuckoo filter's buckets (`raw::words`): tables of 4 MiB and more are
//! mapped 2 MiB-aligned and advised to use transparent huge pages (on
//! Linux; where the kernel declines, nothing changes).
//!
//! Alignment is what makes a block one cache line: a key's lookup then
//! costs one memory access, never two. A table of gigabytes must not abort
//! the process when the allocator refuses it: a refusal becomes an error.

pub(crate) use crate::raw::words::AllocError;
use crate::raw::words::Words;
use crate::sync::AtomicU64;

/// Words per block: 8 x 64 bits = one 64-byte cache line.
pub(crate) const WORDS_PER_BLOCK: usize = 8;
/// Bytes per block, and the alignment of the array.
pub(crate) const BLOCK_BYTES: usize = 64;

/// An owned, zeroed, 64-byte-aligned `[AtomicU64]` of whole blocks.
pub(crate) struct Blocks(Words);

impl Blocks {
    /// `blocks` zeroed blocks (at least one), or the size that could not
    /// be allocated.
    pub(crate) fn zeroed(blocks: usize) -> Result<Self, AllocError> {
        let words = blocks
            .max(1)
            .checked_mul(WORDS_PER_BLOCK)
            .ok_or(AllocError { bytes: usize::MAX })?;
        Words::zeroed(words).map(Blocks)
    }

    #[inline(always)]
    pub(crate) fn words(&self) -> &[AtomicU64] {
        self.0.as_slice()
    }

    /// The words as native-endian bytes, for filling a filter before it is
    /// shared.
    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.0.as_bytes_mut()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Ordering;

    #[test]
    fn blocks_are_zeroed_and_cache_line_aligned() {
        let b = Blocks::zeroed(3).unwrap();
        assert_eq!(b.words().len(), 3 * WORDS_PER_BLOCK);
        assert_eq!(b.words().as_ptr() as usize % BLOCK_BYTES, 0);
        assert!(b.words().iter().all(|w| w.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn large_tables_are_huge_page_aligned_and_zeroed() {
        let b = Blocks::zeroed(100_000).unwrap(); // 6.4 MB
        assert_eq!(b.words().as_ptr() as usize % (2 << 20), 0);
        assert!(b.words().iter().all(|w| w.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn absurd_sizes_are_errors_not_aborts() {
        assert!(Blocks::zeroed(usize::MAX).is_err());
        assert!(Blocks::zeroed(usize::MAX / 64 / 2).is_err());
    }
}
