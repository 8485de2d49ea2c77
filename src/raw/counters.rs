//! Item count and operation statistics, sharded to keep writers apart.
//!
//! One shared counter would be a cache line that every insert on every core
//! writes: under two writer threads it alone costs more than the insert. So
//! the counts live in `SHARDS` cache-padded shards, and each thread writes
//! the one it was given at its first operation (threads take shards in
//! turn). Picking the shard by the key's bucket instead spread the writes
//! just as well but made every core write every shard, so almost every
//! count moved a cache line between cores. Readers sum the shards; a sum
//! is exact whenever no writer is running.
//!
//! Every counter is `Relaxed`: none of them orders anything, and none is
//! read by a protocol.

// The counters are std atomics under loom too (`crate::sync::StatU64`), so
// loom spends no interleavings on them: the one module besides the facade
// that the loom build's `disallowed-types` lint lets use std's atomics.
#![cfg_attr(loom, allow(clippy::disallowed_types))]

use crate::sync::{Ordering::Relaxed, StatI64, StatU64};
use crossbeam_utils::CachePadded;

/// Longest displacement path, in hops, that the statistics tell apart.
pub(crate) const PATH_HISTOGRAM: usize = 8;

#[cfg(not(loom))]
const SHARDS: usize = 64;
#[cfg(loom)]
const SHARDS: usize = 2;

/// The counters of one shard.
#[derive(Default)]
pub(crate) struct Shard {
    /// Items inserted minus items removed (may be negative per shard).
    pub(crate) len: StatI64,
    /// Tags moved from one bucket to the other by committed hops.
    pub(crate) displacements: StatU64,
    /// Displacement paths committed in full, by number of hops.
    pub(crate) paths: [StatU64; PATH_HISTOGRAM],
    /// Paths abandoned because a bucket changed since the search.
    pub(crate) stale_paths: StatU64,
    /// Inserts refused because no displacement path was found.
    pub(crate) full: StatU64,
    /// Bucket CASes that lost a race and were retried.
    pub(crate) cas_retries: StatU64,
}

impl Shard {
    #[inline]
    pub(crate) fn bump(counter: &StatU64) {
        counter.fetch_add(1, Relaxed);
    }
}

/// The calling thread's shard index, assigned in turn at its first use.
#[cfg(not(loom))]
#[inline(always)]
fn thread_shard() -> usize {
    use crate::sync::StatUsize;
    use std::cell::Cell;
    /// The next thread's shard.
    static NEXT: StatUsize = StatUsize::new(0);
    std::thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD
        .try_with(|s| {
            let mut i = s.get();
            if i == usize::MAX {
                // Relaxed: only spreads threads over shards; orders nothing.
                i = NEXT.fetch_add(1, Relaxed) % SHARDS;
                s.set(i);
            }
            i
        })
        // During thread-local destruction: any shard is correct.
        .unwrap_or(0)
}

/// Under loom one shard per model thread would need loom's thread locals;
/// the counters are not part of any modelled protocol, so shard 0 serves.
#[cfg(loom)]
#[inline(always)]
fn thread_shard() -> usize {
    0
}

/// All shards of one filter, and the rare growth events.
pub(crate) struct Counters {
    shards: Box<[CachePadded<Shard>]>,
    /// Migrations completed (successor installed).
    growths: StatU64,
    /// Growths refused by the policy or the allocator.
    growth_refusals: StatU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Shard::default()))
                .collect(),
            growths: StatU64::new(0),
            growth_refusals: StatU64::new(0),
        }
    }
}

/// Sums of every shard.
#[derive(Default, Debug, Clone)]
pub(crate) struct Totals {
    pub(crate) len: i64,
    pub(crate) displacements: u64,
    pub(crate) paths: [u64; PATH_HISTOGRAM],
    pub(crate) stale_paths: u64,
    pub(crate) full: u64,
    pub(crate) cas_retries: u64,
}

impl Counters {
    pub(crate) fn bump_growths(&self) {
        self.growths.fetch_add(1, Relaxed);
    }

    pub(crate) fn bump_growth_refusals(&self) {
        self.growth_refusals.fetch_add(1, Relaxed);
    }

    /// `(growths, growth refusals)`.
    pub(crate) fn growth_events(&self) -> (u64, u64) {
        (
            self.growths.load(Relaxed),
            self.growth_refusals.load(Relaxed),
        )
    }

    /// The calling thread's shard.
    #[inline(always)]
    pub(crate) fn shard(&self) -> &Shard {
        &self.shards[thread_shard()]
    }

    /// Items inserted minus removed, over all shards.
    pub(crate) fn len(&self) -> i64 {
        self.shards.iter().map(|s| s.len.load(Relaxed)).sum()
    }

    pub(crate) fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in self.shards.iter() {
            t.len += s.len.load(Relaxed);
            t.displacements += s.displacements.load(Relaxed);
            for (sum, p) in t.paths.iter_mut().zip(&s.paths) {
                *sum += p.load(Relaxed);
            }
            t.stale_paths += s.stale_paths.load(Relaxed);
            t.full += s.full.load(Relaxed);
            t.cas_retries += s.cas_retries.load(Relaxed);
        }
        t
    }

    /// Zeroes the item count (statistics are kept: they describe history).
    pub(crate) fn reset_len(&self) {
        self.set_len(0);
    }

    /// Sets the item count to `len` (kept in shard 0).
    pub(crate) fn set_len(&self, len: i64) {
        for (i, s) in self.shards.iter().enumerate() {
            s.len.store(if i == 0 { len } else { 0 }, Relaxed);
        }
    }
}
