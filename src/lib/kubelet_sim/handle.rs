//! [`SimHandle`], what drives a running sim in-process: its paths and
//! events, admission and deletion, status and counts, the grace period and
//! the stop. Restarts and reboots are its methods in `restart.rs` and
//! `reboot.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use super::admission::{self, DeleteOutcome, RestartOutcome};
use super::events::{EventKind, SimEvent};
use super::manager::{self, DraStatus, SimStatus};
use super::outcome::AdmitOutcome;
use super::pod::PodSpec;
use super::shell::Inner;
use super::wire::WireEvent;
use super::{dra, dra_file, late_socket, topology};
use crate::error::{Error, Result};
use crate::model::Counts;

/// Drives a running sim. Cheap to clone; every clone drives the same sim.
#[derive(Clone)]
pub struct SimHandle {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle").field("dir", &self.inner.paths.dir).finish_non_exhaustive()
    }
}

impl SimHandle {
    /// The device-plugin directory.
    pub fn dir(&self) -> &Path {
        &self.inner.paths.dir
    }

    /// The registration socket.
    pub fn kubelet_socket(&self) -> &Path {
        &self.inner.paths.kubelet_socket
    }

    /// The PodResources socket, when served.
    pub fn podresources_socket(&self) -> Option<&Path> {
        self.inner.paths.podresources_socket.as_deref()
    }

    /// The control socket, when served.
    pub fn control_socket(&self) -> Option<&Path> {
        self.inner.paths.control_socket.as_deref()
    }

    /// A receiver of the events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<SimEvent> {
        self.inner.events.subscribe()
    }

    /// The control protocol's `events` from number `since` on, and the number to ask for next.
    pub fn wire_events(&self, since: u64) -> (Vec<WireEvent>, u64) {
        let log = self.inner.wire_events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let from = usize::try_from(since).unwrap_or(usize::MAX).min(log.len());
        (log[from..].to_vec(), log.len() as u64)
    }

    /// A receiver of every event since the start (including `started`);
    /// only the first call gets it.
    pub fn events_from_start(&self) -> Option<broadcast::Receiver<SimEvent>> {
        self.inner.first_events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Admits a pod. A rejection is an `Ok` outcome with `admitted: false`;
    /// `Err` means the request itself is wrong (duplicate pod, bad names).
    pub async fn admit(&self, pod: PodSpec) -> Result<AdmitOutcome> {
        admission::admit(&self.inner, pod).await
    }

    /// Restarts one container of an admitted pod: PreStartContainer again
    /// where the plugin requires it; a failure stops only that container.
    pub async fn restart_container(&self, namespace: &str, pod: &str, container: &str) -> Result<RestartOutcome> {
        admission::restart_container(&self.inner, namespace, pod, container).await
    }

    /// Would this pod be admitted, and where? Nothing is allocated and no plugin is called.
    pub async fn admit_dry_run(&self, pod: PodSpec) -> Result<AdmitOutcome> {
        topology::dry_run(&self.inner, pod).await
    }

    /// Deletes a pod and frees its devices. `name` may also be the UID of a
    /// pod known only from the checkpoint (no admitted pod has that name):
    /// its entries are dropped and its devices freed.
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<DeleteOutcome> {
        if let Some(freed) = self.release_restored(namespace, name).await {
            return Ok(freed);
        }
        let deleted = admission::delete(&self.inner, namespace, name).await;
        if deleted.is_err() && self.inner.lock().dra_holds(name) {
            // A pod known only from dra_manager_state (the sim was started
            // again): its claims are unprepared, as the kubelet's reconcile
            // loop does for pods that are gone.
            let spec = PodSpec::shorthand(name, namespace, &[]);
            let dra = dra::unprepare_pod(&self.inner, &spec, name, manager::Unpreparer::Gone).await.map(Box::new);
            return Ok(DeleteOutcome { pod: name.into(), namespace: namespace.into(), freed: BTreeMap::new(), dra });
        }
        deleted
    }

    /// Frees the checkpoint entries of the restored pod with UID `uid`.
    async fn release_restored(&self, namespace: &str, uid: &str) -> Option<DeleteOutcome> {
        let inner = &self.inner;
        let _turn = inner.admission.lock().await;
        let freed = inner.lock().release_restored(namespace, uid)?;
        inner.dirty();
        let ns = "(checkpoint)".to_string();
        inner.emit(EventKind::PodDeleted { pod: uid.into(), namespace: ns.clone(), freed: freed.clone() });
        let spec = PodSpec::shorthand(uid, namespace, &[]);
        let dra = dra::unprepare_pod(inner, &spec, uid, manager::Unpreparer::Gone).await.map(Box::new);
        Some(DeleteOutcome { pod: uid.into(), namespace: ns, freed, dra })
    }

    /// The state: resources, plugins, pods.
    pub fn status(&self) -> SimStatus {
        self.status_with(true)
    }

    /// Like [`SimHandle::status`] without the device lists (cheap with many devices).
    pub fn summary(&self) -> SimStatus {
        self.status_with(false)
    }

    /// The state, with the device lists when `devices`.
    fn status_with(&self, devices: bool) -> SimStatus {
        let mut s = self.inner.lock().status(&self.inner.status_paths(), devices, Instant::now());
        s.resource_limit = self.inner.config.max_resources;
        s.running = !self.inner.is_stopped();
        s.kubelet_version = self.inner.config.kubelet_version;
        s.dra = self.dra_status();
        s
    }

    /// The DRA manager's part of the status, when it plays one.
    fn dra_status(&self) -> Option<Box<DraStatus>> {
        if !dra::enabled(&self.inner) {
            return None;
        }
        let mut st = self.inner.lock().dra_status();
        st.checkpoint =
            self.inner.config.registry_dir.as_deref().map(|r| dra_file::state_path(r).display().to_string());
        let root = self.inner.config.registry_dir.as_deref().and_then(std::path::Path::parent);
        st.api = match (self.inner.api.get(), &self.inner.api_client, &self.inner.config.api_kubeconfig) {
            (Some(h), _, _) => Some(manager::ApiView {
                server: h.url(),
                kubeconfig: root.map(|r| r.join("kubeconfig").display().to_string()).unwrap_or_default(),
                from: "--api-objects".into(),
            }),
            (None, Some(c), Some(k)) => Some(manager::ApiView {
                server: c.server().to_string(),
                kubeconfig: k.display().to_string(),
                from: "--kubeconfig".into(),
            }),
            _ => None,
        };
        Some(Box::new(st))
    }

    /// Capacity and allocatable per resource, as node status shows them
    /// (resources not yet in node status are left out).
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        self.inner.lock().counts()
    }

    /// Waits until `pred` holds for [`SimHandle::counts`], at most `timeout`.
    pub async fn wait_for_counts(
        &self,
        pred: impl Fn(&BTreeMap<String, Counts>) -> bool,
        timeout: Duration,
    ) -> Result<BTreeMap<String, Counts>> {
        let mut rx = self.subscribe();
        let deadline = crate::duration::deadline(timeout);
        loop {
            let counts = self.counts();
            if pred(&counts) {
                return Ok(counts);
            }
            tokio::select! {
                r = rx.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = r {
                        return Err(Error::invalid("kubelet-sim", "the sim has stopped"));
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(Error::Timeout { what: "the expected device counts".into(), timeout });
                }
            }
        }
    }

    /// Sets the grace period after a stream end (running timers follow it).
    pub fn set_grace_period(&self, grace: Duration) {
        self.inner.lock().set_grace_period(grace);
        self.inner.grace_changed.notify_waiters();
        self.inner.emit(EventKind::GracePeriodSet { grace_period_ms: crate::text::millis(grace) });
    }

    /// Stops the sim: closes every socket it serves (and removes them),
    /// drops plugin connections and writes the checkpoint a last time.
    pub async fn stop(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.shutdown.send_replace(true) {
            return Ok(());
        }
        let _turn = inner.admission.lock().await;
        late_socket::stop_registration(inner).await;
        let closed = inner.lock().drop_connections();
        inner.apply(closed);
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *inner.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for t in tasks {
            t.abort();
        }
        let services: Vec<JoinHandle<()>> =
            std::mem::take(&mut *inner.services.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for s in services {
            let _ = s.await;
        }
        let written = inner.write_checkpoint();
        if let Some(ctl) = inner.control_dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            ctl.release();
        }
        inner.emit(EventKind::Stopped {});
        written
    }
}
