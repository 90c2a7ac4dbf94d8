//! The one duration parser every flag and config field uses, bounded so no
//! value can overflow an `Instant` or a gRPC timeout, and checked deadline
//! arithmetic for the rest of dpctl.

use std::time::Duration;

/// The longest duration dpctl accepts anywhere (a flag, a config field, a
/// `--flap` period): 365 days. Longer ones used to overflow clock arithmetic
/// and panic; nothing dpctl waits for needs more.
pub const MAX: Duration = Duration::from_secs(365 * 24 * 60 * 60);

const EXAMPLES: &str = "examples: 500ms, 10s, 2m, 1h";

/// Parses `500ms`, `10s`, `2m`, `1h 30m` (humantime syntax) or a bare number
/// of seconds (`1.5`), refusing negative, non-finite and over-[`MAX`] values.
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("empty duration ({EXAMPLES})"));
    }
    if let Ok(secs) = t.parse::<f64>() {
        return from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    let d = humantime::parse_duration(t).map_err(|e| format!("invalid duration {s:?}: {e} ({EXAMPLES})"))?;
    check(d).map_err(|e| format!("{s:?}: {e}"))
}

/// [`parse`] for a deadline or a limit to wait (`--timeout`,
/// `--connect-timeout`): zero is refused, since a call given no time fails
/// before it starts and a wait of none ends at once.
pub fn parse_positive(s: &str) -> Result<Duration, String> {
    let d = parse(s)?;
    if d.is_zero() {
        return Err(format!("{s:?} is no time at all: a deadline must be more than 0 ({EXAMPLES})"));
    }
    Ok(d)
}

/// A number of seconds as a duration, within [`MAX`].
pub fn from_secs_f64(secs: f64) -> Result<Duration, String> {
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("a duration must be a finite number of seconds, at least 0 ({EXAMPLES})"));
    }
    if secs > MAX.as_secs_f64() {
        return Err(over());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| over()).and_then(check)
}

/// Refuses a duration over [`MAX`].
pub fn check(d: Duration) -> Result<Duration, String> {
    if d > MAX { Err(over()) } else { Ok(d) }
}

fn over() -> String {
    "longer than the longest duration dpctl accepts (365 days)".to_string()
}

/// `now + d`, saturating at [`MAX`] from now instead of overflowing.
pub fn deadline(d: Duration) -> tokio::time::Instant {
    after(tokio::time::Instant::now(), d)
}

/// `t + d`, saturating: a `d` over [`MAX`] counts as [`MAX`].
pub fn after(t: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    t.checked_add(d.min(MAX)).unwrap_or(t)
}

/// `t + d` for `std::time::Instant`, saturating like [`after`].
pub fn after_std(t: std::time::Instant, d: Duration) -> std::time::Instant {
    t.checked_add(d.min(MAX)).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse(" 1.5 ").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("365d").unwrap(), MAX);
        assert!(parse("soon").is_err());
        assert!(parse("").is_err());
    }

    // Out-of-range, negative and non-finite values would panic in
    // `Duration::from_secs_f64` or overflow an `Instant` later on.
    #[test]
    fn huge_negative_and_odd_values_are_refused_not_panicked_on() {
        for bad in ["1e20", "1e19", "-1", "NaN", "inf", "-inf", "366d", "18446744073709551615s", "1e308"] {
            let e = parse(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(parse("1e20").unwrap_err().contains("365 days"));
        assert!(parse("400d").unwrap_err().contains("365 days"));
    }

    // The bounds themselves: 0 and exactly 365 days are accepted; a negative
    // or non-finite number is named as such, not as "too long".
    #[test]
    fn zero_and_the_maximum_are_accepted_and_bad_numbers_are_named() {
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(from_secs_f64(0.0), Ok(Duration::ZERO));
        assert_eq!(parse("31536000").unwrap(), MAX);
        assert!(parse("31536000.5").unwrap_err().contains("365 days"));
        for bad in ["-1", "-0.001", "NaN", "inf", "-inf"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("a duration must be a finite number of seconds, at least 0"), "{bad}: {e}");
        }
    }

    #[test]
    fn deadlines_saturate() {
        let now = tokio::time::Instant::now();
        assert!(after(now, Duration::MAX) > now);
        assert_eq!(after(now, Duration::MAX), after(now, MAX));
        let s = std::time::Instant::now();
        assert!(after_std(s, Duration::MAX) >= s);
    }
}
