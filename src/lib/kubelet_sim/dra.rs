//! The shell of the sim's DRA manager (docs/dra.md §6): registration of
//! `DRAPlugin` sockets found by the plugins_registry watcher, the
//! `NodePrepareResources`/`NodeUnprepareResources` calls an admission or a
//! deletion asks for, and the `dra_manager_state` checkpoint on disk. The
//! state and the kubelet's rules are in `manager/dra.rs`; this module makes
//! the gRPC calls and writes the file.
//!
//! The checkpoint sits in the kubelet's root directory, the parent of
//! plugins_registry (`<root>/dra_manager_state`). The sim writes it only
//! when it created it or wrote it last (recorded in
//! `<dir>/.dpctl/kubelet-sim-dra-state.json`), or with `--adopt-checkpoint`;
//! a file another program wrote is read and restored, never changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::Inner;
use super::events::EventKind;
use super::manager::dra::{Batch, ClaimAnswer, DraState, PreparedDevice, plays_dra};
use super::outcome::{DraCall, DraOutcome};
use super::pod::PodSpec;
use crate::dra::KUBELET_CALL_TIMEOUT;
use crate::error::{Error, Result};
use crate::proto::pluginregistration as reg;
use crate::proto::pluginregistration::registration_client::RegistrationClient;

/// The record that the sim wrote `dra_manager_state`, inside `<dir>/.dpctl/`.
pub const MARKER_NAME: &str = "kubelet-sim-dra-state.json";

/// True when the sim plays a DRA manager: a release with DRA on by default
/// (1.34+) and a plugins_registry to find drivers in.
pub(crate) fn enabled(inner: &Inner) -> bool {
    plays_dra(inner.config.kubelet_version) && inner.config.registry_dir.is_some()
}

/// `<root>/dra_manager_state`, root being the parent of plugins_registry.
pub(crate) fn state_path(registry_dir: &Path) -> PathBuf {
    registry_dir.parent().unwrap_or(registry_dir).join(crate::dra::state::FILE_NAME)
}

/// Refuses a pod with claims the played release cannot prepare.
pub(crate) fn check_pod(inner: &Inner, spec: &PodSpec) -> Result<()> {
    if spec.resource_claims.is_empty() {
        return Ok(());
    }
    let v = inner.config.kubelet_version;
    if !plays_dra(v) {
        return Err(Error::invalid(
            format!("pod {}/{} spec.resourceClaims", spec.namespace, spec.name),
            format!(
                "kubelet-sim plays DRA from 1.34 (DynamicResourceAllocation is off by default in {v}); \
                 hint: --kubelet-version 1.34 or later"
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
/// ValidatePlugin, RegisterPlugin, NotifyRegistrationStatus (5 s), with the
/// kubelet's texts.
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
    let rejected = |message: String| EventKind::DraRegistrationRejected {
        driver: info.name.clone(),
        socket: path.display().to_string(),
        message,
    };
    let validated = inner.lock().dra.validate(&info.name, &endpoint, &info.supported_versions);
    if let Err(e) = validated {
        let msg = format!("RegisterPlugin error -- plugin validation failed with err: {e}");
        inner.emit(rejected(msg.clone()));
        let _ = notify(false, msg).await;
        return DraAttempt::Retry;
    }
    let socket = crate::paths::translate(&inner.config.path_map, Path::new(&endpoint));
    let added = inner.lock().dra.register(&info.name, &endpoint, socket, path.to_path_buf(), &info.supported_versions);
    let retried = inner.config.kubelet_version.retries_refused_registry_plugins();
    match added {
        Ok(inst) => {
            if !notify(true, String::new()).await && retried {
                // 1.36+: an undelivered success takes the plugin out again.
                inner.lock().dra.deregister(&inst.driver, &inst.endpoint);
                return DraAttempt::Retry;
            }
            inner.emit(EventKind::DraRegistered {
                driver: inst.driver,
                endpoint: inst.endpoint,
                service: inst.service.advertised().to_string(),
                supported_versions: info.supported_versions.clone(),
                registration: path.display().to_string(),
            });
            DraAttempt::Done
        }
        Err(e) => {
            let msg = format!("RegisterPlugin error -- plugin registration failed with err: {e}");
            inner.emit(rejected(msg.clone()));
            let _ = notify(false, msg).await;
            if retried { DraAttempt::Retry } else { DraAttempt::Done }
        }
    }
}

/// A registration socket was deleted: its instance is deregistered.
pub(crate) fn socket_removed(inner: &Arc<Inner>, path: &Path) {
    let found = inner.lock().dra.instances().find(|i| i.registration == path).cloned();
    if let Some(inst) = found {
        inner.lock().dra.deregister(&inst.driver, &inst.endpoint);
        inner.emit(EventKind::DraDeregistered { driver: inst.driver, endpoint: inst.endpoint });
    }
}

/// Calls NodePrepareResources or NodeUnprepareResources for `batch` on the
/// driver's newest instance, within the kubelet's 45 s; the error is the
/// kubelet's (`DRA driver ... is not registered` or the gRPC status as Go prints it).
async fn call(inner: &Arc<Inner>, batch: &Batch, prepare: bool) -> (Option<DraCall>, Result<Vec<ClaimAnswer>, String>) {
    let method = if prepare { "NodePrepareResources" } else { "NodeUnprepareResources" };
    let inst = match inner.lock().dra.plugin(&batch.driver) {
        Ok(i) => i,
        Err(e) => return (None, Err(e)),
    };
    let cfg = crate::transport::ClientConfig {
        connect_timeout: KUBELET_CALL_TIMEOUT,
        call_timeout: KUBELET_CALL_TIMEOUT,
        ..Default::default()
    };
    let started = Instant::now();
    let report = tokio::time::timeout(KUBELET_CALL_TIMEOUT, async {
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
    let uid = spec.uid.clone().unwrap_or_default();
    let mut out = DraOutcome::default();
    let begun =
        inner.lock().dra.begin_prepare((&spec.namespace, &spec.name, &uid), &spec.resource_claims, &spec.claim_objects);
    write_state(inner);
    let result = match begun {
        Err(e) => Err(e),
        Ok(batches) => run_prepare(inner, &batches, &mut out).await,
    };
    match result {
        Ok(()) => {
            inner.lock().dra.finish_prepare(&spec.namespace, &spec.resource_claims);
            write_state(inner);
            let m = inner.lock();
            for c in &spec.containers {
                let ids = m.dra.container_cdi(&spec.namespace, &spec.resource_claims, &c.claims);
                if !c.claims.is_empty() {
                    out.cdi_devices.insert(c.name.clone(), ids);
                }
            }
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
        let applied = inner.lock().dra.prepared(b, answers);
        applied?;
    }
    Ok(())
}

/// `UnprepareResources` for a deleted pod: `None` when it has no claims
/// and the cache records none for it.
pub(crate) async fn unprepare_pod(inner: &Arc<Inner>, spec: &PodSpec, uid: &str) -> Option<DraOutcome> {
    let (batches, last) = inner.lock().dra.begin_unprepare(&spec.namespace, uid, &spec.resource_claims);
    if spec.resource_claims.is_empty() && batches.is_empty() {
        return None;
    }
    let mut out = DraOutcome::default();
    let mut failed = None;
    for b in &batches {
        let (record, answers) = call(inner, b, false).await;
        out.calls.extend(record);
        if let Err(e) = answers.and_then(|a| DraState::unprepared(b, a)) {
            failed = Some(format!("unprepare dynamic resources: {e}"));
            break;
        }
    }
    if failed.is_none() {
        inner.lock().dra.finish_unprepare(&spec.namespace, &last);
        out.unprepared = last.iter().map(|n| format!("{}/{n}", spec.namespace)).collect();
    }
    write_state(inner);
    out.error = failed;
    inner.emit(EventKind::DraUnprepared {
        pod: spec.name.clone(),
        namespace: spec.namespace.clone(),
        calls: out.calls.clone(),
        error: out.error.clone(),
    });
    Some(out)
}

/// The sim's record of the last `dra_manager_state` it wrote.
fn marker(inner: &Inner) -> PathBuf {
    inner.paths.dir.join(crate::paths::CONTROL_DIR_NAME).join(MARKER_NAME)
}

fn fnv(bytes: &[u8]) -> String {
    let h =
        bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{h:016x}")
}

/// Reads `dra_manager_state` at start (or a restart) into the DRA manager.
/// A corrupt file stops the start, as it stops the kubelet. Returns whether
/// the sim may write the file, and the entries restored.
pub(crate) fn load(inner: &Inner) -> Result<(bool, usize)> {
    let Some(path) = inner.config.registry_dir.as_deref().map(state_path) else { return Ok((false, 0)) };
    let text = match std::fs::symlink_metadata(&path) {
        Err(_) => return Ok((true, 0)),
        Ok(m) if m.file_type().is_symlink() || !m.is_file() => {
            return Err(Error::invalid(
                path.display().to_string(),
                "not a regular file: the DRA checkpoint must be one (kubelet-sim never follows or replaces a link)",
            ));
        }
        Ok(_) => {
            crate::input::read_text_within(&path, &path.display().to_string(), crate::checkpoint::MAX_CHECKPOINT_BYTES)?
        }
    };
    let report = crate::dra::state::parse(&path, &text)?;
    let restored = inner.lock().dra.restore(&report).map_err(|e| {
        Error::invalid(
            path.display().to_string(),
            format!(
                "{e}; the kubelet's DRA manager (and the kubelet) would not start. hint: drain the node and remove the file"
            ),
        )
    })?;
    let ours = std::fs::read_to_string(marker(inner)).is_ok_and(|m| m.trim() == fnv(text.as_bytes()));
    Ok((ours || inner.config.adopt_checkpoint, restored))
}

/// Writes `dra_manager_state` (fsynced) when the sim may.
pub(crate) fn write_state(inner: &Inner) {
    if !enabled(inner) || !inner.dra_writes.load(std::sync::atomic::Ordering::Relaxed) || !inner.config.checkpoint {
        return;
    }
    let Some(path) = inner.config.registry_dir.as_deref().map(state_path) else { return };
    let bytes = inner.lock().dra.checkpoint_bytes();
    let temp = crate::checkpoint::Temp { tag: Some(&inner.tmp_tag), durable: true };
    let written = crate::checkpoint::write_with(
        &marker(inner),
        fnv(&bytes).as_bytes(),
        &crate::checkpoint::Temp { tag: Some(&inner.tmp_tag), durable: false },
    )
    .and_then(|()| crate::checkpoint::write_with(&path, &bytes, &temp));
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not write the DRA checkpoint");
    }
}

/// A kubelet restart: the checkpoint is written, the plugin manager starts
/// empty (drivers register again from plugins_registry) and the claim cache
/// is read back from the file, no claim prepared.
pub(crate) fn restart(inner: &Arc<Inner>) -> Result<usize> {
    if !enabled(inner) {
        return Ok(0);
    }
    write_state(inner);
    inner.lock().dra.drop_instances();
    let (writes, restored) = load(inner)?;
    inner.dra_writes.store(writes, std::sync::atomic::Ordering::Relaxed);
    inner.lock().dra.unprepare_all_in_memory();
    Ok(restored)
}

/// After a restart: each admitted pod with claims is synced again, which
/// prepares its restored claims again once their drivers are back, as the
/// kubelet's SyncPod does for running pods. Waits for the drivers until `deadline`.
pub(crate) async fn prepare_again(inner: &Arc<Inner>, deadline: tokio::time::Instant) -> Vec<DraOutcome> {
    let pods: Vec<PodSpec> =
        inner.lock().pods().into_iter().map(|p| p.spec).filter(|s| !s.resource_claims.is_empty()).collect();
    let drivers: std::collections::BTreeSet<String> = pods
        .iter()
        .flat_map(|p| p.claim_objects.iter().flat_map(|c| c.results.iter().map(|r| r.driver.clone())))
        .collect();
    let mut rx = inner.events.subscribe();
    loop {
        let missing = drivers.iter().any(|d| inner.lock().dra.plugin(d).is_err());
        if !missing {
            break;
        }
        tokio::select! {
            r = rx.recv() => if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r { break },
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    let mut out = Vec::new();
    for spec in pods {
        out.extend(prepare_pod(inner, &spec).await);
    }
    out
}
