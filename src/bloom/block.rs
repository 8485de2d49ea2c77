//! One key's footprint: its block, and the bits it sets in each word.
//!
//! From the key's 64-bit hash `h`:
//!
//! * the block is `fastrange(h, blocks)` (the high half of `h * blocks`),
//!   so the block count needs no power-of-two rounding;
//! * the bits come from `s = mix(h)`, a bijective 64-bit finalizer whose
//!   every output bit depends on every input bit, so they are independent
//!   of the block even when a large table's block index uses many of the
//!   hash's high bits. Each round `r` (of `R`, 1..=4) takes eight 6-bit
//!   fields of `s_r` (`s_{r+1} = mix(s_r)`) and sets bit `field_j` of
//!   word `j`: every key sets `R` bits in each of the block's 8 words,
//!   `k = 8R` bits in all.
//!
//! This "sectorized" pattern builds each word's mask with constant indices
//! (no table lookups or data-dependent addressing), and `contains` reads
//! one cache line: the first word, and the other seven (branch-free) unless
//! the first already rules the key out. Its exact
//! false-positive rate is in `sizing`.
//!
//! # Orderings
//!
//! Bits only ever go from 0 to 1 (until `clear`), and no other memory is
//! published through them, so every access is `Relaxed`:
//!
//! * an insert's `fetch_or`s are atomic read-modify-writes, so two inserts
//!   into one word never lose each other's bits (a plain load-or-store
//!   could: that would be a false negative);
//! * a `contains` that an insert happens-before (a join, a channel, an
//!   Acquire load of a flag the inserter stored with Release) reads, by
//!   write-read coherence, a value of each word at least as new as that
//!   insert's `fetch_or`: it sees every bit. That is the only ordering the
//!   filter promises; it never orders the caller's other memory.

use super::storage::WORDS_PER_BLOCK;
use crate::sync::{AtomicU64, Ordering::Relaxed};

/// Most bits per word per key (`k = 8 * MAX_ROUNDS`).
pub(crate) const MAX_ROUNDS: u32 = 4;

/// The block of hash `h` among `blocks` blocks: `fastrange`.
#[inline(always)]
pub(crate) fn block_of(h: u64, blocks: u64) -> usize {
    ((u128::from(h) * u128::from(blocks)) >> 64) as usize
}

/// A bijective 64-bit finalizer (the MurmurHash3 `fmix64` constants):
/// full avalanche, so its output bits are independent of `h`'s high bits,
/// which choose the block.
#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The bits hash `h` sets in each word of its block, `R` per word (fewer
/// when two rounds pick the same bit).
#[inline(always)]
pub(crate) fn masks<const R: u32>(h: u64) -> [u64; WORDS_PER_BLOCK] {
    let mut m = [0u64; WORDS_PER_BLOCK];
    let mut s = h;
    for _ in 0..R {
        s = mix(s);
        for (j, word) in m.iter_mut().enumerate() {
            *word |= 1u64 << ((s >> (6 * j)) & 63);
        }
    }
    m
}

/// The 8 words of block `b`.
#[inline(always)]
pub(crate) fn block(words: &[AtomicU64], b: usize) -> &[AtomicU64; WORDS_PER_BLOCK] {
    let start = b * WORDS_PER_BLOCK;
    // `b < blocks` (from `block_of`), so this never fails; the check is one
    // predicted compare.
    words[start..start + WORDS_PER_BLOCK]
        .try_into()
        .expect("a block is 8 words")
}

/// Whether every bit of `m` is set in `blk`. `Relaxed` loads of one cache
/// line (see the module docs), no writes.
#[inline(always)]
pub(crate) fn contains(blk: &[AtomicU64; WORDS_PER_BLOCK], m: &[u64; WORDS_PER_BLOCK]) -> bool {
    // Relaxed, all: see the module docs (coherence with the `fetch_or`).
    // Most absent keys already miss a bit of the first word (60-70% at
    // the design load with k = 8, for p = 1e-3..1e-4): answering then skips the other seven loads,
    // and fewer loads per lookup let more lookups' cache misses overlap
    // (measured here: single absent lookups at 16M items about 1.4x faster,
    // present ones unchanged). The rest is branch-free.
    if m[0] & !blk[0].load(Relaxed) != 0 {
        return false;
    }
    let mut missing = 0u64;
    for (word, mask) in blk[1..].iter().zip(&m[1..]) {
        missing |= mask & !word.load(Relaxed);
    }
    missing == 0
}

/// Sets the bits of `m` in `blk`; `true` if this call set at least one bit
/// that was 0 ("probably new").
///
/// A word whose bits are all set already is not written: no locked
/// instruction, and no cache-line ownership taken from other cores' copies.
#[inline(always)]
pub(crate) fn insert(blk: &[AtomicU64; WORDS_PER_BLOCK], m: &[u64; WORDS_PER_BLOCK]) -> bool {
    let mut new = false;
    for (word, &mask) in blk.iter().zip(m) {
        // Relaxed: a hint only; a stale value just costs a redundant
        // `fetch_or`, and a bit once seen set stays set (until `clear`).
        if word.load(Relaxed) & mask != mask {
            // Relaxed: the RMW alone keeps concurrent inserts' bits (see the
            // module docs); nothing else is published through the word.
            let old = word.fetch_or(mask, Relaxed);
            new |= old & mask != mask;
        }
    }
    new
}

/// Hints the CPU to start loading block `b` into cache.
#[inline(always)]
pub(crate) fn prefetch(words: &[AtomicU64], b: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    if let Some(word) = words.get(b * WORDS_PER_BLOCK) {
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch of a
        // valid address has no architectural effect.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (word as *const AtomicU64).cast(),
            )
        };
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = (words, b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastrange_covers_every_block_and_stays_in_range() {
        let blocks = 37u64;
        let mut seen = [0u32; 37];
        let mut h = 1u64;
        for _ in 0..100_000 {
            h = mix(h.wrapping_add(0x9E37_79B9_7F4A_7C15));
            let b = block_of(h, blocks);
            seen[b] += 1;
        }
        // 100k / 37 = 2703 expected per block; 5 sigma is about 260.
        assert!(seen.iter().all(|&n| (2400..3000).contains(&n)), "{seen:?}");
        assert_eq!(block_of(u64::MAX, 1), 0);
        assert_eq!(block_of(u64::MAX, u64::MAX), (u64::MAX - 1) as usize);
    }

    fn check_masks<const R: u32>() {
        let mut per_bit = [[0u32; 64]; WORDS_PER_BLOCK];
        let n = 64_000u64;
        for i in 0..n {
            let m = masks::<R>(i);
            for (j, w) in m.iter().enumerate() {
                let ones = w.count_ones();
                assert!((1..=R).contains(&ones), "word {j}: {ones} bits for R={R}");
                for (bit, c) in per_bit[j].iter_mut().enumerate() {
                    *c += (w >> bit & 1) as u32;
                }
            }
        }
        // Each bit of each word is set by about n*R/64 keys (less a little
        // for in-word repeats): sequential inputs must spread evenly.
        let expect = n as f64 * R as f64 / 64.0;
        for counts in per_bit {
            for c in counts {
                assert!(
                    (c as f64 - expect).abs() < 6.0 * expect.sqrt() + expect * 0.03,
                    "R={R}: bit set {c} times, expected about {expect}"
                );
            }
        }
    }

    #[test]
    fn masks_set_r_bits_per_word_evenly() {
        check_masks::<1>();
        check_masks::<2>();
        check_masks::<3>();
        check_masks::<4>();
    }
}
