//! Whole-level operations that must see no step: `clear` and a
//! consistent copy (`Clone` of a filter with a region level).

use super::{new_region, Regions};
#[cfg(loom)]
use crate::canary::RegionCanary;
use crate::memory::AllocError;
use crate::raw::bucket::{self, L21x3};
use crate::raw::ops;
use crate::sync::{Backoff, Ordering};

/// The step claim, held by a whole-level operation: no step begins (and
/// none runs) until it drops.
struct Held<'a>(&'a Regions);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Release: as in `end_step`: the next claimant sees what the holder
        // did.
        self.0.claim.store(0, Ordering::Release);
    }
}

impl Regions {
    /// Takes the step claim, helping a running step to its end first (as
    /// `finish_step` does: a chunk whose claimant stopped is swept again).
    /// Blocks inserts that need a step while held (they wait for it).
    fn hold_steps(&self) -> Held<'_> {
        let mut backoff = Backoff::default();
        loop {
            // Acquire: pairs with the Release of `end_step` (and of `Held`),
            // so this holder sees the last step's regions and entries.
            if self
                .claim
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Held(self);
            }
            if !self.help_waiting(None) {
                backoff.snooze();
            }
        }
    }

    /// Empties every region (the regions and the map stay). Not atomic as
    /// a whole with respect to concurrent writers, as `ops::clear`.
    pub(crate) fn clear(&self) {
        let _held = self.hold_steps();
        // Ascending: hops go from lower regions to higher ones, so a tag
        // hopping meanwhile is cleared where it lands.
        for r in 0..self.regions() {
            ops::clear(self.region(r)).expect("regions are never sealed");
        }
        self.counters.reset_len();
    }

    /// Runs `f` on the level frozen: the step claim (a running step helped
    /// to its end), then every region's stripes, lowest region first (the
    /// hops' lock order). Removes, hops and steps are excluded while `f`
    /// runs; a plain insert racing it may or may not be seen, as for a
    /// table's snapshot. For a consistent copy, and for saving.
    pub(crate) fn with_frozen<R>(&self, f: impl FnOnce(&Frozen<'_>) -> R) -> R {
        let _held = self.hold_steps();
        let regions = self.regions();
        let _all: Vec<_> = (0..regions)
            .map(|r| ops::hold_all(self.region(r)).expect("regions are never sealed"))
            .collect();
        f(&Frozen {
            level: self,
            regions,
        })
    }

    /// A copy of the level, taken frozen ([`with_frozen`](Self::with_frozen)).
    pub(crate) fn try_clone(&self) -> Result<Regions, AllocError> {
        self.with_frozen(|frozen| {
            let copy = Regions::with_regions(
                self.geo.m0(),
                self.max_regions,
                frozen.regions,
                self.slots(),
                #[cfg(loom)]
                self.canary,
            )?
            .with_max_bytes(self.max_bytes);
            let mut items = 0;
            for r in 0..frozen.regions {
                for (src, dst) in frozen.words(r).iter().zip(copy.region(r).words()) {
                    // Relaxed: the stripes held (Acquire) order every hop and
                    // remove before this load; `copy` is not shared yet.
                    let w = src.load(Ordering::Relaxed);
                    dst.store(w, Ordering::Relaxed);
                    items += bucket::occupied::<L21x3>(w) as usize;
                }
            }
            debug_assert_eq!(copy.slots(), self.slots());
            for slot in 0..self.slots() {
                // Relaxed: the copy is not shared yet.
                copy.map()
                    .at(slot)
                    .store(frozen.entry(slot), Ordering::Relaxed);
            }
            copy.plan
                .lock()
                .expect("no step panics holding the plan")
                .slots
                .clone_from(
                    &self
                        .plan
                        .lock()
                        .expect("no step panics holding the plan")
                        .slots,
                );
            // Relaxed, all: state of the unshared copy, and statistics.
            copy.step
                .store(self.step.load(Ordering::Relaxed), Ordering::Relaxed);
            copy.copies
                .store(self.copies.load(Ordering::Relaxed), Ordering::Relaxed);
            copy.counters.set_len(items as i64);
            Ok(copy)
        })
    }

    /// A level of `regions` zeroed regions of `m0` buckets and a map of
    /// `slots` slots (naming region 0 for every slot): for a copy to fill.
    fn with_regions(
        m0: u64,
        max_regions: usize,
        regions: usize,
        slots: usize,
        #[cfg(loom)] canary: RegionCanary,
    ) -> Result<Regions, AllocError> {
        let level = Regions::build(
            m0,
            max_regions,
            slots,
            #[cfg(loom)]
            canary,
        )?;
        for r in 1..regions {
            let t = new_region(
                level.geo,
                &level.maps,
                r,
                #[cfg(loom)]
                canary,
            )?;
            // Relaxed: the level is not shared yet; publishing it orders
            // these stores.
            level.tables[r].store(Box::into_raw(Box::new(t)), Ordering::Relaxed);
        }
        level.count.store(regions, Ordering::Relaxed);
        Ok(level)
    }
}

/// A level frozen by [`Regions::with_frozen`]: what a copy or a save reads.
pub(crate) struct Frozen<'a> {
    level: &'a Regions,
    regions: usize,
}

impl Frozen<'_> {
    /// Regions of the level.
    // Persistence (task P) only, outside `try_clone`.
    #[allow(dead_code)]
    pub(crate) fn regions(&self) -> usize {
        self.regions
    }

    /// Buckets per region.
    #[allow(dead_code)]
    pub(crate) fn m0(&self) -> u64 {
        self.level.geo.m0()
    }

    /// The entry of `slot`, as saved (`cur | prev << 16`; never joining:
    /// no step runs).
    pub(crate) fn entry(&self, slot: usize) -> u32 {
        // Relaxed: no step runs (the claim); a stale insert's split is an
        // insert racing the freeze.
        self.level.map().at(slot).load(Ordering::Relaxed)
    }

    /// Region `r`'s words.
    pub(crate) fn words(&self, r: usize) -> &[crate::sync::AtomicU64] {
        self.level.region(r).words()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::Regions;
    use crate::raw::regions::tests::key;
    use crate::raw::slot_map::maps_bytes;

    fn keys(seed: u64) -> impl Iterator<Item = u64> {
        (0..).map(move |i| key(seed, i))
    }

    #[test]
    fn a_copy_across_steps_finds_every_key_and_counts_them() {
        let r = Regions::new(64, 64).unwrap();
        let ks: Vec<u64> = keys(3).take(2_000).collect();
        for &k in &ks {
            r.insert(k).unwrap();
        }
        assert!(r.regions() > 1);
        let c = r.try_clone().unwrap();
        assert_eq!((c.regions(), c.len()), (r.regions(), 2_000));
        assert!(ks.iter().all(|&k| c.contains(k)));
        for &k in &ks[..1000] {
            assert!(c.remove(k));
        }
        assert!(ks[1000..].iter().all(|&k| c.contains(k) && r.contains(k)));
        assert!(ks.iter().all(|&k| r.contains(k)));
    }

    #[test]
    fn clear_empties_every_region_and_the_level_takes_keys_again() {
        let r = Regions::new(64, 64).unwrap();
        for k in keys(5).take(1_000) {
            r.insert(k).unwrap();
        }
        r.clear();
        assert_eq!((r.len(), r.occupied()), (0, 0));
        let ks: Vec<u64> = keys(6).take(1_000).collect();
        for &k in &ks {
            r.insert(k).unwrap();
        }
        assert!(ks.iter().all(|&k| r.contains(k)));
    }

    /// A byte budget that pays three regions: the step that would add a
    /// fourth is refused with what the level would need, before it
    /// allocates; the key that needed it is not stored, none other lost.
    #[test]
    fn a_step_the_byte_budget_cannot_pay_is_refused_and_loses_nothing() {
        let probe = Regions::new(64, 64).unwrap();
        let per = probe.region(0).bytes();
        // The maps of three regions and of four (the third doubles it).
        let (map3, map4) = (maps_bytes(3, 64), maps_bytes(4, 64));
        let r = Regions::new(64, 64).unwrap().with_max_bytes(map3 + 3 * per);
        let mut kept = Vec::new();
        let refusal = keys(9)
            .find_map(|k| match r.insert(k) {
                Ok(()) => {
                    kept.push(k);
                    None
                }
                Err(e) => Some((k, e)),
            })
            .unwrap();
        assert_eq!(
            refusal.1,
            super::super::Refused::Memory {
                needed: map4 + 4 * per
            }
        );
        assert_eq!((r.regions(), r.bytes()), (3, map3 + 3 * per));
        assert_eq!(r.len(), kept.len() as i64);
        assert!(kept.iter().all(|&k| r.contains(k)));
        assert_eq!(r.count(refusal.0), usize::from(r.contains(refusal.0)));
    }
}
