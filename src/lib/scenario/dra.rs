//! The DRA part of a scenario run: mock DRA drivers (in-process `dpctl dra
//! mock`) started and stopped by steps, and what can be observed of the
//! kubelet's DRA manager: each driver's calls, the `dra_manager_state`
//! checkpoint, and the DRA parts of the control protocol's answers.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::DraDriverDef;
use crate::dra::mock::{DraEvent, DraEventKind};
use crate::error::{Error, Result};

/// How long a stopping driver gets to remove its sockets.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often a `wait` on a driver's calls looks at them.
const POLL: Duration = Duration::from_millis(20);

/// One mock DRA driver of the scenario, running or not, with every event it
/// reported. Events are taken from its channels synchronously when read: the
/// driver records a call before it answers, so a call the kubelet made
/// before an observation is in that observation.
pub(super) struct Driver {
    pub(super) def: DraDriverDef,
    running: Option<(oneshot::Sender<()>, JoinHandle<Result<()>>)>,
    channels: Vec<mpsc::UnboundedReceiver<DraEvent>>,
    taken: Vec<DraEvent>,
    /// Events up to here were shown in an earlier observation.
    shown: usize,
}

impl Driver {
    pub(super) fn new(def: DraDriverDef) -> Self {
        Driver { def, running: None, channels: Vec::new(), taken: Vec::new(), shown: 0 }
    }

    /// Starts the driver; it serves once its registration socket exists.
    pub(super) async fn start(&mut self, registry_dir: &Path, root: &Path) -> Result<()> {
        if self.running.is_some() {
            return Err(Error::invalid(format!("dra_driver {}", self.def.id), "is already running"));
        }
        let cfg = self.def.mock_config(registry_dir, root)?;
        for dir in [cfg.endpoint.parent(), Some(cfg.cdi_dir.as_path())].into_iter().flatten() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        let socket = cfg.registration_socket();
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(crate::dra::mock::run(cfg, tx, async move {
            let _ = stopped.await;
        }));
        self.channels.push(rx);
        // Serving is reported once both sockets listen (bounded: a mock that
        // fails to bind ends its task with the error).
        let deadline = crate::duration::deadline(STOP_GRACE);
        loop {
            if self.events().iter().any(|e| matches!(e.kind, DraEventKind::Serving { .. })) {
                break;
            }
            if task.is_finished() {
                return match task.await {
                    Ok(Err(e)) => Err(e),
                    _ => Err(Error::invalid(format!("dra_driver {}", self.def.id), "stopped before it served")),
                };
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout { what: format!("{} to serve", socket.display()), timeout: STOP_GRACE });
            }
            tokio::time::sleep(POLL).await;
        }
        self.running = Some((stop, task));
        Ok(())
    }

    /// Stops the driver: its sockets go, so the plugin watcher deregisters it.
    pub(super) async fn stop(&mut self) -> Result<()> {
        let Some((stop, task)) = self.running.take() else {
            return Err(Error::invalid(format!("dra_driver {}", self.def.id), "not running"));
        };
        let _ = stop.send(());
        match tokio::time::timeout(STOP_GRACE, task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(Error::invalid(format!("dra_driver {}", self.def.id), format!("its task failed: {e}"))),
            Err(_) => Err(Error::Timeout { what: format!("dra_driver {} to stop", self.def.id), timeout: STOP_GRACE }),
        }
    }

    /// Every event so far.
    pub(super) fn events(&mut self) -> &[DraEvent] {
        for rx in &mut self.channels {
            while let Ok(e) = rx.try_recv() {
                self.taken.push(e);
            }
        }
        &self.taken
    }

    /// The events since the last observation, as [`driver_events`] shows them.
    pub(super) fn observe(&mut self) -> Value {
        let shown = self.shown;
        let events = self.events();
        let v = driver_events(&events[shown.min(events.len())..]);
        self.shown = self.taken.len();
        v
    }

    /// Waits (polling, at most `deadline`) until every GetInfo the kubelet
    /// made has its NotifyRegistrationStatus: an observation must not see a
    /// registration half done (how far it got would be the machine's load).
    pub(super) async fn settle(&mut self, deadline: tokio::time::Instant) {
        if self.running.is_none() {
            return;
        }
        loop {
            let events = self.events();
            let count = |m: &str| {
                events.iter().filter(|e| matches!(&e.kind, DraEventKind::Rpc { rpc, .. } if method(rpc) == m)).count()
            };
            if count("GetInfo") <= count("NotifyRegistrationStatus") || tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits (polling, at most `timeout`) until `count` events match.
    pub(super) async fn wait(
        &mut self,
        pred: &(dyn Fn(&DraEvent) -> bool + Sync),
        count: u64,
        timeout: Duration,
    ) -> bool {
        let deadline = crate::duration::deadline(timeout);
        loop {
            if self.events().iter().filter(|e| pred(e)).count() as u64 >= count {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The method of an RPC name (`v1.DRAPlugin/NodePrepareResources` → `NodePrepareResources`).
pub(super) fn method(rpc: &str) -> &str {
    rpc.rsplit('/').next().unwrap_or(rpc)
}

/// True for a registration outcome the kubelet sent (accepted or not).
pub(super) fn registration(e: &DraEvent, accepted: bool) -> bool {
    match &e.kind {
        DraEventKind::Rpc { rpc, request, .. } if method(rpc) == "NotifyRegistrationStatus" => {
            request["plugin_registered"].as_bool() == Some(accepted)
        }
        _ => false,
    }
}

/// What a driver saw: the kubelet's registration verdicts and its calls
/// with their requests and the driver's answers. Health streams are left
/// out (kubelet-sim opens none; 1.34-1.36 open one every few seconds
/// whatever the driver advertises, docs/dra.md §2), and so are timings.
pub fn driver_events(events: &[DraEvent]) -> Value {
    let mut registrations = Vec::new();
    let mut calls = Vec::new();
    for e in events {
        let DraEventKind::Rpc { rpc, request, response, error, .. } = &e.kind else { continue };
        match method(rpc) {
            "NodeWatchResources" => {}
            "GetInfo" => registrations.push(json!({"rpc": "GetInfo"})),
            "NotifyRegistrationStatus" => registrations.push(json!({
                "rpc": "NotifyRegistrationStatus",
                "registered": request["plugin_registered"],
                "error": request["error"],
            })),
            _ => calls.push(json!({"rpc": rpc, "request": request, "response": response, "error": error})),
        }
    }
    json!({"registrations": registrations, "calls": calls})
}

/// `dra_manager_state` as the diff needs it: whether the checksum verifies,
/// and the claims in name order (the kubelet writes them in Go map order,
/// so the checksum's value itself is left out); `absent` when there is none.
pub fn state(path: &Path) -> Value {
    if !path.exists() {
        return json!("absent");
    }
    match crate::dra::state::read(path) {
        Ok(r) => {
            let mut claims = r.claims;
            claims.sort_by(|a, b| (&a.namespace, &a.claim_name).cmp(&(&b.namespace, &b.claim_name)));
            json!({"checksum_ok": r.checksum_ok, "claims": claims})
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// The DRA part of an admission: the error (the kubelet's text) and each
/// container's CDI device IDs. The calls show in the drivers' records.
pub fn outcome(dra: &crate::kubelet_sim::DraOutcome) -> Value {
    json!({"error": dra.error, "cdi_devices": dra.cdi_devices})
}
