//! The observations a referee answers through its own glue, not through the
//! kubelet's code. The referee (`conformance/referee`) runs the kubelet's
//! managers, but the parts of the kubelet's wiring it cannot import it plays
//! itself: the pod worker (when containers start, when a pod stops), the
//! container runtime (there is none), the new kubelet's first pod list after a
//! restart, and the bookkeeping of its own in-process restart. Where such glue
//! answers, the sim and the referee agree with *our reading* of the kubelet,
//! not with the kubelet, so an agreement there is weaker. `scenario diff`
//! marks every such observation, whether it differs or not, and counts them
//! (docs/scenarios.md, "Glue-answered observations").

use serde::Serialize;
use serde_json::Value;

/// One kind of observation the referee's glue answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Glue {
    /// The step's `do` (`*`: every step).
    pub action: &'static str,
    /// A JSON pointer into the step's observation; `*` stands for one
    /// segment, and everything under it is covered.
    pub path: &'static str,
    /// What answers it, and the kubelet code it stands in for.
    pub answered_by: &'static str,
}

const POD_WORKER: &str = "the referee's pod worker (conformance/referee/ops.go admit): no container runtime, a \
     container starts once GetDeviceRunContainerOptions and the lifecycle hooks succeed, init containers first, as \
     the kubelet's SyncPod and computeInitContainerActions (pkg/kubelet/kuberuntime) order them";

/// Every observation the referee's glue answers. Each entry names the Go
/// function that answers it; the rest of an observation comes from the
/// kubelet's own managers (admission handlers, device, CPU, Topology and DRA
/// managers, PodResources server), the plugins' own records, or the files the
/// kubelet wrote.
pub const GLUE: &[Glue] = &[
    Glue { action: "admit", path: "/result/containers/*/started", answered_by: POD_WORKER },
    Glue { action: "admit", path: "/result/containers/*/start_error", answered_by: POD_WORKER },
    Glue {
        action: "admit",
        path: "/result/dra",
        answered_by: "the referee's SyncPod step (conformance/referee/dra.go prepare): the DRA manager's \
                      PrepareResources answers, the glue decides it runs at admission, before any container \
                      (the kubelet: kuberuntime_manager.go SyncPod, when it creates the pod sandbox)",
    },
    Glue {
        action: "delete",
        path: "/result",
        answered_by: "the referee's pod termination (conformance/referee/ops.go del): containers stopped, claims \
                      unprepared, then the pod leaves the active pods, as the kubelet's SyncTerminatingPod \
                      (pkg/kubelet/kubelet.go) does",
    },
    Glue {
        action: "restart-kubelet",
        path: "/result/all_returned",
        answered_by: "the referee's in-process restart (conformance/referee/referee.go restart, awaitReturn): \
                      capacity polled every 10 ms until the plugins' resources are back",
    },
    Glue {
        action: "restart-kubelet",
        path: "/result/reregistered",
        answered_by: "the referee's in-process restart (conformance/referee/referee.go restart, awaitReturn)",
    },
    Glue {
        action: "restart-kubelet",
        path: "/result/not_reregistered",
        answered_by: "the referee's in-process restart (conformance/referee/referee.go restart, awaitReturn)",
    },
    Glue {
        action: "restart-kubelet",
        path: "/result/pods",
        answered_by: "the referee's first pod list after a restart (conformance/referee/readmit.go readmitAll): \
                      the kubelet's admit handlers judge each pod, the glue picks the pods and their order as \
                      HandlePodAdditions would, and keeps their containers running (no runtime)",
    },
    Glue {
        action: "restart-container",
        path: "/result",
        answered_by: "the referee's container restart (conformance/referee/ops.go restartContainer): no \
                      runtime, GetDeviceRunContainerOptions and the lifecycle hooks only",
    },
    Glue {
        action: "*",
        path: "/podresources/get",
        answered_by: "the referee's pods provider (conformance/referee/podres.go GetPodByName): the pod manager \
                      as the kubelet's kubeletPodsProvider reads it, per release",
    },
];

/// The glue that answers the observation at `path` of a `action` step, if any.
pub fn glue_of(action: &str, path: &str) -> Option<&'static Glue> {
    GLUE.iter().find(|g| (g.action == "*" || g.action == action) && covers(g.path, path))
}

/// `pattern` (segments, `*` for any one) is `path` or a parent of it.
fn covers(pattern: &str, path: &str) -> bool {
    let mut have = path.split('/');
    pattern.split('/').all(|want| have.next().is_some_and(|seg| want == "*" || want == seg))
}

/// How many leaves (scalars, empty arrays and objects) `v` holds.
pub fn leaves(v: &Value) -> usize {
    match v {
        Value::Object(m) if !m.is_empty() => m.values().map(leaves).sum(),
        Value::Array(a) if !a.is_empty() => a.iter().map(leaves).sum(),
        _ => 1,
    }
}

/// Every leaf of `v` under `path`, with its JSON pointer.
pub fn each_leaf<'a>(path: &str, v: &'a Value, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                each_leaf(&format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")), x, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                each_leaf(&format!("{path}/{i}"), x, out);
            }
        }
        _ => out.push((if path.is_empty() { "/".into() } else { path.to_string() }, v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Every release 1.34-1.38 alike: the glue is the referee's, not a release's.
    #[test]
    fn glue_covers_its_subtree_by_segment_and_nothing_else() {
        assert!(glue_of("admit", "/result/containers/0/started").is_some());
        assert!(glue_of("admit", "/result/containers/12/start_error").is_some());
        assert!(glue_of("admit", "/result/containers/0/devices/example.com~1gpu/0").is_none());
        assert!(glue_of("admit", "/result/admitted").is_none());
        assert!(glue_of("admit", "/result/dra/cdi_devices/main/0").is_some());
        assert!(glue_of("admit", "/result/draw").is_none(), "a segment, not a text prefix");
        assert!(glue_of("delete", "/result").is_some());
        assert!(glue_of("delete", "/result/dra_error").is_some());
        assert!(glue_of("delete", "/checkpoint/entries/0").is_none());
        assert!(glue_of("wait", "/podresources/get/0/containers").is_some());
        assert!(glue_of("wait", "/podresources/list/0").is_none());
        assert!(glue_of("restart-kubelet", "/result/pods/0/containers/0/running").is_some());
        assert!(glue_of("admit", "/result/pods/0").is_none(), "restart-kubelet's only");
    }

    #[test]
    fn leaves_count_scalars_and_empty_containers() {
        let v = json!({"a": [1, 2, {"b": null}], "c": {}, "d": []});
        assert_eq!(leaves(&v), 5);
        let mut out = Vec::new();
        let v = json!({"x/y": [true]});
        each_leaf("", &v, &mut out);
        assert_eq!(out, [("/x~1y/0".to_string(), &json!(true))]);
    }
}
