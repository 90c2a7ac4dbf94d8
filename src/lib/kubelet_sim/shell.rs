//! The sim's shell: [`Inner`], the state every task of a running sim
//! shares (the synchronous device manager behind one lock, the plugin
//! connections, the event channels, the servers' tasks), and what performs
//! the manager's effects: events, checkpoint writes, stream stops and the
//! grace timers. The sockets and servers are started by `lifecycle.rs`.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use tokio::sync::{Notify, broadcast, watch};
use tokio::task::JoinHandle;

use super::checkpoint;
use super::config::SimConfig;
use super::events::{EventKind, SimEvent};
use super::manager::{Effect, Effects, Manager, StatusPaths};
use super::wire::WireEvent;
use crate::error::{Error, Result};
use crate::kubelet_version::{Cleanup, cleanup_dir};
use crate::plugin_client::PluginClient;
use crate::transport;

/// How many events the control protocol's `events` keeps (a plugin flapping
/// health for hours must not grow the sim without bound).
const MAX_WIRE_EVENTS: usize = 100_000;

/// The connection to a registered plugin (the manager keeps the endpoint
/// under the same ID).
pub(super) struct Conn {
    /// Client for Allocate and GetPreferredAllocation.
    pub(super) client: PluginClient,
    /// Client for PreStartContainer (its own deadline).
    pub(super) pre_start: PluginClient,
    /// The ListAndWatch task.
    pub(super) task: Option<tokio::task::AbortHandle>,
}

/// The socket server of kubelet.sock, stopped and re-created on restart.
pub(super) struct ServerTask {
    pub(super) stop: tokio::sync::oneshot::Sender<()>,
    pub(super) join: JoinHandle<Result<()>>,
}

/// Paths the sim uses.
#[derive(Debug, Clone)]
pub(super) struct Paths {
    pub(super) dir: PathBuf,
    pub(super) kubelet_socket: PathBuf,
    pub(super) podresources_socket: Option<PathBuf>,
    pub(super) control_socket: Option<PathBuf>,
    pub(super) checkpoint: PathBuf,
    /// The record that this sim wrote the checkpoint.
    pub(super) marker: PathBuf,
    /// The sim's own allocations while the checkpoint is read-only.
    pub(super) journal: PathBuf,
}

/// Shared by the handle and every task of the sim.
pub(crate) struct Inner {
    pub(super) config: SimConfig,
    pub(super) paths: Paths,
    /// The device manager: every change to what the sim knows goes through it.
    pub(super) manager: Mutex<Manager>,
    /// The plugin connections, by endpoint ID (the manager stores the endpoints).
    pub(super) conns: Mutex<std::collections::HashMap<u64, Conn>>,
    pub(super) events: broadcast::Sender<SimEvent>,
    pub(super) first_events: Mutex<Option<broadcast::Receiver<SimEvent>>>,
    /// The events the control protocol's `events` answers, in order (bounded).
    pub(super) wire_events: Mutex<Vec<WireEvent>>,
    /// Admissions, deletions and restarts take turns, as the kubelet's sync loop does.
    pub(super) admission: tokio::sync::Mutex<()>,
    pub(super) grace_changed: Notify,
    pub(super) checkpoint_dirty: Notify,
    /// Serialises checkpoint writes: a snapshot is taken and written under
    /// it, so an older snapshot never lands after a newer one.
    pub(super) checkpoint_write: std::sync::Mutex<()>,
    /// The tag in the names of the sim's temporary files (see
    /// [`checkpoint::clean_temps`]).
    pub(super) tmp_tag: String,
    pub(super) registry_rescan: Notify,
    /// The sim may write `dra_manager_state` (see [`dra`]).
    pub(super) dra_writes: std::sync::atomic::AtomicBool,
    /// The embedded API server's objects, with `--api-objects`.
    pub(super) api: std::sync::OnceLock<crate::apiserver::Handle>,
    /// The API server of `--kubeconfig`, read only.
    pub(super) api_client: Option<crate::apiserver::client::Client>,
    /// `<dir>/.dpctl`, removed at stop when the sim created it and it is empty.
    pub(super) control_dir: Mutex<Option<ControlDir>>,
    pub(super) shutdown: watch::Sender<bool>,
    pub(super) registration: tokio::sync::Mutex<Option<ServerTask>>,
    pub(super) services: Mutex<Vec<JoinHandle<()>>>,
    pub(super) tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Inner {
    /// A sim's shared state before anything is served: no resources, no
    /// pods, the first event receiver kept for the first subscriber.
    pub(super) fn new(config: SimConfig, paths: Paths) -> Inner {
        let (events, first_rx) = broadcast::channel(config.event_capacity.max(16));
        let (shutdown, _) = watch::channel(false);
        Inner {
            tmp_tag: checkpoint::temp_tag(&paths.marker),
            manager: Mutex::new(Manager::new(
                config.kubelet_version,
                config.grace_period,
                config.max_resources,
                config.topology.clone(),
                Instant::now(),
            )),
            conns: Mutex::new(std::collections::HashMap::new()),
            config,
            paths,
            events,
            first_events: Mutex::new(Some(first_rx)),
            wire_events: Mutex::new(Vec::new()),
            admission: tokio::sync::Mutex::new(()),
            grace_changed: Notify::new(),
            checkpoint_dirty: Notify::new(),
            checkpoint_write: std::sync::Mutex::new(()),
            registry_rescan: Notify::new(),
            dra_writes: std::sync::atomic::AtomicBool::new(false),
            api: std::sync::OnceLock::new(),
            api_client: None,
            control_dir: Mutex::new(None),
            shutdown,
            registration: tokio::sync::Mutex::new(None),
            services: Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The device manager. A poisoned lock (a panic elsewhere) still holds
    /// consistent data: every transition is one call without awaits.
    pub(super) fn lock(&self) -> MutexGuard<'_, Manager> {
        self.manager.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The plugin connections.
    pub(super) fn conns(&self) -> MutexGuard<'_, std::collections::HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Allocate/GetPreferredAllocation client of endpoint `id`.
    pub(super) fn client(&self, id: u64) -> Option<PluginClient> {
        self.conns().get(&id).map(|c| c.client.clone())
    }

    /// The PreStartContainer client of endpoint `id`.
    pub(super) fn pre_start_client(&self, id: u64) -> Option<PluginClient> {
        self.conns().get(&id).map(|c| c.pre_start.clone())
    }

    /// Performs what a transition of the manager asks for, in order.
    pub(super) fn apply(self: &Arc<Self>, effects: Effects) {
        for e in effects {
            match e {
                Effect::Emit(kind) => self.emit(kind),
                Effect::WriteCheckpoint => self.write_checkpoint_now(),
                Effect::StopStream(id) => {
                    if let Some(t) = self.conns().get_mut(&id).and_then(|c| c.task.take()) {
                        t.abort();
                    }
                }
                Effect::Close(id) => {
                    if let Some(t) = self.conns().remove(&id).and_then(|c| c.task) {
                        t.abort();
                    }
                }
                Effect::StartGrace { resource, generation } => spawn_grace(self, &resource, generation),
            }
        }
    }

    /// Publishes an event.
    pub(super) fn emit(&self, kind: EventKind) {
        let event = SimEvent { time: SystemTime::now(), kind };
        if let Some(w) = WireEvent::from_sim(&event) {
            let mut log = self.wire_events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if log.len() < MAX_WIRE_EVENTS {
                log.push(w);
            }
        }
        let _ = self.events.send(event);
    }

    /// Writes the checkpoint now, as the kubelet does after each
    /// ListAndWatch update and when a resource is removed
    /// (`genericDeviceUpdateCallback` and `GetCapacity` in
    /// pkg/kubelet/cm/devicemanager/manager.go): a reader sees the new
    /// registered devices as soon as the update is applied.
    /// Not fsynced: the update holds no admission a crash could take back
    /// (the next write repeats it), and a plugin flapping health must not
    /// cost two disk syncs per message.
    pub(super) fn write_checkpoint_now(&self) {
        if let Err(e) = self.write_checkpoint_with(false) {
            tracing::warn!(error = %e, "could not write the checkpoint");
        }
    }

    /// Asks for a checkpoint write within 100 ms.
    pub(super) fn dirty(&self) {
        if self.config.checkpoint {
            self.checkpoint_dirty.notify_one();
        }
    }

    /// Keeps a background task so that `stop` can end it.
    pub(super) fn track(&self, task: JoinHandle<()>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    pub(super) fn is_stopped(&self) -> bool {
        *self.shutdown.borrow()
    }

    pub(super) fn shutdown_future(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// True when the sim may write the checkpoint (enabled, and it wrote
    /// the file, created it, or was told to adopt it).
    pub(super) fn writes_checkpoint(&self) -> bool {
        self.config.checkpoint && self.lock().writes_checkpoint()
    }

    /// Records the allocations durably where the sim keeps them: the
    /// checkpoint when it may write it, else its own file in `.dpctl/`;
    /// nothing with `--no-checkpoint`. The snapshot is taken under the write
    /// turn, so an older one never lands after a newer one.
    pub(super) fn write_checkpoint(&self) -> Result<()> {
        self.write_checkpoint_with(true)
    }

    /// [`Inner::write_checkpoint`], fsynced only when `durable`.
    pub(super) fn write_checkpoint_with(&self, durable: bool) -> Result<()> {
        if !self.config.checkpoint {
            return Ok(());
        }
        let _turn = self.checkpoint_write.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.writes_checkpoint() {
            let cp = self.lock().checkpoint();
            checkpoint::write_owned(&cp, &self.paths.checkpoint, &self.paths.marker, &self.tmp_tag, durable)
        } else {
            let cp = self.lock().journal();
            checkpoint::write_journal(&cp, &self.paths.journal, &self.tmp_tag, durable)
        }
    }

    /// Where an admitted pod's devices are recorded, for the admission's
    /// answer and `status`.
    pub(super) fn kept_in(&self) -> String {
        if !self.config.checkpoint {
            "nowhere (--no-checkpoint): a sim killed now forgets this allocation".into()
        } else if self.writes_checkpoint() {
            self.paths.checkpoint.display().to_string()
        } else {
            format!(
                "{} (the checkpoint is read-only for the sim; it is restored from there at start)",
                self.paths.journal.display()
            )
        }
    }

    pub(super) fn status_paths(&self) -> StatusPaths {
        StatusPaths {
            dir: self.paths.dir.display().to_string(),
            kubelet_socket: self.paths.kubelet_socket.display().to_string(),
            podresources_socket: self.paths.podresources_socket.as_ref().map(|p| p.display().to_string()),
            control_socket: self.paths.control_socket.as_ref().map(|p| p.display().to_string()),
        }
    }
}

/// `<dir>/.dpctl`, where the sim keeps its control socket and records.
/// Checked before anything is created: a symbolic link there is refused
/// (the sim would create and delete its sockets wherever it points, outside
/// `--dir`), and so is anything but a directory. Remembers whether it was
/// there, so that [`ControlDir::release`] removes only a directory the sim
/// created, and only when empty.
#[derive(Debug)]
pub(super) struct ControlDir {
    pub(super) path: PathBuf,
    pub(super) existed: bool,
}

impl ControlDir {
    pub(super) fn check(dir: &Path) -> Result<ControlDir> {
        let path = dir.join(crate::paths::CONTROL_DIR_NAME);
        let existed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&path).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
                return Err(Error::invalid(
                    path.display().to_string(),
                    format!(
                        "a symbolic link (to {target}): the sim keeps its sockets and records in --dir only, never \
                         where a link points; remove the link"
                    ),
                ));
            }
            Ok(m) if !m.is_dir() => {
                return Err(Error::invalid(
                    path.display().to_string(),
                    "not a directory (dpctl keeps its sockets there)",
                ));
            }
            Ok(_) => true,
            Err(_) => false,
        };
        Ok(ControlDir { path, existed })
    }

    /// Removes the directory when the sim created it and left it empty
    /// (`remove_dir` refuses a directory with anything in it).
    pub(super) fn release(&self) {
        if !self.existed {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

impl Inner {
    /// The cleanup of the played version, on the sim's directory (a restart).
    pub(super) fn cleanup(&self) -> Cleanup {
        let keep: Vec<PathBuf> = self.paths.podresources_socket.iter().cloned().collect();
        let rule = self.config.kubelet_version.cleanup_rule();
        cleanup_dir(&self.paths.dir, &keep, rule, self.config.owns_dir || self.config.emulate_cleanup)
    }

    /// The cleanup at start: the played version's, except that sockets
    /// something still answers on are left to their servers unless `force`
    /// (a deliberate difference from the kubelet, which deletes them too).
    pub(super) async fn startup_cleanup(&self) -> Cleanup {
        let mut keep: Vec<PathBuf> = self.paths.podresources_socket.iter().cloned().collect();
        if !self.config.force {
            let live = live_sockets(&self.paths.dir, &keep).await;
            keep.extend(live);
        }
        let rule = self.config.kubelet_version.cleanup_rule();
        cleanup_dir(&self.paths.dir, &keep, rule, self.config.owns_dir || self.config.emulate_cleanup)
    }
}

/// The sockets directly in `dir` (or symlinks to sockets) that something
/// answers on, other than `ours`; each is logged as left in place.
async fn live_sockets(dir: &Path, ours: &[PathBuf]) -> Vec<PathBuf> {
    let mut live = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return live };
    for entry in rd.filter_map(std::result::Result::ok) {
        let path = entry.path();
        let is_socket = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if is_socket && !ours.contains(&path) && !transport::is_stale(&path).await {
            tracing::warn!(socket = %path.display(), "leaving a live socket in place (--force deletes it, as a kubelet would)");
            live.push(path);
        }
    }
    live
}

/// Restores a checkpoint into the manager (see [`Manager::restore`]).
pub(super) fn restore(inner: &Arc<Inner>, cp: &crate::checkpoint::Checkpoint) -> Vec<(String, u64)> {
    inner.lock().restore(cp, Instant::now())
}

/// Removes the resource (capacity 0) once the grace period after its stop
/// has passed, unless it registered again meanwhile. Follows changes of the
/// grace period.
pub(crate) fn spawn_grace(owner: &Arc<Inner>, resource: &str, generation: u64) {
    let inner = Arc::clone(owner);
    let resource = resource.to_string();
    let task = tokio::spawn(async move {
        let mut shutdown = inner.shutdown.subscribe();
        loop {
            let notified = inner.grace_changed.notified();
            let Some(deadline) = inner.lock().grace_deadline(&resource, generation) else { return };
            if Instant::now() >= deadline {
                let effects = inner.lock().grace_expired(&resource, generation, Instant::now());
                inner.apply(effects);
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {}
                () = notified => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
        }
    });
    owner.track(task);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet_version::CleanupRule;

    // Pointed at a real node's directory, the sim must not cut off a live
    // listener (a real kubelet or plugin) by deleting its socket unless told
    // to with --force; stale sockets go, as a kubelet's cleanup would.
    #[tokio::test]
    async fn startup_cleanup_deletes_stale_sockets_only_unless_forced() {
        let dir = tempfile::Builder::new().prefix("dp").tempdir_in("/tmp").unwrap();
        let d = dir.path();
        std::fs::write(d.join("notes.txt"), "x").unwrap();
        let live = std::os::unix::net::UnixListener::bind(d.join("live.sock")).unwrap();
        drop(std::os::unix::net::UnixListener::bind(d.join("stale.sock")).unwrap());
        let live_ones = live_sockets(d, &[]).await;
        assert_eq!(live_ones, [d.join("live.sock")]);
        let c = cleanup_dir(d, &live_ones, CleanupRule::SocketsOnly, false);
        assert_eq!(c.deleted_sockets, ["stale.sock"]);
        assert!(d.join("live.sock").exists() && d.join("notes.txt").exists());
        let c = cleanup_dir(d, &[], CleanupRule::SocketsOnly, false);
        assert_eq!(c.deleted_sockets, ["live.sock"], "--force: as the kubelet");
        drop(live);
    }
}
