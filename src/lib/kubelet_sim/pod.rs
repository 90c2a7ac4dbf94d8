//! Pods as the simulated kubelet admits them: the spec (containers, their
//! kinds and extended-resource limits, CPU and memory), read from a manifest
//! (YAML or JSON) or a shorthand, with the quantity parsers it needs. A leaf
//! module: the rest of kubelet_sim uses it, it uses none of them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::dra_claims::{ClaimObject, ContainerClaim, ExtendedClaim, PodClaim};
use crate::error::{Error, Result};
use crate::quantity::QuantityError;
use crate::topology::Compute;
use crate::validate::is_extended_resource_name;

/// What kind of container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerKind {
    /// A plain init container: runs to completion before the others; its
    /// devices can be reused by the containers after it.
    Init,
    /// A restartable init container (`restartPolicy: Always`): keeps its devices.
    Sidecar,
    /// A regular container.
    Regular,
}

/// One container and the extended resources in its limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// Container name.
    pub name: String,
    /// Init, sidecar or regular.
    pub kind: ContainerKind,
    /// Extended resources in `resources.limits` (whole numbers).
    #[serde(default)]
    pub limits: BTreeMap<String, u64>,
    /// CPU and memory requests and limits (QoS class, exclusive CPUs).
    #[serde(default, skip_serializing_if = "Compute::is_empty")]
    pub compute: Compute,
    /// `resources.claims`: the pod's DRA claims (and requests) it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ContainerClaim>,
}

/// A pod as the simulated kubelet admits it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSpec {
    /// Pod name.
    pub name: String,
    /// Namespace.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// UID; generated when not given.
    #[serde(default)]
    pub uid: Option<String>,
    /// Init containers (plain and sidecars) in spec order, then regular containers.
    pub containers: Vec<ContainerSpec>,
    /// `spec.resourceClaims` (DRA).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<PodClaim>,
    /// The ResourceClaim objects given with the pod (further documents of its manifest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_objects: Vec<ClaimObject>,
    /// `status.extendedResourceClaimStatus` (KEP-5004: extended resources served by DRA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_claim: Option<ExtendedClaim>,
}

fn default_namespace() -> String {
    "default".into()
}

impl PodSpec {
    /// A pod with one container `c0` asking for `limits`.
    pub fn shorthand(name: &str, namespace: &str, limits: &[(String, u64)]) -> PodSpec {
        PodSpec {
            name: name.into(),
            namespace: namespace.into(),
            uid: None,
            containers: vec![ContainerSpec {
                name: "c0".into(),
                kind: ContainerKind::Regular,
                limits: limits.iter().cloned().collect(),
                compute: Compute::default(),
                claims: Vec::new(),
            }],
            resource_claims: Vec::new(),
            claim_objects: Vec::new(),
            extended_claim: None,
        }
    }

    /// Parses `example.com/gpu=2` (as given to `--allocate`).
    pub fn parse_allocate(s: &str) -> Result<(String, u64)> {
        let place = format!("--allocate {s}");
        let (name, count) = s
            .split_once('=')
            .ok_or_else(|| Error::invalid(&place, "expected RESOURCE=COUNT, e.g. example.com/gpu=2"))?;
        let name = name.trim();
        if let Some(why) = crate::validate::explain_resource_name(name) {
            return Err(Error::invalid(&place, why));
        }
        let count = count
            .trim()
            .parse::<u64>()
            .map_err(|_| Error::invalid(&place, format!("{count:?} is not a whole number of devices")))?;
        Ok((name.to_string(), count))
    }

    /// Parses a Pod manifest (YAML or JSON). `place` names the file in errors.
    /// Besides the Pod, the manifest may hold the ResourceClaims its
    /// `spec.resourceClaims` name: further YAML documents (`---`), or the
    /// items of a JSON or YAML `kind: List` (docs/dra.md §6).
    pub fn from_manifest(text: &str, place: &str) -> Result<PodSpec> {
        crate::input::check_depth(text, place, crate::input::MAX_MANIFEST_DEPTH)?;
        let docs: Vec<Value> = if text.trim_start().starts_with('{') {
            vec![serde_json::from_str(text).map_err(|e| Error::invalid(place, format!("not valid JSON: {e}")))?]
        } else {
            let mut docs = Vec::new();
            for d in serde_norway::Deserializer::from_str(text) {
                let v = Value::deserialize(d).map_err(|e| Error::invalid(place, format!("not valid YAML: {e}")))?;
                if !v.is_null() {
                    docs.push(v);
                }
            }
            docs
        };
        let docs: Vec<Value> = docs
            .into_iter()
            .flat_map(|d| match d.get("kind").and_then(Value::as_str) {
                Some("List") => d.get("items").and_then(Value::as_array).cloned().unwrap_or_default(),
                _ => vec![d],
            })
            .collect();
        let is_claim = |d: &Value| d.get("kind").and_then(Value::as_str) == Some("ResourceClaim");
        let mut pods = docs.iter().filter(|d| !is_claim(d));
        let Some(pod_doc) = pods.next() else {
            return Err(Error::invalid(place, "no Pod in the manifest"));
        };
        if pods.next().is_some() {
            return Err(Error::invalid(place, "more than one Pod in the manifest: admit one pod at a time"));
        }
        let mut pod = from_value(pod_doc, place)?;
        for d in docs.iter().filter(|d| is_claim(d)) {
            let c = super::dra_claims::claim_object(d, &pod.namespace, place)?;
            if pod.claim_objects.iter().any(|o| o.namespace == c.namespace && o.name == c.name) {
                return Err(Error::invalid(place, format!("ResourceClaim {}/{} is given twice", c.namespace, c.name)));
            }
            pod.claim_objects.push(c);
        }
        if pod.claim_objects.len() > super::dra_claims::MAX_POD_CLAIMS * 2 {
            return Err(Error::invalid(place, "too many ResourceClaims in the manifest"));
        }
        Ok(pod)
    }

    /// Checks names and container order.
    pub fn validate(&self) -> Result<()> {
        let place = format!("pod {}/{}", self.namespace, self.name);
        if self.name.is_empty() {
            return Err(Error::invalid("pod", "metadata.name is empty"));
        }
        crate::validate::check_object_names(&self.name, &self.namespace)?;
        if self.containers.iter().all(|c| c.kind != ContainerKind::Regular) {
            return Err(Error::invalid(&place, "a pod needs at least one regular container (spec.containers)"));
        }
        let mut seen = BTreeSet::new();
        let mut regular_seen = false;
        for c in &self.containers {
            if c.name.is_empty() {
                return Err(Error::invalid(&place, "a container has no name"));
            }
            if !seen.insert(c.name.as_str()) {
                return Err(Error::invalid(&place, format!("container name {:?} is used twice", c.name)));
            }
            if c.kind == ContainerKind::Regular {
                regular_seen = true;
            } else if regular_seen {
                return Err(Error::invalid(&place, "init containers must come before regular containers"));
            }
            for r in c.limits.keys() {
                if let Some(why) = crate::validate::explain_resource_name(r) {
                    return Err(Error::invalid(format!("{place} container {}", c.name), why));
                }
            }
        }
        Ok(())
    }
}

fn from_value(v: &Value, place: &str) -> Result<PodSpec> {
    let bad = |key: &str, msg: &str| Error::invalid(format!("{place}: {key}"), msg.to_string());
    if let Some(kind) = v.get("kind")
        && kind.as_str() != Some("Pod")
    {
        return Err(bad("kind", &format!("expected Pod, got {kind}")));
    }
    let meta = v.get("metadata").ok_or_else(|| bad("metadata", "missing"))?;
    let name = meta.get("name").and_then(Value::as_str).ok_or_else(|| bad("metadata.name", "missing"))?;
    let namespace = meta.get("namespace").and_then(Value::as_str).unwrap_or("default");
    let uid = meta.get("uid").and_then(Value::as_str).map(String::from);
    let spec = v.get("spec").ok_or_else(|| bad("spec", "missing"))?;
    let mut containers = Vec::new();
    for (key, regular) in [("initContainers", false), ("containers", true)] {
        let Some(list) = spec.get(key) else { continue };
        if list.is_null() {
            continue;
        }
        let list = list.as_array().ok_or_else(|| bad(&format!("spec.{key}"), "must be a list"))?;
        for (i, c) in list.iter().enumerate() {
            let at = format!("spec.{key}[{i}]");
            let cname = c.get("name").and_then(Value::as_str).ok_or_else(|| bad(&format!("{at}.name"), "missing"))?;
            let kind = if regular {
                ContainerKind::Regular
            } else {
                match c.get("restartPolicy").and_then(Value::as_str) {
                    Some("Always") => ContainerKind::Sidecar,
                    None => ContainerKind::Init,
                    Some(other) => {
                        return Err(bad(
                            &format!("{at}.restartPolicy"),
                            &format!("{other:?}: only Always is allowed on an init container"),
                        ));
                    }
                }
            };
            let limits = quantities(c, &at, "limits", place)?;
            let requests = quantities(c, &at, "requests", place)?;
            for (r, n) in &requests {
                match limits.get(r) {
                    None => {
                        return Err(bad(
                            &format!("{at}.resources.requests[{r}]"),
                            "Limit must be set for non overcommitable resources",
                        ));
                    }
                    Some(l) if l != n => {
                        return Err(bad(
                            &format!("{at}.resources.requests[{r}]"),
                            &format!("must be equal to {r} limit of {l}"),
                        ));
                    }
                    Some(_) => {}
                }
            }
            let compute = compute_of(c, &at, place)?;
            let claims = super::dra_claims::container_claims(c, &at, place)?;
            containers.push(ContainerSpec { name: cname.to_string(), kind, limits, compute, claims });
        }
    }
    if !containers.iter().any(|c| c.kind == ContainerKind::Regular) {
        return Err(bad("spec.containers", "missing or empty"));
    }
    let resource_claims = super::dra_claims::pod_claims(spec, v.get("status"), &format!("{namespace}/{name}"), place)?;
    for c in &containers {
        super::dra_claims::check_container_claims(&resource_claims, &c.name, &c.claims, place)?;
    }
    let pod = PodSpec {
        name: name.to_string(),
        namespace: namespace.to_string(),
        uid,
        containers,
        resource_claims,
        claim_objects: Vec::new(),
        extended_claim: super::dra_claims::extended_claim(v.get("status"), place)?,
    };
    pod.validate()?;
    Ok(pod)
}

/// The extended resources of `resources.<which>`, as whole numbers.
fn quantities(c: &Value, at: &str, which: &str, place: &str) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    let Some(map) = c.get("resources").and_then(|r| r.get(which)) else { return Ok(out) };
    let Some(map) = map.as_object() else {
        return Err(Error::invalid(format!("{place}: {at}.resources.{which}"), "must be a map"));
    };
    for (name, q) in map {
        if !is_extended_resource_name(name) {
            continue; // cpu, memory, hugepages: not the device manager's business
        }
        let n = parse_quantity(q, 0, true).map_err(|e| {
            let why = if e == QuantityError::TooLarge { e.to_string() } else { "not a whole number".into() };
            Error::invalid(
                format!("{place}: {at}.resources.{which}[{name}]"),
                format!("{q} is {why} (extended resources are counted in whole devices)"),
            )
        })?;
        out.insert(name.clone(), n);
    }
    Ok(out)
}

/// Reads `resources.{requests,limits}.{cpu,memory}` of a container (`at`)
/// in a manifest (`place`).
pub(crate) fn compute_of(c: &serde_json::Value, at: &str, place: &str) -> Result<crate::topology::Compute> {
    let mut out = crate::topology::Compute::default();
    let Some(res) = c.get("resources") else { return Ok(out) };
    for which in ["requests", "limits"] {
        let Some(map) = res.get(which).and_then(|m| m.as_object()) else { continue };
        for (name, q) in map {
            let field = format!("{place}: {at}.resources.{which}[{name}]");
            match name.as_str() {
                "cpu" => {
                    let v = parse_quantity(q, 3, true).map_err(|e| {
                        Error::invalid(
                            &field,
                            format!("{q}: {e} (a CPU quantity in millicores, e.g. 2, \"500m\", \"1.5\")"),
                        )
                    })?;
                    if which == "requests" { out.cpu_request_millis = Some(v) } else { out.cpu_limit_millis = Some(v) }
                }
                "memory" => {
                    let v = parse_quantity(q, 0, false).map_err(|e| {
                        Error::invalid(
                            &field,
                            format!("{q}: {e} (a memory quantity in bytes, e.g. \"1Gi\", \"512Mi\")"),
                        )
                    })?;
                    if which == "requests" { out.memory_request = Some(v) } else { out.memory_limit = Some(v) }
                }
                _ => {}
            }
        }
    }
    for (what, req, lim) in
        [("cpu", out.cpu_request_millis, out.cpu_limit_millis), ("memory", out.memory_request, out.memory_limit)]
    {
        if let (Some(r), Some(l)) = (req, lim)
            && r > l
        {
            return Err(Error::invalid(
                format!("{place}: {at}.resources.requests[{what}]"),
                format!("must be less than or equal to {what} limit"),
            ));
        }
    }
    Ok(out)
}

/// A quantity from a manifest (a JSON number or a string) in units of
/// 10^-`scale`, rounded up unless `exact` (see [`crate::quantity::parse`]).
pub fn parse_quantity(q: &serde_json::Value, scale: u32, exact: bool) -> Result<u64, QuantityError> {
    if let Some(n) = q.as_u64() {
        return 10u64.checked_pow(scale).and_then(|p| n.checked_mul(p)).ok_or(QuantityError::TooLarge);
    }
    if q.as_i64().is_some_and(|n| n < 0) {
        return Err(QuantityError::Negative);
    }
    if let Some(f) = q.as_f64() {
        return crate::quantity::parse(&f.to_string(), scale, exact);
    }
    crate::quantity::parse(q.as_str().ok_or(QuantityError::Syntax)?, scale, exact)
}
