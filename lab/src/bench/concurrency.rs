//! Row 6: throughput by thread count on one shared filter, with the
//! bucket CASes the lock-free protocol retried (`stats()` before and
//! after; lookups count nothing, since they never write shared memory).
//! Each run is a `koel stress` run, so it also checks for false negatives
//! against its ground truth.

use super::common::Layout;
use super::Config;
use koel::Growth;
use koel_cli::keys::KeyDist;
use koel_cli::stress::{self, Mix};

/// One (layout, mix, threads) run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ConcurrencyRow {
    /// The layout's name.
    pub layout: String,
    /// The operation mix.
    pub mix: String,
    /// Worker threads.
    pub threads: usize,
    /// Operations per second, all threads together.
    pub ops_per_sec: f64,
    /// `ops_per_sec` / the same mix's 1-thread rate (or the lowest thread
    /// count measured).
    pub speedup: f64,
    /// p50 / p99 of the reads, nanoseconds (1 op in 64 timed).
    pub read_p50_ns: u64,
    /// See `read_p50_ns`.
    pub read_p99_ns: u64,
    /// Bucket CASes retried during the run.
    pub cas_retries: u64,
    /// `cas_retries` per million operations.
    pub retries_per_million_ops: f64,
    /// False negatives the stress checker saw (must be 0).
    pub false_negatives: u64,
}

/// The mixes measured: read-only and the 90/9/1 mix of the design study.
pub fn mixes() -> [(&'static str, Mix); 2] {
    [
        (
            "read-only",
            Mix {
                read: 100,
                insert: 0,
                remove: 0,
            },
        ),
        (
            "90/9/1",
            Mix {
                read: 90,
                insert: 9,
                remove: 1,
            },
        ),
    ]
}

/// Every layout x mix x thread count.
///
/// # Errors
///
/// A filter cannot be built or a stress run fails to start.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<ConcurrencyRow>> {
    let mut rows: Vec<ConcurrencyRow> = Vec::new();
    for layout in Layout::ALL {
        for (name, mix) in mixes() {
            let first_row = rows.len();
            for &threads in &cfg.threads {
                let filter = layout.build(cfg.items as usize, Growth::Double, cfg.seed)?;
                let before = filter.stats();
                let report = stress::run(
                    &filter,
                    &stress::Config {
                        threads,
                        items: cfg.items.max(threads as u64),
                        capacity: cfg.items,
                        mix,
                        duration: cfg.concurrency_duration,
                        keys: KeyDist::Uniform,
                        prefill: 0.5,
                        seed: cfg.seed,
                    },
                )?;
                let after = filter.stats();
                let cas_retries = after.cas_retries - before.cas_retries;
                let read = report.latency.iter().find(|l| l.op == "read");
                let pct = |name: &str| {
                    read.and_then(|l| l.percentiles_ns.iter().find(|p| p.0 == name))
                        .map_or(0, |p| p.1)
                };
                let base = rows
                    .get(first_row)
                    .map_or(report.ops_per_sec, |r| r.ops_per_sec);
                rows.push(ConcurrencyRow {
                    layout: layout.name().to_string(),
                    mix: name.to_string(),
                    threads,
                    ops_per_sec: report.ops_per_sec,
                    speedup: report.ops_per_sec / base.max(1e-9),
                    read_p50_ns: pct("p50"),
                    read_p99_ns: pct("p99"),
                    cas_retries,
                    retries_per_million_ops: cas_retries as f64 * 1e6 / report.ops.max(1) as f64,
                    false_negatives: report.check.false_negatives(),
                });
            }
        }
    }
    Ok(rows)
}
