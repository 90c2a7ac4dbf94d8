//! `dpctl doctor`: one read-only look at a node's device-plugin setup, as a
//! list of findings (ok / warning / error, each with its evidence and a hint).
//!
//! It looks at the device-plugin directory, `kubelet.sock` (connect only),
//! every other socket (GetDevicePluginOptions and the first ListAndWatch
//! message; nothing else is called), files a kubelet restart would delete,
//! the checkpoint (checksum, format, devices no plugin reports, pods
//! PodResources does not list and the other way round), PodResources
//! (reachable, API version, Get enabled), `plugins_registry` (GetInfo) and
//! CDI specs; on a node with DRA drivers (`dra.rs`) the kubelet's real root
//! directory, each `DRAPlugin` registration and its service socket,
//! registrations outside that root, `dra_manager_state`, and a device
//! plugin and a DRA driver handing out the same hardware (`overlap.rs`). Doctor never registers anything and never calls a method that
//! changes kubelet or plugin state. Every probe has a deadline, all run at
//! once, and the whole run stays within a total budget.
//!
//! The probes (`probe.rs`) only look, each within its deadline; the
//! judgements (`judge.rs`) turn what they saw into findings and are pure,
//! so each finding is unit-tested on data; [`run`] wires one to the other.

pub mod cdi;
mod dra;
mod dra_judge;
mod judge;
mod kubelet_view;
pub mod merge;
mod overlap;
mod probe;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::kubelet_version::KubeletVersion;
use crate::transport;

/// The shortest `--every` accepted: a run's probes take up to their budget,
/// and a shorter period only repeats the same report.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// As it should be.
    Ok,
    /// Works, but something is off or will break later.
    Warning,
    /// Broken now.
    Error,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// ok, warning or error.
    pub severity: Severity,
    /// Which check (`dir`, `kubelet-sock`, `socket`, `file`, `checkpoint`, `podresources`, `registry`, `cdi`,
    /// `kubelet-view`, `allocate`).
    pub check: String,
    /// What was found, as a stable machine name (`stale-socket`, `checkpoint-corrupt`,
    /// `stream-ended`, …; docs/json.md lists them). Empty in reports from before it existed.
    #[serde(default)]
    pub code: String,
    /// What it is about (a path, a resource, a pod UID).
    pub subject: String,
    /// What was seen.
    pub evidence: String,
    /// What to do about it.
    pub hint: Option<String>,
}

/// Where doctor looks and how long it may take.
#[derive(Debug, Clone)]
pub struct DoctorConfig {
    /// Prefix of every host path (`/host` in `kubectl debug node/...`); `/` on the node.
    pub root: PathBuf,
    /// The device-plugin directory (a host path).
    pub dir: PathBuf,
    /// The kubelet's PodResources socket (a host path; `None`:
    /// `<kubelet root>/pod-resources/kubelet.sock`).
    pub podresources_socket: Option<PathBuf>,
    /// The plugin watcher's directory (a host path; `None`:
    /// `<kubelet root>/plugins_registry`).
    pub registry_dir: Option<PathBuf>,
    /// The kubelet's `--root-dir` (a host path; `None`: read from the
    /// running kubelet's command line in `<root>/proc`, else the default).
    pub kubelet_root_dir: Option<PathBuf>,
    /// CDI spec directories (host paths).
    pub cdi_dirs: Vec<PathBuf>,
    /// Deadline of each probe (connect, one call, first message).
    pub probe_timeout: Duration,
    /// The whole run.
    pub budget: Duration,
    /// The kubelet release files and the checkpoint are judged by (what a
    /// restart deletes, which checkpoint layouts it reads).
    pub kubelet_version: KubeletVersion,
}

impl DoctorConfig {
    /// The kubelet's default paths under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DoctorConfig {
            root: root.into(),
            dir: PathBuf::from(crate::paths::DEFAULT_DEVICE_PLUGIN_DIR),
            podresources_socket: None,
            registry_dir: None,
            kubelet_root_dir: None,
            cdi_dirs: vec![PathBuf::from("/etc/cdi"), PathBuf::from("/var/run/cdi")],
            probe_timeout: Duration::from_secs(1),
            budget: Duration::from_secs(5),
            kubelet_version: KubeletVersion::DEFAULT,
        }
    }

    fn host(&self, p: &Path) -> PathBuf {
        crate::paths::under_root(&self.root, p)
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorReport {
    /// The node, when named (`--node`, `DPCTL_NODE_NAME`).
    pub node: Option<String>,
    /// The host-path prefix used.
    pub root: String,
    /// The device-plugin directory looked at (with the prefix).
    pub dir: String,
    /// The kubelet release files and the checkpoint were judged by.
    #[serde(default)]
    pub kubelet_version: KubeletVersion,
    /// Findings, in the order the checks ran.
    pub findings: Vec<Finding>,
    /// How long the run took.
    pub took_ms: u64,
}

impl DoctorReport {
    /// The worst severity found.
    pub fn worst(&self) -> Severity {
        self.findings.iter().map(|f| f.severity).max().unwrap_or(Severity::Ok)
    }

    /// Counts per severity: (ok, warning, error).
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |s| self.findings.iter().filter(|f| f.severity == s).count();
        (n(Severity::Ok), n(Severity::Warning), n(Severity::Error))
    }
}

/// The findings so far.
struct Out(Vec<Finding>);

impl Out {
    fn add(
        &mut self,
        severity: Severity,
        (check, code): (&str, &str),
        subject: impl Into<String>,
        evidence: impl Into<String>,
    ) {
        self.0.push(Finding {
            severity,
            check: check.into(),
            code: code.into(),
            subject: subject.into(),
            evidence: evidence.into(),
            hint: None,
        });
    }

    fn hint(
        &mut self,
        severity: Severity,
        (check, code): (&str, &str),
        subject: impl Into<String>,
        evidence: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.0.push(Finding {
            severity,
            check: check.into(),
            code: code.into(),
            subject: subject.into(),
            evidence: evidence.into(),
            hint: Some(hint.into()),
        });
    }
}

/// The PodResources socket kubelet-sim serves in its device-plugin directory.
pub const SIM_PODRESOURCES_SOCKET: &str = "pod-resources.sock";

/// Runs every check. Never fails: what cannot be looked at is a finding.
/// long: one probe after another, each a line or two; splitting it would hide the order they run in.
pub async fn run(cfg: &DoctorConfig) -> DoctorReport {
    let started = Instant::now();
    let budget_end = tokio::time::Instant::now() + cfg.budget;
    let timeout = cfg.probe_timeout.min(cfg.budget);
    let dir = cfg.host(&cfg.dir);
    let mut out = Out(Vec::new());
    let dir_ok = judge::check_dir(&dir, probe::probe_dir(&dir), &mut out);
    let root = dra::kubelet_root(cfg, &mut out);

    // kubelet.sock: connect only.
    let kubelet_sock = crate::paths::kubelet_socket(&dir);
    let kubelet = tokio::time::timeout_at(budget_end, transport::connect(&kubelet_sock, timeout));

    // Every other entry of the directory.
    let (sockets, strays) = if dir_ok { probe::list_dir(&dir) } else { Default::default() };
    for (path, name, kind) in strays {
        judge::non_socket(&path, &name, kind, cfg.kubelet_version, &mut out);
    }
    let podres_default = root.dir.join("pod-resources").join(crate::paths::KUBELET_SOCKET_NAME);
    // kubelet-sim serves PodResources in the directory itself: read that one
    // when no other is named, and probe it as PodResources, not as a plugin.
    let sim_podres = dir.join(SIM_PODRESOURCES_SOCKET);
    let podres_path = match &cfg.podresources_socket {
        Some(p) => cfg.host(p),
        None if sockets.contains(&sim_podres) => sim_podres.clone(),
        None => cfg.host(&podres_default),
    };
    let sockets: Vec<PathBuf> = sockets.into_iter().filter(|p| *p != podres_path && *p != sim_podres).collect();
    let probes = futures_util::future::join_all(
        sockets.iter().cloned().map(|p| tokio::time::timeout_at(budget_end, probe::probe_plugin(p, timeout))),
    );
    let podres = tokio::time::timeout_at(budget_end, probe::probe_podresources(podres_path.clone(), timeout));
    let registry_dir = cfg.host(&dra::watched_registry(cfg, &root));
    let registry = tokio::time::timeout_at(budget_end, probe::probe_registry(registry_dir.clone(), timeout));
    let (kubelet, probes, podres, registry) = tokio::join!(kubelet, probes, podres, registry);

    judge::report_kubelet(kubelet.ok().map(|r| r.map(drop)), &kubelet_sock, &mut out);
    // Live plugins by socket, and what they report.
    let live = judge::report_sockets(&sockets, probes.into_iter().map(Result::ok).collect(), &mut out);
    let live_devices: BTreeSet<String> = live.iter().flat_map(|p| p.devices.iter().map(|d| d.id.clone())).collect();
    let (pods, allocatable) = match judge::report_podresources(podres.ok(), &podres_path, &mut out) {
        Some(p) => (Some(p.pods), Some(p.allocatable)),
        None => (None, None),
    };

    // The checkpoint, against the plugins and PodResources.
    let (path, read) = probe::read_checkpoint(&dir);
    let seen = judge::CheckpointSeen {
        path: &path,
        read,
        live_devices: &live_devices,
        any_plugin: !sockets.is_empty(),
        pods: pods.as_deref(),
        version: cfg.kubelet_version,
    };
    let checkpoint = judge::checkpoint(seen, &mut out);
    // CDI: spec files, and the names the checkpoint's Allocate answers use.
    let cdi_dirs: Vec<PathBuf> = dra::cdi_dirs(cfg, &root).iter().map(|d| cfg.host(d)).collect();
    let cdi_specs = cdi::read_dirs(&cdi_dirs);
    judge::check_cdi(checkpoint.as_ref(), &cdi_dirs, &cdi_specs, &mut out);
    // The kubelet's view (GetAllocatableResources) against each plugin's own.
    kubelet_view::check(&live, allocatable.as_ref(), checkpoint.as_ref().map(|(r, _)| r), &mut out);
    let kubelet_age = probe::age(&kubelet_sock);
    kubelet_view::not_registered_again(
        &live,
        allocatable.as_ref(),
        checkpoint.as_ref().map(|(r, _)| r),
        kubelet_age,
        &mut out,
    );

    // plugins_registry, then DRA: registrations, dra_manager_state, and
    // device plugins against DRA drivers.
    let found = report_registry(&registry_dir, registry.ok(), &mut out);
    let drivers = dra::check_registrations(cfg, &root, &found, budget_end, &mut out).await;
    let handed = dra::Handed {
        checkpoint: checkpoint.as_ref().map(|(r, _)| r),
        names: checkpoint.as_ref().map(|(_, n)| n),
        pods: pods.as_deref(),
    };
    dra::check_state_and_overlap(cfg, &root, &drivers, &handed, &cdi_specs, &mut out);

    let took_ms = crate::text::millis(started.elapsed());
    DoctorReport {
        node: None,
        root: cfg.root.display().to_string(),
        dir: dir.display().to_string(),
        kubelet_version: cfg.kubelet_version,
        findings: out.0,
        took_ms,
    }
}

/// The plugins_registry findings (`None`: the budget ran out first);
/// returns the registrations that answered GetInfo.
fn report_registry(
    registry_dir: &Path,
    registry: Option<probe::Registry>,
    out: &mut Out,
) -> Vec<(PathBuf, crate::proto::pluginregistration::PluginInfo)> {
    let Some(found) = registry else {
        out.add(
            Severity::Warning,
            ("registry", "registry-budget"),
            registry_dir.display().to_string(),
            "GetInfo probes did not finish within the budget",
        );
        return Vec::new();
    };
    let answered: Vec<_> =
        found.iter().flatten().filter_map(|(p, r)| r.as_ref().ok().map(|i| (p.clone(), i.clone()))).collect();
    // A DRA driver's registration is judged once, under `dra`.
    let is_dra = |r: &crate::Result<crate::proto::pluginregistration::PluginInfo>| {
        r.as_ref().is_ok_and(|i| i.r#type == crate::proto::pluginregistration::DRA_PLUGIN_TYPE)
    };
    let all_dra = found.as_ref().is_some_and(|f| !f.is_empty() && f.iter().all(|(_, r)| is_dra(r)));
    if !all_dra {
        let others = found.map(|f| f.into_iter().filter(|(_, r)| !is_dra(r)).collect());
        judge::report_registry(registry_dir, others, out);
    }
    answered
}
