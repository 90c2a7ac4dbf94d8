//! The claim `dpctl dra check` prepares, and the claims it must not touch.
//!
//! A driver on the `kubeletplugin` helper GETs every claim of a
//! NodePrepareResources from its API server before it prepares anything
//! (docs/dra.md §7), so a made-up claim only gets the helper's
//! `retrieve claim NS/NAME: ...`. With the driver's kubeconfig, check
//! creates a ResourceClaim of its own there (allocated to a device the
//! driver publishes in a ResourceSlice, reserved for a made-up pod, as the
//! kubelet requires of a claim it prepares) and deletes it afterwards.
//!
//! A claim the kubelet prepared for a pod is in its checkpoint,
//! `<kubelet root>/dra_manager_state`, with the pod's UID: check never
//! unprepares one of those.

use std::path::Path;

use serde_json::{Value, json};

use super::claims::ClaimRef;
use crate::apiserver::client::{Client, pct};
use crate::error::{Error, Result};

const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces";
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

/// The namespace of check's own claim (it exists in every cluster).
pub const NAMESPACE: &str = "default";

/// A device to allocate: the first one the driver publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
}

/// The claim check created, to delete afterwards.
#[derive(Debug)]
pub struct OwnClaim {
    client: Client,
    /// What the API server made of it (its UID is the server's).
    pub claim: ClaimRef,
    /// The device it is allocated.
    pub device: Published,
}

fn api_error(place: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::invalid(place, format!("{what}: {e}"))
}

/// The first device a ResourceSlice of `driver` publishes, or None.
pub async fn first_published(client: &Client, driver: &str) -> Result<Option<Published>> {
    let selector = pct(&format!("spec.driver={driver}"));
    let listed = client.request("GET", &format!("{SLICES}?fieldSelector={selector}"), None).await;
    let listed = listed.map_err(|e| api_error("--kubeconfig", "LIST ResourceSlices", e))?;
    let items = listed.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok(items.iter().find_map(|s| {
        let pool = s.pointer("/spec/pool/name").and_then(Value::as_str)?;
        let device = s.pointer("/spec/devices/0/name").and_then(Value::as_str)?;
        Some(Published { pool: pool.into(), device: device.into() })
    }))
}

/// Every ResourceSlice of `driver` (any node), as pools; the API error as text.
pub async fn pools(client: &Client, driver: &str) -> std::result::Result<super::published::Pools, String> {
    let selector = pct(&format!("spec.driver={driver}"));
    let listed = client.request("GET", &format!("{SLICES}?fieldSelector={selector}"), None).await;
    let listed = listed.map_err(|e| format!("LIST ResourceSlices from {}: {e}", client.server()))?;
    let items = listed.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok(super::published::Pools::of(&items, driver))
}

/// The ResourceClaim check creates: one request, allocated to `device` of
/// `driver`, reserved for a made-up pod.
pub fn claim_object(name: &str, driver: &str, device: &Published, pod_uid: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "dpctl-dra-check"}},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": driver}}]}},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": "dev", "driver": driver, "pool": device.pool, "device": device.device}
            ]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": pod_uid}],
        },
    })
}

impl OwnClaim {
    /// Creates check's claim in the API server of `client` for `driver`:
    /// allocated the first device it publishes. Its status goes in with the
    /// create; where the server keeps status apart (a `/status`
    /// subresource, as Kubernetes does) a PUT of the status follows.
    pub async fn create(client: Client, driver: &str) -> Result<OwnClaim> {
        let Some(device) = first_published(&client, driver).await? else {
            return Err(Error::invalid(
                "--kubeconfig",
                format!(
                    "the API server at {} holds no ResourceSlice of driver {driver}: dra check allocates its claim a \
                     device the driver publishes; is this the kubeconfig the driver uses, and has it published its slice?",
                    client.server()
                ),
            ));
        };
        let hex = format!("{:032x}", rand::random::<u128>());
        let name = format!("dpctl-check-{}", &hex[..8]);
        let obj = claim_object(&name, driver, &device, &uid_of(&hex));
        let path = format!("{CLAIMS}/{NAMESPACE}/resourceclaims");
        let made = client.request("POST", &path, Some(&obj)).await;
        let mut made = made.map_err(|e| api_error("--kubeconfig", "create the check's ResourceClaim", e))?;
        if made.pointer("/status/allocation").is_none() {
            let mut with = made.clone();
            with["status"] = obj["status"].clone();
            let put = client.request("PUT", &format!("{path}/{name}/status"), Some(&with)).await;
            made = match put {
                Ok(v) => v,
                Err(e) => {
                    let _ = client.request("DELETE", &format!("{path}/{name}"), None).await;
                    return Err(api_error("--kubeconfig", "allocate the check's ResourceClaim (PUT status)", e));
                }
            };
        }
        let uid = made.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        let claim = ClaimRef { namespace: NAMESPACE.into(), name, uid };
        Ok(OwnClaim { client, claim, device })
    }

    /// Deletes the claim (bounded by the client's request timeout).
    pub async fn delete(&self) -> Result<()> {
        let path = format!("{CLAIMS}/{NAMESPACE}/resourceclaims/{}", pct(&self.claim.name));
        let r = self.client.request("DELETE", &path, None).await;
        r.map(|_| ())
            .map_err(|e| api_error("--kubeconfig", &format!("delete the check's claim {}", self.claim.name), e))
    }
}

/// For a call the helper refused with `claim NS/NAME got replaced`: the
/// UID the API server of `kubeconfig` holds each named claim under, where
/// it differs from the one given (`ns/name: the API's UID is X, not Y`).
pub async fn api_uids(kubeconfig: &Path, claims: &[ClaimRef]) -> Result<Vec<String>> {
    let client = Client::from_kubeconfig(kubeconfig, "--kubeconfig")?;
    let mut out = Vec::new();
    for c in claims {
        let path = format!("{CLAIMS}/{}/resourceclaims/{}", pct(&c.namespace), pct(&c.name));
        match client.request("GET", &path, None).await {
            Ok(v) => {
                let uid = v.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                if uid != c.uid {
                    out.push(format!(
                        "the API server at {} holds ResourceClaim {}/{} with UID {uid}, not {}: pass --claim {}/{}/{uid}",
                        client.server(),
                        c.namespace,
                        c.name,
                        c.uid,
                        c.namespace,
                        c.name
                    ));
                }
            }
            Err(e) => out.push(format!("GET ResourceClaim {}/{} from {}: {e}", c.namespace, c.name, client.server())),
        }
    }
    Ok(out)
}

/// `NS/NAME (uid UID)` for each pod UID the API server of `kubeconfig`
/// holds; the bare UID for the others (or when the API cannot be read).
pub async fn pod_names(kubeconfig: &Path, uids: Vec<String>) -> Vec<String> {
    let Ok(client) = Client::from_kubeconfig(kubeconfig, "--kubeconfig") else { return uids };
    let Ok(listed) = client.request("GET", "/api/v1/pods", None).await else { return uids };
    let items = listed.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
    uids.into_iter()
        .map(|u| {
            let found = items.iter().find(|p| p.pointer("/metadata/uid").and_then(Value::as_str) == Some(&u));
            let text = |p: &Value, k: &str| p.pointer(k).and_then(Value::as_str).unwrap_or_default().to_string();
            match found {
                Some(p) => format!("{}/{} (uid {u})", text(p, "/metadata/namespace"), text(p, "/metadata/name")),
                None => u,
            }
        })
        .collect()
}

/// A UID in the API server's form from 32 hex digits.
pub fn uid_of(hex: &str) -> String {
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The UIDs of the pods that hold `claim` in the kubelet's checkpoint at
/// `<root>/dra_manager_state` (matched by UID, or by namespace and name):
/// empty when no pod holds it or there is no checkpoint. A checkpoint that
/// cannot be read is an error: check will not guess.
pub fn holders(root: &Path, claim: &ClaimRef) -> Result<Vec<String>> {
    let path = root.join(super::state::FILE_NAME);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(Vec::new());
    }
    let report = super::state::read(&path)?;
    Ok(report
        .claims
        .iter()
        .filter(|c| c.claim_uid == claim.uid || (c.namespace == claim.namespace && c.claim_name == claim.name))
        .flat_map(|c| c.pod_uids.iter().flat_map(|m| m.keys().cloned()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_is_allocated_and_reserved_as_the_kubelet_and_helper_need() {
        let d = Published { pool: "node-1".into(), device: "gpu-0".into() };
        let o = claim_object("dpctl-check-1", "gpu.example.com", &d, "u-1");
        assert_eq!(o["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0");
        assert_eq!(o["status"]["allocation"]["devices"]["results"][0]["request"], "dev");
        assert_eq!(o["spec"]["devices"]["requests"][0]["name"], "dev");
        assert_eq!(o["status"]["reservedFor"][0]["uid"], "u-1");
        assert_eq!(uid_of(&"a".repeat(32)).len(), 36);
    }
}
