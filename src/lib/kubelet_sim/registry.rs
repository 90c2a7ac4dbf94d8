//! The plugin-watcher way of registering (`plugins_registry`): watch a
//! directory for new sockets, ask each one `GetInfo` (1 s), accept type
//! `DevicePlugin`, validate it as the device manager's handler does, dial its
//! endpoint as a `Register` would, and answer `NotifyRegistrationStatus`.
//!
//! The texts sent back follow the kubelet's plugin watcher
//! (`RegisterPlugin error -- ...`).

use std::collections::HashSet;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::Watcher;

use super::Inner;
use super::events::{EventKind, Via};
use super::registration::{RegisterInput, register};
use crate::error::{Error, Result};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::pluginregistration as reg;
use crate::proto::pluginregistration::registration_client::RegistrationClient;
use crate::transport;

/// Starts watching `dir`. Sockets already there are handled at once.
pub(crate) fn start(inner: &Arc<Inner>, dir: &Path) -> Result<tokio::task::JoinHandle<()>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<notify::Event>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            let _ = tx.send(ev);
        }
    })
    .map_err(|e| Error::io(format!("watching {}", dir.display()), std::io::Error::other(e)))?;
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(|e| Error::io(format!("watching {}", dir.display()), std::io::Error::other(e)))?;
    let inner = Arc::clone(inner);
    let dir = dir.to_path_buf();
    Ok(tokio::spawn(async move {
        let _watcher = watcher; // lives as long as the task
        let seen: Arc<Mutex<HashSet<PathBuf>>> = Arc::default();
        let mut shutdown = inner.shutdown.subscribe();
        scan(&inner, &dir, &seen);
        loop {
            let rescan = inner.registry_rescan.notified();
            tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { break };
                    for path in ev.paths {
                        match ev.kind {
                            notify::EventKind::Create(_) => consider(&inner, &dir, &path, &seen),
                            notify::EventKind::Remove(_) => {
                                if let Ok(mut s) = seen.lock() {
                                    s.remove(&path);
                                }
                            }
                            _ => {}
                        }
                    }
                }
                () = rescan => {
                    if let Ok(mut s) = seen.lock() {
                        s.clear();
                    }
                    scan(&inner, &dir, &seen);
                }
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
    }))
}

/// Handles every socket in the directory.
fn scan(inner: &Arc<Inner>, dir: &Path, seen: &Arc<Mutex<HashSet<PathBuf>>>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for entry in rd.filter_map(std::result::Result::ok) {
        consider(inner, dir, &entry.path(), seen);
    }
}

/// Starts registering the plugin at `path` if it is a socket not seen yet.
fn consider(inner: &Arc<Inner>, dir: &Path, path: &Path, seen: &Arc<Mutex<HashSet<PathBuf>>>) {
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if !is_socket {
        return;
    }
    let fresh = seen.lock().is_ok_and(|mut s| s.insert(path.to_path_buf()));
    if !fresh {
        return;
    }
    let inner2 = Arc::clone(inner);
    let dir = dir.to_path_buf();
    let path = path.to_path_buf();
    inner.track(tokio::spawn(async move { handle(&inner2, &dir, &path).await }));
}

/// GetInfo, validation, registration, NotifyRegistrationStatus.
async fn handle(inner: &Arc<Inner>, dir: &Path, path: &Path) {
    let ignored = |reason: String| {
        inner.emit(EventKind::RegistryPluginIgnored { socket: path.display().to_string(), reason });
    };
    // The socket may exist a moment before its owner listens on it.
    let mut wait = Duration::from_millis(100);
    let channel = loop {
        match transport::connect(path, Duration::from_secs(1)).await {
            Ok(c) => break c,
            Err(e) if wait > Duration::from_secs(2) => return ignored(format!("cannot connect: {e}")),
            Err(_) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    };
    let mut client = RegistrationClient::new(channel);
    let info = match tokio::time::timeout(inner.config.get_info_timeout, client.get_info(reg::InfoRequest {})).await {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => return ignored(format!("GetInfo failed: {}: {}", status.code(), status.message())),
        Err(_) => return ignored("GetInfo did not answer within its 1 s timeout".into()),
    };
    let notify = |registered: bool, error: String| {
        let mut c = client.clone();
        async move {
            let _ =
                c.notify_registration_status(reg::RegistrationStatus { plugin_registered: registered, error }).await;
        }
    };
    if info.r#type != reg::DEVICE_PLUGIN_TYPE {
        let msg = format!(
            "RegisterPlugin error -- no handler registered for plugin type: {} at socket {}",
            info.r#type,
            path.display()
        );
        notify(false, msg.clone()).await;
        return ignored(msg);
    }
    let endpoint = if info.endpoint.is_empty() { path.display().to_string() } else { info.endpoint.clone() };
    let validation = if !info.supported_versions.iter().any(|v| v == dp::VERSION) {
        Some(format!(
            "manager version, {}, is not among plugin supported versions [{}]",
            dp::VERSION,
            info.supported_versions.join(" ")
        ))
    } else if !crate::validate::is_extended_resource_name(&info.name) {
        Some(format!(
            "invalid name of device plugin socket: the ResourceName {} is invalid",
            crate::validate::go_quote(&info.name)
        ))
    } else {
        None
    };
    if let Some(err) = validation {
        let msg = format!("RegisterPlugin error -- plugin validation failed with err: {err}");
        inner.emit(EventKind::RegistrationRejected {
            resource: info.name.clone(),
            endpoint: endpoint.clone(),
            socket: endpoint.clone(),
            via: Via::PluginsRegistry,
            version: info.supported_versions.join(","),
            message: msg.clone(),
        });
        notify(false, msg).await;
        return;
    }
    let socket = {
        let p = PathBuf::from(&endpoint);
        if p.is_absolute() { p } else { dir.join(p) }
    };
    let input = RegisterInput {
        version: dp::VERSION.into(),
        resource: info.name.clone(),
        endpoint,
        socket,
        via: Via::PluginsRegistry,
        request_options: None,
    };
    match register(inner, input).await {
        Ok(()) => notify(true, String::new()).await,
        Err(e) => notify(false, format!("RegisterPlugin error -- plugin registration failed with err: {e}")).await,
    }
}
