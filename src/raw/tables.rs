//! Every table a filter has had, oldest first, and which one is current.
//!
//! # Why a replaced table is never freed before the filter
//!
//! `contains` and `count` take no pin: an epoch pin costs a full memory
//! barrier per call, more than the rest of a lookup. So a reader may hold a
//! reference to a table for as long as it likes after a doubling replaced
//! that table. It must still read valid memory there, and it does: each
//! table owns its migration, which owns the successor (`migrate.rs`), so
//! the first table owns the whole chain, and the chain is freed only when
//! the filter is dropped. What a late reader finds in a replaced table:
//!
//! * its version stripes, all sealed (a table is replaced only after every
//!   stripe was sealed and every bucket forwarded) and never changed again:
//!   `ops::contains` never trusts a negative read under a sealed stripe, so
//!   the reader goes on to the migrating read and then to the current table;
//! * its bucket words: forwarded, or, once no writer can reach the table,
//!   zero. Then the filter returns their physical pages to the OS
//!   ([`Release`](crate::memory::Release), `madvise(MADV_DONTNEED)`), which
//!   makes them read as 0 from then on. A reader that sees a zero there
//!   also sees every seal and the successor's installation (the page
//!   release comes after both, in the releasing thread; a reader's load that
//!   observes it synchronises with it like an Acquire load observing a
//!   Release store, which is how the loom models stand it in). So
//!   `ops::contains` rejects the read (the stripe it re-reads is sealed),
//!   and the migrating read, which cannot tell a released word from an
//!   empty one, re-checks that its table is still current before it
//!   trusts a negative answer (`CuckooFilter::read_slow`).
//!
//! Writers announce themselves (growable filters only, `writers.rs`): a
//! plain insert CASes a free lane without any stripe, so it must never meet
//! a released word, where its tag would be lost. The release therefore
//! waits until every write that could have loaded the old table has
//! finished. (Writers that hold a stripe would not need it: a held stripe
//! keeps the table from being sealed, hence from being replaced.)
//!
//! The memory kept is bounded: each table is half its successor, so all
//! replaced tables together are smaller than the current one, and of them
//! only version stripes, migration state and tables under 4 MiB (whose
//! words come from the heap, not a mapping) stay resident.

use super::table::Migration;
use super::table::Table;
use crate::sync::{AtomicPtr, Ordering};
use std::ptr::NonNull;

/// The chain of a filter's tables.
pub(crate) struct Tables {
    /// The first table, owned (from `Box::into_raw`, freed in `Drop`); it
    /// owns every later table through its migration.
    first: NonNull<Table>,
    /// The current table: always one of the chain.
    current: AtomicPtr<Table>,
}

// SAFETY: `Tables` owns its tables like a `Box<Table>` would, and `Table`
// is `Send + Sync`.
unsafe impl Send for Tables {}
// SAFETY: as above; shared access hands out `&Table` only.
unsafe impl Sync for Tables {}

impl Tables {
    /// A chain of one table, which is current.
    pub(crate) fn new(first: Table) -> Tables {
        let first = NonNull::from(Box::leak(Box::new(first)));
        Tables {
            first,
            current: AtomicPtr::new(first.as_ptr()),
        }
    }

    /// The current table.
    #[inline(always)]
    pub(crate) fn current(&self) -> &Table {
        // Acquire: pairs with the Release CAS in `install`, so a
        // successor's migrated words are visible. (The first table needs no
        // pairing: it was stored before the filter was shared, and sharing
        // it, e.g. spawning with an `Arc`, synchronises.)
        let t = self.current.load(Ordering::Acquire);
        // SAFETY: `current` always points to a table of the chain (`new`
        // and `install` only store such pointers), and every table of the
        // chain lives until `self` is dropped.
        unsafe { &*t }
    }

    /// Whether `t` is still the current table.
    #[inline]
    pub(crate) fn is_current(&self, t: &Table) -> bool {
        std::ptr::eq(self.current(), t)
    }

    /// Makes `m`'s successor current in place of `old`, whose migration `m`
    /// is; `false` if another thread did it first.
    pub(crate) fn install(&self, old: &Table, m: &Migration) -> bool {
        debug_assert!(
            old.migration().is_some_and(|own| std::ptr::eq(own, m)),
            "only a table's own successor replaces it"
        );
        let old = old as *const Table as *mut Table;
        let next = m.next() as *const Table as *mut Table;
        // Release: pairs with the Acquire load in `current`: whoever loads
        // the successor sees its migrated words. Acquire on failure is not
        // needed: the loser only learns it was done.
        self.current
            .compare_exchange(old, next, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Every table of the chain, oldest first: the replaced ones, the
    /// current one, and its successor while it migrates.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Table> {
        // SAFETY: `first` lives until `self` is dropped.
        let first: &Table = unsafe { self.first.as_ref() };
        std::iter::successors(Some(first), |t| t.migration().map(Migration::next))
    }

    /// The tables a doubling replaced, oldest first.
    pub(crate) fn retired(&self) -> impl Iterator<Item = &Table> {
        let current = self.current();
        self.iter().take_while(move |t| !std::ptr::eq(*t, current))
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        // SAFETY: `first` came from `Box::into_raw` in `new` and is freed
        // only here; `&mut self` means no reference into the chain remains.
        // Dropping it drops each later table through its migration.
        drop(unsafe { Box::from_raw(self.first.as_ptr()) });
    }
}
