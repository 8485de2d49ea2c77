//! One table: the bucket words, their version stripes, and their geometry.
//!
//! # Version stripes
//!
//! `stripes[s]` is a version word per group of bucket *pairs*
//! (`s = min(i, j) mod stripes`). Writers that must exclude each other on a
//! pair (a displacement hop, `remove`, `insert_unique`, and `clear` and a
//! save, which hold them all) take it with a CAS that sets its [`HELD`] bit
//! and release it by storing the next free value. Readers never write it:
//! they read it before and after their two bucket loads and trust what
//! they read only if it did not change (see `ops.rs` for why that is
//! enough). The word is
//!
//! ```text
//! bits 63..17: counter   bits 16..1: tag in flight (0: none)   bit 0: held
//! ```
//!
//! and every write makes it larger (until the counter wraps after 2^47
//! holds of one stripe), so two equal reads are one and the same write:
//!
//! * take: `(c, 0, 0)` to `(c, t, 1)`, `t` being the tag a hop moves (0 for
//!   every other holder);
//! * a hop's *step*, between its copy and its clear: `(c, t, 1)` to
//!   `(c + 1, t, 1)` ([`StripeLock::copied`]);
//! * release: to `(c' + 1, 0, 0)`.
//!
//! When the table is replaced by its doubled successor, every stripe is
//! *sealed*: set to [`SEALED`] (held, so no writer can take it) and never
//! released. A sealed pair has no writer moving or removing its tags in
//! this table any more; operations that find it sealed go on in the
//! successor (see `migrate.rs`).

use super::geometry::Geometry;
use super::migrate::Migration;
use super::room::RoomHint;
use crate::memory::{AllocError, HugePages, Release, Words};
use crate::sync::{fence, AtomicPtr, AtomicU64, AtomicUsize, Backoff, Ordering};

/// The value of a sealed stripe: held, and never reached by counting (its
/// tag field is the reserved all-ones tag, which no hop moves).
pub(crate) const SEALED: u64 = u64::MAX;

/// The held bit of a stripe word.
pub(crate) const HELD: u64 = 1;

/// Where a stripe word keeps the tag in flight.
const TAG_SHIFT: u32 = 1;
const TAG_FIELD: u64 = 0xFFFF << TAG_SHIFT;

/// Everything below the counter: adding one to a word with these bits set
/// counts up and clears the tag and the held bit.
const BELOW_COUNTER: u64 = TAG_FIELD | HELD;

/// The tag a displacement hop holding this stripe is moving (copied, or
/// about to be, and not yet released); 0 if none. Its copy may show in
/// both buckets meanwhile.
#[inline(always)]
pub(crate) fn in_flight(v: u64) -> u64 {
    (v & TAG_FIELD) >> TAG_SHIFT
}

/// Whether a reader that found no copy of its tag may answer "absent",
/// having read stripe value `before` before its bucket loads and `after`
/// after them: no writer of the pair took, stepped or released the stripe
/// meanwhile, and the pair is not sealed. A holder that does not change
/// the word (a `remove`, an `insert_unique`, a save, a hop that has not
/// copied yet) does not make readers wait.
#[inline(always)]
pub(crate) fn miss_stands(before: u64, after: u64) -> bool {
    // `&`, not `&&`: no branches on the lookup path.
    (before == after) & (before != SEALED)
}

/// Whether a reader's count of the copies of `tag` stands: as
/// [`miss_stands`], and no hop of that tag is in flight on the stripe (its
/// copy could show in both buckets).
#[inline(always)]
pub(crate) fn count_stands(before: u64, after: u64, tag: u64) -> bool {
    miss_stands(before, after) & (in_flight(before) != tag)
}

/// Most version stripes a table gets: 4096 words are 32 KiB, small enough to
/// stay in cache next to the buckets, many enough that writers on 2-8
/// threads rarely share one.
#[cfg(not(loom))]
const MAX_STRIPES: usize = 4096;
#[cfg(loom)]
const MAX_STRIPES: usize = 2;

/// The buckets and stripes of one filter generation.
pub(crate) struct Table {
    words: Words,
    stripes: Box<[AtomicU64]>,
    stripe_mask: usize,
    geo: Geometry,
    /// The migration into this table's doubled successor, once growth has
    /// begun (null before). Published once, never replaced; owned by this
    /// table (it owns the successor in turn) and freed with it.
    migration: AtomicPtr<Migration>,
    /// 1 while a thread allocates the successor (so only one does).
    growth_claim: AtomicUsize,
    /// Whether an insert that finds its buckets full may skip the search.
    room: RoomHint,
    /// A deliberately broken protocol, for the loom canaries only.
    #[cfg(loom)]
    pub(crate) canary: crate::loom_support::Canary,
}

impl Table {
    /// A zeroed table with the buckets of `geo`.
    pub(crate) fn new(geo: Geometry) -> Result<Table, AllocError> {
        let buckets =
            usize::try_from(geo.buckets()).map_err(|_| AllocError { bytes: usize::MAX })?;
        let words = Words::zeroed(buckets)?;
        let stripe_count = Self::stripes_for(buckets);
        let mut stripes = Vec::new();
        stripes
            .try_reserve_exact(stripe_count)
            .map_err(|_| AllocError {
                bytes: stripe_count * 8,
            })?;
        stripes.extend((0..stripe_count).map(|_| AtomicU64::new(0)));
        assert!(
            stripe_count.is_power_of_two(),
            "`stripe` masks with len - 1"
        );
        Ok(Table {
            words,
            stripes: stripes.into_boxed_slice(),
            stripe_mask: stripe_count - 1,
            geo,
            migration: AtomicPtr::new(std::ptr::null_mut()),
            growth_claim: AtomicUsize::new(0),
            room: RoomHint::new(),
            #[cfg(loom)]
            canary: crate::loom_support::Canary::None,
        })
    }

    /// The migration into this table's successor, if growth has begun.
    #[inline(always)]
    pub(crate) fn migration(&self) -> Option<&Migration> {
        // Acquire: pairs with the Release CAS in `begin_migration`, so the
        // successor table and the migration's fields are initialised.
        let m = self.migration.load(Ordering::Acquire);
        // SAFETY: a published migration came from `Box::into_raw`, is never
        // replaced, and is freed only in this table's `Drop`, which cannot
        // run while `&self` lives.
        unsafe { m.as_ref() }
    }

    /// The full hint (see `room.rs`).
    #[inline(always)]
    pub(crate) fn room(&self) -> &RoomHint {
        &self.room
    }

    /// Claims the right to allocate this table's successor; `false` if
    /// another thread holds it (or already used it).
    pub(crate) fn claim_growth(&self) -> bool {
        // Relaxed: the claim orders nothing; the migration's publication
        // (Release) carries the data.
        self.growth_claim
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Gives the claim back after a failed allocation.
    pub(crate) fn release_growth_claim(&self) {
        // Relaxed: as in `claim_growth`.
        self.growth_claim.store(0, Ordering::Relaxed);
    }

    /// Publishes `m` as this table's migration; `Err(m)` if another thread
    /// published one first.
    pub(crate) fn begin_migration(&self, m: Box<Migration>) -> Result<(), Box<Migration>> {
        let m = Box::into_raw(m);
        // Release: pairs with the Acquire load in `migration`, publishing
        // the successor's zeroed words and the migration's state. AcqRel
        // would add nothing: the loser learns only that it lost.
        self.migration
            .compare_exchange(
                std::ptr::null_mut(),
                m,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .map(|_| ())
            // SAFETY: `m` came from `Box::into_raw` above and, the CAS
            // having failed, was never published.
            .map_err(|_| unsafe { Box::from_raw(m) })
    }

    /// A handle that returns this table's bucket pages to the OS (see
    /// [`Release`]), for a retired table; `None` if they stay resident.
    pub(crate) fn release_handle(&self) -> Option<Release> {
        self.words.release_handle()
    }

    /// Whether this table's bucket pages were returned to the OS.
    pub(crate) fn is_released(&self) -> bool {
        self.words.is_released()
    }

    /// Number of bucket words.
    #[inline(always)]
    pub(crate) fn buckets(&self) -> usize {
        self.words.as_slice().len()
    }

    /// Heap bytes: bucket words plus version stripes (32 KiB at most).
    pub(crate) fn bytes(&self) -> usize {
        Self::bytes_for(self.buckets())
    }

    /// Heap bytes a table of `buckets` buckets takes.
    pub(crate) fn bytes_for(buckets: usize) -> usize {
        buckets.saturating_add(Self::stripes_for(buckets)) * std::mem::size_of::<u64>()
    }

    /// Version stripes of a table of `buckets` buckets: one per four
    /// buckets keeps a small table's stripes smaller than its buckets;
    /// writers on 2-8 threads still rarely collide.
    fn stripes_for(buckets: usize) -> usize {
        (buckets
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX / 2 + 1)
            / 4)
        .clamp(2, MAX_STRIPES)
    }

    #[inline(always)]
    pub(crate) fn word(&self, bucket: usize) -> &AtomicU64 {
        // Bucket indices come from `locate`/`alt`, always `< buckets()`;
        // the bounds check stays as a guard and is nearly free.
        &self.words.as_slice()[bucket]
    }

    /// Hints the CPU to start loading bucket `bucket` into cache.
    #[inline(always)]
    pub(crate) fn prefetch(&self, bucket: usize) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        if let Some(word) = self.words.as_slice().get(bucket) {
            // SAFETY: SSE is part of the x86_64 baseline, and a prefetch of
            // a valid address has no architectural effect.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    (word as *const AtomicU64).cast(),
                )
            };
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = bucket;
    }

    /// Whether the kernel accepted this table's request for transparent
    /// huge pages (`false` also when the table was too small to ask).
    pub(crate) fn huge_pages(&self) -> bool {
        self.words.huge_pages() == HugePages::Accepted
    }

    pub(crate) fn words(&self) -> &[AtomicU64] {
        self.words.as_slice()
    }

    /// The bucket words as native-endian bytes, for loading a saved table
    /// into a table no other thread can see yet.
    pub(crate) fn words_as_bytes_mut(&mut self) -> &mut [u8] {
        self.words.as_bytes_mut()
    }

    /// How hashes map to tags and buckets in this table.
    #[inline(always)]
    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The version stripe guarding the pair `{i, j}` (symmetric).
    #[inline(always)]
    pub(crate) fn stripe(&self, i: usize, j: usize) -> &AtomicU64 {
        let s = i.min(j) & self.stripe_mask;
        // SAFETY: `new` sets `stripe_mask` to `stripes.len() - 1` with a
        // power-of-two length, and neither field changes afterwards, so
        // `s < stripes.len()`. (Spares the lookup a bounds check.)
        unsafe { self.stripes.get_unchecked(s) }
    }

    /// Number of version stripes.
    pub(crate) fn stripe_count(&self) -> usize {
        self.stripes.len()
    }

    /// Every version stripe, in index order.
    pub(crate) fn stripes(&self) -> &[AtomicU64] {
        &self.stripes
    }
}

/// Exclusive hold of a version stripe; released (to the next free value)
/// on drop.
pub(crate) struct StripeLock<'t> {
    stripe: &'t AtomicU64,
    /// The value this hold last wrote.
    held: u64,
}

impl<'t> StripeLock<'t> {
    /// Takes `stripe`, waiting while another writer holds it; `None` if it
    /// is sealed (the table is being replaced: go on in the successor).
    /// Callers hold at most one stripe at a time (or take all in ascending
    /// order), so waiting cannot deadlock.
    #[inline]
    pub(crate) fn acquire(stripe: &'t AtomicU64) -> Option<Self> {
        Self::acquire_moving(stripe, 0)
    }

    /// Takes `stripe` for a displacement hop of `tag`, marking the tag in
    /// flight (see [`count_stands`]) before the hop copies it anywhere.
    #[inline]
    pub(crate) fn acquire_moving(stripe: &'t AtomicU64, tag: u64) -> Option<Self> {
        debug_assert!(tag < 0xFFFF, "the all-ones tag is reserved");
        let mut backoff = Backoff::default();
        // Relaxed: only a hint; the CAS below carries the ordering.
        let mut v = stripe.load(Ordering::Relaxed);
        loop {
            if v == SEALED {
                // Acquire fence: pairs with the sealing CAS (Release) whose
                // value was read Relaxed, so the caller, going on to the
                // migration, finds it published.
                fence(Ordering::Acquire);
                return None;
            }
            if v & HELD == 0 {
                let held = v | (tag << TAG_SHIFT) | HELD;
                // AcqRel. Acquire: pairs with the Release store in `drop`
                // of the previous holder, so its bucket writes are visible
                // to the checks this holder makes under the stripe.
                // Release: pairs with the Acquire first stripe load of a
                // reader that reads this value and then trusts a read made
                // under this hold: everything that happened before this
                // writer took the stripe (the insert of the key a `remove`
                // takes, say) is visible to that reader's bucket loads.
                #[cfg(loom)]
                let take = if crate::loom_support::acquire_only_take() {
                    Ordering::Acquire
                } else {
                    Ordering::AcqRel
                };
                #[cfg(not(loom))]
                let take = Ordering::AcqRel;
                match stripe.compare_exchange_weak(v, held, take, Ordering::Relaxed) {
                    Ok(_) => return Some(StripeLock { stripe, held }),
                    Err(seen) => v = seen,
                }
            } else {
                backoff.snooze();
                // Relaxed: only a hint, as above.
                v = stripe.load(Ordering::Relaxed);
            }
        }
    }

    /// A hop's step: its copy has landed in the destination and it is
    /// about to clear the source. Bumps the counter, keeping the hold and
    /// the tag in flight.
    #[inline]
    pub(crate) fn copied(&mut self) {
        let next = (self.held | BELOW_COUNTER).wrapping_add(1) | (self.held & BELOW_COUNTER);
        self.held = next;
        // Release: (1) a reader whose bucket load sees the hop's clear
        // (a Release CAS, later in this thread) then reads this value or a
        // later one in its last stripe load, so a read that missed the tag
        // on both sides of the hop is retried; (2) a reader whose first
        // stripe load reads this value sees the copy in its bucket loads.
        self.stripe.store(next, Ordering::Release);
    }
}

/// Seals `stripe` for good (see the module docs), waiting for a writer
/// that holds it to finish. Idempotent; any thread may seal.
pub(crate) fn seal(stripe: &AtomicU64) {
    let mut backoff = Backoff::default();
    while !try_seal(stripe) {
        backoff.snooze();
    }
}

/// Seals `stripe` unless a writer holds it now; `true` if it is sealed
/// (by this call or an earlier one). Never waits: a held stripe is left
/// for a later call.
pub(crate) fn try_seal(stripe: &AtomicU64) -> bool {
    // Relaxed: only a hint; the CAS below carries the ordering.
    let mut v = stripe.load(Ordering::Relaxed);
    loop {
        if v == SEALED {
            // Acquire fence: pairs with the sealing CAS of whoever sealed
            // it (see below), as if this thread's read were that CAS.
            fence(Ordering::Acquire);
            return true;
        }
        if v & HELD != 0 {
            return false;
        }
        // AcqRel: the Acquire half pairs with the Release store that ended
        // the last hold, the Release half with the Acquire stripe load of a
        // reader or sealer that sees SEALED: whoever sees the seal sees
        // every move and remove this pair ever had in this table.
        match stripe.compare_exchange_weak(v, SEALED, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(seen) => v = seen,
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other thread can reach this table.
        let m = self.migration.load(Ordering::Relaxed);
        if !m.is_null() {
            // SAFETY: a published migration came from `Box::into_raw` and
            // is owned by this table; `&mut self` means nothing borrows it.
            // Dropping it drops the successor it owns, and so on down the
            // chain of later tables.
            drop(unsafe { Box::from_raw(m) });
        }
    }
}

impl Drop for StripeLock<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: pairs with the Acquire of the next `acquire` and with the
        // Acquire first stripe load of a validating reader, which then sees
        // every bucket write made under this hold.
        self.stripe.store(
            (self.held | BELOW_COUNTER).wrapping_add(1),
            Ordering::Release,
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn stripe_lock_is_exclusive_and_versions_advance() {
        let t = Table::new(Geometry::new(64, 0)).unwrap();
        let s = t.stripe(3, 9);
        assert!(std::ptr::eq(s, t.stripe(9, 3)), "stripe is symmetric");
        let load = || s.load(Ordering::Relaxed);
        {
            let _g = StripeLock::acquire(s).unwrap();
            assert_eq!(load(), HELD, "a plain hold sets the held bit only");
            assert!(!try_seal(s), "a held stripe is not sealed");
        }
        let free = load();
        assert_eq!(free & BELOW_COUNTER, 0, "released: no tag, not held");
        assert!(free > HELD, "the release counts up");
        {
            let mut g = StripeLock::acquire_moving(s, 0xABC).unwrap();
            let taken = load();
            assert_eq!((in_flight(taken), taken & HELD), (0xABC, HELD));
            assert!(taken > free);
            g.copied();
            let stepped = load();
            assert_eq!((in_flight(stepped), stepped & HELD), (0xABC, HELD));
            assert!(stepped > taken, "the step counts up");
            assert!(!count_stands(stepped, stepped, 0xABC), "tag in flight");
            assert!(count_stands(stepped, stepped, 0xABD), "another tag");
            assert!(miss_stands(stepped, stepped));
            assert!(!miss_stands(taken, stepped));
        }
        let released = load();
        assert_eq!(released & BELOW_COUNTER, 0);
        assert!(released > free);
        seal(s);
        assert!(!miss_stands(SEALED, SEALED), "a sealed pair routes on");
        assert!(
            StripeLock::acquire(s).is_none(),
            "a sealed stripe cannot be taken"
        );
        seal(s);
        assert_eq!(load(), SEALED, "sealing is idempotent");
    }

    #[test]
    fn the_counter_wraps_without_reaching_sealed() {
        let top = !BELOW_COUNTER;
        let s = AtomicU64::new(top);
        drop(StripeLock::acquire(&s).unwrap());
        assert_eq!(s.load(Ordering::Relaxed), 0, "wrapped to a free stripe");
        s.store(top, Ordering::Relaxed);
        {
            let mut g = StripeLock::acquire_moving(&s, 0xFFFE).unwrap();
            assert_ne!(s.load(Ordering::Relaxed), SEALED);
            g.copied();
            assert_ne!(s.load(Ordering::Relaxed), SEALED);
        }
        let v = s.load(Ordering::Relaxed);
        assert_eq!(v & BELOW_COUNTER, 0, "released after the wrap");
        assert!(StripeLock::acquire(&s).is_some());
    }
}
