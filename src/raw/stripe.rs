//! Version stripes: the per-pair version word that writers take to exclude
//! each other and readers compare to validate a miss.
//!
//! `stripes[s]` is a version word per group of bucket *pairs*
//! (`s = (i XOR j) mod stripes`, see `Table::stripe_index`). Writers that
//! must exclude each other on a pair (a displacement hop, `remove`,
//! `insert_unique`, and `clear` and a save, which hold them all) take it
//! with a CAS that sets its [`HELD`] bit and release it by storing the
//! next free value. Readers never write it:
//! they read it before and after their two bucket loads and trust what
//! they read only if it did not change (see `ops.rs` for why that is
//! enough). The word is
//!
//! ```text
//! bits 63..22: counter   bits 21..1: tag in flight (0: none)   bit 0: held
//! ```
//!
//! and every write makes it larger (until the counter wraps after 2^42
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

use super::bucket::Layout;
use crate::sync::{fence, AtomicU64, Backoff, Ordering};

/// The value of a sealed stripe: held, and never reached by counting (its
/// tag field is the reserved all-ones tag, which no hop moves).
pub(crate) const SEALED: u64 = u64::MAX;

/// How long one sweep (a chunk's, or an insert's eviction) waits for held
/// stripes in all ([`Patience`]): far longer than a running holder's few
/// CAS or its displacement search (tens of microseconds), short beside a
/// thread stopped for good.
#[cfg(not(loom))]
const PATIENCE: std::time::Duration = std::time::Duration::from_millis(1);

/// What one sweep may still wait for held stripes
/// ([`StripeLock::acquire_moving_within`]): [`PATIENCE`] from its first
/// wait, shared by all its hops, so that a stripe held for good costs a
/// sweep one wait, not one per tag behind it. Under loom: one backoff per
/// stripe, so that the models explore both a holder that lets go and one
/// that does not.
#[derive(Default)]
pub(crate) struct Patience {
    #[cfg(not(loom))]
    deadline: Option<std::time::Instant>,
}

impl Patience {
    /// Whether the wait is over (starting it at the first call).
    #[cfg(not(loom))]
    fn spent(&mut self) -> bool {
        let now = std::time::Instant::now();
        now > *self.deadline.get_or_insert(now + PATIENCE)
    }
}

/// The held bit of a stripe word.
pub(crate) const HELD: u64 = 1;

/// Where a stripe word keeps the tag in flight.
const TAG_SHIFT: u32 = 1;
const TAG_FIELD: u64 = ((1 << TAG_FIELD_BITS) - 1) << TAG_SHIFT;
/// Wide enough for the widest layout's tags (the levels' 21 bits).
const TAG_FIELD_BITS: u32 = 21;
const _: () = assert!(
    super::bucket::L21x3::TAG_BITS <= TAG_FIELD_BITS
        && super::bucket::L16x4::TAG_BITS <= TAG_FIELD_BITS
        && super::bucket::L12x5::TAG_BITS <= TAG_FIELD_BITS
);

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
        let mut backoff = Backoff::default();
        Self::take_moving(stripe, tag, || {
            backoff.snooze();
            true
        })
    }

    /// [`acquire_moving`](Self::acquire_moving) that waits for another
    /// holder only as long as `patience` allows: `None` if the stripe is
    /// still held then (or sealed). For a step's sweep of a level that
    /// grows by regions, which leaves a tag it cannot reach where it is
    /// (its slot stays split): a holder stopped for good then holds up no
    /// step's end.
    #[inline]
    pub(crate) fn acquire_moving_within(
        stripe: &'t AtomicU64,
        tag: u64,
        patience: &mut Patience,
    ) -> Option<Self> {
        let mut backoff = Backoff::default();
        #[cfg(loom)]
        let mut waited = false;
        Self::take_moving(stripe, tag, || {
            #[cfg(not(loom))]
            if patience.spent() {
                return false;
            }
            #[cfg(loom)]
            {
                let _ = &patience;
                if std::mem::replace(&mut waited, true) {
                    return false;
                }
            }
            backoff.snooze();
            true
        })
    }

    /// [`acquire_moving`](Self::acquire_moving) that never waits: `None`
    /// if another writer holds the stripe now (or it is sealed).
    #[inline]
    pub(crate) fn try_acquire_moving(stripe: &'t AtomicU64, tag: u64) -> Option<Self> {
        Self::take_moving(stripe, tag, || false)
    }

    /// Takes `stripe` for a hop of `tag`; while another writer holds it,
    /// asks `wait` whether to look again (`false`: give up, `None`).
    #[inline]
    fn take_moving(
        stripe: &'t AtomicU64,
        tag: u64,
        mut wait: impl FnMut() -> bool,
    ) -> Option<Self> {
        debug_assert!(
            tag < (1 << TAG_FIELD_BITS) - 1,
            "the all-ones tag is reserved"
        );
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
                let take = if crate::canary::acquire_only_take() {
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
                if !wait() {
                    return None;
                }
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

    /// A sweep's hops share one patience: once a held stripe has used it
    /// up, the next held stripe is given up at its first look (the sweep
    /// leaves those tags where they are), while a free stripe is still
    /// taken.
    #[test]
    fn a_sweeps_hops_share_one_patience() {
        let (a, b) = (&AtomicU64::new(0), &AtomicU64::new(0));
        let held_a = StripeLock::acquire(a).unwrap();
        let held_b = StripeLock::acquire(b).unwrap();
        let mut patience = Patience::default();
        assert!(StripeLock::acquire_moving_within(a, 5, &mut patience).is_none());
        assert!(patience.spent(), "the wait ran to its end");
        assert!(StripeLock::acquire_moving_within(b, 5, &mut patience).is_none());
        drop(held_a);
        let lock = StripeLock::acquire_moving_within(a, 5, &mut patience);
        assert!(lock.is_some(), "a free stripe is taken");
        drop((lock, held_b));
    }

    #[test]
    fn stripe_lock_is_exclusive_and_versions_advance() {
        let s = &AtomicU64::new(0);
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
