//! `dpctl smoke -- COMMAND...`: run a vendor's plugin against a fresh
//! kubelet-sim and check it end to end; the report goes to stdout (table or
//! JSON) and optionally to a JUnit file, the narration to stderr.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::args::{NumaPolicyArgs, help_for};
use super::junit::JunitFile;
use crate::check::{Case, CheckId};
use crate::duration::parse as parse_duration;
use crate::error::Result;
use crate::kubelet_sim::KubeletVersion;
use crate::kubelet_sim::Via;
use crate::output::{Streams, smoke as render};
use crate::smoke::engine::{EngineKind, referee_binary, referee_version};
use crate::smoke::{self, SmokeConfig, StepId};

/// `dpctl smoke` arguments (the one-line help is on `Command::Smoke`).
#[derive(Debug, Args)]
#[command(after_long_help = smoke_help())]
#[command(mut_args(help_for(
    "topology_manager_policy",
    "Admit the test pod under this Topology Manager policy (the kubelet's --topology-manager-policy)"
)))]
#[command(mut_args(help_for(
    "numa_nodes",
    "NUMA nodes of the simulated machine (devices on other nodes never align)"
)))]
pub struct SmokeArgs {
    /// The plugin's command line, after `--`. `{dir}` (the device-plugin
    /// directory) and `{kubelet_socket}` are replaced in every argument; the
    /// plugin also gets them as DPCTL_SMOKE_DIR and DPCTL_KUBELET_SOCKET.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Use this device-plugin directory instead of a fresh one under /tmp
    /// (it is kept; only the sim's sockets are removed).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Keep the fresh directory afterwards (checkpoint, leftover sockets).
    #[arg(long)]
    pub keep: bool,
    /// The resource to test when the plugin registers several [default: the first to register].
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// How long the plugin may take to start and register.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "20s")]
    pub register_timeout: Duration,
    /// The check suite's deadlines.
    #[command(flatten)]
    pub timeouts: super::check::CheckTimeouts,
    /// Devices the test pod asks for (0: no pod).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub request: u64,
    /// How long after a kubelet restart the plugin may take to register again.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub restart_deadline: Duration,
    /// Restart the kubelet N times in the kubelet-restart step; the step reports how many the plugin
    /// came back from, e.g. "re-registered 29/30 (3.3% flaky)", and fails on any miss.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub restarts: u32,
    /// health-recovery: shell command (sh -c, {dir} and {kubelet_socket} replaced, the plugin's
    /// environment) that makes a device fail; with dpctl's mock plugin none is needed.
    #[arg(long, value_name = "CMD", requires = "recover_command")]
    pub fault_command: Option<String>,
    /// health-recovery: shell command that clears the fault --fault-command made.
    #[arg(long, value_name = "CMD", requires = "fault_command")]
    pub recover_command: Option<String>,
    /// Create kubelet.sock only this long after the sim has started (the plugin starts before it,
    /// as on a node whose kubelet is slow to start its device manager): a plugin must retry
    /// Register or watch for kubelet.sock.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub late_kubelet_socket: Duration,
    /// health-recovery: how long the fault may take to show, and its clearance to restore allocatable.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub recovery_deadline: Duration,
    /// How long the same plugin process is watched after a kubelet restart and after a node reboot
    /// before the steps on it are judged: a process that exits (a panic some seconds after the
    /// restart) within it fails the step.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub settle: Duration,
    /// `--topology-manager-policy` and `--numa-nodes`.
    #[command(flatten)]
    pub numa: NumaPolicyArgs,
    /// How long the plugin may take to exit after SIGTERM before it gets SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub grace: Duration,
    /// Run only these steps and checks (comma-separated names; see below); launch, registration and
    /// shutdown always run.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", value_parser = super::values::smoke_only_names())]
    pub only: Vec<String>,
    /// Leave out these steps or checks (comma-separated names; see below).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", value_parser = super::values::smoke_skip_names())]
    pub skip: Vec<String>,
    /// Print only what two runs of the same plugin agree on (per release: each step's name and
    /// outcome, the totals; no evidence, pids, paths or times), as JSON (YAML with -o yaml), for
    /// diffing against a committed baseline.
    #[arg(long)]
    pub stable: bool,
    /// Also write the report as JUnit XML to FILE (testsuite "dpctl smoke").
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write each plugin process's whole output to DIR/STEP.stdout.log and DIR/STEP.stderr.log, STEP
    /// being the step that started it (launch, node-reboot, plugin-restart); the report keeps the
    /// last 64 KiB of each.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Copy the plugin's output to stderr as it runs.
    #[arg(long)]
    pub show_output: bool,
    /// Run the plugin unmodified in a private mount namespace where the sim's fresh directories are
    /// bind-mounted at /var/lib/kubelet/device-plugins, /var/lib/kubelet/plugins_registry and
    /// /var/lib/kubelet/pod-resources (the host's mounts never change; see below).
    #[arg(long)]
    pub isolate: bool,
    /// With --isolate: also bind-mount SRC (a host path) at DST inside the namespace, e.g. a CDI
    /// spec directory, a fake /dev tree or a config file (repeatable).
    #[arg(long, value_name = "SRC:DST", requires = "isolate", value_parser = smoke::isolate::parse_bind)]
    pub bind: Vec<smoke::isolate::Bind>,
    /// How the plugin must register: on kubelet.sock, through plugins_registry (the plugin
    /// watcher's GetInfo), or auto (whichever it does; the report says which).
    #[arg(long, value_name = "WAY", default_value = "auto", value_parser = super::values::offering(
        |s: &str| smoke::parse_registration(s).map(Registration), &["auto", "kubelet-sock", "plugins-registry"]))]
    pub registration: Registration,
    /// The kubelet release(s) to play, comma-separated (1.26 … 1.37, master) or a range (1.28-1.37 or
    /// 1.28..1.37: every release in between): the whole smoke runs once per release, and the report
    /// says which ones the plugin passes.
    #[arg(long, value_name = "VERSION,...", default_value = crate::kubelet_version::NEWEST_NAME, value_parser = super::values::kubelet_versions())]
    pub kubelet_version: String,
    /// Which kubelet the plugin meets: sim (kubelet-sim, in-process) or referee:PATH, the kubelet's
    /// own device manager, plugin manager and Topology Manager at one release (a referee binary, or a
    /// directory of dpctl-referee-1.NN binaries built by conformance/build.sh: with a directory,
    /// --kubelet-version picks dpctl-referee-1.NN per release). The referee runs in a private mount
    /// namespace on the kubelet's standard paths (see below). kubelet:PATH: a real kubelet (a binary,
    /// or a directory of kubelet-1.NN built by conformance/build.sh kubelet, with pause.tar and
    /// busybox.tar beside it) with containerd and runc, as root, in private namespaces: pods run as
    /// real containers and each one is checked from inside for what the plugin's Allocate promised.
    #[arg(long, value_name = "ENGINE", default_value = "sim")]
    pub engine: EngineKind,
}

/// `--registration`: `None` is auto.
#[derive(Debug, Clone, Copy)]
pub struct Registration(pub Option<Via>);

/// Runs `dpctl smoke`.
pub async fn run(args: SmokeArgs, s: &mut Streams<'_>) -> Result<u8> {
    let versions = KubeletVersion::parse_list(&args.kubelet_version)?;
    let (skip_steps, skip_checks) = smoke::select(&args.only, &args.skip)?;
    if let EngineKind::Referee(path) = &args.engine {
        // Every release's referee is found and answers its version before
        // anything runs: a missing one is bad input now, not after an hour.
        for v in &versions {
            referee_version(&referee_binary(path, *v)?, *v).await?;
        }
    }
    if let EngineKind::Kubelet(path) = &args.engine {
        for v in &versions {
            smoke::node::kubelet_binary(path, &v.numbered())?;
        }
    }
    let config = SmokeConfig {
        command: args.command,
        dir: args.dir,
        keep: args.keep,
        resource: args.resource,
        register_timeout: args.register_timeout,
        first_list_timeout: args.timeouts.first_list_timeout,
        request: args.request,
        restart_deadline: args.restart_deadline,
        restarts: args.restarts,
        fault_command: args.fault_command,
        recover_command: args.recover_command,
        recovery_deadline: args.recovery_deadline,
        settle: args.settle,
        late_kubelet_socket: args.late_kubelet_socket,
        grace: args.grace,
        prestart_timeout: args.timeouts.prestart_timeout,
        stream_window: args.timeouts.stream_window,
        skip_steps,
        skip_checks,
        only: !args.only.is_empty(),
        log_dir: args.log_dir,
        forward_output: args.show_output && !s.quiet,
        registration: args.registration.0,
        isolate: args.isolate.then_some(smoke::isolate::IsolateConfig {
            binds: args.bind,
            helper: None,
            pid_namespace: false,
            shared: Vec::new(),
            read_only_root: false,
        }),
        topology: crate::topology::TopologyConfig {
            policy: args.numa.topology_manager_policy,
            machine: crate::topology::Machine {
                numa_nodes: args.numa.numa_nodes,
                ..crate::topology::TopologyConfig::default().machine
            },
            ..Default::default()
        },
        engine: args.engine,
        tap: s.wire.clone(),
        ..SmokeConfig::default()
    };
    run_smoke(s, config, &versions, args.junit.as_deref(), args.stable).await
}

/// Runs the smoke once per release in `versions`: checks the inputs, opens
/// the JUnit file (so a bad path is reported before anything runs), narrates
/// on stderr (a spinner on a terminal), then writes the JUnit file and the
/// report (one run's, or the matrix). Returns the exit code.
async fn run_smoke(
    io: &mut Streams<'_>,
    config: SmokeConfig,
    versions: &[KubeletVersion],
    junit: Option<&std::path::Path>,
    stable: bool,
) -> Result<u8> {
    config.check_inputs()?;
    let junit_file = JunitFile::create(junit)?;
    let bar = crate::output::progress_bar(io.progress, None, "{spinner} {elapsed} {msg}");
    let many = versions.len() > 1;
    // Each step is shown once: in the report on stdout, or (JSON on stdout) as narration on stderr.
    let steps = io.format.is_json() || stable;
    let whole = !io.err_is_tty;
    let mut narrator = render::Narrator::new(&mut *io.err, io.quiet, bar.as_ref(), many, steps, whole);
    let matrix = smoke::run_matrix(config, versions, crate::signal::shutdown(), &mut |mp| narrator.on(mp)).await;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let matrix = matrix?;
    if let Some(file) = junit_file {
        file.write(|w| render::junit_report(w, &matrix))?;
    }
    render::finished(io, &matrix, many, stable)?;
    super::junit::step_summary(&mut *io.err, |w| render::step_summary(w, &matrix))?;
    Ok(matrix.exit_code())
}

/// `--help`'s text after the options: steps, examples, placeholders,
/// `--isolate`, releases and exit codes.
fn smoke_help() -> String {
    format!(
        "Steps, in order: {} (the `plugin check` suite runs after registration-request: {}).\n\
         --only runs only the steps and checks it names (launch, registration and shutdown always run); --skip \
         takes any of them but those three; a name in both is refused.\n\n\
         Examples:\n  \
         dpctl smoke -- ./my-device-plugin --socket-dir {{dir}}\n  \
         dpctl smoke --junit smoke.xml --log-dir logs -- ./my-plugin --kubelet-socket {{kubelet_socket}}\n  \
         dpctl smoke --request 2 --restart-deadline 5s -- python3 plugin.py --dir {{dir}}\n  \
         dpctl smoke --isolate -- ./vendor-device-plugin            # uses /var/lib/kubelet/... as is\n  \
         dpctl smoke --isolate --bind ./cdi:/etc/cdi -- ./vendor-device-plugin\n  \
         dpctl smoke -- ./my-plugin --registry-dir {{registry_dir}}   # registers through plugins_registry\n  \
         dpctl smoke -- docker run --rm -v {{dir}}:/var/lib/kubelet/device-plugins:z IMAGE\n\n\
         Placeholders: {{dir}} (device-plugin directory), {{kubelet_socket}}, {{registry_dir}} (plugins_registry); \
         also in the environment as DPCTL_SMOKE_DIR, DPCTL_KUBELET_SOCKET, DPCTL_REGISTRY_DIR, and \
         DPCTL_PODRESOURCES_SOCKET. The sim accepts registrations on kubelet.sock and through its plugins_registry \
         directory; --registration insists on one.\n\n\
         --isolate runs the plugin on the kubelet's own paths without touching the host: dpctl help isolate.\n\n\
         dpctl smoke --kubelet-version 1.28,1.32,1.36 --junit smoke.xml -- ./my-plugin --socket-dir {{dir}}\n\
         dpctl smoke --kubelet-version 1.28-1.37 -- ./my-plugin --socket-dir {{dir}}   (1.28..1.37 too: all ten)\n\n\
         With several --kubelet-version values the whole smoke runs once per release against a fresh kubelet-sim \
         playing it (see dpctl kubelet-sim --help for what changes between releases); the table shows each \
         release's report and then one row per release, -o json gives {{\"passed\":[…],\"failed\":[…],\"runs\":[…]}}, \
         and the JUnit file has one <testsuite> per release. Exit 1 when any release fails.\n\n\
         dpctl smoke --engine referee:target/referee --kubelet-version 1.34,1.37 -- ./my-plugin --dir {{dir}}\n\n\
         --engine referee:PATH runs the same steps against the kubelet's own code: dpctl help engines.\n\n\
         The plugin runs in its own process group with stdin closed; it is stopped at the end whatever happens \
         (SIGTERM, --grace, SIGKILL; also on Ctrl-C), and the fresh directory is removed (unless --keep). \
         Progress goes to stderr, the report to stdout.\n\n\
         Exit codes:\n  \
         0  every step and check passed (or was skipped)\n  \
         1  a step or check failed (the report says which and why), or the run was interrupted\n  \
         2  bad usage (no command, unknown --only or --skip name, one name in both, unwritable --junit, a --dir a live kubelet serves), or \
         --isolate refused (the message says why and how to fix it), a referee missing, unusable or of \
         another release\n  \
         3  kubelet-sim could not bind its sockets (permissions, path too long)",
        StepId::names().join(", "),
        CheckId::names().join(", ")
    )
}

/// `dpctl help isolate`: how `--isolate` runs a plugin.
pub const ISOLATE_HELP: &str = "\
smoke --isolate: dpctl re-runs itself as a small helper that enters a new mount namespace (as root;
as another user, a user namespace too, where the kernel allows one), makes every mount private,
bind-mounts the sim's directories at the kubelet's paths, then execs the plugin. A mountpoint
missing on this machine (no /var/lib/kubelet) is made inside the namespace only, on a tmpfs copy
of its nearest existing parent with every entry bind-mounted back: nothing is created on the
host, nothing is left behind. The setup is tried before the sim starts; a refusal (no privilege,
AppArmor, a sysctl) exits 2 with the fix before the plugin starts. The report lists what was
mounted where.

Examples:
  dpctl smoke --isolate -- ./vendor-device-plugin
  dpctl smoke --isolate --bind ./cdi:/etc/cdi -- ./vendor-device-plugin";

/// `dpctl help engines`: the referee engine.
pub const ENGINE_HELP: &str = "\
--engine referee:PATH (smoke, kubelet-sim, scenario) runs the same steps against the kubelet's own
code (conformance/build.sh builds target/referee/dpctl-referee-1.NN; PATH is that directory, each
release picking its binary, or one binary). The referee runs in a private mount namespace on the
kubelet's paths (root, or a user namespace); the report names it with its exact version
(\"engine\": \"referee v1.37.2\"). What it cannot see (the RegisterRequest's options, a message's
size) the evidence says. A missing referee, one that cannot run or one of another release exits 2
before the plugin starts, with the build command.

Examples:
  dpctl smoke --engine referee:target/referee --kubelet-version 1.34,1.37 -- ./my-plugin --dir {dir}";
