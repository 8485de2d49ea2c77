//! Which threads are inside a write of a filter, so that a replaced table's
//! pages go back to the OS only once no writer can still write them.
//!
//! A plain insert CASes a free lane of the table it loaded, without any
//! stripe: if that table was replaced and its pages released meanwhile,
//! the CAS would land in a fresh zero page, where nobody looks (and it
//! cannot find out afterwards: see `docs/design.md`). So a release waits
//! for every writer that may have loaded the old table.
//!
//! Each writer *announces* itself in a word of its own (its thread's
//! counter slot, `counters::thread_slot`) before it loads the current
//! table: the word is odd while it writes, and it steps to the next even
//! value with `Release` when the write ends. The thread that installs a
//! successor then scans the words: an even word's thread is not writing,
//! or loaded the table after the install, which it then saw (below); an
//! odd word's write may hold the old table, and the release waits until
//! that word has moved on. The writer that moves it (or, failing that,
//! any later writer) runs the release, at the end of its write.
//!
//! The writer's announcement and its load of the current table, and the
//! installer's store of the successor and its scan, are a Dekker pair:
//! each side needs a full fence between its store and its load, or both
//! could miss the other. On Linux the writer's side is free: the installer
//! runs `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which makes every
//! running thread of the process execute a full barrier before it returns,
//! so a writer only needs the compiler to keep its two accesses in order.
//! Where `membarrier` is missing both sides use a `SeqCst` fence (the cost
//! of the epoch pin this replaces). The loom models stand `membarrier` in
//! with `SeqCst` fences on both sides (model `insert_while_old_table_released`
//! and its canaries `ImmediateRelease` and `UnannouncedWriter`).
//!
//! Threads beyond the owned slots share one counter (`fetch_add`), which a
//! release waits to see at zero.

#[cfg(loom)]
use crate::canary::Canary;
use crate::memory::Release;
use crate::raw::counters;
use crate::sync::{compiler_fence, fence, AtomicU64, Mutex, MutexGuard, Ordering};
use crossbeam_utils::CachePadded;

/// Announcement words of one filter's writers.
pub(crate) struct Writers {
    /// One per owned counter slot: odd while its thread writes; then one
    /// more (index `counters::OWNED`) counting the writes in progress of
    /// threads without an owned slot. Empty for a filter that never grows.
    slots: Box<[CachePadded<AtomicU64>]>,
    /// Releases that wait for writers, with what each waits for.
    pending: Mutex<Vec<Pending>>,
    /// Whether `pending` may be non-empty: the one load a write's end pays.
    has_pending: AtomicU64,
    /// Whether installers run `membarrier`, so that writers need only keep
    /// the compiler from reordering (asked once, when the filter is made).
    barrier_on_install: bool,
    #[cfg(loom)]
    pub(crate) canary: Canary,
}

/// A release and the writes it waits for.
struct Pending {
    release: Release,
    /// Owned slots and the odd value each had when the table was replaced.
    slots: Vec<(usize, u64)>,
    /// Whether shared-slot writers were inside a write then.
    shared: bool,
}

/// One write in progress (or nothing, for a nested one): its end steps the
/// thread's word on drop. Writes of one thread nest strictly (each lives
/// in a stack frame of the one it nests in), so an inner write never
/// outlives the outer one that announced it.
pub(crate) struct Writing<'w> {
    writers: &'w Writers,
    /// The thread's slot (`counters::OWNED` for the shared word), or
    /// `NESTED` for a write nested in another of the same thread.
    slot: usize,
}

/// `Writing::slot` of a nested write, which ends nothing.
const NESTED: usize = usize::MAX;

impl Writers {
    /// Announcement words for a filter whose tables can be replaced
    /// (`growable`); none otherwise (its writers never announce).
    pub(crate) fn new(growable: bool) -> Writers {
        let words = if growable { counters::OWNED + 1 } else { 0 };
        Writers {
            slots: (0..words)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            pending: Mutex::new(Vec::new()),
            has_pending: AtomicU64::new(0),
            barrier_on_install: growable && membarrier_available(),
            #[cfg(loom)]
            canary: Canary::None,
        }
    }

    /// Announces a write by this thread; call before loading the current
    /// table. A write nested in another of the same thread (an insert from
    /// inside a snapshot's callback, say) announces nothing more.
    #[inline(always)]
    pub(crate) fn begin(&self) -> Writing<'_> {
        let slot = counters::thread_slot();
        let word = &self.slots[slot];
        if slot == counters::OWNED {
            // Relaxed: ordered by the fence below, as the owned store.
            word.fetch_add(1, Ordering::Relaxed);
        } else {
            // Relaxed load: only this thread writes its word.
            let v = word.load(Ordering::Relaxed);
            if v & 1 == 1 {
                // Nested in a write of this thread, which announced it.
                return Writing {
                    writers: self,
                    slot: NESTED,
                };
            }
            // Relaxed: the fence below orders it before the table load.
            word.store(v + 1, Ordering::Relaxed);
        }
        let writing = Writing {
            writers: self,
            slot,
        };
        #[cfg(loom)]
        if self.canary == Canary::UnannouncedWriter {
            // Deliberately broken: the announcement may be seen after the
            // table load, so an installer can miss a writer of the old table.
            return writing;
        }
        // Pairs with the installer's `installer_fence` (the Dekker pair in
        // the module docs): the announcement is visible to its scan, or
        // this thread's next table load sees the installed successor.
        if self.barrier_on_install {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
        writing
    }

    /// Returns `release`'s pages to the OS once no write that could hold
    /// the table it belongs to is in progress: now, or at the end of the
    /// last such write. Call after installing the table's successor.
    pub(crate) fn release_when_quiet(&self, release: Release) {
        // Pairs with the fence in `begin`: a writer whose announcement
        // this scan misses loads the successor.
        if !self.installer_fence() {
            // No barrier ran: the scan proves nothing, so the pages stay
            // until the filter drops (bounded: see `raw/tables.rs`).
            return;
        }
        // Acquire: pairs with the Release end of a write, so its CASes
        // happen before the release.
        let (owned, shared) = self.slots.split_at(counters::OWNED);
        let slots: Vec<(usize, u64)> = owned
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let v = w.load(Ordering::Acquire);
                (v & 1 == 1).then_some((i, v))
            })
            .collect();
        let shared = shared[0].load(Ordering::Acquire) != 0;
        if slots.is_empty() && !shared {
            release.run();
            return;
        }
        self.lock_pending().push(Pending {
            release,
            slots,
            shared,
        });
        self.has_pending.store(1, Ordering::Relaxed);
        // A write may have ended after the scan without seeing the flag.
        self.run_pending();
    }

    /// Runs every pending release whose writes have all ended.
    #[cold]
    #[inline(never)]
    fn run_pending(&self) {
        let mut pending = self.lock_pending();
        for p in pending.iter_mut() {
            // Acquire: as in `release_when_quiet`. A word that moved on
            // ended the write seen (later writes saw the successor).
            p.slots
                .retain(|&(i, v)| self.slots[i].load(Ordering::Acquire) == v);
            p.shared = p.shared && self.slots[counters::OWNED].load(Ordering::Acquire) != 0;
        }
        let (done, waiting): (Vec<Pending>, Vec<Pending>) = pending
            .drain(..)
            .partition(|p| p.slots.is_empty() && !p.shared);
        *pending = waiting;
        self.has_pending
            .store(u64::from(!pending.is_empty()), Ordering::Relaxed);
        drop(pending);
        for p in done {
            p.release.run();
        }
    }

    /// The installer's half of the Dekker pair: a barrier on every running
    /// thread of the process, or a fence where writers fence themselves;
    /// `false` if no barrier could run (the kernel refused a barrier it had
    /// registered the process for, which it documents no reason to do).
    fn installer_fence(&self) -> bool {
        #[cfg(all(target_os = "linux", not(loom), not(miri)))]
        if self.barrier_on_install {
            return membarrier::run();
        }
        fence(Ordering::SeqCst);
        true
    }

    /// Releases still waiting for writers.
    #[cfg(test)]
    pub(crate) fn pending_releases(&self) -> usize {
        self.lock_pending().len()
    }

    fn lock_pending(&self) -> MutexGuard<'_, Vec<Pending>> {
        // A poisoned list is still a valid list: nothing panics under it.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<'w> Writing<'w> {
    /// The announcements this write belongs to.
    pub(crate) fn writers(&self) -> &'w Writers {
        self.writers
    }
}

impl Drop for Writing<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.slot == NESTED {
            return;
        }
        let w = self.writers;
        let word = &w.slots[self.slot];
        if self.slot != counters::OWNED {
            // Release: the write's CASes happen before an installer's
            // Acquire scan that sees the word move on.
            word.store(word.load(Ordering::Relaxed) + 1, Ordering::Release);
        } else {
            word.fetch_sub(1, Ordering::Release);
        }
        // Relaxed: a flag seen late only delays a release to a later write.
        if w.has_pending.load(Ordering::Relaxed) != 0 {
            w.run_pending();
        }
    }
}

/// Whether this process can run `membarrier` barriers (registered once).
/// (Never under Miri, which does not model the system call.)
fn membarrier_available() -> bool {
    #[cfg(all(target_os = "linux", not(loom), not(miri)))]
    return membarrier::available();
    #[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
    false
}

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
mod membarrier {
    use std::sync::OnceLock;

    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    /// Whether this process registered for expedited private barriers
    /// (Linux 4.14+); asked once.
    pub(super) fn available() -> bool {
        static REGISTERED: OnceLock<bool> = OnceLock::new();
        *REGISTERED.get_or_init(|| {
            // SAFETY: the membarrier syscall takes two integers and a
            // flags word and touches no memory of ours.
            unsafe {
                libc::syscall(libc::SYS_membarrier, CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0
            }
        })
    }

    /// Runs a barrier on every running thread of the process; `false` if
    /// the kernel refused.
    pub(super) fn run() -> bool {
        // SAFETY: as above.
        unsafe { libc::syscall(libc::SYS_membarrier, CMD_PRIVATE_EXPEDITED, 0, 0) == 0 }
    }
}

#[cfg(all(test, target_os = "linux", not(loom)))]
mod tests {
    use super::*;
    use crate::memory::{Words, HUGE_PAGE_MIN_BYTES};
    use std::sync::{mpsc, Arc};

    /// Mapped words (large enough to be released) with one word set.
    fn mapped() -> Words {
        let words = Words::zeroed(HUGE_PAGE_MIN_BYTES / 8).unwrap();
        words.as_slice()[0].store(7, Ordering::Relaxed);
        words
    }

    fn released(words: &Words) -> bool {
        words.is_released() && words.as_slice()[0].load(Ordering::Relaxed) == 0
    }

    #[test]
    fn with_no_write_in_progress_the_release_runs_at_once() {
        let (writers, words) = (Writers::new(true), mapped());
        drop(writers.begin()); // a write that has ended
        writers.release_when_quiet(words.release_handle().unwrap());
        assert!(released(&words));
        assert_eq!(writers.pending_releases(), 0);
    }

    /// A write in progress on another thread holds the release back until
    /// it ends; the end of that write runs it.
    #[test]
    fn a_release_waits_for_the_writes_in_progress_and_their_end_runs_it() {
        let writers = Arc::new(Writers::new(true));
        let words = mapped();
        let (began, end) = (mpsc::channel(), mpsc::channel::<()>());
        let writer = {
            let writers = Arc::clone(&writers);
            let (began, end) = (began.0, end.1);
            std::thread::spawn(move || {
                let writing = writers.begin();
                began.send(()).unwrap();
                end.recv().unwrap();
                drop(writing);
            })
        };
        began.1.recv().unwrap();
        writers.release_when_quiet(words.release_handle().unwrap());
        assert!(!released(&words), "released under a write in progress");
        assert_eq!(writers.pending_releases(), 1);
        // A write of this thread starting and ending changes nothing.
        drop(writers.begin());
        assert!(!released(&words));
        end.0.send(()).unwrap();
        writer.join().unwrap();
        assert!(released(&words), "the write's end did not run the release");
        assert_eq!(writers.pending_releases(), 0);
    }

    /// A nested write (a write inside a write of the same thread) neither
    /// ends the outer one's announcement nor counts twice.
    #[test]
    fn nested_writes_end_with_the_outermost() {
        let writers = Writers::new(true);
        let words = mapped();
        let outer = writers.begin();
        drop(writers.begin());
        writers.release_when_quiet(words.release_handle().unwrap());
        assert!(!released(&words), "the nested end ended the outer write");
        drop(outer);
        assert!(released(&words));
    }
}
