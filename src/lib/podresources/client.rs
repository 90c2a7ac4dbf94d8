//! A client for a kubelet's PodResources socket: v1 `List`, `Get` and
//! `GetAllocatableResources`, and v1alpha1 `List` for kubelets that do not
//! serve v1 (chosen automatically, or forced).
//!
//! It behaves as a polite neighbour of the kubelet's rate limit (100 calls a
//! second, burst 10, shared by every client on the node): it never sends
//! faster than that itself, and when the kubelet still answers
//! `ResourceExhausted` it backs off and retries a few times before giving up.
//! Errors are classified with [`Error::from_status`]; [`hint`] explains the
//! PodResources-specific ones (Get disabled, unknown pod, old kubelet).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tonic::transport::Channel;

use super::ratelimit::TokenBucket;
use super::server::{GET_DISABLED_MESSAGE, RATE_BURST, RATE_LIMIT_MESSAGE, RATE_QPS};
use super::view::Api;
use crate::error::{Error, Result};
use crate::proto::podresources::{v1, v1alpha1};
use crate::transport::{self, ClientConfig};

/// The receive limit upstream PodResources clients use (16 MiB).
pub const DEFAULT_MAX_RECV: usize = 16 * 1024 * 1024;
/// The connection timeout upstream PodResources clients use.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `v1.PodResourcesLister/List`.
pub const RPC_LIST: &str = "v1.PodResourcesLister/List";
/// `v1.PodResourcesLister/Get`.
pub const RPC_GET: &str = "v1.PodResourcesLister/Get";
/// `v1.PodResourcesLister/GetAllocatableResources`.
pub const RPC_ALLOCATABLE: &str = "v1.PodResourcesLister/GetAllocatableResources";
/// `v1alpha1.PodResourcesLister/List`.
pub const RPC_LIST_V1ALPHA1: &str = "v1alpha1.PodResourcesLister/List";

/// Which API version to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiChoice {
    /// v1; v1alpha1 when v1 answers `Unimplemented` (kubelets before 1.20).
    #[default]
    Auto,
    /// Only v1.
    V1,
    /// Only v1alpha1 (List only).
    V1alpha1,
}

/// How the client behaves.
#[derive(Debug, Clone)]
pub struct PodResourcesConfig {
    /// Connect timeout, call deadline and receive limit.
    pub transport: ClientConfig,
    /// API version.
    pub api: ApiChoice,
    /// How often to retry a call the kubelet rate-limited (`ResourceExhausted`).
    pub rate_limit_retries: u32,
    /// First wait before such a retry; doubled each time.
    pub rate_limit_backoff: Duration,
}

impl Default for PodResourcesConfig {
    fn default() -> Self {
        PodResourcesConfig {
            transport: ClientConfig {
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                call_timeout: Duration::from_secs(10),
                max_recv_bytes: DEFAULT_MAX_RECV,
                tap: None,
            },
            api: ApiChoice::Auto,
            rate_limit_retries: 3,
            rate_limit_backoff: Duration::from_millis(100),
        }
    }
}

/// The answer to `List`, from whichever API version served it.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The API version that answered.
    pub api: Api,
    /// The pods; v1alpha1 answers are converted (no topology, CPUs, memory, claims).
    pub pods: Vec<v1::PodResources>,
}

/// A connected PodResources client.
#[derive(Debug)]
pub struct PodResourcesClient {
    v1: v1::pod_resources_lister_client::PodResourcesListerClient<Channel>,
    v1alpha1: v1alpha1::pod_resources_lister_client::PodResourcesListerClient<Channel>,
    path: PathBuf,
    config: PodResourcesConfig,
    /// The API version settled on (after the first List in auto mode).
    resolved: Mutex<Option<Api>>,
    fell_back: Mutex<bool>,
    /// The client never sends faster than the kubelet accepts.
    limiter: TokenBucket,
    rate_limited: AtomicU64,
}

impl PodResourcesClient {
    /// Connects to the PodResources socket at `path`.
    pub async fn connect(path: &Path, config: &PodResourcesConfig) -> Result<Self> {
        let channel = transport::connect(path, config.transport.connect_timeout).await?;
        Ok(Self::from_channel(channel, path, config))
    }

    /// Wraps an existing channel.
    pub fn from_channel(channel: Channel, path: &Path, config: &PodResourcesConfig) -> Self {
        let limit = config.transport.max_recv_bytes;
        let resolved = match config.api {
            ApiChoice::Auto => None,
            ApiChoice::V1 => Some(Api::V1),
            ApiChoice::V1alpha1 => Some(Api::V1alpha1),
        };
        PodResourcesClient {
            v1: v1::pod_resources_lister_client::PodResourcesListerClient::new(channel.clone())
                .max_decoding_message_size(limit),
            v1alpha1: v1alpha1::pod_resources_lister_client::PodResourcesListerClient::new(channel)
                .max_decoding_message_size(limit),
            path: path.to_path_buf(),
            config: config.clone(),
            resolved: Mutex::new(resolved),
            fell_back: Mutex::new(false),
            limiter: TokenBucket::new(RATE_QPS, RATE_BURST),
            rate_limited: AtomicU64::new(0),
        }
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The API version in use, once known.
    pub fn api(&self) -> Option<Api> {
        self.resolved.lock().ok().and_then(|g| *g)
    }

    /// True when auto mode fell back to v1alpha1 because v1 is not served.
    pub fn fell_back(&self) -> bool {
        self.fell_back.lock().map(|g| *g).unwrap_or(false)
    }

    /// How many calls the kubelet rejected with its rate limit so far
    /// (each was retried or reported).
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }

    fn set_api(&self, api: Api, fell_back: bool) {
        if let Ok(mut g) = self.resolved.lock() {
            *g = Some(api);
        }
        if fell_back && let Ok(mut g) = self.fell_back.lock() {
            *g = true;
        }
    }

    /// Runs one unary call: waits for the local rate limiter, applies the
    /// deadline, classifies the error, and retries rate-limited calls.
    async fn unary<T, F, Fut>(&self, rpc: &str, mut call: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let timeout = self.config.transport.call_timeout;
        let mut backoff = self.config.rate_limit_backoff;
        let mut attempt = 0;
        loop {
            self.limiter.take().await;
            let result = match tokio::time::timeout(timeout, call()).await {
                Ok(Ok(resp)) => return Ok(resp.into_inner()),
                Ok(Err(status)) if crate::rpc::is_deadline(&status) => {
                    Err(Error::DeadlineExceeded { rpc: rpc.into(), path: self.path.clone(), timeout })
                }
                Ok(Err(status)) => {
                    Err(Error::from_status(rpc, &self.path, &status, self.config.transport.max_recv_bytes))
                }
                Err(_) => Err(Error::DeadlineExceeded { rpc: rpc.into(), path: self.path.clone(), timeout }),
            };
            match result {
                Err(e) if is_rate_limited(&e) => {
                    self.rate_limited.fetch_add(1, Ordering::Relaxed);
                    if attempt >= self.config.rate_limit_retries {
                        return Err(e);
                    }
                    attempt += 1;
                    tracing::info!(rpc, wait = ?backoff, "rate-limited by the kubelet; backing off");
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2);
                }
                other => return other,
            }
        }
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        req.set_timeout(self.config.transport.call_timeout);
        req
    }

    async fn list_v1(&self) -> Result<Vec<v1::PodResources>> {
        let resp = self
            .unary(RPC_LIST, || {
                let mut c = self.v1.clone();
                let req = self.request(v1::ListPodResourcesRequest {});
                async move { c.list(req).await }
            })
            .await?;
        Ok(resp.pod_resources)
    }

    async fn list_v1alpha1(&self) -> Result<Vec<v1::PodResources>> {
        let resp = self
            .unary(RPC_LIST_V1ALPHA1, || {
                let mut c = self.v1alpha1.clone();
                let req = self.request(v1alpha1::ListPodResourcesRequest {});
                async move { c.list(req).await }
            })
            .await?;
        Ok(resp.pod_resources.iter().map(from_v1alpha1).collect())
    }

    /// `List`: v1, or v1alpha1 when forced or when v1 is not served.
    pub async fn list(&self) -> Result<Listing> {
        match self.api() {
            Some(Api::V1) => Ok(Listing { api: Api::V1, pods: self.list_v1().await? }),
            Some(Api::V1alpha1) => Ok(Listing { api: Api::V1alpha1, pods: self.list_v1alpha1().await? }),
            None => match self.list_v1().await {
                Ok(pods) => {
                    self.set_api(Api::V1, false);
                    Ok(Listing { api: Api::V1, pods })
                }
                Err(v1_err @ Error::Unimplemented { .. }) => {
                    tracing::info!(socket = %self.path.display(), "v1 List is not served; trying v1alpha1");
                    match self.list_v1alpha1().await {
                        Ok(pods) => {
                            self.set_api(Api::V1alpha1, true);
                            Ok(Listing { api: Api::V1alpha1, pods })
                        }
                        // Neither version: one error naming both, whose hint says what to check.
                        Err(Error::Unimplemented { message: alpha, .. }) => Err(match v1_err {
                            Error::Unimplemented { rpc, path, message } => Error::Unimplemented {
                                rpc,
                                path,
                                message: format!("{message}; and {RPC_LIST_V1ALPHA1}: {alpha}"),
                            },
                            other => other,
                        }),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            },
        }
    }

    /// `Get` for one pod (v1 only; kubelet 1.27 and later, feature gate
    /// `KubeletPodResourcesGet`).
    pub async fn get(&self, name: &str, namespace: &str) -> Result<v1::PodResources> {
        self.require_v1("Get")?;
        let resp = self
            .unary(RPC_GET, || {
                let mut c = self.v1.clone();
                let req = self.request(v1::GetPodResourcesRequest {
                    pod_name: name.to_string(),
                    pod_namespace: namespace.to_string(),
                });
                async move { c.get(req).await }
            })
            .await?;
        // A kubelet always fills the pod; an empty answer is reported as the pod itself, empty.
        Ok(resp.pod_resources.unwrap_or_else(|| v1::PodResources {
            name: name.to_string(),
            namespace: namespace.to_string(),
            ..Default::default()
        }))
    }

    /// `GetAllocatableResources` (v1 only; kubelet 1.21 and later).
    pub async fn allocatable(&self) -> Result<v1::AllocatableResourcesResponse> {
        self.require_v1("GetAllocatableResources")?;
        self.unary(RPC_ALLOCATABLE, || {
            let mut c = self.v1.clone();
            let req = self.request(v1::AllocatableResourcesRequest {});
            async move { c.get_allocatable_resources(req).await }
        })
        .await
    }

    fn require_v1(&self, rpc: &str) -> Result<()> {
        if self.config.api == ApiChoice::V1alpha1 {
            return Err(Error::invalid(
                "--api v1alpha1",
                format!("v1alpha1 has only List, not {rpc}; use --api v1 (or auto)"),
            ));
        }
        Ok(())
    }
}

/// A v1alpha1 pod in v1 form: devices without topology, nothing else.
pub fn from_v1alpha1(p: &v1alpha1::PodResources) -> v1::PodResources {
    v1::PodResources {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        containers: p
            .containers
            .iter()
            .map(|c| v1::ContainerResources {
                name: c.name.clone(),
                devices: c
                    .devices
                    .iter()
                    .map(|d| v1::ContainerDevices {
                        resource_name: d.resource_name.clone(),
                        device_ids: d.device_ids.clone(),
                        topology: None,
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// True for the kubelet's rate-limit rejection.
pub fn is_rate_limited(e: &Error) -> bool {
    matches!(e, Error::Rpc { code: tonic::Code::ResourceExhausted, .. })
}

/// True for a path that looks like a kubelet's PodResources socket.
fn is_podresources_socket(path: &Path) -> bool {
    path.parent().and_then(Path::file_name).is_some_and(|d| d == "pod-resources")
}

fn is_podresources_rpc(rpc: &str) -> bool {
    rpc.starts_with("v1.PodResourcesLister/") || rpc.starts_with("v1alpha1.PodResourcesLister/")
}

/// Parses the kubelet's "pod NAME in namespace NS not found".
fn unknown_pod(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("pod ")?.strip_suffix(" not found")?;
    let (name, ns) = rest.split_once(" in namespace ")?;
    Some((name, ns))
}

/// What to do about an error from a PodResources call, or `None` when the
/// error did not come from one ([`super::hint`] then falls back to [`Error::hint`]).
pub fn hint(e: &Error) -> Option<String> {
    match e {
        Error::NoSocket { path } if is_podresources_socket(path) => Some(format!(
            "no kubelet PodResources socket at {}: is this a Kubernetes node, does the kubelet run with \
             another --root-dir (the socket is <root-dir>/pod-resources/kubelet.sock), or is this a \
             container without a hostPath mount of the directory? Point --socket or {} at it",
            path.display(),
            crate::paths::ENV_PODRESOURCES_SOCKET
        )),
        Error::Rpc { rpc, message, .. } if is_podresources_rpc(rpc) && message.contains(GET_DISABLED_MESSAGE) => Some(
            "this kubelet has Get turned off: the feature gate KubeletPodResourcesGet is alpha (off) in \
             1.27-1.33 and beta (on by default) since 1.34. List answers the same question: \
             `dpctl podresources list -n NAMESPACE`"
                .into(),
        ),
        Error::Rpc { rpc, message, .. } if is_podresources_rpc(rpc) && unknown_pod(message).is_some() => {
            let (name, ns) = unknown_pod(message).unwrap_or_default();
            Some(format!(
                "the kubelet on this node has no active pod {name} in namespace {ns}: is it scheduled to this \
                 node, and are the name and namespace (-n) right? `dpctl podresources list -n {ns}` shows \
                 the pods it has"
            ))
        }
        Error::Rpc { rpc, message, .. }
            if is_podresources_rpc(rpc) && message.contains("GetAllocatableResources disabled") =>
        {
            Some(
                "this kubelet has GetAllocatableResources turned off (feature gate \
                 KubeletPodResourcesGetAllocatable: beta and on by default from 1.23, GA in 1.28)"
                    .into(),
            )
        }
        Error::Rpc { rpc, code: tonic::Code::ResourceExhausted, message, .. }
            if is_podresources_rpc(rpc) && message.contains(RATE_LIMIT_MESSAGE) =>
        {
            Some(format!(
                "the kubelet allows {RATE_QPS} PodResources calls per second (burst {RATE_BURST}) for all \
                 clients on the node together, and dpctl's retries were rejected too: another client (a \
                 metrics exporter, a monitoring agent) is probably polling it hard. Try again shortly"
            ))
        }
        Error::Unimplemented { rpc, .. } if rpc == RPC_GET => Some(
            "this kubelet has no v1 Get (Get arrived in 1.27; v1 itself in 1.20). \
             `dpctl podresources list -n NAMESPACE` works on every kubelet: it falls back to v1alpha1 \
             when v1 is missing"
                .into(),
        ),
        Error::Unimplemented { rpc, .. } if rpc == RPC_ALLOCATABLE => Some(
            "this kubelet has no GetAllocatableResources (added in 1.21, with the v1 API; before 1.23 it \
             needs the feature gate KubeletPodResourcesGetAllocatable). `allocatable` and `free` need it"
                .into(),
        ),
        Error::Unimplemented { rpc, message, .. } if rpc == RPC_LIST && message.contains(RPC_LIST_V1ALPHA1) => Some(
            "neither PodResources v1 nor v1alpha1 is served here: is this the kubelet's pod-resources \
             socket (<root-dir>/pod-resources/kubelet.sock), not the device-plugin registration socket?"
                .into(),
        ),
        Error::Unimplemented { rpc, .. } if rpc == RPC_LIST => Some(
            "this kubelet does not serve PodResources v1: kubelets before 1.20 have only v1alpha1. \
             Without --api v1 (or with --api v1alpha1) dpctl uses v1alpha1 instead"
                .into(),
        ),
        Error::Unimplemented { rpc, .. } if rpc == RPC_LIST_V1ALPHA1 => Some(
            "this server does not serve v1alpha1 (current kubelets do; some fakes serve only v1): \
             use --api v1 or auto"
                .into(),
        ),
        Error::MessageTooLarge { rpc, limit, .. } if is_podresources_rpc(rpc) => Some(format!(
            "the kubelet's answer is larger than the receive limit of {limit} bytes: raise it with \
             --max-recv-bytes (upstream clients use {DEFAULT_MAX_RECV}), or narrow the question with \
             `get POD -n NAMESPACE`"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_pod_message_is_parsed() {
        assert_eq!(unknown_pod("pod train-0 in namespace gpu-jobs not found"), Some(("train-0", "gpu-jobs")));
        assert_eq!(unknown_pod("something else"), None);
    }

    #[test]
    fn hints_name_the_cause() {
        let p = Path::new("/x.sock");
        let get_off = Error::from_status(RPC_GET, p, &tonic::Status::unknown(GET_DISABLED_MESSAGE), 1);
        assert!(hint(&get_off).is_some_and(|h| h.contains("KubeletPodResourcesGet") && h.contains("list -n")));
        let missing = Error::from_status(RPC_GET, p, &tonic::Status::unknown("pod a in namespace b not found"), 1);
        assert!(hint(&missing).is_some_and(|h| h.contains("pod a in namespace b") && h.contains("list -n b")));
        let limited = Error::from_status(RPC_LIST, p, &tonic::Status::resource_exhausted(RATE_LIMIT_MESSAGE), 1);
        assert!(is_rate_limited(&limited));
        assert!(hint(&limited).is_some_and(|h| h.contains("burst 10")));
        let gone = Error::NoSocket { path: crate::paths::DEFAULT_PODRESOURCES_SOCKET.into() };
        assert!(hint(&gone).is_some_and(|h| h.contains("--root-dir") && h.contains("DPCTL_PODRESOURCES_SOCKET")));
        assert!(hint(&Error::NoSocket { path: "/tmp/x/gpu.sock".into() }).is_none());
        let other = Error::from_status("v1beta1.DevicePlugin/Allocate", p, &tonic::Status::unknown("x"), 1);
        assert!(hint(&other).is_none());
    }
}
