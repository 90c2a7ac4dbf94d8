//! The files a real node runs on: containerd's configuration, the
//! kubelet's, and a static pod's manifest. Pure text from data, so that each
//! choice is tested without a node and says why it is made.

use serde_json::{Value, json};

use crate::kubelet_sim::{ContainerKind, PodSpec};

/// The image every container of a smoke pod runs (imported from `busybox.tar`).
pub const BUSYBOX_IMAGE: &str = "dpctl.local/busybox:1";

/// The sandbox image (imported from `pause.tar`).
pub const PAUSE_IMAGE: &str = "dpctl.local/pause:1";

/// The node name the kubelet runs under: a static pod `NAME` is `NAME-dpctl-node`
/// (the kubelet appends `-<node name>` to a static pod's name,
/// k8s.io/kubernetes pkg/kubelet/config/common.go `applyDefaults`).
pub const NODE_NAME: &str = "dpctl-node";

/// Where the node's directories sit inside its mount namespace.
pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
/// The static pod directory (under the rebound `/var/lib`).
pub const MANIFESTS: &str = "/var/lib/dpctl-node/manifests";

/// containerd 1.6's configuration (version 2): its own root, state and
/// socket under the namespace's rebound `/var/lib` and `/run`, cgroupfs,
/// the sandbox image imported from `pause.tar`. `restrict_oom` sets the CRI
/// plugin's `restrict_oom_score_adj`: without CAP_SYS_RESOURCE, runc cannot
/// lower a container's oom_score_adj below containerd's and fails every
/// sandbox with `can't get final child's PID from pipe: EOF`.
pub fn containerd_toml(restrict_oom: bool, cni: bool) -> String {
    let mut out = format!(
        r#"version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "{CONTAINERD_SOCKET}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = {restrict_oom}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
"#
    );
    if cni {
        // A cluster's node is NotReady until the runtime reports its
        // network ready: a CNI configuration must be found (the kubelet's
        // runtime-status check, pkg/kubelet/kubelet.go `updateRuntimeUp`).
        out.push_str(&format!(
            "  [plugins.\"io.containerd.grpc.v1.cri\".cni]\n    bin_dir = \"{CNI_BIN}\"\n    conf_dir = \"{CNI_CONF}\"\n"
        ));
    }
    out
}

/// Where the cluster node's CNI plugin and configuration sit (under the rebound /run).
pub const CNI_BIN: &str = "/run/dpctl-cni/bin";
/// See [`CNI_BIN`].
pub const CNI_CONF: &str = "/run/dpctl-cni/net.d";
/// The no-op CNI plugin's file name under [`CNI_BIN`] (its `type`).
pub const CNI_PLUGIN: &str = "dpctl-noop";

/// A no-op CNI plugin: the pod keeps the network namespace the runtime made
/// (loopback only, and down). containerd 1.6 wants ADD's result to name an
/// `eth0` with an IP, else the sandbox fails; every pod gets the same
/// address, which nothing routes (the smoke's pods need no network).
/// containerd also runs a `loopback` plugin from the same directory first:
/// the same script under that name answers for `lo`.
pub fn cni_plugin() -> String {
    r#"#!/bin/sh
# dpctl's no-op CNI plugin (written by the cluster engine of dpctl dra smoke).
cat >/dev/null
if [ "${0##*/}" = loopback ]; then if_=lo ip=127.0.0.1/8; else if_=eth0 ip=10.88.0.2/24; fi
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"0.4.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[{"version":"4","address":"%s","interface":0}]}' "$if_" "$CNI_NETNS" "$ip" ;;
VERSION) printf '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
esac
exit 0
"#
    .to_string()
}

/// The CNI configuration naming [`cni_plugin`].
pub fn cni_conf() -> String {
    format!(r#"{{"cniVersion":"0.4.0","name":"dpctl","type":"{CNI_PLUGIN}"}}"#)
}

/// The private /etc/hosts of the cluster's processes: the node name is
/// loopback, so that the API server reaches the kubelet by name
/// (`--kubelet-preferred-address-types=Hostname`) while the kubelet keeps
/// its own choice of node IP (it refuses a loopback `--node-ip`).
pub fn hosts(node: &str) -> String {
    format!("127.0.0.1 localhost {node}\n::1 localhost\n")
}

/// What the kubelet's configuration depends on.
#[derive(Debug, Clone)]
pub struct KubeletSettings {
    /// The cgroup every pod goes under (made before the kubelet starts: the
    /// kubelet refuses a `cgroupRoot` that does not exist).
    pub cgroup_root: String,
    /// The Topology Manager's policy and scope.
    pub topology_policy: String,
    /// See `topology_policy`.
    pub topology_scope: String,
    /// A cluster's node: the kubelet's server on this port (the API server
    /// reaches it for logs), anonymous requests allowed (the API server
    /// sends no client certificate).
    pub server_port: Option<u16>,
}

/// The kubelet's configuration (KubeletConfiguration v1beta1) for a
/// standalone node: static pods only, no server ports (two smokes on one
/// machine do not collide), cgroupfs under its own root, cgroup v1 allowed
/// (1.35+ refuse it unless `failCgroupV1: false`), images never collected
/// (they are imported, not pullable), and the volume plugin directory under
/// the rebound `/var/lib` (its default is `/usr/libexec/kubernetes/...`, on
/// the host).
pub fn kubelet_yaml(s: &KubeletSettings) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: {MANIFESTS}
fileCheckFrequency: 1s
syncFrequency: 10s
containerRuntimeEndpoint: unix://{CONTAINERD_SOCKET}
cgroupDriver: cgroupfs
cgroupRoot: {}
failSwapOn: false
failCgroupV1: false
{}readOnlyPort: 0
healthzPort: 0
volumePluginDir: /var/lib/kubelet/volumeplugins
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
topologyManagerPolicy: {}
topologyManagerScope: {}
authentication:
  anonymous:
    enabled: {}
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
"#,
        s.cgroup_root,
        match s.server_port {
            // A cluster's kubelet evicts pods and taints its node below 10-15 % free disk
            // (its default evictionHard): a test node on a shared disk keeps its pods.
            Some(p) => format!(
                "enableServer: true\nport: {p}\naddress: 127.0.0.1\nevictionHard:\n  memory.available: 1Mi\n  \
                 nodefs.available: 1Mi\n  imagefs.available: 1Mi\n  nodefs.inodesFree: \"1\"\n  imagefs.inodesFree: \"1\"\n"
            ),
            None => "enableServer: false\n".into(),
        },
        s.topology_policy,
        s.topology_scope,
        s.server_port.is_some()
    )
}

/// A static pod for `pod`: host network (no CNI on the node), busybox
/// containers that never pull (`imagePullPolicy: Never`), no grace period
/// (busybox's sleep ignores SIGTERM), the pod's own UID kept (the kubelet
/// derives one only when the manifest has none) and each container's
/// extended-resource limits.
pub fn static_pod(pod: &PodSpec, uid: &str) -> Value {
    let container = |name: &str, limits: &std::collections::BTreeMap<String, u64>, command: &[&str]| {
        let limits: serde_json::Map<String, Value> =
            limits.iter().map(|(k, v)| (k.clone(), Value::String(v.to_string()))).collect();
        json!({
            "name": name,
            "image": BUSYBOX_IMAGE,
            "imagePullPolicy": "Never",
            "command": command,
            "resources": {"limits": limits},
        })
    };
    let sleep = ["/bin/sleep", "2147483647"];
    let mut init = Vec::new();
    let mut regular = Vec::new();
    for c in &pod.containers {
        match c.kind {
            ContainerKind::Init => init.push(container(&c.name, &c.limits, &["/bin/true"])),
            ContainerKind::Sidecar => {
                let mut v = container(&c.name, &c.limits, &sleep);
                v["restartPolicy"] = json!("Always");
                init.push(v);
            }
            ContainerKind::Regular => regular.push(container(&c.name, &c.limits, &sleep)),
        }
    }
    let mut spec = json!({
        "hostNetwork": true,
        "terminationGracePeriodSeconds": 0,
        "containers": regular,
    });
    if !init.is_empty() {
        spec["initContainers"] = Value::Array(init);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": uid},
        "spec": spec,
    })
}

/// The name the kubelet gives a static pod.
pub fn static_pod_name(name: &str) -> String {
    format!("{name}-{NODE_NAME}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_pod_keeps_its_uid_and_asks_for_its_devices() {
        let pod = PodSpec::shorthand("p", "default", &[("example.com/gpu".into(), 2)]);
        let v = static_pod(&pod, "0b6b8b8e-1f0e-4a4e-9a53-2f7e1d0c9a11");
        assert_eq!(v["metadata"]["uid"], "0b6b8b8e-1f0e-4a4e-9a53-2f7e1d0c9a11");
        assert_eq!(v["spec"]["hostNetwork"], true);
        let c = &v["spec"]["containers"][0];
        assert_eq!(c["resources"]["limits"]["example.com/gpu"], "2");
        assert_eq!(c["imagePullPolicy"], "Never");
        assert!(v["spec"].get("initContainers").is_none());
        assert_eq!(static_pod_name("p"), "p-dpctl-node");
    }

    #[test]
    fn the_configurations_name_what_the_node_needs() {
        assert!(containerd_toml(true, false).contains("restrict_oom_score_adj = true"));
        assert!(containerd_toml(false, false).contains("restrict_oom_score_adj = false"));
        assert!(!containerd_toml(true, false).contains("cni"));
        assert!(containerd_toml(true, true).contains(&format!("conf_dir = \"{CNI_CONF}\"")));
        let y = kubelet_yaml(&KubeletSettings {
            cgroup_root: "/dpctl-smoke-1".into(),
            topology_policy: "none".into(),
            topology_scope: "container".into(),
            server_port: None,
        });
        assert!(y.contains("cgroupRoot: /dpctl-smoke-1") && y.contains("failCgroupV1: false"), "{y}");
        assert!(y.contains("enableServer: false") && y.contains("enabled: false"), "{y}");
        assert!(y.contains("volumePluginDir: /var/lib/"), "{y}");
    }
}
