//! ListAndWatch transitions: a snapshot replaces the resource's devices, a
//! stream end marks them unhealthy and starts the grace period (or, 1.37+,
//! hands over to another stored endpoint), and the grace expiry drops the
//! resource to capacity 0 (docs/kubelet-versions.md §2, §3).

use std::path::PathBuf;
use std::time::Instant;

use super::state::Resource;
use super::{Effect, Effects, Manager};
use crate::kubelet_sim::events::{EventKind, health_changes};
use crate::model::{self, Device};

impl Manager {
    /// Endpoint `id` sent a full device list (`encoded_len` bytes on the wire).
    pub fn snapshot(
        &mut self,
        resource: &str,
        id: u64,
        devices: Vec<Device>,
        encoded_len: usize,
        now: Instant,
    ) -> Effects {
        let Some(r) = self.st.resources.get_mut(resource) else { return Vec::new() };
        let old_stream = r.superseded.iter().any(|e| e.id == id);
        match r.endpoint.as_mut().filter(|e| e.id == id) {
            Some(ep) => {
                if ep.first_snapshot_at.is_none() {
                    ep.first_snapshot_at = Some(now);
                }
            }
            // A replaced plugin's stream still updates the resource (§2).
            None if old_stream => {}
            None => return Vec::new(),
        }
        let violations = crate::contract::check_snapshot(&devices, encoded_len);
        let mut devices = devices;
        if violations.iter().any(|v| v.rule == "device-id-unique") {
            last_topology_wins(&mut devices);
        }
        let changes = if r.devices.is_empty() { Vec::new() } else { model::diff(&r.devices, &devices) };
        r.devices = devices;
        r.disconnected = false;
        r.stream_end = None;
        r.removed = false;
        r.reported = true;
        r.sets = true;
        r.snapshots += 1;
        let c = r.counts();
        // The kubelet writes its checkpoint after each update, before anyone hears of it.
        let mut out = vec![
            Effect::WriteCheckpoint,
            Effect::Emit(EventKind::Snapshot {
                resource: resource.to_string(),
                seq: r.snapshots,
                capacity: c.capacity,
                allocatable: c.allocatable,
                devices: r.devices.len(),
                message_bytes: encoded_len,
                changes: changes.len(),
                violations,
            }),
        ];
        for (dev, from, to) in health_changes(&changes) {
            out.push(Effect::Emit(EventKind::HealthChanged {
                resource: resource.to_string(),
                id: dev.to_string(),
                from: from.to_string(),
                to: to.to_string(),
                capacity: c.capacity,
                allocatable: c.allocatable,
            }));
        }
        out
    }

    /// The stream of endpoint `id` ended (`reason` as the kubelet logs it):
    /// all devices unhealthy and the grace period starts, no retry; the
    /// release played decides whose stream end counts.
    // long: the kubelet's runClient/PluginDisconnected cases in order (untracked
    // client, a replaced endpoint's stream per release, 1.37's failover, the
    // disconnect itself), each a few lines with its own event.
    pub fn stream_ended(&mut self, resource: &str, id: u64, reason: String, now: Instant) -> Effects {
        let mut reason = reason;
        let version = self.version;
        let grace = self.st.grace_period;
        let generation = self.st.next_id();
        let Some(r) = self.st.resources.get_mut(resource) else { return Vec::new() };
        let old_stream = r.superseded.iter().position(|e| e.id == id);
        // 1.37+: a client dropped by a failed Register at its socket is found by
        // neither runClient nor DeRegisterPlugin, so nothing disconnects it.
        let dropped_client = !version.replaces_by_name() && r.untracked_clients.iter().any(|(i, _)| *i == id);
        if (r.untracked && version.replaces_by_name()) || dropped_client {
            // docs/kubelet-versions.md §2 (1.26-1.36): runClient finds no client
            // under the name (a later Register failed and deregistered it), so
            // PluginDisconnected is never called: devices keep their health,
            // no grace period, the endpoint stays for Allocate.
            let Some((socket, c)) = end_untracked(r, id, old_stream) else { return Vec::new() };
            tracing::info!(resource, reason = %reason, "ListAndWatch ended unexpectedly for device plugin (untracked client)");
            let mut out: Effects = old_stream.map(|_| Effect::Close(id)).into_iter().collect();
            out.push(Effect::Emit(EventKind::StreamEndedUntracked {
                resource: resource.to_string(),
                socket: socket.display().to_string(),
                reason,
                capacity: c.capacity,
                allocatable: c.allocatable,
            }));
            return out;
        }
        let mut out = Vec::new();
        if let Some(i) = old_stream {
            r.superseded.remove(i);
            out.push(Effect::Close(id));
            if !version.replaces_by_name() {
                // 1.37+: runClient matches name and socket; only the old client goes.
                return out;
            }
            // ≤1.36 (issue #121994): runClient finds the client by name, i.e.
            // the new one, closes its connection and disconnects the resource.
            match r.endpoint.as_mut().filter(|e| !e.stopped) {
                Some(ep) => {
                    ep.streaming = false;
                    out.push(Effect::StopStream(ep.id));
                    reason = format!(
                        "the stream of the plugin this one replaced ended ({reason}); kubelet {version} looks the \
                         client up by resource name, so it closed the new plugin's connection (issue #121994)"
                    );
                }
                None => return out,
            }
        } else if r.endpoint.as_ref().is_none_or(|e| e.id != id) {
            return out;
        } else if !version.replaces_by_name()
            && let Some(mut failover) = fail_over(r, resource, &reason)
        {
            out.append(&mut failover);
            return out;
        }
        let Some(ep) = r.endpoint.as_mut() else { return out };
        ep.stopped = true;
        ep.streaming = false;
        let socket = ep.socket.display().to_string();
        r.disconnected = true;
        r.stream_end = Some(reason.clone());
        r.reported = true;
        r.stopped_at = Some(now);
        r.generation = generation;
        let c = r.counts();
        tracing::info!(resource, reason = %reason, "ListAndWatch ended unexpectedly for device plugin");
        // No checkpoint write: the kubelet's PluginDisconnected does not write.
        out.push(Effect::Emit(EventKind::StreamEnded {
            resource: resource.to_string(),
            socket,
            reason,
            capacity: c.capacity,
            allocatable: c.allocatable,
            grace_period_ms: crate::text::millis(grace),
        }));
        out.push(Effect::StartGrace { resource: resource.to_string(), generation });
        out
    }

    /// When the resource stopped at `generation` is removed (its stop plus
    /// the grace period now set), or `None` when that stop no longer holds
    /// (it registered again, or was removed): the timer ends.
    pub fn grace_deadline(&self, resource: &str, generation: u64) -> Option<Instant> {
        let r = self.st.resources.get(resource)?;
        if r.generation != generation || r.removed {
            return None;
        }
        r.stopped_at.map(|at| at + self.st.grace_period)
    }

    /// The grace timer of `generation` fired at `now`: the resource is
    /// removed (capacity 0, devices forgotten) if its deadline has passed.
    pub fn grace_expired(&mut self, resource: &str, generation: u64, now: Instant) -> Effects {
        if self.grace_deadline(resource, generation).is_none_or(|at| now < at) {
            return Vec::new();
        }
        let Some(r) = self.st.resources.get_mut(resource) else { return Vec::new() };
        r.removed = true;
        r.sets = false;
        r.devices.clear();
        r.stopped_at = None;
        let mut out: Effects = r.endpoint.take().map(|e| Effect::Close(e.id)).into_iter().collect();
        out.push(Effect::WriteCheckpoint);
        out.push(Effect::Emit(EventKind::ResourceRemoved { resource: resource.to_string() }));
        out
    }
}

/// docs/protocol.md §3.4: the kubelet keeps `allDevices` as a map by ID, so of a
/// repeated ID the last entry's topology is the one allocation, PodResources
/// and the checkpoint use (health stays per entry: the sets count it).
fn last_topology_wins(devices: &mut [Device]) {
    let last: std::collections::HashMap<String, Option<Vec<i64>>> =
        devices.iter().map(|d| (d.id.clone(), d.numa_nodes.clone())).collect();
    for d in devices.iter_mut() {
        if let Some(nodes) = last.get(&d.id) {
            d.numa_nodes.clone_from(nodes);
        }
    }
}

/// 1.37+ (PluginDisconnected in pkg/kubelet/cm/devicemanager/manager.go):
/// the current endpoint's stream ended but another endpoint of the resource
/// is still stored, so the ended one is only dropped and the other takes
/// over (Allocate goes there); the devices keep their health and no grace
/// period starts. `None` when no other endpoint is live.
fn fail_over(r: &mut Resource, resource: &str, reason: &str) -> Option<Effects> {
    let pos = r.superseded.iter().rposition(|e| !e.stopped)?;
    let promoted = r.superseded.remove(pos);
    let now_serving = promoted.socket.display().to_string();
    let ended = r.endpoint.replace(promoted);
    let socket = ended.as_ref().map(|e| e.socket.display().to_string()).unwrap_or_default();
    let c = r.counts();
    let mut out: Effects = ended.map(|e| Effect::Close(e.id)).into_iter().collect();
    out.push(Effect::Emit(EventKind::StreamEndedFailover {
        resource: resource.to_string(),
        socket,
        now_serving,
        reason: reason.to_string(),
        capacity: c.capacity,
        allocatable: c.allocatable,
    }));
    Some(out)
}

/// The stream of endpoint `id` (current, or the superseded one at
/// `old_stream`) ended while no client tracks it: its stream is done,
/// nothing else changes. The socket and the counts, or `None` for an unknown stream.
fn end_untracked(r: &mut Resource, id: u64, old_stream: Option<usize>) -> Option<(PathBuf, model::Counts)> {
    let socket = match (old_stream, r.endpoint.as_mut().filter(|e| e.id == id)) {
        (Some(i), _) => r.superseded.remove(i).socket,
        (None, Some(ep)) => {
            ep.streaming = false;
            ep.socket.clone()
        }
        (None, None) => return None,
    };
    Some((socket, r.counts()))
}
