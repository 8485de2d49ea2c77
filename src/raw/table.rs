//! One table: the bucket words, their version stripes (`stripe.rs` says
//! what a stripe word means), and their geometry; and the link to the
//! doubled successor while the table is replaced (`migrate.rs` has the
//! protocol).

use super::bucket::Layout;
use super::geometry::{Addressing, Geometry, Located};
use super::room::RoomHint;
use super::slot_map::Pin;
use crate::memory::{AllocError, HugePages, Release, Words};
use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::ptr::NonNull;

/// Most version stripes a table gets: 4096 words are 32 KiB, small enough to
/// stay in cache next to the buckets, many enough that writers on 2-8
/// threads rarely share one.
#[cfg(not(loom))]
const MAX_STRIPES: usize = 4096;
#[cfg(loom)]
const MAX_STRIPES: usize = 2;

/// Buckets per version stripe of a table: the stripes cost at most 1/64
/// of the bucket words (a 16-bit filter 0.27 bits per key at most). One
/// per four, until 2026-12-07, cost a table of 16,384 buckets a quarter
/// of its words (4.2 bits per key), and a filter grown past its tag bits
/// as much in its first level. Two writers collide on a stripe (and one
/// waits) only when both take the same one at once, which stays rare with
/// `MIN_STRIPES` or more among 2-8 threads.
const BUCKETS_PER_STRIPE: usize = 64;

/// Fewest version stripes a table gets (128 bytes).
#[cfg(not(loom))]
const MIN_STRIPES: usize = 16;
#[cfg(loom)]
const MIN_STRIPES: usize = 2;

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
    /// For a region of a level that grows by regions (`regions.rs`): which
    /// of its tags are leaving it in the running step, so displacement
    /// leaves them where the step's sweep looks. `None` for every other
    /// table.
    pin: Option<Pin>,
    /// A deliberately broken protocol, for the loom canaries only.
    #[cfg(loom)]
    pub(crate) canary: crate::canary::Canary,
}

impl Table {
    /// A zeroed table with the buckets of `geo`.
    pub(crate) fn new(geo: Geometry) -> Result<Table, AllocError> {
        let buckets =
            usize::try_from(geo.buckets()).map_err(|_| AllocError { bytes: usize::MAX })?;
        Self::with_stripes(geo, Self::stripes_for(buckets), None)
    }

    /// A zeroed region of a level that grows by regions (`regions.rs`):
    /// one stripe per 256 buckets (a level has hundreds of regions, and
    /// [`new`](Self::new)'s one per 64 would cost it 0.67 bits per key
    /// instead of 0.17), and `pin` for its displacements.
    pub(crate) fn for_region(geo: Geometry, pin: Pin) -> Result<Table, AllocError> {
        debug_assert_eq!(geo.generation(), 0, "regions never double");
        let buckets =
            usize::try_from(geo.buckets()).map_err(|_| AllocError { bytes: usize::MAX })?;
        Self::with_stripes(geo, Self::region_stripes_for(buckets), Some(pin))
    }

    /// Stripes of a region of `buckets` buckets: one per 256.
    fn region_stripes_for(buckets: usize) -> usize {
        (buckets / 256).next_power_of_two().clamp(2, MAX_STRIPES)
    }

    /// Heap bytes a region of `buckets` buckets takes ([`for_region`](Self::for_region)).
    pub(crate) fn bytes_for_region(buckets: usize) -> usize {
        buckets.saturating_add(Self::region_stripes_for(buckets)) * std::mem::size_of::<u64>()
    }

    fn with_stripes(
        geo: Geometry,
        stripe_count: usize,
        pin: Option<Pin>,
    ) -> Result<Table, AllocError> {
        let buckets =
            usize::try_from(geo.buckets()).map_err(|_| AllocError { bytes: usize::MAX })?;
        // A doubled table (or one loaded at a later generation) can be
        // retired by the next doubling: its pages should be returnable
        // then. A first table stays on the heap, and so does a region
        // (always generation 0, never retired).
        let words = if geo.generation() > 0 {
            Words::zeroed_releasable(buckets)?
        } else {
            Words::zeroed(buckets)?
        };
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
            pin,
            #[cfg(loom)]
            canary: crate::canary::Canary::None,
        })
    }

    /// Whether a displacement must leave `tag` in bucket `bucket` (whose
    /// pair is `{bucket, alt}`): its region's step is moving it out. Always
    /// `false` outside a level that grows by regions.
    #[inline(always)]
    pub(crate) fn pinned(&self, bucket: usize, alt: usize, tag: u64) -> bool {
        self.pin.as_ref().is_some_and(|p| p.holds(tag, bucket, alt))
    }

    /// Whether this table's displacements ask [`pinned`](Self::pinned).
    #[inline(always)]
    pub(crate) fn has_pin(&self) -> bool {
        self.pin.is_some()
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
        (self.buckets() + self.stripe_count()) * std::mem::size_of::<u64>()
    }

    /// Heap bytes a table of `buckets` buckets takes.
    pub(crate) fn bytes_for(buckets: usize) -> usize {
        buckets.saturating_add(Self::stripes_for(buckets)) * std::mem::size_of::<u64>()
    }

    /// Version stripes of a table of `buckets` buckets: one per
    /// [`BUCKETS_PER_STRIPE`] (rounded up to a power of two), from
    /// [`MIN_STRIPES`] to [`MAX_STRIPES`].
    fn stripes_for(buckets: usize) -> usize {
        (buckets
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX / 2 + 1)
            / BUCKETS_PER_STRIPE)
            .clamp(MIN_STRIPES, MAX_STRIPES)
    }

    /// The tag and the two candidate buckets of hash `h` in this table,
    /// with their words: the lookup's path, without bounds checks.
    #[inline(always)]
    pub(crate) fn candidates<L: Layout>(
        &self,
        h: u64,
        addressing: Addressing,
    ) -> (Located, &AtomicU64, &AtomicU64) {
        let at = self.geo.locate_as::<L>(h, addressing);
        let words = self.words.as_slice();
        debug_assert!(at.i1 < words.len() && at.i2 < words.len());
        // SAFETY: `locate` returns buckets below `geo.buckets()` for every
        // hash, which `Geometry::new` guarantees by refusing an odd `m0`
        // or an overflowing `buckets()` (the range is tested in
        // geometry.rs); `new` allocated exactly `geo.buckets()` words, and
        // neither field changes afterwards.
        unsafe { (at, words.get_unchecked(at.i1), words.get_unchecked(at.i2)) }
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
        let s = self.stripe_index(i, j);
        // SAFETY: `new` sets `stripe_mask` to `stripes.len() - 1` with a
        // power-of-two length, and neither field changes afterwards, so
        // `s < stripes.len()`. (Spares the lookup a bounds check.)
        unsafe { self.stripes.get_unchecked(s) }
    }

    /// The index of the stripe of the pair `{i, j}`: any symmetric function
    /// of the pair serves; XOR is the cheapest (two instructions where the
    /// lower bucket took four).
    #[inline(always)]
    pub(crate) fn stripe_index(&self, i: usize, j: usize) -> usize {
        (i ^ j) & self.stripe_mask
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

/// The state of one table's doubling into its successor: what links a
/// filter's tables into a chain. The protocol that uses it is in
/// `migrate.rs`; the successor is here, with the table that owns it.
pub(crate) struct Migration {
    /// The successor, owned (from `Box::into_raw`, freed in `Drop`): the
    /// first table owns the whole chain of its successors this way, so
    /// every table a filter ever had lives until the filter is dropped.
    next: NonNull<Table>,
    /// Per chunk: free, claimed or done (see `migrate.rs`).
    pub(super) chunks: Box<[AtomicUsize]>,
    /// The next chunk to offer a helper (a hint: chunks are also claimed
    /// out of order, by writers that need their own buckets migrated).
    pub(super) cursor: AtomicUsize,
    /// Chunks done.
    pub(super) done: AtomicUsize,
    /// 1 once every stripe of the old table is sealed.
    pub(super) sealed: AtomicUsize,
}

// SAFETY: `next` is an owned `Table` (like a `Box<Table>`), which is
// `Send + Sync`. Everything else is atomics.
unsafe impl Send for Migration {}
// SAFETY: as above; shared access only hands out `&Table` and uses atomics.
unsafe impl Sync for Migration {}

impl Migration {
    /// The migration into `next`, with `chunks` (all free) to copy.
    pub(super) fn link(next: Table, chunks: Box<[AtomicUsize]>) -> Migration {
        Migration {
            next: NonNull::from(Box::leak(Box::new(next))),
            chunks,
            cursor: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            sealed: AtomicUsize::new(0),
        }
    }

    /// The successor table.
    #[inline(always)]
    pub(crate) fn next(&self) -> &Table {
        // SAFETY: the successor is owned by this migration and freed only
        // in its `Drop`, which cannot run while `&self` lives.
        unsafe { self.next.as_ref() }
    }
}

impl Drop for Migration {
    fn drop(&mut self) {
        // SAFETY: `next` came from `Box::into_raw` in `link`, is owned by
        // this migration alone, and `&mut self` means nothing borrows it.
        drop(unsafe { Box::from_raw(self.next.as_ptr()) });
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_pair_has_one_stripe_whichever_bucket_comes_first() {
        let t = Table::new(Geometry::new(64, 0, Addressing::V3)).unwrap();
        assert!(std::ptr::eq(t.stripe(3, 9), t.stripe(9, 3)));
        assert!(!std::ptr::eq(t.stripe(3, 9), t.stripe(4, 9)));
    }

    /// A table's version stripes cost at most 1/32 of its bucket words
    /// (one per 64 buckets, the count rounded up to a power of two) above a
    /// floor of 16, and at most 4,096: a filter for 64,000 keys (16,896
    /// buckets) gets 512, not 4,096 (a quarter of its words until
    /// 2026-12-07).
    #[test]
    fn stripes_cost_a_thirty_second_of_the_words_at_most() {
        for buckets in [2, 64, 264, 1_000, 16_896, 65_537, 262_144, 3 << 20] {
            let s = Table::stripes_for(buckets);
            assert!(s.is_power_of_two(), "{buckets}: {s}");
            assert!((MIN_STRIPES..=MAX_STRIPES).contains(&s), "{buckets}: {s}");
            assert!(s == MIN_STRIPES || s * 32 <= buckets, "{buckets}: {s}");
            let m0 = (buckets + (buckets & 1)) as u64;
            if m0 >= super::super::geometry::MIN_M0 {
                let t = Table::new(Geometry::new(m0, 0, Addressing::V3)).unwrap();
                assert_eq!(t.stripe_count(), Table::stripes_for(m0 as usize), "{m0}");
            }
        }
        assert_eq!(Table::stripes_for(16_896), 512);
        assert_eq!(Table::stripes_for(1 << 20), MAX_STRIPES);
    }
}
