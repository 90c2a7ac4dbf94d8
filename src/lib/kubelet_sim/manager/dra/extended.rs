//! KEP-5004 (`DRAExtendedResource`: alpha and off in 1.34-1.35, where the
//! status is ignored and the device manager handles the resource as any
//! other; beta and on by default in 1.36, GA in 1.37): the claim of a pod's
//! `status.extendedResourceClaimStatus` joins its claims and each container
//! the mappings name uses the mapped requests for the extended resources it
//! asks for.

use crate::kubelet_sim::manager::Manager;
use crate::kubelet_sim::pod::{ContainerClaim, PodClaim, PodSpec};

impl Manager {
    /// Maps a pod's extended-resource claim where the release has the gate
    /// on: the claim joins the pod's claims without a name (as
    /// `prepareResources` in pkg/kubelet/cm/dra/manager.go adds it), each
    /// container the mappings name uses its mapped requests for the extended
    /// resources it asks for (`GetResources`), and the mapped resources leave
    /// its limits, so the device manager skips them (`isDRAExtendedResource`
    /// in pkg/kubelet/cm/devicemanager/manager.go), as the admission
    /// predicate does. A pod mapped already is left as it is.
    pub fn dra_map_extended_claim(&self, spec: &mut PodSpec) {
        let Some(ext) = spec.extended_claim.clone() else { return };
        let v = self.version;
        if !v.has_dra()
            || !v.maps_extended_resources_to_claims()
            || spec.resource_claims.iter().any(|p| p.name.is_empty())
        {
            return;
        }
        for c in &mut spec.containers {
            let mapped: Vec<_> = ext.request_mappings.iter().filter(|m| m.container_name == c.name).collect();
            for m in &mapped {
                if c.limits.get(&m.resource_name).is_some_and(|n| *n > 0) {
                    c.claims.push(ContainerClaim { name: String::new(), request: m.request_name.clone() });
                }
            }
            c.limits.retain(|r, _| !mapped.iter().any(|m| &m.resource_name == r));
        }
        spec.resource_claims.push(PodClaim {
            name: String::new(),
            resource_claim_name: ext.resource_claim_name,
            from_template: false,
        });
    }
}
