//! `dpctl mock-plugin`: be a device plugin (from flags or a TOML config),
//! and drive a running one from another terminal (`set-health`,
//! `add-device`, `remove-device`, `status`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::{Ctx, out_err};
use crate::duration::parse as parse_duration;
use crate::error::{Error, Result, exit};
use crate::mock_plugin::config::ConfigIssue;
use crate::mock_plugin::control::{self, ControlRequest};
use crate::mock_plugin::{
    AllocateConfig, DeviceConfig, ErrorSpec, EventKind, FlapConfig, MockConfig, MockEvent, MockPlugin, Policy,
    ResourceConfig, RpcFault, RpcSelector,
};
use crate::output::mock_plugin as render;
use crate::proto::deviceplugin::v1beta1 as dp;

const MOCK_HELP: &str = "\
Examples:
  dpctl mock-plugin --resource example.com/gpu --devices 8 --numa-nodes 2
  dpctl mock-plugin --config examples/gpu-flaky.toml
  dpctl mock-plugin --resource example.com/gpu --devices 4 --flap GPU-2:500ms --record calls.jsonl
  dpctl mock-plugin --resource example.com/gpu --error Allocate=unavailable --fail-after Allocate=2
  dpctl mock-plugin set-health example.com/gpu GPU-1 unhealthy     (from another terminal)

The plugin serves <dir>/<endpoint> first, then registers on <dir>/kubelet.sock (retrying while
the kubelet is missing), and serves and registers again when the kubelet restarts. Events go
to stdout (JSON Lines with -o json); Ctrl-C or SIGTERM stops it and removes its sockets.
No isolation is needed (unlike `dpctl smoke --isolate` for vendors' plugins): it takes --dir
and --registry-dir, so point it at the kubelet-sim's directories.

RPC names for --error/--latency/--fail-after: GetDevicePluginOptions, ListAndWatch,
GetPreferredAllocation, Allocate, PreStartContainer, GetInfo, NotifyRegistrationStatus, or *
(short forms: options, list, preferred, allocate, prestart). Codes: unavailable, internal,
invalid_argument, ... or a number.";

/// `dpctl mock-plugin ...`
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = MOCK_HELP)]
pub struct MockPluginArgs {
    /// Drive a running mock plugin instead of starting one.
    #[command(subcommand)]
    pub command: Option<MockCommand>,
    /// Start a mock plugin.
    #[command(flatten)]
    pub serve: Box<ServeArgs>,
}

/// Commands that drive a running mock plugin through its control socket.
#[derive(Debug, Subcommand)]
pub enum MockCommand {
    /// Set the health of devices; the plugin sends a new ListAndWatch list.
    SetHealth {
        /// Which mock.
        #[command(flatten)]
        target: ControlTarget,
        /// Device IDs, comma-separated.
        #[arg(value_name = "ID,ID...", value_delimiter = ',', required = true, num_args = 1)]
        ids: Vec<String>,
        /// healthy or unhealthy (any other string is sent as is, which the kubelet counts as unhealthy).
        health: String,
    },
    /// Add devices.
    AddDevice {
        /// Which mock.
        #[command(flatten)]
        target: ControlTarget,
        /// Device IDs, comma-separated.
        #[arg(value_name = "ID,ID...", value_delimiter = ',', required = true, num_args = 1)]
        ids: Vec<String>,
        /// Their health.
        #[arg(long, default_value = "healthy")]
        health: String,
        /// Their NUMA nodes, comma-separated (none: no topology).
        #[arg(long, value_delimiter = ',', value_name = "N,N...")]
        numa: Vec<i64>,
    },
    /// Remove devices.
    RemoveDevice {
        /// Which mock.
        #[command(flatten)]
        target: ControlTarget,
        /// Device IDs, comma-separated.
        #[arg(value_name = "ID,ID...", value_delimiter = ',', required = true, num_args = 1)]
        ids: Vec<String>,
    },
    /// Show a running mock's devices, registration and call counts.
    Status {
        /// Which mock.
        #[command(flatten)]
        target: ControlTarget,
    },
}

/// Which running mock: its directory and resource.
#[derive(Debug, Args, Clone)]
pub struct ControlTarget {
    /// The device-plugin directory the mock serves in.
    #[arg(long, value_name = "DIR", env = crate::paths::ENV_DEVICE_PLUGIN_DIR, default_value = crate::paths::DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
    /// How long to wait for the mock to answer.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub timeout: Duration,
    /// The resource name, e.g. example.com/gpu.
    #[arg(value_name = "RESOURCE")]
    pub resource: String,
}

/// Flags that start a mock plugin.
#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// TOML config: resources, devices, answers, timeline, faults (see examples/).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The device-plugin directory [default: $DPCTL_DEVICE_PLUGIN_DIR, else /var/lib/kubelet/device-plugins].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Extended resource name; repeat for several resources with the same flags.
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    pub resource: Vec<String>,
    /// Socket file name in --dir [default: from the resource: example.com/gpu gives example-gpu.sock].
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    pub endpoint: Option<String>,
    /// Number of devices [default: 4; at most 100,000].
    #[arg(long, value_name = "N", conflicts_with = "config")]
    pub devices: Option<usize>,
    /// Prefix of device IDs [default: the resource's last part upper-cased, e.g. GPU-].
    #[arg(long, value_name = "PREFIX", conflicts_with = "config")]
    pub id_prefix: Option<String>,
    /// Spread devices over N NUMA nodes (0: no topology).
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with = "config")]
    pub numa_nodes: usize,
    /// Devices that start unhealthy, comma-separated.
    #[arg(long, value_name = "ID,ID...", value_delimiter = ',', conflicts_with = "config")]
    pub unhealthy: Vec<String>,
    /// Advertise pre_start_required.
    #[arg(long, conflicts_with = "config")]
    pub pre_start: bool,
    /// Advertise GetPreferredAllocation, answering with POLICY (first-fit, pack,
    /// spread, random). Without it the RPC is still answered, first-fit.
    #[arg(long, value_name = "POLICY", num_args = 0..=1, default_missing_value = "first-fit", conflicts_with = "config")]
    pub preferred: Option<Policy>,
    /// Seed of the random policy.
    #[arg(long, default_value_t = 0, conflicts_with = "config")]
    pub seed: u64,
    /// Refuse Allocate of unhealthy devices (InvalidArgument).
    #[arg(long, conflicts_with = "config")]
    pub refuse_unhealthy: bool,
    /// Allocate answer env var; {ids}, {id}, {index}, {count}, {resource} are substituted.
    #[arg(long = "env", value_name = "KEY=VALUE", conflicts_with = "config")]
    pub envs: Vec<String>,
    /// Allocate answer CDI device name, e.g. example.com/gpu={id} (one per device).
    #[arg(long = "cdi", value_name = "NAME", conflicts_with = "config")]
    pub cdi: Vec<String>,
    /// Toggle devices' health every PERIOD, e.g. GPU-2:500ms or GPU-1,GPU-2:1s.
    #[arg(long, value_name = "ID,ID...:PERIOD", conflicts_with = "config")]
    pub flap: Vec<String>,
    /// Fault: answer RPC with an error status, e.g. 'Allocate=unavailable:driver gone'.
    #[arg(help_heading = "Faults", long = "error", value_name = "RPC=CODE[:MESSAGE]")]
    pub errors: Vec<String>,
    /// Fault: delay the answer to RPC, e.g. PreStartContainer=2s.
    #[arg(help_heading = "Faults", long, value_name = "RPC=DURATION")]
    pub latency: Vec<String>,
    /// Fault: RPC works N times, then fails (with its --error, else internal).
    #[arg(help_heading = "Faults", long, value_name = "RPC=N")]
    pub fail_after: Vec<String>,
    /// Fault: end each ListAndWatch stream after N messages.
    #[arg(help_heading = "Faults", long, value_name = "N")]
    pub end_stream_after: Option<u64>,
    /// Fault: with --end-stream-after, end with this status instead of OK.
    #[arg(help_heading = "Faults", long, value_name = "CODE[:MESSAGE]", requires = "end_stream_after")]
    pub end_stream_error: Option<ErrorSpec>,
    /// Fault: pad every ListAndWatch message over the kubelet's 4 MiB limit.
    #[arg(help_heading = "Faults", long)]
    pub oversize_list: bool,
    /// Fault: send this version in Register (e.g. v1alpha).
    #[arg(help_heading = "Faults", long, value_name = "VERSION")]
    pub register_version: Option<String>,
    /// Fault: send this resource name in Register (e.g. an invalid one).
    #[arg(help_heading = "Faults", long, value_name = "NAME")]
    pub register_resource_name: Option<String>,
    /// Fault: send the opposite options in Register from GetDevicePluginOptions.
    #[arg(help_heading = "Faults", long)]
    pub register_options_mismatch: bool,
    /// Fault: call Register before serving the socket (the classic bug).
    #[arg(help_heading = "Faults", long)]
    pub register_before_serving: bool,
    /// Fault: do not serve or register again after a kubelet restart.
    #[arg(help_heading = "Faults", long)]
    pub no_reregister: bool,
    /// Fault: call Register twice on the same socket (kubelet master rejects the second).
    #[arg(help_heading = "Faults", long)]
    pub register_twice: bool,
    /// Only serve; never call Register on kubelet.sock.
    #[arg(long)]
    pub no_register: bool,
    /// Also register the plugin-watcher way: serve pluginregistration.Registration
    /// on DIR/<endpoint> (e.g. /var/lib/kubelet/plugins_registry).
    #[arg(long, value_name = "DIR")]
    pub registry_dir: Option<PathBuf>,
    /// Write every RPC received to FILE as JSON Lines.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Do not serve the control socket (<dir>/.dpctl/<resource>.sock).
    #[arg(long)]
    pub no_control: bool,
    /// Take the sockets over even if a live process serves them.
    #[arg(long)]
    pub force: bool,
    /// Do not show each RPC as an event (less work under heavy load; --record still gets them).
    #[arg(long)]
    pub hide_rpcs: bool,
    /// Deadline of one Register call.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub register_timeout: Option<Duration>,
    /// Stop after this long (for scripts and CI).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub run_for: Option<Duration>,
}

/// Runs `dpctl mock-plugin ...`.
pub async fn run(args: MockPluginArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    match args.command {
        Some(cmd) => drive(cmd, ctx).await,
        None => serve(*args.serve, ctx).await,
    }
}

async fn drive(cmd: MockCommand, ctx: &mut Ctx<'_>) -> Result<u8> {
    let (target, request) = match cmd {
        MockCommand::SetHealth { target, ids, health } => {
            (target, ControlRequest::SetHealth { ids, health: canonical_health(&health), brief: false })
        }
        MockCommand::AddDevice { target, ids, health, numa } => {
            let health = canonical_health(&health);
            let numa = (!numa.is_empty()).then_some(numa);
            let devices =
                ids.into_iter().map(|id| DeviceConfig { id, health: health.clone(), numa: numa.clone() }).collect();
            (target, ControlRequest::AddDevices { devices })
        }
        MockCommand::RemoveDevice { target, ids } => (target, ControlRequest::RemoveDevices { ids }),
        MockCommand::Status { target } => (target, ControlRequest::Status),
    };
    let reply = control::call(&target.dir, &target.resource, &request, target.timeout).await.map_err(|e| match e {
        Error::NoSocket { path } => Error::invalid(
            target.resource.clone(),
            format!("no mock plugin serves it in {} (no control socket at {})", target.dir.display(), path.display()),
        ),
        other => other,
    })?;
    let out = &mut ctx.term.out;
    match (&request, &reply.status) {
        (ControlRequest::Status, Some(s)) => render::status(out, ctx.format, s),
        _ => render::control(out, ctx.format, &reply),
    }
    .map_err(out_err)?;
    Ok(exit::OK)
}

/// `healthy`/`unhealthy` in any case become the API's spelling; anything else is kept.
fn canonical_health(h: &str) -> String {
    if h.eq_ignore_ascii_case(dp::HEALTHY) {
        dp::HEALTHY.to_string()
    } else if h.eq_ignore_ascii_case(dp::UNHEALTHY) {
        dp::UNHEALTHY.to_string()
    } else {
        h.to_string()
    }
}

async fn serve(args: ServeArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let config = build_config(&args)?;
    let dir = config.dir();
    // Catch Ctrl-C and SIGTERM from now on (the handlers are installed on
    // the first poll), so that a signal never kills us with sockets left.
    let mut shutdown = Box::pin(crate::transport::shutdown_signal());
    tokio::select! {
        biased;
        () = &mut shutdown => return Ok(exit::OK),
        () = std::future::ready(()) => {}
    }
    let plugin = MockPlugin::new(config.clone())?;
    let mut events = plugin.subscribe();
    let mut handle = plugin.launch().await?;
    for r in &config.resources {
        let first = r.initial_devices().first().map_or_else(|| "ID".to_string(), |d| d.id.clone());
        ctx.note(format!(
            "mock plugin for {} on {} ({} device(s)){}",
            r.name,
            dir.join(r.endpoint_name()).display(),
            r.initial_devices().len(),
            if config.register {
                format!("; registering with {}", crate::paths::kubelet_socket(&dir).display())
            } else {
                String::new()
            }
        ))?;
        if config.control {
            ctx.note(format!(
                "  change health: dpctl mock-plugin set-health --dir {} {} {first} unhealthy",
                dir.display(),
                r.name
            ))?;
        }
    }
    let run_for = sleep_or_forever(args.run_for);
    tokio::pin!(run_for);
    let mut failure = None;
    let outcome: Result<()> = loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) => if let Err(e) = show(ctx, &ev) { break Err(e) },
                Err(RecvError::Lagged(n)) => if let Err(e) = ctx.note(format!("({n} events not shown: output too slow)")) { break Err(e) },
                Err(RecvError::Closed) => break Ok(()),
            },
            e = handle.failure() => {
                failure = Some(e);
                break drain(ctx, &mut events);
            }
            () = &mut shutdown => break Ok(()),
            () = &mut run_for => break Ok(()),
        }
    };
    handle.stop().await?;
    outcome?;
    drain(ctx, &mut events)?;
    match failure {
        Some(e) => Err(e),
        None => Ok(exit::OK),
    }
}

async fn sleep_or_forever(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Shows the events already queued.
fn drain(ctx: &mut Ctx<'_>, events: &mut tokio::sync::broadcast::Receiver<MockEvent>) -> Result<()> {
    loop {
        match events.try_recv() {
            Ok(ev) => show(ctx, &ev)?,
            Err(TryRecvError::Lagged(_)) => {}
            Err(_) => return Ok(()),
        }
    }
}

/// Retries are narration (stderr); every other event is data (stdout).
fn show(ctx: &mut Ctx<'_>, ev: &MockEvent) -> Result<()> {
    if let EventKind::RegisterRetry { .. } = &ev.kind {
        let (_, text) = render::describe(&ev.kind);
        return ctx.note(format!("{}: {text}", ev.resource));
    }
    render::event(&mut ctx.term.out, ctx.format, ev).map_err(out_err)
}

/// The config from --config or from the flags, with the flags that apply to
/// both, checked.
pub fn build_config(a: &ServeArgs) -> Result<MockConfig> {
    let (mut config, from_file) = match &a.config {
        Some(path) => (MockConfig::load(path)?, true),
        None => (from_flags(a)?, false),
    };
    if a.dir.is_some() {
        config.dir.clone_from(&a.dir);
    }
    if a.record.is_some() {
        config.record.clone_from(&a.record);
    }
    if a.registry_dir.is_some() {
        config.registry_dir.clone_from(&a.registry_dir);
    }
    if let Some(t) = a.register_timeout {
        config.register_timeout = t;
    }
    config.register &= !a.no_register;
    config.control &= !a.no_control;
    config.force |= a.force;
    config.rpc_events &= !a.hide_rpcs;
    let rpc_faults = fault_flags(a)?;
    for r in &mut config.resources {
        let f = &mut r.faults;
        f.rpc.extend(rpc_faults.iter().cloned());
        if a.end_stream_after.is_some() {
            f.list_and_watch_end_after = a.end_stream_after;
            f.list_and_watch_end_error.clone_from(&a.end_stream_error);
        }
        f.list_and_watch_oversize |= a.oversize_list;
        if a.register_version.is_some() {
            f.register_version.clone_from(&a.register_version);
        }
        if a.register_resource_name.is_some() {
            f.register_resource_name.clone_from(&a.register_resource_name);
        }
        f.register_options_mismatch |= a.register_options_mismatch;
        f.register_before_serving |= a.register_before_serving;
        f.no_reregister |= a.no_reregister;
        f.register_twice |= a.register_twice;
    }
    config.check().map_err(|i| {
        let place = match &a.config {
            Some(p) if from_file => format!("{}: {}", p.display(), i.key),
            _ => flag_for(&i),
        };
        Error::invalid(place, i.message)
    })?;
    Ok(config)
}

/// Names the flag behind a config key, for configs built from flags.
fn flag_for(i: &ConfigIssue) -> String {
    let k = i.key.as_str();
    let flag = if k == "resource" || k.ends_with(".name") {
        "--resource"
    } else if k.contains(".endpoint") {
        "--endpoint / --dir"
    } else if k.ends_with(".count") {
        "--devices"
    } else if k.contains(".unhealthy") {
        "--unhealthy"
    } else if k.contains(".flap") {
        "--flap"
    } else if k.contains(".allocate") {
        "--env / --cdi"
    } else if k.contains(".faults") {
        "fault flags"
    } else {
        "--devices"
    };
    flag.to_string()
}

fn from_flags(a: &ServeArgs) -> Result<MockConfig> {
    if a.resource.is_empty() {
        return Err(Error::invalid("mock-plugin", "give --resource NAME (with --devices N), or --config FILE"));
    }
    if a.endpoint.is_some() && a.resource.len() > 1 {
        return Err(Error::invalid("--endpoint", "names one socket; with several --resource, use a --config file"));
    }
    let allocate = if a.envs.is_empty() && a.cdi.is_empty() {
        AllocateConfig::default()
    } else {
        let mut envs = std::collections::BTreeMap::new();
        for e in &a.envs {
            let (k, v) = e.split_once('=').ok_or_else(|| Error::invalid("--env", format!("{e:?} is not KEY=VALUE")))?;
            envs.insert(k.to_string(), v.to_string());
        }
        AllocateConfig { envs, cdi_devices: a.cdi.clone(), ..AllocateConfig::default() }
    };
    let mut flaps = Vec::new();
    for f in &a.flap {
        let (ids, period) =
            f.rsplit_once(':').ok_or_else(|| Error::invalid("--flap", format!("{f:?} is not ID[,ID...]:PERIOD")))?;
        let every = parse_duration(period).map_err(|e| Error::invalid("--flap", e))?;
        flaps.push(FlapConfig { ids: ids.split(',').map(str::to_string).collect(), every });
    }
    let resources = a
        .resource
        .iter()
        .map(|name| {
            let mut r = ResourceConfig::new(name.clone(), a.devices.unwrap_or(4));
            r.endpoint.clone_from(&a.endpoint);
            r.id_prefix.clone_from(&a.id_prefix);
            r.numa_nodes = a.numa_nodes;
            r.unhealthy.clone_from(&a.unhealthy);
            r.pre_start_required = a.pre_start;
            r.get_preferred_allocation_available = a.preferred.is_some();
            r.preferred_policy = a.preferred.unwrap_or_default();
            r.seed = a.seed;
            r.refuse_unhealthy = a.refuse_unhealthy;
            r.allocate = allocate.clone();
            r.flap = flaps.clone();
            r
        })
        .collect();
    Ok(MockConfig { dir: a.dir.clone(), resources, ..MockConfig::default() })
}

/// `--error`, `--latency` and `--fail-after` as RPC faults.
fn fault_flags(a: &ServeArgs) -> Result<Vec<RpcFault>> {
    fn split<'a>(flag: &str, v: &'a str, what: &str) -> Result<(RpcSelector, &'a str)> {
        let (rpc, rest) = v.split_once('=').ok_or_else(|| Error::invalid(flag, format!("{v:?} is not RPC={what}")))?;
        let rpc = rpc.parse().map_err(|e: String| Error::invalid(flag, e))?;
        Ok((rpc, rest))
    }
    let mut faults: Vec<RpcFault> = Vec::new();
    for v in &a.errors {
        let (rpc, spec) = split("--error", v, "CODE[:MESSAGE]")?;
        let error: ErrorSpec = spec.parse().map_err(|e: String| Error::invalid("--error", e))?;
        if error.code == tonic::Code::Ok {
            return Err(Error::invalid("--error", "code ok is not an error"));
        }
        faults.push(RpcFault { rpc, error: Some(error), latency: None, after: 0 });
    }
    for v in &a.latency {
        let (rpc, d) = split("--latency", v, "DURATION")?;
        let latency = parse_duration(d).map_err(|e| Error::invalid("--latency", e))?;
        faults.push(RpcFault { rpc, error: None, latency: Some(latency), after: 0 });
    }
    for v in &a.fail_after {
        let (rpc, n) = split("--fail-after", v, "N")?;
        let n: u64 =
            n.parse().map_err(|_| Error::invalid("--fail-after", format!("{n:?} is not a number of calls")))?;
        let mut found = false;
        for f in faults.iter_mut().filter(|f| f.rpc == rpc && f.error.is_some()) {
            f.after = n;
            found = true;
        }
        if !found {
            faults.push(RpcFault { rpc, error: None, latency: None, after: n });
        }
    }
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_plugin::Rpc;

    #[test]
    fn flags_build_a_config() {
        let a = ServeArgs {
            resource: vec!["example.com/gpu".into()],
            devices: Some(3),
            flap: vec!["GPU-0,GPU-1:250ms".into()],
            errors: vec!["allocate=unavailable:gone".into()],
            fail_after: vec!["Allocate=2".into(), "prestart=1".into()],
            dir: Some("/tmp/x".into()),
            ..Default::default()
        };
        let c = build_config(&a).unwrap();
        let r = &c.resources[0];
        assert_eq!(r.flap[0].ids, ["GPU-0", "GPU-1"]);
        assert_eq!(r.flap[0].every, Duration::from_millis(250));
        let f = &r.faults.rpc;
        assert_eq!(f[0].rpc, RpcSelector::One(Rpc::Allocate));
        assert_eq!((f[0].after, f[0].error.as_ref().unwrap().message.as_str()), (2, "gone"));
        assert_eq!((f[1].rpc, f[1].after, f[1].error.is_none()), (RpcSelector::One(Rpc::PreStartContainer), 1, true));
    }

    #[test]
    fn flag_errors_name_the_flag() {
        let a =
            ServeArgs { resource: vec!["example.com/gpu".into()], flap: vec!["GPU-9:1s".into()], ..Default::default() };
        let e = build_config(&a).unwrap_err().to_string();
        assert!(e.starts_with("--flap: no device \"GPU-9\""), "{e}");
        let a = ServeArgs { resource: vec!["gpu".into()], ..Default::default() };
        assert!(build_config(&a).unwrap_err().to_string().starts_with("--resource: invalid resource name"));
        let a = ServeArgs {
            resource: vec!["example.com/gpu".into()],
            latency: vec!["Allocate=soon".into()],
            ..Default::default()
        };
        assert!(build_config(&a).unwrap_err().to_string().contains("--latency: invalid duration"));
    }
}
