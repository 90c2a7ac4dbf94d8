//! The claim-info cache's rules (pkg/kubelet/cm/dra/manager.go,
//! `prepareResources` and `unprepareResources`, per release): the validation
//! pass and its texts, the per-driver batches, how a driver's answers are
//! judged and recorded, who unprepares a claim, and what each container gets
//! (CDI IDs, PodResources `dynamic_resources`).

use std::collections::{BTreeMap, BTreeSet};

use super::{Batch, ClaimAnswer, ClaimInfo, DraState, key};
use crate::dra::claims::ClaimRef;
use crate::kubelet_sim::dra_claims::{ClaimObject, ContainerClaim, PodClaim};
use crate::proto::podresources::v1;

/// Who unprepares a pod's claims.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unpreparer<'a> {
    /// The pod worker, for a deleted pod (`SyncTerminatedPod` ->
    /// `unprepareResourcesForPod`), with the claims its spec names.
    Deleted(&'a [PodClaim]),
    /// The reconcile loop, for a pod that is no longer active
    /// (`reconcileLoop`): the claims the cache records for it.
    Gone,
}

impl DraState {
    /// The first half of `PrepareResources` for pod `pod_uid`: the
    /// validation pass (claim exists, reserved for the pod, allocated, a
    /// plugin for each driver), then each claim gets the pod's reference and
    /// the ones not prepared yet are batched per driver. An error is the
    /// kubelet's text without the `prepare dynamic resources: ` prefix; the
    /// cache keeps what was added before it (as the kubelet's does).
    pub fn begin_prepare(
        &mut self,
        pod: (&str, &str, &str),
        pod_claims: &[PodClaim],
        objects: &[ClaimObject],
    ) -> Result<Vec<Batch>, String> {
        let (namespace, pod_name, pod_uid) = pod;
        let mut found: Vec<&ClaimObject> = Vec::new();
        for pc in pod_claims {
            let n = &pc.resource_claim_name;
            let Some(obj) = objects.iter().find(|o| o.namespace == namespace && &o.name == n) else {
                return Err(format!(
                    "fetch ResourceClaim {n}: resourceclaims.resource.k8s.io {} not found",
                    crate::validate::go_quote(n)
                ));
            };
            if pc.from_template && obj.controller_uid.as_deref() != Some(pod_uid) {
                // resourceclaim.IsForPod: 1.36 spells Pod with a capital.
                let p = if self.version.capitalizes_pod_in_claim_owner_error() { "Pod" } else { "pod" };
                return Err(format!(
                    "ResourceClaim {namespace}/{n} was not created for {p} {namespace}/{pod_name} ({p} is not owner)"
                ));
            }
            // IsReservedForPod (k8s.io/dynamic-resource-allocation/resourceclaim):
            // the pod's UID must be listed; no list reserves the claim for no pod.
            if !obj.reserved_for.as_ref().is_some_and(|r| r.iter().any(|u| u == pod_uid)) {
                return Err(format!(
                    "pod {pod_name} ({pod_uid}) is not allowed to use ResourceClaim {n} ({})",
                    obj.uid
                ));
            }
            if !obj.allocated {
                return Err(format!("ResourceClaim {n}: not allocated"));
            }
            for r in &obj.results {
                self.plugin(&r.driver)?;
            }
            found.push(obj);
        }
        let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
        for obj in found {
            let info = self.claims.entry(key(namespace, &obj.name)).or_insert_with(|| ClaimInfo {
                uid: obj.uid.clone(),
                name: obj.name.clone(),
                namespace: namespace.to_string(),
                pods: BTreeSet::new(),
                drivers: obj.results.iter().map(|r| (r.driver.clone(), Vec::new())).collect(),
                prepared: false,
                unpreparing: false,
            });
            if info.uid != obj.uid {
                return Err(format!(
                    "old ResourceClaim with same name {} and different UID {} still exists (previous pod force-deleted?!)",
                    obj.name, info.uid
                ));
            }
            if info.unpreparing && self.version.refuses_claim_users_while_unpreparing() {
                return Err(format!("ResourceClaim {} is being unprepared", obj.name));
            }
            info.pods.insert(pod_uid.to_string());
            if info.prepared {
                continue;
            }
            let cref = ClaimRef { namespace: info.namespace.clone(), name: info.name.clone(), uid: info.uid.clone() };
            for driver in info.drivers.keys() {
                batches.entry(driver.clone()).or_default().push(cref.clone());
            }
        }
        Ok(batches.into_iter().map(|(driver, claims)| Batch { driver, claims }).collect())
    }

    /// A driver's `NodePrepareResources` answer for `batch`, by the
    /// kubelet's rules: an unknown UID, a per-claim error or a claim left out
    /// fails the pod. The devices of each answered claim are recorded
    /// (replacing the driver's earlier ones in 1.37, appended to them in 1.34-1.36).
    pub fn prepared(&mut self, batch: &Batch, mut answers: Vec<ClaimAnswer>) -> Result<(), String> {
        answers.sort_by(|a, b| a.uid.cmp(&b.uid));
        let n = answers.len();
        for a in answers {
            let Some(asked) = batch.claims.iter().find(|c| c.uid == a.uid) else {
                return Err(format!("NodePrepareResources returned result for unknown claim UID {}", a.uid));
            };
            if !a.error.is_empty() {
                return Err(format!("NodePrepareResources failed for ResourceClaim {}: {}", asked.name, a.error));
            }
            let Some(info) = self.claims.get_mut(&key(&asked.namespace, &asked.name)) else {
                return Err(format!(
                    "internal error: unable to get claim info for ResourceClaim {} in namespace {}",
                    asked.name, asked.namespace
                ));
            };
            let devices = info.drivers.entry(batch.driver.clone()).or_default();
            if self.version.resets_prepared_devices() {
                devices.clear();
            }
            devices.extend(a.devices);
        }
        let unfinished = batch.claims.len().saturating_sub(n);
        if unfinished != 0 {
            return Err(format!("NodePrepareResources skipped {unfinished} ResourceClaims"));
        }
        Ok(())
    }

    /// Every batch answered: the pod's claims are prepared.
    pub fn finish_prepare(&mut self, namespace: &str, pod_claims: &[PodClaim]) {
        for pc in pod_claims {
            if let Some(info) = self.claims.get_mut(&key(namespace, &pc.resource_claim_name)) {
                info.prepared = true;
            }
        }
    }

    /// The first half of `unprepareResources` for pod `pod_uid`, by release.
    /// The claims: for a deleted pod, 1.37 takes those the cache records for
    /// it (else its spec's), 1.34-1.36 its spec's only; the reconcile loop
    /// takes the cache's. Per claim: not cached, skipped; 1.37 also skips a
    /// claim that does not reference the pod (`hasPodReference`), where
    /// 1.34-1.36 go on, so a pod that never used the claim unprepares it for
    /// its one user; more than one pod referencing it, the pod's reference
    /// goes; else the claim is batched per driver (1.37 marks it as being
    /// unprepared: new users are refused until it is gone). Returns the
    /// batches and the claims to delete once they succeed.
    pub fn begin_unprepare(&mut self, namespace: &str, pod_uid: &str, who: Unpreparer) -> (Vec<Batch>, Vec<String>) {
        let cached: Vec<String> =
            self.claims.values().filter(|c| c.pods.contains(pod_uid)).map(|c| c.name.clone()).collect();
        let names = match who {
            Unpreparer::Gone => cached,
            Unpreparer::Deleted(_) if self.version.unprepares_only_claims_of_the_pod() && !cached.is_empty() => cached,
            Unpreparer::Deleted(spec) => spec.iter().map(|p| p.resource_claim_name.clone()).collect(),
        };
        let mut batches: BTreeMap<String, Vec<ClaimRef>> = BTreeMap::new();
        let mut last_user = Vec::new();
        for name in names {
            let Some(info) = self.claims.get_mut(&key(namespace, &name)) else { continue };
            if !info.pods.contains(pod_uid) && self.version.unprepares_only_claims_of_the_pod() {
                continue;
            }
            if info.pods.len() > 1 {
                info.pods.remove(pod_uid);
                continue;
            }
            if self.version.refuses_claim_users_while_unpreparing() {
                info.unpreparing = true;
            }
            let cref = ClaimRef { namespace: info.namespace.clone(), name: info.name.clone(), uid: info.uid.clone() };
            for driver in info.drivers.keys() {
                batches.entry(driver.clone()).or_default().push(cref.clone());
            }
            last_user.push(name);
        }
        (batches.into_iter().map(|(driver, claims)| Batch { driver, claims }).collect(), last_user)
    }

    /// A driver's `NodeUnprepareResources` answer, by the same rules as Prepare's.
    pub fn unprepared(batch: &Batch, mut answers: Vec<ClaimAnswer>) -> Result<(), String> {
        answers.sort_by(|a, b| a.uid.cmp(&b.uid));
        for a in &answers {
            let Some(asked) = batch.claims.iter().find(|c| c.uid == a.uid) else {
                return Err(format!("NodeUnprepareResources returned result for unknown claim UID {}", a.uid));
            };
            if !a.error.is_empty() {
                return Err(format!("NodeUnprepareResources failed for ResourceClaim {}: {}", asked.name, a.error));
            }
        }
        let unfinished = batch.claims.len().saturating_sub(answers.len());
        if unfinished != 0 {
            return Err(format!("NodeUnprepareResources skipped {unfinished} ResourceClaims"));
        }
        Ok(())
    }

    /// Every batch answered: the claims are deleted from the cache.
    pub fn finish_unprepare(&mut self, namespace: &str, names: &[String]) {
        for n in names {
            self.claims.remove(&key(namespace, n));
        }
    }

    /// The CDI IDs a container gets (`GetResources`): per claim it uses, the
    /// devices whose request names are empty or hold its request (every
    /// device when it names no request), drivers in name order.
    pub fn container_cdi(&self, namespace: &str, pod_claims: &[PodClaim], uses: &[ContainerClaim]) -> Vec<String> {
        let mut out = Vec::new();
        for u in uses {
            let Some(pc) = pod_claims.iter().find(|p| p.name == u.name) else { continue };
            let Some(info) = self.claims.get(&key(namespace, &pc.resource_claim_name)) else { continue };
            for devices in info.drivers.values() {
                for d in devices {
                    if u.request.is_empty() || d.request_names.is_empty() || d.request_names.contains(&u.request) {
                        out.extend(d.cdi_device_ids.iter().cloned());
                    }
                }
            }
        }
        out
    }

    /// PodResources `dynamic_resources` of a container
    /// (`GetDynamicResources`, cm/container_manager_linux.go): each claim the
    /// container names, every device of it with no request filtering, and
    /// the CDI list growing within a driver (device k lists the IDs of
    /// devices 0..k), as the kubelet builds it. A claim missing from the
    /// cache empties the list (the kubelet logs the error).
    pub fn dynamic_resources(
        &self,
        namespace: &str,
        pod_claims: &[PodClaim],
        uses: &[ContainerClaim],
    ) -> Vec<v1::DynamicResource> {
        let mut out = Vec::new();
        for pc in pod_claims.iter().filter(|p| uses.iter().any(|u| u.name == p.name)) {
            let Some(info) = self.claims.get(&key(namespace, &pc.resource_claim_name)) else { return Vec::new() };
            let mut claim_resources = Vec::new();
            for (driver, devices) in &info.drivers {
                let mut cdi = Vec::new();
                for d in devices {
                    cdi.extend(d.cdi_device_ids.iter().map(|id| v1::CdiDevice { name: id.clone() }));
                    claim_resources.push(v1::ClaimResource {
                        cdi_devices: cdi.clone(),
                        driver_name: driver.clone(),
                        pool_name: d.pool.clone(),
                        device_name: d.device.clone(),
                        share_id: d.share_id.clone(),
                    });
                }
            }
            out.push(v1::DynamicResource {
                claim_name: info.name.clone(),
                claim_namespace: info.namespace.clone(),
                claim_resources,
            });
        }
        out
    }
}
