//! Whole-level operations that must see no step: `clear` and a
//! consistent copy (`Clone` of a filter with a region level).

use super::{new_region, Regions, SLOTS};
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
    /// Takes the step claim, helping a running step to its end first.
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
            if !self.help() {
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

    /// A copy of the level: the step claim (a running step helped to its
    /// end), then every region's stripes, lowest region first (the hops'
    /// lock order), then the map and the words. Removes and hops are
    /// excluded while it copies; a plain insert racing it may or may not
    /// be in the copy, as for a table's snapshot.
    pub(crate) fn try_clone(&self) -> Result<Regions, AllocError> {
        let _held = self.hold_steps();
        let count = self.regions();
        let copy = Regions::build(
            self.geo.m0(),
            self.max_regions,
            #[cfg(loom)]
            self.canary,
        )?
        .with_max_bytes(self.max_bytes);
        for r in 1..count {
            let t = new_region(
                copy.geo,
                &copy.map,
                r,
                #[cfg(loom)]
                self.canary,
            )?;
            // Relaxed: the copy is not shared yet; publishing the filter
            // orders these stores.
            copy.tables[r].store(Box::into_raw(Box::new(t)), Ordering::Relaxed);
        }
        copy.count.store(count, Ordering::Relaxed);
        let _all: Vec<_> = (0..count)
            .map(|r| ops::hold_all(self.region(r)).expect("regions are never sealed"))
            .collect();
        let mut items = 0;
        for r in 0..count {
            for (src, dst) in self.region(r).words().iter().zip(copy.region(r).words()) {
                // Relaxed: the stripes held (Acquire) order every hop and
                // remove before this load; a racing plain insert may or
                // may not be seen.
                let w = src.load(Ordering::Relaxed);
                dst.store(w, Ordering::Relaxed);
                items += bucket::occupied::<L21x3>(w) as usize;
            }
        }
        for slot in 0..SLOTS {
            // Relaxed: no step runs (the claim), and stale inserts' splits
            // are inserts racing the copy.
            let v = self.map.at(slot).load(Ordering::Relaxed);
            copy.map.at(slot).store(v, Ordering::Relaxed);
            let f = self.failed[slot].load(Ordering::Relaxed);
            copy.failed[slot].store(f, Ordering::Relaxed);
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
        // Relaxed, all: statistics and state of the unshared copy.
        copy.step
            .store(self.step.load(Ordering::Relaxed), Ordering::Relaxed);
        copy.copies
            .store(self.copies.load(Ordering::Relaxed), Ordering::Relaxed);
        copy.counters.set_len(items as i64);
        Ok(copy)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::Regions;
    use crate::raw::regions::tests::key;

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
}
