//! Test hooks (unit tests and loom models only): hold a bucket pair's
//! version stripe the way a writer does inside its critical section, so a
//! test can show which operations go on meanwhile.

use super::{with_layout, CuckooFilter};
use crate::raw::stripe::StripeLock;

impl CuckooFilter {
    /// Runs `f` while holding the version stripe of `hash`'s bucket pair in
    /// the current table, exactly as a `remove` or an `insert_unique` holds
    /// it, as if that writer were preempted inside its critical section for
    /// as long as `f` runs. (Unit tests stop real writers at chosen steps
    /// with `raw::pause`.)
    ///
    /// # Panics
    ///
    /// If the pair is sealed (its table is being replaced).
    #[doc(hidden)]
    pub fn hold_pair_stripe<R>(&self, hash: u64, f: impl FnOnce() -> R) -> R {
        let t = self.table();
        let at = with_layout!(self, L => t.geometry().locate::<L>(hash));
        let _held = StripeLock::acquire(t.stripe(at.i1, at.i2)).expect("pair is not sealed");
        f()
    }

    /// Loom models only: takes a snapshot as a save does
    /// (`with_snapshot`: finishes a running migration, then holds every
    /// stripe) and reports, for each hash, whether the snapshot's
    /// words hold its tag in its candidate buckets of the snapshot's
    /// geometry, as a filter loaded from the save would.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_snapshot_holds(&self, hashes: &[u64]) -> Vec<bool> {
        use crate::raw::bucket;
        use crate::raw::geometry::Geometry;
        use crate::sync::Ordering;
        self.with_snapshot(|view| {
            let geo = Geometry::new(view.m0, view.generation, self.addressing());
            hashes
                .iter()
                .map(|&h| {
                    with_layout!(self, L => {
                        let at = geo.locate::<L>(h);
                        // Relaxed: as a save reads them (`SnapshotView`).
                        let w1 = view.words[at.i1].load(Ordering::Relaxed);
                        let w2 = view.words[at.i2].load(Ordering::Relaxed);
                        bucket::in_either::<L>(w1, w2, at.tag)
                    })
                })
                .collect()
        })
    }
}
