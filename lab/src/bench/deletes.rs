//! Row 4: deletes. Removing half of the inserted keys: success rate, no
//! false negative for the other half, and what the removed half still
//! answers. Then the same-tag collision case: two keys with equal tag and
//! equal bucket pair are one tag value to the filter, so removing either
//! one removes "a copy", and the other key stays visible.

use super::common::{measure_write, uniform_key, uniform_keys, FprCheck, Layout, OpMeasure};
use super::Config;
use koel::Growth;
use std::collections::HashMap;

/// Deletes on one layout.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeleteRow {
    /// The layout's name.
    pub layout: String,
    /// Timed `remove` of inserted keys (`hits` = returned true).
    pub remove: OpMeasure,
    /// `remove.hits / remove.ops` (must be 1).
    pub success_rate: f64,
    /// Kept keys answered absent after the removals (must be 0).
    pub false_negatives: u64,
    /// Removed keys that still answer `true` (false positives against the
    /// kept half), checked against the estimate.
    pub removed_still_present: FprCheck,
    /// `len()` after the removals equals the kept keys.
    pub len_matches: bool,
    /// The same-tag collision case.
    pub same_tag: SameTagCase,
}

/// Results of the same-tag collision case.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SameTagCase {
    /// Key pairs with equal tag and equal bucket pair that were tested.
    pub pairs: u64,
    /// Keys searched to find them.
    pub keys_searched: u64,
    /// Pairs where `remove(a)` returned true.
    pub first_remove_ok: u64,
    /// Pairs where `b` was still found after `remove(a)` (must be all).
    pub other_still_visible: u64,
    /// Pairs where `a` itself still answered `true` after its removal: the
    /// filter cannot tell `a` from `b` (expected: all).
    pub removed_still_visible: u64,
    /// Pairs where, after `remove(b)` too, neither key was found and the
    /// filter was empty (must be all).
    pub both_gone_after_second_remove: u64,
}

/// Runs both parts of the delete row on each layout.
///
/// # Errors
///
/// A filter or key vector cannot be allocated, or a fill failed.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<DeleteRow>> {
    let keys = uniform_keys(cfg.seed ^ 0xde1e, 0..cfg.items)?;
    let (removed, kept) = keys.split_at(keys.len() / 2);
    let mut rows = Vec::new();
    for layout in Layout::ALL {
        let filter = layout.build(cfg.items as usize, Growth::Fixed, cfg.seed)?;
        filter
            .insert_many(&keys)
            .map_err(|e| anyhow::anyhow!("filling the {} filter: {}", layout.name(), e.error))?;
        let remove = measure_write("remove", removed, |k| filter.remove(k));
        let false_negatives = kept.iter().filter(|k| !filter.contains(*k)).count() as u64;
        let still = removed.iter().filter(|k| filter.contains(*k)).count() as u64;
        let removed_still_present =
            FprCheck::new(still, removed.len() as u64, filter.false_positive_rate());
        rows.push(DeleteRow {
            layout: layout.name().to_string(),
            success_rate: remove.hits as f64 / remove.ops.max(1) as f64,
            remove,
            false_negatives,
            removed_still_present,
            len_matches: filter.len() == kept.len(),
            same_tag: same_tag_case(layout, cfg.same_tag_pairs, cfg.seed)?,
        });
    }
    Ok(rows)
}

/// A small filter's table: few buckets, so equal (tag, bucket pair) keys
/// are quick to find.
const SMALL_CAPACITY: usize = 200;

/// Finds `pairs` key pairs with equal placement, and on a fresh small
/// filter per pair inserts both, removes one, and checks the other.
fn same_tag_case(layout: Layout, pairs: u64, seed: u64) -> anyhow::Result<SameTagCase> {
    let probe = layout.build(SMALL_CAPACITY, Growth::Fixed, seed)?;
    // (tag, lower bucket, higher bucket) -> first key seen there.
    let mut seen: HashMap<(u64, usize, usize), u64> = HashMap::new();
    let mut found = Vec::new();
    let mut searched = 0u64;
    // Generous bound: about 2^21 placements with 16-bit tags, so a few
    // hundred thousand keys give thousands of pairs.
    let limit = 50_000_000u64;
    while (found.len() as u64) < pairs && searched < limit {
        let key = uniform_key(seed ^ 0x7a6, searched);
        searched += 1;
        let (tag, i1, i2) = probe.placement(probe.hash(&key));
        let place = (tag, i1.min(i2), i1.max(i2));
        match seen.remove(&place) {
            Some(first) => found.push((first, key)),
            None => {
                seen.insert(place, key);
            }
        }
    }
    let mut case = SameTagCase {
        pairs: found.len() as u64,
        keys_searched: searched,
        first_remove_ok: 0,
        other_still_visible: 0,
        removed_still_visible: 0,
        both_gone_after_second_remove: 0,
    };
    for (a, b) in found {
        // Same capacity and seed: the same placement as the probe.
        let f = layout.build(SMALL_CAPACITY, Growth::Fixed, seed)?;
        f.insert(&a)?;
        f.insert(&b)?;
        case.first_remove_ok += u64::from(f.remove(&a));
        case.other_still_visible += u64::from(f.contains(&b));
        case.removed_still_visible += u64::from(f.contains(&a));
        f.remove(&b);
        case.both_gone_after_second_remove +=
            u64::from(!f.contains(&a) && !f.contains(&b) && f.is_empty());
    }
    Ok(case)
}
