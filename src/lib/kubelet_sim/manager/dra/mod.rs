//! The kubelet's DRA manager as state and rules, without sockets
//! (docs/dra.md §2, §3, §4, §6): the registered driver instances and the
//! service each one gets, the claim-info cache (which pods use which claim,
//! the devices each driver prepared), the per-driver batches of
//! `NodePrepareResources`/`NodeUnprepareResources` with the kubelet's
//! response rules and texts (pkg/kubelet/cm/dra/manager.go), the CDI IDs
//! each container gets, PodResources `dynamic_resources`, and the
//! `dra_manager_state` checkpoint (pkg/kubelet/cm/dra/state/checkpoint.go).
//! The shell (`kubelet_sim/dra.rs`) makes the gRPC calls and writes the file.
//!
//! Releases: the sim plays DRA from 1.34 (DRA GA, `v1.DRAPlugin`); older
//! releases have no DRA handler ([`plays_dra`]). Where 1.34-1.37 differ:
//! `ShareID` is checkpointed from 1.35; a prepare answer replaces the
//! driver's devices of a claim in 1.37 but is appended to them in 1.34-1.36
//! (`resetDevices`, absent before), so a claim restored from the checkpoint
//! and prepared again after a restart lists its devices twice there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::dra::claims::ClaimRef;
use crate::dra::{HealthApi, NodeApi};
use crate::kubelet_sim::dra_claims::{ClaimObject, ContainerClaim, PodClaim};
use crate::kubelet_version::KubeletVersion;
use crate::proto::podresources::v1;

/// The node services the kubelet knows, as Go's `%q` prints the list
/// (`servicesSupportedByKubelet`, 1.34-1.37).
const KUBELET_SERVICES: &str = "[\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"]";

/// True when the release has a DRA handler with its default feature gates
/// (`DynamicResourceAllocation` is on by default from 1.34, GA).
pub fn plays_dra(v: KubeletVersion) -> bool {
    v.at_least(34)
}

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
        let health = if self.version.at_least(37) {
            crate::dra::chosen_health_api(supported)
        } else if self.version.at_least(36) {
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

    /// The first half of `PrepareResources` for pod `pod_uid`: the
    /// validation pass (claim exists, reserved for the pod, allocated, a
    /// plugin for each driver), then each claim gets the pod's reference and
    /// the ones not prepared yet are batched per driver. An error is the
    /// kubelet's text without the `prepare dynamic resources: ` prefix; the
    /// cache keeps what was added before it (as the kubelet's does).
    pub fn begin_prepare(
        &mut self,
        pod: (&str, &str, &str),
        pod_claims: &[PodClaim],
        objects: &[ClaimObject],
    ) -> Result<Vec<Batch>, String> {
        let (namespace, pod_name, pod_uid) = pod;
        let mut found: Vec<&ClaimObject> = Vec::new();
        for pc in pod_claims {
            let n = &pc.resource_claim_name;
            let Some(obj) = objects.iter().find(|o| o.namespace == namespace && &o.name == n) else {
                return Err(format!(
                    "fetch ResourceClaim {n}: resourceclaims.resource.k8s.io {} not found",
                    crate::validate::go_quote(n)
                ));
            };
            if pc.from_template && obj.controller_uid.as_deref() != Some(pod_uid) {
                // resourceclaim.IsForPod: 1.36 spells Pod with a capital.
                let p = if self.version.at_least(36) { "Pod" } else { "pod" };
                return Err(format!(
                    "ResourceClaim {namespace}/{n} was not created for {p} {namespace}/{pod_name} ({p} is not owner)"
                ));
            }
            if obj.reserved_for.as_ref().is_some_and(|r| !r.iter().any(|u| u == pod_uid)) {
                return Err(format!(
                    "pod {pod_name} ({pod_uid}) is not allowed to use ResourceClaim {n} ({})",
                    obj.uid
                ));
            }
            if !obj.allocated {
                return Err(format!("ResourceClaim {n}: not allocated"));
            }
            for r in &obj.results {
                self.plugin(&r.driver)?;
            }
            found.push(obj);
        }
        let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
        for obj in found {
            let info = self.claims.entry(key(namespace, &obj.name)).or_insert_with(|| ClaimInfo {
                uid: obj.uid.clone(),
                name: obj.name.clone(),
                namespace: namespace.to_string(),
                pods: BTreeSet::new(),
                drivers: obj.results.iter().map(|r| (r.driver.clone(), Vec::new())).collect(),
                prepared: false,
            });
            if info.uid != obj.uid {
                return Err(format!(
                    "old ResourceClaim with same name {} and different UID {} still exists (previous pod force-deleted?!)",
                    obj.name, info.uid
                ));
            }
            info.pods.insert(pod_uid.to_string());
            if info.prepared {
                continue;
            }
            let cref = ClaimRef { namespace: info.namespace.clone(), name: info.name.clone(), uid: info.uid.clone() };
            for driver in info.drivers.keys() {
                batches.entry(driver.clone()).or_default().push(cref.clone());
            }
        }
        Ok(batches.into_iter().map(|(driver, claims)| Batch { driver, claims }).collect())
    }

    /// A driver's `NodePrepareResources` answer for `batch`, by the
    /// kubelet's rules: an unknown UID, a per-claim error or a claim left out
    /// fails the pod. The devices of each answered claim are recorded
    /// (replacing the driver's earlier ones in 1.37, appended to them in 1.34-1.36).
    pub fn prepared(&mut self, batch: &Batch, mut answers: Vec<ClaimAnswer>) -> Result<(), String> {
        answers.sort_by(|a, b| a.uid.cmp(&b.uid));
        let n = answers.len();
        for a in answers {
            let Some(asked) = batch.claims.iter().find(|c| c.uid == a.uid) else {
                return Err(format!("NodePrepareResources returned result for unknown claim UID {}", a.uid));
            };
            if !a.error.is_empty() {
                return Err(format!("NodePrepareResources failed for ResourceClaim {}: {}", asked.name, a.error));
            }
            let Some(info) = self.claims.get_mut(&key(&asked.namespace, &asked.name)) else {
                return Err(format!(
                    "internal error: unable to get claim info for ResourceClaim {} in namespace {}",
                    asked.name, asked.namespace
                ));
            };
            let devices = info.drivers.entry(batch.driver.clone()).or_default();
            if self.version.at_least(37) {
                devices.clear();
            }
            devices.extend(a.devices);
        }
        let unfinished = batch.claims.len().saturating_sub(n);
        if unfinished != 0 {
            return Err(format!("NodePrepareResources skipped {unfinished} ResourceClaims"));
        }
        Ok(())
    }

    /// Every batch answered: the pod's claims are prepared.
    pub fn finish_prepare(&mut self, namespace: &str, pod_claims: &[PodClaim]) {
        for pc in pod_claims {
            if let Some(info) = self.claims.get_mut(&key(namespace, &pc.resource_claim_name)) {
                info.prepared = true;
            }
        }
    }

    /// The first half of `UnprepareResources` for a pod that is gone: the
    /// claims the cache records for it (else those its spec names); a claim
    /// other pods still use only loses the reference; the rest are batched
    /// per driver. Returns the batches and the claims to delete once they succeed.
    pub fn begin_unprepare(
        &mut self,
        namespace: &str,
        pod_uid: &str,
        pod_claims: &[PodClaim],
    ) -> (Vec<Batch>, Vec<String>) {
        let mut names: Vec<String> =
            self.claims.values().filter(|c| c.pods.contains(pod_uid)).map(|c| c.name.clone()).collect();
        if names.is_empty() {
            names = pod_claims.iter().map(|p| p.resource_claim_name.clone()).collect();
        }
        let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
        let mut last_user = Vec::new();
        for name in names {
            let Some(info) = self.claims.get_mut(&key(namespace, &name)) else { continue };
            if !info.pods.contains(pod_uid) {
                continue;
            }
            if info.pods.len() > 1 {
                info.pods.remove(pod_uid);
                continue;
            }
            let cref = ClaimRef { namespace: info.namespace.clone(), name: info.name.clone(), uid: info.uid.clone() };
            for driver in info.drivers.keys() {
                batches.entry(driver.clone()).or_default().push(cref.clone());
            }
            last_user.push(name);
        }
        (batches.into_iter().map(|(driver, claims)| Batch { driver, claims }).collect(), last_user)
    }

    /// A driver's `NodeUnprepareResources` answer, by the same rules as Prepare's.
    pub fn unprepared(batch: &Batch, mut answers: Vec<ClaimAnswer>) -> Result<(), String> {
        answers.sort_by(|a, b| a.uid.cmp(&b.uid));
        for a in &answers {
            let Some(asked) = batch.claims.iter().find(|c| c.uid == a.uid) else {
                return Err(format!("NodeUnprepareResources returned result for unknown claim UID {}", a.uid));
            };
            if !a.error.is_empty() {
                return Err(format!("NodeUnprepareResources failed for ResourceClaim {}: {}", asked.name, a.error));
            }
        }
        let unfinished = batch.claims.len().saturating_sub(answers.len());
        if unfinished != 0 {
            return Err(format!("NodeUnprepareResources skipped {unfinished} ResourceClaims"));
        }
        Ok(())
    }

    /// Every batch answered: the claims are deleted from the cache.
    pub fn finish_unprepare(&mut self, namespace: &str, names: &[String]) {
        for n in names {
            self.claims.remove(&key(namespace, n));
        }
    }

    /// The CDI IDs a container gets (`GetResources`): per claim it uses, the
    /// devices whose request names are empty or hold its request (every
    /// device when it names no request), drivers in name order.
    pub fn container_cdi(&self, namespace: &str, pod_claims: &[PodClaim], uses: &[ContainerClaim]) -> Vec<String> {
        let mut out = Vec::new();
        for u in uses {
            let Some(pc) = pod_claims.iter().find(|p| p.name == u.name) else { continue };
            let Some(info) = self.claims.get(&key(namespace, &pc.resource_claim_name)) else { continue };
            for devices in info.drivers.values() {
                for d in devices {
                    if u.request.is_empty() || d.request_names.is_empty() || d.request_names.contains(&u.request) {
                        out.extend(d.cdi_device_ids.iter().cloned());
                    }
                }
            }
        }
        out
    }

    /// PodResources `dynamic_resources` of a container
    /// (`GetDynamicResources`, cm/container_manager_linux.go): each claim the
    /// container names, every device of it with no request filtering, and
    /// the CDI list growing within a driver (device k lists the IDs of
    /// devices 0..k), as the kubelet builds it. A claim missing from the
    /// cache empties the list (the kubelet logs the error).
    pub fn dynamic_resources(
        &self,
        namespace: &str,
        pod_claims: &[PodClaim],
        uses: &[ContainerClaim],
    ) -> Vec<v1::DynamicResource> {
        let mut out = Vec::new();
        for pc in pod_claims.iter().filter(|p| uses.iter().any(|u| u.name == p.name)) {
            let Some(info) = self.claims.get(&key(namespace, &pc.resource_claim_name)) else { return Vec::new() };
            let mut claim_resources = Vec::new();
            for (driver, devices) in &info.drivers {
                let mut cdi = Vec::new();
                for d in devices {
                    cdi.extend(d.cdi_device_ids.iter().map(|id| v1::CdiDevice { name: id.clone() }));
                    claim_resources.push(v1::ClaimResource {
                        cdi_devices: cdi.clone(),
                        driver_name: driver.clone(),
                        pool_name: d.pool.clone(),
                        device_name: d.device.clone(),
                        share_id: d.share_id.clone(),
                    });
                }
            }
            out.push(v1::DynamicResource {
                claim_name: info.name.clone(),
                claim_namespace: info.namespace.clone(),
                claim_resources,
            });
        }
        out
    }

    /// The checkpoint file's bytes, as the kubelet writes them: `Data` is
    /// the JSON of the claim list (Go's field order; `ShareID` from 1.35),
    /// `Checksum` its CRC-32 (IEEE). Entries in `namespace/name` order
    /// (the kubelet's follow Go map order).
    pub fn checkpoint_bytes(&self) -> Vec<u8> {
        let share = self.version.at_least(35);
        let list: Vec<String> = self.claims.values().map(|c| claim_json(c, share)).collect();
        let data = format!(
            "{{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{}]}}",
            list.join(",")
        );
        let sum = crate::dra::state::crc32_ieee(data.as_bytes());
        let data_json = serde_json::Value::String(data).to_string();
        format!("{{\"Data\":{data_json},\"Checksum\":{sum}}}").into_bytes()
    }

    /// Restores a checkpoint's entries (not prepared: their next user
    /// prepares them again). A bad checksum is the kubelet's
    /// `checkpoint is corrupted`: its DRA manager, and the kubelet, do not start.
    pub fn restore(&mut self, report: &crate::dra::state::StateReport) -> Result<usize, String> {
        if !report.checksum_ok {
            return Err(format!(
                "checkpoint is corrupted: stored checksum {} but the data hashes to {}",
                report.stored_checksum, report.computed_checksum
            ));
        }
        self.claims.clear();
        for c in &report.claims {
            let drivers = c
                .driver_state
                .iter()
                .flatten()
                .map(|(d, s)| {
                    let devices = s.devices.iter().flatten().map(|x| PreparedDevice {
                        pool: x.pool_name.clone(),
                        device: x.device_name.clone(),
                        share_id: x.share_id.clone().flatten(),
                        request_names: x.request_names.clone().unwrap_or_default(),
                        cdi_device_ids: x.cdi_device_ids.clone().unwrap_or_default(),
                    });
                    (d.clone(), devices.collect())
                })
                .collect();
            let info = ClaimInfo {
                uid: c.claim_uid.clone(),
                name: c.claim_name.clone(),
                namespace: c.namespace.clone(),
                pods: c.pod_uids.iter().flatten().map(|(k, _)| k.clone()).collect(),
                drivers,
                prepared: false,
            };
            self.claims.insert(key(&info.namespace, &info.name), info);
        }
        Ok(self.claims.len())
    }

    /// A kubelet restart: every entry is restored, none prepared.
    pub fn unprepare_all_in_memory(&mut self) {
        for c in self.claims.values_mut() {
            c.prepared = false;
        }
    }
}

/// A Go `[]string` as `encoding/json` writes it: `null` when empty (the
/// kubelet stores the gRPC answer's nil slices).
fn strings(v: &[String]) -> String {
    if v.is_empty() { "null".into() } else { serde_json::json!(v).to_string() }
}

fn js(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// One `ClaimInfoState` in Go's field order (maps with sorted keys, as
/// `encoding/json` writes them).
fn claim_json(c: &ClaimInfo, share: bool) -> String {
    let drivers: Vec<String> = c
        .drivers
        .iter()
        .map(|(d, devices)| {
            let list: Vec<String> = devices
                .iter()
                .map(|x| {
                    let share_id = if share {
                        format!(",\"ShareID\":{}", x.share_id.as_deref().map_or_else(|| "null".into(), js))
                    } else {
                        String::new()
                    };
                    format!(
                        "{{\"PoolName\":{},\"DeviceName\":{}{share_id},\"RequestNames\":{},\"CDIDeviceIDs\":{}}}",
                        js(&x.pool),
                        js(&x.device),
                        strings(&x.request_names),
                        strings(&x.cdi_device_ids)
                    )
                })
                .collect();
            let devices = if list.is_empty() { "null".to_string() } else { format!("[{}]", list.join(",")) };
            format!("{}:{{\"Devices\":{devices}}}", js(d))
        })
        .collect();
    let pods: Vec<String> = c.pods.iter().map(|p| format!("{}:{{}}", js(p))).collect();
    format!(
        "{{\"ClaimUID\":{},\"ClaimName\":{},\"Namespace\":{},\"PodUIDs\":{{{}}},\"DriverState\":{{{}}}}}",
        js(&c.uid),
        js(&c.name),
        js(&c.namespace),
        pods.join(","),
        drivers.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet_sim::dra_claims::AllocationResult;

    const DRV: &str = "gpu.example.com";

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    fn with_driver(minor: u8) -> DraState {
        let mut d = DraState::new(KubeletVersion::Release(minor));
        d.register(DRV, "/p/dra.sock", "/p/dra.sock".into(), "/r/reg.sock".into(), &list(&["v1.DRAPlugin"])).unwrap();
        d
    }

    fn claim(name: &str, uid: &str, devices: &[(&str, &str)]) -> ClaimObject {
        ClaimObject {
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
            allocated: true,
            results: devices
                .iter()
                .map(|(req, dev)| AllocationResult {
                    request: (*req).into(),
                    driver: DRV.into(),
                    pool: "p".into(),
                    device: (*dev).into(),
                })
                .collect(),
            reserved_for: None,
            controller_uid: None,
            object: None,
        }
    }

    fn pod_claim(name: &str, claim: &str) -> PodClaim {
        PodClaim { name: name.into(), resource_claim_name: claim.into(), from_template: false }
    }

    fn device(dev: &str, requests: &[&str], ids: &[&str]) -> PreparedDevice {
        PreparedDevice {
            pool: "p".into(),
            device: dev.into(),
            share_id: None,
            request_names: list(requests),
            cdi_device_ids: list(ids),
        }
    }

    /// 1.34-1.37: the driver's order picks the node service; an empty or
    /// unknown list is refused with the kubelet's words.
    #[test]
    fn validation_texts_and_plugin_order_1_34_to_1_37() {
        for minor in 34..=37 {
            let d = DraState::new(KubeletVersion::Release(minor));
            assert_eq!(d.validate(DRV, "/e", &list(&["v1beta1.DRAPlugin", "v1.DRAPlugin"])), Ok(NodeApi::V1beta1));
            assert_eq!(
                d.validate(DRV, "/e", &[]).unwrap_err(),
                "invalid supported gRPC versions of DRA driver plugin gpu.example.com at endpoint /e: \
                 empty list of supported gRPC services (aka supported versions)"
            );
            assert_eq!(
                d.validate(DRV, "/e", &list(&["v1alpha3.NodeService", "1.0.0"])).unwrap_err(),
                "invalid supported gRPC versions of DRA driver plugin gpu.example.com at endpoint /e: none of \
                 services supported by the plugin ([\"v1alpha3.NodeService\" \"1.0.0\"]) are supported by the \
                 kubelet ([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])"
            );
        }
        assert!(!plays_dra(KubeletVersion::Release(33)) && plays_dra(KubeletVersion::Release(34)));
    }

    /// 1.33+: several instances per driver, the newest called; a repeated
    /// endpoint is refused; the last one gone leaves the driver unregistered.
    /// The health stream per release: none in 1.34-1.35 (ResourceHealthStatus
    /// off by default), v1alpha1 in 1.36 advertised or not, 1.37 the kubelet's
    /// preference among the advertised (none when none is).
    #[test]
    fn the_health_service_follows_the_gate_and_the_release_1_34_to_1_37() {
        let node_only = list(&["v1.DRAPlugin"]);
        let both = list(&["v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"]);
        for (minor, supported, want) in [
            (34, &both, None),
            (35, &both, None),
            (36, &node_only, Some(HealthApi::V1alpha1)),
            (36, &both, Some(HealthApi::V1alpha1)),
            (37, &node_only, None),
            (37, &both, Some(HealthApi::V1)),
        ] {
            let mut d = DraState::new(KubeletVersion::Release(minor));
            let inst = d.register(DRV, "/e", "/e".into(), "/r".into(), supported).unwrap();
            assert_eq!(inst.health, want, "1.{minor} {supported:?}");
        }
        let mut d = with_driver(37);
        let dev = |h: &str| DeviceHealthView {
            driver: String::new(),
            pool: "p".into(),
            device: "d0".into(),
            health: h.into(),
            message: String::new(),
        };
        assert_eq!(d.set_health(DRV, vec![dev("Healthy")]).len(), 1);
        assert!(d.set_health(DRV, vec![dev("Healthy")]).is_empty(), "unchanged health is no change");
        assert_eq!(d.set_health(DRV, vec![dev("Unhealthy")])[0].health, "Unhealthy");
        assert_eq!(d.status().device_health[0].driver, DRV);
    }

    #[test]
    fn instances_per_driver_1_34() {
        let mut d = with_driver(34);
        let v1 = list(&["v1.DRAPlugin"]);
        d.register(DRV, "/p/dra-2.sock", "/p/dra-2.sock".into(), "/r/reg2.sock".into(), &v1).unwrap();
        assert_eq!(d.plugin(DRV).unwrap().endpoint, "/p/dra-2.sock");
        assert_eq!(
            d.register(DRV, "/p/dra.sock", "/x".into(), "/r/x".into(), &v1).unwrap_err(),
            "endpoint /p/dra.sock already registered for DRA driver plugin gpu.example.com"
        );
        // A re-created registration socket registering its endpoint again
        // replaces its instance (the reconciler deregistered it first).
        d.register(DRV, "/p/dra-2.sock", "/p/dra-2.sock".into(), "/r/reg2.sock".into(), &v1).unwrap();
        assert_eq!(d.status().drivers.len(), 2, "{:?}", d.status());
        assert!(d.deregister(DRV, "/p/dra-2.sock"));
        assert_eq!(d.plugin(DRV).unwrap().endpoint, "/p/dra.sock");
        assert!(d.deregister(DRV, "/p/dra.sock"));
        assert_eq!(d.plugin(DRV).unwrap_err(), "DRA driver gpu.example.com is not registered");
    }

    /// `status` lists every registered instance, by driver, oldest first; a
    /// kubelet restart (1.34-1.37) starts the plugin manager empty, so every
    /// driver must register again before its claims can be prepared.
    #[test]
    fn status_lists_the_instances_and_a_restart_forgets_them_1_36() {
        let mut d = with_driver(36);
        let v1 = list(&["v1.DRAPlugin"]);
        d.register("nic.example.com", "/p/nic.sock", "/p/nic.sock".into(), "/r/nic.sock".into(), &v1).unwrap();
        d.register(DRV, "/p/dra-2.sock", "/p/dra-2.sock".into(), "/r/reg2.sock".into(), &v1).unwrap();
        let endpoints = |d: &DraState| d.status().drivers.iter().map(|i| i.endpoint.clone()).collect::<Vec<_>>();
        assert_eq!(endpoints(&d), ["/p/dra.sock", "/p/dra-2.sock", "/p/nic.sock"]);
        assert_eq!(d.instances().count(), 3);
        assert!(d.status().claims.is_empty() && d.status().checkpoint.is_none());
        d.drop_instances();
        assert!(endpoints(&d).is_empty());
        assert_eq!(d.plugin(DRV).unwrap_err(), "DRA driver gpu.example.com is not registered");
    }

    /// 1.37: the validation pass refuses a missing claim, a claim reserved
    /// for another pod, an unallocated claim and an unregistered driver,
    /// before anything is cached.
    #[test]
    fn validation_pass_texts_1_37() {
        let mut d = with_driver(37);
        let pod = ("ns", "web", "pod-1");
        let pcs = [pod_claim("gpu", "c1")];
        assert_eq!(
            d.begin_prepare(pod, &pcs, &[]).unwrap_err(),
            "fetch ResourceClaim c1: resourceclaims.resource.k8s.io \"c1\" not found"
        );
        let mut other = claim("c1", "u1", &[("r", "d0")]);
        other.reserved_for = Some(list(&["pod-2"]));
        assert_eq!(
            d.begin_prepare(pod, &pcs, &[other]).unwrap_err(),
            "pod web (pod-1) is not allowed to use ResourceClaim c1 (u1)"
        );
        let mut unallocated = claim("c1", "u1", &[]);
        unallocated.allocated = false;
        assert_eq!(d.begin_prepare(pod, &pcs, &[unallocated]).unwrap_err(), "ResourceClaim c1: not allocated");
        let mut elsewhere = claim("c1", "u1", &[("r", "d0")]);
        elsewhere.results[0].driver = "net.example.com".into();
        assert_eq!(
            d.begin_prepare(pod, &pcs, &[elsewhere]).unwrap_err(),
            "DRA driver net.example.com is not registered"
        );
        assert_eq!(d.claims().count(), 0, "the validation pass changes nothing");
    }

    /// 1.34-1.37: one batch per driver; an unknown UID, a per-claim error and
    /// a claim left out each fail with the kubelet's text.
    #[test]
    fn prepare_answers_are_judged_1_34_to_1_37() {
        for minor in 34..=37 {
            let mut d = with_driver(minor);
            let objs = [claim("c1", "u1", &[("r", "d0")]), claim("c2", "u2", &[("r", "d1")])];
            let pcs = [pod_claim("a", "c1"), pod_claim("b", "c2")];
            let batches = d.begin_prepare(("ns", "web", "pod-1"), &pcs, &objs).unwrap();
            assert_eq!(batches.len(), 1);
            assert_eq!(batches[0].claims.iter().map(|c| c.uid.as_str()).collect::<Vec<_>>(), ["u1", "u2"]);
            let ans = |uid: &str, error: &str| ClaimAnswer { uid: uid.into(), devices: vec![], error: error.into() };
            let b = &batches[0];
            assert_eq!(
                d.prepared(b, vec![ans("zz", "")]).unwrap_err(),
                "NodePrepareResources returned result for unknown claim UID zz"
            );
            assert_eq!(
                d.prepared(b, vec![ans("u2", "boom")]).unwrap_err(),
                "NodePrepareResources failed for ResourceClaim c2: boom"
            );
            assert_eq!(
                d.prepared(b, vec![ans("u1", "")]).unwrap_err(),
                "NodePrepareResources skipped 1 ResourceClaims"
            );
            assert_eq!(
                DraState::unprepared(b, vec![ans("u1", "")]).unwrap_err(),
                "NodeUnprepareResources skipped 1 ResourceClaims"
            );
            d.prepared(b, vec![ans("u1", ""), ans("u2", "")]).unwrap();
        }
    }

    /// A claim another UID holds under the same name is refused (1.34-1.37).
    #[test]
    fn a_reused_name_with_a_new_uid_is_refused_1_34() {
        let mut d = with_driver(34);
        let pcs = [pod_claim("a", "c1")];
        d.begin_prepare(("ns", "p1", "pod-1"), &pcs, &[claim("c1", "u1", &[("r", "d0")])]).unwrap();
        assert_eq!(
            d.begin_prepare(("ns", "p2", "pod-2"), &pcs, &[claim("c1", "u9", &[("r", "d0")])]).unwrap_err(),
            "old ResourceClaim with same name c1 and different UID u1 still exists (previous pod force-deleted?!)"
        );
    }

    /// A restored claim prepared again: 1.34-1.36 append the answer to the
    /// devices restored from the checkpoint (no `resetDevices`), 1.37
    /// replaces them.
    #[test]
    fn re_prepare_after_restart_appends_before_1_37_and_replaces_in_1_37() {
        for (minor, expected) in [(34, 2), (36, 2), (37, 1)] {
            let mut d = with_driver(minor);
            let objs = [claim("c1", "u1", &[("r", "d0")])];
            let pcs = [pod_claim("a", "c1")];
            let answer = || {
                vec![ClaimAnswer {
                    uid: "u1".into(),
                    devices: vec![device("d0", &[], &["v/c=d0"])],
                    error: String::new(),
                }]
            };
            let b = d.begin_prepare(("ns", "p", "pod-1"), &pcs, &objs).unwrap();
            d.prepared(&b[0], answer()).unwrap();
            d.finish_prepare("ns", &pcs);
            let bytes = d.checkpoint_bytes();
            let report =
                crate::dra::state::parse(std::path::Path::new("x"), std::str::from_utf8(&bytes).unwrap()).unwrap();
            assert!(report.checksum_ok && report.problems.is_empty(), "{:?}", report.problems);
            let mut after = with_driver(minor);
            assert_eq!(after.restore(&report), Ok(1));
            let b = after.begin_prepare(("ns", "p", "pod-1"), &pcs, &objs).unwrap();
            assert_eq!(b.len(), 1, "a restored claim is not prepared: it is prepared again");
            after.prepared(&b[0], answer()).unwrap();
            assert_eq!(after.claims().next().unwrap().drivers[DRV].len(), expected, "1.{minor}");
        }
    }

    /// The checkpoint: the empty list's CRC-32 is the kubelet's 2361995144;
    /// `ShareID` is written from 1.35 (null when unset), not in 1.34.
    #[test]
    fn checkpoint_bytes_per_release() {
        let empty = String::from_utf8(DraState::new(KubeletVersion::Release(34)).checkpoint_bytes()).unwrap();
        assert!(empty.ends_with(",\"Checksum\":2361995144}"), "{empty}");
        for (minor, share) in [(34, false), (35, true), (37, true)] {
            let mut d = with_driver(minor);
            let pcs = [pod_claim("a", "c1")];
            let b = d.begin_prepare(("ns", "p", "pod-1"), &pcs, &[claim("c1", "u1", &[("r", "d0")])]).unwrap();
            let ans = ClaimAnswer {
                uid: "u1".into(),
                devices: vec![device("d0", &["r"], &["v/c=d0"])],
                error: String::new(),
            };
            d.prepared(&b[0], vec![ans]).unwrap();
            let text = String::from_utf8(d.checkpoint_bytes()).unwrap();
            assert_eq!(text.contains("\\\"ShareID\\\":null"), share, "1.{minor}: {text}");
            assert!(text.contains("\\\"PodUIDs\\\":{\\\"pod-1\\\":{}}"), "{text}");
        }
    }

    /// A corrupt checkpoint stops the DRA manager (and the kubelet), 1.34-1.37.
    #[test]
    fn a_corrupt_checkpoint_is_refused() {
        let d = with_driver(35);
        let text = String::from_utf8(d.checkpoint_bytes()).unwrap().replace("2361995144", "7");
        let report = crate::dra::state::parse(std::path::Path::new("x"), &text).unwrap();
        assert!(with_driver(35).restore(&report).unwrap_err().starts_with("checkpoint is corrupted"));
    }

    /// CDI IDs per container (1.34-1.37): devices with no request names or
    /// the container's request; PodResources lists every device of a used
    /// claim with the CDI list growing within a driver.
    #[test]
    fn cdi_per_container_and_podresources_quirk() {
        let mut d = with_driver(36);
        let pcs = [pod_claim("a", "c1")];
        let b =
            d.begin_prepare(("ns", "p", "pod-1"), &pcs, &[claim("c1", "u1", &[("r1", "d0"), ("r2", "d1")])]).unwrap();
        let devices = vec![device("d0", &["r1"], &["v/c=d0"]), device("d1", &["r2"], &["v/c=d1"])];
        d.prepared(&b[0], vec![ClaimAnswer { uid: "u1".into(), devices, error: String::new() }]).unwrap();
        let uses = |request: &str| vec![ContainerClaim { name: "a".into(), request: request.into() }];
        assert_eq!(d.container_cdi("ns", &pcs, &uses("r2")), ["v/c=d1"]);
        assert_eq!(d.container_cdi("ns", &pcs, &uses("")), ["v/c=d0", "v/c=d1"]);
        let dr = d.dynamic_resources("ns", &pcs, &uses("r2"));
        let cdi: Vec<usize> = dr[0].claim_resources.iter().map(|r| r.cdi_devices.len()).collect();
        assert_eq!(cdi, [1, 2], "no request filtering; the CDI list accumulates within a driver");
        assert!(d.dynamic_resources("ns", &pcs, &[]).is_empty());
    }

    /// A kubelet restart (1.34-1.37): the restored entries count as not
    /// prepared, so the next sync of a pod using them calls the driver again.
    #[test]
    fn after_a_restart_a_prepared_claim_is_prepared_again_1_37() {
        let mut d = with_driver(37);
        let pcs = [pod_claim("a", "c")];
        let objs = [claim("c", "u1", &[("r", "d0")])];
        let b = d.begin_prepare(("ns", "p1", "pod-1"), &pcs, &objs).unwrap();
        d.prepared(&b[0], vec![ClaimAnswer { uid: "u1".into(), devices: vec![], error: String::new() }]).unwrap();
        d.finish_prepare("ns", &pcs);
        assert!(d.begin_prepare(("ns", "p1", "pod-1"), &pcs, &objs).unwrap().is_empty(), "prepared already");
        d.unprepare_all_in_memory();
        let again = d.begin_prepare(("ns", "p1", "pod-1"), &pcs, &objs).unwrap();
        assert_eq!(again.len(), 1, "restored, not prepared: called again");
        assert_eq!(again[0].claims[0].uid, "u1");
    }

    /// NodeUnprepareResources answers are judged as Prepare's are (1.34-1.37):
    /// every claim answered under its own UID, no per-claim error, none skipped.
    #[test]
    fn unprepare_answers_are_judged_1_34_to_1_37() {
        let cref = |name: &str, uid: &str| ClaimRef { namespace: "ns".into(), name: name.into(), uid: uid.into() };
        let batch = Batch { driver: DRV.into(), claims: vec![cref("a", "u1"), cref("b", "u2")] };
        let ok = |uid: &str| ClaimAnswer { uid: uid.into(), devices: vec![], error: String::new() };
        assert_eq!(DraState::unprepared(&batch, vec![ok("u2"), ok("u1")]), Ok(()));
        assert_eq!(
            DraState::unprepared(&batch, vec![ok("u1"), ok("u9")]).unwrap_err(),
            "NodeUnprepareResources returned result for unknown claim UID u9"
        );
        let failed = ClaimAnswer { error: "busy".into(), ..ok("u2") };
        assert_eq!(
            DraState::unprepared(&batch, vec![ok("u1"), failed]).unwrap_err(),
            "NodeUnprepareResources failed for ResourceClaim b: busy"
        );
        assert_eq!(
            DraState::unprepared(&batch, vec![ok("u1")]).unwrap_err(),
            "NodeUnprepareResources skipped 1 ResourceClaims"
        );
    }

    /// Unprepare only for the claim's last user (1.34-1.37).
    #[test]
    fn unprepare_waits_for_the_last_user_1_35() {
        let mut d = with_driver(35);
        let pcs = [pod_claim("a", "shared")];
        let objs = [claim("shared", "u1", &[("r", "d0")])];
        let b = d.begin_prepare(("ns", "p1", "pod-1"), &pcs, &objs).unwrap();
        d.prepared(&b[0], vec![ClaimAnswer { uid: "u1".into(), devices: vec![], error: String::new() }]).unwrap();
        d.finish_prepare("ns", &pcs);
        assert!(d.begin_prepare(("ns", "p2", "pod-2"), &pcs, &objs).unwrap().is_empty(), "prepared already");
        let (batches, last) = d.begin_unprepare("ns", "pod-1", &pcs);
        assert!(batches.is_empty() && last.is_empty());
        let (batches, last) = d.begin_unprepare("ns", "pod-2", &pcs);
        assert_eq!((batches.len(), last.as_slice()), (1, ["shared".to_string()].as_slice()));
        d.finish_unprepare("ns", &last);
        assert_eq!(d.claims().count(), 0);
    }

    /// The kubelet's own checkpoint test vectors (`checkpointer_test.go`):
    /// read back and written again, byte for byte: 1.34 without `ShareID`,
    /// 1.37 with it (entries here are already in name order).
    #[test]
    fn checkpoint_bytes_match_the_kubelets_vectors_1_34_and_1_37() {
        for (file, minor) in [("v1.34-one-claim.json", 34), ("v1.37-two-claims.json", 37)] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/checkpoints/dra").join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let report = crate::dra::state::parse(&path, &text).unwrap();
            let mut d = DraState::new(KubeletVersion::Release(minor));
            d.restore(&report).unwrap();
            assert_eq!(String::from_utf8(d.checkpoint_bytes()).unwrap(), text.trim_end(), "{file}");
        }
    }
}
