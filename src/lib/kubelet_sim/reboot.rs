//! A node reboot (`dpctl kubelet-sim reboot`, the scenario step `reboot`):
//! every container is gone, the checkpoint is kept, the kubelet starts on it
//! (its sockets deleted, a new kubelet.sock, resources at 0 until their
//! plugins register again) and admits every pod again, one at a time.
//!
//! What the re-admission does is the kubelet's `devicesToAllocate` on a
//! node that rebooted (pkg/kubelet/cm/devicemanager/manager.go, every
//! release 1.34-1.37, played against the referee: docs/kubelet-versions.md
//! §10). The pods are the new kubelet's first batch from its pod sources,
//! admitted before the sources count as ready, so the device manager drops
//! no pod's checkpointed entries meanwhile (`UpdateAllocatedDevices` waits
//! for ready sources): every pod admitted again still finds its devices. A
//! resource whose plugin has not registered again (it has no healthy
//! device) rejects the pod with `UnexpectedAdmissionError`; a pod whose kept
//! devices are all healthy is admitted on them without an Allocate call. A
//! pod with no kept devices is admitted as a new pod.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::handle::SimHandle;
use super::manager::Pod;
use super::outcome::{AdmitOutcome, ContainerOutcome, UNEXPECTED_ADMISSION_ERROR};
use super::pod::PodSpec;
use crate::error::{Error, Result};

/// What a reboot did: every pod admitted again, in the order used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RebootReport {
    /// One admission outcome per pod, in the order they were admitted again.
    pub pods: Vec<AdmitOutcome>,
}

impl RebootReport {
    /// The pods that were not admitted again.
    pub fn rejected(&self) -> impl Iterator<Item = &AdmitOutcome> {
        self.pods.iter().filter(|p| !p.admitted)
    }
}

/// The admitted pods in `order` (names or NAMESPACE/NAME; empty: admission
/// order, the kubelet's creation order), or why the order is wrong.
pub fn order_pods(pods: Vec<Pod>, order: &[String]) -> Result<Vec<Pod>> {
    if order.is_empty() {
        return Ok(pods);
    }
    let mut left: Vec<Option<Pod>> = pods.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for name in order {
        let (ns, n) = name.split_once('/').unwrap_or(("default", name.as_str()));
        let at = left.iter().position(|p| p.as_ref().is_some_and(|p| p.spec.namespace == ns && p.spec.name == n));
        let Some(pod) = at.and_then(|i| left[i].take()) else {
            return Err(Error::invalid("reboot order", format!("{name:?} is not an admitted pod (or is named twice)")));
        };
        out.push(pod);
    }
    let missing: Vec<String> =
        left.into_iter().flatten().map(|p| format!("{}/{}", p.spec.namespace, p.spec.name)).collect();
    if !missing.is_empty() {
        return Err(Error::invalid(
            "reboot order",
            format!("name every admitted pod; missing: {}", missing.join(", ")),
        ));
    }
    Ok(out)
}

/// The pods of `pods` shuffled by `seed` (xorshift64*, Fisher-Yates): a
/// reproducible random order, as `kubelet-sim reboot --seed` prints it.
pub fn seeded_order(names: &[String], seed: u64) -> Vec<String> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut out = names.to_vec();
    for i in (1..out.len()).rev() {
        let j = usize::try_from(next() % (i as u64 + 1)).unwrap_or(0);
        out.swap(i, j);
    }
    out
}

impl SimHandle {
    /// Reboots the node: see the module docs. `readmit_after`: how long the
    /// kubelet takes from its new kubelet.sock to admitting the pods again
    /// (plugins that register within it are back in time).
    pub async fn reboot(&self, order: &[String], readmit_after: Duration) -> Result<RebootReport> {
        crate::duration::check(readmit_after).map_err(|e| {
            Error::invalid("readmit-after", format!("{} is {e}", crate::text::fmt_duration(readmit_after)))
        })?;
        // The order is checked before anything changes.
        let known = self.inner.lock().pods();
        order_pods(known, order)?;
        self.restart_with(Duration::ZERO, None).await?;
        tokio::time::sleep(readmit_after).await;
        self.readmit_all(order).await
    }

    /// A reboot whose pods are admitted again once every DRA driver their
    /// claims name has registered again, waiting at most `wait` (as the
    /// kubelet's pod workers retry a failed preparation until then):
    /// `dra smoke`'s reboot, where the driver starts again with the node.
    pub async fn reboot_when_drivers_back(&self, wait: Duration) -> Result<RebootReport> {
        let deadline = crate::duration::deadline(wait);
        let drivers = self.claim_drivers();
        self.restart_with(Duration::ZERO, None).await?;
        self.wait_dra_drivers(&drivers, deadline.saturating_duration_since(tokio::time::Instant::now())).await;
        self.readmit_all(&[]).await
    }

    /// Every pod admitted again, in `order`: a pod whose checkpointed
    /// devices are still there keeps them; the others go through admission
    /// (the DRA claims prepared again: new sandboxes). The pods are the new
    /// kubelet's first pod list: its sources are not ready until every one
    /// was admitted again.
    async fn readmit_all(&self, order: &[String]) -> Result<RebootReport> {
        self.inner.lock().set_sources_ready(false);
        let out = self.readmit_each(order).await;
        self.inner.lock().set_sources_ready(true);
        out.map(|pods| RebootReport { pods })
    }

    async fn readmit_each(&self, order: &[String]) -> Result<Vec<AdmitOutcome>> {
        let pods = {
            let taken = self.inner.lock().take_pods();
            order_pods(taken, order)?
        };
        // No checkpoint write here: the kubelet writes only after an
        // allocation, so a rejected re-admission leaves the file as it was.
        let mut out = Vec::new();
        for pod in pods {
            let asks = self.asks_for_devices(&pod.spec);
            let outcome = if asks && !pod.allocs.is_empty() {
                self.readmit_kept(pod).await
            } else {
                let mut spec = pod.spec;
                spec.uid = Some(pod_uid(&spec));
                self.admit(spec).await?
            };
            out.push(outcome);
        }
        Ok(out)
    }

    fn asks_for_devices(&self, spec: &PodSpec) -> bool {
        self.inner.lock().asks_for_devices(spec)
    }

    /// The pod whose checkpointed devices are still there: every container's
    /// devices must belong to a registered resource with healthy devices,
    /// all of its own healthy, and the pod must fit next to the pods admitted
    /// again before it (manager/fit.rs); then it is admitted on them, no
    /// Allocate called. It gets a new sandbox, so its claims are prepared
    /// again before its containers start (SyncPod,
    /// pkg/kubelet/kuberuntime/kuberuntime_manager.go; a failure keeps them
    /// all from starting), and each container starts afresh asking the
    /// device manager for its run options: PreStartContainer where the plugin
    /// requires it (GetDeviceRunContainerOptions in pkg/kubelet/cm/devicemanager/manager.go).
    async fn readmit_kept(&self, mut pod: Pod) -> AdmitOutcome {
        let uid = pod_uid(&pod.spec);
        let mut outcome = AdmitOutcome::pending(&pod.spec, uid);
        if let Some((reason, message)) = self.kept_refusal(&pod) {
            self.inner.lock().readmit_refused(&pod);
            outcome.reason = Some(reason);
            outcome.message = Some(message);
            return outcome;
        }
        for c in &pod.spec.containers {
            let mut co = ContainerOutcome::new(c);
            for (resource, alloc) in pod.allocs.get(&c.name).into_iter().flatten() {
                co.keep(c, resource, &alloc.ids);
            }
            outcome.containers.push(co);
        }
        outcome.admitted = true;
        let spec = pod.spec.clone();
        let plan = super::admission::plan_pre_start(&self.inner, &pod);
        pod.running.clear();
        // Nothing was allocated: the kubelet writes no checkpoint for it.
        self.inner.lock().readmit_kept(pod);
        if let Some(dra) = super::dra::prepare_pod(&self.inner, &spec).await {
            let failed = dra.error.clone();
            outcome.dra = Some(Box::new(dra));
            if let Some(e) = failed {
                for c in &mut outcome.containers {
                    c.start_error = Some(e.clone());
                }
                return outcome;
            }
        }
        super::admission::start_containers(&self.inner, &mut outcome, plan).await;
        outcome
    }

    /// Why a kept pod is refused: its devices gone or unhealthy, or it does
    /// not fit next to the pods admitted again before it.
    fn kept_refusal(&self, pod: &Pod) -> Option<(String, String)> {
        let m = self.inner.lock();
        if let Some(err) = m.readmit_refusal(pod) {
            return Some((UNEXPECTED_ADMISSION_ERROR.to_string(), crate::kubelet_texts::WRAPPER.fill(&[&err])));
        }
        let (_, stripped) = m.unknown_resources(&pod.spec.containers);
        let others = m.other_specs(pod.uid());
        let others: Vec<&PodSpec> = others.iter().collect();
        m.node_fit(&pod.spec, &super::admission::held_ids(pod), &others, &stripped).map(|r| (r.reason, r.message))
    }
}

fn pod_uid(spec: &PodSpec) -> String {
    spec.uid.clone().unwrap_or_default()
}
