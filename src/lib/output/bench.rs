//! Rendering `dpctl bench` results: a table with one row per plugin, the
//! errors and contract violations under it, the `--compare` ratio and the
//! `--fail-if` verdicts; or the whole report as JSON.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use colored::Colorize;

use super::{Format, table, write_json, write_table};
use crate::bench::{BenchReport, Op, Progress};

/// Milliseconds with three decimals.
fn ms(v: f64) -> String {
    format!("{v:.3}ms")
}

/// The line that says what was measured.
fn title(r: &BenchReport) -> String {
    let what = if r.mode == "churn" {
        "health change -> ListAndWatch message decoded, one change at a time".to_string()
    } else if r.op == Op::List {
        "ListAndWatch open -> first message decoded".to_string()
    } else {
        format!("{} ({} per request)", r.op.rpc(), crate::text::count(r.devices_per_request, "device", "devices"))
    };
    let load = match r.rate {
        _ if r.mode == "churn" => String::new(),
        Some(rate) => {
            format!(
                "; open-loop {rate}/s, at most {} in flight over {}",
                r.concurrency,
                crate::text::count(r.connections, "connection", "connections")
            )
        }
        None => format!(
            "; closed-loop, {} in flight over {}",
            r.concurrency,
            crate::text::count(r.connections, "connection", "connections")
        ),
    };
    let limit = match (r.duration_ms, r.total) {
        (Some(d), _) => format!("{}s measured", d / 1000.0),
        (None, Some(n)) => format!("{n} requests measured"),
        (None, None) => String::new(),
    };
    let warm = if r.warmup_ms > 0.0 { format!(" after {}s warm-up", r.warmup_ms / 1000.0) } else { String::new() };
    format!("{what}{load}; {limit}{warm}")
}

/// Under the table, per target: the send rate asked for, errors by code
/// with the first one, contract violations, and the client's CPU time.
fn target_notes(w: &mut dyn Write, r: &BenchReport) -> io::Result<()> {
    for x in &r.targets {
        let who = if r.targets.len() > 1 { format!("{}: ", x.socket) } else { String::new() };
        if r.rate.is_some() {
            writeln!(w, "{who}sent {:.1}/s (asked {}/s)", x.send_rate, r.rate.unwrap_or(0.0))?;
        }
        if !x.errors_by_code.is_empty() {
            let by: Vec<String> = x.errors_by_code.iter().map(|(c, n)| format!("{c} {n}")).collect();
            writeln!(w, "{who}errors by code: {}", by.join(", "))?;
            if let Some(e) = &x.first_error {
                writeln!(w, "{who}first error: {e}")?;
            }
        }
        for (rule, c) in &x.violations_by_rule {
            writeln!(
                w,
                "{who}violation {rule}: {}, e.g. {}",
                crate::text::count(c.count, "answer", "answers"),
                c.example
            )?;
        }
        writeln!(w, "{who}client CPU {:.3}s over {:.3}s", x.client_cpu_ms / 1000.0, x.elapsed_ms / 1000.0)?;
    }
    Ok(())
}

/// Renders a report.
pub fn report(w: &mut dyn Write, format: Format, r: &BenchReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    writeln!(w, "{}", title(r))?;
    if r.interrupted {
        writeln!(w, "INTERRUPTED (Ctrl-C or SIGTERM): the figures below are what was measured until then")?;
    }
    let mut t = table([
        "PLUGIN",
        "SENT",
        "OK",
        "ERRORS",
        "VIOLATIONS",
        "OK/S",
        "P50",
        "P90",
        "P99",
        "P99.9",
        "MAX",
        "CPU/CALL",
    ]);
    for x in &r.targets {
        let l = &x.latency_ms;
        // No answer without error: no latency to show (0 would read as fast).
        let ms = |v: f64| if x.ok == 0 { "-".to_string() } else { ms(v) };
        t.add_row([
            x.socket.clone(),
            x.sent.to_string(),
            x.ok.to_string(),
            x.errors.to_string(),
            x.violations.to_string(),
            format!("{:.0}", x.throughput),
            ms(l.p50),
            ms(l.p90),
            ms(l.p99),
            ms(l.p99_9),
            ms(l.max),
            format!("{:.0}us", x.cpu_per_call_ms * 1000.0),
        ]);
    }
    write_table(w, &t)?;
    target_notes(w, r)?;
    if let (Some(ratio), [a, b]) = (&r.ratio, r.targets.as_slice()) {
        let none = [a, b].iter().filter(|x| x.ok == 0).map(|x| x.socket.as_str()).collect::<Vec<_>>().join(" and ");
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
        writeln!(
            w,
            "ratio {} / {}: throughput {}  p50 {}  p99 {}{}",
            b.socket,
            a.socket,
            f(ratio.throughput),
            f(ratio.p50),
            f(ratio.p99),
            if none.is_empty() { String::new() } else { format!(" (no successful call on {none})") }
        )?;
    }
    for th in &r.thresholds {
        let verdict = if th.crossed { "CROSSED".red().to_string() } else { "ok".green().to_string() };
        let unit = if th.unit.is_empty() { String::new() } else { format!(" {}", th.unit) };
        writeln!(w, "fail-if {}: {} (measured {:.3}{unit}) on {}", th.condition, verdict, th.value, th.socket)?;
    }
    Ok(())
}

/// What a running bench still has to do: time (a measured duration after
/// a warm-up) or requests (`--total`).
#[derive(Debug, Clone, Copy)]
enum Left {
    Time { warmup: Duration, run: Duration },
    Requests(u64),
}

/// The live line: phase, elapsed and remaining time (or requests),
/// counters, and the rate of answers without error over the last second
/// (`rate`; none until a second has been seen).
fn live_line(phase: &str, elapsed: Duration, left: Left, p: &Progress, rate: Option<f64>) -> String {
    let (sent, ok, errors) =
        (p.sent.load(Ordering::Relaxed), p.ok.load(Ordering::Relaxed), p.errors.load(Ordering::Relaxed));
    let left = match left {
        Left::Time { warmup, run } => format!("{}s left", (warmup + run).saturating_sub(elapsed).as_secs()),
        Left::Requests(total) if p.measuring.load(Ordering::Relaxed) == 1 => {
            format!("{} left", crate::text::count(total.saturating_sub(sent), "request", "requests"))
        }
        Left::Requests(_) => "warm-up".to_string(),
    };
    let rate = rate.map_or_else(|| "- ok/s".to_string(), |r| format!("{r:.0} ok/s"));
    format!("{phase}: {:.1}s elapsed, {left}  sent {sent}  ok {ok}  errors {errors}  {rate} now", elapsed.as_secs_f64())
}

/// Answers without error per second over about the last second, from
/// samples of the `ok` counter (which restarts from 0 when measuring starts).
#[derive(Debug, Default)]
struct Rate {
    samples: std::collections::VecDeque<(std::time::Instant, u64)>,
}

impl Rate {
    fn sample(&mut self, at: std::time::Instant, ok: u64) -> Option<f64> {
        if self.samples.back().is_some_and(|(_, last)| ok < *last) {
            self.samples.clear();
        }
        self.samples.push_back((at, ok));
        while self.samples.len() > 2 && at.duration_since(self.samples[1].0) >= Duration::from_secs(1) {
            self.samples.pop_front();
        }
        let (first_at, first_ok) = *self.samples.front()?;
        let span = at.duration_since(first_at).as_secs_f64();
        (span >= 0.5).then(|| (ok - first_ok) as f64 / span)
    }
}

/// A spinner on stderr showing a running bench's counters, redrawn ten times
/// a second by a thread of its own; cleared when dropped.
#[derive(Debug)]
pub struct Spinner {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    bar: indicatif::ProgressBar,
}

impl Spinner {
    /// Starts drawing `progress`; `limit` (a measured duration after a
    /// warm-up) gives the time remaining, else `total` the requests remaining.
    pub fn start(progress: Arc<Progress>, limit: Option<(Duration, Duration)>, total: u64) -> Spinner {
        let bar = super::progress_bar(true, None, "{spinner} {msg}").unwrap_or_else(indicatif::ProgressBar::hidden);
        let shown = bar.clone();
        let left = limit.map_or(Left::Requests(total), |(warmup, run)| Left::Time { warmup, run });
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut rate = Rate::default();
            while !stopped.load(Ordering::Relaxed) {
                let phase = if progress.measuring.load(Ordering::Relaxed) == 1 { "measuring" } else { "warming up" };
                let now = rate.sample(std::time::Instant::now(), progress.ok.load(Ordering::Relaxed));
                shown.set_message(live_line(phase, started.elapsed(), left, &progress, now));
                // Woken at once by the drop; otherwise ten frames a second.
                std::thread::park_timeout(Duration::from_millis(100));
            }
        });
        Spinner { stop, thread: Some(thread), bar }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_line_shows_elapsed_remaining_and_the_rate_now() {
        let p = Progress::default();
        p.sent.store(120, Ordering::Relaxed);
        p.ok.store(118, Ordering::Relaxed);
        p.errors.store(2, Ordering::Relaxed);
        p.measuring.store(1, Ordering::Relaxed);
        let time = Left::Time { warmup: Duration::from_secs(2), run: Duration::from_secs(10) };
        assert_eq!(
            live_line("measuring", Duration::from_millis(4500), time, &p, Some(52.4)),
            "measuring: 4.5s elapsed, 7s left  sent 120  ok 118  errors 2  52 ok/s now"
        );
        assert_eq!(
            live_line("measuring", Duration::from_millis(300), Left::Requests(121), &p, None),
            "measuring: 0.3s elapsed, 1 request left  sent 120  ok 118  errors 2  - ok/s now"
        );
        p.measuring.store(0, Ordering::Relaxed);
        assert!(live_line("warming up", Duration::ZERO, Left::Requests(9), &p, None).contains(", warm-up  sent"));
    }

    #[test]
    fn the_rate_is_over_the_last_second_and_restarts_with_the_counter() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut r = Rate::default();
        assert_eq!(r.sample(at(0), 0), None);
        assert_eq!(r.sample(at(100), 10), None, "under half a second: no rate yet");
        // 100/s for the first second, then 1000/s: the rate follows within a second.
        for ms in (200..=1000).step_by(100) {
            r.sample(at(ms), ms / 10);
        }
        for ms in (1100..=2000).step_by(100) {
            r.sample(at(ms), 100 + (ms - 1000));
        }
        let now = r.sample(at(2100), 1200).unwrap();
        assert!((900.0..=1100.0).contains(&now), "{now}");
        // Measuring starts: the counter restarts from 0, and so does the rate.
        assert_eq!(r.sample(at(2200), 0), None);
    }
}
