//! Which slots the running step must leave split: a bit per slot, set when
//! a hop of the slot out of its old region finds no room, read by the
//! step's end (`end_step`), cleared when the next step is claimed.

use crate::sync::{AtomicU64, Ordering};

/// A bit per slot of a level's map.
pub(crate) struct FailedSlots {
    words: Box<[AtomicU64]>,
}

impl FailedSlots {
    /// No slot marked, for a map of `slots` slots.
    pub(crate) fn new(slots: usize) -> FailedSlots {
        FailedSlots {
            words: (0..Self::words_for(slots))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    fn words_for(slots: usize) -> usize {
        slots.div_ceil(64)
    }

    /// Heap bytes of the marks of a map of `slots` slots (512 for `2^12`).
    pub(crate) fn bytes_for(slots: usize) -> usize {
        Self::words_for(slots) * std::mem::size_of::<u64>()
    }

    /// Marks `slot`: a hop of it found no room.
    ///
    /// Only a step's own sweepers and inserts mark it while it runs; a
    /// stale one (an insert whose step ended, or a sweeper that outlived
    /// its step, stopped before its mark) may mark it in a later step,
    /// which then keeps the slot split one step longer, lookups reading
    /// both its regions, until the next step's sweep moves what is left:
    /// as an own failure would.
    pub(crate) fn mark(&self, slot: usize) {
        // Relaxed: the callers order it (the sweep's `done` count, the
        // stale insert's fence; see `keep_split` and `sweep_chunk`).
        self.words[slot / 64].fetch_or(1 << (slot % 64), Ordering::Relaxed);
    }

    /// Whether `slot` is marked.
    pub(crate) fn marked(&self, slot: usize) -> bool {
        // Relaxed: as in `mark`.
        self.words[slot / 64].load(Ordering::Relaxed) & 1 << (slot % 64) != 0
    }

    /// Unmarks every slot, by a step's claimant before the step's hops
    /// begin: they come after the step's bump or its sweep's publication,
    /// both after this in the claimant's order, and the last step's end,
    /// which read the marks, came before the claim (its Release store of
    /// the claim, this claimant's Acquire CAS).
    ///
    /// A mark made between two steps is erased here. Only a stale insert
    /// makes one (`keep_split` in `follow`), and that insert then fences
    /// and re-loads the step counter (`fence_after_put`): if its fence
    /// comes before the new step's bump fence, the new step's sweep sees
    /// its tag and its split entry and hops the tag or marks the slot
    /// itself; otherwise the insert sees the new step and hops or marks
    /// again, after this clear (review, 2026-12-07).
    pub(crate) fn clear(&self) {
        for w in self.words.iter() {
            // Relaxed: published with the step (see above).
            w.store(0, Ordering::Relaxed);
        }
    }
}
