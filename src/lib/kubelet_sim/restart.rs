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

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

use super::dra;
use super::events::EventKind;
use super::handle::SimHandle;
use super::late_socket::{serve_registration, stop_registration};
use super::manager::Pod;
use super::outcome::{AdmitOutcome, ContainerOutcome, ResourceReturn, RestartReport, UNEXPECTED_ADMISSION_ERROR};
use super::pod::PodSpec;
use super::shell::{restore, spawn_grace};
use crate::error::{Error, Result};

impl SimHandle {
    /// Restarts the kubelet: stops kubelet.sock, drops every plugin
    /// connection, writes the checkpoint and reads it back (pods keep their
    /// devices; resources wait at 0), deletes the sockets in the directory
    /// (never this sim's own PodResources or control socket), serves a new
    /// kubelet.sock, then waits up to `wait` for every plugin to register
    /// again and send its devices.
    pub async fn restart(&self, wait: Duration) -> Result<RestartReport> {
        self.restart_readmit(wait, None).await
    }

    /// [`SimHandle::restart`] with the kubelet's re-admission of every pod,
    /// pods still running (see `restart.rs`): `readmit_after` after the new
    /// kubelet.sock, at once when `None` (every kubelet start admits the
    /// pods its sources hand it, HandlePodAdditions in pkg/kubelet/kubelet.go).
    pub async fn restart_readmit(&self, wait: Duration, readmit_after: Option<Duration>) -> Result<RestartReport> {
        self.restart_with(wait, Some(readmit_after.unwrap_or(Duration::ZERO))).await
    }

    /// `kubelet-sim restart --no-readmit`: a restart whose pods are not
    /// admitted again (they keep their devices unchecked). A sim-only
    /// choice: every kubelet start admits the pods its sources hand it.
    pub async fn restart_without_readmission(&self, wait: Duration) -> Result<RestartReport> {
        self.restart_with(wait, None).await
    }

    /// The restart itself; `readmit_after: None` re-admits nothing (a
    /// reboot admits its pods itself, their containers gone).
    // long: the kubelet restart in its order (stop, checkpoint read, socket cleanup, a new
    // kubelet.sock, the re-admission, the wait for re-registration).
    pub(super) async fn restart_with(&self, wait: Duration, readmit_after: Option<Duration>) -> Result<RestartReport> {
        let inner = &self.inner;
        let turn = inner.admission.lock().await;
        if inner.is_stopped() {
            return Err(Error::invalid("kubelet-sim", "the sim has stopped"));
        }
        let expected: Vec<String> = inner.lock().expected_back();
        inner.emit(EventKind::Restarting { resources: expected.clone() });
        stop_registration(inner).await;
        let closed = inner.lock().drop_connections();
        inner.apply(closed);
        let snapshot = inner.lock().checkpoint();
        // A kubelet writes no checkpoint when it stops; the new one reads the
        // file as the old one last wrote it (readCheckpoint in
        // pkg/kubelet/cm/devicemanager/manager.go): a deleted pod's entries
        // are still there, and the devices listed are those of the last
        // device list update. A checkpoint the sim may not write is left
        // alone and the state carries over, as when there is no file (a
        // device manager that never held a device or a registration never
        // wrote one).
        let checkpoint = if inner.writes_checkpoint() && inner.paths.checkpoint.exists() {
            let _write = inner.checkpoint_write.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match crate::checkpoint::Checkpoint::read(&inner.paths.checkpoint, inner.config.checkpoint_v1)? {
                Some(cp) if cp.verify().ok() => cp,
                _ => snapshot,
            }
        } else {
            snapshot
        };
        let restored = restore(inner, &checkpoint);
        let restored_pods = inner.lock().pods_with_devices();
        let dra_restored_claims = dra::restart(inner)?;
        let cleanup = inner.cleanup();
        let mut rx = self.subscribe();
        // --kubelet-socket-delay holds at every start: the new kubelet.sock
        // appears late after a restart too (docs/kubelet-versions.md §10).
        let late = inner.config.kubelet_socket_delay;
        if !late.is_zero() {
            tokio::time::sleep(late).await;
        }
        serve_registration(inner).await?;
        let t0 = inner.lock().socket_created();
        inner.lock().restarted();
        for (name, generation) in &restored {
            spawn_grace(inner, name, *generation);
        }
        inner.registry_rescan.notify_one();
        inner.emit(EventKind::Restarted {
            deleted_sockets: cleanup.deleted_sockets.clone(),
            deleted_files: cleanup.deleted_files.clone(),
            would_delete: cleanup.would_delete.clone(),
            restored_pods,
            restored_resources: restored.iter().map(|(n, _)| n.clone()).collect(),
        });
        drop(turn);
        let readmitted = match readmit_after {
            Some(after) => {
                inner.lock().set_sources_ready(false);
                let out = self.readmit_running(t0, after).await;
                inner.lock().set_sources_ready(true);
                out
            }
            None => Vec::new(),
        };
        let deadline = crate::duration::deadline(wait.saturating_sub(t0.elapsed()));
        let mut announced: BTreeSet<String> = BTreeSet::new();
        loop {
            let report = self.returns(&expected, t0);
            for r in report.iter().filter(|r| r.reregistered) {
                if announced.insert(r.resource.clone()) {
                    inner.emit(EventKind::PluginReregistered {
                        resource: r.resource.clone(),
                        after_ms: r.register_after_ms.unwrap_or(0),
                    });
                }
            }
            let done = report.iter().all(|r| r.reregistered && r.first_snapshot_after_ms.is_some());
            if done {
                break;
            }
            tokio::select! {
                r = rx.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = r {
                        break;
                    }
                }
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        let resources = self.returns(&expected, t0);
        // The DRA drivers count as the plugins do: every driver an admitted
        // pod's claims name must be registered again within the wait.
        let drivers = self.claim_drivers();
        let dra_ok =
            self.wait_dra_drivers(&drivers, deadline.saturating_duration_since(tokio::time::Instant::now())).await;
        let report = RestartReport {
            kubelet_version: inner.config.kubelet_version,
            cleanup_rule: inner.config.kubelet_version.cleanup_rule(),
            deleted_sockets: cleanup.deleted_sockets,
            deleted_files: cleanup.deleted_files,
            would_delete: cleanup.would_delete,
            restored_pods,
            checkpoint: inner.config.checkpoint.then(|| inner.paths.checkpoint.display().to_string()),
            waited_ms: crate::text::millis(t0.elapsed()),
            all_returned: dra_ok && resources.iter().all(|r| r.reregistered && r.first_snapshot_after_ms.is_some()),
            resources,
            readmitted,
            kubelet_socket_late_ms: (!late.is_zero()).then(|| crate::text::millis(late)),
            dra_restored_claims,
        };
        inner.emit(EventKind::RestartReport { report: report.clone() });
        Ok(report)
    }

    /// The DRA drivers the admitted pods' claims name, sorted.
    pub(super) fn claim_drivers(&self) -> Vec<String> {
        let drivers: std::collections::BTreeSet<String> = self
            .inner
            .lock()
            .pods()
            .iter()
            .flat_map(|p| p.spec.claim_objects.iter().flat_map(|c| c.results.iter().map(|r| r.driver.clone())))
            .collect();
        drivers.into_iter().collect()
    }

    /// Waits (at most `wait`) until every driver named is registered with
    /// the DRA manager; true when they all are.
    pub async fn wait_dra_drivers(&self, drivers: &[String], wait: Duration) -> bool {
        let deadline = crate::duration::deadline(wait);
        let mut rx = self.subscribe();
        loop {
            if drivers.iter().all(|d| self.inner.lock().dra_plugin(d).is_ok()) {
                return true;
            }
            tokio::select! {
                r = rx.recv() => if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r { return false },
                () = tokio::time::sleep_until(deadline) => return false,
            }
        }
    }

    /// Per expected resource: registered since `t0`, and how fast.
    fn returns(&self, expected: &[String], t0: Instant) -> Vec<ResourceReturn> {
        let m = self.inner.lock();
        let ms = crate::text::millis;
        expected
            .iter()
            .map(|name| {
                let r = m.returned(name, t0);
                ResourceReturn {
                    resource: name.clone(),
                    reregistered: r.registered_at.is_some(),
                    register_after_ms: r.registered_at.map(|at| ms(at - t0)),
                    first_snapshot_after_ms: r.first_snapshot_at.map(|at| ms(at - t0)),
                    capacity: r.counts.capacity,
                    allocatable: r.counts.allocatable,
                }
            })
            .collect()
    }

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
