//! A tag into or out of one bucket word, by CAS: the only way a bucket
//! changes outside a migration's copy. Below both the operations (`ops.rs`)
//! and displacement (`path.rs`).

use super::bucket::{self, Layout};
use super::counters::Shard;
use crate::sync::{AtomicU64, Ordering};

/// Writes `tag` into an empty lane of `word`; `false` if it has none.
#[inline]
pub(crate) fn put<L: Layout>(word: &AtomicU64, tag: u64, shard: &Shard) -> bool {
    update(word, shard, |w| bucket::with_tag::<L>(w, tag))
}

/// [`put`] for a `word` whose value was just read as `current` (a first
/// CAS on that value instead of a load; a stale value only costs a retry).
#[inline]
pub(crate) fn put_from<L: Layout>(word: &AtomicU64, current: u64, tag: u64, shard: &Shard) -> bool {
    update_from(word, current, shard, |w| bucket::with_tag::<L>(w, tag))
}

/// [`put`] only into a word that keeps another free lane after it: the
/// first level of a filter with levels takes keys no further than that
/// (`cuckoo/levels.rs`), a rule of the word alone, so a filter loaded
/// from a file decides as the one that saved it.
#[inline]
pub(crate) fn put_keeping_a_lane<L: Layout>(word: &AtomicU64, tag: u64, shard: &Shard) -> bool {
    update(word, shard, |w| {
        if bucket::empty::<L>(w) >= 2 {
            bucket::with_tag::<L>(w, tag)
        } else {
            None
        }
    })
}

/// Clears one copy of `tag` from `word`; `false` if it holds none.
#[inline]
pub(crate) fn take<L: Layout>(word: &AtomicU64, tag: u64, shard: &Shard) -> bool {
    update(word, shard, |w| bucket::without_tag::<L>(w, tag))
}

/// CASes `word` from its value `w` to `change(w)` until it succeeds, or
/// returns `false` once `change` declines (`None`) for the current value.
#[inline(always)]
fn update(word: &AtomicU64, shard: &Shard, change: impl Fn(u64) -> Option<u64>) -> bool {
    // Relaxed: only the value the CAS compares against. A declined change
    // (no free lane, no copy to take) reads no other memory on the strength
    // of this load, and an Acquire load could not read an older or newer
    // value than this one may: which values a load can see is coherence,
    // not ordering.
    update_from(word, word.load(Ordering::Relaxed), shard, change)
}

/// [`update`] starting from `current`, a value of `word` read before (the
/// CAS fails on a stale one and retries with what it saw).
#[inline(always)]
fn update_from(
    word: &AtomicU64,
    mut current: u64,
    shard: &Shard,
    change: impl Fn(u64) -> Option<u64>,
) -> bool {
    loop {
        let Some(next) = change(current) else {
            return false;
        };
        // Release: publishes the change: readers' Acquire bucket loads pair
        // with it (a tag put, or a move's source clear that a validating
        // reader then detects through the stripe). Being an RMW, of any
        // ordering, is what continues the release sequence of earlier
        // writers. No Acquire: nothing after the CAS reads other memory on
        // the strength of the value it replaced (Relaxed on failure too:
        // the value seen only feeds the next attempt).
        match word.compare_exchange_weak(current, next, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(seen) => {
                shard.bump(&shard.cas_retries);
                current = seen;
            }
        }
    }
}
