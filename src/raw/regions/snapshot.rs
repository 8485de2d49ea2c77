//! A level of regions as data: a consistent view of it while writers run
//! (for saving and cloning), and a level rebuilt from saved parts that
//! are checked first, so that no later operation can panic, deadlock or
//! miss a key on what was loaded.
//!
//! # What a snapshot holds
//!
//! [`Regions::with_snapshot`] takes the level's step claim (helping a
//! running step to its end first), then every region's stripes in region
//! order, then copies the map. While it holds them, no step begins or
//! runs, so no entry's `cur` changes and no sweep hops; no hop, remove or
//! displacement moves a tag (each takes a stripe). Plain inserts go on
//! (they take no stripe) and may or may not be in the copy, as for one
//! table (`docs/format.md`, "What save and load guarantee"). Split slots
//! (a hop that found no room) stay split in the copy: lookups of them read
//! both regions after a load as before it.
//!
//! Lock order: a hop holds a stripe of its source region while it takes
//! stripes of a newer one; the snapshot takes regions in index order, so
//! it never holds a newer region's stripe while waiting for an older one.
//!
//! **No entry is joining** (bit 31, [`JOINING`]) once the claim is held:
//! only a step's end sets the bit, under the claim, and it resolves every
//! mark it sets before it lets the claim go: its own CAS from the joining
//! value, or a stale insert's clear (`keep_split`), which its failed CAS
//! read. Both happen before the claim's Release store, which the
//! snapshot's Acquire claim synchronises with, so its entry loads see the
//! resolved values or later ones; and nothing else sets the bit. A joining
//! entry reads as split, so the copy would keep it split even if one
//! appeared: a mask, checked in debug builds.
//!
//! **Tags behind their slot** can be in the words: an insert that
//! loaded its entry before a step puts its tag into the old region after
//! the step ended, then follows it to the slot's new region (a hop, which
//! waits for the snapshot's stripes). Such an insert has not returned, and
//! no lookup reads that region for that slot; the copy keeps the tag where
//! it is, as a level whose inserting thread stopped there would have it:
//! the next step's sweep moves it to its slot's region. A tag in a region
//! *newer* than its slot's `cur` is never there (a slot's `cur` only moves
//! to newer regions, and tags go only to a `cur`), and a sweep would hop
//! it backwards, against the lock order: the loader refuses it.

use super::{
    first_slots, new_region, slot_of, slots_for, slots_wanted, Entry, Plan, Regions, SlotMap,
    SlotMaps, ADDRESSING, JOINING,
};
#[cfg(loom)]
use crate::canary::RegionCanary;
use crate::raw::bucket::{self, L21x3, Layout};
use crate::raw::geometry::{Geometry, GeometryError};
use crate::raw::slot_map::valid_saved_slots;
use crate::raw::table::Table;
use crate::sync::{AtomicU64, Ordering};
use std::sync::Arc;

/// A level's saved state, all but its words: what a file's region record
/// holds before them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RegionsParts {
    /// Buckets per region.
    pub(crate) m0: u64,
    /// Regions allocated, `R`.
    pub(crate) regions: usize,
    /// Most regions the level may have, `R_max`.
    pub(crate) max_regions: usize,
    /// Steps begun (a statistic; each added at least one region).
    pub(crate) steps: u64,
    /// The map: `cur | prev << 16` per slot, `2^10` to `2^14` of them (a
    /// level whose map is smaller saves the one it stands for, of
    /// [`slots_for`] its most regions: see [`RegionsParts::expanded`]).
    pub(crate) entries: Vec<u32>,
    /// Every slot once, grouped by its `cur` region in region order: the
    /// order in which the next step's plan considers them, so that a
    /// loaded level grows as the saved one would have.
    pub(crate) order: Vec<u16>,
}

/// Why saved parts cannot make a level of regions.
#[derive(Debug)]
// Some fields are for `Debug` (tests) only: the file's errors name one.
#[allow(dead_code)]
pub(crate) enum PartsError {
    /// `m0` is odd or out of range.
    M0(u64),
    /// Not `1 <= regions <= max_regions <= slots`.
    Regions { regions: usize, max_regions: usize },
    /// Not a saved map's size (see `valid_saved_slots`), or the order is
    /// not as long.
    Slots { slots: usize, order: usize },
    /// More steps than regions added (each step adds at least one).
    Steps { steps: u64, regions: usize },
    /// Slot `slot`'s entry is not one the engine writes.
    Entry {
        slot: usize,
        entry: u32,
        reason: &'static str,
    },
    /// The slot order is not every slot once, grouped by `cur`.
    Order {
        position: usize,
        slot: u16,
        reason: &'static str,
    },
    /// Bucket `bucket` (counted over all regions, region 0 first) holds a
    /// word no level writes there.
    Word { bucket: u64, reason: &'static str },
    /// The occupied lanes are not the item count given.
    Count { stored: u64, counted: u64 },
    /// The allocator refused `bytes`.
    Allocation { bytes: usize },
    /// `fill` failed.
    Fill(std::io::Error),
}

impl RegionsParts {
    /// Checks every field: the geometry of its regions, the counts, every
    /// entry and the slot order.
    pub(crate) fn check(&self) -> Result<Geometry, PartsError> {
        let geo =
            Geometry::checked(self.m0, 0, L21x3::TAG_BITS, ADDRESSING).map_err(|e| match e {
                GeometryError::M0(m0) => PartsError::M0(m0),
                // Generation 0 always fits once `m0` does.
                GeometryError::Generation(_) => PartsError::M0(self.m0),
            })?;
        let slots = self.entries.len();
        if !valid_saved_slots(slots) || self.order.len() != slots {
            return Err(PartsError::Slots {
                slots,
                order: self.order.len(),
            });
        }
        let (regions, max_regions) = (self.regions, self.max_regions);
        if !(1 <= regions && regions <= max_regions && max_regions <= slots) {
            return Err(PartsError::Regions {
                regions,
                max_regions,
            });
        }
        if self.steps >= regions as u64 {
            return Err(PartsError::Steps {
                steps: self.steps,
                regions,
            });
        }
        for (slot, &entry) in self.entries.iter().enumerate() {
            if let Some(reason) = entry_flaw(entry, regions) {
                return Err(PartsError::Entry {
                    slot,
                    entry,
                    reason,
                });
            }
        }
        let mut seen = vec![false; slots];
        let mut last = 0;
        for (position, &slot) in self.order.iter().enumerate() {
            let order_flaw = |reason| {
                Err(PartsError::Order {
                    position,
                    slot,
                    reason,
                })
            };
            let Some(seen) = seen.get_mut(slot as usize) else {
                return order_flaw("no such slot");
            };
            if std::mem::replace(seen, true) {
                return order_flaw("the slot appears twice");
            }
            let cur = Entry::unpack(self.entries[slot as usize]).cur;
            if cur < last {
                return order_flaw("the slots are not grouped by region in region order");
            }
            last = cur;
        }
        Ok(geo)
    }

    /// These parts with a map of `slots` slots (at least as many as it
    /// has): each slot's entry copied to the slots it stands for there
    /// (a larger map's slots of one hash, [`slot_of`]), in the order.
    fn expanded(mut self, slots: usize) -> RegionsParts {
        let have = self.entries.len();
        if slots > have {
            let f = slots / have;
            self.entries = (0..slots).map(|s| self.entries[s / f]).collect();
            self.order = self
                .order
                .iter()
                .flat_map(|&s| (0..f as u16).map(move |i| s * f as u16 + i))
                .collect();
        }
        self
    }

    /// These parts with their map halved as long as the level wants fewer
    /// slots ([`slots_wanted`]) and the map can be: every pair of slots
    /// `2s`, `2s + 1` has one entry and comes together in the order. So a
    /// level that saved a small map as a larger one loads with the small
    /// one again.
    fn shrunk(mut self) -> RegionsParts {
        let want = slots_wanted(self.regions, self.max_regions).max(first_slots(self.max_regions));
        while self.entries.len() > want
            && self.entries.chunks_exact(2).all(|p| p[0] == p[1])
            && self
                .order
                .chunks_exact(2)
                .all(|p| p[0] % 2 == 0 && p[1] == p[0] + 1)
        {
            self.entries = self.entries.iter().step_by(2).copied().collect();
            self.order = self.order.iter().step_by(2).map(|&s| s / 2).collect();
        }
        self
    }

    /// The plan these parts describe: per region, its slots in order.
    fn plan(&self) -> Plan {
        let mut slots = vec![Vec::new(); self.regions];
        for &s in &self.order {
            slots[Entry::unpack(self.entries[s as usize]).cur].push(s);
        }
        Plan { slots }
    }
}

/// Why `entry` is not one a level of `regions` regions writes, if it is
/// not: both regions exist, bits 15 and 31 (joining, transient) are
/// clear, and a split slot's `cur` is newer than its `prev` (a slot only
/// moves to newer regions; hops go from older to newer, the lock order).
fn entry_flaw(entry: u32, regions: usize) -> Option<&'static str> {
    let e = Entry::unpack(entry);
    if entry & (1 << 15 | 1 << 31) != 0 {
        Some("bits 15 and 31 must be 0")
    } else if e.cur >= regions || e.prev >= regions {
        Some("it names a region the level does not have")
    } else if e.cur < e.prev {
        Some("a split slot's new region (low 16 bits) must be newer than its old one")
    } else {
        None
    }
}

/// Why `word`, in bucket `local` of region `region`, is not one the level
/// writes there, if it is not: a reserved tag, bits outside the lanes, or
/// a tag whose slot's `cur` is older than `region` (see the module docs).
pub(crate) fn word_flaw(
    geo: &Geometry,
    entries: &[u32],
    region: usize,
    local: usize,
    word: u64,
) -> Option<&'static str> {
    layout_flaw(word).or_else(|| {
        ahead(geo, entries, region, local, word)
            .then_some("a tag lies in a region newer than its slot's (no step put it there)")
    })
}

/// Why `word` breaks the 21x3 layout's rules, if it does: a reserved tag
/// or bits outside the lanes.
pub(crate) fn layout_flaw(word: u64) -> Option<&'static str> {
    if word & !L21x3::LANES_MASK != 0 {
        Some("bits above the last tag lane are set")
    } else if bucket::invalid_bits::<L21x3>(word) != 0 {
        Some("a lane holds the reserved all-ones tag")
    } else {
        None
    }
}

/// Whether a tag of `word`, in bucket `local` of region `region`, belongs
/// to a slot whose `cur` is an older region. Branch-free over the lanes (a
/// load runs it on every word).
#[inline(always)]
fn ahead(geo: &Geometry, entries: &[u32], region: usize, local: usize, word: u64) -> bool {
    let mut ahead = false;
    for lane in 0..L21x3::LANES {
        let tag = bucket::lane::<L21x3>(word, lane);
        let low = local.min(geo.alt(local, tag));
        let e = Entry::unpack(entries[slot_of(tag, low, entries.len())]);
        ahead |= tag != 0 && e.cur < region;
    }
    ahead
}

/// What [`Regions::with_snapshot`] hands out.
pub(crate) struct RegionsView<'a> {
    /// Everything but the words; `entries` as they are while the view is
    /// held.
    pub(crate) parts: RegionsParts,
    /// Region `r` at `tables[r]`.
    tables: Vec<&'a Table>,
    /// Items inserted minus removed, when the view was taken.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) len: i64,
    /// Entries that were joining when copied (masked to split): none, by
    /// the argument in the module docs; kept so tests can check it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) joining: usize,
}

impl RegionsView<'_> {
    /// Region `r`'s words: atomics, since plain inserts may still fill
    /// free lanes while the view is held (load them `Relaxed`).
    pub(crate) fn words(&self, r: usize) -> &[AtomicU64] {
        self.tables[r].words()
    }
}

impl Regions {
    /// Runs `f` on a view of the level in which no tag moves and none is
    /// removed, no step runs and no entry changes but a stale insert's
    /// split: every item whose insert returned before this call and that
    /// no remove took is in the view's words, in a region its slot's entry
    /// names. Steps, hops, removes and displacing inserts wait until `f`
    /// returns; plain
    /// inserts into free lanes and every lookup go on. A step running when
    /// it is called is finished first (this thread sweeps what is left).
    pub(crate) fn with_snapshot<R>(&self, f: impl FnOnce(&RegionsView<'_>) -> R) -> R {
        // The claim, then every region's stripes in region order (see the
        // module docs): the same freeze a copy takes.
        self.with_frozen(|frozen| {
            let regions = frozen.regions();
            let tables: Vec<&Table> = (0..regions).map(|r| self.region(r)).collect();
            // No step runs, so each value is final but for a stale insert's
            // split, which may or may not be seen (its tag then lies behind
            // its slot's `cur`, which a loader accepts).
            let raw: Vec<u32> = (0..self.slots()).map(|s| frozen.entry(s)).collect();
            let joining = raw.iter().filter(|&&v| v & JOINING != 0).count();
            debug_assert_eq!(joining, 0, "no entry joins under the claim");
            let entries = raw.into_iter().map(|v| v & !JOINING).collect();
            let order = {
                let plan = self.plan.lock().expect("no step panics holding the plan");
                debug_assert_eq!(plan.slots.len(), regions);
                plan.slots.concat()
            };
            f(&RegionsView {
                parts: RegionsParts {
                    m0: self.geo.m0(),
                    regions,
                    max_regions: self.max_regions,
                    steps: self.steps(),
                    entries,
                    order,
                }
                .expanded(slots_for(self.max_regions)),
                tables,
                len: self.len(),
                joining,
            })
        })
    }

    /// A level rebuilt from `parts` (checked first, see
    /// [`RegionsParts::check`]) whose regions' words `fill` writes, one
    /// region at a time in region order, as native-endian bytes (`8 * m0`
    /// of them per call); `len`, if given, is the item count, which must
    /// be the occupied lanes (else they are the count). Every word is
    /// checked ([`word_flaw`]): a level that loads is one the engine could
    /// have made (a tag behind its slot included: see the module docs).
    pub(crate) fn from_parts(
        parts: &RegionsParts,
        len: Option<u64>,
        mut fill: impl FnMut(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<Regions, PartsError> {
        let geo = parts.check()?;
        let parts = &parts.clone().shrunk();
        let m0 = geo.m0() as usize;
        // The entries before the regions: each region's pin reads them.
        let map = SlotMap::new(parts.entries.len());
        for (slot, &entry) in parts.entries.iter().enumerate() {
            // Relaxed: nothing else can see the level yet; whoever gets it
            // gets it through a Release publication.
            map.at(slot).store(entry, Ordering::Relaxed);
        }
        let map = Arc::new(SlotMaps::new(map));
        let mut tables = Vec::with_capacity(parts.regions);
        let mut counted = 0u64;
        for r in 0..parts.regions {
            let mut t = new_region(
                geo,
                &map,
                r,
                #[cfg(loom)]
                RegionCanary::None,
            )
            .map_err(|e| PartsError::Allocation { bytes: e.bytes })?;
            let bytes = t.words_as_bytes_mut();
            fill(bytes).map_err(PartsError::Fill)?;
            for (local, b) in bytes.chunks_exact(8).enumerate() {
                let w = u64::from_ne_bytes(b.try_into().expect("8 bytes"));
                if let Some(reason) = word_flaw(&geo, &parts.entries, r, local, w) {
                    return Err(PartsError::Word {
                        bucket: (r * m0 + local) as u64,
                        reason,
                    });
                }
                counted += u64::from(bucket::occupied::<L21x3>(w));
            }
            tables.push(t);
        }
        match len {
            Some(stored) if stored != counted => return Err(PartsError::Count { stored, counted }),
            _ => {}
        }
        let level = Regions::assemble(
            geo,
            map,
            tables,
            parts.plan(),
            parts.max_regions,
            #[cfg(loom)]
            RegionCanary::None,
        );
        // Relaxed: as above.
        level.step.store(parts.steps, Ordering::Relaxed);
        level.counters.set_len(counted as i64);
        Ok(level)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
