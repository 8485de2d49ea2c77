//! Internals the `loom-tests` crate needs, compiled only under `cfg(loom)`.
//!
//! The canaries break one protocol rule each, so a model can show that it
//! detects the failure that rule prevents.

use crate::raw::bucket::{L12x5, L16x4, L21x3};
use crate::raw::geometry::Geometry;
use crate::raw::regions::{slot_of, Regions};

pub use crate::canary::{set_acquire_only_take, Canary, RegionCanary};

/// A level of consistent regions (`raw/regions.rs`) for the models: regions
/// of `MIN_BUCKETS` buckets of three 21-bit tags, two slots, two-bucket
/// sweep chunks.
pub struct RegionsModel(Regions);

impl RegionsModel {
    /// Slots of the map.
    pub const SLOTS: usize = crate::raw::slot_map::MAX_SLOTS;

    /// One region, room for `max_regions`.
    pub fn new(max_regions: usize, canary: RegionCanary) -> RegionsModel {
        RegionsModel(
            Regions::with_canary(MIN_BUCKETS, max_regions, canary, false, None)
                .expect("tiny level"),
        )
    }

    /// [`new`](Self::new), but every region a step adds starts full of
    /// tags no model key matches and no sweep moves: every hop into it
    /// finds no room.
    pub fn with_full_new_regions(max_regions: usize, canary: RegionCanary) -> RegionsModel {
        RegionsModel(
            Regions::with_canary(MIN_BUCKETS, max_regions, canary, true, None).expect("tiny level"),
        )
    }

    /// [`new`](Self::new) (or [`with_full_new_regions`](Self::with_full_new_regions) if `full`), but
    /// with a first map of two slots, which a step to a third region
    /// doubles: slot `s` of [`SLOTS`](Self::SLOTS) is `s / 2` before.
    pub fn with_small_map(max_regions: usize, canary: RegionCanary, full: bool) -> RegionsModel {
        RegionsModel(
            Regions::with_canary(MIN_BUCKETS, max_regions, canary, full, Some(2))
                .expect("tiny level"),
        )
    }

    /// What a stale insert whose hop out of `region` found no room does:
    /// keeps `region` named in hash `h`'s slot entry (`keep_split`);
    /// `false` if the entry names two other regions.
    pub fn keep_split(&self, h: u64, region: usize) -> bool {
        self.0.keep_split_of(h, region)
    }

    /// Slots of the current map.
    pub fn slots(&self) -> usize {
        self.0.slots()
    }

    /// This level, but its inserts help no sweep before they put, nor
    /// evict when their search fails (one whose region is full still
    /// sweeps): for the models of stale inserts (R6, R7, R8), whose
    /// interleavings the help and the eviction multiply several times
    /// over. R2, R3 and R9 keep the help (R3's canary `Unpinned` needs it
    /// to fail); R10 runs the eviction.
    pub fn inserts_not_helping(mut self) -> RegionsModel {
        self.0.set_inserts_help(false);
        self.0.set_inserts_evict(false);
        self
    }

    /// This level, but an insert whose search finds no path during a step
    /// does not hop the moving tags near its pair out (R3, which checks
    /// displacement against the sweep; R10 runs the eviction).
    pub fn inserts_not_evicting(mut self) -> RegionsModel {
        self.0.set_inserts_evict(false);
        self
    }

    /// Inserts hash `h`; `false` if refused.
    pub fn insert(&self, h: u64) -> bool {
        self.0.insert(h).is_ok()
    }

    /// Whether hash `h` may have been inserted.
    pub fn contains(&self, h: u64) -> bool {
        self.0.contains(h)
    }

    /// Copies of hash `h`'s tag.
    pub fn count(&self, h: u64) -> usize {
        self.0.count(h)
    }

    /// Removes one copy of hash `h`'s tag; `false` if none was found.
    pub fn remove(&self, h: u64) -> bool {
        self.0.remove(h)
    }

    /// Begins a step; `false` if one runs or the level is at its limit.
    pub fn grow(&self) -> bool {
        self.0.grow()
    }

    /// Helps the running step as an insert with room does (one chunk, never
    /// waiting: held stripes and full pairs are skipped, and the chunk given
    /// back); `false` if it swept nothing.
    pub fn help(&self) -> bool {
        self.0.help()
    }

    /// Sweeps what is left of the running step and waits for its end.
    pub fn finish_step(&self) {
        self.0.finish_step()
    }

    /// `(cur, prev)` of `slot`'s entry.
    pub fn entry(&self, slot: usize) -> (usize, usize) {
        let e = self.0.entry(slot);
        (e.cur, e.prev)
    }

    /// `(cur, prev)` of hash `h`'s slot's entry, in the current map (one
    /// load of it, as a lookup's).
    pub fn entry_of(&self, h: u64) -> (usize, usize) {
        let e = self.0.entry_of_hash(h);
        (e.cur, e.prev)
    }

    /// Sets bucket `bucket` of region `region` to hold `tags` (0: an empty
    /// lane), for a pre-fill before any thread is spawned. The item count
    /// does not see them.
    pub fn set_bucket(&self, region: usize, bucket: usize, tags: [u64; 3]) {
        let word = tags[0] | tags[1] << 21 | tags[2] << 42;
        // Relaxed: the model spawns its threads after this, which orders it.
        self.0
            .table(region)
            .word(bucket)
            .store(word, crate::sync::Ordering::Relaxed);
    }

    /// The slot of hash `h` and its local pair. Touches no loom atomics:
    /// a model may pick its keys before it runs.
    pub fn slot(h: u64) -> (usize, usize, usize) {
        let at = Self::geometry().locate::<L21x3>(h);
        (slot_of(at.tag, at.i1.min(at.i2), Self::SLOTS), at.i1, at.i2)
    }

    /// The tag of hash `h`.
    pub fn tag(h: u64) -> u64 {
        Self::geometry().locate::<L21x3>(h).tag
    }

    /// The alternate of `tag` stored in `bucket`, and the tag's slot there.
    pub fn alt(bucket: usize, tag: u64) -> (usize, usize) {
        let alt = Self::geometry().alt(bucket, tag);
        (alt, slot_of(tag, bucket.min(alt), Self::SLOTS))
    }

    fn geometry() -> Geometry {
        Geometry::new(MIN_BUCKETS, 0, crate::raw::geometry::Addressing::V3)
    }
}

/// The tag and candidate buckets of hash `h` in a table of `m0` buckets, for
/// the 16-bit (`fingerprint_bits == 16`), 12-bit or 21-bit layout, as the
/// builder's filters and their region levels (a region of `m0` buckets)
/// address (format version 3).
pub fn locate(fingerprint_bits: u32, m0: u64, h: u64) -> (u64, usize, usize) {
    let geo = Geometry::new(m0, 0, crate::raw::geometry::Addressing::V3);
    let at = match fingerprint_bits {
        12 => geo.locate::<L12x5>(h),
        21 => geo.locate::<L21x3>(h),
        _ => geo.locate::<L16x4>(h),
    };
    (at.tag, at.i1, at.i2)
}

/// Items each level of `f` holds, level 0 first: which level took a key.
pub fn level_lens(f: &crate::CuckooFilter) -> Vec<usize> {
    f.levels().map(|level| level.len()).collect()
}

/// Buckets per region of the smallest table (loom builds shrink it).
pub const MIN_BUCKETS: u64 = crate::raw::geometry::MIN_M0;
