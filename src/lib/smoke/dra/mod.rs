//! `dpctl dra smoke`: CI for a DRA driver, without a cluster.
//!
//! [`run`] makes a fresh kubelet root under /tmp, starts an in-process
//! `dpctl apiserver` (a Node, then the ResourceClaims smoke allocates) and
//! an in-process kubelet-sim playing the DRA manager of the chosen release
//! (docs/dra.md §6, §7), launches the driver's command unmodified with the
//! sandbox's paths substituted ([`substitute`]), and takes it through what
//! the kubelet does with a driver: registration, its published slices, pods
//! with claims admitted and deleted, a kubelet restart, a node reboot with
//! the CDI directory wiped, parallel pods, a subrequest name, a second
//! instance beside the first, a kubelet root whose socket paths are too long
//! for unix sockets, and SIGTERM. Each step is a [`CheckResult`] (the
//! verdicts of `dra check` where they apply, [`judge`] for the rest); the
//! report is a [`SmokeReport`], rendered as `dpctl smoke`'s.

mod cluster;
pub mod judge;
mod runner;
mod sim;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::check::{Case, CaseInfo};
use crate::dra::check::DraCase;
use crate::error::{Error, Result};
use crate::kubelet_sim::KubeletVersion;
use crate::smoke::matrix::{MatrixProgress, MatrixReport};

/// Runs a DRA smoke test ([`runner`]) on the sim ([`sim`]) or, with
/// `--engine cluster:DIR`, on a one-node cluster ([`cluster`]).
/// `interrupt` completes on Ctrl-C. `Err` only when nothing could run.
pub async fn run(
    cfg: DraSmokeConfig,
    interrupt: impl std::future::Future<Output = ()>,
    progress: &mut (dyn FnMut(crate::smoke::SmokeProgress) + Send),
) -> Result<crate::smoke::SmokeReport> {
    cfg.check_inputs()?;
    if cfg.cluster.is_some() {
        return cluster::run(cfg, interrupt, progress).await;
    }
    sim::run(cfg, interrupt, progress).await
}

/// `dpctl dra smoke --kubelet-version 1.34-1.37`: [`run`] once per release,
/// in order, each against a fresh kubelet-sim and API server, in one
/// report (as `dpctl smoke` runs several releases). Every release is
/// checked before the first run; with several releases `log_dir` gets one
/// sub-directory per release. An interrupt stops the current run and the
/// releases after it are not run.
pub async fn run_releases(
    config: DraSmokeConfig,
    versions: &[KubeletVersion],
    interrupt: impl std::future::Future<Output = ()> + Send,
    progress: &mut (dyn FnMut(MatrixProgress) + Send),
) -> Result<MatrixReport> {
    use futures_util::FutureExt;
    if versions.is_empty() {
        return Err(Error::invalid("--kubelet-version", "no kubelet version given"));
    }
    let configs: Vec<DraSmokeConfig> = versions
        .iter()
        .map(|v| DraSmokeConfig {
            kubelet_version: *v,
            log_dir: match &config.log_dir {
                Some(d) if versions.len() > 1 => Some(d.join(format!("kubelet-{v}"))),
                other => other.clone(),
            },
            ..config.clone()
        })
        .collect();
    for c in &configs {
        c.check_inputs()?;
    }
    let interrupt = interrupt.boxed().shared();
    let mut report =
        MatrixReport { suite: SUITE_NAME.into(), passed: Vec::new(), failed: Vec::new(), runs: Vec::new() };
    let count = configs.len();
    for (i, cfg) in configs.into_iter().enumerate() {
        let version = cfg.kubelet_version;
        progress(MatrixProgress::Version { version, index: i + 1, count });
        let run = run(cfg, interrupt.clone(), &mut |p| progress(MatrixProgress::Run(p))).await?;
        if run.passed() {
            report.passed.push(version)
        } else {
            report.failed.push(version)
        }
        let stop = run.interrupted;
        report.runs.push(run);
        if stop {
            break;
        }
    }
    Ok(report)
}

/// The suite's name in reports and JUnit.
pub const SUITE_NAME: &str = "dpctl dra smoke";
/// The Node the API server serves and the driver is told it runs on.
pub const NODE_NAME: &str = "dpctl-smoke-node";
/// The namespace of the test pods and their claims.
pub const NAMESPACE: &str = "dpctl-smoke";

/// The steps, in run order. Some are `dra check`'s cases, judged by its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepId {
    /// The command starts and keeps running.
    Launch,
    /// The plugin watcher registers the driver (`dra check`'s registration verdict).
    Registration,
    /// Every advertised service is served (`dra check`).
    AdvertisedServed,
    /// Registration socket and endpoint fit a unix socket (`dra check`).
    SocketPaths,
    /// The ResourceSlices the driver published.
    PublishedSlices,
    /// A pod with a claim is admitted: the claim prepared by the kubelet's rules.
    Admission,
    /// A claim for two devices allocated by the real scheduler and prepared (`--engine cluster`).
    MultiDeviceClaim,
    /// A claim for more devices than published is refused by the real scheduler (`--engine cluster`).
    UnsatisfiableClaim,
    /// The CDI IDs the pod's container gets parse, resolve, and name device nodes that exist.
    Cdi,
    /// A claim allocated for a subrequest (`gpu/large`): request_names stripped.
    RequestNames,
    /// Prepare of a prepared claim answers the same devices (`dra check`).
    PrepareIdempotent,
    /// A kubelet restart: the driver registers again, the claim read back unchanged, no call.
    KubeletRestart,
    /// A node reboot with the CDI directory wiped: prepared again, and the IDs resolve.
    NodeReboot,
    /// The pod deleted: Unprepare accepted, and again (`dra check`).
    UnprepareIdempotent,
    /// Several pods admitted at once.
    ParallelPods,
    /// Claims given different devices get different CDI devices.
    DistinctDevices,
    /// A second instance of the driver beside the first (a rolling update).
    RollingUpdate,
    /// A kubelet root whose socket paths pass 107 bytes.
    LongSocketPath,
    /// Every Prepare and Unprepare well inside the deadline (`dra check`).
    CallTime,
    /// SIGTERM stops the driver within the grace period.
    Shutdown,
}

impl StepId {
    /// Every step, in report order.
    pub const ALL: [StepId; 20] = [
        StepId::Launch,
        StepId::Registration,
        StepId::AdvertisedServed,
        StepId::SocketPaths,
        StepId::PublishedSlices,
        StepId::Admission,
        StepId::MultiDeviceClaim,
        StepId::UnsatisfiableClaim,
        StepId::Cdi,
        StepId::RequestNames,
        StepId::PrepareIdempotent,
        StepId::KubeletRestart,
        StepId::NodeReboot,
        StepId::UnprepareIdempotent,
        StepId::ParallelPods,
        StepId::DistinctDevices,
        StepId::RollingUpdate,
        StepId::LongSocketPath,
        StepId::CallTime,
        StepId::Shutdown,
    ];

    /// Steps `--skip` may leave out.
    pub fn skippable(self) -> bool {
        matches!(
            self,
            StepId::PublishedSlices
                | StepId::MultiDeviceClaim
                | StepId::UnsatisfiableClaim
                | StepId::RequestNames
                | StepId::PrepareIdempotent
                | StepId::KubeletRestart
                | StepId::NodeReboot
                | StepId::ParallelPods
                | StepId::DistinctDevices
                | StepId::RollingUpdate
                | StepId::LongSocketPath
        )
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
                reason: "until the plugin watcher registers the driver the kubelet prepares none of its claims",
                rule: "a registration socket in plugins_registry; GetInfo: type DRAPlugin, a DNS-subdomain name, a \
                       DRAPlugin service the release knows; the kubelet's RegisterPlugin accepts it (docs/dra.md §2, §6)",
            },
            StepId::AdvertisedServed => DraCase::AdvertisedServed.info(),
            StepId::SocketPaths => DraCase::SocketPaths.info(),
            StepId::PublishedSlices => CaseInfo {
                name: "published-slices",
                reason: "the scheduler allocates only devices a ResourceSlice publishes; a bad slice hides them",
                rule: "slices of this driver for this node: spec.driver and spec.nodeName right, a pool name, device \
                       names unique DNS labels within the pool (docs/dra.md §7)",
            },
            StepId::Admission => CaseInfo {
                name: "admission",
                reason: "a pod with claims starts only after NodePrepareResources answers every claim the kubelet's way",
                rule: "one NodePrepareResources per driver with the pod's claims; every claim answered under its UID and \
                       no other, no per-claim error, within the deadline; every device prepared is one a current \
                       ResourceSlice of the driver publishes (docs/dra.md §3)",
            },
            StepId::MultiDeviceClaim => CaseInfo {
                name: "multi-device-claim",
                reason: "a claim may ask for several devices; the scheduler allocates them from the published slices \
                         and the kubelet prepares them in one call",
                rule: "on a cluster (--engine cluster): a pod whose claim asks for exactly 2 devices of the driver is \
                       scheduled, its claim allocated 2 distinct devices, prepared, and the pod runs",
            },
            StepId::UnsatisfiableClaim => CaseInfo {
                name: "unsatisfiable-claim",
                reason: "a claim for more devices than the node publishes must stay unscheduled, not land on the node",
                rule: "on a cluster (--engine cluster): a pod whose claim asks for one device more than the driver \
                       publishes stays Pending, the scheduler saying `cannot allocate all claims`",
            },
            StepId::Cdi => CaseInfo {
                name: "cdi",
                reason: "the runtime fails the container on a CDI ID it cannot resolve; the kubelet does not check",
                rule: "each CDI ID the container gets parses as vendor/class=name, a spec in the CDI directory defines \
                       it, and the device nodes the spec names exist (docs/dra.md §3)",
            },
            StepId::RequestNames => DraCase::RequestNames.info(),
            StepId::PrepareIdempotent => DraCase::PrepareIdempotent.info(),
            StepId::KubeletRestart => CaseInfo {
                name: "kubelet-restart",
                reason: "a kubelet restart keeps running pods in their sandboxes: it reads the claims back from \
                         dra_manager_state and prepares none; the driver must register again to serve the next user",
                rule: "the driver registers again within the registration timeout, and the claim is read back with \
                       the devices it had (docs/dra.md §6)",
            },
            StepId::NodeReboot => CaseInfo {
                name: "node-reboot",
                reason: "a reboot empties /var/run/cdi (a tmpfs) while the kubelet's checkpoint keeps the claims: the \
                         driver must write the specs again when the kubelet prepares them again (kubernetes/kubernetes#141433)",
                rule: "driver and kubelet start again with the CDI directory empty; the pod is admitted again once \
                       the driver is back, its claim prepared again, and its CDI IDs resolve",
            },
            StepId::UnprepareIdempotent => DraCase::UnprepareIdempotent.info(),
            StepId::ParallelPods => CaseInfo {
                name: "parallel-pods",
                reason: "the kubelet's pod workers prepare and unprepare pods concurrently",
                rule: "pods admitted at once, each claim allocated its own device (the scheduler never allocates a \
                       device to two claims at once: as many pods as the driver publishes devices, up to --parallel), \
                       are all prepared with the devices allocated, and all unprepared on deletion",
            },
            StepId::DistinctDevices => CaseInfo {
                name: "distinct-devices",
                reason: "two claims allocated two devices must reach two containers as two devices; a driver answering \
                         the same CDI device for every claim puts two pods on one GPU",
                rule: "the claims of parallel-pods, each allocated another device, must be answered with distinct CDI \
                       device IDs: the kubelet hands each container the CDI IDs of its claim's answer unchecked \
                       (pkg/kubelet/cm/dra/manager.go, GetResources), so one ID in two answers is one device in two \
                       containers",
            },
            StepId::RollingUpdate => CaseInfo {
                name: "rolling-update",
                reason: "a DaemonSet rolling update runs the new pod beside the old one; the kubelet calls the newest \
                         instance (1.33+)",
                rule: "a second instance registers beside the first (another registration socket and endpoint); with \
                       the first stopped, the pod's claims are prepared by the second (docs/dra.md §6)",
            },
            StepId::LongSocketPath => CaseInfo {
                name: "long-socket-path",
                reason: "a kubelet root deep enough makes socket paths over 107 bytes, which unix sockets cannot hold",
                rule: "under a kubelet root whose socket paths pass 107 bytes the driver is still reachable, or it \
                       stops with an error naming the path (docs/dra.md §2)",
            },
            StepId::CallTime => DraCase::CallTime.info(),
            StepId::Shutdown => CaseInfo {
                name: "shutdown",
                reason: "DaemonSet updates and node drains stop the driver with SIGTERM",
                rule: "on SIGTERM, exit within the grace period",
            },
        }
    }
}

/// Parses `--skip` names.
pub fn select_skips(names: &[String]) -> Result<Vec<StepId>> {
    let mut out = Vec::new();
    for n in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        match StepId::from_name(n) {
            Some(s) if s.skippable() => out.push(s),
            Some(_) => {
                return Err(Error::invalid("--skip", format!("{n:?} cannot be skipped: the other steps need it")));
            }
            None => {
                let valid: Vec<&str> = StepId::ALL.iter().filter(|s| s.skippable()).map(|s| s.name()).collect();
                let shown: String = n.chars().take(64).collect();
                return Err(Error::invalid("--skip", format!("unknown step {shown:?}; valid: {}", valid.join(", "))));
            }
        }
    }
    Ok(out)
}

/// How to run a DRA smoke test.
#[derive(Debug, Clone)]
pub struct DraSmokeConfig {
    /// The driver's command line (placeholders substituted, see [`Sandbox::substitute`]).
    pub command: Vec<String>,
    /// Keep the fresh root afterwards.
    pub keep: bool,
    /// The driver to test when several register [default: the first].
    pub driver: Option<String>,
    /// How long the driver may take to start and register (also again after a restart).
    pub register_timeout: Duration,
    /// How long to wait for the driver's first ResourceSlice.
    pub slice_timeout: Duration,
    /// The deadline of each Prepare and Unprepare (the kubelet's 45 s unless lowered).
    pub timeout: Duration,
    /// Pods admitted at once in parallel-pods.
    pub parallel: usize,
    /// Run rolling-update: start a second instance beside the first.
    pub rolling: bool,
    /// How long the driver may take to exit after SIGTERM.
    pub grace: Duration,
    /// Steps to leave out.
    pub skip: Vec<StepId>,
    /// The kubelet release the sim plays.
    pub kubelet_version: KubeletVersion,
    /// Write the driver's whole output to files here.
    pub log_dir: Option<PathBuf>,
    /// Bytes of each output stream kept in the report.
    pub output_limit: usize,
    /// `--engine cluster:DIR`: a one-node cluster from DIR instead of the sim.
    pub cluster: Option<PathBuf>,
}

impl Default for DraSmokeConfig {
    fn default() -> Self {
        DraSmokeConfig {
            command: Vec::new(),
            keep: false,
            driver: None,
            register_timeout: Duration::from_secs(20),
            slice_timeout: Duration::from_secs(3),
            timeout: crate::dra::KUBELET_CALL_TIMEOUT,
            parallel: 3,
            rolling: false,
            grace: Duration::from_secs(5),
            skip: Vec::new(),
            kubelet_version: KubeletVersion::DEFAULT,
            log_dir: None,
            output_limit: 64 * 1024,
            cluster: None,
        }
    }
}

impl DraSmokeConfig {
    /// Checks what can be checked before anything runs.
    pub fn check_inputs(&self) -> Result<()> {
        if self.command.is_empty() {
            return Err(Error::invalid(
                "COMMAND",
                "give the driver's command after --, e.g. dpctl dra smoke -- ./my-driver --kubeconfig {kubeconfig}",
            ));
        }
        if !self.kubelet_version.has_dra() {
            return Err(Error::invalid(
                "--kubelet-version",
                format!(
                    "{}: kubelet-sim plays the DRA manager from {first} (DRA is off by default before); hint: {first} \
                     or later",
                    self.kubelet_version,
                    first = KubeletVersion::FIRST_WITH_DRA
                ),
            ));
        }
        if let Some(d) = &self.driver
            && !crate::validate::is_dns1123_subdomain(d)
        {
            let shown: String = d.chars().take(64).collect();
            return Err(Error::invalid("--driver", format!("{shown:?} is not a driver name (a DNS subdomain)")));
        }
        if self.parallel == 0 || self.parallel > 64 {
            return Err(Error::invalid("--parallel", format!("{}: 1 to 64 pods", self.parallel)));
        }
        if self.timeout < Duration::from_millis(10) || self.timeout > crate::dra::KUBELET_CALL_TIMEOUT {
            return Err(Error::invalid(
                "--timeout",
                format!("{}ms: from 10ms up to the kubelet's 45s (it can only be lowered)", self.timeout.as_millis()),
            ));
        }
        if let Some(dir) = &self.log_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::invalid("--log-dir", format!("cannot create directory {}: {e}", dir.display())))?;
        }
        Ok(())
    }
}

/// The kubelet root a driver runs against, laid out as /var/lib/kubelet.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The kubelet root (`{dir}`).
    pub root: PathBuf,
    /// `{registry_dir}`: plugins_registry.
    pub registry_dir: PathBuf,
    /// `{plugin_dir}`: where drivers put their service sockets (`<dir>/<driver>/dra.sock`).
    pub plugin_dir: PathBuf,
    /// `{cdi_dir}`: the CDI spec directory (the node's /var/run/cdi).
    pub cdi_dir: PathBuf,
    /// `{kubeconfig}`: the API server's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The sim's device-plugin directory (kubelet.sock, control socket).
    pub device_plugins: PathBuf,
}

/// The placeholders, in the order `--help` lists them, with their variables.
pub const PLACEHOLDERS: [(&str, &str); 7] = [
    ("{dir}", "DPCTL_DRA_DIR"),
    ("{registry_dir}", "DPCTL_REGISTRY_DIR"),
    ("{plugin_dir}", "DPCTL_PLUGIN_DIR"),
    ("{cdi_dir}", "DPCTL_CDI_DIR"),
    ("{kubeconfig}", "KUBECONFIG"),
    ("{node}", "NODE_NAME"),
    ("{instance}", "DPCTL_DRA_INSTANCE"),
];

impl Sandbox {
    /// The layout under `root` (`device_plugins` may lie elsewhere: the
    /// sim's sockets must stay short when `root` is long).
    pub fn under(root: &Path, device_plugins: &Path) -> Sandbox {
        Sandbox {
            root: root.to_path_buf(),
            registry_dir: root.join("plugins_registry"),
            plugin_dir: root.join("plugins"),
            cdi_dir: root.join("cdi"),
            kubeconfig: root.join("apiserver").join("kubeconfig"),
            device_plugins: device_plugins.to_path_buf(),
        }
    }

    /// The placeholder values, as [`PLACEHOLDERS`] lists them.
    fn values(&self, instance: u32) -> [String; 7] {
        [
            self.root.display().to_string(),
            self.registry_dir.display().to_string(),
            self.plugin_dir.display().to_string(),
            self.cdi_dir.display().to_string(),
            self.kubeconfig.display().to_string(),
            NODE_NAME.to_string(),
            instance.to_string(),
        ]
    }

    /// The command with every placeholder replaced (instance 1 is the first).
    pub fn substitute(&self, command: &[String], instance: u32) -> Vec<String> {
        let values = self.values(instance);
        command
            .iter()
            .map(|a| PLACEHOLDERS.iter().zip(&values).fold(a.clone(), |acc, ((p, _), v)| acc.replace(p, v)))
            .collect()
    }

    /// The environment the driver gets: each placeholder's variable.
    pub fn env(&self, instance: u32) -> Vec<(String, String)> {
        PLACEHOLDERS.iter().zip(self.values(instance)).map(|((_, k), v)| ((*k).to_string(), v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced_and_exported() {
        let s = Sandbox::under(Path::new("/tmp/r"), Path::new("/tmp/r/dp"));
        let cmd: Vec<String> =
            ["drv", "--kubeconfig={kubeconfig}", "{plugin_dir}/x", "{node}", "{cdi_dir}", "{instance}"]
                .map(String::from)
                .to_vec();
        assert_eq!(
            s.substitute(&cmd, 2),
            ["drv", "--kubeconfig=/tmp/r/apiserver/kubeconfig", "/tmp/r/plugins/x", NODE_NAME, "/tmp/r/cdi", "2"]
        );
        let env = s.env(1);
        assert!(env.contains(&("KUBECONFIG".into(), "/tmp/r/apiserver/kubeconfig".into())));
        assert!(env.contains(&("DPCTL_REGISTRY_DIR".into(), "/tmp/r/plugins_registry".into())));
    }

    #[test]
    fn skips_parse_and_name_the_valid_ones() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(select_skips(&s(&["node-reboot", " "])).unwrap(), [StepId::NodeReboot]);
        assert!(select_skips(&s(&["admission"])).unwrap_err().to_string().contains("cannot be skipped"));
        assert!(select_skips(&s(&["nope"])).unwrap_err().to_string().contains("long-socket-path"));
    }

    #[test]
    fn step_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        assert!(StepId::ALL.iter().all(|s| seen.insert(s.name())));
    }
}
