//! What the mock driver answers, on the v1 messages (v1beta1 is converted
//! in `wire`): allocation, CDI specs, and the faults.

use std::time::Instant;

use serde_json::{Value, json};

use super::{DraEventKind, Shared};
use crate::dra::cdi;
use crate::proto::dra::v1 as pb;

impl Shared {
    /// NodePrepareResources.
    pub(crate) async fn prepare(
        &self,
        rpc: &str,
        req: pb::NodePrepareResourcesRequest,
    ) -> Result<pb::NodePrepareResourcesResponse, tonic::Status> {
        let started = Instant::now();
        let request = claims_json(&req.claims);
        if let Some(d) = self.cfg.faults.prepare_delay {
            tokio::time::sleep(d).await;
        }
        if let Some(code) = self.cfg.faults.prepare_status {
            let status = tonic::Status::new(code, "injected by dpctl dra mock");
            self.record(rpc, request, None, Some(status.to_string()), started);
            return Err(status);
        }
        let allocated = match &self.api {
            None => None,
            Some(api) => match api.claims(&req.claims, &self.cfg.driver).await {
                Ok(a) => Some(a),
                Err(e) => {
                    // The helper fails the whole call; gRPC carries a Go error as Unknown.
                    let status = tonic::Status::unknown(format!("get resource claims: {e}"));
                    self.record(rpc, request, None, Some(status.to_string()), started);
                    return Err(status);
                }
            },
        };
        let mut claims = std::collections::HashMap::new();
        for (i, claim) in req.claims.iter().enumerate() {
            if i == 0 && self.cfg.faults.missing_uid {
                continue;
            }
            let from_api = allocated.as_ref().map(|a| a.get(&claim.uid).cloned().unwrap_or_default());
            claims.insert(claim.uid.clone(), self.prepare_one(claim, from_api));
        }
        let resp = pb::NodePrepareResourcesResponse { claims };
        self.record(rpc, request, Some(prepare_json(&resp)), None, started);
        Ok(resp)
    }

    /// One claim: the devices of its allocation (`from_api`, read from the
    /// API server), or devices the mock picks itself.
    fn prepare_one(
        &self,
        claim: &pb::Claim,
        from_api: Option<Vec<super::api::Allocated>>,
    ) -> pb::NodePrepareResourceResponse {
        let err = |error: String| pb::NodePrepareResourceResponse { devices: vec![], error };
        if let Some(e) = &self.cfg.faults.prepare_error {
            return err(e.clone());
        }
        if self.cfg.faults.no_device {
            return err(String::new());
        }
        let allocated = match from_api {
            Some(a) => a,
            None => match self.allocate(&claim.uid) {
                Ok(d) => d
                    .into_iter()
                    .map(|device| super::api::Allocated { request: String::new(), pool: self.cfg.pool.clone(), device })
                    .collect(),
                Err(e) => return err(e),
            },
        };
        // The same-device fault: the first device of the pool, whatever was allocated.
        let allocated: Vec<super::api::Allocated> = if self.cfg.faults.same_device {
            let first = self.cfg.device_names().into_iter().next().unwrap_or_default();
            allocated
                .into_iter()
                .map(|a| super::api::Allocated { pool: self.cfg.pool.clone(), device: first.clone(), ..a })
                .collect()
        } else if self.cfg.faults.unpublished_device {
            let past = format!("dev-{}", self.cfg.devices);
            allocated.into_iter().map(|a| super::api::Allocated { device: past.clone(), ..a }).collect()
        } else {
            allocated
        };
        let kind = cdi::mock_kind(&self.cfg.driver);
        let names: Vec<String> = allocated.iter().map(|a| format!("{}-{}", a.pool, a.device)).collect();
        if !self.cfg.faults.unresolvable_cdi && !self.cfg.faults.bad_cdi_id {
            let path = match cdi::spec_path(&self.cfg.cdi_dir, &self.cfg.driver, &claim.uid) {
                Ok(p) => p,
                Err(e) => return err(e),
            };
            let entries: Vec<(String, Option<String>)> =
                names.iter().zip(&allocated).map(|(n, a)| (n.clone(), self.cfg.device_node_of(&a.device))).collect();
            if let Err(e) = cdi::write_spec_nodes(&path, &kind, &entries) {
                return err(format!("writing CDI spec: {e}"));
            }
        }
        let devices = allocated
            .iter()
            .zip(&names)
            .map(|(a, n)| pb::Device {
                // As the kubeletplugin helper answers: the allocation's request with
                // any subrequest stripped (`gpu/large` -> `gpu`, docs/dra.md §10).
                request_names: if self.cfg.request_names.is_empty() && !a.request.is_empty() {
                    vec![a.request.split('/').next().unwrap_or_default().to_string()]
                } else {
                    self.cfg.request_names.clone()
                },
                pool_name: a.pool.clone(),
                device_name: a.device.clone(),
                cdi_device_ids: vec![if self.cfg.faults.bad_cdi_id { n.clone() } else { format!("{kind}={n}") }],
                share_id: None,
            })
            .collect();
        pb::NodePrepareResourceResponse { devices, error: String::new() }
    }

    /// The claim's devices: the same ones again for a claim already
    /// prepared (unless the not-idempotent fault is on), else free ones.
    fn allocate(&self, uid: &str) -> Result<Vec<String>, String> {
        let Ok(mut st) = self.state.lock() else { return Err("internal: state lock poisoned".into()) };
        if let Some(held) = st.claims.get(uid).cloned() {
            if !self.cfg.faults.not_idempotent {
                return Ok(held);
            }
            st.free.extend(held);
        }
        let n = self.cfg.devices_per_claim;
        // Not idempotent: take the devices after the ones held before, so the answer differs.
        let previous = st.claims.remove(uid).unwrap_or_default();
        let mut picked: Vec<String> = st.free.iter().filter(|d| !previous.contains(d)).take(n).cloned().collect();
        if picked.len() < n {
            picked = st.free.iter().take(n).cloned().collect();
        }
        if picked.len() < n {
            return Err(format!(
                "no free devices: {} of {} are held by other claims",
                self.cfg.devices - st.free.len(),
                self.cfg.devices
            ));
        }
        for d in &picked {
            st.free.remove(d);
        }
        st.claims.insert(uid.to_string(), picked.clone());
        Ok(picked)
    }

    /// NodeUnprepareResources: frees the claim's devices and removes its
    /// spec; a claim it does not know is answered with success (idempotent).
    pub(crate) fn unprepare(
        &self,
        rpc: &str,
        req: pb::NodeUnprepareResourcesRequest,
    ) -> pb::NodeUnprepareResourcesResponse {
        let started = Instant::now();
        let mut claims = std::collections::HashMap::new();
        for claim in &req.claims {
            let error = match &self.cfg.faults.unprepare_error {
                Some(e) => e.clone(),
                None => {
                    if let Ok(mut st) = self.state.lock()
                        && let Some(held) = st.claims.remove(&claim.uid)
                    {
                        st.free.extend(held);
                    }
                    // A UID that names no spec file had none written.
                    if let Ok(path) = cdi::spec_path(&self.cfg.cdi_dir, &self.cfg.driver, &claim.uid) {
                        cdi::remove_spec(&path);
                    }
                    String::new()
                }
            };
            claims.insert(claim.uid.clone(), pb::NodeUnprepareResourceResponse { error });
        }
        let resp = pb::NodeUnprepareResourcesResponse { claims };
        let answer = json!(
            resp.claims.iter().map(|(k, v)| (k.clone(), json!({"error": v.error}))).collect::<serde_json::Map<_, _>>()
        );
        self.record(rpc, claims_json(&req.claims), Some(json!({"claims": answer})), None, started);
        resp
    }

    pub(crate) fn record(
        &self,
        rpc: &str,
        request: Value,
        response: Option<Value>,
        error: Option<String>,
        started: Instant,
    ) {
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.emit(DraEventKind::Rpc { rpc: rpc.to_string(), request, response, error, duration_ms });
    }
}

/// Claims as JSON.
pub(crate) fn claims_json(claims: &[pb::Claim]) -> Value {
    json!({"claims": claims.iter().map(|c| json!({"namespace": c.namespace, "name": c.name, "uid": c.uid})).collect::<Vec<_>>()})
}

/// A Prepare answer as JSON (claims sorted by UID).
pub(crate) fn prepare_json(resp: &pb::NodePrepareResourcesResponse) -> Value {
    let sorted: std::collections::BTreeMap<_, _> = resp.claims.iter().collect();
    let claims: serde_json::Map<String, Value> = sorted
        .into_iter()
        .map(|(uid, r)| {
            let devices: Vec<Value> = r
                .devices
                .iter()
                .map(|d| json!({"request_names": d.request_names, "pool_name": d.pool_name, "device_name": d.device_name, "cdi_device_ids": d.cdi_device_ids, "share_id": d.share_id}))
                .collect();
            (uid.clone(), json!({"devices": devices, "error": r.error}))
        })
        .collect();
    json!({"claims": claims})
}
