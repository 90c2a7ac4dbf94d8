//! `--fail-if` thresholds: `p99>5ms`, `errors>0`, `throughput<20000`,
//! parsed once and checked against each target's report.

use serde::Serialize;

use super::TargetReport;

/// What a threshold looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    P50,
    P90,
    P99,
    P999,
    Max,
    Mean,
    Errors,
    Violations,
    Throughput,
}

const METRICS: &str = "p50, p90, p99, p99.9, max, mean (durations: 5ms, 800us, 1s), errors, violations, throughput";

impl Metric {
    fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "p50" => Metric::P50,
            "p90" => Metric::P90,
            "p99" => Metric::P99,
            "p99.9" | "p999" => Metric::P999,
            "max" => Metric::Max,
            "mean" => Metric::Mean,
            "errors" => Metric::Errors,
            "violations" => Metric::Violations,
            "throughput" | "rps" => Metric::Throughput,
            _ => return None,
        })
    }

    fn is_latency(self) -> bool {
        matches!(self, Metric::P50 | Metric::P90 | Metric::P99 | Metric::P999 | Metric::Max | Metric::Mean)
    }

    /// The value in the threshold's unit (milliseconds for latencies).
    fn value(self, r: &TargetReport) -> f64 {
        let l = &r.latency_ms;
        match self {
            Metric::P50 => l.p50,
            Metric::P90 => l.p90,
            Metric::P99 => l.p99,
            Metric::P999 => l.p99_9,
            Metric::Max => l.max,
            Metric::Mean => l.mean,
            Metric::Errors => r.errors as f64,
            Metric::Violations => r.violations as f64,
            Metric::Throughput => r.throughput,
        }
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Gt,
    Ge,
    Lt,
    Le,
}

/// One `--fail-if` condition: the run fails when it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    text: String,
    metric: Metric,
    cmp: Cmp,
    /// Milliseconds for latencies, a count or a rate otherwise.
    limit: f64,
}

/// A threshold checked against one target.
#[derive(Debug, Clone, Serialize)]
pub struct ThresholdResult {
    /// The condition as given.
    pub condition: String,
    /// The socket it was checked on.
    pub socket: String,
    /// The measured value (milliseconds for latencies).
    pub value: f64,
    /// The unit of `value` and of the limit: `ms` for latencies, empty for
    /// counts and rates.
    pub unit: &'static str,
    /// True when the condition holds (the run fails).
    pub crossed: bool,
}

impl std::str::FromStr for Threshold {
    type Err = String;

    /// Parses `METRIC OP VALUE` with OP one of `>`, `>=`, `<`, `<=`.
    fn from_str(s: &str) -> Result<Self, String> {
        let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let at = text
            .find(['>', '<'])
            .ok_or_else(|| format!("{s:?} has no comparison; write it like 'p99>5ms' or 'errors>0'"))?;
        let (name, rest) = text.split_at(at);
        let (cmp, value) = if let Some(v) = rest.strip_prefix(">=") {
            (Cmp::Ge, v)
        } else if let Some(v) = rest.strip_prefix("<=") {
            (Cmp::Le, v)
        } else if let Some(v) = rest.strip_prefix('>') {
            (Cmp::Gt, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Cmp::Lt, v)
        } else {
            return Err(format!("{s:?}: unknown comparison"));
        };
        let lower = name.to_ascii_lowercase();
        let metric =
            Metric::parse(&lower).ok_or_else(|| format!("{s:?}: unknown metric {name:?} (known: {METRICS})"))?;
        let limit = if metric.is_latency() {
            let d = humantime::parse_duration(value).map_err(|_| {
                format!("{s:?}: {value:?} is not a duration; latencies need a unit, e.g. 5ms, 800us, 1s")
            })?;
            d.as_secs_f64() * 1e3
        } else {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{s:?}: {value:?} is not a non-negative number"))?
        };
        Ok(Threshold { text, metric, cmp, limit })
    }
}

impl Threshold {
    /// Checks the condition on `r`.
    pub fn check(&self, r: &TargetReport) -> ThresholdResult {
        let value = self.metric.value(r);
        let crossed = match self.cmp {
            Cmp::Gt => value > self.limit,
            Cmp::Ge => value >= self.limit,
            Cmp::Lt => value < self.limit,
            Cmp::Le => value <= self.limit,
        };
        let unit = if self.metric.is_latency() { "ms" } else { "" };
        ThresholdResult { condition: self.text.clone(), socket: r.socket.clone(), value, unit, crossed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Tally;

    fn report(p99_ms: u64, errors: u64) -> TargetReport {
        let mut t = Tally::new().unwrap();
        for _ in 0..100 {
            t.record(p99_ms * 1_000_000);
        }
        for _ in 0..errors {
            t.error("Unavailable".into(), "down".into());
        }
        t.report(std::path::Path::new("/p.sock"), (1, 1))
    }

    #[test]
    fn latency_thresholds_take_units() {
        let t: Threshold = "p99>5ms".parse().unwrap();
        assert!(t.check(&report(6, 0)).crossed);
        assert!(!t.check(&report(4, 0)).crossed);
        let us: Threshold = "p99 >= 800us".parse().unwrap();
        let r = us.check(&report(1, 0));
        assert!(r.crossed);
        // Latencies are reported in milliseconds whatever unit the limit used.
        assert_eq!(r.unit, "ms");
        assert!((r.value - 1.0).abs() < 0.01, "{}", r.value);
        assert!("p99>5".parse::<Threshold>().unwrap_err().contains("need a unit"));
    }

    #[test]
    fn count_thresholds() {
        let t: Threshold = "errors>0".parse().unwrap();
        assert!(t.check(&report(1, 1)).crossed);
        assert!(!t.check(&report(1, 0)).crossed);
        assert_eq!(t.check(&report(1, 0)).unit, "");
        let e = "latency>1ms".parse::<Threshold>().unwrap_err();
        assert!(e.contains("unknown metric") && e.contains("p99"), "{e}");
        assert!("errors".parse::<Threshold>().unwrap_err().contains("no comparison"));
    }
}
