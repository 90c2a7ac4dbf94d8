//! `dpctl kubelet-sim`: run a simulated kubelet device manager in a
//! directory, or steer one that runs (admit, delete, restart, status,
//! set-grace) through its control socket.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use tokio::sync::broadcast;

use super::{Ctx, out_err};
use crate::duration::parse as parse_duration;
use crate::error::{Error, Result, exit};
use crate::kubelet_sim::control::{self, Answer, Request};
use crate::kubelet_sim::{KubeletSim, KubeletVersion, PodSpec, SimConfig, SimEvent};
use crate::output::kubelet_sim::EventDisplay;
use crate::output::{self, Format, kubelet_sim as render};
use crate::paths::{DEFAULT_DEVICE_PLUGIN_DIR, ENV_DEVICE_PLUGIN_DIR};
use crate::topology;

const SIM_HELP: &str = "\
Examples:
  dpctl kubelet-sim --dir /tmp/dp                          # serve kubelet.sock with a live view
  dpctl kubelet-sim --dir /tmp/dp -o json                  # one JSON event per line
  dpctl kubelet-sim --dir /tmp/dp --expect example.com/gpu=4 --timeout 30s   # pass/fail check
  dpctl kubelet-sim admit --dir /tmp/dp pod.yaml           # from another terminal
  dpctl kubelet-sim admit --dir /tmp/dp --allocate example.com/gpu=2
  dpctl kubelet-sim restart --dir /tmp/dp --wait 30s
  dpctl kubelet-sim restart-container --dir /tmp/dp ml/trainer main   # PreStartContainer again
  dpctl kubelet-sim --dir /tmp/dp --topology-manager-policy single-numa-node \
      --numa-nodes 2 --cpus-per-numa 8 --cpu-manager-policy static --reserved-cpus 0
  dpctl kubelet-sim admit --dir /tmp/dp --dry-run --allocate example.com/gpu=2 --cpu 4 --memory 1Gi
  dpctl kubelet-sim status --dir /tmp/dp -o json
  dpctl podresources list --socket /tmp/dp/pod-resources.sock

With --expect, the exit code is 0 as soon as every RESOURCE has exactly COUNT
allocatable devices, and 1 when --timeout (default 30s) passes first.
admit exits 1 when the pod is rejected or a container cannot start; restart
exits 1 when a plugin did not come back within --wait.

No isolation is needed (unlike `dpctl smoke --isolate`): the sim serves whatever --dir you give
it and touches nothing else, so run it in a directory of its own. A plugin that only knows
/var/lib/kubelet/device-plugins is smoked with `dpctl smoke --isolate -- PLUGIN`.

Kubelet versions (--kubelet-version, default 1.36; also v1.30 and 1.30.7):
  1.26, 1.27, ... 1.36, master. What changes between them
  (spec: kubelet-versions.md):
  - same resource registered again: 1.26-1.36 replace the plugin by name; the
    old connection stays open and its stream still feeds the resource, and
    when it ends the kubelet disconnects the NEW plugin (issue #121994).
    master keeps one client per (name, socket) and rejects a second Register
    on a live (name, socket); that rejection text is dpctl's (unverified).
  - restart cleanup: 1.26-1.32 delete every non-directory but the checkpoint;
    1.33+ (1.33 inferred) sockets only, following symlinks. Files that are not
    sockets are deleted only in a directory the sim created (smoke, demo) or
    with --emulate-cleanup; otherwise the report lists what that kubelet
    would have deleted. kubelet_internal_checkpoint is never deleted.
  - empty Allocate response: ...allocation response &AllocateResponse{...}
    up to 1.33, nothing after the trailing space from 1.34.
  - PodResources: 1.26 has no rate limit and no Get (Unimplemented); Get is
    off by default 1.27-1.33 (\"PodResources API Get method disabled\");
    v1 List/Get show sidecars (first) from 1.30, regular containers only
    before; v1alpha1 regular containers only in every version.
  - v1 (pre-1.20) checkpoints are restored up to 1.30; 1.31+ read them as
    the JSON error a corrupt file is: nothing restored, the file kept (the
    kubelet's next write replaces it; the sim's only with --adopt-checkpoint).
  - deleting a plugins_registry socket deregisters by name up to 1.36 (a
    same-named kubelet.sock plugin is disconnected too), by endpoint on master.
  - --topology-manager-policy-options: max-allowable-numa-nodes exists from
    1.31 (before: unknown option); prefer-closest-numa-nodes is alpha (off by
    default) in 1.26-1.27, so those kubelets refuse it at startup, as the sim does.
  Every version: the endpoint is joined like Go's filepath.Join (an absolute
  endpoint is appended to the directory); a pod arriving before the first
  ListAndWatch message is admitted with the request stripped (node status
  does not list the resource) or rejected OutOf<resource> (it lists it at 0);
  PreStartContainer runs at every container start (restart-container).

Where the sim deliberately differs from a real kubelet:
  - Topology Manager (--topology-manager-policy, default none) and static CPU
    manager follow the kubelet (v1.26+ logic). Within an aligned, unaligned or
    no-topology set the sim takes devices in the plugin's order (the kubelet:
    random map order). CPUs are picked with a simplified takeByTopology (one
    socket, no SMT). The memory manager is not simulated: it gives no hints and
    PodResources has no memory. The machine is simulated (--numa-nodes,
    --cpus-per-numa, --numa-distances), not read from the host; at most 16 NUMA
    nodes, and a merge of more than 10,000,000 hint permutations is refused
    (the kubelet would take minutes).
  - admit --dry-run judges a pod without Allocate, GetPreferredAllocation or
    PreStartContainer: where the kubelet would ask GetPreferredAllocation the
    report shows the request, and the sim picks in the plugin's order.
  - GetDevicePluginOptions, GetPreferredAllocation and Allocate have a deadline
    (--rpc-timeout); the kubelet sets none, so a hung plugin hangs admission.
  - At start the sim leaves sockets something still answers on in place (the
    kubelet deletes them too); --force deletes them. `restart` deletes them
    all, as a restarting kubelet does.
  - Behaviour the versions table marks as version-specific but the sim does not
    play: 1.31.0's sockets-only cleanup (later 1.31.x are played), the sidecar
    reuse rule (<=1.28), skipping running containers after a restart (1.27+),
    Register's deadline bounding the dial-back (1.35+, inferred), List of
    active pods only (1.34+; the sim keeps no terminated pods), the
    SidecarContainers gate (off by default in 1.28), the healthz check, ResourceHealthStatus
    (1.31+ alpha: device health in pod status), the <=1.28 kubelet panic when
    a plugin disconnects after its endpoint was dropped, the post-1.32
    deregistration after a failed NotifyRegistrationStatus, pod-level
    cpu_ids/memory in PodResources (master), dynamic_resources (the sim has
    no DRA: always empty), GetAllocatableResources' 1.26-1.27 feature gate
    (always on here). No observable difference, so not played: the checksum
    printer (same bytes), gogo vs protoc-gen-go types (same wire), the
    plugins_registry UUID vs timestamp (deregister, register either way).
  - plugins_registry: a deleted socket deregisters at once (the kubelet's
    reconciler runs every 1 s); dot-named sockets inside dot-named directories
    found by the first walk are ignored too. A registration that fails
    (GetInfo, validation, the dial-back) is retried, as the kubelet does,
    0.5 s later, doubling up to about 2 min, while the socket exists.
  - The checkpoint is written within 100 ms after an admission (the kubelet
    writes it at allocation, before the containers start): a sim killed at
    once after `admit` answered may not have the pod in its checkpoint.
  - A checkpoint the sim did not write (a real kubelet's) is read, verified and
    restored but never changed, unless --adopt-checkpoint; the kubelet rewrites it.
  - Checkpoint entries of pods the sim never admitted (kubelet-versions.md §7) are
    shown by UID in status and count as in use until `delete UID`; they are not
    in PodResources (the sim's pod manager does not know them). A kubelet lists
    such pods when its API server still runs them, and frees the devices of pods
    it no longer has at the next admission.
  - A container whose resource has no cached devices at start gets no late
    Allocate.
  - Capacity drops to 0 the moment the grace period after a stream end passes;
    the kubelet drops it at the first node-status update (every 10 s by
    default) after the 5 minutes.
  - Rejected pods are not kept, so PodResources never lists them.
  - kubelet.sock is created owner-only (0600); the kubelet's socket mode follows its umask.";

/// Be the kubelet's device manager in a directory: accept registrations on
/// kubelet.sock (validated, dialed back, options asked, ListAndWatch), admit
/// pods, restart like a kubelet, and serve PodResources from what it knows.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = SIM_HELP)]
pub struct KubeletSimArgs {
    /// Steer a running sim instead of starting one.
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// How to run the sim.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Options of a running sim.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The device-plugin directory: kubelet.sock, plugin sockets, the checkpoint.
    #[arg(long, value_name = "DIR", env = ENV_DEVICE_PLUGIN_DIR, default_value = DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
    /// Take over kubelet.sock (and the sim's other sockets) even when a live process answers on it,
    /// and delete every socket in --dir at start as a kubelet does. Without it (a deliberate
    /// difference from the kubelet) startup deletes only stale sockets (connecting is refused) and
    /// leaves live ones alone; `restart` deletes them all, like a restarting kubelet.
    #[arg(long)]
    pub force: bool,
    /// After a ListAndWatch stream ends, how long capacity is kept before it drops to 0.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5m")]
    pub grace_period: Duration,
    /// Where to serve PodResources [default: <DIR>/pod-resources.sock].
    #[arg(long, value_name = "PATH")]
    pub podresources_socket: Option<PathBuf>,
    /// Do not serve PodResources.
    #[arg(long, conflicts_with = "podresources_socket")]
    pub no_podresources: bool,
    /// Serve PodResources without the kubelet's rate limit (100 calls/s, burst 10).
    #[arg(long)]
    pub no_rate_limit: bool,
    /// Also accept plugins through this plugins_registry directory (the plugin watcher's way).
    #[arg(long, value_name = "DIR")]
    pub registry_dir: Option<PathBuf>,
    /// How long Register keeps dialing the plugin's socket before it fails.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub dial_timeout: Duration,
    /// Deadline of GetDevicePluginOptions, GetPreferredAllocation and Allocate (the kubelet sets none).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub rpc_timeout: Duration,
    /// Do not read or write kubelet_internal_checkpoint.
    #[arg(long)]
    pub no_checkpoint: bool,
    /// The kubelet release to play: 1.26 … 1.36 or master (v1.30 and 1.30.7 mean 1.30).
    #[arg(long, value_name = "VERSION", default_value = "1.36", value_parser = parse_version)]
    pub kubelet_version: KubeletVersion,
    /// At start and restart, also delete the non-socket files the chosen kubelet deletes (1.26-1.32: every
    /// non-directory; 1.33+: symlinks to sockets). Without it only sockets are deleted and the rest is reported.
    /// The checkpoint is never deleted.
    #[arg(long)]
    pub emulate_cleanup: bool,
    /// Let the sim rewrite a kubelet_internal_checkpoint it did not write (a real kubelet's).
    /// Without it such a file is read, verified and restored, never changed.
    #[arg(long, conflicts_with = "no_checkpoint")]
    pub adopt_checkpoint: bool,
    /// Expect RESOURCE to have exactly COUNT allocatable devices (repeatable); exit 0 once all hold.
    #[arg(long, value_name = "RESOURCE=COUNT")]
    pub expect: Vec<String>,
    /// Stop after this long [default: run until Ctrl-C; with --expect: 30s, then exit 1].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Topology Manager, CPU manager and the simulated machine.
    #[command(flatten)]
    pub topology: TopologyArgs,
}

/// The kubelet's Topology Manager and CPU manager flags, and the simulated machine.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Topology (the kubelet's flags)")]
pub struct TopologyArgs {
    /// The kubelet's --topology-manager-policy.
    #[arg(long, value_enum, value_name = "POLICY", default_value = "none")]
    pub topology_manager_policy: topology::Policy,
    /// The kubelet's --topology-manager-scope.
    #[arg(long, value_enum, value_name = "SCOPE", default_value = "container")]
    pub topology_manager_scope: topology::Scope,
    /// The kubelet's --topology-manager-policy-options, e.g. prefer-closest-numa-nodes=true,max-allowable-numa-nodes=16.
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = parse_policy_options)]
    pub topology_manager_policy_options: Option<topology::PolicyOptions>,
    /// The kubelet's --cpu-manager-policy (static: Guaranteed pods with integer CPU requests get exclusive CPUs).
    #[arg(long, value_enum, value_name = "POLICY", default_value = "none")]
    pub cpu_manager_policy: topology::CpuPolicy,
    /// The kubelet's --reserved-cpus (a CPU list, e.g. 0 or 0-1); the static policy needs at least one.
    #[arg(long, value_name = "CPUS", value_parser = parse_cpus)]
    pub reserved_cpus: Option<std::collections::BTreeSet<u32>>,
    /// NUMA nodes of the simulated machine.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub numa_nodes: usize,
    /// CPUs per NUMA node (node n holds CPUs n*N .. n*N+N-1).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub cpus_per_numa: usize,
    /// NUMA distances (rows by ';', values by ','), needed by prefer-closest-numa-nodes, e.g. 10,21;21,10.
    #[arg(long, value_name = "MATRIX", value_parser = parse_distances)]
    pub numa_distances: Option<Vec<Vec<u64>>>,
}

fn parse_policy_options(s: &str) -> std::result::Result<topology::PolicyOptions, String> {
    s.parse()
}

fn parse_cpus(s: &str) -> std::result::Result<std::collections::BTreeSet<u32>, String> {
    topology::parse_cpu_list(s)
}

fn parse_distances(s: &str) -> std::result::Result<Vec<Vec<u64>>, String> {
    topology::parse_distances(s)
}

impl TopologyArgs {
    /// The sim's configuration (checked when the sim starts).
    pub fn config(&self) -> topology::TopologyConfig {
        topology::TopologyConfig {
            policy: self.topology_manager_policy,
            scope: self.topology_manager_scope,
            options: self.topology_manager_policy_options.clone().unwrap_or_default(),
            cpu_policy: self.cpu_manager_policy,
            reserved_cpus: self.reserved_cpus.clone().unwrap_or_default(),
            machine: topology::Machine {
                numa_nodes: self.numa_nodes,
                cpus_per_numa: self.cpus_per_numa,
                distances: self.numa_distances.clone(),
            },
        }
    }
}

/// Which running sim.
#[derive(Debug, Args, Clone)]
pub struct SimTarget {
    /// The directory the sim serves.
    #[arg(long, value_name = "DIR", env = ENV_DEVICE_PLUGIN_DIR, default_value = DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
}

/// Commands for a running sim.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Admit a pod: from a Pod manifest (YAML or JSON; `-` reads stdin), or
    /// with --allocate for a one-container pod.
    Admit {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// The Pod manifest.
        #[arg(
            value_name = "MANIFEST",
            required_unless_present_any = ["allocate", "filename"],
            conflicts_with_all = ["allocate", "filename"]
        )]
        manifest: Option<PathBuf>,
        /// The Pod manifest, as kubectl takes it (the same as MANIFEST).
        #[arg(short = 'f', long = "filename", value_name = "FILE", conflicts_with = "allocate")]
        filename: Option<PathBuf>,
        /// RESOURCE=COUNT for a one-container pod (repeatable).
        #[arg(long, value_name = "RESOURCE=COUNT")]
        allocate: Vec<String>,
        /// Pod name for --allocate [default: a generated one].
        #[arg(long, requires = "allocate")]
        name: Option<String>,
        /// Namespace for --allocate.
        #[arg(long, default_value = "default", requires = "allocate")]
        namespace: String,
        /// CPU limit (= request) of the --allocate pod's container, e.g. 2 or 500m.
        #[arg(long, value_name = "QUANTITY", requires = "allocate")]
        cpu: Option<String>,
        /// Memory limit (= request) of the --allocate pod's container, e.g. 1Gi; with --cpu the pod is Guaranteed.
        #[arg(long, value_name = "QUANTITY", requires = "allocate")]
        memory: Option<String>,
        /// Only judge the pod: would it be admitted, and where? Nothing is allocated, no plugin is called.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete a pod and free its devices.
    Delete {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// Pod name (or NAMESPACE/NAME), or the UID of a pod known only from the checkpoint.
        pod: String,
        /// Namespace.
        #[arg(long, short = 'n', default_value = "default")]
        namespace: String,
    },
    /// Restart the kubelet: delete the sockets, serve a new kubelet.sock, keep
    /// allocations, and report which plugins registered again and how fast.
    Restart {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// How long to wait for plugins to come back.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
        wait: Duration,
    },
    /// Restart one container of an admitted pod: the kubelet calls
    /// PreStartContainer again (when the plugin requires it); a failure stops
    /// only that container. Exit 1 when it does not start.
    RestartContainer {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// Pod name (or NAMESPACE/NAME).
        pod: String,
        /// Container name.
        container: String,
        /// Namespace.
        #[arg(long, short = 'n', default_value = "default")]
        namespace: String,
    },
    /// Show resources, plugins and pods.
    Status {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
    },
    /// Set the grace period after a stream end (e.g. 2s to watch capacity drop).
    SetGrace {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// The new grace period.
        #[arg(value_name = "DURATION", value_parser = parse_duration)]
        grace: Duration,
    },
}

/// Runs `dpctl kubelet-sim ...`.
pub async fn run(args: KubeletSimArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    match args.command {
        None => serve(args.serve, ctx).await,
        Some(cmd) => steer(cmd, ctx).await,
    }
}

/// Parses `--kubelet-version` for clap (the error names the valid list).
pub fn parse_version(s: &str) -> std::result::Result<KubeletVersion, String> {
    KubeletVersion::parse(s).map_err(|e| match e {
        Error::Invalid { message, .. } => message,
        other => other.to_string(),
    })
}

/// Parses `--expect RESOURCE=COUNT`.
fn parse_expect(s: &str) -> Result<(String, usize)> {
    let (r, n) = PodSpec::parse_allocate(s).map_err(|_| {
        Error::invalid(
            format!("--expect {s}"),
            "expected RESOURCE=COUNT with an extended resource name, e.g. example.com/gpu=4",
        )
    })?;
    Ok((r, usize::try_from(n).unwrap_or(usize::MAX)))
}

async fn serve(args: ServeArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let expects: Vec<(String, usize)> = args.expect.iter().map(|s| parse_expect(s)).collect::<Result<_>>()?;
    let mut config = SimConfig::new(&args.dir);
    config.set_kubelet_version(args.kubelet_version);
    config.emulate_cleanup = args.emulate_cleanup;
    config.force = args.force;
    config.grace_period = args.grace_period;
    config.podresources_socket = if args.no_podresources {
        None
    } else {
        Some(
            args.podresources_socket
                .clone()
                .unwrap_or_else(|| args.dir.join(crate::paths::SIM_PODRESOURCES_SOCKET_NAME)),
        )
    };
    if args.no_rate_limit {
        config.podresources.rate_limit = None;
    }
    config.registry_dir = args.registry_dir.clone();
    config.dial_timeout = args.dial_timeout;
    config.rpc_timeout = args.rpc_timeout;
    config.checkpoint = !args.no_checkpoint;
    config.adopt_checkpoint = args.adopt_checkpoint;
    config.topology = args.topology.config();
    let sim = KubeletSim::start(config).await?;
    let mut rx = sim.events_from_start().unwrap_or_else(|| sim.subscribe());
    let timeout = args.timeout.or_else(|| (!expects.is_empty()).then_some(Duration::from_secs(30)));
    let deadline = timeout.map(crate::duration::deadline);
    let mut display = if ctx.format.is_json() {
        EventDisplay::Json
    } else if ctx.progress_allowed() {
        EventDisplay::live(terminal_width())
    } else {
        EventDisplay::Lines
    };
    let stop = crate::transport::shutdown_signal();
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut code = exit::OK;
    let result: Result<()> = async {
        loop {
            if !expects.is_empty() {
                let results = render::expect_results(&expects, &sim.counts());
                if results.iter().all(|r| r.met) {
                    drain(&mut rx, &mut display, ctx, &sim)?;
                    finish_expect(ctx, results, true)?;
                    break;
                }
            }
            let until = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => display.show(&mut ctx.term.out, &mut ctx.term.err, &sim, ev).map_err(out_err)?,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        ctx.note(format!("dpctl: {n} event(s) were dropped (the output is too slow)"))?;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = tick.tick() => display.tick(&mut ctx.term.err, &sim).map_err(out_err)?,
                () = until => {
                    drain(&mut rx, &mut display, ctx, &sim)?;
                    if !expects.is_empty() {
                        let results = render::expect_results(&expects, &sim.counts());
                        code = exit::CHECK_FAILED;
                        finish_expect(ctx, results, false)?;
                    }
                    break;
                }
                () = &mut stop => break,
            }
        }
        Ok(())
    }
    .await;
    let stopped = sim.stop().await;
    drain(&mut rx, &mut display, ctx, &sim)?;
    display.finish(&mut ctx.term.err, &sim).map_err(out_err)?;
    result?;
    stopped?;
    Ok(code)
}

/// Shows the events already queued.
fn drain(
    rx: &mut broadcast::Receiver<SimEvent>,
    display: &mut EventDisplay,
    ctx: &mut Ctx<'_>,
    sim: &crate::kubelet_sim::SimHandle,
) -> Result<()> {
    loop {
        match rx.try_recv() {
            Ok(ev) => display.show(&mut ctx.term.out, &mut ctx.term.err, sim, ev).map_err(out_err)?,
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return Ok(()),
        }
    }
}

fn finish_expect(ctx: &mut Ctx<'_>, results: Vec<render::ExpectResult>, met: bool) -> Result<()> {
    let view = render::ExpectView {
        time: output::timestamp(std::time::SystemTime::now()),
        event: "expectations",
        met,
        results,
    };
    // The verdict is data: on stdout in every mode.
    let format = if ctx.format.is_json() { Format::Json } else { Format::Table };
    render::expectations(&mut ctx.term.out, format, &view).map_err(out_err)
}

/// The terminal width from `COLUMNS`, or 120.
fn terminal_width() -> usize {
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|w: &usize| *w >= 40).unwrap_or(120)
}

/// Sends a request to a running sim and renders the answer.
async fn steer(cmd: SimCommand, ctx: &mut Ctx<'_>) -> Result<u8> {
    let (dir, request, timeout) = match cmd {
        SimCommand::Admit { target, manifest, filename, allocate, name, namespace, cpu, memory, dry_run } => {
            let pod = match manifest.or(filename) {
                Some(path) => {
                    let place = path.display().to_string();
                    let text = if place == "-" {
                        std::io::read_to_string(std::io::stdin()).map_err(|e| Error::io("reading stdin", e))?
                    } else {
                        crate::input::read_text(&path, &place)?
                    };
                    PodSpec::from_manifest(&text, &place)?
                }
                None => {
                    let limits = allocate.iter().map(|s| PodSpec::parse_allocate(s)).collect::<Result<Vec<_>>>()?;
                    let name = name.unwrap_or_else(|| format!("pod-{:08x}", rand::random::<u32>()));
                    let mut pod = PodSpec::shorthand(&name, &namespace, &limits);
                    pod.containers[0].compute = shorthand_compute(cpu.as_deref(), memory.as_deref())?;
                    pod
                }
            };
            let request = if dry_run { Request::DryRun { pod } } else { Request::Admit { pod } };
            (target.dir, request, Duration::from_secs(300))
        }
        SimCommand::Delete { target, pod, namespace } => {
            let (namespace, name) = match pod.split_once('/') {
                Some((ns, n)) => (ns.to_string(), n.to_string()),
                None => (namespace, pod),
            };
            (target.dir, Request::Delete { namespace, name }, Duration::from_secs(30))
        }
        SimCommand::Restart { target, wait } => {
            let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            (target.dir, Request::Restart { wait_ms }, wait + Duration::from_secs(30))
        }
        SimCommand::RestartContainer { target, pod, container, namespace } => {
            let (namespace, name) = match pod.split_once('/') {
                Some((ns, n)) => (ns.to_string(), n.to_string()),
                None => (namespace, pod),
            };
            (target.dir, Request::RestartContainer { namespace, name, container }, Duration::from_secs(60))
        }
        SimCommand::Status { target } => (target.dir, Request::Status, Duration::from_secs(10)),
        SimCommand::SetGrace { target, grace } => {
            let grace_period_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
            (target.dir, Request::SetGrace { grace_period_ms }, Duration::from_secs(10))
        }
    };
    let answer = match control::call(&dir, &request, timeout).await? {
        Ok(a) => a,
        Err(remote) => {
            writeln!(ctx.term.err, "dpctl: error: {}", remote.message).map_err(out_err)?;
            if let Some(h) = remote.hint {
                writeln!(ctx.term.err, "  hint: {h}").map_err(out_err)?;
            }
            return Ok(remote.exit_code);
        }
    };
    let out = &mut ctx.term.out;
    let format = ctx.format;
    match answer {
        Answer::Admit(o) => {
            render::admit(out, format, &o).map_err(out_err)?;
            let dry = o.topology.as_ref().is_some_and(|t| t.dry_run);
            let started = dry || o.containers.iter().all(|c| c.started);
            Ok(if o.admitted && started { exit::OK } else { exit::CHECK_FAILED })
        }
        Answer::Delete(d) => {
            render::delete(out, format, &d).map_err(out_err)?;
            Ok(exit::OK)
        }
        Answer::Restart(r) => {
            render::restart(out, format, &r).map_err(out_err)?;
            Ok(if r.all_returned { exit::OK } else { exit::CHECK_FAILED })
        }
        Answer::RestartContainer(r) => {
            render::restart_container(out, format, &r).map_err(out_err)?;
            Ok(if r.started { exit::OK } else { exit::CHECK_FAILED })
        }
        Answer::Status(s) => {
            render::status(out, format, &s).map_err(out_err)?;
            Ok(exit::OK)
        }
        Answer::SetGrace { grace_period_ms } => {
            if format.is_json() {
                output::write_json(out, &serde_json::json!({ "grace_period_ms": grace_period_ms })).map_err(out_err)?;
            } else {
                writeln!(
                    out,
                    "grace period set to {}",
                    crate::error::fmt_duration(Duration::from_millis(grace_period_ms))
                )
                .map_err(out_err)?;
            }
            Ok(exit::OK)
        }
    }
}

/// `--cpu` and `--memory` of a shorthand pod: limits, requests equal to them.
fn shorthand_compute(cpu: Option<&str>, memory: Option<&str>) -> Result<topology::Compute> {
    let mut c = topology::Compute::default();
    if let Some(q) = cpu {
        let m = crate::kubelet_sim::topology::parse_cpu_millis(&serde_json::Value::String(q.into()))
            .ok_or_else(|| Error::invalid(format!("--cpu {q}"), "not a CPU quantity (e.g. 2, 500m, 1.5)"))?;
        c.cpu_limit_millis = Some(m);
    }
    if let Some(q) = memory {
        let b = crate::kubelet_sim::topology::parse_bytes(&serde_json::Value::String(q.into()))
            .ok_or_else(|| Error::invalid(format!("--memory {q}"), "not a memory quantity (e.g. 1Gi, 512Mi)"))?;
        c.memory_limit = Some(b);
    }
    Ok(c)
}
