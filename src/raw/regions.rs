//! A level that grows by regions: consistent regions of 21x3 words, a map
//! from virtual slots to regions, and steps that move whole slots to new
//! regions (docs/design.md, "Growth beyond the tag bits: levels",
//! "Consistent regions" and "Worked out further").
//!
//! # State
//!
//! * **Regions**: generation-0 [`Table`]s of `m0` buckets each, in an
//!   append-only array that lives as long as the level. Nothing is
//!   retired, so no operation needs an epoch pin or an announcement. All regions
//!   share one geometry, so a key has the same tag and local pair in each.
//! * **Map**: [`SLOTS`] `AtomicU32` entries, `cur | prev << 16` (equal
//!   outside a step). A key's slot mixes its tag and the lower bucket of its
//!   pair ([`slot_of`]), so a tag found in a bucket names its slot alone.
//! * **Step counter**: steps begun. Bumped once per step, after the step's
//!   moved entries are written.
//!
//! # Operations
//!
//! * A **lookup** loads the counter, then the entry; reads `prev` first
//!   (if it differs), then `cur`, each validated by its region's stripe
//!   (`ops::contains`). A hit is final; a miss stands only if the counter
//!   did not move. `prev` first: a hop copies into `cur` before it clears
//!   `prev`.
//! * An **insert** puts its tag into `cur`, then (a Dekker pair with the
//!   step, see [`Regions::insert`]) re-loads the counter; if a step began,
//!   it follows its own tag into its slot's new region before returning.
//! * A **hop** moves one copy of a tag between regions, same pair: under
//!   the source pair's stripe (marked moving), insert into the destination
//!   (displacing there), then take from the source. Hops always go from a
//!   lower region index to a higher one (a slot only ever moves to new
//!   regions), so holding a source stripe while taking destination stripes
//!   cannot deadlock.
//! * A **step**: one claimant allocates `max(1, R / 12)` regions, moves
//!   slots greedily from the fullest regions to the new ones (writing each
//!   moved entry), bumps the counter, and opens a **sweep** over every old
//!   bucket in chunks that inserts claim one at a time. Each chunk hops the
//!   tags whose region is no longer their slot's `cur`. The thread that
//!   finishes the last chunk ends the step: moved entries become
//!   `cur | cur << 16`, unless a hop of that slot found no room.
//! * A slot whose hop found no room stays **split** (`prev` kept) until a
//!   later step's sweep moves what is left; lookups of it read two regions.
//! * While a slot leaves a region it is **pinned** there ([`Pin`]):
//!   displacement inside the region leaves its tags where they are. A tag
//!   moved from a bucket the sweep has not reached into one it has swept
//!   would be left behind. The search skips pinned tags, and a hop checks
//!   the pin again after its copy, behind a `SeqCst` fence, taking the copy
//!   back if it lost the race (`path::unpin_or_undo`).
//!
//! # Orderings, in one place
//!
//! * Entries are written (Release) *before* the counter is bumped: a
//!   reader whose counter load sees a bump then sees the step's entries.
//! * The bump is a `SeqCst` RMW followed by a `SeqCst` fence; every sweep
//!   chunk opens with a `SeqCst` fence; an insert fences `SeqCst` after its
//!   CAS, before it re-loads the counter. So a tag inserted into an old
//!   region is seen by the sweep, or its insert sees the bump and follows
//!   it.
//! * Every hop's clear (Release) is made by a thread that has seen the
//!   bump through an Acquire (the sweep's publication, or the counter): a
//!   reader whose word load sees the clear re-loads a moved counter.

// The issue-17 engine, not yet wired into the public filter.
#![cfg_attr(not(test), allow(dead_code))]

use super::bucket::{self, L21x3, Layout};
use super::cas::take;
use super::counters::Counters;
use super::geometry::{Addressing, Geometry, Located};
use super::ops::{self, InsertFailure, Search};
use super::pause;
use super::stripe::{count_stands, StripeLock};
use super::table::Table;
#[cfg(loom)]
use crate::loom_support::RegionCanary;
use crate::memory::AllocError;
use crate::sync::{fence, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Backoff, Mutex, Ordering};
use std::sync::Arc;

#[cfg(test)]
mod tests;

/// Log2 of the virtual slots: `2^14` entries of 4 bytes stay in L1.
#[cfg(not(loom))]
const SLOT_BITS: u32 = 14;
#[cfg(loom)]
const SLOT_BITS: u32 = 1;

/// Virtual slots of the map.
pub(crate) const SLOTS: usize = 1 << SLOT_BITS;

/// Buckets one sweep chunk covers: a few microseconds of work for the
/// insert that claims it.
#[cfg(not(loom))]
const CHUNK: usize = 256;
#[cfg(loom)]
const CHUNK: usize = 2;

/// Most regions a level may have: region indices are 16 bits in an entry.
pub(crate) const MAX_REGIONS: usize = u16::MAX as usize;

/// The steps' growth ratio: `max(1, R / STEP_DIVISOR)` new regions.
const STEP_DIVISOR: usize = 12;

/// The slot of the tag `tag` whose pair's lower bucket is `low` (a local
/// index): the same from either bucket of the pair.
#[inline(always)]
pub(crate) fn slot_of(tag: u64, low: usize) -> usize {
    let mut x = ((low as u64) << 21) ^ tag;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> (64 - SLOT_BITS)) as usize
}

/// One map entry, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The region new tags of the slot go to.
    pub(crate) cur: usize,
    /// The region the slot is leaving (`cur` if none).
    pub(crate) prev: usize,
}

impl Entry {
    fn pack(self) -> u32 {
        debug_assert!(self.cur <= MAX_REGIONS && self.prev <= MAX_REGIONS);
        self.cur as u32 | (self.prev as u32) << 16
    }

    fn unpack(v: u32) -> Entry {
        Entry {
            cur: (v & 0xFFFF) as usize,
            prev: (v >> 16) as usize,
        }
    }

    fn whole(region: usize) -> Entry {
        Entry {
            cur: region,
            prev: region,
        }
    }

    /// Whether the slot has tags in two regions (moving, or split).
    pub(crate) fn is_split(self) -> bool {
        self.cur != self.prev
    }
}

/// The slot map, shared by the level and its regions' pins.
pub(crate) struct SlotMap {
    entries: Box<[AtomicU32]>,
}

impl SlotMap {
    fn new() -> SlotMap {
        SlotMap {
            entries: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    #[inline(always)]
    fn at(&self, slot: usize) -> &AtomicU32 {
        &self.entries[slot]
    }

    /// The entry of `slot`, loaded with `order`.
    #[inline(always)]
    fn load(&self, slot: usize, order: Ordering) -> Entry {
        Entry::unpack(self.at(slot).load(order))
    }
}

/// What a region's displacements ask before moving a tag (`path.rs`):
/// whether the running step is moving the tag's slot out of this region.
pub(crate) struct Pin {
    map: Arc<SlotMap>,
    region: usize,
    /// The `Unpinned` canary: nothing is ever pinned.
    #[cfg(loom)]
    ignored: bool,
}

impl Pin {
    /// Whether `tag` of the pair `{i, j}` is leaving this region.
    #[inline]
    pub(crate) fn holds(&self, tag: u64, i: usize, j: usize) -> bool {
        #[cfg(loom)]
        if self.ignored {
            return false;
        }
        // Relaxed: the search only plans with it; `path::unpin_or_undo`
        // loads it after a SeqCst fence, which carries the ordering.
        let e = self.map.load(slot_of(tag, i.min(j)), Ordering::Relaxed);
        e.prev == self.region && e.cur != self.region
    }
}

/// Why an insert was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The key's region is full and the level may not add regions (its
    /// limit, or the allocator refused).
    Full,
    /// The key's copies fill its pair (see `ops::InsertFailure`).
    Saturated { copies: usize },
}

/// Why a step could not begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoStep {
    /// Another thread runs a step.
    Running,
    /// The level has its most regions, or the allocator refused.
    Refused,
}

/// What a hop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hopped {
    Moved,
    /// No copy of the tag was left in the source pair.
    Gone,
    /// The destination pair had no room: the tag stays in the source.
    NoRoom,
}

/// The running step's sweep: its old buckets, in chunks.
struct Sweep {
    /// The step's number (the counter's value after its bump).
    step: u64,
    /// Regions before the step: the sweep covers their buckets.
    regions: usize,
    chunks: usize,
    /// The next chunk to hand out.
    cursor: AtomicUsize,
    /// Chunks swept.
    done: AtomicUsize,
}

/// What only the step's claimant touches: which slots each region holds.
struct Plan {
    slots: Vec<Vec<u16>>,
}

/// A level of consistent regions.
pub(crate) struct Regions {
    geo: Geometry,
    /// Region `r` at `tables[r]`, for `r < count`; null above. Written once
    /// each (by a step's claimant), freed in `Drop`.
    tables: Box<[AtomicPtr<Table>]>,
    /// Regions allocated.
    count: AtomicUsize,
    map: Arc<SlotMap>,
    /// Steps begun.
    step: AtomicU64,
    /// 1 from a step's claim to its end.
    claim: AtomicUsize,
    /// The running step's sweep (null outside a step).
    sweep: AtomicPtr<Sweep>,
    /// Every sweep ever published, kept until drop: a helper may still
    /// read one after its step ended.
    // Boxed: a sweep's address must not move when the vector grows.
    #[allow(clippy::vec_box)]
    sweeps: Mutex<Vec<Box<Sweep>>>,
    plan: Mutex<Plan>,
    /// Per slot: the last step in which a hop of it found no room (0:
    /// none). A step leaves a slot split if one did during it.
    failed: Box<[AtomicU32]>,
    max_regions: usize,
    counters: Counters,
    /// Tags copied from one region to another (a statistic).
    copies: AtomicU64,
    /// A deliberately broken protocol, for the loom canaries only.
    #[cfg(loom)]
    canary: RegionCanary,
}

// SAFETY: `tables` holds owned `Table`s (like `Box<Table>`), which are
// `Send + Sync`; everything else is atomics, mutexes and owned data.
unsafe impl Send for Regions {}
// SAFETY: as above; shared access hands out `&Table` only.
unsafe impl Sync for Regions {}

impl Regions {
    /// A level of one region of `m0` buckets, which may grow to
    /// `max_regions` regions.
    pub(crate) fn new(m0: u64, max_regions: usize) -> Result<Regions, AllocError> {
        Self::build(
            m0,
            max_regions,
            #[cfg(loom)]
            RegionCanary::None,
        )
    }

    /// [`new`](Self::new) with a deliberately broken protocol.
    #[cfg(loom)]
    pub(crate) fn with_canary(
        m0: u64,
        max_regions: usize,
        canary: RegionCanary,
    ) -> Result<Regions, AllocError> {
        Self::build(m0, max_regions, canary)
    }

    fn build(
        m0: u64,
        max_regions: usize,
        #[cfg(loom)] canary: RegionCanary,
    ) -> Result<Regions, AllocError> {
        assert!((1..=MAX_REGIONS).contains(&max_regions));
        let geo = Geometry::new(m0, 0, Addressing::V3);
        let map = Arc::new(SlotMap::new());
        let first = new_region(
            geo,
            &map,
            0,
            #[cfg(loom)]
            canary,
        )?;
        let tables: Box<[AtomicPtr<Table>]> = (0..max_regions)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        // Relaxed: nothing else can see the level yet.
        tables[0].store(Box::into_raw(Box::new(first)), Ordering::Relaxed);
        Ok(Regions {
            geo,
            tables,
            count: AtomicUsize::new(1),
            map,
            step: AtomicU64::new(0),
            claim: AtomicUsize::new(0),
            sweep: AtomicPtr::new(std::ptr::null_mut()),
            sweeps: Mutex::new(Vec::new()),
            plan: Mutex::new(Plan {
                slots: vec![(0..SLOTS as u16).collect()],
            }),
            failed: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            max_regions,
            counters: Counters::default(),
            copies: AtomicU64::new(0),
            #[cfg(loom)]
            canary,
        })
    }

    /// Region `r`, which some entry or the region count named.
    #[inline(always)]
    fn region(&self, r: usize) -> &Table {
        // Acquire: pairs with the Release store in `claim_step`, so the
        // region's zeroed words and stripes are visible. (Whoever names `r`
        // read it from an entry or the count, both published after it.)
        let p = self.tables[r].load(Ordering::Acquire);
        debug_assert!(!p.is_null(), "region {r} named before it exists");
        // SAFETY: a non-null pointer came from `Box::into_raw` (in `build` or
        // `claim_step`), is never replaced (one claimant writes each index
        // once), and is freed only in `Drop`, which cannot run while
        // `&self` lives. Every index an entry or the count names was
        // stored before that entry or count was published.
        unsafe { &*p }
    }

    /// Where hash `h` lives: its tag, its local pair and its slot.
    #[inline(always)]
    fn locate(&self, h: u64) -> (Located, usize) {
        let at = self.geo.locate::<L21x3>(h);
        (at, slot_of(at.tag, at.i1.min(at.i2)))
    }

    /// Whether hash `h` may have been inserted.
    pub(crate) fn contains(&self, h: u64) -> bool {
        let (at, slot) = self.locate(h);
        loop {
            // Acquire: pairs with the bump (a SeqCst RMW), so a reader that
            // sees a step's number sees that step's entries, written before.
            let before = self.step.load(Ordering::Acquire);
            // Acquire: pairs with the Release entry writes, so the regions
            // they name are published.
            let e = self.map.load(slot, Ordering::Acquire);
            if e.is_split() && present(self.region(e.prev), at) {
                return true;
            }
            if present(self.region(e.cur), at) {
                return true;
            }
            // Relaxed: after the Acquire word loads in `ops::contains`. A
            // word load that saw a hop's clear synchronised with it, and the
            // hopping thread had seen the bump (module docs), so this load
            // sees the bump too.
            if self.step.load(Ordering::Relaxed) == before {
                return false;
            }
        }
    }

    /// Copies of hash `h`'s tag in its pair (a tag in flight between two
    /// regions is counted once).
    pub(crate) fn count(&self, h: u64) -> usize {
        let (at, slot) = self.locate(h);
        let mut backoff = Backoff::default();
        loop {
            // Acquire, both: as in `contains`.
            let before = self.step.load(Ordering::Acquire);
            let e = self.map.load(slot, Ordering::Acquire);
            let n = if e.is_split() {
                #[cfg(loom)]
                let count_two = |p: &Table, c: &Table, at| self.count_two_as_canary(p, c, at);
                match count_two(self.region(e.prev), self.region(e.cur), at) {
                    Some(n) => n,
                    None => {
                        backoff.snooze();
                        continue;
                    }
                }
            } else {
                ops::count::<L21x3>(self.region(e.cur), at).expect("regions are never sealed")
            };
            // Relaxed: after Acquire word loads, as in `contains`.
            if self.step.load(Ordering::Relaxed) == before {
                return n;
            }
        }
    }

    /// Removes one copy of hash `h`'s tag; `false` if none was found.
    pub(crate) fn remove(&self, h: u64) -> bool {
        #[cfg(loom)]
        if self.canary == RegionCanary::RemoveCurFirst {
            return self.remove_cur_first(h);
        }
        let (_, slot) = self.locate(h);
        let hash_in = |t: &Table| ops::remove::<L21x3>(t, h, &self.counters);
        loop {
            // Acquire, both: as in `contains`.
            let before = self.step.load(Ordering::Acquire);
            let e = self.map.load(slot, Ordering::Acquire);
            // `prev` first, under its stripe: a hop holds it across its
            // copy and its clear, so the tag is seen on one side.
            if e.is_split() && hash_in(self.region(e.prev)).expect("regions are never sealed") {
                return true;
            }
            if hash_in(self.region(e.cur)).expect("regions are never sealed") {
                return true;
            }
            // Relaxed: after the stripe takes (Acquire) in `ops::remove`,
            // which synchronised with the last hop of this pair.
            if self.step.load(Ordering::Relaxed) == before {
                return false;
            }
        }
    }

    /// Inserts hash `h`.
    ///
    /// First helps a running step with one sweep chunk. Then puts the tag
    /// into its slot's `cur` region; if that is full, begins a step (or
    /// helps the running one) and tries again.
    ///
    /// After the CAS a `SeqCst` fence, then the counter: a Dekker pair with
    /// the step (bump, fence) and its sweep chunks (fence, word loads).
    /// Either a chunk that reads the tag's bucket sees the tag, or this
    /// load sees the bump; then the insert follows its tag to its slot's
    /// new region ([`follow`](Self::follow)) before it returns.
    pub(crate) fn insert(&self, h: u64) -> Result<(), Refused> {
        let (at, slot) = self.locate(h);
        let mut backoff = Backoff::default();
        // The step counter at a refused step, if one was refused.
        let mut refused = None;
        loop {
            self.help();
            // Acquire, both: as in `contains`.
            let before = self.step.load(Ordering::Acquire);
            let e = self.map.load(slot, Ordering::Acquire);
            let region = self.region(e.cur);
            pause::here(
                pause::Point::RegionInsertLoaded,
                pause::At {
                    a: at.i1,
                    b: at.i2,
                    tag: at.tag,
                },
            );
            match ops::insert::<L21x3>(
                region,
                at,
                false,
                ops::nowhere,
                Search::Always,
                &self.counters,
            ) {
                Ok(_) => {}
                Err(InsertFailure::Full { .. }) => {
                    match self.begin_step() {
                        Ok(()) => {}
                        Err(NoStep::Running) => {
                            if !self.help() {
                                // Every chunk is claimed: let their owners
                                // finish.
                                backoff.snooze();
                            }
                        }
                        // The step that ended since this insert looked
                        // (the failed claim saw its end) may have made
                        // room: refuse only when a second look, after the
                        // claim, finds none either.
                        Err(NoStep::Refused) if refused == Some(before) => {
                            return Err(Refused::Full)
                        }
                        Err(NoStep::Refused) => refused = Some(before),
                    }
                    continue;
                }
                Err(InsertFailure::Saturated { copies }) => {
                    return Err(Refused::Saturated { copies })
                }
                Err(InsertFailure::Sealed) => unreachable!("regions are never sealed"),
            }
            self.fence_after_put();
            // Acquire: a bump seen here happens-before this insert's own
            // hops (module docs, last point).
            let now = self.step.load(Ordering::Acquire);
            if now == before {
                return Ok(());
            }
            #[cfg(loom)]
            if self.canary == RegionCanary::UnfollowedInsert {
                return Ok(());
            }
            return self.follow(at, slot, e.cur, now);
        }
    }

    /// The insert's half of the Dekker pair with the step (see `insert`),
    /// between its CAS and its load of the counter.
    #[inline(always)]
    fn fence_after_put(&self) {
        #[cfg(loom)]
        if self.canary == RegionCanary::UnfencedInsert {
            return;
        }
        // SeqCst: pairs with the fences in `bump` and `sweep_chunk`: if
        // this one comes first in their total order, the chunk that reads
        // the tag's bucket sees the tag; otherwise the counter load that
        // follows sees the bump.
        fence(Ordering::SeqCst);
    }

    /// The rest of an insert that put its tag into region `region` and then
    /// saw the counter at `seen`, past the value it started from: moves a
    /// copy of its tag to its slot's `cur` until no step begins meanwhile.
    /// Moving any copy is the same as moving its own: copies of one tag in
    /// one pair are the same to every query. A hop that finds no copy left
    /// (`Gone`) may return: every stale insert moves at most one copy out
    /// of the old pair, so if all left and this one moved none, the sweep
    /// moved one, and lookups find that one (docs/design.md, "An insert's
    /// own hop that finds no copy left").
    #[cold]
    fn follow(
        &self,
        at: Located,
        slot: usize,
        mut region: usize,
        mut seen: u64,
    ) -> Result<(), Refused> {
        loop {
            // SeqCst: pairs with the SeqCst entry CASes in `keep_split` and
            // `end_step`.
            let e = self.map.load(slot, Ordering::SeqCst);
            if e.cur != region {
                match self.hop(region, e.cur, at) {
                    Hopped::Moved | Hopped::Gone => region = e.cur,
                    Hopped::NoRoom => {
                        if !self.keep_split(slot, region, seen) {
                            // Its slot has another split region already:
                            // give the copy back and refuse (rare: a third
                            // region, only for an insert that ran across
                            // two steps).
                            self.take_back(region, at);
                            return Err(Refused::Full);
                        }
                    }
                }
            }
            // As in `insert`, for the copy this loop just made.
            self.fence_after_put();
            // Acquire: as in `insert`.
            let now = self.step.load(Ordering::Acquire);
            if now == seen {
                return Ok(());
            }
            seen = now;
        }
    }

    /// Keeps `region` readable for `slot` after a hop out of it found no
    /// room during step `step`: marks the slot failed for the step, then
    /// makes sure its entry names `region` (as `cur` or `prev`). `false` if
    /// the entry already names two other regions.
    ///
    /// The mark and the entry load are a Dekker pair with `end_step`'s
    /// entry CAS and mark load (all `SeqCst`): either the step's end sees
    /// the mark and keeps the slot split, or this load sees the entry
    /// joined and splits it again.
    fn keep_split(&self, slot: usize, region: usize, step: u64) -> bool {
        self.failed[slot].fetch_max(step as u32, Ordering::SeqCst);
        let entry = self.map.at(slot);
        // SeqCst: see above.
        let mut v = entry.load(Ordering::SeqCst);
        loop {
            let e = Entry::unpack(v);
            if e.cur == region || e.prev == region {
                return true;
            }
            if e.is_split() {
                return false;
            }
            let split = Entry {
                cur: e.cur,
                prev: region,
            };
            // SeqCst: see above.
            match entry.compare_exchange(v, split.pack(), Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(seen) => v = seen,
            }
        }
    }

    /// Takes one copy of `at`'s tag from `region` (an insert giving back
    /// what it put there).
    fn take_back(&self, region: usize, at: Located) {
        let t = self.region(region);
        let shard = self.counters.shard();
        let _lock = StripeLock::acquire(t.stripe(at.i1, at.i2)).expect("regions are never sealed");
        if take::<L21x3>(t.word(at.i1), at.tag, shard)
            || take::<L21x3>(t.word(at.i2), at.tag, shard)
        {
            shard.add_len(-1);
        }
    }

    /// Moves one copy of `at`'s tag from region `from` to region `to`
    /// (`from < to`), same pair.
    fn hop(&self, from: usize, to: usize, at: Located) -> Hopped {
        #[cfg(loom)]
        if self.canary == RegionCanary::ClearBeforeCopy {
            return self.hop_clearing_first(from, to, at);
        }
        debug_assert!(from < to, "hops go to newer regions (the lock order)");
        let (a, b) = (self.region(from), self.region(to));
        let Located { tag, i1, i2 } = at;
        // Marked moving: a count of this tag reads again until the release.
        let _lock =
            StripeLock::acquire_moving(a.stripe(i1, i2), tag).expect("regions are never sealed");
        // Relaxed: under the stripe, whose Acquire take ordered these loads
        // after every remove and hop of this pair in `a`.
        let held = |i: usize| bucket::contains::<L21x3>(a.word(i).load(Ordering::Relaxed), tag);
        if !held(i1) && !held(i2) {
            return Hopped::Gone;
        }
        // The copy: an ordinary insert into `b`, displacing under `b`'s
        // stripes (after `a`'s: the lock order).
        match ops::insert::<L21x3>(b, at, false, ops::nowhere, Search::Always, &self.counters) {
            Ok(_) => {}
            Err(InsertFailure::Full { .. } | InsertFailure::Saturated { .. }) => {
                return Hopped::NoRoom
            }
            Err(InsertFailure::Sealed) => unreachable!("regions are never sealed"),
        }
        pause::here(
            pause::Point::RegionHopCopied,
            pause::At { a: i1, b: i2, tag },
        );
        // The clear, after the copy: a reader of `prev` then `cur` that
        // sees the clear (Release) sees the copy.
        let shard = self.counters.shard();
        let cleared =
            take::<L21x3>(a.word(i1), tag, shard) || take::<L21x3>(a.word(i2), tag, shard);
        debug_assert!(cleared, "a tag left its pair while its stripe was held");
        shard.add_len(-1);
        // Relaxed: a statistic.
        self.copies.fetch_add(1, Ordering::Relaxed);
        Hopped::Moved
    }

    /// Claims and begins a step: new regions, the slots they take (their
    /// entries), then the bump, then the sweep's publication.
    fn begin_step(&self) -> Result<(), NoStep> {
        let old = self.claim_step()?;
        #[cfg(loom)]
        if self.canary == RegionCanary::BumpBeforeEntries {
            self.begin_bumping_first(old);
            return Ok(());
        }
        self.move_slots(old);
        let step = self.bump();
        self.open_sweep(step, old);
        Ok(())
    }

    /// Claims the step and allocates its regions; the regions there were
    /// before.
    fn claim_step(&self) -> Result<usize, NoStep> {
        // Acquire: pairs with the Release in `end_step`, so this claimant
        // sees the last step's plan and entries.
        if self
            .claim
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(NoStep::Running);
        }
        // Relaxed: only claimants write the count, and this one holds the
        // claim (the Acquire above ordered it after the last write).
        let old = self.count.load(Ordering::Relaxed);
        let k = (old / STEP_DIVISOR).max(1).min(self.max_regions - old);
        let mut added = Vec::new();
        for r in old..old + k {
            let made = new_region(
                self.geo,
                &self.map,
                r,
                #[cfg(loom)]
                self.canary,
            );
            match made {
                Ok(t) => added.push(t),
                Err(_) => break,
            }
        }
        if added.is_empty() {
            // Release: as in `end_step`.
            self.claim.store(0, Ordering::Release);
            return Err(NoStep::Refused);
        }
        let k = added.len();
        for (r, t) in (old..).zip(added) {
            // Release: pairs with the Acquire load in `region`.
            self.tables[r].store(Box::into_raw(Box::new(t)), Ordering::Release);
        }
        // Release: readers of the count (statistics) see the regions.
        self.count.store(old + k, Ordering::Release);
        Ok(old)
    }

    /// Assigns slots to the regions added after the `old` ones and writes
    /// their entries `new | old << 16`.
    fn move_slots(&self, old: usize) {
        let mut plan = self.plan.lock().expect("no step panics holding the plan");
        plan.slots.resize_with(self.regions(), Vec::new);
        for (slot, from, to) in assign(&mut plan.slots, old, &self.map) {
            let joined = Entry::whole(from).pack();
            let moving = Entry {
                cur: to,
                prev: from,
            }
            .pack();
            // A CAS, not a store: a stale insert may have split the slot
            // meanwhile (`keep_split`), and then it stays where it is.
            // Release is what readers need (their Acquire entry loads then
            // see the new region published); SeqCst orders it with
            // `keep_split`'s SeqCst CAS.
            if self
                .map
                .at(slot)
                .compare_exchange(joined, moving, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                plan.slots[to].retain(|&s| s as usize != slot);
                plan.slots[from].push(slot as u16);
            }
        }
    }

    /// Bumps the step counter; the new step's number.
    fn bump(&self) -> u64 {
        // SeqCst RMW, then a SeqCst fence: the step's half of the Dekker
        // pairs with inserts (`insert`) and with displacements in old
        // regions (`path::unpin_or_undo`). After the entries: a reader that
        // sees this number sees them.
        let step = self.step.fetch_add(1, Ordering::SeqCst) + 1;
        fence(Ordering::SeqCst);
        step
    }

    /// Publishes the sweep of step `step` over the `old` regions.
    fn open_sweep(&self, step: u64, old: usize) {
        let chunks = (old * self.geo.m0() as usize).div_ceil(CHUNK);
        let sweep = Box::new(Sweep {
            step,
            regions: old,
            chunks,
            cursor: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        });
        let p = &*sweep as *const Sweep as *mut Sweep;
        self.sweeps
            .lock()
            .expect("no step panics holding the sweeps")
            .push(sweep);
        // Release: pairs with the Acquire load in `help`: a helper's hops
        // come after the bump and its fence.
        self.sweep.store(p, Ordering::Release);
    }

    /// Sweeps one chunk of the running step, if any is left to claim;
    /// `false` if none was.
    pub(crate) fn help(&self) -> bool {
        // Acquire: pairs with the Release store in `open_sweep`.
        let p = self.sweep.load(Ordering::Acquire);
        // SAFETY: a non-null sweep is one of `self.sweeps`' boxes, which
        // are freed only when the level drops, which cannot happen while
        // `&self` lives.
        let Some(sweep) = (unsafe { p.as_ref() }) else {
            return false;
        };
        // Relaxed: a ticket; the chunk's work is ordered by its fence and
        // by `done` below.
        let chunk = sweep.cursor.fetch_add(1, Ordering::Relaxed);
        if chunk >= sweep.chunks {
            return false;
        }
        self.sweep_chunk(sweep, chunk);
        // AcqRel: the last chunk's finisher sees every chunk's hops (each
        // released here) before it ends the step.
        if sweep.done.fetch_add(1, Ordering::AcqRel) + 1 == sweep.chunks {
            self.end_step(sweep);
        }
        true
    }

    /// Hops every tag of chunk `chunk` whose region is not its slot's `cur`.
    fn sweep_chunk(&self, sweep: &Sweep, chunk: usize) {
        // SeqCst: the sweep's half of the Dekker pairs with inserts and
        // with displacements in old regions (see the module docs).
        fence(Ordering::SeqCst);
        let m0 = self.geo.m0() as usize;
        let end = ((chunk + 1) * CHUNK).min(sweep.regions * m0);
        for g in chunk * CHUNK..end {
            let (r, local) = (g / m0, g % m0);
            let t = self.region(r);
            // Acquire: pairs with the Release CAS that put each tag.
            let word = t.word(local).load(Ordering::Acquire);
            for lane in 0..L21x3::LANES {
                let tag = bucket::lane::<L21x3>(word, lane);
                if tag == 0 {
                    continue;
                }
                let alt = self.geo.alt(local, tag);
                let slot = slot_of(tag, local.min(alt));
                // Acquire: as in `contains`.
                let e = self.map.load(slot, Ordering::Acquire);
                if e.cur == r {
                    continue;
                }
                let at = Located {
                    tag,
                    i1: local,
                    i2: alt,
                };
                if self.hop(r, e.cur, at) == Hopped::NoRoom && e.prev == r {
                    // SeqCst: seen by `end_step` (after this chunk's
                    // `done`, which orders it anyway).
                    self.failed[slot].fetch_max(sweep.step as u32, Ordering::SeqCst);
                }
            }
        }
    }

    /// Ends the step of `sweep`, whose chunks are all swept: joins every
    /// split slot whose hops all found room in this step, drops the claim.
    fn end_step(&self, sweep: &Sweep) {
        let step = sweep.step as u32;
        for slot in 0..SLOTS {
            let entry = self.map.at(slot);
            // Acquire: as in `contains` (this thread writes nothing it read).
            let v = entry.load(Ordering::Acquire);
            let e = Entry::unpack(v);
            // SeqCst loads of the marks: see `keep_split`.
            if !e.is_split() || self.failed[slot].load(Ordering::SeqCst) >= step {
                continue;
            }
            let joined = Entry::whole(e.cur).pack();
            // SeqCst: `keep_split`'s Dekker pair. Release is what readers
            // need: an entry naming `cur` alone is read only after every
            // hop of this step (ordered before by `done`'s AcqRel).
            if entry
                .compare_exchange(v, joined, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
                && self.failed[slot].load(Ordering::SeqCst) >= step
            {
                // A stale insert found no room meanwhile: split again.
                let _ = entry.compare_exchange(joined, v, Ordering::SeqCst, Ordering::Relaxed);
            }
        }
        // Relaxed: the claim's Release below publishes it to the next
        // claimant; helpers see null or a swept-out sweep either way.
        self.sweep.store(std::ptr::null_mut(), Ordering::Relaxed);
        // Release: pairs with the Acquire claim in `claim_step`.
        self.claim.store(0, Ordering::Release);
    }

    /// Runs the running step's remaining chunks on this thread (for tests
    /// and a caller that must not leave a step open), then waits for its
    /// end.
    pub(crate) fn finish_step(&self) {
        let mut backoff = Backoff::default();
        // Acquire: as in `claim_step`.
        while self.claim.load(Ordering::Acquire) != 0 {
            if !self.help() {
                backoff.snooze();
            }
        }
    }

    /// Begins a step now (whether or not a region is full); `false` if one
    /// is running or the level may not grow.
    pub(crate) fn grow(&self) -> bool {
        self.begin_step().is_ok()
    }

    /// Regions allocated.
    pub(crate) fn regions(&self) -> usize {
        // Acquire: pairs with the Release in `claim_step`.
        self.count.load(Ordering::Acquire)
    }

    /// Steps begun.
    pub(crate) fn steps(&self) -> u64 {
        // Relaxed: a statistic.
        self.step.load(Ordering::Relaxed)
    }

    /// Whether a step is running.
    pub(crate) fn stepping(&self) -> bool {
        // Relaxed: a statistic.
        self.claim.load(Ordering::Relaxed) != 0
    }

    /// Slots whose tags are in two regions outside a step (a statistic: 0
    /// while a step runs would not mean anything).
    pub(crate) fn split_slots(&self) -> usize {
        (0..SLOTS)
            // Relaxed: a statistic.
            .filter(|&s| self.map.load(s, Ordering::Relaxed).is_split())
            .count()
    }

    /// Items inserted minus removed.
    pub(crate) fn len(&self) -> i64 {
        self.counters.len()
    }

    /// Tags copied from one region to another so far.
    pub(crate) fn copies(&self) -> u64 {
        // Relaxed: a statistic.
        self.copies.load(Ordering::Relaxed)
    }

    /// Heap bytes of the regions' words and stripes.
    pub(crate) fn region_bytes(&self) -> usize {
        (0..self.regions()).map(|r| self.region(r).bytes()).sum()
    }

    /// Heap bytes of the map and the failure marks.
    pub(crate) fn map_bytes(&self) -> usize {
        2 * SLOTS * std::mem::size_of::<u32>()
    }

    /// Occupied lanes over every region (a scan).
    pub(crate) fn occupied(&self) -> usize {
        (0..self.regions())
            .map(|r| ops::occupied::<L21x3>(self.region(r)))
            .sum()
    }

    /// Lanes over every region.
    pub(crate) fn lanes(&self) -> usize {
        self.regions() * self.geo.m0() as usize * L21x3::LANES as usize
    }

    /// The false-positive rate a lookup of an absent key should see now:
    /// two buckets of three lanes at the mean load, each lane matching with
    /// probability `R / 2^21` (a region's pair holds about `2^21 / R` tag
    /// values).
    pub(crate) fn estimated_fpr(&self) -> f64 {
        2.0 * self.occupied() as f64 / self.geo.m0() as f64 / L21x3::MAX_TAG as f64
    }

    /// The entry of `slot` (tests).
    pub(crate) fn entry(&self, slot: usize) -> Entry {
        // Relaxed: tests read it between operations.
        self.map.load(slot, Ordering::Relaxed)
    }

    /// The slot and region of hash `h` (tests).
    pub(crate) fn slot_of_hash(&self, h: u64) -> (usize, Located) {
        let (at, slot) = self.locate(h);
        (slot, at)
    }

    /// The geometry every region shares.
    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Region `r` (tests and loom).
    pub(crate) fn table(&self, r: usize) -> &Table {
        self.region(r)
    }
}

/// Region `region`'s table, zeroed, pinned by `map`.
fn new_region(
    geo: Geometry,
    map: &Arc<SlotMap>,
    region: usize,
    #[cfg(loom)] canary: RegionCanary,
) -> Result<Table, AllocError> {
    let pin = Pin {
        map: Arc::clone(map),
        region,
        #[cfg(loom)]
        ignored: canary == RegionCanary::Unpinned,
    };
    #[cfg(loom)]
    {
        let mut t = Table::for_region(geo, pin)?;
        if canary == RegionCanary::PinCheckedBeforeCopy {
            t.canary = crate::loom_support::Canary::PinCheckedBeforeCopy;
        }
        Ok(t)
    }
    #[cfg(not(loom))]
    Table::for_region(geo, pin)
}

/// Whether `at`'s tag is in region `t`.
#[inline(always)]
fn present(t: &Table, at: Located) -> bool {
    ops::contains::<L21x3>(t, at).expect("regions are never sealed")
}

/// Copies of `at`'s tag in `prev`, then `cur`, counted once if a hop from
/// `prev` to `cur` is in flight; `None` if a hop made the count unsure
/// (the caller reads again).
fn count_two(prev: &Table, cur: &Table, at: Located) -> Option<usize> {
    let stripe = prev.stripe(at.i1, at.i2);
    // Acquire: pairs with the Release writes of `prev`'s stripe, as in
    // `ops::count`.
    let before = stripe.load(Ordering::Acquire);
    // Acquire: pairs with the Release CASes that put or took the tag.
    let w1 = prev.word(at.i1).load(Ordering::Acquire);
    let w2 = prev.word(at.i2).load(Ordering::Acquire);
    let in_prev = bucket::count::<L21x3>(w1, at.tag) + bucket::count::<L21x3>(w2, at.tag);
    let in_cur = ops::count::<L21x3>(cur, at).expect("regions are never sealed");
    // Relaxed: after the Acquire word loads of `ops::count`. A hop whose
    // copy those loads saw took this stripe (marked with the tag) before
    // copying, so this load sees that take or later: a count that could
    // have seen the tag on both sides reads again.
    let after = stripe.load(Ordering::Relaxed);
    count_stands(before, after, at.tag).then_some(in_prev as usize + in_cur)
}

/// The greedy assignment of a step adding regions `old..slots.len()`:
/// repeatedly one slot from the old region with the most slots to the new
/// region with the fewest, while that evens them. Split slots never move.
/// Returns the moves, `(slot, from, to)`, already applied to `slots`.
fn assign(slots: &mut [Vec<u16>], old: usize, map: &SlotMap) -> Vec<(usize, usize, usize)> {
    let mut moves = Vec::new();
    let mut heap: std::collections::BinaryHeap<(usize, usize)> =
        (0..old).map(|r| (slots[r].len(), r)).collect();
    while let Some((most, from)) = heap.pop() {
        let to = (old..slots.len())
            .min_by_key(|&r| slots[r].len())
            .expect("a step adds a region");
        if most <= slots[to].len() + 1 {
            break;
        }
        // The last slot of `from` that is not split.
        // Relaxed: the claim's Acquire ordered this after every entry write
        // but stale inserts' splits, which the caller's CAS catches.
        let pick = slots[from]
            .iter()
            .rposition(|&s| !map.load(s as usize, Ordering::Relaxed).is_split());
        let Some(i) = pick else {
            continue;
        };
        let slot = slots[from].swap_remove(i);
        slots[to].push(slot);
        moves.push((slot as usize, from, to));
        heap.push((slots[from].len(), from));
    }
    moves
}

impl Drop for Regions {
    fn drop(&mut self) {
        for p in self.tables.iter() {
            // Relaxed: `&mut self`, no other thread can reach the level.
            let p = p.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: every non-null pointer came from `Box::into_raw`
                // and is owned by this level alone; `&mut self` means
                // nothing borrows it.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(loom)]
impl Regions {
    /// `begin_step` with the `BumpBeforeEntries` canary: a reader that
    /// loads the new number and then an entry not yet moved reads only the
    /// old region, and trusts its miss once the sweep has emptied it.
    fn begin_bumping_first(&self, old: usize) {
        let step = self.bump();
        self.move_slots(old);
        self.open_sweep(step, old);
    }

    /// `count_two`, or with the `UncheckedCount` canary a count that does
    /// not re-load `prev`'s stripe: a hop between its copy and its clear
    /// shows the tag on both sides.
    fn count_two_as_canary(&self, prev: &Table, cur: &Table, at: Located) -> Option<usize> {
        if self.canary != RegionCanary::UncheckedCount {
            return count_two(prev, cur, at);
        }
        let w1 = prev.word(at.i1).load(Ordering::Acquire);
        let w2 = prev.word(at.i2).load(Ordering::Acquire);
        let in_prev = bucket::count::<L21x3>(w1, at.tag) + bucket::count::<L21x3>(w2, at.tag);
        let in_cur = ops::count::<L21x3>(cur, at).expect("regions are never sealed");
        Some(in_prev as usize + in_cur)
    }

    /// `remove` with the `RemoveCurFirst` canary: `cur` before `prev`, so a
    /// hop that copies after the first look and clears before the second
    /// hides the tag from both.
    fn remove_cur_first(&self, h: u64) -> bool {
        let (_, slot) = self.locate(h);
        let hash_in = |t: &Table| ops::remove::<L21x3>(t, h, &self.counters).unwrap();
        loop {
            let before = self.step.load(Ordering::Acquire);
            let e = self.map.load(slot, Ordering::Acquire);
            if hash_in(self.region(e.cur)) || (e.is_split() && hash_in(self.region(e.prev))) {
                return true;
            }
            if self.step.load(Ordering::Relaxed) == before {
                return false;
            }
        }
    }

    /// `hop` with the `ClearBeforeCopy` canary: the tag is in neither
    /// region between the two CASes.
    fn hop_clearing_first(&self, from: usize, to: usize, at: Located) -> Hopped {
        let (a, b) = (self.region(from), self.region(to));
        let Located { tag, i1, i2 } = at;
        let shard = self.counters.shard();
        let _lock =
            StripeLock::acquire_moving(a.stripe(i1, i2), tag).expect("regions are never sealed");
        if !(take::<L21x3>(a.word(i1), tag, shard) || take::<L21x3>(a.word(i2), tag, shard)) {
            return Hopped::Gone;
        }
        match ops::insert::<L21x3>(b, at, false, ops::nowhere, Search::Always, &self.counters) {
            Ok(_) => Hopped::Moved,
            Err(_) => Hopped::NoRoom,
        }
    }
}
