//! Starting a sim ([`KubeletSim::start`]): the directory checked, the
//! checkpoint read, the sockets cleaned up as the played kubelet does, and
//! kubelet.sock, PodResources, the control socket and the plugin watcher
//! served; the checkpoint writer runs until the sim stops.

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::checkpoint::{self, CheckpointStatus};
use super::config::SimConfig;
use super::events::EventKind;
use super::handle::SimHandle;
use super::shell::{ControlDir, Inner, Paths, restore, spawn_grace};
use super::{control, dra, late_socket, podres, registry};
use crate::error::{Error, Result};
use crate::kubelet_version::Cleanup;
use crate::podresources::server::PodResourcesService;
use crate::transport::{self, BindOptions};

/// Entry point: see the module docs.
#[derive(Debug)]
pub struct KubeletSim;

impl KubeletSim {
    /// Starts a sim: refuses a directory whose kubelet.sock a live process
    /// answers (unless `force`), reads an existing checkpoint, deletes the
    /// sockets in the directory as a kubelet does, and serves kubelet.sock,
    /// PodResources and the control socket.
    pub async fn start(config: SimConfig) -> Result<SimHandle> {
        config.topology.validate()?;
        config.kubelet_version.check_policy_options(&config.topology.options)?;
        let dir = config.dir.clone();
        // 0750, as the kubelet makes it.
        let made = crate::input::create_dir_undoable(&dir, 0o750)?;
        let control_dir = match ControlDir::check(&dir) {
            Ok(c) => c,
            Err(e) => {
                made.undo();
                return Err(e);
            }
        };
        let kubelet_socket = crate::paths::kubelet_socket(&dir);
        if is_live(&kubelet_socket).await && !config.force {
            control_dir.release();
            return Err(Error::AlreadyServing { path: kubelet_socket, force_flag: config.force_flag });
        }
        match Self::serve(config, dir, kubelet_socket, &control_dir).await {
            Ok(handle) => {
                made.keep();
                *handle.inner.control_dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(control_dir);
                Ok(handle)
            }
            Err(e) => {
                // A refused start leaves no directory it made.
                control_dir.release();
                made.undo();
                Err(e)
            }
        }
    }

    /// [`KubeletSim::start`] once the directory is known to be usable: binds
    /// and serves; on a failure, what it bound so far is closed again.
    async fn serve(config: SimConfig, dir: PathBuf, kubelet_socket: PathBuf, _ctl: &ControlDir) -> Result<SimHandle> {
        let bind_opts = BindOptions { force: config.force, force_flag: config.force_flag, ..BindOptions::default() };
        let control_path = config.control.then(|| crate::paths::control_socket(&dir, control::CONTROL_NAME));
        let control_listener = match &control_path {
            Some(p) => Some(transport::bind(p, &bind_opts).await?),
            None => None,
        };
        let podres_listener = match &config.podresources_socket {
            Some(p) => Some(transport::bind(p, &bind_opts).await?),
            None => None,
        };
        let paths = Paths {
            kubelet_socket: kubelet_socket.clone(),
            podresources_socket: config.podresources_socket.clone(),
            control_socket: control_path,
            checkpoint: dir.join(crate::paths::CHECKPOINT_FILE_NAME),
            marker: checkpoint::marker_path(&dir),
            journal: checkpoint::journal_path(&dir),
            dir: dir.clone(),
        };
        let api_client = match &config.api_kubeconfig {
            Some(k) => Some(crate::apiserver::client::Client::from_kubeconfig(k, "--kubeconfig")?),
            None => None,
        };
        let inner = Arc::new(Inner { api_client, ..Inner::new(config, paths) });
        let handle = SimHandle { inner: Arc::clone(&inner) };
        let api_task = dra::start(&inner).await?;
        let restored = load_checkpoint(&inner);
        let cleanup = if inner.config.cleanup_on_start { inner.startup_cleanup().await } else { Cleanup::default() };
        let mut services = spawn_services(&handle, podres_listener, control_listener);
        services.extend(api_task);
        let serving = async {
            late_socket::serve_registration_at(&inner).await?;
            match inner.config.registry_dir.clone() {
                Some(reg_dir) => registry::start(&inner, &reg_dir).map(Some),
                None => Ok(None),
            }
        };
        match serving.await {
            Ok(registry) => services.extend(registry),
            Err(e) => {
                // Not started: close what was opened, write nothing.
                inner.shutdown.send_replace(true);
                late_socket::stop_registration(&inner).await;
                for s in services {
                    let _ = s.await;
                }
                return Err(e);
            }
        }
        for (name, generation) in &restored {
            spawn_grace(&inner, name, *generation);
        }
        inner.services.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(services);
        inner.emit(EventKind::Started {
            kubelet_version: inner.config.kubelet_version,
            dir: dir.display().to_string(),
            kubelet_socket: inner.paths.kubelet_socket.display().to_string(),
            podresources_socket: inner.paths.podresources_socket.as_ref().map(|p| p.display().to_string()),
            control_socket: inner.paths.control_socket.as_ref().map(|p| p.display().to_string()),
            registry_dir: inner.config.registry_dir.as_ref().map(|p| p.display().to_string()),
            cleanup_rule: inner.config.kubelet_version.cleanup_rule(),
            deleted_sockets: cleanup.deleted_sockets,
            deleted_files: cleanup.deleted_files,
            would_delete: cleanup.would_delete,
            restored_resources: restored.into_iter().map(|(n, _)| n).collect(),
        });
        Ok(handle)
    }
}

/// A previous kubelet's checkpoint (docs/kubelet-versions.md §7): verified; a
/// valid one is restored (its resources show 0 until their plugins register,
/// its pods' devices are in use); a corrupt one restores nothing. Written
/// only when this sim wrote it or adopts it. Returns what [`restore`] did.
fn load_checkpoint(inner: &Arc<Inner>) -> Vec<(String, u64)> {
    if !inner.config.checkpoint {
        return Vec::new();
    }
    for path in checkpoint::clean_temps(&inner.paths.dir, &inner.paths.marker) {
        tracing::info!(path = %path, "deleted a temporary file an interrupted write of the sim left");
    }
    let loaded = checkpoint::load(
        &inner.paths.checkpoint,
        &inner.paths.marker,
        inner.config.adopt_checkpoint,
        inner.config.checkpoint_v1,
    );
    let mut status = loaded.status;
    let journal = match checkpoint::read_journal(&inner.paths.journal, inner.config.checkpoint_v1) {
        Ok(j) => j,
        Err(e) => {
            tracing::warn!(error = %e, "the sim's own allocations file cannot be used; nothing restored from it");
            status.journal_error = Some(e.to_string());
            None
        }
    };
    status.kept_in = Some(if status.writes {
        inner.paths.checkpoint.display().to_string()
    } else {
        status.ownership.push_str(&format!(
            "; the pods the sim admits are recorded in {} instead, and restored from there at start",
            inner.paths.journal.display()
        ));
        inner.paths.journal.display().to_string()
    });
    let cp = match &journal {
        Some(j) => {
            status.journal_entries = j.data.pod_device_entries.as_ref().map_or(0, Vec::len);
            Some(checkpoint::merge(loaded.checkpoint, j))
        }
        None => loaded.checkpoint,
    };
    announce_checkpoint(inner, &status);
    let writes = status.writes;
    inner.lock().set_checkpoint_status(status);
    let Some(cp) = cp else { return Vec::new() };
    if let Some(j) = &journal {
        inner.lock().set_journal_uids(j.data.pod_device_entries.iter().flatten().map(|e| e.pod_uid.clone()).collect());
    }
    let restored = restore(inner, &cp);
    // The sim may write the checkpoint again: what its own file held moves
    // into it, durably, before the file goes.
    if writes && journal.is_some() {
        match inner.write_checkpoint() {
            Ok(()) => {
                let _ = std::fs::remove_file(&inner.paths.journal);
                inner.lock().set_journal_uids(BTreeSet::new());
            }
            Err(e) => tracing::warn!(error = %e, "could not write the checkpoint; the allocations file stays"),
        }
    }
    restored
}

/// Serves PodResources and the control socket on their listeners, and
/// starts the checkpoint writer.
fn spawn_services(
    handle: &SimHandle,
    podres_listener: Option<transport::Listener>,
    control_listener: Option<transport::Listener>,
) -> Vec<JoinHandle<()>> {
    let inner = &handle.inner;
    let mut services = Vec::new();
    if let Some(listener) = podres_listener {
        let provider = Arc::new(podres::SimPodResources { inner: Arc::clone(inner) });
        let router = PodResourcesService::new(provider, inner.config.podresources.clone()).router();
        let stop = inner.shutdown_future();
        services.push(tokio::spawn(async move {
            if let Err(e) = transport::serve(router, listener, stop).await {
                tracing::warn!(error = %e, "PodResources server stopped");
            }
        }));
    }
    if let Some(listener) = control_listener {
        let sim = handle.clone();
        let handler = move |req| control::handle(sim.clone(), req);
        services.push(tokio::spawn(transport::control::serve(listener, handler, inner.shutdown_future())));
    }
    if inner.config.checkpoint {
        services.push(tokio::spawn(checkpoint_writer(Arc::clone(inner))));
    }
    services
}

/// True when a process answers gRPC on the socket.
async fn is_live(socket: &Path) -> bool {
    let is_socket = std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket());
    is_socket && transport::connect(socket, Duration::from_millis(500)).await.is_ok()
}

/// Logs and publishes what the sim found in the checkpoint at start.
fn announce_checkpoint(inner: &Inner, status: &CheckpointStatus) {
    match (&status.error, status.found.as_str()) {
        (Some(e), _) => tracing::warn!(
            checkpoint = %status.path,
            error = %e,
            "Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date"
        ),
        (None, "none") => tracing::info!(checkpoint = %status.path, "no checkpoint at start"),
        (None, _) => tracing::info!(
            checkpoint = %status.path,
            entries = status.restored_entries,
            "restored the checkpoint"
        ),
    }
    inner.emit(EventKind::CheckpointRead { checkpoint: status.clone() });
    if !status.writes {
        tracing::warn!(checkpoint = %status.path, "{}", status.ownership);
        inner.emit(EventKind::CheckpointReadOnly { path: status.path.clone(), reason: status.ownership.clone() });
    }
}

/// Writes the checkpoint after changes, at most every 100 ms.
async fn checkpoint_writer(inner: Arc<Inner>) {
    let mut shutdown = inner.shutdown.subscribe();
    loop {
        tokio::select! {
            () = inner.checkpoint_dirty.notified() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Err(e) = inner.write_checkpoint() {
            tracing::warn!(error = %e, "could not write the checkpoint");
        }
    }
}
