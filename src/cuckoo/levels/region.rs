//! A level of consistent regions (`raw/regions.rs`) above a filter's
//! first level: what every level a filter builds past its tag bits is
//! (docs/design.md, "Wiring the engine into the filter"). It owns its
//! regions, its link to the level above and its false-positive budget.

use super::{Upper, UpperLevel};
use crate::cuckoo::Stats;
use crate::error::InsertError;
use crate::raw::bucket::{L21x3, Layout};
use crate::raw::geometry::{MAX_M0, MIN_M0};
use crate::raw::regions::{first_slots, map_bytes, Refused, Regions, MAX_REGIONS};
use crate::raw::table::Table;

/// The load a region level's regions reach before a step adds regions
/// (`R_max` is reckoned at it: `own * 2^21 / (6 * LOAD)`).
const LOAD: f64 = 0.93;

/// A new level's room against the level below's items (`m0 = START x
/// items / (3 x 0.9)`): the best of the sequential model
/// (`lab/examples/fine_growth.rs`, design.md's table).
const START: f64 = 0.4;

/// The least a level at its most regions holds against the level below:
/// a level whose budget pays only a few regions starts larger than
/// [`START`] so that it still doubles what the filter holds (at 0.4 x a
/// few regions, levels under a tight cap shrank one after another and the
/// filter stopped far sooner than with doubling levels: 3e-4 from 100
/// keys, about 350,000 keys against more than 900,000).
const LEAST_GROWTH: f64 = 2.0;

/// Regions a level must be able to take to start at [`START`]: the small
/// start pays off in memory only over many fine steps (the model's 400 or
/// so); a level whose budget pays fewer starts at the room below, as a
/// doubling level does, so that tight caps grow as far as they did.
const FINE_REGIONS: usize = 256;

/// A level of consistent regions.
pub(crate) struct RegionLevel {
    regions: Regions,
    /// The level above, and the budget this level and those above share.
    pub(super) upper: Upper,
    /// This level's own share of the false-positive rate: half of what
    /// the levels below left (`upper`'s budget).
    own: f64,
    /// The bytes this level may take (`None`: unlimited): the user's
    /// `max_memory` minus what the levels below hold.
    max_memory: Option<usize>,
}

/// What a new region level gets from the level below it.
pub(crate) struct Plan {
    /// Buckets per region.
    pub(crate) m0: u64,
    /// Its own false-positive rate.
    pub(crate) own: f64,
    /// Most regions: what `own` pays for, at most `MAX_REGIONS`.
    pub(crate) max_regions: usize,
}

impl Plan {
    /// The plan of a level above one that holds about `items` items, given
    /// `left` of the budget; `None` if `left / 2` cannot pay one region.
    pub(crate) fn above(items: usize, left: f64) -> Option<Plan> {
        let own = left / 2.0;
        let max_regions = max_regions_for(own);
        if max_regions == 0 {
            return None;
        }
        let per_bucket = L21x3::LANES as f64 * 0.9;
        let start = if max_regions >= FINE_REGIONS {
            START
        } else {
            1.0_f64.max(LEAST_GROWTH / max_regions as f64)
        };
        let m0 = (start * items as f64 / per_bucket).ceil() as u64;
        let m0 = (m0 + (m0 & 1)).clamp(MIN_M0, MAX_M0);
        Some(Plan {
            m0,
            own,
            max_regions,
        })
    }
}

/// Regions a level whose own rate is `own` may have: each lane of a pair's
/// two buckets matches an absent key's tag with probability `R / 2^21`.
pub(crate) fn max_regions_for(own: f64) -> usize {
    let r = own * L21x3::MAX_TAG as f64 / (2.0 * L21x3::LANES as f64 * LOAD);
    if r.is_nan() || r < 1.0 {
        return 0;
    }
    (r as usize).min(MAX_REGIONS)
}

/// The rate a level of one region may reach: what growing on needs at
/// least (a refusal's `next`).
pub(crate) fn first_region_bound() -> f64 {
    2.0 * L21x3::LANES as f64 * LOAD / L21x3::MAX_TAG as f64
}

/// Heap bytes of a new region level of `m0` buckets per region and at
/// most `max_regions` regions: its first region, its first map and its
/// marks.
pub(crate) fn first_bytes(m0: u64, max_regions: usize) -> usize {
    Table::bytes_for_region(m0 as usize).saturating_add(map_bytes(first_slots(max_regions)))
}

impl RegionLevel {
    /// A new level of one region after `plan`, which may take `max_memory`
    /// bytes, linked to the levels above by `upper`.
    pub(crate) fn new(
        plan: &Plan,
        max_memory: Option<usize>,
        upper: Upper,
    ) -> Result<RegionLevel, InsertError> {
        let regions = Regions::new(plan.m0, plan.max_regions)
            .map_err(|e| InsertError::AllocationFailed { bytes: e.bytes })?;
        Ok(RegionLevel {
            regions: regions.with_max_bytes(max_memory.unwrap_or(usize::MAX)),
            upper,
            own: plan.own,
            max_memory,
        })
    }

    /// A level from a loaded file's parts (for format version 4): its
    /// regions, its own rate and the bytes it may take; the link above is
    /// set when it is attached (`attach_loaded`).
    // Persistence (task P) only, not yet called.
    #[allow(dead_code)]
    pub(crate) fn loaded(regions: Regions, own: f64, max_memory: Option<usize>) -> RegionLevel {
        RegionLevel {
            regions: regions.with_max_bytes(max_memory.unwrap_or(usize::MAX)),
            upper: Upper::detached(),
            own,
            max_memory,
        }
    }

    /// The engine.
    pub(crate) fn regions(&self) -> &Regions {
        &self.regions
    }

    /// This level's own false-positive rate: its share of the budget, and
    /// the bound its regions stay within (`R_max` follows from it).
    pub(crate) fn own_rate(&self) -> f64 {
        self.own
    }

    /// Buckets per region.
    pub(crate) fn m0(&self) -> u64 {
        self.regions.geometry().m0()
    }

    /// The most regions this level may have.
    // Persistence (task P) only, not yet called.
    #[allow(dead_code)]
    pub(crate) fn max_regions(&self) -> usize {
        self.regions.max_regions()
    }

    /// The bytes this level may take (`None`: unlimited).
    // Persistence (task P) only, not yet called.
    #[allow(dead_code)]
    pub(crate) fn max_memory(&self) -> Option<usize> {
        self.max_memory
    }

    /// The level above, if one was published.
    // Persistence (task P) only, not yet called.
    #[allow(dead_code)]
    pub(crate) fn upper_level(&self) -> Option<&UpperLevel> {
        self.upper.get()
    }

    /// Whether `hash` may be in this level or one above: the newest first,
    /// this level's pair prefetched on the way up.
    pub(crate) fn contains_up(&self, hash: u64) -> bool {
        match self.upper.get() {
            Some(up) => {
                self.regions.prefetch(hash);
                up.contains(hash) || self.regions.contains(hash)
            }
            None => self.regions.contains(hash),
        }
    }

    /// Inserts `hash` here, or in the level above once this one is at its
    /// most regions (published by this call if need be).
    pub(crate) fn insert(&self, hash: u64) -> Result<bool, InsertError> {
        match self.regions.insert(hash) {
            Ok(()) => Ok(true),
            Err(Refused::Full) => loop {
                match self.upper_or_publish()? {
                    Some(up) => return up.insert(hash),
                    None => continue,
                }
            },
            Err(Refused::Memory { needed }) => Err(self.memory_refusal(needed)),
            Err(Refused::Alloc { bytes }) => Err(InsertError::AllocationFailed { bytes }),
            Err(Refused::Saturated { copies }) => Err(InsertError::TooManyCopies { copies }),
        }
    }

    /// The `MemoryLimit` refusal of a growth that would have this level
    /// hold `needed` bytes, against the user's `max_memory`.
    fn memory_refusal(&self, needed: usize) -> InsertError {
        let max = self.max_memory.unwrap_or(usize::MAX);
        self.upper.memory_refusal(max, needed)
    }

    /// The level above, built and published by this call if there was
    /// none; `Ok(None)`: another thread is building it (retry).
    fn upper_or_publish(&self) -> Result<Option<&UpperLevel>, InsertError> {
        self.upper
            .get_or_publish(|| self.build_upper(), |upper, level| upper.publish(level))
    }

    /// A new, empty region level above this one: sized for this level's
    /// room, with half of what this level leaves of the budget, and the
    /// bytes it leaves.
    fn build_upper(&self) -> Result<UpperLevel, InsertError> {
        let items = (self.regions.lanes() as f64 * 0.9) as usize;
        let bytes = self.regions.bytes();
        self.upper
            .build_regions(self.own, items, self.max_memory, bytes)
    }

    /// A consistent copy of this level and the levels above (`Clone`).
    ///
    /// # Panics
    ///
    /// If a region of the copy cannot be allocated, like `Vec::clone`.
    pub(crate) fn deep_clone(&self) -> RegionLevel {
        let regions = match self.regions.try_clone() {
            Ok(r) => r,
            Err(e) => panic!("CuckooFilter::clone: cannot allocate {} bytes", e.bytes),
        };
        RegionLevel {
            regions,
            upper: self.upper.deep_clone(),
            own: self.own,
            max_memory: self.max_memory,
        }
    }

    /// The rate a lookup of an absent key sees in this level now: two
    /// buckets of three lanes at the mean load, each lane matching with
    /// probability `R / 2^21` (from `len`, not a scan).
    pub(crate) fn false_positive_rate(&self) -> f64 {
        2.0 * self.regions.len().max(0) as f64 / self.m0() as f64 / L21x3::MAX_TAG as f64
    }

    /// `stats` of this level alone.
    pub(crate) fn stats(&self) -> Stats {
        let r = &self.regions;
        let regions = r.regions();
        let len = r.len().max(0) as usize;
        let capacity = r.lanes();
        let totals = r.counters().totals();
        Stats {
            len,
            occupied_slots: r.occupied(),
            capacity,
            buckets: regions * self.m0() as usize,
            load_factor: len as f64 / capacity as f64,
            memory_bytes: r.bytes(),
            version_stripes: (0..regions).map(|i| r.table(i).stripe_count()).sum(),
            fingerprint_bits: L21x3::TAG_BITS,
            tags_per_bucket: L21x3::LANES,
            false_positive_rate: self.false_positive_rate(),
            max_false_positive_rate: self.own,
            growths: r.steps(),
            migrating: r.stepping(),
            regions,
            split_slots: if r.stepping() { 0 } else { r.split_slots() },
            region_steps: r.steps(),
            ..Stats::counted(&totals)
        }
    }
}
