//! Steering a running sim from another process: requests and replies on the
//! control socket `<dir>/.dpctl/kubelet-sim.sock` (JSON, one per line), and
//! the client calls the CLI uses.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::admission::{AdmitOutcome, DeleteOutcome, PodSpec};
use super::handle::SimHandle;
use super::manager::SimStatus;
use super::outcome::RestartReport;
pub use super::wire::{WireEvent, WireEventKind};
use crate::error::{Error, Result};
use crate::transport::control;

/// The name of the sim's control socket (see [`crate::paths::control_socket`]).
pub const CONTROL_NAME: &str = "kubelet-sim";

/// A request to a running sim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Admit a pod.
    Admit {
        /// The pod.
        pod: PodSpec,
    },
    /// Judge a pod without admitting it (`admit --dry-run`).
    DryRun {
        /// The pod.
        pod: PodSpec,
    },
    /// Delete a pod.
    Delete {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
    },
    /// Restart the kubelet and wait up to `wait_ms` for plugins to come back.
    Restart {
        /// How long to wait for re-registrations.
        wait_ms: u64,
        /// Admit every pod again this long after the new kubelet.sock, its
        /// containers still running, as the kubelet does with its first pod
        /// list (absent: at once).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        readmit_after_ms: Option<u64>,
        /// `kubelet-sim restart --no-readmit`: admit nothing again (a
        /// sim-only choice; the kubelet always admits its pods again).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        no_readmit: bool,
    },
    /// Restart one container of an admitted pod.
    RestartContainer {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Container name.
        container: String,
    },
    /// Reboot the node: containers gone, checkpoint kept, every pod admitted again.
    Reboot {
        /// The order pods are admitted again in (names); empty: admission order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        order: Vec<String>,
        /// From the new kubelet.sock to the re-admission (plugins registering meanwhile are back in time).
        #[serde(default, skip_serializing_if = "is_zero")]
        readmit_after_ms: u64,
    },
    /// The state.
    Status,
    /// Set the grace period after a stream end.
    SetGrace {
        /// The grace period.
        grace_period_ms: u64,
    },
    /// What the kubelet did with its plugins from event number `since` on
    /// (registrations, refusals, ListAndWatch messages, stream ends): how a
    /// client in another process follows the plugins, on either engine.
    Events {
        /// The first event wanted (0: from the start; the answer's `next` to go on).
        #[serde(default)]
        since: u64,
    },
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Answer {
    /// Admission outcome.
    Admit(AdmitOutcome),
    /// Deletion outcome.
    Delete(DeleteOutcome),
    /// Restart report.
    Restart(RestartReport),
    /// A container restart.
    RestartContainer(super::admission::RestartOutcome),
    /// Every pod admitted again after a reboot.
    Reboot(super::reboot::RebootReport),
    /// Status.
    Status(SimStatus),
    /// The grace period now in force.
    SetGrace {
        /// The grace period.
        grace_period_ms: u64,
    },
    /// Events from the one asked for on.
    Events {
        /// The events, oldest first.
        events: Vec<WireEvent>,
        /// The number to ask for next.
        next: u64,
    },
}

/// An error carried over the control socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteError {
    /// The error text.
    pub message: String,
    /// The hint, if any.
    pub hint: Option<String>,
    /// The exit code it maps to.
    pub exit_code: u8,
}

/// A reply: the answer or the error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// It worked.
    Ok(Answer),
    /// It failed.
    Error(RemoteError),
}

/// Answers one request against `sim`.
pub(crate) async fn handle(sim: SimHandle, request: std::result::Result<Request, String>) -> Reply {
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            return Reply::Error(RemoteError {
                message: format!("bad control request: {e}"),
                hint: None,
                exit_code: crate::error::exit::USAGE,
            });
        }
    };
    // Durations from another process get the bound flags have (365 days):
    // a raw request could set a grace period of 584 billion years.
    let (field, ms) = match &request {
        Request::Restart { readmit_after_ms: Some(after), wait_ms, .. } if after > wait_ms => {
            ("readmit_after_ms", *after)
        }
        Request::Restart { wait_ms, .. } => ("wait_ms", *wait_ms),
        Request::SetGrace { grace_period_ms } => ("grace_period_ms", *grace_period_ms),
        Request::Reboot { readmit_after_ms, .. } => ("readmit_after_ms", *readmit_after_ms),
        _ => ("", 0),
    };
    if let Err(e) = crate::duration::check(Duration::from_millis(ms)) {
        return Reply::Error(RemoteError {
            message: format!("bad control request: {field}: {ms} ms is {e}"),
            hint: None,
            exit_code: crate::error::exit::USAGE,
        });
    }
    let result = match request {
        Request::Admit { pod } => sim.admit(pod).await.map(Answer::Admit),
        Request::DryRun { pod } => sim.admit_dry_run(pod).await.map(Answer::Admit),
        Request::Delete { namespace, name } => sim.delete(&namespace, &name).await.map(Answer::Delete),
        // `restart --no-readmit`: the pods keep their devices unchecked.
        Request::Restart { wait_ms, no_readmit: true, .. } => {
            sim.restart_without_readmission(Duration::from_millis(wait_ms)).await.map(Answer::Restart)
        }
        Request::Restart { wait_ms, readmit_after_ms, no_readmit: false } => sim
            .restart_readmit(Duration::from_millis(wait_ms), readmit_after_ms.map(Duration::from_millis))
            .await
            .map(Answer::Restart),
        Request::RestartContainer { namespace, name, container } => {
            sim.restart_container(&namespace, &name, &container).await.map(Answer::RestartContainer)
        }
        Request::Status => Ok(Answer::Status(sim.status())),
        Request::Reboot { order, readmit_after_ms } => {
            sim.reboot(&order, Duration::from_millis(readmit_after_ms)).await.map(Answer::Reboot)
        }
        Request::SetGrace { grace_period_ms } => {
            sim.set_grace_period(Duration::from_millis(grace_period_ms));
            Ok(Answer::SetGrace { grace_period_ms })
        }
        Request::Events { since } => {
            let (events, next) = sim.wire_events(since);
            Ok(Answer::Events { events, next })
        }
    };
    match result {
        Ok(a) => Reply::Ok(a),
        Err(e) => Reply::Error(RemoteError {
            message: e.to_string(),
            hint: crate::podresources::hint(&e),
            exit_code: e.exit_code(),
        }),
    }
}

/// No sim answers on `dir`'s control socket. The one rule of every command
/// that reaches a server (README, exit codes): nothing running there is a
/// socket problem (exit 3), as a missing plugin socket is; a `--dir` that is
/// not a directory at all is bad input (exit 2).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn nothing_runs_there(dir: &Path, path: &Path) -> Error {
    let text = format!("no kubelet-sim is running there (no control socket at {})", path.display());
    if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Error::invalid(format!("--dir {}", dir.display()), format!("not a directory: {text}"));
    }
    Error::Connect { path: path.to_path_buf(), reason: text }
}

/// Sends `request` to the sim serving `dir` and returns its answer; a remote
/// failure comes back as `Err(RemoteError)` inside `Ok`.
pub async fn call(
    dir: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<std::result::Result<Answer, RemoteError>> {
    let path = crate::paths::control_socket(dir, CONTROL_NAME);
    let reply: Reply = match control::call(&path, request, timeout).await {
        Ok(r) => r,
        Err(Error::NoSocket { .. } | Error::ConnectionRefused { .. }) => return Err(nothing_runs_there(dir, &path)),
        Err(e) => return Err(e),
    };
    Ok(match reply {
        Reply::Ok(a) => Ok(a),
        Reply::Error(e) => Err(e),
    })
}
