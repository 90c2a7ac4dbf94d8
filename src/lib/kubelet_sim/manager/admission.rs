//! Admission transitions. An admission needs plugin calls in the middle
//! (GetPreferredAllocation, Allocate, PreStartContainer), so it is split:
//! the manager plans each step from the state (`plan_allocation`,
//! `pre_start_plan`, `restart_plan`), the shell makes the calls with the
//! plan's endpoint IDs, and the manager records the result (`admitting`
//! after each container, `admit` at the end, `admission_failed`). The pod
//! being admitted is the shell's value until `admit` takes it.

use std::collections::{BTreeMap, BTreeSet};

use super::Manager;
use super::rejection::{Rejection, unexpected};
use super::state::{Alloc, Pod, numa_map};
use crate::kubelet_sim::outcome::{AdmitOutcome, Warning};
use crate::kubelet_sim::pod::{ContainerKind, ContainerSpec};
use crate::proto::deviceplugin::v1beta1 as dp;

/// The choice made from the state before any call, for one (container,
/// resource): the devices reused from init containers, the free ones (split
/// by the Topology Manager's stored hint, docs/topology.md §3), and the
/// endpoints to call.
#[derive(Debug)]
pub(crate) struct AllocationPlan {
    /// Device IDs reused from init containers.
    pub reused: Vec<String>,
    /// What to take, and what to ask GetPreferredAllocation.
    pub take: crate::topology::Take,
    /// The endpoint to ask GetPreferredAllocation, when it offers it.
    pub preferred: Option<u64>,
    /// The endpoint to call Allocate on (`None`: no plugin).
    pub endpoint: Option<u64>,
}

/// One PreStartContainer call of a plan: the resource, its devices, and
/// the endpoint (`None`: none in the cache).
pub(crate) type PreStartCall = (String, Vec<String>, Option<u64>);

/// What a container restart calls, per resource with devices: `None` when
/// no PreStartContainer is required, else the endpoint or the kubelet's
/// error text without a call.
pub(crate) type RestartCall = (String, Vec<String>, Option<Result<u64, String>>);

/// The warning rule for cdi_devices a kubelet before 1.28 drops
/// (docs/protocol.md §1.2).
pub const CDI_DEVICES_UNKNOWN: &str = "cdi-devices-unknown";
/// The warning rule for cdi_devices a 1.28 kubelet keeps in the answer but,
/// with gate DevicePluginCDIDevices off (its default), never hands to the runtime.
pub const CDI_DEVICES_GATED: &str = "cdi-devices-gated";

impl Manager {
    /// What the kubelet takes from an Allocate answer: the first container
    /// response (none fails the admission, with the release's text), checked
    /// against the contract, and `cdi_devices` as the release plays them
    /// (docs/protocol.md §1.2): dropped before 1.28, kept but not passed to
    /// the runtime in 1.28.
    pub fn allocate_answer(
        &self,
        resp: &dp::AllocateResponse,
    ) -> Result<(dp::ContainerAllocateResponse, Vec<Warning>), Rejection> {
        let Some(first) = resp.container_responses.first().cloned() else {
            // docs/kubelet-versions.md §5: the gogo dump up to 1.33, nothing from 1.34.
            return Err(unexpected(crate::kubelet_texts::EMPTY_ALLOCATE.fill(&[&self.version.empty_allocate_text()])));
        };
        let mut warnings: Vec<Warning> =
            crate::contract::check_allocate(1, resp).into_iter().map(Warning::from).collect();
        let mut first = first;
        let version = self.version;
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
                    "kubelet {version} keeps cdi_devices in the answer but passes them to the runtime only with feature \
                     gate DevicePluginCDIDevices on (alpha in 1.28, off by default; on from 1.29), so on a default \
                     node the container gets none of: {}; return device nodes (DeviceSpec) or mounts too",
                    names.join(", ")
                ),
            });
        }
        Ok((first, warnings))
    }

    /// The reuse pool after a container of `kind` got `mine`
    /// (docs/kubelet-versions.md §5): a plain init container's devices join
    /// it, and up to 1.28 a sidecar's too (1.29+ keep them out, PR #120461);
    /// any other container's devices leave it.
    pub fn update_reuse(
        &self,
        kind: ContainerKind,
        mine: Option<&BTreeMap<String, Alloc>>,
        reuse: &mut BTreeMap<String, BTreeSet<String>>,
    ) {
        let joins =
            kind == ContainerKind::Init || (kind == ContainerKind::Sidecar && self.version.reuses_sidecar_devices());
        for (resource, a) in mine.into_iter().flatten() {
            let set = reuse.entry(resource.clone()).or_default();
            if joins {
                set.extend(a.ids.iter().cloned());
            } else {
                for id in &a.ids {
                    set.remove(id);
                }
            }
        }
    }

    /// A pod of this namespace and name is admitted.
    pub fn is_admitted(&self, namespace: &str, name: &str) -> bool {
        self.st.pod_index(namespace, name).is_some()
    }

    /// Allocate's first step for a device-plugin resource
    /// (`allocateContainerResources` in pkg/kubelet/cm/devicemanager/manager.go):
    /// `UpdateAllocatedDevices` drops the entries of pods no longer active.
    pub fn before_allocate(&mut self, pod: &Pod, resource: &str) {
        let st = &self.st;
        let device_plugin = st.resources.get(resource).is_some_and(|r| r.known())
            || st.any_allocated(resource)
            || pod.allocs.values().any(|m| m.contains_key(resource));
        if device_plugin {
            self.update_allocated_devices();
        }
    }

    /// The kubelet's `devicesToAllocate` before any call (see
    /// [`AllocationPlan`]). `Ok(None)`: not a device-plugin resource, or
    /// nothing required.
    pub fn plan_allocation(
        &self,
        pod: &Pod,
        resource: &str,
        required: u64,
        reusable: &BTreeSet<String>,
        hint: Option<crate::topology::Mask>,
    ) -> Result<Option<AllocationPlan>, Rejection> {
        let st = &self.st;
        let res = st.resources.get(resource).filter(|r| r.known());
        let pod_has = pod.allocs.values().any(|m| m.contains_key(resource));
        if res.is_none() && !st.any_allocated(resource) && !pod_has {
            return Ok(None); // not a device-plugin resource: the predicate handler judges it
        }
        let Some(r) = res else {
            return Err(unexpected(crate::kubelet_texts::UNREGISTERED.fill(&[&resource])));
        };
        let healthy: Vec<&crate::model::Device> = r.healthy().collect();
        if healthy.is_empty() {
            return Err(unexpected(crate::kubelet_texts::NO_HEALTHY.fill(&[&resource])));
        }
        if required == 0 {
            return Ok(None);
        }
        let reused: Vec<String> =
            reusable.iter().take(usize::try_from(required).unwrap_or(usize::MAX)).cloned().collect();
        let needed = required - reused.len() as u64;
        let mut available: Vec<(String, Option<Vec<i64>>)> = Vec::new();
        // equivalent mutant: `>=` also lists the free devices when none is
        // needed; nothing is short of 0 and plan_take ignores them then.
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
                return Err(unexpected(crate::kubelet_texts::UNAVAILABLE.fill(&[
                    &resource,
                    &needed,
                    &available.len(),
                ])));
            }
        }
        let ep = r.endpoint.as_ref();
        // The Topology Manager's stored hint splits the free devices (docs/topology.md §3).
        // equivalent mutant: `||` for `&&`: split ignores has_topology without a
        // hint, and puts devices without nodes under no affinity anyway.
        let has_topology =
            hint.is_some() && r.devices.iter().any(|d| d.numa_nodes.as_ref().is_some_and(|n| !n.is_empty()));
        let ids: Vec<String> = available.iter().map(|(id, _)| id.clone()).collect();
        let split = crate::topology::split(&available, has_topology, hint);
        Ok(Some(AllocationPlan {
            take: crate::topology::plan_take(&reused, &ids, &split, needed, required),
            reused,
            preferred: ep.filter(|e| e.options.get_preferred_allocation_available).map(|e| e.id),
            endpoint: ep.map(|e| e.id),
        }))
    }

    /// The resource's current endpoint is gone or its stream ended: a call
    /// fails before it is made (`endpoint ... has been stopped`: endpoint.go
    /// `isStopped`, true from the disconnect on).
    pub fn endpoint_stopped(&self, resource: &str) -> bool {
        self.st.resources.get(resource).and_then(|r| r.endpoint.as_ref()).is_none_or(|e| e.stopped)
    }

    /// Endpoint `id` is the resource's, stopped: its stream ended and the
    /// kubelet disconnected its client (`runClient` found it), closing the
    /// connection. An untracked client's stream end (1.26-1.36) and a
    /// replaced one's do not stop the stored endpoint.
    pub fn stopped_endpoint(&self, resource: &str, id: u64) -> bool {
        self.st.resources.get(resource).and_then(|r| r.endpoint.as_ref()).is_some_and(|e| e.id == id && e.stopped)
    }

    /// Device IDs per NUMA node, from the resource's current device list.
    pub fn numa_of(&self, resource: &str, ids: &[String]) -> BTreeMap<i64, Vec<String>> {
        let devices = self.st.resources.get(resource).map(|r| r.devices.as_slice()).unwrap_or_default();
        numa_map(ids, devices)
    }

    /// The pod being admitted holds these devices so far: every checkpoint
    /// write includes it from now on (the kubelet's `podDevices` holds a pod
    /// from its first allocation on).
    pub fn admitting(&mut self, pod: &Pod) {
        self.st.admitting = Some(pod.clone());
    }

    /// The admission was rejected: the pod being admitted is dropped (the
    /// checkpoint keeps what was written until the next write, as the kubelet's does).
    pub fn admission_failed(&mut self, pod: &Pod) {
        self.st.admitting = None;
        self.rejected(pod);
    }

    /// The CPUs the static CPU manager gave the rejected pod's containers
    /// before its rejection stay its own until the next admission (see
    /// `State::stale_cpus`).
    pub fn cpus_left_by_rejection(&mut self, uid: &str, cpus: &BTreeMap<String, Vec<u32>>) {
        if !cpus.is_empty() {
            self.st.stale_cpus.insert(uid.to_string(), cpus.clone());
        }
    }

    /// The CPU manager's `removeStaleState`, at the start of an admission:
    /// CPUs left by rejected pods are free again.
    pub fn remove_stale_cpus(&mut self) {
        self.st.stale_cpus.clear();
    }

    /// A rejected pod (at admission, or killed at its re-admission) is
    /// inactive: its checkpointed entries go at the device manager's next
    /// look, and the pod manager keeps it, phase Failed, without devices.
    pub(super) fn rejected(&mut self, pod: &Pod) {
        self.st.gone.insert(pod.uid().to_string());
        let kept = Pod { spec: pod.spec.clone(), allocs: BTreeMap::new(), running: BTreeSet::new() };
        self.st.rejected.insert((pod.spec.namespace.clone(), pod.spec.name.clone()), kept);
    }

    /// The predicate admit handler, for extended resources the device
    /// manager skipped (docs/kubelet-versions.md §5, every version): the
    /// first resource node status lists (capacity 0) rejects the pod; the
    /// others are stripped (`removeMissingExtendedResources`). Returns
    /// (listed, stripped).
    pub fn unknown_resources(&self, containers: &[ContainerSpec]) -> (Vec<String>, Vec<String>) {
        let st = &self.st;
        let unknown: BTreeSet<String> = containers
            .iter()
            .flat_map(|c| c.limits.iter())
            .filter(|(r, n)| **n > 0 && !st.resources.get(*r).is_some_and(|x| x.known()) && !st.any_allocated(r))
            .map(|(r, _)| r.clone())
            .collect();
        unknown.into_iter().partition(|r| st.resources.get(r).is_some_and(|x| x.reported))
    }

    /// The pod is admitted: its devices and exclusive CPUs are its own from now on.
    pub fn admit(&mut self, pod: Pod, outcome: &AdmitOutcome) {
        super::topology::commit(&mut self.st, pod.uid(), outcome);
        self.st.admitting = None;
        self.st.rejected.remove(&(pod.spec.namespace.clone(), pod.spec.name.clone()));
        self.st.pods.push(pod);
    }

    /// The PreStartContainer calls to make after admission: per container,
    /// per resource whose plugin requires it (docs/kubelet-versions.md §5).
    pub fn pre_start_plan(&self, pod: &Pod) -> Vec<(String, Vec<PreStartCall>)> {
        pod.spec
            .containers
            .iter()
            .map(|c| {
                let calls = c
                    .limits
                    .keys()
                    .filter_map(|r| {
                        let ids = pod.allocs.get(&c.name).and_then(|m| m.get(r)).map(|a| a.ids.clone())?;
                        match self.st.resources.get(r).and_then(|x| x.endpoint.as_ref()) {
                            Some(e) if !e.options.pre_start_required => None,
                            Some(e) => Some((r.clone(), ids, Some(e.id))),
                            None => Some((r.clone(), ids, None)),
                        }
                    })
                    .collect();
                (c.name.clone(), calls)
            })
            .collect()
    }

    /// The PreStartContainer calls of restarting one container of an
    /// admitted pod (docs/kubelet-versions.md §5, every version): a stopped
    /// endpoint fails the call, and after the removal the endpoint is not
    /// in the cache. `Err`: no such pod (`None`) or container (the names).
    pub fn restart_plan(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
    ) -> Result<Vec<RestartCall>, Option<Vec<String>>> {
        let st = &self.st;
        let i = st.pod_index(namespace, name).ok_or(None)?;
        let pod = &st.pods[i];
        if !pod.spec.containers.iter().any(|c| c.name == container) {
            return Err(Some(pod.spec.containers.iter().map(|c| c.name.clone()).collect()));
        }
        let mut calls = Vec::new();
        for (r, a) in pod.allocs.get(container).into_iter().flatten() {
            let res = st.resources.get(r);
            let call = match res.and_then(|x| x.endpoint.as_ref()) {
                Some(e) if !e.options.pre_start_required => None,
                Some(e) if e.stopped => Some(Err(crate::kubelet_texts::PRESTART_FAILED
                    .fill(&[&crate::kubelet_texts::ENDPOINT_STOPPED.fill(&[&e.socket.display()])]))),
                Some(e) => Some(Ok(e.id)),
                None if res.is_some_and(|x| !x.removed) => None, // restored, plugin not back: opts nil, no call
                None => Some(Err(crate::kubelet_texts::PRESTART_NO_ENDPOINT.fill(&[&r]))),
            };
            calls.push((r.clone(), a.ids.clone(), call));
        }
        Ok(calls)
    }
}
