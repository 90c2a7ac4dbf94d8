//! The manager's side of a kubelet restart with pods still running: the
//! kubelet gets every pod again from its sources as new (`HandlePodAdditions`
//! on the first pod list) and runs admission on each, before the sources are
//! ready. What the device manager's `devicesToAllocate` does with each
//! container's checkpointed devices then (pkg/kubelet/cm/devicemanager/manager.go,
//! docs/kubelet-versions.md §5 and §10):
//!
//! - **1.27+** (`isContainerAlreadyRunning`): a container the runtime reports
//!   running is skipped: no check, no GetPreferredAllocation, no Allocate.
//! - Any other container that holds devices (a plain init container that ran
//!   to completion; every container on 1.26) needs nothing new, but its
//!   resource must have a registered plugin with healthy devices and all its
//!   own devices healthy; otherwise the pod is rejected with
//!   `UnexpectedAdmissionError`, and the kubelet kills its running containers
//!   (kubernetes #124345, #138446: init and main containers both holding
//!   devices, the plugin not back yet).
//!
//! No plugin is called and no checkpoint written: nothing is allocated.

use std::collections::BTreeSet;

use super::Manager;
use super::state::Pod;
use crate::kubelet_sim::pod::ContainerKind;
use crate::kubelet_texts as T;

impl Manager {
    /// The container of the admitted pod `namespace/name` started: plain
    /// init containers run to completion, the others keep running (what the
    /// runtime reports at the next kubelet start).
    pub fn container_started(&mut self, namespace: &str, name: &str, container: &str) {
        let Some(i) = self.st.pod_index(namespace, name) else { return };
        let p = &mut self.st.pods[i];
        let kind = p.spec.containers.iter().find(|c| c.name == container).map(|c| c.kind);
        match kind {
            Some(ContainerKind::Init) | None => {
                p.running.remove(container);
            }
            Some(_) => {
                p.running.insert(container.to_string());
            }
        }
    }

    /// Judges `pod` at its re-admission after a kubelet restart (see the
    /// module docs): the device manager's error, to wrap as
    /// `UnexpectedAdmissionError`, or `None`: every container keeps its
    /// devices, no Allocate. Containers in spec order, init containers first.
    pub fn readmission(&self, pod: &Pod) -> Option<String> {
        let skips = self.version.skips_running_containers_after_restart();
        pod.spec
            .containers
            .iter()
            .filter(|c| !(skips && pod.running.contains(&c.name)))
            .flat_map(|c| pod.allocs.get(&c.name).into_iter().flatten())
            .find_map(|(resource, alloc)| self.kept_devices_refusal(resource, &alloc.ids))
    }

    /// The checks `devicesToAllocate` makes before "nothing needed": the
    /// resource is registered (its device set exists), has healthy devices,
    /// and `ids` are all healthy.
    pub(super) fn kept_devices_refusal(&self, resource: &str, ids: &[String]) -> Option<String> {
        let Some(r) = self.st.resources.get(resource).filter(|r| r.known()) else {
            return Some(T::UNREGISTERED.fill(&[&resource]));
        };
        let healthy: BTreeSet<&str> = r.healthy().map(|d| d.id.as_str()).collect();
        if healthy.is_empty() {
            return Some(T::NO_HEALTHY.fill(&[&resource]));
        }
        if !ids.iter().all(|id| healthy.contains(id.as_str())) {
            return Some(T::PREVIOUSLY_ALLOCATED_UNHEALTHY.fill(&[&resource]));
        }
        None
    }

    /// The pod refused at its re-admission leaves (the kubelet kills it):
    /// its devices are free.
    pub fn readmission_refused(&mut self, uid: &str) {
        if let Some(i) = self.st.pods.iter().position(|p| p.uid() == uid) {
            let pod = self.st.pods.remove(i);
            self.rejected(&pod);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::kubelet_sim::manager::Alloc;
    use crate::kubelet_sim::pod::{ContainerSpec, PodSpec};
    use crate::kubelet_version::KubeletVersion;
    use crate::model::Device;
    use crate::proto::deviceplugin::v1beta1 as dp;

    const GPU: &str = "example.com/gpu";

    fn manager(minor: u8, t0: Instant) -> Manager {
        Manager::new(KubeletVersion::Release(minor), Duration::from_secs(300), 1024, Default::default(), t0)
    }

    fn container(name: &str, kind: ContainerKind) -> ContainerSpec {
        ContainerSpec {
            name: name.into(),
            kind,
            limits: [(GPU.to_string(), 1)].into(),
            compute: Default::default(),
            claims: Vec::new(),
        }
    }

    fn alloc(id: &str) -> BTreeMap<String, Alloc> {
        let a = Alloc { ids: vec![id.into()], by_numa: BTreeMap::new(), response: Default::default() };
        [(GPU.to_string(), a)].into()
    }

    /// A pod whose init container (done) held g0 and whose main container
    /// (running) holds g1, as restored from the checkpoint.
    fn pod() -> Pod {
        let spec = PodSpec {
            name: "p".into(),
            namespace: "default".into(),
            uid: Some("uid-p".into()),
            containers: vec![container("init", ContainerKind::Init), container("main", ContainerKind::Regular)],
            resource_claims: Vec::new(),
            claim_objects: Vec::new(),
            extended_claim: None,
        };
        let allocs = [("init".to_string(), alloc("g0")), ("main".to_string(), alloc("g1"))].into();
        Pod { spec, allocs, running: ["main".to_string()].into() }
    }

    /// The checkpoint restored the resource, and its plugin is not back.
    fn restored(minor: u8) -> Manager {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let mut cp = m.checkpoint();
        cp.data.registered_devices.get_or_insert_default().insert(GPU.into(), Some(vec!["g0".into(), "g1".into()]));
        m.restore(&cp, t0);
        m
    }

    fn back(m: &mut Manager, health: &str) {
        let t0 = Instant::now();
        let who = crate::kubelet_sim::manager::Registrant {
            resource: GPU.into(),
            endpoint: "gpu.sock".into(),
            socket: "/dp/gpu.sock".into(),
            via: crate::kubelet_sim::events::Via::KubeletSock,
            version: "v1beta1".into(),
        };
        let id = m.register(&who, dp::DevicePluginOptions::default(), t0).expect("registered").id;
        let devices =
            ["g0", "g1"].iter().map(|d| Device { id: (*d).into(), health: health.into(), numa_nodes: None }).collect();
        m.snapshot(GPU, id, devices, 64, t0);
    }

    /// 1.27-1.37, plugin not back: the running main container is skipped,
    /// but the completed init container's devices are checked and the pod
    /// is refused (kubernetes #138446).
    #[test]
    fn init_and_main_with_devices_refused_before_the_plugin_is_back_1_27_to_1_37() {
        for minor in 27..=37 {
            let m = restored(minor);
            let want = "no healthy devices present; cannot allocate unhealthy devices example.com/gpu";
            assert_eq!(m.readmission(&pod()).as_deref(), Some(want), "1.{minor}");
        }
    }

    /// 1.27-1.37: a pod whose only device holder is running keeps its
    /// devices unchecked even though its plugin is not back.
    #[test]
    fn running_only_pod_kept_unchecked_1_27_to_1_37() {
        let mut p = pod();
        p.allocs.remove("init");
        for minor in 27..=37 {
            assert_eq!(restored(minor).readmission(&p), None, "1.{minor}");
        }
    }

    /// 1.26 has no running-container skip: the running main container is
    /// checked too, and refused while the plugin is not back.
    #[test]
    fn running_container_checked_on_1_26() {
        let mut p = pod();
        p.allocs.remove("init");
        let r = restored(26).readmission(&p);
        assert!(r.is_some_and(|e| e.starts_with("no healthy devices present")));
        p.running.clear();
        assert!(restored(37).readmission(&p).is_some(), "a container not running is checked on 1.37 too");
    }

    /// Every release: once the plugin is back with the devices healthy, the
    /// init container's devices pass the checks and are kept (no Allocate);
    /// on 1.26 the main container's pass them too.
    #[test]
    fn plugin_back_keeps_every_container_1_26_to_1_37() {
        for minor in 26..=37 {
            let mut m = restored(minor);
            back(&mut m, "Healthy");
            assert_eq!(m.readmission(&pod()), None, "1.{minor}");
        }
    }

    /// Every release: a kept device the plugin now reports unhealthy refuses
    /// the pod with the kubelet's "previously allocated" text.
    #[test]
    fn unhealthy_kept_device_refused_every_release() {
        let mut m = restored(37);
        back(&mut m, "Unhealthy");
        let r = m.readmission(&pod());
        assert!(r.is_some_and(|e| e.starts_with("no healthy devices present")));
        let mut m = restored(37);
        back(&mut m, "Healthy");
        m.st.resources.get_mut(GPU).unwrap().devices[0].health = "Unhealthy".into();
        let r = m.readmission(&pod());
        assert!(r.is_some_and(|e| e.starts_with("previously allocated devices are no longer healthy")));
    }

    /// A resource the checkpoint did not list is unregistered for the device
    /// manager: "cannot allocate unregistered device" (every release).
    #[test]
    fn unknown_resource_refused_every_release() {
        let m = manager(37, Instant::now());
        let r = m.readmission(&pod());
        assert_eq!(r.as_deref(), Some("cannot allocate unregistered device example.com/gpu"));
    }

    /// Starting a plain init container leaves it not running; a regular or
    /// sidecar container runs.
    #[test]
    fn started_containers_run_except_plain_init() {
        let mut m = restored(37);
        let mut p = pod();
        p.running.clear();
        m.st.pods.push(p);
        m.container_started("default", "p", "init");
        m.container_started("default", "p", "main");
        assert_eq!(m.st.pods[0].running, ["main".to_string()].into());
        m.readmission_refused("uid-p");
        assert!(m.st.pods.is_empty());
    }
}
