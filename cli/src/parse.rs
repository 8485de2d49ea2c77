//! Parsers for option values shared by several commands.

use std::time::Duration;

/// A count such as `1000000`, `1_000_000`, `500k`, `10M`, `2G` or `1e6`.
///
/// # Errors
///
/// A one-line message for anything else, zero included.
pub fn count(s: &str) -> Result<u64, String> {
    let t: String = s.trim().chars().filter(|&c| c != '_').collect();
    let (digits, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (&t[..], 1.0),
    };
    let err = || format!("{s:?} is not a count (e.g. 1000000, 500k, 10M, 1e6)");
    let value = match digits.parse::<u64>() {
        Ok(v) => v as f64 * scale,
        Err(_) => digits.parse::<f64>().map_err(|_| err())? * scale,
    };
    if !value.is_finite() || value < 1.0 || value.fract() != 0.0 {
        return Err(format!("{s:?} must be a whole number of at least 1"));
    }
    if value > 1e15 {
        return Err(format!("{s:?} is absurdly large (at most 10^15)"));
    }
    Ok(value as u64)
}

/// A duration: seconds (`10`, `2.5`, `10s`) or milliseconds (`500ms`).
///
/// # Errors
///
/// A one-line message for anything else, or a duration outside
/// 1 ms..=1 day.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, unit) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
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

/// A fraction in `0..=1`.
///
/// # Errors
///
/// A one-line message for anything else.
pub fn fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a fraction between 0 and 1")),
    }
}

/// A filter's false-positive rate: above 0 and below 1.
///
/// # Errors
///
/// A one-line message for anything else; 0 says why no filter can have it.
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
    fn counts() {
        assert_eq!(count("1000000"), Ok(1_000_000));
        assert_eq!(count("1_000"), Ok(1000));
        assert_eq!(count("500k"), Ok(500_000));
        assert_eq!(count("10M"), Ok(10_000_000));
        assert_eq!(count("2G"), Ok(2_000_000_000));
        assert_eq!(count("1e6"), Ok(1_000_000));
        assert_eq!(count("1.5M"), Ok(1_500_000));
        for bad in ["", "0", "-3", "x", "1.5", "1e300", "NaN", "M"] {
            assert!(count(bad).is_err(), "{bad:?}");
        }
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
