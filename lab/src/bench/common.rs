//! What every part of the matrix shares: the two layouts, key streams,
//! per-operation timing, and the false-positive bound.

use anyhow::Context;
use koel::{CuckooFilter, Growth};
use koel_cli::keys::mix64;
use koel_cli::latency::{Latency, LatencySummary};
use std::hint::black_box;
use std::time::Instant;

/// A cuckoo filter layout: tag bits (tags per bucket follow from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// 16 (4 tags per bucket) or 12 (5 per bucket).
    pub bits: u32,
}

impl Layout {
    /// Both layouts koel offers.
    pub const ALL: [Layout; 2] = [Layout { bits: 16 }, Layout { bits: 12 }];

    /// `16-bit x 4` or `12-bit x 5`.
    pub fn name(self) -> &'static str {
        if self.bits == 16 {
            "16-bit x 4"
        } else {
            "12-bit x 5"
        }
    }

    /// A filter of this layout for `capacity` items.
    ///
    /// # Errors
    ///
    /// The build error (allocation refused, absurd capacity), as one line.
    pub fn build(self, capacity: usize, growth: Growth, seed: u64) -> anyhow::Result<CuckooFilter> {
        self.builder(capacity, growth, seed).build().map_err(|e| {
            anyhow::anyhow!(
                "cannot build a {} filter for {capacity} items: {e}",
                self.name()
            )
        })
    }

    /// The builder behind [`Layout::build`], for callers that set more.
    pub fn builder(self, capacity: usize, growth: Growth, seed: u64) -> koel::CuckooFilterBuilder {
        CuckooFilter::builder()
            .capacity(capacity)
            .fingerprint_bits(self.bits)
            .growth(growth)
            .seed(seed)
    }
}

/// Uniform 64-bit key number `i` of the stream `seed`: distinct for
/// distinct `i` (a bijection), so keys `0..n` and `n..n+m` never overlap.
#[inline(always)]
pub fn uniform_key(seed: u64, i: u64) -> u64 {
    mix64(i.wrapping_add(seed))
}

/// `uniform_key(seed, i)` for `i` in `range`, in a fallibly allocated vector.
///
/// # Errors
///
/// The allocation was refused.
pub fn uniform_keys(seed: u64, range: std::ops::Range<u64>) -> anyhow::Result<Vec<u64>> {
    let mut v = try_vec(range.end.saturating_sub(range.start))?;
    v.extend(range.map(|i| uniform_key(seed, i)));
    Ok(v)
}

/// An empty vector with room for `n` items, or an error instead of an abort.
///
/// # Errors
///
/// `n` does not fit in memory.
pub fn try_vec<T>(n: u64) -> anyhow::Result<Vec<T>> {
    let n = usize::try_from(n).context("key count does not fit in memory")?;
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .with_context(|| format!("cannot allocate room for {n} keys"))?;
    Ok(v)
}

/// Median cost of one `Instant::now()` pair around nothing: every per-op
/// latency below includes it once.
pub fn clock_overhead_ns() -> u64 {
    let mut lat = Latency::default();
    for _ in 0..200_000 {
        let t0 = Instant::now();
        black_box(());
        lat.record(t0.elapsed().as_nanos() as u64);
    }
    lat.summary("clock").percentiles_ns[0].1
}

/// One operation over a key set: per-op latency from a timed pass, and
/// throughput from a separate untimed pass.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OpMeasure {
    /// Operations per pass.
    pub ops: u64,
    /// Operations that answered `true` (untimed pass).
    pub hits: u64,
    /// Latency percentiles of the timed pass.
    pub latency: LatencySummary,
    /// Mean of the timed pass, nanoseconds.
    pub mean_ns: f64,
    /// Operations per second of the fastest untimed pass (read-only
    /// operations), or of the timed calls (writes).
    pub ops_per_sec: f64,
}

impl OpMeasure {
    /// The value of percentile `name` (`p50`, `p95`, `p99`, `p99.9`).
    pub fn pct(&self, name: &str) -> u64 {
        self.latency
            .percentiles_ns
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |p| p.1)
    }
}

/// Untimed passes of a read-only measurement; the fastest one counts.
pub const UNTIMED_PASSES: usize = 3;

/// Runs `op` over every element of `items`: once timed one by one, then
/// [`UNTIMED_PASSES`] times as an untimed loop. For read-only operations
/// (every pass sees the same filter).
pub fn measure_read<T>(name: &str, items: &[T], mut op: impl FnMut(&T) -> bool) -> OpMeasure {
    let mut lat = Latency::default();
    let mut total_ns = 0u64;
    for item in items {
        let t0 = Instant::now();
        black_box(op(black_box(item)));
        let ns = t0.elapsed().as_nanos() as u64;
        total_ns += ns;
        lat.record(ns);
    }
    // Best of a few passes: on a shared machine the other passes lost
    // time to other processes, not to the filter.
    let mut secs = f64::INFINITY;
    let mut hits = 0u64;
    for _ in 0..UNTIMED_PASSES {
        let start = Instant::now();
        hits = 0;
        for item in items {
            hits += u64::from(op(black_box(item)));
        }
        secs = secs.min(start.elapsed().as_secs_f64().max(1e-9));
    }
    OpMeasure {
        ops: items.len() as u64,
        hits,
        latency: lat.summary(name),
        mean_ns: total_ns as f64 / items.len().max(1) as f64,
        ops_per_sec: items.len() as f64 / secs,
    }
}

/// Runs a state-changing `op` once over `items`, each call timed; the
/// throughput is `ops / sum of the timed calls` (so it includes the clock
/// overhead once per call).
pub fn measure_write<T>(name: &str, items: &[T], mut op: impl FnMut(&T) -> bool) -> OpMeasure {
    let mut lat = Latency::default();
    let mut total_ns = 0u64;
    let mut hits = 0u64;
    for item in items {
        let t0 = Instant::now();
        let hit = op(black_box(item));
        let ns = t0.elapsed().as_nanos() as u64;
        hits += u64::from(hit);
        total_ns += ns;
        lat.record(ns);
    }
    OpMeasure {
        ops: items.len() as u64,
        hits,
        latency: lat.summary(name),
        mean_ns: total_ns as f64 / items.len().max(1) as f64,
        ops_per_sec: items.len() as f64 / (total_ns.max(1) as f64 / 1e9),
    }
}

/// Whether `false_positives` out of `trials` is consistent with the
/// estimated rate: within 4 standard deviations of the Poisson mean, plus 4
/// for tiny means. Returns `(low, high)` bounds on the count.
pub fn fpr_bounds(estimate: f64, trials: u64) -> (u64, u64) {
    let mean = estimate * trials as f64;
    let slack = 4.0 * mean.sqrt() + 4.0;
    (
        (mean - slack).max(0.0).floor() as u64,
        (mean + slack).ceil() as u64,
    )
}

/// Measured vs estimated false-positive rate of one probe.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FprCheck {
    /// Never-inserted keys looked up.
    pub trials: u64,
    /// Of them, answered `true`.
    pub false_positives: u64,
    /// `false_positives / trials`.
    pub measured: f64,
    /// The filter's own estimate at its load (`false_positive_rate()`).
    pub estimate: f64,
    /// Whether the count is within 4 sigma (+4) of the estimate.
    pub within_bound: bool,
}

impl FprCheck {
    /// The check of `false_positives` in `trials` against `estimate`.
    pub fn new(false_positives: u64, trials: u64, estimate: f64) -> Self {
        let (lo, hi) = fpr_bounds(estimate, trials);
        FprCheck {
            trials,
            false_positives,
            measured: false_positives as f64 / trials.max(1) as f64,
            estimate,
            within_bound: (lo..=hi).contains(&false_positives),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_keys_of_disjoint_ranges_do_not_overlap() {
        let a = uniform_keys(7, 0..10_000).unwrap();
        let b = uniform_keys(7, 10_000..20_000).unwrap();
        let set: std::collections::HashSet<u64> = a.iter().copied().collect();
        assert_eq!(set.len(), a.len());
        assert!(b.iter().all(|k| !set.contains(k)));
    }

    #[test]
    fn fpr_bounds_accept_the_mean_and_reject_far_off_counts() {
        let check = |fp| FprCheck::new(fp, 1_000_000, 1e-4).within_bound;
        assert!(check(100));
        assert!(check(70));
        assert!(!check(300));
        assert!(!check(10));
        // A tiny mean tolerates a handful of hits, not hundreds.
        assert!(FprCheck::new(3, 1000, 1e-4).within_bound);
        assert!(!FprCheck::new(50, 1000, 1e-4).within_bound);
    }
}
