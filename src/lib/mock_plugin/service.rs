//! The gRPC services a mock serves on its socket: `v1beta1.DevicePlugin`
//! and the plugin-watcher `pluginregistration.Registration`, both answering
//! from the shared [`Resource`] state with faults applied and every call
//! recorded.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use prost::Message;
use tokio::sync::{broadcast, watch};
use tonic::{Request, Response, Status};

use super::config::Rpc;
use super::events::{EventKind, RpcRecord, StatusView};
use super::record;
use super::state::{Resource, Snapshot};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::deviceplugin::v1beta1::device_plugin_server::DevicePlugin;
use crate::proto::pluginregistration as reg;
use crate::proto::pluginregistration::registration_server::Registration;

/// The stream of encoded ListAndWatch messages a mock serves.
pub type EncodedStream = Pin<Box<dyn Stream<Item = Result<Bytes, Status>> + Send>>;

/// One serving generation of a resource's services. Streams opened through
/// it end (with OK) when `stop` turns true.
#[derive(Clone)]
pub struct MockService {
    res: Arc<Resource>,
    stop: watch::Receiver<bool>,
    /// The socket the kubelet should dial (GetInfo's endpoint).
    plugin_socket: PathBuf,
}

impl MockService {
    /// A service over `res` for one generation.
    pub fn new(res: Arc<Resource>, stop: watch::Receiver<bool>) -> Self {
        let plugin_socket = std::path::absolute(&res.socket).unwrap_or_else(|_| res.socket.clone());
        MockService { res, stop, plugin_socket }
    }

    /// Runs one unary call: counts it, applies faults, answers, records.
    async fn unary<Q, A>(
        &self,
        rpc: Rpc,
        req: Q,
        answer: impl FnOnce(&Resource, &Q) -> Result<A, Status>,
        req_json: fn(&Q) -> serde_json::Value,
        resp_json: fn(&A) -> serde_json::Value,
    ) -> Result<Response<A>, Status> {
        let time = SystemTime::now();
        let started = Instant::now();
        let call = self.res.begin(rpc);
        let mut result = Ok(());
        if !self.res.faults.none_for(rpc) {
            let v = self.res.faults.verdict(rpc, call);
            if let Some(d) = v.latency {
                tokio::time::sleep(d).await;
            }
            if let Some(e) = v.error {
                result = Err(e.status());
            }
        }
        let result = result.and_then(|()| answer(&self.res, &req));
        if self.res.wants_details() {
            self.res.record(
                time,
                RpcRecord {
                    rpc: rpc.name(),
                    request: req_json(&req),
                    response: result.as_ref().ok().map(resp_json),
                    error: result.as_ref().err().map(StatusView::from_status),
                    latency_ms: ms(started.elapsed()),
                    seq: None,
                },
            );
        }
        result.map(Response::new)
    }
}

/// Milliseconds with microsecond precision.
pub fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<dp::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for MockService {
    async fn get_device_plugin_options(
        &self,
        req: Request<dp::Empty>,
    ) -> Result<Response<dp::DevicePluginOptions>, Status> {
        self.unary(
            Rpc::GetDevicePluginOptions,
            req.into_inner(),
            |r, _| Ok(r.options),
            |_| record::empty(),
            record::options,
        )
        .await
    }

    type ListAndWatchStream = SnapshotStream;

    /// The decoded form of [`MockService::list_and_watch_encoded`], for
    /// callers of the trait; the served socket sends the encoded bytes.
    async fn list_and_watch(&self, req: Request<dp::Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let encoded = self.list_and_watch_encoded(req).await?.into_inner();
        let decoded = encoded.map(|item| {
            item.and_then(|b| {
                dp::ListAndWatchResponse::decode(b).map_err(|e| Status::internal(format!("re-decoding a list: {e}")))
            })
        });
        Ok(Response::new(Box::pin(decoded)))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<dp::PreferredAllocationRequest>,
    ) -> Result<Response<dp::PreferredAllocationResponse>, Status> {
        self.get_preferred(req).await
    }

    async fn allocate(&self, req: Request<dp::AllocateRequest>) -> Result<Response<dp::AllocateResponse>, Status> {
        self.allocate_impl(req).await
    }

    async fn pre_start_container(
        &self,
        req: Request<dp::PreStartContainerRequest>,
    ) -> Result<Response<dp::PreStartContainerResponse>, Status> {
        self.pre_start_impl(req).await
    }
}

impl MockService {
    /// ListAndWatch as served: each message is the resource's shared encoded
    /// list (plus the oversize padding when that fault is on).
    pub async fn list_and_watch_encoded(&self, _req: Request<dp::Empty>) -> Result<Response<EncodedStream>, Status> {
        let time = SystemTime::now();
        let opened = Instant::now();
        let call = self.res.begin(Rpc::ListAndWatch);
        let verdict = self.res.faults.verdict(Rpc::ListAndWatch, call);
        if let Some(e) = verdict.error {
            if let Some(d) = verdict.latency {
                tokio::time::sleep(d).await;
            }
            let status = e.status();
            if self.res.wants_details() {
                self.res.record(
                    time,
                    RpcRecord {
                        rpc: Rpc::ListAndWatch.name(),
                        request: record::empty(),
                        response: None,
                        error: Some(StatusView::from_status(&status)),
                        latency_ms: ms(opened.elapsed()),
                        seq: None,
                    },
                );
            }
            return Err(status);
        }
        let (first, rx) = self.res.watch();
        let cfg = &self.res.faults.config;
        // The stale-stream-after-restart fault: after a kubelet restart the
        // update channel belongs to the first stream's dead goroutine.
        let frozen = cfg.stale_stream_after_restart && self.res.stats.kubelet_restarts.load(Ordering::Relaxed) > 0;
        let state = Watcher {
            res: Arc::clone(&self.res),
            rx,
            first: Some(first),
            stop: self.stop.clone(),
            latency: verdict.latency,
            end_after: cfg.list_and_watch_end_after,
            end_error: cfg.list_and_watch_end_error.as_ref().map(super::config::ErrorSpec::status),
            oversize: cfg.list_and_watch_oversize,
            frozen,
            empty_first: cfg.list_and_watch_empty_first,
            sent: 0,
            opened,
            done: false,
            _open: OpenStream::new(Arc::clone(&self.res)),
        };
        let stream = futures_util::stream::unfold(state, Watcher::next);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_preferred(
        &self,
        req: Request<dp::PreferredAllocationRequest>,
    ) -> Result<Response<dp::PreferredAllocationResponse>, Status> {
        self.unary(
            Rpc::GetPreferredAllocation,
            req.into_inner(),
            |r, q| {
                Ok(dp::PreferredAllocationResponse {
                    container_responses: q
                        .container_requests
                        .iter()
                        .map(|c| dp::ContainerPreferredAllocationResponse { device_i_ds: r.prefer(c) })
                        .collect(),
                })
            },
            record::preferred_request,
            record::preferred_response,
        )
        .await
    }

    async fn allocate_impl(&self, req: Request<dp::AllocateRequest>) -> Result<Response<dp::AllocateResponse>, Status> {
        self.unary(
            Rpc::Allocate,
            req.into_inner(),
            |r, q| {
                if q.container_requests.is_empty() {
                    return Err(Status::invalid_argument("AllocateRequest has no container requests"));
                }
                let mut container_responses = Vec::with_capacity(q.container_requests.len());
                let mut budget = super::template::Budget::default();
                for c in &q.container_requests {
                    r.check_allocatable(&c.devices_ids)?;
                    // The same-device fault: the first devices' content, whatever was asked.
                    let first: Vec<String>;
                    let ids = if r.faults.config.allocate_same_device {
                        first = r.devices().into_iter().take(c.devices_ids.len()).map(|d| d.id).collect();
                        &first
                    } else {
                        &c.devices_ids
                    };
                    let answer = r.template.render(ids, &r.name, &mut budget).map_err(Status::resource_exhausted)?;
                    container_responses.push(answer);
                }
                Ok(dp::AllocateResponse { container_responses })
            },
            record::allocate_request,
            record::allocate_response,
        )
        .await
    }

    async fn pre_start_impl(
        &self,
        req: Request<dp::PreStartContainerRequest>,
    ) -> Result<Response<dp::PreStartContainerResponse>, Status> {
        self.unary(
            Rpc::PreStartContainer,
            req.into_inner(),
            |_, _| Ok(dp::PreStartContainerResponse {}),
            record::pre_start_request,
            |_| record::empty(),
        )
        .await
    }
}

#[tonic::async_trait]
impl Registration for MockService {
    async fn get_info(&self, req: Request<reg::InfoRequest>) -> Result<Response<reg::PluginInfo>, Status> {
        let endpoint = self.plugin_socket.to_string_lossy().into_owned();
        self.unary(
            Rpc::GetInfo,
            req.into_inner(),
            move |r, _| {
                Ok(reg::PluginInfo {
                    r#type: reg::DEVICE_PLUGIN_TYPE.to_string(),
                    name: r.name.clone(),
                    endpoint,
                    supported_versions: vec![dp::VERSION.to_string()],
                })
            },
            |_| record::empty(),
            record::plugin_info,
        )
        .await
    }

    async fn notify_registration_status(
        &self,
        req: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let status = req.into_inner();
        let answer = self
            .unary(
                Rpc::NotifyRegistrationStatus,
                status.clone(),
                |_, _| Ok(reg::RegistrationStatusResponse {}),
                record::registration_status,
                |_| record::empty(),
            )
            .await;
        if answer.is_ok() {
            self.res.emit(EventKind::RegistrationStatus {
                plugin_registered: status.plugin_registered,
                error: status.error,
            });
        }
        answer
    }
}

/// Counts an open stream for as long as it lives.
struct OpenStream(Arc<Resource>);

impl OpenStream {
    fn new(res: Arc<Resource>) -> Self {
        res.stats.streams.fetch_add(1, Ordering::Relaxed);
        OpenStream(res)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.stats.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The state of one ListAndWatch stream.
struct Watcher {
    res: Arc<Resource>,
    rx: broadcast::Receiver<Snapshot>,
    first: Option<Snapshot>,
    stop: watch::Receiver<bool>,
    latency: Option<Duration>,
    end_after: Option<u64>,
    end_error: Option<Status>,
    oversize: bool,
    /// Never hears of a change (the stale-stream-after-restart fault).
    frozen: bool,
    /// The empty-first-message fault: an empty list goes before the first one.
    empty_first: bool,
    sent: u64,
    opened: Instant,
    done: bool,
    _open: OpenStream,
}

impl Watcher {
    /// The next message, or the end of the stream.
    async fn next(mut self) -> Option<(Result<Bytes, Status>, Self)> {
        if self.done {
            return None;
        }
        if let Some(limit) = self.end_after
            && self.sent >= limit
        {
            self.done = true;
            return self.end_error.take().map(|e| (Err(e), self));
        }
        let snap = match self.first.take() {
            Some(first) if self.empty_first => {
                self.empty_first = false;
                self.first = Some(first);
                Arc::new(super::state::EncodedList::encode(&dp::ListAndWatchResponse::default()))
            }
            Some(first) => {
                if let Some(d) = self.latency {
                    tokio::select! {
                        () = tokio::time::sleep(d) => {}
                        _ = self.stop.wait_for(|s| *s) => return None,
                    }
                }
                first
            }
            None => self.next_change().await?,
        };
        self.sent += 1;
        let time = SystemTime::now();
        let padding = if self.oversize { self.res.faults.padding() } else { &[] };
        let msg = if padding.is_empty() {
            snap.bytes()
        } else {
            // Repeated fields of concatenated encodings add up: the list, then the padding.
            let mut b = BytesMut::from(&snap.bytes()[..]);
            dp::ListAndWatchResponse { devices: padding.to_vec() }.encode_raw(&mut b);
            b.freeze()
        };
        self.res.stats.messages.fetch_add(1, Ordering::Relaxed);
        if self.res.wants_details() {
            let real = snap.decode().map(|m| m.devices).unwrap_or_default();
            self.res.record(
                time,
                RpcRecord {
                    rpc: Rpc::ListAndWatch.name(),
                    request: record::empty(),
                    response: Some(record::list_and_watch(&real, padding.len(), msg.len())),
                    error: None,
                    latency_ms: ms(self.opened.elapsed()),
                    seq: Some(self.sent),
                },
            );
        }
        Some((Ok(msg), self))
    }

    /// Waits for the next published snapshot. After falling behind, skips to
    /// the newest one. `None` when the generation stops.
    async fn next_change(&mut self) -> Option<Snapshot> {
        if self.frozen {
            let _ = self.stop.wait_for(|s| *s).await;
            return None;
        }
        tokio::select! {
            _ = self.stop.wait_for(|s| *s) => None,
            r = self.rx.recv() => match r {
                Ok(s) => Some(s),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    // The client reads slower than the list changes: skip to
                    // the newest list (it carries every change so far).
                    let mut skipped = n;
                    let mut newest = None;
                    loop {
                        match self.rx.try_recv() {
                            Ok(s) => {
                                skipped += u64::from(newest.is_some());
                                newest = Some(s);
                            }
                            Err(broadcast::error::TryRecvError::Lagged(n)) => skipped += n,
                            Err(_) => break,
                        }
                    }
                    self.res.stats.skipped.fetch_add(skipped, Ordering::Relaxed);
                    Some(newest.unwrap_or_else(|| self.res.snapshot()))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        }
    }
}
