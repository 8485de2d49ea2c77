//! Estimates from the bits set: the number of items, and the current
//! false-positive rate. Both read every word once (`Relaxed`: an estimate
//! needs no ordering; racing inserts may or may not be counted).

use super::storage::WORDS_PER_BLOCK;
use crate::sync::{AtomicU64, Ordering::Relaxed};

/// `table[s]` for every bit count `s` of a 64-bit word.
fn per_count(f: impl Fn(f64) -> f64) -> [f64; 65] {
    std::array::from_fn(|s| f(s as f64))
}

/// Items inserted, from the standard estimate per word: after `x` keys
/// each setting `R` random bits of a word, `E[set] = 64(1 - (1-1/64)^{Rx})`,
/// so `x ≈ ln(1 - set/64) / (R ln(1 - 1/64))`. Every key sets bits in all
/// 8 words of its block, so the words' estimates are averaged per block
/// and summed over blocks. A full word is counted as 63.5 bits set (its
/// estimate is unbounded): past the capacity the estimate saturates.
pub(crate) fn items(words: &[AtomicU64], rounds: u32) -> f64 {
    let per_bit = (1.0 - 1.0 / 64.0f64).ln() * rounds as f64;
    let table = per_count(|s| (1.0 - s.min(63.5) / 64.0).ln() / per_bit);
    let sum: f64 = words
        .iter()
        .map(|w| table[w.load(Relaxed).count_ones() as usize])
        .sum();
    sum / WORDS_PER_BLOCK as f64
}

/// The chance that a random absent key is reported present: per block,
/// the product over its words of `(set/64)^R` (the key probes `R` uniform
/// bits per word), averaged over blocks (the key's block is uniform).
pub(crate) fn false_positive_rate(words: &[AtomicU64], rounds: u32) -> f64 {
    let table = per_count(|s| (s / 64.0).powi(rounds as i32));
    let blocks = words.len() / WORDS_PER_BLOCK;
    let sum: f64 = words
        .chunks_exact(WORDS_PER_BLOCK)
        .map(|blk| {
            blk.iter()
                .map(|w| table[w.load(Relaxed).count_ones() as usize])
                .product::<f64>()
        })
        .sum();
    sum / blocks as f64
}
