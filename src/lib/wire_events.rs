//! What the wire tap reports (`dpctl -v`): each gRPC call as data events
//! (the method, each message decoded to JSON, headers, trailers, status and
//! latency), and the [`Tap`] that carries them to a sink. The transport
//! (`transport::wire`) produces them; the output layer renders them. Kept
//! apart from the transport so that rendering them needs no transport.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// One header or trailer, as sent or received (names in lower case).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Header {
    /// The name.
    pub name: String,
    /// The value (binary `-bin` values as received, base64).
    pub value: String,
}

/// One gRPC message as it crossed the wire.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WireMessage {
    /// Its length on the wire, without the 5-byte gRPC prefix.
    pub bytes: usize,
    /// The message as JSON: proto field names, zero values included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// Why it is not shown as JSON (unknown service, compressed, malformed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undecoded: Option<String>,
}

/// What a tapped client saw of one call, in the order it happened. `call`
/// numbers the calls of a process from 1, so that the events of calls
/// made at the same time can be told apart.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WireEvent {
    /// A call starts: the method and the request headers (metadata) dpctl sends.
    Call {
        /// The call's number.
        call: u64,
        /// `/package.Service/Method`.
        method: String,
        /// Which part of dpctl makes the call, when a command runs several
        /// (`smoke`: `kubelet-sim` or `plugin check`).
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// dpctl serves this call (a plugin calls kubelet-sim's Registration):
        /// the request is received and the response sent.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        served: bool,
        /// The request headers.
        headers: Vec<Header>,
    },
    /// A request message was sent.
    Request {
        /// The call's number.
        call: u64,
        /// `/package.Service/Method`.
        method: String,
        /// The message.
        message: WireMessage,
    },
    /// The response headers arrived.
    Headers {
        /// The call's number.
        call: u64,
        /// `/package.Service/Method`.
        method: String,
        /// The response headers (metadata), `:status` first.
        headers: Vec<Header>,
        /// Time since the call started.
        elapsed_ms: f64,
    },
    /// A response message arrived (a stream gives one per message).
    Response {
        /// The call's number.
        call: u64,
        /// `/package.Service/Method`.
        method: String,
        /// 1 for the first message of the response.
        seq: u64,
        /// The message.
        message: WireMessage,
        /// Time since the call started.
        elapsed_ms: f64,
    },
    /// The call ended: its status, the trailers, and how long it took.
    End {
        /// The call's number.
        call: u64,
        /// `/package.Service/Method`.
        method: String,
        /// The gRPC status code, snake_case (`ok`, `not_found`, ...).
        code: String,
        /// The status message (`grpc-message`), or what ended the call.
        status_message: String,
        /// Who ended it: `server` (a status), `client` (dpctl stopped
        /// reading, or its deadline passed), `transport` (the connection failed).
        ended_by: &'static str,
        /// The trailers (none for a trailers-only response, whose status came in the headers).
        trailers: Vec<Header>,
        /// The response was trailers-only: the status came in the headers, with no messages.
        trailers_only: bool,
        /// How many response messages arrived.
        responses: u64,
        /// Time since the call started.
        elapsed_ms: f64,
    },
}

impl WireEvent {
    /// The number of the call the event belongs to.
    pub fn call(&self) -> u64 {
        match self {
            WireEvent::Call { call, .. }
            | WireEvent::Request { call, .. }
            | WireEvent::Headers { call, .. }
            | WireEvent::Response { call, .. }
            | WireEvent::End { call, .. } => *call,
        }
    }
}

/// Where a tapped channel reports its calls: a sink for [`WireEvent`]s,
/// called on the task that drives the call, and the process's call counter.
#[derive(Clone)]
pub struct Tap {
    pub(crate) sink: Arc<dyn Fn(&WireEvent) + Send + Sync>,
    pub(crate) next: Arc<AtomicU64>,
    pub(crate) by: Option<Arc<str>>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap").field("calls", &self.next.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl Tap {
    /// A tap that hands every event to `sink`.
    pub fn new(sink: impl Fn(&WireEvent) + Send + Sync + 'static) -> Self {
        Tap { sink: Arc::new(sink), next: Arc::new(AtomicU64::new(1)), by: None }
    }

    /// The same tap (same sink, same call numbers), its calls said to be made by `by`.
    pub fn by(&self, by: &str) -> Self {
        Tap { by: Some(by.into()), ..self.clone() }
    }
}
