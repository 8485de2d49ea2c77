//! The filter's bits: a fallible, zeroed, cache-line-aligned array of
//! `AtomicU64` words, eight per 64-byte block.
//!
//! Alignment is what makes a block one cache line: a key's lookup then
//! costs one memory access, never two. A table of gigabytes must not abort
//! the process when the allocator refuses it, so the words come from
//! `alloc_zeroed` with a 64-byte-aligned layout and a null result becomes
//! an error. An all-zero `AtomicU64` is a valid atomic holding 0.

use crate::sync::AtomicU64;

/// Words per block: 8 x 64 bits = one 64-byte cache line.
pub(crate) const WORDS_PER_BLOCK: usize = 8;
/// Bytes per block, and the alignment of the array.
pub(crate) const BLOCK_BYTES: usize = 64;

/// The allocator could not provide `bytes` bytes (or they do not fit in an
/// address space).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AllocError {
    pub(crate) bytes: usize,
}

#[cfg(not(loom))]
pub(crate) use std_blocks::Blocks;

#[cfg(not(loom))]
mod std_blocks {
    use super::{AllocError, AtomicU64, BLOCK_BYTES, WORDS_PER_BLOCK};
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::ptr::NonNull;

    /// An owned, zeroed, 64-byte-aligned `[AtomicU64]` of whole blocks.
    pub(crate) struct Blocks {
        ptr: NonNull<AtomicU64>,
        /// Number of words: `blocks * WORDS_PER_BLOCK`.
        len: usize,
    }

    // SAFETY: `Blocks` owns its allocation exclusively, like a
    // `Box<[AtomicU64]>`, and `AtomicU64` is `Send + Sync`.
    unsafe impl Send for Blocks {}
    // SAFETY: shared access only hands out `&[AtomicU64]`, which is `Sync`.
    unsafe impl Sync for Blocks {}

    fn layout(blocks: usize) -> Result<Layout, AllocError> {
        let bytes = blocks.saturating_mul(BLOCK_BYTES);
        blocks
            .checked_mul(BLOCK_BYTES)
            .and_then(|size| Layout::from_size_align(size, BLOCK_BYTES).ok())
            .ok_or(AllocError { bytes })
    }

    impl Blocks {
        /// `blocks` zeroed blocks (at least one), or the size that could
        /// not be allocated.
        pub(crate) fn zeroed(blocks: usize) -> Result<Self, AllocError> {
            let layout = layout(blocks.max(1))?;
            // SAFETY: the layout's size is at least one block, not zero.
            let raw = unsafe { alloc_zeroed(layout) };
            let ptr = NonNull::new(raw.cast::<AtomicU64>()).ok_or(AllocError {
                bytes: layout.size(),
            })?;
            Ok(Blocks {
                ptr,
                len: blocks.max(1) * WORDS_PER_BLOCK,
            })
        }

        #[inline(always)]
        pub(crate) fn words(&self) -> &[AtomicU64] {
            // SAFETY: `ptr` points to `len` initialised words (all-zero is a
            // valid `AtomicU64`) that live as long as `self`.
            unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
        }

        /// The words as native-endian bytes, for filling a filter before
        /// it is shared.
        pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
            // SAFETY: the allocation holds `len * 8` initialised bytes;
            // `&mut self` makes this the only reference to it, and any byte
            // pattern is a valid `AtomicU64`.
            unsafe {
                std::slice::from_raw_parts_mut(
                    self.ptr.as_ptr().cast::<u8>(),
                    self.len * std::mem::size_of::<AtomicU64>(),
                )
            }
        }
    }

    impl Drop for Blocks {
        fn drop(&mut self) {
            let layout =
                layout(self.len / WORDS_PER_BLOCK).expect("layout was valid at allocation");
            // SAFETY: `ptr` came from `alloc_zeroed` with this same layout
            // and is freed exactly once, here.
            unsafe { dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

#[cfg(loom)]
pub(crate) use loom_blocks::Blocks;

#[cfg(loom)]
mod loom_blocks {
    use super::{AllocError, AtomicU64, WORDS_PER_BLOCK};

    /// Under loom the words are tracked objects, built one by one (and
    /// alignment does not matter).
    pub(crate) struct Blocks(Box<[AtomicU64]>);

    impl Blocks {
        pub(crate) fn zeroed(blocks: usize) -> Result<Self, AllocError> {
            let len = blocks.max(1).saturating_mul(WORDS_PER_BLOCK);
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|_| AllocError {
                bytes: len.saturating_mul(8),
            })?;
            v.extend((0..len).map(|_| AtomicU64::new(0)));
            Ok(Blocks(v.into_boxed_slice()))
        }

        pub(crate) fn words(&self) -> &[AtomicU64] {
            &self.0
        }

        /// Loading saved filters is not modelled under loom.
        pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
            unimplemented!("loom models do not load saved filters")
        }
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
    fn absurd_sizes_are_errors_not_aborts() {
        assert!(Blocks::zeroed(usize::MAX).is_err());
        assert!(Blocks::zeroed(usize::MAX / 64 / 2).is_err());
    }
}
