//! Online doubling: moving one table's tags into its successor, a chunk of
//! buckets at a time, while every operation goes on.
//!
//! # Why the tags split without their keys
//!
//! A table of generation `g` has `n = m0 * 2^g` buckets and a tag's region
//! is its low `g` bits. Doubling adds one region bit (bit `g` of the tag),
//! so old bucket `j` splits into new buckets `j` (tags with bit `g` = 0) and
//! `j + n` (bit `g` = 1), and a key whose pair was `(i1, i2)` has the pair
//! `(i1 + b*n, i2 + b*n)` in the successor, `b` being that bit.
//!
//! # Protocol
//!
//! 1. **Begin.** One thread allocates the successor and publishes a
//!    `Migration` on the old table (`Table::begin_migration`).
//! 2. **Seal.** Every version stripe of the old table is sealed. From then
//!    on no tag moves between old buckets and none is removed there by an
//!    old-table writer; plain inserts into free old slots still happen.
//!    Helpers seal without waiting ([`Migration::seal_all`]): a stripe that
//!    a writer holds now (a remove, a hop, or a save holding them all) is
//!    left for a later helper, and no chunk is claimed, so no bucket is
//!    forwarded, until every stripe is sealed. `sealed` records that all
//!    are; any thread that finds it unset seals what it can itself.
//! 3. **Copy.** Chunks of [`CHUNK_BUCKETS`] old buckets are claimed, each by
//!    exactly one thread. For each bucket the owner reads the old word,
//!    stores its two halves into the successor, then CASes the old word to
//!    [`FORWARDED`]; if a plain insert changed the word in between, the CAS
//!    fails and the owner copies again. Nobody else writes a successor
//!    bucket before its old bucket is forwarded, so the owner's plain stores
//!    cannot overwrite anything.
//! 4. **Finish.** The thread that completes the last chunk makes the
//!    successor the filter's current table (`tables.rs`). The old table
//!    stays allocated until the filter drops; once no writer can reach
//!    it, its bucket pages are returned to the OS.
//!
//! Readers never help and never wait for the migration: a key's tag is, at
//! every moment, in an old bucket that is not forwarded, or in the
//! successor's bucket of a forwarded one (see `migrating.rs`).

use super::bucket::Layout;
use super::geometry::Located;
use super::pause;
use super::stripe::try_seal;
use super::table::{Migration, Table};
use crate::sync::{AtomicUsize, Ordering};

/// An old bucket whose tags now live in the successor. All lanes all-ones:
/// the reserved tag value, so a forwarded word never matches a tag and has
/// no free lane, and an operation unaware of the migration sees a full
/// bucket holding nothing it looks for.
pub(crate) const FORWARDED: u64 = u64::MAX;

/// Old buckets per chunk: the most migration work one operation does on
/// its own behalf (256 words in, 512 out: a few microseconds).
#[cfg(not(loom))]
pub(crate) const CHUNK_BUCKETS: usize = 256;
#[cfg(loom)]
pub(crate) const CHUNK_BUCKETS: usize = 2;

const FREE: usize = 0;
const CLAIMED: usize = 1;
const DONE: usize = 2;

/// What a helping thread achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Helped {
    /// Nothing left to claim, or the chunk was taken by another thread.
    Nothing,
    /// Migrated a chunk; others remain.
    Chunk,
    /// Migrated the last chunk: the caller must install the successor.
    Finished,
}

impl Migration {
    /// The migration of `old` into `next`, which must be a zeroed table of
    /// twice the buckets and generation + 1. `None` if its state cannot be
    /// allocated.
    pub(crate) fn new(old: &Table, next: Table) -> Option<Migration> {
        let chunk_count = old.buckets().div_ceil(CHUNK_BUCKETS);
        let mut chunks = Vec::new();
        chunks.try_reserve_exact(chunk_count).ok()?;
        chunks.extend((0..chunk_count).map(|_| AtomicUsize::new(FREE)));
        Some(Migration::link(next, chunks.into_boxed_slice()))
    }

    /// Heap bytes of the migration's own state.
    pub(crate) fn bytes(&self) -> usize {
        self.chunks.len() * std::mem::size_of::<usize>()
    }

    /// Heap bytes of the state of a migration away from a table of
    /// `buckets` buckets (what [`bytes`](Self::bytes) will say).
    pub(crate) fn bytes_for(buckets: usize) -> usize {
        buckets.div_ceil(CHUNK_BUCKETS) * std::mem::size_of::<usize>()
    }

    /// Whether every chunk is done.
    pub(crate) fn is_done(&self) -> bool {
        // Acquire: pairs with the AcqRel `done` increments, so a thread that
        // sees the count complete sees every chunk's successor stores.
        self.done.load(Ordering::Acquire) == self.chunks.len()
    }

    /// Seals every stripe of `old` that no writer holds now; `true` once
    /// all are sealed. Never waits for a holder: that is what lets a plain
    /// insert help a migration without waiting for anyone.
    pub(crate) fn seal_all(&self, old: &Table) -> bool {
        // Acquire: pairs with the Release store below by whichever thread
        // sealed them all, so this thread's later bucket reads see every
        // move made before the seals.
        if self.sealed.load(Ordering::Acquire) == 1 {
            return true;
        }
        // Every stripe is tried (no short-circuit), so each call seals all
        // that are free and the last holder's release is all that is left.
        let all = old
            .stripes()
            .iter()
            .fold(true, |all, stripe| try_seal(stripe) & all);
        if all {
            // Release: pairs with the Acquire load above.
            self.sealed.store(1, Ordering::Release);
        }
        all
    }

    /// Claims and migrates the next free chunk, if any: the bounded help a
    /// writer gives the migration per operation. `Nothing`, having waited
    /// for no one, while a writer holds an unsealed stripe.
    pub(crate) fn help<L: Layout>(&self, old: &Table) -> Helped {
        // Sealed before a chunk number is taken from the cursor: a taken
        // number whose chunk is then not migrated would never be offered
        // again.
        if !self.seal_all(old) {
            return Helped::Nothing;
        }
        // Relaxed: a hint; the claim CAS decides ownership.
        let c = self.cursor.fetch_add(1, Ordering::Relaxed);
        if c >= self.chunks.len() {
            return Helped::Nothing;
        }
        self.migrate_chunk::<L>(old, c)
    }

    /// Makes sure old bucket `bucket` is forwarded, migrating its chunk if
    /// nobody has claimed it; `Nothing` if another thread owns the chunk
    /// and has not finished it yet, or a writer holds an unsealed stripe
    /// (the caller retries later).
    pub(crate) fn ensure<L: Layout>(&self, old: &Table, bucket: usize) -> Helped {
        if !self.seal_all(old) {
            return Helped::Nothing;
        }
        self.migrate_chunk::<L>(old, bucket / CHUNK_BUCKETS)
    }

    /// Claims chunk `c` and copies its buckets, if it is still free. The
    /// caller has seen every stripe sealed.
    fn migrate_chunk<L: Layout>(&self, old: &Table, c: usize) -> Helped {
        // Relaxed: a debug check of what the caller's Acquire load saw.
        debug_assert_eq!(
            self.sealed.load(Ordering::Relaxed),
            1,
            "forwarding needs every seal"
        );
        // Acquire on failure is not needed: a loser only learns who owns it.
        // Relaxed on success: ownership is all the claim decides; the bucket
        // words carry their own ordering.
        if self.chunks[c]
            .compare_exchange(FREE, CLAIMED, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Helped::Nothing;
        }
        let next = self.next();
        let n = old.buckets();
        let g = old.geometry().generation();
        let end = ((c + 1) * CHUNK_BUCKETS).min(n);
        for j in c * CHUNK_BUCKETS..end {
            forward_bucket::<L>(old, next, j, n, g);
        }
        // Relaxed: the state is a hint for `ensure`; the forwarded words
        // are what operations rely on.
        self.chunks[c].store(DONE, Ordering::Relaxed);
        // AcqRel: the Release half publishes this chunk's successor stores
        // to the thread that completes the last chunk; its Acquire half
        // (through the RMW chain) sees every other chunk's. That thread
        // then publishes the successor with its own Release.
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.chunks.len() {
            Helped::Finished
        } else {
            Helped::Chunk
        }
    }
}

/// Copies old bucket `j` into successor buckets `j` and `j + n`, then marks
/// it forwarded. The caller owns `j`'s chunk.
fn forward_bucket<L: Layout>(old: &Table, next: &Table, j: usize, n: usize, g: u32) {
    let word = old.word(j);
    // Relaxed: only the value the CAS below compares against; the
    // successor stores copy this value and need no ordering with whoever
    // wrote it (the forwarding CAS succeeds only on the value copied).
    let mut w = word.load(Ordering::Relaxed);
    #[cfg(loom)]
    if broken::forwarded_before_copy::<L>(old, next, j, n, g) {
        return;
    }
    loop {
        debug_assert_ne!(w, FORWARDED, "a chunk is migrated by its owner only");
        let (low, high) = split::<L>(w, g);
        // Relaxed: published by the Release CAS below; nobody reads these
        // words before seeing `j` forwarded.
        next.word(j).store(low, Ordering::Relaxed);
        next.word(j + n).store(high, Ordering::Relaxed);
        pause::here(
            pause::Point::ForwardCopied,
            pause::At { a: j, b: j, tag: 0 },
        );
        #[cfg(loom)]
        if broken::forwarded_blindly(old, j) {
            return;
        }
        // AcqRel: the Release half publishes the two stores above to every
        // thread that then loads `FORWARDED` with Acquire (readers,
        // successor writers); being an RMW it also fails if a plain insert
        // got in after the load, so no tag is left behind.
        match word.compare_exchange(w, FORWARDED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(seen) => w = seen,
        }
    }
}

/// Splits a bucket word by bit `g` of each tag: `(tags with it 0, tags with
/// it 1)`, each tag keeping its lane. An empty lane (tag 0) goes low, as 0.
#[inline]
pub(crate) fn split<L: Layout>(w: u64, g: u32) -> (u64, u64) {
    // Bit `g` of every lane, moved to the lane's lowest bit, then widened to
    // the whole lane (no carries: each lane holds 0 or 1 before the multiply).
    let ones = (w >> g) & L::LOW;
    let high_lanes = ones * L::TAG_MASK;
    (w & !high_lanes, w & high_lanes)
}

/// Where the key at `at` (located in `old`) lives in the successor.
#[inline(always)]
pub(crate) fn successor_of(old: &Table, at: Located) -> Located {
    let g = old.geometry().generation();
    let offset = ((at.tag >> g) & 1) as usize * old.buckets();
    Located {
        tag: at.tag,
        i1: at.i1 + offset,
        i2: at.i2 + offset,
    }
}

/// The old bucket whose tags successor bucket `x` receives.
#[inline(always)]
pub(crate) fn source_of(old: &Table, x: usize) -> usize {
    let n = old.buckets();
    if x >= n {
        x - n
    } else {
        x
    }
}

/// Whether old bucket `j` has been forwarded (its tags live in the
/// successor, which may now be written there).
#[inline(always)]
pub(crate) fn is_forwarded(old: &Table, j: usize) -> bool {
    // Acquire: pairs with the forwarding CAS, so the successor's copy of
    // the bucket is visible to what the caller does next.
    old.word(j).load(Ordering::Acquire) == FORWARDED
}

/// The loom canaries' deliberately broken variants of forwarding.
#[cfg(loom)]
mod broken {
    use super::*;
    use crate::canary::Canary;

    /// `ForwardBeforeCopy`: the old bucket is forwarded before the copy
    /// exists. `true` if it ran instead of the real forwarding.
    pub(super) fn forwarded_before_copy<L: Layout>(
        old: &Table,
        next: &Table,
        j: usize,
        n: usize,
        g: u32,
    ) -> bool {
        if old.canary != Canary::ForwardBeforeCopy {
            return false;
        }
        let w = old.word(j).swap(FORWARDED, Ordering::AcqRel);
        let (low, high) = split::<L>(w, g);
        next.word(j).store(low, Ordering::Relaxed);
        next.word(j + n).store(high, Ordering::Relaxed);
        true
    }

    /// `BlindForward`: a plain store, which loses a racing insert. `true`
    /// if it ran instead of the forwarding CAS.
    pub(super) fn forwarded_blindly(old: &Table, j: usize) -> bool {
        if old.canary != Canary::BlindForward {
            return false;
        }
        old.word(j).store(FORWARDED, Ordering::Release);
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::bucket::{self, L12x5, L16x4};
    use super::super::geometry::{Addressing, Geometry};
    use super::*;

    fn splits_by_bit_g<L: Layout>() {
        let tags = [1u64, 2, 3, 0x155, L::MAX_TAG, L::MAX_TAG - 1, 0x0F0];
        for g in 0..6 {
            for a in tags {
                for b in tags {
                    let mut w = 0;
                    for t in [a, b, 0, a ^ 1] {
                        if t != 0 {
                            w = bucket::with_tag::<L>(w, t.min(L::MAX_TAG)).unwrap_or(w);
                        }
                    }
                    let (low, high) = split::<L>(w, g);
                    assert_eq!(low | high, w, "split loses nothing");
                    assert_eq!(low & high, 0, "no lane goes both ways");
                    for lane in 0..L::LANES {
                        let t = bucket::lane::<L>(w, lane);
                        let lo = bucket::lane::<L>(low, lane);
                        let hi = bucket::lane::<L>(high, lane);
                        if t == 0 {
                            assert_eq!((lo, hi), (0, 0));
                        } else if (t >> g) & 1 == 0 {
                            assert_eq!((lo, hi), (t, 0), "tag {t:#x} g {g}");
                        } else {
                            assert_eq!((lo, hi), (0, t), "tag {t:#x} g {g}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn split_sends_each_tag_by_its_bit_16x4() {
        splits_by_bit_g::<L16x4>();
    }

    #[test]
    fn split_sends_each_tag_by_its_bit_12x5() {
        splits_by_bit_g::<L12x5>();
    }

    #[test]
    fn forwarded_word_matches_nothing_and_has_no_room() {
        for t in 1..=L16x4::MAX_TAG {
            assert!(!bucket::contains::<L16x4>(FORWARDED, t));
        }
        for t in 1..=L12x5::MAX_TAG {
            assert!(!bucket::contains::<L12x5>(FORWARDED, t));
            assert_eq!(bucket::without_tag::<L12x5>(FORWARDED, t), None);
        }
        assert!(!bucket::has_empty::<L16x4>(FORWARDED));
        assert!(!bucket::has_empty::<L12x5>(FORWARDED));
    }

    #[test]
    fn successor_pair_is_where_the_doubled_geometry_puts_the_key() {
        for g in 0..4 {
            let old = Table::new(Geometry::new(70, g, Addressing::V3)).unwrap();
            let new_geo = Geometry::new(70, g + 1, Addressing::V3);
            let mut h = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..20_000 {
                h = h
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let at = old.geometry().locate::<L16x4>(h);
                let want = new_geo.locate::<L16x4>(h);
                assert_eq!(successor_of(&old, at), want);
                assert_eq!(source_of(&old, want.i1), at.i1);
                assert_eq!(source_of(&old, want.i2), at.i2);
            }
        }
    }
}
