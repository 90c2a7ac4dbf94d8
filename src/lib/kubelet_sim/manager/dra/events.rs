//! The DRA manager's transitions: each event the shell (`kubelet_sim/dra.rs`)
//! reports is one method of [`Manager`], which changes the DRA state under
//! the sim's lock in one step and returns the [`DraEffect`]s to perform
//! after it, in order, as the device-plugin side returns its `Effect`s. The
//! kubelet's DRA plugin manager also handles a socket's removal in one
//! critical section (`DeRegisterPlugin` in
//! pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Batch, ClaimAnswer, DeviceHealthView, DraInstance, DraState, DraStatus, Unpreparer};
use crate::dra::HealthApi;
use crate::kubelet_sim::events::EventKind;
use crate::kubelet_sim::manager::Manager;
use crate::kubelet_sim::pod::PodSpec;

/// What the DRA shell must do after a transition, in order.
#[derive(Debug, Clone)]
pub(crate) enum DraEffect {
    /// Publish this event.
    Emit(EventKind),
    /// Write `dra_manager_state` now (where the sim may).
    WriteState,
    /// Delete the node's ResourceSlices now: all, or the driver's
    /// (`wipeResourceSlices`; `reason` is `start`, `restart` or `deregistered`).
    Wipe { driver: Option<String>, reason: &'static str },
    /// After the wiping delay, report [`Manager::dra_wipe_timer`] with this generation.
    ScheduleWipe { driver: String, generation: u64 },
    /// Open the instance's health stream with `api`, kept while
    /// [`Manager::dra_stream_current`] holds for `generation`.
    StartHealth { instance: DraInstance, api: HealthApi, generation: u64 },
}

/// A `DRAPlugin` registration socket's GetInfo, as the plugin watcher hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DraRegistration {
    /// GetInfo `name`.
    pub driver: String,
    /// GetInfo `endpoint` (the registration socket when empty).
    pub endpoint: String,
    /// The socket the sim dials for the endpoint.
    pub socket: PathBuf,
    /// The registration socket.
    pub registration: PathBuf,
    /// GetInfo `supported_versions`, in the driver's order.
    pub supported: Vec<String>,
}

/// What `RegisterPlugin` made of a registration.
#[derive(Debug, Clone)]
pub(crate) enum Registered {
    /// In the DRA manager: notify the driver of its success, then report
    /// [`Manager::dra_notified`].
    Added(DraInstance),
    /// Refused: notify the driver of `message`; `retry`: the plugin watcher
    /// tries again with its backoff.
    Refused { message: String, retry: bool, effects: Vec<DraEffect> },
}

impl Manager {
    /// `ValidatePlugin` then `RegisterPlugin` for a `DRAPlugin` socket
    /// (pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go):
    /// a validation failure is retried in every release; a refused
    /// registration is retried where the release takes refused plugins out
    /// of the actual state (1.36+).
    pub fn dra_register(&mut self, r: &DraRegistration) -> Registered {
        let refused = |message: String, retry: bool| Registered::Refused {
            effects: vec![DraEffect::Emit(EventKind::DraRegistrationRejected {
                driver: r.driver.clone(),
                socket: r.registration.display().to_string(),
                message: message.clone(),
            })],
            message,
            retry,
        };
        if let Err(e) = self.dra.validate(&r.driver, &r.endpoint, &r.supported) {
            return refused(format!("RegisterPlugin error -- plugin validation failed with err: {e}"), true);
        }
        match self.dra.register(&r.driver, &r.endpoint, r.socket.clone(), r.registration.clone(), &r.supported) {
            Ok(inst) => Registered::Added(inst),
            Err(e) => refused(
                format!("RegisterPlugin error -- plugin registration failed with err: {e}"),
                self.version.retries_refused_registry_plugins(),
            ),
        }
    }

    /// The success notification of an added instance was delivered or not.
    /// Undelivered, 1.36+ take the plugin out again and retry it (returns
    /// false); 1.34-1.35 keep it. Kept, the driver's pending slice wipe is
    /// cancelled (back in time), its health stream opens where the release
    /// opens one, and the registration is published.
    pub fn dra_notified(&mut self, r: &DraRegistration, inst: &DraInstance, delivered: bool) -> (bool, Vec<DraEffect>) {
        if !delivered && self.version.deregisters_on_undelivered_registration() {
            self.dra.deregister(&inst.driver, &inst.endpoint);
            return (false, Vec::new());
        }
        self.dra.bump_wipe(&inst.driver);
        let mut out = Vec::new();
        if let Some(api) = inst.health {
            let generation = self.dra.new_stream(&inst.driver, &inst.endpoint);
            out.push(DraEffect::StartHealth { instance: inst.clone(), api, generation });
        }
        out.push(DraEffect::Emit(EventKind::DraRegistered {
            driver: inst.driver.clone(),
            endpoint: inst.endpoint.clone(),
            service: inst.service.advertised().to_string(),
            supported_versions: r.supported.clone(),
            registration: r.registration.display().to_string(),
        }));
        (true, out)
    }

    /// A registration socket was deleted: its instance is deregistered and,
    /// the driver's last instance gone, its slices are wiped after the delay.
    pub fn dra_socket_removed(&mut self, registration: &Path) -> Vec<DraEffect> {
        let Some(inst) = self.dra.instances().find(|i| i.registration == registration).cloned() else {
            return Vec::new();
        };
        self.dra.deregister(&inst.driver, &inst.endpoint);
        let last = self.dra.plugin(&inst.driver).is_err();
        let mut out =
            vec![DraEffect::Emit(EventKind::DraDeregistered { driver: inst.driver.clone(), endpoint: inst.endpoint })];
        if last {
            let generation = self.dra.bump_wipe(&inst.driver);
            out.push(DraEffect::ScheduleWipe { driver: inst.driver, generation });
        }
        out
    }

    /// The wiping delay after the driver's last instance went has passed:
    /// its slices go unless an instance registered since (or a newer wipe
    /// took over).
    pub fn dra_wipe_timer(&self, driver: &str, generation: u64) -> Vec<DraEffect> {
        if self.dra.wipe_due(driver, generation) {
            vec![DraEffect::Wipe { driver: Some(driver.to_string()), reason: "deregistered" }]
        } else {
            Vec::new()
        }
    }

    /// A DRA plugin manager starts: no driver has registered yet, so the
    /// node's slices go.
    pub fn dra_started(&self) -> Vec<DraEffect> {
        vec![DraEffect::Wipe { driver: None, reason: "start" }]
    }

    /// A kubelet restart, its first half: the old manager's claims are
    /// written, the plugin manager starts empty (every driver registers
    /// again) and, new, deletes the node's slices. The shell then reads the
    /// file back and reports [`Manager::dra_restore`].
    pub fn dra_restart(&mut self) -> Vec<DraEffect> {
        self.dra.drop_instances();
        vec![DraEffect::WriteState, DraEffect::Wipe { driver: None, reason: "restart" }]
    }

    /// The claim cache of a new DRA manager: the file's entries (`Some`),
    /// or, with no file the sim may read, the entries in memory; none
    /// prepared (`newClaimInfoFromState`). A restart prepares nothing
    /// itself: SyncPod prepares only when it creates a sandbox
    /// (pkg/kubelet/kuberuntime/kuberuntime_manager.go), so a restored claim
    /// is prepared again by its next new user or after a reboot. `Err`: the
    /// kubelet's `checkpoint is corrupted`.
    pub fn dra_restore(&mut self, report: Option<&crate::dra::state::StateReport>) -> Result<usize, String> {
        match report {
            Some(r) => self.dra.restore(r),
            None => {
                self.dra.unprepare_all_in_memory();
                Ok(self.dra.claims().count())
            }
        }
    }

    /// One health message of `driver`: the devices whose health changed are published.
    pub fn dra_health(&mut self, driver: &str, devices: Vec<DeviceHealthView>) -> Vec<DraEffect> {
        self.dra
            .set_health(driver, devices)
            .into_iter()
            .map(|d| {
                DraEffect::Emit(EventKind::DraDeviceHealth {
                    driver: d.driver,
                    pool: d.pool,
                    device: d.device,
                    health: d.health,
                    message: d.message,
                })
            })
            .collect()
    }

    /// `PrepareResources`, its first half, for an admitted pod: the
    /// validation pass, the pod's references (written), the batches to call.
    pub fn dra_begin_prepare(&mut self, spec: &PodSpec) -> (Result<Vec<Batch>, String>, Vec<DraEffect>) {
        let before = self.dra.claims().cloned().collect::<Vec<_>>();
        let uid = spec.uid.as_deref().unwrap_or_default();
        let begun =
            self.dra.begin_prepare((&spec.namespace, &spec.name, uid), &spec.resource_claims, &spec.claim_objects);
        let changed = self.dra.claims().ne(before.iter());
        (begun, if changed { vec![DraEffect::WriteState] } else { Vec::new() })
    }

    /// The driver's instance a batch goes to.
    pub fn dra_plugin(&self, driver: &str) -> Result<DraInstance, String> {
        self.dra.plugin(driver)
    }

    /// A driver's `NodePrepareResources` answer for `batch`.
    pub fn dra_prepared(&mut self, batch: &Batch, answers: Vec<ClaimAnswer>) -> Result<(), String> {
        self.dra.prepared(batch, answers)
    }

    /// Every batch answered: the claims are prepared (written); returns the
    /// CDI IDs of each container that names a claim (`GetResources`).
    pub fn dra_finish_prepare(&mut self, spec: &PodSpec) -> (BTreeMap<String, Vec<String>>, Vec<DraEffect>) {
        self.dra.finish_prepare(&spec.namespace, &spec.resource_claims);
        let cdi = spec
            .containers
            .iter()
            .filter(|c| !c.claims.is_empty())
            .map(|c| (c.name.clone(), self.dra.container_cdi(&spec.namespace, &spec.resource_claims, &c.claims)))
            .collect();
        (cdi, vec![DraEffect::WriteState])
    }

    /// `unprepareResources`, its first half (see `DraState::begin_unprepare`).
    pub fn dra_begin_unprepare(
        &mut self,
        namespace: &str,
        pod_uid: &str,
        who: Unpreparer,
    ) -> (Vec<Batch>, Vec<String>) {
        self.dra.begin_unprepare(namespace, pod_uid, who)
    }

    /// A driver's `NodeUnprepareResources` answer for `batch`.
    pub fn dra_unprepared(&self, batch: &Batch, answers: Vec<ClaimAnswer>) -> Result<(), String> {
        DraState::unprepared(batch, answers)
    }

    /// Every batch answered: the claims are deleted from the cache (written).
    /// A failed unprepare writes nothing: the references dropped from shared
    /// claims are written by the next successful call, as the kubelet's.
    pub fn dra_finish_unprepare(&mut self, namespace: &str, names: &[String]) -> Vec<DraEffect> {
        self.dra.finish_unprepare(namespace, names);
        vec![DraEffect::WriteState]
    }

    /// True when a pod with this UID holds a claim in the cache.
    pub fn dra_holds(&self, pod_uid: &str) -> bool {
        self.dra.claims().any(|c| c.pods.contains(pod_uid))
    }

    /// True while the health stream of `generation` is the instance's current one.
    pub fn dra_stream_current(&self, driver: &str, endpoint: &str, generation: u64) -> bool {
        self.dra.stream_current(driver, endpoint, generation)
    }

    /// The DRA manager for `status`.
    pub fn dra_status(&self) -> DraStatus {
        self.dra.status()
    }

    /// `dra_manager_state`'s bytes for the current cache.
    pub fn dra_checkpoint_bytes(&self) -> Vec<u8> {
        self.dra.checkpoint_bytes()
    }
}
