//! A kubelet restart on the real kubelet, as systemd restarts it: SIGTERM,
//! then the same binary with the same configuration and state in a mount
//! namespace with the same binds; containerd and the pods' containers keep
//! running. The new kubelet cleans the device-plugin directory, serves a new
//! kubelet.sock and reads its checkpoint (k8s.io/kubernetes
//! pkg/kubelet/cm/devicemanager/manager.go `Start`, `readCheckpoint`); the
//! report says, as the sim's and the referee's do, which sockets it deleted,
//! how many pods the checkpoint held, and per resource known before when it
//! registered again and sent its first list, counted from the new
//! kubelet.sock (read off the kubelet's own log, [`super::kubelet_log`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use super::{Node, POLL, READY_TIMEOUT, STOP_GRACE, remote, seen_per_resource, spawn_in, wait_ready};
use crate::kubelet_sim::control::{RemoteError, WireEvent, WireEventKind};
use crate::kubelet_sim::{ResourceReturn, RestartReport};

/// An entry of the device-plugin directory: its inode and change time (a
/// name re-created may get the same inode back), and whether it is a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    inode: u64,
    ctime_ns: i128,
    socket: bool,
}

/// The directory's entries by name.
fn entries(dir: &Path) -> BTreeMap<String, Entry> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = e.path().symlink_metadata() else { continue };
        if meta.is_dir() {
            continue;
        }
        let ctime_ns = i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec());
        let entry = Entry { inode: meta.ino(), ctime_ns, socket: meta.file_type().is_socket() };
        out.insert(e.file_name().to_string_lossy().into_owned(), entry);
    }
    out
}

/// What the cleanup at start removed: an entry gone, or another file under
/// the same name (sockets, other files), as the referee reports it; not the
/// kubelet's own kubelet.sock, which the old kubelet left behind.
fn deleted(before: &BTreeMap<String, Entry>, after: &BTreeMap<String, Entry>) -> (Vec<String>, Vec<String>) {
    let (mut sockets, mut files) = (Vec::new(), Vec::new());
    for (name, was) in before {
        if after.get(name) == Some(was) || name == crate::paths::KUBELET_SOCKET_NAME {
            continue;
        }
        if was.socket { sockets.push(name.clone()) } else { files.push(name.clone()) }
    }
    (sockets, files)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Per resource, from `events` (the new kubelet's), when it registered and
/// when its first list with devices came after that, in milliseconds
/// after `since_ms` (the new kubelet.sock).
fn returns(events: &[WireEvent], since_ms: u64) -> BTreeMap<String, (u64, Option<u64>)> {
    let mut out: BTreeMap<String, (u64, Option<u64>)> = BTreeMap::new();
    for e in events {
        let after = e.unix_ms.saturating_sub(since_ms);
        match &e.kind {
            WireEventKind::Registered { resource, .. } => {
                out.entry(resource.clone()).or_insert((after, None));
            }
            WireEventKind::Snapshot { resource, devices, .. } if *devices > 0 => {
                if let Some((_, first @ None)) = out.get_mut(resource) {
                    *first = Some(after);
                }
            }
            _ => {}
        }
    }
    out
}

impl Node {
    /// Restarts the kubelet and waits up to `wait` past its new kubelet.sock
    /// for every resource known before to register again and send devices.
    // long: one restart in order (what was there, the stop, the start, the cleanup seen, the returns).
    pub(super) async fn restart(&self, wait: Duration) -> Result<RestartReport, RemoteError> {
        let known: Vec<String> = {
            let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let running = log.events.get(log.kubelet_from..).unwrap_or_default();
            seen_per_resource(running).into_iter().filter(|(_, s)| s.capacity > 0).map(|(r, _)| r).collect()
        };
        let restored_pods = self.checkpoint_pods();
        let old = self.kubelet();
        self.restarting.store(true, Ordering::SeqCst);
        let stopped = old.terminate(STOP_GRACE).await;
        if stopped.killed {
            tracing::warn!("the kubelet ignored SIGTERM for {} s and was killed", STOP_GRACE.as_secs());
        }
        let before = entries(&self.device_plugins);
        let from = {
            let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            log.kubelet_from = log.events.len();
            log.kubelet_from
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(super::read_log(rx, Arc::clone(&self.log), self.device_plugins.clone()));
        let (mut plan, command) = self.kubelet_start.clone();
        let started = spawn_in(&mut plan, command, Some(tx)).await;
        let new = match started {
            Ok(k) => Arc::new(k),
            Err(e) => {
                self.restarting.store(false, Ordering::SeqCst);
                return Err(remote(format!("the kubelet could not be started again: {e}")));
            }
        };
        *self.kubelet.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&new);
        self.restarts.fetch_add(1, Ordering::Relaxed);
        self.restarting.store(false, Ordering::SeqCst);
        let sock = self.device_plugins.join(crate::paths::KUBELET_SOCKET_NAME);
        let old_sock = before.get(crate::paths::KUBELET_SOCKET_NAME).copied();
        let podres = self.podresources.clone();
        let fresh = || {
            let now = entries(&self.device_plugins).get(crate::paths::KUBELET_SOCKET_NAME).copied();
            now.is_some_and(|e| Some(e) != old_sock) && podres.exists()
        };
        let tail = || self.output_tail();
        let name = self.name.clone();
        wait_ready(&new, &format!("{name} (started again)"), READY_TIMEOUT, &tail, || std::future::ready(fresh()))
            .await
            .map_err(|e| remote(e.to_string()))?;
        let sock_ms =
            std::fs::metadata(&sock).and_then(|m| m.modified()).map_or_else(|_| unix_ms(SystemTime::now()), unix_ms);
        let (deleted_sockets, deleted_files) = deleted(&before, &entries(&self.device_plugins));
        let left_ms = sock_ms.saturating_add(crate::text::millis(wait)).saturating_sub(unix_ms(SystemTime::now()));
        let deadline = crate::duration::deadline(Duration::from_millis(left_ms));
        let back = loop {
            let back = {
                let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                returns(log.events.get(from..).unwrap_or_default(), sock_ms)
            };
            let all = known.iter().all(|r| back.get(r).is_some_and(|(_, snap)| snap.is_some()));
            if all || tokio::time::Instant::now() >= deadline || new.exit().is_some() {
                break back;
            }
            tokio::time::sleep(POLL).await;
        };
        let waited_ms = unix_ms(SystemTime::now()).saturating_sub(sock_ms);
        let status = self.status().await.ok();
        let resources: Vec<ResourceReturn> = known
            .iter()
            .map(|r| {
                let now = status.as_ref().and_then(|s| s.resource(r));
                let (register_after_ms, first_snapshot_after_ms) = match back.get(r) {
                    Some((reg, snap)) => (Some(*reg), *snap),
                    None => (None, None),
                };
                ResourceReturn {
                    resource: r.clone(),
                    reregistered: register_after_ms.is_some(),
                    register_after_ms,
                    first_snapshot_after_ms,
                    capacity: now.map_or(0, |n| n.capacity),
                    allocatable: now.map_or(0, |n| n.allocatable),
                }
            })
            .collect();
        Ok(RestartReport {
            kubelet_version: self.version,
            cleanup_rule: self.version.cleanup_rule(),
            deleted_sockets,
            deleted_files,
            would_delete: Vec::new(),
            restored_pods,
            checkpoint: Some(self.checkpoint.display().to_string()),
            waited_ms,
            all_returned: resources.iter().all(|r| r.first_snapshot_after_ms.is_some()),
            resources,
            readmitted: Vec::new(),
            kubelet_socket_late_ms: None,
            dra_restored_claims: 0,
        })
    }

    /// The pods the device manager's checkpoint holds (what a starting kubelet restores).
    fn checkpoint_pods(&self) -> usize {
        let Ok(Some(cp)) =
            crate::checkpoint::Checkpoint::read(&self.checkpoint, crate::checkpoint::LegacyFormat::Refuse)
        else {
            return 0;
        };
        let uids: std::collections::BTreeSet<&str> =
            cp.data.pod_device_entries.iter().flatten().map(|e| e.pod_uid.as_str()).collect();
        uids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet_sim::Via;

    fn registered(ms: u64, resource: &str) -> WireEvent {
        WireEvent {
            unix_ms: ms,
            kind: WireEventKind::Registered {
                resource: resource.into(),
                endpoint: "gpu.sock".into(),
                socket: String::new(),
                via: Via::KubeletSock,
                version: "v1beta1".into(),
                request_options: None,
                pre_start_required: false,
                get_preferred_allocation_available: false,
                took_ms: 0,
            },
        }
    }

    fn snapshot(ms: u64, resource: &str, devices: usize) -> WireEvent {
        WireEvent {
            unix_ms: ms,
            kind: WireEventKind::Snapshot {
                resource: resource.into(),
                devices,
                capacity: Some(devices),
                allocatable: None,
                message_bytes: None,
            },
        }
    }

    #[test]
    fn a_return_counts_from_the_new_kubelet_sock_and_needs_a_list_with_devices() {
        let events = [
            snapshot(1_000, "a", 2),
            registered(1_200, "a"),
            snapshot(1_250, "a", 0),
            snapshot(1_300, "a", 2),
            registered(1_400, "b"),
        ];
        let r = returns(&events, 1_100);
        assert_eq!(r.get("a"), Some(&(100, Some(200))));
        assert_eq!(r.get("b"), Some(&(300, None)));
    }

    #[test]
    fn the_cleanup_deleted_what_is_gone_or_was_made_anew() {
        let e = |inode, socket| Entry { inode, ctime_ns: 1, socket };
        let before: BTreeMap<String, Entry> = [
            ("kubelet.sock".to_string(), e(1, true)),
            ("gpu.sock".to_string(), e(2, true)),
            ("kubelet_internal_checkpoint".to_string(), e(3, false)),
            ("note".to_string(), e(4, false)),
        ]
        .into();
        let after: BTreeMap<String, Entry> = [
            ("kubelet.sock".to_string(), e(5, true)),
            ("gpu.sock".to_string(), Entry { inode: 2, ctime_ns: 9, socket: true }),
            ("kubelet_internal_checkpoint".to_string(), e(3, false)),
        ]
        .into();
        let (sockets, files) = deleted(&before, &after);
        assert_eq!(sockets, ["gpu.sock"]);
        assert_eq!(files, ["note"]);
    }
}
