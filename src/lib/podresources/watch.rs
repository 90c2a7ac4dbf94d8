//! `podresources watch` as a library loop: poll List at an interval, turn
//! each answer into pod events ([`diff`]), and back off when the kubelet
//! rate-limits or briefly goes away. The caller renders what it is told
//! through a callback, so the loop is testable without a terminal or clap.

use std::future::Future;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::client::{self, PodResourcesClient};
use super::diff::{self, PodEvent};
use super::view::{Filter, PodView};
use crate::error::{Error, Result};

/// The shortest poll interval: the kubelet allows 100 calls per second.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// First wait after the kubelet rate-limited a poll.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// Longest wait between polls when backing off.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How a watch polls and when it stops.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// Time between polls, at least [`MIN_INTERVAL`].
    pub interval: Duration,
    /// Stop after this many events (pods present at the start count).
    pub count: Option<u64>,
    /// Stop at this instant.
    pub deadline: Option<Instant>,
    /// Report only changes, not the pods present at the first poll.
    pub no_initial: bool,
}

/// What the loop tells its caller.
#[derive(Debug)]
pub enum WatchUpdate<'a> {
    /// The first poll was answered (the caller can report the API in use).
    FirstAnswer,
    /// A poll was answered again after backing off.
    Recovered,
    /// One pod event, seen by poll number `poll` answered at `time`.
    Event {
        /// When the poll was answered.
        time: SystemTime,
        /// The poll number, 1 for the first.
        poll: u64,
        /// The event.
        event: &'a PodEvent,
    },
    /// A poll failed in a way worth retrying; the next one is `wait` away.
    BackingOff {
        /// Why, for the user.
        why: String,
        /// How long until the next poll.
        wait: Duration,
    },
}

/// Refuses an interval under [`MIN_INTERVAL`] (bad input, named `--interval`).
pub fn check_interval(interval: Duration) -> Result<()> {
    if interval < MIN_INTERVAL {
        return Err(Error::invalid("--interval", "must be at least 10ms (the kubelet allows 100 calls/s)"));
    }
    Ok(())
}

/// Errors after which a watch keeps trying (the kubelet restarts, is slow).
fn transient(e: &Error) -> bool {
    matches!(
        e,
        Error::NoSocket { .. }
            | Error::ConnectionRefused { .. }
            | Error::Connect { .. }
            | Error::ConnectTimeout { .. }
            | Error::DeadlineExceeded { .. }
            | Error::Rpc { code: tonic::Code::Unavailable | tonic::Code::Cancelled, .. }
    )
}

/// The error for a watch whose deadline came before the kubelet ever
/// answered: a timeout, not an empty watch (a socket that accepts and never
/// answers must not look like a node without pods).
fn unanswered(client: &PodResourcesClient, watch_for: Option<Duration>) -> Error {
    Error::Timeout {
        what: format!("a first answer to List from {}", client.path().display()),
        timeout: watch_for.unwrap_or_default(),
    }
}

/// The time left until `d`, in whole milliseconds (as `--timeout` was given).
fn millis_until(d: Instant) -> Duration {
    let left = d.saturating_duration_since(Instant::now());
    Duration::from_millis(u64::try_from((left.as_micros() + 500) / 1000).unwrap_or(u64::MAX))
}

/// The wait after another rate-limited or failed poll: doubling from 200ms
/// up to 30s, never shorter than the interval.
fn next_backoff(previous: Option<Duration>) -> Duration {
    previous.map_or(FIRST_BACKOFF, |b| b.saturating_mul(2).min(MAX_BACKOFF))
}

/// Polls `client` until `stop` resolves, the deadline passes, `count` events
/// were reported, or a poll fails for good (that error is returned). A
/// client built with `rate_limit_retries = 0` leaves backing off to this loop.
pub async fn watch(
    client: &PodResourcesClient,
    filter: &Filter,
    config: &WatchConfig,
    stop: impl Future<Output = ()>,
    mut report: impl FnMut(WatchUpdate<'_>) -> Result<()>,
) -> Result<()> {
    check_interval(config.interval)?;
    tokio::pin!(stop);
    let deadline = config.deadline;
    let until = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until);
    let watch_for = deadline.map(millis_until);
    let unanswered = || unanswered(client, watch_for);
    let mut prev: Option<Vec<PodView>> = None;
    let mut polls = 0u64;
    let mut emitted = 0u64;
    let mut backoff: Option<Duration> = None;
    let mut next_at = Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next_at) => {}
            () = &mut until => return if polls == 0 { Err(unanswered()) } else { Ok(()) },
            () = &mut stop => return Ok(()),
        }
        let started = Instant::now();
        let result = tokio::select! {
            r = client.list() => r,
            () = &mut until => return if polls == 0 { Err(unanswered()) } else { Ok(()) },
            () = &mut stop => return Ok(()),
        };
        match result {
            Ok(listing) => {
                polls += 1;
                if polls == 1 {
                    report(WatchUpdate::FirstAnswer)?;
                }
                if backoff.take().is_some() {
                    report(WatchUpdate::Recovered)?;
                }
                let pods = filter.apply(listing.pods.into_iter().map(PodView::from).collect());
                let events = match &prev {
                    None if config.no_initial => Vec::new(),
                    None => diff::present(&pods),
                    Some(p) => diff::diff(p, &pods),
                };
                let time = SystemTime::now();
                for event in &events {
                    report(WatchUpdate::Event { time, poll: polls, event })?;
                    emitted += 1;
                    if config.count.is_some_and(|c| emitted >= c) {
                        return Ok(());
                    }
                }
                prev = Some(pods);
                next_at = crate::duration::after(started, config.interval);
            }
            Err(e) if client::is_rate_limited(&e) || (prev.is_some() && transient(&e)) => {
                let b = next_backoff(backoff);
                backoff = Some(b);
                let wait = b.max(config.interval);
                let why = if client::is_rate_limited(&e) {
                    "the kubelet rate-limited the poll (ResourceExhausted: rejected by rate limit)".to_string()
                } else {
                    format!("poll failed: {e}")
                };
                report(WatchUpdate::BackingOff { why, wait })?;
                next_at = crate::duration::deadline(wait);
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_thirty_seconds() {
        let mut b = None;
        let mut seen = Vec::new();
        for _ in 0..10 {
            let next = next_backoff(b);
            seen.push(next.as_millis());
            b = Some(next);
        }
        assert_eq!(seen, [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    }

    #[test]
    fn only_passing_trouble_is_retried() {
        assert!(transient(&Error::NoSocket { path: "/x".into() }));
        assert!(!transient(&Error::invalid("--x", "bad")));
    }
}
