//! The kubelet's DRA manager as state and rules, without sockets
//! (docs/dra.md §2, §3, §4, §6): the registered driver instances and the
//! service each one gets, the claim-info cache (which pods use which claim,
//! the devices each driver prepared), the per-driver batches of
//! `NodePrepareResources`/`NodeUnprepareResources` with the kubelet's
//! response rules and texts (pkg/kubelet/cm/dra/manager.go), the CDI IDs
//! each container gets, PodResources `dynamic_resources`, and the
//! `dra_manager_state` checkpoint (pkg/kubelet/cm/dra/state/checkpoint.go).
//! The shell (`kubelet_sim/dra.rs`) makes the gRPC calls and writes the file;
//! the events it reports are the [`Manager`](super::Manager)'s DRA
//! transitions (`events.rs`), each returning the [`DraEffect`]s to perform.
//!
//! Releases: the sim plays DRA from 1.34 (DRA GA, `v1.DRAPlugin`); older
//! releases have no DRA handler (`KubeletVersion::has_dra`). Each rule that
//! differs between 1.34 and 1.37 is a named predicate of `KubeletVersion`
//! (the release table): `ShareID` checkpointed, prepared devices reset,
//! which claims a deleted pod unprepares, users refused while a claim is
//! being unprepared, the health stream, the owner error's spelling.

mod checkpoint;
mod claims;
mod events;
mod extended;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_events;

pub(crate) use claims::Unpreparer;
pub(crate) use events::{DraEffect, DraRegistration, Registered};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::dra::claims::ClaimRef;
use crate::dra::{HealthApi, NodeApi};
use crate::kubelet_version::KubeletVersion;

/// The node services the kubelet knows, as Go's `%q` prints the list
/// (`servicesSupportedByKubelet`, 1.34-1.37).
const KUBELET_SERVICES: &str = "[\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"]";

/// One registered instance of a DRA driver's kubelet plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraInstance {
    /// The driver name (GetInfo `name`).
    pub driver: String,
    /// The endpoint as registered (GetInfo `endpoint`, or the registration socket).
    pub endpoint: String,
    /// The socket the sim dials (the endpoint, translated when mapped).
    pub socket: PathBuf,
    /// The registration socket in plugins_registry.
    pub registration: PathBuf,
    /// The node service chosen.
    pub service: NodeApi,
    /// The health service the sim streams from, as the release does (none: no stream).
    pub health: Option<HealthApi>,
}

/// A device's health as the last `NodeWatchResources` message reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceHealthView {
    /// The driver.
    pub driver: String,
    /// `pool_name`.
    pub pool: String,
    /// `device_name`.
    pub device: String,
    /// `Healthy`, `Unhealthy` or `Unknown`.
    pub health: String,
    /// The driver's message (may be empty).
    #[serde(default)]
    pub message: String,
}

/// One device a driver prepared for a claim, as checkpointed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedDevice {
    /// `PoolName`.
    pub pool: String,
    /// `DeviceName`.
    pub device: String,
    /// `ShareID` (v1, 1.35+).
    pub share_id: Option<String>,
    /// `RequestNames` (empty: every request of the claim).
    pub request_names: Vec<String>,
    /// `CDIDeviceIDs`.
    pub cdi_device_ids: Vec<String>,
}

/// One entry of the claim-info cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimInfo {
    /// `ClaimUID`.
    pub uid: String,
    /// `ClaimName`.
    pub name: String,
    /// `Namespace`.
    pub namespace: String,
    /// `PodUIDs`.
    pub pods: BTreeSet<String>,
    /// `DriverState`: every driver of the allocation, with the devices it prepared.
    pub drivers: BTreeMap<String, Vec<PreparedDevice>>,
    /// Prepared since the (sim's) start; restored entries are not.
    pub prepared: bool,
    /// 1.37: `NodeUnprepareResources` was called for the claim's last user
    /// and has not succeeded yet; new users are refused meanwhile.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unpreparing: bool,
}

/// One driver's answer for one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimAnswer {
    /// The key of the answer map.
    pub uid: String,
    /// The devices (Prepare only).
    pub devices: Vec<PreparedDevice>,
    /// The per-claim error.
    pub error: String,
}

/// One call to make: a driver and the claims of one pod it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The driver.
    pub driver: String,
    /// The claims, in the pod's order.
    pub claims: Vec<ClaimRef>,
}

/// What `status` shows of the DRA manager.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraStatus {
    /// The registered instances, by driver, oldest first.
    pub drivers: Vec<DraInstance>,
    /// The claim-info cache (what `dra_manager_state` holds).
    pub claims: Vec<ClaimInfo>,
    /// The checkpoint file.
    pub checkpoint: Option<String>,
    /// Device health from the drivers' health streams (1.36+), by driver, pool, device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_health: Vec<DeviceHealthView>,
    /// The API server claims are read from: its URL, and the kubeconfig drivers are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<ApiView>,
}

/// The API server the DRA manager reads claims from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiView {
    /// `http://host:port`.
    pub server: String,
    /// The kubeconfig naming it.
    pub kubeconfig: String,
    /// `--api-objects` (served by the sim) or `--kubeconfig` (read only).
    pub from: String,
}

/// The DRA manager's state.
#[derive(Debug)]
pub(crate) struct DraState {
    version: KubeletVersion,
    /// Driver name -> instances, oldest first.
    instances: BTreeMap<String, Vec<DraInstance>>,
    /// `namespace/name` -> claim info.
    claims: BTreeMap<String, ClaimInfo>,
    /// (driver, pool, device) -> the health last streamed.
    health: BTreeMap<(String, String, String), DeviceHealthView>,
    /// Driver -> the generation of its pending ResourceSlice wipe (a
    /// registration or a newer wipe moves it on, cancelling the older one).
    wipes: BTreeMap<String, u64>,
    /// (driver, endpoint) -> the generation of its health stream: a new
    /// registration of the endpoint starts a new stream and ends the old one.
    streams: BTreeMap<(String, String), u64>,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn quote_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|s| crate::validate::go_quote(s)).collect::<Vec<_>>().join(" "))
}

impl DraState {
    /// An empty manager playing `version`.
    pub fn new(version: KubeletVersion) -> Self {
        DraState {
            version,
            instances: BTreeMap::new(),
            claims: BTreeMap::new(),
            health: BTreeMap::new(),
            wipes: BTreeMap::new(),
            streams: BTreeMap::new(),
        }
    }

    /// `ValidatePlugin` (1.34-1.37, `dra_plugin_manager.go`): the node
    /// service is the first entry of the driver's list the kubelet knows, in
    /// the driver's order. The error is the kubelet's text.
    pub fn validate(&self, driver: &str, endpoint: &str, supported: &[String]) -> Result<NodeApi, String> {
        let why = if supported.is_empty() {
            "empty list of supported gRPC services (aka supported versions)".to_string()
        } else if let Some(api) = crate::dra::chosen_node_api(supported) {
            return Ok(api);
        } else {
            format!(
                "none of services supported by the plugin ({}) are supported by the kubelet ({KUBELET_SERVICES})",
                quote_list(supported)
            )
        };
        Err(format!("invalid supported gRPC versions of DRA driver plugin {driver} at endpoint {endpoint}: {why}"))
    }

    /// `RegisterPlugin`: validation again, then the instance is added to the
    /// driver's list (several instances per driver, 1.33+); an endpoint
    /// registered already is refused.
    pub fn register(
        &mut self,
        driver: &str,
        endpoint: &str,
        socket: PathBuf,
        registration: PathBuf,
        supported: &[String],
    ) -> Result<DraInstance, String> {
        let service = self.validate(driver, endpoint, supported)?;
        let list = self.instances.entry(driver.to_string()).or_default();
        if let Some(pos) = list.iter().position(|i| i.endpoint == endpoint) {
            // The same registration socket again means it was re-created: the
            // kubelet's plugin reconciler, one operation per socket path at a
            // time, deregisters the old registration before registering the new
            // one (`pkg/kubelet/pluginmanager/reconciler`, 1.34-1.37). Another
            // socket claiming a live endpoint is refused.
            if list[pos].registration != registration {
                return Err(format!("endpoint {endpoint} already registered for DRA driver plugin {driver}"));
            }
            list.remove(pos);
        }
        // The ResourceHealthStatus gate is off by default in 1.34-1.35 (no
        // stream), on from 1.36; 1.36 opens v1alpha1 whether advertised or
        // not, 1.37 picks its own preference among the advertised (docs/dra.md §2).
        let health = if self.version.picks_advertised_dra_health_service() {
            crate::dra::chosen_health_api(supported)
        } else if self.version.streams_dra_device_health() {
            Some(HealthApi::V1alpha1)
        } else {
            None
        };
        let inst = DraInstance {
            driver: driver.to_string(),
            endpoint: endpoint.to_string(),
            socket,
            registration,
            service,
            health,
        };
        list.push(inst.clone());
        Ok(inst)
    }

    /// `DeRegisterPlugin`: the instance with this endpoint goes.
    pub fn deregister(&mut self, driver: &str, endpoint: &str) -> bool {
        let Some(list) = self.instances.get_mut(driver) else { return false };
        let before = list.len();
        list.retain(|i| i.endpoint != endpoint);
        let gone = list.len() != before;
        if list.is_empty() {
            self.instances.remove(driver);
        }
        gone
    }

    /// A kubelet restart: the plugin manager starts empty.
    pub fn drop_instances(&mut self) {
        self.instances.clear();
    }

    /// `GetPlugin`: the newest instance (the sim does not track connection
    /// state; the kubelet prefers the newest connected one).
    pub fn plugin(&self, driver: &str) -> Result<DraInstance, String> {
        self.instances
            .get(driver)
            .and_then(|l| l.last())
            .cloned()
            .ok_or_else(|| format!("DRA driver {driver} is not registered"))
    }

    /// Every registered instance, by driver.
    pub fn instances(&self) -> impl Iterator<Item = &DraInstance> {
        self.instances.values().flatten()
    }

    /// The state for `status`.
    pub fn status(&self) -> DraStatus {
        DraStatus {
            drivers: self.instances().cloned().collect(),
            claims: self.claims.values().cloned().collect(),
            checkpoint: None,
            device_health: self.health.values().cloned().collect(),
            api: None,
        }
    }

    /// Moves the driver's wipe generation on (cancelling a pending wipe) and returns it.
    pub fn bump_wipe(&mut self, driver: &str) -> u64 {
        let g = self.wipes.entry(driver.to_string()).or_default();
        *g += 1;
        *g
    }

    /// True when the wipe of `generation` is still due: no newer one, no
    /// registration since, and no instance of the driver left (`sync` in
    /// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go).
    pub fn wipe_due(&self, driver: &str, generation: u64) -> bool {
        self.wipes.get(driver) == Some(&generation) && self.instances.get(driver).is_none_or(Vec::is_empty)
    }

    /// A new health stream for the instance at `endpoint`; returns its generation.
    pub fn new_stream(&mut self, driver: &str, endpoint: &str) -> u64 {
        let g = self.streams.entry((driver.to_string(), endpoint.to_string())).or_default();
        *g += 1;
        *g
    }

    /// True while the health stream of `generation` is the instance's
    /// current one and the instance is registered.
    pub fn stream_current(&self, driver: &str, endpoint: &str, generation: u64) -> bool {
        self.streams.get(&(driver.to_string(), endpoint.to_string())) == Some(&generation)
            && self.instances.get(driver).is_some_and(|l| l.iter().any(|i| i.endpoint == endpoint))
    }

    /// One health message of `driver`: each device listed takes the health
    /// reported (`HandleWatchResourcesStream` in pkg/kubelet/cm/dra/manager.go
    /// keeps the latest per device). Returns the devices whose health changed.
    pub fn set_health(&mut self, driver: &str, devices: Vec<DeviceHealthView>) -> Vec<DeviceHealthView> {
        let mut changed = Vec::new();
        for mut d in devices {
            d.driver = driver.to_string();
            let k = (d.driver.clone(), d.pool.clone(), d.device.clone());
            if self.health.get(&k).is_none_or(|old| old.health != d.health || old.message != d.message) {
                changed.push(d.clone());
            }
            self.health.insert(k, d);
        }
        changed
    }

    /// The cache entries, by `namespace/name`.
    pub fn claims(&self) -> impl Iterator<Item = &ClaimInfo> {
        self.claims.values()
    }
}
