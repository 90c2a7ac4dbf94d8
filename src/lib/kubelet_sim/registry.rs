//! The plugin-watcher way of registering (`plugins_registry`): watch a
//! directory for new sockets, ask each one `GetInfo` (1 s), accept type
//! `DevicePlugin`, validate it as the device manager's handler does, dial its
//! endpoint as a `Register` would, and answer `NotifyRegistrationStatus`.
//!
//! A registration that fails before the plugin enters the kubelet's actual
//! state (dial, GetInfo, type, validation) is retried with backoff while its
//! socket exists, in every release. One that fails in the device manager
//! (dial-back, GetDevicePluginOptions) is retried only from 1.36 (PR
//! #133335); 1.26-1.35 leave it unregistered until the socket is re-created.
//! The texts sent back follow the kubelet's plugin watcher
//! (`RegisterPlugin error -- ...`). Type `DRAPlugin` goes to the DRA
//! manager (`dra.rs`) from 1.34; older releases have no handler for it.

use std::collections::HashMap;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::Watcher;

use super::events::{EventKind, Via};
use super::manager::Registrant;
use super::registration::{RegisterInput, deregister, dial, register};
use super::shell::Inner;
use crate::error::{Error, Result};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::pluginregistration as reg;
use crate::proto::pluginregistration::registration_client::RegistrationClient;

/// Starts watching `dir`. Sockets already there are handled at once.
pub(crate) fn start(inner: &Arc<Inner>, dir: &Path) -> Result<tokio::task::JoinHandle<()>> {
    crate::input::create_dir(dir, 0o750)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<notify::Event>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            let _ = tx.send(ev);
        }
    })
    .map_err(|e| Error::io(format!("watching {}", dir.display()), std::io::Error::other(e)))?;
    watcher
        .watch(dir, notify::RecursiveMode::Recursive)
        .map_err(|e| Error::io(format!("watching {}", dir.display()), std::io::Error::other(e)))?;
    let inner = Arc::clone(inner);
    let dir = dir.to_path_buf();
    Ok(tokio::spawn(async move {
        let mut watcher = watcher; // lives as long as the task
        // Socket path -> the (resource, dialed socket) it registered, once it has.
        let seen: Seen = Arc::default();
        let mut shutdown = inner.shutdown.subscribe();
        scan(&inner, &dir, &seen);
        loop {
            let rescan = inner.registry_rescan.notified();
            tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { break };
                    for path in ev.paths {
                        match ev.kind {
                            notify::EventKind::Create(_) if is_dot(&path) => {}
                            notify::EventKind::Create(_) if path.is_dir() => {
                                // notify reports a new directory before it watches it, so a
                                // socket created in between would go unseen. Watch it first,
                                // then walk it, as the kubelet's plugin watcher does
                                // (docs/kubelet-versions.md §6); `seen` drops the duplicates.
                                let _ = watcher.watch(&path, notify::RecursiveMode::Recursive);
                                scan(&inner, &path, &seen);
                            }
                            notify::EventKind::Create(_) => consider(&inner, &dir, &path, &seen),
                            notify::EventKind::Remove(_) => {
                                let registered =
                                    seen.lock().ok().and_then(|mut s| s.remove(&path)).and_then(|slot| slot.registered);
                                if let Some((resource, socket)) = registered {
                                    deregister(&inner, &resource, &socket, &path);
                                }
                                super::dra::socket_removed(&inner, &path);
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

/// The sockets handled so far, and what each registered.
type Seen = Arc<Mutex<HashMap<PathBuf, Slot>>>;

/// One socket the watcher wants registered.
#[derive(Debug)]
struct Slot {
    /// Which attempt loop owns it (a deleted and re-created socket gets a new one).
    token: u64,
    /// The (resource, dialed socket) it registered, once it has.
    registered: Option<(String, PathBuf)>,
}

/// The kubelet's retry of a plugin registration that returned an error
/// (`pkg/util/goroutinemap/exponentialbackoff`: 500 ms, doubling, at most
/// 2 min 2 s, per socket path).
const RETRY_INITIAL: std::time::Duration = std::time::Duration::from_millis(500);
/// See [`RETRY_INITIAL`].
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(122);

/// How one registration attempt ended, in the plugin manager's terms.
enum Attempt {
    /// Registered; the (resource, dialed socket).
    Registered(String, PathBuf),
    /// Not in the actual state and the operation returned an error: the
    /// reconciler tries again once the exponential backoff has passed.
    Retry,
    /// 1.26-1.35: the device manager refused it after the plugin was added to
    /// the actual state, where it stays: never retried until the socket is
    /// re-created (the (resource, socket) is what a deletion deregisters).
    Stuck(String, PathBuf),
    /// A DRA driver, registered (or refused for good) by the DRA manager,
    /// which keeps it by its registration socket.
    Dra,
}

/// True while `path` is still wanted by the attempt loop holding `token`
/// and not registered yet.
fn still_wanted(seen: &Seen, path: &Path, token: u64) -> bool {
    seen.lock().is_ok_and(|s| s.get(path).is_some_and(|slot| slot.token == token && slot.registered.is_none()))
}

/// True for a name starting with `.` (the watcher ignores those).
fn is_dot(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Handles every socket in the directory and, recursively, its
/// sub-directories (docs/kubelet-versions.md §6: the initial walk descends even
/// into dot-named directories; dot-named sockets are ignored). Bounded depth.
fn scan(inner: &Arc<Inner>, dir: &Path, seen: &Seen) {
    fn walk(inner: &Arc<Inner>, root: &Path, dir: &Path, seen: &Seen, depth: usize) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for entry in rd.filter_map(std::result::Result::ok) {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if depth < 16 {
                    walk(inner, root, &path, seen, depth + 1);
                }
            } else if !is_dot(&path) {
                consider(inner, root, &path, seen);
            }
        }
    }
    walk(inner, dir, dir, seen, 0);
}

/// True when `path` is a socket or a link to one: the plugin watcher's
/// `util.IsUnixDomainSocket` and `getStat` use `os.Stat`, which follows
/// links, in the initial walk and on a create event
/// (pkg/kubelet/pluginmanager/pluginwatcher/plugin_watcher.go,
/// traversePluginDir and handleCreateEvent). The link's own path is what
/// is dialled and named.
fn is_socket(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Starts registering the plugin at `path` if it is a socket not seen yet.
fn consider(inner: &Arc<Inner>, dir: &Path, path: &Path, seen: &Seen) {
    if !is_socket(path) {
        return;
    }
    static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let token = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fresh = seen.lock().is_ok_and(|mut s| {
        if s.contains_key(path) {
            return false;
        }
        s.insert(path.to_path_buf(), Slot { token, registered: None });
        true
    });
    if !fresh {
        return;
    }
    let inner2 = Arc::clone(inner);
    let dir = dir.to_path_buf();
    let path = path.to_path_buf();
    let seen = Arc::clone(seen);
    // A failed registration stays wanted while its socket exists and is tried
    // again with backoff, so a plugin whose endpoint comes up late registers.
    // The kubelet differs by failure and release (docs/kubelet-versions.md §6
    // "Retries"): validation failures back off in every release; a failed
    // dial-back is never retried by 1.26-1.35 and retried at the next
    // reconciler pass (about 1 s, no backoff) from 1.36.
    inner.track(tokio::spawn(async move {
        let mut shutdown = inner2.shutdown.subscribe();
        let mut backoff = RETRY_INITIAL;
        loop {
            let wait = match handle(&inner2, &dir, &path).await {
                Attempt::Dra => return,
                Attempt::Registered(resource, socket) | Attempt::Stuck(resource, socket) => {
                    if let Ok(mut s) = seen.lock()
                        && let Some(slot) = s.get_mut(&path).filter(|slot| slot.token == token)
                    {
                        slot.registered = Some((resource, socket));
                    }
                    return;
                }
                Attempt::Retry => {
                    let wait = backoff;
                    backoff = backoff.saturating_mul(2).min(RETRY_MAX);
                    wait
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            if !is_socket(&path) || !still_wanted(&seen, &path, token) {
                return;
            }
        }
    }));
}

/// GetInfo, validation, registration, NotifyRegistrationStatus, and how the
/// attempt ended.
// long: the plugin watcher's sequence for one socket (GetInfo, validation, endpoint
// translation, dial, Register, NotifyRegistrationStatus), each refusal with its own event.
async fn handle(inner: &Arc<Inner>, _dir: &Path, path: &Path) -> Attempt {
    let ignored = |reason: String| {
        inner.emit(EventKind::RegistryPluginIgnored { socket: path.display().to_string(), reason });
        Attempt::Retry
    };
    // docs/kubelet-versions.md §6: a blocking dial with the 10 s timeout.
    let channel = match dial(path, inner.config.dial_timeout).await {
        Ok(c) => c,
        Err(e) => return ignored(format!("cannot connect within {:?}: {e}", inner.config.dial_timeout)),
    };
    let mut client = RegistrationClient::new(crate::transport::WireChannel::new(channel, inner.config.tap.clone()));
    let info = match tokio::time::timeout(inner.config.get_info_timeout, client.get_info(reg::InfoRequest {})).await {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => return ignored(format!("GetInfo failed: {}: {}", status.code(), status.message())),
        Err(_) => return ignored("GetInfo did not answer within its 1 s timeout".into()),
    };
    // True when the plugin took the notification (5 s, as the kubelet's).
    let notify = |registered: bool, error: String| {
        let mut c = client.clone();
        async move {
            let call = c.notify_registration_status(reg::RegistrationStatus { plugin_registered: registered, error });
            matches!(tokio::time::timeout(std::time::Duration::from_secs(5), call).await, Ok(Ok(_)))
        }
    };
    if info.r#type == reg::DRA_PLUGIN_TYPE && super::dra::enabled(inner) {
        return match super::dra::register(inner, path, &info, &client).await {
            super::dra::DraAttempt::Done => Attempt::Dra,
            super::dra::DraAttempt::Retry => Attempt::Retry,
        };
    }
    if info.r#type != reg::DEVICE_PLUGIN_TYPE {
        let msg = format!(
            "RegisterPlugin error -- no handler registered for plugin type: {} at socket {}",
            info.r#type,
            path.display()
        );
        let _ = notify(false, msg.clone()).await;
        return ignored(msg);
    }
    // §6: an empty endpoint becomes the registration socket's path; any other
    // is used verbatim (no join with the directory).
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
        let _ = notify(false, msg).await;
        return Attempt::Retry;
    }
    // The endpoint is used verbatim (the kubelet's plugin watcher does not join it); a path seen
    // inside a container or mount namespace is translated unless only the untranslated one exists
    // here. Not "only if the translated one exists": right after a restart the plugin may not have
    // served its socket again yet, and the dial below waits for it.
    let socket = {
        let p = PathBuf::from(&endpoint);
        let mapped = crate::paths::translate(&inner.config.path_map, &p);
        let exists = |q: &Path| std::fs::symlink_metadata(q).is_ok();
        if mapped != p && (exists(&mapped) || !exists(&p)) { mapped } else { p }
    };
    let who = Registrant {
        resource: info.name.clone(),
        endpoint,
        socket: socket.clone(),
        via: Via::PluginsRegistry,
        version: dp::VERSION.into(),
    };
    let resource = who.resource.clone();
    let input = RegisterInput { who, request_options: None };
    let version = inner.config.kubelet_version;
    let registered = match register(inner, input).await {
        Ok(()) => {
            let delivered = notify(true, String::new()).await;
            Ok(delivered)
        }
        Err(e) => {
            // notifyPlugin returns the failure text as an error whether or not
            // the plugin took it, so the operation fails: backoff.
            let _ = notify(false, format!("RegisterPlugin error -- plugin registration failed with err: {e}")).await;
            Err(())
        }
    };
    match after_register(version, registered) {
        AfterRegister::Keep => Attempt::Registered(resource, socket),
        AfterRegister::DeregisterAndRetry => {
            deregister(inner, &resource, &socket, path);
            Attempt::Retry
        }
        AfterRegister::Retry => Attempt::Retry,
        AfterRegister::Stuck => Attempt::Stuck(resource, socket),
    }
}

/// What the plugin manager does after the device manager answered a
/// plugins_registry plugin's registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterRegister {
    /// The plugin stays registered in the actual state.
    Keep,
    /// Taken out of the actual state and deregistered; tried again after the backoff.
    DeregisterAndRetry,
    /// Refused and not in the actual state: tried again after the backoff.
    Retry,
    /// Refused but left in the actual state: never tried again until its
    /// registration socket is re-created.
    Stuck,
}

/// The plugin manager's rule after `RegisterPlugin` (`registered`: the
/// device manager took it, and whether the success notification reached
/// the plugin; `Err`: it refused). PR #133335 (1.36,
/// pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go)
/// takes a plugin out of the actual state again when the device manager
/// refused it or its success notification failed, so it is retried;
/// 1.26-1.35 keep it in the actual state either way (a refused one is
/// stuck; an undelivered success is only an error returned).
fn after_register(version: crate::kubelet_version::KubeletVersion, registered: Result<bool, ()>) -> AfterRegister {
    let retried = version.retries_refused_registry_plugins();
    match registered {
        Ok(delivered) if delivered || !retried => AfterRegister::Keep,
        Ok(_) => AfterRegister::DeregisterAndRetry,
        Err(()) if retried => AfterRegister::Retry,
        Err(()) => AfterRegister::Stuck,
    }
}

#[cfg(test)]
mod tests {
    use super::{AfterRegister, after_register};
    use crate::kubelet_version::KubeletVersion;

    /// PR #133335: a plugins_registry plugin the device manager refused, or
    /// whose success notification failed, is tried again from 1.36 only.
    #[test]
    fn refused_registry_plugins_stay_stuck_1_26_to_1_35_and_are_retried_from_1_36() {
        for minor in 26..=37 {
            let v = KubeletVersion::Release(minor);
            let retried = minor >= 36;
            assert_eq!(after_register(v, Ok(true)), AfterRegister::Keep, "1.{minor}");
            let undelivered = if retried { AfterRegister::DeregisterAndRetry } else { AfterRegister::Keep };
            assert_eq!(after_register(v, Ok(false)), undelivered, "1.{minor}");
            let refused = if retried { AfterRegister::Retry } else { AfterRegister::Stuck };
            assert_eq!(after_register(v, Err(())), refused, "1.{minor}");
        }
        assert_eq!(after_register(KubeletVersion::Master, Err(())), AfterRegister::Retry);
    }
}
