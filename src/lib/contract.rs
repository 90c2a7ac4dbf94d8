//! What a device plugin's answers must satisfy for the kubelet, as pure
//! functions returning the rules an answer breaks. Used by `plugin call` to
//! flag bad answers and by `plugin check` and `smoke` as evidence.

use std::collections::HashSet;

use serde::Serialize;

use crate::limits::KUBELET_MAX_RECV;
use crate::model::Device;
use crate::proto::deviceplugin::v1beta1 as dp;

/// One broken rule, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Short stable name of the rule.
    pub rule: &'static str,
    /// What the answer did, with the IDs or numbers involved.
    pub evidence: String,
}

fn v(rule: &'static str, evidence: String) -> Violation {
    Violation { rule, evidence }
}

/// Checks a GetPreferredAllocation answer for one container request: the
/// requested size, every must-include ID, only available IDs, no duplicates.
pub fn check_preferred(req: &dp::ContainerPreferredAllocationRequest, answer: &[String]) -> Vec<Violation> {
    let mut out = Vec::new();
    let size = usize::try_from(req.allocation_size).unwrap_or(0);
    if answer.len() != size {
        out.push(v(
            "preferred-size",
            format!(
                "returned {}, {} requested",
                crate::text::count(answer.len(), "device", "devices"),
                if size == 1 { "1 was".to_string() } else { format!("{size} were") }
            ),
        ));
    }
    let available: HashSet<&str> = req.available_device_i_ds.iter().map(String::as_str).collect();
    let outside: Vec<&str> = answer.iter().map(String::as_str).filter(|id| !available.contains(id)).collect();
    if !outside.is_empty() {
        out.push(v("preferred-subset-of-available", format!("not in available_deviceIDs: {}", outside.join(","))));
    }
    let given: HashSet<&str> = answer.iter().map(String::as_str).collect();
    let missing: Vec<&str> =
        req.must_include_device_i_ds.iter().map(String::as_str).filter(|id| !given.contains(id)).collect();
    if !missing.is_empty() {
        out.push(v("preferred-must-include", format!("missing must_include_deviceIDs: {}", missing.join(","))));
    }
    let dups = duplicates(answer.iter().map(String::as_str));
    if !dups.is_empty() {
        out.push(v("preferred-no-duplicates", format!("listed more than once: {}", dups.join(","))));
    }
    out
}

/// Checks a whole GetPreferredAllocation answer to a request for one
/// container: exactly one container response, then the rules of
/// [`check_preferred`] on the IDs of the first response (none when it is
/// missing). The answer itself is [`preferred_answer`].
pub fn check_preferred_response(
    req: &dp::ContainerPreferredAllocationRequest,
    resp: &dp::PreferredAllocationResponse,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let n = resp.container_responses.len();
    if n != 1 {
        out.push(v(
            "preferred-one-response-per-container",
            format!("{} for 1 container request", crate::text::count(n, "container response", "container responses")),
        ));
    }
    out.extend(check_preferred(req, &preferred_answer(resp)));
    out
}

/// The device IDs of the first container response (empty when there is none).
pub fn preferred_answer(resp: &dp::PreferredAllocationResponse) -> Vec<String> {
    resp.container_responses.first().map(|r| r.device_i_ds.clone()).unwrap_or_default()
}

/// The rule a health string other than `Healthy` or `Unhealthy` breaks.
pub const HEALTH_VALUE: &str = "health-value";

/// The devices whose health is neither `Healthy` nor `Unhealthy` (the
/// kubelet counts them unhealthy): the [`HEALTH_VALUE`] rule's verdict.
pub fn bad_health(devices: &[Device]) -> impl Iterator<Item = &Device> {
    devices.iter().filter(|d| d.health != dp::HEALTHY && d.health != dp::UNHEALTHY)
}

/// Checks one ListAndWatch message: IDs non-empty and unique, health exactly
/// `Healthy` or `Unhealthy`, NUMA IDs not negative, no TopologyInfo without
/// nodes, encoded size within the kubelet's receive limit.
pub fn check_snapshot(devices: &[Device], encoded_len: usize) -> Vec<Violation> {
    let mut out = Vec::new();
    let empty = devices.iter().filter(|d| d.id.is_empty()).count();
    if empty > 0 {
        out.push(v(
            "device-id-non-empty",
            format!("{} with an empty ID", crate::text::count(empty, "device", "devices")),
        ));
    }
    let dups = duplicates(devices.iter().map(|d| d.id.as_str()).filter(|id| !id.is_empty()));
    if !dups.is_empty() {
        out.push(v("device-id-unique", format!("IDs listed more than once: {}", preview(&dups))));
    }
    let bad_health: Vec<String> = bad_health(devices).map(|d| format!("{}={:?}", d.id, d.health)).collect();
    if !bad_health.is_empty() {
        out.push(v(
            HEALTH_VALUE,
            format!(
                "health must be exactly \"Healthy\" or \"Unhealthy\" (anything else counts as unhealthy): {}",
                preview(&bad_health)
            ),
        ));
    }
    let negative: Vec<String> = devices
        .iter()
        .filter(|d| d.numa_nodes.as_ref().is_some_and(|n| n.iter().any(|x| *x < 0)))
        .map(|d| d.id.clone())
        .collect();
    if !negative.is_empty() {
        out.push(v("numa-non-negative", format!("negative NUMA node IDs on: {}", preview(&negative))));
    }
    // docs/protocol.md §2.1 "How devices are encoded" (every version): the kubelet
    // lists a device in GetAllocatableResources once per NUMA node of its
    // TopologyInfo, and with no TopologyInfo once without topology; a
    // TopologyInfo with no nodes gives no entry at all.
    let empty_topology: Vec<String> =
        devices.iter().filter(|d| d.numa_nodes.as_ref().is_some_and(Vec::is_empty)).map(|d| d.id.clone()).collect();
    if !empty_topology.is_empty() {
        out.push(v(
            "topology-not-empty",
            format!(
                "a TopologyInfo with no NUMA nodes on: {}; the kubelet leaves such devices out of PodResources \
                 GetAllocatableResources (one entry per NUMA node, none here): send no topology at all for a \
                 device without NUMA affinity",
                preview(&empty_topology)
            ),
        ));
    }
    if encoded_len > KUBELET_MAX_RECV {
        out.push(v(
            "message-size",
            format!("ListAndWatch message is {encoded_len} bytes, over the kubelet's {KUBELET_MAX_RECV}-byte limit"),
        ));
    }
    out
}

/// Checks an Allocate answer: exactly one container response per container request.
pub fn check_allocate(requests: usize, resp: &dp::AllocateResponse) -> Vec<Violation> {
    if resp.container_responses.len() == requests {
        return Vec::new();
    }
    vec![v(
        "allocate-one-response-per-container",
        format!(
            "{} for {}",
            crate::text::count(resp.container_responses.len(), "container response", "container responses"),
            crate::text::count(requests, "container request", "container requests")
        ),
    )]
}

/// What the kubelet makes of an Allocate answer to its request, which always
/// carries exactly one container (docs/protocol.md §3.7, every version 1.26 to
/// master): an answer with no container response rejects the pod ("no
/// containers return in allocation response"); otherwise only the first is
/// read and any further responses are ignored, which is no failure.
pub fn kubelet_rejects_allocate(resp: &dp::AllocateResponse) -> Option<Violation> {
    resp.container_responses.is_empty().then(|| {
        v(
            "allocate-at-least-one-response",
            "no container response: the kubelet rejects the pod (UnexpectedAdmissionError: \"no containers return \
             in allocation response\"); it reads only the first response"
                .to_string(),
        )
    })
}

/// The values that occur more than once, in first-seen order.
fn duplicates<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut reported = HashSet::new();
    let mut out = Vec::new();
    for it in items {
        if !seen.insert(it) && reported.insert(it) {
            out.push(it.to_string());
        }
    }
    out
}

/// At most five items, then a count of the rest.
/// The device-specific content of one container's Allocate answer, as the
/// kubelet hands it to the runtime (`deviceRunContainerOptions` in
/// pkg/kubelet/cm/devicemanager/pod_devices.go copies it unchecked): every
/// env `KEY=VALUE`, CDI device name, device-node host path and mount host
/// path, each tagged with its kind, sorted.
pub fn device_content(resp: &dp::ContainerAllocateResponse) -> Vec<String> {
    let mut out: Vec<String> = resp.envs.iter().map(|(k, v)| format!("env {k}={v}")).collect();
    out.extend(resp.cdi_devices.iter().map(|c| format!("CDI {}", c.name)));
    out.extend(resp.devices.iter().map(|d| format!("device node {}", d.host_path)));
    out.extend(resp.mounts.iter().map(|m| format!("mount {}", m.host_path)));
    out.sort();
    out.dedup();
    out
}

/// How two containers' answers for two different devices compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distinct {
    /// Neither answer carries device-specific content: nothing to judge.
    NothingToJudge,
    /// The answers tell the devices apart.
    Distinct,
    /// Both containers get the same device; the evidence says why.
    Same(String),
}

/// The distinct-devices rule: containers given different devices (`a`, `b`)
/// must not receive the same device-specific content ([`device_content`]):
/// identical answers, or an answer that names the other device's ID and not
/// its own, give both containers one device.
pub fn distinct_devices(a: &str, content_a: &[String], b: &str, content_b: &[String]) -> Distinct {
    if content_a.is_empty() && content_b.is_empty() {
        return Distinct::NothingToJudge;
    }
    if content_a == content_b {
        let items = crate::text::count(content_a.len() as u64, "item", "items");
        return Distinct::Same(format!("both answers carry the same content ({items}) for different devices"));
    }
    let names_other = |own: &str, other: &str, content: &[String]| -> Vec<String> {
        content.iter().filter(|c| names_id(c, other) && !names_id(c, own)).cloned().collect()
    };
    for (own, other, content) in [(b, a, content_b), (a, b, content_a)] {
        let wrong = names_other(own, other, content);
        if !wrong.is_empty() {
            return Distinct::Same(format!("the answer for {own} names {other}, not {own}: {}", preview(&wrong)));
        }
    }
    Distinct::Distinct
}

/// True when `text` holds `id` as a whole token (not inside a longer
/// alphanumeric run: `GPU-1` is not in `GPU-10`).
fn names_id(text: &str, id: &str) -> bool {
    if id.is_empty() {
        return false;
    }
    let bytes = text.as_bytes();
    text.match_indices(id).any(|(at, _)| {
        let before = at.checked_sub(1).and_then(|i| bytes.get(i));
        let after = bytes.get(at + id.len());
        !before.is_some_and(u8::is_ascii_alphanumeric) && !after.is_some_and(u8::is_ascii_alphanumeric)
    })
}

fn preview(items: &[String]) -> String {
    let mut s = items.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > 5 {
        s.push_str(&format!(" and {} more", items.len() - 5));
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // Two containers, two devices: the same content, or an answer naming the
    // other device, is one device for both; no content is nothing to judge.
    #[test]
    fn distinct_devices_fails_the_same_device_and_skips_no_content() {
        let c = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let a = c(&["env DEV=GPU-0", "device node /dev/ctl"]);
        let b = c(&["env DEV=GPU-1", "device node /dev/ctl"]);
        assert_eq!(distinct_devices("GPU-0", &a, "GPU-1", &b), Distinct::Distinct);
        assert!(
            matches!(distinct_devices("GPU-0", &a, "GPU-1", &a), Distinct::Same(e) if e.contains("the same content (2 items)"))
        );
        let named = c(&["env DEV=GPU-0", "device node /dev/ctl", "mount /x"]);
        match distinct_devices("GPU-0", &a, "GPU-1", &named) {
            Distinct::Same(e) => {
                assert!(e.contains("the answer for GPU-1 names GPU-0, not GPU-1: env DEV=GPU-0"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(distinct_devices("GPU-0", &[], "GPU-1", &[]), Distinct::NothingToJudge);
        // GPU-1 is not named by GPU-10.
        assert!(!names_id("env X=GPU-10", "GPU-1") && names_id("env X=GPU-0,GPU-1", "GPU-1"));
        assert!(names_id("mount /tmp/Dev-1", "Dev-1") && !names_id("x", ""));
    }

    /// A GetPreferredAllocation request for one container (also used by the mock's policy tests).
    pub(crate) fn req(avail: &[&str], must: &[&str], size: i32) -> dp::ContainerPreferredAllocationRequest {
        dp::ContainerPreferredAllocationRequest {
            available_device_i_ds: avail.iter().map(|s| s.to_string()).collect(),
            must_include_device_i_ds: must.iter().map(|s| s.to_string()).collect(),
            allocation_size: size,
        }
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn preferred_rules() {
        let r = req(&["a", "b", "c"], &["c"], 2);
        assert!(check_preferred(&r, &ids(&["c", "a"])).is_empty());
        let rules: Vec<_> = check_preferred(&r, &ids(&["a", "a", "x"])).into_iter().map(|v| v.rule).collect();
        assert_eq!(
            rules,
            ["preferred-size", "preferred-subset-of-available", "preferred-must-include", "preferred-no-duplicates"]
        );
    }

    /// docs/protocol.md §3.7 (1.26 to master): zero responses are rejected, the
    /// first is read and the rest ignored.
    #[test]
    fn kubelet_rejects_only_an_allocate_answer_without_responses() {
        let resp = |n: usize| dp::AllocateResponse { container_responses: vec![Default::default(); n] };
        let none = kubelet_rejects_allocate(&resp(0)).expect("rejected");
        assert!(none.evidence.contains("no containers return in allocation response"), "{}", none.evidence);
        assert!(kubelet_rejects_allocate(&resp(1)).is_none());
        assert!(kubelet_rejects_allocate(&resp(3)).is_none());
    }

    #[test]
    fn preferred_response_needs_one_answer_per_container() {
        let r = req(&["a", "b"], &[], 1);
        let resp = |answers: &[&[&str]]| dp::PreferredAllocationResponse {
            container_responses: answers
                .iter()
                .map(|a| dp::ContainerPreferredAllocationResponse { device_i_ds: ids(a) })
                .collect(),
        };
        assert!(check_preferred_response(&r, &resp(&[&["b"]])).is_empty());
        let two = check_preferred_response(&r, &resp(&[&["a"], &["b"]]));
        assert_eq!(two.iter().map(|v| v.rule).collect::<Vec<_>>(), ["preferred-one-response-per-container"]);
        assert_eq!(two[0].evidence, "2 container responses for 1 container request");
        let none = check_preferred_response(&r, &resp(&[]));
        assert_eq!(
            none.iter().map(|v| v.rule).collect::<Vec<_>>(),
            ["preferred-one-response-per-container", "preferred-size"]
        );
        let bad = check_preferred_response(&r, &resp(&[&["x"]]));
        assert_eq!(bad.iter().map(|v| v.rule).collect::<Vec<_>>(), ["preferred-subset-of-available"]);
        assert_eq!(preferred_answer(&resp(&[&["a"], &["b"]])), ["a"]);
    }

    #[test]
    fn allocate_needs_one_response_per_container_request() {
        let resp = |n: usize| dp::AllocateResponse { container_responses: vec![Default::default(); n] };
        assert!(check_allocate(1, &resp(1)).is_empty());
        assert!(check_allocate(2, &resp(2)).is_empty());
        for (requests, n) in [(1, 0), (1, 2), (2, 1)] {
            let got = check_allocate(requests, &resp(n));
            assert_eq!(got.len(), 1, "{requests} {n}");
            assert_eq!(got[0].rule, "allocate-one-response-per-container");
            let plural = |k: usize, w: &str| if k == 1 { format!("1 {w}") } else { format!("{k} {w}s") };
            assert_eq!(
                got[0].evidence,
                format!("{} for {}", plural(n, "container response"), plural(requests, "container request"))
            );
        }
    }

    // The kubelet's receive limit is inclusive; evidence lists five IDs, then a count.
    #[test]
    fn snapshot_limits_are_exact() {
        let d = |id: &str| Device { id: id.into(), health: "Healthy".into(), numa_nodes: Some(vec![0]) };
        assert!(check_snapshot(&[d("a")], KUBELET_MAX_RECV).is_empty());
        assert_eq!(check_snapshot(&[d("a")], KUBELET_MAX_RECV + 1)[0].rule, "message-size");
        let twice =
            |n: usize| -> Vec<Device> { (0..n).flat_map(|i| [d(&format!("D{i}")), d(&format!("D{i}"))]).collect() };
        let five = check_snapshot(&twice(5), 10);
        assert_eq!(five[0].evidence, "IDs listed more than once: D0, D1, D2, D3, D4");
        let seven = check_snapshot(&twice(7), 10);
        assert_eq!(seven[0].evidence, "IDs listed more than once: D0, D1, D2, D3, D4 and 2 more");
    }

    #[test]
    fn snapshot_rules() {
        let d = |id: &str, h: &str, n: Option<Vec<i64>>| Device { id: id.into(), health: h.into(), numa_nodes: n };
        assert!(check_snapshot(&[d("a", "Healthy", Some(vec![0]))], 10).is_empty());
        let bad = [
            d("", "Healthy", None),
            d("a", "ok", None),
            d("a", "Healthy", Some(vec![-1])),
            d("b", "Healthy", Some(vec![])),
        ];
        let rules: Vec<_> = check_snapshot(&bad, KUBELET_MAX_RECV + 1).into_iter().map(|v| v.rule).collect();
        assert_eq!(
            rules,
            [
                "device-id-non-empty",
                "device-id-unique",
                "health-value",
                "numa-non-negative",
                "topology-not-empty",
                "message-size"
            ]
        );
    }
}
