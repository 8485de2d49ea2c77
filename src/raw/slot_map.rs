//! The slot map of a level grown by regions (`raw/regions.rs`): which
//! region each virtual slot's tags live in, and the [`Pin`] through which
//! a region's displacements ask it. Below both the regions and their
//! tables, which each read it.

use crate::sync::{AtomicU32, Ordering};
use std::sync::Arc;

/// Log2 of the most virtual slots a level's map may have: `2^14` entries
/// of 4 bytes stay in L1.
#[cfg(not(loom))]
const MAX_SLOT_BITS: u32 = 14;
#[cfg(loom)]
const MAX_SLOT_BITS: u32 = 2;

/// Log2 of the fewest virtual slots a level's map has.
#[cfg(not(loom))]
const MIN_SLOT_BITS: u32 = 10;
#[cfg(loom)]
const MIN_SLOT_BITS: u32 = 2;

/// The most virtual slots a level's map may have.
pub(crate) const MAX_SLOTS: usize = 1 << MAX_SLOT_BITS;

/// Slots a map gives each region of a level at its most regions: enough
/// for a step to balance the regions' loads slot by slot (lab
/// `region_growth`, a filter for 1,000 keys grown 10,000x: 1.49x the
/// bits per key of one built at that size with 10 slots per region, as
/// with 40; 1.52x with 5, and a third level with 2.5).
const SLOTS_PER_REGION: usize = 8;

/// Most regions a level may have: one per slot (a region given no slot
/// would take no key). Region indices fit in 15 bits of an entry.
pub(crate) const MAX_REGIONS: usize = MAX_SLOTS;

/// The slots of the map of a level of at most `max_regions` regions: a
/// power of two from `2^10` to `2^14`, at least [`SLOTS_PER_REGION`] per
/// region where it can. A level's map is its fixed cost (4 bytes of entry
/// and a bit of failure mark a slot), which a small level feels: 96 KiB
/// (with two-byte marks) was 7.9 bits per key of a filter for 1,000 keys
/// grown 100x; 16.5 KiB for `2^12` slots is 1.35.
pub(crate) fn slots_for(max_regions: usize) -> usize {
    max_regions
        .saturating_mul(SLOTS_PER_REGION)
        .min(MAX_SLOTS)
        .next_power_of_two()
        .max(1 << MIN_SLOT_BITS)
}

/// Whether a map may have `slots` slots (one `slots_for` can give).
pub(crate) fn valid_slots(slots: usize) -> bool {
    slots.is_power_of_two() && (1 << MIN_SLOT_BITS..=MAX_SLOTS).contains(&slots)
}

/// An entry's bit that says a step's end is joining the slot (see
/// `end_step`): readers ignore it and read both regions, as for any split
/// slot; a stale insert that needs the slot split clears it.
pub(crate) const JOINING: u32 = 1 << 31;

const _: () = assert!(MAX_REGIONS < 1 << 15);

/// The slot of the tag `tag` whose pair's lower bucket is `low` (a local
/// index), in a map of `slots` slots: the same from either bucket of the
/// pair.
#[inline(always)]
pub(crate) fn slot_of(tag: u64, low: usize, slots: usize) -> usize {
    debug_assert!(slots.is_power_of_two());
    let mut x = ((low as u64) << 21) ^ tag;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    // The top bits: a map of half the slots joins pairs of slots, and
    // one of 2^14 numbers them as every version 4 file does.
    (x >> (64 - slots.trailing_zeros())) as usize
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
    /// 1 from a step's allocation to its end: only then can a tag be pinned
    /// (outside a step no sweep runs, and a split slot's tags may move
    /// freely inside its `prev`). Lets a displacement's search skip the
    /// pin check of every tag it visits outside steps.
    pinning: AtomicU32,
}

impl SlotMap {
    /// A map of `slots` slots (see [`valid_slots`]), every one in region 0.
    pub(super) fn new(slots: usize) -> SlotMap {
        assert!(valid_slots(slots), "{slots} slots");
        SlotMap {
            entries: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            pinning: AtomicU32::new(0),
        }
    }

    /// Sets whether a step runs (see `pinning`): 1 once a step's regions
    /// are allocated, before its entries; 0 at its end, after its joins.
    pub(super) fn set_pinning(&self, on: bool) {
        // Release: pairs with the Acquire load in `Pin::holds`. A hop's
        // check (`path::unpin_or_undo`) loads it after a SeqCst fence that
        // pairs with the bump's fence, which comes after the store of 1, so
        // a hop that may race the sweep sees the step (or its end). A hop
        // that sees the end's 0 then sees every read of the step's sweep
        // done, none of which can see what it writes next.
        self.pinning.store(u32::from(on), Ordering::Release);
    }

    /// Its slots.
    #[inline(always)]
    pub(crate) fn slots(&self) -> usize {
        self.entries.len()
    }

    /// The slot of `tag` whose pair's lower bucket is `low`.
    #[inline(always)]
    pub(crate) fn slot_of(&self, tag: u64, low: usize) -> usize {
        slot_of(tag, low, self.slots())
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
        let e = self
            .map
            .load(self.map.slot_of(tag, i.min(j)), Ordering::Relaxed);
        e.prev == self.region && e.cur != self.region
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A level's map has about eight slots per region it may have, as a
    /// power of two from 2^10 to 2^14: the default cap's 413 regions get
    /// 4,096 slots (16.5 KiB of map and marks, not 66).
    #[test]
    fn a_levels_map_follows_its_most_regions() {
        for (max_regions, slots) in [
            (1, 1 << 10),
            (128, 1 << 10),
            (129, 1 << 11),
            (413, 1 << 12),
            (512, 1 << 12),
            (513, 1 << 13),
            (2048, 1 << 14),
            (MAX_REGIONS, MAX_SLOTS),
        ] {
            assert_eq!(slots_for(max_regions), slots, "{max_regions} regions");
            assert!(valid_slots(slots));
            assert!(max_regions <= slots, "a region per slot at least");
        }
        for slots in [0, 512, 3000, 1 << 15] {
            assert!(!valid_slots(slots), "{slots}");
        }
    }

    /// A smaller map joins pairs of a larger one's slots (the top bits of
    /// one hash), and the largest numbers them as version 4 files do.
    #[test]
    fn a_smaller_map_joins_the_slots_of_a_larger_one() {
        for tag in (1..1u64 << 21).step_by(977) {
            for low in [0, 1, 77, 9_259] {
                let big = slot_of(tag, low, MAX_SLOTS);
                assert!(big < MAX_SLOTS);
                assert_eq!(slot_of(tag, low, 1 << 12), big >> 2);
                assert_eq!(slot_of(tag, low, 1 << 10), big >> 4);
            }
        }
    }
}
