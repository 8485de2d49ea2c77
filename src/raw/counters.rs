//! Item count and operation statistics, sharded to keep writers apart.
//!
//! One shared counter would be a cache line that every insert on every core
//! writes: under two writer threads it alone costs more than the insert. So
//! the counts live in cache-padded shards. Each thread owns one (a slot no
//! other live thread holds, taken at its first operation and given back
//! when it exits), so its increments are a plain load and store, not a
//! locked instruction: half the atomic read-modify-writes of an insert.
//! Threads beyond `OWNED` share one more shard with `fetch_add`. Picking
//! the shard by the key's bucket instead spread the writes just as well but
//! made every core write every shard, so almost every count moved a cache
//! line between cores. Readers sum the shards; a sum is exact whenever no
//! writer is running.
//!
//! Every counter is `Relaxed`: none of them orders anything, and none is
//! read by a protocol. An owned shard has one writer at a time: a slot
//! passes from an exiting thread to the next through the slot list's
//! mutex, which orders the old owner's last store before the new one's
//! first load.

// The counters are std atomics under loom too (`crate::sync::StatU64`), so
// loom spends no interleavings on them: the one module besides the facade
// that the loom build's `disallowed-types` lint lets use std's atomics.
#![cfg_attr(loom, allow(clippy::disallowed_types))]

use crate::sync::{Ordering::Relaxed, StatI64, StatU64};
use crossbeam_utils::CachePadded;
#[cfg(not(loom))]
use std::cell::Cell;

/// Longest displacement path, in hops, that the statistics tell apart.
pub(crate) const PATH_HISTOGRAM: usize = 8;

/// Shards owned by one thread each; one more is shared by any others.
#[cfg(not(loom))]
pub(crate) const OWNED: usize = 64;
/// Under loom: the first two model threads own a slot (the writer
/// announcements of `raw::writers` are modelled both ways), later ones
/// share.
#[cfg(loom)]
pub(crate) const OWNED: usize = 2;
/// The index of the shared shard.
const SHARED: usize = OWNED;

/// The counters of one shard.
#[derive(Default)]
pub(crate) struct Shard {
    /// Written by its owning thread only (plain load and store); `false`
    /// for the shared shard (`fetch_add`).
    owned: bool,
    /// Items inserted minus items removed (may be negative per shard).
    len: StatI64,
    /// Tags moved from one bucket to the other by committed hops.
    pub(crate) displacements: StatU64,
    /// Displacement paths committed in full, by number of hops.
    pub(crate) paths: [StatU64; PATH_HISTOGRAM],
    /// Paths abandoned because a bucket changed since the search.
    pub(crate) stale_paths: StatU64,
    /// Inserts refused because no displacement path was found.
    pub(crate) full: StatU64,
    /// Bucket CASes that lost a race and were retried.
    pub(crate) cas_retries: StatU64,
}

impl Shard {
    /// Adds one to `counter`, one of this shard's statistics.
    #[inline(always)]
    pub(crate) fn bump(&self, counter: &StatU64) {
        if self.owned {
            counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
        } else {
            counter.fetch_add(1, Relaxed);
        }
    }

    /// Adds `n` (negative for removals) to the item count.
    #[inline(always)]
    pub(crate) fn add_len(&self, n: i64) {
        if self.owned {
            self.len
                .store(self.len.load(Relaxed).wrapping_add(n), Relaxed);
        } else {
            self.len.fetch_add(n, Relaxed);
        }
    }
}

/// The calling thread's slot (its counter shard, and its announcement word
/// in `raw::writers`): its own, or the shared one (`OWNED`) once all
/// `OWNED` slots are held by live threads (and during thread-local
/// destruction, when the slot may already be given back).
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn thread_slot() -> usize {
    // A plain cell (no destructor, so no lazy-initialisation check): one
    // thread-local load on the fast path.
    let slot = SLOT.with(Cell::get);
    if slot != UNSET {
        return slot;
    }
    Slot::assign()
}

#[cfg(not(loom))]
std::thread_local! {
    /// This thread's slot, `UNSET` before its first operation. Reset to
    /// `SHARED` when the thread gives its slot back.
    static SLOT: Cell<usize> = const { Cell::new(UNSET) };
    /// Gives the slot back when the thread exits.
    static HELD: Slot = const { Slot(Cell::new(UNSET)) };
}

#[cfg(not(loom))]
const UNSET: usize = usize::MAX;

#[cfg(loom)]
pub(crate) fn thread_slot() -> usize {
    loom::lazy_static! {
        static ref NEXT: loom::sync::atomic::AtomicUsize = loom::sync::atomic::AtomicUsize::new(0);
    }
    loom::thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Relaxed).min(SHARED);
    }
    SLOT.with(|s| *s)
}

/// A thread's slot, given back when the thread exits.
#[cfg(not(loom))]
struct Slot(Cell<usize>);

/// Slots given back by exited threads, and the next never-used one.
#[cfg(not(loom))]
static SLOTS: std::sync::Mutex<(Vec<usize>, usize)> = std::sync::Mutex::new((Vec::new(), 0));

#[cfg(not(loom))]
impl Slot {
    /// Takes a slot for this thread (at its first operation).
    #[cold]
    #[inline(never)]
    fn assign() -> usize {
        let slot = {
            // A poisoned list is still a valid list: no code panics under it.
            let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
            let (returned, next) = &mut *slots;
            returned.pop().unwrap_or_else(|| {
                if *next < OWNED {
                    *next += 1;
                    *next - 1
                } else {
                    SHARED
                }
            })
        };
        // Registers the slot for return at thread exit. During thread-local
        // destruction that may be impossible: then give it back at once and
        // share (the thread is ending anyway).
        if HELD.try_with(|h| h.0.set(slot)).is_err() {
            Slot(Cell::new(slot)).give_back();
            let _ = SLOT.try_with(|s| s.set(SHARED));
            return SHARED;
        }
        SLOT.with(|s| s.set(slot));
        slot
    }

    fn give_back(&self) {
        let slot = self.0.replace(UNSET);
        if slot < OWNED {
            let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
            slots.0.push(slot);
        }
    }
}

#[cfg(not(loom))]
impl Drop for Slot {
    fn drop(&mut self) {
        // Later operations of this thread (in other thread-local
        // destructors) share.
        let _ = SLOT.try_with(|s| s.set(SHARED));
        self.give_back();
    }
}

/// All shards of one filter, and the rare growth events.
pub(crate) struct Counters {
    shards: Box<[CachePadded<Shard>]>,
    /// Subtracted from the shards' sum of `len`: `set_len` moves it
    /// instead of writing shards that their owners may be writing.
    len_base: StatI64,
    /// Migrations completed (successor installed).
    growths: StatU64,
    /// Growths refused by the policy or the allocator.
    growth_refusals: StatU64,
    /// Removes that found the key's tag in more than one level and so
    /// removed nothing (`cuckoo/levels.rs`).
    ambiguous_removes: StatU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            shards: (0..=OWNED)
                .map(|i| {
                    CachePadded::new(Shard {
                        owned: i != SHARED,
                        ..Shard::default()
                    })
                })
                .collect(),
            len_base: StatI64::new(0),
            growths: StatU64::new(0),
            growth_refusals: StatU64::new(0),
            ambiguous_removes: StatU64::new(0),
        }
    }
}

/// Sums of every shard.
#[derive(Default, Debug, Clone)]
pub(crate) struct Totals {
    pub(crate) len: i64,
    pub(crate) displacements: u64,
    pub(crate) paths: [u64; PATH_HISTOGRAM],
    pub(crate) stale_paths: u64,
    pub(crate) full: u64,
    pub(crate) cas_retries: u64,
}

impl Counters {
    pub(crate) fn bump_growths(&self) {
        self.growths.fetch_add(1, Relaxed);
    }

    pub(crate) fn bump_growth_refusals(&self) {
        self.growth_refusals.fetch_add(1, Relaxed);
    }

    pub(crate) fn bump_ambiguous_removes(&self) {
        self.ambiguous_removes.fetch_add(1, Relaxed);
    }

    pub(crate) fn ambiguous_removes(&self) -> u64 {
        self.ambiguous_removes.load(Relaxed)
    }

    /// `(growths, growth refusals)`.
    pub(crate) fn growth_events(&self) -> (u64, u64) {
        (
            self.growths.load(Relaxed),
            self.growth_refusals.load(Relaxed),
        )
    }

    /// The calling thread's shard.
    #[inline(always)]
    pub(crate) fn shard(&self) -> &Shard {
        &self.shards[thread_slot()]
    }

    /// Items inserted minus removed, over all shards.
    pub(crate) fn len(&self) -> i64 {
        self.shard_len().wrapping_sub(self.len_base.load(Relaxed))
    }

    fn shard_len(&self) -> i64 {
        self.shards
            .iter()
            .fold(0i64, |sum, s| sum.wrapping_add(s.len.load(Relaxed)))
    }

    pub(crate) fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in self.shards.iter() {
            t.displacements += s.displacements.load(Relaxed);
            for (sum, p) in t.paths.iter_mut().zip(&s.paths) {
                *sum += p.load(Relaxed);
            }
            t.stale_paths += s.stale_paths.load(Relaxed);
            t.full += s.full.load(Relaxed);
            t.cas_retries += s.cas_retries.load(Relaxed);
        }
        t.len = self.len();
        t
    }

    /// Zeroes the item count (statistics are kept: they describe history).
    pub(crate) fn reset_len(&self) {
        self.set_len(0);
    }

    /// Sets the item count to `len`. Writers racing with this call may be
    /// counted or not, as their items may or may not survive the `clear`
    /// or load that calls it.
    pub(crate) fn set_len(&self, len: i64) {
        self.len_base
            .store(self.shard_len().wrapping_sub(len), Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// More live threads than owned slots: every owned slot has one live
    /// holder, the rest share, and no increment is lost either way.
    #[test]
    fn no_count_is_lost_with_more_threads_than_owned_shards() {
        let threads = OWNED + 16;
        let counters = Arc::new(Counters::default());
        let all_alive = Arc::new(Barrier::new(threads));
        let slots: Vec<usize> = (0..threads)
            .map(|_| {
                let (c, alive) = (Arc::clone(&counters), Arc::clone(&all_alive));
                std::thread::spawn(move || {
                    // Every thread holds its slot from here until all are done.
                    let slot = thread_slot();
                    alive.wait();
                    for _ in 0..2000 {
                        let shard = c.shard();
                        shard.add_len(1);
                        shard.bump(&shard.cas_retries);
                    }
                    c.shard().add_len(-500);
                    alive.wait();
                    slot
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(counters.len(), threads as i64 * 1500);
        assert_eq!(counters.totals().cas_retries, threads as u64 * 2000);
        let mut owned: Vec<usize> = slots.into_iter().filter(|&s| s != SHARED).collect();
        let held = owned.len();
        owned.sort_unstable();
        owned.dedup();
        assert_eq!(owned.len(), held, "two live threads held one slot");
    }

    /// An exiting thread gives its slot back: many short-lived threads in
    /// turn keep getting owned slots (without returns only `OWNED` would).
    #[test]
    fn exited_threads_give_their_slot_back() {
        let owned = (0..4 * OWNED)
            .filter(|_| std::thread::spawn(thread_slot).join().unwrap() != SHARED)
            .count();
        assert!(
            owned > 2 * OWNED,
            "{owned} of {} threads owned a slot",
            4 * OWNED
        );
    }

    #[test]
    fn set_len_sets_what_len_reports() {
        let c = Counters::default();
        c.shard().add_len(5);
        c.set_len(2);
        assert_eq!(c.len(), 2);
        c.shard().add_len(3);
        assert_eq!(c.len(), 5);
        c.reset_len();
        assert_eq!(c.len(), 0);
    }
}
