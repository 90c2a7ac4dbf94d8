//! A gRPC codec for prost messages that decodes each received message
//! straight from tonic's receive buffer as one byte slice, and reports the
//! message's size on the wire. Used for server streams whose messages are
//! large (a ListAndWatch list of 100,000 devices is 2.6 MiB).
//!
//! tonic's own prost codec decodes through the buffer's `Buf` interface,
//! which moves the buffer's cursor once per field (about ten times per
//! device); decoding from a slice moves it once per message. The messages
//! decoded are the same, and so are the errors (a malformed message is an
//! `INTERNAL` status, a message over the receive limit is refused by tonic
//! before the codec sees it).

use std::marker::PhantomData;

use bytes::Buf;
use http::uri::PathAndQuery;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{GrpcMethod, Request, Status, Streaming};

/// A message that can make room for its repeated fields before it is
/// decoded, so that decoding does not grow them step by step (100,000
/// devices would be moved about 17 times over). The default makes none.
pub trait Reserve: Message + Default {
    /// An empty message with room for what `encoded` holds.
    fn with_room_for(encoded: &[u8]) -> Self {
        let _ = encoded;
        Self::default()
    }
}

/// How many times the length-delimited field `field` (a message, string
/// or bytes) occurs at the top level of the encoded
/// message `encoded` (stops counting at the first malformed field; the
/// decode that follows reports it).
pub fn count_field(mut encoded: &[u8], field: u32) -> usize {
    let mut n = 0usize;
    while !encoded.is_empty() {
        let Ok((tag, wire_type)) = prost::encoding::decode_key(&mut encoded) else { break };
        if tag == field && wire_type == prost::encoding::WireType::LengthDelimited {
            n = n.saturating_add(1);
        }
        let ctx = prost::encoding::DecodeContext::default();
        if prost::encoding::skip_field(wire_type, tag, &mut encoded, ctx).is_err() {
            break;
        }
    }
    n
}

/// A decoded message and its size on the wire in bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sized<T> {
    /// The message.
    pub message: T,
    /// Its encoded length as received (without the 5-byte gRPC prefix).
    pub encoded_len: usize,
}

/// Encodes `E` with prost; decodes `D` from one slice, as [`Sized`].
#[derive(Debug)]
pub struct SliceCodec<E, D>(PhantomData<fn(E) -> D>);

impl<E, D> Default for SliceCodec<E, D> {
    fn default() -> Self {
        SliceCodec(PhantomData)
    }
}

/// The encoding half of [`SliceCodec`].
#[derive(Debug)]
pub struct PlainEncoder<E>(PhantomData<fn(E)>);

/// The decoding half of [`SliceCodec`].
#[derive(Debug)]
pub struct SliceDecoder<D>(PhantomData<fn() -> D>);

impl<E, D> Codec for SliceCodec<E, D>
where
    E: Message + Send + 'static,
    D: Reserve + Send + 'static,
{
    type Encode = E;
    type Decode = Sized<D>;
    type Encoder = PlainEncoder<E>;
    type Decoder = SliceDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        PlainEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        SliceDecoder(PhantomData)
    }
}

impl<E: Message> Encoder for PlainEncoder<E> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst).map_err(|e| Status::internal(format!("encoding the request: {e}")))
    }
}

impl<D: Reserve> Decoder for SliceDecoder<D> {
    type Item = Sized<D>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Sized<D>>, Status> {
        let len = src.remaining();
        let decoded = match src.chunk().get(..len) {
            // tonic's buffer is contiguous: the whole message is one slice.
            Some(slice) => decode_slice::<D>(slice),
            None => decode_slice::<D>(&src.copy_to_bytes(len)),
        };
        src.advance(src.remaining());
        decoded.map(|message| Some(Sized { message, encoded_len: len })).map_err(|e| Status::internal(e.to_string()))
    }
}

/// Decodes `encoded` as prost does (`D::decode`), into a message that made
/// room for its repeated fields first.
pub fn decode_slice<D: Reserve>(encoded: &[u8]) -> Result<D, prost::DecodeError> {
    let mut message = D::with_room_for(encoded);
    message.merge(encoded)?;
    Ok(message)
}

/// Opens the server-streaming call `service`/`method` on `channel` with
/// `request`, accepting messages of at most `max_recv` bytes, and decodes
/// the answers with [`SliceCodec`].
pub async fn server_streaming<E, D>(
    channel: super::WireChannel,
    service: &'static str,
    method: &'static str,
    request: E,
    max_recv: usize,
) -> Result<Streaming<Sized<D>>, Status>
where
    E: Message + Send + Sync + 'static,
    D: Reserve + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(max_recv);
    grpc.ready().await.map_err(|e| Status::unknown(format!("Service was not ready: {e}")))?;
    let path = PathAndQuery::try_from(format!("/{service}/{method}"))
        .map_err(|e| Status::internal(format!("gRPC path /{service}/{method}: {e}")))?;
    let mut req = Request::new(request);
    req.extensions_mut().insert(GrpcMethod::new(service, method));
    grpc.server_streaming(req, path, SliceCodec::<E, D>::default()).await.map(tonic::Response::into_inner)
}
