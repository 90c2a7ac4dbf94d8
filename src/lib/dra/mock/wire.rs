//! The mock driver's gRPC services on its two sockets: `Registration` on
//! the registration socket; the `DRAPlugin` versions and health services it
//! serves on the endpoint socket.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{DraEventKind, Shared};
use crate::dra::{HealthApi, NodeApi, Service};
use crate::error::Result;
use crate::proto::dra::{health, v1, v1beta1};
use crate::proto::pluginregistration as reg;
use crate::transport::{self, BindOptions};

#[derive(Clone)]
struct Svc(Arc<Shared>);

#[tonic::async_trait]
impl reg::registration_server::Registration for Svc {
    async fn get_info(&self, _: Request<reg::InfoRequest>) -> Result<Response<reg::PluginInfo>, Status> {
        let cfg = &self.0.cfg;
        let again = self.0.info_given.swap(true, std::sync::atomic::Ordering::Relaxed);
        if again && cfg.faults.register_once {
            let status = Status::unavailable("the registration server answers once");
            self.0.record(
                "pluginregistration.Registration/GetInfo",
                json!({}),
                None,
                Some(status.to_string()),
                Instant::now(),
            );
            return Err(status);
        }
        let info = reg::PluginInfo {
            r#type: reg::DRA_PLUGIN_TYPE.into(),
            name: cfg.driver.clone(),
            endpoint: cfg.endpoint.display().to_string(),
            supported_versions: cfg.services.iter().map(|s| s.advertised().to_string()).collect(),
        };
        let answer = crate::mock_plugin::record::plugin_info(&info);
        self.0.record("pluginregistration.Registration/GetInfo", json!({}), Some(answer), None, Instant::now());
        Ok(Response::new(info))
    }

    async fn notify_registration_status(
        &self,
        req: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let req = req.into_inner();
        let request = crate::mock_plugin::record::registration_status(&req);
        self.0.record(
            "pluginregistration.Registration/NotifyRegistrationStatus",
            request,
            Some(json!({})),
            None,
            Instant::now(),
        );
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

#[tonic::async_trait]
impl v1::dra_plugin_server::DraPlugin for Svc {
    async fn node_prepare_resources(
        &self,
        req: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        self.0.prepare("v1.DRAPlugin/NodePrepareResources", req.into_inner()).await.map(Response::new)
    }

    async fn node_unprepare_resources(
        &self,
        req: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        Ok(Response::new(self.0.unprepare("v1.DRAPlugin/NodeUnprepareResources", req.into_inner())))
    }
}

fn claims_to_v1(claims: Vec<v1beta1::Claim>) -> Vec<v1::Claim> {
    claims.into_iter().map(|c| v1::Claim { namespace: c.namespace, uid: c.uid, name: c.name }).collect()
}

#[tonic::async_trait]
impl v1beta1::dra_plugin_server::DraPlugin for Svc {
    async fn node_prepare_resources(
        &self,
        req: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let req = v1::NodePrepareResourcesRequest { claims: claims_to_v1(req.into_inner().claims) };
        let resp = self.0.prepare("v1beta1.DRAPlugin/NodePrepareResources", req).await?;
        // v1beta1 has no share_id: it is dropped, as the kubelet's conversion does.
        let claims = resp
            .claims
            .into_iter()
            .map(|(uid, r)| {
                let devices = r
                    .devices
                    .into_iter()
                    .map(|d| v1beta1::Device {
                        request_names: d.request_names,
                        pool_name: d.pool_name,
                        device_name: d.device_name,
                        cdi_device_ids: d.cdi_device_ids,
                    })
                    .collect();
                (uid, v1beta1::NodePrepareResourceResponse { devices, error: r.error })
            })
            .collect();
        Ok(Response::new(v1beta1::NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        req: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let req = v1::NodeUnprepareResourcesRequest { claims: claims_to_v1(req.into_inner().claims) };
        let resp = self.0.unprepare("v1beta1.DRAPlugin/NodeUnprepareResources", req);
        let claims = resp
            .claims
            .into_iter()
            .map(|(uid, r)| (uid, v1beta1::NodeUnprepareResourceResponse { error: r.error }))
            .collect();
        Ok(Response::new(v1beta1::NodeUnprepareResourcesResponse { claims }))
    }
}

/// The two health versions have the same messages in two packages.
macro_rules! health_service {
    ($m:ident, $name:literal) => {
        #[tonic::async_trait]
        impl health::$m::dra_resource_health_server::DraResourceHealth for Svc {
            type NodeWatchResourcesStream = ReceiverStream<Result<health::$m::NodeWatchResourcesResponse, Status>>;

            async fn node_watch_resources(
                &self,
                _: Request<health::$m::NodeWatchResourcesRequest>,
            ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
                use health::$m as h;
                self.0.record(concat!($name, "/NodeWatchResources"), json!({}), None, None, Instant::now());
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                let shared = Arc::clone(&self.0);
                tokio::spawn(async move {
                    loop {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                        let devices = shared
                            .cfg
                            .device_names()
                            .into_iter()
                            .map(|d| h::DeviceHealth {
                                health: if shared.cfg.unhealthy.contains(&d) {
                                    h::HealthStatus::Unhealthy
                                } else {
                                    h::HealthStatus::Healthy
                                } as i32,
                                device: Some(h::DeviceIdentifier {
                                    pool_name: shared.cfg.pool.clone(),
                                    device_name: d,
                                }),
                                last_updated_time: now,
                                health_check_timeout_seconds: 0,
                                message: String::new(),
                            })
                            .collect();
                        if tx.send(Ok(h::NodeWatchResourcesResponse { devices })).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(shared.cfg.health_interval).await;
                    }
                });
                Ok(Response::new(ReceiverStream::new(rx)))
            }
        }
    };
}
health_service!(v1alpha1, "v1alpha1.DRAResourceHealth");
health_service!(v1, "v1.DRAResourceHealth");

/// What the endpoint socket serves: every advertised service, less health
/// when the health-unserved fault is on.
pub(crate) fn served(shared: &Shared) -> Vec<Service> {
    shared
        .cfg
        .services
        .iter()
        .copied()
        .filter(|s| !(matches!(s, Service::Health(_)) && shared.cfg.faults.health_unserved))
        .collect()
}

/// Binds both sockets and serves them until `shutdown`.
pub(crate) async fn serve(shared: Arc<Shared>, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<()> {
    let opts = BindOptions { force_flag: "(nothing: stop the other process first)", ..Default::default() };
    let endpoint = transport::bind(&shared.cfg.endpoint, &opts).await?;
    let registration = transport::bind(&shared.cfg.registration_socket(), &opts).await?;
    let svc = Svc(Arc::clone(&shared));
    let served = served(&shared);
    let mut router =
        transport::server_builder().add_optional_service(None::<reg::registration_server::RegistrationServer<Svc>>);
    for s in &served {
        router = match s {
            Service::Node(NodeApi::V1) => router.add_service(v1::dra_plugin_server::DraPluginServer::new(svc.clone())),
            Service::Node(NodeApi::V1beta1) => {
                router.add_service(v1beta1::dra_plugin_server::DraPluginServer::new(svc.clone()))
            }
            Service::Health(HealthApi::V1alpha1) => router
                .add_service(health::v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(svc.clone())),
            Service::Health(HealthApi::V1) => {
                router.add_service(health::v1::dra_resource_health_server::DraResourceHealthServer::new(svc.clone()))
            }
        };
    }
    let reg_router = transport::server_builder().add_service(reg::registration_server::RegistrationServer::new(svc));
    shared.emit(DraEventKind::Serving {
        registration_socket: shared.cfg.registration_socket(),
        endpoint: shared.cfg.endpoint.clone(),
        supported_versions: shared.cfg.services.iter().map(|s| s.advertised().to_string()).collect(),
        served: served.iter().map(|s| s.advertised().to_string()).collect(),
        cdi_dir: shared.cfg.cdi_dir.clone(),
    });
    let stop = tokio_util::sync::CancellationToken::new();
    let (a, b) = (stop.clone(), stop.clone());
    let node = tokio::spawn(transport::serve(router, endpoint, async move { a.cancelled().await }));
    let regs = tokio::spawn(transport::serve(reg_router, registration, async move { b.cancelled().await }));
    shutdown.await;
    stop.cancel();
    let (n, r) = (node.await, regs.await);
    shared.emit(DraEventKind::Stopped { reason: "shutdown".into() });
    for joined in [n, r] {
        joined.map_err(|e| crate::error::Error::io("serving the mock DRA driver", std::io::Error::other(e)))??;
    }
    Ok(())
}
