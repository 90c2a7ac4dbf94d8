//! The wire tap: what a client sends and receives on each gRPC call, as
//! events (the method, each message decoded to JSON, the request and
//! response headers, the trailers, the status and the latency), for
//! `dpctl -v`. A [`WireChannel`] wraps a [`Channel`]; with a [`Tap`] it
//! reports every call it carries to the tap's sink, without one it passes
//! calls through untouched. The events are data: the output layer renders
//! them.
//!
//! Messages are decoded with the protos dpctl is built with
//! ([`crate::proto::FILE_DESCRIPTOR_SET`]), so every kubelet API service is
//! readable without `-proto` flags; a message of a service dpctl does not
//! know is reported by its size only.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};
use tonic::body::Body;
use tonic::transport::Channel;

pub use crate::wire_events::{Header, Tap, WireEvent, WireMessage};

/// A [`Channel`], tapped or not. Every device-plugin client dpctl makes
/// calls through one, so `-v` sees the calls of `plugin call`, `plugin
/// watch`, `plugin check` and the kubelet-sim that `smoke` runs alike.
#[derive(Debug, Clone)]
pub struct WireChannel {
    inner: Channel,
    tap: Option<Tap>,
}

impl WireChannel {
    /// `inner`, reporting its calls to `tap` when there is one.
    pub fn new(inner: Channel, tap: Option<Tap>) -> Self {
        WireChannel { inner, tap }
    }
}

impl From<Channel> for WireChannel {
    fn from(inner: Channel) -> Self {
        WireChannel { inner, tap: None }
    }
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, tonic::transport::Error>> + Send + 'static>>;

impl tower::Service<http::Request<Body>> for WireChannel {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let Some(tap) = self.tap.clone() else { return Box::pin(self.inner.call(request)) };
        let log = CallLog::start(tap, &request, false);
        let request = request.map(|b| Body::new(Tapped::new(b, Arc::clone(&log), Side::Request)));
        let sent = self.inner.call(request);
        Box::pin(async move {
            match sent.await {
                Ok(response) => {
                    log.headers(response.headers());
                    let log = Arc::clone(&log);
                    Ok(response.map(|b| Body::new(Tapped::new(b, log, Side::Response))))
                }
                Err(e) => {
                    log.end("unavailable", crate::text::error_chain(&e), "transport", Vec::new());
                    Err(e)
                }
            }
        })
    }
}

/// A gRPC service dpctl serves, tapped or not: with a [`Tap`], each call
/// it answers is reported as a [`WireChannel`]'s calls are (the `Call`
/// event says `served`), so `smoke -v` shows the Register a plugin sends.
#[derive(Debug, Clone)]
pub struct WireService<S> {
    inner: S,
    tap: Option<Tap>,
}

impl<S> WireService<S> {
    /// `inner`, reporting the calls it answers to `tap` when there is one.
    pub fn new(inner: S, tap: Option<Tap>) -> Self {
        WireService { inner, tap }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for WireService<S> {
    const NAME: &'static str = S::NAME;
}

type ServedFuture<E> = Pin<Box<dyn Future<Output = Result<http::Response<Body>, E>> + Send + 'static>>;

impl<S> tower::Service<http::Request<Body>> for WireService<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = ServedFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let Some(tap) = self.tap.clone() else { return Box::pin(self.inner.call(request)) };
        let log = CallLog::start(tap, &request, true);
        let request = request.map(|b| Body::new(Tapped::new(b, Arc::clone(&log), Side::Request)));
        let answered = self.inner.call(request);
        Box::pin(async move {
            match answered.await {
                Ok(response) => {
                    log.headers(response.headers());
                    let log = Arc::clone(&log);
                    Ok(response.map(|b| Body::new(Tapped::new(b, log, Side::Response))))
                }
                Err(e) => {
                    log.end("unknown", e.to_string(), "server", Vec::new());
                    Err(e)
                }
            }
        })
    }
}

/// One call's record, shared by its request body, its response future and
/// its response body. When the last of them is dropped before the call
/// ended, dpctl ended it (a deadline, or it stopped reading a stream).
struct CallLog {
    tap: Tap,
    call: u64,
    method: String,
    start: Instant,
    responses: AtomicU64,
    ended: AtomicBool,
    served: bool,
    /// The status a trailers-only response carried in its headers.
    header_status: Mutex<Option<(String, String)>>,
}

impl CallLog {
    fn start(tap: Tap, request: &http::Request<Body>, served: bool) -> Arc<CallLog> {
        let call = tap.next.fetch_add(1, Ordering::Relaxed);
        let method = request.uri().path().to_string();
        let by = tap.by.as_deref().map(String::from);
        let headers = headers(request.headers());
        (tap.sink)(&WireEvent::Call { call, method: method.clone(), by, served, headers });
        Arc::new(CallLog {
            tap,
            call,
            method,
            start: Instant::now(),
            responses: AtomicU64::new(0),
            ended: AtomicBool::new(false),
            served,
            header_status: Mutex::new(None),
        })
    }

    /// Milliseconds since the call started, to the microsecond.
    fn elapsed_ms(&self) -> f64 {
        (self.start.elapsed().as_secs_f64() * 1e6).round() / 1000.0
    }

    fn emit(&self, event: &WireEvent) {
        (self.tap.sink)(event);
    }

    fn headers(&self, map: &http::HeaderMap) {
        let mut list = headers(map);
        list.insert(0, Header { name: ":status".into(), value: "200".into() });
        self.emit(&WireEvent::Headers {
            call: self.call,
            method: self.method.clone(),
            headers: list,
            elapsed_ms: self.elapsed_ms(),
        });
        if let Some((code, message)) = status_of(map) {
            // A trailers-only response: the status is in the headers.
            if let Ok(mut s) = self.header_status.lock() {
                *s = Some((code, message));
            }
        }
    }

    fn message(&self, side: Side, message: WireMessage) {
        let (call, method) = (self.call, self.method.clone());
        self.emit(&match side {
            Side::Request => WireEvent::Request { call, method, message },
            Side::Response => {
                let seq = self.responses.fetch_add(1, Ordering::Relaxed) + 1;
                WireEvent::Response { call, method, seq, message, elapsed_ms: self.elapsed_ms() }
            }
        });
    }

    /// The status a trailers-only response carried in its headers.
    fn status_in_headers(&self) -> Option<(String, String)> {
        self.header_status.lock().ok().and_then(|s| s.clone())
    }

    /// Reports the end once; later ends (a body dropped after its trailers) are ignored.
    fn end(&self, code: &str, status_message: String, ended_by: &'static str, trailers: Vec<Header>) {
        if self.ended.swap(true, Ordering::Relaxed) {
            return;
        }
        let trailers_only = ended_by == "server" && trailers.is_empty() && self.status_in_headers().is_some();
        self.emit(&WireEvent::End {
            call: self.call,
            method: self.method.clone(),
            code: code.to_string(),
            status_message,
            ended_by,
            trailers,
            trailers_only,
            responses: self.responses.load(Ordering::Relaxed),
            elapsed_ms: self.elapsed_ms(),
        });
    }

    /// The response body ended: with trailers, or without (then the status
    /// came in the headers, or there was none).
    fn finish(&self, trailers: Option<&http::HeaderMap>) {
        if let Some(map) = trailers {
            let (code, message) =
                status_of(map).unwrap_or_else(|| ("unknown".into(), "trailers without grpc-status".into()));
            return self.end(&code, message, "server", headers(map));
        }
        match self.status_in_headers() {
            Some((code, message)) => self.end(&code, message, "server", Vec::new()),
            None => self.end("unknown", "the response ended without a gRPC status".into(), "server", Vec::new()),
        }
    }
}

impl Drop for CallLog {
    fn drop(&mut self) {
        match self.status_in_headers() {
            // tonic reads a trailers-only status from the headers and drops the body unread.
            Some((code, message)) => self.end(&code, message, "server", Vec::new()),
            None if self.served => {
                self.end("cancelled", "the caller ended the call before dpctl answered".into(), "client", Vec::new());
            }
            None => self.end("cancelled", "dpctl ended the call before the server did".into(), "client", Vec::new()),
        }
    }
}

/// The headers of a map, in order, `-bin` values as received.
fn headers(map: &http::HeaderMap) -> Vec<Header> {
    map.iter()
        .map(|(k, v)| Header {
            name: k.as_str().to_string(),
            value: String::from_utf8_lossy(v.as_bytes()).into_owned(),
        })
        .collect()
}

/// `grpc-status` (as a code name) and `grpc-message` (percent-decoded), when present.
fn status_of(map: &http::HeaderMap) -> Option<(String, String)> {
    let code = map.get("grpc-status")?.to_str().ok()?.trim().parse::<i32>().ok()?;
    let message = map.get("grpc-message").map(|m| percent_decode(m.as_bytes())).unwrap_or_default();
    Some((crate::rpc::code_name(tonic::Code::from_i32(code)).to_string(), message))
}

/// gRPC's percent-encoding of `grpc-message`, undone.
fn percent_decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = raw
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (raw[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which way a body goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Request,
    Response,
}

/// A body passed through unchanged, its gRPC messages reported as they complete.
struct Tapped {
    inner: Body,
    log: Arc<CallLog>,
    side: Side,
    pending: BytesMut,
    descriptor: Option<MessageDescriptor>,
}

impl Tapped {
    fn new(inner: Body, log: Arc<CallLog>, side: Side) -> Self {
        let descriptor = descriptor(&log.method, side);
        Tapped { inner, log, side, pending: BytesMut::new(), descriptor }
    }

    /// Adds received bytes and reports every message now complete
    /// (a 5-byte prefix, compressed flag and length, then the message).
    fn feed(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        while self.pending.len() >= 5 {
            let compressed = self.pending[0] != 0;
            let len = u32::from_be_bytes([self.pending[1], self.pending[2], self.pending[3], self.pending[4]]) as usize;
            if self.pending.len() < 5 + len {
                break;
            }
            self.pending.advance(5);
            let bytes = self.pending.split_to(len);
            let message = if compressed {
                WireMessage { bytes: len, json: None, undecoded: Some("compressed".into()) }
            } else {
                decode(self.descriptor.as_ref(), &bytes)
            };
            self.log.message(self.side, message);
        }
    }
}

impl HttpBody for Tapped {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let data = data.clone();
                    self.feed(&data);
                } else if let Some(trailers) = frame.trailers_ref()
                    && self.side == Side::Response
                {
                    self.log.finish(Some(trailers));
                }
            }
            Poll::Ready(Some(Err(status))) if self.side == Side::Response => {
                self.log.end(
                    crate::rpc::code_name(status.code()),
                    status.message().to_string(),
                    "transport",
                    Vec::new(),
                );
            }
            Poll::Ready(None) if self.side == Side::Response => self.log.finish(None),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The descriptors of every API dpctl is built with, read once.
fn pool() -> Option<&'static DescriptorPool> {
    static POOL: OnceLock<Option<DescriptorPool>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET).ok()).as_ref()
}

/// The message type of `side` of the call `/package.Service/Method`, if dpctl knows it.
fn descriptor(path: &str, side: Side) -> Option<MessageDescriptor> {
    let (service, method) = path.trim_start_matches('/').split_once('/')?;
    let method = pool()?.get_service_by_name(service)?.methods().find(|m| m.name() == method)?;
    Some(if side == Side::Request { method.input() } else { method.output() })
}

/// `bytes` as JSON with the proto's field names, zero values included (a
/// NUMA node 0 is shown), 64-bit integers as numbers.
fn decode(descriptor: Option<&MessageDescriptor>, bytes: &[u8]) -> WireMessage {
    let len = bytes.len();
    let Some(desc) = descriptor else {
        return WireMessage { bytes: len, json: None, undecoded: Some("a service dpctl has no proto for".into()) };
    };
    let options =
        SerializeOptions::new().use_proto_field_name(true).skip_default_fields(false).stringify_64_bit_integers(false);
    match DynamicMessage::decode(desc.clone(), bytes) {
        Ok(m) => match m.serialize_with_options(serde_json::value::Serializer, &options) {
            Ok(json) => WireMessage { bytes: len, json: Some(json), undecoded: None },
            Err(e) => WireMessage { bytes: len, json: None, undecoded: Some(e.to_string()) },
        },
        Err(e) => WireMessage { bytes: len, json: None, undecoded: Some(format!("malformed {}: {e}", desc.name())) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_decode_with_the_built_in_protos_keeping_zero_values() {
        use prost::Message;
        let desc = descriptor("/v1beta1.DevicePlugin/ListAndWatch", Side::Response).unwrap();
        let msg = crate::proto::deviceplugin::v1beta1::ListAndWatchResponse {
            devices: vec![crate::proto::deviceplugin::v1beta1::Device {
                id: "d0".into(),
                health: "Healthy".into(),
                topology: Some(crate::proto::deviceplugin::v1beta1::TopologyInfo {
                    nodes: vec![crate::proto::deviceplugin::v1beta1::NumaNode { id: 0 }],
                }),
            }],
        };
        let m = decode(Some(&desc), &msg.encode_to_vec());
        assert_eq!(
            m.json.unwrap(),
            serde_json::json!({"devices": [{"ID": "d0", "health": "Healthy", "topology": {"nodes": [{"ID": 0}]}}]})
        );
        let bad = decode(Some(&desc), &[0x0a, 0x05, 1]);
        assert!(bad.undecoded.unwrap().starts_with("malformed ListAndWatchResponse"));
        assert!(descriptor("/no.Such/Thing", Side::Request).is_none());
        assert!(decode(None, &[1, 2]).undecoded.unwrap().contains("no proto"));
        let req = descriptor("/v1beta1.DevicePlugin/Allocate", Side::Request).unwrap();
        assert_eq!(req.name(), "AllocateRequest");
    }

    #[test]
    fn the_status_comes_from_grpc_status_and_a_percent_encoded_message() {
        let mut map = http::HeaderMap::new();
        map.insert("grpc-status", "5".parse().unwrap());
        map.insert("grpc-message", "no%20such%20device: %E2%9C%93".parse().unwrap());
        assert_eq!(status_of(&map), Some(("not_found".into(), "no such device: ✓".into())));
        assert_eq!(status_of(&http::HeaderMap::new()), None);
        assert_eq!(percent_decode(b"100%"), "100%");
    }
}
