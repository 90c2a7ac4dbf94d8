//! `dpctl smoke`: CI for a vendor's device plugin, without a cluster.
//!
//! [`run_smoke`] makes a fresh directory, starts a kubelet-sim there
//! (in-process), launches the vendor's command with `{dir}` and
//! `{kubelet_socket}` substituted ([`process`]), then takes the plugin through
//! what a kubelet does with it, as named steps with the same shape as
//! `dpctl plugin check` results ([`CheckResult`]): launch, registration, the
//! RegisterRequest's fields, the whole `plugin check` suite (fed with the
//! observed RegisterRequest), the first ListAndWatch message the kubelet got,
//! a health report, admission and deletion of a pod, a kubelet restart with re-registration,
//! and shutdown (SIGTERM, grace, SIGKILL). The plugin is stopped whatever
//! happens (an interrupt, an error, a panic), the sim's sockets are removed,
//! and the [`SmokeReport`] keeps the plugin's output.
//!
//! The plugin may register on kubelet.sock or through the sim's
//! plugins_registry directory (the plugin watcher's GetInfo and
//! NotifyRegistrationStatus); with `--isolate` ([`isolate`]) it runs in a
//! private mount namespace where the sim's directories sit at the kubelet's
//! standard paths.

pub mod dra;
pub mod engine;
pub(crate) mod harness;
pub mod isolate;
mod kubelet;
pub mod matrix;
pub mod node;
pub mod process;
mod steps;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::check::{Case, CaseInfo, CheckId, CheckResult, Totals, any_failure};
use crate::error::{Error, Result};
use crate::kubelet_sim::{KubeletVersion, SimConfig, Via};
pub use matrix::{MatrixReport, run_matrix};
pub use process::{ExitView, OutputView, PluginProcess, Stream};

/// The suite's name in reports and in JUnit's `<testsuite name>`.
pub const SUITE_NAME: &str = "dpctl smoke";

/// Environment variable the plugin gets: the device-plugin directory.
pub const ENV_SMOKE_DIR: &str = "DPCTL_SMOKE_DIR";
/// Environment variable the plugin gets: the kubelet socket.
pub const ENV_KUBELET_SOCKET: &str = "DPCTL_KUBELET_SOCKET";
/// Environment variable the plugin gets: the plugins_registry directory.
pub const ENV_REGISTRY_DIR: &str = "DPCTL_REGISTRY_DIR";

/// The smoke test's own steps (the `plugin check` suite runs between
/// [`StepId::RegistrationRequest`] and [`StepId::FirstSnapshot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepId {
    /// The command starts.
    Launch,
    /// Register on kubelet.sock is accepted in time.
    Registration,
    /// The RegisterRequest's version, resource name and endpoint are right.
    RegistrationRequest,
    /// The first ListAndWatch message reaches the kubelet.
    FirstSnapshot,
    /// Capacity and allocatable as the kubelet counts them.
    HealthReport,
    /// A pod asking for devices is admitted.
    Admission,
    /// The pod is deleted and its devices freed.
    PodDeletion,
    /// After a kubelet restart the plugin registers again in time.
    KubeletRestart,
    /// The plugin process restarted (not the kubelet): it registers again
    /// and the node's counts come back.
    PluginRestart,
    /// On the process that lived through the kubelet restart: a device
    /// fault, then its clearance, on the kubelet's new stream.
    HealthRecovery,
    /// On the same process: two changes in device count, each reaching the kubelet.
    DeviceRescan,
    /// A node reboot with a pod holding devices and the plugin back late:
    /// the kubelet's verdict on the pod, then the plugin and a new pod back.
    NodeReboot,
    /// SIGTERM stops the plugin within the grace period.
    Shutdown,
}

impl StepId {
    /// Every step, in run order.
    /// The steps on a process that lived through a kubelet restart come
    /// first; the fresh-process step (plugin-restart) after them.
    pub const ALL: [StepId; 13] = [
        StepId::Launch,
        StepId::Registration,
        StepId::RegistrationRequest,
        StepId::FirstSnapshot,
        StepId::HealthReport,
        StepId::Admission,
        StepId::PodDeletion,
        StepId::KubeletRestart,
        StepId::HealthRecovery,
        StepId::DeviceRescan,
        StepId::NodeReboot,
        StepId::PluginRestart,
        StepId::Shutdown,
    ];

    /// Steps `--skip` may leave out (the others everything depends on).
    pub fn skippable(self) -> bool {
        !matches!(self, StepId::Launch | StepId::Registration | StepId::Shutdown)
    }
}

impl Case for StepId {
    fn all() -> &'static [Self] {
        &StepId::ALL
    }

    // long: one CaseInfo per step (name, why it matters, the rule), the texts the reports show.
    fn info(self) -> CaseInfo {
        match self {
            StepId::Launch => CaseInfo {
                name: "launch",
                reason: "the command your DaemonSet runs must start and keep running",
                rule: "the command starts (found, executable) and does not exit on its own",
            },
            StepId::Registration => CaseInfo {
                name: "registration",
                reason: "until Register on kubelet.sock succeeds the kubelet does not know the plugin and the resource never appears",
                rule: "serve the plugin socket first, then call Register(version v1beta1, resource_name, endpoint) on \
                 <dir>/kubelet.sock; since 1.25 the kubelet dials the endpoint back and calls GetDevicePluginOptions \
                 inside Register (10 s dial timeout), and any error rejects the registration",
            },
            StepId::RegistrationRequest => CaseInfo {
                name: "registration-request",
                reason: "the kubelet joins the endpoint to its directory and turns the resource name into a node resource",
                rule: "version is v1beta1; resource_name is an extended resource name (<domain>/<name>, not in \
                 kubernetes.io); endpoint is a bare file name in the device-plugin directory (the kubelet uses \
                 filepath.Join(dir, endpoint)); Register called once per kubelet start (1.37+ refuse a second \
                 client at a live socket)",
            },
            StepId::FirstSnapshot => CaseInfo {
                name: "first-snapshot",
                reason: "until the first ListAndWatch message arrives the node has no capacity for the resource",
                rule: "on the ListAndWatch stream the kubelet opens after registration, send the full device list at once",
            },
            StepId::HealthReport => CaseInfo {
                name: "health-report",
                reason: "the scheduler sees capacity (every device) and allocatable (devices whose health is exactly Healthy)",
                rule: "every device's health is exactly \"Healthy\" or \"Unhealthy\", IDs are unique, and ListAndWatch stays open",
            },
            StepId::Admission => CaseInfo {
                name: "admission",
                reason: "a pod asking for the resource starts only if GetPreferredAllocation (when advertised), Allocate and \
                 PreStartContainer (when required) all work",
                rule: "GetPreferredAllocation (when advertised, asked only while devices are still needed after \
                 init-container reuse) and Allocate answer the kubelet's one-container request (it reads only the \
                 first response; none at all rejects the pod), PreStartContainer (when required) within 30 s; an \
                 error rejects the pod with UnexpectedAdmissionError; kubelets 1.26-1.27 drop cdi_devices and 1.28 \
                 passes them to the runtime only with its alpha gate DevicePluginCDIDevices (off by default), so \
                 there an Allocate answer with nothing else gives the container nothing and fails",
            },
            StepId::PodDeletion => CaseInfo {
                name: "pod-deletion",
                reason: "a deleted pod's devices must become allocatable again",
                rule: "after the pod is deleted its devices are free for the next pod",
            },
            StepId::KubeletRestart => CaseInfo {
                name: "kubelet-restart",
                reason: "a kubelet restart (upgrade, crash, config change) deletes every socket in the directory; a plugin that \
                 does not register again loses its resource",
                rule: "notice kubelet.sock being re-created (watch the directory), serve the plugin socket again (the kubelet \
                 deleted it), call Register again and send the device list, within the deadline; the same process is \
                 still running at the end of the settle window (--settle)",
            },
            StepId::PluginRestart => CaseInfo {
                name: "plugin-restart",
                reason: "a DaemonSet rollout or a crash restarts the plugin while the kubelet runs on; until the new \
                 process registers, the resource's allocatable stays 0",
                rule: "the old process ends on SIGTERM within --grace; a new plugin process serves its socket again \
                 (replacing the old one's), calls Register and sends the full list: the same device IDs, capacity and \
                 allocatable as before the restart, within the restart deadline",
            },
            StepId::HealthRecovery => CaseInfo {
                name: "health-recovery",
                reason: "a device that turns Unhealthy and recovers must be sent as Healthy again, or the node keeps \
                 one device less until the plugin restarts; a plugin that kept its old stream's goroutine after a \
                 kubelet restart sends neither to the kubelet's new stream",
                rule: "on the process that lived through the kubelet restart, on the kubelet's new stream: after a \
                 fault (--fault-command, or the mock's own switch) allocatable drops; after its clearance \
                 (--recover-command, run whenever the fault command ran) ListAndWatch sends the device Healthy \
                 again and allocatable is restored within --recovery-deadline",
            },
            StepId::DeviceRescan => CaseInfo {
                name: "device-rescan",
                reason: "devices come and go (hot-plug, a driver reload, a GPU lost off the bus); a rescan loop that \
                 stops after a change or two leaves the node advertising hardware it no longer has",
                rule: "on the process that lived through the kubelet restart: a device added, then removed (two \
                 changes in device count), each reaches the kubelet as capacity within --recovery-deadline",
            },
            StepId::NodeReboot => CaseInfo {
                name: "node-reboot",
                reason: "after a node reboot the kubelet admits its pods again, often before the plugin is back, and \
                 rejects those asking for its devices with UnexpectedAdmissionError, for good (kubernetes #125579)",
                rule: "the report gives the kubelet's verdict on a pod admitted again before the plugin is back; the \
                 old process ends on SIGTERM within --grace; the plugin, started again late, registers and sends its \
                 whole list (the same device IDs the checkpoint names) within the restart deadline, is still running \
                 after the settle window, streams a fault and its recovery and two changes in device count, and a \
                 new pod is admitted on it",
            },
            StepId::Shutdown => CaseInfo {
                name: "shutdown",
                reason: "DaemonSet updates and node drains stop the plugin with SIGTERM; it should exit promptly and remove its socket",
                rule: "on SIGTERM, exit within the grace period; removing the plugin socket on the way out keeps the \
                 directory clean",
            },
        }
    }
}

/// The step added when processes outlive the plugin (a kubelet stopping the
/// pod would leave them running on the node); it
/// reports only failures, so it is not one of [`StepId::ALL`].
pub const LEAVES_NO_PROCESSES: CaseInfo = CaseInfo {
    name: "plugin-leaves-no-processes",
    reason: "a plugin that daemonises keeps running after the kubelet (or its pod) stops it",
    rule: "the plugin must run in the foreground: every process it starts ends with it",
};

/// The kind of a result by its name: `smoke` (a step) or `check` (from the
/// `plugin check` suite).
pub fn kind_of(name: &str) -> &'static str {
    if CheckId::from_name(name).is_some() { "check" } else { "smoke" }
}

/// The steps and checks `--only` and `--skip` leave out, as
/// `(steps, checks)`: the same rules as `plugin check`'s (one parser for
/// both flags, [`crate::check::select`]'s errors). `--only` names the steps
/// and checks to run (launch, registration and shutdown always run: the
/// others need them); `--skip` those to leave out (any but those three); a
/// name in both is refused.
pub fn select(only: &[String], skip: &[String]) -> Result<(Vec<StepId>, Vec<CheckId>)> {
    let only = parse_names("--only", only)?;
    let skip = parse_names("--skip", skip)?;
    if let Some(both) = skip.iter().find(|n| only.contains(n)) {
        return Err(Error::invalid(
            "--skip",
            format!("{both:?} is in --only too; name it in one of them (--only runs only what it names)"),
        ));
    }
    let left_out = |name: &str| if only.is_empty() { skip.contains(&name) } else { !only.contains(&name) };
    let steps = StepId::ALL.into_iter().filter(|s| s.skippable() && left_out(s.name())).collect();
    let checks = CheckId::ALL.into_iter().filter(|c| left_out(c.name())).collect();
    Ok((steps, checks))
}

/// The names given to `flag` (`--only` or `--skip`), each a step or a check
/// (`--skip`: a step that can be skipped; a retired check is already not run).
fn parse_names(flag: &str, names: &[String]) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for n in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if let Some(s) = StepId::from_name(n) {
            if flag == "--skip" && !s.skippable() {
                return Err(Error::invalid(flag, format!("{n:?} cannot be skipped: the other steps need it")));
            }
            out.push(s.name());
        } else if let Some(c) = CheckId::from_name(n) {
            out.push(c.name());
        } else if let Some(why) = crate::check::retired(n) {
            if flag == "--only" {
                return Err(Error::invalid(flag, format!("check {n:?} was {why}")));
            }
        } else {
            let valid: Vec<&str> = StepId::ALL
                .iter()
                .filter(|s| flag == "--only" || s.skippable())
                .map(|s| s.name())
                .chain(CheckId::names())
                .collect();
            return Err(Error::invalid(flag, format!("unknown step or check {n:?}; valid: {}", valid.join(", "))));
        }
    }
    Ok(out)
}

/// How to run a smoke test.
#[derive(Debug, Clone)]
pub struct SmokeConfig {
    /// The plugin's command line; `{dir}` and `{kubelet_socket}` are substituted.
    pub command: Vec<String>,
    /// The device-plugin directory; `None`: a fresh one under /tmp, removed afterwards.
    pub dir: Option<PathBuf>,
    /// Keep a directory dpctl created (with the checkpoint) instead of removing it.
    pub keep: bool,
    /// The resource to test when the plugin registers several (default: the first).
    pub resource: Option<String>,
    /// How long the plugin may take to register.
    pub register_timeout: Duration,
    /// How long the first ListAndWatch message may take after registration.
    pub first_list_timeout: Duration,
    /// Devices the test pod asks for (0: no admission).
    pub request: u64,
    /// How long after a kubelet restart the plugin may take to register again.
    pub restart_deadline: Duration,
    /// Kubelet restarts in the kubelet-restart step (`--restarts`, at least 1).
    pub restarts: u32,
    /// Shell command that makes a device fail (health-recovery).
    pub fault_command: Option<String>,
    /// Shell command that clears the fault (health-recovery).
    pub recover_command: Option<String>,
    /// How long a fault may take to show and its clearance to restore allocatable.
    pub recovery_deadline: Duration,
    /// How long the same process is watched after a kubelet restart or a
    /// node reboot before the steps on it are judged (`--settle`).
    pub settle: Duration,
    /// Create kubelet.sock this long after the plugin starts (`--late-kubelet-socket`).
    pub late_kubelet_socket: Duration,
    /// How long the plugin may take to exit after SIGTERM.
    pub grace: Duration,
    /// The kubelet's PreStartContainer deadline (30 s).
    pub prestart_timeout: Duration,
    /// How long the check suite watches the ListAndWatch stream stay open.
    pub stream_window: Duration,
    /// Steps to leave out.
    pub skip_steps: Vec<StepId>,
    /// Checks to leave out.
    pub skip_checks: Vec<CheckId>,
    /// The steps and checks left out are those `--only` did not name (the
    /// evidence says so), not those `--skip` named.
    pub only: bool,
    /// Write the plugin's whole output to files here.
    pub log_dir: Option<PathBuf>,
    /// Report each line of the plugin's output as progress.
    pub forward_output: bool,
    /// Bytes of each output stream kept in the report.
    pub output_limit: usize,
    /// The way the plugin must register (`None`: either, detected).
    pub registration: Option<Via>,
    /// Run the plugin in a private mount namespace (`--isolate`).
    pub isolate: Option<isolate::IsolateConfig>,
    /// The kubelet release the sim plays.
    pub kubelet_version: KubeletVersion,
    /// The sim's Topology Manager policy and machine (admission under each policy).
    pub topology: crate::topology::TopologyConfig,
    /// Which kubelet answers: the in-process sim or a referee (`--engine`).
    pub engine: engine::EngineKind,
    /// The dpctl executable a referee's namespace helper is (default: this one).
    pub helper: Option<PathBuf>,
    /// Where to report each gRPC call the sim and the check suite make to the plugin (`-v`).
    pub tap: Option<crate::transport::Tap>,
}

impl SmokeConfig {
    /// The evidence of a step or check left out: `skipped with --skip`, or
    /// `skipped: not named in --only`.
    pub fn left_out(&self) -> &'static str {
        if self.only { "skipped: not named in --only" } else { "skipped with --skip" }
    }

    /// Checks what can be checked before anything runs: the resource name,
    /// and that the log directory exists or can be made.
    pub fn check_inputs(&self) -> Result<()> {
        if let Some(r) = &self.resource
            && let Some(why) = crate::validate::explain_resource_name(r)
        {
            return Err(Error::invalid("--resource", why));
        }
        // The referee runs the kubelet's own device manager, which creates
        // kubelet.sock as it starts: a late socket would not be played, and a
        // plugin that gives up at once would pass.
        if !self.late_kubelet_socket.is_zero() && matches!(self.engine, engine::EngineKind::Referee(_)) {
            return Err(Error::invalid(
                "--late-kubelet-socket",
                "the referee creates kubelet.sock as the kubelet's device manager starts, so a late socket cannot be \
                 played on it; hint: run --late-kubelet-socket on --engine sim",
            ));
        }
        if let Some(dir) = &self.log_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::invalid("--log-dir", format!("cannot create directory {}: {e}", dir.display())))?;
        }
        Ok(())
    }
}

/// Parses `--registration`: `auto` (`None`: either way, detected),
/// `kubelet-sock` or `plugins-registry`.
pub fn parse_registration(s: &str) -> std::result::Result<Option<Via>, String> {
    match s {
        "auto" => Ok(None),
        "kubelet-sock" | "kubelet.sock" => Ok(Some(Via::KubeletSock)),
        "plugins-registry" | "plugins_registry" => Ok(Some(Via::PluginsRegistry)),
        other => Err(format!("{other:?}: use auto, kubelet-sock or plugins-registry")),
    }
}

impl Default for SmokeConfig {
    fn default() -> Self {
        SmokeConfig {
            command: Vec::new(),
            dir: None,
            keep: false,
            resource: None,
            register_timeout: Duration::from_secs(20),
            first_list_timeout: Duration::from_secs(5),
            request: 1,
            restart_deadline: Duration::from_secs(10),
            restarts: 1,
            fault_command: None,
            recover_command: None,
            recovery_deadline: Duration::from_secs(10),
            settle: Duration::from_secs(5),
            late_kubelet_socket: Duration::ZERO,
            grace: Duration::from_secs(5),
            prestart_timeout: crate::kubelet_sim::DEFAULT_PRE_START_TIMEOUT,
            stream_window: Duration::from_secs(2),
            skip_steps: Vec::new(),
            skip_checks: Vec::new(),
            only: false,
            log_dir: None,
            forward_output: false,
            output_limit: 64 * 1024,
            registration: None,
            isolate: None,
            kubelet_version: KubeletVersion::DEFAULT,
            topology: crate::topology::TopologyConfig::default(),
            engine: engine::EngineKind::Sim,
            helper: None,
            tap: None,
        }
    }
}

/// What a running smoke test reports as it goes (for narration).
#[derive(Debug, Clone)]
pub enum SmokeProgress {
    /// The kubelet (sim or referee) serves its sockets.
    SimReady {
        /// The device-plugin directory.
        dir: PathBuf,
        /// kubelet.sock.
        kubelet_socket: PathBuf,
        /// What answers: `kubelet-sim` or `referee v1.N.P`.
        engine: String,
    },
    /// The plugin's namespace was checked (`--isolate`): what is mounted where.
    Isolated(isolate::IsolationReport),
    /// The plugin was started.
    Launched {
        /// Its process ID.
        pid: u32,
        /// The command line, substituted.
        command: Vec<String>,
    },
    /// A step or check is starting.
    StepStarted(String),
    /// A step or check finished.
    StepFinished(CheckResult),
    /// A line of the plugin's output (with `forward_output`).
    Output {
        /// Which stream.
        stream: Stream,
        /// The line, without its newline.
        line: String,
    },
    /// The plugin is being stopped.
    Stopping {
        /// How long it may take before SIGKILL.
        grace: Duration,
    },
}

/// The plugin process in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginReport {
    /// Its process ID (none when it could not start).
    pub pid: Option<u32>,
    /// How it ended.
    pub exit: Option<ExitView>,
    /// What it wrote to stdout.
    pub stdout: OutputView,
    /// What it wrote to stderr.
    pub stderr: OutputView,
}

/// One plugin process of a run: the step that started it, the steps that
/// judged it, how it ended and what it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessReport {
    /// `launch`, `plugin-restart` or `node-reboot` (its `--log-dir` files' name).
    pub started_by: String,
    /// The steps and checks recorded while it was the plugin.
    pub judged_in: Vec<String>,
    /// Its pid, exit and output.
    #[serde(flatten)]
    pub plugin: PluginReport,
}

/// A whole smoke run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmokeReport {
    /// `dpctl smoke`.
    pub suite: String,
    /// The kubelet release the sim played.
    #[serde(default)]
    pub kubelet_version: KubeletVersion,
    /// What played it: `kubelet-sim`, or `referee v1.N.P` (the kubelet's own
    /// code, at that exact version).
    #[serde(default = "crate::kubelet_sim::default_engine")]
    pub engine: String,
    /// The command as run (substituted).
    pub command: Vec<String>,
    /// The device-plugin directory.
    pub dir: String,
    /// True when the directory was kept (given with `--dir`, or `--keep`).
    pub dir_kept: bool,
    /// kubelet.sock.
    pub kubelet_socket: String,
    /// The resource tested (the one that registered).
    pub resource: Option<String>,
    /// The plugin's socket (from its registration).
    pub plugin_socket: Option<String>,
    /// When the run started, RFC 3339.
    pub started: String,
    /// How long the run took.
    pub duration_ms: u64,
    /// Stopped early by Ctrl-C or SIGTERM.
    pub interrupted: bool,
    /// Totals by outcome.
    pub totals: Totals,
    /// Every step and check, in run order.
    pub steps: Vec<CheckResult>,
    /// The plugin process and its output (the last one started).
    pub plugin: PluginReport,
    /// Every plugin process of the run, in the order they started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessReport>,
    /// The plugins_registry directory the sim watched.
    #[serde(default)]
    pub registry_dir: String,
    /// With `--isolate`: the namespaces and what was mounted where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<isolate::IsolationReport>,
    /// The kubelet-restart step's tally (absent when it did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<RestartTally>,
}

/// How many kubelet restarts the plugin came back from (`smoke --restarts N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartTally {
    /// Kubelet restarts played.
    pub restarts: u32,
    /// After how many the plugin registered again and sent its list in time.
    pub reregistered: u32,
    /// The others: the flakes.
    pub failed: u32,
    /// "re-registered 29/30 (3.3% flaky)".
    pub summary: String,
}

impl RestartTally {
    /// The tally of `reregistered` out of `restarts`.
    pub fn new(restarts: u32, reregistered: u32) -> Self {
        let failed = restarts.saturating_sub(reregistered);
        let pct = if restarts == 0 { 0.0 } else { f64::from(failed) * 100.0 / f64::from(restarts) };
        RestartTally {
            restarts,
            reregistered,
            failed,
            summary: format!("re-registered {reregistered}/{restarts} ({pct:.1}% flaky)"),
        }
    }
}

impl SmokeReport {
    /// Recomputes the totals.
    pub fn tally(&mut self) {
        self.totals = Totals::of(&self.steps);
    }

    /// True when every step passed or was skipped, and the run was not interrupted.
    pub fn passed(&self) -> bool {
        !self.interrupted && !any_failure(&self.steps)
    }

    /// 0 when [`SmokeReport::passed`], else 1.
    pub fn exit_code(&self) -> u8 {
        if self.passed() { crate::error::exit::OK } else { crate::error::exit::CHECK_FAILED }
    }
}

/// Runs a smoke test: see the module docs. `interrupt` completes on Ctrl-C
/// (the remaining steps are skipped, the plugin is still stopped). `Err` only
/// when nothing could run (the directory or the sim could not be set up).
pub async fn run_smoke(
    config: SmokeConfig,
    interrupt: impl Future<Output = ()>,
    progress: &mut (dyn FnMut(SmokeProgress) + Send),
) -> Result<SmokeReport> {
    if config.command.is_empty() {
        return Err(Error::invalid("COMMAND", "give the plugin's command after --, e.g. dpctl smoke -- ./my-plugin"));
    }
    let started = SystemTime::now();
    let t0 = Instant::now();
    let layout = isolate::Layout::create(config.dir.as_deref())?;
    // Removes the fresh root (never a --dir) should anything below panic.
    let mut dir_guard = crate::paths::RemoveDirOnDrop::new(Some(layout.root.clone()));
    let dir = layout.device_plugins.clone();
    let (plan, isolation) = match isolation_plan(&config, &layout).await {
        Ok(p) => p,
        Err(e) => {
            layout.remove();
            return Err(e);
        }
    };
    process::become_subreaper();
    let engine = match start_engine(&config, &layout, plan.as_ref()).await {
        Ok(e) => std::sync::Arc::new(e),
        Err(e) => {
            layout.remove();
            return Err(e);
        }
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let kubelet_socket = dir.join(crate::paths::KUBELET_SOCKET_NAME);
    let _ = tx.send(SmokeProgress::SimReady { dir: dir.clone(), kubelet_socket, engine: engine.name().to_string() });
    if let Some(r) = &isolation {
        let _ = tx.send(SmokeProgress::Isolated(r.clone()));
    }
    let mut runner = steps::Runner::new(config, engine.clone(), tx, &layout, plan);
    let interrupted = {
        let fut = runner.run_steps();
        tokio::select! {
            () = pump(&mut rx, progress, fut) => false,
            () = interrupt => true,
        }
    };
    runner.fill_missing(interrupted);
    pump(&mut rx, progress, runner.shutdown()).await;
    if let Err(e) = engine.stop().await {
        tracing::warn!(error = %e, engine = engine.name(), "stopping the kubelet");
    }
    let keep = runner.config().keep;
    dir_guard.disarm();
    if !keep {
        layout.remove();
    }
    while let Ok(p) = rx.try_recv() {
        progress(p);
    }
    let survivors = process::kill_survivors();
    // A --dir is always kept (only the sim's sockets are removed from it).
    let kept = keep || runner.config().dir.is_some();
    let ran = harness::Ran { started, took: t0.elapsed(), interrupted };
    let mut report = runner.into_report(&dir, kept, ran);
    report.isolation = isolation;
    harness::close(&mut report, "plugin", &survivors);
    Ok(report)
}

/// With `--isolate`: the namespace plan, tried before the sim and the
/// plugin start, so that a machine that refuses the namespace is told so now.
async fn isolation_plan(
    config: &SmokeConfig,
    layout: &isolate::Layout,
) -> Result<(Option<isolate::Plan>, Option<isolate::IsolationReport>)> {
    let Some(ic) = &config.isolate else { return Ok((None, None)) };
    let mut plan = isolate::Plan::new(ic, layout)?;
    let program = config.command.first().cloned().unwrap_or_default();
    let report = plan.preflight(&program).await?;
    Ok((Some(plan), Some(report)))
}

/// Starts the kubelet (`--engine`: the in-process kubelet-sim, or a
/// referee in its own mount namespace) in the layout's directories, playing
/// the configured release; a directory a live kubelet serves is bad input.
async fn start_engine(
    config: &SmokeConfig,
    layout: &isolate::Layout,
    plan: Option<&isolate::Plan>,
) -> Result<engine::Engine> {
    let mut sim_config = SimConfig::new(&layout.device_plugins);
    sim_config.set_kubelet_version(config.kubelet_version);
    sim_config.pre_start_timeout = config.prestart_timeout;
    sim_config.registry_dir = Some(layout.plugins_registry.clone());
    sim_config.podresources_socket = Some(layout.podresources_socket());
    sim_config.path_map = plan.map_or_else(|| layout.path_map(), isolate::Plan::path_map);
    // A fresh directory is the sim's own: its cleanup deletes what the kubelet deletes.
    sim_config.owns_dir = config.dir.is_none();
    sim_config.topology = config.topology.clone();
    sim_config.kubelet_socket_delay = config.late_kubelet_socket;
    sim_config.tap = config.tap.as_ref().map(|t| t.by("kubelet-sim"));
    engine::Engine::start(&config.engine, sim_config, layout, config.helper.clone()).await.map_err(|e| match e {
        Error::AlreadyServing { path, .. } => Error::invalid(
            "--dir",
            format!(
                "a live kubelet (or kubelet-sim) serves {}; choose another directory, or leave --dir out for a fresh one",
                path.display()
            ),
        ),
        other => other,
    })
}

/// Awaits `fut`, passing progress messages on as they come.
async fn pump<T>(
    rx: &mut mpsc::UnboundedReceiver<SmokeProgress>,
    progress: &mut (dyn FnMut(SmokeProgress) + Send),
    fut: impl Future<Output = T>,
) -> T {
    tokio::pin!(fut);
    loop {
        tokio::select! {
            biased;
            Some(p) = rx.recv() => progress(p),
            v = &mut fut => {
                while let Ok(p) = rx.try_recv() {
                    progress(p);
                }
                return v;
            }
        }
    }
}

/// Substitutes `{dir}` and `{kubelet_socket}` in every argument (the runner
/// also substitutes `{registry_dir}`).
pub fn substitute(command: &[String], dir: &Path, kubelet_socket: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let sock = kubelet_socket.display().to_string();
    command.iter().map(|a| a.replace("{dir}", &dir).replace("{kubelet_socket}", &sock)).collect()
}

/// A command line as a shell would read it (arguments quoted when needed).
pub fn shell_words(command: &[String]) -> String {
    command
        .iter()
        .map(|a| {
            let plain = !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%{}".contains(c));
            if plain { a.clone() } else { format!("'{}'", a.replace('\'', r"'\''")) }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    // A flag the referee cannot play is refused, not run as a pass.
    #[test]
    fn a_late_kubelet_socket_is_refused_on_the_referee() {
        let cfg = SmokeConfig {
            late_kubelet_socket: Duration::from_secs(1),
            engine: engine::EngineKind::Referee("/x".into()),
            ..SmokeConfig::default()
        };
        let e = cfg.check_inputs().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
        assert!(e.to_string().contains("--late-kubelet-socket"), "{e}");
        assert!(SmokeConfig { engine: engine::EngineKind::Sim, ..cfg }.check_inputs().is_ok());
    }

    #[test]
    fn names_are_unique_and_distinct_from_checks() {
        let mut seen = std::collections::HashSet::new();
        for s in StepId::ALL {
            assert!(seen.insert(s.name()));
            assert!(CheckId::from_name(s.name()).is_none(), "{} is also a check", s.name());
            assert_eq!(StepId::from_name(s.name()), Some(s));
            assert_eq!(kind_of(s.name()), "smoke");
        }
        assert_eq!(kind_of("options-answer"), "check");
    }

    #[test]
    fn skips_parse() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let (steps, checks) = select(&[], &s(&["kubelet-restart", "parallel-calls"])).unwrap();
        assert_eq!(steps, [StepId::KubeletRestart]);
        assert_eq!(checks, [CheckId::ParallelCalls]);
        assert!(select(&[], &s(&["registration"])).unwrap_err().to_string().contains("cannot be skipped"));
        assert!(select(&[], &s(&["nope"])).unwrap_err().to_string().contains("admission"));
    }

    // --only: everything it does not name is left out but the three steps the others need.
    #[test]
    fn only_leaves_out_what_it_does_not_name() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let (steps, checks) = select(&s(&["admission", "allocate-healthy", "launch"]), &[]).unwrap();
        let kept: Vec<StepId> = StepId::ALL.into_iter().filter(|x| !steps.contains(x)).collect();
        assert_eq!(kept, [StepId::Launch, StepId::Registration, StepId::Admission, StepId::Shutdown]);
        assert_eq!(checks.len(), CheckId::ALL.len() - 1);
        assert!(!checks.contains(&CheckId::AllocateHealthy));
        let e = select(&s(&["nope"]), &[]).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
        assert!(e.to_string().contains("--only: unknown step or check \"nope\"; valid: launch, registration,"), "{e}");
        let e = select(&s(&["admission"]), &s(&["admission"])).unwrap_err();
        assert!(e.to_string().contains("--skip: \"admission\" is in --only too"), "{e}");
        // --only and --skip of different names: --skip has nothing left to leave out, and that is fine.
        assert!(select(&s(&["admission"]), &s(&["kubelet-restart"])).is_ok());
    }

    #[test]
    fn substitution_and_quoting() {
        let cmd = vec!["./p".to_string(), "--dir={dir}".into(), "{kubelet_socket}".into(), "a b".into()];
        let out = substitute(&cmd, Path::new("/tmp/x"), Path::new("/tmp/x/kubelet.sock"));
        assert_eq!(out, ["./p", "--dir=/tmp/x", "/tmp/x/kubelet.sock", "a b"]);
        assert_eq!(shell_words(&out), "./p --dir=/tmp/x /tmp/x/kubelet.sock 'a b'");
        assert_eq!(shell_words(&["it's".to_string()]), r"'it'\''s'");
    }
}
