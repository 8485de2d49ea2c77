//! Row 3: inserts into a fixed-size filter up to its rated capacity: time
//! per insert, displacements, and how many failed.

use super::common::{measure_write, uniform_keys, Layout, OpMeasure, UNTIMED_PASSES};
use super::Config;
use koel::Growth;
use std::hint::black_box;
use std::time::Instant;

/// Inserts on one layout.
#[derive(Clone, Debug, serde::Serialize)]
pub struct InsertRow {
    /// The layout's name.
    pub layout: String,
    /// Inserts attempted.
    pub attempted: u64,
    /// Timed `insert` calls (`hits` = succeeded).
    pub insert: OpMeasure,
    /// Inserts that returned an error.
    pub failed: u64,
    /// `failed / attempted`.
    pub failure_rate: f64,
    /// Load factor reached.
    pub load_factor: f64,
    /// Tags moved by displacement (`stats().displacements`).
    pub displacements: u64,
    /// Displacements per successful insert.
    pub displacements_per_insert: f64,
    /// Committed displacement paths (`stats().paths()`).
    pub paths: u64,
    /// `stats().insert_failures`: inserts that found the table full.
    pub full_events: u64,
    /// Inserts per second of untimed `insert` calls into a fresh filter
    /// (best of a few fills).
    pub ops_per_sec: f64,
    /// Inserts per second of `insert_many` (batches of 1024) into a fresh
    /// filter: one pin per batch, prefetching (best of a few fills).
    pub batch_ops_per_sec: f64,
}

/// Inserts `items` keys into a `Growth::Fixed` filter sized for `items`.
///
/// # Errors
///
/// A filter or the keys cannot be allocated.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<InsertRow>> {
    let keys = uniform_keys(cfg.seed ^ 0x1115, 0..cfg.items)?;
    let mut rows = Vec::new();
    for layout in Layout::ALL {
        let filter = layout.build(cfg.items as usize, Growth::Fixed, cfg.seed)?;
        let insert = measure_write("insert", &keys, |k| filter.insert(k).is_ok());
        let s = filter.stats();
        let failed = insert.ops - insert.hits;

        // Throughput: untimed fills of fresh filters, best of a few (a
        // fill can only run once per filter).
        let mut single = f64::INFINITY;
        let mut batch = f64::INFINITY;
        for _ in 0..UNTIMED_PASSES {
            let fresh = layout.build(cfg.items as usize, Growth::Fixed, cfg.seed)?;
            let start = Instant::now();
            for k in &keys {
                // Failures are counted by the timed pass above.
                let _ = fresh.insert(black_box(k));
            }
            single = single.min(start.elapsed().as_secs_f64());

            let fresh = layout.build(cfg.items as usize, Growth::Fixed, cfg.seed)?;
            let start = Instant::now();
            for chunk in keys.chunks(1024) {
                // A failed batch stops at its failing key; the rest of the
                // chunk is skipped (there are none at rated capacity).
                let _ = fresh.insert_many(chunk);
            }
            batch = batch.min(start.elapsed().as_secs_f64());
        }
        let ops_per_sec = keys.len() as f64 / single.max(1e-9);
        let batch_ops_per_sec = keys.len() as f64 / batch.max(1e-9);

        rows.push(InsertRow {
            layout: layout.name().to_string(),
            attempted: insert.ops,
            failed,
            failure_rate: failed as f64 / insert.ops.max(1) as f64,
            load_factor: s.load_factor,
            displacements: s.displacements,
            displacements_per_insert: s.displacements as f64 / insert.hits.max(1) as f64,
            paths: s.paths(),
            full_events: s.insert_failures,
            batch_ops_per_sec,
            ops_per_sec,
            insert,
        });
    }
    Ok(rows)
}
