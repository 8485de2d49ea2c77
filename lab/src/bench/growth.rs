//! Row 8: online growth. A small filter (1/24 of the items) takes every
//! item and doubles its way up (5 doublings, 32x the first table). After each insert the
//! same thread looks up an earlier key, so both operations are timed inside
//! and outside the doubling windows, and `memory_usage()` is sampled after
//! every insert (it counts old and new table while they coexist).
//!
//! A window is detected from memory: while a doubling migrates,
//! `memory_usage()` is above the steady size of the current generation;
//! an insert during which the generation moved is in a window too.

use super::common::{uniform_keys, Layout};
use super::Config;
use koel::Growth;
use koel_cli::latency::{Latency, LatencySummary};
use std::hint::black_box;
use std::time::Instant;

/// How much smaller than `items` the filter starts.
pub const START_DIVISOR: u64 = 24;

/// 12-bit tags reach only 4x under the default 1e-2 FPR bound; this bound
/// lets them double 5 times (FPR about 7.5% at full load after that).
const TWELVE_BIT_MAX_FPR: f64 = 0.1;

/// Timeline samples per run.
const SAMPLES: u64 = 200;

/// The growth run of one layout.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GrowthRow {
    /// The layout's name.
    pub layout: String,
    /// Capacity the filter was built with.
    pub start_capacity: u64,
    /// Items inserted.
    pub items: u64,
    /// Doublings.
    pub generations: u32,
    /// The FPR bound growth was allowed.
    pub max_false_positive_rate: f64,
    /// Inserts that failed (must be 0).
    pub failed_inserts: u64,
    /// Inserted keys not found afterwards (must be 0).
    pub false_negatives: u64,
    /// Inserts that ran while a doubling migrated.
    pub window_inserts: u64,
    /// Insert latency outside the windows.
    pub insert_steady: LatencySummary,
    /// Insert latency inside the windows.
    pub insert_window: LatencySummary,
    /// Inserts per second outside / inside the windows (from the timed calls).
    pub insert_rate_steady: f64,
    /// See `insert_rate_steady`.
    pub insert_rate_window: f64,
    /// Lookup latency outside / inside the windows.
    pub lookup_steady: LatencySummary,
    /// See `lookup_steady`.
    pub lookup_window: LatencySummary,
    /// Highest `memory_usage()` seen.
    pub memory_peak: u64,
    /// `memory_usage()` at the end.
    pub memory_final: u64,
    /// Expected FPR at the end.
    pub final_false_positive_rate: f64,
    /// Timeline, for the plot.
    pub timeline: Vec<GrowthSample>,
}

/// One timeline sample (a 1/200 slice of the inserts).
#[derive(Clone, Debug, serde::Serialize)]
pub struct GrowthSample {
    /// Items inserted at the end of the slice.
    pub items: u64,
    /// Highest `memory_usage()` in the slice.
    pub memory_bytes: u64,
    /// Inserts per second in the slice (from the timed calls; one
    /// preemption of the thread can dominate it on a busy machine).
    pub insert_rate: f64,
    /// Median insert latency in the slice, nanoseconds.
    pub insert_p50_ns: u64,
    /// 99th percentile insert latency in the slice, nanoseconds.
    pub insert_p99_ns: u64,
    /// Whether a doubling migrated at any point of the slice.
    pub in_window: bool,
}

/// Grows a filter of each layout from `items / 32` to `items`.
///
/// # Errors
///
/// A filter or the keys cannot be allocated.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<GrowthRow>> {
    let keys = uniform_keys(cfg.seed ^ 0x6207, 0..cfg.items)?;
    let mut rows = Vec::new();
    for layout in Layout::ALL {
        let start_capacity = (cfg.items / START_DIVISOR).max(64);
        let max_fpr = if layout.bits == 12 {
            TWELVE_BIT_MAX_FPR
        } else {
            koel::DEFAULT_MAX_FALSE_POSITIVE_RATE
        };
        let filter = layout
            .builder(start_capacity as usize, Growth::Double, cfg.seed)
            .max_false_positive_rate(max_fpr)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the growth filter: {e}"))?;
        let mut ins = [Latency::default(), Latency::default()];
        let mut look = [Latency::default(), Latency::default()];
        let mut ins_ns = [0u64; 2];
        let mut ins_count = [0u64; 2];
        let mut failed = 0u64;
        // Keys whose insert failed are not in the filter by contract.
        let mut failed_keys = Vec::new();
        let mut steady_bytes = filter.memory_usage() as u64;
        let mut generation = filter.generation();
        let mut peak = steady_bytes;
        let mut timeline = Vec::new();
        let slice = (cfg.items / SAMPLES).max(1);
        let (mut slice_ns, mut slice_peak, mut slice_window) = (0u64, 0u64, false);
        let mut slice_lat: Vec<u64> = Vec::with_capacity(slice as usize);
        let mut probe = koel_cli::keys::FastRng::new(cfg.seed);
        let mut migrating = false;
        for (i, key) in keys.iter().enumerate() {
            let t0 = Instant::now();
            let ok = filter.insert(black_box(key)).is_ok();
            let ns = t0.elapsed().as_nanos() as u64;
            if !ok {
                failed += 1;
                failed_keys.push(i);
            }

            let bytes = filter.memory_usage() as u64;
            let g = filter.generation();
            // A small table may double inside one insert: no sample sees
            // it migrating, but the generation moved.
            let grew = g != generation;
            if grew {
                // The successor is installed: its size is the new steady size.
                generation = g;
                steady_bytes = bytes;
            }
            let was_migrating = migrating;
            migrating = bytes > steady_bytes;
            let w = usize::from(was_migrating || migrating || grew);
            ins[w].record(ns);
            ins_ns[w] += ns;
            ins_count[w] += 1;
            peak = peak.max(bytes);

            let earlier = &keys[probe.below(i as u64 + 1) as usize];
            let t0 = Instant::now();
            let found = filter.contains(black_box(earlier));
            look[w].record(t0.elapsed().as_nanos() as u64);
            black_box(found);

            slice_ns += ns;
            slice_lat.push(ns);
            slice_peak = slice_peak.max(bytes);
            slice_window |= w == 1;
            if (i as u64 + 1).is_multiple_of(slice) || i + 1 == keys.len() {
                let n = slice_lat.len() as u64;
                timeline.push(GrowthSample {
                    items: i as u64 + 1,
                    memory_bytes: slice_peak,
                    insert_rate: n as f64 / (slice_ns.max(1) as f64 / 1e9),
                    insert_p50_ns: quantile(&mut slice_lat, 0.5),
                    insert_p99_ns: quantile(&mut slice_lat, 0.99),
                    in_window: slice_window,
                });
                slice_lat.clear();
                (slice_ns, slice_peak, slice_window) = (0, 0, false);
            }
        }
        let false_negatives = keys
            .iter()
            .enumerate()
            .filter(|&(i, k)| !filter.contains(k) && failed_keys.binary_search(&i).is_err())
            .count() as u64;
        let rate = |w: usize| ins_count[w] as f64 / (ins_ns[w].max(1) as f64 / 1e9);
        rows.push(GrowthRow {
            layout: layout.name().to_string(),
            start_capacity,
            items: cfg.items,
            generations: filter.generation(),
            max_false_positive_rate: max_fpr,
            failed_inserts: failed,
            false_negatives,
            window_inserts: ins_count[1],
            insert_steady: ins[0].summary("insert (steady)"),
            insert_window: ins[1].summary("insert (doubling)"),
            insert_rate_steady: rate(0),
            insert_rate_window: rate(1),
            lookup_steady: look[0].summary("contains (steady)"),
            lookup_window: look[1].summary("contains (doubling)"),
            memory_peak: peak,
            memory_final: filter.memory_usage() as u64,
            final_false_positive_rate: filter.false_positive_rate(),
            timeline,
        });
    }
    Ok(rows)
}

/// The `q` quantile of `values` (reorders them).
fn quantile(values: &mut [u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let at = ((values.len() - 1) as f64 * q).round() as usize;
    *values.select_nth_unstable(at).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_slice() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(quantile(&mut v, 0.5), 51);
        assert_eq!(quantile(&mut v, 0.99), 99);
        assert_eq!(quantile(&mut [], 0.5), 0);
    }
}
