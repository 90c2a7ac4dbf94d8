//! The manager's side of a node reboot (the shell's `SimHandle::reboot`):
//! the pods to admit again, and the first one's readmission on its kept
//! devices (pkg/kubelet/cm/devicemanager/manager.go `devicesToAllocate`,
//! played against the referee: docs/kubelet-versions.md §10).

use super::Manager;
use super::state::Pod;
use crate::kubelet_sim::pod::PodSpec;

impl Manager {
    /// The admitted pods, in admission order.
    pub fn pods(&self) -> Vec<Pod> {
        self.st.pods.clone()
    }

    /// Takes every admitted pod out, to be admitted again.
    pub fn take_pods(&mut self) -> Vec<Pod> {
        std::mem::take(&mut self.st.pods)
    }

    /// Whether any container asks for a resource the device manager handles.
    pub fn asks_for_devices(&self, spec: &PodSpec) -> bool {
        spec.containers.iter().flat_map(|c| c.limits.iter()).any(|(r, n)| *n > 0 && self.st.resources.contains_key(r))
    }

    /// Why `pod` cannot be admitted again on its kept devices (the device
    /// manager's error, to be wrapped as `UnexpectedAdmissionError`): every
    /// container's devices must belong to a registered resource with healthy
    /// devices, all of its own healthy.
    pub fn readmit_refusal(&self, pod: &Pod) -> Option<String> {
        pod.spec
            .containers
            .iter()
            .flat_map(|c| pod.allocs.get(&c.name).into_iter().flatten())
            .find_map(|(resource, alloc)| self.kept_devices_refusal(resource, &alloc.ids))
    }

    /// `pod` is refused at its re-admission after a reboot: the pod manager
    /// keeps it, phase Failed, without devices (HandlePodAdditions in
    /// pkg/kubelet/kubelet.go adds the pod to the pod manager before
    /// canAdmitPod, and rejectPod only sets its status), so 1.34's
    /// PodResources `Get` still finds it, as the referee shows.
    pub fn readmit_refused(&mut self, pod: &Pod) {
        self.rejected(pod);
    }

    /// `pod` is admitted again on its kept devices, no plugin called and no
    /// checkpoint written (the kubelet writes only after an Allocate).
    pub fn readmit_kept(&mut self, pod: Pod) {
        self.st.pods.push(pod);
    }
}
