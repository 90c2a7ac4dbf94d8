//! `dpctl doctor`: one read-only look at a node's device-plugin setup, as a
//! list of findings (ok / warning / error, each with its evidence and a hint).
//!
//! It looks at the device-plugin directory, `kubelet.sock` (connect only),
//! every other socket (GetDevicePluginOptions and the first ListAndWatch
//! message; nothing else is called), files a kubelet restart would delete,
//! the checkpoint (checksum, format, devices no plugin reports, pods
//! PodResources does not list and the other way round), PodResources
//! (reachable, API version, Get enabled), `plugins_registry` (GetInfo) and
//! CDI specs. Doctor never registers anything and never calls a method that
//! changes kubelet or plugin state. Every probe has a deadline, all run at
//! once, and the whole run stays within a total budget.

pub mod cdi;
mod kubelet_view;
pub mod merge;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::checkpoint::report::CheckpointReport;
use crate::error::Error;
use crate::kubelet_version::{CleanupRule, KubeletVersion};
use crate::limits::KUBELET_MAX_RECV;
use crate::plugin_client::PluginClient;
use crate::podresources::client::{PodResourcesClient, PodResourcesConfig};
use crate::proto::pluginregistration as reg;
use crate::transport::{self, ClientConfig};

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
    /// The kubelet's PodResources socket (a host path).
    pub podresources_socket: PathBuf,
    /// The plugin watcher's directory (a host path).
    pub registry_dir: PathBuf,
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
            podresources_socket: PathBuf::from(crate::paths::DEFAULT_PODRESOURCES_SOCKET),
            registry_dir: PathBuf::from(crate::paths::DEFAULT_PLUGINS_REGISTRY_DIR),
            cdi_dirs: vec![PathBuf::from("/etc/cdi"), PathBuf::from("/var/run/cdi")],
            probe_timeout: Duration::from_secs(1),
            budget: Duration::from_secs(5),
            kubelet_version: KubeletVersion::NEWEST,
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

/// What a device-plugin socket turned out to be.
enum Probe {
    Live {
        options: crate::proto::deviceplugin::v1beta1::DevicePluginOptions,
        first: crate::Result<crate::plugin_client::Snapshot>,
    },
    Stale,
    NotAPlugin(String),
    Slow(String),
    Failed(Error),
}

async fn probe_plugin(path: PathBuf, timeout: Duration) -> (PathBuf, Probe) {
    let config =
        ClientConfig { connect_timeout: timeout, call_timeout: timeout, max_recv_bytes: KUBELET_MAX_RECV, tap: None };
    let client = match PluginClient::connect(&path, &config).await {
        Ok(c) => c,
        Err(Error::ConnectionRefused { .. }) => return (path, Probe::Stale),
        Err(Error::ConnectTimeout { .. }) => {
            return (
                path,
                Probe::Slow(format!("connect did not finish within {}", crate::text::fmt_duration(timeout))),
            );
        }
        Err(e) => return (path, Probe::Failed(e)),
    };
    let options = match client.options().await {
        Ok(o) => o,
        Err(Error::Unimplemented { message, .. }) => return (path, Probe::NotAPlugin(message)),
        Err(Error::DeadlineExceeded { .. }) => {
            return (
                path,
                Probe::Slow(format!(
                    "GetDevicePluginOptions did not answer within {}",
                    crate::text::fmt_duration(timeout)
                )),
            );
        }
        Err(e) => return (path, Probe::Failed(e)),
    };
    let first = match tokio::time::timeout(timeout, client.list_once(timeout)).await {
        Ok(r) => r,
        Err(_) => Err(Error::Timeout { what: "the first ListAndWatch message".into(), timeout }),
    };
    (path, Probe::Live { options, first })
}

/// Runs every check. Never fails: what cannot be looked at is a finding.
pub async fn run(cfg: &DoctorConfig) -> DoctorReport {
    let started = Instant::now();
    let budget_end = tokio::time::Instant::now() + cfg.budget;
    let timeout = cfg.probe_timeout.min(cfg.budget);
    let dir = cfg.host(&cfg.dir);
    let mut out = Out(Vec::new());
    let dir_ok = check_dir(&dir, &mut out);

    // kubelet.sock: connect only.
    let kubelet_sock = crate::paths::kubelet_socket(&dir);
    let kubelet = tokio::time::timeout_at(budget_end, transport::connect(&kubelet_sock, timeout));

    // Every other entry of the directory.
    let sockets = if dir_ok { list_dir(&dir, cfg.kubelet_version, &mut out) } else { Vec::new() };
    let probes = futures_util::future::join_all(
        sockets.iter().cloned().map(|p| tokio::time::timeout_at(budget_end, probe_plugin(p, timeout))),
    );
    let podres_path = cfg.host(&cfg.podresources_socket);
    let podres = tokio::time::timeout_at(budget_end, probe_podresources(podres_path.clone(), timeout));
    let registry_dir = cfg.host(&cfg.registry_dir);
    let registry = tokio::time::timeout_at(budget_end, probe_registry(registry_dir.clone(), timeout));
    let (kubelet, probes, podres, registry) = tokio::join!(kubelet, probes, podres, registry);

    report_kubelet(kubelet.map(|r| r.map(drop)), &kubelet_sock, &mut out);
    // Live plugins by socket, and what they report.
    let live = report_sockets(&sockets, probes, &mut out);
    let live_devices: BTreeSet<String> = live.iter().flat_map(|p| p.devices.iter().map(|d| d.id.clone())).collect();
    let (pods, allocatable) = match report_podresources(podres, &podres_path, &mut out) {
        Some(p) => (Some(p.pods), Some(p.allocatable)),
        None => (None, None),
    };

    // The checkpoint, against the plugins and PodResources.
    let checkpoint = check_checkpoint(&dir, &live_devices, !sockets.is_empty(), pods.as_deref(), cfg, &mut out);
    // CDI: spec files, and the names the checkpoint's Allocate answers use.
    check_cdi(checkpoint.as_ref(), cfg, &mut out);
    // The kubelet's view (GetAllocatableResources) against each plugin's own.
    kubelet_view::check(&live, allocatable.as_ref(), checkpoint.as_ref().map(|(r, _)| r), &mut out);

    // plugins_registry.
    match registry {
        Err(_) => out.add(
            Severity::Warning,
            ("registry", "registry-budget"),
            registry_dir.display().to_string(),
            "GetInfo probes did not finish within the budget",
        ),
        Ok(found) => out.0.extend(found),
    }

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

/// The entries of the device-plugin directory other than `kubelet.sock`
/// and the checkpoint, sorted: returns the sockets (to probe) and reports
/// every non-socket, non-directory entry as a `file` finding.
fn list_dir(dir: &Path, version: KubeletVersion, out: &mut Out) -> Vec<PathBuf> {
    let mut sockets = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(std::result::Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == crate::paths::KUBELET_SOCKET_NAME || name == crate::paths::CHECKPOINT_FILE_NAME {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        let ft = meta.file_type();
        if ft.is_socket() {
            sockets.push(path);
        } else if ft.is_dir() {
            continue;
        } else {
            non_socket(&path, &name, ft, version, out);
        }
    }
    sockets
}

/// `kubelet.sock`: the outcome of the connect-only probe (outer error: the
/// budget ran out first).
fn report_kubelet(kubelet: Result<crate::Result<()>, tokio::time::error::Elapsed>, kubelet_sock: &Path, out: &mut Out) {
    match kubelet {
        Ok(Ok(())) => out.add(
            Severity::Ok,
            ("kubelet-sock", "kubelet-sock-ok"),
            kubelet_sock.display().to_string(),
            "present, a socket, accepts connections",
        ),
        Ok(Err(e)) => {
            let hint = match &e {
                Error::PermissionDenied { .. } => format!(
                    "{}; in a pod on an SELinux-enforcing node the container also needs type spc_t \
                     (kubectl debug --profile=sysadmin)",
                    crate::podresources::hint(&e).unwrap_or_else(|| "run as root".into())
                ),
                _ => "is the kubelet running, and is this its device-plugin directory? \
                      (--dir; from a pod, --root /host)"
                    .into(),
            };
            out.hint(
                Severity::Error,
                ("kubelet-sock", "kubelet-sock-unreachable"),
                kubelet_sock.display().to_string(),
                format!("{e}: no plugin can register"),
                hint,
            );
        }
        Err(_) => out.hint(
            Severity::Error,
            ("kubelet-sock", "kubelet-sock-slow"),
            kubelet_sock.display().to_string(),
            "no connection within the budget",
            "the kubelet is stuck or overloaded",
        ),
    }
}

/// One `socket` finding per probed socket (outer error: the budget ran out
/// first). Returns the device IDs the live plugins report.
fn report_sockets(
    sockets: &[PathBuf],
    probes: Vec<Result<(PathBuf, Probe), tokio::time::error::Elapsed>>,
    out: &mut Out,
) -> Vec<kubelet_view::LivePlugin> {
    let mut live = Vec::new();
    for (i, r) in probes.into_iter().enumerate() {
        let path = sockets.get(i).cloned().unwrap_or_default();
        let subject = path.display().to_string();
        match r {
            Err(_) => out.hint(
                Severity::Warning,
                ("socket", "socket-slow"),
                subject,
                "slow: no answer within the budget",
                "the plugin is stuck; the kubelet sets no deadline on most calls",
            ),
            Ok((_, Probe::Stale)) => out.hint(
                Severity::Warning,
                ("socket", "stale-socket"),
                subject,
                "stale: connection refused, nothing listens",
                "the process that created it is gone; the next kubelet restart deletes it",
            ),
            Ok((_, Probe::NotAPlugin(msg))) => out.hint(
                Severity::Warning,
                ("socket", "not-a-device-plugin"),
                subject,
                format!("not a device plugin: GetDevicePluginOptions is not served ({msg})"),
                "another service's socket, or a plugin built against another API version (v1alpha)",
            ),
            Ok((_, Probe::Slow(what))) => out.hint(
                Severity::Warning,
                ("socket", "socket-slow"),
                subject,
                format!("slow: {what}"),
                "the plugin is stuck; the kubelet sets no deadline on GetDevicePluginOptions",
            ),
            Ok((_, Probe::Failed(e))) => {
                let hint = crate::podresources::hint(&e).unwrap_or_default();
                out.hint(Severity::Error, ("socket", "socket-failed"), subject, e.to_string(), hint);
            }
            Ok((_, Probe::Live { options, first })) => report_live(subject, &options, first, &mut live, out),
        }
    }
    live
}

/// A live plugin: its devices, NUMA nodes, options and the size of its
/// first ListAndWatch message against the kubelet's receive limit.
fn report_live(
    subject: String,
    options: &crate::proto::deviceplugin::v1beta1::DevicePluginOptions,
    first: crate::Result<crate::plugin_client::Snapshot>,
    live: &mut Vec<kubelet_view::LivePlugin>,
    out: &mut Out,
) {
    match first {
        Ok(snap) => {
            let healthy = snap.devices.iter().filter(|d| d.is_healthy()).count();
            let nodes: BTreeSet<i64> =
                snap.devices.iter().flat_map(|d| d.numa_nodes.iter().flatten().copied()).collect();
            let numa = if nodes.is_empty() {
                "no NUMA".to_string()
            } else {
                format!("NUMA {}", nodes.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
            };
            live.push(kubelet_view::LivePlugin { subject: subject.clone(), devices: snap.devices.clone() });
            let opts = match (options.pre_start_required, options.get_preferred_allocation_available) {
                (false, false) => "no options",
                (true, false) => "options: PreStartContainer",
                (false, true) => "options: GetPreferredAllocation",
                (true, true) => "options: PreStartContainer, GetPreferredAllocation",
            };
            let evidence = format!(
                "live: {} device(s), {healthy} healthy, {numa}; first message {} bytes of {KUBELET_MAX_RECV}; {opts}",
                snap.devices.len(),
                snap.encoded_len,
            );
            if snap.encoded_len > KUBELET_MAX_RECV / 4 * 3 {
                out.hint(
                    Severity::Warning,
                    ("socket", "message-near-limit"),
                    subject,
                    evidence,
                    "the message is close to the kubelet's 4 MiB limit",
                );
            } else {
                out.add(Severity::Ok, ("socket", "plugin-live"), subject, evidence);
            }
        }
        Err(e @ Error::MessageTooLarge { .. }) => out.hint(
            Severity::Error,
            ("socket", "message-too-large"),
            subject,
            format!("live, but its first ListAndWatch message is too large: {e}"),
            "the kubelet drops the stream and marks every device unhealthy; send fewer or smaller devices",
        ),
        Err(e) => out.hint(
            Severity::Warning,
            ("socket", "no-first-list"),
            subject,
            format!("live, but no first ListAndWatch message: {e}"),
            "the kubelet shows 0 devices until the first message arrives",
        ),
    }
}

/// What PodResources answered (outer error: the budget ran out first).
/// Returns what it learnt when List answered.
fn report_podresources(
    podres: Result<crate::Result<PodResourcesProbe>, tokio::time::error::Elapsed>,
    podres_path: &Path,
    out: &mut Out,
) -> Option<PodResourcesProbe> {
    match podres {
        Err(_) => {
            out.hint(
                Severity::Warning,
                ("podresources", "podresources-slow"),
                podres_path.display().to_string(),
                "no answer within the budget",
                "the kubelet is busy or stuck",
            );
            None
        }
        Ok(Err(e)) => {
            out.hint(
                Severity::Warning,
                ("podresources", "podresources-unreachable"),
                podres_path.display().to_string(),
                format!("not reachable: {e}"),
                "is the kubelet running? A kubelet with another --root-dir serves it at \
                 <root-dir>/pod-resources/kubelet.sock: pass --podresources-socket",
            );
            None
        }
        Ok(Ok(p)) => {
            out.add(
                Severity::Ok,
                ("podresources", "podresources-ok"),
                podres_path.display().to_string(),
                format!("reachable: List answered over {} ({} pod(s)); Get {}", p.api, p.pods.len(), p.get),
            );
            Some(p)
        }
    }
}

/// The directory: present, a directory, its mode, its SELinux label.
fn check_dir(dir: &Path, out: &mut Out) -> bool {
    let subject = dir.display().to_string();
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => {
            out.hint(
                Severity::Error,
                ("dir", "dir-unreadable"),
                subject,
                format!("cannot be read: {e}"),
                "is the kubelet installed here? From a pod, pass --root /host (or set DPCTL_ROOT)",
            );
            return false;
        }
    };
    if !meta.is_dir() {
        out.hint(
            Severity::Error,
            ("dir", "dir-not-a-directory"),
            subject,
            "not a directory",
            "the kubelet needs a directory here",
        );
        return false;
    }
    let mode = meta.permissions().mode() & 0o7777;
    let label = selinux_label(dir).map_or_else(String::new, |l| format!(", SELinux {l}"));
    if mode & 0o002 != 0 {
        out.hint(
            Severity::Warning,
            ("dir", "dir-world-writable"),
            subject,
            format!("mode {mode:04o} (world-writable){label}"),
            "anyone can plant sockets; the kubelet creates it 0750",
        );
    } else {
        out.add(Severity::Ok, ("dir", "dir-ok"), subject, format!("present, mode {mode:04o}{label}"));
    }
    if std::fs::read_dir(dir).is_err() {
        out.hint(
            Severity::Error,
            ("dir", "dir-unlistable"),
            dir.display().to_string(),
            "cannot list it",
            "run as root",
        );
        return false;
    }
    true
}

/// The `security.selinux` extended attribute, when readable.
fn selinux_label(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let name = c"security.selinux";
    let mut buf = [0u8; 256];
    // SAFETY: both strings are NUL-terminated and the buffer length is passed.
    let n = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(n).ok()?;
    let label = buf.get(..n)?;
    Some(String::from_utf8_lossy(label).trim_end_matches('\0').to_string())
}

/// A non-socket entry of the device-plugin directory (not the checkpoint,
/// not a directory): what the chosen kubelet's start-up cleanup
/// (docs/kubelet-versions.md §4) does with it.
fn non_socket(path: &Path, name: &str, ft: std::fs::FileType, version: KubeletVersion, out: &mut Out) {
    let subject = path.display().to_string();
    let symlink = ft.is_symlink();
    let rule = version.cleanup_rule();
    let (what, deleted) = if symlink {
        // §4: 1.26-1.32 Lstat: the link itself goes; 1.33+ Stat: only a link whose target is a socket.
        let target = std::fs::metadata(path);
        let what = match &target {
            Ok(m) if m.file_type().is_socket() => "a symlink to a socket",
            Ok(m) if m.is_dir() => "a symlink to a directory",
            Ok(_) => "a symlink to a file",
            Err(_) => "a dangling symlink",
        };
        let to_socket = target.as_ref().is_ok_and(|m| m.file_type().is_socket());
        (what, rule == CleanupRule::AllNonDirectories || to_socket)
    } else if name.ends_with(".sock") {
        ("a regular file named like a socket: no plugin can listen here", rule == CleanupRule::AllNonDirectories)
    } else if name.starts_with('.') {
        ("a hidden file (a checkpoint temporary file left by a crash?)", rule == CleanupRule::AllNonDirectories)
    } else if ft.is_fifo() {
        ("a FIFO", rule == CleanupRule::AllNonDirectories)
    } else if ft.is_block_device() || ft.is_char_device() {
        ("a device node", rule == CleanupRule::AllNonDirectories)
    } else {
        ("a regular file", rule == CleanupRule::AllNonDirectories)
    };
    let other = match rule {
        CleanupRule::AllNonDirectories => "1.33+ delete sockets only",
        CleanupRule::SocketsOnly => "1.26-1.32 delete every non-directory",
    };
    let fate = if deleted {
        format!("kubelet {version} deletes it at restart ({rule}; {other})")
    } else {
        format!("kubelet {version} keeps it at restart ({rule}; {other})")
    };
    let hint = if name.ends_with(".sock") && !symlink {
        "a plugin that wants this name may fail to bind; remove it if nothing owns it"
    } else if deleted {
        "nothing to do unless a tool needs it: it will be gone after the next kubelet restart"
    } else {
        "it stays: remove it if nothing owns it"
    };
    out.hint(Severity::Warning, ("file", "stray-file"), subject, format!("{what}; {fate}"), hint);
}

/// What the PodResources probe learnt.
struct PodResourcesProbe {
    /// The API version List answered over.
    api: String,
    /// Whether Get is served.
    get: String,
    /// The pods.
    pods: Vec<crate::proto::podresources::v1::PodResources>,
    /// GetAllocatableResources: (resource, device ID) pairs, or why not.
    allocatable: kubelet_view::Allocatable,
}

async fn probe_podresources(path: PathBuf, timeout: Duration) -> crate::Result<PodResourcesProbe> {
    let config = PodResourcesConfig {
        transport: ClientConfig {
            connect_timeout: timeout,
            call_timeout: timeout,
            max_recv_bytes: PodResourcesConfig::default().transport.max_recv_bytes,
            tap: None,
        },
        rate_limit_retries: 0,
        ..PodResourcesConfig::default()
    };
    let client = PodResourcesClient::connect(&path, &config).await?;
    let listing = client.list().await?;
    let api = format!("{:?}", listing.api).to_lowercase();
    // A read-only Get of a pod that does not exist tells whether Get is served.
    let get = match client.get("dpctl-doctor-probe", "dpctl-doctor-probe").await {
        Ok(_) => "enabled".to_string(),
        Err(e) if e.to_string().contains("disabled") => {
            "disabled (feature gate KubeletPodResourcesGet off; beta from 1.34, GA in 1.36)".to_string()
        }
        Err(Error::Unimplemented { .. }) => "not served (kubelet older than 1.27, or v1alpha1 only)".to_string(),
        Err(Error::Invalid { .. }) => "not available over v1alpha1".to_string(),
        Err(_) => "enabled".to_string(),
    };
    let allocatable = match client.allocatable().await {
        Ok(a) => Ok(a
            .devices
            .iter()
            .flat_map(|d| d.device_ids.iter().map(move |id| (d.resource_name.clone(), id.clone())))
            .collect()),
        Err(e) => Err(e.to_string()),
    };
    Ok(PodResourcesProbe { api, get, pods: listing.pods, allocatable })
}

/// `plugins_registry`: every socket's GetInfo (read-only).
async fn probe_registry(dir: PathBuf, timeout: Duration) -> Vec<Finding> {
    let mut out = Out(Vec::new());
    let Ok(rd) = std::fs::read_dir(&dir) else {
        out.add(
            Severity::Ok,
            ("registry", "no-registry-dir"),
            dir.display().to_string(),
            "no plugins_registry directory",
        );
        return out.0;
    };
    let mut socks: Vec<PathBuf> = rd
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    socks.sort();
    if socks.is_empty() {
        out.add(
            Severity::Ok,
            ("registry", "no-registration-sockets"),
            dir.display().to_string(),
            "no registration sockets",
        );
    }
    let infos = futures_util::future::join_all(socks.iter().map(|p| async move {
        let channel = transport::connect(p, timeout).await?;
        let mut c = reg::registration_client::RegistrationClient::new(channel);
        match tokio::time::timeout(timeout, c.get_info(reg::InfoRequest {})).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(Error::from_status("pluginregistration.Registration/GetInfo", p, &s, KUBELET_MAX_RECV)),
            Err(_) => Err(Error::DeadlineExceeded {
                rpc: "pluginregistration.Registration/GetInfo".into(),
                path: p.clone(),
                timeout,
            }),
        }
    }))
    .await;
    for (p, info) in socks.iter().zip(infos) {
        let subject = p.display().to_string();
        match info {
            Ok(i) => out.add(
                Severity::Ok,
                ("registry", "registry-ok"),
                subject,
                format!(
                    "GetInfo: type {}, name {}, endpoint {:?}, versions {}",
                    i.r#type,
                    i.name,
                    i.endpoint,
                    i.supported_versions.join(",")
                ),
            ),
            Err(Error::ConnectionRefused { .. }) => out.hint(
                Severity::Warning,
                ("registry", "stale-registry-socket"),
                subject,
                "stale: connection refused",
                "the plugin watcher deregisters it; remove it if nothing owns it",
            ),
            Err(e) => out.hint(
                Severity::Warning,
                ("registry", "registry-failed"),
                subject,
                e.to_string(),
                crate::podresources::hint(&e).unwrap_or_default(),
            ),
        }
    }
    out.0
}

/// The checkpoint: checksum and format (judged by the chosen kubelet),
/// devices no plugin reports, pods PodResources does not list (and the other
/// way round). Returns the checkpoint when it can be read.
fn check_checkpoint(
    dir: &Path,
    live_devices: &BTreeSet<String>,
    any_plugin: bool,
    pods: Option<&[crate::proto::podresources::v1::PodResources]>,
    cfg: &DoctorConfig,
    out: &mut Out,
) -> Option<(CheckpointReport, BTreeMap<String, String>)> {
    let path = dir.join(crate::paths::CHECKPOINT_FILE_NAME);
    let subject = path.display().to_string();
    let report = read_checkpoint(&path, any_plugin, out)?;
    if !judge_checkpoint_format(&report, subject, cfg.kubelet_version, out) {
        // Its Allocate answers still name CDI devices when the JSON parsed.
        return Some((report, BTreeMap::new()));
    }
    let listed = listed_devices(pods.unwrap_or_default());
    let names = pod_names(&report, &listed);
    if any_plugin {
        check_gone_devices(&report, live_devices, &names, out);
    }
    if pods.is_some() {
        check_against_podresources(&report, &listed, &names, out);
    }
    Some((report, names))
}

/// Reads the checkpoint; a missing or unreadable one is a finding (and `None`).
fn read_checkpoint(path: &Path, any_plugin: bool, out: &mut Out) -> Option<CheckpointReport> {
    let subject = path.display().to_string();
    match CheckpointReport::read(path) {
        Ok(r) => Some(r),
        Err(Error::Invalid { message, .. }) if message.starts_with("no such file") => {
            let sev = if any_plugin { Severity::Warning } else { Severity::Ok };
            out.add(
                sev,
                ("checkpoint", "no-checkpoint"),
                subject,
                "no checkpoint (the kubelet writes one once a plugin registered)",
            );
            None
        }
        Err(e) => {
            out.hint(
                Severity::Error,
                ("checkpoint", "checkpoint-unreadable"),
                subject,
                e.to_string(),
                crate::podresources::hint(&e).unwrap_or_default(),
            );
            None
        }
    }
}

/// Checksum and layout, judged by the chosen kubelet. Returns whether the
/// kubelet restores from it (and so whether its entries are worth comparing).
fn judge_checkpoint_format(report: &CheckpointReport, subject: String, version: KubeletVersion, out: &mut Out) -> bool {
    match (report.verifies, report.format) {
        (true, Some(crate::checkpoint::Format::Current)) => out.add(
            Severity::Ok,
            ("checkpoint", "checkpoint-ok"),
            subject,
            format!(
                "checksum {} verifies; {} {}",
                report.stored_checksum.unwrap_or_default(),
                report.entries.len(),
                if report.entries.len() == 1 { "entry" } else { "entries" }
            ),
        ),
        // docs/kubelet-versions.md §7: up to 1.30 the pre-1.20 layout is read; 1.31+ has no fallback.
        (true, Some(crate::checkpoint::Format::V1)) if version.reads_v1_checkpoint() => out.hint(
            Severity::Warning,
            ("checkpoint", "checkpoint-v1-layout"),
            subject,
            format!("pre-1.20 layout: kubelet {version} reads it; 1.31+ fail and restore nothing"),
            "upgrade with care: let a 1.26-1.30 kubelet rewrite it first",
        ),
        (true, Some(crate::checkpoint::Format::V1)) => {
            out.hint(
                Severity::Error,
                ("checkpoint", "checkpoint-v1-unreadable"),
                subject,
                format!(
                    "pre-1.20 layout: kubelet {version} cannot read it (1.31+ have no fallback) and restores nothing at start"
                ),
                "running pods keep their devices only until the kubelet restarts; let a 1.26-1.30 kubelet rewrite it, \
                 or pass --kubelet-version if this node runs an older kubelet",
            );
            return false;
        }
        _ => {
            let sums = match (report.stored_checksum, report.computed_checksum) {
                (Some(s), Some(c)) => format!("stored checksum {s}, computed {c}"),
                _ => report.error.clone().unwrap_or_default(),
            };
            out.hint(
                Severity::Error,
                ("checkpoint", "checkpoint-corrupt"),
                subject,
                format!("corrupt: {sums}; the next kubelet start restores nothing from it"),
                "devices of running pods are then no longer known to be in use and can be given to new pods: \
                 drain the node's device users before restarting the kubelet; `dpctl checkpoint show` lists what it holds",
            );
            return false;
        }
    }
    true
}

/// What PodResources lists, by (container, resource, device), with the pod
/// as `NAMESPACE/NAME`: the checkpoint knows pods by UID only, PodResources
/// by name only.
fn listed_devices(pods: &[crate::proto::podresources::v1::PodResources]) -> BTreeMap<(String, String, String), String> {
    let mut listed: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for p in pods {
        for c in &p.containers {
            for d in &c.devices {
                for id in &d.device_ids {
                    listed.insert(
                        (c.name.clone(), d.resource_name.clone(), id.clone()),
                        format!("{}/{}", p.namespace, p.name),
                    );
                }
            }
        }
    }
    listed
}

/// Pod names by UID, for the checkpoint entries whose devices PodResources lists.
fn pod_names(
    report: &CheckpointReport,
    listed: &BTreeMap<(String, String, String), String>,
) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for e in &report.entries {
        let pod = e
            .devices_per_numa
            .values()
            .flatten()
            .find_map(|id| listed.get(&(e.container.clone(), e.resource.clone(), id.clone())));
        if let Some(pod) = pod {
            names.insert(e.pod_uid.clone(), pod.clone());
        }
    }
    names
}

/// Devices the checkpoint holds for pods that no live plugin reports.
fn check_gone_devices(
    report: &CheckpointReport,
    live_devices: &BTreeSet<String>,
    names: &BTreeMap<String, String>,
    out: &mut Out,
) {
    for e in &report.entries {
        let gone: Vec<&String> =
            e.devices_per_numa.values().flatten().filter(|id| !live_devices.contains(*id)).collect();
        if !gone.is_empty() {
            out.hint(
                Severity::Warning,
                ("checkpoint", "checkpoint-device-gone"),
                pod_subject(names, &e.pod_uid, &e.container),
                format!(
                    "holds {} of {} that no live plugin reports",
                    gone.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","),
                    e.resource
                ),
                "the plugin is gone or renamed its devices; the pod keeps them until it ends",
            );
        }
    }
}

/// Checkpoint against PodResources, by (container, resource, device), both ways.
fn check_against_podresources(
    report: &CheckpointReport,
    listed: &BTreeMap<(String, String, String), String>,
    names: &BTreeMap<String, String>,
    out: &mut Out,
) {
    let mut recorded: BTreeSet<(String, String, String)> = BTreeSet::new();
    for e in &report.entries {
        let ids: Vec<&String> = e.devices_per_numa.values().flatten().collect();
        let missing = ids
            .iter()
            .filter(|id| !listed.contains_key(&(e.container.clone(), e.resource.clone(), (**id).clone())))
            .count();
        for id in &ids {
            recorded.insert((e.container.clone(), e.resource.clone(), (*id).clone()));
        }
        if missing > 0 {
            out.hint(
                Severity::Warning,
                ("checkpoint", "checkpoint-pod-not-listed"),
                pod_subject(names, &e.pod_uid, &e.container),
                format!("the checkpoint gives it {} of {}; PodResources lists no container holding them", ids.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","), e.resource),
                "a pod the kubelet no longer runs (its devices are freed at the next admission), or a checkpoint from another kubelet",
            );
        }
    }
    for ((container, resource, id), pod) in listed {
        if !recorded.contains(&(container.clone(), resource.clone(), id.clone())) && resource.contains('/') {
            out.hint(
                Severity::Warning,
                ("podresources", "podresources-not-in-checkpoint"),
                format!("pod {pod} / {container}"),
                format!("PodResources says it holds {id} of {resource}; the checkpoint has no such entry"),
                "the checkpoint is older than the allocation, or was replaced",
            );
        }
    }
}

/// `pod NAMESPACE/NAME / CONTAINER` when PodResources named the pod, else
/// `pod UID / CONTAINER`.
fn pod_subject(names: &BTreeMap<String, String>, uid: &str, container: &str) -> String {
    match names.get(uid) {
        Some(name) => format!("pod {name} / {container}"),
        None => format!("pod {uid} / {container}"),
    }
}

/// CDI: spec files that do not parse, and CDI names in the checkpoint's
/// stored Allocate answers that no spec defines.
fn check_cdi(checkpoint: Option<&(CheckpointReport, BTreeMap<String, String>)>, cfg: &DoctorConfig, out: &mut Out) {
    let empty = BTreeMap::new();
    let (entries, names) = checkpoint.map_or((&[][..], &empty), |(r, n)| (r.entries.as_slice(), n));
    let wanted: Vec<(String, String)> = entries
        .iter()
        .flat_map(|e| {
            let who = pod_subject(names, &e.pod_uid, &e.container);
            e.allocation.iter().flat_map(cdi::names_in).map(move |n| (n, who.clone()))
        })
        .collect();
    let dirs: Vec<PathBuf> = cfg.cdi_dirs.iter().map(|d| cfg.host(d)).collect();
    let cdi = cdi::read_dirs(&dirs);
    for (p, why) in &cdi.broken {
        out.hint(
            Severity::Warning,
            ("cdi", "cdi-spec-broken"),
            p.display().to_string(),
            format!("does not parse: {why}"),
            "the container runtime skips it (or fails): fix or remove it",
        );
    }
    for (name, who) in &wanted {
        if !cdi.names.contains(name) {
            out.hint(
                Severity::Error,
                ("cdi", "cdi-name-undefined"),
                who.clone(),
                format!("Allocate answered CDI device {name}, which no spec in {} defines", dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" or ")),
                "the container runtime cannot resolve it and the container fails to start; install the vendor's CDI spec",
            );
        }
    }
    let where_ = dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" ");
    if !wanted.is_empty() && wanted.iter().all(|(n, _)| cdi.names.contains(n)) {
        out.add(
            Severity::Ok,
            ("cdi", "cdi-ok"),
            where_,
            format!("all {} CDI name(s) in the checkpoint are defined", wanted.len()),
        );
    } else if wanted.is_empty() && !cdi.specs.is_empty() {
        out.add(
            Severity::Ok,
            ("cdi", "cdi-ok"),
            where_,
            format!(
                "{} spec file(s) define {} device name(s); the checkpoint's Allocate answers name none",
                cdi.specs.len(),
                cdi.names.len()
            ),
        );
    }
}
