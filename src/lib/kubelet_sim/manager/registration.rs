//! Registrant transitions: the sim's resource limit, the 1.37 refusal of
//! a second endpoint at a live socket, storing the new endpoint (the old
//! connection keeps feeding the resource), what a failed Register does to
//! the clients already there, and `DeRegisterPlugin`
//! (docs/kubelet-versions.md §2, §6).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::state::Endpoint;
use super::{Effect, Effects, Manager};
use crate::kubelet_sim::events::{EventKind, Via};
use crate::proto::deviceplugin::v1beta1 as dp;

/// Who registers: the fields every event about a registration names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Registrant {
    /// The resource name.
    pub resource: String,
    /// The endpoint as the plugin named it.
    pub endpoint: String,
    /// The socket the kubelet dials (the endpoint joined to the directory).
    pub socket: PathBuf,
    /// kubelet.sock or plugins_registry.
    pub via: Via,
    /// The API version the plugin sent.
    pub version: String,
}

impl Registrant {
    /// The `registration-rejected` event for this registration.
    pub fn rejected(&self, message: impl Into<String>) -> EventKind {
        EventKind::RegistrationRejected {
            resource: self.resource.clone(),
            endpoint: self.endpoint.clone(),
            socket: self.socket.display().to_string(),
            via: self.via,
            version: self.version.clone(),
            message: message.into(),
        }
    }
}

/// A stored registration.
#[derive(Debug)]
pub(crate) struct Registered {
    /// The new endpoint's ID (the shell keeps its connection under it).
    pub id: u64,
    /// A live endpoint of the resource was replaced.
    pub replaced: bool,
    /// Connections to close (an old endpoint whose stream had ended).
    pub effects: Effects,
}

/// The kubelet's refusal (1.37+, `PluginConnected` in
/// pkg/kubelet/cm/devicemanager/manager.go) of a second endpoint at a socket
/// path still in its endpoint store.
pub fn duplicate_text(socket: &Path) -> String {
    crate::kubelet_texts::ALREADY_CONNECTED.fill(&[&socket.display()])
}

impl Manager {
    /// The refusal text of a Register over the sim's resource limit, or
    /// `None` (counted in the status). A Register of a known name is always taken.
    pub fn over_limit(&mut self, resource: &str) -> Option<String> {
        let max = self.max_resources;
        let st = &mut self.st;
        if st.resources.contains_key(resource) || st.resources.len() < max {
            return None;
        }
        st.refused_over_limit += 1;
        Some(format!(
            "dpctl kubelet-sim refuses to register {resource}: it tracks at most {max} distinct resource \
             names and knows {} (a limit of the sim, not of the kubelet)",
            st.resources.len()
        ))
    }

    /// The dial-back and GetDevicePluginOptions answered: stores the
    /// endpoint, or (1.37+) refuses it when an endpoint at the same socket
    /// is still stored, which then drops every client at that socket.
    pub fn register(
        &mut self,
        reg: &Registrant,
        options: dp::DevicePluginOptions,
        now: Instant,
    ) -> Result<Registered, String> {
        if self.version.rejects_duplicate_socket() {
            let live = self.st.resources.get(&reg.resource).is_some_and(|r| {
                r.endpoint.as_ref().is_some_and(|e| !e.stopped && e.socket == reg.socket)
                    || r.superseded.iter().any(|e| e.socket == reg.socket)
                    || r.untracked_clients.iter().any(|(_, s)| *s == reg.socket)
            });
            if live {
                self.register_failed(&reg.resource, &reg.socket);
                return Err(duplicate_text(&reg.socket));
            }
        }
        Ok(self.store_endpoint(reg, options, now))
    }

    /// Stores the new endpoint: the old connection is kept feeding the
    /// resource (docs/kubelet-versions.md §2, 1.26-1.36 and master alike), a
    /// resource forgotten at the grace expiry starts again from no devices.
    fn store_endpoint(&mut self, reg: &Registrant, options: dp::DevicePluginOptions, now: Instant) -> Registered {
        let st = &mut self.st;
        let id = st.next_id();
        let generation = st.next_id();
        let r = st.resources.entry(reg.resource.clone()).or_default();
        let replaced = r.endpoint.as_ref().is_some_and(|e| !e.stopped);
        let mut effects = Vec::new();
        if let Some(old) = r.endpoint.take() {
            if !old.stopped && old.streaming {
                r.superseded.push(old);
            } else {
                effects.push(Effect::Close(old.id));
            }
        }
        r.generation = generation;
        r.registrations += 1;
        r.untracked = false;
        r.stopped_at = None;
        r.restored = false;
        if r.removed {
            // The kubelet forgot the resource's devices at the grace expiry;
            // node status keeps it at capacity 0 until the first snapshot.
            r.removed = false;
            r.devices.clear();
        }
        r.endpoint = Some(Endpoint {
            id,
            endpoint: reg.endpoint.clone(),
            socket: reg.socket.clone(),
            via: reg.via,
            options,
            streaming: true,
            registered_at: now,
            first_snapshot_at: None,
            stopped: false,
        });
        Registered { id, replaced, effects }
    }

    /// A Register of `resource` at `socket` failed after validation
    /// (dial-back, GetDevicePluginOptions, or 1.37's duplicate check).
    /// 1.26-1.36 (pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go):
    /// the kubelet stored the new client under the name before dialing, so
    /// the failure's `deregisterClient(name)` leaves the name with no client
    /// at all; a live stream of an earlier registration then ends
    /// unnoticed. 1.37+ (PR #135437) keep a list of clients per name and
    /// drop every one at the failed socket path: a live client elsewhere
    /// stays tracked, one at the same path is dropped (its endpoint stays stored).
    pub fn register_failed(&mut self, resource: &str, socket: &Path) {
        let by_name = self.version.replaces_by_name();
        let Some(r) = self.st.resources.get_mut(resource) else { return };
        if by_name {
            let live = r.endpoint.as_ref().is_some_and(|e| !e.stopped) || !r.superseded.is_empty();
            if live {
                r.untracked = true;
            }
            return;
        }
        let mut dropped: Vec<(u64, PathBuf)> = r
            .endpoint
            .iter()
            .filter(|e| !e.stopped && e.socket == socket)
            .chain(r.superseded.iter().filter(|e| e.socket == socket))
            .map(|e| (e.id, e.socket.clone()))
            .collect();
        dropped.retain(|d| !r.untracked_clients.contains(d));
        r.untracked_clients.extend(dropped);
    }

    /// `DeRegisterPlugin` after a plugins_registry socket is deleted
    /// (docs/kubelet-versions.md §6): the client is disconnected as if its
    /// stream ended (devices unhealthy, grace period). Up to 1.36 the client
    /// is found by resource name only, so a same-named plugin registered
    /// through kubelet.sock is disconnected too; 1.37+ match the endpoint as well.
    pub fn deregister(&mut self, resource: &str, socket: &Path, deleted: &Path, now: Instant) -> Effects {
        let by_endpoint = self.version.deregisters_by_endpoint();
        let Some(r) = self.st.resources.get_mut(resource) else { return Vec::new() };
        // docs/kubelet-versions.md §2 (1.26-1.36): no client under the name, so
        // `getClient(name)` finds nothing to disconnect.
        if r.untracked && !by_endpoint {
            return Vec::new();
        }
        // 1.37+: a client dropped by a failed Register at this socket is not found either.
        if by_endpoint && r.untracked_clients.iter().any(|(_, s)| s == socket) {
            return Vec::new();
        }
        // 1.37+: the client of a replaced endpoint is still known by its socket,
        // so its connection is closed and its endpoint dropped (not the last one).
        if by_endpoint && let Some(old) = r.superseded.iter_mut().find(|e| e.socket == socket && !e.stopped) {
            old.streaming = false;
            let id = old.id;
            let mut out = vec![Effect::StopStream(id)];
            let why = format!("its plugins_registry socket {} was deleted", deleted.display());
            out.extend(self.stream_ended(resource, id, why, now));
            return out;
        }
        let Some(ep) = r.endpoint.as_mut() else { return Vec::new() };
        if ep.stopped || (by_endpoint && ep.socket != socket) {
            return Vec::new();
        }
        ep.streaming = false;
        let id = ep.id;
        let mut out = vec![Effect::StopStream(id)];
        let why = format!("its plugins_registry socket {} was deleted (DeRegisterPlugin)", deleted.display());
        out.extend(self.stream_ended(resource, id, why, now));
        out
    }
}
