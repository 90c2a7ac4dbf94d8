//! Doctor on a node with DRA drivers: the probes (the kubelet's command
//! line in `/proc`, each `DRAPlugin` registration's service socket, a
//! plugins_registry outside the kubelet's root, `dra_manager_state`) and
//! their wiring to the judgements of `dra_judge.rs` and `overlap.rs`.
//! Like the rest of doctor it only looks: it connects, calls GetInfo and an
//! empty NodePrepareResources (no claim, nothing prepared), and reads files.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cdi::CdiRegistry;
use super::dra_judge::{self, DraRegistration, EndpointSeen, KubeletProc, KubeletRoot};
use super::overlap::{self, DpUse, DraUse};
use super::{DoctorConfig, Out};
use crate::checkpoint::report::CheckpointReport;
use crate::dra::Service;
use crate::error::Error;
use crate::proto::pluginregistration as reg;
use crate::transport::ClientConfig;

/// Most bytes of one `/proc/<pid>/cmdline` read.
const MAX_CMDLINE: u64 = 1024 * 1024;

/// The kubelet processes in `proc_dir`, lowest PID first.
fn read_kubelets(proc_dir: &Path) -> Result<Vec<KubeletProc>, String> {
    let rd = std::fs::read_dir(proc_dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such directory".to_string(),
        _ => e.to_string(),
    })?;
    let mut procs = Vec::new();
    for e in rd.filter_map(std::result::Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        // A regular file only: opening a FIFO planted under --root would block.
        let path = e.path().join("cmdline");
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let Ok(f) = std::fs::File::open(&path) else { continue };
        let mut bytes = Vec::new();
        if f.take(MAX_CMDLINE).read_to_end(&mut bytes).is_err() {
            continue;
        }
        let args: Vec<String> = bytes
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if dra_judge::is_kubelet(&args) {
            procs.push(KubeletProc { pid, args });
        }
    }
    procs.sort_by_key(|p| p.pid);
    Ok(procs)
}

/// The kubelet's root directory (a host path), with its `kubelet-root` finding.
pub(super) fn kubelet_root(cfg: &DoctorConfig, out: &mut Out) -> KubeletRoot {
    if cfg.kubelet_root_dir.is_none()
        && let Some(root) = sim_root(cfg)
    {
        return dra_judge::judge_sim_root(&cfg.dir, &root, out);
    }
    let proc_dir = cfg.host(Path::new("/proc"));
    let procs = if cfg.kubelet_root_dir.is_some() { Ok(Vec::new()) } else { read_kubelets(&proc_dir) };
    let mut root = dra_judge::judge_root(cfg.kubelet_root_dir.as_deref(), procs, &proc_dir, out);
    let default = Path::new(dra_judge::DEFAULT_ROOT_DIR);
    if root.dir != default && same_dir(&cfg.host(&root.dir), &cfg.host(default)) {
        root.aliases.push(default.to_path_buf());
    }
    root
}

/// The parent of `--dir` when kubelet-sim serves that directory (its
/// control socket or DRA record in `<dir>/.dpctl/`) and the parent holds a
/// plugins_registry: the sim's kubelet root.
fn sim_root(cfg: &DoctorConfig) -> Option<PathBuf> {
    let ctl = cfg.host(&cfg.dir).join(crate::paths::CONTROL_DIR_NAME);
    let sim = ctl.join("kubelet-sim.sock").exists() || ctl.join(crate::kubelet_sim::DRA_MARKER_NAME).exists();
    let root = cfg.dir.parent()?;
    (sim && cfg.host(root).join("plugins_registry").is_dir()).then(|| root.to_path_buf())
}

/// CDI directories for DRA: doctor's, plus `<root>/cdi` on a node
/// kubelet-sim made (the /var/run/cdi of dra smoke and the examples).
pub(super) fn cdi_dirs(cfg: &DoctorConfig, root: &KubeletRoot) -> Vec<PathBuf> {
    let mut dirs = cfg.cdi_dirs.clone();
    if root.source == dra_judge::RootSource::Sim {
        dirs.push(root.dir.join("cdi"));
    }
    dirs
}

/// Both paths name one directory (a symbolic link, a bind mount): the same
/// device and inode.
fn same_dir(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.is_dir() && x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// A path a driver sent (a host path) as doctor reaches it: under `--root`,
/// unless it already is (a driver that shares doctor's view, as in a
/// sandbox, names it so). Returns (host path, path to open).
fn from_driver(cfg: &DoctorConfig, p: &Path) -> (PathBuf, PathBuf) {
    let root = &cfg.root;
    if root != Path::new("/")
        && !root.as_os_str().is_empty()
        && let Ok(rest) = p.strip_prefix(root)
    {
        // Resolved inside the root, as every other path doctor opens.
        let host = Path::new("/").join(rest);
        let open = cfg.host(&host);
        return (host, open);
    }
    (p.to_path_buf(), cfg.host(p))
}

/// Connects to the service socket and asks for the node service the
/// kubelet would use (an empty NodePrepareResources).
async fn probe_endpoint(path: &Path, info: &reg::PluginInfo, timeout: Duration) -> EndpointSeen {
    match crate::transport::connect(path, timeout).await {
        Ok(_) => {}
        Err(Error::ConnectionRefused { .. }) => return EndpointSeen::Stale,
        Err(Error::NoSocket { .. }) => return EndpointSeen::Missing,
        Err(e) => return EndpointSeen::Failed(e.to_string()),
    }
    let Some(api) = crate::dra::chosen_node_api(&info.supported_versions) else {
        return EndpointSeen::Live("no node service to ask".into());
    };
    let cfg = ClientConfig { connect_timeout: timeout, call_timeout: timeout, ..ClientConfig::default() };
    EndpointSeen::Live(crate::dra::client::probe(path, Service::Node(api), &cfg).await)
}

/// Where the kubelet watches for registrations, as a host path.
pub(super) fn watched_registry(cfg: &DoctorConfig, root: &KubeletRoot) -> PathBuf {
    cfg.registry_dir.clone().unwrap_or_else(|| root.dir.join("plugins_registry"))
}

/// Every `DRAPlugin` registration of the watched plugins_registry judged
/// (with its service socket probed), then the sockets in the default
/// plugins_registry when the kubelet watches another. Returns the names of
/// the drivers the kubelet sees.
pub(super) async fn check_registrations(
    cfg: &DoctorConfig,
    root: &KubeletRoot,
    found: &[(PathBuf, reg::PluginInfo)],
    budget_end: tokio::time::Instant,
    out: &mut Out,
) -> BTreeSet<String> {
    let timeout = cfg.probe_timeout.min(cfg.budget);
    let dra: Vec<&(PathBuf, reg::PluginInfo)> =
        found.iter().filter(|(_, i)| i.r#type == reg::DRA_PLUGIN_TYPE).collect();
    let probes = futures_util::future::join_all(dra.iter().map(|(sock, info)| async move {
        let named = crate::dra::client::endpoint_of(info, sock);
        let (host, open) = from_driver(cfg, &named);
        let seen = if crate::dra::chosen_node_api(&info.supported_versions).is_none() {
            None
        } else if !named.is_absolute() {
            let why = "not an absolute path: the kubelet dials it relative to its own working directory";
            Some(EndpointSeen::Failed(why.into()))
        } else {
            let probe = tokio::time::timeout_at(budget_end, probe_endpoint(&open, info, timeout)).await;
            Some(probe.unwrap_or_else(|_| EndpointSeen::Failed("not probed within the budget".into())))
        };
        let (socket, _) = from_driver(cfg, sock);
        DraRegistration { socket, info: info.clone(), endpoint: host, seen }
    }))
    .await;
    for r in &probes {
        dra_judge::judge_registration(r, root, cfg.kubelet_version, out);
    }
    let watched = cfg.host(&watched_registry(cfg, root));
    let default = cfg.host(Path::new(crate::dra::DEFAULT_REGISTRY_DIR));
    // The default plugins_registry, when it is not the watched one under another name.
    if default != watched && !same_dir(&default, &watched) {
        let other = tokio::time::timeout_at(budget_end, super::probe::probe_registry(default.clone(), timeout)).await;
        if let Ok(Some(sockets)) = other {
            dra_judge::judge_hidden(Path::new(crate::dra::DEFAULT_REGISTRY_DIR), &root.dir, sockets, out);
        }
    }
    probes.into_iter().map(|r| r.info.name).collect()
}

/// What the device manager's checkpoint and PodResources say was handed out.
pub(super) struct Handed<'a> {
    /// The device-plugin checkpoint, when it was read.
    pub checkpoint: Option<&'a CheckpointReport>,
    /// Pod UID to `namespace/name`, where PodResources told.
    pub names: Option<&'a BTreeMap<String, String>>,
    /// PodResources' pods, when it answered.
    pub pods: Option<&'a [crate::proto::podresources::v1::PodResources]>,
}

/// `dra_manager_state` (read and verified), then the device plugins
/// against the DRA drivers (`overlap.rs`).
pub(super) fn check_state_and_overlap(
    cfg: &DoctorConfig,
    root: &KubeletRoot,
    drivers: &BTreeSet<String>,
    handed: &Handed<'_>,
    cdi: &CdiRegistry,
    out: &mut Out,
) {
    let path = root.dir.join(crate::dra::state::FILE_NAME);
    let file = cfg.host(&path);
    let read = std::fs::symlink_metadata(&file).is_ok().then(|| crate::dra::state::read(&file));
    let state = dra_judge::judge_state(&path, read, drivers, out);
    let mut prepared = BTreeSet::new();
    for c in state.iter().flat_map(|s| &s.claims) {
        for (driver, st) in c.driver_state.iter().flatten() {
            for id in st.devices.iter().flatten().flat_map(|d| d.cdi_device_ids.iter().flatten()) {
                let claim = format!("{}/{}", c.namespace, c.claim_name);
                let source = "dra_manager_state";
                prepared.insert(DraUse { driver: driver.clone(), claim, cdi_id: id.clone(), source });
            }
        }
    }
    let mut dp_resources = BTreeSet::new();
    for p in handed.pods.unwrap_or_default() {
        for c in &p.containers {
            dp_resources.extend(c.devices.iter().map(|d| d.resource_name.clone()));
            for d in &c.dynamic_resources {
                for r in &d.claim_resources {
                    for id in &r.cdi_devices {
                        let claim = format!("{}/{}", d.claim_namespace, d.claim_name);
                        let (driver, cdi_id) = (r.driver_name.clone(), id.name.clone());
                        if !prepared.iter().any(|u| u.cdi_id == cdi_id && u.claim == claim) {
                            prepared.insert(DraUse { driver, claim, cdi_id, source: "PodResources" });
                        }
                    }
                }
            }
        }
    }
    let from_state: Vec<(String, String, String)> = prepared
        .iter()
        .filter(|u| u.source == "dra_manager_state")
        .map(|u| (u.driver.clone(), u.claim.clone(), u.cdi_id.clone()))
        .collect();
    let dirs = cdi_dirs(cfg, root);
    dra_judge::judge_prepared_cdi(&from_state, &dirs, &cdi.names, out);
    let dp = dp_uses(handed, &mut dp_resources);
    let mut all_drivers = drivers.clone();
    all_drivers.extend(prepared.iter().map(|u| u.driver.clone()));
    let prepared: Vec<DraUse> = prepared.into_iter().collect();
    overlap::check(&dp, &dp_resources, &prepared, &all_drivers, cdi, out);
}

/// The checkpoint's Allocate answers, one per (pod, container, resource).
fn dp_uses(handed: &Handed<'_>, resources: &mut BTreeSet<String>) -> Vec<DpUse> {
    let Some(ck) = handed.checkpoint else { return Vec::new() };
    resources.extend(ck.registered_devices.keys().cloned());
    ck.entries
        .iter()
        .map(|e| {
            resources.insert(e.resource.clone());
            let pod = handed
                .names
                .and_then(|n| n.get(&e.pod_uid))
                .map_or_else(|| e.pod_uid.clone(), |n| format!("{n} ({})", e.pod_uid));
            let (nodes, cdi) = match &e.allocation {
                Some(a) => (a.devices.iter().map(|d| d.host_path.clone()).collect(), super::cdi::names_in(a)),
                None => (Vec::new(), Vec::new()),
            };
            DpUse { resource: e.resource.clone(), pod, container: e.container.clone(), nodes, cdi }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelets_are_found_in_a_proc_tree_and_others_left_out() {
        let dir = tempfile::tempdir().unwrap();
        for (pid, cmd) in [
            ("12", &b"/usr/bin/kubelet\0--root-dir\0/data/kubelet\0"[..]),
            ("3", b"/bin/sh\0-c\0kubelet\0"),
            ("x", b"kubelet\0"),
        ] {
            std::fs::create_dir_all(dir.path().join(pid)).unwrap();
            std::fs::write(dir.path().join(pid).join("cmdline"), cmd).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("99")).unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("99/cmdline").to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let procs = read_kubelets(dir.path()).unwrap();
        assert_eq!(procs.len(), 1);
        assert_eq!((procs[0].pid, procs[0].args[2].as_str()), (12, "/data/kubelet"));
        assert!(read_kubelets(&dir.path().join("missing")).is_err());
    }

    /// A default root that is a symbolic link to the real one is the same
    /// directory: its plugins_registry is the watched one.
    #[test]
    fn a_symlinked_default_root_is_an_alias() {
        let sb = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sb.path().join("data/kubelet/plugins_registry")).unwrap();
        std::fs::create_dir_all(sb.path().join("var/lib")).unwrap();
        std::os::unix::fs::symlink("../../data/kubelet", sb.path().join("var/lib/kubelet")).unwrap();
        let mut cfg = DoctorConfig::new(sb.path());
        cfg.kubelet_root_dir = Some("/data/kubelet".into());
        let root = kubelet_root(&cfg, &mut Out(Vec::new()));
        assert_eq!(root.aliases, [PathBuf::from("/var/lib/kubelet")]);
        cfg.kubelet_root_dir = Some("/elsewhere".into());
        assert!(kubelet_root(&cfg, &mut Out(Vec::new())).aliases.is_empty());
    }

    #[test]
    fn driver_paths_are_host_paths_under_the_root() {
        let mut cfg = DoctorConfig::new("/host");
        let p = Path::new("/var/lib/kubelet/plugins/d/dra.sock");
        assert_eq!(from_driver(&cfg, p), (p.to_path_buf(), PathBuf::from("/host/var/lib/kubelet/plugins/d/dra.sock")));
        let inside = Path::new("/host/var/lib/kubelet/x.sock");
        assert_eq!(from_driver(&cfg, inside).0, PathBuf::from("/var/lib/kubelet/x.sock"));
        // A driver's `..` never leads doctor out of the root.
        let out = Path::new("/var/lib/kubelet/plugins/../../../../../../tmp/x.sock");
        assert_eq!(from_driver(&cfg, out).1, PathBuf::from("/host/tmp/x.sock"));
        let out = Path::new("/host/../tmp/x.sock");
        assert_eq!(from_driver(&cfg, out).1, PathBuf::from("/host/tmp/x.sock"));
        cfg.root = PathBuf::from("/");
        assert_eq!(from_driver(&cfg, p), (p.to_path_buf(), p.to_path_buf()));
    }
}
