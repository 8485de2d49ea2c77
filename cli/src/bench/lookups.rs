//! Rows 1 and 2: positive and negative lookups on a filter filled to its
//! capacity, latency percentiles, throughput (single and batch), and the
//! measured false-positive rate against the filter's own estimate.

use super::common::{measure_read, uniform_keys, FprCheck, Layout, OpMeasure, UNTIMED_PASSES};
use super::Config;
use koel::Growth;

/// Lookups on one layout.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LookupRow {
    /// The layout's name.
    pub layout: String,
    /// Items inserted.
    pub items: u64,
    /// `len / slots` after filling.
    pub load_factor: f64,
    /// Bits of table per item.
    pub bits_per_item: f64,
    /// `contains` of inserted keys.
    pub positive: OpMeasure,
    /// `contains_many` of the same keys, operations per second.
    pub positive_batch_ops_per_sec: f64,
    /// Inserted keys answered absent (must be 0).
    pub false_negatives: u64,
    /// `contains` of never-inserted keys.
    pub negative: OpMeasure,
    /// `contains_many` of the same never-inserted keys, per second.
    pub negative_batch_ops_per_sec: f64,
    /// Measured FPR of the negative lookups.
    pub fpr: FprCheck,
}

/// Fills a filter of each layout with `items` keys, then looks them up and
/// looks up `negatives` others.
///
/// # Errors
///
/// A filter or key vector cannot be allocated, or the fill failed.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<LookupRow>> {
    let positives = uniform_keys(cfg.seed, 0..cfg.items)?;
    let negatives = uniform_keys(cfg.seed, cfg.items..cfg.items + cfg.negatives)?;
    let mut rows = Vec::new();
    for layout in Layout::ALL {
        let filter = layout.build(cfg.items as usize, Growth::Fixed, cfg.seed)?;
        filter
            .insert_many(&positives)
            .map_err(|e| anyhow::anyhow!("filling the {} filter: {}", layout.name(), e.error))?;
        let stats = filter.stats();
        let positive = measure_read("contains (present)", &positives, |k| filter.contains(k));
        let negative = measure_read("contains (absent)", &negatives, |k| filter.contains(k));
        let positive_batch_ops_per_sec = batch_rate(&filter, &positives);
        let negative_batch_ops_per_sec = batch_rate(&filter, &negatives);
        rows.push(LookupRow {
            layout: layout.name().to_string(),
            items: cfg.items,
            load_factor: stats.load_factor,
            bits_per_item: stats.bits_per_item(),
            false_negatives: positive.ops - positive.hits,
            fpr: FprCheck::new(negative.hits, negative.ops, filter.false_positive_rate()),
            positive,
            positive_batch_ops_per_sec,
            negative,
            negative_batch_ops_per_sec,
        });
    }
    Ok(rows)
}

/// Lookups per second of `contains_many` over `keys` in batches of 256
/// (best of [`UNTIMED_PASSES`]).
fn batch_rate(filter: &koel::CuckooFilter, keys: &[u64]) -> f64 {
    let mut out = [false; 256];
    let mut best = f64::INFINITY;
    for _ in 0..UNTIMED_PASSES {
        let start = std::time::Instant::now();
        let mut hits = 0usize;
        for chunk in keys.chunks(out.len()) {
            let out = &mut out[..chunk.len()];
            filter.contains_many(chunk, out);
            hits += out.iter().filter(|&&b| b).count();
        }
        std::hint::black_box(hits);
        best = best.min(start.elapsed().as_secs_f64().max(1e-9));
    }
    keys.len() as f64 / best
}
