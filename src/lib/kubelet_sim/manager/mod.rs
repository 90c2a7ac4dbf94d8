//! The simulated device manager as a synchronous state machine: every
//! change to what the sim knows (registrations, device lists, stream ends,
//! grace expiry, pods, restarts) is one method of [`Manager`], which takes
//! the time as an argument and imports no runtime, gRPC or client code, so
//! each kubelet rule can be tested without a socket (`tests.rs`).
//!
//! The async shell around it (`kubelet_sim/registration.rs`, `admission.rs`,
//! `mod.rs`, ...) serves the sockets, dials plugins and runs the timers; it
//! calls these methods under the sim's mutex and then performs the
//! [`Effect`]s they return (publish an event, write the checkpoint, stop or
//! close a plugin connection, start a grace timer). Effects are values, not
//! calls through a trait, because the manager runs under a std mutex: the
//! shell performs them after releasing it, and tests read them as a list.
//!
//! The shape follows the kubelet's device manager
//! (pkg/kubelet/cm/devicemanager/manager.go): the endpoint side tells the
//! manager that a plugin connected, sent a device list or disconnected,
//! and the manager owns the state.

mod admission;
mod checkpoint;
mod dra;
mod fit;
mod podres;
mod reboot;
mod registration;
mod rejection;
mod restart;
mod state;
mod stream;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_admission;
#[cfg(test)]
mod tests_registration;
#[cfg(test)]
mod tests_status;
#[cfg(test)]
mod tests_support;
#[cfg(test)]
mod tests_topology;
mod topology;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub(crate) use admission::AllocationPlan;
pub use admission::{CDI_DEVICES_GATED, CDI_DEVICES_UNKNOWN};
pub use dra::{ApiView, ClaimInfo, DraInstance, DraStatus, PreparedDevice};
pub(crate) use dra::{Batch, ClaimAnswer, DeviceHealthView, DraEffect, DraRegistration, Registered, Unpreparer};
#[cfg(test)]
pub(crate) use fit::pod_request;
pub(crate) use registration::Registrant;
pub(crate) use rejection::{Rejection, unexpected};
use state::State;
#[cfg(test)]
pub(crate) use state::numa_map;
pub(crate) use state::{Alloc, Pod, StatusPaths, container_views};
pub use state::{PodStatus, ResourceStatus, RestoredContainer, RestoredPodStatus, SimStatus, default_engine};
pub(crate) use topology::PodTopology;

use super::events::EventKind;
use super::outcome::CheckpointStatus;
use crate::kubelet_version::KubeletVersion;
use crate::model::Counts;
use crate::topology::TopologyConfig;

/// What the shell must do after a transition, in order.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Publish this event.
    Emit(EventKind),
    /// Write the checkpoint now, not fsynced (a ListAndWatch update or a
    /// removal, as the kubelet writes after each).
    WriteCheckpoint,
    /// End this endpoint's ListAndWatch stream; the endpoint stays stored.
    StopStream(u64),
    /// The manager no longer stores this endpoint: close its connection.
    Close(u64),
    /// Remove `resource` when the grace period after its stop (of this
    /// generation) has passed: see [`Manager::grace_deadline`].
    StartGrace { resource: String, generation: u64 },
}

/// The effects of one transition.
pub(crate) type Effects = Vec<Effect>;

/// One resource's return after a restart, as the manager sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Return {
    /// When the new endpoint registered, if since the restart.
    pub registered_at: Option<Instant>,
    /// When it sent its first snapshot.
    pub first_snapshot_at: Option<Instant>,
    /// Node status now.
    pub counts: Counts,
}

/// The device manager: see the module docs.
#[derive(Debug)]
pub(crate) struct Manager {
    st: State,
    version: KubeletVersion,
    max_resources: usize,
    /// Topology Manager, CPU manager and the simulated machine.
    topology: TopologyConfig,
    /// The DRA manager (registered drivers, claim-info cache): changed only
    /// through the `dra_*` transitions (`dra/events.rs`).
    dra: dra::DraState,
}

impl Manager {
    /// A manager with no resources and no pods, playing `version`.
    pub fn new(
        version: KubeletVersion,
        grace_period: Duration,
        max_resources: usize,
        topology: TopologyConfig,
        now: Instant,
    ) -> Self {
        Manager {
            st: State::new(grace_period, now),
            version,
            max_resources,
            topology,
            dra: dra::DraState::new(version),
        }
    }

    /// Sets the grace period (running timers ask [`Manager::grace_deadline`] again).
    pub fn set_grace_period(&mut self, grace: Duration) {
        self.st.grace_period = grace;
    }

    /// A new kubelet.sock is served from `now`.
    pub fn socket_served(&mut self, now: Instant) {
        self.st.socket_created = now;
    }

    /// When the current kubelet.sock was created.
    pub fn socket_created(&self) -> Instant {
        self.st.socket_created
    }

    /// A restart finished.
    pub fn restarted(&mut self) {
        self.st.restarts += 1;
    }

    /// The endpoint `id` is still stored (current or superseded).
    pub fn knows_endpoint(&self, id: u64) -> bool {
        self.st.resources.values().any(|r| r.endpoint.iter().chain(&r.superseded).any(|e| e.id == id))
    }

    /// Every plugin connection ends (restart, stop): the endpoints are dropped.
    pub fn drop_connections(&mut self) -> Effects {
        let mut out = Vec::new();
        for r in self.st.resources.values_mut() {
            out.extend(r.endpoint.take().into_iter().chain(r.superseded.drain(..)).map(|e| Effect::Close(e.id)));
        }
        out
    }

    /// Capacity and allocatable per resource shown in node status.
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        self.st.resources.iter().filter(|(_, r)| r.reported).map(|(n, r)| (n.clone(), r.counts())).collect()
    }

    /// The resources a restart expects back (not removed).
    pub fn expected_back(&self) -> Vec<String> {
        self.st.resources.iter().filter(|(_, r)| !r.removed).map(|(n, _)| n.clone()).collect()
    }

    /// Whether `name`'s plugin registered at or after `since`, and when.
    pub fn returned(&self, name: &str, since: Instant) -> Return {
        let r = self.st.resources.get(name);
        let ep = r.and_then(|r| r.endpoint.as_ref()).filter(|e| e.registered_at >= since);
        Return {
            registered_at: ep.map(|e| e.registered_at),
            first_snapshot_at: ep.and_then(|e| e.first_snapshot_at),
            counts: r.map(state::Resource::counts).unwrap_or_default(),
        }
    }

    /// Admitted pods holding devices.
    pub fn pods_with_devices(&self) -> usize {
        self.st.pods.iter().filter(|p| !p.allocs.is_empty()).count()
    }

    /// The status view.
    pub fn status(&self, paths: &StatusPaths, with_devices: bool, now: Instant) -> SimStatus {
        self.st.status(paths, with_devices, now)
    }

    /// What the sim found in the checkpoint at start, once read.
    pub fn set_checkpoint_status(&mut self, status: CheckpointStatus) {
        self.st.checkpoint = Some(status);
    }

    /// The sim may write the checkpoint itself (else its own allocations file).
    pub fn writes_checkpoint(&self) -> bool {
        self.st.checkpoint.as_ref().is_some_and(|c| c.writes)
    }

    /// The UIDs restored from the sim's own allocations file (cleared once
    /// they moved into the checkpoint).
    pub fn set_journal_uids(&mut self, uids: std::collections::BTreeSet<String>) {
        self.st.journal_uids = uids;
    }

    /// The checkpoint of the current state.
    pub fn checkpoint(&self) -> crate::checkpoint::Checkpoint {
        checkpoint::from_state(&self.st)
    }

    /// The sim's own allocations file of the current state.
    pub fn journal(&self) -> crate::checkpoint::Checkpoint {
        checkpoint::journal_from_state(&self.st)
    }

    /// Restores a checkpoint (kubelet start, restart): known pods get their
    /// devices back, other entries are kept as they are, and every resource
    /// it lists waits at 0 for its plugin, its grace period running from
    /// `now`. Returns the restored resources and their generations.
    pub fn restore(&mut self, cp: &crate::checkpoint::Checkpoint, now: Instant) -> Vec<(String, u64)> {
        let st = &mut self.st;
        st.resources.clear();
        st.foreign_entries.clear();
        for pod in &mut st.pods {
            pod.allocs.clear();
        }
        for e in cp.data.pod_device_entries.iter().flatten() {
            let alloc = checkpoint::entry_alloc(e);
            match st.pods.iter_mut().find(|p| p.uid() == e.pod_uid) {
                Some(p) => {
                    p.allocs.entry(e.container_name.clone()).or_default().insert(e.resource_name.clone(), alloc);
                }
                None => st.foreign_entries.push(e.clone()),
            }
        }
        let mut restored = Vec::new();
        for name in cp.data.registered_devices.iter().flat_map(BTreeMap::keys) {
            let generation = st.next_id();
            let r = state::Resource {
                reported: true,
                restored: true,
                sets: true,
                stopped_at: Some(now),
                generation,
                ..state::Resource::default()
            };
            st.resources.insert(name.clone(), r);
            restored.push((name.clone(), generation));
        }
        restored
    }

    /// Frees the checkpoint entries of the restored pod with UID `uid`
    /// (known only from the checkpoint): the freed device IDs per resource,
    /// or `None` when an admitted pod has that name or no entry that UID.
    pub fn release_restored(&mut self, namespace: &str, uid: &str) -> Option<BTreeMap<String, Vec<String>>> {
        let st = &mut self.st;
        if st.pod_index(namespace, uid).is_some() || !st.foreign_entries.iter().any(|e| e.pod_uid == uid) {
            return None;
        }
        let mut freed: BTreeMap<String, Vec<String>> = BTreeMap::new();
        st.foreign_entries.retain(|e| {
            if e.pod_uid != uid {
                return true;
            }
            let list = freed.entry(e.resource_name.clone()).or_default();
            list.extend(e.device_ids.ids().into_iter().filter(|id| !list.contains(id)).collect::<Vec<_>>());
            false
        });
        Some(freed)
    }

    /// Deletes an admitted pod: its devices and exclusive CPUs are free.
    /// `Err` lists the admitted pods.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Result<Pod, Vec<String>> {
        let st = &mut self.st;
        let Some(i) = st.pod_index(namespace, name) else {
            return Err(st.pods.iter().map(|p| format!("{}/{}", p.spec.namespace, p.spec.name)).collect());
        };
        let p = st.pods.remove(i);
        st.exclusive_cpus.remove(p.uid());
        st.gone.insert(p.uid().to_string());
        Ok(p)
    }

    /// The device manager's `UpdateAllocatedDevices`
    /// (pkg/kubelet/cm/devicemanager/manager.go): once the pod sources are
    /// ready, the entries of pods no longer active (deleted, killed or
    /// rejected by this sim, restored from the checkpoint by a restart) are
    /// dropped in memory; the next checkpoint write leaves them out.
    pub fn update_allocated_devices(&mut self) {
        let st = &mut self.st;
        if !st.sources_ready {
            return;
        }
        let gone = &st.gone;
        st.foreign_entries.retain(|e| !gone.contains(&e.pod_uid));
    }

    /// A deleted pod whose termination failed (its claims did not
    /// unprepare) stays active with its devices, its containers stopped.
    pub fn still_terminating(&mut self, mut pod: Pod) {
        pod.running.clear();
        self.st.gone.remove(pod.uid());
        self.st.pods.push(pod);
    }

    /// Whether the pod sources are ready (false while a restarted kubelet
    /// admits its first pod list).
    pub fn set_sources_ready(&mut self, ready: bool) {
        self.st.sources_ready = ready;
    }
}
