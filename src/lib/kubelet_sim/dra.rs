//! The shell of the sim's DRA manager (docs/dra.md §6): the
//! `DRAPlugin` registrations the plugins_registry watcher hands over, the
//! health streams, the `NodePrepareResources`/`NodeUnprepareResources`
//! calls an admission or a deletion asks for, and the effects of the DRA
//! manager's transitions (`manager/dra/events.rs`: every decision is
//! there, tested without sockets), performed by `dra_effects.rs` with the
//! health streams. The API server side is `dra_api.rs`, the checkpoint file
//! `dra_file.rs`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::dra_effects::perform;
use super::events::EventKind;
use super::manager::{Batch, ClaimAnswer, DraRegistration, PreparedDevice, Registered, Unpreparer};
use super::outcome::{DraCall, DraOutcome};
use super::pod::PodSpec;
use super::shell::Inner;
use crate::error::{Error, Result};
use crate::proto::pluginregistration as reg;
use crate::proto::pluginregistration::registration_client::RegistrationClient;

pub(crate) use super::dra_file::enabled;

/// Refuses a pod with claims the played release cannot prepare.
pub(crate) fn check_pod(inner: &Inner, spec: &PodSpec) -> Result<()> {
    if spec.resource_claims.is_empty() {
        return Ok(());
    }
    let v = inner.config.kubelet_version;
    if !v.has_dra() {
        return Err(Error::invalid(
            format!("pod {}/{} spec.resourceClaims", spec.namespace, spec.name),
            format!(
                "kubelet-sim plays DRA from {first} (DynamicResourceAllocation is off by default in {v}); \
                 hint: --kubelet-version {first} or later",
                first = crate::kubelet_version::KubeletVersion::FIRST_WITH_DRA
            ),
        ));
    }
    if inner.config.registry_dir.is_none() {
        return Err(Error::invalid(
            format!("pod {}/{} spec.resourceClaims", spec.namespace, spec.name),
            "this sim plays no DRA manager: DRA drivers register on plugins_registry; \
             hint: start the sim with --registry-dir DIR (a kubelet's is /var/lib/kubelet/plugins_registry)",
        ));
    }
    Ok(())
}

/// How one DRA registration attempt ended, in the plugin manager's terms.
pub(crate) enum DraAttempt {
    /// Registered (or refused after entering the actual state, not retried).
    Done,
    /// Retried with the watcher's backoff.
    Retry,
}

/// The plugin watcher's steps for a `DRAPlugin` socket after GetInfo
/// (pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go):
/// ValidatePlugin and RegisterPlugin (`Manager::dra_register`), then
/// NotifyRegistrationStatus (5 s), whose delivery the manager judges
/// (`Manager::dra_notified`).
pub(crate) async fn register(
    inner: &Arc<Inner>,
    path: &Path,
    info: &reg::PluginInfo,
    client: &RegistrationClient<crate::transport::WireChannel>,
) -> DraAttempt {
    let notify = |registered: bool, error: String| {
        let mut c = client.clone();
        async move {
            let call = c.notify_registration_status(reg::RegistrationStatus { plugin_registered: registered, error });
            matches!(tokio::time::timeout(std::time::Duration::from_secs(5), call).await, Ok(Ok(_)))
        }
    };
    let endpoint = if info.endpoint.is_empty() { path.display().to_string() } else { info.endpoint.clone() };
    let r = DraRegistration {
        driver: info.name.clone(),
        socket: crate::paths::translate(&inner.config.path_map, Path::new(&endpoint)),
        endpoint,
        registration: path.to_path_buf(),
        supported: info.supported_versions.clone(),
    };
    let registered = inner.lock().dra_register(&r);
    match registered {
        Registered::Refused { message, retry, effects } => {
            perform(inner, effects);
            let _ = notify(false, message).await;
            if retry { DraAttempt::Retry } else { DraAttempt::Done }
        }
        Registered::Added(inst) => {
            let delivered = notify(true, String::new()).await;
            let (kept, effects) = inner.lock().dra_notified(&r, &inst, delivered);
            perform(inner, effects);
            if kept { DraAttempt::Done } else { DraAttempt::Retry }
        }
    }
}

/// A registration socket was deleted (the watcher's event).
pub(crate) fn socket_removed(inner: &Arc<Inner>, path: &Path) {
    let effects = inner.lock().dra_socket_removed(path);
    perform(inner, effects);
}

/// Calls NodePrepareResources or NodeUnprepareResources for `batch` on the
/// driver's newest instance, within the kubelet's 45 s; the error is the
/// kubelet's (`DRA driver ... is not registered` or the gRPC status as Go prints it).
async fn call(inner: &Arc<Inner>, batch: &Batch, prepare: bool) -> (Option<DraCall>, Result<Vec<ClaimAnswer>, String>) {
    let method = if prepare { "NodePrepareResources" } else { "NodeUnprepareResources" };
    let inst = match inner.lock().dra_plugin(&batch.driver) {
        Ok(i) => i,
        Err(e) => return (None, Err(e)),
    };
    let deadline = inner.config.dra_call_timeout;
    let cfg =
        crate::transport::ClientConfig { connect_timeout: deadline, call_timeout: deadline, ..Default::default() };
    let started = Instant::now();
    let report = tokio::time::timeout(deadline, async {
        if prepare {
            crate::dra::client::prepare(&inst.socket, inst.service, &batch.claims, &cfg, &[]).await
        } else {
            crate::dra::client::unprepare(&inst.socket, inst.service, &batch.claims, &cfg).await
        }
    })
    .await;
    let record = DraCall {
        driver: batch.driver.clone(),
        endpoint: inst.endpoint.clone(),
        rpc: format!("{}/{method}", inst.service.advertised()),
        claims: batch.claims.iter().map(crate::dra::claims::ClaimRef::key).collect(),
        took_ms: crate::text::millis(started.elapsed()),
    };
    let answers = match report {
        Err(_) => Err(format!("{method}: rpc error: code = DeadlineExceeded desc = context deadline exceeded")),
        Ok(Err(e)) => Err(format!("{method}: {}", super::registration::go_rpc_error(&e))),
        // A claim the driver left out is listed in the report, but the
        // kubelet only sees the answer map: it counts it as skipped.
        Ok(Ok(r)) => Ok(r
            .claims
            .into_iter()
            // The report lists claims left out of the answer too; the kubelet counts only those answered.
            .filter(|c| !c.problems.iter().any(|p| p == crate::dra::client::NOT_ANSWERED))
            .map(|c| ClaimAnswer {
                uid: c.uid,
                error: c.error,
                devices: c
                    .devices
                    .into_iter()
                    .map(|d| PreparedDevice {
                        pool: d.pool,
                        device: d.device,
                        share_id: d.share_id,
                        request_names: d.request_names,
                        cdi_device_ids: d.cdi_device_ids.into_iter().map(|x| x.id).collect(),
                    })
                    .collect(),
            })
            .collect()),
    };
    (Some(record), answers)
}

/// `PrepareResources` for an admitted pod: `None` when it has no claims.
pub(crate) async fn prepare_pod(inner: &Arc<Inner>, spec: &PodSpec) -> Option<DraOutcome> {
    if spec.resource_claims.is_empty() {
        return None;
    }
    let mut out = DraOutcome::default();
    let (begun, effects) = inner.lock().dra_begin_prepare(spec);
    perform(inner, effects);
    let result = match begun {
        Err(e) => Err(e),
        Ok(batches) => run_prepare(inner, &batches, &mut out).await,
    };
    match result {
        Ok(()) => {
            let (cdi, effects) = inner.lock().dra_finish_prepare(spec);
            perform(inner, effects);
            out.cdi_devices = cdi;
        }
        Err(e) => out.error = Some(format!("prepare dynamic resources: {e}")),
    }
    inner.emit(EventKind::DraPrepared {
        pod: spec.name.clone(),
        namespace: spec.namespace.clone(),
        calls: out.calls.clone(),
        error: out.error.clone(),
    });
    Some(out)
}

/// Calls each batch in turn; the first error ends the preparation.
async fn run_prepare(inner: &Arc<Inner>, batches: &[Batch], out: &mut DraOutcome) -> std::result::Result<(), String> {
    for b in batches {
        let (record, answers) = call(inner, b, true).await;
        out.calls.extend(record);
        let answers = answers?;
        let applied = inner.lock().dra_prepared(b, answers);
        applied?;
    }
    Ok(())
}

/// `UnprepareResources` for pod `uid` that is gone (`who`: deleted, or
/// known only from the cache): `None` when there is nothing to unprepare
/// and the pod names no claim.
pub(crate) async fn unprepare_pod(
    inner: &Arc<Inner>,
    spec: &PodSpec,
    uid: &str,
    who: Unpreparer<'_>,
) -> Option<DraOutcome> {
    let (batches, last) = inner.lock().dra_begin_unprepare(&spec.namespace, uid, who);
    if spec.resource_claims.is_empty() && batches.is_empty() && last.is_empty() {
        return None;
    }
    let mut out = DraOutcome::default();
    for b in &batches {
        let (record, answers) = call(inner, b, false).await;
        out.calls.extend(record);
        let judged = answers.and_then(|a| inner.lock().dra_unprepared(b, a));
        if let Err(e) = judged {
            out.error = Some(format!("unprepare dynamic resources: {e}"));
            break;
        }
    }
    if out.error.is_none() {
        let effects = inner.lock().dra_finish_unprepare(&spec.namespace, &last);
        perform(inner, effects);
        out.unprepared = last.iter().map(|n| format!("{}/{n}", spec.namespace)).collect();
        forget_claims(inner, &spec.namespace, &last);
    }
    inner.emit(EventKind::DraUnprepared {
        pod: spec.name.clone(),
        namespace: spec.namespace.clone(),
        calls: out.calls.clone(),
        error: out.error.clone(),
    });
    Some(out)
}

/// The claims the sim stored in its API server with a pod and no pod uses
/// any more are deleted, as the resource claim controller deletes the claims
/// it generated for a pod when the pod goes (a long run stays flat); claims
/// from `--api-objects` stay.
fn forget_claims(inner: &Inner, namespace: &str, names: &[String]) {
    let Some(api) = inner.api.get() else { return };
    for n in names {
        if let Err(e) = api.delete_created("resourceclaims", namespace, n) {
            tracing::warn!(claim = %format!("{namespace}/{n}"), error = %e, "deleting a pod's claim from the API");
        }
    }
}

/// The DRA manager at the sim's start: the embedded API server of
/// `--api-objects` (whose node's slices go: no driver has registered yet),
/// and `dra_manager_state` read, or created as the kubelet's `GetOrCreate` does.
pub(crate) async fn start(inner: &Arc<Inner>) -> Result<Option<tokio::task::JoinHandle<()>>> {
    let api_task = super::dra_api::start_api(inner).await?;
    if api_task.is_some() {
        let effects = inner.lock().dra_started();
        perform(inner, effects);
    }
    if enabled(inner) && inner.config.checkpoint {
        let (writes, _) = super::dra_file::load(inner).inspect_err(|_| {
            inner.shutdown.send_replace(true);
        })?;
        inner.dra_writes.store(writes, std::sync::atomic::Ordering::Relaxed);
        super::dra_file::write_state(inner);
    }
    Ok(api_task)
}

/// A kubelet restart (`Manager::dra_restart`, then the file read back,
/// `Manager::dra_restore`): returns the claims restored. Nothing is
/// prepared: a running pod keeps its sandbox.
pub(crate) fn restart(inner: &Arc<Inner>) -> Result<usize> {
    if !enabled(inner) {
        return Ok(0);
    }
    let effects = inner.lock().dra_restart();
    perform(inner, effects);
    let (writes, restored) = super::dra_file::load(inner)?;
    inner.dra_writes.store(writes, std::sync::atomic::Ordering::Relaxed);
    Ok(restored)
}
