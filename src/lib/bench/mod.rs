//! `dpctl bench`: loads a device plugin the way a busy node does and measures
//! it: throughput, latency percentiles from an HDR histogram, errors by gRPC
//! code, contract violations found in the answers, and the client's CPU.
//!
//! Every request is built from the plugin's own ListAndWatch list (healthy
//! devices, valid sizes, must-include IDs drawn from the available ones), so
//! each call is one a kubelet could make. With a rate the load is open-loop:
//! each request has an intended send time on a fixed schedule and its latency
//! is measured from that time, so a stalled plugin is charged for the requests
//! that queued behind the stall (no coordinated omission).

pub mod churn;
mod load;
pub mod session;
pub mod threshold;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tonic::transport::Channel;

use crate::error::{Error, Result};
use crate::plugin_client::PluginClient;
use crate::proto::deviceplugin::v1beta1::device_plugin_client::DevicePluginClient;
use crate::transport::{self, ClientConfig};

pub use churn::{ControlFlipper, HealthFlipper};
pub use threshold::{Threshold, ThresholdResult};

/// Which RPC to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Allocate, one container request of `devices_per_request` healthy IDs.
    Allocate,
    /// GetPreferredAllocation: every healthy device available, a size of
    /// `devices_per_request`, one must-include ID when the size is above 1.
    Preferred,
    /// GetDevicePluginOptions.
    Options,
    /// PreStartContainer for `devices_per_request` healthy IDs.
    Prestart,
    /// ListAndWatch opened, first message decoded, stream closed; or, with a
    /// [`HealthFlipper`], a health change until its message is decoded.
    List,
}

impl Op {
    /// The RPC's name as the protocol spells it.
    pub fn rpc(self) -> &'static str {
        match self {
            Op::Allocate => "Allocate",
            Op::Preferred => "GetPreferredAllocation",
            Op::Options => "GetDevicePluginOptions",
            Op::Prestart => "PreStartContainer",
            Op::List => "ListAndWatch",
        }
    }
}

/// When a run (or a warm-up) ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// After this long.
    Duration(Duration),
    /// After this many requests were sent.
    Total(u64),
}

/// How to load the plugin.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The RPC.
    pub op: Op,
    /// Requests in flight at most (workers).
    pub concurrency: usize,
    /// HTTP/2 connections the workers share round-robin.
    pub connections: usize,
    /// When the measured run ends.
    pub limit: Limit,
    /// Open-loop arrival rate in requests per second; `None` is closed-loop
    /// (each worker sends its next request when the previous one answered).
    pub rate: Option<f64>,
    /// Load run before measuring, not counted.
    pub warmup: Duration,
    /// Devices per request (Allocate, PreStartContainer, preferred size).
    pub devices_per_request: usize,
    /// Dial timeout, per-call deadline and receive limit.
    pub client: ClientConfig,
}

/// Counters the caller may poll while a run goes on (for a progress display).
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests sent in the current phase.
    pub sent: AtomicU64,
    /// Answers received without error.
    pub ok: AtomicU64,
    /// Calls that failed.
    pub errors: AtomicU64,
    /// 1 while measuring, 0 during warm-up.
    pub measuring: AtomicU64,
    /// Set by the caller (Ctrl-C, SIGTERM): no new request is sent, and the
    /// run ends with what it measured so far.
    pub stop: std::sync::atomic::AtomicBool,
    /// Wakes the calls in flight when the run is stopped.
    stopping: tokio::sync::Notify,
}

impl Progress {
    /// True once the caller asked the run to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Stops the run at once: no new request is sent, a call in flight is
    /// given up (a plugin that never answers must not hold Ctrl-C for the
    /// call timeout), and the report has what was measured until then.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.stopping.notify_waiters();
    }

    /// Completes once [`Progress::request_stop`] was called.
    pub async fn until_stopped(&self) {
        loop {
            // Registered before the flag is read: a stop in between still wakes it.
            let woken = self.stopping.notified();
            if self.stopped() {
                return;
            }
            woken.await;
        }
    }
}

impl Progress {
    fn reset(&self, measuring: bool) {
        self.sent.store(0, Ordering::Relaxed);
        self.ok.store(0, Ordering::Relaxed);
        self.errors.store(0, Ordering::Relaxed);
        self.measuring.store(u64::from(measuring), Ordering::Relaxed);
    }
}

/// A plugin connected and ready to be loaded: its connections and the pool
/// of requests built from its device list.
pub struct Prepared {
    socket: PathBuf,
    clients: Vec<DevicePluginClient<Channel>>,
    /// The same connections, for ListAndWatch (decoded by `open_list_and_watch`).
    channels: Vec<Channel>,
    max_recv: usize,
    pool: Arc<load::Pool>,
    healthy_ids: Vec<String>,
    devices: usize,
    healthy: usize,
    call_timeout: Duration,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("socket", &self.socket).field("healthy", &self.healthy).finish_non_exhaustive()
    }
}

impl Prepared {
    /// Connects to the plugin at `socket`, reads its device list and builds
    /// the requests `cfg` asks for. Fails when the plugin has too few healthy
    /// devices for `devices_per_request`.
    pub async fn connect(socket: &Path, cfg: &BenchConfig) -> Result<Self> {
        let first = PluginClient::connect(socket, &cfg.client).await?;
        let snap = first.list_once(cfg.client.call_timeout).await?;
        let healthy: Vec<String> = snap.devices.iter().filter(|d| d.is_healthy()).map(|d| d.id.clone()).collect();
        let needs_devices = matches!(cfg.op, Op::Allocate | Op::Preferred | Op::Prestart);
        if needs_devices && healthy.len() < cfg.devices_per_request.max(1) {
            return Err(Error::invalid(
                "--devices-per-request",
                format!(
                    "{} asks for {} per request but the plugin at {} lists {} \
                     (hint: lower --devices-per-request)",
                    cfg.op.rpc(),
                    crate::text::count(cfg.devices_per_request, "device", "devices"),
                    socket.display(),
                    crate::text::count(healthy.len(), "healthy device", "healthy devices")
                ),
            ));
        }
        let pool = load::Pool::build(cfg.op, &healthy, cfg.devices_per_request);
        let mut clients = Vec::with_capacity(cfg.connections.max(1));
        let mut channels = Vec::with_capacity(cfg.connections.max(1));
        let wanted = cfg.connections.max(1);
        for i in 0..wanted {
            // A server that closes a later connection during the handshake
            // after accepting earlier ones is most likely enforcing a cap on
            // connections (dpctl's own servers do).
            let ch = transport::connect(socket, cfg.client.connect_timeout).await.map_err(|e| match e {
                Error::Connect { path, reason } if i > 0 => Error::ConnectionClosedPastOthers {
                    path,
                    index: i + 1,
                    wanted,
                    open: i,
                    dpctl_cap: transport::MAX_CONNECTIONS,
                    reason,
                },
                e => e,
            })?;
            clients.push(DevicePluginClient::new(ch.clone()).max_decoding_message_size(cfg.client.max_recv_bytes));
            channels.push(ch);
        }
        Ok(Prepared {
            socket: socket.to_path_buf(),
            clients,
            channels,
            max_recv: cfg.client.max_recv_bytes,
            pool: Arc::new(pool),
            devices: snap.devices.len(),
            healthy: healthy.len(),
            healthy_ids: healthy,
            call_timeout: cfg.client.call_timeout,
        })
    }

    /// The socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Devices and healthy devices in the plugin's first list.
    pub fn device_counts(&self) -> (usize, usize) {
        (self.devices, self.healthy)
    }
}

/// What one target's measured phases add up to.
#[derive(Debug, Clone)]
pub struct Tally {
    hist: Histogram<u64>,
    ok: u64,
    sent: u64,
    errors: BTreeMap<String, u64>,
    violations: BTreeMap<&'static str, (u64, String)>,
    elapsed: Duration,
    send_span: Duration,
    cpu: Duration,
    first_error: Option<String>,
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Result<Self> {
        Ok(Tally {
            hist: new_histogram()?,
            ok: 0,
            sent: 0,
            errors: BTreeMap::new(),
            violations: BTreeMap::new(),
            elapsed: Duration::ZERO,
            send_span: Duration::ZERO,
            cpu: Duration::ZERO,
            first_error: None,
        })
    }
}

/// The histogram every measurement records into: nanoseconds, 3 significant
/// digits, up to an hour (longer values are clamped).
fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).map_err(|e| Error::invalid("latency histogram", format!("{e:?}")))
}

/// The largest latency the histogram holds; longer ones are recorded as this.
pub(crate) const HIST_MAX_NS: u64 = 3_600_000_000_000;

impl Tally {
    /// Adds one latency in nanoseconds (clamped to an hour).
    pub(crate) fn record(&mut self, ns: u64) {
        let _ = self.hist.record(ns.clamp(1, HIST_MAX_NS));
    }

    /// Counts one failed call under its gRPC code name.
    pub(crate) fn error(&mut self, code: String, message: String) {
        *self.errors.entry(code).or_insert(0) += 1;
        if self.first_error.is_none() {
            self.first_error = Some(message);
        }
    }

    /// Counts the contract rules one answer broke.
    pub(crate) fn violations(&mut self, found: Vec<crate::contract::Violation>) {
        for v in found {
            let e = self.violations.entry(v.rule).or_insert((0, v.evidence));
            e.0 += 1;
        }
    }

    fn merge(&mut self, other: Tally) {
        let _ = self.hist.add(&other.hist);
        self.ok += other.ok;
        self.sent += other.sent;
        for (k, n) in other.errors {
            *self.errors.entry(k).or_insert(0) += n;
        }
        for (k, (n, ev)) in other.violations {
            self.violations.entry(k).or_insert((0, ev)).0 += n;
        }
        self.elapsed += other.elapsed;
        self.send_span += other.send_span;
        self.cpu += other.cpu;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// The report for `socket`.
    pub fn report(&self, socket: &Path, devices: (usize, usize)) -> TargetReport {
        let secs = self.elapsed.as_secs_f64();
        let errors: u64 = self.errors.values().sum();
        let calls = self.ok + errors;
        let per_sec = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        let q = |p: f64| ns_to_ms(if self.hist.is_empty() { 0 } else { self.hist.value_at_quantile(p) });
        TargetReport {
            socket: socket.display().to_string(),
            devices: devices.0,
            healthy: devices.1,
            sent: self.sent,
            calls,
            ok: self.ok,
            errors,
            errors_by_code: self.errors.clone(),
            first_error: self.first_error.clone(),
            violations: self.violations.values().map(|v| v.0).sum(),
            violations_by_rule: self
                .violations
                .iter()
                .map(|(k, (n, ev))| ((*k).to_string(), RuleCount { count: *n, example: ev.clone() }))
                .collect(),
            elapsed_ms: secs * 1000.0,
            throughput: per_sec(self.ok, secs),
            send_rate: per_sec(self.sent.saturating_sub(1), self.send_span.as_secs_f64()),
            latency_ms: Latency {
                p50: q(0.50),
                p90: q(0.90),
                p99: q(0.99),
                p99_9: q(0.999),
                max: ns_to_ms(self.hist.max()),
                mean: if self.hist.is_empty() { 0.0 } else { self.hist.mean() / 1e6 },
            },
            client_cpu_ms: self.cpu.as_secs_f64() * 1000.0,
            cpu_per_call_ms: if calls > 0 { self.cpu.as_secs_f64() * 1000.0 / calls as f64 } else { 0.0 },
        }
    }
}

fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// Slowest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// How often one contract rule was broken, with the first evidence.
#[derive(Debug, Clone, Serialize)]
pub struct RuleCount {
    /// Answers that broke it.
    pub count: u64,
    /// What the first one did.
    pub example: String,
}

/// The results for one plugin.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// The plugin socket.
    pub socket: String,
    /// Devices in its first ListAndWatch message.
    pub devices: usize,
    /// Healthy devices in it.
    pub healthy: usize,
    /// Requests sent while measuring.
    pub sent: u64,
    /// Calls that completed (answered or failed) while measuring.
    pub calls: u64,
    /// Calls answered without error.
    pub ok: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Failed calls by gRPC code (`DeadlineExceeded` for a passed deadline).
    pub errors_by_code: BTreeMap<String, u64>,
    /// The first error's message.
    pub first_error: Option<String>,
    /// Answers that broke a contract rule.
    pub violations: u64,
    /// Broken rules, with counts and the first evidence.
    pub violations_by_rule: BTreeMap<String, RuleCount>,
    /// Measured time in milliseconds.
    pub elapsed_ms: f64,
    /// Answers without error per second.
    pub throughput: f64,
    /// Requests sent per second, from the first send to the last.
    pub send_rate: f64,
    /// Latency percentiles (from the intended send time under `--rate`).
    pub latency_ms: Latency,
    /// CPU time (user + system) this process used while measuring.
    pub client_cpu_ms: f64,
    /// Client CPU per call in milliseconds.
    pub cpu_per_call_ms: f64,
}

/// Second target relative to the first (`--compare`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Ratio {
    /// Throughput of the second / the first (`null` when the first had no successful call).
    pub throughput: Option<f64>,
    /// p50 of the second / the first (`null` when either had no successful call).
    pub p50: Option<f64>,
    /// p99 of the second / the first (`null` when either had no successful call).
    pub p99: Option<f64>,
}

/// Everything a run found.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The RPC loaded.
    pub op: Op,
    /// `churn` for `list` with health changes, else `calls`.
    pub mode: &'static str,
    /// Requests in flight at most.
    pub concurrency: usize,
    /// Connections per target.
    pub connections: usize,
    /// Asked arrival rate (open-loop), if any.
    pub rate: Option<f64>,
    /// Measured duration asked for, in milliseconds.
    pub duration_ms: Option<f64>,
    /// Measured requests asked for.
    pub total: Option<u64>,
    /// Warm-up in milliseconds.
    pub warmup_ms: f64,
    /// Devices per request.
    pub devices_per_request: usize,
    /// One report per plugin (two with `--compare`).
    pub targets: Vec<TargetReport>,
    /// The second plugin relative to the first.
    pub ratio: Option<Ratio>,
    /// Thresholds and whether each was crossed.
    pub thresholds: Vec<ThresholdResult>,
    /// True when no threshold was crossed (and the run was not interrupted).
    pub passed: bool,
    /// True when Ctrl-C or SIGTERM ended the run early: the figures are
    /// what was measured until then.
    pub interrupted: bool,
}

/// Loads one or two prepared plugins as `cfg` says. With two, the measured
/// run is split into four alternating slices (A, B, A, B) so both see the
/// same machine conditions.
pub async fn run(targets: &[Prepared], cfg: &BenchConfig, progress: &Arc<Progress>) -> Result<Vec<TargetReport>> {
    let slices: u64 = if targets.len() > 1 { 2 } else { 1 };
    if !cfg.warmup.is_zero() {
        for t in targets {
            if progress.stopped() {
                break;
            }
            progress.reset(false);
            load::phase(t, cfg, Limit::Duration(cfg.warmup), progress).await?;
        }
    }
    let slice_limit = match cfg.limit {
        Limit::Duration(d) => Limit::Duration(d / u32::try_from(slices).unwrap_or(1)),
        Limit::Total(n) => Limit::Total(n.div_ceil(slices)),
    };
    let mut tallies: Vec<Tally> = targets.iter().map(|_| Tally::new()).collect::<Result<_>>()?;
    progress.reset(true);
    for _ in 0..slices {
        for (t, tally) in targets.iter().zip(tallies.iter_mut()) {
            let got = load::phase(t, cfg, slice_limit, progress).await?;
            tally.merge(got);
        }
    }
    Ok(targets.iter().zip(tallies).map(|(t, tally)| tally.report(&t.socket, (t.devices, t.healthy))).collect())
}

/// The ratio of the second report to the first.
pub fn ratio(a: &TargetReport, b: &TargetReport) -> Ratio {
    let both = a.ok > 0 && b.ok > 0;
    let div = |x: f64, y: f64| (y > 0.0).then(|| x / y);
    Ratio {
        throughput: if a.ok > 0 { div(b.throughput, a.throughput) } else { None },
        p50: if both { div(b.latency_ms.p50, a.latency_ms.p50) } else { None },
        p99: if both { div(b.latency_ms.p99, a.latency_ms.p99) } else { None },
    }
}

/// User plus system CPU time this process has used (getrusage).
pub fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointed-to buffer,
    // which is valid and large enough; on failure it writes nothing and the
    // zeroed buffer is read.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_percentiles_come_from_the_histogram() {
        let mut t = Tally::new().unwrap();
        for ms in 1..=100u64 {
            t.record(ms * 1_000_000);
        }
        t.ok = 100;
        t.elapsed = Duration::from_secs(2);
        let r = t.report(Path::new("/x.sock"), (8, 8));
        assert!((r.latency_ms.p50 - 50.0).abs() < 0.1, "{:?}", r.latency_ms);
        assert!((r.latency_ms.p99 - 99.0).abs() < 0.1, "{:?}", r.latency_ms);
        assert!((r.latency_ms.max - 100.0).abs() < 0.1, "{:?}", r.latency_ms);
        assert!((r.throughput - 50.0).abs() < 1e-9);
    }

    /// dpctl's ListAndWatch reader (one-slice decode) gets every message
    /// whole with its size on the wire, and tonic's receive limit still
    /// refuses an oversize list before decoding (the kubelet's 4 MiB,
    /// docs/protocol.md: ListAndWatch message size).
    #[tokio::test]
    async fn list_and_watch_reader_decodes_whole_messages_and_keeps_the_limit() {
        use crate::mock_plugin::{MockConfig, MockPlugin, ResourceConfig};
        use crate::proto::deviceplugin::v1beta1 as dp;
        use futures_util::StreamExt;
        let dir = tempfile::Builder::new().prefix("dpr").tempdir_in("/tmp").unwrap();
        let mut r = ResourceConfig::new("example.com/gpu", 3000);
        r.numa_nodes = 2;
        let mut big = ResourceConfig::new("example.com/big", 1);
        big.faults.list_and_watch_oversize = true;
        let config = MockConfig {
            dir: Some(dir.path().to_path_buf()),
            register: false,
            control: false,
            resources: vec![r, big],
            ..MockConfig::default()
        };
        let handle = MockPlugin::start(config).await.unwrap();
        let wait = Duration::from_secs(10);
        let socket = handle.socket("example.com/gpu").unwrap();
        let ch = transport::connect(&socket, wait).await.unwrap();
        let mut s = crate::plugin_client::open_list_and_watch(ch, crate::limits::KUBELET_MAX_RECV).await.unwrap();
        let first = tokio::time::timeout(wait, s.next()).await.unwrap().unwrap().unwrap();
        let snap = handle.snapshot("example.com/gpu").unwrap();
        assert_eq!(first.encoded_len, snap.encoded_len());
        assert_eq!(first.message, snap.decode().unwrap());
        let id = first.message.devices[1234].id.clone();
        handle.set_health("example.com/gpu", std::slice::from_ref(&id), dp::UNHEALTHY).unwrap();
        let second = tokio::time::timeout(wait, s.next()).await.unwrap().unwrap().unwrap();
        assert_eq!(second.message.devices[1234].health, dp::UNHEALTHY);
        assert_eq!(second.encoded_len, first.encoded_len + 2, "\"Unhealthy\" is 2 bytes longer");
        assert_eq!(second.message, handle.snapshot("example.com/gpu").unwrap().decode().unwrap());

        let ch = transport::connect(&handle.socket("example.com/big").unwrap(), wait).await.unwrap();
        let mut s = crate::plugin_client::open_list_and_watch(ch, crate::limits::KUBELET_MAX_RECV).await.unwrap();
        let status = tokio::time::timeout(wait, s.next()).await.unwrap().unwrap().unwrap_err();
        assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
        assert!(status.message().contains("too large"), "{status:?}");
        handle.stop().await.unwrap();
    }

    #[test]
    fn cpu_time_advances() {
        let a = cpu_time();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_time() > a);
    }
}
