//! `dpctl mock-plugin`: be a device plugin (from flags or a TOML config),
//! and drive a running one from another terminal (`set-health`,
//! `add-device`, `remove-device`, `status`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::args::DirArg;
use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::mock_plugin::control::{self, ControlRequest};
use crate::mock_plugin::events::MockEvent;
use crate::mock_plugin::options::{ServeOptions, build_config};
use crate::mock_plugin::{ErrorSpec, MockConfig, MockPlugin, Policy};
use crate::output::{Streams, mock_plugin as render};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

const EXAMPLES: &str = "\
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
and --registry-dir, so point it at the kubelet-sim's directories.";

/// `--help`'s long text: examples, how it runs, then the fault flags' names.
fn mock_help() -> String {
    format!("{EXAMPLES}\n\n{}", crate::mock_plugin::options::FAULT_NAMES)
}

/// `dpctl mock-plugin ...`
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = mock_help())]
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
        #[arg(value_parser = super::values::health())]
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
        #[arg(long, default_value = "healthy", value_parser = super::values::health())]
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
        target: StatusTarget,
    },
}

/// Which running mock: its directory and resource.
#[derive(Debug, Args, Clone)]
#[command(mut_args(super::args::dir_help("The device-plugin directory the mock serves in")))]
pub struct ControlTarget {
    /// `--dir`.
    #[command(flatten)]
    pub dir: DirArg,
    /// How long to wait for the mock to answer.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "5s")]
    pub timeout: Duration,
    /// The resource name, e.g. example.com/gpu.
    #[arg(value_name = "RESOURCE")]
    pub resource: String,
}

/// Which running mock, for `status`: its directory, and its resource unless only one runs there.
#[derive(Debug, Args, Clone)]
#[command(mut_args(super::args::dir_help("The device-plugin directory the mock serves in")))]
pub struct StatusTarget {
    /// `--dir`.
    #[command(flatten)]
    pub dir: DirArg,
    /// How long to wait for the mock to answer.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "5s")]
    pub timeout: Duration,
    /// The resource name, e.g. example.com/gpu [default: the only mock running in --dir].
    #[arg(value_name = "RESOURCE")]
    pub resource: Option<String>,
}

impl StatusTarget {
    /// The resource named, or the one mock running in --dir.
    async fn control_target(self) -> Result<ControlTarget> {
        let resource = match self.resource {
            Some(r) => r,
            None => Self::only(&self.dir.dir, self.timeout).await?,
        };
        Ok(ControlTarget { dir: self.dir, timeout: self.timeout, resource })
    }

    async fn only(dir: &std::path::Path, timeout: Duration) -> Result<String> {
        match control::running(dir, timeout).await.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(crate::Error::Connect {
                path: dir.join(crate::paths::CONTROL_DIR_NAME),
                reason: format!(
                    "no mock plugin runs in {}; start one with `dpctl mock-plugin --dir DIR`",
                    dir.display()
                ),
            }),
            many => Err(crate::Error::invalid(
                "RESOURCE",
                format!("{} mock plugins run in {}: name one of {}", many.len(), dir.display(), many.join(", ")),
            )),
        }
    }
}

/// Flags that start a mock plugin.
#[derive(Debug, Args)]
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
    #[arg(long, value_name = "POLICY", num_args = 0..=1, default_missing_value = "first-fit", conflicts_with = "config",
          value_parser = super::values::offering(|s: &str| s.parse::<Policy>(), Policy::NAMES))]
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
    /// Fault: send an empty device list first on every ListAndWatch stream, then the real one.
    #[arg(help_heading = "Faults", long)]
    pub empty_first_message: bool,
    /// Fault: answer every Allocate with the first device's content (env, CDI names, device nodes,
    /// mounts), whatever was asked: two containers get the same device.
    #[arg(help_heading = "Faults", long)]
    pub same_device: bool,
    /// Fault: send this version in Register (e.g. v1alpha).
    #[arg(help_heading = "Faults", long, value_name = "VERSION")]
    pub register_version: Option<String>,
    /// Fault: send this resource name in Register (e.g. an invalid one).
    #[arg(help_heading = "Faults", long, value_name = "NAME")]
    pub register_resource_name: Option<String>,
    /// Fault: send the opposite options in Register from GetDevicePluginOptions (kubelets ignore
    /// them, so this works: smoke and kubelet-sim only note it).
    #[arg(help_heading = "Faults", long)]
    pub register_options_mismatch: bool,
    /// Fault: call Register before serving the socket (the classic bug).
    #[arg(help_heading = "Faults", long)]
    pub register_before_serving: bool,
    /// Fault: do not serve or register again after a kubelet restart.
    #[arg(help_heading = "Faults", long)]
    pub no_reregister: bool,
    /// Fault: after a kubelet restart, the new ListAndWatch stream gets the list once and never a
    /// change (the old stream's goroutine kept the update channel).
    #[arg(help_heading = "Faults", long)]
    pub stale_stream_after_restart: bool,
    /// Fault: exit with Go's `panic: send on closed channel` DURATION after a kubelet restart.
    #[arg(help_heading = "Faults", long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "3s",
          value_parser = parse_duration)]
    pub crash_after_restart: Option<Duration>,
    /// Fault: report the first N changes in device count (add-device, remove-device), never a later one.
    #[arg(help_heading = "Faults", long, value_name = "N")]
    pub scan_stops_after: Option<u64>,
    /// Fault: ignore SIGTERM and Ctrl-C (only SIGKILL ends it).
    #[arg(help_heading = "Faults", long)]
    pub hang_on_sigterm: bool,
    /// Fault: device IDs differ on every start (a suffix made from the process and its start time).
    #[arg(help_heading = "Faults", long)]
    pub ids_change_per_start: bool,
    /// Fault: call Register twice on the same socket (kubelets 1.37+ refuse the second).
    #[arg(help_heading = "Faults", long)]
    pub register_twice: bool,
    /// Fault: call Register once at start and exit if it fails (no retry, no watching for kubelet.sock).
    #[arg(help_heading = "Faults", long)]
    pub register_once: bool,
    /// Only serve; never call Register on kubelet.sock.
    #[arg(long)]
    pub no_register: bool,
    /// Also register the plugin-watcher way: serve pluginregistration.Registration
    /// on DIR/<endpoint> (e.g. /var/lib/kubelet/plugins_registry).
    #[arg(long, value_name = "DIR")]
    pub registry_dir: Option<PathBuf>,
    /// Write every RPC received to FILE as JSON Lines. FILE is created, or replaced when it is
    /// empty or a record dpctl wrote; any other existing file, a symbolic link (live or dangling)
    /// or a non-regular file is refused (exit 2), never emptied or followed.
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

impl From<ServeArgs> for ServeOptions {
    fn from(a: ServeArgs) -> Self {
        ServeOptions {
            config: a.config,
            dir: a.dir,
            resource: a.resource,
            endpoint: a.endpoint,
            devices: a.devices,
            id_prefix: a.id_prefix,
            numa_nodes: a.numa_nodes,
            unhealthy: a.unhealthy,
            pre_start: a.pre_start,
            preferred: a.preferred,
            seed: a.seed,
            refuse_unhealthy: a.refuse_unhealthy,
            envs: a.envs,
            cdi: a.cdi,
            flap: a.flap,
            errors: a.errors,
            latency: a.latency,
            fail_after: a.fail_after,
            end_stream_after: a.end_stream_after,
            end_stream_error: a.end_stream_error,
            oversize_list: a.oversize_list,
            empty_first_message: a.empty_first_message,
            same_device: a.same_device,
            register_version: a.register_version,
            register_resource_name: a.register_resource_name,
            register_options_mismatch: a.register_options_mismatch,
            register_before_serving: a.register_before_serving,
            no_reregister: a.no_reregister,
            stale_stream_after_restart: a.stale_stream_after_restart,
            crash_after_restart: a.crash_after_restart,
            scan_stops_after: a.scan_stops_after,
            hang_on_sigterm: a.hang_on_sigterm,
            ids_change_per_start: a.ids_change_per_start,
            register_twice: a.register_twice,
            register_once: a.register_once,
            no_register: a.no_register,
            registry_dir: a.registry_dir,
            record: a.record,
            no_control: a.no_control,
            force: a.force,
            hide_rpcs: a.hide_rpcs,
            register_timeout: a.register_timeout,
        }
    }
}

/// Runs `dpctl mock-plugin ...`.
pub async fn run(args: MockPluginArgs, s: &mut Streams<'_>) -> Result<u8> {
    let Some(cmd) = args.command else {
        let run_for = args.serve.run_for;
        let config = build_config(&ServeOptions::from(*args.serve))?;
        return serve(config, run_for, s).await;
    };
    let (target, request) = match cmd {
        MockCommand::SetHealth { target, ids, health } => (target, ControlRequest::set_health(ids, &health)),
        MockCommand::AddDevice { target, ids, health, numa } => {
            (target, ControlRequest::add_devices(ids, &health, numa))
        }
        MockCommand::RemoveDevice { target, ids } => (target, ControlRequest::RemoveDevices { ids }),
        MockCommand::Status { target } => (target.control_target().await?, ControlRequest::Status),
    };
    let reply = control::call(&target.dir.dir, &target.resource, &request, target.timeout).await?;
    render::reply(&mut *s.out, s.format, &request, &reply).map_err(super::out_err)?;
    Ok(exit::OK)
}

/// Runs a mock plugin from `config` until Ctrl-C, SIGTERM, `run_for` or a
/// failure: says where it serves (narration), shows every event (data,
/// retries as narration), then stops it and removes its sockets.
async fn serve(config: MockConfig, run_for: Option<Duration>, s: &mut Streams<'_>) -> Result<u8> {
    let dir = config.dir();
    // Catch Ctrl-C and SIGTERM from now on (the handlers are installed on
    // the first poll), so that a signal never kills us with sockets left.
    let mut shutdown = Box::pin(crate::signal::shutdown());
    tokio::select! {
        biased;
        () = &mut shutdown => return Ok(exit::OK),
        () = std::future::ready(()) => {}
    }
    let hang = config.resources.iter().any(|r| r.faults.hang_on_sigterm);
    let plugin = MockPlugin::new(config.clone())?;
    let mut events = plugin.subscribe();
    let mut handle = plugin.launch().await?;
    render::serving_notes(&config, &dir, s)?;
    let run_for = async {
        match run_for {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(run_for);
    let mut failure = None;
    let outcome: crate::Result<()> = loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) => if let Err(e) = render::show(s, &ev) { break Err(e) },
                Err(RecvError::Lagged(n)) => if let Err(e) = s.note(format!("({n} events not shown: output too slow)")) { break Err(e) },
                Err(RecvError::Closed) => break Ok(()),
            },
            e = handle.failure() => {
                failure = Some(e);
                break drain(s, &mut events);
            }
            () = &mut shutdown => {
                if hang {
                    // The fault: a shutdown that waits on something that never returns.
                    s.note("SIGTERM received: draining (the hang-on-sigterm fault: this never ends; only SIGKILL stops it)")?;
                    std::future::pending::<()>().await;
                }
                break Ok(());
            }
            () = &mut run_for => break Ok(()),
        }
    };
    handle.stop().await?;
    outcome?;
    drain(s, &mut events)?;
    match failure {
        Some(e) => Err(e),
        None => Ok(exit::OK),
    }
}

/// Shows the events already queued.
fn drain(s: &mut Streams<'_>, events: &mut broadcast::Receiver<MockEvent>) -> Result<()> {
    loop {
        match events.try_recv() {
            Ok(ev) => render::show(s, &ev)?,
            Err(TryRecvError::Lagged(_)) => {}
            Err(_) => return Ok(()),
        }
    }
}
