//! The filter's bits: a fallible, zeroed, cache-line-aligned array of
//! `AtomicU64` words, eight per 64-byte block, from the same allocator as
//! the cuckoo filter's buckets (`crate::memory`): tables of 4 MiB and more are
//! mapped 2 MiB-aligned and advised to use transparent huge pages (on
//! Linux; where the kernel declines, nothing changes).
//!
//! Alignment is what makes a block one cache line: a key's lookup then
//! costs one memory access, never two. A table of gigabytes must not abort
//! the process when the allocator refuses it: a refusal becomes an error.

pub(crate) use crate::memory::AllocError;
use crate::memory::Words;
use crate::sync::AtomicU64;

/// Words per block: 8 x 64 bits = one 64-byte cache line.
pub(crate) const WORDS_PER_BLOCK: usize = 8;
/// Bytes per block, and the alignment of the array.
pub(crate) const BLOCK_BYTES: usize = 64;

/// An owned, zeroed, 64-byte-aligned `[AtomicU64]` of whole blocks.
pub(crate) struct Blocks {
    words: Words,
    /// Number of blocks: `words.len() / WORDS_PER_BLOCK`, at least 1.
    count: u64,
}

impl Blocks {
    /// `blocks` zeroed blocks (at least one), or the size that could not
    /// be allocated.
    pub(crate) fn zeroed(blocks: usize) -> Result<Self, AllocError> {
        let blocks = blocks.max(1);
        let words = blocks
            .checked_mul(WORDS_PER_BLOCK)
            .ok_or(AllocError { bytes: usize::MAX })?;
        let words = Words::zeroed(words)?;
        debug_assert_eq!(words.as_slice().len(), blocks * WORDS_PER_BLOCK);
        Ok(Blocks {
            words,
            count: blocks as u64,
        })
    }

    #[inline(always)]
    pub(crate) fn words(&self) -> &[AtomicU64] {
        self.words.as_slice()
    }

    /// The block of hash `h`: `fastrange(h, blocks)`, the high half of
    /// `h * blocks`, so the block count needs no power-of-two rounding.
    /// Always in bounds, without a bounds check (one lookup is a few dozen
    /// instructions; a checked slice costs two compares and branches of
    /// them, measured at about 5% of a single absent lookup at 16M items).
    #[inline(always)]
    pub(crate) fn block_of(&self, h: u64) -> &[AtomicU64; WORDS_PER_BLOCK] {
        let b = ((u128::from(h) * u128::from(self.count)) >> 64) as usize;
        debug_assert!((b + 1) * WORDS_PER_BLOCK <= self.words().len());
        // SAFETY: `(h * count) >> 64 < count` for every `h`, and the array
        // holds `count * WORDS_PER_BLOCK` words (`zeroed`), so the block's
        // eight words are in bounds; `[AtomicU64; 8]` has the layout of
        // eight consecutive `AtomicU64`s, and the borrow is tied to `self`.
        unsafe {
            &*self
                .words()
                .as_ptr()
                .add(b * WORDS_PER_BLOCK)
                .cast::<[AtomicU64; WORDS_PER_BLOCK]>()
        }
    }

    /// The words as native-endian bytes, for filling a filter before it is
    /// shared.
    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.words.as_bytes_mut()
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
    fn block_of_covers_every_block_in_bounds() {
        let b = Blocks::zeroed(37).unwrap();
        let base = b.words().as_ptr() as usize;
        let mut seen = [0u32; 37];
        let mut h = 1u64;
        for _ in 0..100_000 {
            h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(12345);
            let at = (b.block_of(h).as_ptr() as usize - base) / BLOCK_BYTES;
            seen[at] += 1;
        }
        // 100k / 37 = 2703 expected per block; 5 sigma is about 260.
        assert!(seen.iter().all(|&n| (2400..3000).contains(&n)), "{seen:?}");
        let last = b.block_of(u64::MAX).as_ptr() as usize;
        assert_eq!((last - base) / BLOCK_BYTES, 36);
        assert_eq!(b.block_of(0).as_ptr() as usize, base);
    }

    #[test]
    fn absurd_sizes_are_errors_not_aborts() {
        assert!(Blocks::zeroed(usize::MAX).is_err());
        assert!(Blocks::zeroed(usize::MAX / 64 / 2).is_err());
    }
}
