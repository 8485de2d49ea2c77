//! One table: the bucket words, their version stripes, and their geometry.
//!
//! # Version stripes
//!
//! `stripes[s]` is a seqlock-style version per group of bucket *pairs*
//! (`s = min(i, j) mod stripes`). Writers that must exclude each other on a
//! pair (a displacement hop, `remove`, `insert_unique`) take it by moving it
//! from even to odd and release it by storing the next even value. Readers
//! never write it: they read it before and after their two bucket loads to
//! validate a negative answer.
//!
//! When the table is replaced by its doubled successor, every stripe is
//! *sealed*: set to [`SEALED`] (odd, so no writer can take it) and never
//! released. A sealed pair has no writer moving or removing its tags in
//! this table any more; operations that find it sealed go on in the
//! successor (see `migrate.rs`).

use super::geometry::Geometry;
use super::migrate::Migration;
use super::room::RoomHint;
use crate::memory::{AllocError, HugePages, Release, Words};
use crate::sync::{fence, AtomicPtr, AtomicU64, AtomicUsize, Backoff, Ordering};

/// The value of a sealed stripe: odd, and beyond any version a stripe
/// reaches by counting (2^62 holds at one per nanosecond take 146 years).
pub(crate) const SEALED: u64 = u64::MAX;

/// Set on a held (odd) stripe whose holder only reads the pair (a
/// snapshot): readers may trust a negative answer under it.
pub(crate) const FROZEN: u64 = 1 << 62;

/// Whether a reader that saw stripe value `v` before and after its bucket
/// loads may trust what it read: no writer held the pair (`v` even), or
/// its holder changes nothing there (frozen, not sealed).
#[inline(always)]
pub(crate) fn is_stable(v: u64) -> bool {
    // `|` and `&`, not `||` and `&&`: no branches on the lookup path.
    (v & 1 == 0) | ((v & FROZEN != 0) & (v != SEALED))
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

/// Exclusive hold of a version stripe; released (to the next even version)
/// on drop.
pub(crate) struct StripeLock<'t> {
    stripe: &'t AtomicU64,
    locked: u64,
}

impl<'t> StripeLock<'t> {
    /// Takes `stripe`, waiting while another writer holds it; `None` if it
    /// is sealed (the table is being replaced: go on in the successor).
    /// Callers hold at most one stripe at a time (or take all in ascending
    /// order), so waiting cannot deadlock.
    #[inline]
    pub(crate) fn acquire(stripe: &'t AtomicU64) -> Option<Self> {
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
            if v & 1 == 0 {
                // Acquire: pairs with the Release store in `drop` of the
                // previous holder, so its bucket writes are visible to the
                // checks this holder makes under the stripe.
                match stripe.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => {
                        return Some(StripeLock {
                            stripe,
                            locked: v + 1,
                        })
                    }
                    Err(seen) => v = seen,
                }
            } else {
                backoff.snooze();
                // Relaxed: only a hint, as above.
                v = stripe.load(Ordering::Relaxed);
            }
        }
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
        if v & 1 == 1 {
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

impl StripeLock<'_> {
    /// Marks the hold as read-only: no bucket of the pair changes until it
    /// ends, so validating readers may trust a negative answer meanwhile.
    pub(crate) fn freeze(&self) {
        // Release: pairs with a validating reader's Acquire load of the
        // stripe, like the release in `drop`.
        self.stripe.store(self.locked | FROZEN, Ordering::Release);
    }
}

impl Drop for StripeLock<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: pairs with the Acquire of the next `acquire` and with the
        // Acquire first-version load of a validating reader, which then sees
        // every bucket write made under this hold.
        self.stripe.store(self.locked + 1, Ordering::Release);
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
        {
            let _g = StripeLock::acquire(s).unwrap();
            assert_eq!(s.load(Ordering::Relaxed), 1, "held stripe is odd");
        }
        assert_eq!(
            s.load(Ordering::Relaxed),
            2,
            "released stripe is the next even"
        );
        seal(s);
        assert!(
            StripeLock::acquire(s).is_none(),
            "a sealed stripe cannot be taken"
        );
        seal(s);
        assert_eq!(s.load(Ordering::Relaxed), SEALED, "sealing is idempotent");
    }
}
