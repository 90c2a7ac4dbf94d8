//! `dpctl podresources`: read a kubelet's PodResources API the way an
//! operator needs it (list, get, allocatable, free, watch), record a node as
//! a fixture (dump), and serve a fixture as a fake kubelet (serve).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::{Ctx, out_err};
use crate::duration::parse as parse_duration;
use crate::error::{Error, Result, exit};
use crate::output::{self, podresources as render};
use crate::podresources::client::{self, ApiChoice, PodResourcesClient, PodResourcesConfig};
use crate::podresources::fixture::{Fixture, FixtureFile, FixtureProvider, Reload, reload_loop};
use crate::podresources::free;
use crate::podresources::server::{PodResourcesService, RATE_BURST, RATE_QPS, ServedApis, ServerConfig};
use crate::podresources::view::{
    AllocatableReport, AllocatableView, Api, CPU_RESOURCE, Filter, GetView, ListView, PodView, SCHEMA_VERSION,
};
use crate::podresources::watch::{self, WatchConfig, WatchUpdate};
use crate::transport::{self, BindOptions, ClientConfig};

/// `dpctl podresources ...`
#[derive(Debug, Subcommand)]
pub enum PodResourcesCommand {
    /// Pods and what they hold: devices, NUMA nodes, CPUs, memory, DRA claims.
    ///
    /// One row per container and resource. Uses v1 List, or v1alpha1 List
    /// when the kubelet has no v1 (see --api).
    List(ListArgs),
    /// One pod (v1 Get; kubelet 1.27+, feature gate KubeletPodResourcesGet).
    Get(GetArgs),
    /// What the kubelet can hand out: healthy devices, CPUs, memory
    /// (GetAllocatableResources).
    Allocatable(OneShotArgs),
    /// Allocatable minus in use, per resource and NUMA node; CPUs and memory too.
    ///
    /// What to look at when a pod will not schedule on this node. Devices a
    /// pod holds that are no longer allocatable (unhealthy, plugin gone) are
    /// listed separately.
    Free(FreeArgs),
    /// Poll List and print pods and assignments that appeared, changed or
    /// went away.
    ///
    /// JSON Lines with -o json, one event per pod. Stops after --count
    /// events, at --timeout, or on Ctrl-C. Stays under the kubelet's rate limit (100 calls/s, burst 10) and backs
    /// off when the kubelet answers ResourceExhausted anyway.
    Watch(WatchArgs),
    /// Record this node's List and GetAllocatableResources as a fixture file
    /// for `serve --data` (always JSON).
    Dump(OneShotArgs),
    /// Be a kubelet's PodResources endpoint, answering from a JSON fixture.
    ///
    /// The file is reloaded when it changes. Its format is what `dump`
    /// writes: {"pod_resources": [pods as `list -o json` prints them],
    /// "allocatable": {"devices": [...], "cpu_ids": [...], "memory": [...]}},
    /// snake_case proto field names, every key optional, unknown keys
    /// rejected. The protobuf JSON mapping loads too (topology.nodes[].ID,
    /// lowerCamelCase keys, 64-bit numbers as strings), so grpcurl output
    /// and other tools' fixtures work unchanged.
    Serve(ServeArgs),
}

/// The PodResources API version to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApiArg {
    /// v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20).
    Auto,
    /// Only v1.
    V1,
    /// Only v1alpha1 (List only: devices without topology).
    V1alpha1,
}

/// An API version a fake kubelet serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApiName {
    /// `v1.PodResourcesLister`.
    V1,
    /// `v1alpha1.PodResourcesLister`.
    V1alpha1,
}

/// Which kubelet, and how to talk to it.
#[derive(Debug, Args, Clone)]
pub struct Conn {
    /// The kubelet's PodResources socket.
    #[arg(long, value_name = "PATH", env = crate::paths::ENV_PODRESOURCES_SOCKET,
          default_value = crate::paths::DEFAULT_PODRESOURCES_SOCKET)]
    pub socket: PathBuf,
    /// API version.
    #[arg(long, value_enum, default_value_t = ApiArg::Auto)]
    pub api: ApiArg,
    /// Limit for connecting to the socket.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub connect_timeout: Duration,
    /// Largest answer accepted, in bytes [default: 16 MiB, as upstream clients].
    #[arg(long, value_name = "BYTES", default_value_t = client::DEFAULT_MAX_RECV)]
    pub max_recv_bytes: usize,
}

impl Conn {
    fn config(&self, call_timeout: Duration) -> PodResourcesConfig {
        PodResourcesConfig {
            transport: ClientConfig {
                connect_timeout: self.connect_timeout,
                call_timeout,
                max_recv_bytes: self.max_recv_bytes,
            },
            api: match self.api {
                ApiArg::Auto => ApiChoice::Auto,
                ApiArg::V1 => ApiChoice::V1,
                ApiArg::V1alpha1 => ApiChoice::V1alpha1,
            },
            ..PodResourcesConfig::default()
        }
    }
}

/// Which pods.
#[derive(Debug, Args, Clone)]
pub struct FilterArgs {
    /// Only pods in this namespace [default: all].
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Only this resource: a device resource name (nvidia.com/gpu), `cpu`, a
    /// memory type (memory, hugepages-2Mi) or a DRA driver name.
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
}

impl FilterArgs {
    fn filter(&self) -> Filter {
        Filter { namespace: self.namespace.clone(), resource: self.resource.clone() }
    }
}

/// Arguments of `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Which kubelet.
    #[command(flatten)]
    pub conn: Conn,
    /// Which pods.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Deadline of each call.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

/// Arguments of `get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The pod name.
    pub pod: String,
    /// The pod's namespace.
    #[arg(short = 'n', long, value_name = "NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// Which kubelet.
    #[command(flatten)]
    pub conn: Conn,
    /// Deadline of each call.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

/// Arguments of a command that asks once.
#[derive(Debug, Args)]
pub struct OneShotArgs {
    /// Which kubelet.
    #[command(flatten)]
    pub conn: Conn,
    /// Deadline of each call.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

/// Arguments of `free`.
#[derive(Debug, Args)]
pub struct FreeArgs {
    /// Which kubelet.
    #[command(flatten)]
    pub conn: Conn,
    /// Only this resource (device resource name, `cpu`, or memory type).
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// Free CPUs per NUMA node, node n holding CPUs n*N..n*N+N-1 (as `kubelet-sim --cpus-per-numa N`
    /// lays them out); PodResources does not say which node a CPU is on.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus_per_numa: Option<u32>,
    /// Deadline of each call.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

/// Arguments of `watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Which kubelet.
    #[command(flatten)]
    pub conn: Conn,
    /// Which pods.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Time between polls (at least 10ms, the kubelet's rate).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub interval: Duration,
    /// Stop after this many events (pods present at the start count).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Stop after this long [default: until Ctrl-C].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Do not print the pods present at the start; only changes.
    #[arg(long)]
    pub no_initial: bool,
}

/// Arguments of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The socket to serve on (a real kubelet uses
    /// /var/lib/kubelet/pod-resources/kubelet.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// The fixture file [default: an empty node].
    #[arg(long, value_name = "FILE")]
    pub data: Option<PathBuf>,
    /// Answer Get like a kubelet with the feature gate KubeletPodResourcesGet off.
    #[arg(long)]
    pub disable_get: bool,
    /// Do not rate-limit (a kubelet allows 100 calls/s, burst 10).
    #[arg(long, conflicts_with_all = ["qps", "burst"])]
    pub no_rate_limit: bool,
    /// Rate limit: calls per second.
    #[arg(long, value_name = "N", default_value_t = RATE_QPS)]
    pub qps: f64,
    /// Rate limit: burst.
    #[arg(long, value_name = "N", default_value_t = RATE_BURST)]
    pub burst: u32,
    /// API versions to serve, comma-separated (`--apis v1alpha1` is a
    /// kubelet older than 1.20).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "API,...", default_values_t = [ApiName::V1, ApiName::V1alpha1])]
    pub apis: Vec<ApiName>,
    /// Take the socket over even if a live process serves it.
    #[arg(long)]
    pub force: bool,
}

/// Runs `dpctl podresources ...`.
pub async fn run(cmd: PodResourcesCommand, ctx: &mut Ctx<'_>) -> Result<u8> {
    match cmd {
        PodResourcesCommand::List(a) => list(a, ctx).await,
        PodResourcesCommand::Get(a) => get(a, ctx).await,
        PodResourcesCommand::Allocatable(a) => allocatable(a, ctx).await,
        PodResourcesCommand::Free(a) => free_cmd(a, ctx).await,
        PodResourcesCommand::Watch(a) => watch(a, ctx).await,
        PodResourcesCommand::Dump(a) => dump(a, ctx).await,
        PodResourcesCommand::Serve(a) => serve(a, ctx).await,
    }
}

/// Renders into memory, then writes once: large tables reach stdout in a
/// few writes instead of one per line.
fn emit(ctx: &mut Ctx<'_>, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let mut buf = Vec::with_capacity(64 * 1024);
    f(&mut buf).map_err(out_err)?;
    ctx.term.out.write_all(&buf).map_err(out_err)
}

/// Narration after calls: the v1alpha1 fallback and rate-limit retries.
fn after_calls(client: &PodResourcesClient, ctx: &mut Ctx<'_>) -> Result<()> {
    if client.fell_back() {
        ctx.note(format!(
            "note: {} does not serve PodResources v1 (a kubelet older than 1.20?); using v1alpha1, which \
             reports devices only: no NUMA topology, CPUs, memory or DRA claims",
            client.path().display()
        ))?;
    }
    let n = client.rate_limited();
    if n > 0 {
        ctx.note(format!(
            "note: the kubelet rate-limited {n} call(s) (100 calls/s, burst 10, shared by every client on \
             the node); dpctl backed off and retried"
        ))?;
    }
    Ok(())
}

fn empty_reason(filter: &Filter) -> String {
    match (&filter.namespace, &filter.resource) {
        (None, None) => "no pods on this node: the kubelet reports none".into(),
        (Some(ns), None) => format!("no pods in namespace {ns} on this node"),
        (None, Some(r)) => format!("no pods on this node use {r}"),
        (Some(ns), Some(r)) => format!("no pods in namespace {ns} on this node use {r}"),
    }
}

async fn list(a: ListArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let client = PodResourcesClient::connect(&a.conn.socket, &a.conn.config(a.timeout)).await?;
    let listing = client.list().await?;
    after_calls(&client, ctx)?;
    let filter = a.filter.filter();
    let pods = filter.apply(listing.pods.into_iter().map(PodView::from).collect());
    if pods.is_empty() && !ctx.format.is_json() {
        ctx.note(empty_reason(&filter))?;
    }
    let view = ListView { schema_version: SCHEMA_VERSION, api_version: listing.api, pod_resources: pods };
    let format = ctx.format;
    emit(ctx, |w| render::list(w, format, &view))?;
    Ok(exit::OK)
}

async fn get(a: GetArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let client = PodResourcesClient::connect(&a.conn.socket, &a.conn.config(a.timeout)).await?;
    let pod = client.get(&a.pod, &a.namespace).await?;
    after_calls(&client, ctx)?;
    let view = GetView { schema_version: SCHEMA_VERSION, api_version: Api::V1, pod_resources: PodView::from(pod) };
    let format = ctx.format;
    emit(ctx, |w| render::get(w, format, &view))?;
    Ok(exit::OK)
}

fn explain_allocatable(a: &AllocatableView, ctx: &mut Ctx<'_>) -> Result<()> {
    if ctx.format.is_json() {
        return Ok(());
    }
    if a.devices.is_empty() && a.cpu_ids.is_empty() && a.memory.is_empty() {
        ctx.note(
            "the kubelet reports nothing allocatable: no device plugin has registered healthy devices, the \
             CPU manager policy is not static, and the memory manager policy is not Static",
        )?;
    } else if a.cpu_ids.is_empty() {
        ctx.note("no CPUs listed: the kubelet fills cpu_ids only with the static CPU manager policy")?;
    }
    Ok(())
}

async fn allocatable(a: OneShotArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let client = PodResourcesClient::connect(&a.conn.socket, &a.conn.config(a.timeout)).await?;
    let alloc = client.allocatable().await?;
    after_calls(&client, ctx)?;
    let report = AllocatableReport { schema_version: SCHEMA_VERSION, allocatable: AllocatableView::from(&alloc) };
    explain_allocatable(&report.allocatable, ctx)?;
    let format = ctx.format;
    emit(ctx, |w| render::allocatable(w, format, &report))?;
    Ok(exit::OK)
}

async fn free_cmd(a: FreeArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let mut config = a.conn.config(a.timeout);
    if config.api == ApiChoice::Auto {
        // free needs GetAllocatableResources, which only v1 has.
        config.api = ApiChoice::V1;
    }
    let client = PodResourcesClient::connect(&a.conn.socket, &config).await?;
    let alloc = AllocatableView::from(&client.allocatable().await?);
    let listing = client.list().await?;
    after_calls(&client, ctx)?;
    let pods: Vec<PodView> = listing.pods.into_iter().map(PodView::from).collect();
    let mut report = free::free(&alloc, &pods);
    if let Some(per) = a.cpus_per_numa {
        report.cpus.split_by_numa(per as usize);
    }
    if let Some(r) = &a.resource {
        report.devices.retain(|d| &d.resource_name == r);
        report.memory.retain(|m| &m.memory_type == r);
        report.held_not_allocatable.retain(|h| &h.resource_name == r);
        if r != CPU_RESOURCE {
            report.cpus = free::CpuFree::default();
        }
    }
    explain_allocatable(&alloc, ctx)?;
    let format = ctx.format;
    emit(ctx, |w| render::free(w, format, &report))?;
    Ok(exit::OK)
}

async fn watch(a: WatchArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    watch::check_interval(a.interval)?;
    let mut config = a.conn.config(Duration::from_secs(10));
    config.rate_limit_retries = 0; // the watch loop backs off itself
    let client = PodResourcesClient::connect(&a.conn.socket, &config).await?;
    let watch_config = WatchConfig {
        interval: a.interval,
        count: a.count,
        deadline: a.timeout.map(crate::duration::deadline),
        no_initial: a.no_initial,
    };
    let report = |update: WatchUpdate<'_>| match update {
        WatchUpdate::FirstAnswer => after_calls(&client, ctx),
        WatchUpdate::Recovered => ctx.note("the kubelet answers again"),
        WatchUpdate::Event { time, poll, event } => {
            let time = output::timestamp(time);
            let line = render::WatchLine { time: &time, poll, event };
            render::watch_event(&mut ctx.term.out, ctx.format, &line).map_err(out_err)
        }
        WatchUpdate::BackingOff { why, wait } => {
            ctx.note(format!("{why}; backing off {}", crate::error::fmt_duration(wait)))
        }
    };
    watch::watch(&client, &a.filter.filter(), &watch_config, transport::shutdown_signal(), report).await?;
    Ok(exit::OK)
}

async fn dump(a: OneShotArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let client = PodResourcesClient::connect(&a.conn.socket, &a.conn.config(a.timeout)).await?;
    let listing = client.list().await?;
    let alloc = if listing.api == Api::V1 {
        match client.allocatable().await {
            Ok(alloc) => AllocatableView::from(&alloc),
            Err(e @ (Error::Unimplemented { .. } | Error::Rpc { code: tonic::Code::Unknown, .. })) => {
                ctx.note(format!("note: no allocatable resources recorded: {e}"))?;
                AllocatableView::default()
            }
            Err(e) => return Err(e),
        }
    } else {
        AllocatableView::default()
    };
    after_calls(&client, ctx)?;
    let file = FixtureFile { pod_resources: listing.pods.into_iter().map(PodView::from).collect(), allocatable: alloc };
    emit(ctx, |w| output::write_json(w, &file))?;
    Ok(exit::OK)
}

async fn serve(a: ServeArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let qps_ok = a.qps > 0.0 && a.qps.is_finite();
    if !a.no_rate_limit && !qps_ok {
        return Err(Error::invalid("--qps", "must be a positive number (or use --no-rate-limit)"));
    }
    if !a.no_rate_limit && a.burst == 0 {
        return Err(Error::invalid("--burst", "must be at least 1 (or use --no-rate-limit)"));
    }
    let apis = ServedApis { v1: a.apis.contains(&ApiName::V1), v1alpha1: a.apis.contains(&ApiName::V1alpha1) };
    let fixture = match &a.data {
        Some(path) => Fixture::load_as(path, &format!("--data {}", path.display()))?,
        None => Fixture::default(),
    };
    let pods = fixture.pods.len();
    let provider = FixtureProvider::new(fixture);
    let handle = provider.handle();
    let rate_limit = (!a.no_rate_limit).then_some((a.qps, a.burst));
    let service = PodResourcesService::new(
        Arc::new(provider),
        ServerConfig { get_enabled: !a.disable_get, rate_limit, ..ServerConfig::default() },
    );
    let listener =
        transport::bind(&a.socket, &BindOptions { force: a.force, force_flag: "--force", ..BindOptions::default() })
            .await?;
    let banner = render::ServingView {
        event: "serving",
        socket: a.socket.display().to_string(),
        apis: [(apis.v1, "v1"), (apis.v1alpha1, "v1alpha1")]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| n)
            .collect(),
        pods,
        get_enabled: !a.disable_get,
        rate_limit_qps: rate_limit.map(|r| r.0),
        rate_limit_burst: rate_limit.map(|r| r.1),
    };
    // With -o json the ready line is data for scripts (stdout); otherwise it is narration.
    if ctx.format.is_json() {
        render::serving_json(&mut ctx.term.out, &banner).map_err(out_err)?;
    } else {
        ctx.note(render::serving_text(&banner))?;
    }
    let reload = async {
        let Some(path) = &a.data else { return std::future::pending::<Result<()>>().await };
        reload_loop(path, &handle, |r| match r {
            Reload::Reloaded { pods } => ctx.note(format!("reloaded {}: {pods} pod(s)", path.display())),
            Reload::Kept(e) => ctx.note(format!("warning: kept the previous data: {e}")),
        })
        .await
    };
    tokio::select! {
        r = transport::serve(service.router_for(apis), listener, transport::shutdown_signal()) => r?,
        r = reload => r?,
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    #[test]
    fn socket_defaults_to_the_kubelets() {
        let cli = Cli::try_parse_from(["dpctl", "podresources", "list"]).unwrap();
        let crate::cli::Command::Podresources(PodResourcesCommand::List(a)) = cli.command else { panic!() };
        if std::env::var_os(crate::paths::ENV_PODRESOURCES_SOCKET).is_none() {
            assert_eq!(a.conn.socket, PathBuf::from(crate::paths::DEFAULT_PODRESOURCES_SOCKET));
        }
        assert_eq!(a.conn.max_recv_bytes, 16 * 1024 * 1024);
    }

    #[test]
    fn serve_apis_parse() {
        let cli =
            Cli::try_parse_from(["dpctl", "podresources", "serve", "--socket", "/x", "--apis", "v1alpha1"]).unwrap();
        let crate::cli::Command::Podresources(PodResourcesCommand::Serve(a)) = cli.command else { panic!() };
        assert_eq!(a.apis, [ApiName::V1alpha1]);
    }
}
