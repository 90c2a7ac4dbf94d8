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

/// KEP-5004, where `DRAExtendedResource` is on (beta and on by default in
/// 1.36, GA in 1.37; alpha and off in 1.34-1.35, where the status is ignored
/// and the device manager handles the resource as any other): the claim of
/// `status.extendedResourceClaimStatus` joins the pod's claims (no name, as
/// `PrepareResources` in pkg/kubelet/cm/dra/manager.go adds it), each
/// container the mappings name uses its mapped requests for the extended
/// resources it asks for (`GetResources`), and the device manager skips a
/// resource mapped for the container (`isDRAExtendedResource` in
/// pkg/kubelet/cm/devicemanager/manager.go), as the admission predicate does.
pub(crate) fn apply_extended_claim(inner: &Inner, spec: &mut PodSpec) {
    let Some(ext) = spec.extended_claim.clone() else { return };
    let v = inner.config.kubelet_version;
    if !plays_dra(v) || !v.at_least(36) || spec.resource_claims.iter().any(|p| p.name.is_empty()) {
        return;
    }
    for c in &mut spec.containers {
        let mapped: Vec<&super::dra_claims::RequestMapping> =
            ext.request_mappings.iter().filter(|m| m.container_name == c.name).collect();
        for m in &mapped {
            if c.limits.get(&m.resource_name).is_some_and(|n| *n > 0) {
                c.claims.push(super::pod::ContainerClaim { name: String::new(), request: m.request_name.clone() });
            }
        }
        c.limits.retain(|r, _| !mapped.iter().any(|m| &m.resource_name == r));
    }
    spec.resource_claims.push(super::pod::PodClaim {
        name: String::new(),
        resource_claim_name: ext.resource_claim_name,
        from_template: false,
    });
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

/// Binds the embedded API server of `--api-objects` (docs/dra.md §6): its
/// record and kubeconfig in the kubelet's root directory (the parent of
/// plugins_registry), served until the sim stops.
pub(crate) async fn start_api(inner: &Arc<Inner>) -> Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(objects) = inner.config.api_objects.clone() else { return Ok(None) };
    let Some(registry) = inner.config.registry_dir.as_deref() else {
        return Err(Error::invalid(
            "--api-objects",
            "serves the API objects DRA drivers read, and DRA drivers register on plugins_registry; \
             hint: add --registry-dir DIR",
        ));
    };
    // Checked here first so that errors name the sim's flag.
    crate::apiserver::objects::load_as(&objects, "--api-objects")?;
    let dir = registry.parent().unwrap_or(registry).to_path_buf();
    let config = crate::apiserver::Config {
        kubeconfig_out: Some(dir.join("kubeconfig")),
        dir,
        objects,
        listen: crate::apiserver::DEFAULT_LISTEN.parse().map_err(|_| Error::invalid("--api-objects", "bad address"))?,
    };
    let server = crate::apiserver::bind(&config).await?;
    tracing::info!(server = server.url(), kubeconfig = %server.kubeconfig().display(), "serving the API objects");
    let _ = inner.api.set(server.handle());
    // The kubelet's DRA plugin manager deletes the node's slices at start:
    // no driver has registered yet.
    wipe(inner, None, "start");
    let stop = inner.shutdown_future();
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = server.run(stop, |_| Ok(())).await {
            tracing::warn!(error = %e, "the embedded API server stopped");
        }
    })))
}

/// The pod's claims from the embedded API server, as the kubelet GETs them
/// (`fetch ResourceClaim`): the claims given with the pod are stored there
/// first (the manifest wins over the objects file, so the driver reads what
/// the sim prepares), then each claim the pod names and the manifest does
/// not carry is read from it. Without `--api-objects`, nothing changes.
pub(crate) async fn resolve_claims(inner: &Inner, spec: &mut PodSpec) -> Result<()> {
    // The documents as given are needed once, to store them: the pod keeps the parsed claims.
    let given: Vec<(String, serde_json::Value)> = spec
        .claim_objects
        .iter_mut()
        .filter_map(|c| {
            let mut o = c.object.take()?;
            // A claim document without a namespace is the pod's, as the sim reads it.
            if o.pointer("/metadata/namespace").is_none_or(serde_json::Value::is_null) {
                o["metadata"]["namespace"] = serde_json::Value::from(c.namespace.clone());
            }
            Some((c.name.clone(), o))
        })
        .collect();
    if let Some(client) = &inner.api_client {
        return read_claims(client, spec).await;
    }
    let Some(api) = inner.api.get() else { return Ok(()) };
    for (name, obj) in given {
        api.put(obj, &format!("pod {}/{}: ResourceClaim {name}", spec.namespace, spec.name))?;
    }
    for pc in &spec.resource_claims {
        let n = &pc.resource_claim_name;
        if spec.claim_objects.iter().any(|o| o.namespace == spec.namespace && &o.name == n) {
            continue;
        }
        if let Some(v) = api.get("resourceclaims", &spec.namespace, n)? {
            let place = format!("the API server's ResourceClaim {}/{n}", spec.namespace);
            let mut obj = super::dra_claims::claim_object(&v, &spec.namespace, &place)?;
            obj.object = None;
            spec.claim_objects.push(obj);
        }
    }
    Ok(())
}

/// `--kubeconfig`: each claim the pod names and its manifest does not carry
/// is read from that API server (GET, never a write: the sim changes
/// nothing in a cluster); a 404 leaves it missing, which fails the
/// preparation with the kubelet's `fetch ResourceClaim` text.
async fn read_claims(client: &crate::apiserver::client::Client, spec: &mut PodSpec) -> Result<()> {
    let ns = spec.namespace.clone();
    for pc in spec.resource_claims.clone() {
        let n = &pc.resource_claim_name;
        if spec.claim_objects.iter().any(|o| o.namespace == ns && &o.name == n) {
            continue;
        }
        let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{n}");
        match client.request("GET", &path, None).await {
            Ok(v) => {
                let place = format!("{}: ResourceClaim {ns}/{n}", client.server());
                let mut obj = super::dra_claims::claim_object(&v, &ns, &place)?;
                obj.object = None;
                spec.claim_objects.push(obj);
            }
            Err(e) if e.code == 404 => {}
            Err(e) => {
                return Err(Error::invalid(
                    "--kubeconfig",
                    format!("fetch ResourceClaim {n} from {}: {e}", client.server()),
                ));
            }
        }
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
            inner.lock().dra.bump_wipe(&inst.driver); // back in time: no wipe
            spawn_health(inner, &inst);
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

/// The kubelet's wait between two attempts at a health stream
/// (`wait.UntilWithContext(..., 5*time.Second)` in
/// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go).
const HEALTH_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Streams the instance's device health while it stays registered, where
/// the release opens a stream (`DraInstance::health`): each message updates
/// the devices' health (status, events); a failed or ended stream is opened
/// again 5 s later, as the kubelet does.
fn spawn_health(inner: &Arc<Inner>, inst: &super::manager::dra::DraInstance) {
    let Some(api) = inst.health else { return };
    let generation = inner.lock().dra.new_stream(&inst.driver, &inst.endpoint);
    let (inner2, inst) = (Arc::clone(inner), inst.clone());
    let stop = inner.shutdown_future();
    let task = tokio::spawn(async move {
        tokio::select! {
            () = stop => {}
            () = health_loop(&inner2, &inst, api, generation) => {}
        }
    });
    inner.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(task);
}

async fn health_loop(
    inner: &Arc<Inner>,
    inst: &super::manager::dra::DraInstance,
    api: crate::dra::HealthApi,
    generation: u64,
) {
    let cfg =
        crate::transport::ClientConfig { connect_timeout: crate::dra::KUBELET_CALL_TIMEOUT, ..Default::default() };
    let event = |error: Option<String>| EventKind::DraHealthStream {
        driver: inst.driver.clone(),
        endpoint: inst.endpoint.clone(),
        service: api.advertised().to_string(),
        error,
    };
    let mut last_error = None;
    let mut events = inner.events.subscribe();
    let gone = |ev: &super::SimEvent| {
        matches!(&ev.kind, EventKind::DraDeregistered { driver, endpoint }
            if *driver == inst.driver && *endpoint == inst.endpoint)
    };
    let current = || inner.lock().dra.stream_current(&inst.driver, &inst.endpoint, generation);
    while current() {
        let error = match crate::dra::client::watch_health(&inst.socket, api, &cfg).await {
            Err(e) => super::registration::go_rpc_error(&e),
            Ok(mut rx) => {
                inner.emit(event(None));
                last_error = None;
                loop {
                    tokio::select! {
                        m = rx.recv() => match m {
                            // A restart or a new registration of the endpoint took over.
                            Some(Ok(_)) if !current() => return,
                            Some(Ok(entries)) => health_message(inner, &inst.driver, entries),
                            Some(Err(e)) => break super::registration::go_rpc_error(&e),
                            None => break "the stream ended".to_string(),
                        },
                        // The kubelet cancels the stream when the instance goes.
                        ev = events.recv() => match ev {
                            Ok(ev) if gone(&ev) => return,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                            _ => {}
                        },
                    }
                }
            }
        };
        // A driver answering Unimplemented every 5 s is reported once, not every time.
        if last_error.as_ref() != Some(&error) {
            inner.emit(event(Some(error.clone())));
            last_error = Some(error);
        }
        tokio::time::sleep(HEALTH_RETRY).await;
    }
}

fn health_message(inner: &Arc<Inner>, driver: &str, entries: Vec<crate::dra::client::HealthEntry>) {
    let devices = entries
        .into_iter()
        .map(|e| super::manager::dra::DeviceHealthView {
            driver: driver.to_string(),
            pool: e.pool,
            device: e.device,
            health: e.health,
            message: e.message,
        })
        .collect();
    let changed = inner.lock().dra.set_health(driver, devices);
    for d in changed {
        inner.emit(EventKind::DraDeviceHealth {
            driver: d.driver,
            pool: d.pool,
            device: d.device,
            health: d.health,
            message: d.message,
        });
    }
}

/// A registration socket was deleted: its instance is deregistered; the
/// driver's last instance gone, its slices are wiped after the delay.
pub(crate) fn socket_removed(inner: &Arc<Inner>, path: &Path) {
    let found = inner.lock().dra.instances().find(|i| i.registration == path).cloned();
    if let Some(inst) = found {
        inner.lock().dra.deregister(&inst.driver, &inst.endpoint);
        let last = inner.lock().dra.plugin(&inst.driver).is_err();
        inner.emit(EventKind::DraDeregistered { driver: inst.driver.clone(), endpoint: inst.endpoint });
        if last {
            schedule_wipe(inner, &inst.driver);
        }
    }
}

/// Deletes the node's ResourceSlices (all, or `driver`'s) in the sim's API
/// server, as `wipeResourceSlices` in
/// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go does (a DeleteCollection
/// by `spec.nodeName` and `spec.driver`). The node is the one Node of the
/// objects file; with none (or several) nothing is wiped, as the kubelet
/// waits for its Node.
fn wipe(inner: &Inner, driver: Option<&str>, reason: &str) {
    let Some(api) = inner.api.get() else { return };
    let Ok(Some(node)) = api.only_node() else { return };
    let selector = match driver {
        Some(d) => format!("spec.nodeName={node},spec.driver={d}"),
        None => format!("spec.nodeName={node}"),
    };
    match api.delete_slices(&selector) {
        Ok(slices) => inner.emit(EventKind::DraSlicesWiped {
            node,
            driver: driver.map(String::from),
            slices,
            reason: reason.to_string(),
        }),
        Err(e) => tracing::warn!(error = %e, "could not delete the ResourceSlices"),
    }
}

/// The driver's last instance went: its slices go after `--dra-wiping-delay`
/// (30 s, the same 1.34-1.37) unless an instance registers first.
fn schedule_wipe(inner: &Arc<Inner>, driver: &str) {
    if inner.api.get().is_none() {
        return;
    }
    let generation = inner.lock().dra.bump_wipe(driver);
    let (inner2, driver) = (Arc::clone(inner), driver.to_string());
    let stop = inner.shutdown_future();
    let delay = inner.config.dra_wiping_delay;
    let task = tokio::spawn(async move {
        tokio::select! {
            () = stop => {}
            () = tokio::time::sleep(delay) => {
                if inner2.lock().dra.wipe_due(&driver, generation) {
                    wipe(&inner2, Some(&driver), "deregistered");
                }
            }
        }
    });
    inner.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(task);
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
        forget_claims(inner, &spec.namespace, &last);
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
    // A new DRA plugin manager: the node's slices go, as at start.
    wipe(inner, None, "restart");
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
