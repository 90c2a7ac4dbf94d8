//! The mock driver with an API server (`--kubeconfig`), doing what a driver
//! on the `kubeletplugin` helper of k8s.io/dynamic-resource-allocation
//! does (docs/dra.md §7):
//! - it publishes its pool as one ResourceSlice of its node, as the
//!   helper's ResourceSlice controller does: lists the driver's slices on
//!   the node, GETs the Node for the owner reference, creates the slice with
//!   the generateName `<index>-<driver>-<node>-`, updates one whose devices
//!   differ (pool generation bumped), deletes the rest (UID and
//!   resourceVersion preconditions);
//! - before it prepares, it GETs every claim of the call and fails the
//!   whole call with the helper's texts (`get resource claims: retrieve
//!   claim NS/NAME: ...`, `claim NS/NAME not allocated`, `claim NS/NAME got
//!   replaced`), walking `resource.k8s.io` v1 → v1beta2 → v1beta1 on a 404
//!   as the helper's client does; the devices it prepares are the claim's
//!   allocation results for its driver.

use serde_json::{Value, json};

use super::MockConfig;
use crate::apiserver::client::{Client, Failure, pct};
use crate::error::Result;
use crate::proto::dra::v1 as pb;

/// The versions the helper's client walks, in its order.
const CLAIM_VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1beta1"];

/// The mock's API side: the client and its node.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    pub(crate) client: Client,
    pub(crate) node: String,
}

/// One device of a claim's allocation for this driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Allocated {
    pub(crate) request: String,
    pub(crate) pool: String,
    pub(crate) device: String,
}

/// What publishing did to one slice: `create`, `update` or `delete`, and its name.
pub type SliceWrite = (&'static str, String);

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

impl Api {
    /// Publishes the mock's pool (see the module docs); returns the writes made.
    pub(crate) async fn publish(&self, cfg: &MockConfig) -> Result<Vec<SliceWrite>> {
        let place = format!("--node-name {}", self.node);
        let node = self.client.request("GET", &format!("/api/v1/nodes/{}", pct(&self.node)), None).await;
        let server = self.client.server().to_string();
        let node = node.map_err(|e| e.error(&server, &format!("GET the Node {} ({place})", self.node)))?;
        let node_uid = node.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        let selector = pct(&format!("spec.driver={},spec.nodeName={}", cfg.driver, self.node));
        let listed = self.client.request("GET", &format!("{SLICES}?fieldSelector={selector}"), None).await;
        let listed = listed.map_err(|e| e.error(&server, "LIST ResourceSlices"))?;
        let devices: Vec<Value> = cfg.device_names().into_iter().map(|d| json!({"name": d})).collect();
        let items = listed.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
        let (mine, others): (Vec<Value>, Vec<Value>) =
            items.into_iter().partition(|s| s.pointer("/spec/pool/name").and_then(Value::as_str) == Some(&cfg.pool));
        let mut writes = Vec::new();
        let mut keep = mine.into_iter();
        let failed = |what: &str, e: Failure| e.error(&server, &format!("{what} ResourceSlice ({place})"));
        match keep.next() {
            None => {
                let slice = json!({
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {
                        "generateName": format!("{:05x}-{}-{}-", 0, cfg.driver, self.node),
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": node_uid, "controller": true}],
                    },
                    "spec": {"driver": cfg.driver, "nodeName": self.node, "devices": devices,
                             "pool": {"name": cfg.pool, "generation": 1, "resourceSliceCount": 1}},
                });
                let created =
                    self.client.request("POST", SLICES, Some(&slice)).await.map_err(|e| failed("create", e))?;
                writes.push(("create", name_of(&created)));
            }
            Some(mut s) if s.pointer("/spec/devices") != Some(&Value::Array(devices.clone())) => {
                let generation = s.pointer("/spec/pool/generation").and_then(Value::as_i64).unwrap_or(0);
                s["spec"]["devices"] = Value::Array(devices);
                s["spec"]["pool"]["generation"] = json!(generation + 1);
                s["spec"]["pool"]["resourceSliceCount"] = json!(1);
                let path = format!("{SLICES}/{}", pct(&name_of(&s)));
                let updated = self.client.request("PUT", &path, Some(&s)).await.map_err(|e| failed("update", e))?;
                writes.push(("update", name_of(&updated)));
            }
            Some(_) => {}
        }
        for s in keep.chain(others) {
            let options = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {
                "uid": s.pointer("/metadata/uid"), "resourceVersion": s.pointer("/metadata/resourceVersion")}});
            let path = format!("{SLICES}/{}", pct(&name_of(&s)));
            self.client.request("DELETE", &path, Some(&options)).await.map_err(|e| failed("delete", e))?;
            writes.push(("delete", name_of(&s)));
        }
        Ok(writes)
    }

    /// GETs a claim as the helper's client does: v1, then v1beta2 and
    /// v1beta1 on a 404; the error is the last version's.
    async fn claim(&self, ns: &str, name: &str) -> std::result::Result<Value, Failure> {
        let mut last = None;
        for v in CLAIM_VERSIONS {
            let path = format!("/apis/resource.k8s.io/{v}/namespaces/{}/resourceclaims/{}", pct(ns), pct(name));
            match self.client.request("GET", &path, None).await {
                Ok(obj) => return Ok(obj),
                Err(e) if e.code == 404 => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(Failure {
            code: 404,
            reason: "NotFound".into(),
            message: "not found".into(),
            timed_out: false,
        }))
    }

    /// The allocated devices of each claim of a Prepare call for `driver`,
    /// by UID; the helper's error for the whole call otherwise.
    pub(crate) async fn claims(
        &self,
        claims: &[pb::Claim],
        driver: &str,
    ) -> std::result::Result<std::collections::HashMap<String, Vec<Allocated>>, String> {
        let mut out = std::collections::HashMap::new();
        for c in claims {
            let (ns, name) = (&c.namespace, &c.name);
            let obj = self.claim(ns, name).await.map_err(|e| format!("retrieve claim {ns}/{name}: {e}"))?;
            let Some(allocation) = obj.pointer("/status/allocation").filter(|a| !a.is_null()) else {
                return Err(format!("claim {ns}/{name} not allocated"));
            };
            if obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(c.uid.as_str()) {
                return Err(format!("claim {ns}/{name} got replaced"));
            }
            let results = allocation.pointer("/devices/results").and_then(Value::as_array).cloned().unwrap_or_default();
            let text = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let mine = results
                .iter()
                .filter(|r| text(r, "driver") == driver)
                .map(|r| Allocated { request: text(r, "request"), pool: text(r, "pool"), device: text(r, "device") })
                .collect();
            out.insert(c.uid.clone(), mine);
        }
        Ok(out)
    }
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string()
}
