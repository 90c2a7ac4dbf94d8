//! The load itself: a pool of kubelet-like requests built from the plugin's
//! device list, and the workers that send them closed-loop or on an
//! open-loop schedule, timing each from its intended send time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tonic::transport::Channel;

use super::{BenchConfig, Limit, Op, Prepared, Progress, Tally};
use crate::contract;
use crate::error::Result;
use crate::model::Device;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::deviceplugin::v1beta1::device_plugin_client::DevicePluginClient;
use crate::transport::codec::Sized;

/// Distinct requests kept ready; calls cycle through them.
const POOL_SIZE: usize = 64;

/// Ready-made requests for one operation.
#[derive(Debug)]
pub(crate) enum Pool {
    /// Device-ID groups (Allocate, PreStartContainer).
    Ids(Vec<Vec<String>>),
    /// GetPreferredAllocation container requests.
    Preferred(Vec<dp::ContainerPreferredAllocationRequest>),
    /// Requests without devices (options, list).
    Empty,
}

impl Pool {
    /// Builds up to [`POOL_SIZE`] requests from the healthy IDs, walking
    /// through the list so consecutive requests name different devices.
    pub(crate) fn build(op: Op, healthy: &[String], per_request: usize) -> Pool {
        let k = per_request.max(1).min(healthy.len().max(1));
        let groups = |n: usize| -> Vec<Vec<String>> {
            (0..n)
                .map(|i| (0..k).filter_map(|j| healthy.get((i * k + j) % healthy.len().max(1)).cloned()).collect())
                .collect()
        };
        match op {
            Op::Allocate | Op::Prestart => Pool::Ids(groups(POOL_SIZE.min(healthy.len().max(1)))),
            Op::Preferred => {
                let n = POOL_SIZE.min(healthy.len().max(1));
                Pool::Preferred(
                    (0..n)
                        .map(|i| dp::ContainerPreferredAllocationRequest {
                            available_device_i_ds: healthy.to_vec(),
                            // As the kubelet does when a container already holds
                            // some devices: they must be in the answer.
                            must_include_device_i_ds: if k > 1 {
                                healthy.get(i % healthy.len().max(1)).cloned().into_iter().collect()
                            } else {
                                Vec::new()
                            },
                            allocation_size: i32::try_from(k).unwrap_or(i32::MAX),
                        })
                        .collect(),
                )
            }
            Op::Options | Op::List => Pool::Empty,
        }
    }
}

/// One phase shared by the workers: the schedule and the limits.
struct Schedule {
    next: AtomicU64,
    start: Instant,
    deadline: Option<Instant>,
    total: Option<u64>,
    rate: Option<f64>,
}

impl Schedule {
    /// The next request's number and intended send time, or `None` when the
    /// phase is over.
    fn take(&self) -> Option<(u64, Option<Instant>)> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if self.total.is_some_and(|t| i >= t) {
            return None;
        }
        let intended = match self.rate {
            Some(r) => Some(self.start.checked_add(Duration::try_from_secs_f64(i as f64 / r).ok()?)?),
            None => None,
        };
        let when = intended.unwrap_or_else(Instant::now);
        if self.deadline.is_some_and(|d| when >= d) {
            return None;
        }
        Some((i, intended))
    }
}

/// What one worker saw.
struct WorkerTally {
    tally: Tally,
    first_send: Option<Instant>,
    last_send: Option<Instant>,
}

/// Runs one phase against `t` until `limit`; returns what it measured.
pub(crate) async fn phase(t: &Prepared, cfg: &BenchConfig, limit: Limit, progress: &Arc<Progress>) -> Result<Tally> {
    let start = Instant::now();
    let sched = Arc::new(Schedule {
        next: AtomicU64::new(0),
        start,
        deadline: match limit {
            Limit::Duration(d) => start.checked_add(d),
            Limit::Total(_) => None,
        },
        total: match limit {
            Limit::Total(n) => Some(n),
            Limit::Duration(_) => None,
        },
        rate: cfg.rate.filter(|r| *r > 0.0 && r.is_finite()),
    });
    let cpu0 = super::cpu_time();
    let empty = Tally::new()?;
    let mut workers = Vec::with_capacity(cfg.concurrency);
    for w in 0..cfg.concurrency.max(1) {
        let k = w % t.clients.len().max(1);
        let conn = Conn {
            client: t.clients[k].clone(),
            channel: t.channels.get(k).or(t.channels.first()).cloned(),
            max_recv: t.max_recv,
        };
        let pool = Arc::clone(&t.pool);
        let sched = Arc::clone(&sched);
        let progress = Arc::clone(progress);
        let op = cfg.op;
        let timeout = t.call_timeout;
        workers.push(tokio::spawn(worker(conn, op, pool, sched, progress, timeout, empty.clone())));
    }
    let mut tally = empty;
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    for w in workers {
        let got = w.await.map_err(|e| crate::Error::io("bench worker", std::io::Error::other(e)))?;
        first = match (first, got.first_send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        last = match (last, got.last_send) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        tally.merge(got.tally);
    }
    tally.elapsed = start.elapsed();
    tally.cpu = super::cpu_time().saturating_sub(cpu0);
    tally.send_span = match (first, last) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    };
    Ok(tally)
}

/// One worker's connection: the generated client, and the channel under it
/// for ListAndWatch.
struct Conn {
    client: DevicePluginClient<Channel>,
    channel: Option<Channel>,
    max_recv: usize,
}

async fn worker(
    mut conn: Conn,
    op: Op,
    pool: Arc<Pool>,
    sched: Arc<Schedule>,
    progress: Arc<Progress>,
    timeout: Duration,
    empty: Tally,
) -> WorkerTally {
    let mut out = WorkerTally { tally: empty, first_send: None, last_send: None };
    while !progress.stopped()
        && let Some((i, intended)) = sched.take()
    {
        if let Some(at) = intended {
            tokio::time::sleep_until(at.into()).await;
        }
        let sent = Instant::now();
        out.first_send.get_or_insert(sent);
        out.last_send = Some(sent);
        out.tally.sent += 1;
        progress.sent.fetch_add(1, Ordering::Relaxed);
        let outcome = tokio::select! {
            o = tokio::time::timeout(timeout, call(&mut conn, op, &pool, i)) => o,
            // Stopped (Ctrl-C, SIGTERM): the call in flight is given up, not counted.
            () = progress.until_stopped() => break,
        };
        let done = Instant::now();
        // Open-loop: from when the request should have gone out, so time spent
        // waiting for a free worker behind a slow answer counts.
        let from = intended.unwrap_or(sent);
        match outcome {
            Ok(Ok(answer)) => {
                out.tally.ok += 1;
                progress.ok.fetch_add(1, Ordering::Relaxed);
                out.tally.record(u64::try_from(done.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX));
                // Checked after the clock stopped: the checks are the bench's work, not the plugin's.
                out.tally.violations(answer.violations());
            }
            Ok(Err(status)) => {
                progress.errors.fetch_add(1, Ordering::Relaxed);
                let code = if crate::rpc::is_deadline(&status) { tonic::Code::DeadlineExceeded } else { status.code() };
                out.tally.error(format!("{code:?}"), format!("{code:?}: {}", status.message()));
            }
            Err(_) => {
                progress.errors.fetch_add(1, Ordering::Relaxed);
                out.tally.error(
                    "DeadlineExceeded".into(),
                    format!("DeadlineExceeded: no answer within {}", humantime::format_duration(timeout)),
                );
            }
        }
    }
    out
}

/// An answer, kept until the clock has stopped, then checked.
enum Answer {
    /// Nothing to check.
    Unchecked,
    /// Allocate for one container.
    Allocate(dp::AllocateResponse),
    /// GetPreferredAllocation and the request it answers.
    Preferred(dp::ContainerPreferredAllocationRequest, dp::PreferredAllocationResponse),
    /// A first ListAndWatch message.
    List(Sized<dp::ListAndWatchResponse>),
}

impl Answer {
    /// The contract rules the answer broke.
    fn violations(self) -> Vec<contract::Violation> {
        match self {
            Answer::Unchecked => Vec::new(),
            Answer::Allocate(resp) => contract::check_allocate(1, &resp),
            Answer::Preferred(creq, resp) => contract::check_preferred_response(&creq, &resp),
            Answer::List(msg) => {
                let devices: Vec<Device> = msg.message.devices.into_iter().map(Device::from).collect();
                contract::check_snapshot(&devices, msg.encoded_len)
            }
        }
    }
}

/// Makes call number `i`; returns the answer to check.
async fn call(conn: &mut Conn, op: Op, pool: &Pool, i: u64) -> std::result::Result<Answer, tonic::Status> {
    let pick = |n: usize| usize::try_from(i).unwrap_or(0) % n.max(1);
    match (op, pool) {
        (Op::Allocate, Pool::Ids(groups)) => {
            let ids = groups.get(pick(groups.len())).cloned().unwrap_or_default();
            let req =
                dp::AllocateRequest { container_requests: vec![dp::ContainerAllocateRequest { devices_ids: ids }] };
            Ok(Answer::Allocate(conn.client.allocate(req).await?.into_inner()))
        }
        (Op::Prestart, Pool::Ids(groups)) => {
            let ids = groups.get(pick(groups.len())).cloned().unwrap_or_default();
            conn.client.pre_start_container(dp::PreStartContainerRequest { devices_ids: ids }).await?;
            Ok(Answer::Unchecked)
        }
        (Op::Preferred, Pool::Preferred(reqs)) => {
            let creq = reqs.get(pick(reqs.len())).cloned().unwrap_or_default();
            let req = dp::PreferredAllocationRequest { container_requests: vec![creq.clone()] };
            let resp = conn.client.get_preferred_allocation(req).await?.into_inner();
            Ok(Answer::Preferred(creq, resp))
        }
        (Op::Options, _) => {
            conn.client.get_device_plugin_options(dp::Empty {}).await?;
            Ok(Answer::Unchecked)
        }
        (Op::List, _) => {
            let channel = conn.channel.clone().ok_or_else(|| tonic::Status::internal("no connection"))?;
            let mut stream = crate::plugin_client::open_list_and_watch(channel, conn.max_recv).await?;
            match stream.next().await {
                Some(Ok(msg)) => Ok(Answer::List(msg)),
                Some(Err(status)) => Err(status),
                None => Err(tonic::Status::unknown("the plugin ended ListAndWatch without sending a device list")),
            }
        }
        _ => Err(tonic::Status::internal("no request of this kind was prepared")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("d{i}")).collect()
    }

    #[test]
    fn allocate_requests_name_distinct_healthy_devices() {
        let Pool::Ids(groups) = Pool::build(Op::Allocate, &ids(5), 2) else { panic!("ids") };
        assert_eq!(groups.len(), 5);
        assert_eq!(groups[0], ["d0", "d1"]);
        assert_eq!(groups[2], ["d4", "d0"]);
        assert!(groups.iter().all(|g| g[0] != g[1]));
    }

    #[test]
    fn preferred_requests_are_ones_a_kubelet_could_send() {
        let healthy = ids(4);
        let Pool::Preferred(reqs) = Pool::build(Op::Preferred, &healthy, 2) else { panic!("preferred") };
        for r in &reqs {
            assert_eq!(r.allocation_size, 2);
            assert_eq!(r.available_device_i_ds, healthy);
            assert_eq!(r.must_include_device_i_ds.len(), 1);
            assert!(healthy.contains(&r.must_include_device_i_ds[0]));
        }
        let Pool::Preferred(single) = Pool::build(Op::Preferred, &healthy, 1) else { panic!("preferred") };
        assert!(single.iter().all(|r| r.must_include_device_i_ds.is_empty()));
    }

    #[test]
    fn open_loop_schedule_is_fixed_and_bounded() {
        let start = Instant::now();
        let s = Schedule { next: AtomicU64::new(0), start, deadline: None, total: Some(3), rate: Some(100.0) };
        let times: Vec<_> = std::iter::from_fn(|| s.take()).collect();
        assert_eq!(times.len(), 3);
        assert_eq!(times[2].1.map(|t| t.duration_since(start)), Some(Duration::from_millis(20)));
        let d = Schedule {
            next: AtomicU64::new(0),
            start,
            deadline: start.checked_add(Duration::from_millis(50)),
            total: None,
            rate: Some(100.0),
        };
        assert_eq!(std::iter::from_fn(|| d.take()).count(), 5);
    }
}
