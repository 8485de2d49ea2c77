//! Latency histograms (HdrHistogram: constant memory, 3 significant
//! digits at any scale, cheap to record and to merge across threads).

use hdrhistogram::Histogram;

/// Percentiles reported for every operation.
pub const PERCENTILES: [(&str, f64); 4] =
    [("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9)];

/// Latencies of one operation, in nanoseconds.
#[derive(Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        // 1 ns to 100 s at 3 significant digits: a few tens of KiB.
        Latency(
            Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant bounds are valid"),
        )
    }
}

impl Latency {
    #[inline]
    pub fn record(&mut self, nanos: u64) {
        self.0.saturating_record(nanos.max(1));
    }

    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail.
        self.0.add(&other.0).expect("histograms share their bounds");
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    pub fn summary(&self, op: &str) -> LatencySummary {
        LatencySummary {
            op: op.to_string(),
            samples: self.count(),
            percentiles_ns: PERCENTILES
                .iter()
                .map(|&(name, q)| (name.to_string(), self.0.value_at_percentile(q)))
                .collect(),
            max_ns: self.0.max(),
        }
    }
}

/// Percentiles of one operation's latency, in nanoseconds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LatencySummary {
    /// The operation (`read`, `insert`, `remove`).
    pub op: String,
    /// Timed operations.
    pub samples: u64,
    /// `(name, value)` for each of [`PERCENTILES`].
    pub percentiles_ns: Vec<(String, u64)>,
    /// The slowest timed operation.
    pub max_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_recorded_values() {
        let mut a = Latency::default();
        let mut b = Latency::default();
        for v in 1..=500u64 {
            a.record(v * 10);
        }
        for v in 501..=1000u64 {
            b.record(v * 10);
        }
        a.merge(&b);
        let s = a.summary("read");
        assert_eq!(s.samples, 1000);
        let p = |name: &str| s.percentiles_ns.iter().find(|(n, _)| n == name).unwrap().1;
        assert!((4990..=5010).contains(&p("p50")), "p50 {}", p("p50"));
        assert!((9890..=9910).contains(&p("p99")), "p99 {}", p("p99"));
        assert!((9990..=10010).contains(&s.max_ns));
    }
}
