//! The DRA part of a pod as kubelet-sim admits it (docs/dra.md §6): the
//! pod's `spec.resourceClaims`, each container's `resources.claims`, and the
//! ResourceClaim objects they name, with the allocation result the scheduler
//! would have written (`status.allocation.devices.results`) and
//! `status.reservedFor`. The objects are read in the API's own shape
//! (`resource.k8s.io/v1` ResourceClaim) from further documents of the pod's
//! manifest, so that an API server can serve the same files later.
//! A leaf module: it uses nothing else of kubelet_sim.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// Most claims one pod may name (the API server allows 128 per pod).
pub const MAX_POD_CLAIMS: usize = 128;
/// Most allocation results one claim may carry (the API's limit is 32 per request; a bound against absurd input).
pub const MAX_RESULTS: usize = 1024;

/// One entry of `spec.resourceClaims`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodClaim {
    /// The name containers use in `resources.claims`.
    pub name: String,
    /// `resourceClaimName`: the ResourceClaim in the pod's namespace (for a
    /// template, the name `status.resourceClaimStatuses` gives the claim made from it).
    pub resource_claim_name: String,
    /// Made from `resourceClaimTemplateName`: the claim must be controlled by
    /// the pod (`resourceclaim.IsForPod` in k8s.io/dynamic-resource-allocation).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_template: bool,
}

/// One entry of a container's `resources.claims`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerClaim {
    /// A `spec.resourceClaims` name.
    pub name: String,
    /// The request of that claim (empty: all of them).
    #[serde(default)]
    pub request: String,
}

/// One allocated device (`status.allocation.devices.results[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationResult {
    /// The request it satisfies.
    pub request: String,
    /// The DRA driver (the name it registers under).
    pub driver: String,
    /// The pool of the device.
    pub pool: String,
    /// The device.
    pub device: String,
}

/// A ResourceClaim as the kubelet reads it from the API server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimObject {
    /// `metadata.namespace` (the pod's when not given).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `status.allocation` is set.
    pub allocated: bool,
    /// `status.allocation.devices.results`.
    #[serde(default)]
    pub results: Vec<AllocationResult>,
    /// The pod UIDs in `status.reservedFor`; `None` when the document has no
    /// `reservedFor` (the sim then reserves the claim for the pod that names
    /// it, as the scheduler would have).
    #[serde(default)]
    pub reserved_for: Option<Vec<String>>,
    /// The UID of its controlling owner (`metadata.ownerReferences[controller: true]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_uid: Option<String>,
    /// The document as given, served to drivers by the sim's embedded API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
}

/// One entry of `status.extendedResourceClaimStatus.requestMappings`: the
/// request of the special claim that serves a container's extended resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMapping {
    /// `containerName`.
    pub container_name: String,
    /// `resourceName`, e.g. `example.com/gpu`.
    pub resource_name: String,
    /// `requestName`: the claim's request that holds its devices.
    pub request_name: String,
}

/// `status.extendedResourceClaimStatus` (KEP-5004): the claim the scheduler
/// made for a pod's extended resources that a DRA driver serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtendedClaim {
    /// `resourceClaimName`.
    pub resource_claim_name: String,
    /// `requestMappings`.
    #[serde(default)]
    pub request_mappings: Vec<RequestMapping>,
}

/// Reads `status.extendedResourceClaimStatus` of a Pod document.
pub fn extended_claim(status: Option<&Value>, place: &str) -> Result<Option<ExtendedClaim>> {
    let Some(v) = status.and_then(|s| s.get("extendedResourceClaimStatus")).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = "status.extendedResourceClaimStatus";
    let bad = |key: String, msg: String| Error::invalid(format!("{place}: {at}{key}"), msg);
    let name = text(v, "resourceClaimName").ok_or_else(|| bad(".resourceClaimName".into(), "missing".into()))?;
    if !crate::validate::is_dns1123_subdomain(name) {
        return Err(bad(".resourceClaimName".into(), format!("{} is not a DNS subdomain", shown(name))));
    }
    let list = v.get("requestMappings").and_then(Value::as_array).cloned().unwrap_or_default();
    if list.len() > MAX_RESULTS {
        return Err(bad(".requestMappings".into(), format!("{} entries; at most {MAX_RESULTS}", list.len())));
    }
    let mut request_mappings = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let field = |k: &str| {
            text(m, k)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .ok_or_else(|| bad(format!(".requestMappings[{i}].{k}"), "missing".into()))
        };
        request_mappings.push(RequestMapping {
            container_name: field("containerName")?,
            resource_name: field("resourceName")?,
            request_name: field("requestName")?,
        });
    }
    Ok(Some(ExtendedClaim { resource_claim_name: name.to_string(), request_mappings }))
}

/// `s` quoted, cut to 64 characters (a 100,000-character name is not echoed whole).
fn shown(s: &str) -> String {
    if s.chars().count() > 64 { format!("{:?}...", s.chars().take(64).collect::<String>()) } else { format!("{s:?}") }
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The claim name `status.resourceClaimStatuses` gives the template entry
/// `name`, as `resourceclaim.Name` finds it (k8s.io/dynamic-resource-allocation).
fn generated_name(status: Option<&Value>, name: &str, namespace_name: &str, place: &str) -> Result<String> {
    let list = status.and_then(|s| s.get("resourceClaimStatuses")).and_then(Value::as_array);
    let entry = list.into_iter().flatten().find(|e| text(e, "name") == Some(name));
    match entry.map(|e| text(e, "resourceClaimName")) {
        Some(Some(n)) => Ok(n.to_string()),
        Some(None) => Err(Error::invalid(
            format!("{place}: status.resourceClaimStatuses[{name}]"),
            "no resourceClaimName: the kubelet skips such a claim (none was made); kubelet-sim does not play it, \
             remove the entry and the containers' use of it",
        )),
        None => Err(Error::invalid(
            format!("{place}: spec.resourceClaims[{name}].resourceClaimTemplateName"),
            format!(
                "pod \"{namespace_name}\": ResourceClaim not created yet (the kubelet's words); hint: give the \
                 generated claim's name in status.resourceClaimStatuses[{{name: {name}, resourceClaimName: ...}}]"
            ),
        )),
    }
}

/// Reads `spec.resourceClaims` of a Pod document (`place` names the file);
/// template entries are named by `status.resourceClaimStatuses`.
pub fn pod_claims(spec: &Value, status: Option<&Value>, namespace_name: &str, place: &str) -> Result<Vec<PodClaim>> {
    let bad = |key: String, msg: String| Error::invalid(format!("{place}: {key}"), msg);
    let Some(list) = spec.get("resourceClaims").filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let list = list.as_array().ok_or_else(|| bad("spec.resourceClaims".into(), "must be a list".into()))?;
    if list.len() > MAX_POD_CLAIMS {
        return Err(bad("spec.resourceClaims".into(), format!("{} claims; at most {MAX_POD_CLAIMS}", list.len())));
    }
    let mut out: Vec<PodClaim> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("spec.resourceClaims[{i}]");
        let name = text(c, "name").ok_or_else(|| bad(format!("{at}.name"), "missing".into()))?;
        if !crate::validate::is_dns1123_subdomain(name) || name.contains('.') {
            return Err(bad(format!("{at}.name"), format!("{} is not a DNS label", shown(name))));
        }
        if out.iter().any(|p| p.name == name) {
            return Err(bad(format!("{at}.name"), format!("{} is used twice", shown(name))));
        }
        let (claim, from_template) = match (text(c, "resourceClaimName"), text(c, "resourceClaimTemplateName")) {
            (Some(n), None) => (n.to_string(), false),
            (None, Some(_)) => (generated_name(status, name, namespace_name, place)?, true),
            _ => {
                return Err(bad(at, "needs exactly one of resourceClaimName and resourceClaimTemplateName".into()));
            }
        };
        if !crate::validate::is_dns1123_subdomain(&claim) {
            return Err(bad(format!("{at}.resourceClaimName"), format!("{} is not a DNS subdomain", shown(&claim))));
        }
        out.push(PodClaim { name: name.to_string(), resource_claim_name: claim, from_template });
    }
    Ok(out)
}

/// Reads a container's `resources.claims` (`at` is its place in the spec).
pub fn container_claims(c: &Value, at: &str, place: &str) -> Result<Vec<ContainerClaim>> {
    let key = format!("{place}: {at}.resources.claims");
    let Some(list) = c.get("resources").and_then(|r| r.get("claims")).filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let list = list.as_array().ok_or_else(|| Error::invalid(&key, "must be a list"))?;
    let mut out = Vec::new();
    for (i, x) in list.iter().enumerate() {
        let name = text(x, "name").ok_or_else(|| Error::invalid(format!("{key}[{i}].name"), "missing"))?;
        let request = text(x, "request").unwrap_or_default();
        out.push(ContainerClaim { name: name.to_string(), request: request.to_string() });
    }
    Ok(out)
}

/// Reads a ResourceClaim document (`resource.k8s.io/v1`; `v1beta1`/`v1beta2`
/// spell the allocation the same way). `namespace` is the pod's.
pub fn claim_object(v: &Value, namespace: &str, place: &str) -> Result<ClaimObject> {
    let bad = |key: &str, msg: String| Error::invalid(format!("{place}: ResourceClaim {key}"), msg);
    let meta = v.get("metadata").ok_or_else(|| bad("metadata", "missing".into()))?;
    let name = text(meta, "name").ok_or_else(|| bad("metadata.name", "missing".into()))?;
    let ns = text(meta, "namespace").unwrap_or(namespace);
    let uid = text(meta, "uid")
        .ok_or_else(|| bad(&format!("{name}: metadata.uid"), "missing (the driver's answer is keyed by it)".into()))?;
    let cref = crate::dra::claims::ClaimRef { namespace: ns.into(), name: name.into(), uid: uid.into() };
    cref.check(&format!("{place}: ResourceClaim {name}"))?;
    let status = v.get("status");
    let allocation = status.and_then(|s| s.get("allocation")).filter(|a| !a.is_null());
    let mut results = Vec::new();
    if let Some(list) = allocation.and_then(|a| a.get("devices")).and_then(|d| d.get("results")) {
        let list = list
            .as_array()
            .ok_or_else(|| bad(&format!("{name}: status.allocation.devices.results"), "must be a list".into()))?;
        if list.len() > MAX_RESULTS {
            return Err(bad(
                &format!("{name}: status.allocation.devices.results"),
                format!("{} results; at most {MAX_RESULTS}", list.len()),
            ));
        }
        for (i, r) in list.iter().enumerate() {
            let field = |k: &str| {
                text(r, k).filter(|s| !s.is_empty()).map(String::from).ok_or_else(|| {
                    bad(&format!("{name}: status.allocation.devices.results[{i}].{k}"), "missing".into())
                })
            };
            let driver = field("driver")?;
            if !crate::validate::is_dns1123_subdomain(&driver) {
                return Err(bad(
                    &format!("{name}: results[{i}].driver"),
                    format!("{} is not a DNS subdomain", shown(&driver)),
                ));
            }
            results.push(AllocationResult {
                request: field("request")?,
                driver,
                pool: field("pool")?,
                device: field("device")?,
            });
        }
    }
    let reserved_for = match status.and_then(|s| s.get("reservedFor")).filter(|r| !r.is_null()) {
        None => None,
        Some(list) => {
            let list =
                list.as_array().ok_or_else(|| bad(&format!("{name}: status.reservedFor"), "must be a list".into()))?;
            Some(list.iter().filter_map(|r| text(r, "uid").map(String::from)).collect())
        }
    };
    let controller_uid = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|o| text(o, "uid"))
        .map(String::from);
    Ok(ClaimObject {
        namespace: ns.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        allocated: allocation.is_some(),
        results,
        reserved_for,
        controller_uid,
        object: Some(v.clone()),
    })
}

/// Checks that every container claim names a pod claim.
pub fn check_container_claims(
    pod_claims: &[PodClaim],
    container: &str,
    claims: &[ContainerClaim],
    place: &str,
) -> Result<()> {
    for c in claims {
        if !pod_claims.iter().any(|p| p.name == c.name) {
            return Err(Error::invalid(
                format!("{place}: container {container}: resources.claims"),
                format!(
                    "{} is not one of spec.resourceClaims ({})",
                    shown(&c.name),
                    pod_claims.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_document_reads_its_allocation_and_reservations() {
        let v: Value = serde_norway::from_str(
            "metadata: {name: gpu, uid: u-1}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {request: r, driver: gpu.example.com, pool: p, device: d0}\n  reservedFor:\n  - {resource: pods, name: x, uid: pod-1}\n",
        )
        .unwrap();
        let c = claim_object(&v, "ns", "f").unwrap();
        assert_eq!((c.namespace.as_str(), c.allocated, c.results.len()), ("ns", true, 1));
        assert_eq!(c.reserved_for, Some(vec!["pod-1".to_string()]));
        let v: Value = serde_norway::from_str("metadata: {name: gpu}\n").unwrap();
        assert!(claim_object(&v, "ns", "f").unwrap_err().to_string().contains("metadata.uid"));
    }
}
