//! Online doubling, seen from the filter: when to grow, the policy's
//! limits, helping a migration along, and installing the successor.

use super::{with_layout, CuckooFilter, LayoutKind};
use crate::error::InsertError;
use crate::raw::geometry::{self, Geometry, Located};
use crate::raw::migrate::Helped;
use crate::raw::ops::{self, InsertFailure, Search};
use crate::raw::table::Migration;
use crate::raw::table::Table;
use crate::raw::writers::Writers;
use crate::sync::Backoff;

/// Whether a full filter doubles its table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Growth {
    /// When an insert finds no room, the table doubles online (the
    /// default). Each doubling spends one tag bit, so the false-positive
    /// rate roughly doubles too; once one more doubling would pass
    /// `max_false_positive_rate`, a level of wider tags is added instead,
    /// so the filter keeps taking keys while memory (and `max_memory`)
    /// allows.
    #[default]
    Double,
    /// Never grow: a full table answers [`InsertError::Full`]. Its table
    /// then never changes, so its writers skip the announcement that
    /// growable filters' writers make (a few plain instructions, no
    /// barrier). Choose it when the item count is known.
    Fixed,
}

/// Default `max_false_positive_rate`: 1%. With 16-bit tags the first table
/// doubles 6 times (64x, FPR about 0.78% at full load), with 12-bit tags
/// twice (4x, about 0.97%); levels of wider tags then take the rest of the
/// 1% (see [`CuckooFilter::insert`](crate::CuckooFilter::insert), "Past the
/// tag bits").
pub const DEFAULT_MAX_FALSE_POSITIVE_RATE: f64 = 1e-2;

/// The limits on growth, fixed at build time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GrowthPolicy {
    pub(crate) growth: Growth,
    pub(crate) max_memory: Option<usize>,
    pub(crate) max_false_positive_rate: f64,
}

impl GrowthPolicy {
    /// Whether tables may be replaced (so writers must announce
    /// themselves, `raw::writers`): every policy but `Fixed`.
    pub(crate) fn replaces_tables(&self) -> bool {
        self.growth != Growth::Fixed
    }

    /// The writer announcements a filter under this policy needs.
    pub(crate) fn writers(&self) -> Writers {
        Writers::new(self.replaces_tables())
    }
}

impl Default for GrowthPolicy {
    fn default() -> Self {
        GrowthPolicy {
            growth: Growth::Double,
            max_memory: None,
            max_false_positive_rate: DEFAULT_MAX_FALSE_POSITIVE_RATE,
        }
    }
}

impl LayoutKind {
    /// Expected false-positive rate at `load` after `generation`
    /// doublings: `1 - (1 - 2^g / V)^(2 * b * load)`. The `g` region bits
    /// of a tag are the same for every tag in its buckets, so only `V / 2^g`
    /// tag values tell keys apart there.
    pub(crate) fn false_positive_rate_at(self, generation: u32, load: f64) -> f64 {
        let slots_checked = 2.0 * self.lanes() as f64 * load;
        let match_one = (f64::from(1u32 << generation.min(31)) / self.tag_values() as f64).min(1.0);
        1.0 - (1.0 - match_one).powf(slots_checked)
    }

    /// The rate of a table of `generation` with every slot full, by the
    /// union bound `2 b 2^g / V`: no load passes it, so a cap checked
    /// against it holds at any load (tables fill past their sizing load
    /// before an insert finds no room: a budget reckoned at the sizing
    /// load let a filter capped at 1.5e-4 measure 1.72e-4 when full).
    ///
    /// Not `1 - (1 - 2^g / V)^(2 b)`, which assumes the tags of a pair
    /// independent: `insert_unique` keeps them distinct, and a filter
    /// filled by it with 12-bit tags under a cap of 0.3 measured 0.311
    /// against that formula's 0.272 (an outside test, 2026-12-07). Distinct
    /// tags match a query with probability `2 b 2^g / V` at most, the sum
    /// over the slots; at the default cap the two differ by 0.3%.
    pub(crate) fn bound_at(self, generation: u32) -> f64 {
        let slots_checked = 2.0 * self.lanes() as f64;
        let match_one = f64::from(1u32 << generation.min(31)) / self.tag_values() as f64;
        (slots_checked * match_one).min(1.0)
    }

    /// Most generations a table of this layout may reach: each spends a
    /// tag bit, and at least 4 bits must keep telling tags apart.
    pub(crate) fn max_generation(self) -> u32 {
        geometry::max_generation(self.tag_bits())
    }
}

impl CuckooFilter {
    /// What an insert into `t` (not migrating) does after `ops::insert`
    /// failed with `failure`: `Ok(Some(inserted))` if it got in after all,
    /// `Ok(None)` to retry on the current table (a doubling has begun, or
    /// the table is being replaced), or the refusal.
    ///
    /// A table that cannot grow refuses the insert. If a search failed
    /// (rather than the full hint), it arms the hint, searches once more
    /// and sets the hint only if that search fails too (see `room.rs`),
    /// so that later inserts skip the search until the next remove.
    ///
    /// A refusal because this level may not double again sends the insert
    /// to the level above (`levels.rs`).
    #[cold]
    #[inline(never)]
    pub(crate) fn after_insert_failure(
        &self,
        t: &Table,
        at: Located,
        hash: u64,
        unique: bool,
        failure: InsertFailure,
    ) -> Result<Option<bool>, InsertError> {
        match self.after_insert_failure_here(t, at, hash, unique, failure) {
            Err(refusal) if self.goes_up(&refusal) => self.insert_above(t, hash, unique, refusal),
            other => other,
        }
    }

    /// `after_insert_failure` within this level.
    fn after_insert_failure_here(
        &self,
        t: &Table,
        at: Located,
        hash: u64,
        unique: bool,
        failure: InsertFailure,
    ) -> Result<Option<bool>, InsertError> {
        let searched = match failure {
            InsertFailure::Sealed => return Ok(None),
            InsertFailure::Saturated { copies } => {
                return Err(InsertError::TooManyCopies { copies })
            }
            InsertFailure::Full { searched } => searched,
        };
        let shard = self.counters.shard();
        shard.bump(&shard.full);
        let refusal = match self.grow(t) {
            Ok(()) => return Ok(None),
            Err(e) => e,
        };
        if !searched {
            return Err(refusal);
        }
        match self.search_again_arming(t, at, hash, unique) {
            Ok(inserted) => Ok(Some(inserted)),
            Err(InsertFailure::Full { .. }) => Err(refusal),
            Err(InsertFailure::Saturated { copies }) => Err(InsertError::TooManyCopies { copies }),
            Err(InsertFailure::Sealed) => Ok(None),
        }
    }

    /// After a search in `t` (which may not grow) found no room for `at`:
    /// arms `t`'s full hint, searches once more, and sets the hint if that
    /// search fails too (`Err(Full)`), so that later inserts skip the
    /// search until the next remove (see `room.rs`).
    pub(crate) fn search_again_arming(
        &self,
        t: &Table,
        at: Located,
        hash: u64,
        unique: bool,
    ) -> Result<bool, InsertFailure> {
        let armed = t.room().arm();
        #[cfg(loom)]
        if t.canary == crate::canary::Canary::UncheckedFullHint {
            // Deliberately broken: the hint is set on the first search's
            // failure, which may predate a remove that already checked it.
            t.room().confirm(armed);
            return Err(InsertFailure::Full { searched: true });
        }
        let above = || self.contains_above(hash);
        let again = with_layout!(self, L => ops::insert::<L>(t, at, unique, above, Search::Always, &self.counters));
        if let Err(InsertFailure::Full { .. }) = again {
            t.room().confirm(armed);
        } else {
            t.room().disarm(armed);
        }
        again
    }

    /// Called by an insert that found table `t` full: starts doubling it,
    /// or says why not. `Ok(())` means "retry the insert" (a migration has
    /// begun, or another thread is starting one).
    #[cold]
    pub(crate) fn grow(&self, t: &Table) -> Result<(), InsertError> {
        let refused = |e: InsertError| {
            self.counters.bump_growth_refusals();
            Err(e)
        };
        if self.policy.growth == Growth::Fixed {
            return refused(InsertError::Full);
        }
        let geo = t.geometry();
        let generation = geo.generation() + 1;
        let Ok(next_geo) = geo.doubled(self.layout.tag_bits()) else {
            return refused(InsertError::Full);
        };
        // `checked` keeps the table's bytes below `isize::MAX`.
        let buckets = next_geo.buckets() as usize;
        let next = self.layout.bound_at(generation);
        let max = self.policy.max_false_positive_rate;
        if !self.may_double_to(next) {
            return refused(InsertError::FalsePositiveRateLimit { max, next });
        }
        // Everything held while the doubling migrates: both tables, the
        // migration's state, and the replaced tables still resident.
        let needed = t
            .bytes()
            .saturating_add(Table::bytes_for(buckets))
            .saturating_add(Migration::bytes_for(t.buckets()))
            .saturating_add(self.retired_bytes().1);
        if let Some(max) = self.policy.max_memory {
            if needed > max {
                return refused(self.memory_refusal(max, needed));
            }
        }
        self.start_growth(t, true).or_else(refused)
    }

    /// Allocates `t`'s successor and publishes the migration, then (with
    /// `seal`) seals every old stripe that no writer holds (helpers seal
    /// the rest). `Ok(())` also when another thread
    /// holds the growth claim: the caller retries.
    fn start_growth(&self, t: &Table, seal: bool) -> Result<(), InsertError> {
        let geo = t.geometry();
        // One thread allocates; the others retry until its migration shows.
        if !t.claim_growth() {
            Backoff::default().snooze();
            return Ok(());
        }
        let next_geo = Geometry::new(geo.m0(), geo.generation() + 1, geo.addressing());
        let mut next_table = match Table::new(next_geo) {
            Ok(table) => table,
            Err(e) => {
                t.release_growth_claim();
                return Err(InsertError::AllocationFailed { bytes: e.bytes });
            }
        };
        #[cfg(loom)]
        {
            next_table.canary = t.canary;
        }
        #[cfg(not(loom))]
        let _ = &mut next_table;
        let Some(migration) = Migration::new(t, next_table) else {
            t.release_growth_claim();
            return Err(InsertError::AllocationFailed {
                bytes: t.buckets() / 32,
            });
        };
        if let Err(lost) = t.begin_migration(Box::new(migration)) {
            // Unreachable while the claim is held; handled anyway (dropping
            // the migration drops its successor).
            drop(lost);
            return Ok(());
        }
        if seal {
            let m = t.migration().expect("just published");
            m.seal_all(t);
        }
        Ok(())
    }

    /// Loom models and unit tests only: starts doubling the current table whatever its
    /// load, sealing its stripes now or leaving that to the first helper.
    #[cfg(any(test, loom))]
    #[doc(hidden)]
    pub fn loom_begin_growth(&self, seal: bool) {
        // A fixed filter's operations rely on its table never changing.
        assert!(self.policy.replaces_tables(), "a fixed filter never grows");
        self.start_growth(self.table(), seal)
            .expect("a loom table's successor is tiny");
    }

    /// Loom models only: migrates the chunk of the current table's bucket
    /// `bucket` (the migration must have begun and be sealed), without
    /// installing the successor even if it was the last chunk.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_migrate_chunk_of(&self, bucket: usize) {
        let t = self.table();
        let m = t.migration().expect("a migration has begun");
        let helped = with_layout!(self, L => m.ensure::<L>(t, bucket));
        assert_ne!(
            helped,
            Helped::Nothing,
            "chunk of bucket {bucket} not migrated"
        );
    }

    /// Loom models and unit tests only: drives the current migration to the end.
    #[cfg(any(test, loom))]
    #[doc(hidden)]
    pub fn loom_finish_growth(&self) {
        let _pin = self.writer_pin();
        self.finish_migration();
    }

    /// Loom models only: runs the releases of replaced tables' pages that
    /// waited for writers, if those have finished (as the end of any later
    /// write would).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_collect(&self) {
        drop(self.writer_pin());
    }

    /// A writer's bounded share of the migration of `t`: one chunk; then,
    /// if the migration is complete, installs the successor.
    pub(crate) fn help_migration(&self, t: &Table, m: &Migration) {
        with_layout!(self, L => { m.help::<L>(t); });
        self.install_if_done(t, m);
    }

    /// Installs `m`'s successor as the current table once every chunk is
    /// done, and schedules the release of `t`'s bucket pages. Idempotent:
    /// one thread's CAS wins.
    pub(crate) fn install_if_done(&self, t: &Table, m: &Migration) {
        // `is_done` loads with Acquire, so this thread has seen every
        // chunk's successor stores before it publishes the successor.
        if !m.is_done() || !self.tables.install(t, m) {
            return;
        }
        self.counters.bump_growths();
        let Some(release) = t.release_handle() else {
            return;
        };
        #[cfg(loom)]
        if t.canary == crate::canary::Canary::ImmediateRelease {
            // Deliberately broken: released while an announced writer may
            // still be about to CAS into the table.
            release.run();
            return;
        }
        // Deferred until no write that began before the install is still
        // running: a writer that loaded `t` announced itself before that
        // load, so it never writes a released word (readers need no such
        // wait: `raw/tables.rs`).
        self.writers.release_when_quiet(release);
    }

    /// Drives the migration of the current table (if any) to completion:
    /// for operations that need one stable table (`clear`, snapshots).
    pub(crate) fn finish_migration(&self) {
        let mut backoff = Backoff::default();
        loop {
            let t = self.table();
            let Some(m) = t.migration() else {
                return;
            };
            let helped = with_layout!(self, L => m.help::<L>(t));
            self.install_if_done(t, m);
            if helped == Helped::Nothing {
                // Every chunk is claimed; wait for their owners to finish.
                backoff.snooze();
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fpr_estimate_doubles_per_generation_and_matches_the_documented_caps() {
        let l16 = LayoutKind::Tags16x4;
        let base = l16.false_positive_rate_at(0, 0.95);
        assert!((base - 1.16e-4).abs() < 0.02e-4, "{base}");
        for g in 1..6 {
            let ratio =
                l16.false_positive_rate_at(g, 0.95) / l16.false_positive_rate_at(g - 1, 0.95);
            assert!((1.95..2.01).contains(&ratio), "g {g}: ratio {ratio}");
        }
        // The default cap allows 6 doublings with 16-bit tags, 2 with 12-bit.
        let cap = DEFAULT_MAX_FALSE_POSITIVE_RATE;
        assert!(l16.bound_at(6) <= cap);
        assert!(l16.bound_at(7) > cap);
        let l12 = LayoutKind::Tags12x5;
        assert!(l12.bound_at(2) <= cap);
        assert!(l12.bound_at(3) > cap);
    }

    /// Tables replaced by doublings stay allocated (lookups hold no pin),
    /// bounded by the current table's size; once no writer can reach them,
    /// doubled ones of 32 KiB or more give their pages back, after which
    /// their words read 0 and their sealed stripes send any late read
    /// elsewhere.
    #[test]
    fn replaced_tables_are_kept_bounded_and_their_pages_released() {
        let f = CuckooFilter::builder()
            .capacity(500_000)
            .seed(3)
            .build()
            .unwrap();
        let first = f.table();
        let keys = 2_100_000u64;
        for k in 0..keys {
            f.insert(&k).unwrap();
        }
        assert_eq!(f.generation(), 3, "three doublings");
        let s = f.stats();
        let retired: Vec<&Table> = f.tables.retired().collect();
        assert_eq!(retired.len(), 3);
        assert!(std::ptr::eq(retired[0], first));
        let all: usize = retired
            .iter()
            .map(|t| t.bytes() + t.migration().map_or(0, |m| m.bytes()))
            .sum();
        assert_eq!(s.retired_bytes, all);
        assert!(s.retired_bytes < s.memory_bytes, "{s:?}");
        // The release waits only for writes of this filter that were in
        // progress when the table was replaced: here the one that replaced
        // it, so the pages went back when that insert returned.
        // Doubled tables' words are mapped (from 32 KiB up), so both
        // doubled tables gave theirs back; the first table's are heap
        // memory and stay.
        assert!(!retired[0].is_released());
        let doubled = &retired[1..];
        assert!(retired[2].bytes() >= crate::memory::HUGE_PAGE_MIN_BYTES);
        assert!(retired[1].bytes() < crate::memory::HUGE_PAGE_MIN_BYTES);
        let s = f.stats();
        if cfg!(target_os = "linux") {
            assert!(doubled.iter().all(|t| t.is_released()));
            let words: usize = doubled.iter().map(|t| t.buckets() * 8).sum();
            assert_eq!(s.retired_resident_bytes, s.retired_bytes - words, "{s:?}");
            // Relaxed: only this thread writes now.
            assert!(doubled
                .iter()
                .flat_map(|t| t.words())
                .all(|w| w.load(crate::sync::Ordering::Relaxed) == 0));
        }
        // A late lookup in any replaced table never trusts what it reads
        // there: every stripe is sealed.
        for t in &retired {
            for k in (0..keys).step_by(997) {
                let at = with_layout!(f, L => t.geometry().locate::<L>(f.hash(&k)));
                let read = with_layout!(f, L => ops::contains::<L>(t, at));
                assert!(read == Ok(true) || read == Err(crate::raw::ops::Sealed));
            }
        }
        assert!((0..keys).all(|k| f.contains(&k)));
    }

    /// A key at the copy limit (7 of the pair's 8 lanes) is refused during
    /// a doubling too: the migrating insert reads the pair where its tags
    /// are now (old words, or the successor's once forwarded) and never
    /// fills it with one tag, which would leave the successor pair full
    /// for good (every copy of a tag moves to one successor pair).
    #[test]
    fn a_key_at_the_copy_limit_is_refused_mid_doubling() {
        let f = CuckooFilter::builder()
            .capacity(4000)
            .seed(5)
            .build()
            .unwrap();
        let key = "the same key";
        for _ in 0..7 {
            f.insert(key).unwrap();
        }
        assert_eq!(f.insert(key), Err(InsertError::TooManyCopies { copies: 7 }));
        for k in 0..1000u32 {
            f.insert(&k).unwrap();
        }
        f.loom_begin_growth(false);
        assert!(f.stats().migrating);
        assert_eq!(f.insert(key), Err(InsertError::TooManyCopies { copies: 7 }));
        f.loom_finish_growth();
        assert_eq!(f.generation(), 1);
        assert_eq!(f.insert(key), Err(InsertError::TooManyCopies { copies: 7 }));
        assert_eq!(f.count(key), 7);
        assert_eq!(f.len(), 1007);
        assert!((0..1000u32).all(|k| f.contains(&k)));
    }
}
