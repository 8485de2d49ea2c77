//! The slot map of a level grown by regions (`raw/regions.rs`): which
//! region each virtual slot's tags live in, and the [`Pin`] through which
//! a region's displacements ask it. Below both the regions and their
//! tables, which each read it.

use crate::sync::{AtomicU32, Ordering};
use std::sync::Arc;

/// Log2 of the virtual slots: `2^14` entries of 4 bytes stay in L1.
#[cfg(not(loom))]
const SLOT_BITS: u32 = 14;
#[cfg(loom)]
const SLOT_BITS: u32 = 2;

/// Virtual slots of the map.
pub(crate) const SLOTS: usize = 1 << SLOT_BITS;

/// Most regions a level may have: one per slot (a region given no slot
/// would take no key). Region indices fit in 15 bits of an entry.
pub(crate) const MAX_REGIONS: usize = SLOTS;

/// An entry's bit that says a step's end is joining the slot (see
/// `end_step`): readers ignore it and read both regions, as for any split
/// slot; a stale insert that needs the slot split clears it.
pub(crate) const JOINING: u32 = 1 << 31;

const _: () = assert!(MAX_REGIONS < 1 << 15);

/// The slot of the tag `tag` whose pair's lower bucket is `low` (a local
/// index): the same from either bucket of the pair.
#[inline(always)]
pub(crate) fn slot_of(tag: u64, low: usize) -> usize {
    let mut x = ((low as u64) << 21) ^ tag;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> (64 - SLOT_BITS)) as usize
}

/// One map entry, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The region new tags of the slot go to.
    pub(crate) cur: usize,
    /// The region the slot is leaving (`cur` if none).
    pub(crate) prev: usize,
}

impl Entry {
    pub(super) fn pack(self) -> u32 {
        debug_assert!(self.cur <= MAX_REGIONS && self.prev <= MAX_REGIONS);
        self.cur as u32 | (self.prev as u32) << 16
    }

    /// The entry of word `v`, whether or not it is [`JOINING`].
    pub(super) fn unpack(v: u32) -> Entry {
        Entry {
            cur: (v & 0xFFFF) as usize,
            prev: ((v & !JOINING) >> 16) as usize,
        }
    }

    pub(super) fn whole(region: usize) -> Entry {
        Entry {
            cur: region,
            prev: region,
        }
    }

    /// Whether the slot has tags in two regions (moving, or split).
    pub(crate) fn is_split(self) -> bool {
        self.cur != self.prev
    }
}

/// The slot map, shared by the level and its regions' pins.
pub(crate) struct SlotMap {
    entries: Box<[AtomicU32]>,
    /// 1 from a step's claim to its end: only then can a tag be pinned
    /// (outside a step no sweep runs, and a split slot's tags may move
    /// freely inside its `prev`). Lets a displacement's search skip the
    /// pin check of every tag it visits outside steps.
    pinning: AtomicU32,
}

impl SlotMap {
    pub(super) fn new() -> SlotMap {
        SlotMap {
            entries: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            pinning: AtomicU32::new(0),
        }
    }

    /// Sets whether a step runs (see `pinning`): 1 at a step's claim,
    /// before its entries; 0 at its end, after its joins.
    pub(super) fn set_pinning(&self, on: bool) {
        // Release: pairs with the Acquire load in `Pin::holds`. A hop's
        // check (`path::unpin_or_undo`) loads it after a SeqCst fence that
        // pairs with the bump's fence, which comes after the store of 1, so
        // a hop that may race the sweep sees the step (or its end). A hop
        // that sees the end's 0 then sees every read of the step's sweep
        // done, none of which can see what it writes next.
        self.pinning.store(u32::from(on), Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn at(&self, slot: usize) -> &AtomicU32 {
        &self.entries[slot]
    }

    /// The entry of `slot`, loaded with `order`.
    #[inline(always)]
    pub(super) fn load(&self, slot: usize, order: Ordering) -> Entry {
        Entry::unpack(self.at(slot).load(order))
    }
}

/// What a region's displacements ask before moving a tag (`path.rs`):
/// whether the running step is moving the tag's slot out of this region.
pub(crate) struct Pin {
    map: Arc<SlotMap>,
    region: usize,
    /// The `Unpinned` canary: nothing is ever pinned.
    #[cfg(loom)]
    ignored: bool,
}

impl Pin {
    /// Region `region`'s pin. `ignored` is the `Unpinned` canary.
    pub(super) fn new(map: Arc<SlotMap>, region: usize, #[cfg(loom)] ignored: bool) -> Pin {
        Pin {
            map,
            region,
            #[cfg(loom)]
            ignored,
        }
    }

    /// Whether `tag` of the pair `{i, j}` is leaving this region.
    #[inline]
    pub(crate) fn holds(&self, tag: u64, i: usize, j: usize) -> bool {
        #[cfg(loom)]
        if self.ignored {
            return false;
        }
        // Acquire: pairs with the Release in `SlotMap::set_pinning`.
        if self.map.pinning.load(Ordering::Acquire) == 0 {
            return false;
        }
        // Relaxed: the search only plans with it; `path::unpin_or_undo`
        // loads it after a SeqCst fence, which carries the ordering.
        let e = self.map.load(slot_of(tag, i.min(j)), Ordering::Relaxed);
        e.prev == self.region && e.cur != self.region
    }
}
