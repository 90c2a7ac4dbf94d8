//! Serving ListAndWatch from the encoded list the resource shares: a gRPC
//! codec whose messages are already-encoded bytes, and a `v1beta1.DevicePlugin`
//! service that answers ListAndWatch with it and every other method through
//! the generated server. A change to 100,000 devices is encoded once, not
//! cloned and encoded again for every open stream.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{NamedService, ServerStreamingService};
use tonic::transport::server::Router;
use tonic::{Request, Response, Status};

use super::service::{EncodedStream, MockService};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::deviceplugin::v1beta1::device_plugin_server::DevicePluginServer;
use crate::proto::pluginregistration::registration_server::RegistrationServer;

/// The gRPC path of ListAndWatch.
const LIST_AND_WATCH: &str = "/v1beta1.DevicePlugin/ListAndWatch";

/// Encodes messages that are already encoded; decodes the `Empty` request.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodedCodec;

/// Writes pre-encoded message bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodedEncoder;

/// Decodes `Empty`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyDecoder;

impl Codec for EncodedCodec {
    type Encode = Bytes;
    type Decode = dp::Empty;
    type Encoder = EncodedEncoder;
    type Decoder = EmptyDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        EncodedEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        EmptyDecoder
    }
}

impl Encoder for EncodedEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for EmptyDecoder {
    type Item = dp::Empty;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<dp::Empty>, Status> {
        dp::Empty::decode(src).map(Some).map_err(|e| Status::internal(format!("decoding Empty: {e}")))
    }
}

/// ListAndWatch answered from the shared encoded list.
struct ListAndWatchEncoded(MockService);

impl ServerStreamingService<dp::Empty> for ListAndWatchEncoded {
    type Response = Bytes;
    type ResponseStream = EncodedStream;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Response<EncodedStream>, Status>> + Send>>;

    fn call(&mut self, request: Request<dp::Empty>) -> Self::Future {
        let svc = self.0.clone();
        Box::pin(async move { svc.list_and_watch_encoded(request).await })
    }
}

/// The router serving both of a mock's services over `svc`.
pub fn router(svc: MockService) -> Router {
    crate::transport::server_builder()
        .add_service(DevicePluginService::new(svc.clone()))
        .add_service(RegistrationServer::new(svc))
}

/// `v1beta1.DevicePlugin` as a mock serves it.
#[derive(Clone)]
pub struct DevicePluginService {
    generated: DevicePluginServer<MockService>,
    svc: MockService,
}

impl DevicePluginService {
    /// The service over `svc`.
    pub fn new(svc: MockService) -> Self {
        DevicePluginService { generated: DevicePluginServer::new(svc.clone()), svc }
    }
}

impl NamedService for DevicePluginService {
    const NAME: &'static str = <DevicePluginServer<MockService> as NamedService>::NAME;
}

type BoxResponse =
    Pin<Box<dyn std::future::Future<Output = Result<http::Response<tonic::body::Body>, Infallible>> + Send>>;

impl tower::Service<http::Request<tonic::body::Body>> for DevicePluginService {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxResponse;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        if req.uri().path() == LIST_AND_WATCH {
            let svc = self.svc.clone();
            return Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(EncodedCodec);
                Ok(grpc.server_streaming(ListAndWatchEncoded(svc), req).await)
            });
        }
        Box::pin(self.generated.call(req))
    }
}
