//! `dpctl podresources`: read a kubelet's PodResources API the way an
//! operator needs it (list, get, allocatable, free, watch), record a node as
//! a fixture (dump), and serve a fixture as a fake kubelet (serve).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::output::{Streams, podresources as render};
use crate::podresources::client::{self, ApiChoice, PodResourcesClient, PodResourcesConfig};
use crate::podresources::fake::FakeKubelet;
use crate::podresources::query::{self, Calls, FreeOptions};
use crate::podresources::server::{RATE_BURST, RATE_QPS, ServedApis};
use crate::podresources::view::Filter;
use crate::podresources::watch::{WatchConfig, WatchUpdate};
use crate::transport::ClientConfig;

/// `dpctl podresources ...`
#[derive(Debug, Subcommand)]
pub enum PodResourcesCommand {
    /// Pods and what they hold: devices, NUMA nodes, CPUs, memory, DRA claims.
    ///
    /// One row per container and resource. Uses v1 List, or v1alpha1 List
    /// when the kubelet has no v1 (see --api).
    List(Call<ListArgs>),
    /// One pod (v1 Get; kubelet 1.27+, feature gate KubeletPodResourcesGet).
    Get(GetArgs),
    /// What the kubelet can hand out: healthy devices, CPUs, memory
    /// (GetAllocatableResources).
    Allocatable(Call<NoFlags>),
    /// Allocatable minus in use, per resource and NUMA node; CPUs and memory too.
    ///
    /// What to look at when a pod will not schedule on this node. Devices a
    /// pod holds that are no longer allocatable (unhealthy, plugin gone) are
    /// listed separately.
    Free(Call<FreeArgs>),
    /// Poll List and print pods and assignments that appeared, changed or
    /// went away.
    ///
    /// JSON Lines with -o json, one event per pod. Stops after --count
    /// events, at --timeout, or on Ctrl-C. Stays under the kubelet's rate limit (100 calls/s, burst 10) and backs
    /// off when the kubelet answers ResourceExhausted anyway.
    Watch(WatchArgs),
    /// Record this node's List and GetAllocatableResources as a fixture file
    /// for `serve --data` (always JSON).
    Dump(Call<NoFlags>),
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
    #[arg(long, value_enum, default_value_t = ApiChoice::Auto)]
    pub api: ApiChoice,
    /// Limit for connecting to the socket.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "10s")]
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
                tap: None,
            },
            api: self.api,
            ..PodResourcesConfig::default()
        }
    }
}

/// The flags of `list`.
#[derive(Debug, Args, Clone)]
pub struct ListArgs {
    /// Which pods.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// After the list, watch for changes (as `watch`, every 2s, until Ctrl-C).
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// Which pods.
#[derive(Debug, Args, Clone)]
pub struct FilterArgs {
    /// Only pods in this namespace [default: all].
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Every namespace (the default; as kubectl's -A).
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
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

/// One or more calls to a kubelet: which kubelet, the command's own flags,
/// then the deadline of each call (so `--timeout` is defined once and still
/// comes last in `--help`).
#[derive(Debug, Args)]
pub struct Call<X: Args> {
    /// Which kubelet.
    #[command(flatten)]
    pub conn: Conn,
    /// The command's own flags.
    #[command(flatten)]
    pub own: X,
    /// Deadline of each call.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "10s")]
    pub timeout: Duration,
}

impl<X: Args> Call<X> {
    fn config(&self) -> PodResourcesConfig {
        self.conn.config(self.timeout)
    }
}

/// A command with no flags of its own.
#[derive(Debug, Args)]
pub struct NoFlags {}

/// Arguments of `get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The pod: NAME, or NAMESPACE/NAME as kubectl prints it.
    #[arg(value_name = "[NAMESPACE/]NAME")]
    pub pod: String,
    /// The pod's namespace [default: default, or the one in NAMESPACE/NAME].
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Which kubelet, and the deadline of each call.
    #[command(flatten)]
    pub call: Call<NoFlags>,
}

/// The flags of `free`.
#[derive(Debug, Args)]
pub struct FreeArgs {
    /// Only this resource (device resource name, `cpu`, or memory type).
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// Free CPUs per NUMA node, node n holding CPUs n*N..n*N+N-1 (as `kubelet-sim --cpus-per-numa N`
    /// lays them out); PodResources does not say which node a CPU is on.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus_per_numa: Option<u32>,
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
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive)]
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
    /// Rate limit: calls per second, 0.001 to 1000000 (for no limit, use --no-rate-limit).
    #[arg(long, value_name = "N", default_value_t = RATE_QPS)]
    pub qps: f64,
    /// Rate limit: burst, 1 to 1000000.
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
pub async fn run(cmd: PodResourcesCommand, s: &mut Streams<'_>) -> Result<u8> {
    match cmd {
        PodResourcesCommand::List(a) if a.own.watch => {
            let watch =
                WatchConfig { interval: Duration::from_secs(2), count: None, deadline: None, no_initial: false };
            watch_pods(&a.conn.socket, &a.config(), &a.own.filter.filter(), &watch, s).await?;
        }
        PodResourcesCommand::List(a) => {
            let filter = a.own.filter.filter();
            let (view, hidden, calls) = query::list(&a.conn.socket, &a.config(), &filter).await?;
            render::listed(s, &view, &filter, hidden.as_ref(), &calls)?;
        }
        PodResourcesCommand::Get(a) => {
            let (namespace, name) = pod_name(&a.pod, a.namespace.as_deref())?;
            let (view, calls) = query::get(&a.call.conn.socket, &a.call.config(), name, namespace).await?;
            render::got(s, &view, &calls)?;
        }
        PodResourcesCommand::Allocatable(a) => {
            let (report, causes, calls) = query::allocatable(&a.conn.socket, &a.config()).await?;
            render::allocatable_answer(s, &report, &causes, &calls)?;
        }
        PodResourcesCommand::Free(a) => {
            let opts = FreeOptions { resource: a.own.resource.clone(), cpus_per_numa: a.own.cpus_per_numa };
            let (report, alloc, calls) = query::free(&a.conn.socket, &a.config(), &opts).await?;
            render::free_answer(s, &report, &alloc, &calls)?;
        }
        PodResourcesCommand::Watch(a) => {
            let watch = WatchConfig {
                interval: a.interval,
                count: a.count,
                deadline: a.timeout.map(crate::duration::deadline),
                no_initial: a.no_initial,
            };
            let config = a.conn.config(Duration::from_secs(10));
            watch_pods(&a.conn.socket, &config, &a.filter.filter(), &watch, s).await?;
        }
        PodResourcesCommand::Dump(a) => {
            let (file, calls) = query::dump(&a.conn.socket, &a.config()).await?;
            render::dumped(s, &file, &calls)?;
        }
        PodResourcesCommand::Serve(a) => {
            let fake = FakeKubelet {
                rate_limit: (!a.no_rate_limit).then_some((a.qps, a.burst)),
                apis: ServedApis { v1: a.apis.contains(&ApiName::V1), v1alpha1: a.apis.contains(&ApiName::V1alpha1) },
                socket: a.socket,
                data: a.data,
                disable_get: a.disable_get,
                force: a.force,
            };
            crate::podresources::fake::serve(&fake, |served| render::served(s, &fake, served)).await?;
        }
    }
    Ok(exit::OK)
}

/// `NAME` or `NAMESPACE/NAME` (kubectl's form) with `-n`: the namespace and the name.
fn pod_name<'a>(pod: &'a str, namespace: Option<&'a str>) -> Result<(&'a str, &'a str)> {
    let bad = |why: &str| Err(crate::Error::invalid(format!("pod {}", crate::text::shorten(pod, 80)), why.to_string()));
    match pod.split_once('/') {
        None if pod.is_empty() => bad("is empty"),
        None => Ok((namespace.unwrap_or("default"), pod)),
        Some((ns, name)) if ns.is_empty() || name.is_empty() || name.contains('/') => {
            bad("is not NAME or NAMESPACE/NAME")
        }
        Some((ns, _)) if namespace.is_some_and(|n| n != ns) => bad("names another namespace than -n; give one of them"),
        Some((ns, name)) => Ok((ns, name)),
    }
}

/// Runs `watch` (see [`crate::podresources::watch::watch`]) until its
/// limits or Ctrl-C, rendering each event and narrating back-offs.
async fn watch_pods(
    socket: &Path,
    config: &PodResourcesConfig,
    filter: &Filter,
    watch_config: &WatchConfig,
    s: &mut Streams<'_>,
) -> Result<()> {
    crate::podresources::watch::check_interval(watch_config.interval)?;
    let mut config = config.clone();
    config.rate_limit_retries = 0; // the watch loop backs off itself
    let client = PodResourcesClient::connect(socket, &config).await?;
    let report = |update: WatchUpdate<'_>| match update {
        WatchUpdate::FirstAnswer => render::calls(s, &Calls::of(&client)),
        other => render::watch_update(s, other),
    };
    crate::podresources::watch::watch(&client, filter, watch_config, crate::signal::shutdown(), report).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;

    #[test]
    fn get_takes_namespace_slash_name_as_kubectl_prints_it() {
        assert_eq!(pod_name("ml/train-0", None).unwrap(), ("ml", "train-0"));
        assert_eq!(pod_name("ml/train-0", Some("ml")).unwrap(), ("ml", "train-0"));
        assert_eq!(pod_name("train-0", None).unwrap(), ("default", "train-0"));
        assert_eq!(pod_name("train-0", Some("ml")).unwrap(), ("ml", "train-0"));
        let e = pod_name("ml/train-0", Some("other")).unwrap_err();
        assert!(e.to_string().contains("another namespace than -n"), "{e}");
        assert_eq!(e.exit_code(), exit::USAGE);
        for bad in ["/x", "x/", "a/b/c", ""] {
            assert_eq!(pod_name(bad, None).unwrap_err().exit_code(), exit::USAGE, "{bad}");
        }
    }

    #[test]
    fn kubectl_habits_parse() {
        let cli = Cli::try_parse_from(["dpctl", "podresources", "list", "-A", "-w", "--no-headers"]).unwrap();
        let crate::cli::Command::Podresources(PodResourcesCommand::List(a)) = cli.command else { panic!() };
        assert!(a.own.watch && a.own.filter.all_namespaces && cli.global.no_headers);
        assert!(Cli::try_parse_from(["dpctl", "podresources", "list", "-A", "-n", "x"]).is_err());
    }
    use clap::Parser;

    #[test]
    fn socket_defaults_to_the_kubelets() {
        let cli = Cli::try_parse_from(["dpctl", "podresources", "list"]).unwrap();
        let crate::cli::Command::Podresources(PodResourcesCommand::List(a)) = cli.command else { panic!() };
        assert_eq!(a.timeout, Duration::from_secs(10));
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
