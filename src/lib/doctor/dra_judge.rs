//! Doctor's DRA judgements, pure functions of what `dra.rs` gathered: the
//! kubelet's real root directory (from its command line), each `DRAPlugin`
//! registration (service choice, the service socket, where its sockets
//! sit against that root), registration sockets the kubelet never sees, and
//! `dra_manager_state` (docs/dra.md §2, §4, §9).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{Out, Severity};
use crate::dra::state::StateReport;
use crate::error::Error;
use crate::kubelet_version::KubeletVersion;
use crate::proto::pluginregistration as reg;

/// The kubelet's default `--root-dir` (`cmd/kubelet/app/options/options.go`).
pub(super) const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";

/// A running kubelet's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KubeletProc {
    /// Its process ID.
    pub pid: u32,
    /// `argv`.
    pub args: Vec<String>,
}

/// Where the kubelet's root directory was learnt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RootSource {
    /// `--kubelet-root-dir`.
    Given,
    /// The `--root-dir` flag of this kubelet process.
    Flag(u32),
    /// This kubelet process has no `--root-dir`: the default.
    Default(u32),
    /// No kubelet process was seen: the default is assumed.
    NotSeen,
    /// `--dir` is a device-plugin directory kubelet-sim serves (its
    /// `.dpctl/` control directory): the root is its parent, as the sim's.
    Sim,
}

/// The kubelet's root directory (a host path) and how it was learnt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KubeletRoot {
    /// The directory.
    pub dir: PathBuf,
    /// How it was learnt.
    pub source: RootSource,
    /// Other paths naming the same directory (the default root, when it is
    /// a symbolic link to this one or the same mount); filled by the probe.
    pub aliases: Vec<PathBuf>,
}

/// The root of a node kubelet-sim made: the parent of its device-plugin
/// directory `dir`, where its plugins_registry, dra_manager_state and CDI
/// directory are; no flag needed.
pub(super) fn judge_sim_root(dir: &Path, root: &Path, out: &mut Out) -> KubeletRoot {
    out.add(
        Severity::Ok,
        ("kubelet-root", "kubelet-root-sim"),
        root.display().to_string(),
        format!(
            "{} (the parent of {}, a directory kubelet-sim serves: its plugins_registry, dra_manager_state and cdi/ \
             are there)",
            root.display(),
            dir.display()
        ),
    );
    KubeletRoot { dir: root.to_path_buf(), source: RootSource::Sim, aliases: Vec::new() }
}

/// CDI IDs a driver prepared for a claim (in `dra_manager_state`) that no
/// spec in `dirs` defines: the runtime fails the container
/// (`unresolvable CDI devices`); the kubelet never checks them
/// (k8s.io/kubernetes pkg/kubelet/cm/dra/manager.go `prepareResources`
/// stores the IDs as answered).
pub(super) fn judge_prepared_cdi(
    prepared: &[(String, String, String)],
    dirs: &[PathBuf],
    defined: &BTreeSet<String>,
    out: &mut Out,
) {
    let shown = dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" or ");
    for (driver, claim, id) in prepared.iter().filter(|(_, _, id)| !defined.contains(id)) {
        out.hint(
            Severity::Error,
            ("dra", "dra-cdi-undefined"),
            format!("claim {claim}"),
            format!("driver {driver} prepared CDI device {id}, which no spec in {shown} defines"),
            "the container runtime cannot resolve it (unresolvable CDI devices) and the pod's containers fail to \
             start; the driver must write its CDI spec where the runtime reads them (or pass that directory as \
             --cdi-dir)",
        );
    }
}

/// True for a kubelet's command line: `argv[0]`'s file name is `kubelet`.
pub(super) fn is_kubelet(args: &[String]) -> bool {
    args.first().and_then(|a| Path::new(a).file_name()).is_some_and(|n| n == "kubelet")
}

/// The value of `--root-dir` (`--root-dir=X` or `--root-dir X`; the last
/// one wins, as with the kubelet's flag parser), if given.
pub(super) fn root_dir_flag(args: &[String]) -> Option<String> {
    let mut found = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if let Some(v) = a.strip_prefix("--root-dir=") {
            found = Some(v.to_string());
        } else if a == "--root-dir" {
            found = it.next().cloned();
        }
    }
    found
}

/// Decides the kubelet's root directory: `--kubelet-root-dir` when given,
/// else the `--root-dir` of the kubelet process seen in `/proc` (its
/// default when it has none), else the default; one `kubelet-root` finding
/// says which. `procs` is `Err` when the process table could not be read.
pub(super) fn judge_root(
    given: Option<&Path>,
    procs: Result<Vec<KubeletProc>, String>,
    proc_dir: &Path,
    out: &mut Out,
) -> KubeletRoot {
    let check = "kubelet-root";
    if let Some(dir) = given {
        let evidence = format!("{} (--kubelet-root-dir; the running kubelet was not looked up)", dir.display());
        out.add(Severity::Ok, (check, "kubelet-root-given"), dir.display().to_string(), evidence);
        return KubeletRoot { dir: dir.to_path_buf(), source: RootSource::Given, aliases: Vec::new() };
    }
    let default = PathBuf::from(DEFAULT_ROOT_DIR);
    let procs = match procs {
        Ok(p) if !p.is_empty() => p,
        seen => {
            let why = match seen {
                Err(e) => format!("{} cannot be read ({e})", proc_dir.display()),
                Ok(_) => format!("no kubelet process in {}", proc_dir.display()),
            };
            out.hint(
                Severity::Ok,
                (check, "kubelet-root-not-seen"),
                DEFAULT_ROOT_DIR,
                format!("{why}: assuming the default {DEFAULT_ROOT_DIR}"),
                "if the kubelet runs with another --root-dir, pass it as --kubelet-root-dir (doctor reads the \
                 kubelet's command line in <root>/proc: a pod needs the host's /proc there)",
            );
            return KubeletRoot { dir: default, source: RootSource::NotSeen, aliases: Vec::new() };
        }
    };
    let roots: BTreeSet<Option<String>> = procs.iter().map(|p| root_dir_flag(&p.args)).collect();
    let first = &procs[0];
    let (dir, source) = match root_dir_flag(&first.args) {
        Some(d) => (Path::new("/").join(d), RootSource::Flag(first.pid)),
        None => (default, RootSource::Default(first.pid)),
    };
    let subject = dir.display().to_string();
    if roots.len() > 1 {
        let pids: Vec<String> = procs.iter().map(|p| p.pid.to_string()).collect();
        out.hint(
            Severity::Warning,
            (check, "kubelet-root-several"),
            subject.clone(),
            format!(
                "kubelet processes {} run with different --root-dir; judging by pid {}",
                pids.join(", "),
                first.pid
            ),
            "pass the one that serves this node as --kubelet-root-dir",
        );
    }
    let evidence = match &source {
        RootSource::Flag(pid) if dir == Path::new(DEFAULT_ROOT_DIR) => {
            format!("kubelet (pid {pid}) runs with --root-dir {subject}")
        }
        RootSource::Flag(pid) => format!(
            "kubelet (pid {pid}) runs with --root-dir {subject}: it watches {subject}/plugins_registry, serves \
             {subject}/pod-resources and keeps dra_manager_state there (the device-plugin socket stays \
             {}/kubelet.sock, a fixed path)",
            crate::paths::DEFAULT_DEVICE_PLUGIN_DIR
        ),
        _ => format!("kubelet (pid {}) runs without --root-dir: the default {DEFAULT_ROOT_DIR}", first.pid),
    };
    out.add(Severity::Ok, (check, "kubelet-root"), subject, evidence);
    KubeletRoot { dir, source, aliases: Vec::new() }
}

/// What doctor saw of a registration's service socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EndpointSeen {
    /// It accepts connections; the node service the kubelet would pick
    /// answered an empty `NodePrepareResources` with this (`served`,
    /// `unimplemented`, or the error).
    Live(String),
    /// A socket nobody listens on.
    Stale,
    /// Nothing at the path.
    Missing,
    /// Anything else (permission, timeout ...).
    Failed(String),
}

/// One `DRAPlugin` registration in the kubelet's plugins_registry.
#[derive(Debug, Clone)]
pub(super) struct DraRegistration {
    /// The registration socket (a host path).
    pub socket: PathBuf,
    /// Its GetInfo answer.
    pub info: reg::PluginInfo,
    /// The service socket (a host path: the endpoint, or the registration
    /// socket when the endpoint is empty).
    pub endpoint: PathBuf,
    /// What doctor saw there (`None`: the kubelet would refuse the
    /// registration, so it was not probed).
    pub seen: Option<EndpointSeen>,
}

/// True when `path` is at or below `root`.
fn under(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

/// One `dra` finding per registration: what the kubelet (`version`) makes
/// of it, with driver, endpoint, service socket and versions; and a
/// warning when its service socket sits outside the kubelet's root.
pub(super) fn judge_registration(r: &DraRegistration, root: &KubeletRoot, version: KubeletVersion, out: &mut Out) {
    let (aliases, root) = (&root.aliases, root.dir.as_path());
    let subject = r.socket.display().to_string();
    let i = &r.info;
    let versions = if i.supported_versions.is_empty() { "none".into() } else { i.supported_versions.join(", ") };
    let live = match &r.seen {
        None => "not probed".to_string(),
        Some(EndpointSeen::Live(s)) => format!("live ({s})"),
        Some(EndpointSeen::Stale) => "stale: connection refused".into(),
        Some(EndpointSeen::Missing) => "missing: no socket at the path".into(),
        Some(EndpointSeen::Failed(e)) => e.clone(),
    };
    let base = format!("driver {}, endpoint {}: {live}; advertises {versions}", i.name, r.endpoint.display());
    let check = "dra";
    if !version.has_dra() {
        out.hint(
            Severity::Warning,
            (check, "dra-no-handler"),
            subject.clone(),
            format!(
                "{base}; a {version} kubelet has DRA off by default and answers \"RegisterPlugin error -- no handler \
                 registered for plugin type: DRAPlugin\" unless its DynamicResourceAllocation gate is on"
            ),
            "dpctl judges DRA registrations by kubelets 1.34-1.37 (docs/dra.md §2); pass the node's --kubelet-version",
        );
    } else {
        judge_service(r, &base, &subject, version, out);
    }
    if !under(&r.endpoint, root) && !aliases.iter().any(|a| under(&r.endpoint, a)) {
        out.hint(
            Severity::Warning,
            (check, "dra-endpoint-outside-root"),
            r.endpoint.display().to_string(),
            format!(
                "driver {}'s service socket {} is outside the kubelet's root {}: the kubelet dials it as named, so \
                 it works only while that path is the same for both",
                i.name,
                r.endpoint.display(),
                root.display()
            ),
            format!(
                "a driver set up for another root dir (the kubeletplugin helper's default is {}/<driver>); point its \
                 plugin data directory (PluginDataDirectoryPath) at {}/plugins/{}",
                crate::dra::DEFAULT_PLUGINS_DIR,
                root.display(),
                i.name
            ),
        );
    }
}

/// The service the kubelet picks (1.34-1.37: the first it knows, in the
/// driver's order) and whether the service socket serves it.
fn judge_service(r: &DraRegistration, base: &str, subject: &str, version: KubeletVersion, out: &mut Out) {
    let i = &r.info;
    let Some(api) = crate::dra::chosen_node_api(&i.supported_versions) else {
        let why = if i.supported_versions.is_empty() {
            "empty list of supported gRPC services (aka supported versions)".to_string()
        } else {
            format!(
                "none of services supported by the plugin ({:?}) are supported by the kubelet ([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])",
                i.supported_versions
            )
        };
        out.hint(
            Severity::Error,
            ("dra", "dra-refused"),
            subject.to_string(),
            format!("{base}; a {version} kubelet refuses it: {why}"),
            "advertise v1.DRAPlugin (and v1beta1.DRAPlugin for older kubelets) in supported_versions",
        );
        return;
    };
    let picked = format!("{base}; a {version} kubelet uses {}", api.advertised());
    let (severity, code, hint) = match &r.seen {
        Some(EndpointSeen::Live(s)) if s == "served" => (Severity::Ok, "dra-registered", None),
        Some(EndpointSeen::Live(_)) => (
            Severity::Error,
            "dra-service-unserved",
            Some("serve the service first in supported_versions, or drop it from the list"),
        ),
        Some(EndpointSeen::Stale | EndpointSeen::Missing) => (
            Severity::Error,
            "dra-endpoint-down",
            Some(
                "the driver's registration answers but its service socket does not: every Prepare fails; restart the driver",
            ),
        ),
        _ => (Severity::Warning, "dra-endpoint-failed", Some("run `dpctl dra info` on the registration socket")),
    };
    match hint {
        None => out.add(severity, ("dra", code), subject.to_string(), picked),
        Some(h) => out.hint(severity, ("dra", code), subject.to_string(), picked, h),
    }
}

/// Registration sockets in a plugins_registry the kubelet does not watch
/// (`dir`, outside its root): the kubelet never calls them.
pub(super) fn judge_hidden(
    dir: &Path,
    root: &Path,
    sockets: Vec<(PathBuf, crate::Result<reg::PluginInfo>)>,
    out: &mut Out,
) {
    let watched = root.join("plugins_registry");
    for (p, info) in sockets {
        let subject = p.display().to_string();
        match info {
            Ok(i) => out.hint(
                Severity::Error,
                (if i.r#type == reg::DRA_PLUGIN_TYPE { "dra" } else { "registry" }, "registration-outside-root"),
                subject,
                format!(
                    "{} {} registers here, in {}, but the kubelet's root is {}: it watches {} and never sees this \
                     socket (pods needing it fail with \"DRA driver {} is not registered\")",
                    i.r#type,
                    i.name,
                    dir.display(),
                    root.display(),
                    watched.display(),
                    i.name
                ),
                format!(
                    "point the driver's registration directory at {} (the kubeletplugin helper's \
                     RegistrarDirectoryPath, default {}; drivers expose it as a flag or Helm value)",
                    watched.display(),
                    crate::dra::DEFAULT_REGISTRY_DIR
                ),
            ),
            Err(Error::ConnectionRefused { .. }) => out.add(
                Severity::Warning,
                ("registry", "stale-registration-outside-root"),
                subject,
                format!("stale (connection refused), outside the kubelet's root {}: left alone", root.display()),
            ),
            Err(e) => out.add(
                Severity::Warning,
                ("registry", "registry-failed"),
                subject,
                format!("{e} (outside the kubelet's root {})", root.display()),
            ),
        }
    }
}

/// `dra_manager_state`: `None` when absent, else what reading it gave.
/// A 1.34+ kubelet with DRA on writes it (empty) when it starts.
pub(super) fn judge_state(
    path: &Path,
    read: Option<crate::Result<StateReport>>,
    drivers: &BTreeSet<String>,
    out: &mut Out,
) -> Option<StateReport> {
    let subject = path.display().to_string();
    let check = "dra-checkpoint";
    let report = match read {
        None if drivers.is_empty() => {
            out.add(Severity::Ok, (check, "no-dra-state"), subject, "absent (no DRA driver registered either)");
            return None;
        }
        None => {
            out.hint(
                Severity::Warning,
                (check, "no-dra-state"),
                subject,
                "absent, yet DRA drivers are registered: a kubelet with DRA on writes it when it starts",
                "is this the running kubelet's root dir (--kubelet-root-dir), or is the file not mounted in this pod?",
            );
            return None;
        }
        Some(Err(e)) => {
            out.add(Severity::Error, (check, "dra-state-unreadable"), subject, e.to_string());
            return None;
        }
        Some(Ok(r)) => r,
    };
    if !report.problems.is_empty() {
        let code = if report.checksum_ok { "dra-state-problem" } else { "dra-state-corrupt" };
        out.hint(
            Severity::Error,
            (check, code),
            subject.clone(),
            report.problems.join("; "),
            "`dpctl checkpoint show --dra` shows the file; drain the node before removing it",
        );
        return Some(report);
    }
    let users: BTreeSet<&String> =
        report.claims.iter().flat_map(|c| c.driver_state.iter().flat_map(|d| d.keys())).collect();
    let gone: Vec<&str> = users.iter().filter(|d| !drivers.contains(**d)).map(|d| d.as_str()).collect();
    out.add(
        Severity::Ok,
        (check, "dra-state-ok"),
        subject.clone(),
        format!(
            "checksum {} verifies (CRC-32 of Data); {}; written by {}",
            report.stored_checksum,
            crate::text::count(report.claims.len(), "claim", "claims"),
            report.written_by
        ),
    );
    if !gone.is_empty() {
        out.hint(
            Severity::Warning,
            (check, "dra-state-driver-gone"),
            subject,
            format!("claims prepared by {} whose driver is not registered now", gone.join(", ")),
            "their pods cannot be unprepared (they stay Terminating) until the driver registers again",
        );
    }
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    fn proc(pid: u32, a: &[&str]) -> KubeletProc {
        KubeletProc { pid, args: args(a) }
    }

    #[test]
    fn root_dir_comes_from_the_last_flag_in_either_spelling() {
        assert_eq!(root_dir_flag(&args(&["kubelet", "--root-dir=/a", "--root-dir", "/b"])), Some("/b".into()));
        assert_eq!(root_dir_flag(&args(&["kubelet", "--root-dir", "/a"])), Some("/a".into()));
        assert_eq!(root_dir_flag(&args(&["kubelet", "--root-dir-x=/a", "--v=2"])), None);
        assert_eq!(root_dir_flag(&args(&["kubelet", "--", "--root-dir=/a"])), None);
        assert!(is_kubelet(&args(&["/usr/bin/kubelet", "--v=2"])));
        assert!(!is_kubelet(&args(&["/usr/bin/kubelet-wrapper"])));
        assert!(!is_kubelet(&[]));
    }

    /// 1.34-1.37: `--root-dir` (a flag only, default /var/lib/kubelet) holds
    /// plugins_registry, pod-resources and dra_manager_state.
    #[test]
    fn the_root_is_given_flagged_defaulted_or_assumed_and_the_finding_says_which() {
        let p = Path::new("/proc");
        let mut out = Out(Vec::new());
        let r = judge_root(None, Ok(vec![proc(7, &["/usr/bin/kubelet", "--root-dir=/data/kubelet"])]), p, &mut out);
        assert_eq!(r, KubeletRoot { dir: "/data/kubelet".into(), source: RootSource::Flag(7), aliases: vec![] });
        assert!(out.0[0].evidence.starts_with(
            "kubelet (pid 7) runs with --root-dir /data/kubelet: it watches /data/kubelet/plugins_registry"
        ));
        let r = judge_root(None, Ok(vec![proc(8, &["kubelet"])]), p, &mut out);
        assert_eq!(r.source, RootSource::Default(8));
        assert!(out.0[1].evidence.contains("runs without --root-dir: the default /var/lib/kubelet"));
        let r = judge_root(None, Ok(vec![]), p, &mut out);
        assert_eq!((r.dir.to_str(), r.source), (Some(DEFAULT_ROOT_DIR), RootSource::NotSeen));
        assert_eq!(out.0[2].evidence, "no kubelet process in /proc: assuming the default /var/lib/kubelet");
        let r = judge_root(Some(Path::new("/k")), Err("boom".into()), p, &mut out);
        assert_eq!(r.source, RootSource::Given);
        assert!(out.0.iter().all(|f| f.severity == Severity::Ok));
        let two = vec![proc(1, &["kubelet", "--root-dir", "/x"]), proc(2, &["kubelet"])];
        let r = judge_root(None, Ok(two), p, &mut out);
        assert_eq!(r.dir, PathBuf::from("/x"));
        assert_eq!(out.0[4].code, "kubelet-root-several");
    }

    fn registration(versions: &[&str], endpoint: &str, seen: Option<EndpointSeen>) -> DraRegistration {
        DraRegistration {
            socket: "/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock".into(),
            info: reg::PluginInfo {
                r#type: reg::DRA_PLUGIN_TYPE.into(),
                name: "gpu.example.com".into(),
                endpoint: endpoint.into(),
                supported_versions: args(versions),
            },
            endpoint: endpoint.into(),
            seen,
        }
    }

    fn judged(r: &DraRegistration, root: &str, v: KubeletVersion) -> Vec<super::super::Finding> {
        let mut out = Out(Vec::new());
        let root = KubeletRoot { dir: root.into(), source: RootSource::Given, aliases: vec![] };
        judge_registration(r, &root, v, &mut out);
        out.0
    }

    const EP: &str = "/var/lib/kubelet/plugins/gpu.example.com/dra.sock";

    /// 1.34-1.37: the driver's first known service is used; refusals quote
    /// the kubelet; a dead service socket or an unserved service is an error.
    #[test]
    fn registrations_are_judged_as_kubelets_1_34_to_1_37_register_them() {
        let v137 = KubeletVersion::Release(37);
        let live = Some(EndpointSeen::Live("served".into()));
        let f =
            judged(&registration(&["v1beta1.DRAPlugin", "v1.DRAPlugin"], EP, live.clone()), "/var/lib/kubelet", v137);
        assert_eq!((f.len(), f[0].code.as_str()), (1, "dra-registered"));
        assert!(
            f[0].evidence.contains("live (served)") && f[0].evidence.ends_with("a 1.37 kubelet uses v1beta1.DRAPlugin"),
            "{}",
            f[0].evidence
        );
        let f =
            judged(&registration(&["v1alpha3.NodeService"], EP, None), "/var/lib/kubelet", KubeletVersion::Release(34));
        assert_eq!((f[0].severity, f[0].code.as_str()), (Severity::Error, "dra-refused"));
        assert!(f[0].evidence.contains("none of services supported by the plugin ([\"v1alpha3.NodeService\"])"));
        let f = judged(&registration(&["v1.DRAPlugin"], EP, Some(EndpointSeen::Stale)), "/var/lib/kubelet", v137);
        assert_eq!((f[0].severity, f[0].code.as_str()), (Severity::Error, "dra-endpoint-down"));
        let f = judged(
            &registration(&["v1.DRAPlugin"], EP, Some(EndpointSeen::Live("unimplemented".into()))),
            "/var/lib/kubelet",
            v137,
        );
        assert_eq!(f[0].code, "dra-service-unserved");
        let f = judged(&registration(&["v1.DRAPlugin"], EP, live), "/var/lib/kubelet", KubeletVersion::Release(33));
        assert_eq!((f[0].severity, f[0].code.as_str()), (Severity::Warning, "dra-no-handler"));
    }

    #[test]
    fn a_service_socket_outside_the_root_is_a_warning_naming_both() {
        let live = Some(EndpointSeen::Live("served".into()));
        let f = judged(&registration(&["v1.DRAPlugin"], EP, live), "/data/kubelet", KubeletVersion::Release(37));
        assert_eq!(f.len(), 2, "{f:#?}");
        assert_eq!(
            (f[1].severity, f[1].code.as_str(), f[1].subject.as_str()),
            (Severity::Warning, "dra-endpoint-outside-root", EP)
        );
        assert!(f[1].evidence.contains("outside the kubelet's root /data/kubelet"));
        assert!(f[1].hint.as_deref().unwrap().contains("/data/kubelet/plugins/gpu.example.com"));
        assert!(!under(Path::new("/var/lib/kubelet2/x"), Path::new("/var/lib/kubelet")));
        // /var/lib/kubelet a symbolic link to the real root: not outside.
        let root = KubeletRoot {
            dir: "/data/kubelet".into(),
            source: RootSource::Given,
            aliases: vec![DEFAULT_ROOT_DIR.into()],
        };
        let mut out = Out(Vec::new());
        judge_registration(&registration(&["v1.DRAPlugin"], EP, None), &root, KubeletVersion::Release(37), &mut out);
        assert!(out.0.iter().all(|f| f.code != "dra-endpoint-outside-root"), "{:#?}", out.0);
    }

    /// 1.34-1.37: the plugin watcher lists `<root>/plugins_registry` only.
    #[test]
    fn a_registration_outside_the_root_is_never_seen_by_the_kubelet() {
        let r = registration(&["v1.DRAPlugin"], EP, None);
        let mut out = Out(Vec::new());
        let stale = Err(Error::ConnectionRefused { path: "/x".into() });
        judge_hidden(
            Path::new("/var/lib/kubelet/plugins_registry"),
            Path::new("/data/kubelet"),
            vec![(r.socket.clone(), Ok(r.info)), ("/x".into(), stale)],
            &mut out,
        );
        assert_eq!(
            (out.0[0].severity, out.0[0].check.as_str(), out.0[0].code.as_str()),
            (Severity::Error, "dra", "registration-outside-root")
        );
        assert!(out.0[0].evidence.contains("it watches /data/kubelet/plugins_registry and never sees this socket"));
        assert_eq!(out.0[1].code, "stale-registration-outside-root");
    }

    /// 1.34-1.37: CRC-32 over Data; a kubelet with DRA on writes the file at start.
    #[test]
    fn the_dra_checkpoint_is_verified_and_its_drivers_compared() {
        let mut data = r#"{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":[{"ClaimUID":"u","ClaimName":"c","Namespace":"default","PodUIDs":{"p":{}},"DriverState":{"gone.example.com":{"Devices":[]}}}]}"#.to_string();
        let text = |d: &str, sum: u32| serde_json::json!({"Data": d, "Checksum": sum}).to_string();
        let path = Path::new("/var/lib/kubelet/dra_manager_state");
        let good = crate::dra::state::parse(path, &text(&data, crate::dra::state::crc32_ieee(data.as_bytes())));
        let mut out = Out(Vec::new());
        assert!(judge_state(path, Some(good), &BTreeSet::new(), &mut out).is_some());
        assert_eq!(out.0[0].code, "dra-state-ok");
        assert!(
            out.0[0].evidence.contains("verifies") && out.0[0].evidence.contains("1 claim;"),
            "{}",
            out.0[0].evidence
        );
        assert_eq!(out.0[1].code, "dra-state-driver-gone");
        data.push(' ');
        let bad = crate::dra::state::parse(path, &text(&data, 1));
        judge_state(path, Some(bad), &BTreeSet::new(), &mut out);
        assert_eq!((out.0[2].severity, out.0[2].code.as_str()), (Severity::Error, "dra-state-corrupt"));
        judge_state(path, None, &BTreeSet::from(["d".to_string()]), &mut out);
        assert_eq!((out.0[3].severity, out.0[3].code.as_str()), (Severity::Warning, "no-dra-state"));
    }
}
