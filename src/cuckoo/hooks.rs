//! Test hooks (unit tests and loom models only): hold a bucket pair's
//! version stripe the way a writer does inside its critical section, so a
//! test can show which operations go on meanwhile.

use super::{with_layout, CuckooFilter, LayoutKind};
use crate::raw::bucket::{L12x5, L16x4};
use crate::raw::table::StripeLock;
use crate::sync::epoch;

impl CuckooFilter {
    /// Runs `f` while holding the version stripe of `hash`'s bucket pair in
    /// the current table, exactly as a `remove`, an `insert_unique` or a
    /// displacement hop holds it (odd, not frozen), as if that writer were
    /// preempted inside its critical section for as long as `f` runs.
    ///
    /// # Panics
    ///
    /// If the pair is sealed (its table is being replaced).
    #[doc(hidden)]
    pub fn hold_pair_stripe<R>(&self, hash: u64, f: impl FnOnce() -> R) -> R {
        let guard = epoch::pin();
        let t = self.table(&guard);
        let at = with_layout!(self, L => t.geometry().locate::<L>(hash));
        let _held = StripeLock::acquire(t.stripe(at.i1, at.i2)).expect("pair is not sealed");
        f()
    }
}
