//! Pod admission the way the kubelet's device manager does it: pods from a
//! manifest (YAML or JSON) or a shorthand, devices chosen per container and
//! resource (reusing plain init containers' devices, GetPreferredAllocation
//! when offered), one Allocate per (container, resource), the answer checked,
//! then PreStartContainer when the plugin asks for it. Failures carry the
//! kubelet's reason and message.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::events::EventKind;
use super::manager::{Alloc, Pod};
use super::manager::{AllocationPlan, PodTopology, Rejection, unexpected};
pub use super::manager::{CDI_DEVICES_GATED, CDI_DEVICES_UNKNOWN};
pub use super::outcome::{
    AdmitOutcome, ContainerOutcome, PreferredCall, ResourceOutcome, UNEXPECTED_ADMISSION_ERROR, Warning,
};
pub use super::pod::{ContainerKind, ContainerSpec, PodSpec};
use super::registration::go_rpc_error;
use super::shell::Inner;
use crate::error::{Error, Result};
use crate::model::ContainerAllocation;
use crate::plugin_client::PluginClient;
use crate::proto::deviceplugin::v1beta1 as dp;

/// A random UID in the usual 8-4-4-4-12 form.
fn new_uid() -> String {
    let n: u128 = rand::random();
    let h = format!("{n:032x}");
    format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// Admits `spec`: see the module docs.
pub(crate) async fn admit(inner: &Arc<Inner>, mut spec: PodSpec) -> Result<AdmitOutcome> {
    spec.validate()?;
    inner.lock().dra_map_extended_claim(&mut spec);
    super::dra::check_pod(inner, &spec)?;
    let _turn = inner.admission.lock().await;
    if inner.is_stopped() {
        return Err(Error::invalid("kubelet-sim", "the sim has stopped"));
    }
    let started = Instant::now();
    if inner.lock().is_admitted(&spec.namespace, &spec.name) {
        return Err(Error::invalid(
            format!("pod {}/{}", spec.namespace, spec.name),
            "is already admitted; delete it first",
        ));
    }
    if spec.uid.is_none() {
        spec.uid = Some(new_uid());
    }
    super::dra_api::resolve_claims(inner, &mut spec).await?;
    let mut pod = Pod { spec, allocs: BTreeMap::new(), running: BTreeSet::new() };
    let mut outcome = AdmitOutcome::pending(&pod.spec, pod.uid().to_string());
    inner.lock().remove_stale_cpus();
    match allocate_pod(inner, &mut pod, &mut outcome).await {
        Ok(()) => {}
        Err(reject) => {
            rejected(inner, &pod, reject, &mut outcome, started);
            return Ok(outcome);
        }
    }
    // Admitted: the devices are the pod's from now on.
    let views = super::manager::container_views(&pod);
    // Only device-plugin devices go into kubelet_internal_checkpoint: a pod
    // with none (only DRA claims, or nothing) is recorded nowhere there.
    let holds_devices = pod.allocs.values().flatten().any(|(_, a)| !a.ids.is_empty());
    let pre_start = plan_pre_start(inner, &pod);
    let pod_spec = pod.spec.clone();
    inner.lock().admit(pod, &outcome);
    // Every container's devices are on disk already (written after its
    // allocation, see `record`): the answer below is the acknowledgement.
    outcome.admitted = true;
    let kept_in = holds_devices.then(|| inner.kept_in());
    outcome.kept_in.clone_from(&kept_in);
    inner.emit(EventKind::Admitted {
        pod: outcome.pod.clone(),
        namespace: outcome.namespace.clone(),
        uid: outcome.uid.clone(),
        containers: views,
        kept_in,
    });
    // The kubelet prepares the pod's claims in SyncPod before the sandbox
    // exists (pkg/kubelet/kuberuntime/kuberuntime_manager.go); a failure
    // keeps every container from starting.
    if let Some(dra) = super::dra::prepare_pod(inner, &pod_spec).await {
        let failed = dra.error.clone();
        outcome.dra = Some(Box::new(dra));
        if let Some(e) = failed {
            for c in &mut outcome.containers {
                c.start_error = Some(e.clone());
            }
            outcome.took_ms = crate::text::millis(started.elapsed());
            return Ok(outcome);
        }
    }
    start_containers(inner, &mut outcome, pre_start).await;
    outcome.took_ms = crate::text::millis(started.elapsed());
    Ok(outcome)
}

/// The admit handlers rejected the pod: the outcome says why, and the
/// event is sent. The checkpoint keeps what was written for the containers
/// allocated so far until the next write, as the kubelet's does; so does
/// the CPU manager's state (`State::stale_cpus`).
fn rejected(inner: &Inner, pod: &Pod, reject: Rejection, outcome: &mut AdmitOutcome, started: Instant) {
    let cpus = outcome.topology.as_ref().map(|t| t.cpus.clone()).unwrap_or_default();
    {
        let mut m = inner.lock();
        m.admission_failed(pod);
        m.cpus_left_by_rejection(pod.uid(), &cpus);
    }
    outcome.reason = Some(reject.reason.clone());
    outcome.message = Some(reject.message.clone());
    outcome.took_ms = crate::text::millis(started.elapsed());
    inner.emit(EventKind::AdmissionRejected {
        pod: outcome.pod.clone(),
        namespace: outcome.namespace.clone(),
        reason: reject.reason,
        message: reject.message,
    });
}

/// Chooses and allocates devices for every container, init containers first.
// long: the device manager's per-container loop in the kubelet's order (topology hint,
// allocate_one per resource, init-container reuse, the predicate handler for skipped
// resources); each branch rejects with the kubelet's own text.
async fn allocate_pod(inner: &Arc<Inner>, pod: &mut Pod, outcome: &mut AdmitOutcome) -> Result<(), Rejection> {
    // Devices of plain init containers that later containers may reuse.
    let mut reuse: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let containers = pod.spec.containers.clone();
    let (mut tm, rejected) = PodTopology::begin(&inner.lock(), &pod.spec, false);
    if let Some(r) = rejected {
        outcome.topology = Some(Box::new(tm.report));
        return Err(r);
    }
    for c in &containers {
        let hint = tm.container_hint(&inner.lock(), c, &reuse);
        let hint = match hint {
            Ok(h) => h,
            Err(r) => {
                outcome.topology = Some(Box::new(tm.report));
                return Err(r);
            }
        };
        let mut co = ContainerOutcome::new(c);
        let mut allocated_any = false;
        for (resource, &required) in &c.limits {
            let reusable = reuse.get(resource).cloned().unwrap_or_default();
            match allocate_one(inner, pod, &c.name, resource, required, &reusable, hint).await {
                Ok(Some((ro, alloc))) => {
                    allocated_any = true;
                    tm.placed(&c.name, resource, &alloc.ids, &alloc.by_numa);
                    pod.allocs.entry(c.name.clone()).or_default().insert(resource.clone(), alloc);
                    co.resources.push(ro);
                }
                Ok(None) => {}
                Err(r) => {
                    outcome.containers.push(co);
                    outcome.topology = Some(Box::new(tm.report));
                    return Err(r);
                }
            }
        }
        if allocated_any && let Err(r) = record(inner, pod).await {
            outcome.containers.push(co);
            outcome.topology = Some(Box::new(tm.report));
            return Err(r);
        }
        let cpus = tm.allocate_cpus(&inner.lock(), c, hint);
        if let Err(r) = cpus {
            outcome.containers.push(co);
            outcome.topology = Some(Box::new(tm.report));
            return Err(r);
        }
        inner.lock().update_reuse(c.kind, pod.allocs.get(&c.name), &mut reuse);
        outcome.containers.push(co);
    }
    // The predicate admit handler (docs/kubelet-versions.md §5, every
    // version): an extended resource the device manager skipped and node
    // status does not list is stripped (removeMissingExtendedResources);
    // then the node-resources fit against the other active pods (manager/fit.rs).
    outcome.topology = Some(Box::new(tm.report));
    let fit = {
        let m = inner.lock();
        let (_, stripped) = m.unknown_resources(&containers);
        let others = m.other_specs(pod.uid());
        let others: Vec<&PodSpec> = others.iter().collect();
        (m.node_fit(&pod.spec, &held_ids(pod), &others, &stripped), stripped)
    };
    let (rejection, stripped) = fit;
    if let Some(r) = rejection {
        return Err(r);
    }
    for co in &mut outcome.containers {
        let Some(spec) = containers.iter().find(|c| c.name == co.name) else { continue };
        for r in &stripped {
            let Some(&n) = spec.limits.get(r).filter(|n| **n > 0) else { continue };
            co.resources.push(ResourceOutcome {
                resource: r.clone(),
                requested: n,
                reused: Vec::new(),
                preferred: None,
                devices: Vec::new(),
                allocation: None,
                warnings: vec![Warning {
                    rule: "request-stripped".into(),
                    evidence: format!(
                        "node status does not list {r} (no plugin has sent a device list yet), so the kubelet \
                         strips the request (removeMissingExtendedResources) and admits the pod; the container \
                         starts with no {r} devices"
                    ),
                }],
                pre_start: None,
            });
        }
    }
    Ok(())
}

/// Writes the checkpoint (or the sim's own allocations file) with `pod` as
/// allocated so far, durably, before the admission goes on: the kubelet's
/// `writeCheckpoint` after each container's allocation
/// (`pkg/kubelet/cm/devicemanager/manager.go`, `allocateContainerResources`),
/// whose failure fails the admission.
async fn record(inner: &Arc<Inner>, pod: &Pod) -> Result<(), Rejection> {
    inner.lock().admitting(pod);
    let writer = Arc::clone(inner);
    let written = tokio::task::spawn_blocking(move || writer.write_checkpoint())
        .await
        .unwrap_or_else(|e| Err(Error::invalid("checkpoint writer", e.to_string())));
    written.map_err(|e| {
        unexpected(
            crate::kubelet_texts::CHECKPOINT_WRITE.fill(&[&format!("{:?}", crate::paths::CHECKPOINT_FILE_NAME), &e]),
        )
    })
}

/// The device IDs a pod holds, per resource.
pub(crate) fn held_ids(pod: &Pod) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for by_res in pod.allocs.values() {
        for (r, a) in by_res {
            out.entry(r.clone()).or_default().extend(a.ids.iter().cloned());
        }
    }
    out
}

/// The kubelet's `devicesToAllocate` plus the Allocate call, for one
/// (container, resource): the plan under the lock, the GetPreferredAllocation
/// call, the Allocate call and its checks. `Ok(None)`: nothing for the
/// device manager to do.
async fn allocate_one(
    inner: &Arc<Inner>,
    pod: &Pod,
    container: &str,
    resource: &str,
    required: u64,
    reusable: &BTreeSet<String>,
    hint: Option<crate::topology::Mask>,
) -> Result<Option<(ResourceOutcome, Alloc)>, Rejection> {
    let planned = {
        let mut m = inner.lock();
        m.before_allocate(pod, resource);
        m.plan_allocation(pod, resource, required, reusable, hint)?
    };
    let Some(AllocationPlan { reused, take, preferred, endpoint }) = planned else {
        return Ok(None);
    };
    let preferred = preferred.and_then(|id| inner.client(id));
    let client = endpoint.and_then(|id| inner.client(id));
    let (preferred_call, answer) = match (&take.ask, preferred) {
        (Some(ask), Some(pc)) => call_preferred(ask, &pc).await?,
        _ => (None, Vec::new()),
    };
    let allocated = take.finish(&answer, required);
    let got = allocated.len() as u64;
    if got < required {
        return Err(unexpected(crate::kubelet_texts::ALLOCATED_LESS.fill(&[&required, &got])));
    }
    let (first, warnings) = call_allocate(inner, resource, client, &allocated).await?;
    let by_numa = inner.lock().numa_of(resource, &allocated);
    let ro = ResourceOutcome {
        resource: resource.to_string(),
        requested: required,
        reused,
        preferred: preferred_call,
        devices: allocated.clone(),
        allocation: Some(ContainerAllocation::from_response(allocated.clone(), &first)),
        warnings,
        pre_start: None,
    };
    let _ = container;
    Ok(Some((ro, Alloc { ids: allocated, by_numa, response: first })))
}

/// GetPreferredAllocation with exactly the lists the kubelet passes for the
/// stored hint (under policy none: every free device); like the kubelet, only
/// the first container response is read. Returns the call and the answer.
async fn call_preferred(
    ask: &crate::topology::Ask,
    pc: &PluginClient,
) -> Result<(Option<PreferredCall>, Vec<String>), Rejection> {
    let size = i32::try_from(ask.size).unwrap_or(i32::MAX);
    let req = dp::ContainerPreferredAllocationRequest {
        available_device_i_ds: ask.available.clone(),
        must_include_device_i_ds: ask.must_include.clone(),
        allocation_size: size,
    };
    let resp = pc
        .preferred(vec![req.clone()])
        .await
        .map_err(|e| unexpected(crate::kubelet_texts::PREFERRED_FAILED.fill(&[&go_rpc_error(&e)])))?;
    let answer = crate::contract::preferred_answer(&resp);
    let warnings = crate::contract::check_preferred_response(&req, &resp).into_iter().map(Warning::from).collect();
    let call = PreferredCall {
        available: req.available_device_i_ds,
        must_include: req.must_include_device_i_ds,
        size,
        answer: answer.clone(),
        warnings,
    };
    Ok((Some(call), answer))
}

/// Allocate for the devices this container gets (the kubelet calls it even
/// when they all come from init containers): the plugin must be known and
/// its endpoint not stopped, and the answer must hold a container response
/// (the first is the one read). Returns it and the contract warnings.
async fn call_allocate(
    inner: &Arc<Inner>,
    resource: &str,
    client: Option<PluginClient>,
    allocated: &[String],
) -> Result<(dp::ContainerAllocateResponse, Vec<Warning>), Rejection> {
    let Some(client) = client else {
        return Err(unexpected(crate::kubelet_texts::UNKNOWN_PLUGIN.fill(&[&resource])));
    };
    let stopped = inner.lock().endpoint_stopped(resource);
    if stopped {
        return Err(unexpected(crate::kubelet_texts::ENDPOINT_STOPPED.fill(&[&client.path().display()])));
    }
    let resp = client.allocate(&[allocated.to_vec()]).await.map_err(|e| unexpected(go_rpc_error(&e)))?;
    inner.lock().allocate_answer(&resp)
}

/// The PreStartContainer calls to make: per container, per resource whose plugin requires it.
type PreStartPlan = Vec<(String, Vec<(String, Vec<String>, Option<PluginClient>)>)>;

pub(super) fn plan_pre_start(inner: &Arc<Inner>, pod: &Pod) -> PreStartPlan {
    let plan = inner.lock().pre_start_plan(pod);
    plan.into_iter()
        .map(|(c, calls)| {
            let calls = calls.into_iter().map(|(r, ids, ep)| (r, ids, ep.and_then(|id| inner.pre_start_client(id))));
            (c, calls.collect())
        })
        .collect()
}

/// Starts the containers in order: PreStartContainer where required
/// (docs/kubelet-versions.md §5). A failing init container or sidecar stops the
/// containers after it; a failing regular container stops only itself.
pub(super) async fn start_containers(inner: &Arc<Inner>, outcome: &mut AdmitOutcome, plan: PreStartPlan) {
    let mut blocked = false;
    for (name, calls) in plan {
        let Some(co) = outcome.containers.iter_mut().find(|c| c.name == name) else { continue };
        if blocked {
            // Waiting (PodInitializing), no error of its own: the pod worker
            // starts nothing after an init container that has not completed
            // (computeInitContainerActions, pkg/kubelet/kuberuntime/kuberuntime_container.go).
            continue;
        }
        let mut error = None;
        for (resource, ids, client) in calls {
            let result = pre_start_one(&resource, ids, client).await;
            if let Some(ro) = co.resources.iter_mut().find(|r| r.resource == resource) {
                ro.pre_start = Some(match &result {
                    Ok(()) => "ok".into(),
                    Err(e) => e.clone(),
                });
            }
            if let Err(e) = result {
                error = Some(e);
                break;
            }
        }
        match error {
            None => {
                co.started = true;
                inner.lock().container_started(&outcome.namespace, &outcome.pod, &name);
            }
            Some(e) => {
                inner.emit(EventKind::ContainerStartFailed {
                    pod: outcome.pod.clone(),
                    namespace: outcome.namespace.clone(),
                    container: name.clone(),
                    message: e.clone(),
                });
                co.start_error = Some(e);
                // Init containers (sidecars included) start one after the
                // other; a regular container's failure stops only itself.
                blocked = co.kind != ContainerKind::Regular;
            }
        }
    }
}

/// One PreStartContainer call, with the kubelet's error texts.
async fn pre_start_one(
    resource: &str,
    ids: Vec<String>,
    client: Option<PluginClient>,
) -> std::result::Result<(), String> {
    match client {
        None => Err(crate::kubelet_texts::PRESTART_NO_ENDPOINT.fill(&[&resource])),
        Some(c) => c
            .pre_start(ids)
            .await
            .map(|_| ())
            .map_err(|e| crate::kubelet_texts::PRESTART_FAILED.fill(&[&go_rpc_error(&e)])),
    }
}

/// What restarting a container did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartOutcome {
    /// Pod name.
    pub pod: String,
    /// Namespace.
    pub namespace: String,
    /// Container name.
    pub container: String,
    /// Per resource with devices: PreStartContainer's result (`ok` or the
    /// error), or `not required`.
    pub pre_start: BTreeMap<String, String>,
    /// The container started again.
    pub started: bool,
    /// Why it did not (the other containers are not affected).
    pub start_error: Option<String>,
}

/// Restarts one container of an admitted pod (docs/kubelet-versions.md §5, every
/// version): the kubelet calls PreStartContainer at every container start,
/// restarts included, for each resource whose plugin requires it, with the
/// devices the container holds; a failure stops only this container. A
/// stopped endpoint fails the call (`endpoint … has been stopped`), and
/// after the removal `endpoint not found in cache for a registered resource`.
// long: one container restart's PreStartContainer plan and calls, each failure with the
// kubelet's own text (docs/kubelet-versions.md §5).
pub(crate) async fn restart_container(
    inner: &Arc<Inner>,
    namespace: &str,
    name: &str,
    container: &str,
) -> Result<RestartOutcome> {
    let _turn = inner.admission.lock().await;
    let place = format!("pod {namespace}/{name}");
    let plan = inner.lock().restart_plan(namespace, name, container);
    let calls = plan.map_err(|names| match names {
        None => Error::invalid(&place, "not found"),
        Some(names) => {
            Error::invalid(&place, format!("has no container {container:?} (containers: {})", names.join(", ")))
        }
    })?;
    let calls = calls.into_iter().map(|(r, ids, call)| {
        let call = call.map(|c| {
            c.and_then(|id| {
                inner.pre_start_client(id).ok_or_else(|| crate::kubelet_texts::PRESTART_NO_ENDPOINT.fill(&[&r]))
            })
        });
        (r, ids, call)
    });
    let mut out = RestartOutcome {
        pod: name.into(),
        namespace: namespace.into(),
        container: container.into(),
        pre_start: BTreeMap::new(),
        started: true,
        start_error: None,
    };
    for (resource, ids, call) in calls {
        let result = match call {
            None => {
                out.pre_start.insert(resource, "not required".into());
                continue;
            }
            Some(Err(e)) => Err(e),
            Some(Ok(client)) => pre_start_one(&resource, ids, Some(client)).await,
        };
        match result {
            Ok(()) => {
                out.pre_start.insert(resource, "ok".into());
            }
            Err(e) => {
                out.pre_start.insert(resource, e.clone());
                if out.start_error.is_none() {
                    out.start_error = Some(e);
                }
                out.started = false;
            }
        }
    }
    if out.started {
        inner.lock().container_started(namespace, name, container);
    }
    inner.emit(EventKind::ContainerRestarted {
        pod: name.into(),
        namespace: namespace.into(),
        container: container.into(),
        pre_start: out.pre_start.clone(),
        started: out.started,
    });
    if let Some(e) = &out.start_error {
        inner.emit(EventKind::ContainerStartFailed {
            pod: name.into(),
            namespace: namespace.into(),
            container: container.into(),
            message: e.clone(),
        });
    }
    Ok(out)
}

/// What deleting a pod freed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteOutcome {
    /// Pod name.
    pub pod: String,
    /// Namespace.
    pub namespace: String,
    /// Freed device IDs per resource.
    pub freed: BTreeMap<String, Vec<String>>,
    /// The DRA manager's Unprepare, for a pod with `resourceClaims`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra: Option<Box<super::outcome::DraOutcome>>,
}

/// Deletes a pod and frees its devices.
pub(crate) async fn delete(inner: &Arc<Inner>, namespace: &str, name: &str) -> Result<DeleteOutcome> {
    let _turn = inner.admission.lock().await;
    let deleted = inner.lock().delete_pod(namespace, name);
    let pod = deleted.map_err(|known| {
        Error::invalid(
            format!("pod {namespace}/{name}"),
            if known.is_empty() {
                "not found (no pods are admitted)".to_string()
            } else {
                format!("not found (admitted: {})", known.join(", "))
            },
        )
    })?;
    let mut freed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for by_res in pod.allocs.values() {
        for (r, a) in by_res {
            let list = freed.entry(r.clone()).or_default();
            for id in &a.ids {
                if !list.contains(id) {
                    list.push(id.clone());
                }
            }
        }
    }
    // Deleting a pod writes no checkpoint in the kubelet: UpdateAllocatedDevices
    // (pkg/kubelet/cm/devicemanager/manager.go) drops the pod in memory the next
    // time it looks, and the next write (an allocation, a device list update)
    // leaves it out; until then the file still lists it, and a restart restores it.
    // The kubelet unprepares in SyncTerminatingPod, once the containers
    // stopped; when that fails SyncTerminatingPod returns the error, the pod
    // is not terminated and stays active (isPodInactive, pkg/kubelet/kubelet.go)
    // with its devices, and the pod worker tries again (here: the next delete).
    let who = super::manager::Unpreparer::Deleted(&pod.spec.resource_claims);
    let dra = super::dra::unprepare_pod(inner, &pod.spec, pod.uid(), who).await.map(Box::new);
    if dra.as_ref().is_some_and(|d| d.error.is_some()) {
        inner.lock().still_terminating(pod);
        return Ok(DeleteOutcome { pod: name.into(), namespace: namespace.into(), freed: BTreeMap::new(), dra });
    }
    inner.emit(EventKind::PodDeleted { pod: name.into(), namespace: namespace.into(), freed: freed.clone() });
    Ok(DeleteOutcome { pod: name.into(), namespace: namespace.into(), freed, dra })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet_sim::manager::numa_map;

    const MANIFEST: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  initContainers:
  - name: fetch
    resources:
      limits:
        example.com/gpu: 1
  - name: proxy
    restartPolicy: Always
    resources:
      limits: {example.com/gpu: "1", cpu: 100m}
  containers:
  - name: main
    resources:
      limits:
        example.com/gpu: 2
        memory: 1Gi
      requests:
        example.com/gpu: 2
"#;

    #[test]
    fn manifest_with_init_sidecar_and_regular() {
        let p = PodSpec::from_manifest(MANIFEST, "pod.yaml").unwrap();
        assert_eq!(p.namespace, "default");
        let kinds: Vec<_> = p.containers.iter().map(|c| (c.name.as_str(), c.kind)).collect();
        assert_eq!(
            kinds,
            [("fetch", ContainerKind::Init), ("proxy", ContainerKind::Sidecar), ("main", ContainerKind::Regular)]
        );
        assert_eq!(p.containers[2].limits, BTreeMap::from([("example.com/gpu".to_string(), 2)]));
        let gpu = |c: &ContainerSpec| c.limits.get("example.com/gpu").copied().unwrap_or(0);
        assert_eq!(crate::kubelet_sim::manager::pod_request(&p, gpu), 3);
    }

    #[test]
    fn json_manifests_and_errors_name_the_place() {
        let j = r#"{"kind":"Pod","metadata":{"name":"a","namespace":"ns"},"spec":{"containers":[{"name":"c","resources":{"limits":{"example.com/x":"1k"}}}]}}"#;
        let p = PodSpec::from_manifest(j, "a.json").unwrap();
        assert_eq!(p.containers[0].limits["example.com/x"], 1000);
        let bad = j.replace("\"1k\"", "\"500m\"");
        let e = PodSpec::from_manifest(&bad, "a.json").unwrap_err().to_string();
        assert!(e.contains("a.json: spec.containers[0].resources.limits[example.com/x]"), "{e}");
        let e = PodSpec::from_manifest("kind: Service\nmetadata: {name: x}\nspec: {}", "s.yaml").unwrap_err();
        assert!(e.to_string().contains("kind"), "{e}");
        let req_only = r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","resources":{"requests":{"example.com/x":1}}}]}}"#;
        let e = PodSpec::from_manifest(req_only, "r.json").unwrap_err().to_string();
        assert!(e.contains("Limit must be set for non overcommitable resources"), "{e}");
    }

    #[test]
    fn shorthand() {
        assert_eq!(PodSpec::parse_allocate("example.com/gpu=2").unwrap(), ("example.com/gpu".into(), 2));
        assert!(PodSpec::parse_allocate("gpu=2").is_err());
        assert!(PodSpec::parse_allocate("example.com/gpu").is_err());
        assert!(PodSpec::parse_allocate("example.com/gpu=x").is_err());
    }

    #[test]
    fn numa_map_lists_a_device_under_each_node() {
        let d = |id: &str, n: Option<Vec<i64>>| crate::model::Device {
            id: id.into(),
            health: "Healthy".into(),
            numa_nodes: n,
        };
        let devs = [d("a", Some(vec![0, 1])), d("b", None), d("c", Some(vec![]))];
        let m = numa_map(&["a".into(), "b".into(), "c".into()], &devs);
        assert_eq!(m[&0], ["a"]);
        assert_eq!(m[&1], ["a"]);
        assert_eq!(m[&-1], ["b", "c"]);
    }

    #[test]
    fn uids_look_like_uids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.matches('-').count(), 4);
    }
}
