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
//! * **Map**: `AtomicU32` entries, `cur | prev << 16` (equal outside a
//!   step; bit 31, [`JOINING`], only while a step's end joins the slot,
//!   which lookups treat as split). A key's slot mixes its tag and the
//!   lower bucket of its pair ([`slot_of`]), so a tag found in a bucket
//!   names its slot alone. The first map has 64 slots; a step's claimant
//!   doubles it to keep 32 slots per region ([`slots_wanted`]), up to
//!   [`slots_for`] the most regions (`2^10` to `2^14`), freezing each old
//!   entry ([`FROZEN`]) as it copies it to the entry's two halves
//!   (`SlotMaps::double`). Replaced maps stay readable until the level
//!   drops. Every operation reads the current map after the step counter:
//!   a step's map, like its entries, is written before its bump. A reader
//!   that finds an entry frozen reads the key's half in the next map if
//!   it was copied there ([`SlotMap::entry_for`]): a stale insert may have
//!   split it there and returned before the claimant publishes.
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
//!   bucket in chunks (to do, claimed, done). Sweeping a chunk hops the
//!   tags whose region is no longer their slot's `cur`; it is idempotent,
//!   so a chunk may be swept twice. The thread that marks the last chunk
//!   done ends the step: moved entries become `cur | cur << 16`, unless a
//!   hop of that slot found no room.
//! * A slot whose hop found no room stays **split** (`prev` kept) until a
//!   later step's sweep moves what is left; lookups of it read two regions.
//! * While a slot leaves a region during a step it is **pinned** there
//!   ([`Pin`]; outside steps nothing is, which spares the search a look
//!   at the map per tag):
//!   displacement inside the region leaves its tags where they are. A tag
//!   moved from a bucket the sweep has not reached into one it has swept
//!   would be left behind. The search skips pinned tags, and a hop checks
//!   the pin again after its copy, behind a `SeqCst` fence, taking the copy
//!   back if it lost the race (`path::unpin_or_undo`).
//!
//! # Progress
//!
//! * `contains` waits for nothing; `count` waits only for a hop of its own
//!   tag (as in one table).
//! * An insert helps with at most one chunk. One whose pair has a free
//!   lane does it **without waiting**: it hops only from pairs whose
//!   stripe it can take at once and only into free lanes (no
//!   displacement), and stops at the first pair it cannot, giving the rest
//!   of the chunk back, as a migration's helper skips held stripes. So a
//!   stopped `remove` or hop holds up no plain insert. One whose pair is
//!   full (it displaces, and may wait, anyway) sweeps as the step does.
//! * An insert whose search finds no path in a region the step empties
//!   hops the moving tags out of its two buckets, or else out of the
//!   buckets of their tags' alternates (at most eight buckets,
//!   `evict_moving`), and tries again: the room a displacement needs, for
//!   bounded work. Sweeping its region chunk by chunk until a path freed
//!   up, as before, cost one insert up to 1,137 chunks (a region of
//!   948,156 buckets) while half its tags were pinned.
//! * An insert whose region is still full while a step runs sweeps chunk
//!   after chunk, its own region's first, waiting for stripes as an insert into
//!   two full buckets does: one to do or left at a full pair if any, else
//!   one that is claimed but not done (its claimant may have stopped),
//!   which it then marks done. So a stopped chunk owner holds up no step.
//!   (`finish_step` sweeps the same way, and so do a copy and a save,
//!   which help a running step to its end before they freeze the level.)
//!   A stopped owner that wakes after its chunk is done stops at its next
//!   hop.
//! * A waiting sweep (a chunk's, or an insert's eviction) waits at most a
//!   millisecond in all for its hops' source stripes
//!   (`StripeLock::acquire_moving_within` with one `Patience`), then
//!   leaves each tag whose stripe is held where it is and marks its slot
//!   failed, as when the new region has no room: the slot stays split (lookups read both its regions)
//!   and the next step's sweep moves what is left. So a remove, a hop or
//!   a helping insert stopped while it holds an old pair's stripe holds
//!   up no step's end (test
//!   `a_step_ends_though_a_helping_insert_stopped_mid_hop`).
//! * An insert that raced a step and follows its copy (`follow`) gives
//!   up the same way after its own millisecond: the copy stays in the
//!   old region and the slot is split (test
//!   `a_follow_is_not_held_up_by_a_remove_stopped_on_its_old_pair`).
//! * What may still wait for a stopped thread: a follow whose slot cannot
//!   be split (it names two other regions already: an insert that ran
//!   across two steps), for its pair's stripe; and a
//!   waiting sweep's copy, which displaces in the new region and waits,
//!   as any displacement does, for a stripe held there (by a remove, an
//!   `insert_unique` or a displacement stopped in that region; a plain
//!   insert takes no stripe there).
//! * "A free lane" is the insert's pair as it saw it before helping: the
//!   chunk it helps may fill that lane (as any racing insert may), and the
//!   insert then displaces like any insert into two full buckets.
//! * A sweeper can outlive its step: stopped between its chunk's done
//!   check and its hop, across the step's end and the next step's sweep
//!   of its destination, it could copy a stale insert's tag into a region
//!   that sweep has passed. So a sweep's hop, after its copy, fences
//!   `SeqCst` and re-loads the counter (the insert's Dekker pair with the
//!   bump); if a later step began, it takes a copy back from the
//!   destination and leaves the source as it was (`undo_if_stale`): its
//!   step ended, so its chunk is done and the hop was not needed. If no
//!   later step began, the next sweep reads the copy, as an insert's put.
//!   The take-back waits for the destination's stripe (only a sweeper
//!   stopped across a whole step gets there).
//! * A hop holds its source pair's stripe while it inserts into the new
//!   region (displacing there), so a remove or a count of that pair, or a
//!   sweep reaching it, waits that long.
//!
//! This file holds the state, lookups, removes and counts; `insert.rs` the
//! inserts and the hops between regions; `step.rs` the steps and their
//! sweeps; `broken.rs` the loom canaries.
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
//!   reader whose word load sees the clear re-loads a moved counter. A
//!   sweeper hops only by an entry of its own step: after each entry load
//!   it checks that its chunk is not done. A later step's entry is written
//!   after this step's end, which every chunk's done mark precedes, so an
//!   Acquire load that sees such an entry makes the check see the mark.
//! * A chunk is marked done only by a thread that swept it whole; the
//!   mark's `done` count (AcqRel) orders its hops and failure marks before
//!   the step's end. A sweeper whose own mark failed (another marked it)
//!   left no tag that the marker did not see: a tag it failed to move is
//!   still in its bucket, and every whole sweep reads every bucket.

use super::bucket::{self, L21x3, Layout};
use super::counters::Counters;
use super::geometry::{Addressing, Geometry, Located};
use super::ops;
use super::slot_map::Pin;
pub(crate) use super::slot_map::{
    bytes_for as map_bytes, first_slots, slot_of, slots_for, slots_wanted, Entry, SlotMap,
    SlotMaps, FROZEN, JOINING, MAX_REGIONS,
};
use super::stripe::count_stands;
use super::table::Table;
#[cfg(loom)]
use crate::canary::RegionCanary;
use crate::memory::AllocError;
use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Backoff, Mutex, Ordering};
use std::sync::Arc;

#[cfg(loom)]
mod broken;
mod copy;
mod insert;
// Persistence only, which loom builds leave out.
#[cfg(not(loom))]
mod snapshot;
mod step;
#[cfg(test)]
mod stopped_tests;
#[cfg(test)]
pub(crate) mod tests;

#[cfg(not(loom))]
pub(crate) use snapshot::{layout_flaw, PartsError, RegionsParts, RegionsView};
use step::{Plan, Sweep};

/// How every region turns a hash into a tag and a pair: version 3's
/// arithmetic (`docs/format.md`, "Key hashing"), whatever the hash
/// algorithm of the filter (a level's regions only need to agree with each
/// other; its files rely on it).
pub(crate) const ADDRESSING: Addressing = Addressing::V3;

/// Buckets one sweep chunk covers: a few microseconds of work for the
/// insert that claims it.
#[cfg(not(loom))]
const CHUNK: usize = 256;
#[cfg(loom)]
const CHUNK: usize = 2;

// The vocabulary the inserts (`insert.rs`) and the steps (`step.rs`)
// share, here so that neither imports the other.

/// What a hop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hopped {
    Moved,
    /// No copy of the tag was left in the source pair.
    Gone,
    /// The destination pair had no room: the tag stays in the source.
    NoRoom,
    /// A hop that may not wait found the source stripe held: the tag
    /// stays in the source.
    Busy,
    /// A hop that may not wait (displace) found no free lane in the
    /// destination pair: the tag stays in the source.
    Crowded,
    /// A sweep's hop whose step ended before its copy was seen: it took
    /// the copy back, and the tag stays in the source (see `hop`).
    Stale,
    /// A sweep's hop that may wait found the source stripe still held
    /// after waiting its while (`StripeLock::acquire_moving_within`): the
    /// tag stays in the source, as after `NoRoom`.
    Held,
}

/// Whether a sweeper may wait for a stripe holder (and displace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// An insert with room helping: stops at a held stripe or a full pair.
    No,
    /// An insert that needs displacement itself, or `finish_step`: waits
    /// as an insert into two full buckets does.
    Yes,
}

/// Why a step could not begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoStep {
    /// Another thread runs a step.
    Running,
    /// The level has its most regions.
    Refused,
    /// The level's byte budget cannot pay one more region: it would hold
    /// `needed` bytes.
    Memory { needed: usize },
    /// The allocator refused a region of `bytes` bytes.
    Alloc { bytes: usize },
}

impl NoStep {
    /// The refusal an insert that needed this step answers.
    pub(crate) fn refusal(self) -> Refused {
        match self {
            NoStep::Running | NoStep::Refused => Refused::Full,
            NoStep::Memory { needed } => Refused::Memory { needed },
            NoStep::Alloc { bytes } => Refused::Alloc { bytes },
        }
    }
}

/// The steps' growth ratio: `max(1, R / STEP_DIVISOR)` new regions.
const STEP_DIVISOR: usize = 12;

/// Why an insert was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The key's region is full and the level has its most regions.
    Full,
    /// The key's region is full and the level's byte budget cannot pay
    /// another region: the level would hold `needed` bytes.
    Memory { needed: usize },
    /// The key's region is full and the allocator refused a region of
    /// `bytes` bytes.
    Alloc { bytes: usize },
    /// The key's copies fill its pair (see `ops::InsertFailure`).
    Saturated { copies: usize },
}

/// A level of consistent regions.
pub(crate) struct Regions {
    geo: Geometry,
    /// Region `r` at `tables[r]`, for `r < count`; null above. Written once
    /// each (by a step's claimant), freed in `Drop`.
    tables: Box<[AtomicPtr<Table>]>,
    /// Regions allocated.
    count: AtomicUsize,
    /// The slot map (replaced by one twice its size as the regions grow).
    maps: Arc<SlotMaps>,
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
    max_regions: usize,
    /// Bytes the level may hold (regions, map and marks): a step that
    /// cannot pay one region is refused before it allocates.
    max_bytes: usize,
    counters: Counters,
    /// Tags copied from one region to another (a statistic).
    copies: AtomicU64,
    /// A deliberately broken protocol, for the loom canaries only.
    #[cfg(loom)]
    canary: RegionCanary,
    /// A loom fixture: every region a step adds starts full of tags that
    /// stay where they are, so every hop into it finds no room.
    #[cfg(loom)]
    junk_new_regions: bool,
    /// Whether inserts help a running step's sweep before they put (a
    /// model of another protocol may leave it to the step: see
    /// `set_inserts_help`).
    #[cfg(loom)]
    inserts_help: bool,
    /// Whether an insert whose search finds no path during a step hops the
    /// moving tags near its pair out (see `set_inserts_evict`).
    #[cfg(loom)]
    inserts_evict: bool,
}

// `Regions` is `Send + Sync` without an `unsafe impl`: `AtomicPtr` is both
// whatever it points to. That is sound only because the owned tables are
// both too (like a `Box<Table>`), which this checks.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Table>();
    send_sync::<Regions>();
};

impl Regions {
    /// A level of one region of `m0` buckets, which may grow to
    /// `max_regions` regions.
    pub(crate) fn new(m0: u64, max_regions: usize) -> Result<Regions, AllocError> {
        Self::build(
            m0,
            max_regions,
            first_slots(max_regions),
            #[cfg(loom)]
            RegionCanary::None,
        )
    }

    /// [`new`](Self::new), but with a map that never grows: its first has
    /// the most slots. For tests that follow one slot across steps.
    #[cfg(test)]
    pub(crate) fn with_fixed_map(m0: u64, max_regions: usize) -> Result<Regions, AllocError> {
        Self::build(m0, max_regions, slots_for(max_regions))
    }

    /// [`new`](Self::new) with a deliberately broken protocol, and a
    /// first map of `slots` slots if given (under loom a level's first
    /// map has the most slots, so that only the models that ask for a
    /// smaller one double it).
    #[cfg(loom)]
    pub(crate) fn with_canary(
        m0: u64,
        max_regions: usize,
        canary: RegionCanary,
        junk_new_regions: bool,
        slots: Option<usize>,
    ) -> Result<Regions, AllocError> {
        let slots = slots.unwrap_or(first_slots(max_regions));
        let mut r = Self::build(m0, max_regions, slots, canary)?;
        r.junk_new_regions = junk_new_regions;
        Ok(r)
    }

    /// Makes inserts help no sweep before they put (an insert whose
    /// region is full still sweeps). For loom models of protocols other
    /// than the help, which models of their own check: the help's
    /// interleavings multiply theirs several times over.
    #[cfg(loom)]
    pub(crate) fn set_inserts_help(&mut self, on: bool) {
        self.inserts_help = on;
    }

    /// Makes an insert whose search finds no path during a step go on
    /// sweeping chunks without hopping the moving tags near its pair out
    /// (`evict_moving`): for the model of displacement against the sweep
    /// (R3), whose interleavings the eviction would mostly bypass; model
    /// R10 runs the eviction.
    #[cfg(loom)]
    pub(crate) fn set_inserts_evict(&mut self, on: bool) {
        self.inserts_evict = on;
    }

    /// Whether an insert whose search finds no path during a step evicts
    /// the moving tags near its pair (always, but in some loom models).
    #[inline(always)]
    fn inserts_evict(&self) -> bool {
        #[cfg(loom)]
        return self.inserts_evict;
        #[cfg(not(loom))]
        true
    }

    /// Whether inserts help a running sweep before they put (always,
    /// but in some loom models).
    #[inline(always)]
    fn inserts_help(&self) -> bool {
        #[cfg(loom)]
        return self.inserts_help;
        #[cfg(not(loom))]
        true
    }

    fn build(
        m0: u64,
        max_regions: usize,
        slots: usize,
        #[cfg(loom)] canary: RegionCanary,
    ) -> Result<Regions, AllocError> {
        let geo = Geometry::new(m0, 0, ADDRESSING);
        let maps = Arc::new(SlotMaps::new(SlotMap::new(slots)));
        let first = new_region(
            geo,
            &maps,
            0,
            #[cfg(loom)]
            canary,
        )?;
        let plan = Plan {
            slots: vec![(0..slots as u16).collect()],
        };
        Ok(Self::assemble(
            geo,
            maps,
            vec![first],
            plan,
            max_regions,
            #[cfg(loom)]
            canary,
        ))
    }

    /// A level of the regions `regions` (made with `maps`, in index order),
    /// whose slots `plan` assigns as the current map does, at step 0.
    fn assemble(
        geo: Geometry,
        maps: Arc<SlotMaps>,
        regions: Vec<Table>,
        plan: Plan,
        max_regions: usize,
        #[cfg(loom)] canary: RegionCanary,
    ) -> Regions {
        assert!((1..=slots_for(max_regions)).contains(&max_regions));
        assert!(regions.len() <= maps.current().slots());
        assert!((1..=max_regions).contains(&regions.len()));
        let count = regions.len();
        let mut regions = regions.into_iter();
        let tables: Box<[AtomicPtr<Table>]> = (0..max_regions)
            .map(|_| {
                let p = regions.next().map(|t| Box::into_raw(Box::new(t)));
                AtomicPtr::new(p.unwrap_or(std::ptr::null_mut()))
            })
            .collect();
        Regions {
            geo,
            tables,
            count: AtomicUsize::new(count),
            maps,
            step: AtomicU64::new(0),
            claim: AtomicUsize::new(0),
            sweep: AtomicPtr::new(std::ptr::null_mut()),
            sweeps: Mutex::new(Vec::new()),
            plan: Mutex::new(plan),
            max_regions,
            max_bytes: usize::MAX,
            counters: Counters::default(),
            copies: AtomicU64::new(0),
            #[cfg(loom)]
            canary,
            #[cfg(loom)]
            junk_new_regions: false,
            #[cfg(loom)]
            inserts_help: true,
            #[cfg(loom)]
            inserts_evict: true,
        }
    }

    /// Limits the bytes the level may hold ([`bytes`](Self::bytes)) to
    /// `max`: a step that cannot pay one more region is refused.
    pub(crate) fn with_max_bytes(mut self, max: usize) -> Regions {
        self.max_bytes = max;
        self
    }

    /// The most regions the level may have.
    pub(crate) fn max_regions(&self) -> usize {
        self.max_regions
    }

    /// Heap bytes of the level: its regions, its map and its marks.
    pub(crate) fn bytes(&self) -> usize {
        self.region_bytes() + self.map_bytes()
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

    /// Where hash `h` lives in every region: its tag and its local pair.
    #[inline(always)]
    fn locate(&self, h: u64) -> Located {
        self.geo.locate::<L21x3>(h)
    }

    /// The entry of `at` a reader takes, with the map and slot it comes
    /// from: the current map's, or, past a frozen entry, the next map's
    /// (see [`SlotMap::entry_for`]).
    ///
    /// The map load and the entry load are both Acquire: the map pairs
    /// with the Release store of a doubling (its entries copied before),
    /// the entry with the Release entry writes (the regions they name
    /// published before). A caller that loaded the step counter first and
    /// sees it unmoved afterwards read a map and an entry at least as new
    /// as that step's: a step's map and entries are written before its
    /// bump.
    #[inline(always)]
    fn entry_of(&self, at: Located) -> (&SlotMap, usize, Entry) {
        let map = self.maps.current();
        #[cfg(loom)]
        if self.canary == RegionCanary::FrozenEntryTaken {
            let slot = map.slot_of(at.tag, at.i1.min(at.i2));
            return (map, slot, map.load(slot, Ordering::Acquire));
        }
        map.entry_for(at.tag, at.i1.min(at.i2))
    }

    /// [`entry_of`](Self::entry_of)'s entry alone (the readers' path).
    #[inline(always)]
    fn entry_at(&self, at: Located) -> Entry {
        #[cfg(loom)]
        if self.canary == RegionCanary::FrozenEntryTaken {
            return self.entry_of(at).2;
        }
        self.maps.current().entry_only(at.tag, at.i1.min(at.i2))
    }

    /// The current map (no step doubles it while it runs).
    #[inline(always)]
    pub(super) fn map(&self) -> &SlotMap {
        self.maps.current()
    }

    /// Whether hash `h` may have been inserted.
    pub(crate) fn contains(&self, h: u64) -> bool {
        let at = self.locate(h);
        loop {
            // Acquire: pairs with the bump (a SeqCst RMW), so a reader that
            // sees a step's number sees that step's map and entries,
            // written before.
            let before = self.step.load(Ordering::Acquire);
            let e = self.entry_at(at);
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

    /// Starts the cache misses of hash `h`'s pair in its slot's region
    /// (the newest region, `cur`), for a lookup that reads it soon.
    #[inline]
    pub(crate) fn prefetch(&self, h: u64) {
        let at = self.locate(h);
        // As in `contains`, so the region the entry names is published (a
        // prefetch needs its pointer).
        let e = self.entry_at(at);
        let t = self.region(e.cur);
        t.prefetch(at.i1);
        t.prefetch(at.i2);
    }

    /// Copies of hash `h`'s tag in its pair (a tag in flight between two
    /// regions is counted once).
    pub(crate) fn count(&self, h: u64) -> usize {
        let at = self.locate(h);
        let mut backoff = Backoff::default();
        loop {
            // Acquire, all: as in `contains`.
            let before = self.step.load(Ordering::Acquire);
            let e = self.entry_at(at);
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
        let at = self.locate(h);
        let hash_in = |t: &Table| ops::remove::<L21x3>(t, h, &self.counters);
        loop {
            // Acquire, all: as in `contains`.
            let before = self.step.load(Ordering::Acquire);
            let e = self.entry_at(at);
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
        let map = self.map();
        (0..map.slots())
            // Relaxed: a statistic.
            .filter(|&s| map.load(s, Ordering::Relaxed).is_split())
            .count()
    }

    /// Items inserted minus removed.
    pub(crate) fn len(&self) -> i64 {
        self.counters.len()
    }

    /// The level's operation counters.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Tags copied from one region to another so far.
    // Tests only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn copies(&self) -> u64 {
        // Relaxed: a statistic.
        self.copies.load(Ordering::Relaxed)
    }

    /// Heap bytes of the regions' words and stripes.
    pub(crate) fn region_bytes(&self) -> usize {
        (0..self.regions()).map(|r| self.region(r).bytes()).sum()
    }

    /// Heap bytes of the maps and their failure marks (the replaced maps
    /// too: readers may still hold them).
    pub(crate) fn map_bytes(&self) -> usize {
        self.maps.bytes()
    }

    /// Slots of the current map.
    pub(crate) fn slots(&self) -> usize {
        self.map().slots()
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
    // Tests only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn estimated_fpr(&self) -> f64 {
        2.0 * self.occupied() as f64 / self.geo.m0() as f64 / L21x3::MAX_TAG as f64
    }

    /// The entry of `slot` of the current map (tests).
    // Tests and loom models.
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub(crate) fn entry(&self, slot: usize) -> Entry {
        // Relaxed: tests read it between operations.
        self.map().load(slot, Ordering::Relaxed)
    }

    /// The entry of hash `h`'s slot, read as a lookup reads it (one load
    /// of the current map; loom models).
    // Loom models.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn entry_of_hash(&self, h: u64) -> Entry {
        self.entry_of(self.locate(h)).2
    }

    /// The slot (in the current map) and place of hash `h` (tests).
    // Tests only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn slot_of_hash(&self, h: u64) -> (usize, Located) {
        let at = self.locate(h);
        (self.entry_of(at).1, at)
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

/// Region `region`'s table, zeroed, pinned by `maps`.
fn new_region(
    geo: Geometry,
    maps: &Arc<SlotMaps>,
    region: usize,
    #[cfg(loom)] canary: RegionCanary,
) -> Result<Table, AllocError> {
    let pin = Pin::new(
        Arc::clone(maps),
        region,
        #[cfg(loom)]
        (canary == RegionCanary::Unpinned),
    );
    #[cfg(loom)]
    {
        let mut t = Table::for_region(geo, pin)?;
        if canary == RegionCanary::PinCheckedBeforeCopy {
            t.canary = crate::canary::Canary::PinCheckedBeforeCopy;
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
