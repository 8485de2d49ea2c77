//! The filter's bits: a fallible, zeroed, cache-line-aligned array of
//! `AtomicU64` words, eight per 64-byte block. Tables of 2 MiB and more are
//! aligned to 2 MiB and advised (`madvise(MADV_HUGEPAGE)` on Linux) to use
//! transparent huge pages; where the kernel declines, nothing changes.
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
    use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
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

    /// Tables of at least this many bytes are aligned to it and asked to
    /// be backed by transparent huge pages: a lookup's random block then
    /// costs one cache miss instead of a cache miss plus a page walk.
    const HUGE_PAGE: usize = 2 << 20;

    fn layout(blocks: usize) -> Result<Layout, AllocError> {
        let bytes = blocks.saturating_mul(BLOCK_BYTES);
        let align = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            BLOCK_BYTES
        };
        blocks
            .checked_mul(BLOCK_BYTES)
            .and_then(|size| Layout::from_size_align(size, align).ok())
            .ok_or(AllocError { bytes })
    }

    #[cfg(target_os = "linux")]
    fn advise_huge_pages(ptr: *mut u8, len: usize) {
        extern "C" {
            fn madvise(
                addr: *mut std::ffi::c_void,
                len: usize,
                advice: std::ffi::c_int,
            ) -> std::ffi::c_int;
        }
        /// `MADV_HUGEPAGE` in Linux's `<asm-generic/mman-common.h>`.
        const MADV_HUGEPAGE: std::ffi::c_int = 14;
        // SAFETY: `ptr..ptr + len` is one live allocation of ours, aligned
        // to a huge page; `madvise` only changes how the kernel backs it
        // (an error, e.g. THP disabled, changes nothing and is ignored).
        unsafe { madvise(ptr.cast(), len, MADV_HUGEPAGE) };
    }

    #[cfg(not(target_os = "linux"))]
    fn advise_huge_pages(_ptr: *mut u8, _len: usize) {}

    impl Blocks {
        /// `blocks` zeroed blocks (at least one), or the size that could
        /// not be allocated.
        pub(crate) fn zeroed(blocks: usize) -> Result<Self, AllocError> {
            let layout = layout(blocks.max(1))?;
            let raw = if layout.align() == HUGE_PAGE {
                // Advise before the first touch, so that the zeroing below
                // faults the pages in huge where the kernel allows it.
                // SAFETY: the layout's size is at least one block, not zero.
                let raw = unsafe { alloc(layout) };
                if !raw.is_null() {
                    advise_huge_pages(raw, layout.size());
                    // SAFETY: `raw` is a fresh allocation of `size` bytes.
                    unsafe { std::ptr::write_bytes(raw, 0, layout.size()) };
                }
                raw
            } else {
                // SAFETY: the layout's size is at least one block, not zero.
                unsafe { alloc_zeroed(layout) }
            };
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
