//! Batches: locate keys a few positions ahead and prefetch their blocks,
//! so that the memory latency of one key overlaps the work on the keys
//! before it.
//!
//! A single `insert` cannot overlap its cache miss with the next key's: a
//! `fetch_or` is a locked instruction, a full barrier on x86. A prefetch is
//! a hint that no barrier waits for, so in a batch the miss of key
//! `i + AHEAD` is already under way while key `i` is being set.

use super::storage::WORDS_PER_BLOCK;
use super::{block, with_rounds, BloomFilter};
use crate::sync::AtomicU64;
use std::hash::Hash;

/// How many keys ahead blocks are prefetched: about one DRAM latency of
/// work on this class of machine (as in the cuckoo filter's batches).
const AHEAD: usize = 8;

impl BloomFilter {
    /// Calls `op(i, hash, block)` for `i` in `0..n`, in order, with the
    /// block of key `i + AHEAD` prefetched first.
    #[inline(always)]
    fn for_each_prefetched<'a>(
        &'a self,
        n: usize,
        hash: impl Fn(usize) -> u64,
        mut op: impl FnMut(usize, u64, &'a [AtomicU64; WORDS_PER_BLOCK]),
    ) {
        let locate = |i: usize| {
            let h = hash(i);
            let blk = self.blocks.block_of(h);
            block::prefetch(blk);
            (h, blk)
        };
        let first = self.blocks.block_of(0);
        let mut ring = [(0u64, first); AHEAD];
        for (i, slot) in ring.iter_mut().enumerate().take(n) {
            *slot = locate(i);
        }
        for i in 0..n {
            let (h, b) = ring[i % AHEAD];
            if i + AHEAD < n {
                ring[i % AHEAD] = locate(i + AHEAD);
            }
            op(i, h, b);
        }
    }

    /// `out[i] = self.contains(&keys[i])` for every `i`, faster: each key's
    /// block is prefetched a few keys ahead, so cache misses overlap. Same
    /// guarantees per key as [`contains`](Self::contains).
    ///
    /// # Panics
    ///
    /// If `out.len() != keys.len()`.
    ///
    /// ```
    /// let f = koel::BloomFilter::new(1000, 0.001);
    /// f.insert_many(&[1u32, 2, 3]);
    /// let mut out = [false; 3];
    /// f.contains_many(&[1u32, 2, 3], &mut out);
    /// assert_eq!(out, [true, true, true]);
    /// ```
    pub fn contains_many<K: Hash>(&self, keys: &[K], out: &mut [bool]) {
        assert_eq!(
            keys.len(),
            out.len(),
            "contains_many: keys and out differ in length"
        );
        let hash = |i: usize| self.hash(&keys[i]);
        with_rounds!(self.rounds, R => self.for_each_prefetched(keys.len(), hash, |i, h, blk| {
            out[i] = block::contains::<R>(blk, h);
        }))
    }

    /// Inserts every key, like [`insert`](Self::insert) in a loop but with
    /// each key's block prefetched a few keys ahead. Returns how many
    /// inserts set a new bit (keys that were probably new, counting a key
    /// repeated within the batch once). Never fails: a Bloom filter never
    /// refuses a key (past its capacity its false-positive rate rises).
    ///
    /// ```
    /// let f = koel::BloomFilter::new(1000, 0.001);
    /// assert_eq!(f.insert_many(&["a", "b", "a"]), 2);
    /// assert!(f.contains("b"));
    /// ```
    pub fn insert_many<K: Hash>(&self, keys: &[K]) -> usize {
        let hash = |i: usize| self.hash(&keys[i]);
        let mut new = 0;
        with_rounds!(self.rounds, R => self.for_each_prefetched(keys.len(), hash, |_, h, blk| {
            new += usize::from(block::insert(blk, &block::masks::<R>(h)));
        }));
        new
    }
}
