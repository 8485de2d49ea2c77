//! Fallible allocation of a zeroed array of bucket words: the page-aligned
//! memory of both filters (the cuckoo filter's tables and the Bloom
//! filter's blocks).
//!
//! A table of hundreds of megabytes must never abort the process when the
//! allocator says no, and should not be written twice (once by `calloc`-style
//! zeroing in the kernel, once by a constructor loop). So the words come from
//! `alloc_zeroed` (or, for large tables on Linux, an anonymous `mmap`),
//! whose failure becomes an error. An all-zero
//! `AtomicU64` is a valid atomic holding 0, i.e. an empty bucket.
//!
//! # Huge pages
//!
//! Every lookup touches two random buckets, so a large table costs two TLB
//! misses per lookup with 4 KiB pages; with 2 MiB pages the page walk mostly
//! hits the cache. On Linux a table of at least [`HUGE_PAGE_MIN_BYTES`] is
//! therefore mapped directly with `mmap` (still zeroed lazily by the
//! kernel, still fallible), its 2 MiB-aligned part is advised with
//! `madvise(MADV_HUGEPAGE)`, and whether the kernel accepted the advice is
//! recorded (see [`HugePages`]). Elsewhere, or for smaller tables, the words
//! come from the global allocator and nothing is asked.
//!
//! `mmap` rather than an aligned `alloc_zeroed`: the standard allocator
//! zeroes an over-aligned block by writing it, which touches every page with
//! 4 KiB pages before the advice could apply (and costs a pass over the
//! table).

use crate::sync::AtomicU64;

/// The allocator could not provide `bytes` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AllocError {
    pub(crate) bytes: usize,
}

/// Tables of at least this many bytes ask for transparent huge pages.
/// Below it the table's 4 KiB pages mostly fit the second-level TLB (1-2K
/// entries on current x86 cores), so huge pages would buy little; above
/// it a lookup's two random buckets usually miss the TLB, and the 2 MiB of
/// alignment slack (address space only) is small next to the table.
#[cfg_attr(any(loom, not(target_os = "linux")), allow(dead_code))]
pub(crate) const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// Releasable words (a doubled table's, which a later doubling retires) of
/// at least this many bytes, and under [`HUGE_PAGE_MIN_BYTES`], are an
/// anonymous mapping of 4 KiB pages rather than heap memory, so that their
/// pages go back to the OS once the table is retired (heap memory cannot:
/// readers take no pin, so a retired table is never freed while the
/// filter lives). Rounding to whole pages costs such a table at most 1/8
/// more resident memory; smaller tables stay on the heap.
#[cfg_attr(any(loom, not(target_os = "linux")), allow(dead_code))]
pub(crate) const RELEASABLE_MIN_BYTES: usize = 32 << 10;

/// Whether a table's words asked the kernel for transparent huge pages, and
/// the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(any(loom, not(target_os = "linux")), allow(dead_code))]
pub(crate) enum HugePages {
    /// Too small, not Linux, or under loom: nothing was asked.
    NotRequested,
    /// `madvise(MADV_HUGEPAGE)` succeeded while transparent huge pages are
    /// enabled (`always` or `madvise` mode) and not disabled for this
    /// process: the kernel backs the table with 2 MiB pages where it can
    /// find them (it may still use 4 KiB pages when memory is fragmented).
    Accepted,
    /// Asked, but the kernel has no THP support, THP is `never`, the
    /// process disabled it (`PR_SET_THP_DISABLE`), or `madvise` failed. The
    /// table works the same with 4 KiB pages.
    Declined,
}

#[cfg(not(loom))]
pub(crate) use std_words::{Release, Words};

#[cfg(not(loom))]
mod std_words {
    use super::{AllocError, AtomicU64, HugePages};
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::ptr::NonNull;
    #[cfg(target_os = "linux")]
    use std::sync::Arc;

    /// Where the words live, so `Drop` frees them the same way.
    enum Backing {
        /// `alloc_zeroed` with `heap_layout(len)`.
        Heap,
        /// An anonymous mapping, shared with a pending [`Release`] so that
        /// it stays mapped until both are gone (it unmaps itself on drop).
        #[cfg(target_os = "linux")]
        Mapped(Arc<super::linux::Mapping>),
    }

    /// The right to return a retired table's physical pages to the OS,
    /// taken from [`Words::release_handle`] and run later, once no writer
    /// can reach the table (`raw::writers`). It keeps the memory mapped
    /// until it has run or is dropped, even if the table is dropped first.
    pub(crate) struct Release {
        #[cfg(target_os = "linux")]
        mapping: Arc<super::linux::Mapping>,
    }

    impl Release {
        /// Returns the pages: every word reads 0 from now on. The caller
        /// guarantees that no thread writes these words any more (reads
        /// are fine: they see zeros).
        pub(crate) fn run(self) {
            #[cfg(target_os = "linux")]
            self.mapping.release();
        }
    }

    /// An owned, zero-initialised `[AtomicU64]` from a fallible allocation.
    pub(crate) struct Words {
        ptr: NonNull<AtomicU64>,
        len: usize,
        backing: Backing,
        huge_pages: HugePages,
    }

    // SAFETY: `Words` owns its allocation exclusively, like a
    // `Box<[AtomicU64]>`, and `AtomicU64` is `Send + Sync`.
    unsafe impl Send for Words {}
    // SAFETY: shared access only hands out `&[AtomicU64]`, which is `Sync`.
    unsafe impl Sync for Words {}

    /// Heap words are aligned to a cache line, so that a 64-byte block of
    /// eight words (the Bloom filter's unit) is one line.
    const HEAP_ALIGN: usize = 64;

    fn heap_layout(len: usize) -> Result<Layout, AllocError> {
        let bytes = len.saturating_mul(std::mem::size_of::<AtomicU64>());
        len.checked_mul(std::mem::size_of::<AtomicU64>())
            .and_then(|size| Layout::from_size_align(size, HEAP_ALIGN).ok())
            .ok_or(AllocError { bytes })
    }

    impl Words {
        /// `len` zeroed words, cache-line aligned (2 MiB-aligned when
        /// mapped for huge pages), or the size that could not be allocated.
        pub(crate) fn zeroed(len: usize) -> Result<Self, AllocError> {
            let layout = heap_layout(len)?;
            let bytes = layout.size();
            if layout.size() == 0 {
                return Ok(Words {
                    ptr: NonNull::dangling(),
                    len: 0,
                    backing: Backing::Heap,
                    huge_pages: HugePages::NotRequested,
                });
            }
            #[cfg(target_os = "linux")]
            if layout.size() >= super::HUGE_PAGE_MIN_BYTES {
                return super::linux::map_zeroed(layout.size()).map(|m| Words {
                    ptr: m.words,
                    len,
                    huge_pages: m.huge_pages,
                    backing: Backing::Mapped(Arc::new(m)),
                });
            }
            // SAFETY: the layout has a non-zero size, checked just above.
            let raw = unsafe { alloc_zeroed(layout) };
            let ptr = NonNull::new(raw.cast::<AtomicU64>()).ok_or(AllocError { bytes })?;
            Ok(Words {
                ptr,
                len,
                backing: Backing::Heap,
                huge_pages: HugePages::NotRequested,
            })
        }

        /// [`zeroed`](Self::zeroed) for words that may be retired while the
        /// process runs on (a doubled table's): from
        /// [`RELEASABLE_MIN_BYTES`](super::RELEASABLE_MIN_BYTES) up they
        /// are mapped on Linux, so [`release_handle`](Self::release_handle)
        /// can return their pages.
        pub(crate) fn zeroed_releasable(len: usize) -> Result<Self, AllocError> {
            #[cfg(target_os = "linux")]
            {
                let bytes = heap_layout(len)?.size();
                if (super::RELEASABLE_MIN_BYTES..super::HUGE_PAGE_MIN_BYTES).contains(&bytes) {
                    // A refused mapping (out of mappings, `vm.max_map_count`,
                    // with many grown filters in one process) falls back to
                    // the heap: the table then stays resident once retired,
                    // as before.
                    if let Ok(m) = super::linux::map_pages(bytes) {
                        return Ok(Words {
                            ptr: m.words,
                            len,
                            huge_pages: m.huge_pages,
                            backing: Backing::Mapped(Arc::new(m)),
                        });
                    }
                }
            }
            Self::zeroed(len)
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

        /// Whether these words asked for huge pages, and the answer.
        pub(crate) fn huge_pages(&self) -> HugePages {
            self.huge_pages
        }

        /// A handle that returns these words' physical pages to the OS
        /// when run; `None` if they cannot be returned (heap words: under
        /// [`HUGE_PAGE_MIN_BYTES`](super::HUGE_PAGE_MIN_BYTES), or under
        /// [`RELEASABLE_MIN_BYTES`](super::RELEASABLE_MIN_BYTES) for
        /// [`zeroed_releasable`](Self::zeroed_releasable), or not Linux),
        /// which then stay resident until dropped.
        pub(crate) fn release_handle(&self) -> Option<Release> {
            match &self.backing {
                Backing::Heap => None,
                #[cfg(target_os = "linux")]
                Backing::Mapped(mapping) => Some(Release {
                    mapping: Arc::clone(mapping),
                }),
            }
        }

        /// Whether a [`Release`] of these words has run.
        pub(crate) fn is_released(&self) -> bool {
            match &self.backing {
                Backing::Heap => false,
                #[cfg(target_os = "linux")]
                Backing::Mapped(mapping) => mapping.is_released(),
            }
        }
    }

    impl Drop for Words {
        fn drop(&mut self) {
            if self.len == 0 {
                return;
            }
            match self.backing {
                Backing::Heap => {
                    let layout = heap_layout(self.len).expect("layout was valid at allocation");
                    // SAFETY: `ptr` came from `alloc_zeroed` with this same
                    // layout and is freed exactly once, here.
                    unsafe { dealloc(self.ptr.as_ptr().cast(), layout) };
                }
                // The mapping unmaps itself once a pending release is gone too.
                #[cfg(target_os = "linux")]
                Backing::Mapped(_) => {}
            }
        }
    }
}

/// The Linux-only part: an anonymous mapping advised for huge pages.
/// `libc` is a dependency on Linux only, for `mmap`, `madvise` and `prctl`.
#[cfg(all(target_os = "linux", not(loom)))]
mod linux {
    use super::{AllocError, AtomicU64, HugePages};
    use crate::sync::{Ordering, StatBool};
    use std::ptr::NonNull;

    /// The size and alignment of a transparent huge page on x86_64 and
    /// (with 4 KiB base pages) aarch64.
    const HUGE_PAGE: usize = 2 << 20;

    /// An anonymous mapping holding a table's words; unmapped on drop.
    pub(crate) struct Mapping {
        base: NonNull<u8>,
        len: usize,
        pub(super) words: NonNull<AtomicU64>,
        /// Bytes of words from `words` (the rest of `len` is slack).
        bytes: usize,
        pub(super) huge_pages: HugePages,
        /// Whether `release` ran (for statistics only).
        released: StatBool,
    }

    // SAFETY: the mapping is plain memory owned by this value; the words
    // in it are atomics, shared as `&[AtomicU64]` only.
    unsafe impl Send for Mapping {}
    // SAFETY: as above; `&Mapping` only reads its fields and `madvise`s.
    unsafe impl Sync for Mapping {}

    impl Mapping {
        /// Returns the words' physical pages to the OS
        /// (`madvise(MADV_DONTNEED)`): on a private anonymous mapping every
        /// later read of them gives 0, and the address range stays ours.
        pub(super) fn release(&self) {
            let page = page_size();
            let whole_pages = self.bytes.div_ceil(page) * page;
            // SAFETY: `words` is page-aligned and `whole_pages` bytes from
            // it lie inside this live mapping (the last page's tail is
            // slack: `map_zeroed`'s words start less than 2 MiB into a
            // mapping 2 MiB longer than them, `map_pages`' mapping is
            // whole pages from `words`). DONTNEED changes
            // contents (to zeros), never validity: the caller guarantees no
            // thread writes the words any more, and concurrent atomic reads
            // of the range are defined (they see old values or zeros).
            // Failure (only for invalid arguments) leaves the pages in.
            unsafe { libc::madvise(self.words.as_ptr().cast(), whole_pages, libc::MADV_DONTNEED) };
            self.released.store(true, Ordering::Relaxed);
        }

        pub(super) fn is_released(&self) -> bool {
            self.released.load(Ordering::Relaxed)
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: `base..base + len` is the mapping made by
            // `map_zeroed`, unmapped exactly once, here; the words are
            // borrowed only through `Words` and `Release`, which hold this
            // value and are gone.
            unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        }
    }

    /// The OS page size.
    fn page_size() -> usize {
        // SAFETY: sysconf reads a constant of the system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).unwrap_or(4096).max(1)
    }

    /// `bytes` zeroed bytes starting at a 2 MiB boundary, advised for huge
    /// pages. The mapping is `bytes + 2 MiB` long; the slack before the
    /// boundary is never touched, so it costs address space, not memory.
    pub(super) fn map_zeroed(bytes: usize) -> Result<Mapping, AllocError> {
        let len = bytes.checked_add(HUGE_PAGE).ok_or(AllocError { bytes })?;
        let base = map_anonymous(len).ok_or(AllocError { bytes })?;
        let skip = base.as_ptr().align_offset(HUGE_PAGE);
        // SAFETY: `skip < HUGE_PAGE`, so `base + skip .. + bytes` lies inside
        // the `bytes + HUGE_PAGE` mapping (and is not null).
        let start = unsafe { base.add(skip) };
        // SAFETY: `start` is 2 MiB- (so page-) aligned and `bytes` from it
        // are mapped by us; the advice changes no contents.
        let advised =
            unsafe { libc::madvise(start.as_ptr().cast(), bytes, libc::MADV_HUGEPAGE) } == 0;
        let huge_pages = if advised && thp_enabled() {
            HugePages::Accepted
        } else {
            HugePages::Declined
        };
        Ok(Mapping {
            base,
            len,
            words: start.cast::<AtomicU64>(),
            bytes,
            huge_pages,
            released: StatBool::new(false),
        })
    }

    /// A fresh anonymous private mapping of `len` bytes (zeroed by the
    /// kernel, page-aligned), or `None` if the kernel refuses it.
    fn map_anonymous(len: usize) -> Option<NonNull<u8>> {
        // SAFETY: an anonymous private mapping at an address of the
        // kernel's choice aliases no existing memory.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        NonNull::new(raw.cast::<u8>())
    }

    /// `bytes` zeroed bytes on whole 4 KiB pages, asking nothing: a
    /// releasable table too small for huge pages.
    pub(super) fn map_pages(bytes: usize) -> Result<Mapping, AllocError> {
        let page = page_size();
        let len = bytes
            .checked_next_multiple_of(page)
            .ok_or(AllocError { bytes })?;
        let base = map_anonymous(len).ok_or(AllocError { bytes })?;
        Ok(Mapping {
            base,
            len,
            words: base.cast::<AtomicU64>(),
            bytes,
            huge_pages: HugePages::NotRequested,
            released: StatBool::new(false),
        })
    }

    /// Whether advised memory gets huge pages: the system-wide mode is
    /// `always` or `madvise` and this process did not opt out with
    /// `prctl(PR_SET_THP_DISABLE)`. Read per large table (a few
    /// microseconds, next to allocating megabytes).
    fn thp_enabled() -> bool {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        let system = mode.is_ok_and(|m| system_mode_allows(&m));
        // SAFETY: PR_GET_THP_DISABLE takes no pointer arguments and only
        // reads a process flag.
        let process_off = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) } == 1;
        system && !process_off
    }

    /// Whether the `enabled` file's selected (bracketed) mode lets advised
    /// memory use huge pages.
    pub(super) fn system_mode_allows(enabled: &str) -> bool {
        enabled.contains("[always]") || enabled.contains("[madvise]")
    }
}

#[cfg(loom)]
pub(crate) use loom_words::{Release, Words};

#[cfg(loom)]
mod loom_words {
    use super::{AllocError, AtomicU64};
    use crate::sync::Ordering;
    use std::sync::Arc;

    /// Under loom the words are tracked objects, built one by one, shared
    /// with a pending [`Release`].
    pub(crate) struct Words(Arc<[AtomicU64]>);

    /// Under loom, returning the pages is modelled by a thread that stores
    /// 0 into every word (Release, as the kernel's page-table change is
    /// ordered after everything the releasing thread did before).
    pub(crate) struct Release(Arc<[AtomicU64]>);

    impl Release {
        pub(crate) fn run(self) {
            for w in self.0.iter() {
                w.store(0, Ordering::Release);
            }
        }
    }

    impl Words {
        pub(crate) fn zeroed(len: usize) -> Result<Self, AllocError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len)
                .map_err(|_| AllocError { bytes: len * 8 })?;
            v.extend((0..len).map(|_| AtomicU64::new(0)));
            Ok(Words(v.into()))
        }

        pub(crate) fn zeroed_releasable(len: usize) -> Result<Self, AllocError> {
            Self::zeroed(len)
        }

        /// Every loom table's words can be "released" (zeroed).
        pub(crate) fn release_handle(&self) -> Option<Release> {
            Some(Release(Arc::clone(&self.0)))
        }

        pub(crate) fn is_released(&self) -> bool {
            false
        }

        pub(crate) fn as_slice(&self) -> &[AtomicU64] {
            &self.0
        }

        /// Loom models tiny tables: nothing asks for huge pages.
        pub(crate) fn huge_pages(&self) -> super::HugePages {
            super::HugePages::NotRequested
        }

        /// Loading saved tables is not modelled under loom.
        pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
            unimplemented!("loom models do not load saved tables")
        }
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use super::*;
    use crate::sync::Ordering;

    const WORD: usize = std::mem::size_of::<u64>();

    /// Fresh words are zero and writable at both ends.
    fn check_zeroed_and_writable(w: &Words) {
        let s = w.as_slice();
        assert!(s.iter().all(|x| x.load(Ordering::Relaxed) == 0), "zeroed");
        s[0].store(1, Ordering::Relaxed);
        s[s.len() - 1].store(2, Ordering::Relaxed);
        assert_eq!(s[0].load(Ordering::Relaxed), 1);
        assert_eq!(s[s.len() - 1].load(Ordering::Relaxed), 2);
    }

    #[test]
    fn small_tables_do_not_ask_for_huge_pages() {
        let w = Words::zeroed(HUGE_PAGE_MIN_BYTES / WORD - 1).unwrap();
        assert_eq!(w.huge_pages(), HugePages::NotRequested);
        check_zeroed_and_writable(&w);
        assert_eq!(
            Words::zeroed(0).unwrap().huge_pages(),
            HugePages::NotRequested
        );
    }

    /// The kernel's answer as this machine's settings predict it, read
    /// independently of the code under test: THP mode from sysfs, the
    /// process opt-out from `/proc/self/status` (`THP_enabled: 0`).
    #[cfg(target_os = "linux")]
    pub(crate) fn expected_answer() -> HugePages {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let selected = mode
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .unwrap_or("[absent]");
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let process_off = status
            .lines()
            .any(|l| l.starts_with("THP_enabled:") && l.ends_with('0'));
        match selected {
            "[always]" | "[madvise]" if !process_off => HugePages::Accepted,
            _ => HugePages::Declined,
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn large_tables_ask_and_report_what_the_kernel_allows() {
        let len = HUGE_PAGE_MIN_BYTES / WORD * 2 + 3;
        let w = Words::zeroed(len).unwrap();
        assert_eq!(w.as_slice().len(), len);
        assert_eq!(w.huge_pages(), expected_answer());
        assert_eq!(
            w.as_slice().as_ptr() as usize % (2 << 20),
            0,
            "words start on a huge-page boundary"
        );
        check_zeroed_and_writable(&w);
    }

    /// Releasable words of 32 KiB or more are mapped on Linux: their
    /// pages can be returned (and read as zero after); smaller ones, and
    /// words not asked to be releasable, are heap memory.
    #[cfg(target_os = "linux")]
    #[test]
    fn releasable_words_from_32_kib_can_give_their_pages_back() {
        let len = RELEASABLE_MIN_BYTES / WORD + 5;
        let w = Words::zeroed_releasable(len).unwrap();
        assert_eq!(w.as_slice().len(), len);
        check_zeroed_and_writable(&w);
        let release = w.release_handle().expect("mapped");
        release.run();
        assert!(w.is_released());
        assert!(w.as_slice().iter().all(|x| x.load(Ordering::Relaxed) == 0));
        assert!(Words::zeroed_releasable(RELEASABLE_MIN_BYTES / WORD - 1)
            .unwrap()
            .release_handle()
            .is_none());
        assert!(Words::zeroed(len).unwrap().release_handle().is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn selected_mode_decides() {
        assert!(linux::system_mode_allows("always [madvise] never\n"));
        assert!(linux::system_mode_allows("[always] madvise never\n"));
        assert!(!linux::system_mode_allows("always madvise [never]\n"));
        assert!(!linux::system_mode_allows(""));
    }
}
