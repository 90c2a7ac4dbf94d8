//! `dpctl kubelet-sim`: run a simulated kubelet device manager in a
//! directory, or steer one that runs (admit, delete, restart, status,
//! set-grace) through its control socket.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::args::{DirArg, NumaPolicyArgs};
use crate::duration::parse as parse_duration;
use crate::error::Result;
use crate::kubelet_sim::control::{self, Request};
use crate::kubelet_sim::{KubeletSim, KubeletVersion, SimConfig, SimEvent, SimHandle, steer};
use crate::output::{Streams, kubelet_sim as render, out_err};
use crate::smoke::engine::{Engine, EngineKind};
use crate::smoke::isolate::Layout;
use crate::topology;
use tokio::sync::broadcast;

const EXAMPLES: &str = "\
Examples:
  dpctl kubelet-sim --dir /tmp/dp                          # serve kubelet.sock with a live view
  dpctl kubelet-sim --dir /tmp/dp -o json                  # one JSON event per line
  dpctl kubelet-sim --dir /tmp/dp --expect example.com/gpu=4 --timeout 30s   # pass/fail check
  dpctl kubelet-sim admit --dir /tmp/dp pod.yaml           # from another terminal
  dpctl kubelet-sim admit --dir /tmp/dp --allocate example.com/gpu=2
  dpctl kubelet-sim restart --dir /tmp/dp --wait 30s
  dpctl kubelet-sim restart-container --dir /tmp/dp ml/trainer main   # PreStartContainer again
  dpctl kubelet-sim --dir /tmp/dp --topology-manager-policy single-numa-node \\
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
/var/lib/kubelet/device-plugins is smoked with `dpctl smoke --isolate -- PLUGIN`.";

/// `--help`'s long text: examples, then where the versions and differences are.
fn sim_help() -> String {
    format!(
        "{EXAMPLES}\n\nWhat changes between the releases --kubelet-version plays, and where the sim differs from a \
         kubelet: dpctl help kubelet-versions (docs/kubelet-versions.md)."
    )
}

/// Be the kubelet's device manager in a directory: accept registrations on
/// kubelet.sock (validated, dialed back, options asked, ListAndWatch), admit
/// pods, restart like a kubelet, and serve PodResources from what it knows.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = sim_help())]
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
#[command(mut_args(super::args::dir_help(
    "The device-plugin directory: kubelet.sock, plugin sockets, the checkpoint"
)))]
pub struct ServeArgs {
    /// `--dir`.
    #[command(flatten)]
    pub dir: DirArg,
    /// Take over kubelet.sock (and the sim's other sockets) even when a live process answers on it,
    /// and delete every socket in --dir at start as a kubelet does. Without it (a deliberate
    /// difference from the kubelet) startup deletes only stale sockets (connecting is refused) and
    /// leaves live ones alone; `restart` deletes them all, like a restarting kubelet.
    #[arg(long)]
    pub force: bool,
    /// Report started at once but create kubelet.sock only this long after, as a kubelet whose
    /// device manager starts late: plugins that call Register once at start and give up never
    /// register (docs/kubelet-versions.md §10). A restart re-creates it just as late.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub kubelet_socket_delay: Duration,
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
    /// Serve these API objects (YAML or JSON: ResourceClaims, the Node, Pods, DeviceClasses,
    /// ResourceSlices) on loopback, as `dpctl apiserver` does, with its kubeconfig and record
    /// written in the kubelet's root (the parent of --registry-dir): point a helper-built DRA
    /// driver at ROOT/kubeconfig. `admit` looks the pod's claims up there; a claim given in the
    /// pod's manifest wins and is stored there first, so the driver reads the same claim.
    #[arg(long, value_name = "FILE", requires = "registry_dir")]
    pub api_objects: Option<PathBuf>,
    /// Read the claims `admit` looks up from this kubeconfig's API server instead of
    /// --api-objects (GET only, nothing written: no claim stored, no slice wiped). Plain HTTP only,
    /// e.g. `kubectl proxy` in front of a real cluster; an https:// server is refused.
    #[arg(long, value_name = "FILE", conflicts_with = "api_objects", requires = "registry_dir")]
    pub kubeconfig: Option<PathBuf>,
    /// A ResourceClaim in the pod's manifest without status.reservedFor counts as reserved for the
    /// pod (a convenience for hand-written manifests). Off by default, as the kubelet refuses to
    /// prepare a claim reserved for no pod: `pod <name> (<uid>) is not allowed to use ...`.
    #[arg(long, requires = "registry_dir")]
    pub assume_claims_reserved: bool,
    /// With --api-objects: how long a DRA driver has to register again after its last instance
    /// went before the sim deletes its ResourceSlices (the kubelet's fixed 30 s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s", requires = "api_objects")]
    pub dra_wiping_delay: Duration,
    /// How long Register keeps dialing the plugin's socket before it fails.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "10s")]
    pub dial_timeout: Duration,
    /// Deadline of GetDevicePluginOptions, GetPreferredAllocation and Allocate (the kubelet sets none).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "60s")]
    pub rpc_timeout: Duration,
    /// Do not read or write kubelet_internal_checkpoint.
    #[arg(long)]
    pub no_checkpoint: bool,
    /// The kubelet release to play: 1.26 … 1.37 or master (v1.30 and 1.30.7 mean 1.30).
    #[arg(long, value_name = "VERSION", default_value = crate::kubelet_version::NEWEST_NAME, value_parser = super::values::kubelet_version())]
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
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive)]
    pub timeout: Option<Duration>,
    /// Topology Manager, CPU manager and the simulated machine.
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Which kubelet serves --dir: sim (this process) or referee:PATH, the kubelet's own device
    /// manager, plugin manager, Topology Manager and PodResources server at --kubelet-version (a
    /// referee binary, or a directory of dpctl-referee-1.NN built by conformance/build.sh), run in a
    /// private mount namespace with --dir bound on /var/lib/kubelet/device-plugins. The steering
    /// commands (admit, delete, restart, restart-container, status) drive either.
    #[arg(long, value_name = "ENGINE", default_value = "sim")]
    pub engine: EngineKind,
}

/// The kubelet's Topology Manager and CPU manager flags, and the simulated machine.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Topology (the kubelet's flags)")]
pub struct TopologyArgs {
    /// `--topology-manager-policy` and `--numa-nodes`.
    #[command(flatten)]
    pub numa: NumaPolicyArgs,
    /// The kubelet's --topology-manager-scope.
    #[arg(long, value_parser = super::values::TOPOLOGY_SCOPES, value_name = "SCOPE", default_value = "container")]
    pub topology_manager_scope: topology::Scope,
    /// The kubelet's --topology-manager-policy-options, e.g. prefer-closest-numa-nodes=true,max-allowable-numa-nodes=16.
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = clap::value_parser!(topology::PolicyOptions))]
    pub topology_manager_policy_options: Option<topology::PolicyOptions>,
    /// The kubelet's --cpu-manager-policy (static: Guaranteed pods with integer CPU requests get exclusive CPUs).
    #[arg(long, value_parser = super::values::CPU_POLICIES, value_name = "POLICY", default_value = "none")]
    pub cpu_manager_policy: topology::CpuPolicy,
    /// The kubelet's --reserved-cpus (a CPU list, e.g. 0 or 0-1); the static policy needs at least one.
    #[arg(long, value_name = "CPUS", value_parser = topology::parse_cpu_list)]
    pub reserved_cpus: Option<std::collections::BTreeSet<u32>>,
    /// CPUs per NUMA node (node n holds CPUs n*N .. n*N+N-1).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub cpus_per_numa: usize,
    /// NUMA distances (rows by ';', values by ','), needed by prefer-closest-numa-nodes, e.g. 10,21;21,10.
    #[arg(long, value_name = "MATRIX", value_parser = topology::parse_distances)]
    pub numa_distances: Option<DistanceMatrix>,
}

/// `--numa-distances` parsed: one row per NUMA node. A named type, because
/// clap's derive takes a bare `Option<Vec<..>>` for a repeatable flag and
/// then panics reading the whole matrix back as one value.
pub type DistanceMatrix = Vec<Vec<u64>>;

impl TopologyArgs {
    /// The sim's configuration (checked when the sim starts).
    pub fn config(&self) -> topology::TopologyConfig {
        topology::TopologyConfig {
            policy: self.numa.topology_manager_policy,
            scope: self.topology_manager_scope,
            options: self.topology_manager_policy_options.clone().unwrap_or_default(),
            cpu_policy: self.cpu_manager_policy,
            reserved_cpus: self.reserved_cpus.clone().unwrap_or_default(),
            machine: topology::Machine {
                numa_nodes: self.numa.numa_nodes,
                cpus_per_numa: self.cpus_per_numa,
                distances: self.numa_distances.clone(),
            },
        }
    }
}

/// Which running sim.
#[derive(Debug, Args, Clone)]
#[command(mut_args(super::args::dir_help("The directory the sim serves")))]
pub struct SimTarget {
    /// `--dir`.
    #[command(flatten)]
    pub dir: DirArg,
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
    /// allocations, admit every pod again with its containers still running
    /// (1.27+ skips running containers; a completed init container's devices
    /// need their plugin back), and report which plugins registered again and
    /// how fast. Exit 1 when a plugin is not back or a pod is rejected.
    Restart {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// How long to wait for plugins to come back.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
        wait: Duration,
        /// How long after the new kubelet.sock the pods are admitted again; plugins that
        /// register within it are back in time [default: 0s, before any plugin].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
        readmit_after: Duration,
        /// Do not admit the pods again (they keep their devices unchecked): a sim-only
        /// choice, the kubelet always admits them again.
        #[arg(long, conflicts_with = "readmit_after")]
        no_readmit: bool,
    },
    /// Reboot the node: every container is gone, the checkpoint is kept, the
    /// kubelet starts on it (sockets deleted, a new kubelet.sock) and admits
    /// every pod again, one at a time; a pod admitted before its plugin is
    /// back fails with UnexpectedAdmissionError. Exit 1 when a pod is rejected.
    Reboot {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// Admit the pods again in this order (names or NAMESPACE/NAME, every admitted pod once)
        /// [default: admission order, as the kubelet's creation order].
        #[arg(long, value_delimiter = ',', value_name = "POD,...", conflicts_with = "seed")]
        order: Vec<String>,
        /// Admit the pods again in a random order made from SEED (reproducible).
        #[arg(long, value_name = "SEED")]
        seed: Option<u64>,
        /// How long after the new kubelet.sock the pods are admitted again; plugins that
        /// register within it are back in time [default: 0s, before any plugin].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
        readmit_after: Duration,
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
pub async fn run(args: KubeletSimArgs, s: &mut Streams<'_>) -> Result<u8> {
    let Some(cmd) = args.command else { return serve(args.serve, s).await };
    let (target, request) = match cmd {
        SimCommand::Admit { target, manifest, filename, allocate, name, namespace, cpu, memory, dry_run } => {
            let pod = match manifest.or(filename) {
                Some(path) => steer::read_manifest(&path)?,
                None => steer::Shorthand { allocate, name, namespace, cpu, memory }.pod()?,
            };
            (target, if dry_run { Request::DryRun { pod } } else { Request::Admit { pod } })
        }
        SimCommand::Delete { target, pod, namespace } => {
            let (namespace, name) = steer::pod_ref(pod, namespace);
            (target, Request::Delete { namespace, name })
        }
        SimCommand::Restart { target, wait, readmit_after, no_readmit } => {
            let readmit_after_ms = (!no_readmit).then(|| crate::text::millis(readmit_after));
            (target, Request::Restart { wait_ms: crate::text::millis(wait), readmit_after_ms, no_readmit })
        }
        SimCommand::RestartContainer { target, pod, container, namespace } => {
            let (namespace, name) = steer::pod_ref(pod, namespace);
            (target, Request::RestartContainer { namespace, name, container })
        }
        SimCommand::Reboot { target, order, seed, readmit_after } => {
            let order = match seed {
                Some(seed) => steer::seeded_reboot_order(&target.dir.dir, seed).await?,
                None => order,
            };
            (target, Request::Reboot { order, readmit_after_ms: crate::text::millis(readmit_after) })
        }
        SimCommand::Status { target } => (target, Request::Status),
        SimCommand::SetGrace { target, grace } => {
            (target, Request::SetGrace { grace_period_ms: crate::text::millis(grace) })
        }
    };
    let reply = control::call(&target.dir.dir, &request, request.deadline()).await?;
    render::steered(s, &reply)?;
    // The answer's own code, or the one the sim's error carries.
    Ok(match &reply {
        Ok(a) => a.exit_code(),
        Err(remote) => remote.exit_code,
    })
}

async fn serve(args: ServeArgs, s: &mut Streams<'_>) -> Result<u8> {
    if let EngineKind::Referee(_) = args.engine {
        return serve_referee(args, s).await;
    }
    if let EngineKind::Kubelet(_) = args.engine {
        return Err(crate::error::Error::invalid(
            "--engine",
            "kubelet-sim serve plays sim or referee:PATH; a real kubelet (kubelet:PATH) is run by dpctl smoke",
        ));
    }
    let expects = args.expect.iter().map(|s| steer::parse_expect(s)).collect::<Result<_>>()?;
    let mut config = SimConfig::new(args.dir.dir);
    config.set_kubelet_version(args.kubelet_version);
    config.emulate_cleanup = args.emulate_cleanup;
    config.force = args.force;
    config.kubelet_socket_delay = args.kubelet_socket_delay;
    config.grace_period = args.grace_period;
    config.podresources_socket =
        if args.no_podresources { None } else { args.podresources_socket.or(config.podresources_socket) };
    if args.no_rate_limit {
        config.podresources.rate_limit = None;
    }
    config.registry_dir = args.registry_dir;
    config.api_objects = args.api_objects;
    config.api_kubeconfig = args.kubeconfig;
    config.dra_wiping_delay =
        crate::duration::check(args.dra_wiping_delay).map_err(|e| crate::Error::invalid("--dra-wiping-delay", e))?;
    config.dial_timeout = args.dial_timeout;
    config.rpc_timeout = args.rpc_timeout;
    config.checkpoint = !args.no_checkpoint;
    config.adopt_checkpoint = args.adopt_checkpoint;
    config.assume_claims_reserved = args.assume_claims_reserved;
    config.topology = args.topology.config();
    config.tap = s.wire.clone();
    let sim = KubeletSim::start(config).await?;
    let view = ServeView { expects, timeout: args.timeout, live: s.progress };
    show_until_done(sim, view, s).await
}

/// What `kubelet-sim` (serving) waits for and how it shows events.
#[derive(Debug)]
pub struct ServeView {
    /// `--expect`: RESOURCE and the allocatable COUNT to wait for.
    pub expects: Vec<(String, usize)>,
    /// When to stop [default: never; with expectations: 30s, then exit 1].
    pub timeout: Option<Duration>,
    /// A live view on stderr instead of event lines (a terminal, no `-o json`).
    pub live: bool,
}

/// Runs the serving sim's view until Ctrl-C, `timeout` or, with
/// expectations, until they all hold: shows every event, then the verdict
/// (data: on stdout in every mode), and stops the sim. Returns the exit code
/// (1 when an expectation was not met in time).
async fn show_until_done(sim: SimHandle, view: ServeView, s: &mut Streams<'_>) -> Result<u8> {
    let mut rx = sim.events_from_start().unwrap_or_else(|| sim.subscribe());
    let expects = view.expects;
    let timeout = view.timeout.or_else(|| (!expects.is_empty()).then_some(Duration::from_secs(30)));
    let deadline = timeout.map(crate::duration::deadline);
    let mut display = if s.format.is_json() {
        render::EventDisplay::Json
    } else if view.live {
        render::EventDisplay::live(render::terminal_width())
    } else {
        render::EventDisplay::Lines
    };
    let (watcher, stop) = stop_on_signal();
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut code = crate::error::exit::OK;
    let mut dropped = 0u64;
    let result: Result<()> = async {
        loop {
            if !expects.is_empty() {
                let results = steer::expect_results(&expects, &sim.counts());
                if results.iter().all(|r| r.met) {
                    drain(&mut rx, &mut display, s, &sim)?;
                    return render::expect_verdict(s, results, true);
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
                    Ok(ev) => display.show(s.out, s.err, &|| sim.summary(), ev).map_err(out_err)?,
                    // Counted, and said once at the end: a line per lag would flood the slow output.
                    Err(broadcast::error::RecvError::Lagged(n)) => dropped += n,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
                _ = tick.tick() => display.tick(s.err, &|| sim.summary()).map_err(out_err)?,
                () = until => {
                    drain(&mut rx, &mut display, s, &sim)?;
                    if !expects.is_empty() {
                        code = crate::error::exit::CHECK_FAILED;
                        render::expect_verdict(s, steer::expect_results(&expects, &sim.counts()), false)?;
                    }
                    return Ok(());
                }
                _ = &mut stop => return Ok(()),
            }
        }
    }
    .await;
    watcher.abort();
    let stopped = sim.stop().await;
    if crate::output::fd::stop_requested() && result.as_ref().is_err_and(crate::Error::is_closed_output) {
        // Stopped by a signal while nobody read the output: the sockets are
        // gone; there is no one to show the rest to.
        return stopped.map(|()| code);
    }
    drain(&mut rx, &mut display, s, &sim)?;
    display.finish(s.err, &|| sim.summary()).map_err(out_err)?;
    if dropped > 0 {
        s.note(format!(
            "dpctl: {} dropped (the output was too slow)",
            crate::text::count(dropped, "event was", "events were")
        ))?;
    }
    result?;
    stopped?;
    Ok(code)
}

/// The signal is awaited by a task of its own: when a write blocks on a
/// stdout nobody reads, the view's loop cannot see the signal, so the task
/// also tells the output to give up (`output::fd`), which ends the write.
/// The task, and what resolves once the signal came.
fn stop_on_signal() -> (tokio::task::JoinHandle<()>, tokio::sync::oneshot::Receiver<()>) {
    let (stop_tx, stop) = tokio::sync::oneshot::channel::<()>();
    let signalled = crate::signal::shutdown();
    let watcher = tokio::spawn(async move {
        signalled.await;
        crate::output::fd::request_stop();
        let _ = stop_tx.send(());
    });
    (watcher, stop)
}

/// Shows the events already queued.
fn drain(
    rx: &mut broadcast::Receiver<SimEvent>,
    display: &mut render::EventDisplay,
    s: &mut Streams<'_>,
    sim: &SimHandle,
) -> Result<()> {
    loop {
        match rx.try_recv() {
            Ok(ev) => display.show(s.out, s.err, &|| sim.summary(), ev).map_err(out_err)?,
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return Ok(()),
        }
    }
}

/// The sim's options a referee has no equivalent for: they are refused, not ignored.
fn sim_only_options(args: &ServeArgs) -> Vec<&'static str> {
    let mut out = Vec::new();
    let given = [
        (args.force, "--force"),
        (args.grace_period != crate::kubelet_sim::DEFAULT_GRACE_PERIOD, "--grace-period"),
        (args.podresources_socket.is_some(), "--podresources-socket"),
        (args.no_podresources, "--no-podresources"),
        (args.no_rate_limit, "--no-rate-limit"),
        (args.no_checkpoint, "--no-checkpoint"),
        (args.emulate_cleanup, "--emulate-cleanup"),
        (args.adopt_checkpoint, "--adopt-checkpoint"),
        (args.assume_claims_reserved, "--assume-claims-reserved"),
        (!args.expect.is_empty(), "--expect"),
        (args.api_objects.is_some(), "--api-objects"),
        (args.kubeconfig.is_some(), "--kubeconfig"),
        (args.dra_wiping_delay != crate::kubelet_sim::DEFAULT_DRA_WIPING_DELAY, "--dra-wiping-delay"),
    ];
    for (set, name) in given {
        if set {
            out.push(name);
        }
    }
    out
}

/// `kubelet-sim --engine referee:PATH`: a referee serves --dir in the
/// foreground until Ctrl-C, SIGTERM or --timeout (or until it exits).
async fn serve_referee(args: ServeArgs, s: &mut Streams<'_>) -> Result<u8> {
    let sim_only = sim_only_options(&args);
    if !sim_only.is_empty() {
        return Err(crate::Error::invalid(
            "--engine referee",
            format!(
                "{} not with a referee: it runs the kubelet's own code, whose grace period, checkpoint, \
                 cleanup and PodResources socket are the kubelet's (see conformance/README.md)",
                sim_only.join(", ")
            ),
        ));
    }
    let dir = args.dir.dir;
    if !std::fs::metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(crate::Error::invalid(format!("--dir {}", dir.display()), "not an existing directory"));
    }
    let mut layout = Layout::create(Some(&dir))?;
    let mut guard = crate::paths::RemoveDirOnDrop::new(Some(layout.root.clone()));
    if let Some(r) = args.registry_dir {
        if !std::fs::metadata(&r).is_ok_and(|m| m.is_dir()) {
            return Err(crate::Error::invalid(format!("--registry-dir {}", r.display()), "not an existing directory"));
        }
        layout.plugins_registry = r;
    }
    let control_dir = dir.join(".dpctl");
    let control_dir_was_there = control_dir.exists();
    let mut config = SimConfig::new(&dir);
    config.set_kubelet_version(args.kubelet_version);
    config.topology = args.topology.config();
    let signalled = crate::signal::shutdown();
    let engine = Engine::start(&args.engine, config, &layout, None).await?;
    let view = render::RefereeView {
        engine: engine.name().to_string(),
        dir: dir.clone(),
        podresources_socket: layout.podresources_socket(),
        registry_dir: layout.plugins_registry.clone(),
    };
    render::referee_serving(s, &view).map_err(render_err)?;
    let deadline = args.timeout.map(crate::duration::deadline);
    let died = tokio::select! {
        () = signalled => false,
        () = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => false,
        () = engine.exited() => true,
    };
    let tail = engine.output_tail();
    engine.stop().await?;
    guard.disarm();
    layout.remove();
    if !control_dir_was_there {
        // The referee made it for its control socket; only an empty one goes.
        let _ = std::fs::remove_dir(&control_dir);
    }
    if died {
        return Err(crate::Error::invalid(engine.name(), format!("the referee exited on its own; {tail}")));
    }
    render::referee_stopped(s, &view).map_err(render_err)?;
    Ok(crate::error::exit::OK)
}

fn render_err(e: std::io::Error) -> crate::Error {
    crate::Error::io("writing the output", e)
}

#[cfg(test)]
mod tests {
    use crate::cli::Cli;
    use clap::Parser;

    /// A bad `--kubelet-version` (docs/kubelet-versions.md: the sim plays 1.26 … 1.37
    /// and master) is named once by clap, followed by the valid list.
    #[test]
    fn a_bad_kubelet_version_names_the_flag_once_and_the_valid_list() {
        for (cmd, rest) in [("kubelet-sim", &[][..]), ("doctor", &[]), ("smoke", &["--", "true"])] {
            let argv = [&["dpctl", cmd, "--kubelet-version", "1.25"][..], rest].concat();
            let e = Cli::try_parse_from(argv).unwrap_err().to_string();
            assert!(e.contains("invalid value '1.25' for '--kubelet-version <VERSION"), "{e}");
            assert!(e.contains("': not a kubelet version dpctl plays; valid: 1.26, 1.27"), "{e}");
        }
        // One bad entry of smoke's list, and an empty one.
        let e = Cli::try_parse_from(["dpctl", "smoke", "--kubelet-version", "1.36,1.99", "--", "true"]).unwrap_err();
        assert!(e.to_string().contains("invalid value '1.36,1.99' for '--kubelet-version <VERSION,...>'"), "{e}");
        let e = Cli::try_parse_from(["dpctl", "smoke", "--kubelet-version", "1.36,", "--", "true"]).unwrap_err();
        assert!(e.to_string().contains("an empty entry in the list"), "{e}");
    }
}
