//! A device plugin for `dpctl plugin check` tests, built on the generated
//! code: well-behaved by default (both options on, a preferred allocation that
//! keeps the contract, unknown IDs refused), with one switch per misbehaviour.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::proto::deviceplugin::v1beta1::device_plugin_server::{DevicePlugin, DevicePluginServer};
use futures_util::Stream;
use tonic::{Request, Response, Status};

/// What the plugin gets wrong (nothing, by default).
#[derive(Clone)]
pub struct Faults {
    /// What GetDevicePluginOptions answers.
    pub options: dp::DevicePluginOptions,
    /// GetDevicePluginOptions fails with Internal and this message.
    pub options_error: Option<String>,
    /// GetPreferredAllocation answers the first `size` available IDs, ignoring must_include.
    pub preferred_ignores_must_include: bool,
    /// Allocate answers with no container responses.
    pub allocate_empty: bool,
    /// Allocate answers with one container response whatever was asked.
    pub allocate_single_response: bool,
    /// Allocate answers with one container response more than asked.
    pub allocate_extra_response: bool,
    /// GetPreferredAllocation answers with one (empty) container response more than asked.
    pub preferred_extra_response: bool,
    /// Allocate of IDs it never advertised succeeds.
    pub allocate_accepts_unknown: bool,
    /// ListAndWatch closes (status OK) after its first message.
    pub close_stream_after_first: bool,
    /// ListAndWatch waits this long before its first message.
    pub first_list_delay: Option<Duration>,
    /// PreStartContainer waits this long before answering.
    pub prestart_delay: Option<Duration>,
    /// Allocate of IDs it never advertised never answers.
    pub allocate_hangs_on_unknown: bool,
    /// A new ListAndWatch ends the one before (one stream at a time).
    pub single_stream: bool,
    /// Allocate fails with ResourceExhausted "busy" while another Allocate is in flight.
    pub busy_when_concurrent: bool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            options: dp::DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: true },
            options_error: None,
            preferred_ignores_must_include: false,
            allocate_empty: false,
            allocate_single_response: false,
            allocate_extra_response: false,
            preferred_extra_response: false,
            allocate_accepts_unknown: false,
            close_stream_after_first: false,
            first_list_delay: None,
            prestart_delay: None,
            allocate_hangs_on_unknown: false,
            single_stream: false,
            busy_when_concurrent: false,
        }
    }
}

#[derive(Clone)]
pub struct CheckPlugin {
    devices: Arc<Vec<dp::Device>>,
    faults: Arc<Faults>,
    /// Ends the current ListAndWatch stream (for `single_stream`).
    current_stream: Arc<Mutex<Option<tokio::sync::oneshot::Sender<()>>>>,
    /// Allocate calls in flight (for `busy_when_concurrent`).
    allocating: Arc<AtomicUsize>,
}

impl CheckPlugin {
    pub fn new(devices: Vec<dp::Device>, faults: Faults) -> Self {
        CheckPlugin {
            devices: Arc::new(devices),
            faults: Arc::new(faults),
            current_stream: Arc::default(),
            allocating: Arc::default(),
        }
    }

    /// Serves on `path` (bound before this returns) until the sender is dropped.
    pub async fn serve(&self, path: &std::path::Path) -> tokio::sync::oneshot::Sender<()> {
        let listener = dpctl::transport::bind(path, &Default::default()).await.expect("bind check plugin");
        let router = tonic::transport::Server::builder().add_service(DevicePluginServer::new(self.clone()));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(dpctl::transport::serve(router, listener, async {
            let _ = rx.await;
        }));
        tx
    }

    fn known(&self, id: &str) -> bool {
        self.devices.iter().any(|d| d.id == id)
    }
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<dp::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for CheckPlugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<dp::Empty>,
    ) -> Result<Response<dp::DevicePluginOptions>, Status> {
        match &self.faults.options_error {
            Some(msg) => Err(Status::internal(msg.clone())),
            None => Ok(Response::new(self.faults.options)),
        }
    }

    type ListAndWatchStream = SnapshotStream;

    async fn list_and_watch(&self, _: Request<dp::Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let devices = self.devices.clone();
        let faults = self.faults.clone();
        let (kill_tx, kill_rx) = tokio::sync::oneshot::channel::<()>();
        if self.faults.single_stream
            && let Some(previous) = self.current_stream.lock().unwrap().replace(kill_tx)
        {
            let _ = previous.send(());
        }
        tokio::spawn(async move {
            if let Some(d) = faults.first_list_delay {
                tokio::time::sleep(d).await;
            }
            if tx.send(Ok(dp::ListAndWatchResponse { devices: devices.to_vec() })).await.is_err() {
                return;
            }
            if !faults.close_stream_after_first {
                // Keep the stream open until the client goes away (or a newer stream replaces it).
                tokio::select! {
                    () = tx.closed() => {}
                    Ok(()) = kill_rx => {}
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<dp::PreferredAllocationRequest>,
    ) -> Result<Response<dp::PreferredAllocationResponse>, Status> {
        let mut container_responses: Vec<dp::ContainerPreferredAllocationResponse> = req
            .into_inner()
            .container_requests
            .iter()
            .map(|c| {
                let size = usize::try_from(c.allocation_size).unwrap_or(0);
                let mut picked: Vec<String> = Vec::new();
                if !self.faults.preferred_ignores_must_include {
                    for id in &c.must_include_device_i_ds {
                        if !picked.contains(id) {
                            picked.push(id.clone());
                        }
                    }
                }
                for id in &c.available_device_i_ds {
                    if picked.len() >= size {
                        break;
                    }
                    if !picked.contains(id) {
                        picked.push(id.clone());
                    }
                }
                dp::ContainerPreferredAllocationResponse { device_i_ds: picked }
            })
            .collect();
        if self.faults.preferred_extra_response {
            container_responses.push(dp::ContainerPreferredAllocationResponse::default());
        }
        Ok(Response::new(dp::PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(&self, req: Request<dp::AllocateRequest>) -> Result<Response<dp::AllocateResponse>, Status> {
        let req = req.into_inner();
        if self.faults.busy_when_concurrent {
            let before = self.allocating.fetch_add(1, Ordering::SeqCst);
            // Stay in flight a while, so concurrent calls overlap.
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.allocating.fetch_sub(1, Ordering::SeqCst);
            if before > 0 {
                return Err(Status::resource_exhausted("busy: another Allocate is in progress"));
            }
        }
        if !self.faults.allocate_accepts_unknown {
            let unknown: Vec<&str> = req
                .container_requests
                .iter()
                .flat_map(|c| c.devices_ids.iter())
                .filter(|id| !self.known(id))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() && self.faults.allocate_hangs_on_unknown {
                std::future::pending::<()>().await;
            }
            if !unknown.is_empty() {
                return Err(Status::invalid_argument(format!("unknown devices: {}", unknown.join(","))));
            }
        }
        let mut container_responses: Vec<dp::ContainerAllocateResponse> = req
            .container_requests
            .iter()
            .map(|c| dp::ContainerAllocateResponse {
                envs: [("VISIBLE_DEVICES".to_string(), c.devices_ids.join(","))].into(),
                ..Default::default()
            })
            .collect();
        if self.faults.allocate_empty {
            container_responses.clear();
        } else if self.faults.allocate_single_response {
            container_responses.truncate(1);
        } else if self.faults.allocate_extra_response {
            container_responses.push(dp::ContainerAllocateResponse::default());
        }
        Ok(Response::new(dp::AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        _: Request<dp::PreStartContainerRequest>,
    ) -> Result<Response<dp::PreStartContainerResponse>, Status> {
        if let Some(d) = self.faults.prestart_delay {
            tokio::time::sleep(d).await;
        }
        Ok(Response::new(dp::PreStartContainerResponse {}))
    }
}
