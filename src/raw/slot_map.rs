//! The slot map of a level grown by regions (`raw/regions.rs`): which
//! region each virtual slot's tags live in, and the [`Pin`] through which
//! a region's displacements ask it. Below both the regions and their
//! tables, which each read it.
//!
//! A level's map grows with its regions ([`SlotMaps::double`]): a step's
//! claimant replaces it by one of twice the slots, each slot's entry
//! copied to its two halves. Replaced maps are kept until the level drops
//! (a reader may still hold one); all of them together are smaller than
//! the last.

use crate::sync::{AtomicPtr, AtomicU32, Mutex, Ordering};
use std::sync::Arc;

mod failed;

pub(crate) use failed::FailedSlots;

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

/// Log2 of the slots of a level's first map: 256 bytes of entries. (Under
/// loom the first map has the most slots, so that models never double it
/// unless they ask to, [`first_slots`].)
#[cfg(not(loom))]
const FIRST_SLOT_BITS: u32 = 6;
#[cfg(loom)]
const FIRST_SLOT_BITS: u32 = MAX_SLOT_BITS;

/// Slots a growing map keeps per region: a step balances the regions'
/// loads to within a slot, a thirty-second of a region's share.
#[cfg(not(loom))]
const GROWING_SLOTS_PER_REGION: usize = 32;
/// (Under loom one: models R11 and R12 start from a map of two slots,
/// which two regions keep and the third doubles.)
#[cfg(loom)]
const GROWING_SLOTS_PER_REGION: usize = 1;

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

/// The slots of a level's first map, for a level of at most
/// `max_regions` regions.
pub(crate) fn first_slots(max_regions: usize) -> usize {
    (1 << FIRST_SLOT_BITS).min(slots_for(max_regions))
}

/// The slots a level of at most `max_regions` regions wants its map to
/// have once it has `regions`: [`GROWING_SLOTS_PER_REGION`] per region, a
/// power of two, at most [`slots_for`]. (A map never shrinks: a first map
/// has [`first_slots`] even if it wants fewer.)
pub(crate) fn slots_wanted(regions: usize, max_regions: usize) -> usize {
    regions
        .saturating_mul(GROWING_SLOTS_PER_REGION)
        .next_power_of_two()
        .min(slots_for(max_regions))
}

/// Heap bytes of every map a level of at most `max_regions` regions has
/// had once it has `regions` (from its first, doubled as
/// [`slots_wanted`] asks).
// Tests only.
#[cfg(test)]
pub(crate) fn maps_bytes(regions: usize, max_regions: usize) -> usize {
    let first = first_slots(max_regions);
    bytes_for(first) + doublings_bytes(first, slots_wanted(regions, max_regions))
}

/// Bytes of the maps that doubling a map of `slots` slots until it has
/// `want` adds (each doubling's map stays with the level).
pub(crate) fn doublings_bytes(mut slots: usize, want: usize) -> usize {
    let mut bytes = 0;
    while slots < want {
        slots *= 2;
        bytes += bytes_for(slots);
    }
    bytes
}

/// Whether a map may have `slots` slots: a power of two up to
/// [`MAX_SLOTS`].
pub(crate) fn valid_slots(slots: usize) -> bool {
    slots.is_power_of_two() && slots <= MAX_SLOTS
}

// Persistence only, which loom builds leave out.
#[cfg(not(loom))]
/// Whether a file's map may have `slots` slots (one `slots_for` can
/// give): version 4 files hold maps of `2^10` to `2^14` slots, and a
/// smaller map is saved as the larger one it stands for.
pub(crate) fn valid_saved_slots(slots: usize) -> bool {
    valid_slots(slots) && slots >= 1 << MIN_SLOT_BITS
}

/// An entry's bit that says a step's end is joining the slot (see
/// `end_step`): readers ignore it and read both regions, as for any split
/// slot; a stale insert that needs the slot split clears it.
pub(crate) const JOINING: u32 = 1 << 31;

/// An entry's bit that says the map is being replaced by one of twice
/// its slots (see [`SlotMaps::double`]): the entry no longer changes, and
/// a writer that finds it writes into the next map instead. Readers
/// ignore it. (Bit 15: region indices fit in 15 bits.)
pub(crate) const FROZEN: u32 = 1 << 15;

/// A new map's entry that its doubling has not copied yet. Never an
/// entry's value: `cur` would be `2^15 - 1`, past [`MAX_REGIONS`].
const UNSET: u32 = u32::MAX;

const _: () = assert!(MAX_REGIONS < FROZEN as usize);

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

    /// The entry of word `v`, whether or not it is [`JOINING`] or
    /// [`FROZEN`].
    pub(super) fn unpack(v: u32) -> Entry {
        Entry {
            cur: (v & (FROZEN - 1)) as usize,
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

/// One map of a level: an entry and a failure mark per slot.
pub(crate) struct SlotMap {
    entries: Box<[AtomicU32]>,
    /// The slots whose hops found no room in the running step: its end
    /// leaves them split.
    pub(crate) failed: FailedSlots,
    /// The map replacing this one, from the start of its doubling (null
    /// before): where a writer that finds an entry [`FROZEN`] writes.
    next: AtomicPtr<SlotMap>,
}

impl SlotMap {
    /// A map of `slots` slots (see [`valid_slots`]), each entry `value`.
    fn filled(slots: usize, value: u32) -> SlotMap {
        assert!(valid_slots(slots), "{slots} slots");
        SlotMap {
            entries: (0..slots).map(|_| AtomicU32::new(value)).collect(),
            failed: FailedSlots::new(slots),
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// A map of `slots` slots, every one in region 0.
    pub(super) fn new(slots: usize) -> SlotMap {
        Self::filled(slots, 0)
    }

    /// Its slots.
    #[inline(always)]
    pub(crate) fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Heap bytes of its entries and marks.
    pub(crate) fn bytes(&self) -> usize {
        bytes_for(self.slots())
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

    /// Copies `value` (an entry of the map this one replaces, not
    /// [`FROZEN`]) into `slot` unless its doubling or a writer did first.
    fn fill(&self, slot: usize, value: u32) {
        debug_assert_eq!(value & FROZEN, 0);
        // Release: pairs with the Acquire load of a writer that finds the
        // entry set (`successor`); the map's readers get it through the
        // Release store of `SlotMaps::current`. Relaxed on failure: set
        // already, by the other of the two (the same value), or changed
        // since by a writer, which must stay.
        let _ =
            self.entries[slot].compare_exchange(UNSET, value, Ordering::Release, Ordering::Relaxed);
    }

    /// The entry a reader takes for `tag` of the pair whose lower bucket
    /// is `low`, with the map and slot it comes from: this map's, or, if
    /// it is [`FROZEN`] (a step's claimant is doubling this map), the next
    /// map's once the doubling or a writer copied it there. A stale insert
    /// may split the slot in the next map before the claimant publishes it
    /// (`keep_split`, then the insert returns): a lookup after that return
    /// still loads this map, finds the entry frozen, and must read the
    /// split (found by review, 2026-12-07: a false negative until the
    /// claimant publishes, forever if it stopped there).
    #[inline(always)]
    pub(crate) fn entry_for(&self, tag: u64, low: usize) -> (&SlotMap, usize, Entry) {
        let slot = self.slot_of(tag, low);
        // Acquire: pairs with the Release entry writes (the regions they
        // name published before) and with a doubling's freeze (its `next`).
        let v = self.at(slot).load(Ordering::Acquire);
        if v & FROZEN == 0 {
            return (self, slot, Entry::unpack(v));
        }
        self.entry_after_freeze(tag, low, slot, v)
    }

    /// [`entry_for`](Self::entry_for)'s entry alone: what lookups,
    /// counts, removes and an insert's put need. (Its rare path returns
    /// the entry in registers; the whole triple goes through memory, which
    /// cost a region level's lookup 10 instructions.)
    #[inline(always)]
    pub(crate) fn entry_only(&self, tag: u64, low: usize) -> Entry {
        let slot = self.slot_of(tag, low);
        // Acquire: as in `entry_for`.
        let v = self.at(slot).load(Ordering::Acquire);
        if v & FROZEN == 0 {
            return Entry::unpack(v);
        }
        self.entry_only_after_freeze(tag, low, slot, v)
    }

    /// [`entry_after_freeze`](Self::entry_after_freeze)'s entry alone.
    #[cold]
    #[inline(never)]
    fn entry_only_after_freeze(&self, tag: u64, low: usize, slot: usize, frozen: u32) -> Entry {
        self.entry_after_freeze(tag, low, slot, frozen).2
    }

    /// [`entry_for`](Self::entry_for) past a frozen entry `frozen` of
    /// `slot`: the next map's entry of the key's half, unless none was
    /// copied there yet (then `frozen` is the newest: a split is written
    /// there only after the copy).
    #[cold]
    fn entry_after_freeze(
        &self,
        tag: u64,
        low: usize,
        slot: usize,
        frozen: u32,
    ) -> (&SlotMap, usize, Entry) {
        let (mut map, mut slot, mut v) = (self, slot, frozen);
        loop {
            let next = map.next_after_freeze();
            let half = next.slot_of(tag, low);
            // Acquire: as in `entry_for`.
            let w = next.at(half).load(Ordering::Acquire);
            if w == UNSET {
                return (map, slot, Entry::unpack(v));
            }
            if w & FROZEN == 0 {
                return (next, half, Entry::unpack(w));
            }
            // Doubled again in the same claim: follow on.
            (map, slot, v) = (next, half, w);
        }
    }

    /// The map replacing this one, for a thread that loaded one of its
    /// entries [`FROZEN`].
    fn next_after_freeze(&self) -> &SlotMap {
        // Acquire: the caller's load saw the freeze (an AcqRel RMW made
        // after the store of `next`); this fence makes that store visible
        // to a Relaxed load too.
        crate::sync::fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        let p = self.next.load(Ordering::Relaxed);
        debug_assert!(!p.is_null(), "an entry frozen before its next map was set");
        // SAFETY: `next` is set once, by `SlotMaps::double`, to a map that
        // `SlotMaps::all` owned before the store and keeps until the level
        // drops; `self` is one of that level's maps, so the level outlives
        // this borrow.
        unsafe { &*p }
    }

    /// The map that replaces this one, for a writer whose entry load in
    /// `slot` saw `frozen` (with [`FROZEN`]): with the entries of
    /// `slot`'s two halves copied (by this writer if the doubling has not
    /// yet), so the writer can go on there.
    pub(super) fn successor(&self, slot: usize, frozen: u32) -> &SlotMap {
        debug_assert_ne!(frozen & FROZEN, 0);
        let next = self.next_after_freeze();
        let value = frozen & !FROZEN;
        next.fill(2 * slot, value);
        next.fill(2 * slot + 1, value);
        next
    }
}

/// Heap bytes of the entries and marks of a map of `slots` slots.
pub(crate) fn bytes_for(slots: usize) -> usize {
    slots * std::mem::size_of::<u32>() + FailedSlots::bytes_for(slots)
}

/// Where a boxed map lives: the pointer `SlotMaps` publishes. Only ever
/// read through as a shared reference.
fn address(map: &SlotMap) -> *mut SlotMap {
    map as *const SlotMap as *mut SlotMap
}

/// A level's maps: the current one, and every one it replaced.
pub(crate) struct SlotMaps {
    /// The map readers use. Replaced only by a step's claimant, before the
    /// step's entries and bump.
    current: AtomicPtr<SlotMap>,
    /// Every map, oldest first, kept until drop: readers take no pins, so a
    /// replaced map stays readable. (Boxed: a map's address must not move
    /// when the vector grows.)
    #[allow(clippy::vec_box)]
    all: Mutex<Vec<Box<SlotMap>>>,
    /// 1 from a step's allocation to its end: only then can a tag be pinned
    /// (outside a step no sweep runs, and a split slot's tags may move
    /// freely inside its `prev`). Lets a displacement's search skip the
    /// pin check of every tag it visits outside steps.
    pinning: AtomicU32,
}

impl SlotMaps {
    /// The maps of a level whose first map is `first`.
    pub(super) fn new(first: SlotMap) -> SlotMaps {
        let all = vec![Box::new(first)];
        let p = address(&all[0]);
        SlotMaps {
            current: AtomicPtr::new(p),
            all: Mutex::new(all),
            pinning: AtomicU32::new(0),
        }
    }

    /// The current map.
    #[inline(always)]
    pub(crate) fn current(&self) -> &SlotMap {
        // Acquire: pairs with the Release store in `double`, so the map's
        // copied entries are seen.
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: `current` always points to a map that `all` owns, and
        // `all` drops its maps only when `self` drops, which cannot happen
        // while `&self` lives.
        unsafe { &*p }
    }

    /// Heap bytes of every map, the replaced ones included.
    pub(crate) fn bytes(&self) -> usize {
        let all = self
            .all
            .lock()
            .expect("no doubling panics holding the maps");
        all.iter().map(|m| m.bytes()).sum()
    }

    /// Replaces the current map by one of twice its slots, slot `s`'s
    /// entry copied into `2s` and `2s + 1` (the halves [`slot_of`] gives
    /// it there). Only a step's claimant calls it, with no step running,
    /// before it publishes its regions and entries.
    ///
    /// The only writers it can race are stale inserts keeping a slot split
    /// (`keep_split`). Each entry is frozen by an RMW before it is copied:
    /// a writer's CAS either comes first (the copy carries it) or fails on
    /// the frozen value, and the writer goes on in the next map
    /// ([`SlotMap::successor`]), copying the entry there itself if this
    /// thread has not yet. Readers of the old map read the frozen values,
    /// which are the entries as they were: a reader that loaded the map
    /// before this step's bump re-reads if its answer depended on it.
    ///
    /// `unfrozen` is the `UnfrozenDoubling` canary: a copy without the
    /// freeze, which loses a split made after it.
    pub(super) fn double(&self, #[cfg(loom)] unfrozen: bool) {
        let old = self.current();
        let slots = old.slots() * 2;
        // Owned by `all` before anyone can reach it through `next`.
        let p = {
            let mut all = self
                .all
                .lock()
                .expect("no doubling panics holding the maps");
            all.push(Box::new(SlotMap::filled(slots, UNSET)));
            address(all.last().expect("just pushed"))
        };
        // Relaxed: published by the freezes below (their Release half).
        old.next.store(p, Ordering::Relaxed);
        // SAFETY: `all` owns the map (above) until `self` drops.
        let new = unsafe { &*p };
        for slot in 0..old.slots() {
            #[cfg(loom)]
            if unfrozen {
                // Relaxed: the canary's broken copy.
                new.fill(2 * slot, old.at(slot).load(Ordering::Relaxed));
                new.fill(2 * slot + 1, old.at(slot).load(Ordering::Relaxed));
                continue;
            }
            // AcqRel: Release publishes `next` to a writer whose load sees
            // the freeze; Acquire sees a split that a writer's Release CAS
            // made before.
            let v = old.at(slot).fetch_or(FROZEN, Ordering::AcqRel) & !FROZEN;
            new.fill(2 * slot, v);
            new.fill(2 * slot + 1, v);
        }
        crate::raw::pause::here(
            crate::raw::pause::Point::MapDoubled,
            crate::raw::pause::At {
                a: old.slots(),
                b: slots,
                tag: 0,
            },
        );
        // Release: pairs with the Acquire load in `current`: a reader of
        // the new map sees every entry copied above.
        self.current.store(p, Ordering::Release);
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
}

/// What a region's displacements ask before moving a tag (`path.rs`):
/// whether the running step is moving the tag's slot out of this region.
pub(crate) struct Pin {
    maps: Arc<SlotMaps>,
    region: usize,
    /// The `Unpinned` canary: nothing is ever pinned.
    #[cfg(loom)]
    ignored: bool,
}

impl Pin {
    /// Region `region`'s pin. `ignored` is the `Unpinned` canary.
    pub(super) fn new(maps: Arc<SlotMaps>, region: usize, #[cfg(loom)] ignored: bool) -> Pin {
        Pin {
            maps,
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
        if self.maps.pinning.load(Ordering::Acquire) == 0 {
            return false;
        }
        // The current map: no step doubles it while one runs.
        let map = self.maps.current();
        // Relaxed: the search only plans with it; `path::unpin_or_undo`
        // loads it after a SeqCst fence, which carries the ordering.
        let e = map.load(map.slot_of(tag, i.min(j)), Ordering::Relaxed);
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
            assert!(valid_saved_slots(slots));
            assert!(max_regions <= slots, "a region per slot at least");
        }
        for slots in [0, 512, 3000, 1 << 15] {
            assert!(!valid_saved_slots(slots), "{slots}");
        }
        assert!(valid_slots(64) && !valid_slots(3000) && !valid_slots(1 << 15));
    }

    /// A level's map starts at 64 slots (264 bytes with its marks, not
    /// 16.5 KiB) and doubles to keep 32 slots per region, up to the slots
    /// of its most regions; every map it had costs less than twice the
    /// last.
    #[test]
    fn a_levels_map_grows_with_its_regions() {
        assert_eq!(first_slots(413), 64);
        assert_eq!(bytes_for(64), 264);
        for (regions, slots) in [
            (1, 32),
            (2, 64),
            (3, 128),
            (5, 256),
            (65, 4096),
            (128, 4096),
        ] {
            assert_eq!(slots_wanted(regions, 413), slots, "{regions} regions");
        }
        assert_eq!(slots_wanted(413, 413), slots_for(413));
        assert_eq!(maps_bytes(2, 413), bytes_for(64));
        assert_eq!(maps_bytes(3, 413), bytes_for(64) + bytes_for(128));
        assert!(maps_bytes(413, 413) < 2 * bytes_for(slots_for(413)));
        // A level that may have few regions starts at its most slots.
        assert_eq!(first_slots(1), 64);
        assert_eq!(slots_wanted(1, 1), 32);
    }

    /// A doubled map names, for every tag and pair, the region the map it
    /// replaced named (each slot's entry copied to its two halves), and
    /// freezes the old entries; a writer that finds one frozen reaches the
    /// new map through `successor`.
    #[test]
    fn a_doubled_map_keeps_every_slots_regions() {
        let first = SlotMap::new(64);
        for s in 0..64 {
            let e = Entry {
                cur: s % 5,
                prev: s % 3,
            };
            first.at(s).store(e.pack(), Ordering::Relaxed);
        }
        let maps = SlotMaps::new(first);
        let old = maps.current();
        maps.double(
            #[cfg(loom)]
            false,
        );
        let new = maps.current();
        assert_eq!(new.slots(), 128);
        for tag in (1..1u64 << 21).step_by(4099) {
            for low in [0, 3, 64, 1000] {
                let (s_old, s_new) = (old.slot_of(tag, low), new.slot_of(tag, low));
                assert_eq!(
                    old.load(s_old, Ordering::Relaxed),
                    new.load(s_new, Ordering::Relaxed)
                );
                let v = old.at(s_old).load(Ordering::Relaxed);
                assert_ne!(v & FROZEN, 0, "slot {s_old} not frozen");
                assert!(std::ptr::eq(old.successor(s_old, v), new));
            }
        }
        assert_eq!(maps.bytes(), bytes_for(64) + bytes_for(128));
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
