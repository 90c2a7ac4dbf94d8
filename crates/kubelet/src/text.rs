//! Small text helpers every layer shares (ground level): milliseconds from a
//! duration, compressed number ranges, comma lists and timestamps. The output
//! layer re-exports the ones it renders with; domains call them from here so
//! nothing imports upward.

use std::time::{Duration, SystemTime};

/// `1 check`, `2 checks`: a count with the right form of its noun.
pub fn count<N: TryInto<u64>>(n: N, one: &str, many: &str) -> String {
    let n: u64 = n.try_into().unwrap_or(u64::MAX);
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Whole milliseconds in `d`, saturating at `u64::MAX` (no overflowing cast).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Compresses ids into ranges: `0-3,8`.
pub fn ranges(ids: &[i64]) -> String {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && Some(v[i + 1]) == end.checked_add(1) {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// RFC 3339 with milliseconds, UTC.
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// A comma-separated list, or `-` when empty.
pub fn list(items: &[String]) -> String {
    if items.is_empty() { "-".into() } else { items.join(",") }
}

/// At most `max` characters, with an ellipsis when cut (user input echoed
/// in an error, a cell in a table).
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Formats a duration for people: `500ms`, `10s`, `1m 30s`.
pub fn fmt_duration(d: std::time::Duration) -> String {
    if d.as_secs() == 0 || d.subsec_millis() != 0 && d.as_secs() < 10 {
        return format!("{}ms", d.as_millis());
    }
    humantime::format_duration(std::time::Duration::from_secs(d.as_secs())).to_string()
}

/// An error and its sources on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress() {
        assert_eq!(ranges(&[8, 0, 1, 2, 3]), "0-3,8");
        assert_eq!(ranges(&[5]), "5");
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[1, 3, 5, 6]), "1,3,5-6");
        assert_eq!(ranges(&[i64::MAX - 1, i64::MAX]), format!("{}-{}", i64::MAX - 1, i64::MAX));
    }

    #[test]
    fn millis_saturate() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }

    #[test]
    fn lists_show_a_dash_when_empty() {
        assert_eq!(list(&[]), "-");
        assert_eq!(list(&["a".into(), "b".into()]), "a,b");
    }
}
