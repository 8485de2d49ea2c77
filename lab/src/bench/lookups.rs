//! Rows 1 and 2: positive and negative lookups on a filter filled to its
//! capacity, latency percentiles, throughput (single and batch), and the
//! measured false-positive rate against the filter's own estimate. Both
//! cuckoo layouts, and koel's blocked Bloom filter sized for the same items
//! at each layout's false-positive rate (it cannot delete or grow, so the
//! other rows leave it out).

use super::common::{measure_read, uniform_keys, FprCheck, Layout, OpMeasure, UNTIMED_PASSES};
use super::Config;
use koel::{BloomFilter, Growth};
use std::hint::black_box;
use std::time::Instant;

/// Lookups on one filter.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LookupRow {
    /// The filter: a cuckoo layout's name, or `Bloom, FPR ...`.
    pub layout: String,
    /// Items inserted.
    pub items: u64,
    /// `len / slots` after filling (`None` for a Bloom filter, which holds
    /// its rated capacity).
    pub load_factor: Option<f64>,
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
    /// Untimed `insert` calls per second into a fresh filter (Bloom rows
    /// only: the cuckoo layouts have their own insert row).
    pub insert_ops_per_sec: Option<f64>,
    /// `insert_many` calls (batches of 1024) per second into a fresh
    /// filter (Bloom rows only).
    pub insert_batch_ops_per_sec: Option<f64>,
}

/// Target rates of the Bloom rows: the cuckoo layouts' rates at full load
/// (16-bit x 4, 12-bit x 5).
pub const BLOOM_RATES: [f64; 2] = [1.2e-4, 2.4e-3];

/// Fills a filter of each layout (and a Bloom filter per rate of
/// [`BLOOM_RATES`]) with `items` keys, then looks them up and looks up
/// `negatives` others.
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
        let batch = |keys: &[u64]| batch_rate(keys, |chunk, out| filter.contains_many(chunk, out));
        rows.push(LookupRow {
            layout: layout.name().to_string(),
            items: cfg.items,
            load_factor: Some(stats.load_factor),
            bits_per_item: stats.bits_per_item(),
            false_negatives: positive.ops - positive.hits,
            fpr: FprCheck::new(negative.hits, negative.ops, filter.false_positive_rate()),
            positive_batch_ops_per_sec: batch(&positives),
            negative_batch_ops_per_sec: batch(&negatives),
            positive,
            negative,
            insert_ops_per_sec: None,
            insert_batch_ops_per_sec: None,
        });
    }
    for fpr in BLOOM_RATES {
        rows.push(bloom_row(cfg, fpr, &positives, &negatives)?);
    }
    Ok(rows)
}

/// A Bloom filter for `items` at `fpr`, seeded like the cuckoo filters.
fn bloom(cfg: &Config, fpr: f64) -> anyhow::Result<BloomFilter> {
    BloomFilter::builder()
        .capacity(cfg.items as usize)
        .false_positive_rate(fpr)
        .seed(cfg.seed)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build a Bloom filter for {} items: {e}", cfg.items))
}

/// The lookup row of koel's Bloom filter at `fpr`, on the same keys.
fn bloom_row(
    cfg: &Config,
    fpr: f64,
    positives: &[u64],
    negatives: &[u64],
) -> anyhow::Result<LookupRow> {
    let filter = bloom(cfg, fpr)?;
    filter.insert_many(positives);
    let positive = measure_read("contains (present)", positives, |k| filter.contains(k));
    let negative = measure_read("contains (absent)", negatives, |k| filter.contains(k));
    let batch = |keys: &[u64]| batch_rate(keys, |chunk, out| filter.contains_many(chunk, out));

    // Inserts: untimed fills of fresh filters, the fastest counts.
    let (mut single, mut many) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..UNTIMED_PASSES {
        let fresh = bloom(cfg, fpr)?;
        let start = Instant::now();
        for k in positives {
            black_box(fresh.insert(black_box(k)));
        }
        single = single.min(start.elapsed().as_secs_f64());
        let fresh = bloom(cfg, fpr)?;
        let start = Instant::now();
        for chunk in positives.chunks(1024) {
            black_box(fresh.insert_many(chunk));
        }
        many = many.min(start.elapsed().as_secs_f64());
    }
    let n = positives.len() as f64;
    Ok(LookupRow {
        layout: format!("Bloom, FPR {fpr:.1e}"),
        items: cfg.items,
        load_factor: None,
        bits_per_item: filter.bits_per_item(),
        false_negatives: positive.ops - positive.hits,
        fpr: FprCheck::new(negative.hits, negative.ops, filter.false_positive_rate()),
        positive_batch_ops_per_sec: batch(positives),
        negative_batch_ops_per_sec: batch(negatives),
        positive,
        negative,
        insert_ops_per_sec: Some(n / single.max(1e-9)),
        insert_batch_ops_per_sec: Some(n / many.max(1e-9)),
    })
}

/// Lookups per second of a batch `contains` over `keys` in batches of 256
/// (best of [`UNTIMED_PASSES`]).
fn batch_rate(keys: &[u64], contains_many: impl Fn(&[u64], &mut [bool])) -> f64 {
    let mut out = [false; 256];
    let mut best = f64::INFINITY;
    for _ in 0..UNTIMED_PASSES {
        let start = Instant::now();
        let mut hits = 0usize;
        for chunk in keys.chunks(out.len()) {
            let out = &mut out[..chunk.len()];
            contains_many(chunk, out);
            hits += out.iter().filter(|&&b| b).count();
        }
        black_box(hits);
        best = best.min(start.elapsed().as_secs_f64().max(1e-9));
    }
    keys.len() as f64 / best
}
