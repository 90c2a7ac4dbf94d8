//! The `v1beta1.Registration` service on `kubelet.sock`, and what follows a
//! registration: validation with the kubelet's texts (status `Unknown`), the
//! synchronous dial-back and GetDevicePluginOptions inside `Register`, then
//! ListAndWatch in the background (full snapshots, no retry when it ends),
//! and the grace period after which capacity drops to 0.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tonic::{Request, Response, Status};

use super::Inner;
use super::events::{EventKind, Via, health_changes};
use super::state::Endpoint;
use crate::error::{Error, KUBELET_MAX_RECV};
use crate::model;
use crate::plugin_client::{PluginClient, Snapshot};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::deviceplugin::v1beta1::registration_server::Registration;
use crate::transport::{self, ClientConfig};

/// The kubelet's text when the dial-back does not connect in time.
pub const DIAL_FAILED: &str = "failed to dial device plugin: context deadline exceeded";

/// Go's name for a gRPC code (as `status.Error` prints it).
fn go_code(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

/// An RPC error as grpc-go prints it (`rpc error: code = X desc = ...`), which
/// is how the kubelet embeds plugin errors in its own messages.
pub fn go_rpc_error(e: &Error) -> String {
    let (code, desc) = match e {
        Error::Rpc { code, message, .. } => (*code, message.clone()),
        Error::Unimplemented { message, .. } => (tonic::Code::Unimplemented, message.clone()),
        Error::DeadlineExceeded { .. } => (tonic::Code::DeadlineExceeded, "context deadline exceeded".into()),
        Error::MessageTooLarge { size, limit, .. } => (
            tonic::Code::ResourceExhausted,
            format!(
                "grpc: received message larger than max ({} vs. {limit})",
                size.map_or_else(|| "?".to_string(), |s| s.to_string())
            ),
        ),
        other => (tonic::Code::Unavailable, other.to_string()),
    };
    crate::kubelet_texts::RPC_ERROR.fill(&[&go_code(code), &desc])
}

/// Go's `filepath.Join(dir, elem)`: both joined with `/` and then cleaned
/// lexically (`filepath.Clean`). Unlike [`Path::join`], an absolute `elem`
/// is appended (`/run/x.sock` -> `<dir>/run/x.sock`), `""` gives the
/// directory itself and `..` can climb out of it.
pub fn go_join(dir: &Path, elem: &str) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let d = dir.as_os_str().as_bytes();
    let mut joined: Vec<u8> = Vec::with_capacity(d.len() + elem.len() + 1);
    joined.extend_from_slice(d);
    if !elem.is_empty() {
        if !joined.is_empty() {
            joined.push(b'/');
        }
        joined.extend_from_slice(elem.as_bytes());
    }
    PathBuf::from(std::ffi::OsString::from_vec(go_clean(&joined)))
}

/// Go's `filepath.Clean` on a unix path, as bytes.
fn go_clean(path: &[u8]) -> Vec<u8> {
    if path.is_empty() {
        return b".".to_vec();
    }
    let rooted = path[0] == b'/';
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in path.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                if parts.last().is_some_and(|p| *p != b"..") {
                    parts.pop();
                } else if !rooted {
                    parts.push(part);
                }
            }
            _ => parts.push(part),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    if rooted {
        out.push(b'/');
    }
    out.extend_from_slice(&parts.join(&b'/'));
    if out.is_empty() {
        out.push(b'.');
    }
    out
}

/// The Registration service the sim serves on kubelet.sock.
#[derive(Clone)]
pub(crate) struct RegistrationService {
    pub inner: Arc<Inner>,
}

/// Distinct resource names the sim tracks at once by default
/// ([`super::SimConfig::max_resources`]). Each costs a device
/// table, a plugin connection and its ListAndWatch task (about 60 KB); a
/// kubelet has no limit, but 3,000 names took the sim from 25 to 207 MB, so
/// a client looping over names could exhaust a CI runner. A Register of a
/// known name is always taken.
pub const MAX_RESOURCES: usize = 1024;

/// The refusal text of a Register over [`MAX_RESOURCES`], or `None`.
fn over_limit(inner: &Inner, resource: &str) -> Option<String> {
    let max = inner.config.max_resources;
    let mut st = inner.lock();
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

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn register(&self, req: Request<dp::RegisterRequest>) -> Result<Response<dp::Empty>, Status> {
        let r = req.into_inner();
        if crate::validate::check_registration(&r.version, &r.resource_name).is_ok()
            && let Some(text) = over_limit(&self.inner, &r.resource_name)
        {
            self.inner.emit(EventKind::RegistrationRejected {
                resource: r.resource_name.clone(),
                endpoint: r.endpoint.clone(),
                socket: go_join(&self.inner.paths.dir, &r.endpoint).display().to_string(),
                via: Via::KubeletSock,
                version: r.version.clone(),
                message: text.clone(),
            });
            return Err(Status::resource_exhausted(text));
        }
        // docs/kubelet-versions.md §1 (every version): filepath.Join, not Path::join.
        let socket = go_join(&self.inner.paths.dir, &r.endpoint);
        let input = RegisterInput {
            version: r.version,
            resource: r.resource_name,
            endpoint: r.endpoint,
            socket,
            via: Via::KubeletSock,
            request_options: r.options,
        };
        let result = if self.inner.config.kubelet_version.register_context_bounds_dial() {
            // 1.35+: the Register call's context bounds the
            // dial-back and GetDevicePluginOptions, so a plugin that gives up
            // on its call (deadline, cancel) aborts the registration, as
            // dropping this future does; the guard then fails it as the
            // kubelet's cancelled dial or options call would.
            let guard = GivenUp::arm(&self.inner, &input);
            let result = register(&self.inner, input).await;
            guard.disarm();
            result
        } else {
            // docs/kubelet-versions.md §1, 1.26-1.34: the kubelet dials back and
            // asks for the options under a background context, so a plugin
            // whose Register deadline passes can still end up registered:
            // the registration runs on even if this call is dropped.
            let inner = Arc::clone(&self.inner);
            match tokio::spawn(async move { register(&inner, input).await }).await {
                Ok(r) => r,
                Err(e) => Err(format!("registration task failed: {e}")),
            }
        };
        match result {
            Ok(()) => Ok(Response::new(dp::Empty {})),
            // The kubelet returns plain Go errors: status Unknown, its text as the message.
            Err(message) => Err(Status::unknown(message)),
        }
    }
}

/// What the kubelet does, from 1.35 (inferred), when the plugin gives up on a
/// valid Register call while the kubelet still dials back or asks for the
/// options under that call's context (docs/kubelet-versions.md §1): the dial or
/// the options call fails with the context's error, and that failure is
/// handled as any other (§2: on 1.35-1.36 the name loses its client, so a
/// live earlier plugin becomes untracked). Armed for a call that validates,
/// fired when the call's future is dropped before it finishes.
struct GivenUp<'a> {
    inner: &'a Arc<Inner>,
    /// The registration's identity while armed.
    pending: Option<(String, String, String, Via, String)>,
}

impl<'a> GivenUp<'a> {
    fn arm(inner: &'a Arc<Inner>, input: &RegisterInput) -> Self {
        let valid = input.via != Via::KubeletSock
            || crate::validate::check_registration(&input.version, &input.resource).is_ok();
        let pending = valid.then(|| {
            let socket = input.socket.display().to_string();
            (input.resource.clone(), input.endpoint.clone(), socket, input.via, input.version.clone())
        });
        GivenUp { inner, pending }
    }

    fn disarm(mut self) {
        self.pending = None;
    }
}

impl Drop for GivenUp<'_> {
    fn drop(&mut self) {
        let Some((resource, endpoint, socket, via, version)) = self.pending.take() else { return };
        untrack(self.inner, &resource, Path::new(&socket));
        self.inner.emit(EventKind::RegistrationRejected {
            resource,
            endpoint,
            socket,
            via,
            version,
            message: GIVEN_UP.to_string(),
        });
    }
}

/// The event text for [`GivenUp`] (dpctl's words: the plugin that gave up
/// never reads the kubelet's, which is the cancelled dial's or options call's error).
const GIVEN_UP: &str = "the plugin ended its Register call before the dial-back and GetDevicePluginOptions \
     finished; this kubelet runs them under that call's context, so the registration stops (context canceled)";

/// A registration, from either way of registering.
pub(crate) struct RegisterInput {
    pub version: String,
    pub resource: String,
    pub endpoint: String,
    pub socket: PathBuf,
    pub via: Via,
    pub request_options: Option<dp::DevicePluginOptions>,
}

/// Validates, dials back, asks for the options, stores the endpoint and
/// starts ListAndWatch. The error is the kubelet's text.
// long: the kubelet's Register in its order (count, version, name, the sim's
// resource limit, dial-back, options, store, stream), each step a few lines
// with its own rejection; split, the order would be spread over helpers.
pub(crate) async fn register(inner: &Arc<Inner>, input: RegisterInput) -> Result<(), String> {
    let started = Instant::now();
    let reject = |message: String| {
        inner.emit(EventKind::RegistrationRejected {
            resource: input.resource.clone(),
            endpoint: input.endpoint.clone(),
            socket: input.socket.display().to_string(),
            via: input.via,
            version: input.version.clone(),
            message: message.clone(),
        });
        message
    };
    if input.via == Via::KubeletSock {
        crate::validate::check_registration(&input.version, &input.resource).map_err(reject)?;
    }
    if let Some(text) = over_limit(inner, &input.resource) {
        return Err(reject(text));
    }
    let channel = match dial(&input.socket, inner.config.dial_timeout).await {
        Ok(c) => c,
        Err(last) => {
            tracing::info!(socket = %input.socket.display(), error = %last, "dial-back failed");
            untrack(inner, &input.resource, &input.socket);
            return Err(reject(DIAL_FAILED.to_string()));
        }
    };
    let config = ClientConfig {
        connect_timeout: inner.config.dial_timeout,
        call_timeout: inner.config.rpc_timeout,
        max_recv_bytes: KUBELET_MAX_RECV,
    };
    let client = PluginClient::from_channel(channel.clone(), &input.socket, &config);
    let pre_start_client = PluginClient::from_channel(
        channel,
        &input.socket,
        &ClientConfig { call_timeout: inner.config.pre_start_timeout, ..config },
    );
    let options = client.options().await.map_err(|e| {
        untrack(inner, &input.resource, &input.socket);
        reject(format!("failed to get device plugin options: {}", go_rpc_error(&e)))
    })?;
    let differ = input.request_options.is_some_and(|o| o != options);
    let version = inner.config.kubelet_version;
    if version.rejects_duplicate_socket() {
        // 1.37+ (PR #135437, `PluginConnected` in
        // pkg/kubelet/cm/devicemanager/manager.go): an endpoint still in the
        // store at this socket path refuses the new one, and the failed
        // connect then drops every client at that path, the live one included.
        let st = inner.lock();
        let live = st.resources.get(&input.resource).is_some_and(|r| {
            r.endpoint.as_ref().is_some_and(|e| !e.stopped && e.socket == input.socket)
                || r.superseded.iter().any(|e| e.socket == input.socket)
                || r.untracked_clients.iter().any(|(_, s)| *s == input.socket)
        });
        if live {
            drop(st);
            untrack(inner, &input.resource, &input.socket);
            return Err(reject(duplicate_text(&input.socket)));
        }
    }
    let (id, replaced) = store_endpoint(inner, &input, options, client.clone(), pre_start_client);
    inner.emit(EventKind::Registered {
        resource: input.resource.clone(),
        endpoint: input.endpoint.clone(),
        socket: input.socket.display().to_string(),
        via: input.via,
        version: input.version.clone(),
        request_options: input.request_options.map(Into::into),
        pre_start_required: options.pre_start_required,
        get_preferred_allocation_available: options.get_preferred_allocation_available,
        request_options_differ: differ,
        replaced,
        took_ms: crate::text::millis(started.elapsed()),
    });
    let task = tokio::spawn(watch(Arc::clone(inner), input.resource.clone(), id, client));
    let mut st = inner.lock();
    match st.resources.get_mut(&input.resource).and_then(|r| r.endpoint.as_mut()).filter(|e| e.id == id) {
        Some(e) => e.task = Some(task.abort_handle()),
        None => task.abort(),
    }
    Ok(())
}

/// A Register of `resource` at `socket` failed after validation (dial-back,
/// GetDevicePluginOptions, or 1.37's duplicate check). 1.26-1.36
/// (pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go): the kubelet
/// stored the new client under the name before dialing, so the failure's
/// `deregisterClient(name)` leaves the name with
/// no client at all; a live stream of an earlier registration then ends
/// unnoticed. 1.37+ (PR #135437) keep a list of clients per name and drop
/// every one at the failed socket path: a live client elsewhere stays
/// tracked, one at the same path is dropped (its endpoint stays stored).
fn untrack(inner: &Arc<Inner>, resource: &str, socket: &Path) {
    let by_name = inner.config.kubelet_version.replaces_by_name();
    let mut st = inner.lock();
    let Some(r) = st.resources.get_mut(resource) else { return };
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
        .map(|e| (e.id, e.socket.clone()))
        .chain(r.superseded.iter().filter(|e| e.socket == socket).map(|e| (e.id, e.socket.clone())))
        .collect();
    dropped.retain(|d| !r.untracked_clients.contains(d));
    r.untracked_clients.extend(dropped);
}

/// Stores the new endpoint of `input.resource` (its id and whether it
/// replaced a live one): the old connection is kept feeding the resource
/// (docs/kubelet-versions.md §2), a resource forgotten at the grace expiry starts
/// again from no devices.
fn store_endpoint(
    inner: &Arc<Inner>,
    input: &RegisterInput,
    options: dp::DevicePluginOptions,
    client: PluginClient,
    pre_start_client: PluginClient,
) -> (u64, bool) {
    let mut st = inner.lock();
    let id = st.next_id();
    let generation = st.next_id();
    let r = st.resources.entry(input.resource.clone()).or_default();
    let replaced = r.endpoint.as_ref().is_some_and(|e| !e.stopped);
    // docs/kubelet-versions.md §2: the old connection is not closed; its stream
    // keeps feeding the resource (1.26-1.36 and master alike).
    if let Some(old) = r.endpoint.take() {
        if !old.stopped && old.task.is_some() {
            r.superseded.push(old);
        } else if let Some(task) = old.task {
            task.abort();
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
        endpoint: input.endpoint.clone(),
        socket: input.socket.clone(),
        via: input.via,
        options,
        client: client.clone(),
        pre_start_client,
        task: None,
        registered_at: Instant::now(),
        first_snapshot_at: None,
        stopped: false,
    });
    (id, replaced)
}

/// The kubelet's refusal (1.37+, `PluginConnected` in
/// pkg/kubelet/cm/devicemanager/manager.go) of a second endpoint at a socket
/// path still in its endpoint store.
pub fn duplicate_text(socket: &Path) -> String {
    crate::kubelet_texts::ALREADY_CONNECTED.fill(&[&socket.display()])
}

/// Dials the plugin the way grpc-go's blocking dial does: keep trying (with
/// grpc's 1 s, 1.6x backoff) until the deadline. The error is the last failure.
pub(crate) async fn dial(socket: &Path, timeout: Duration) -> Result<tonic::transport::Channel, Error> {
    let deadline = crate::duration::deadline(timeout);
    let mut backoff = Duration::from_secs(1);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(Error::ConnectTimeout { path: socket.to_path_buf(), timeout });
        }
        match transport::connect(socket, left).await {
            Ok(c) => return Ok(c),
            Err(e) => {
                let now = tokio::time::Instant::now();
                if now + backoff >= deadline {
                    tokio::time::sleep_until(deadline).await;
                    return Err(e);
                }
                tokio::time::sleep(backoff).await;
                backoff = backoff.mul_f64(1.6).min(Duration::from_secs(120));
            }
        }
    }
}

/// `DeRegisterPlugin` after a plugins_registry socket is deleted
/// (docs/kubelet-versions.md §6): the client is disconnected as if its stream
/// ended (devices unhealthy, grace period). Up to 1.36 the client is found by
/// resource name only, so a same-named plugin registered through kubelet.sock
/// is disconnected too; 1.37+ match the endpoint as well.
pub(crate) fn deregister(inner: &Arc<Inner>, resource: &str, socket: &Path, deleted: &Path) {
    let by_endpoint = inner.config.kubelet_version.deregisters_by_endpoint();
    let id = {
        let mut st = inner.lock();
        let Some(r) = st.resources.get_mut(resource) else { return };
        // docs/kubelet-versions.md §2 (1.26-1.36): no client under the name, so
        // `getClient(name)` finds nothing to disconnect.
        if r.untracked && !by_endpoint {
            return;
        }
        // 1.37+: a client dropped by a failed Register at this socket is not found either.
        if by_endpoint && r.untracked_clients.iter().any(|(_, s)| s == socket) {
            return;
        }
        // 1.37+: the client of a replaced endpoint is still known by its socket,
        // so its connection is closed and its endpoint dropped (not the last one).
        if by_endpoint && let Some(old) = r.superseded.iter_mut().find(|e| e.socket == socket && !e.stopped) {
            if let Some(t) = old.task.take() {
                t.abort();
            }
            let id = old.id;
            drop(st);
            stream_ended(inner, resource, id, format!("its plugins_registry socket {} was deleted", deleted.display()));
            return;
        }
        let Some(ep) = r.endpoint.as_mut() else { return };
        if ep.stopped || (by_endpoint && ep.socket != socket) {
            return;
        }
        if let Some(t) = ep.task.take() {
            t.abort();
        }
        ep.id
    };
    stream_ended(
        inner,
        resource,
        id,
        format!("its plugins_registry socket {} was deleted (DeRegisterPlugin)", deleted.display()),
    );
}

/// Runs ListAndWatch for endpoint `id` until the stream ends.
async fn watch(inner: Arc<Inner>, resource: String, id: u64, client: PluginClient) {
    let mut stream = match client.list_and_watch().await {
        Ok(s) => Box::pin(s),
        Err(e) => {
            stream_ended(&inner, &resource, id, go_rpc_error(&e));
            return;
        }
    };
    while let Some(item) = stream.next().await {
        match item {
            Ok(snap) => apply_snapshot(&inner, &resource, id, snap),
            Err(e) => {
                stream_ended(&inner, &resource, id, go_rpc_error(&e));
                return;
            }
        }
    }
    stream_ended(&inner, &resource, id, "the plugin ended the stream (status OK)".into());
}

/// Takes one full snapshot into the resource.
fn apply_snapshot(inner: &Arc<Inner>, resource: &str, id: u64, snap: Snapshot) {
    let mut events = Vec::new();
    {
        let mut st = inner.lock();
        let Some(r) = st.resources.get_mut(resource) else { return };
        let old_stream = r.superseded.iter().any(|e| e.id == id);
        match r.endpoint.as_mut().filter(|e| e.id == id) {
            Some(ep) => {
                if ep.first_snapshot_at.is_none() {
                    ep.first_snapshot_at = Some(Instant::now());
                }
            }
            // A replaced plugin's stream still updates the resource (§2).
            None if old_stream => {}
            None => return,
        }
        let violations = crate::contract::check_snapshot(&snap.devices, snap.encoded_len);
        let mut devices = snap.devices;
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
        for (dev, from, to) in health_changes(&changes) {
            events.push(EventKind::HealthChanged {
                resource: resource.to_string(),
                id: dev.to_string(),
                from: from.to_string(),
                to: to.to_string(),
                capacity: c.capacity,
                allocatable: c.allocatable,
            });
        }
        events.insert(
            0,
            EventKind::Snapshot {
                resource: resource.to_string(),
                seq: r.snapshots,
                capacity: c.capacity,
                allocatable: c.allocatable,
                devices: r.devices.len(),
                message_bytes: snap.encoded_len,
                changes: changes.len(),
                violations,
            },
        );
    }
    inner.write_checkpoint_now();
    for e in events {
        inner.emit(e);
    }
}

/// docs/protocol.md §3.4: the kubelet keeps `allDevices` as a map by ID, so of a
/// repeated ID the last entry's topology is the one allocation, PodResources
/// and the checkpoint use (health stays per entry: the sets count it).
fn last_topology_wins(devices: &mut [model::Device]) {
    let last: std::collections::HashMap<String, Option<Vec<i64>>> =
        devices.iter().map(|d| (d.id.clone(), d.numa_nodes.clone())).collect();
    for d in devices.iter_mut() {
        if let Some(nodes) = last.get(&d.id) {
            d.numa_nodes.clone_from(nodes);
        }
    }
}

/// The stream of endpoint `id` ended: all devices unhealthy, no retry.
fn stream_ended(inner: &Arc<Inner>, resource: &str, id: u64, mut reason: String) {
    let version = inner.config.kubelet_version;
    let (socket, counts, generation, grace) = {
        let mut st = inner.lock();
        let grace = st.grace_period;
        let generation = st.next_id();
        let Some(r) = st.resources.get_mut(resource) else { return };
        let old_stream = r.superseded.iter().position(|e| e.id == id);
        // 1.37+: a client dropped by a failed Register at its socket is found by
        // neither runClient nor DeRegisterPlugin, so nothing disconnects it.
        let dropped_client = !version.replaces_by_name() && r.untracked_clients.iter().any(|(i, _)| *i == id);
        if (r.untracked && version.replaces_by_name()) || dropped_client {
            // docs/kubelet-versions.md §2 (1.26-1.36): runClient finds no client
            // under the name (a later Register failed and deregistered it), so
            // PluginDisconnected is never called: devices keep their health,
            // no grace period, the endpoint stays for Allocate.
            let Some((socket, c)) = end_untracked(r, id, old_stream) else { return };
            drop(st);
            tracing::info!(resource, reason = %reason, "ListAndWatch ended unexpectedly for device plugin (untracked client)");
            inner.emit(EventKind::StreamEndedUntracked {
                resource: resource.to_string(),
                socket: socket.display().to_string(),
                reason,
                capacity: c.capacity,
                allocatable: c.allocatable,
            });
            return;
        }
        if let Some(i) = old_stream {
            r.superseded.remove(i);
            if !version.replaces_by_name() {
                // 1.37+: runClient matches name and socket; only the old client goes.
                return;
            }
            // ≤1.36 (issue #121994): runClient finds the client by name, i.e.
            // the new one, closes its connection and disconnects the resource.
            match r.endpoint.as_mut().filter(|e| !e.stopped) {
                Some(ep) => {
                    if let Some(t) = ep.task.take() {
                        t.abort();
                    }
                    reason = format!(
                        "the stream of the plugin this one replaced ended ({reason}); kubelet {version} looks the \
                         client up by resource name, so it closed the new plugin's connection (issue #121994)"
                    );
                }
                None => return,
            }
        } else if r.endpoint.as_ref().is_none_or(|e| e.id != id) {
            return;
        } else if !version.replaces_by_name()
            && let Some(ev) = fail_over(r, resource, &reason)
        {
            drop(st);
            inner.emit(ev);
            return;
        }
        let Some(ep) = r.endpoint.as_mut() else { return };
        ep.stopped = true;
        ep.task = None;
        let socket = ep.socket.display().to_string();
        r.disconnected = true;
        r.stream_end = Some(reason.clone());
        r.reported = true;
        r.stopped_at = Some(Instant::now());
        r.generation = generation;
        (socket, r.counts(), generation, grace)
    };
    tracing::info!(resource, reason = %reason, "ListAndWatch ended unexpectedly for device plugin");
    // No checkpoint write: the kubelet's PluginDisconnected does not write.
    inner.emit(EventKind::StreamEnded {
        resource: resource.to_string(),
        socket,
        reason,
        capacity: counts.capacity,
        allocatable: counts.allocatable,
        grace_period_ms: crate::text::millis(grace),
    });
    spawn_grace(inner, resource, generation);
}

/// 1.37+ (PluginDisconnected in pkg/kubelet/cm/devicemanager/manager.go):
/// the current endpoint's stream ended but another endpoint of the resource
/// is still stored, so the ended one is only dropped and the other takes
/// over (Allocate goes there); the devices keep their health and no grace
/// period starts. `None` when no other endpoint is live.
fn fail_over(r: &mut super::state::Resource, resource: &str, reason: &str) -> Option<EventKind> {
    let pos = r.superseded.iter().rposition(|e| !e.stopped)?;
    let promoted = r.superseded.remove(pos);
    let now_serving = promoted.socket.display().to_string();
    let socket = r.endpoint.replace(promoted).map(|e| e.socket.display().to_string()).unwrap_or_default();
    let c = r.counts();
    Some(EventKind::StreamEndedFailover {
        resource: resource.to_string(),
        socket,
        now_serving,
        reason: reason.to_string(),
        capacity: c.capacity,
        allocatable: c.allocatable,
    })
}

/// The stream of endpoint `id` (current, or the superseded one at
/// `old_stream`) ended while no client tracks it: its task is done, nothing
/// else changes. The socket and the counts, or `None` for an unknown stream.
fn end_untracked(
    r: &mut super::state::Resource,
    id: u64,
    old_stream: Option<usize>,
) -> Option<(PathBuf, model::Counts)> {
    let socket = match (old_stream, r.endpoint.as_mut().filter(|e| e.id == id)) {
        (Some(i), _) => r.superseded.remove(i).socket,
        (None, Some(ep)) => {
            ep.task = None;
            ep.socket.clone()
        }
        (None, None) => return None,
    };
    Some((socket, r.counts()))
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
            let deadline = {
                let st = inner.lock();
                let Some(r) = st.resources.get(&resource) else { return };
                if r.generation != generation || r.removed {
                    return;
                }
                let Some(at) = r.stopped_at else { return };
                at + st.grace_period
            };
            if Instant::now() >= deadline {
                let removed = {
                    let mut st = inner.lock();
                    match st.resources.get_mut(&resource) {
                        Some(r) if r.generation == generation && !r.removed => {
                            r.removed = true;
                            r.sets = false;
                            r.devices.clear();
                            r.endpoint = None;
                            r.stopped_at = None;
                            true
                        }
                        _ => false,
                    }
                };
                if removed {
                    inner.write_checkpoint_now();
                    inner.emit(EventKind::ResourceRemoved { resource: resource.clone() });
                }
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

    /// docs/kubelet-versions.md §1 "Endpoint handling" (1.26 to master): the
    /// socket is `filepath.Join(socketDir, endpoint)`.
    #[test]
    fn endpoint_is_joined_like_go_filepath_join() {
        let dir = Path::new("/var/lib/kubelet/device-plugins");
        let j = |e: &str| go_join(dir, e).display().to_string();
        assert_eq!(j("x.sock"), "/var/lib/kubelet/device-plugins/x.sock");
        assert_eq!(j("/run/x.sock"), "/var/lib/kubelet/device-plugins/run/x.sock");
        assert_eq!(j(""), "/var/lib/kubelet/device-plugins");
        assert_eq!(j("../x.sock"), "/var/lib/kubelet/x.sock");
        assert_eq!(j("../../../../../x.sock"), "/x.sock");
        assert_eq!(j("sub//./y.sock/"), "/var/lib/kubelet/device-plugins/sub/y.sock");
        assert_eq!(go_join(Path::new("rel/dir"), "../../../a").display().to_string(), "../a");
        assert_eq!(go_join(Path::new(""), "").display().to_string(), ".");
    }

    #[test]
    fn go_error_texts() {
        let p = std::path::Path::new("/x.sock");
        let e = Error::Rpc { rpc: "r".into(), path: p.into(), code: tonic::Code::Unknown, message: "boom".into() };
        assert_eq!(go_rpc_error(&e), "rpc error: code = Unknown desc = boom");
        let e = Error::Rpc { rpc: "r".into(), path: p.into(), code: tonic::Code::Cancelled, message: "x".into() };
        assert_eq!(go_rpc_error(&e), "rpc error: code = Canceled desc = x");
        let e = Error::MessageTooLarge { rpc: "r".into(), path: p.into(), size: Some(5), limit: 4 };
        assert_eq!(
            go_rpc_error(&e),
            "rpc error: code = ResourceExhausted desc = grpc: received message larger than max (5 vs. 4)"
        );
    }
}
