//! A kubelet restart with pods still running (`kubelet-sim restart`, the
//! scenario step `restart-kubelet` with `readmit_after`): the new kubelet
//! gets every pod again from its sources and admits each once more, before
//! its sources are ready, while the containers the old one started still
//! run. The rule is the manager's (`manager/restart.rs`): 1.27+ skips the
//! running containers; a container that is not running (a plain init
//! container that ran to completion; every container on 1.26) has its
//! checkpointed devices checked, and a plugin not back yet rejects the pod
//! with `UnexpectedAdmissionError` (kubernetes #124345, #138446). A rejected
//! pod is killed: it leaves and its devices are free.

use std::time::{Duration, Instant};

use super::SimHandle;
use super::events::EventKind;
use super::manager::Pod;
use super::outcome::{AdmitOutcome, ContainerOutcome, UNEXPECTED_ADMISSION_ERROR};
use super::pod::PodSpec;

impl SimHandle {
    /// Re-admits every admitted pod, in admission order, `after` past `t0`
    /// (the new kubelet.sock): see the module docs.
    pub(super) async fn readmit_running(&self, t0: Instant, after: Duration) -> Vec<AdmitOutcome> {
        let at = t0.checked_add(after).unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
        tokio::time::sleep_until(at.into()).await;
        let inner = &self.inner;
        let _turn = inner.admission.lock().await;
        let pods = inner.lock().pods();
        let mut out = Vec::new();
        // The new kubelet's pod manager holds only the pods re-admitted so
        // far: each is judged against those (HandlePodAdditions in pkg/kubelet/kubelet.go).
        let mut so_far: Vec<PodSpec> = Vec::new();
        for pod in pods {
            let refusal = {
                let m = inner.lock();
                match m.readmission(&pod) {
                    Some(err) => {
                        Some((UNEXPECTED_ADMISSION_ERROR.to_string(), crate::kubelet_texts::WRAPPER.fill(&[&err])))
                    }
                    None => {
                        let (_, stripped) = m.unknown_resources(&pod.spec.containers);
                        let others: Vec<&PodSpec> = so_far.iter().collect();
                        m.node_fit(&pod.spec, &super::admission::held_ids(&pod), &others, &stripped)
                            .map(|r| (r.reason, r.message))
                    }
                }
            };
            let mut outcome = readmission_outcome(&pod);
            if let Some((reason, message)) = refusal {
                inner.lock().readmission_refused(pod.uid());
                inner.emit(EventKind::AdmissionRejected {
                    pod: outcome.pod.clone(),
                    namespace: outcome.namespace.clone(),
                    reason: reason.clone(),
                    message: message.clone(),
                });
                outcome.reason = Some(reason);
                outcome.message = Some(message);
            } else {
                outcome.admitted = true;
                so_far.push(pod.spec.clone());
            }
            out.push(outcome);
        }
        out
    }
}

/// The outcome of one re-admission: every container in spec order, whether
/// it was running, and the devices it holds (kept, never allocated again).
fn readmission_outcome(pod: &Pod) -> AdmitOutcome {
    let mut outcome = AdmitOutcome::pending(&pod.spec, pod.uid().to_string());
    for c in &pod.spec.containers {
        let mut co = ContainerOutcome::new(c);
        co.running = Some(pod.running.contains(&c.name));
        for (resource, alloc) in pod.allocs.get(&c.name).into_iter().flatten() {
            co.keep(c, resource, &alloc.ids);
        }
        outcome.containers.push(co);
    }
    outcome
}
