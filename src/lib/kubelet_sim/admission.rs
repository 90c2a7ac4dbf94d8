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

use super::Inner;
use super::events::EventKind;
pub use super::outcome::{
    AdmitOutcome, ContainerOutcome, PreferredCall, ResourceOutcome, UNEXPECTED_ADMISSION_ERROR, Warning,
};
pub use super::pod::{ContainerKind, ContainerSpec, PodSpec};
use super::registration::go_rpc_error;
use super::state::{Alloc, Pod, numa_map};
use crate::error::{Error, Result};
use crate::kubelet_texts as T;
use crate::model::ContainerAllocation;
use crate::plugin_client::PluginClient;
use crate::proto::deviceplugin::v1beta1 as dp;

/// A rejection: reason and message as the kubelet reports them.
struct Reject {
    reason: String,
    message: String,
}

/// `UnexpectedAdmissionError` wrapping a device manager error.
fn unexpected(err: impl std::fmt::Display) -> Reject {
    Reject { reason: UNEXPECTED_ADMISSION_ERROR.into(), message: T::WRAPPER.fill(&[&err]) }
}

/// A random UID in the usual 8-4-4-4-12 form.
fn new_uid() -> String {
    let n: u128 = rand::random();
    let h = format!("{n:032x}");
    format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// Admits `spec`: see the module docs.
pub(crate) async fn admit(inner: &Arc<Inner>, mut spec: PodSpec) -> Result<AdmitOutcome> {
    spec.validate()?;
    let _turn = inner.admission.lock().await;
    if inner.is_stopped() {
        return Err(Error::invalid("kubelet-sim", "the sim has stopped"));
    }
    let started = Instant::now();
    if inner.lock().pod_index(&spec.namespace, &spec.name).is_some() {
        return Err(Error::invalid(
            format!("pod {}/{}", spec.namespace, spec.name),
            "is already admitted; delete it first",
        ));
    }
    if spec.uid.is_none() {
        spec.uid = Some(new_uid());
    }
    let mut pod = Pod { spec, allocs: BTreeMap::new() };
    let mut outcome = AdmitOutcome::pending(&pod.spec, pod.uid().to_string());
    match allocate_pod(inner, &mut pod, &mut outcome).await {
        Ok(()) => {}
        Err(reject) => {
            // The checkpoint keeps what was written for the containers
            // allocated so far until the next write, as the kubelet's does.
            inner.lock().admitting = None;
            outcome.reason = Some(reject.reason.clone());
            outcome.message = Some(reject.message.clone());
            outcome.took_ms = crate::text::millis(started.elapsed());
            inner.emit(EventKind::AdmissionRejected {
                pod: outcome.pod.clone(),
                namespace: outcome.namespace.clone(),
                reason: reject.reason,
                message: reject.message,
            });
            return Ok(outcome);
        }
    }
    // Admitted: the devices are the pod's from now on.
    let views = super::state::container_views(&pod);
    let pre_start = plan_pre_start(inner, &pod);
    {
        let mut st = inner.lock();
        super::topology::commit(&mut st, pod.uid(), &outcome);
        st.admitting = None;
        st.pods.push(pod);
    }
    // Every container's devices are on disk already (written after its
    // allocation, see `record`): the answer below is the acknowledgement.
    outcome.admitted = true;
    let kept_in = inner.kept_in();
    outcome.kept_in = Some(kept_in.clone());
    inner.emit(EventKind::Admitted {
        pod: outcome.pod.clone(),
        namespace: outcome.namespace.clone(),
        uid: outcome.uid.clone(),
        containers: views,
        kept_in: Some(kept_in),
    });
    start_containers(inner, &mut outcome, pre_start).await;
    outcome.took_ms = crate::text::millis(started.elapsed());
    Ok(outcome)
}

/// Chooses and allocates devices for every container, init containers first.
// long: the device manager's per-container loop in the kubelet's order (topology hint,
// allocate_one per resource, init-container reuse, the predicate handler for skipped
// resources); each branch rejects with the kubelet's own text.
async fn allocate_pod(inner: &Arc<Inner>, pod: &mut Pod, outcome: &mut AdmitOutcome) -> Result<(), Reject> {
    // Devices of plain init containers that later containers may reuse.
    let mut reuse: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let containers = pod.spec.containers.clone();
    // docs/kubelet-versions.md §5: up to 1.28 a sidecar's devices join the reuse
    // pool like a plain init container's; 1.29+ keeps them out (PR #120461).
    let sidecars_reused = inner.config.kubelet_version.reuses_sidecar_devices();
    let (mut tm, rejected) = super::topology::PodTopology::begin(inner, &pod.spec, false);
    if let Some((reason, message)) = rejected {
        outcome.topology = Some(Box::new(tm.report));
        return Err(Reject { reason, message });
    }
    for c in &containers {
        let hint = match tm.container_hint(inner, c, &reuse) {
            Ok(h) => h,
            Err((reason, message)) => {
                outcome.topology = Some(Box::new(tm.report));
                return Err(Reject { reason, message });
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
        if let Err((reason, message)) = tm.allocate_cpus(inner, c, hint) {
            outcome.containers.push(co);
            outcome.topology = Some(Box::new(tm.report));
            return Err(Reject { reason, message });
        }
        if let Some(mine) = pod.allocs.get(&c.name) {
            for (resource, a) in mine {
                let set = reuse.entry(resource.clone()).or_default();
                if c.kind == ContainerKind::Init || (c.kind == ContainerKind::Sidecar && sidecars_reused) {
                    set.extend(a.ids.iter().cloned());
                } else {
                    for id in &a.ids {
                        set.remove(id);
                    }
                }
            }
        }
        outcome.containers.push(co);
    }
    // The predicate admit handler, for extended resources the device manager
    // skipped (docs/kubelet-versions.md §5, every version): rejected when node
    // status lists the resource (capacity 0), else the request is stripped
    // (removeMissingExtendedResources) and the pod admitted.
    outcome.topology = Some(Box::new(tm.report));
    let (listed, stripped): (Vec<String>, Vec<String>) = {
        let st = inner.lock();
        let unknown: BTreeSet<String> = containers
            .iter()
            .flat_map(|c| c.limits.iter())
            .filter(|(r, n)| **n > 0 && !st.resources.get(*r).is_some_and(|x| x.known()) && !st.any_allocated(r))
            .map(|(r, _)| r.clone())
            .collect();
        unknown.into_iter().partition(|r| st.resources.get(r).is_some_and(|x| x.reported))
    };
    if let Some(r) = listed.first() {
        let requested = effective_request(&pod.spec, r);
        return Err(Reject { reason: format!("OutOf{r}"), message: T::OUT_OF.fill(&[&r, &requested, &0, &0]) });
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
async fn record(inner: &Arc<Inner>, pod: &Pod) -> Result<(), Reject> {
    inner.lock().admitting = Some(pod.clone());
    let writer = Arc::clone(inner);
    let written = tokio::task::spawn_blocking(move || writer.write_checkpoint())
        .await
        .unwrap_or_else(|e| Err(Error::invalid("checkpoint writer", e.to_string())));
    written
        .map_err(|e| unexpected(T::CHECKPOINT_WRITE.fill(&[&format!("{:?}", crate::paths::CHECKPOINT_FILE_NAME), &e])))
}

/// The pod's effective request of `resource`: the larger of the running
/// containers' sum and each init container's need (with the sidecars before it).
fn effective_request(spec: &PodSpec, resource: &str) -> u64 {
    let get = |c: &ContainerSpec| c.limits.get(resource).copied().unwrap_or(0);
    let mut sidecars = 0;
    let mut init_peak = 0;
    for c in &spec.containers {
        match c.kind {
            ContainerKind::Init => init_peak = init_peak.max(sidecars + get(c)),
            ContainerKind::Sidecar => {
                sidecars += get(c);
                init_peak = init_peak.max(sidecars);
            }
            ContainerKind::Regular => {}
        }
    }
    let running: u64 = spec.containers.iter().filter(|c| c.kind != ContainerKind::Init).map(get).sum();
    running.max(init_peak)
}

/// The choice made under the lock, before any RPC.
struct Plan {
    reused: Vec<String>,
    take: crate::topology::Take,
    preferred: Option<PluginClient>,
    client: Option<PluginClient>,
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
) -> Result<Option<(ResourceOutcome, Alloc)>, Reject> {
    let Some(Plan { reused, take, preferred, client }) =
        plan_allocation(inner, pod, resource, required, reusable, hint)?
    else {
        return Ok(None);
    };
    let (preferred_call, answer) = match (&take.ask, preferred) {
        (Some(ask), Some(pc)) => call_preferred(ask, &pc).await?,
        _ => (None, Vec::new()),
    };
    let allocated = take.finish(&answer, required);
    let got = allocated.len() as u64;
    if got < required {
        return Err(unexpected(T::ALLOCATED_LESS.fill(&[&required, &got])));
    }
    let (first, warnings) = call_allocate(inner, resource, client, &allocated).await?;
    let by_numa = {
        let st = inner.lock();
        let devices = st.resources.get(resource).map(|r| r.devices.as_slice()).unwrap_or_default();
        numa_map(&allocated, devices)
    };
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

/// The choice made under the lock, before any RPC: the devices reused from
/// init containers, the free ones (split by the Topology Manager's stored
/// hint, docs/topology.md §3), and the plugin's clients. `Ok(None)`: not a
/// device-plugin resource, or nothing required.
fn plan_allocation(
    inner: &Arc<Inner>,
    pod: &Pod,
    resource: &str,
    required: u64,
    reusable: &BTreeSet<String>,
    hint: Option<crate::topology::Mask>,
) -> Result<Option<Plan>, Reject> {
    let st = inner.lock();
    let res = st.resources.get(resource).filter(|r| r.known());
    let pod_has = pod.allocs.values().any(|m| m.contains_key(resource));
    if res.is_none() && !st.any_allocated(resource) && !pod_has {
        return Ok(None); // not a device-plugin resource: the predicate handler judges it
    }
    let Some(r) = res else {
        return Err(unexpected(T::UNREGISTERED.fill(&[&resource])));
    };
    let healthy: Vec<&crate::model::Device> = r.healthy().collect();
    if healthy.is_empty() {
        return Err(unexpected(T::NO_HEALTHY.fill(&[&resource])));
    }
    if required == 0 {
        return Ok(None);
    }
    let mut needed = required;
    let mut allocated = Vec::new();
    for id in reusable {
        if needed == 0 {
            break;
        }
        allocated.push(id.clone());
        needed -= 1;
    }
    let reused = allocated.clone();
    let mut available: Vec<(String, Option<Vec<i64>>)> = Vec::new();
    if needed > 0 {
        let mut in_use = st.in_use(resource);
        for by_res in pod.allocs.values() {
            if let Some(a) = by_res.get(resource) {
                in_use.extend(a.ids.iter().cloned());
            }
        }
        let mut seen = BTreeSet::new();
        available = healthy
            .iter()
            .filter(|d| !in_use.contains(&d.id) && seen.insert(d.id.as_str()))
            .map(|d| (d.id.clone(), if hint.is_some() { d.numa_nodes.clone() } else { None }))
            .collect();
        if (available.len() as u64) < needed {
            return Err(unexpected(T::UNAVAILABLE.fill(&[&resource, &needed, &available.len()])));
        }
    }
    let ep = r.endpoint.as_ref();
    // The Topology Manager's stored hint splits the free devices (docs/topology.md §3).
    let has_topology = hint.is_some() && r.devices.iter().any(|d| d.numa_nodes.as_ref().is_some_and(|n| !n.is_empty()));
    let ids: Vec<String> = available.iter().map(|(id, _)| id.clone()).collect();
    let split = crate::topology::split(&available, has_topology, hint);
    Ok(Some(Plan {
        reused,
        take: crate::topology::plan_take(&allocated, &ids, &split, needed, required),
        preferred: ep.filter(|e| e.options.get_preferred_allocation_available).map(|e| e.client.clone()),
        client: ep.map(|e| e.client.clone()),
    }))
}

/// GetPreferredAllocation with exactly the lists the kubelet passes for the
/// stored hint (under policy none: every free device); like the kubelet, only
/// the first container response is read. Returns the call and the answer.
async fn call_preferred(
    ask: &crate::topology::Ask,
    pc: &PluginClient,
) -> Result<(Option<PreferredCall>, Vec<String>), Reject> {
    let size = i32::try_from(ask.size).unwrap_or(i32::MAX);
    let req = dp::ContainerPreferredAllocationRequest {
        available_device_i_ds: ask.available.clone(),
        must_include_device_i_ds: ask.must_include.clone(),
        allocation_size: size,
    };
    let resp = pc
        .preferred(vec![req.clone()])
        .await
        .map_err(|e| unexpected(T::PREFERRED_FAILED.fill(&[&go_rpc_error(&e)])))?;
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
/// The warning rule for cdi_devices a kubelet before 1.28 drops
/// (docs/protocol.md §1.2).
pub const CDI_DEVICES_UNKNOWN: &str = "cdi-devices-unknown";
/// The warning rule for cdi_devices a 1.28 kubelet keeps in the answer but,
/// with gate DevicePluginCDIDevices off (its default), never hands to the runtime.
pub const CDI_DEVICES_GATED: &str = "cdi-devices-gated";

async fn call_allocate(
    inner: &Arc<Inner>,
    resource: &str,
    client: Option<PluginClient>,
    allocated: &[String],
) -> Result<(dp::ContainerAllocateResponse, Vec<Warning>), Reject> {
    let Some(client) = client else {
        return Err(unexpected(T::UNKNOWN_PLUGIN.fill(&[&resource])));
    };
    let stopped = {
        let st = inner.lock();
        st.resources.get(resource).and_then(|r| r.endpoint.as_ref()).is_none_or(|e| e.stopped)
    };
    if stopped {
        return Err(unexpected(T::ENDPOINT_STOPPED.fill(&[&client.path().display()])));
    }
    let resp = client.allocate(&[allocated.to_vec()]).await.map_err(|e| unexpected(go_rpc_error(&e)))?;
    let Some(first) = resp.container_responses.first().cloned() else {
        // docs/kubelet-versions.md §5: the gogo dump up to 1.33, nothing from 1.34.
        return Err(unexpected(T::EMPTY_ALLOCATE.fill(&[&inner.config.kubelet_version.empty_allocate_text()])));
    };
    let mut warnings: Vec<Warning> = crate::contract::check_allocate(1, &resp).into_iter().map(Warning::from).collect();
    let mut first = first;
    let version = inner.config.kubelet_version;
    if !version.knows_cdi_devices() && !first.cdi_devices.is_empty() {
        // docs/protocol.md §1.2: cdi_devices (field 5) came in 1.28; an older
        // kubelet's generated code skips it as an unknown field.
        let names: Vec<String> = std::mem::take(&mut first.cdi_devices).into_iter().map(|d| d.name).collect();
        warnings.push(Warning {
            rule: CDI_DEVICES_UNKNOWN.into(),
            evidence: format!(
                "kubelet {version} predates cdi_devices (ContainerAllocateResponse field 5, added in 1.28) and \
                 drops them, so the container gets none of: {}; return device nodes (DeviceSpec) or mounts too",
                names.join(", ")
            ),
        });
    } else if !version.passes_cdi_devices_to_runtime() && !first.cdi_devices.is_empty() {
        // 1.28 (PR #118254, pkg/kubelet/cm/devicemanager/pod_devices.go): the
        // field is known, so the answer is cached and checkpointed whole, but
        // the run-container options get CDI names only with the alpha gate on.
        let names: Vec<&str> = first.cdi_devices.iter().map(|d| d.name.as_str()).collect();
        warnings.push(Warning {
            rule: CDI_DEVICES_GATED.into(),
            evidence: format!(
                "kubelet {version} keeps cdi_devices in the answer but passes them to the runtime only with feature                  gate DevicePluginCDIDevices on (alpha in 1.28, off by default; on from 1.29), so on a default node                  the container gets none of: {}; return device nodes (DeviceSpec) or mounts too",
                names.join(", ")
            ),
        });
    }
    Ok((first, warnings))
}

/// The PreStartContainer calls to make: per container, per resource whose plugin requires it.
type PreStartPlan = Vec<(String, Vec<(String, Vec<String>, Option<PluginClient>)>)>;

fn plan_pre_start(inner: &Arc<Inner>, pod: &Pod) -> PreStartPlan {
    let st = inner.lock();
    pod.spec
        .containers
        .iter()
        .map(|c| {
            let calls = c
                .limits
                .keys()
                .filter_map(|r| {
                    let ids = pod.allocs.get(&c.name).and_then(|m| m.get(r)).map(|a| a.ids.clone())?;
                    let ep = st.resources.get(r).and_then(|x| x.endpoint.as_ref());
                    match ep {
                        Some(e) if !e.options.pre_start_required => None,
                        Some(e) => Some((r.clone(), ids, Some(e.pre_start_client.clone()))),
                        None => Some((r.clone(), ids, None)),
                    }
                })
                .collect();
            (c.name.clone(), calls)
        })
        .collect()
}

/// Starts the containers in order: PreStartContainer where required
/// (docs/kubelet-versions.md §5). A failing init container or sidecar stops the
/// containers after it; a failing regular container stops only itself.
async fn start_containers(inner: &Arc<Inner>, outcome: &mut AdmitOutcome, plan: PreStartPlan) {
    let mut blocked = false;
    for (name, calls) in plan {
        let Some(co) = outcome.containers.iter_mut().find(|c| c.name == name) else { continue };
        if blocked {
            co.start_error = Some("not started: an earlier container failed to start".into());
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
            None => co.started = true,
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
        None => Err(T::PRESTART_NO_ENDPOINT.fill(&[&resource])),
        Some(c) => c.pre_start(ids).await.map(|_| ()).map_err(|e| T::PRESTART_FAILED.fill(&[&go_rpc_error(&e)])),
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
    let calls = {
        let st = inner.lock();
        let i = st.pod_index(namespace, name).ok_or_else(|| Error::invalid(&place, "not found"))?;
        let pod = &st.pods[i];
        if !pod.spec.containers.iter().any(|c| c.name == container) {
            let names: Vec<&str> = pod.spec.containers.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::invalid(
                &place,
                format!("has no container {container:?} (containers: {})", names.join(", ")),
            ));
        }
        let mut calls = Vec::new();
        for (r, a) in pod.allocs.get(container).into_iter().flatten() {
            let res = st.resources.get(r);
            let ep = res.and_then(|x| x.endpoint.as_ref());
            let call = match ep {
                Some(e) if !e.options.pre_start_required => None,
                Some(e) if e.stopped => {
                    Some(Err(T::PRESTART_FAILED.fill(&[&T::ENDPOINT_STOPPED.fill(&[&e.socket.display()])])))
                }
                Some(e) => Some(Ok(e.pre_start_client.clone())),
                None if res.is_some_and(|x| !x.removed) => None, // restored, plugin not back: opts nil, no call
                None => Some(Err(T::PRESTART_NO_ENDPOINT.fill(&[&r]))),
            };
            calls.push((r.clone(), a.ids.clone(), call));
        }
        calls
    };
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
}

/// Deletes a pod and frees its devices.
pub(crate) async fn delete(inner: &Arc<Inner>, namespace: &str, name: &str) -> Result<DeleteOutcome> {
    let _turn = inner.admission.lock().await;
    let pod = {
        let mut st = inner.lock();
        let Some(i) = st.pod_index(namespace, name) else {
            let known: Vec<String> = st.pods.iter().map(|p| format!("{}/{}", p.spec.namespace, p.spec.name)).collect();
            return Err(Error::invalid(
                format!("pod {namespace}/{name}"),
                if known.is_empty() {
                    "not found (no pods are admitted)".to_string()
                } else {
                    format!("not found (admitted: {})", known.join(", "))
                },
            ));
        };
        let p = st.pods.remove(i);
        st.exclusive_cpus.remove(p.uid());
        p
    };
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
    inner.dirty();
    inner.emit(EventKind::PodDeleted { pod: name.into(), namespace: namespace.into(), freed: freed.clone() });
    Ok(DeleteOutcome { pod: name.into(), namespace: namespace.into(), freed })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(effective_request(&p, "example.com/gpu"), 3);
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
