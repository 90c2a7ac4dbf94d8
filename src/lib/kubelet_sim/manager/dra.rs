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
    /// The health service the release would stream from (none is opened by the sim).
    pub health: Option<HealthApi>,
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
}

/// The DRA manager's state.
#[derive(Debug)]
pub(crate) struct DraState {
    version: KubeletVersion,
    /// Driver name -> instances, oldest first.
    instances: BTreeMap<String, Vec<DraInstance>>,
    /// `namespace/name` -> claim info.
    claims: BTreeMap<String, ClaimInfo>,
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
        DraState { version, instances: BTreeMap::new(), claims: BTreeMap::new() }
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
        if list.iter().any(|i| i.endpoint == endpoint) {
            return Err(format!("endpoint {endpoint} already registered for DRA driver plugin {driver}"));
        }
        // 1.37 picks its own preference among the advertised health services;
        // 1.34-1.36 open v1alpha1 whether advertised or not (docs/dra.md §2).
        let health = if self.version.at_least(37) {
            crate::dra::chosen_health_api(supported)
        } else {
            Some(HealthApi::V1alpha1)
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
        DraStatus { drivers: self.instances().cloned().collect(), claims: self.claims.values().cloned().collect(), checkpoint: None }
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
                return Err(format!("fetch ResourceClaim {n}: resourceclaims.resource.k8s.io {} not found", crate::validate::go_quote(n)));
            };
            if obj.reserved_for.as_ref().is_some_and(|r| !r.iter().any(|u| u == pod_uid)) {
                return Err(format!("pod {pod_name} ({pod_uid}) is not allowed to use ResourceClaim {n} ({})", obj.uid));
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
    pub fn begin_unprepare(&mut self, namespace: &str, pod_uid: &str, pod_claims: &[PodClaim]) -> (Vec<Batch>, Vec<String>) {
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
                ..Default::default()
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
