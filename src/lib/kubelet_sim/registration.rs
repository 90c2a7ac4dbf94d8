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

use super::events::{EventKind, Via};
use super::manager::{Effect, Registrant};
use super::shell::Inner;
use crate::error::Error;
use crate::limits::KUBELET_MAX_RECV;
use crate::plugin_client::PluginClient;
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

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn register(&self, req: Request<dp::RegisterRequest>) -> Result<Response<dp::Empty>, Status> {
        let r = req.into_inner();
        // docs/kubelet-versions.md §1 (every version): filepath.Join, not Path::join.
        let socket = go_join(&self.inner.paths.dir, &r.endpoint);
        let who = Registrant {
            resource: r.resource_name,
            endpoint: r.endpoint,
            socket,
            via: Via::KubeletSock,
            version: r.version,
        };
        let input = RegisterInput { who, request_options: r.options };
        if crate::validate::check_registration(&input.who.version, &input.who.resource).is_ok() {
            let over = self.inner.lock().over_limit(&input.who.resource);
            if let Some(text) = over {
                self.inner.emit(input.who.rejected(text.clone()));
                return Err(Status::resource_exhausted(text));
            }
        }
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
    /// The registration while armed.
    pending: Option<Registrant>,
}

impl<'a> GivenUp<'a> {
    fn arm(inner: &'a Arc<Inner>, input: &RegisterInput) -> Self {
        let who = &input.who;
        let valid =
            who.via != Via::KubeletSock || crate::validate::check_registration(&who.version, &who.resource).is_ok();
        GivenUp { inner, pending: valid.then(|| who.clone()) }
    }

    fn disarm(mut self) {
        self.pending = None;
    }
}

impl Drop for GivenUp<'_> {
    fn drop(&mut self) {
        let Some(who) = self.pending.take() else { return };
        self.inner.lock().register_failed(&who.resource, &who.socket);
        self.inner.emit(who.rejected(GIVEN_UP));
    }
}

/// The event text for [`GivenUp`] (dpctl's words: the plugin that gave up
/// never reads the kubelet's, which is the cancelled dial's or options call's error).
const GIVEN_UP: &str = "the plugin ended its Register call before the dial-back and GetDevicePluginOptions \
     finished; this kubelet runs them under that call's context, so the registration stops (context canceled)";

/// A registration, from either way of registering.
pub(crate) struct RegisterInput {
    /// Who registers, as every event about it names them.
    pub who: Registrant,
    /// The options the RegisterRequest carried (none through plugins_registry).
    pub request_options: Option<dp::DevicePluginOptions>,
}

/// Validates, dials back, asks for the options, stores the endpoint and
/// starts ListAndWatch. The error is the kubelet's text.
// long: the kubelet's Register in its order (count, version, name, the sim's
// resource limit, dial-back, options, store, stream), each step a few lines
// with its own rejection; split, the order would be spread over helpers.
pub(crate) async fn register(inner: &Arc<Inner>, input: RegisterInput) -> Result<(), String> {
    let started = Instant::now();
    let RegisterInput { who, request_options } = input;
    let reject = |message: String| {
        inner.emit(who.rejected(message.clone()));
        message
    };
    if who.via == Via::KubeletSock {
        crate::validate::check_registration(&who.version, &who.resource).map_err(reject)?;
    }
    let over = inner.lock().over_limit(&who.resource);
    if let Some(text) = over {
        return Err(reject(text));
    }
    let failed = |message: String| {
        inner.lock().register_failed(&who.resource, &who.socket);
        reject(message)
    };
    let channel = match dial(&who.socket, inner.config.dial_timeout).await {
        Ok(c) => c,
        Err(last) => {
            tracing::info!(socket = %who.socket.display(), error = %last, "dial-back failed");
            return Err(failed(DIAL_FAILED.to_string()));
        }
    };
    let config = ClientConfig {
        connect_timeout: inner.config.dial_timeout,
        call_timeout: inner.config.rpc_timeout,
        max_recv_bytes: KUBELET_MAX_RECV,
        tap: inner.config.tap.clone(),
    };
    let client = PluginClient::from_channel(channel.clone(), &who.socket, &config);
    let pre_start = PluginClient::from_channel(
        channel,
        &who.socket,
        &ClientConfig { call_timeout: inner.config.pre_start_timeout, ..config },
    );
    let options = client
        .options()
        .await
        .map_err(|e| failed(format!("failed to get device plugin options: {}", go_rpc_error(&e))))?;
    let differ = request_options.is_some_and(|o| o != options);
    let stored = inner.lock().register(&who, options, Instant::now());
    let stored = stored.map_err(reject)?;
    inner.apply(stored.effects);
    inner.emit(EventKind::Registered {
        resource: who.resource.clone(),
        endpoint: who.endpoint.clone(),
        socket: who.socket.display().to_string(),
        via: who.via,
        version: who.version.clone(),
        request_options: request_options.map(Into::into),
        pre_start_required: options.pre_start_required,
        get_preferred_allocation_available: options.get_preferred_allocation_available,
        request_options_differ: differ,
        replaced: stored.replaced,
        took_ms: crate::text::millis(started.elapsed()),
    });
    connect(inner, &who.resource, stored.id, client, pre_start);
    Ok(())
}

/// Keeps the connection of the new endpoint `id` and starts its
/// ListAndWatch; if the manager dropped the endpoint meanwhile, the
/// connection is closed at once.
fn connect(inner: &Arc<Inner>, resource: &str, id: u64, client: PluginClient, pre_start: PluginClient) {
    let task = tokio::spawn(watch(Arc::clone(inner), resource.to_string(), id, client.clone()));
    let abort = task.abort_handle();
    inner.conns().insert(id, super::shell::Conn { client, pre_start, task: Some(abort) });
    // Checked after the insert: a Close for `id` from now on finds the entry.
    if !inner.lock().knows_endpoint(id) {
        inner.apply(vec![Effect::Close(id)]);
    }
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
/// (see [`super::manager::Manager::deregister`]).
pub(crate) fn deregister(inner: &Arc<Inner>, resource: &str, socket: &Path, deleted: &Path) {
    let effects = inner.lock().deregister(resource, socket, deleted, Instant::now());
    inner.apply(effects);
}

/// Runs ListAndWatch for endpoint `id` until the stream ends.
async fn watch(inner: Arc<Inner>, resource: String, id: u64, client: PluginClient) {
    let ended = |reason: String| {
        let effects = inner.lock().stream_ended(&resource, id, reason, Instant::now());
        inner.apply(effects);
    };
    let mut stream = match client.list_and_watch().await {
        Ok(s) => Box::pin(s),
        Err(e) => return ended(go_rpc_error(&e)),
    };
    while let Some(item) = stream.next().await {
        match item {
            Ok(snap) => {
                let effects = inner.lock().snapshot(&resource, id, snap.devices, snap.encoded_len, Instant::now());
                inner.apply(effects);
            }
            Err(e) => return ended(go_rpc_error(&e)),
        }
    }
    ended("the plugin ended the stream (status OK)".into());
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
