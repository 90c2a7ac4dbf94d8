//! The HTTP/2 flow-control settings of every gRPC client and server dpctl
//! builds, chosen for device-plugin traffic rather than left to defaults.
//!
//! HTTP/2 lets a sender have at most a *window* of unacknowledged DATA bytes
//! in flight per stream and per connection; the receiver advertises the
//! windows and tops them up with WINDOW_UPDATE frames as its application
//! reads. A ListAndWatch message for 100,000 devices is about 2.6 MiB (the
//! kubelet accepts up to 4 MiB). With a 64 KiB window (the HTTP/2 default,
//! and what a grpc-go kubelet starts a connection with) the plugin can send
//! 64 KiB, then must wait for the kubelet to read and acknowledge it: about
//! 42 round trips of "send, wake the reader, read, send WINDOW_UPDATE, wake
//! the writer" for one message. grpc-go's BDP estimator grows the kubelet's
//! windows (up to 16 MiB) only after it has measured a few such round trips,
//! so the first large messages on each connection pay for the small window,
//! and every round trip costs two context switches on a busy node.
//!
//! dpctl's receivers therefore advertise windows that hold a whole message
//! of the kubelet's maximum size: a sender never stalls mid-message on flow
//! control, and the reader tops the window up once per message. Frames are
//! allowed up to 1 MiB so a large message is not cut into 16 KiB pieces.
//! These are fixed windows (no BDP estimation): on a unix socket the
//! bandwidth-delay product is tiny and the worst case is bounded by the
//! window, at most [`CONNECTION_WINDOW`] buffered per connection.

use tonic::transport::{Endpoint, Server};

use crate::limits::KUBELET_MAX_RECV;

/// Per-stream receive window: twice the kubelet's 4 MiB message limit, so a
/// message of any size the kubelet accepts fits with room for the next.
pub const STREAM_WINDOW: u32 = 2 * KUBELET_MAX_RECV as u32;

/// Per-connection receive window: two full streams' worth.
pub const CONNECTION_WINDOW: u32 = 2 * STREAM_WINDOW;

/// Largest DATA frame the peer may send us (HTTP/2 allows 16 KiB to 16 MiB).
pub const MAX_FRAME_SIZE: u32 = 1 << 20;

/// Most streams (calls) open at once on one connection to a dpctl server.
/// Left unset, a client could open thousands per connection that never send
/// a body: 250 connections of 2,000 such streams took a mock plugin from
/// 35 MB to 1.4 GB. A kubelet makes a few calls at a time; more than this
/// are refused with REFUSED_STREAM, which clients (tonic, grpc-go) avoid by
/// queueing, so `bench --concurrency` beyond it waits on the client side.
pub const MAX_CONCURRENT_STREAMS: u32 = 128;

/// Streams a client may open and reset before the server has accepted them
/// (the "rapid reset" flood, CVE-2023-44487); past it h2 sends GOAWAY
/// ENHANCE_YOUR_CALM. h2's own default, set here so it is visible.
pub const MAX_PENDING_ACCEPT_RESETS: usize = 20;

/// Streams the server may reset for a client's protocol errors before h2
/// closes the connection with GOAWAY ENHANCE_YOUR_CALM (hyper's default).
/// PING and SETTINGS floods, which h2 does not limit, are bounded by the
/// transport's guard (`transport::guard`).
pub const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// A tonic server builder with dpctl's windows, frame size and stream limit.
pub fn server_builder() -> Server {
    Server::builder()
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESETS))
        .http2_max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME_SIZE)
        .http2_adaptive_window(Some(false))
}

/// `endpoint` with dpctl's windows and frame size.
pub(crate) fn client_settings(endpoint: Endpoint) -> Endpoint {
    endpoint
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME_SIZE)
        .http2_adaptive_window(false)
}

// A whole kubelet-sized message fits the windows; HTTP/2 (RFC 9113 §6.5.2,
// §6.9.1) allows frames of 2^14..2^24-1 bytes and windows up to 2^31-1.
const _: () = assert!(
    STREAM_WINDOW as usize >= KUBELET_MAX_RECV
        && CONNECTION_WINDOW >= STREAM_WINDOW
        && CONNECTION_WINDOW < 1 << 31
        && MAX_FRAME_SIZE >= 1 << 14
        && MAX_FRAME_SIZE < 1 << 24
);
