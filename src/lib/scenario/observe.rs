//! What a user or a plugin can observe of a kubelet, as plain JSON ready to
//! compare: capacity and allocatable, the checkpoint, PodResources, and
//! what each mock plugin saw (registrations and calls). Everything here is
//! normalised: lists sorted where their order carries no meaning (the
//! kubelet builds many from Go maps), timings dropped, paths and pod UIDs
//! replaced by stable names.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::kubelet_sim::SimStatus;
use crate::mock_plugin::{EventKind as MockKind, MockEvent};
use crate::model::ContainerAllocation;
use crate::podresources::client::{PodResourcesClient, PodResourcesConfig};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::podresources::v1;

/// How long the checkpoint may lag behind the status (kubelet-sim writes it
/// shortly after an admission; `kubelet-sim --help` states it).
const CHECKPOINT_SETTLE: Duration = Duration::from_secs(1);

/// Stable names for things that differ from run to run.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// `(text, replacement)`, longest first.
    pub pairs: Vec<(String, String)>,
}

impl Names {
    /// Adds a replacement (kept longest first, so a path wins over its prefix).
    pub fn add(&mut self, from: impl Into<String>, to: impl Into<String>) {
        let from = from.into();
        if from.is_empty() || self.pairs.iter().any(|(f, _)| *f == from) {
            return;
        }
        self.pairs.push((from, to.into()));
        self.pairs.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    }

    /// `s` with every known text replaced.
    pub fn apply(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (from, to) in &self.pairs {
            if out.contains(from.as_str()) {
                out = out.replace(from.as_str(), to);
            }
        }
        out
    }

    /// Applies [`Names::apply`] to every string (and key) in `v`.
    pub fn value(&self, v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.apply(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|x| self.value(x)).collect()),
            Value::Object(o) => Value::Object(o.into_iter().map(|(k, x)| (self.apply(&k), self.value(x))).collect()),
            other => other,
        }
    }
}

/// Sorts every array of plain strings or numbers in `v` (device ID lists:
/// the kubelet builds them from sets, so their order means nothing).
pub fn sort_scalar_lists(v: &mut Value) {
    match v {
        Value::Array(a) => {
            for x in a.iter_mut() {
                sort_scalar_lists(x);
            }
            if a.iter().all(Value::is_string) {
                a.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
            } else if a.iter().all(Value::is_number) {
                a.sort_by(|x, y| x.as_f64().partial_cmp(&y.as_f64()).unwrap_or(std::cmp::Ordering::Equal));
            }
        }
        Value::Object(o) => o.values_mut().for_each(sort_scalar_lists),
        _ => {}
    }
}

/// Capacity and allocatable of each resource in node status.
pub fn resources(status: &SimStatus) -> Value {
    let mut m = Map::new();
    for r in status.resources.iter().filter(|r| r.reported) {
        m.insert(r.resource.clone(), json!({"capacity": r.capacity, "allocatable": r.allocatable}));
    }
    Value::Object(m)
}

/// What one plugin saw in `events`: registrations and the calls it
/// received, with their arguments. ListAndWatch messages are counted as
/// streams opened (the message flow is what capacity shows), and register
/// retries while no kubelet serves are left out (their number is timing).
pub fn plugin_events(events: &[MockEvent]) -> Value {
    let mut registrations = Vec::new();
    let mut calls = Vec::new();
    let mut streams = 0u64;
    for e in events {
        match &e.kind {
            MockKind::Registered { request, .. } => registrations.push(json!({
                "resource": e.resource,
                "outcome": "registered",
                "request": request_view(request),
            })),
            MockKind::Rejected { request, message, .. } => registrations.push(json!({
                "resource": e.resource,
                "outcome": "rejected",
                "request": request_view(request),
                "message": message,
            })),
            MockKind::RegistrationStatus { plugin_registered, error } => registrations.push(json!({
                "resource": e.resource,
                "outcome": if *plugin_registered { "registered" } else { "rejected" },
                "via": "plugins_registry",
                "message": error,
            })),
            MockKind::Rpc(r) if r.rpc == "ListAndWatch" && r.seq == Some(1) => streams += 1,
            MockKind::Rpc(r) if r.rpc == "ListAndWatch" => {}
            MockKind::Rpc(r) => {
                let mut request = r.request.clone();
                sort_scalar_lists(&mut request);
                let mut call = json!({"resource": e.resource, "rpc": r.rpc, "request": request});
                if let Some(err) = &r.error {
                    call["error"] = json!(err.code);
                }
                calls.push(call);
            }
            _ => {}
        }
    }
    // Resources of one plugin register and are called independently: their
    // interleaving is timing, the order within a resource is not.
    let by_resource = |v: &Value| v["resource"].as_str().unwrap_or_default().to_string();
    registrations.sort_by_key(by_resource);
    calls.sort_by_key(by_resource);
    json!({"registrations": registrations, "calls": calls, "list_and_watch_streams": streams})
}

fn request_view(r: &crate::mock_plugin::RegisterView) -> Value {
    json!({
        "version": r.version,
        "endpoint": r.endpoint,
        "resource_name": r.resource_name,
        "pre_start_required": r.pre_start_required,
        "get_preferred_allocation_available": r.get_preferred_allocation_available,
    })
}

/// The checkpoint as a user reads it (`dpctl checkpoint show`): entries with
/// devices per NUMA node, registered devices, the checksum and whether it
/// verifies. Waits (bounded) until it holds what `expect` (pod UID,
/// container, resource, devices from the status) says, since kubelet-sim
/// writes it shortly after the admission.
pub async fn checkpoint(path: &Path, expect: &BTreeMap<(String, String, String), Vec<String>>) -> Value {
    let deadline = crate::duration::deadline(CHECKPOINT_SETTLE);
    let mut last = read_checkpoint(path).0;
    loop {
        // kubelet-sim writes the file in the background after a change: the
        // file is taken once it holds the status' pods and stayed the same
        // for a moment (bounded by CHECKPOINT_SETTLE; there is no change
        // notification to wait on).
        tokio::time::sleep(CHECKPOINT_STABLE).await;
        let (value, entries) = read_checkpoint(path);
        let settled = value == last && entries == *expect;
        if settled || tokio::time::Instant::now() >= deadline {
            return value;
        }
        last = value;
    }
}

/// How long the checkpoint must stay unchanged to count as written
/// (kubelet-sim batches its writes over 100 ms).
const CHECKPOINT_STABLE: Duration = Duration::from_millis(150);

type Entries = BTreeMap<(String, String, String), Vec<String>>;

fn read_checkpoint(path: &Path) -> (Value, Entries) {
    let mut entries = Entries::new();
    let cp = match crate::checkpoint::Checkpoint::read(path, crate::checkpoint::LegacyFormat::Refuse) {
        Ok(Some(cp)) => cp,
        Ok(None) => return (json!("absent"), entries),
        Err(e) => return (json!({"error": e.to_string()}), entries),
    };
    let mut list = Vec::new();
    for e in cp.data.pod_device_entries.iter().flatten() {
        let mut ids = e.device_ids.ids();
        ids.sort();
        entries.insert((e.pod_uid.clone(), e.container_name.clone(), e.resource_name.clone()), ids);
        // The cached Allocate answer is what reaches the runtime at each container start.
        let allocation = match e.alloc_resp.as_deref().map(<dp::ContainerAllocateResponse as prost::Message>::decode) {
            None => Value::Null,
            Some(Ok(r)) => {
                let mut a = ContainerAllocation::from_response(e.device_ids.ids(), &r);
                // Values listing devices (`{ids}`) follow the order of Allocate's
                // request, which the kubelet takes from a set.
                for v in a.envs.values_mut().chain(a.annotations.values_mut()) {
                    if v.contains(',') {
                        let mut parts: Vec<&str> = v.split(',').collect();
                        parts.sort_unstable();
                        *v = parts.join(",");
                    }
                }
                serde_json::to_value(a).unwrap_or(Value::Null)
            }
            Some(Err(err)) => json!({"error": err.to_string()}),
        };
        list.push(json!({
            "pod_uid": e.pod_uid,
            "container": e.container_name,
            "resource": e.resource_name,
            "devices_per_numa": e.device_ids.per_numa(),
            "allocation": allocation,
        }));
    }
    let mut list_v = Value::Array(list);
    sort_scalar_lists(&mut list_v);
    if let Value::Array(a) = &mut list_v {
        a.sort_by_key(|x| x.to_string());
    }
    let registered: BTreeMap<String, Vec<String>> = cp
        .data
        .registered_devices
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            let mut ids = v.unwrap_or_default();
            ids.sort();
            (k, ids)
        })
        .collect();
    let v = cp.verify();
    // The checksum's value is left out: it covers the cached Allocate answers'
    // protobuf bytes, whose map fields Go encodes in no fixed order.
    (
        json!({
            "entries": list_v,
            "registered_devices": registered,
            "checksum_ok": v.ok(),
        }),
        entries,
    )
}

/// What the status says the checkpoint should hold: (pod UID, container, resource) → devices.
pub fn expected_entries(status: &SimStatus) -> Entries {
    let mut out = Entries::new();
    for p in &status.pods {
        for c in &p.containers {
            for (r, ids) in &c.devices {
                let mut ids = ids.clone();
                ids.sort();
                out.insert((p.uid.clone(), c.name.clone(), r.clone()), ids);
            }
        }
    }
    out
}

/// PodResources v1 as a client sees it: List, Get of each pod in `pods`
/// (namespace, name) and GetAllocatableResources; an error is recorded as
/// its text. A real kubelet names a static pod `NAME<suffix>`: Get asks for
/// that name, and the pods are shown under the names the scenario gave.
pub async fn podresources(socket: &Path, pods: &[(String, String)], suffix: &str) -> Value {
    let config = PodResourcesConfig {
        api: crate::podresources::client::ApiChoice::V1,
        rate_limit_retries: 5,
        ..PodResourcesConfig::default()
    };
    let client = match PodResourcesClient::connect(socket, &config).await {
        Ok(c) => c,
        Err(e) => return json!({"error": e.to_string()}),
    };
    let list = match client.list().await {
        Ok(l) => {
            let mut pods: Vec<Value> = l.pods.iter().map(|p| pod_value(p, suffix)).collect();
            pods.sort_by_key(|p| format!("{}/{}", p["namespace"], p["name"]));
            Value::Array(pods)
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    let mut get = Map::new();
    for (ns, name) in pods {
        let v = match client.get(&format!("{name}{suffix}"), ns).await {
            Ok(p) => pod_value(&p, suffix),
            Err(e) => json!({"error": e.to_string().replace(&format!("{name}{suffix}"), name)}),
        };
        get.insert(format!("{ns}/{name}"), v);
    }
    let allocatable = match client.allocatable().await {
        Ok(a) => {
            let mut cpus = a.cpu_ids.clone();
            cpus.sort_unstable();
            json!({"devices": devices_value(&a.devices), "cpu_ids": cpus})
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    json!({"list": list, "get": get, "allocatable": allocatable})
}

fn pod_value(p: &v1::PodResources, suffix: &str) -> Value {
    let mut containers: Vec<Value> = p
        .containers
        .iter()
        .map(|c| {
            let mut cpus = c.cpu_ids.clone();
            cpus.sort_unstable();
            let mut v = json!({"name": c.name, "devices": devices_value(&c.devices), "cpu_ids": cpus});
            if !c.dynamic_resources.is_empty() {
                v["dynamic_resources"] = dynamic_value(&c.dynamic_resources);
            }
            v
        })
        .collect();
    // The kubelet lists containers in spec order: kept.
    containers.iter_mut().for_each(sort_scalar_lists);
    let name = if suffix.is_empty() { &p.name } else { p.name.strip_suffix(suffix).unwrap_or(&p.name) };
    json!({"name": name, "namespace": p.namespace, "containers": containers})
}

/// A container's DRA claims as PodResources lists them (claims and their
/// devices in the kubelet's order; each device's CDI IDs as sent).
fn dynamic_value(claims: &[v1::DynamicResource]) -> Value {
    claims
        .iter()
        .map(|d| {
            let resources: Vec<Value> = d
                .claim_resources
                .iter()
                .map(|r| {
                    json!({
                        "driver": r.driver_name,
                        "pool": r.pool_name,
                        "device": r.device_name,
                        "share_id": r.share_id,
                        "cdi_devices": r.cdi_devices.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({"claim": format!("{}/{}", d.claim_namespace, d.claim_name), "resources": resources})
        })
        .collect()
}

/// Devices per resource: IDs sorted, with the NUMA nodes each set reports.
fn devices_value(devices: &[v1::ContainerDevices]) -> Value {
    let mut out: Vec<Value> = devices
        .iter()
        .map(|d| {
            let mut ids = d.device_ids.clone();
            ids.sort();
            let mut numa: Vec<i64> = d.topology.iter().flat_map(|t| t.nodes.iter().map(|n| n.id)).collect();
            numa.sort_unstable();
            numa.dedup();
            json!({"resource": d.resource_name, "ids": ids, "numa": numa})
        })
        .collect();
    out.sort_by_key(|x| x.to_string());
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_replace_longest_first_and_reach_keys() {
        let mut n = Names::default();
        n.add("/tmp/x", "{root}");
        n.add("/tmp/x/device-plugins", "{dp}");
        let v = n.value(json!({"/tmp/x/device-plugins/a.sock": ["/tmp/x/y"]}));
        assert_eq!(v, json!({"{dp}/a.sock": ["{root}/y"]}));
    }

    #[test]
    fn scalar_lists_sort_and_mixed_ones_keep_order() {
        let mut v = json!({"ids": ["b", "a"], "n": [3, 1], "objs": [{"x": 2}, {"x": 1}]});
        sort_scalar_lists(&mut v);
        assert_eq!(v, json!({"ids": ["a", "b"], "n": [1, 3], "objs": [{"x": 2}, {"x": 1}]}));
    }
}
