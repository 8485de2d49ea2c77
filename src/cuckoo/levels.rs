//! Growth past the tag bits: levels.
//!
//! Each doubling spends a tag bit, so a table stops doubling at its
//! `max_false_positive_rate` (64x with 16-bit tags at the default 1%). A
//! [`Growth::Double`] filter then publishes an *upper level*: a filter of
//! 21-bit tags, 3 per word (`L21x3`), sized for what the level below holds,
//! which doubles online as the first table does and, when it stops, gets a
//! level of its own. The levels form a chain owned by the first one; a
//! level is never replaced or freed before the filter drops, so a lookup
//! may follow the chain without a pin, as it follows replaced tables.
//!
//! The rules (see `docs/design.md`, "Growth beyond the tag bits"):
//!
//! * **Inserts** go to the first level with room: level 0 while it has a
//!   free slot, else the newest level. Keys never move between levels.
//! * **Lookups** read level 0 as before; only a negative answer looks at
//!   the chain (one load of the `upper` pointer, null on a filter that never
//!   outgrew its first size).
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
//!   levels. A level's bound is its estimate at full load at its last
//!   generation.

use super::{CuckooFilter, Growth, GrowthPolicy, LayoutKind};
use crate::error::InsertError;
use crate::hash::HashAlgorithm;
use crate::raw::bucket::L21x3;
use crate::raw::geometry::Geometry;
use crate::raw::table::Table;
use crate::sync::{AtomicPtr, AtomicUsize, Backoff, Ordering};

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

/// A filter's link to the level above it, and the false-positive budget of
/// this level and all above it.
pub(crate) struct Upper {
    /// Null until the level above is published; then that level, owned by
    /// this link until the filter drops.
    level: AtomicPtr<CuckooFilter>,
    /// 1 while one thread builds the level above.
    claim: AtomicUsize,
    /// The false-positive rate this level and the levels above may spend
    /// together: the user's cap minus the bounds of the levels below.
    budget: f64,
    /// The user's `max_false_positive_rate`, for refusals.
    cap: f64,
    /// The user's `max_memory` (`None`: unlimited), for refusals.
    cap_memory: Option<usize>,
}

impl Upper {
    /// The link of a first level whose policy is `policy`.
    pub(crate) fn first(policy: &GrowthPolicy) -> Upper {
        Upper::with_budget(
            policy.max_false_positive_rate,
            policy.max_false_positive_rate,
            policy.max_memory,
        )
    }

    /// The link of an upper level rebuilt from a file: what `build_upper`
    /// gave the level when it was made, from what the file holds. The level's
    /// own `max_false_positive_rate` is half the budget the levels below left
    /// it, so that budget is twice its rate; the cap and the memory cap are
    /// the first level's (`first`).
    // Persistence only, which loom builds leave out.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn loaded(own: &GrowthPolicy, first: &GrowthPolicy) -> Upper {
        Upper::with_budget(
            2.0 * own.max_false_positive_rate,
            first.max_false_positive_rate,
            first.max_memory,
        )
    }

    fn with_budget(budget: f64, cap: f64, cap_memory: Option<usize>) -> Upper {
        Upper {
            level: AtomicPtr::new(std::ptr::null_mut()),
            claim: AtomicUsize::new(0),
            budget,
            cap,
            cap_memory,
        }
    }

    /// The level above, if one was published.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<&CuckooFilter> {
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
    fn publish(&self, level: CuckooFilter) {
        let p = Box::into_raw(Box::new(level));
        // Release: pairs with the Acquire load in `get`.
        self.level.store(p, Ordering::Release);
    }

    /// A copy of this link and the chain above it (for `Clone`).
    pub(crate) fn deep_clone(&self) -> Upper {
        let copy = Upper::with_budget(self.budget, self.cap, self.cap_memory);
        if let Some(level) = self.get() {
            copy.publish(level.clone());
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
    pub(crate) fn levels(&self) -> impl Iterator<Item = &CuckooFilter> {
        std::iter::successors(Some(self), |l| l.upper.get())
    }

    /// The level right above this one, if one was published.
    // Persistence only, which loom builds leave out.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn upper_level(&self) -> Option<&CuckooFilter> {
        self.upper.get()
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
                upper.contains_upper(hash) || self.contains_here(hash)
            }
            // An upper level itself (its own route is the leveled one).
            None => self.contains_here(hash),
        }
    }

    /// This upper level and the ones above it, newest first. Upper levels
    /// all have the layout `L21x3`: no dispatch.
    fn contains_upper(&self, hash: u64) -> bool {
        debug_assert_eq!(self.layout, UPPER_LAYOUT);
        match self.upper.get() {
            Some(upper) => {
                self.prefetch_candidates::<L21x3>(hash);
                upper.contains_upper(hash)
                    || self.contains_here_in::<L21x3>(hash, self.addressing())
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
    pub(super) fn newest(&self) -> &CuckooFilter {
        self.levels().last().unwrap_or(self)
    }

    /// `insert` (with `unique`, `insert_unique`) of a filter that has levels
    /// (or is one): into the newest level; `insert_unique` decides under the
    /// key's pair stripe in this (the first) level, asking every level.
    #[cold]
    #[inline(never)]
    pub(crate) fn insert_leveled(&self, hash: u64, unique: bool) -> Result<bool, InsertError> {
        if self.upper.get().is_none() {
            // An upper level itself, the newest: its own table (which goes
            // up when it may not grow).
            return self.insert_here(hash, unique, &self.writer_pin());
        }
        if !unique {
            // An upper level: `L21x3`, no dispatch.
            let newest = self.newest();
            return newest.insert_here_in::<L21x3>(
                hash,
                newest.addressing(),
                false,
                &newest.writer_pin(),
            );
        }
        let _pin = self.writer_pin();
        loop {
            let t = self.table();
            if let Some(inserted) = self.insert_unique_above(t, hash)? {
                return Ok(inserted);
            }
            // The pair's stripe is sealed: the table is being replaced (not
            // for a level that stopped doubling, but possible while `clear`
            // holds it): retry.
            Backoff::default().snooze();
        }
    }

    /// Whether some level above this one holds the tag of `hash`.
    #[cold]
    #[inline(never)]
    pub(crate) fn contains_above(&self, hash: u64) -> bool {
        self.upper
            .get()
            .is_some_and(|upper| upper.contains_upper(hash))
    }

    /// Copies of `hash`'s tag in the levels above this one.
    #[cold]
    #[inline(never)]
    pub(crate) fn count_above(&self, hash: u64) -> usize {
        self.levels().skip(1).map(|l| l.count_here(hash)).sum()
    }

    /// `remove` on a filter with levels: removes from the one level whose
    /// buckets hold the tag; when several do, removes nothing and still
    /// answers `true` (a copy was found): the copy stays, a false positive.
    #[cold]
    #[inline(never)]
    pub(crate) fn remove_leveled(&self, hash: u64) -> bool {
        let mut holder = None;
        for level in self.levels() {
            if level.count_here(hash) > 0 {
                if holder.is_some() {
                    // Ambiguous: see the module documentation.
                    self.counters.bump_ambiguous_removes();
                    return true;
                }
                holder = Some(level);
            }
        }
        holder.is_some_and(|level| level.remove_here(hash, &level.writer_pin()))
    }

    /// Puts `level`, rebuilt from a file, above the top level of this
    /// filter (a first level): it gets the link `build_upper` would have
    /// given it ([`Upper::loaded`]), the level below takes the leveled
    /// route, and it is published as `upper_or_publish` does. For a filter
    /// no other thread sees yet (the loader's).
    ///
    /// # Panics
    ///
    /// If another thread is publishing a level above the top level at the
    /// same time (never, for the loader's filter).
    // Persistence only, which loom builds leave out.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn attach_loaded(&self, mut level: CuckooFilter) {
        let first = self.policy;
        let top = self.levels().last().unwrap_or(self);
        level.upper = Upper::loaded(&level.policy, &first);
        // Acquire: as in `upper_or_publish`. Held for good, as there: the
        // level is never replaced.
        let claimed = top
            .upper
            .claim
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        assert!(claimed, "attach_loaded: the top level is being grown");
        // First the route, then the level (see `Route::get`).
        top.route.set_leveled();
        top.upper.publish(level);
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
    pub(crate) fn upper_or_publish(&self) -> Result<Option<&CuckooFilter>, InsertError> {
        if let Some(level) = self.upper.get() {
            return Ok(Some(level));
        }
        // Acquire on success: pairs with the Release of a builder that
        // failed and gave the claim back.
        if self
            .upper
            .claim
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            Backoff::default().snooze();
            return Ok(None);
        }
        if let Some(level) = self.upper.get() {
            return Ok(Some(level));
        }
        match self.build_upper() {
            #[cfg(loom)]
            Ok(level) if self.writers.canary == crate::loom_support::Canary::RouteAfterPublish => {
                // Deliberately broken order, for the loom canary: a thread
                // that sees the level may insert into it before the route
                // says that lookups must look there.
                self.upper.publish(level);
                self.route.set_leveled();
                self.counters.bump_growths();
                Ok(self.upper.get())
            }
            Ok(level) => {
                // First the route, then the level (see `Route::get`).
                self.route.set_leveled();
                self.upper.publish(level);
                self.counters.bump_growths();
                Ok(self.upper.get())
            }
            Err(e) => {
                // Release: a later claimant sees this attempt's effects.
                self.upper.claim.store(0, Ordering::Release);
                self.counters.bump_growth_refusals();
                Err(e)
            }
        }
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

    /// A new, empty level above this one: sized for this level's items,
    /// with half of the budget this level leaves, and the memory it leaves.
    fn build_upper(&self) -> Result<CuckooFilter, InsertError> {
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
        let table = self.table();
        let items = (self.slots(table) as f64 * self.layout.sizing_load()) as usize;
        let m0 = super::sizing::buckets_for(items, layout).map_err(|_| InsertError::Full)?;
        let Ok(geo) = Geometry::checked(m0, 0, layout.tag_bits(), self.addressing()) else {
            return Err(InsertError::Full);
        };
        let bytes = Table::bytes_for(m0 as usize);
        let max_memory = match self.policy.max_memory {
            None => None,
            Some(max) => {
                // This level keeps its table and its resident replaced ones.
                let held = table.bytes().saturating_add(self.retired_bytes().1);
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
        let upper = Upper::with_budget(left, self.upper.cap, self.upper.cap_memory);
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
        match self.upper.cap_memory {
            Some(cap) => InsertError::MemoryLimit {
                max: cap,
                needed: needed.saturating_add(cap - max),
            },
            None => InsertError::MemoryLimit { max, needed },
        }
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
            return upper
                .insert_in(|_| hash, false, &upper.writer_pin())
                .map(Some);
        }
        self.insert_unique_above(t, hash)
    }

    /// `insert_unique` of `hash` into the levels above `t`'s level, under
    /// the key's pair stripe in `t`, which every `insert_unique` of the key
    /// holds for its decision: `Ok(false)` if any level holds the tag, else
    /// into a free slot of the pair or the newest level. `Ok(None)` if the
    /// stripe is sealed (retry).
    fn insert_unique_above(&self, t: &Table, hash: u64) -> Result<Option<bool>, InsertError> {
        let insert_up = || {
            let newest = self.newest();
            newest.insert_here(hash, false, &newest.writer_pin())
        };
        let has_above = || self.contains_above(hash);
        let decided = super::with_layout!(self, L => crate::raw::ops::insert_unique_beyond::<L>(
            t,
            hash,
            &self.counters,
            has_above,
            &insert_up,
        ));
        match decided {
            Ok(result) => result.map(Some),
            Err(_) => Ok(None),
        }
    }
}
