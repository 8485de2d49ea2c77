//! Parsers for option values shared by several commands.

use std::time::Duration;

/// A count from 1 to 10^15 such as `1000000`, `1_000_000`, `500k`,
/// `1.5k`, `8.2M`, `2G` or `1e6`: a decimal number, times 10^3, 10^6 or
/// 10^9 for a `k`, `M` or `G` suffix, that must come out whole (not `1.5`
/// or `0.0005k`). Computed in decimal, not in floating point (where
/// 8.2 x 10^6 is 8199999.999999999).
pub fn count(s: &str) -> Result<u64, String> {
    let t: String = s.trim().chars().filter(|&c| c != '_').collect();
    let (number, mut exponent) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 3),
        Some('m' | 'M') => (&t[..t.len() - 1], 6),
        Some('g' | 'G') => (&t[..t.len() - 1], 9),
        _ => (&t[..], 0i64),
    };
    // `[+-]int[.frac][e[+-]exp]`, with at least one digit before the `e`.
    let negative = number.starts_with('-');
    let number = number.strip_prefix(['+', '-']).unwrap_or(number);
    let (mantissa, exp) = number.split_once(['e', 'E']).unwrap_or((number, "0"));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let exp_digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.len() + frac.len() == 0
        || exp_digits.is_empty()
        || ![int, frac, exp_digits].map(digits).iter().all(|&d| d)
    {
        return Err(format!(
            "{s:?} is not a count (e.g. 1000000, 500k, 1.5M, 1e6)"
        ));
    }
    // Any exponent beyond 2^40 is absurd or a fraction alike.
    let sign = if exp.starts_with('-') { -1 } else { 1 };
    exponent += sign * exp_digits.parse::<i64>().unwrap_or(i64::MAX).min(1 << 40);
    // The significant digits, without leading or trailing zeros.
    let all = format!("{int}{frac}");
    let significant = all.trim_start_matches('0');
    let digits = significant.trim_end_matches('0');
    exponent += (significant.len() - digits.len()) as i64 - frac.len() as i64;
    if negative || digits.is_empty() {
        return Err(format!("{s:?} must be at least 1"));
    }
    if exponent < 0 {
        // `digits` ends in a non-zero digit: a fraction is left.
        return Err(format!(
            "{s:?} is not a whole number: a count must be whole after its suffix (e.g. 1500 or 1.5k, not 1.5)"
        ));
    }
    // More than 16 digits before the point is above 10^15.
    let value = (digits.len() as i64 + exponent <= 16)
        .then(|| digits.parse::<u64>().expect("at most 16 digits") * 10u64.pow(exponent as u32))
        .filter(|&v| v <= 1_000_000_000_000_000);
    value.ok_or_else(|| format!("{s:?} is absurdly large (at most 10^15)"))
}

/// A duration from 1 ms to 1 day: seconds (`10`, `2.5`, `10s`) or
/// milliseconds (`500ms`).
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, unit) = match t.strip_suffix("ms") {
        Some(n) => (n, 1e-3),
        None => (t.strip_suffix('s').unwrap_or(t), 1.0),
    };
    let secs = number
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 10, 2.5, 500ms)"))?
        * unit;
    if !(0.001..=86_400.0).contains(&secs) {
        return Err(format!("{s:?} must be between 1 ms and one day"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A field delimiter: one byte, or `tab`.
pub fn delimiter(s: &str) -> Result<u8, String> {
    match s {
        "tab" | "\\t" => Ok(b'\t'),
        _ if s.len() == 1 && s.as_bytes()[0] != b'\n' => Ok(s.as_bytes()[0]),
        _ => Err(format!(
            "{s:?} is not a one-byte delimiter (e.g. , or ; or tab)"
        )),
    }
}

/// A fraction in `0..=1`.
pub fn fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a fraction between 0 and 1")),
    }
}

/// A filter's false-positive rate: above 0 and below 1 (the error for 0
/// says why no filter can have it).
pub fn probability(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        Ok(0.0) => Err(
            "a false-positive rate must be above 0: every filter has some false positives \
             (for none, keep an exact set; `koel advise --fpr 0` says so too)"
                .to_string(),
        ),
        Ok(v) if v.is_finite() => Err(format!(
            "{s:?} is not a false-positive rate: it must be above 0 and below 1 (e.g. 0.001 or 1e-4)"
        )),
        _ => Err(format!(
            "{s:?} is not a number: give a false-positive rate above 0 and below 1 (e.g. 0.001 or 1e-4)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_counts_scale_to_the_exact_integer() {
        // 8.2 * 1e6 is 8199999.999999999 in floating point.
        for (text, want) in [
            ("1000000", 1_000_000),
            ("1_000", 1000),
            ("500k", 500_000),
            ("10M", 10_000_000),
            ("2G", 2_000_000_000),
            ("1.5M", 1_500_000),
            ("1.5k", 1_500),
            ("8.2M", 8_200_000),
            ("2.5G", 2_500_000_000),
            ("1e6", 1_000_000),
            ("0.5k", 500),
            ("4.1M", 4_100_000),
            ("1.001k", 1_001),
            ("1.23456789G", 1_234_567_890),
            ("12.5e3", 12_500),
            ("100e-2", 1),
            ("1E15", 1_000_000_000_000_000),
            ("1_000.5k", 1_000_500),
            ("+7", 7),
        ] {
            assert_eq!(count(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn a_count_that_is_not_whole_after_scaling_is_refused_clearly() {
        for bad in ["1.5", "0.5", "0.0005k", "1.0000001M", "1e-3", "2.5e0"] {
            let e = count(bad).unwrap_err();
            assert!(e.contains("not a whole number"), "{bad}: {e}");
        }
        for (bad, needle) in [
            ("0", "at least 1"),
            ("0.0k", "at least 1"),
            ("-3", "at least 1"),
            ("1e16", "at most 10^15"),
            ("1e999999999999", "at most 10^15"),
            ("1.2.3", "not a count"),
            ("1e", "not a count"),
            ("e5", "not a count"),
            ("inf", "not a count"),
            ("1k5", "not a count"),
        ] {
            let e = count(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        for bad in ["", "x", "1e300", "NaN", "M"] {
            assert!(count(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn delimiters() {
        assert_eq!(delimiter("tab"), Ok(b'\t'));
        assert_eq!(delimiter(","), Ok(b','));
        assert!(delimiter(",,").is_err());
        assert!(delimiter("").is_err());
        assert!(delimiter("\n").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["", "0", "-1", "abc", "1e9", "inf", "NaN"] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fractions_and_probabilities() {
        assert_eq!(fraction("0.5"), Ok(0.5));
        assert!(fraction("1.5").is_err());
        assert!(fraction("NaN").is_err());
        assert_eq!(probability("1e-3"), Ok(0.001));
        let zero = probability("0").unwrap_err();
        assert!(
            zero.contains("above 0") && zero.contains("exact set"),
            "{zero}"
        );
        assert!(!zero.contains("not a probability"), "{zero}");
        assert!(probability("1").is_err());
    }
}
