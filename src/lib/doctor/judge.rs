//! Doctor's judgements: pure functions from what the probes saw (see
//! `probe.rs`) to findings, each with its evidence and hint. Nothing here
//! touches a socket or the file system, so every finding is unit-tested on
//! data.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::cdi;
use super::kubelet_view;
use super::probe::{DirSeen, Entry, PodResourcesProbe, Probe, Registry, Target};
use super::{Out, Severity};
use crate::checkpoint::report::CheckpointReport;
use crate::error::Error;
use crate::kubelet_version::{CleanupRule, KubeletVersion};
use crate::limits::KUBELET_MAX_RECV;

/// `kubelet.sock`: the outcome of the connect-only probe (`None`: the
/// budget ran out first).
pub(super) fn report_kubelet(kubelet: Option<crate::Result<()>>, kubelet_sock: &Path, out: &mut Out) {
    match kubelet {
        Some(Ok(())) => out.add(
            Severity::Ok,
            ("kubelet-sock", "kubelet-sock-ok"),
            kubelet_sock.display().to_string(),
            "present, a socket, accepts connections",
        ),
        Some(Err(e)) => {
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
        None => out.hint(
            Severity::Error,
            ("kubelet-sock", "kubelet-sock-slow"),
            kubelet_sock.display().to_string(),
            "no connection within the budget",
            "the kubelet is stuck or overloaded",
        ),
    }
}

/// One `socket` finding per probed socket (`None`: the budget ran out
/// first). Returns the device IDs the live plugins report.
pub(super) fn report_sockets(
    sockets: &[PathBuf],
    probes: Vec<Option<(PathBuf, Probe)>>,
    out: &mut Out,
) -> Vec<kubelet_view::LivePlugin> {
    let mut live = Vec::new();
    for (i, r) in probes.into_iter().enumerate() {
        let path = sockets.get(i).cloned().unwrap_or_default();
        let subject = path.display().to_string();
        match r {
            None => out.hint(
                Severity::Warning,
                ("socket", "socket-slow"),
                subject,
                "slow: no answer within the budget",
                "the plugin is stuck; the kubelet sets no deadline on most calls",
            ),
            Some((_, Probe::Stale)) => out.hint(
                Severity::Warning,
                ("socket", "stale-socket"),
                subject,
                "stale: connection refused, nothing listens",
                "the process that created it is gone; the next kubelet restart deletes it",
            ),
            Some((_, Probe::NotAPlugin(msg))) => out.hint(
                Severity::Warning,
                ("socket", "not-a-device-plugin"),
                subject,
                format!("not a device plugin: GetDevicePluginOptions is not served ({msg})"),
                "another service's socket, or a plugin built against another API version (v1alpha)",
            ),
            Some((_, Probe::Slow(what))) => out.hint(
                Severity::Warning,
                ("socket", "socket-slow"),
                subject,
                format!("slow: {what}"),
                "the plugin is stuck; the kubelet sets no deadline on GetDevicePluginOptions",
            ),
            Some((_, Probe::Failed(e))) => {
                let hint = crate::podresources::hint(&e).unwrap_or_default();
                out.hint(Severity::Error, ("socket", "socket-failed"), subject, e.to_string(), hint);
            }
            Some((_, Probe::Live { options, first })) => report_live(subject, &options, first, &mut live, out),
        }
    }
    live
}

/// A live plugin: its devices, NUMA nodes, options and the size of its
/// first ListAndWatch message against the kubelet's receive limit.
pub(super) fn report_live(
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
                "live: {}, {healthy} healthy, {numa}; first message {} bytes of {KUBELET_MAX_RECV}; {opts}",
                crate::text::count(snap.devices.len(), "device", "devices"),
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

/// What PodResources answered (`None`: the budget ran out first).
/// Returns what it learnt when List answered.
pub(super) fn report_podresources(
    podres: Option<crate::Result<PodResourcesProbe>>,
    podres_path: &Path,
    out: &mut Out,
) -> Option<PodResourcesProbe> {
    match podres {
        None => {
            out.hint(
                Severity::Warning,
                ("podresources", "podresources-slow"),
                podres_path.display().to_string(),
                "no answer within the budget",
                "the kubelet is busy or stuck",
            );
            None
        }
        Some(Err(e)) => {
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
        Some(Ok(p)) => {
            out.add(
                Severity::Ok,
                ("podresources", "podresources-ok"),
                podres_path.display().to_string(),
                format!(
                    "reachable: List answered over {} ({}); Get {}",
                    p.api,
                    crate::text::count(p.pods.len(), "pod", "pods"),
                    p.get
                ),
            );
            Some(p)
        }
    }
}

/// The directory: present, a directory, its mode, its SELinux label, listable.
pub(super) fn check_dir(dir: &Path, seen: Result<DirSeen, String>, out: &mut Out) -> bool {
    let subject = dir.display().to_string();
    let seen = match seen {
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
    if !seen.is_dir {
        out.hint(
            Severity::Error,
            ("dir", "dir-not-a-directory"),
            subject,
            "not a directory",
            "the kubelet needs a directory here",
        );
        return false;
    }
    let mode = seen.mode;
    let label = seen.label.map_or_else(String::new, |l| format!(", SELinux {l}"));
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
    if !seen.listable {
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

/// A non-socket entry of the device-plugin directory (not the checkpoint,
/// not a directory): what the chosen kubelet's start-up cleanup
/// (docs/kubelet-versions.md §4) does with it.
pub(super) fn non_socket(path: &Path, name: &str, kind: Entry, version: KubeletVersion, out: &mut Out) {
    let subject = path.display().to_string();
    let symlink = matches!(kind, Entry::Symlink(_));
    let rule = version.cleanup_rule();
    let (what, deleted) = if let Entry::Symlink(target) = kind {
        // docs/kubelet-versions.md §4: 1.26-1.32 Lstat: the link itself goes;
        // 1.33+ Stat: only a link whose target is a socket.
        let what = match target {
            Target::Socket => "a symlink to a socket",
            Target::Directory => "a symlink to a directory",
            Target::File => "a symlink to a file",
            Target::Dangling => "a dangling symlink",
        };
        (what, rule == CleanupRule::AllNonDirectories || target == Target::Socket)
    } else if name.ends_with(".sock") {
        ("a regular file named like a socket: no plugin can listen here", rule == CleanupRule::AllNonDirectories)
    } else if name.starts_with('.') {
        ("a hidden file (a checkpoint temporary file left by a crash?)", rule == CleanupRule::AllNonDirectories)
    } else if kind == Entry::Fifo {
        ("a FIFO", rule == CleanupRule::AllNonDirectories)
    } else if kind == Entry::Device {
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

/// What reading the checkpoint gave; a missing or unreadable one is a
/// finding (and `None`).
pub(super) fn read_checkpoint(
    path: &Path,
    read: crate::Result<CheckpointReport>,
    any_plugin: bool,
    out: &mut Out,
) -> Option<CheckpointReport> {
    let subject = path.display().to_string();
    match read {
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

/// What the checkpoint check has to judge: the file as read, and what it
/// is held against.
pub(super) struct CheckpointSeen<'a> {
    /// The checkpoint's path (the findings' subject).
    pub(super) path: &'a Path,
    /// What reading and parsing it gave.
    pub(super) read: crate::Result<CheckpointReport>,
    /// Every device a live plugin reports.
    pub(super) live_devices: &'a BTreeSet<String>,
    /// Some socket besides kubelet.sock is in the directory.
    pub(super) any_plugin: bool,
    /// What PodResources lists, when it answered.
    pub(super) pods: Option<&'a [crate::proto::podresources::v1::PodResources]>,
    /// The release the checkpoint is judged by.
    pub(super) version: KubeletVersion,
}

/// The checkpoint: checksum and format (judged by the chosen kubelet),
/// devices no plugin reports, pods PodResources does not list (and the other
/// way round). Returns the checkpoint and the pod names PodResources gave
/// when it can be read.
pub(super) fn checkpoint(
    seen: CheckpointSeen<'_>,
    out: &mut Out,
) -> Option<(CheckpointReport, BTreeMap<String, String>)> {
    let subject = seen.path.display().to_string();
    let report = read_checkpoint(seen.path, seen.read, seen.any_plugin, out)?;
    if !judge_checkpoint_format(&report, subject, seen.version, out) {
        // Its Allocate answers still name CDI devices when the JSON parsed.
        return Some((report, BTreeMap::new()));
    }
    let listed = listed_devices(seen.pods.unwrap_or_default());
    let names = pod_names(&report, &listed);
    if seen.any_plugin {
        check_gone_devices(&report, seen.live_devices, &names, out);
    }
    if seen.pods.is_some() {
        check_against_podresources(&report, &listed, &names, out);
    }
    Some((report, names))
}

/// Checksum and layout, judged by the chosen kubelet. Returns whether the
/// kubelet restores from it (and so whether its entries are worth comparing).
pub(super) fn judge_checkpoint_format(
    report: &CheckpointReport,
    subject: String,
    version: KubeletVersion,
    out: &mut Out,
) -> bool {
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
pub(super) fn listed_devices(
    pods: &[crate::proto::podresources::v1::PodResources],
) -> BTreeMap<(String, String, String), String> {
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
pub(super) fn pod_names(
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
pub(super) fn check_gone_devices(
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
pub(super) fn check_against_podresources(
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
pub(super) fn pod_subject(names: &BTreeMap<String, String>, uid: &str, container: &str) -> String {
    match names.get(uid) {
        Some(name) => format!("pod {name} / {container}"),
        None => format!("pod {uid} / {container}"),
    }
}

/// CDI: spec files in `dirs` that do not parse, and CDI names in the
/// checkpoint's stored Allocate answers that no spec defines.
pub(super) fn check_cdi(
    checkpoint: Option<&(CheckpointReport, BTreeMap<String, String>)>,
    dirs: &[PathBuf],
    cdi: &cdi::CdiRegistry,
    out: &mut Out,
) {
    let empty = BTreeMap::new();
    let (entries, names) = checkpoint.map_or((&[][..], &empty), |(r, n)| (r.entries.as_slice(), n));
    let wanted: Vec<(String, String)> = entries
        .iter()
        .flat_map(|e| {
            let who = pod_subject(names, &e.pod_uid, &e.container);
            e.allocation.iter().flat_map(cdi::names_in).map(move |n| (n, who.clone()))
        })
        .collect();
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
            format!(
                "{} in the checkpoint {} defined",
                crate::text::count(wanted.len(), "CDI name", "CDI names"),
                if wanted.len() == 1 { "is" } else { "are all" }
            ),
        );
    } else if wanted.is_empty() && !cdi.specs.is_empty() {
        out.add(
            Severity::Ok,
            ("cdi", "cdi-ok"),
            where_,
            format!(
                "{} {} {}; the checkpoint's Allocate answers name none",
                crate::text::count(cdi.specs.len(), "spec file", "spec files"),
                if cdi.specs.len() == 1 { "defines" } else { "define" },
                crate::text::count(cdi.names.len(), "device name", "device names")
            ),
        );
    }
}

/// `plugins_registry`: what each registration socket's GetInfo answered
/// (`None`: no directory to read).
pub(super) fn report_registry(dir: &Path, registry: Registry, out: &mut Out) {
    let Some(socks) = registry else {
        out.add(
            Severity::Ok,
            ("registry", "no-registry-dir"),
            dir.display().to_string(),
            "no plugins_registry directory",
        );
        return;
    };
    if socks.is_empty() {
        out.add(
            Severity::Ok,
            ("registry", "no-registration-sockets"),
            dir.display().to_string(),
            "no registration sockets",
        );
    }
    for (p, info) in socks {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Device;
    use crate::proto::deviceplugin::v1beta1::DevicePluginOptions;

    fn v(s: &str) -> KubeletVersion {
        KubeletVersion::parse(s).expect("a release dpctl plays")
    }

    /// The (severity, code) of each finding.
    fn codes(out: &Out) -> Vec<(Severity, &str)> {
        out.0.iter().map(|f| (f.severity, f.code.as_str())).collect()
    }

    #[test]
    fn kubelet_sock_connect_budget_and_permission() {
        let sock = Path::new("/var/lib/kubelet/device-plugins/kubelet.sock");
        let mut out = Out(Vec::new());
        report_kubelet(Some(Ok(())), sock, &mut out);
        report_kubelet(None, sock, &mut out);
        let denied = Error::PermissionDenied { path: sock.into(), op: "connect to" };
        report_kubelet(Some(Err(denied)), sock, &mut out);
        let refused = Error::ConnectionRefused { path: sock.into() };
        report_kubelet(Some(Err(refused)), sock, &mut out);
        assert_eq!(
            codes(&out),
            [
                (Severity::Ok, "kubelet-sock-ok"),
                (Severity::Error, "kubelet-sock-slow"),
                (Severity::Error, "kubelet-sock-unreachable"),
                (Severity::Error, "kubelet-sock-unreachable"),
            ]
        );
        let hint = |i: usize| out.0[i].hint.clone().unwrap_or_default();
        assert!(hint(2).contains("SELinux") && hint(2).contains("spc_t"), "{}", hint(2));
        assert!(hint(3).starts_with("is the kubelet running"), "{}", hint(3));
        assert!(out.0[3].evidence.ends_with(": no plugin can register"), "{}", out.0[3].evidence);
    }

    #[test]
    fn each_kind_of_socket_gets_its_finding() {
        let sockets: Vec<PathBuf> = ["a.sock", "b.sock", "c.sock", "d.sock"].iter().map(PathBuf::from).collect();
        let probes = vec![
            None,
            Some((sockets[1].clone(), Probe::Stale)),
            Some((sockets[2].clone(), Probe::NotAPlugin("unknown service".into()))),
            Some((sockets[3].clone(), Probe::Slow("connect did not finish within 1s".into()))),
        ];
        let mut out = Out(Vec::new());
        let live = report_sockets(&sockets, probes, &mut out);
        assert!(live.is_empty());
        assert_eq!(
            codes(&out),
            [
                (Severity::Warning, "socket-slow"),
                (Severity::Warning, "stale-socket"),
                (Severity::Warning, "not-a-device-plugin"),
                (Severity::Warning, "socket-slow"),
            ]
        );
        assert_eq!(out.0[1].subject, "b.sock");
        assert!(out.0[2].evidence.contains("(unknown service)"), "{}", out.0[2].evidence);
        assert_eq!(out.0[3].evidence, "slow: connect did not finish within 1s");
    }

    fn snapshot(devices: Vec<Device>, encoded_len: usize) -> crate::plugin_client::Snapshot {
        crate::plugin_client::Snapshot { devices, encoded_len, received: std::time::SystemTime::UNIX_EPOCH }
    }

    fn device(id: &str, health: &str, numa: Option<Vec<i64>>) -> Device {
        Device { id: id.into(), health: health.into(), numa_nodes: numa }
    }

    /// A live plugin: its devices and options, and its first message against
    /// the kubelet's 4 MiB receive limit (warned from three quarters of it).
    #[test]
    fn a_live_plugin_is_ok_until_its_message_nears_the_limit() {
        let options = DevicePluginOptions { pre_start_required: false, get_preferred_allocation_available: true };
        let devices = vec![device("g0", "Healthy", Some(vec![0])), device("g1", "Unhealthy", Some(vec![1]))];
        let (mut live, mut out) = (Vec::new(), Out(Vec::new()));
        report_live("gpu.sock".into(), &options, Ok(snapshot(devices.clone(), 120)), &mut live, &mut out);
        assert_eq!(codes(&out), [(Severity::Ok, "plugin-live")]);
        assert_eq!(
            out.0[0].evidence,
            format!(
                "live: 2 devices, 1 healthy, NUMA 0,1; first message 120 bytes of {KUBELET_MAX_RECV}; \
                 options: GetPreferredAllocation"
            )
        );
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].devices, devices);
        let near = KUBELET_MAX_RECV / 4 * 3 + 1;
        report_live("gpu.sock".into(), &options, Ok(snapshot(devices, near)), &mut live, &mut out);
        let too_large =
            Error::MessageTooLarge { rpc: "ListAndWatch".into(), path: "gpu.sock".into(), size: None, limit: 1 };
        report_live("gpu.sock".into(), &options, Err(too_large), &mut live, &mut out);
        let no_list = Error::Timeout {
            what: "the first ListAndWatch message".into(),
            timeout: std::time::Duration::from_secs(1),
        };
        report_live("gpu.sock".into(), &options, Err(no_list), &mut live, &mut out);
        assert_eq!(
            codes(&out)[1..],
            [
                (Severity::Warning, "message-near-limit"),
                (Severity::Error, "message-too-large"),
                (Severity::Warning, "no-first-list"),
            ]
        );
    }

    #[test]
    fn the_directory_is_judged_by_what_it_is_and_its_mode() {
        let dir = Path::new("/var/lib/kubelet/device-plugins");
        let seen = |is_dir, mode, listable| DirSeen { is_dir, mode, label: None, listable };
        let cases = [
            (Err("No such file or directory (os error 2)".to_string()), false, (Severity::Error, "dir-unreadable")),
            (Ok(seen(false, 0o644, false)), false, (Severity::Error, "dir-not-a-directory")),
            (Ok(seen(true, 0o777, true)), true, (Severity::Warning, "dir-world-writable")),
            (Ok(seen(true, 0o750, true)), true, (Severity::Ok, "dir-ok")),
        ];
        for (probe, ok, code) in cases {
            let mut out = Out(Vec::new());
            assert_eq!(check_dir(dir, probe, &mut out), ok);
            assert_eq!(codes(&out), [code]);
        }
        let mut out = Out(Vec::new());
        let labelled = DirSeen {
            is_dir: true,
            mode: 0o750,
            label: Some("system_u:object_r:container_file_t:s0".into()),
            listable: false,
        };
        assert!(!check_dir(dir, Ok(labelled), &mut out));
        assert_eq!(codes(&out), [(Severity::Ok, "dir-ok"), (Severity::Error, "dir-unlistable")]);
        assert_eq!(out.0[0].evidence, "present, mode 0750, SELinux system_u:object_r:container_file_t:s0");
    }

    /// docs/kubelet-versions.md §4: 1.26-1.32 delete every non-directory at
    /// restart (a symlink itself, by Lstat); 1.33+ only sockets (a symlink
    /// whose target is one, by Stat).
    #[test]
    fn stray_files_are_judged_by_the_releases_cleanup_rule() {
        let fate = |name: &str, kind: Entry, release: &str| {
            let mut out = Out(Vec::new());
            non_socket(&Path::new("/dp").join(name), name, kind, v(release), &mut out);
            assert_eq!(codes(&out), [(Severity::Warning, "stray-file")]);
            let f = out.0.remove(0);
            (f.evidence, f.hint.unwrap_or_default())
        };
        let (ev, hint) = fate("old", Entry::Symlink(Target::Dangling), "1.32");
        assert!(ev.starts_with("a dangling symlink; kubelet 1.32 deletes it at restart"), "{ev}");
        assert!(hint.contains("gone after the next kubelet restart"), "{hint}");
        let (ev, hint) = fate("old", Entry::Symlink(Target::Dangling), "1.33");
        assert!(ev.starts_with("a dangling symlink; kubelet 1.33 keeps it at restart"), "{ev}");
        assert_eq!(hint, "it stays: remove it if nothing owns it");
        let (ev, _) = fate("link", Entry::Symlink(Target::Socket), "1.33");
        assert!(ev.starts_with("a symlink to a socket; kubelet 1.33 deletes it"), "{ev}");
        let (ev, hint) = fate("gpu.sock", Entry::File, "1.37");
        assert!(ev.starts_with("a regular file named like a socket"), "{ev}");
        assert!(hint.starts_with("a plugin that wants this name may fail to bind"), "{hint}");
        assert!(fate(".tmp123", Entry::File, "1.30").0.starts_with("a hidden file"));
        assert!(fate("pipe", Entry::Fifo, "1.30").0.starts_with("a FIFO; kubelet 1.30 deletes it"));
        assert!(fate("nvidia0", Entry::Device, "1.34").0.starts_with("a device node; kubelet 1.34 keeps it"));
    }

    fn entry(uid: &str, container: &str, ids: &[&str]) -> crate::checkpoint::report::EntryView {
        crate::checkpoint::report::EntryView {
            pod_uid: uid.into(),
            container: container.into(),
            resource: "example.com/gpu".into(),
            devices_per_numa: BTreeMap::from([(0, ids.iter().map(|s| s.to_string()).collect())]),
            allocation: None,
            allocation_error: None,
        }
    }

    fn checkpoint(format: crate::checkpoint::Format, verifies: bool) -> CheckpointReport {
        CheckpointReport {
            path: "/dp/kubelet_internal_checkpoint".into(),
            format: Some(format),
            stored_checksum: Some(1),
            computed_checksum: Some(if verifies { 1 } else { 2 }),
            verifies,
            meaning: String::new(),
            error: None,
            entries: vec![entry("uid-1", "c0", &["g0"]), entry("uid-2", "c1", &["g1"])],
            registered_devices: BTreeMap::new(),
        }
    }

    /// docs/kubelet-versions.md §7: up to 1.30 the pre-1.20 layout is read;
    /// 1.31+ have no fallback and restore nothing.
    #[test]
    fn the_checkpoint_format_is_judged_by_the_chosen_release() {
        use crate::checkpoint::Format;
        let judge = |format, verifies, release: &str| {
            let mut out = Out(Vec::new());
            let restores = judge_checkpoint_format(&checkpoint(format, verifies), "cp".into(), v(release), &mut out);
            (restores, out.0.remove(0))
        };
        let (restores, f) = judge(Format::Current, true, "1.37");
        assert!(restores && f.code == "checkpoint-ok" && f.evidence == "checksum 1 verifies; 2 entries", "{f:?}");
        let (restores, f) = judge(Format::V1, true, "1.30");
        assert!(restores && f.code == "checkpoint-v1-layout" && f.severity == Severity::Warning, "{f:?}");
        let (restores, f) = judge(Format::V1, true, "1.31");
        assert!(!restores && f.code == "checkpoint-v1-unreadable" && f.severity == Severity::Error, "{f:?}");
        let (restores, f) = judge(Format::Current, false, "1.37");
        assert!(!restores && f.code == "checkpoint-corrupt", "{f:?}");
        assert!(f.evidence.starts_with("corrupt: stored checksum 1, computed 2"), "{}", f.evidence);
    }

    fn listed_pod(ns: &str, name: &str, container: &str, ids: &[&str]) -> crate::proto::podresources::v1::PodResources {
        use crate::proto::podresources::v1 as pr;
        pr::PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: vec![pr::ContainerResources {
                name: container.into(),
                devices: vec![pr::ContainerDevices {
                    resource_name: "example.com/gpu".into(),
                    device_ids: ids.iter().map(|s| s.to_string()).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The checkpoint against PodResources, both ways, with pods named where
    /// PodResources names them; and devices no live plugin reports.
    #[test]
    fn the_checkpoint_is_held_against_podresources_and_the_live_plugins() {
        let report = checkpoint(crate::checkpoint::Format::Current, true);
        let listed =
            listed_devices(&[listed_pod("default", "train", "c0", &["g0"]), listed_pod("ml", "new", "c9", &["g7"])]);
        let names = pod_names(&report, &listed);
        assert_eq!(names, BTreeMap::from([("uid-1".to_string(), "default/train".to_string())]));
        let mut out = Out(Vec::new());
        check_against_podresources(&report, &listed, &names, &mut out);
        assert_eq!(
            codes(&out),
            [(Severity::Warning, "checkpoint-pod-not-listed"), (Severity::Warning, "podresources-not-in-checkpoint")]
        );
        assert_eq!(out.0[0].subject, "pod uid-2 / c1");
        assert_eq!(out.0[1].subject, "pod ml/new / c9");
        assert!(
            out.0[1].evidence.starts_with("PodResources says it holds g7 of example.com/gpu"),
            "{}",
            out.0[1].evidence
        );
        let mut out = Out(Vec::new());
        check_gone_devices(&report, &BTreeSet::from(["g1".to_string()]), &names, &mut out);
        assert_eq!(codes(&out), [(Severity::Warning, "checkpoint-device-gone")]);
        assert_eq!(out.0[0].subject, "pod default/train / c0");
        assert_eq!(out.0[0].evidence, "holds g0 of example.com/gpu that no live plugin reports");
    }

    #[test]
    fn a_missing_checkpoint_matters_only_once_a_plugin_is_there() {
        let path = Path::new("/dp/kubelet_internal_checkpoint");
        let missing = || Err(Error::invalid("/dp/kubelet_internal_checkpoint", "no such file"));
        for (any_plugin, severity) in [(false, Severity::Ok), (true, Severity::Warning)] {
            let mut out = Out(Vec::new());
            assert!(read_checkpoint(path, missing(), any_plugin, &mut out).is_none());
            assert_eq!(codes(&out), [(severity, "no-checkpoint")]);
        }
    }

    /// The whole checkpoint check on data: a readable checkpoint is judged
    /// by the release, then held against the live plugins (only when one is
    /// there) and PodResources (only when it answered); one the release
    /// does not restore from is not compared, and an unreadable one gives
    /// nothing to compare.
    #[test]
    fn the_checkpoint_check_judges_then_compares_what_the_probes_saw() {
        use crate::checkpoint::Format;
        let path = Path::new("/dp/kubelet_internal_checkpoint");
        let live = BTreeSet::from(["g1".to_string()]);
        let pods = [listed_pod("default", "train", "c0", &["g0"])];
        let judge = |read, any_plugin, pods: Option<&[_]>, release: &str| {
            let mut out = Out(Vec::new());
            let seen = CheckpointSeen { path, read, live_devices: &live, any_plugin, pods, version: v(release) };
            let kept = super::checkpoint(seen, &mut out);
            (kept, out)
        };
        let (kept, out) = judge(Ok(checkpoint(Format::Current, true)), true, Some(&pods), "1.37");
        assert_eq!(
            codes(&out),
            [
                (Severity::Ok, "checkpoint-ok"),
                (Severity::Warning, "checkpoint-device-gone"),
                (Severity::Warning, "checkpoint-pod-not-listed"),
            ]
        );
        assert_eq!(out.0[0].subject, "/dp/kubelet_internal_checkpoint");
        let (report, names) = kept.expect("a readable checkpoint is kept");
        assert_eq!(report.entries.len(), 2);
        assert_eq!(names, BTreeMap::from([("uid-1".to_string(), "default/train".to_string())]));
        // No plugin and no PodResources: the format alone.
        let (_, out) = judge(Ok(checkpoint(Format::Current, true)), false, None, "1.37");
        assert_eq!(codes(&out), [(Severity::Ok, "checkpoint-ok")]);
        // docs/kubelet-versions.md §7: 1.30 reads the v1 layout (and compares), 1.31 does not.
        let (_, out) = judge(Ok(checkpoint(Format::V1, true)), true, Some(&pods), "1.30");
        assert_eq!(codes(&out)[0], (Severity::Warning, "checkpoint-v1-layout"));
        assert_eq!(out.0.len(), 3);
        let (kept, out) = judge(Ok(checkpoint(Format::V1, true)), true, Some(&pods), "1.31");
        assert_eq!(codes(&out), [(Severity::Error, "checkpoint-v1-unreadable")]);
        assert!(kept.expect("kept for its CDI names").1.is_empty());
        let (kept, out) = judge(Ok(checkpoint(Format::Current, false)), true, Some(&pods), "1.37");
        assert_eq!(codes(&out), [(Severity::Error, "checkpoint-corrupt")]);
        assert!(kept.is_some());
        let denied = Err(Error::PermissionDenied { path: path.into(), op: "read" });
        let (kept, out) = judge(denied, true, Some(&pods), "1.37");
        assert!(kept.is_none());
        assert_eq!(codes(&out), [(Severity::Error, "checkpoint-unreadable")]);
    }

    #[test]
    fn plugins_registry_sockets_by_what_get_info_answered() {
        let dir = Path::new("/var/lib/kubelet/plugins_registry");
        let mut out = Out(Vec::new());
        report_registry(dir, None, &mut out);
        report_registry(dir, Some(Vec::new()), &mut out);
        let info = crate::proto::pluginregistration::PluginInfo {
            r#type: "DevicePlugin".into(),
            name: "example.com/gpu".into(),
            endpoint: "/var/lib/kubelet/device-plugins/gpu.sock".into(),
            supported_versions: vec!["v1beta1".into()],
        };
        let stale = dir.join("old.sock");
        report_registry(
            dir,
            Some(vec![
                (dir.join("gpu.sock"), Ok(info)),
                (stale.clone(), Err(Error::ConnectionRefused { path: stale })),
            ]),
            &mut out,
        );
        assert_eq!(
            codes(&out),
            [
                (Severity::Ok, "no-registry-dir"),
                (Severity::Ok, "no-registration-sockets"),
                (Severity::Ok, "registry-ok"),
                (Severity::Warning, "stale-registry-socket"),
            ]
        );
        assert_eq!(
            out.0[2].evidence,
            "GetInfo: type DevicePlugin, name example.com/gpu, endpoint \"/var/lib/kubelet/device-plugins/gpu.sock\", \
             versions v1beta1"
        );
    }
}
