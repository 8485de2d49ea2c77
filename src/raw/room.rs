//! The full hint: lets a table that cannot grow refuse an insert without a
//! displacement search.
//!
//! At its growth cap (or with `Growth::Fixed`) a table refuses an insert
//! whose two buckets are full once a bounded search finds no path to a
//! free lane. That search reads up to a thousand buckets, about 10 us. A
//! full table stays full until something is removed, so once one search
//! has failed, the inserts after it would mostly search in vain.
//!
//! # Semantics
//!
//! The hint is *full* from the moment an insert's search failed (and growth
//! was refused) until the next remove (or `clear`) of this table. While it
//! is full, an insert still takes a free lane of either of its own two
//! buckets (one CAS, as always), but is refused instead of searching. So a
//! table that cannot grow accepts an insert iff
//!
//! * one of its two buckets has a free lane, or
//! * a search finds room, and no search has failed since the last remove.
//!
//! Under concurrency, "since the last remove" is exact in the direction
//! that matters: an insert refused by the hint was refused because a search
//! that saw every remove completed before that insert began found no room
//! (for its own key). A remove that frees a lane thus always lets later
//! inserts search again, and one that frees a lane in an insert's own pair
//! lets it in without a search.
//!
//! # Protocol
//!
//! An insert whose search failed *arms* the hint (a fresh sequence number,
//! state `ARMING`), issues a `SeqCst` fence, searches once more, and only
//! if that search fails too turns its own armed value into `FULL` by CAS.
//! A remove, after the CAS that freed a lane, issues a `SeqCst` fence and
//! loads the hint; if it is armed or full, it clears it. By the two
//! fences (Dekker), either the remove's load sees the arming, and its clear
//! makes the armer's CAS fail, or the armer's second search sees the freed
//! lane. A remove that finds the hint clear writes nothing, so removes do
//! not contend on it; its cost is the fence.

use crate::sync::{fence, AtomicU64, Ordering};

/// The state bits of the hint word; the rest is a sequence number that
/// every arming increments, so each armed value is unique.
const STATE: u64 = 0b11;
const CLEAR: u64 = 0;
const ARMING: u64 = 1;
const FULL: u64 = 2;
const NEXT_ARMING: u64 = STATE + 1;

/// Whether inserts into one table may skip the displacement search.
pub(crate) struct RoomHint(AtomicU64);

/// An armed hint, from [`RoomHint::arm`].
#[derive(Clone, Copy, Debug)]
#[must_use]
pub(crate) struct Armed(u64);

impl RoomHint {
    pub(crate) fn new() -> Self {
        RoomHint(AtomicU64::new(CLEAR))
    }

    /// Whether a search failed after the last remove: an insert whose
    /// buckets are full may be refused without searching.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        // Relaxed: the fences in `arm` and `note_freed` carry the proof (see
        // the module docs); a reader that happens after a remove reads its
        // clear or a later value by coherence alone.
        self.0.load(Ordering::Relaxed) & STATE == FULL
    }

    /// Announces that the caller's search failed and growth was refused.
    /// Search again after this, then [`confirm`](Self::confirm) on failure
    /// or [`disarm`](Self::disarm) on success.
    pub(crate) fn arm(&self) -> Armed {
        // Relaxed: the fence below orders it; the RMW only has to make
        // the armed value unique (sequence numbers never repeat, since
        // every write to the word is an RMW).
        let prev = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(((v & !STATE).wrapping_add(NEXT_ARMING)) | ARMING)
            })
            .unwrap_or_else(|v| v);
        // SeqCst fence: pairs with the one in `note_freed`. Either that
        // remove's load of the hint sees this arming, or the caller's next
        // search sees the lane the remove freed (see the module docs).
        fence(Ordering::SeqCst);
        Armed(((prev & !STATE).wrapping_add(NEXT_ARMING)) | ARMING)
    }

    /// The second search failed too: the hint becomes full, unless a
    /// remove cleared it (or another insert re-armed it) in the meantime.
    pub(crate) fn confirm(&self, armed: Armed) {
        // Relaxed: see `is_full`. Failure is fine: the hint stays clear.
        let _ = self.0.compare_exchange(
            armed.0,
            (armed.0 & !STATE) | FULL,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The second search found room: the hint goes back to clear (if it is
    /// still this arming).
    pub(crate) fn disarm(&self, armed: Armed) {
        // Relaxed: as in `confirm`.
        let _ = self.0.compare_exchange(
            armed.0,
            armed.0 & !STATE,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// A lane of this table was freed (by a remove or `clear`): inserts
    /// must search again. Call after the CAS that freed the lane.
    #[inline]
    pub(crate) fn note_freed(&self) {
        // SeqCst fence: pairs with the one in `arm` (Dekker): either the
        // load below sees an arming that precedes it, or that armer's
        // second search sees the freed lane.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence.
        if self.0.load(Ordering::Relaxed) & STATE != CLEAR {
            // Relaxed: ordered by the fence; an RMW, so an armer's CAS
            // from the value it armed fails after it.
            let _ = self
                .0
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    (v & STATE != CLEAR).then_some(v & !STATE)
                });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn full_only_after_a_confirmed_arming_and_until_a_free() {
        let h = RoomHint::new();
        assert!(!h.is_full());
        let a = h.arm();
        assert!(!h.is_full(), "armed is not full yet");
        h.confirm(a);
        assert!(h.is_full());
        h.note_freed();
        assert!(!h.is_full());

        // A free between arming and confirming wins.
        let a = h.arm();
        h.note_freed();
        h.confirm(a);
        assert!(!h.is_full());

        // An older arming cannot confirm over a newer one.
        let old = h.arm();
        let new = h.arm();
        h.confirm(old);
        assert!(!h.is_full());
        h.confirm(new);
        assert!(h.is_full());

        // A successful second search clears its own arming only.
        h.note_freed();
        let a = h.arm();
        h.disarm(a);
        assert!(!h.is_full());
        h.confirm(a);
        assert!(!h.is_full(), "a disarmed value cannot be confirmed");
    }
}
