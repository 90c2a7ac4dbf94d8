//! A PodResources server (v1 and v1alpha1 on one socket, as the kubelet
//! serves them) that answers from a [`Provider`], with the kubelet's rate
//! limit, its error texts, and its `Get` feature gate.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::ratelimit::TokenBucket;
use crate::proto::podresources::{v1, v1alpha1};

/// Where the answers come from.
pub trait Provider: Send + Sync + 'static {
    /// Every active pod, sidecars (restartable init containers) before regular containers.
    fn list(&self) -> Vec<v1::PodResources>;
    /// One pod, or `None` when unknown.
    fn get(&self, name: &str, namespace: &str) -> Option<v1::PodResources> {
        self.list().into_iter().find(|p| p.name == name && p.namespace == namespace)
    }
    /// Healthy devices, CPUs and memory.
    fn allocatable(&self) -> v1::AllocatableResourcesResponse;
    /// The v1alpha1 view: regular containers only, no topology. The default
    /// converts [`Provider::list`], keeping every container.
    fn list_v1alpha1(&self) -> Vec<v1alpha1::PodResources> {
        self.list().iter().map(to_v1alpha1).collect()
    }
}

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Serve `Get` (feature gate `KubeletPodResourcesGet`, on since 1.34).
    pub get_enabled: bool,
    /// Token bucket: calls per second and burst; `None` disables the limit.
    pub rate_limit: Option<(f64, u32)>,
    /// The v1 service has a `Get` method at all (kubelet 1.27+; a 1.26
    /// kubelet answers `Unimplemented`, as grpc-go does for any unknown
    /// method, before the rate limit).
    pub get_exists: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { get_enabled: true, rate_limit: Some((RATE_QPS, RATE_BURST)), get_exists: true }
    }
}

/// Which PodResources API versions a server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedApis {
    /// `v1.PodResourcesLister` (kubelet 1.20 and later).
    pub v1: bool,
    /// `v1alpha1.PodResourcesLister`.
    pub v1alpha1: bool,
}

impl Default for ServedApis {
    fn default() -> Self {
        ServedApis { v1: true, v1alpha1: true }
    }
}

/// The kubelet's PodResources rate: `DefaultQPS`.
pub const RATE_QPS: f64 = 100.0;
/// The kubelet's PodResources burst: `DefaultBurstTokens`.
pub const RATE_BURST: u32 = 10;

/// The kubelet's message for a rate-limited call.
pub const RATE_LIMIT_MESSAGE: &str = "rejected by rate limit";
/// The kubelet's message when `Get` is disabled.
pub const GET_DISABLED_MESSAGE: &str = "PodResources API Get method disabled";

/// The text the kubelet returns for an unknown pod.
pub fn pod_not_found(name: &str, namespace: &str) -> String {
    format!("pod {name} in namespace {namespace} not found")
}

/// Strips a v1 pod down to its v1alpha1 form.
pub fn to_v1alpha1(p: &v1::PodResources) -> v1alpha1::PodResources {
    v1alpha1::PodResources {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        containers: p
            .containers
            .iter()
            .map(|c| v1alpha1::ContainerResources {
                name: c.name.clone(),
                devices: c
                    .devices
                    .iter()
                    .map(|d| v1alpha1::ContainerDevices {
                        resource_name: d.resource_name.clone(),
                        device_ids: d.device_ids.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

struct Shared {
    provider: Arc<dyn Provider>,
    config: ServerConfig,
    bucket: Option<TokenBucket>,
}

impl Shared {
    fn admit(&self) -> Result<(), Status> {
        match &self.bucket {
            Some(b) if b.try_take().is_err() => Err(Status::resource_exhausted(RATE_LIMIT_MESSAGE)),
            _ => Ok(()),
        }
    }
}

/// The v1 and v1alpha1 services, sharing one rate limit (as the kubelet's
/// interceptor does).
#[derive(Clone)]
pub struct PodResourcesService {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PodResourcesService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodResourcesService").field("config", &self.shared.config).finish_non_exhaustive()
    }
}

impl PodResourcesService {
    /// A service answering from `provider`.
    pub fn new(provider: Arc<dyn Provider>, config: ServerConfig) -> Self {
        let bucket = config.rate_limit.map(|(qps, burst)| TokenBucket::new(qps, burst));
        PodResourcesService { shared: Arc::new(Shared { provider, config, bucket }) }
    }

    /// A tonic router serving both API versions.
    pub fn router(&self) -> tonic::transport::server::Router {
        self.router_for(ServedApis::default())
    }

    /// A tonic router serving only the given API versions (an old kubelet
    /// serves only v1alpha1; calls to a missing one answer `Unimplemented`).
    pub fn router_for(&self, apis: ServedApis) -> tonic::transport::server::Router {
        crate::transport::server_builder()
            .add_optional_service(
                apis.v1.then(|| v1::pod_resources_lister_server::PodResourcesListerServer::new(self.clone())),
            )
            .add_optional_service(
                apis.v1alpha1.then(|| {
                    v1alpha1::pod_resources_lister_server::PodResourcesListerServer::new(V1Alpha1(self.clone()))
                }),
            )
    }
}

#[tonic::async_trait]
impl v1::pod_resources_lister_server::PodResourcesLister for PodResourcesService {
    async fn list(
        &self,
        _req: Request<v1::ListPodResourcesRequest>,
    ) -> Result<Response<v1::ListPodResourcesResponse>, Status> {
        self.shared.admit()?;
        Ok(Response::new(v1::ListPodResourcesResponse { pod_resources: self.shared.provider.list() }))
    }

    async fn get_allocatable_resources(
        &self,
        _req: Request<v1::AllocatableResourcesRequest>,
    ) -> Result<Response<v1::AllocatableResourcesResponse>, Status> {
        self.shared.admit()?;
        Ok(Response::new(self.shared.provider.allocatable()))
    }

    async fn get(
        &self,
        req: Request<v1::GetPodResourcesRequest>,
    ) -> Result<Response<v1::GetPodResourcesResponse>, Status> {
        if !self.shared.config.get_exists {
            return Err(Status::unimplemented("unknown method Get for service v1.PodResourcesLister"));
        }
        self.shared.admit()?;
        if !self.shared.config.get_enabled {
            return Err(Status::unknown(GET_DISABLED_MESSAGE));
        }
        let r = req.into_inner();
        match self.shared.provider.get(&r.pod_name, &r.pod_namespace) {
            Some(pod) => Ok(Response::new(v1::GetPodResourcesResponse { pod_resources: Some(pod) })),
            None => Err(Status::unknown(pod_not_found(&r.pod_name, &r.pod_namespace))),
        }
    }
}

/// The v1alpha1 face of [`PodResourcesService`].
#[derive(Clone, Debug)]
struct V1Alpha1(PodResourcesService);

#[tonic::async_trait]
impl v1alpha1::pod_resources_lister_server::PodResourcesLister for V1Alpha1 {
    async fn list(
        &self,
        _req: Request<v1alpha1::ListPodResourcesRequest>,
    ) -> Result<Response<v1alpha1::ListPodResourcesResponse>, Status> {
        self.0.shared.admit()?;
        Ok(Response::new(v1alpha1::ListPodResourcesResponse { pod_resources: self.0.shared.provider.list_v1alpha1() }))
    }
}
