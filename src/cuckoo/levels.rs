//! Growth past the tag bits: levels.
//!
//! Each doubling spends a tag bit, so a table stops doubling at its
//! `max_false_positive_rate` (64x with 16-bit tags at the default 1%). A
//! [`Growth::Double`] filter then publishes an *upper level*: a *region
//! level* (`levels/region.rs` over `raw/regions.rs`) of 21-bit tags, 3 per
//! word, whose regions of `m0` buckets each are added about a twelfth at a
//! time (`max(1, R / 12)`), moving only the keys of the slots the new
//! regions take. Its first region has 0.4 of the room of the level below
//! (more when its budget pays only a few regions: it must at least double
//! what the filter holds), and its budget sets its most regions, `R_max =
//! own * 2^21 / (6 * 0.93)`; a level at `R_max` refuses, and the next
//! level, with half of what is left, takes over. The levels form a chain
//! owned by the first one ([`UpperLevel`]); a level is never replaced or
//! freed before the filter drops, so a lookup may follow the chain without
//! a pin, as it follows replaced tables. (Filters loaded from version 3
//! files keep their *doubling* upper levels, 21x3 tables that double as
//! the first does, and go on building those.)
//!
//! The rules (see `docs/design.md`, "Growth beyond the tag bits" and
//! "Wiring the engine into the filter"):
//!
//! * **Inserts** go to the first level with room: level 0 if the key's
//!   pair there has a free lane in a bucket that keeps another
//!   (`insert_keeping_a_lane`; no search, level 0 stopped growing), else
//!   the newest level; if that refuses (a cap) while level 0 is below its
//!   sizing load, a search in level 0. Keys never move between levels.
//! * **Lookups** read level 0 as before; only a negative answer looks at
//!   the chain (one load of the `upper` pointer, null on a filter that never
//!   outgrew its first size), newest level first, each level's pair
//!   prefetched on the way up: two cache lines per level (a region level's
//!   slot map entry, 64 KB for the level, is usually in cache).
//! * **`insert_unique`** decides under the key's level-0 pair stripe, and
//!   asks the upper levels under that same stripe, so of any threads racing
//!   on one absent key exactly one wins, wherever its copy lands.
//! * **`remove`** first finds which levels hold the key's tag. A tag found
//!   in more than one level cannot be told apart from another key's (the
//!   levels hash alike but store different tag widths): removing there could
//!   take another key's only copy, a false negative. So such a remove
//!   removes nothing (it answers `true`: a copy was found); the key stays,
//!   a false positive, and `len` is not lowered.
//! * **Budget.** Level 0 may spend the whole `max_false_positive_rate`
//!   (`cap`); level `k >= 1` may spend half of what the levels below left,
//!   so the sum of all levels' bounds stays below `cap` for any number of
//!   levels. A table level's bound is its estimate at full load at its last
//!   generation; a region level's is its own share, which `R_max` keeps.
//! * **Memory.** A level may take `max_memory` minus what the levels below
//!   hold; a region level's step checks it before it allocates, and a
//!   refused step is `MemoryLimit` against the user's `max_memory` (the
//!   insert that needed it is not stored, no key is lost).

pub(crate) mod region;

use super::{CuckooFilter, Growth, GrowthPolicy, LayoutKind};
use crate::error::InsertError;
use crate::hash::HashAlgorithm;
use crate::raw::bucket::L21x3;
use crate::raw::geometry::Geometry;
use crate::raw::ops::{self, Lanes, Search};
use crate::raw::table::Table;
use crate::sync::{AtomicPtr, AtomicUsize, Backoff, Ordering};
use region::{first_bytes, first_region_bound, Plan, RegionLevel};

/// Runs `f` out of line: the dispatch arm of the levels' layout, kept off
/// the first level's paths.
#[cold]
#[inline(never)]
pub(crate) fn cold<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Which path a filter's `contains` and `insert` take, read where they
/// dispatch on the layout (one load and compare, as the layout alone
/// cost): a first level without levels above that hashes with `Fold` (a
/// filter of format version 3) takes its layout's own path, which hashes
/// and addresses without asking which algorithm; everything else (levels,
/// and filters loaded from version 1 and 2 files) the cold general one. Set once, when the level
/// above is published.
pub(crate) struct Route(AtomicUsize);

impl Route {
    pub(crate) const TAGS_16X4: usize = 0;
    pub(crate) const TAGS_12X5: usize = 1;
    pub(crate) const LEVELED: usize = 2;

    /// The route of a level of `layout` hashing with `algorithm`, with or
    /// without a level above.
    pub(crate) fn for_level(
        layout: LayoutKind,
        algorithm: HashAlgorithm,
        has_upper: bool,
    ) -> Route {
        Route(AtomicUsize::new(match layout {
            _ if has_upper || algorithm != HashAlgorithm::Fold => Route::LEVELED,
            LayoutKind::Tags16x4 => Route::TAGS_16X4,
            LayoutKind::Tags12x5 => Route::TAGS_12X5,
            LayoutKind::Tags21x3 => Route::LEVELED,
        }))
    }

    #[inline(always)]
    pub(crate) fn get(&self) -> usize {
        // Relaxed: set before the level above is published with Release
        // (`upper_or_publish`), so whoever saw that level (an insert into
        // it) and then made a lookup wait for it has the lookup see this
        // store too (coherence along happens-before).
        self.0.load(Ordering::Relaxed)
    }

    fn set_leveled(&self) {
        // Relaxed: see `get`; the publication's Release store follows it.
        self.0.store(Route::LEVELED, Ordering::Relaxed);
    }
}

/// The layout of every upper level.
pub(crate) const UPPER_LAYOUT: LayoutKind = LayoutKind::Tags21x3;

/// Doublings a first upper level must have room for when the first level
/// stops doubling. The first level may spend almost the whole cap, and one
/// that stopped just under it would leave its levels a budget too small to
/// grow on: a 16-bit filter capped at 5e-4 doubled to a bound of 4.64e-4
/// and left its levels 3.6e-5, which took it to about 760x its first size;
/// stopping one doubling earlier leaves 2.7e-4, room past 10,000x. At the
/// default cap (and for every cap that leaves this much) nothing changes.
const UPPER_ROOM_DOUBLINGS: i32 = 5;

/// Whether a first level of a filter whose cap is `cap` may double to a
/// bound of `next`: within the cap, and leaving a level above room for
/// [`UPPER_ROOM_DOUBLINGS`] doublings (`build_upper` gives it half of
/// what is left). `advise` plans with the same rule.
pub(crate) fn first_level_may_reach(next: f64, cap: f64) -> bool {
    let first = UPPER_LAYOUT.bound_at(0);
    next <= cap && cap - next >= 2.0 * first * 2f64.powi(UPPER_ROOM_DOUBLINGS)
}

/// A level above the first: a region level (every level a filter builds),
/// or a doubling 21x3 filter (only as loaded from a version 3 file).
pub(crate) enum UpperLevel {
    Regions(RegionLevel),
    Doubling(CuckooFilter),
}

impl UpperLevel {
    /// This level's link to the one above it.
    // Persistence (task P: walking the levels to save them).
    #[allow(dead_code)]
    pub(crate) fn upper(&self) -> &Upper {
        match self {
            UpperLevel::Regions(r) => &r.upper,
            UpperLevel::Doubling(f) => &f.upper,
        }
    }

    /// Whether `hash` may be in this level or one above it, newest first.
    pub(crate) fn contains(&self, hash: u64) -> bool {
        match self {
            UpperLevel::Regions(r) => r.contains_up(hash),
            UpperLevel::Doubling(f) => f.contains_upper(hash),
        }
    }

    /// A plain insert into this level, or (once it may not grow) above it.
    pub(crate) fn insert(&self, hash: u64) -> Result<bool, InsertError> {
        match self {
            UpperLevel::Regions(r) => r.insert(hash),
            UpperLevel::Doubling(f) => f.insert_in(|_| hash, false, &f.writer_pin()),
        }
    }

    /// This level, as the filter's levels are walked.
    fn as_level(&self) -> Level<'_> {
        match self {
            UpperLevel::Regions(r) => Level::Regions(r),
            UpperLevel::Doubling(f) => Level::Table(f),
        }
    }

    /// A copy of this level and the ones above (`Clone`).
    fn deep_clone(&self) -> UpperLevel {
        match self {
            UpperLevel::Regions(r) => UpperLevel::Regions(r.deep_clone()),
            UpperLevel::Doubling(f) => UpperLevel::Doubling(f.clone()),
        }
    }
}

/// One level of a filter, as its operations walk them: the first level or
/// a doubling one (a table that doubles), or a region level.
#[derive(Clone, Copy)]
pub(crate) enum Level<'a> {
    Table(&'a CuckooFilter),
    Regions(&'a RegionLevel),
}

impl<'a> Level<'a> {
    /// The level right above this one, if one was published.
    pub(crate) fn above(self) -> Option<Level<'a>> {
        let upper = match self {
            Level::Table(f) => &f.upper,
            Level::Regions(r) => &r.upper,
        };
        upper.get().map(UpperLevel::as_level)
    }

    /// Copies of `hash`'s tag in this level alone.
    pub(crate) fn count(self, hash: u64) -> usize {
        match self {
            Level::Table(f) => f.count_here(hash),
            Level::Regions(r) => r.regions().count(hash),
        }
    }

    /// Removes one copy of `hash`'s tag from this level alone.
    fn remove(self, hash: u64) -> bool {
        match self {
            Level::Table(f) => f.remove_here(hash, &f.writer_pin()),
            Level::Regions(r) => r.regions().remove(hash),
        }
    }

    /// Items in this level alone.
    pub(crate) fn len(self) -> usize {
        match self {
            Level::Table(f) => f.counters.len().max(0) as usize,
            Level::Regions(r) => r.regions().len().max(0) as usize,
        }
    }

    /// Tag slots of this level alone.
    pub(crate) fn slots(self) -> usize {
        match self {
            Level::Table(f) => f.slots(f.table()),
            Level::Regions(r) => r.regions().lanes(),
        }
    }

    /// Bytes this level holds now (a doubling one: its table, and its
    /// successor while it migrates).
    pub(crate) fn memory(self) -> usize {
        match self {
            Level::Table(f) => {
                let t = f.table();
                t.bytes() + t.migration().map_or(0, |m| m.next().bytes() + m.bytes())
            }
            Level::Regions(r) => r.regions().bytes(),
        }
    }

    /// Finishes this level's doubling migration or region step, if one
    /// runs (see [`CuckooFilter::finish_growth`]).
    pub(crate) fn finish_growth(self) {
        match self {
            Level::Table(f) => {
                // A helper writes to the tables: announced, as writers are.
                let _pin = f.writer_pin();
                f.finish_migration();
            }
            Level::Regions(r) => r.regions().finish_step(),
        }
    }

    /// This level's expected false-positive rate now.
    pub(crate) fn false_positive_rate(self) -> f64 {
        match self {
            Level::Table(f) => f.level_false_positive_rate(),
            Level::Regions(r) => r.false_positive_rate(),
        }
    }

    /// `stats` of this level alone.
    pub(crate) fn stats(self) -> super::Stats {
        match self {
            Level::Table(f) => f.level_stats(),
            Level::Regions(r) => r.stats(),
        }
    }

    /// Empties this level.
    pub(crate) fn clear(self) {
        match self {
            Level::Table(f) => f.clear_here(),
            Level::Regions(r) => r.regions().clear(),
        }
    }
}

/// A filter's link to the level above it, and the false-positive budget of
/// this level and all above it.
pub(crate) struct Upper {
    /// Null until the level above is published; then that level, owned by
    /// this link until the filter drops.
    level: AtomicPtr<UpperLevel>,
    /// 1 while one thread builds the level above (and for good once it is
    /// published).
    claim: AtomicUsize,
    /// The false-positive rate this level and the levels above may spend
    /// together: the user's cap minus the bounds of the levels below.
    budget: f64,
    /// The user's `max_false_positive_rate`, for refusals.
    cap: f64,
    /// The user's `max_memory` (`None`: unlimited), for refusals.
    cap_memory: Option<usize>,
    /// Build doubling 21x3 levels, as version 3 files hold them, instead
    /// of region levels (`CuckooFilterBuilder::doubling_levels`: tests of
    /// those files only).
    doubling: bool,
}

impl Upper {
    /// The link of a first level whose policy is `policy`; `doubling`:
    /// the levels it builds are doubling ones (see the field).
    pub(crate) fn first(policy: &GrowthPolicy, doubling: bool) -> Upper {
        Upper::with_budget(
            policy.max_false_positive_rate,
            policy.max_false_positive_rate,
            policy.max_memory,
            doubling,
        )
    }

    /// The link of an upper level rebuilt from a file: what `build_upper`
    /// gave the level when it was made, from what the file holds. The level's
    /// own `max_false_positive_rate` is half the budget the levels below left
    /// it, so that budget is twice its rate; the cap and the memory cap are
    /// the first level's (`first`). A doubling level (from a version 3
    /// file) goes on building doubling levels, as the filter that saved it
    /// would have (`doubling`), so it grows and saves as before; a region
    /// level builds region levels.
    // Persistence only, which loom builds leave out.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn loaded(own: f64, first: &GrowthPolicy, doubling: bool) -> Upper {
        Upper::with_budget(
            2.0 * own,
            first.max_false_positive_rate,
            first.max_memory,
            doubling,
        )
    }

    /// A placeholder link, replaced when its level is attached.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn detached() -> Upper {
        Upper::with_budget(0.0, 0.0, None, false)
    }

    fn with_budget(budget: f64, cap: f64, cap_memory: Option<usize>, doubling: bool) -> Upper {
        Upper {
            level: AtomicPtr::new(std::ptr::null_mut()),
            claim: AtomicUsize::new(0),
            budget,
            cap,
            cap_memory,
            doubling,
        }
    }

    /// The level above, if one was published.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<&UpperLevel> {
        // Acquire: pairs with the Release store in `publish`, so the level's
        // construction happens-before any use of it.
        let p = self.level.load(Ordering::Acquire);
        // SAFETY: a non-null pointer here came from `Box::into_raw` in
        // `publish`, is never replaced (the claim admits one publisher) and
        // is freed only by `drop`, which has `&mut self`; so it is valid
        // for as long as `&self` is.
        unsafe { p.as_ref() }
    }

    /// Whether a level above exists. One load: the check a first level's
    /// negative lookup pays.
    #[inline(always)]
    pub(crate) fn exists(&self) -> bool {
        // Relaxed: a caller that sees non-null goes through `get`, which
        // loads again with Acquire.
        !self.level.load(Ordering::Relaxed).is_null()
    }

    /// Publishes `level`. Called with the claim held (or on a level no
    /// other thread sees yet), so a link is published at most once.
    pub(crate) fn publish(&self, level: UpperLevel) {
        let p = Box::into_raw(Box::new(level));
        // Release: pairs with the Acquire load in `get`.
        self.level.store(p, Ordering::Release);
    }

    /// The level above, built by `build` and published by `publish` if
    /// there was none. `Ok(None)`: another thread is building it; retry.
    pub(crate) fn get_or_publish(
        &self,
        build: impl FnOnce() -> Result<UpperLevel, InsertError>,
        publish: impl FnOnce(&Upper, UpperLevel),
    ) -> Result<Option<&UpperLevel>, InsertError> {
        if let Some(level) = self.get() {
            return Ok(Some(level));
        }
        // Acquire on success: pairs with the Release of a builder that
        // failed and gave the claim back.
        if self
            .claim
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            Backoff::default().snooze();
            return Ok(None);
        }
        if let Some(level) = self.get() {
            return Ok(Some(level));
        }
        match build() {
            Ok(level) => {
                // The claim stays held: the level is never replaced.
                publish(self, level);
                Ok(self.get())
            }
            Err(e) => {
                // Release: a later claimant sees this attempt's effects.
                self.claim.store(0, Ordering::Release);
                Err(e)
            }
        }
    }

    /// A new region level above a level whose bound is `bound` and which
    /// holds about `items` items and `held` bytes of the `max_memory` it
    /// may take: with half of the budget left, and the bytes left.
    pub(crate) fn build_regions(
        &self,
        bound: f64,
        items: usize,
        max_memory: Option<usize>,
        held: usize,
    ) -> Result<UpperLevel, InsertError> {
        let left = self.budget - bound;
        let Some(plan) = Plan::above(items, left) else {
            // What growing on would take: the levels so far, and a new
            // level's first region with as much again kept for the levels
            // above it (its own share is half of what it is given).
            return Err(InsertError::FalsePositiveRateLimit {
                max: self.cap,
                next: self.cap - self.budget + bound + 2.0 * first_region_bound(),
            });
        };
        let max_memory = match max_memory {
            None => None,
            Some(max) => {
                let needed = held.saturating_add(first_bytes(plan.m0, plan.max_regions));
                if needed > max {
                    return Err(self.memory_refusal(max, needed));
                }
                Some(max - held)
            }
        };
        let upper = Upper::with_budget(left, self.cap, self.cap_memory, false);
        RegionLevel::new(&plan, max_memory, upper).map(UpperLevel::Regions)
    }

    /// The `MemoryLimit` refusal of a growth of the level below this link
    /// that needs `needed` of the `max` bytes that level may take, as the
    /// user sees it: against the filter's `max_memory`, counting the
    /// levels below.
    pub(crate) fn memory_refusal(&self, max: usize, needed: usize) -> InsertError {
        match self.cap_memory {
            Some(cap) => InsertError::MemoryLimit {
                max: cap,
                needed: needed.saturating_add(cap.saturating_sub(max)),
            },
            None => InsertError::MemoryLimit { max, needed },
        }
    }

    /// A copy of this link and the chain above it (for `Clone`).
    pub(crate) fn deep_clone(&self) -> Upper {
        let copy = Upper::with_budget(self.budget, self.cap, self.cap_memory, self.doubling);
        if let Some(level) = self.get() {
            copy.publish(level.deep_clone());
            // Held for good, as after any publication.
            copy.claim.store(1, Ordering::Relaxed);
        }
        copy
    }
}

impl Drop for Upper {
    fn drop(&mut self) {
        let p = self.level.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `publish` and is
            // dropped only here, once (`&mut self`: no reader remains).
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

impl CuckooFilter {
    /// This level and every level above it, bottom up.
    pub(crate) fn levels(&self) -> impl Iterator<Item = Level<'_>> {
        std::iter::successors(Some(Level::Table(self)), |l| l.above())
    }

    /// Number of levels (1 for a filter that never outgrew its first
    /// table's tag bits).
    pub fn levels_count(&self) -> usize {
        self.levels().count()
    }

    /// `contains` of a filter that has levels (or is one): the newest
    /// level first, where most keys are. Every level's two buckets are
    /// prefetched on the way up, so that the probes on the way down overlap
    /// their cache misses instead of waiting for them one after another.
    #[cold]
    #[inline(never)]
    pub(crate) fn contains_leveled(&self, hash: u64) -> bool {
        match self.upper.get() {
            Some(upper) => {
                super::with_layout!(self, L => self.prefetch_candidates::<L>(hash));
                upper.contains(hash) || self.contains_here(hash)
            }
            // An upper level itself (its own route is the leveled one).
            None => self.contains_here(hash),
        }
    }

    /// This doubling upper level and the ones above it, newest first.
    /// Doubling upper levels all have the layout `L21x3`: no dispatch.
    fn contains_upper(&self, hash: u64) -> bool {
        debug_assert_eq!(self.layout, UPPER_LAYOUT);
        match self.upper.get() {
            Some(upper) => {
                self.prefetch_candidates::<L21x3>(hash);
                upper.contains(hash) || self.contains_here_in::<L21x3>(hash, self.addressing())
            }
            None => self.contains_here_in::<L21x3>(hash, self.addressing()),
        }
    }

    /// Starts the cache misses of `hash`'s two buckets in this level's
    /// current table.
    #[inline(always)]
    fn prefetch_candidates<L: crate::raw::bucket::Layout>(&self, hash: u64) {
        let t = self.table();
        let at = t.geometry().locate::<L>(hash);
        t.prefetch(at.i1);
        t.prefetch(at.i2);
    }

    /// The newest level.
    pub(super) fn newest(&self) -> Level<'_> {
        self.levels().last().unwrap_or(Level::Table(self))
    }

    /// A plain insert into the newest level (which goes up when it may not
    /// grow).
    pub(super) fn insert_newest(&self, hash: u64) -> Result<bool, InsertError> {
        match self.newest() {
            Level::Table(f) => f.insert_here(hash, false, &f.writer_pin()),
            Level::Regions(r) => r.insert(hash),
        }
    }

    /// `insert` (with `unique`, `insert_unique`) of a filter that has levels
    /// (or is one): into a free lane of this (the first) level's pair that
    /// keeps its bucket another, else the newest level; `insert_unique`
    /// decides under the key's pair stripe in this level, asking every
    /// level.
    #[cold]
    #[inline(never)]
    pub(crate) fn insert_leveled(&self, hash: u64, unique: bool) -> Result<bool, InsertError> {
        if self.upper.get().is_none() {
            // An upper level itself, the newest: its own table (which goes
            // up when it may not grow).
            return self.insert_here(hash, unique, &self.writer_pin());
        }
        if !unique {
            if self.insert_keeping_a_lane(hash) {
                return Ok(true);
            }
            return match self.insert_newest(hash) {
                // At a cap, the newest level may be full while removes left
                // this one room elsewhere than in the key's own pair: a
                // search finds it.
                Err(refusal) if self.may_search_after(&refusal) && self.insert_searching(hash) => {
                    Ok(true)
                }
                other => other,
            };
        }
        let _pin = self.writer_pin();
        let mut lanes = Lanes::KeepOne;
        let mut backoff = Backoff::default();
        loop {
            let t = self.table();
            match self.insert_unique_above(t, hash, lanes) {
                Ok(Some(inserted)) => return Ok(inserted),
                // The same at a cap: room made in this level's pair (by
                // displacement, the stripe released), then a second
                // decision, which may take any lane there; and again if
                // a racing insert took the room first (loom model 12: a
                // plain insert of another key of the pair did, and this
                // call was refused while a hop could still make room).
                Err(refusal) if self.may_search_after(&refusal) && self.make_room_here(t, hash) => {
                    if lanes == Lanes::Any {
                        // Two calls that keep taking each other's room.
                        backoff.snooze();
                    }
                    lanes = Lanes::Any;
                    continue;
                }
                Err(refusal) => return Err(refusal),
                Ok(None) => {}
            }
            // The pair's stripe is sealed: the table is being replaced (not
            // for a level that stopped doubling, but possible while `clear`
            // holds it): retry.
            Backoff::default().snooze();
        }
    }

    /// A plain insert into a free lane of this (the first) level's pair,
    /// which stopped growing, in a bucket that keeps another free lane
    /// after it (no search: the two loads a lookup makes); `false`: the key
    /// goes up. A first level stops growing at its first failed search,
    /// which in a table of small regions comes early (0.80 full with
    /// 64-bucket regions, 0.90 with 264); the keys it still has lanes for
    /// cost 16.5 bits each instead of an upper level's 23. Not its last
    /// lanes: its bound is its rate with every slot full, and a filter
    /// whose first level is at 0.99 of a bound that is 0.98 of the cap
    /// (12-bit tags at 1%) measures rates over the cap by chance alone. A
    /// rule of the two words, not of a count: a filter read from a file
    /// (a Redis replica) places every later key as the one that saved it.
    fn insert_keeping_a_lane(&self, hash: u64) -> bool {
        let a = self.addressing();
        // A look first, without announcing the write: a first level whose
        // buckets keep their last lanes turns most keys away.
        let t = self.table();
        if t.migration().is_some()
            || !super::with_layout!(self, L => ops::has_two_free_lanes::<L>(t, hash, a))
        {
            // (A migration: its last doubling's, rare and brief.)
            return false;
        }
        let _pin = self.writer_pin();
        let t = self.table();
        if t.migration().is_some() {
            return false;
        }
        super::with_layout!(self, L => ops::insert_keeping_a_lane::<L>(t, hash, a, &self.counters))
    }

    /// Whether an insert the newest level refused with `refusal` may search
    /// this (the first) level for room: a refusal for room (at a cap, not
    /// for copies), and this level below its sizing load (counted: 65
    /// loads, on refusals only).
    fn may_search_after(&self, refusal: &InsertError) -> bool {
        !matches!(refusal, InsertError::TooManyCopies { .. })
            && self.table().migration().is_none()
            && (self.counters.len() as f64)
                < self.layout.sizing_load() * self.slots(self.table()) as f64
    }

    /// A plain insert into this level with a displacement search (after
    /// the newest level refused it, [`may_search_after`](Self::may_search_after)).
    /// A search that finds no room sets the full hint as at any growth cap
    /// (`search_again_arming`): later refusals skip it until a remove.
    fn insert_searching(&self, hash: u64) -> bool {
        let _pin = self.writer_pin();
        let t = self.table();
        let a = self.addressing();
        let put = super::with_layout!(self, L => ops::insert_hash::<L>(
            t,
            hash,
            a,
            false,
            ops::nowhere,
            Search::UnlessHinted,
            &self.counters,
        ));
        match put {
            Ok(inserted) => inserted,
            Err(ops::InsertFailure::Full { searched: true }) => {
                let at = super::with_layout!(self, L => t.geometry().locate::<L>(hash));
                self.search_again_arming(t, at, hash, false) == Ok(true)
            }
            Err(_) => false,
        }
    }

    /// Frees a lane of `hash`'s pair in `t`, this level's table, by
    /// displacement (an `insert_unique` the newest level refused).
    fn make_room_here(&self, t: &Table, hash: u64) -> bool {
        let a = self.addressing();
        super::with_layout!(self, L => ops::make_room_for::<L>(t, hash, a, &self.counters))
    }

    /// Whether some level above this one holds the tag of `hash`.
    #[cold]
    #[inline(never)]
    pub(crate) fn contains_above(&self, hash: u64) -> bool {
        self.upper.get().is_some_and(|upper| upper.contains(hash))
    }

    /// Copies of `hash`'s tag in the levels above this one.
    #[cold]
    #[inline(never)]
    pub(crate) fn count_above(&self, hash: u64) -> usize {
        self.levels().skip(1).map(|l| l.count(hash)).sum()
    }

    /// `remove` on a filter with levels: removes from the one level whose
    /// buckets hold the tag; when several do, removes nothing and still
    /// answers `true` (a copy was found): the copy stays, a false positive.
    #[cold]
    #[inline(never)]
    pub(crate) fn remove_leveled(&self, hash: u64) -> bool {
        let mut holder = None;
        for level in self.levels() {
            if level.count(hash) > 0 {
                if holder.is_some() {
                    // Ambiguous: see the module documentation.
                    self.counters.bump_ambiguous_removes();
                    return true;
                }
                holder = Some(level);
            }
        }
        holder.is_some_and(|level| level.remove(hash))
    }

    /// Puts `level`, rebuilt from a file, above the top level of this
    /// filter (a first level): a doubling level gets the link `build_upper`
    /// would have given it ([`Upper::loaded`]), a region level the link
    /// `build_regions` gave it; the first level takes the leveled route,
    /// and the level is published as `upper_or_publish` does. For a filter
    /// no other thread sees yet (the loader's).
    ///
    /// # Panics
    ///
    /// If another thread is publishing a level above the top level at the
    /// same time (never, for the loader's filter).
    // Persistence only, which loom builds leave out.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn attach_loaded(&self, mut level: UpperLevel) {
        let first = self.policy;
        match &mut level {
            UpperLevel::Doubling(f) => {
                f.upper = Upper::loaded(f.policy.max_false_positive_rate, &first, true);
            }
            UpperLevel::Regions(r) => r.upper = Upper::loaded(r.own_rate(), &first, false),
        }
        let top = self.levels().last().unwrap_or(Level::Table(self));
        let link = match top {
            Level::Table(f) => &f.upper,
            Level::Regions(r) => &r.upper,
        };
        // Acquire: as in `get_or_publish`. Held for good, as there: the
        // level is never replaced.
        let claimed = link
            .claim
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        assert!(claimed, "attach_loaded: the top level is being grown");
        // First the route, then the level (see `Route::get`).
        self.route.set_leveled();
        link.publish(level);
    }

    /// Whether an insert refused with `refusal` by this level's growth goes
    /// on in the level above: the level may not double again because of
    /// its false-positive budget or its tag bits, not because of memory.
    pub(crate) fn goes_up(&self, refusal: &InsertError) -> bool {
        self.policy.growth == Growth::Double
            && matches!(
                refusal,
                InsertError::FalsePositiveRateLimit { .. } | InsertError::Full
            )
    }

    /// The level above, published by this call if there was none yet.
    /// `Ok(None)`: another thread is building it; retry.
    pub(crate) fn upper_or_publish(&self) -> Result<Option<&UpperLevel>, InsertError> {
        let published = self.upper.get_or_publish(
            || self.build_upper(),
            |upper, level| {
                #[cfg(loom)]
                if self.writers.canary == crate::canary::Canary::RouteAfterPublish {
                    // Deliberately broken order, for the loom canary: a
                    // thread that sees the level may insert into it before
                    // the route says that lookups must look there.
                    upper.publish(level);
                    self.route.set_leveled();
                    return;
                }
                // First the route, then the level (see `Route::get`).
                self.route.set_leveled();
                upper.publish(level);
            },
        );
        if published.is_err() {
            self.counters.bump_growth_refusals();
        }
        published
    }

    /// Whether this level may double to a bound of `next`: within its own
    /// `max_false_positive_rate`, and for a first level also leaving the
    /// levels above room ([`first_level_may_reach`]); an upper level's own
    /// bound is already half of what it was given.
    pub(crate) fn may_double_to(&self, next: f64) -> bool {
        let max = self.policy.max_false_positive_rate;
        if self.layout == UPPER_LAYOUT {
            next <= max
        } else {
            first_level_may_reach(next, max)
        }
    }

    /// The bound this level's false-positive rate reaches at full load in
    /// its current (last) generation.
    fn bound(&self) -> f64 {
        let generation = self.table().geometry().generation();
        self.layout.bound_at(generation)
    }

    /// A new, empty level above this one: a region level (a doubling one
    /// for a filter built with `doubling_levels`), with half of the budget
    /// this level leaves, and the memory it leaves.
    fn build_upper(&self) -> Result<UpperLevel, InsertError> {
        let table = self.table();
        let items = (self.slots(table) as f64 * self.layout.sizing_load()) as usize;
        // This level keeps its table and its resident replaced ones.
        let held = table.bytes().saturating_add(self.retired_bytes().1);
        let built = if self.upper.doubling {
            self.build_doubling(items, held).map(UpperLevel::Doubling)
        } else {
            self.upper
                .build_regions(self.bound(), items, self.policy.max_memory, held)
        };
        if built.is_ok() {
            self.counters.bump_growths();
        }
        built
    }

    /// A doubling 21x3 level for `items` items, as version 3 files hold.
    fn build_doubling(&self, items: usize, held: usize) -> Result<CuckooFilter, InsertError> {
        let spent_below = self.upper.cap - self.upper.budget;
        let left = self.upper.budget - self.bound();
        let layout = UPPER_LAYOUT;
        let own = left / 2.0;
        let first = layout.bound_at(0);
        if first > own || own.is_nan() {
            // What growing on would take: the levels so far, and a new
            // level's first rate with as much again kept for the levels
            // above it (its own share is half of what it is given).
            return Err(InsertError::FalsePositiveRateLimit {
                max: self.upper.cap,
                next: spent_below + self.bound() + 2.0 * first,
            });
        }
        let m0 = super::sizing::buckets_for(items, layout).map_err(|_| InsertError::Full)?;
        let Ok(geo) = Geometry::checked(m0, 0, layout.tag_bits(), self.addressing()) else {
            return Err(InsertError::Full);
        };
        let bytes = Table::bytes_for(m0 as usize);
        let max_memory = match self.policy.max_memory {
            None => None,
            Some(max) => {
                let needed = held.saturating_add(bytes);
                if needed > max {
                    return Err(self.memory_refusal(max, needed));
                }
                Some(max - held)
            }
        };
        let mut table =
            Table::new(geo).map_err(|e| InsertError::AllocationFailed { bytes: e.bytes })?;
        #[cfg(loom)]
        {
            table.canary = self.table().canary;
        }
        #[cfg(not(loom))]
        let _ = &mut table;
        let policy = GrowthPolicy {
            growth: Growth::Double,
            max_memory,
            max_false_positive_rate: own,
        };
        let upper = Upper::with_budget(left, self.upper.cap, self.upper.cap_memory, true);
        Ok(CuckooFilter::assemble(
            table,
            layout,
            self.hasher.clone(),
            policy,
            upper,
            0,
        ))
    }

    /// The `MemoryLimit` refusal of a growth of this level that needs
    /// `needed` of the `max` bytes this level may take, as the user sees
    /// it: against the filter's `max_memory`, counting the levels below.
    pub(crate) fn memory_refusal(&self, max: usize, needed: usize) -> InsertError {
        self.upper.memory_refusal(max, needed)
    }

    /// An insert that this level refused (it may not double again) goes on
    /// in the levels above; with `unique`, under the key's pair stripe of
    /// table `t` of this level, which every `insert_unique` of the key
    /// holds for its decision.
    #[cold]
    #[inline(never)]
    pub(crate) fn insert_above(
        &self,
        t: &Table,
        hash: u64,
        unique: bool,
        refusal: InsertError,
    ) -> Result<Option<bool>, InsertError> {
        let upper = loop {
            match self.upper_or_publish() {
                Ok(Some(level)) => break level,
                Ok(None) => continue,
                // Say why the filter cannot go on: the level above could
                // not be made for want of memory, or of budget under the
                // user's cap (which its error names, where this level's
                // refusal names the level's own share of it).
                Err(e) => {
                    return Err(match e {
                        InsertError::AllocationFailed { .. }
                        | InsertError::MemoryLimit { .. }
                        | InsertError::FalsePositiveRateLimit { .. } => e,
                        _ => refusal,
                    })
                }
            }
        };
        if !unique {
            return upper.insert(hash).map(Some);
        }
        self.insert_unique_above(t, hash, Lanes::Any)
    }

    /// `insert_unique` of `hash` into the levels above `t`'s level, under
    /// the key's pair stripe in `t`, which every `insert_unique` of the key
    /// holds for its decision: `Ok(false)` if any level holds the tag, else
    /// into a free slot of the pair (`lanes`: as plain inserts take them,
    /// [`insert_keeping_a_lane`](Self::insert_keeping_a_lane), or any once
    /// room was made at a cap) or the newest level. `Ok(None)` if the
    /// stripe is sealed (retry).
    fn insert_unique_above(
        &self,
        t: &Table,
        hash: u64,
        lanes: Lanes,
    ) -> Result<Option<bool>, InsertError> {
        let insert_up = || self.insert_newest(hash);
        let has_above = || self.contains_above(hash);
        let decided = super::with_layout!(self, L => ops::insert_unique_beyond::<L>(
            t,
            hash,
            &self.counters,
            lanes,
            has_above,
            &insert_up,
        ));
        match decided {
            Ok(result) => result.map(Some),
            Err(_) => Ok(None),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
