//! The DRA smoke test's verdicts, as pure functions over what the runner
//! saw (slices, the sim's outcomes and status, call reports, the CDI specs
//! read): no runtime, socket, process or file system here. Where `dra
//! check` has a verdict for the same rule, the runner uses that one.

use std::collections::BTreeSet;
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
pub fn cdi(step: StepId, checks: &[CdiCheck], nodes: &[DeviceNode], dir: &str) -> CheckResult {
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
    verdict(step, false, format!("{context}: first {before:?}, then {after:?}"), took)
}

/// The verdict on the kubelet's errors for pods prepared again after a
/// restart (`errors`: the kubelet's texts), `prepared`: how many were.
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
            format!("claims of different pods got the same device: {devices:?}"),
            took,
        );
    }
    verdict(
        StepId::ParallelPods,
        true,
        format!("{} pods admitted at once and deleted: devices {devices:?}", outcomes.len()),
        took,
    )
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
