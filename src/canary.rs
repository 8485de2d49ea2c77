//! The loom canaries: each breaks one protocol rule, so a model can show
//! that it detects the failure that rule prevents. Compiled only under
//! `cfg(loom)`; below the engine, which asks them, and `loom_support`,
//! which hands them to the models.

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
    /// `insert_unique`'s second decision in a first level that stopped
    /// growing (`Lanes::Any`: after it made room in the key's pair at a
    /// cap, or after a refused doubling) puts its tag without checking
    /// again for a copy, trusting the first decision's: a racing call can
    /// insert the key while the stripe is let go between the two.
    UncheckedSecondDecision,
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
    /// An insert's follow whose hop found the old pair's stripe held past
    /// its patience returns without splitting the slot: its copy stays in
    /// a region no lookup of the slot reads once the step ends.
    FollowHeldUnsplit,
    /// A step that doubles the map copies each entry with a plain load,
    /// without freezing it: a stale insert's split of the old map made
    /// after the copy is lost, and its tag is in a region no lookup reads.
    UnfrozenDoubling,
    /// An insert that raced a step follows its copy through the map it
    /// started with, not the current one: after a step that doubled the
    /// map it reads a frozen entry, does not see its slot move on, and
    /// leaves its copy where no lookup reads once the step ends.
    FollowOnOldMap,
    /// A reader takes a frozen entry of a map being doubled as it is,
    /// without looking for a split made in the next map (not yet
    /// published): the split's tag is missed until the claimant publishes.
    FrozenEntryTaken,
    /// A sweep's hop that found the source stripe held past its patience
    /// leaves the tag without marking its slot failed: the step's end
    /// joins the slot, and the tag is in a region no lookup reads.
    HeldUnmarked,
    /// A step's end joins a slot without re-loading its failure mark after
    /// the joining CAS: a stale insert that marked it and saw it still
    /// split just before is not split again.
    UncheckedJoin,
    /// An insert re-loads the counter after its CAS without the `SeqCst`
    /// fence between them: it can miss the bump while the sweep misses
    /// its tag.
    UnfencedInsert,
    /// A hop between regions copies without checking, under the source
    /// stripe, that the source still holds the tag: a chunk swept twice
    /// (by a stopped claimant and by a waiting sweeper) copies it twice.
    UncheckedResweep,
    /// A helper that may not wait marks its chunk done though it skipped a
    /// pair: the step can end with a tag of a moved slot left behind.
    DoneWithSkips,
    /// Displacement inside a region ignores the pins of the running step:
    /// a tag about to hop can move from a bucket the sweep has not reached
    /// to one it has swept, and is left behind.
    Unpinned,
    /// An insert making room in its full pair during a step moves a moving
    /// tag by a put into its new region and a take from the old one,
    /// without the old pair's stripe: a sweep hopping the same tag at once
    /// copies it too.
    UnlockedEvict,
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
