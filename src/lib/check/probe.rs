//! What the suite learns from the plugin, gathered once and shared by the
//! checks: the connection, the GetDevicePluginOptions answer, and the one
//! long-lived ListAndWatch stream (read by a background task, as the
//! kubelet's receive loop does).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::transport::Channel;

use super::{CheckOptions, CheckTarget};
use crate::error::{Error, Result};
use crate::plugin_client::{PluginClient, Snapshot};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::text::fmt_duration;
use crate::transport::{self, ClientConfig};

/// The largest message the suite itself decodes: well above the kubelet's
/// limit, so that an over-limit message can be measured rather than refused.
const DECODE_LIMIT: usize = 64 * 1024 * 1024;

/// A call's answer (or error text) and how long it took.
#[derive(Debug, Clone)]
pub(super) struct Fetched<T> {
    pub result: std::result::Result<T, String>,
    pub took: Duration,
}

/// The first ListAndWatch message and how long after opening it came.
#[derive(Debug, Clone)]
pub(super) struct First {
    pub after: Duration,
    pub snapshot: Arc<Snapshot>,
}

/// How the stream ended.
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub at: Instant,
    /// What happened, in words (the error, or the clean close).
    pub how: String,
    /// Set when it ended because a message was over the suite's own decode limit.
    pub too_large: Option<Option<usize>>,
}

/// One snapshot rule a message broke: the first message that broke it, what
/// was wrong there, and how many messages broke it.
#[derive(Debug, Clone)]
pub(super) struct Broken {
    pub rule: &'static str,
    pub first: usize,
    pub evidence: String,
    pub messages: usize,
}

/// What the snapshot rules (device-ids-valid, health-values, numa-ids-valid)
/// need from EVERY ListAndWatch message, gathered as each arrives: the rules
/// judge them all, not only the first (a plugin whose first message is
/// empty would otherwise pass with nothing judged). Bounded: one entry per
/// broken rule, the messages themselves are not kept.
#[derive(Debug, Default, Clone)]
pub(super) struct Judged {
    /// Messages judged.
    pub messages: usize,
    /// Messages that listed at least one device.
    pub listing: usize,
    /// Most devices in one message.
    pub most: usize,
    /// Devices listed with a TopologyInfo, summed over the messages.
    pub with_topology: usize,
    /// The NUMA node IDs seen.
    pub numa_nodes: std::collections::BTreeSet<i64>,
    /// Devices (healthy, unhealthy) in the last message that listed any.
    pub last_health: (usize, usize),
    /// The rules broken, in the order first seen.
    pub broken: Vec<Broken>,
}

impl Judged {
    /// Judges message number `seq` (from 1).
    fn add(&mut self, seq: usize, devices: &[crate::model::Device]) {
        self.messages += 1;
        self.most = self.most.max(devices.len());
        if !devices.is_empty() {
            self.listing += 1;
            let healthy = devices.iter().filter(|d| d.is_healthy()).count();
            self.last_health = (healthy, devices.len() - healthy);
        }
        for d in devices {
            if let Some(nodes) = &d.numa_nodes {
                self.with_topology += 1;
                self.numa_nodes.extend(nodes.iter().copied().filter(|n| *n >= 0));
            }
        }
        for v in crate::contract::check_snapshot(devices, 0) {
            match self.broken.iter_mut().find(|b| b.rule == v.rule) {
                Some(b) => b.messages += 1,
                None => self.broken.push(Broken { rule: v.rule, first: seq, evidence: v.evidence, messages: 1 }),
            }
        }
    }
}

/// What the stream reader has seen so far.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    pub first: Option<(Instant, Arc<Snapshot>)>,
    /// Every message, as the snapshot rules judge it.
    pub judged: Judged,
    /// The newest message that listed a device (the devices to allocate).
    pub listing: Option<Arc<Snapshot>>,
    pub messages: usize,
    /// Largest message so far: (1-based message number, bytes).
    pub largest: Option<(usize, usize)>,
    pub ended: Option<Ended>,
}

struct StreamWatch {
    opened: Instant,
    rx: watch::Receiver<StreamState>,
    task: JoinHandle<()>,
}

impl Drop for StreamWatch {
    /// Stops the reader also when the suite itself is dropped half-way.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The plugin under test, as far as the suite has learnt it.
pub(super) struct Probe<'a> {
    pub target: &'a CheckTarget,
    pub opts: &'a CheckOptions,
    channel: Channel,
    /// Calls under the suite's call deadline.
    pub client: PluginClient,
    options: Option<Fetched<dp::DevicePluginOptions>>,
    stream: Option<StreamWatch>,
    first: Option<std::result::Result<First, String>>,
    /// The devices `allocate-healthy` gave its first container (PreStartContainer uses them).
    pub allocated: Option<Vec<String>>,
    /// Whether a single Allocate works when made alone (None: not tried yet).
    pub allocate_ok: Option<bool>,
    /// Whether PreStartContainer works when made alone (None: not tried yet).
    pub prestart_ok: Option<bool>,
}

impl<'a> Probe<'a> {
    /// Connects to the plugin; this is the only error that stops the suite.
    pub async fn connect(target: &'a CheckTarget, opts: &'a CheckOptions) -> Result<Probe<'a>> {
        let channel = transport::connect(&target.socket, target.connect_timeout).await?;
        let client = PluginClient::from_channel(channel.clone(), &target.socket, &config(target, opts.call_timeout));
        Ok(Probe {
            target,
            opts,
            channel,
            client,
            options: None,
            stream: None,
            first: None,
            allocated: None,
            allocate_ok: None,
            prestart_ok: None,
        })
    }

    /// A client on the same connection with another call deadline.
    pub fn client_with(&self, call_timeout: Duration) -> PluginClient {
        PluginClient::from_channel(self.channel.clone(), &self.target.socket, &config(self.target, call_timeout))
    }

    /// A client whose ListAndWatch waits for the response headers as long as
    /// for the first message (grpc-go sends the headers with the first message).
    pub fn stream_client(&self) -> PluginClient {
        self.client_with(self.opts.first_message_timeout)
    }

    /// GetDevicePluginOptions, asked once.
    pub async fn options(&mut self) -> Fetched<dp::DevicePluginOptions> {
        if let Some(f) = &self.options {
            return f.clone();
        }
        let t = Instant::now();
        let result = self.client.options().await.map_err(|e| said(&e));
        let f = Fetched { result, took: t.elapsed() };
        self.options = Some(f.clone());
        f
    }

    /// The options, or the text of an error finding for a check that needs them.
    pub async fn options_or_why(&mut self) -> std::result::Result<dp::DevicePluginOptions, String> {
        self.options()
            .await
            .result
            .map_err(|e| format!("GetDevicePluginOptions failed, so it is not known whether this applies: {e}"))
    }

    /// Opens the long-lived ListAndWatch stream (once) and returns its state.
    pub fn stream(&mut self) -> watch::Receiver<StreamState> {
        if self.stream.is_none() {
            let client = self.stream_client();
            let (tx, rx) = watch::channel(StreamState::default());
            let opened = Instant::now();
            let task = tokio::spawn(read_stream(client, tx));
            self.stream = Some(StreamWatch { opened, rx, task });
        }
        match &self.stream {
            Some(s) => s.rx.clone(),
            // Set just above.
            None => watch::channel(StreamState::default()).1,
        }
    }

    /// When the stream was opened (opening it if needed).
    pub fn opened(&mut self) -> Instant {
        let _ = self.stream();
        self.stream.as_ref().map_or_else(Instant::now, |s| s.opened)
    }

    /// The first ListAndWatch message, waiting at most the first-message deadline.
    pub async fn first_message(&mut self) -> std::result::Result<First, String> {
        if let Some(f) = &self.first {
            return f.clone();
        }
        let mut rx = self.stream();
        let opened = self.opened();
        let limit = self.opts.first_message_timeout;
        let waited = tokio::time::timeout_at(opened + limit, rx.wait_for(|s| s.first.is_some() || s.ended.is_some()))
            .await
            .map(|r| r.map(|s| (s.first.clone(), s.ended.clone())));
        let result = match waited {
            Ok(Ok((Some((at, snapshot)), _))) => Ok(First { after: at - opened, snapshot }),
            Ok(Ok((None, Some(ended)))) => Err(format!(
                "ListAndWatch ended after {} without sending a device list: {}",
                fmt_duration(ended.at - opened),
                ended.how
            )),
            Ok(_) => Err("the ListAndWatch reader stopped without a result".to_string()),
            Err(_) => Err(format!("no ListAndWatch message within {}", fmt_duration(limit))),
        };
        self.first = Some(result.clone());
        result
    }

    /// The IDs of the healthy devices in the newest message that listed
    /// any (the first message when none did), each once, in order.
    pub async fn healthy(&mut self) -> std::result::Result<Vec<String>, String> {
        let first = self.first_message().await.map_err(|e| format!("no device list to pick devices from: {e}"))?;
        let listing = self.stream().borrow().listing.clone().unwrap_or(first.snapshot);
        let mut seen = std::collections::HashSet::new();
        Ok(listing
            .devices
            .iter()
            .filter(|d| d.is_healthy() && !d.id.is_empty() && seen.insert(d.id.as_str()))
            .map(|d| d.id.clone())
            .collect())
    }

    /// Stops the stream reader (closing the stream, as a kubelet's restart would).
    pub fn close(self) {
        drop(self);
    }
}

fn config(target: &CheckTarget, call_timeout: Duration) -> ClientConfig {
    ClientConfig { connect_timeout: call_timeout, call_timeout, max_recv_bytes: DECODE_LIMIT, tap: target.tap.clone() }
}

/// Reads ListAndWatch until it ends, recording what arrives.
async fn read_stream(client: PluginClient, tx: watch::Sender<StreamState>) {
    let end = |tx: &watch::Sender<StreamState>, how: String, too_large: Option<Option<usize>>| {
        tx.send_modify(|s| s.ended = Some(Ended { at: Instant::now(), how, too_large }));
    };
    let mut stream = match client.list_and_watch().await {
        Ok(s) => Box::pin(s),
        Err(e) => return end(&tx, said(&e), too_large(&e)),
    };
    while let Some(item) = stream.next().await {
        match item {
            Ok(snap) => tx.send_modify(|s| {
                s.messages += 1;
                let seq = s.messages;
                s.judged.add(seq, &snap.devices);
                let snap = Arc::new(snap);
                if !snap.devices.is_empty() {
                    s.listing = Some(Arc::clone(&snap));
                }
                let len = snap.encoded_len;
                if s.largest.is_none_or(|(_, l)| len > l) {
                    s.largest = Some((s.messages, len));
                }
                if s.first.is_none() {
                    s.first = Some((Instant::now(), snap));
                }
            }),
            Err(e) => return end(&tx, said(&e), too_large(&e)),
        }
    }
    end(&tx, "the plugin closed the stream with status OK".into(), None);
}

/// An error as evidence: what the plugin said, without the socket path and
/// method the report already shows.
pub(super) fn said(e: &Error) -> String {
    match e {
        Error::Rpc { code, message, .. } => format!("the plugin answered {code:?}: {message}"),
        Error::Unimplemented { message, .. } => format!("the plugin answered Unimplemented: {message}"),
        Error::DeadlineExceeded { timeout, .. } => format!("no answer within {}", fmt_duration(*timeout)),
        other => other.to_string(),
    }
}

fn too_large(e: &Error) -> Option<Option<usize>> {
    match e {
        Error::MessageTooLarge { size, .. } => Some(*size),
        _ => None,
    }
}
