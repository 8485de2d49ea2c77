//! Internals the `loom-tests` crate needs, compiled only under `cfg(loom)`.
//!
//! The canaries break one protocol rule each, so a model can show that it
//! detects the failure that rule prevents.

use crate::raw::bucket::{L12x5, L16x4, L21x3};
use crate::raw::geometry::Geometry;
use crate::raw::regions::{slot_of, Regions};

/// A deliberately broken protocol, for canary models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Canary {
    /// The real protocol.
    #[default]
    None,
    /// A displacement hop clears the source before copying to the
    /// destination: the tag is briefly in neither bucket.
    RemoveBeforeCopy,
    /// A displacement hop does not step the stripe between its copy and its
    /// clear: a reader that loads the destination before the copy and the
    /// source after the clear reads the same stripe value twice.
    UnsteppedHop,
    /// A displacement hop does not mark its tag in flight, and `count`
    /// does not look: a count between the copy and the clear sees the tag
    /// in both buckets.
    UnmarkedHop,
    /// Taking a stripe is an Acquire-only CAS: a reader whose first stripe
    /// load reads the held value is not shown what the writer did before
    /// it took the stripe (the insert of the colliding key its `remove`
    /// then takes).
    AcquireOnlyTake,
    /// A displacement hop in a region of a level that grows by regions
    /// checks whether its tag is pinned before its copy instead of after
    /// it (set on region tables by `RegionCanary::PinCheckedBeforeCopy`).
    PinCheckedBeforeCopy,
    /// `contains` trusts a negative read without the stripe validation
    /// (in the old table and, for a sealed pair, across both tables).
    UnvalidatedNegative,
    /// `insert_unique` checks and inserts without holding the pair's stripe.
    UnlockedUnique,
    /// `remove` searches and clears without holding the pair's stripe.
    UnlockedRemove,
    /// Migration marks an old bucket forwarded before it copies its tags
    /// into the successor: a reader can find neither.
    ForwardBeforeCopy,
    /// Migration marks an old bucket forwarded with a plain store instead
    /// of a CAS: a plain insert between its read and its store is lost.
    BlindForward,
    /// `insert_unique` during a migration does not seal the old pair first,
    /// so it can race an old-table `insert_unique` of the same key.
    UnsealedUnique,
    /// A plain insert during a migration seals the old pair first (as
    /// `insert_unique` does), so it waits for that pair's stripe holder.
    SealedPlainInsert,
    /// A plain insert during a migration writes the successor bucket
    /// before its old bucket is forwarded.
    SuccessorFirst,
    /// A replaced table's pages are released (its words zeroed) as soon
    /// as it is replaced, instead of once no announced writer can reach
    /// it: a plain insert that loaded it before can CAS into a released
    /// word.
    ImmediateRelease,
    /// A writer announces itself without the fence between its
    /// announcement and its load of the current table (the writer's half
    /// of the Dekker pair that `membarrier` completes): an installer's
    /// scan can miss it while it still loads the old table.
    UnannouncedWriter,
    /// A lookup trusts a migrating read without checking that its table is
    /// still current: it may have read released (zeroed) words.
    UncheckedRetiredRead,
    /// An insert at the growth cap sets the full hint as soon as its search
    /// fails, without the fence and second search that a remove's check of
    /// the hint pairs with: a remove that ran in between is missed.
    UncheckedFullHint,
    /// A snapshot views the current table as it is, without finishing a
    /// running migration or holding the stripes: a tag already forwarded
    /// to the successor is missing from it.
    UnfinishedSnapshot,
    /// `insert_unique` past a level that may not grow asks the levels above
    /// before it takes the key's level-0 pair stripe, not under it: two
    /// calls can both see no copy above and both insert there.
    UncheckedUpper,
    /// A new level is published before the route is set: a thread that saw
    /// the level and inserted into it can make a lookup wait for that insert
    /// while the lookup still reads the old route and never looks above.
    RouteAfterPublish,
}

/// A deliberately broken protocol of a level of consistent regions
/// (`raw/regions.rs`), for canary models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RegionCanary {
    /// The real protocol.
    #[default]
    None,
    /// A hop between regions clears the source before it copies: a lookup
    /// between the two finds the tag in neither region.
    ClearBeforeCopy,
    /// A step bumps its counter before it writes the moved entries: a
    /// reader that saw the new number may still read an old entry.
    BumpBeforeEntries,
    /// An insert that sees a step begun after its CAS returns without
    /// following its tag, so a tag it put into a region the sweep had
    /// passed stays there.
    UnfollowedInsert,
    /// Displacement inside a region checks the pins (after its fence)
    /// before it copies, not after: a hop that checked before the step
    /// began can copy after the sweep read its destination.
    PinCheckedBeforeCopy,
    /// A count of a split slot adds what it saw in `prev` and in `cur`
    /// without re-loading `prev`'s stripe: a hop between its copy and its
    /// clear is counted twice.
    UncheckedCount,
    /// A remove looks in `cur` before `prev`: a hop between its two looks
    /// hides the tag from both.
    RemoveCurFirst,
    /// A stale insert whose own hop finds no room leaves its tag in the old
    /// region without marking or splitting its slot: the step's end joins
    /// the slot, and the tag is in a region no lookup reads.
    UnsplitStaleInsert,
    /// A step's end joins a slot without re-loading its failure mark after
    /// the joining CAS: a stale insert that marked it and saw it still
    /// split just before is not split again.
    UncheckedJoin,
    /// An insert re-loads the counter after its CAS without the `SeqCst`
    /// fence between them: it can miss the bump while the sweep misses
    /// its tag.
    UnfencedInsert,
    /// Displacement inside a region ignores the pins of the running step:
    /// a tag about to hop can move from a bucket the sweep has not reached
    /// to one it has swept, and is left behind.
    Unpinned,
}

/// A level of consistent regions (`raw/regions.rs`) for the models: regions
/// of `MIN_BUCKETS` buckets of three 21-bit tags, two slots, two-bucket
/// sweep chunks.
pub struct RegionsModel(Regions);

impl RegionsModel {
    /// Slots of the map.
    pub const SLOTS: usize = crate::raw::regions::SLOTS;

    /// One region, room for `max_regions`.
    pub fn new(max_regions: usize, canary: RegionCanary) -> RegionsModel {
        RegionsModel(
            Regions::with_canary(MIN_BUCKETS, max_regions, canary, false).expect("tiny level"),
        )
    }

    /// [`new`](Self::new), but every region a step adds starts full of
    /// tags no model key matches and no sweep moves: every hop into it
    /// finds no room.
    pub fn with_full_new_regions(max_regions: usize, canary: RegionCanary) -> RegionsModel {
        RegionsModel(
            Regions::with_canary(MIN_BUCKETS, max_regions, canary, true).expect("tiny level"),
        )
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

    /// Sweeps one chunk of the running step; `false` if none was left.
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
        (slot_of(at.tag, at.i1.min(at.i2)), at.i1, at.i2)
    }

    /// The tag of hash `h`.
    pub fn tag(h: u64) -> u64 {
        Self::geometry().locate::<L21x3>(h).tag
    }

    /// The alternate of `tag` stored in `bucket`, and the tag's slot there.
    pub fn alt(bucket: usize, tag: u64) -> (usize, usize) {
        let alt = Self::geometry().alt(bucket, tag);
        (alt, slot_of(tag, bucket.min(alt)))
    }

    fn geometry() -> Geometry {
        Geometry::new(MIN_BUCKETS, 0, crate::raw::geometry::Addressing::V3)
    }
}

impl Canary {
    /// Whether this canary breaks displacement hops (`path.rs` then runs
    /// its broken copy of a hop).
    pub(crate) fn breaks_hops(self) -> bool {
        matches!(
            self,
            Canary::RemoveBeforeCopy
                | Canary::UnsteppedHop
                | Canary::UnmarkedHop
                | Canary::PinCheckedBeforeCopy
        )
    }
}

std::thread_local! {
    /// Whether stripe takes on this OS thread (so in the loom model it
    /// runs) use the `AcquireOnlyTake` canary: a stripe take does not see
    /// its table, so this canary is set per test rather than per filter.
    static ACQUIRE_ONLY_TAKE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes the stripe takes of models run from this thread Acquire-only
/// (`true`), or correct again (`false`).
pub fn set_acquire_only_take(on: bool) {
    ACQUIRE_ONLY_TAKE.with(|c| c.set(on));
}

/// Whether the `AcquireOnlyTake` canary is on for this thread.
pub(crate) fn acquire_only_take() -> bool {
    ACQUIRE_ONLY_TAKE.with(|c| c.get())
}

/// The tag and candidate buckets of hash `h` in a table of `m0` buckets, for
/// the 16-bit (`fingerprint_bits == 16`) or 12-bit layout, as the builder's
/// filters address (format version 3).
pub fn locate(fingerprint_bits: u32, m0: u64, h: u64) -> (u64, usize, usize) {
    let geo = Geometry::new(m0, 0, crate::raw::geometry::Addressing::V3);
    let at = match fingerprint_bits {
        12 => geo.locate::<L12x5>(h),
        _ => geo.locate::<L16x4>(h),
    };
    (at.tag, at.i1, at.i2)
}

/// Buckets per region of the smallest table (loom builds shrink it).
pub const MIN_BUCKETS: u64 = crate::raw::geometry::MIN_M0;
