//! The kubelet a smoke run talks to, on either engine: requests go through
//! the control protocol ([`Engine::call`]), and the events the steps judge
//! come from the in-process sim's own stream, or, for a referee, from the
//! control protocol's `events` (what the kubelet's code logged), turned
//! into the same [`SimEvent`]s with the referee's paths as the plugin sees
//! them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use super::engine::Engine;
use super::process::PluginProcess;
use crate::kubelet_sim::control::{Answer, Request, WireEvent, WireEventKind};
use crate::kubelet_sim::{AdmitOutcome, DeleteOutcome, EventKind, RestartReport, SimEvent, SimStatus};
use crate::model::Counts;

/// How often a referee's events are asked for while a step waits on one.
const POLL: Duration = Duration::from_millis(25);

/// How a wait for an event ended.
pub(super) enum Waited {
    /// The event at this index matched.
    Found(usize),
    /// The plugin process ended first.
    Exited(super::ExitView),
    /// The deadline passed.
    TimedOut,
}

enum Feed {
    /// The in-process sim's events, from its start.
    Sim(broadcast::Receiver<SimEvent>),
    /// A referee's `events`, from this number on.
    Poll(u64),
}

/// The engine, its events so far, and how its paths read outside.
pub(super) struct Kubelet {
    engine: Arc<Engine>,
    feed: Feed,
    /// Every event so far, in order.
    pub(super) seen: Vec<SimEvent>,
    /// (the engine's path, the same path outside) pairs.
    path_map: Vec<(PathBuf, PathBuf)>,
}

impl Kubelet {
    pub(super) fn new(engine: Arc<Engine>, path_map: Vec<(PathBuf, PathBuf)>) -> Kubelet {
        let feed = match engine.sim() {
            Some(sim) => Feed::Sim(sim.events_from_start().unwrap_or_else(|| sim.subscribe())),
            None => Feed::Poll(0),
        };
        Kubelet { engine, feed, seen: Vec::new(), path_map }
    }

    /// True for a referee (the kubelet's own code), false for the sim.
    pub(super) fn is_referee(&self) -> bool {
        self.engine.sim().is_none()
    }

    /// Why the engine cannot reboot the node on request (a real kubelet),
    /// or `None` when it can.
    pub(super) fn cannot_reboot(&self) -> Option<&'static str> {
        self.engine.cannot_reboot()
    }

    /// `kubelet-sim` or `referee v1.N.P`.
    pub(super) fn name(&self) -> &str {
        self.engine.name()
    }

    /// A path the engine reports, as the plugin and dpctl see it.
    fn outside(&self, p: &str) -> String {
        let path = Path::new(p);
        for (inside, out) in &self.path_map {
            if let Ok(rest) = path.strip_prefix(inside) {
                return out.join(rest).display().to_string();
            }
        }
        p.to_string()
    }

    /// Takes every event already sent.
    pub(super) async fn pull(&mut self) {
        match &mut self.feed {
            Feed::Sim(rx) => loop {
                match rx.try_recv() {
                    Ok(e) => self.seen.push(e),
                    Err(broadcast::error::TryRecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "smoke fell behind the kubelet-sim's events");
                    }
                    Err(_) => return,
                }
            },
            Feed::Poll(next) => {
                let since = *next;
                let answer = match self.engine.call(Request::Events { since }).await {
                    Ok(Ok(Answer::Events { events, next })) => Some((events, next)),
                    Ok(Ok(_)) | Ok(Err(_)) | Err(_) => None,
                };
                if let Some((events, next)) = answer {
                    self.feed = Feed::Poll(next);
                    for e in events {
                        let ev = self.as_sim_event(e);
                        self.seen.push(ev);
                    }
                }
            }
        }
    }

    /// A referee's event as the sim's, its paths as seen outside; what the
    /// kubelet's log does not say is left empty (the steps say so).
    fn as_sim_event(&self, e: WireEvent) -> SimEvent {
        let time = e.time();
        let kind = match e.kind {
            WireEventKind::Registered {
                resource,
                endpoint,
                socket,
                via,
                version,
                request_options,
                pre_start_required,
                get_preferred_allocation_available,
                took_ms,
            } => EventKind::Registered {
                resource,
                endpoint,
                socket: self.outside(&socket),
                via,
                version,
                request_options,
                pre_start_required,
                get_preferred_allocation_available,
                request_options_differ: false,
                replaced: false,
                took_ms,
            },
            WireEventKind::RegistrationRejected { resource, endpoint, socket, via, version, message } => {
                EventKind::RegistrationRejected {
                    resource,
                    endpoint,
                    socket: self.outside(&socket),
                    via,
                    version,
                    message,
                }
            }
            WireEventKind::Snapshot { resource, devices, capacity, allocatable, message_bytes } => {
                EventKind::Snapshot {
                    resource,
                    seq: 0,
                    capacity: capacity.unwrap_or(0),
                    allocatable: allocatable.unwrap_or(0),
                    devices,
                    message_bytes: message_bytes.unwrap_or(0),
                    changes: 0,
                    violations: Vec::new(),
                }
            }
            WireEventKind::StreamEnded { resource, socket, reason } => EventKind::StreamEnded {
                resource,
                socket: self.outside(&socket),
                reason,
                capacity: 0,
                allocatable: 0,
                grace_period_ms: 0,
            },
        };
        SimEvent { time, kind }
    }

    pub(super) fn find(&self, from: usize, pred: &impl Fn(&EventKind) -> bool) -> Option<usize> {
        self.seen.iter().skip(from).position(|e| pred(&e.kind)).map(|i| i + from)
    }

    /// Waits for an event from index `from` on that matches, until the
    /// deadline or the end of the process.
    pub(super) async fn wait_for(
        &mut self,
        from: usize,
        pred: impl Fn(&EventKind) -> bool,
        deadline: tokio::time::Instant,
        process: Option<&PluginProcess>,
    ) -> Waited {
        loop {
            self.pull().await;
            if let Some(i) = self.find(from, &pred) {
                return Waited::Found(i);
            }
            let exited = async {
                match process {
                    Some(p) => p.exited().await,
                    None => std::future::pending().await,
                }
            };
            let next = async {
                match &mut self.feed {
                    Feed::Sim(rx) => match rx.recv().await {
                        Ok(e) => Some(e),
                        Err(broadcast::error::RecvError::Lagged(_)) => None,
                        // A stopped sim sends nothing more: wait out the deadline.
                        Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                    },
                    // A referee is asked again (bounded by the deadline below).
                    Feed::Poll(_) => {
                        tokio::time::sleep(POLL).await;
                        None
                    }
                }
            };
            tokio::select! {
                e = next => {
                    if let Some(e) = e {
                        self.seen.push(e);
                    }
                }
                exit = exited => {
                    // Events the plugin caused just before it ended still count.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    self.pull().await;
                    return match self.find(from, &pred) {
                        Some(i) => Waited::Found(i),
                        None => Waited::Exited(exit),
                    };
                }
                () = tokio::time::sleep_until(deadline) => {
                    self.pull().await;
                    return match self.find(from, &pred) {
                        Some(i) => Waited::Found(i),
                        None => Waited::TimedOut,
                    };
                }
            }
        }
    }

    /// Sends a request; the engine's refusal is an error text.
    async fn ask(&self, request: Request) -> Result<Answer, String> {
        match self.engine.call(request).await {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(remote)) => Err(remote.message),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The state, with device lists (`None`, logged, when the engine cannot answer).
    pub(super) async fn status(&self) -> Option<SimStatus> {
        match self.engine.status().await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "the kubelet did not answer status");
                None
            }
        }
    }

    /// Capacity and allocatable per resource in node status.
    pub(super) async fn counts(&self) -> BTreeMap<String, Counts> {
        let Some(status) = self.status().await else { return BTreeMap::new() };
        status
            .resources
            .iter()
            .filter(|r| r.reported)
            .map(|r| (r.resource.clone(), Counts { capacity: r.capacity, allocatable: r.allocatable }))
            .collect()
    }

    /// Waits until `pred` holds for the counts (asked every [`POLL`]), at
    /// most `timeout`: the counts when it held, `Err` with the last ones.
    pub(super) async fn wait_for_counts(
        &self,
        pred: impl Fn(&BTreeMap<String, Counts>) -> bool,
        timeout: Duration,
    ) -> Result<BTreeMap<String, Counts>, BTreeMap<String, Counts>> {
        let deadline = crate::duration::deadline(timeout);
        loop {
            let counts = self.counts().await;
            if pred(&counts) {
                return Ok(counts);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(counts);
            }
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(tokio::time::Instant::now()))).await;
        }
    }

    pub(super) async fn admit(&self, pod: crate::kubelet_sim::PodSpec) -> Result<AdmitOutcome, String> {
        match self.ask(Request::Admit { pod }).await? {
            Answer::Admit(o) => Ok(o),
            other => Err(format!("answered admit with {other:?}")),
        }
    }

    pub(super) async fn delete(&self, namespace: &str, name: &str) -> Result<DeleteOutcome, String> {
        match self.ask(Request::Delete { namespace: namespace.into(), name: name.into() }).await? {
            Answer::Delete(o) => Ok(o),
            other => Err(format!("answered delete with {other:?}")),
        }
    }

    pub(super) async fn restart(&self, wait: Duration) -> Result<RestartReport, String> {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        match self.ask(Request::Restart { wait_ms, readmit_after_ms: None, no_readmit: false }).await? {
            Answer::Restart(r) => Ok(r),
            other => Err(format!("answered restart with {other:?}")),
        }
    }

    /// A node reboot: every pod admitted again `readmit_after` past the new
    /// kubelet.sock, in admission order.
    pub(super) async fn reboot(&self, readmit_after: Duration) -> Result<crate::kubelet_sim::RebootReport, String> {
        let readmit_after_ms = u64::try_from(readmit_after.as_millis()).unwrap_or(u64::MAX);
        match self.ask(Request::Reboot { order: Vec::new(), readmit_after_ms }).await? {
            Answer::Reboot(r) => Ok(r),
            other => Err(format!("answered reboot with {other:?}")),
        }
    }
}
