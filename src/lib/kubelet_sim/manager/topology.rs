//! The sim's Topology Manager and static CPU manager at admission: collects
//! the device, CPU and memory providers' hints from the state for a
//! container (scope `container`) or the pod (scope `pod`), merges them under
//! the policy (pure logic in [`crate::topology`]: `policy.rs` decides
//! single-numa-node, restricted and best-effort), rejects with
//! `TopologyAffinityError`, gives Guaranteed containers exclusive CPUs under
//! the stored hint, and records all of it for the admit report. Also the
//! `--dry-run` admission that answers without allocating.

use std::collections::{BTreeMap, BTreeSet};

use super::Manager;
use super::rejection::Rejection;
use super::state::State;
use crate::kubelet_sim::outcome::{
    AdmitOutcome, ContainerOutcome, Placement, PreferredCall, ProviderHintsView, ResourceOutcome, TopologyDecision,
    TopologyReport, numa_ids,
};
use crate::kubelet_sim::pod::{ContainerKind, ContainerSpec, PodSpec};
use crate::kubelet_version::KubeletVersion;
use crate::topology::{
    self, CpuPolicy, Hint, Mask, Policy, ProviderHints, Role, Scope, TOPOLOGY_AFFINITY_ERROR,
    TOPOLOGY_AFFINITY_MESSAGE, TopologyConfig, cpu, hints,
};

fn role(kind: ContainerKind) -> Role {
    match kind {
        ContainerKind::Init => Role::Init,
        ContainerKind::Sidecar => Role::Sidecar,
        ContainerKind::Regular => Role::App,
    }
}

/// What this pod holds so far during its admission.
#[derive(Debug, Default)]
pub(crate) struct PodSoFar {
    /// Devices held by this pod's earlier containers, per resource.
    pub devices: BTreeMap<String, BTreeSet<String>>,
    /// CPUs given to this pod's containers so far.
    pub cpus: BTreeSet<u32>,
    /// CPUs of plain init containers that later containers may reuse.
    pub cpu_reuse: BTreeSet<u32>,
}

/// The Topology Manager's state for one admission.
pub(crate) struct PodTopology {
    config: TopologyConfig,
    guaranteed: bool,
    pod_hint: Option<Hint>,
    pub report: TopologyReport,
    pub so_far: PodSoFar,
}

fn affinity_error() -> Rejection {
    Rejection { reason: TOPOLOGY_AFFINITY_ERROR.into(), message: TOPOLOGY_AFFINITY_MESSAGE.into() }
}

fn unexpected(err: impl std::fmt::Display) -> Rejection {
    super::rejection::unexpected(err)
}

/// The device manager's view of one resource for hint generation.
fn device_provider(
    st: &State,
    config: &TopologyConfig,
    version: KubeletVersion,
    requests: &BTreeMap<String, u64>,
    so_far: &PodSoFar,
    reuse: &BTreeMap<String, BTreeSet<String>>,
) -> ProviderHints {
    let nodes = config.machine.nodes();
    let mut out = ProviderHints::new();
    for (resource, &request) in requests {
        let res = st.resources.get(resource).filter(|r| r.known());
        // A limit of 0 counts too: getContainerDeviceRequest keeps every
        // device-plugin resource of the limits (every release), so it gets hints.
        if res.is_none() && !st.any_allocated(resource) {
            continue; // not a device-plugin resource
        }
        let Some(r) = res else {
            out.insert(resource.clone(), Some(Vec::new()));
            continue;
        };
        let in_use = st.in_use(resource);
        let mine = so_far.devices.get(resource);
        let reusable = reuse.get(resource);
        // The kubelet keys devices by ID: `allDevices` keeps the last entry of
        // an ID a snapshot repeats, `healthyDevices` is a set.
        let by_id: BTreeMap<&str, Option<&[i64]>> =
            r.devices.iter().map(|d| (d.id.as_str(), d.numa_nodes.as_deref())).collect();
        let all: Vec<Option<&[i64]>> = by_id.values().copied().collect();
        let healthy: BTreeSet<&String> = r.healthy().map(|d| &d.id).collect();
        let available: Vec<Option<&[i64]>> = healthy
            .into_iter()
            .filter(|id| !in_use.contains(*id) && !mine.is_some_and(|m| m.contains(*id)))
            .filter(|id| !reusable.is_some_and(|x| x.contains(*id)))
            .map(|id| by_id.get(id.as_str()).copied().flatten())
            .collect();
        let reusable: Vec<Option<&[i64]>> = reusable
            .map(|set| set.iter().map(|id| by_id.get(id.as_str()).copied().flatten()).collect())
            .unwrap_or_default();
        let hint_nodes = hints::hint_nodes(&nodes, &all, version.device_hints_only_on_device_nodes());
        out.insert(resource.clone(), hints::device_hints(&hint_nodes, &all, &available, &reusable, &[], request));
    }
    out
}

/// CPUs no container holds, minus the reserved ones.
fn free_cpus(st: &State, config: &TopologyConfig, so_far: &PodSoFar) -> BTreeSet<u32> {
    let taken: BTreeSet<u32> = st.exclusive_cpus.values().flat_map(|m| m.values().flatten()).copied().collect();
    config
        .machine
        .cpus()
        .filter(|c| !config.reserved_cpus.contains(c) && !taken.contains(c) && !so_far.cpus.contains(c))
        .collect()
}

impl PodTopology {
    /// Starts an admission; in scope `pod` this is where the pod is judged
    /// (the rejection, if any, comes back with the state for the report).
    pub fn begin(m: &Manager, spec: &PodSpec, dry_run: bool) -> (PodTopology, Option<Rejection>) {
        let config = m.topology.clone();
        let guaranteed = cpu::is_guaranteed(spec.containers.iter().map(|c| &c.compute));
        let report = TopologyReport {
            policy: config.policy.name().into(),
            scope: config.scope.name().into(),
            cpu_manager_policy: match config.cpu_policy {
                CpuPolicy::None => "none".into(),
                CpuPolicy::Static => "static".into(),
            },
            dry_run,
            beside_admitted: false,
            decisions: Vec::new(),
            placements: Vec::new(),
            cpus: BTreeMap::new(),
        };
        let mut t = PodTopology { config, guaranteed, pod_hint: None, report, so_far: PodSoFar::default() };
        if t.config.policy != Policy::None && t.config.scope == Scope::Pod {
            let mut requests: BTreeMap<String, u64> = BTreeMap::new();
            for r in spec.containers.iter().flat_map(|c| c.limits.keys()) {
                let items: Vec<(Role, u64)> =
                    spec.containers.iter().map(|c| (role(c.kind), c.limits.get(r).copied().unwrap_or(0))).collect();
                requests.insert(r.clone(), cpu::pod_request(&items));
            }
            let cpu_items: Vec<(Role, u64)> =
                spec.containers.iter().map(|c| (role(c.kind), cpu::guaranteed_cpus(guaranteed, &c.compute))).collect();
            let cpus = cpu::pod_request(&cpu_items);
            match t.judge(m, None, &requests, cpus, &BTreeMap::new()) {
                Ok(h) => t.pod_hint = Some(h),
                Err(e) => return (t, Some(e)),
            }
        }
        (t, None)
    }

    /// Collects the hints, merges them and records the decision.
    fn judge(
        &mut self,
        m: &Manager,
        container: Option<&str>,
        requests: &BTreeMap<String, u64>,
        cpus: u64,
        reuse: &BTreeMap<String, BTreeSet<String>>,
    ) -> Result<Hint, Rejection> {
        let providers = {
            let st = &m.st;
            let version = m.version;
            let devices = device_provider(st, &self.config, version, requests, &self.so_far, reuse);
            let mut cpu_p = ProviderHints::new();
            if self.config.cpu_policy == CpuPolicy::Static && cpus > 0 {
                let free: Vec<u32> = free_cpus(st, &self.config, &self.so_far).into_iter().collect();
                let reuse: Vec<u32> = self.so_far.cpu_reuse.iter().copied().collect();
                let h = hints::cpu_hints(
                    &self.config.machine.nodes(),
                    &self.config.machine.node_of_cpu(),
                    &free,
                    &reuse,
                    cpus,
                );
                cpu_p.insert("cpu".into(), Some(h));
            }
            // The memory manager is not simulated (policy None): no preference.
            vec![devices, cpu_p, ProviderHints::new()]
        };
        let (best, admit) = self.config.decide(&providers).map_err(unexpected)?;
        let mut views = Vec::new();
        for (name, p) in ["device", "cpu", "memory"].iter().zip(&providers) {
            if p.is_empty() {
                views.push(ProviderHintsView { provider: (*name).into(), resource: None, request: 0, hints: None });
            }
            for (resource, h) in p {
                let request = if resource == "cpu" { cpus } else { requests.get(resource).copied().unwrap_or(0) };
                views.push(ProviderHintsView {
                    provider: (*name).into(),
                    resource: Some(resource.clone()),
                    request,
                    hints: h.as_ref().map(|l| l.iter().map(Hint::view).collect()),
                });
            }
        }
        self.report.decisions.push(TopologyDecision {
            container: container.map(String::from),
            hints: views,
            best: best.view(),
            admit,
        });
        if admit { Ok(best) } else { Err(affinity_error()) }
    }

    /// The hint stored for a container (its own in scope `container`, the
    /// pod's in scope `pod`; a nil mask under policy `none`).
    pub fn container_hint(
        &mut self,
        m: &Manager,
        c: &ContainerSpec,
        reuse: &BTreeMap<String, BTreeSet<String>>,
    ) -> Result<Option<Mask>, Rejection> {
        if self.config.policy == Policy::None {
            return Ok(None);
        }
        if let Some(h) = self.pod_hint {
            return Ok(h.mask);
        }
        let cpus = cpu::guaranteed_cpus(self.guaranteed, &c.compute);
        let hint = self.judge(m, Some(&c.name), &c.limits, cpus, reuse)?;
        Ok(hint.mask)
    }

    /// The static CPU manager's Allocate for one container, under `hint`.
    pub fn allocate_cpus(&mut self, m: &Manager, c: &ContainerSpec, hint: Option<Mask>) -> Result<(), Rejection> {
        let n = cpu::guaranteed_cpus(self.guaranteed, &c.compute);
        if self.config.cpu_policy != CpuPolicy::Static || n == 0 {
            return Ok(());
        }
        let mut allocatable = free_cpus(&m.st, &self.config, &self.so_far);
        allocatable.extend(self.so_far.cpu_reuse.iter().copied());
        let want = usize::try_from(n).unwrap_or(usize::MAX);
        let Some(cpus) = self.config.machine.allocate(&allocatable, hint, want) else {
            return Err(unexpected(crate::kubelet_texts::NOT_ENOUGH_CPUS.fill(&[&n, &allocatable.len()])));
        };
        if c.kind == ContainerKind::Init {
            self.so_far.cpu_reuse.extend(cpus.iter().copied());
        } else {
            for x in &cpus {
                self.so_far.cpu_reuse.remove(x);
            }
        }
        self.so_far.cpus.extend(cpus.iter().copied());
        let mut numa: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for x in &cpus {
            numa.entry(self.config.machine.node_of(*x)).or_default().push(x.to_string());
        }
        self.report.placements.push(Placement {
            container: c.name.clone(),
            resource: "cpu".into(),
            numa: numa_ids(&numa),
        });
        self.report.cpus.insert(c.name.clone(), cpus);
        Ok(())
    }

    /// Records a container's devices: held by the pod from now on, and where they went.
    pub fn placed(&mut self, container: &str, resource: &str, ids: &[String], by_numa: &BTreeMap<i64, Vec<String>>) {
        self.so_far.devices.entry(resource.into()).or_default().extend(ids.iter().cloned());
        self.report.placements.push(Placement {
            container: container.into(),
            resource: resource.into(),
            numa: numa_ids(by_numa),
        });
    }
}

/// Gives an admitted pod its exclusive CPUs in the state.
pub(super) fn commit(st: &mut State, uid: &str, outcome: &AdmitOutcome) {
    if let Some(t) = &outcome.topology
        && !t.cpus.is_empty()
    {
        st.exclusive_cpus.insert(uid.to_string(), t.cpus.clone());
    }
}

impl Manager {
    /// `kubelet-sim admit --dry-run`: the same hints, verdicts and choices
    /// as an admission, with no plugin call and nothing kept (see the shell's
    /// `dry_run`).
    pub fn dry_run(&self, spec: &PodSpec, outcome: &mut AdmitOutcome) -> Result<(), Rejection> {
        dry_run_pod(self, spec, outcome)
    }
}

fn dry_run_pod(m: &Manager, spec: &PodSpec, outcome: &mut AdmitOutcome) -> Result<(), Rejection> {
    let (mut t, rejected) = PodTopology::begin(m, spec, true);
    if let Some(e) = rejected {
        outcome.topology = Some(Box::new(t.report));
        return Err(e);
    }
    let mut reuse: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let result = (|| {
        for c in &spec.containers {
            let hint = t.container_hint(m, c, &reuse)?;
            let mut co = ContainerOutcome::new(c);
            for (resource, &required) in &c.limits {
                let Some(ro) = dry_run_resource(m, &mut t, c, resource, required, hint, &reuse)? else {
                    continue;
                };
                let set = reuse.entry(resource.clone()).or_default();
                for id in &ro.devices {
                    if c.kind == ContainerKind::Init {
                        set.insert(id.clone());
                    } else {
                        set.remove(id);
                    }
                }
                co.resources.push(ro);
            }
            t.allocate_cpus(m, c, hint)?;
            outcome.containers.push(co);
        }
        Ok(())
    })();
    outcome.topology = Some(Box::new(t.report));
    result
}

/// The device manager's choice for one (container, resource) without calling the plugin.
fn dry_run_resource(
    m: &Manager,
    t: &mut PodTopology,
    c: &ContainerSpec,
    resource: &str,
    required: u64,
    hint: Option<Mask>,
    reuse: &BTreeMap<String, BTreeSet<String>>,
) -> Result<Option<ResourceOutcome>, Rejection> {
    let st = &m.st;
    let res = st.resources.get(resource).filter(|r| r.known());
    let pod_has = t.so_far.devices.contains_key(resource);
    if res.is_none() && !st.any_allocated(resource) && !pod_has {
        return Ok(None);
    }
    let Some(r) = res else {
        return Err(unexpected(crate::kubelet_texts::UNREGISTERED.fill(&[&resource])));
    };
    if r.healthy().next().is_none() {
        return Err(unexpected(crate::kubelet_texts::NO_HEALTHY.fill(&[&resource])));
    }
    if required == 0 {
        return Ok(None);
    }
    let reused: Vec<String> = reuse
        .get(resource)
        .map(|s| s.iter().take(usize::try_from(required).unwrap_or(usize::MAX)).cloned().collect())
        .unwrap_or_default();
    let needed = required - reused.len() as u64;
    let in_use = st.in_use(resource);
    let mine = t.so_far.devices.get(resource);
    let avail: Vec<(String, Option<Vec<i64>>)> = r
        .healthy()
        .filter(|d| !in_use.contains(&d.id) && !mine.is_some_and(|m| m.contains(&d.id)))
        .filter(|d| !reuse.get(resource).is_some_and(|x| x.contains(&d.id)))
        .map(|d| (d.id.clone(), d.numa_nodes.clone()))
        .collect();
    // equivalent mutant: `>=` for `>`: nothing is short of 0 devices.
    if needed > 0 && (avail.len() as u64) < needed {
        return Err(unexpected(crate::kubelet_texts::UNAVAILABLE.fill(&[&resource, &needed, &avail.len()])));
    }
    let has_topology = r.devices.iter().any(|d| d.numa_nodes.as_ref().is_some_and(|n| !n.is_empty()));
    let ids: Vec<String> = avail.iter().map(|(id, _)| id.clone()).collect();
    let split = topology::split(&avail, has_topology, hint);
    let take = topology::plan_take(&reused, &ids, &split, needed, required);
    let offers = r.endpoint.as_ref().is_some_and(|e| e.options.get_preferred_allocation_available);
    let devices = take.finish(&[], required);
    let by_numa = super::state::numa_map(&devices, &r.devices);
    t.placed(&c.name, resource, &devices, &by_numa);
    Ok(Some(ResourceOutcome {
        resource: resource.into(),
        requested: required,
        reused,
        preferred: take.ask.filter(|_| offers).map(|a| PreferredCall {
            available: a.available,
            must_include: a.must_include,
            size: i32::try_from(a.size).unwrap_or(i32::MAX),
            answer: Vec::new(),
            warnings: Vec::new(),
        }),
        devices,
        allocation: None,
        warnings: Vec::new(),
        pre_start: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// docs/topology.md §1 (every version): hints count devices by ID, as the
    /// kubelet's `allDevices` map and `healthyDevices` set do, so an ID a
    /// snapshot repeats counts once.
    #[test]
    fn repeated_device_ids_count_once_in_hints() {
        use crate::model::Device;
        let dev =
            |id: &str, numa: i64| Device { id: id.into(), health: "Healthy".into(), numa_nodes: Some(vec![numa]) };
        let mut st = State::new(std::time::Duration::from_secs(1), std::time::Instant::now());
        let r = super::super::state::Resource {
            sets: true,
            devices: vec![dev("D0", 0), dev("D0", 0), dev("D1", 1)],
            ..Default::default()
        };
        st.resources.insert("example.com/dev".into(), r);
        let config = TopologyConfig { policy: crate::topology::Policy::BestEffort, ..TopologyConfig::default() };
        let requests = BTreeMap::from([("example.com/dev".to_string(), 2u64)]);
        let p = device_provider(&st, &config, Default::default(), &requests, &PodSoFar::default(), &BTreeMap::new());
        let hints: Vec<String> = p["example.com/dev"].iter().flatten().map(ToString::to_string).collect();
        // Two devices, one per node: only both nodes together hold 2 (preferred: no narrower mask could).
        assert_eq!(hints, ["{11 true}"]);
    }

    #[test]
    fn cpu_and_memory_quantities() {
        // A manifest's CPU in millicores (none finer than 1m), memory in bytes rounded up.
        let parse_cpu_millis = |q: &serde_json::Value| crate::kubelet_sim::pod::parse_quantity(q, 3, true).ok();
        let parse_bytes = |q: &serde_json::Value| crate::kubelet_sim::pod::parse_quantity(q, 0, false).ok();
        assert_eq!(parse_cpu_millis(&json!(2)), Some(2000));
        assert_eq!(parse_cpu_millis(&json!("500m")), Some(500));
        assert_eq!(parse_cpu_millis(&json!("1.5")), Some(1500));
        assert_eq!(parse_cpu_millis(&json!(0.25)), Some(250));
        assert_eq!(parse_cpu_millis(&json!("1.2345")), None);
        assert_eq!(parse_cpu_millis(&json!("x")), None);
        assert_eq!(parse_bytes(&json!("1Gi")), Some(1 << 30));
        assert_eq!(parse_bytes(&json!("99999999999999Ti")), None);
    }

    #[test]
    fn manifest_cpu_and_memory_make_a_guaranteed_pod() {
        let m = r#"{"metadata":{"name":"g"},"spec":{"containers":[{"name":"c","resources":{
            "limits":{"cpu":"2","memory":"1Gi","example.com/dev":1}}}]}}"#;
        let p = PodSpec::from_manifest(m, "g.json").unwrap();
        let c = &p.containers[0].compute;
        assert_eq!((c.cpu_limit_millis, c.memory_limit), (Some(2000), Some(1 << 30)));
        assert!(cpu::is_guaranteed([c]));
        assert_eq!(cpu::guaranteed_cpus(true, c), 2);
        let bad = m.replace("\"2\"", "\"two\"");
        let e = PodSpec::from_manifest(&bad, "g.json").unwrap_err().to_string();
        assert!(e.contains("g.json: spec.containers[0].resources.limits[cpu]"), "{e}");
    }
}
