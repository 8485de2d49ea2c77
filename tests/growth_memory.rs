//! After a doubling completes, the old table's memory is returned to the
//! system (once no write that could reach it is running), measured by counting the bytes
//! this test binary has allocated and not yet freed.

use koel::CuckooFilter;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counter has no effect on
// the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn the_old_table_is_freed_once_growth_completes() {
    let baseline = LIVE.load(Relaxed);
    let f = CuckooFilter::builder()
        .capacity(2_000_000)
        .seed(1)
        .build()
        .unwrap();
    let first_table = f.memory_usage() as isize;
    let mut k = 0u64;
    while f.generation() == 0 || f.stats().migrating {
        f.insert(&k).unwrap();
        k += 1;
    }
    let new_table = f.memory_usage() as isize;
    assert!(
        new_table > first_table * 19 / 10,
        "{new_table} vs {first_table}"
    );
    // The old table's memory goes back once no write that began before
    // its replacement is running (the end of such a write runs it).
    let filter_bytes = || LIVE.load(Relaxed) - baseline;
    let old_still_live = || filter_bytes() >= new_table + first_table / 2;
    for i in 0..200_000u64 {
        if !old_still_live() {
            break;
        }
        assert!(f.contains(&(i % k)));
    }
    assert!(
        !old_still_live(),
        "{} bytes live for a {new_table}-byte table: the old {first_table}-byte table was not freed",
        filter_bytes()
    );
    eprintln!(
        "live after growth: {} bytes (new table {new_table}, old table {first_table})",
        filter_bytes()
    );
}
