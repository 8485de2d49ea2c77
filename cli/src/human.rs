//! Numbers as people read them, for every command's text output: counts
//! and bytes are indicatif's ([`HumanCount`]: `1,234,567`, [`HumanBytes`]:
//! `4.20 MiB`); rates and latencies, which it has no form for, are here.
//! (Their `Display` ignores widths: pad `.to_string()` in columns.)

pub use indicatif::{HumanBytes, HumanCount};

/// A rate with a metric prefix, to put before a unit: `12.35 M`.
pub fn rate(per_second: f64) -> String {
    if per_second >= 1e9 {
        format!("{:.2} G", per_second / 1e9)
    } else if per_second >= 1e6 {
        format!("{:.2} M", per_second / 1e6)
    } else if per_second >= 1e3 {
        format!("{:.1} k", per_second / 1e3)
    } else {
        format!("{per_second:.0} ")
    }
}

/// Nanoseconds in the unit that keeps them short, with at most one
/// decimal: `850 ns`, `1 us`, `12.5 us`, `3.1 ms` (latency tables and plot
/// axes alike).
pub fn nanos(ns: u64) -> String {
    let (v, unit) = match ns {
        0..=999 => return format!("{ns} ns"),
        1_000..=999_999 => (ns as f64 / 1e3, "us"),
        _ => (ns as f64 / 1e6, "ms"),
    };
    let v = format!("{v:.1}");
    format!("{} {unit}", v.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(HumanCount(1_234_567).to_string(), "1,234,567");
        assert_eq!(HumanBytes(3 << 20).to_string(), "3.00 MiB");
        assert_eq!(rate(12_345_678.0), "12.35 M");
        assert_eq!(nanos(850), "850 ns");
        assert_eq!(nanos(1000), "1 us");
        assert_eq!(nanos(1583), "1.6 us");
        assert_eq!(nanos(12_500), "12.5 us");
        assert_eq!(nanos(10_000_000), "10 ms");
    }
}
