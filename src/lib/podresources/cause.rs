//! Why `allocatable` lists fewer devices than the node registered: the
//! device manager's checkpoint (`kubelet_internal_checkpoint`, beside the
//! PodResources socket's directory) records each resource's registered
//! devices (`RegisteredDevices`, the healthy ones when it was written:
//! k8s.io/kubernetes pkg/kubelet/cm/devicemanager/manager.go
//! `writeCheckpoint`), and GetAllocatableResources lists the devices of the
//! plugins registered now, each once per NUMA node of its TopologyInfo
//! (pkg/kubelet/apis/podresources/server_v1.go,
//! `containerDevicesFromResourceDeviceInstances`). A resource the
//! checkpoint names that the answer lacks, or lists in part, gets its
//! cause named: the plugin is not registered now (uninstalled, crashed,
//! not registered again after a kubelet restart), or devices are gone,
//! unhealthy or without a NUMA node.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::view::AllocatableView;
use crate::checkpoint::report::CheckpointReport;

/// The checkpoint's file name.
const CHECKPOINT: &str = "kubelet_internal_checkpoint";

/// The device-plugin directory that goes with a PodResources socket: the
/// socket's own directory (kubelet-sim keeps `pod-resources.sock` in it), or
/// `<root>/device-plugins` beside `<root>/pod-resources/kubelet.sock`;
/// the one holding the checkpoint.
pub fn device_plugin_dir(socket: &Path) -> Option<PathBuf> {
    let own = socket.parent()?.to_path_buf();
    let beside = own.parent().map(|r| r.join("device-plugins"));
    [Some(own), beside].into_iter().flatten().find(|d| d.join(CHECKPOINT).is_file())
}

/// The causes, one sentence per resource the answer lacks or lists in part
/// (empty: it lists every device the checkpoint records, or there is no
/// checkpoint to compare with).
pub fn causes(alloc: &AllocatableView, dir: &Path) -> Vec<String> {
    let Ok(cp) = CheckpointReport::read(&dir.join(CHECKPOINT)) else { return Vec::new() };
    let sockets = plugin_sockets(dir);
    judge(alloc, &cp.registered_devices, dir, &sockets)
}

/// Plugin sockets in `dir` (every `*.sock` but the kubelet's own).
fn plugin_sockets(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .flatten()
        .take(10_000)
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| n.ends_with(".sock") && n != "kubelet.sock" && n != crate::paths::SIM_PODRESOURCES_SOCKET_NAME)
        .collect();
    out.sort();
    out
}

/// [`causes`] on what was read.
pub fn judge(
    alloc: &AllocatableView,
    registered_devices: &BTreeMap<String, Option<Vec<String>>>,
    dir: &Path,
    sockets: &[String],
) -> Vec<String> {
    let mut out = Vec::new();
    for (resource, registered) in registered_devices {
        let registered: BTreeSet<&str> = registered.iter().flatten().map(String::as_str).collect();
        if registered.is_empty() {
            continue;
        }
        let listed: BTreeSet<&str> = alloc
            .devices
            .iter()
            .filter(|d| &d.resource_name == resource)
            .flat_map(|d| d.device_ids.iter().map(String::as_str))
            .collect();
        let checkpoint = dir.join(CHECKPOINT);
        if listed.is_empty() {
            let socks = if sockets.is_empty() {
                format!("no plugin socket is left in {}", dir.display())
            } else {
                format!("plugin sockets in {}: {}", dir.display(), sockets.join(", "))
            };
            out.push(format!(
                "{resource}: the kubelet's checkpoint ({}) records {} registered, but GetAllocatableResources lists \
                 none: its plugin is not registered now (uninstalled, crashed, or not registered again since a \
                 kubelet restart; {socks}), or every device carries a TopologyInfo with no NUMA node (listed once \
                 per node, so never). `dpctl doctor --dir {}` says which",
                checkpoint.display(),
                crate::text::count(registered.len(), "device", "devices"),
                dir.display()
            ));
            continue;
        }
        let missing: Vec<&str> = registered.difference(&listed).copied().collect();
        if !missing.is_empty() {
            out.push(format!(
                "{resource}: {} of the {} the checkpoint records are listed; not listed: {}: the plugin no longer \
                 reports them, or reports them unhealthy, or with a TopologyInfo with no NUMA node \
                 (`dpctl plugin watch` on its socket shows each device)",
                listed.len(),
                registered.len(),
                missing.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::view::DevicesView;

    fn cp(devices: &[(&str, &[&str])]) -> BTreeMap<String, Option<Vec<String>>> {
        devices.iter().map(|(r, ids)| (r.to_string(), Some(ids.iter().map(|s| s.to_string()).collect()))).collect()
    }

    fn alloc(devices: &[(&str, &[&str])]) -> AllocatableView {
        AllocatableView {
            devices: devices
                .iter()
                .map(|(r, ids)| DevicesView {
                    resource_name: r.to_string(),
                    device_ids: ids.iter().map(|s| s.to_string()).collect(),
                    numa_nodes: None,
                })
                .collect(),
            ..AllocatableView::default()
        }
    }

    #[test]
    fn a_resource_the_checkpoint_names_and_the_answer_lacks_names_the_unregistered_plugin() {
        let dir = Path::new("/n/device-plugins");
        let c = judge(&alloc(&[]), &cp(&[("example.com/gpu", &["g0", "g1"])]), dir, &[]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].starts_with("example.com/gpu: the kubelet's checkpoint"), "{c:?}");
        assert!(c[0].contains("records 2 devices registered, but GetAllocatableResources lists none"), "{c:?}");
        assert!(c[0].contains("its plugin is not registered now (uninstalled"), "{c:?}");
        assert!(c[0].contains("no plugin socket is left in /n/device-plugins"), "{c:?}");
    }

    #[test]
    fn a_partial_list_names_the_missing_devices_and_a_full_one_says_nothing() {
        let dir = Path::new("/n");
        let registered = cp(&[("example.com/gpu", &["g0", "g1", "g2"])]);
        let c = judge(&alloc(&[("example.com/gpu", &["g0", "g2"])]), &registered, dir, &["gpu.sock".into()]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].contains("2 of the 3 the checkpoint records are listed; not listed: g1"), "{c:?}");
        assert!(judge(&alloc(&[("example.com/gpu", &["g0", "g1", "g2"])]), &registered, dir, &[]).is_empty());
    }
}
