//! The DRA smoke test's verdicts, as pure functions over what the runner
//! saw (slices, the sim's outcomes and status, call reports, the CDI specs
//! read): no runtime, socket, process or file system here. Where `dra
//! check` has a verdict for the same rule, the runner uses that one.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{NAMESPACE, StepId};
use crate::check::{Case, CheckResult, Outcome};
use crate::dra::cdi::{CdiCheck, IdVerdict};
use crate::kubelet_sim::{AdmitOutcome, PreparedDevice};

/// A result for `step`.
pub fn result(step: StepId, outcome: Outcome, evidence: impl Into<String>, took: Duration) -> CheckResult {
    CheckResult::of(step.info(), outcome, evidence, took)
}

/// Pass or fail.
pub fn verdict(step: StepId, ok: bool, evidence: impl Into<String>, took: Duration) -> CheckResult {
    result(step, if ok { Outcome::Pass } else { Outcome::Fail }, evidence, took)
}

/// A step that did not run, and why.
pub fn not_run(step: StepId, why: &str) -> CheckResult {
    result(step, Outcome::Skip, format!("not run: {why}"), Duration::ZERO)
}

/// One device a claim can be allocated: `(pool, device)`.
pub type DeviceRef = (String, String);

/// The driver's devices for this node in `slices`: `(pool, device)` in
/// slice order, and what is wrong with the slices (empty: valid).
pub fn slice_devices(slices: &[Value], driver: &str, node: &str) -> (Vec<DeviceRef>, Vec<String>) {
    let mut devices = Vec::new();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for s in slices.iter().filter(|s| s.pointer("/spec/driver").and_then(Value::as_str) == Some(driver)) {
        let name = s.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("(unnamed)");
        let node_of = s.pointer("/spec/nodeName").and_then(Value::as_str);
        if node_of != Some(node) {
            problems.push(format!("slice {name}: spec.nodeName {node_of:?}, not this node {node:?}"));
            continue;
        }
        let Some(pool) = s.pointer("/spec/pool/name").and_then(Value::as_str).filter(|p| !p.is_empty()) else {
            problems.push(format!("slice {name}: no spec.pool.name"));
            continue;
        };
        for d in s.pointer("/spec/devices").and_then(Value::as_array).into_iter().flatten() {
            let dev = d.get("name").and_then(Value::as_str).unwrap_or_default();
            if dev.len() > 63 || dev.contains('.') || !crate::validate::is_dns1123_subdomain(dev) {
                problems.push(format!("slice {name}: device name {dev:?} is not a DNS label"));
            } else if !seen.insert((pool.to_string(), dev.to_string())) {
                problems.push(format!("slice {name}: device {pool}/{dev} published twice"));
            } else {
                devices.push((pool.to_string(), dev.to_string()));
            }
        }
    }
    (devices, problems)
}

/// The published-slices verdict: skipped when the driver published none
/// (claims then name made-up devices).
pub fn published_slices(
    slices: &[Value],
    driver: &str,
    node: &str,
    waited: Duration,
    made_up: &[DeviceRef],
) -> CheckResult {
    let ours = slices.iter().filter(|s| s.pointer("/spec/driver").and_then(Value::as_str) == Some(driver)).count();
    if ours == 0 {
        let shown: Vec<String> = made_up.iter().map(|(p, d)| format!("{p}/{d}")).collect();
        return result(
            StepId::PublishedSlices,
            Outcome::Skip,
            format!(
                "the driver published no ResourceSlice within {} ms; the claims name made-up devices ({})",
                waited.as_millis(),
                shown.join(", ")
            ),
            waited,
        );
    }
    let (devices, problems) = slice_devices(slices, driver, node);
    if !problems.is_empty() {
        return verdict(StepId::PublishedSlices, false, problems.join("; "), waited);
    }
    if devices.is_empty() {
        return verdict(
            StepId::PublishedSlices,
            false,
            format!("{} publish no device", crate::text::count(ours, "slice", "slices")),
            waited,
        );
    }
    let shown: Vec<String> = devices.iter().map(|(p, d)| format!("{p}/{d}")).collect();
    verdict(
        StepId::PublishedSlices,
        true,
        format!("{}, devices {}", crate::text::count(ours, "slice", "slices"), shown.join(", ")),
        waited,
    )
}

/// Devices to allocate the `n`th claim (0-based): the published ones in
/// turn, so claims get distinct devices while there are enough.
pub fn device_for(devices: &[DeviceRef], n: usize) -> DeviceRef {
    devices.get(n % devices.len().max(1)).cloned().unwrap_or_else(|| made_up(1).remove(0))
}

/// Devices for a driver that publishes none.
pub fn made_up(count: usize) -> Vec<DeviceRef> {
    (0..count).map(|i| ("dpctl-smoke-pool".to_string(), format!("dev-{i}"))).collect()
}

/// The test pod and claim names of the `n`th pod.
pub fn pod_names(n: usize) -> (String, String, String) {
    (format!("smoke-pod-{n}"), format!("smoke-claim-{n}"), format!("00000000-0000-4000-8000-{n:012}"))
}

/// A ResourceClaim as the scheduler leaves it: one request `gpu` (with a
/// subrequest `large` when `subrequest`), allocated to `device` of
/// `driver`, reserved for the pod.
pub fn claim_object(name: &str, driver: &str, device: &DeviceRef, pod: (&str, &str), subrequest: bool) -> Value {
    let request = if subrequest {
        json!({"name": "gpu", "firstAvailable": [{"name": "large", "deviceClassName": "dpctl-smoke"}]})
    } else {
        json!({"name": "gpu", "exactly": {"deviceClassName": "dpctl-smoke"}})
    };
    let allocated = if subrequest { "gpu/large" } else { "gpu" };
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [request]}},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": allocated, "driver": driver, "pool": device.0, "device": device.1}
            ]}},
            "reservedFor": [{"resource": "pods", "name": pod.0, "uid": pod.1}]
        }
    })
}

/// The pod manifest the sim admits: the pod (one container `main` naming
/// the claim's request `gpu`) and its claim as stored.
pub fn pod_manifest(pod: (&str, &str), claim: &Value) -> String {
    let claim_name = claim.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let pod_doc = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.0, "namespace": NAMESPACE, "uid": pod.1},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu", "request": "gpu"}]}}]
        }
    });
    json!({"apiVersion": "v1", "kind": "List", "items": [pod_doc, claim]}).to_string()
}

/// A pod of the cluster engine, with one container `main` using the claim
/// `gpu`: from a ResourceClaimTemplate (`template`) or a claim by name.
pub fn cluster_pod(name: &str, claim: (&str, bool)) -> Value {
    let source = if claim.1 {
        json!({"name": "gpu", "resourceClaimTemplateName": claim.0})
    } else {
        json!({"name": "gpu", "resourceClaimName": claim.0})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [source],
            "containers": [{
                "name": "main",
                "image": crate::smoke::node::BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/sleep", "2147483647"],
                "resources": {"claims": [{"name": "gpu"}]}
            }]
        }
    })
}

/// The claim spec asking for `count` devices of the smoke's DeviceClass.
pub fn cluster_claim_spec(count: usize) -> Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": NAMESPACE, "allocationMode": "ExactCount", "count": count
    }}]}})
}

/// The DeviceClass selecting the driver's devices.
pub fn cluster_device_class(driver: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": NAMESPACE},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == {driver:?}")}}]}
    })
}

/// What a pod's conditions say, for evidence: `Type=Status (reason: message)`.
pub fn pod_conditions(pod: &Value) -> String {
    let conds = pod.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let text: Vec<String> = conds
        .iter()
        .filter(|c| c["status"] != "True")
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            format!("{}={} ({}: {})", s("type"), s("status"), s("reason"), s("message"))
        })
        .collect();
    if text.is_empty() { "no failing condition".into() } else { text.join("; ") }
}

/// A cluster pod's verdict: Running with its claim allocated `count`
/// distinct devices of `driver`; else what the pod, the claim and the
/// events (the kubelet's `FailedPrepareDynamicResources`) said.
pub fn cluster_running(
    step: StepId,
    pod: &Value,
    claim: Option<&Value>,
    count: usize,
    driver: &str,
    events: &[String],
    took: Duration,
) -> CheckResult {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("unknown");
    let results = claim
        .and_then(|c| c.pointer("/status/allocation/devices/results"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let devices: BTreeSet<String> = results
        .iter()
        .filter(|r| r["driver"] == driver)
        .map(|r| format!("{}/{}", r["pool"].as_str().unwrap_or_default(), r["device"].as_str().unwrap_or_default()))
        .collect();
    let shown = devices.iter().cloned().collect::<Vec<_>>().join(", ");
    if phase == "Running" && devices.len() == count {
        let ev = format!(
            "pod Running {} ms after it was created; claim allocated {shown} by the scheduler, prepared by the kubelet",
            took.as_millis()
        );
        return verdict(step, true, ev, took);
    }
    let mut ev = format!("pod {phase}, not Running within {} ms: {}", took.as_millis(), pod_conditions(pod));
    if devices.len() != count && phase == "Running" {
        ev = format!("claim allocated {} device(s) of {driver} ({shown}), {count} asked for", devices.len());
    }
    if !events.is_empty() {
        ev.push_str(&format!("; events: {}", events.join(" | ")));
    }
    verdict(step, false, ev, took)
}

/// The unsatisfiable-claim verdict: the pod stays unscheduled with the
/// scheduler's `cannot allocate all claims`.
pub fn cluster_unsatisfiable(pod: &Value, asked: usize, took: Duration) -> CheckResult {
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str);
    let conds = pod.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let scheduled = conds.iter().find(|c| c["type"] == "PodScheduled");
    let message = scheduled.and_then(|c| c["message"].as_str()).unwrap_or_default();
    if let Some(n) = node {
        let ev = format!("a claim for {asked} devices was scheduled onto {n}: more devices than the driver publishes");
        return verdict(StepId::UnsatisfiableClaim, false, ev, took);
    }
    let refused = scheduled.is_some_and(|c| c["status"] == "False") && message.contains("cannot allocate all claims");
    let ev = if refused {
        format!("a claim for {asked} devices stays Pending: {message}")
    } else {
        format!("no scheduler verdict within {} ms: {}", took.as_millis(), pod_conditions(pod))
    };
    verdict(StepId::UnsatisfiableClaim, refused, ev, took)
}

/// The admission verdict: the kubelet's words when it failed the pod.
pub fn admission(o: &AdmitOutcome) -> CheckResult {
    let took = Duration::from_millis(o.took_ms);
    let Some(dra) = &o.dra else {
        return verdict(StepId::Admission, false, "the pod's claims were not prepared (no DRA outcome)", took);
    };
    if let Some(e) = &dra.error {
        return verdict(StepId::Admission, false, format!("pod {}: {e}", o.pod), took);
    }
    if !o.admitted {
        let why = o.message.clone().or_else(|| o.reason.clone()).unwrap_or_default();
        return verdict(StepId::Admission, false, format!("pod {} not admitted: {why}", o.pod), took);
    }
    let calls: Vec<String> = dra
        .calls
        .iter()
        .map(|c| format!("{} for {} in {} ms", c.rpc, crate::text::count(c.claims.len(), "claim", "claims"), c.took_ms))
        .collect();
    let ids: Vec<String> = dra.cdi_devices.values().flatten().cloned().collect();
    verdict(
        StepId::Admission,
        true,
        format!("pod {} admitted: {}; container main gets CDI [{}]", o.pod, calls.join(", "), ids.join(", ")),
        took,
    )
}

/// The admission verdict held against the driver's published pools: a
/// claim prepared with a device no current ResourceSlice publishes fails
/// it (`crate::dra::published`). Unchanged when the driver published no
/// slice (the claims then name made-up devices) or admission failed.
pub fn admission_published(
    row: CheckResult,
    pools: &crate::dra::published::Pools,
    driver: &str,
    prepared: &[PreparedDevice],
) -> CheckResult {
    if row.outcome != Outcome::Pass || pools.is_empty() {
        return row;
    }
    let problems = pools.problems(driver, prepared.iter().map(|d| (d.pool.as_str(), d.device.as_str())));
    if problems.is_empty() {
        return row;
    }
    verdict(
        StepId::Admission,
        false,
        format!("{}; {}", row.evidence, problems.join("; ")),
        Duration::from_millis(row.duration_ms),
    )
}

/// One device node a CDI spec names for an ID, and whether it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNode {
    /// The CDI ID.
    pub id: String,
    /// The node's path.
    pub path: String,
    /// It exists on the host.
    pub exists: bool,
}

/// The CDI verdict on the IDs a container gets: each parses and resolves
/// (`checks`, from `dra::cdi::judge`), and the device nodes their specs
/// name exist (`nodes`).
pub fn cdi(step: StepId, checks: &[CdiCheck], nodes: &[DeviceNode], dir: &str, specs: usize) -> CheckResult {
    if checks.is_empty() {
        return verdict(step, false, "the container gets no CDI ID: the runtime gives it no device", Duration::ZERO);
    }
    let mut problems: Vec<String> = checks
        .iter()
        .filter_map(|c| match &c.verdict {
            IdVerdict::Resolved | IdVerdict::Unchecked => None,
            IdVerdict::Unresolved => {
                Some(format!("{}: no spec in {dir} defines it (the runtime: unresolvable CDI devices {})", c.id, c.id))
            }
            IdVerdict::Unparsable(why) => Some(format!("{}: not a CDI ID: {why}", c.id)),
        })
        .collect();
    problems
        .extend(nodes.iter().filter(|n| !n.exists).map(|n| format!("{}: device node {} does not exist", n.id, n.path)));
    if !problems.is_empty() {
        if specs == 0 {
            problems.push(format!(
                "{dir} holds no spec file at all: does the driver write its specs there? pass {{cdi_dir}} to it"
            ));
        }
        return verdict(step, false, problems.join("; "), Duration::ZERO);
    }
    let ids: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
    let nodes = if nodes.is_empty() {
        "the specs name no device nodes".to_string()
    } else {
        format!("{} exist", crate::text::count(nodes.len(), "device node", "device nodes"))
    };
    verdict(step, true, format!("{} resolve in {dir}; {nodes}", ids.join(", ")), Duration::ZERO)
}

/// `(pool/device, CDI IDs)` of a claim's devices, each once, in order
/// (1.34-1.36 append a claim's devices again when it is prepared again).
pub fn answer_of(devices: &[PreparedDevice]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for d in devices {
        let a = (format!("{}/{}", d.pool, d.device), d.cdi_device_ids.clone());
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// The request-names verdict: no `/` in the answered names, and the
/// container naming the parent request gets the device's CDI IDs.
pub fn request_names(devices: &[PreparedDevice], container_ids: &[String], took: Duration) -> CheckResult {
    let slashed: Vec<String> = devices
        .iter()
        .flat_map(|d| d.request_names.iter().filter(|r| r.contains('/')).map(move |r| format!("{}: {r:?}", d.device)))
        .collect();
    if !slashed.is_empty() {
        return verdict(
            StepId::RequestNames,
            false,
            format!(
                "claim allocated for subrequest gpu/large: request_names {} hold '/': the container asking for \
                 request gpu gets none of these devices (strip the subrequest)",
                slashed.join(", ")
            ),
            took,
        );
    }
    if container_ids.is_empty() {
        return verdict(
            StepId::RequestNames,
            false,
            "claim allocated for subrequest gpu/large: the container naming request gpu gets no CDI ID",
            took,
        );
    }
    let names: BTreeSet<String> = devices.iter().flat_map(|d| d.request_names.iter().cloned()).collect();
    let shown = if names.is_empty() {
        "empty (all requests)".to_string()
    } else {
        names.into_iter().collect::<Vec<_>>().join(", ")
    };
    verdict(
        StepId::RequestNames,
        true,
        format!(
            "claim allocated for subrequest gpu/large: request_names {shown}; container gets [{}]",
            container_ids.join(", ")
        ),
        took,
    )
}

/// Whether a claim prepared again got what it got first.
pub fn same_devices(
    step: StepId,
    before: &[(String, Vec<String>)],
    after: &[(String, Vec<String>)],
    context: &str,
    took: Duration,
) -> CheckResult {
    if before == after {
        return verdict(
            step,
            true,
            format!("{context}: the same {} again", crate::text::count(after.len(), "device", "devices")),
            took,
        );
    }
    verdict(
        step,
        false,
        format!("{context}: first {}, then {}", crate::dra::answer_text(before), crate::dra::answer_text(after)),
        took,
    )
}

/// The verdict on a kubelet restart, which prepares nothing (a running pod
/// keeps its sandbox: SyncPod prepares only when it creates one,
/// pkg/kubelet/kuberuntime/kuberuntime_manager.go): the prepared claim must
/// be read back from dra_manager_state (`restored` claims were) and the
/// driver must register again (`back`) within the wait.
pub fn read_back(step: StepId, restored: usize, back: bool, waited: Duration) -> Option<CheckResult> {
    if restored == 0 {
        let ev = "the prepared claim was not read back from dra_manager_state after the restart".to_string();
        return Some(verdict(step, false, ev, waited));
    }
    if !back {
        let ev = format!("the driver did not register again within {} ms of the restart", waited.as_millis());
        return Some(verdict(step, false, ev, waited));
    }
    None
}

/// The verdict on the kubelet's errors for pods prepared again after a
/// reboot (`errors`: the kubelet's texts), `prepared`: how many were.
pub fn prepared_again(step: StepId, errors: &[String], prepared: usize, waited: Duration) -> Option<CheckResult> {
    if let Some(e) = errors.first() {
        return Some(verdict(step, false, e.clone(), waited));
    }
    if prepared == 0 {
        return Some(verdict(
            step,
            false,
            format!(
                "the restored claim was not prepared again: the driver did not register again within {} ms",
                waited.as_millis()
            ),
            waited,
        ));
    }
    None
}

/// The unprepare verdict: the kubelet's Unprepare on deletion, then a
/// second one for the claim already unprepared (`second`: its problems, or
/// why it failed).
pub fn unprepare(kubelet_error: Option<&str>, second: Result<Vec<String>, String>, took: Duration) -> CheckResult {
    let mut problems = Vec::new();
    if let Some(e) = kubelet_error {
        problems.push(format!("on deletion: {e}"));
    }
    match second {
        Err(e) => problems.push(format!("the second Unprepare failed: {e}")),
        Ok(p) if !p.is_empty() => problems.push(format!("the second Unprepare not accepted: {}", p.join("; "))),
        Ok(_) => {}
    }
    let ok = problems.is_empty();
    let ev = if ok {
        "the kubelet's Unprepare on deletion and a second one both accepted".to_string()
    } else {
        problems.join("; ")
    };
    verdict(StepId::UnprepareIdempotent, ok, ev, took)
}

/// The parallel-pods verdict over each pod's outcome (`Err`: the kubelet's
/// words) and the devices each claim got.
pub fn parallel(
    outcomes: &[Result<String, String>],
    devices: &[Vec<String>],
    distinct_expected: bool,
    took: Duration,
) -> CheckResult {
    let failed: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    if !failed.is_empty() {
        let shown: Vec<&str> = failed.iter().map(|s| s.as_str()).collect();
        return verdict(StepId::ParallelPods, false, shown.join("; "), took);
    }
    let all: Vec<&String> = devices.iter().flatten().collect();
    let unique: BTreeSet<&String> = all.iter().copied().collect();
    if distinct_expected && unique.len() < all.len() {
        return verdict(
            StepId::ParallelPods,
            false,
            format!("claims of different pods got the same device: {}", crate::dra::pods_devices_text(devices)),
            took,
        );
    }
    verdict(
        StepId::ParallelPods,
        true,
        format!("{} pods admitted at once and deleted: {}", outcomes.len(), crate::dra::pods_devices_text(devices)),
        took,
    )
}

/// One claim of parallel-pods: its name, the device allocated to it
/// (`pool/device`) and the driver's answer ([`answer_of`]).
pub type ClaimAnswer = (String, String, Vec<(String, Vec<String>)>);

/// The distinct-devices verdict over the parallel pods' claims, each
/// allocated another device: no CDI ID may be answered for two claims.
/// Skipped when fewer than two claims were answered or the answers carry no
/// CDI ID (nothing to judge).
pub fn distinct_devices(claims: &[ClaimAnswer], took: Duration) -> CheckResult {
    let step = StepId::DistinctDevices;
    let shown: Vec<String> = claims
        .iter()
        .map(|(claim, allocated, answer)| {
            let ids: Vec<&String> = answer.iter().flat_map(|a| &a.1).collect();
            let ids: Vec<String> = ids.into_iter().cloned().collect();
            format!(
                "{claim} (allocated {allocated}) answered {}",
                if ids.is_empty() { "no CDI ID".into() } else { ids.join(", ") }
            )
        })
        .collect();
    let answered = claims.iter().filter(|c| !c.2.is_empty()).count();
    let ids: Vec<(&String, &String)> = claims
        .iter()
        .flat_map(|(claim, _, answer)| answer.iter().flat_map(move |a| a.1.iter().map(move |id| (id, claim))))
        .collect();
    if answered < 2 || ids.is_empty() {
        let why = if answered < 2 { "fewer than two claims answered" } else { "no CDI ID in any answer" };
        return result(step, Outcome::Skip, format!("{why}: nothing to judge; {}", shown.join("; ")), took);
    }
    let mut twice: Vec<String> = Vec::new();
    for (i, (id, claim)) in ids.iter().enumerate() {
        if let Some((_, other)) = ids[..i].iter().find(|(x, c)| x == id && c != claim) {
            twice.push(format!("{id} for {other} and {claim}"));
        }
    }
    if twice.is_empty() {
        let claims = crate::text::count(claims.len() as u64, "claim", "claims");
        return verdict(step, true, format!("{claims}, {} distinct CDI IDs: {}", ids.len(), shown.join("; ")), took);
    }
    verdict(
        step,
        false,
        format!(
            "one CDI device answered for claims allocated different devices: {}; both containers would use one \
             device; {}",
            twice.join(", "),
            shown.join("; ")
        ),
        took,
    )
}

/// The rolling-update verdict once the first instance stopped: the
/// kubelet's error preparing a pod's claim, and whether the second
/// instance's endpoint served it.
pub fn rolling(error: Option<&str>, served: bool, first: &Path, second: &Path, took: Duration) -> CheckResult {
    let step = StepId::RollingUpdate;
    match error {
        Some(e) => verdict(step, false, e, took),
        None if !served => verdict(
            step,
            false,
            format!("the pod's claim was not prepared by the second instance at {}", second.display()),
            took,
        ),
        None => verdict(
            step,
            true,
            format!(
                "a second instance registered at {} beside {}; with the first stopped it prepared a pod's claim",
                second.display(),
                first.display()
            ),
            took,
        ),
    }
}

/// How the driver fared under a kubelet root with long socket paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LongPathOutcome {
    /// It registered and a pod's claim was prepared through it.
    Reachable,
    /// It registered but the kubelet's Prepare failed (its words).
    Unreachable(String),
    /// It stopped.
    Stopped {
        /// How (`exited with code 1`).
        exit: String,
        /// The last lines it wrote.
        lines: Vec<String>,
    },
    /// Still running, not registered, at the deadline.
    Silent,
}

/// The long-socket-path verdict. `root` is the long kubelet root; `lengths`
/// describes the socket paths' lengths.
pub fn long_path(outcome: &LongPathOutcome, root: &str, lengths: &str, took: Duration) -> CheckResult {
    let step = StepId::LongSocketPath;
    match outcome {
        LongPathOutcome::Reachable => verdict(step, true, format!("{lengths}: registered and prepared a claim"), took),
        LongPathOutcome::Unreachable(e) => verdict(step, false, format!("{lengths}: registered, but {e}"), took),
        LongPathOutcome::Silent => verdict(
            step,
            false,
            format!(
                "{lengths}: the driver neither registered nor stopped within the registration timeout, and \
                     nothing names the failure"
            ),
            took,
        ),
        LongPathOutcome::Stopped { exit, lines } => {
            let named = lines.iter().find(|l| {
                let l = l.to_lowercase();
                l.contains(root)
                    || l.contains("too long")
                    || l.contains("name too long")
                    || l.contains("108")
                    || l.contains("107")
            });
            match named {
                Some(l) => verdict(
                    step,
                    true,
                    format!(
                        "{lengths}: not reachable (no unix socket path holds over 107 bytes); the driver {exit}, naming it: {l}"
                    ),
                    took,
                ),
                None => verdict(
                    step,
                    false,
                    format!("{lengths}: the driver {exit} without naming the path or its length"),
                    took,
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet_sim::{DraCall, DraOutcome};

    fn slice(driver: &str, node: &str, pool: &str, devices: &[&str]) -> Value {
        let devices: Vec<Value> = devices.iter().map(|d| json!({"name": d})).collect();
        json!({"metadata": {"name": format!("{node}-{pool}")}, "spec": {"driver": driver, "nodeName": node, "pool": {"name": pool}, "devices": devices}})
    }

    fn dev(name: &str, requests: &[&str], ids: &[&str]) -> PreparedDevice {
        PreparedDevice {
            pool: "p".into(),
            device: name.into(),
            share_id: None,
            request_names: requests.iter().map(|s| s.to_string()).collect(),
            cdi_device_ids: ids.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn slices_are_judged_per_driver_and_node() {
        let ok = [slice("d.example", "n", "p", &["gpu-0", "gpu-1"]), slice("other", "n", "q", &["x"])];
        let r = published_slices(&ok, "d.example", "n", Duration::ZERO, &[]);
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.evidence);
        assert!(r.evidence.contains("1 slice, devices p/gpu-0, p/gpu-1"), "{}", r.evidence);
        let bad =
            [slice("d.example", "elsewhere", "p", &["gpu-0"]), slice("d.example", "n", "p", &["GPU_0", "a", "a"])];
        let r = published_slices(&bad, "d.example", "n", Duration::ZERO, &[]);
        assert_eq!(r.outcome, Outcome::Fail);
        for needle in ["nodeName Some(\"elsewhere\")", "\"GPU_0\" is not a DNS label", "p/a published twice"] {
            assert!(r.evidence.contains(needle), "{needle}: {}", r.evidence);
        }
        let none = published_slices(&ok[1..], "d.example", "n", Duration::from_millis(5), &made_up(2));
        assert_eq!(none.outcome, Outcome::Skip);
        assert!(none.evidence.contains("made-up devices (dpctl-smoke-pool/dev-0, dpctl-smoke-pool/dev-1)"));
    }

    #[test]
    fn claims_take_published_devices_in_turn_and_carry_the_subrequest() {
        let devs = vec![("p".to_string(), "a".to_string()), ("p".to_string(), "b".to_string())];
        assert_eq!(device_for(&devs, 3).1, "b");
        assert_eq!(device_for(&[], 0), made_up(1)[0]);
        let c = claim_object("c", "d.example", &devs[0], ("pod", "uid-1"), true);
        assert_eq!(c.pointer("/status/allocation/devices/results/0/request").unwrap(), "gpu/large");
        assert_eq!(c.pointer("/status/reservedFor/0/uid").unwrap(), "uid-1");
        let mut stored = c.clone();
        stored["metadata"]["uid"] = json!("claim-uid");
        let text = pod_manifest(("pod", "uid-1"), &stored);
        let spec = crate::kubelet_sim::PodSpec::from_manifest(&text, "test").unwrap();
        assert_eq!(spec.claim_objects[0].uid, "claim-uid");
        assert_eq!(spec.claim_objects[0].results[0].request, "gpu/large");
        assert_eq!(spec.resource_claims[0].name, "gpu");
    }

    fn outcome_with(error: Option<&str>) -> AdmitOutcome {
        let mut o = AdmitOutcome::pending(&crate::kubelet_sim::PodSpec::shorthand("p", NAMESPACE, &[]), "u".into());
        o.admitted = true;
        let call = DraCall {
            driver: "d".into(),
            endpoint: "/e".into(),
            rpc: "v1.DRAPlugin/NodePrepareResources".into(),
            claims: vec!["ns/c".into()],
            took_ms: 7,
        };
        let mut dra = DraOutcome { calls: vec![call], error: error.map(String::from), ..Default::default() };
        dra.cdi_devices.insert("main".into(), vec!["v.example/c=x".into()]);
        o.dra = Some(Box::new(dra));
        o
    }

    /// 1.34-1.37: the kubelet's error text is the evidence.
    #[test]
    fn admission_reports_the_kubelets_words() {
        let r =
            admission(&outcome_with(Some("prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims")));
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(r.evidence.ends_with("NodePrepareResources skipped 1 ResourceClaims"), "{}", r.evidence);
        let r = admission(&outcome_with(None));
        assert_eq!(r.outcome, Outcome::Pass);
        assert!(r.evidence.contains("for 1 claim in 7 ms; container main gets CDI [v.example/c=x]"), "{}", r.evidence);
    }

    #[test]
    fn cdi_needs_ids_that_resolve_and_device_nodes_that_exist() {
        let ok = CdiCheck { id: "v.example/c=x".into(), verdict: IdVerdict::Resolved };
        let missing = CdiCheck { id: "v.example/c=y".into(), verdict: IdVerdict::Unresolved };
        let node = |exists| DeviceNode { id: "v.example/c=x".into(), path: "/dev/x".into(), exists };
        assert_eq!(cdi(StepId::Cdi, std::slice::from_ref(&ok), &[node(true)], "/d", 1).outcome, Outcome::Pass);
        let r = cdi(StepId::Cdi, std::slice::from_ref(&ok), &[node(false)], "/d", 1);
        assert!(r.evidence.contains("device node /dev/x does not exist"), "{}", r.evidence);
        let r = cdi(StepId::Cdi, &[ok.clone(), missing.clone()], &[], "/d", 1);
        assert!(r.evidence.contains("v.example/c=y: no spec in /d defines it"), "{}", r.evidence);
        assert!(!r.evidence.contains("no spec file at all"), "{}", r.evidence);
        let r = cdi(StepId::Cdi, &[ok, missing], &[], "/d", 0);
        assert!(r.evidence.contains("/d holds no spec file at all"), "{}", r.evidence);
        assert_eq!(cdi(StepId::Cdi, &[], &[], "/d", 0).outcome, Outcome::Fail);
    }

    #[test]
    fn request_names_with_a_slash_fail_and_stripped_ones_pass() {
        let r = request_names(&[dev("a", &["gpu/large"], &["v/c=a"])], &["v/c=a".into()], Duration::ZERO);
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(r.evidence.contains("a: \"gpu/large\""), "{}", r.evidence);
        let r = request_names(&[dev("a", &["gpu"], &["v/c=a"])], &["v/c=a".into()], Duration::ZERO);
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.evidence);
        assert_eq!(request_names(&[dev("a", &[], &[])], &[], Duration::ZERO).outcome, Outcome::Fail);
    }

    /// 1.34-1.36 append a claim's devices when it is prepared again; the
    /// comparison takes each once.
    #[test]
    fn devices_listed_twice_after_a_restart_on_1_34_count_once() {
        let before = answer_of(&[dev("a", &[], &["v/c=a"])]);
        let after = answer_of(&[dev("a", &[], &["v/c=a"]), dev("a", &[], &["v/c=a"])]);
        assert_eq!(same_devices(StepId::KubeletRestart, &before, &after, "x", Duration::ZERO).outcome, Outcome::Pass);
        let other = answer_of(&[dev("b", &[], &["v/c=b"])]);
        let r = same_devices(StepId::KubeletRestart, &before, &other, "x", Duration::ZERO);
        assert_eq!(r.outcome, Outcome::Fail);
        assert_eq!(r.evidence, "x: first p/a (v/c=a), then p/b (v/c=b)", "no Rust debug text");
    }

    // Two claims, two devices, two CDI IDs; the same ID for both fails, and
    // answers with no CDI ID are nothing to judge.
    #[test]
    fn distinct_devices_fails_one_cdi_id_for_two_claims() {
        let w = Duration::ZERO;
        let claim = |c: &str, dev: &str, id: &str| {
            let ids = if id.is_empty() { vec![] } else { vec![id.to_string()] };
            (c.to_string(), format!("p/{dev}"), vec![(format!("p/{dev}"), ids)])
        };
        let ok = distinct_devices(&[claim("c0", "gpu-0", "v/c=gpu-0"), claim("c1", "gpu-1", "v/c=gpu-1")], w);
        assert_eq!(ok.outcome, Outcome::Pass, "{}", ok.evidence);
        let same = distinct_devices(&[claim("c0", "gpu-0", "v/c=gpu-0"), claim("c1", "gpu-1", "v/c=gpu-0")], w);
        assert_eq!(same.outcome, Outcome::Fail);
        assert!(
            same.evidence.contains("v/c=gpu-0 for c0 and c1") && same.evidence.contains("c1 (allocated p/gpu-1)"),
            "{}",
            same.evidence
        );
        let none = distinct_devices(&[claim("c0", "gpu-0", ""), claim("c1", "gpu-1", "")], w);
        assert_eq!(none.outcome, Outcome::Skip);
        assert!(none.evidence.contains("no CDI ID in any answer: nothing to judge"), "{}", none.evidence);
    }

    #[test]
    fn restart_and_unprepare_verdicts() {
        let w = Duration::from_secs(2);
        assert!(read_back(StepId::KubeletRestart, 1, true, w).is_none());
        let r = read_back(StepId::KubeletRestart, 1, false, w).unwrap();
        assert!(r.evidence.contains("did not register again within 2000 ms"), "{}", r.evidence);
        assert!(read_back(StepId::KubeletRestart, 0, true, w).unwrap().evidence.contains("not read back"));
        assert!(prepared_again(StepId::NodeReboot, &[], 1, w).is_none());
        let r = prepared_again(StepId::NodeReboot, &[], 0, w).unwrap();
        assert!(r.evidence.contains("did not register again within 2000 ms"), "{}", r.evidence);
        assert_eq!(prepared_again(StepId::NodeReboot, &["boom".into()], 1, w).unwrap().evidence, "boom");
        assert_eq!(unprepare(None, Ok(vec![]), w).outcome, Outcome::Pass);
        let r = unprepare(Some("unprepare dynamic resources: x"), Err("gone".into()), w);
        assert!(r.evidence.contains("on deletion: unprepare") && r.evidence.contains("second Unprepare failed: gone"));
    }

    #[test]
    fn parallel_pods_fail_on_any_error_or_a_shared_device() {
        let ok = [Ok("a".to_string()), Ok("b".to_string())];
        let devs = vec![vec!["p/x".to_string()], vec!["p/y".to_string()]];
        assert_eq!(parallel(&ok, &devs, true, Duration::ZERO).outcome, Outcome::Pass);
        let same = vec![vec!["p/x".to_string()], vec!["p/x".to_string()]];
        assert_eq!(parallel(&ok, &same, true, Duration::ZERO).outcome, Outcome::Fail);
        assert_eq!(parallel(&ok, &same, false, Duration::ZERO).outcome, Outcome::Pass);
        let bad = [Ok("a".to_string()), Err("pod b: boom".to_string())];
        assert_eq!(parallel(&bad, &devs, true, Duration::ZERO).evidence, "pod b: boom");
    }

    #[test]
    fn a_second_instance_must_serve_once_the_first_stops() {
        let (a, b) = (Path::new("/a.sock"), Path::new("/b.sock"));
        assert_eq!(rolling(None, true, a, b, Duration::ZERO).outcome, Outcome::Pass);
        assert!(
            rolling(None, false, a, b, Duration::ZERO)
                .evidence
                .contains("not prepared by the second instance at /b.sock")
        );
        assert_eq!(rolling(Some("prepare dynamic resources: x"), true, a, b, Duration::ZERO).outcome, Outcome::Fail);
    }

    #[test]
    fn a_long_root_passes_only_when_reachable_or_named() {
        let z = Duration::ZERO;
        let root = "/tmp/long-root-xxx";
        let stopped =
            |line: &str| LongPathOutcome::Stopped { exit: "exited with code 1".into(), lines: vec![line.into()] };
        assert_eq!(long_path(&LongPathOutcome::Reachable, root, "L", z).outcome, Outcome::Pass);
        let named = long_path(
            &stopped("listen unix /tmp/long-root-xxx/plugins/d/dra.sock: bind: invalid argument"),
            root,
            "L",
            z,
        );
        assert_eq!(named.outcome, Outcome::Pass, "{}", named.evidence);
        assert_eq!(long_path(&stopped("panic: oops"), root, "L", z).outcome, Outcome::Fail);
        assert_eq!(long_path(&LongPathOutcome::Silent, root, "L", z).outcome, Outcome::Fail);
        let r = long_path(&LongPathOutcome::Unreachable("NodePrepareResources: dial".into()), root, "L", z);
        assert!(r.outcome == Outcome::Fail && r.evidence.contains("registered, but NodePrepareResources"));
    }
}
