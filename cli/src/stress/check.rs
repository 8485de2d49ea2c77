//! The ground truth: one word per key, written only by the key's owner
//! thread, read by everyone.
//!
//! A word is `version << 1 | present`. The owner stores a new word (the
//! version plus one) with Release *after* an insert returned and *before* it starts a
//! remove, so a reader that loads a present word with Acquire knows the
//! insert happened before its own lookup; if the word is unchanged after
//! the lookup, no remove of that key overlapped it either, and a negative
//! answer is a false negative.

use crate::human::HumanBytes;
use std::ops::Range;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Present bit and version of every key.
pub struct Truth {
    words: Vec<AtomicU32>,
}

/// A ground-truth word read before a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word(u32);

impl Word {
    /// Whether the key was in the filter.
    #[inline(always)]
    pub fn present(self) -> bool {
        self.0 & 1 == 1
    }

    /// The next word, with `present` as given.
    #[inline(always)]
    fn next(self, present: bool) -> Word {
        Word(((self.0 >> 1).wrapping_add(1) << 1) | u32::from(present))
    }
}

impl Truth {
    /// `items` keys, all absent (4 bytes each, allocated fallibly).
    pub fn new(items: u64) -> anyhow::Result<Self> {
        let n = usize::try_from(items)?;
        let bytes = n.saturating_mul(4) as u64;
        // The allocation below succeeds beyond physical memory (Linux
        // overcommits), and filling it would end in the OOM killer.
        if let Some(available) = crate::meminfo("MemAvailable").filter(|&a| bytes > a) {
            anyhow::bail!(
                "the ground truth for {items} keys needs {}, more than the {} of memory available: lower --items",
                HumanBytes(bytes),
                HumanBytes(available)
            );
        }
        let mut words = Vec::new();
        words.try_reserve_exact(n).map_err(|_| {
            anyhow::anyhow!(
                "cannot allocate the ground truth for {items} keys ({bytes} bytes): lower --items"
            )
        })?;
        words.extend((0..n).map(|_| AtomicU32::new(0)));
        Ok(Truth { words })
    }

    /// The word of `key` before a lookup.
    #[inline(always)]
    pub fn before(&self, key: u64) -> Word {
        // Acquire: pairs with the Release store in `set` by the owner, so
        // an insert seen as done is done before our lookup.
        Word(self.words[key as usize].load(Ordering::Acquire))
    }

    /// Whether `key`'s word is still `before` after a lookup made since.
    #[inline(always)]
    pub fn unchanged(&self, key: u64, before: Word) -> bool {
        // Acquire fence: keeps the lookup's loads before the load below
        // (the seqlock reader's fence). If the lookup saw a remove's CAS,
        // the owner's Release store in `set` came before that CAS, so this
        // load sees the new word.
        fence(Ordering::Acquire);
        Word(self.words[key as usize].load(Ordering::Relaxed)) == before
    }

    /// The owner's view of `key` (no other thread writes it).
    #[inline(always)]
    pub fn own(&self, key: u64) -> Word {
        // Relaxed: only the calling thread stores this word.
        Word(self.words[key as usize].load(Ordering::Relaxed))
    }

    /// Publishes the owner's new state of `key`.
    #[inline(always)]
    pub fn set(&self, key: u64, old: Word, present: bool) {
        // Release: pairs with the Acquire load in `before` (and the fence
        // in `unchanged`) of readers on other threads.
        self.words[key as usize].store(old.next(present).0, Ordering::Release);
    }

    /// Keys of `range` whose final state is present, after every worker
    /// stopped.
    pub fn present_keys(&self, range: Range<u64>) -> impl Iterator<Item = u64> + '_ {
        range.filter(|&k| self.words[k as usize].load(Ordering::Relaxed) & 1 == 1)
    }
}

/// What the checker saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CheckReport {
    /// Reads of a present key, unchanged across the read, answered absent.
    pub live_false_negatives: u64,
    /// `insert_unique` answered "new" for a key the truth says was present
    /// (the filter had lost it), or `remove` found no copy of a present key.
    pub write_false_negatives: u64,
    /// Present keys not found by the final sweep.
    pub final_false_negatives: u64,
    /// Up to 8 key indices that were missed.
    pub examples: Vec<u64>,
    /// Reads of keys that were present (checked for false negatives).
    pub checked_reads: u64,
    /// Keys present at the end (all looked up by the final sweep).
    pub final_present_keys: u64,
    /// Reads of keys that were absent before and after the read.
    pub absent_reads: u64,
    /// Of those, answered "maybe present": false positives. The same
    /// absent keys are read many times, so this rate is noisy; the probe
    /// below is the clean estimate.
    pub absent_read_hits: u64,
    /// Keys never inserted, looked up once each after the run.
    pub fpr_probes: u64,
    /// Of those, answered "maybe present".
    pub fpr_probe_hits: u64,
    /// `insert_unique` of an absent key answered "duplicate" (a false
    /// positive: nothing was stored).
    pub insert_false_positives: u64,
    /// Inserts refused because the filter was full.
    pub inserts_refused_full: u64,
    /// Remove operations that found none of the thread's keys present
    /// nearby to remove (no filter call made).
    pub removes_skipped: u64,
}

impl CheckReport {
    /// Every false negative seen, live and final.
    pub fn false_negatives(&self) -> u64 {
        self.live_false_negatives + self.write_false_negatives + self.final_false_negatives
    }

    /// False-positive rate measured on the probe of never-inserted keys.
    pub fn measured_fpr(&self) -> Option<f64> {
        (self.fpr_probes > 0).then(|| self.fpr_probe_hits as f64 / self.fpr_probes as f64)
    }

    /// Notes a missed key.
    pub fn example(&mut self, key: u64) {
        if self.examples.len() < 8 {
            self.examples.push(key);
        }
    }

    pub fn merge(&mut self, o: &CheckReport) {
        self.live_false_negatives += o.live_false_negatives;
        self.write_false_negatives += o.write_false_negatives;
        self.final_false_negatives += o.final_false_negatives;
        for &k in &o.examples {
            self.example(k);
        }
        self.checked_reads += o.checked_reads;
        self.final_present_keys += o.final_present_keys;
        self.absent_reads += o.absent_reads;
        self.absent_read_hits += o.absent_read_hits;
        self.insert_false_positives += o.insert_false_positives;
        self.inserts_refused_full += o.inserts_refused_full;
        self.removes_skipped += o.removes_skipped;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_track_presence_and_change_on_every_set() {
        let t = Truth::new(4).unwrap();
        let w0 = t.before(2);
        assert!(!w0.present());
        t.set(2, w0, true);
        let w1 = t.before(2);
        assert!(w1.present());
        assert!(!t.unchanged(2, w0));
        assert!(t.unchanged(2, w1));
        t.set(2, w1, false);
        t.set(2, t.own(2), true);
        assert!(t.before(2).present());
        assert!(!t.unchanged(2, w1), "remove then re-insert is a change");
        assert_eq!(t.present_keys(0..4).collect::<Vec<_>>(), [2]);
    }
}
