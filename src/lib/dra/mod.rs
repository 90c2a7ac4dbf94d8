//! Dynamic Resource Allocation (DRA): dpctl's side of a DRA driver's kubelet
//! plugin. The kubelet facts these modules rely on, per release, are in
//! docs/dra.md; in short a driver registers on `plugins_registry` with type
//! `DRAPlugin`, names a second socket as its endpoint, and serves there
//! `NodePrepareResources`/`NodeUnprepareResources` (one of the `DRAPlugin`
//! services it advertises) and, optionally, the `DRAResourceHealth` stream.
//!
//! - [`cdi`]: CDI device IDs (parse) and spec files (write, resolve);
//! - [`claims`]: the claims a user names (flags or a claims file);
//! - [`check`]: a driver judged end to end (`dpctl dra check`);
//! - [`check_claim`]: the claim check creates in the driver's API server,
//!   and the claims pods hold, which it never touches;
//! - [`client`]: one-shot calls on a driver's sockets, judged as the kubelet
//!   judges the answers;
//! - [`mock`]: a DRA driver, well-behaved or faulty on request;
//! - [`state`]: the DRA manager's checkpoint, `dra_manager_state`.

pub mod cdi;
pub mod check;
pub mod check_claim;
pub mod claims;
pub mod client;
pub mod mock;
pub mod published;
pub mod state;

use std::time::Duration;

use crate::proto::dra as pb;

/// A driver's answer as evidence shows it: `pool/device (cdi-id, ...)`
/// joined by `; `, or `no device`.
pub fn answer_text(answer: &[(String, Vec<String>)]) -> String {
    if answer.is_empty() {
        return "no device".into();
    }
    let one = |(dev, ids): &(String, Vec<String>)| {
        if ids.is_empty() { format!("{dev} (no CDI ID)") } else { format!("{dev} ({})", ids.join(", ")) }
    };
    answer.iter().map(one).collect::<Vec<_>>().join("; ")
}

/// Each pod's devices as evidence shows them: `pod 1: a, b; pod 2: c`.
pub fn pods_devices_text(devices: &[Vec<String>]) -> String {
    let pod = |(i, d): (usize, &Vec<String>)| {
        format!("pod {}: {}", i + 1, if d.is_empty() { "no device".to_string() } else { d.join(", ") })
    };
    devices.iter().enumerate().map(pod).collect::<Vec<_>>().join("; ")
}

/// The kubelet's deadline for each `NodePrepareResources` and
/// `NodeUnprepareResources` call, 1.34 to 1.37 (`defaultClientCallTimeout`,
/// docs/dra.md §2).
pub const KUBELET_CALL_TIMEOUT: Duration = Duration::from_secs(45);
/// The kubelet's registration socket directory.
pub const DEFAULT_REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";
/// Where drivers built on the kubeletplugin helper put their service socket
/// (`<dir>/<driver>/dra.sock`).
pub const DEFAULT_PLUGINS_DIR: &str = "/var/lib/kubelet/plugins";
/// The longest socket path a unix socket can have (`sun_path` less its NUL).
pub const MAX_SOCKET_PATH: usize = crate::paths::MAX_SOCKET_PATH_LEN;

/// A `DRAPlugin` node service version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeApi {
    /// `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`, advertised as `v1.DRAPlugin` (1.34+).
    V1,
    /// `k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin`, advertised as `v1beta1.DRAPlugin` (1.32+).
    V1beta1,
}

impl NodeApi {
    /// The string a driver advertises in `supported_versions`.
    pub fn advertised(self) -> &'static str {
        match self {
            NodeApi::V1 => pb::v1::SERVICE,
            NodeApi::V1beta1 => pb::v1beta1::SERVICE,
        }
    }

    /// The gRPC service name on the wire.
    pub fn wire(self) -> &'static str {
        match self {
            NodeApi::V1 => "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
            NodeApi::V1beta1 => "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
        }
    }
}

/// A `DRAResourceHealth` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthApi {
    /// `v1alpha1.DRAResourceHealth` (1.34+).
    V1alpha1,
    /// `v1.DRAResourceHealth` (1.37+).
    V1,
}

impl HealthApi {
    /// The advertised string, which is also the wire name.
    pub fn advertised(self) -> &'static str {
        match self {
            HealthApi::V1alpha1 => pb::health::v1alpha1::SERVICE,
            HealthApi::V1 => pb::health::v1::SERVICE,
        }
    }
}

/// Any service a DRA driver may advertise in `supported_versions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    /// A node service.
    Node(NodeApi),
    /// A health service.
    Health(HealthApi),
}

impl Service {
    /// Every service dpctl knows, in the order the kubeletplugin helper lists them.
    pub const ALL: [Service; 4] = [
        Service::Node(NodeApi::V1),
        Service::Node(NodeApi::V1beta1),
        Service::Health(HealthApi::V1),
        Service::Health(HealthApi::V1alpha1),
    ];

    /// The advertised string.
    pub fn advertised(self) -> &'static str {
        match self {
            Service::Node(n) => n.advertised(),
            Service::Health(h) => h.advertised(),
        }
    }

    /// The service for an advertised string, if dpctl knows it.
    pub fn from_advertised(s: &str) -> Option<Service> {
        Service::ALL.into_iter().find(|x| x.advertised() == s)
    }

    /// Parses a user's spelling: the advertised string, or a short form
    /// (`v1`, `v1beta1`, `health-v1alpha1`, `health-v1`).
    pub fn parse(s: &str) -> std::result::Result<Service, String> {
        let short = match s {
            "v1" => Some(Service::Node(NodeApi::V1)),
            "v1beta1" => Some(Service::Node(NodeApi::V1beta1)),
            "health-v1alpha1" => Some(Service::Health(HealthApi::V1alpha1)),
            "health-v1" => Some(Service::Health(HealthApi::V1)),
            _ => None,
        };
        short.or_else(|| Service::from_advertised(s)).ok_or_else(|| {
            format!(
                "unknown DRA service {s:?}: use v1, v1beta1, health-v1alpha1, health-v1 (or {})",
                Service::ALL.map(Service::advertised).join(", ")
            )
        })
    }
}

/// The registration socket a DRA driver named `driver` serves under the
/// kubelet's `plugins_registry` directory (`<driver>-reg.sock`, as the
/// kubeletplugin helper names it). A name that cannot be a driver's (empty,
/// with a `/`, over 253 bytes) is refused, naming `flag`.
pub fn registration_socket(
    registry_dir: &std::path::Path,
    driver: &str,
    flag: &str,
) -> crate::Result<std::path::PathBuf> {
    if driver.is_empty() || driver.contains('/') || driver.len() > 253 {
        return Err(crate::Error::invalid(
            flag,
            format!("{:?} is not a driver name (a DNS subdomain)", driver.chars().take(64).collect::<String>()),
        ));
    }
    Ok(registry_dir.join(format!("{driver}-reg.sock")))
}

/// The node service a kubelet of 1.34 or later picks from a driver's
/// `supported_versions`: the first entry it knows, in the driver's order
/// (docs/dra.md §2). `None` when it knows none (registration fails).
pub fn chosen_node_api(supported: &[String]) -> Option<NodeApi> {
    supported.iter().find_map(|s| match Service::from_advertised(s) {
        Some(Service::Node(n)) => Some(n),
        _ => None,
    })
}

/// The health service a 1.37 kubelet picks: its own preference, v1 before
/// v1alpha1, among those the driver advertises (docs/dra.md §2).
pub fn chosen_health_api(supported: &[String]) -> Option<HealthApi> {
    [HealthApi::V1, HealthApi::V1alpha1].into_iter().find(|h| supported.iter().any(|s| s == h.advertised()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    /// 1.34-1.37: the driver's order decides the node service.
    #[test]
    fn node_service_is_the_first_known_in_the_drivers_order() {
        assert_eq!(chosen_node_api(&list(&["v1beta1.DRAPlugin", "v1.DRAPlugin"])), Some(NodeApi::V1beta1));
        assert_eq!(chosen_node_api(&list(&["x", "v1.DRAPlugin", "v1beta1.DRAPlugin"])), Some(NodeApi::V1));
        assert_eq!(chosen_node_api(&list(&["v1alpha3.NodeService", "1.0.0"])), None);
    }

    /// 1.37: v1 health before v1alpha1, whatever the driver's order.
    #[test]
    fn health_service_is_the_kubelets_preference() {
        let both = list(&["v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"]);
        assert_eq!(chosen_health_api(&both), Some(HealthApi::V1));
        assert_eq!(chosen_health_api(&list(&["v1.DRAPlugin"])), None);
    }

    #[test]
    fn services_parse_by_short_or_advertised_name() {
        assert_eq!(Service::parse("v1"), Ok(Service::Node(NodeApi::V1)));
        assert_eq!(Service::parse("v1alpha1.DRAResourceHealth"), Ok(Service::Health(HealthApi::V1alpha1)));
        assert!(Service::parse("v2").is_err_and(|e| e.contains("health-v1alpha1")));
    }
}
