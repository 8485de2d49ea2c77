//! Fallible allocation of a zeroed array of bucket words.
//!
//! A table of hundreds of megabytes must never abort the process when the
//! allocator says no, and should not be written twice (once by `calloc`-style
//! zeroing in the kernel, once by a constructor loop). So the words come from
//! `alloc_zeroed`, whose null result becomes an error. An all-zero
//! `AtomicU64` is a valid atomic holding 0, i.e. an empty bucket.

use crate::sync::AtomicU64;

/// The allocator could not provide `bytes` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AllocError {
    pub(crate) bytes: usize,
}

#[cfg(not(loom))]
pub(crate) use std_words::Words;

#[cfg(not(loom))]
mod std_words {
    use super::{AllocError, AtomicU64};
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::ptr::NonNull;

    /// An owned, zero-initialised `[AtomicU64]` from a fallible allocation.
    pub(crate) struct Words {
        ptr: NonNull<AtomicU64>,
        len: usize,
    }

    // SAFETY: `Words` owns its allocation exclusively, like a
    // `Box<[AtomicU64]>`, and `AtomicU64` is `Send + Sync`.
    unsafe impl Send for Words {}
    // SAFETY: shared access only hands out `&[AtomicU64]`, which is `Sync`.
    unsafe impl Sync for Words {}

    impl Words {
        /// `len` zeroed words, or the size that could not be allocated.
        pub(crate) fn zeroed(len: usize) -> Result<Self, AllocError> {
            let bytes = len.saturating_mul(std::mem::size_of::<AtomicU64>());
            let layout = Layout::array::<AtomicU64>(len).map_err(|_| AllocError { bytes })?;
            if layout.size() == 0 {
                return Ok(Words {
                    ptr: NonNull::dangling(),
                    len: 0,
                });
            }
            // SAFETY: the layout has a non-zero size, checked just above.
            let raw = unsafe { alloc_zeroed(layout) };
            let ptr = NonNull::new(raw.cast::<AtomicU64>()).ok_or(AllocError { bytes })?;
            Ok(Words { ptr, len })
        }

        #[inline(always)]
        pub(crate) fn as_slice(&self) -> &[AtomicU64] {
            // SAFETY: `ptr` points to `len` initialised (all-zero is a valid
            // `AtomicU64`) words that live as long as `self`, or is dangling
            // with `len == 0`, which is valid for an empty slice.
            unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
        }

        /// The words as bytes, for filling a table before it is shared.
        pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
            // SAFETY: the allocation holds `len * 8` initialised bytes (or
            // is dangling with `len == 0`); `&mut self` makes this the only
            // reference to it, and any byte pattern is a valid `AtomicU64`.
            unsafe {
                std::slice::from_raw_parts_mut(
                    self.ptr.as_ptr().cast::<u8>(),
                    self.len * std::mem::size_of::<AtomicU64>(),
                )
            }
        }
    }

    impl Drop for Words {
        fn drop(&mut self) {
            if self.len == 0 {
                return;
            }
            let layout =
                Layout::array::<AtomicU64>(self.len).expect("layout was valid at allocation");
            // SAFETY: `ptr` came from `alloc_zeroed` with this same layout and
            // is freed exactly once, here.
            unsafe { dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

#[cfg(loom)]
pub(crate) use loom_words::Words;

#[cfg(loom)]
mod loom_words {
    use super::{AllocError, AtomicU64};

    /// Under loom the words are tracked objects, built one by one.
    pub(crate) struct Words(Box<[AtomicU64]>);

    impl Words {
        pub(crate) fn zeroed(len: usize) -> Result<Self, AllocError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len)
                .map_err(|_| AllocError { bytes: len * 8 })?;
            v.extend((0..len).map(|_| AtomicU64::new(0)));
            Ok(Words(v.into_boxed_slice()))
        }

        pub(crate) fn as_slice(&self) -> &[AtomicU64] {
            &self.0
        }

        /// Loading saved tables is not modelled under loom.
        pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
            unimplemented!("loom models do not load saved tables")
        }
    }
}
