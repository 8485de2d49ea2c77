//! The operations on one table, generic over the bucket layout.
//!
//! # Protocol
//!
//! * A bucket changes only by one CAS of its word (`Release`, an RMW), so a single
//!   `Acquire` load always sees a whole bucket.
//! * A tag `t` stored in bucket `i` can only ever be in `i` or
//!   `alt(i, t)`, and only moves between those two, under the version stripe
//!   of that pair (see `path.rs`): copy into the destination first, then
//!   clear the source. A tag is therefore never absent from both buckets.
//! * A reader that finds the tag answers `true` at once: the tag was in the
//!   table at the moment of that load. A reader that does not find it reads
//!   the pair's stripe before and after its two bucket loads and trusts the
//!   miss if the two values are equal and not [`SEALED`]
//!   ([`miss_stands`]); whether a writer *holds* the stripe does not matter.
//! * `remove` and `insert_unique` hold the pair's stripe, which excludes
//!   moves of their own tag, so their check-then-CAS sees a stable pair.
//! * A sealed stripe or a forwarded bucket means the table is being
//!   replaced by its successor: these functions then return [`Sealed`] and
//!   the caller goes on with the migration-aware versions in `migrating.rs`.
//!
//! # Why "unchanged" is enough for a miss
//!
//! Two loads of two words can disagree with every single moment of the
//! table only if copies of the tag left the bucket read second while
//! copies arrived in the bucket read first, between the two loads. Three
//! writers change a bucket:
//!
//! * a plain insert only adds a copy: alone it can only turn a miss into a
//!   hit;
//! * a displacement hop copies into one bucket and clears the other: the
//!   one two-bucket step. It bumps the stripe *between* its copy and its
//!   clear ([`StripeLock::copied`], Release). A reader whose second load
//!   sees the clear (Acquire, paired with the clear's Release) sees that
//!   bump or later in its last stripe load; if its first stripe load
//!   (Acquire) had already read the bump or later, the copy happened before
//!   it and the first load found the tag. So a reader that missed a moving
//!   tag read two different stripe values, and retries;
//! * `remove` takes one copy with one CAS. It can hide a *present* copy only
//!   together with a racing insert (that insert's copy lands in the bucket
//!   read first, the remove takes the other): a move made of two
//!   operations. The stripe covers it too: taking the stripe is a write
//!   (AcqRel), so a reader that read a value from before the take and sees
//!   the remove's CAS reads a changed stripe; one that read the held value
//!   first sees everything that happened before the remove took the
//!   stripe, such as the insert of the key it removes, and can only be
//!   ordered before inserts it did not see (loom model 2b; the canary
//!   `AcquireOnlyTake` fails it). (The remove of a key whose insert has not
//!   completed removes a colliding copy, as documented.)
//!   `insert_unique` only adds, `clear` is not atomic.
//!
//! A reader therefore retries only when a writer completed a step (took,
//! stepped or released the stripe) during its read, never because a writer
//! is stopped inside its critical section.
//!
//! `count` needs one more rule. A hop's copy shows in *both* buckets between
//! its copy and its clear, so a count could see it twice. The hop marks
//! its tag in flight in the stripe word from the moment it takes the
//! stripe ([`StripeLock::acquire_moving`], before the copy) until it
//! releases it, and a count of that very tag retries meanwhile
//! ([`count_stands`]). A count whose bucket load sees the copy (a Release
//! CAS) sees that take in its last stripe load; if its first stripe load
//! already showed the take or the step, the tag is marked; if it showed the
//! release or later, the clear is visible too. The only lookup that can
//! wait for a stopped writer is a count of the tag that writer is moving.

use super::bucket::{self, Layout};
use super::cas::{put, put_from, put_keeping_a_lane, take};
use super::counters::Counters;
use super::geometry::{Addressing, Located};
use super::path::{self, Room};
use super::pause;
use super::stripe::{count_stands, miss_stands, StripeLock, SEALED};
use super::table::Table;
#[cfg(loom)]
use crate::canary::Canary;
use crate::sync::{AtomicU64, Backoff, Ordering};

/// The table is being replaced by its successor: go on there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sealed;

/// Whether the tag of `at` is in either candidate bucket.
///
/// Never writes shared memory (it is not even given the counters, so a
/// re-read is not counted: a counter bumped by readers would be a cache
/// line that every contended lookup writes). A positive answer is final as
/// soon as a load shows the tag; a negative one stands if the pair's
/// stripe did not change across the two bucket loads (see the module
/// docs), otherwise it reads again.
/// `Err(Sealed)` if the pair is sealed and the answer was negative (the
/// tag may have moved on to the successor).
#[inline(always)]
pub(crate) fn contains<L: Layout>(t: &Table, at: Located) -> Result<bool, Sealed> {
    contains_in::<L>(t, at, t.word(at.i1), t.word(at.i2))
}

/// [`contains`] of hash `h`, whose buckets the table finds without bounds
/// checks ([`Table::candidates`]): the single lookup's path. `addressing`
/// is the table's (a constant where the caller's route knows it).
#[inline(always)]
pub(crate) fn contains_hash<L: Layout>(
    t: &Table,
    h: u64,
    addressing: Addressing,
) -> Result<bool, Sealed> {
    let (at, word1, word2) = t.candidates::<L>(h, addressing);
    contains_in::<L>(t, at, word1, word2)
}

/// [`contains`] of `at`, whose bucket words are `word1` and `word2`.
#[inline(always)]
fn contains_in<L: Layout>(
    t: &Table,
    at: Located,
    word1: &AtomicU64,
    word2: &AtomicU64,
) -> Result<bool, Sealed> {
    let stripe = t.stripe(at.i1, at.i2);
    let (found, before, after) = read_pair::<L>(t, at.tag, word1, word2, stripe);
    // One branch decides both answers, without short-circuits: a found
    // tag is final, a miss stands if the stripe did not change across
    // the loads. Whether a key is present, and which bucket holds it,
    // are coin tosses the branch predictor would lose, and each miss
    // would flush the lookups the CPU has started behind this one.
    if found | miss_stands(before, after) {
        return Ok(found);
    }
    // Rare (a sealed pair, or a hop completed a step during the read):
    // out of line, so the common path keeps its values in registers.
    contains_again::<L>(t, at.tag, word1, word2, stripe, before)
}

/// The rest of a `contains` whose first read did not answer: `Sealed` if
/// that read's stripe was sealed, else reads again until one answers.
#[cold]
#[inline(never)]
fn contains_again<L: Layout>(
    t: &Table,
    tag: u64,
    word1: &AtomicU64,
    word2: &AtomicU64,
    stripe: &AtomicU64,
    mut before: u64,
) -> Result<bool, Sealed> {
    let mut backoff = Backoff::default();
    loop {
        // Only the Acquire `before` may conclude "sealed": it synchronises
        // with the seal, so the caller then finds the migration.
        if before == SEALED {
            return Err(Sealed);
        }
        backoff.snooze();
        let (found, b, after) = read_pair::<L>(t, tag, word1, word2, stripe);
        if found | miss_stands(b, after) {
            return Ok(found);
        }
        before = b;
    }
}

/// One read of `contains`: whether either bucket word holds `tag`, and the
/// pair's stripe before and after the bucket loads.
#[inline(always)]
fn read_pair<L: Layout>(
    t: &Table,
    tag: u64,
    word1: &AtomicU64,
    word2: &AtomicU64,
    stripe: &AtomicU64,
) -> (bool, u64, u64) {
    // Acquire: pairs with the Release writes of the stripe (a take, a
    // hop's step, a release): every bucket write made before the value
    // read here is visible to the loads below. (An independent load: it
    // overlaps the two bucket misses.)
    let before = stripe.load(Ordering::Acquire);
    // Acquire on both bucket loads: (1) pairs with the Release CAS that
    // stored the tag; (2) a load that observes a hop's source-clearing
    // CAS (Release) also observes the stripe step that preceded it, so
    // `after` below cannot read the old version; (3) `after` cannot be
    // hoisted above these loads.
    let w1 = word1.load(Ordering::Acquire);
    let w2 = word2.load(Ordering::Acquire);
    let found = bucket::in_either::<L>(w1, w2, tag);
    // Relaxed: ordered after the bucket loads by their Acquire (above).
    let after = stripe.load(Ordering::Relaxed);
    #[cfg(loom)]
    let after = broken::unvalidated_after(t, before, after);
    #[cfg(not(loom))]
    let _ = t;
    (found, before, after)
}

/// Copies of the tag of `at` in its two buckets, read consistently (a tag in
/// flight between the two is counted once). `Err(Sealed)` once the pair is
/// sealed. Never writes shared memory, as `contains`.
pub(crate) fn count<L: Layout>(t: &Table, at: Located) -> Result<usize, Sealed> {
    let Located { tag, i1, i2 } = at;
    let stripe = t.stripe(i1, i2);
    let mut backoff = Backoff::default();
    loop {
        // Orderings as in `contains`: a move overlapping the loads could
        // show the tag twice or not at all, so both answers validate, and a
        // move of this tag that is in flight makes the count read again.
        let before = stripe.load(Ordering::Acquire);
        if before == SEALED {
            return Err(Sealed);
        }
        let w1 = t.word(i1).load(Ordering::Acquire);
        let w2 = t.word(i2).load(Ordering::Acquire);
        let copies = bucket::count::<L>(w1, tag) + bucket::count::<L>(w2, tag);
        let after = stripe.load(Ordering::Relaxed);
        let stands = count_stands(before, after, tag);
        #[cfg(loom)]
        let stands = broken::count_stands(t, before, after, stands);
        if stands {
            return Ok(copies as usize);
        }
        backoff.snooze();
    }
}

/// Why an insert could not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InsertFailure {
    /// Both candidate buckets are full and no displacement path frees a
    /// lane: a search failed (`searched`), or the table's full hint says
    /// one failed since the last remove (see `room.rs`).
    Full { searched: bool },
    /// The key's copies (`copies`) would fill both candidate buckets with
    /// one more, or hold at least half of them with no path for the rest: no
    /// doubling can make room for another copy (a doubling sends every
    /// copy of a tag in a pair to one successor pair, and does not move
    /// another key's copies away from it either, unless their tags happen
    /// to differ in the doubling's bit), so a table must not double for it.
    Saturated { copies: usize },
    /// The table is being replaced: go on in the successor.
    Sealed,
}

impl From<Sealed> for InsertFailure {
    fn from(_: Sealed) -> Self {
        InsertFailure::Sealed
    }
}

/// Whether `insert` may skip the displacement search on the table's full
/// hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Search {
    /// Skip it while the hint is full.
    UnlessHinted,
    /// Search whatever the hint says (an insert that just armed it).
    Always,
}

/// Inserts the tag of `at`. With `unique`, first checks (under the pair's
/// stripe) that no copy is present and returns `Ok(false)` if one is.
///
/// The common case, a plain insert with a free lane in either bucket, is
/// inline; the rest (dedup, displacement, failures) is out of line, so
/// the caller's one prologue serves the whole fast path.
#[inline(always)]
pub(crate) fn insert<L: Layout>(
    t: &Table,
    at: Located,
    unique: bool,
    elsewhere: impl Fn() -> bool + Copy,
    search: Search,
    c: &Counters,
) -> Result<bool, InsertFailure> {
    insert_into::<L>(
        t,
        at,
        t.word(at.i1),
        t.word(at.i2),
        unique,
        elsewhere,
        search,
        c,
    )
}

/// [`insert`] of hash `h`, whose buckets the table finds without bounds
/// checks ([`Table::candidates`]): the single insert's path.
#[inline(always)]
pub(crate) fn insert_hash<L: Layout>(
    t: &Table,
    h: u64,
    addressing: Addressing,
    unique: bool,
    elsewhere: impl Fn() -> bool + Copy,
    search: Search,
    c: &Counters,
) -> Result<bool, InsertFailure> {
    let (at, word1, word2) = t.candidates::<L>(h, addressing);
    insert_into::<L>(t, at, word1, word2, unique, elsewhere, search, c)
}

/// [`insert`] of `at`, whose bucket words are `word1` and `word2`.
#[inline(always)]
// Eight, by value: a struct of them would be spilled to pass it.
#[allow(clippy::too_many_arguments)]
fn insert_into<L: Layout>(
    t: &Table,
    at: Located,
    word1: &AtomicU64,
    word2: &AtomicU64,
    unique: bool,
    elsewhere: impl Fn() -> bool + Copy,
    search: Search,
    c: &Counters,
) -> Result<bool, InsertFailure> {
    if !unique {
        let shard = c.shard();
        // Two choices: the emptier bucket first, which keeps buckets
        // balanced and defers displacement to higher loads. A copy that
        // would fill a bucket with its tag goes the slow way, which keeps
        // the pair's last lane for other keys.
        let ((a, seen), b) = emptier_first::<L>(word1, word2);
        if !bucket::fills_with::<L>(seen, at.tag)
            && (put_from::<L>(a, seen, at.tag, shard) || put::<L>(b, at.tag, shard))
        {
            shard.add_len(1);
            return Ok(true);
        }
    }
    // The fields go by value: a `Located` would be spilled to pass it.
    insert_again::<L>(t, at.tag, at.i1, at.i2, unique, elsewhere, search, c)
}

/// `insert` past its fast path: a dedup insert, or a plain one whose two
/// buckets were full (the retry loop tries them again first: another
/// thread may have freed a lane).
#[inline(never)]
// Eight, by value: a struct of them would be spilled to pass it.
#[allow(clippy::too_many_arguments)]
fn insert_again<L: Layout>(
    t: &Table,
    tag: u64,
    i1: usize,
    i2: usize,
    unique: bool,
    elsewhere: impl Fn() -> bool + Copy,
    search: Search,
    c: &Counters,
) -> Result<bool, InsertFailure> {
    let shard = c.shard();
    let mut backoff = Backoff::default();
    let mut first_try = true;
    loop {
        if unique {
            let _lock = StripeLock::acquire(t.stripe(i1, i2)).ok_or(Sealed)?;
            #[cfg(loom)]
            let _lock = broken::unless(t, Canary::UnlockedUnique, _lock);
            if present_in_pair::<L>(t, tag, i1, i2) || elsewhere() {
                return Ok(false);
            }
            if put::<L>(t.word(i1), tag, shard) || put::<L>(t.word(i2), tag, shard) {
                shard.add_len(1);
                return Ok(true);
            }
            // Both full: release the stripe before making room, so no thread
            // ever waits for a stripe while holding one. (They cannot be
            // full of this tag: it is absent.)
        } else {
            let (w1, w2) = (t.word(i1), t.word(i2));
            // Relaxed: a first look; the count that refuses is validated.
            let (seen1, seen2) = (w1.load(Ordering::Relaxed), w2.load(Ordering::Relaxed));
            if bucket::would_lock::<L>(seen1, seen2, tag) {
                // Counted as `count` does: exact, and without the stripe.
                let copies = count::<L>(t, Located { tag, i1, i2 })?;
                if copies >= 2 * L::LANES as usize - 1 {
                    return Err(InsertFailure::Saturated { copies });
                }
            }
            // Here a bucket may fill with `tag`: the pair still has room
            // for other keys.
            let ((a, seen), b) = emptier_first::<L>(w1, w2);
            if put_from::<L>(a, seen, tag, shard) || put::<L>(b, tag, shard) {
                shard.add_len(1);
                return Ok(true);
            }
        }
        if search == Search::UnlessHinted && t.room().is_full() {
            return Err(InsertFailure::Full { searched: false });
        }
        match path::make_room::<L>(t, i1, i2, shard, |_| true) {
            Room::Made => {}
            Room::Sealed => return Err(InsertFailure::Sealed),
            Room::NoPath => {
                // A racing insert_unique of this same key may have made room
                // and won in the meantime: then the answer is "present".
                if unique && contains_locked::<L>(t, tag, i1, i2, elsewhere)? {
                    return Ok(false);
                }
                // A key that already fills half its pair is crowded by
                // copies (its own, and keys whose copies share a bucket
                // with it), not by a full table: doubling for it doubled
                // a filter for 1M keys six times over 4,096 keys held 8
                // times each (docs/design.md, "Keys held in many copies").
                if !unique {
                    // Counted as `count` does, without the stripe (a save
                    // may hold every stripe: this insert must not wait).
                    let copies = count::<L>(t, Located { tag, i1, i2 })?;
                    if copies >= L::LANES as usize {
                        return Err(InsertFailure::Saturated { copies });
                    }
                }
                return Err(InsertFailure::Full { searched: true });
            }
        }
        // Room was made but may be taken again before the retry; two inserts
        // that keep moving one tag back and forth between their buckets
        // could livelock without this pause.
        if !first_try {
            backoff.snooze();
        }
        first_try = false;
    }
}

/// Whether `tag` is in `i1` or `i2`; the caller holds their pair's stripe.
/// Under the stripe no copy of `tag` can move between the two buckets, so
/// these two loads see every copy that a completed insert made.
#[inline]
fn present_in_pair<L: Layout>(t: &Table, tag: u64, i1: usize, i2: usize) -> bool {
    // Relaxed: the caller's stripe Acquire, paired with the previous
    // holder's Release, already orders these loads after every
    // insert_unique, remove or move of this pair, and no later access
    // depends on them for its ordering.
    bucket::contains::<L>(t.word(i1).load(Ordering::Relaxed), tag)
        || bucket::contains::<L>(t.word(i2).load(Ordering::Relaxed), tag)
}

/// `present_in_pair`, or `elsewhere`, under a fresh hold of the pair's
/// stripe.
fn contains_locked<L: Layout>(
    t: &Table,
    tag: u64,
    i1: usize,
    i2: usize,
    elsewhere: impl Fn() -> bool + Copy,
) -> Result<bool, Sealed> {
    let _lock = StripeLock::acquire(t.stripe(i1, i2)).ok_or(Sealed)?;
    Ok(present_in_pair::<L>(t, tag, i1, i2) || elsewhere())
}

/// What plain inserts pass as `elsewhere`, the question an
/// `insert_unique` asks under the key's pair stripe (is the key in another
/// level of its filter, `cuckoo/levels.rs`?): plain inserts never ask.
pub(crate) fn nowhere() -> bool {
    false
}

/// `insert_unique` of hash `h` once its level may not grow: under the
/// key's pair stripe, `Ok(false)` if the pair or `elsewhere` holds the tag,
/// else the tag goes into a free slot of the pair (`lanes`: any, or only
/// in a bucket that keeps another) or, failing that, through
/// `insert_elsewhere` (into an upper level). Every
/// `insert_unique` of the key holds this stripe for its decision, so of
/// racing ones exactly one inserts.
pub(crate) fn insert_unique_beyond<L: Layout>(
    t: &Table,
    h: u64,
    c: &Counters,
    lanes: Lanes,
    elsewhere: impl Fn() -> bool + Copy,
    insert_elsewhere: &dyn Fn() -> Result<bool, crate::error::InsertError>,
) -> Result<Result<bool, crate::error::InsertError>, Sealed> {
    let (Located { tag, i1, i2 }, word1, word2) = t.candidates::<L>(h, t.geometry().addressing());
    #[cfg(loom)]
    let early = broken::asked_before_stripe(t, elsewhere);
    let _lock = StripeLock::acquire(t.stripe(i1, i2)).ok_or(Sealed)?;
    #[cfg(loom)]
    let _lock = broken::unless(t, Canary::UnlockedUnique, _lock);
    #[cfg(loom)]
    let elsewhere = move || early.unwrap_or_else(elsewhere);
    let seen = present_in_pair::<L>(t, tag, i1, i2) || elsewhere();
    #[cfg(loom)]
    let seen = seen && !broken::trusts_first_decision(t, lanes);
    if seen {
        return Ok(Ok(false));
    }
    let shard = c.shard();
    let put = match lanes {
        Lanes::Any => put::<L>,
        Lanes::KeepOne => put_keeping_a_lane::<L>,
    };
    if put(word1, tag, shard) || put(word2, tag, shard) {
        shard.add_len(1);
        return Ok(Ok(true));
    }
    Ok(insert_elsewhere())
}

/// Which free lanes of a pair an insert into a level that stopped growing
/// may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lanes {
    /// Any.
    Any,
    /// Only in a bucket that keeps another free lane
    /// ([`put_keeping_a_lane`]).
    KeepOne,
}

/// A plain insert of hash `h` into a free lane of its pair that leaves
/// the bucket another ([`put_keeping_a_lane`]); `false` (nothing changed)
/// if neither bucket has two.
pub(crate) fn insert_keeping_a_lane<L: Layout>(
    t: &Table,
    h: u64,
    addressing: Addressing,
    c: &Counters,
) -> bool {
    let (Located { tag, .. }, word1, word2) = t.candidates::<L>(h, addressing);
    let shard = c.shard();
    let ((a, _), b) = emptier_first::<L>(word1, word2);
    let put = put_keeping_a_lane::<L>(a, tag, shard) || put_keeping_a_lane::<L>(b, tag, shard);
    if put {
        shard.add_len(1);
    }
    put
}

/// Whether a bucket of hash `h`'s pair has two free lanes, so that
/// [`insert_keeping_a_lane`] may put its tag there: a look (no stripe, no
/// announcement) that spares a full first level of a filter with levels
/// the rest.
pub(crate) fn has_two_free_lanes<L: Layout>(t: &Table, h: u64, addressing: Addressing) -> bool {
    let (_, word1, word2) = t.candidates::<L>(h, addressing);
    // Relaxed: a hint; the put that follows reads again and decides.
    let (w1, w2) = (word1.load(Ordering::Relaxed), word2.load(Ordering::Relaxed));
    bucket::empty::<L>(w1).max(bucket::empty::<L>(w2)) >= 2
}

/// Frees a lane in the pair of hash `h` by displacement, inserting
/// nothing (an `insert_unique` at a cap makes room before it decides
/// again); whether a lane is free now.
pub(crate) fn make_room_for<L: Layout>(
    t: &Table,
    h: u64,
    addressing: Addressing,
    c: &Counters,
) -> bool {
    let (Located { i1, i2, .. }, _, _) = t.candidates::<L>(h, addressing);
    path::make_room::<L>(t, i1, i2, c.shard(), |_| true) == Room::Made
}

/// Removes one copy of the tag of hash `h`; `false` if neither bucket holds one.
pub(crate) fn remove<L: Layout>(t: &Table, h: u64, c: &Counters) -> Result<bool, Sealed> {
    let (Located { tag, i1, i2 }, word1, word2) = t.candidates::<L>(h, t.geometry().addressing());
    let shard = c.shard();
    // Holding the pair's stripe excludes a concurrent move of this tag, which
    // could otherwise copy back a tag this remove just cleared.
    let _lock = StripeLock::acquire(t.stripe(i1, i2)).ok_or(Sealed)?;
    #[cfg(loom)]
    let _lock = broken::unless(t, Canary::UnlockedRemove, _lock);
    pause::here(pause::Point::RemoveHeld, pause::At { a: i1, b: i2, tag });
    let removed = take::<L>(word1, tag, shard) || take::<L>(word2, tag, shard);
    if removed {
        shard.add_len(-1);
        // Inserts at the growth cap may search again.
        t.room().note_freed();
    }
    Ok(removed)
}

/// The two bucket words, the one with more empty lanes first (with the
/// value it was read at).
#[inline(always)]
fn emptier_first<'t, L: Layout>(
    word1: &'t AtomicU64,
    word2: &'t AtomicU64,
) -> ((&'t AtomicU64, u64), &'t AtomicU64) {
    // Relaxed: a placement hint, and the value a first CAS compares with;
    // `put_from` retries on a stale one.
    let (w1, w2) = (word1.load(Ordering::Relaxed), word2.load(Ordering::Relaxed));
    if bucket::empty::<L>(w2) > bucket::empty::<L>(w1) {
        ((word2, w2), word1)
    } else {
        ((word1, w1), word2)
    }
}

/// Occupied lanes over the whole table (a scan; for diagnostics and tests).
pub(crate) fn occupied<L: Layout>(t: &Table) -> usize {
    t.words()
        .iter()
        // Relaxed: a diagnostic count, not a snapshot; orders nothing.
        .map(|w| bucket::occupied::<L>(w.load(Ordering::Relaxed)) as usize)
        .sum()
}

/// Empties every bucket. Not atomic as a whole with respect to concurrent
/// writers: a plain insert racing it may or may not survive.
///
/// It holds every version stripe (taken in ascending order) while it
/// zeroes, so no displacement hop is half done across it: a hop that had
/// copied a tag and then found its source cleared would otherwise undo its
/// copy, and could take a copy of the same tag that a later insert put
/// there after `clear` returned. Taking all stripes cannot deadlock: every
/// other holder holds just one and never waits while holding it.
///
/// `Err(Sealed)`, having changed nothing, if the table is being replaced.
pub(crate) fn clear(t: &Table) -> Result<(), Sealed> {
    let _all = hold_all(t)?;
    for w in t.words() {
        // AcqRel: nothing pairs with it (a cleared word publishes nothing);
        // what matters is that it is an RMW, see above.
        w.swap(0, Ordering::AcqRel);
    }
    t.room().note_freed();
    Ok(())
}

/// Takes every stripe of `t` in ascending order (which cannot deadlock:
/// every other holder holds one and never waits while holding it), or
/// none if one is sealed.
pub(crate) fn hold_all(t: &Table) -> Result<Vec<StripeLock<'_>>, Sealed> {
    t.stripes()
        .iter()
        .map(|s| StripeLock::acquire(s).ok_or(Sealed))
        .collect()
}

/// The loom canaries' deliberately broken variants of the rules above.
#[cfg(loom)]
mod broken {
    use super::*;

    /// `UnvalidatedNegative`: a negative read is trusted as if the stripe
    /// had not changed. (A sealed pair still goes on to the migrating
    /// read, which `migrating.rs` breaks in the same way.)
    pub(super) fn unvalidated_after(t: &Table, before: u64, after: u64) -> u64 {
        if t.canary == Canary::UnvalidatedNegative && before != SEALED {
            before
        } else {
            after
        }
    }

    /// `UnmarkedHop`: a count ignores the tag in flight.
    pub(super) fn count_stands(t: &Table, before: u64, after: u64, stands: bool) -> bool {
        if t.canary == Canary::UnmarkedHop {
            miss_stands(before, after)
        } else {
            stands
        }
    }

    /// `UncheckedUpper`: the levels above are asked before the pair's
    /// stripe is taken (`Some(answer)`), and not again under it.
    pub(super) fn asked_before_stripe(t: &Table, elsewhere: impl Fn() -> bool) -> Option<bool> {
        (t.canary == Canary::UncheckedUpper).then(elsewhere)
    }

    /// `UncheckedSecondDecision`: a decision that may take any lane trusts
    /// the first decision's answer that no copy exists.
    pub(super) fn trusts_first_decision(t: &Table, lanes: Lanes) -> bool {
        lanes == Lanes::Any && t.canary == Canary::UncheckedSecondDecision
    }

    /// `UnlockedUnique`, `UnlockedRemove`: the pair's stripe is let go at
    /// once, so the check and the CAS run unprotected.
    pub(super) fn unless<'t>(
        t: &Table,
        canary: Canary,
        lock: StripeLock<'t>,
    ) -> Option<StripeLock<'t>> {
        (t.canary != canary).then_some(lock)
    }
}
