//! A small device plugin built directly on the generated code (not on
//! dpctl's mock plugin), for testing dpctl's client side.

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::proto::deviceplugin::v1beta1::device_plugin_server::{DevicePlugin, DevicePluginServer};
use futures_util::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// What the test plugin answers.
#[derive(Clone, Default)]
pub struct Behaviour {
    pub options: dp::DevicePluginOptions,
    /// Preferred answer; `None` echoes the first `size` available IDs.
    pub preferred: Option<Vec<String>>,
    /// Allocate fails with this status when set.
    pub allocate_error: Option<(tonic::Code, String)>,
    /// Close ListAndWatch after the first message.
    pub end_stream_after_first: bool,
    /// Every unary call waits this long before answering.
    pub delay: Option<std::time::Duration>,
}

#[derive(Clone)]
pub struct TestPlugin {
    devices: Arc<watch::Sender<Vec<dp::Device>>>,
    behaviour: Arc<Behaviour>,
    pub calls: Arc<Mutex<Vec<String>>>,
}

pub fn device(id: &str, health: &str, numa: Option<&[i64]>) -> dp::Device {
    dp::Device {
        id: id.into(),
        health: health.into(),
        topology: numa.map(|n| dp::TopologyInfo { nodes: n.iter().map(|id| dp::NumaNode { id: *id }).collect() }),
    }
}

impl TestPlugin {
    pub fn new(devices: Vec<dp::Device>, behaviour: Behaviour) -> Self {
        let (tx, _rx) = watch::channel(devices);
        TestPlugin { devices: Arc::new(tx), behaviour: Arc::new(behaviour), calls: Arc::default() }
    }

    /// Replaces the device list; open ListAndWatch streams get it.
    pub fn set_devices(&self, devices: Vec<dp::Device>) {
        self.devices.send_replace(devices);
    }

    fn record(&self, rpc: &str) {
        self.calls.lock().unwrap().push(rpc.to_string());
    }

    async fn pause(&self) {
        if let Some(d) = self.behaviour.delay {
            tokio::time::sleep(d).await;
        }
    }

    /// Serves on `path` through dpctl's transport until the returned sender is dropped.
    pub async fn serve(&self, path: &std::path::Path) -> tokio::sync::oneshot::Sender<()> {
        let listener = dpctl::transport::bind(path, &Default::default()).await.expect("bind test plugin");
        let router = tonic::transport::Server::builder().add_service(DevicePluginServer::new(self.clone()));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(dpctl::transport::serve(router, listener, async {
            let _ = rx.await;
        }));
        tx
    }
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<dp::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for TestPlugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<dp::Empty>,
    ) -> Result<Response<dp::DevicePluginOptions>, Status> {
        self.record("GetDevicePluginOptions");
        Ok(Response::new(self.behaviour.options))
    }

    type ListAndWatchStream = SnapshotStream;

    async fn list_and_watch(&self, _: Request<dp::Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        self.record("ListAndWatch");
        let mut rx = self.devices.subscribe();
        let once = self.behaviour.end_stream_after_first;
        let stream = async_stream_from(
            move |tx: tokio::sync::mpsc::Sender<Result<dp::ListAndWatchResponse, Status>>| async move {
                loop {
                    let devices = rx.borrow_and_update().clone();
                    if tx.send(Ok(dp::ListAndWatchResponse { devices })).await.is_err() || once {
                        return;
                    }
                    if rx.changed().await.is_err() {
                        return;
                    }
                }
            },
        );
        Ok(Response::new(stream))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<dp::PreferredAllocationRequest>,
    ) -> Result<Response<dp::PreferredAllocationResponse>, Status> {
        self.record("GetPreferredAllocation");
        let r = req.into_inner();
        let container_responses = r
            .container_requests
            .iter()
            .map(|c| dp::ContainerPreferredAllocationResponse {
                device_i_ds: self.behaviour.preferred.clone().unwrap_or_else(|| {
                    c.available_device_i_ds.iter().take(c.allocation_size as usize).cloned().collect()
                }),
            })
            .collect();
        Ok(Response::new(dp::PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(&self, req: Request<dp::AllocateRequest>) -> Result<Response<dp::AllocateResponse>, Status> {
        self.record("Allocate");
        self.pause().await;
        if let Some((code, msg)) = &self.behaviour.allocate_error {
            return Err(Status::new(*code, msg.clone()));
        }
        let container_responses = req
            .into_inner()
            .container_requests
            .iter()
            .map(|c| dp::ContainerAllocateResponse {
                envs: [("VISIBLE_DEVICES".to_string(), c.devices_ids.join(","))].into(),
                mounts: vec![dp::Mount {
                    container_path: "/data".into(),
                    host_path: "/srv/data".into(),
                    read_only: true,
                }],
                devices: c
                    .devices_ids
                    .iter()
                    .map(|id| dp::DeviceSpec {
                        container_path: format!("/dev/{id}"),
                        host_path: "/dev/null".into(),
                        permissions: "rw".into(),
                    })
                    .collect(),
                annotations: Default::default(),
                cdi_devices: c
                    .devices_ids
                    .iter()
                    .map(|id| dp::CdiDevice { name: format!("example.com/gpu={id}") })
                    .collect(),
            })
            .collect();
        Ok(Response::new(dp::AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        _: Request<dp::PreStartContainerRequest>,
    ) -> Result<Response<dp::PreStartContainerResponse>, Status> {
        self.record("PreStartContainer");
        Ok(Response::new(dp::PreStartContainerResponse {}))
    }
}

/// A stream fed by a spawned producer; ends when the producer returns.
fn async_stream_from<T, F, Fut>(producer: F) -> Pin<Box<dyn Stream<Item = T> + Send>>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(producer(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}
