//! The Topology Manager in `dpctl kubelet-sim`, driven as a user drives it:
//! a `kubelet-sim` process, a `mock-plugin` process with devices on two NUMA
//! nodes, and `kubelet-sim admit` (docs/topology.md §2.5, §2.8, §3, §5; kubelet
//! v1.26+ logic).

use serde_json::Value;

use crate::support::sim::sidecar_pod;
use crate::support::{Child, Sandbox, dpctl};

const DEV: &str = "example.com/dev";

/// A sim with `policy` (static CPU manager, CPU 0 reserved, 2 NUMA nodes of
/// 4 CPUs) and a mock plugin with 4 devices, 2 per node, whose preferred
/// policy ignores NUMA.
async fn node(sb: &Sandbox, policy: &str) -> (Child, Child) {
    let sim_flags = ["--topology-manager-policy", policy, "--cpu-manager-policy", "static", "--reserved-cpus", "0"];
    let sim_flags = [&sim_flags[..], &["--numa-nodes", "2", "--cpus-per-numa", "4"]].concat();
    let (sim, mock, snap) = sim_and_mock(sb, &sim_flags, &["--preferred", "ignore-numa", "-o", "json"]).await;
    assert_eq!(snap["allocatable"], 4, "{snap}");
    (sim, mock)
}

/// kubelet-sim with `sim_flags` and a mock plugin of 4 devices on 2 NUMA nodes
/// with `mock_flags`, once the sim has the plugin's first snapshot (returned).
async fn sim_and_mock(sb: &Sandbox, sim_flags: &[&str], mock_flags: &[&str]) -> (Child, Child, Value) {
    let dir = sb.path().to_str().unwrap();
    let mut sim = Child::dpctl(&[&["kubelet-sim", "--dir", dir, "-o", "json"], sim_flags].concat());
    sim.event("started").await;
    let mock_base = ["mock-plugin", "--dir", dir, "--resource", DEV, "--devices", "4", "--numa-nodes", "2"];
    let mock = Child::dpctl(&[&mock_base[..], mock_flags].concat());
    let snap = sim.event("snapshot").await;
    (sim, mock, snap)
}

async fn admit(sb: &Sandbox, extra: &[&str]) -> (i32, Value) {
    let dir = sb.path().to_str().unwrap();
    let mut args = vec!["kubelet-sim", "admit", "--dir", dir, "-o", "json"];
    args.extend_from_slice(extra);
    let r = dpctl(&args).await;
    assert!(r.stderr.is_empty() || r.code != 2, "{}", r.stderr);
    (r.code, r.json())
}

fn hints(decision: &Value, provider: &str) -> Vec<String> {
    let h = decision["hints"].as_array().unwrap().iter().find(|h| h["provider"] == provider).unwrap();
    h["hints"]
        .as_array()
        .map(|l| l.iter().map(|x| x["hint"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Worked example (a), request 3 (docs/topology.md §5): `[{11 true}]`;
/// single-numa-node rejects with TopologyAffinityError (§2.8), best-effort
/// admits `{11 true}` and spreads the devices over both nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_numa_node_rejects_what_best_effort_admits_and_the_report_says_why() {
    let sb = Sandbox::new();
    let (mut sim, _mock) = node(&sb, "single-numa-node").await;
    let pod = ["--allocate", "example.com/dev=3", "--name", "p3"];

    // Dry run first: the same verdict, nothing allocated.
    let (code, dry) = admit(&sb, &[&pod[..], &["--dry-run"]].concat()).await;
    assert_eq!(code, 1);
    assert_eq!(dry["topology"]["dry_run"], true);
    assert_eq!(dry["reason"], "TopologyAffinityError");

    let (code, v) = admit(&sb, &pod).await;
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["admitted"], false);
    assert_eq!(v["reason"], "TopologyAffinityError");
    assert_eq!(v["message"], "Resources cannot be allocated with Topology locality");
    let d = &v["topology"]["decisions"][0];
    assert_eq!(d["container"], "c0");
    assert_eq!(hints(d, "device"), ["{11 true}"]);
    assert_eq!(d["best"]["hint"], "{nil false}");
    assert_eq!(d["admit"], false);
    // The JSON form: NUMA ids and the decimal mask current kubelets log.
    let h = &d["hints"][0]["hints"][0];
    assert_eq!((h["numa_nodes"].clone(), h["numa_node_affinity"].clone()), (serde_json::json!([0, 1]), 3.into()));
    // The event stream (live view) shows the rejection.
    let ev = sim.event("admission_rejected").await;
    assert_eq!(ev["reason"], "TopologyAffinityError", "{ev}");
    // The table says it too.
    let dir = sb.path().to_str().unwrap();
    let t = dpctl(&["kubelet-sim", "admit", "--dir", dir, "--allocate", "example.com/dev=3", "--color", "never"]).await;
    assert!(t.stdout.contains("TopologyAffinityError"), "{}", t.stdout);
    assert!(t.stdout.contains("{11 true}") && t.stdout.contains("{nil false}") && t.stdout.contains("reject"));
    drop(sim);

    let sb = Sandbox::new();
    let (_sim, _mock) = node(&sb, "best-effort").await;
    let (code, v) = admit(&sb, &pod).await;
    assert_eq!(code, 0, "{v}");
    let d = &v["topology"]["decisions"][0];
    assert_eq!(hints(d, "device"), ["{11 true}"]);
    assert_eq!(d["best"]["hint"], "{11 true}");
    // needed 3 < 4 aligned: GetPreferredAllocation(aligned, {}, 3) (§3).
    let r = &v["containers"][0]["resources"][0];
    assert_eq!(r["preferred"]["available"].as_array().unwrap().len(), 4);
    assert_eq!(r["preferred"]["size"], 3);
    let placed: Vec<i64> = v["topology"]["placements"][0]["numa"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["numa"].as_i64().unwrap())
        .collect();
    assert_eq!(placed, [0, 1], "devices on both nodes");
}

/// Worked example (a) under single-numa-node with a Guaranteed container:
/// the device and CPU hints agree on NUMA 0, devices taken without
/// GetPreferredAllocation (needed = |aligned|), exclusive CPUs on node 0,
/// and PodResources reports them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aligned_devices_and_cpus_show_in_podresources() {
    let sb = Sandbox::new();
    let (_sim, _mock) = node(&sb, "single-numa-node").await;
    let (code, v) =
        admit(&sb, &["--allocate", "example.com/dev=2", "--cpu", "2", "--memory", "1Gi", "--name", "g"]).await;
    assert_eq!(code, 0, "{v}");
    let d = &v["topology"]["decisions"][0];
    assert_eq!(hints(d, "device"), ["{01 true}", "{10 true}", "{11 false}"]);
    assert_eq!(hints(d, "cpu"), ["{01 true}", "{10 true}", "{11 false}"]);
    assert_eq!(d["best"]["hint"], "{01 true}");
    let r = &v["containers"][0]["resources"][0];
    assert_eq!(r["preferred"], Value::Null, "needed = |aligned|: no GetPreferredAllocation");
    assert_eq!(v["topology"]["cpus"]["c0"], serde_json::json!([1, 2]));

    let sock = sb.join("pod-resources.sock");
    let sock = sock.to_str().unwrap();
    let list = dpctl(&["podresources", "list", "--socket", sock, "-o", "json"]).await;
    let l = list.expect_code(0).json();
    let c = &l["pod_resources"][0]["containers"][0];
    assert_eq!(c["cpu_ids"], serde_json::json!([1, 2]));
    assert_eq!(c["devices"][0]["numa_nodes"], serde_json::json!([0]));
    let free = dpctl(&["podresources", "free", "--socket", sock, "--cpus-per-numa", "4", "-o", "json"]).await;
    let f = free.expect_code(0).json();
    let per = &f["cpus"]["per_numa"];
    assert_eq!((per[0]["numa_node"].clone(), per[0]["free"].clone()), (0.into(), 1.into()), "{f}");
    assert_eq!((per[1]["numa_node"].clone(), per[1]["free"].clone()), (1.into(), 4.into()), "{f}");
}

/// A device limit of 0 (`example.com/dev: 0`, as rendered Helm charts give)
/// still gets device hints in every release (getContainerDeviceRequest keeps
/// it; every mask satisfies 0 devices, single nodes preferred; topology_hints.go
/// of 1.34-1.37), and they enter the merge: with 5 static CPUs, which need both
/// nodes ({11 true}), the equal-mask rule makes every merged hint
/// non-preferred ({11 false} is the best), so `restricted` rejects the pod
/// that it admits without the device key. (The sim gave no hints for a limit of 0 before: it admitted.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_limit_of_0_still_gives_hints_that_can_reject_the_pod_in_every_release() {
    for version in ["1.35", "1.37"] {
        let sb = Sandbox::new();
        let sim_flags = [
            "--topology-manager-policy",
            "restricted",
            "--cpu-manager-policy",
            "static",
            "--reserved-cpus",
            "0",
            "--numa-nodes",
            "2",
            "--cpus-per-numa",
            "4",
            "--kubelet-version",
            version,
        ];
        let (_sim, _mock, _) = sim_and_mock(&sb, &sim_flags, &[]).await;
        let (code, v) =
            admit(&sb, &["--allocate", "example.com/dev=0", "--cpu", "5", "--memory", "1Gi", "--name", "zero"]).await;
        assert_eq!(code, 1, "{version}: {v}");
        assert_eq!(v["reason"], "TopologyAffinityError", "{version}");
        let d = &v["topology"]["decisions"][0];
        assert_eq!(hints(d, "device"), ["{01 true}", "{10 true}", "{11 false}"], "{version}");
        assert_eq!(hints(d, "cpu"), ["{11 true}"], "{version}");
        // Non-preferred: the one whose size is nearest the CPUs' narrowest preferred hint.
        assert_eq!(d["best"]["hint"], "{11 false}", "{version}");
        // The same CPUs without the device key: admitted on both nodes.
        let (code, v) =
            admit(&sb, &["--allocate", "example.com/other=1", "--cpu", "5", "--memory", "1Gi", "--name", "cpu"]).await;
        assert_eq!(code, 0, "{version}: {v}");
        assert_eq!(v["topology"]["decisions"][0]["best"]["hint"], "{11 true}", "{version}");
    }
}

/// The kubelet's refusals at startup (docs/topology.md §1 NUMA limit, §2.6): exit 2 with its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_topology_flags_are_refused_like_the_kubelet() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let r = dpctl(&["kubelet-sim", "--dir", dir, "--topology-manager-policy", "restricted", "--numa-nodes", "9"]).await;
    assert!(r.expect_code(2).stderr.contains("unsupported on machines with more than 8 NUMA Nodes"), "{}", r.stderr);
    let r =
        dpctl(&["kubelet-sim", "--dir", dir, "--topology-manager-policy-options", "max-allowable-numa-nodes=4"]).await;
    assert!(r.expect_code(2).stderr.contains("should not be less than 8"), "{}", r.stderr);
    let r = dpctl(&["kubelet-sim", "--dir", dir, "--topology-manager-policy-options", "bogus=1"]).await;
    assert!(r.expect_code(2).stderr.contains("unknown Topology Manager Policy option"), "{}", r.stderr);
    let r = dpctl(&[
        "kubelet-sim",
        "--dir",
        dir,
        "--topology-manager-policy",
        "best-effort",
        "--topology-manager-policy-options",
        "prefer-closest-numa-nodes=true",
    ])
    .await;
    assert!(r.expect_code(2).stderr.contains("error getting NUMA distances"), "{}", r.stderr);
    let r = dpctl(&["kubelet-sim", "--dir", dir, "--cpu-manager-policy", "static"]).await;
    assert!(r.expect_code(2).stderr.contains("reserved CPU"), "{}", r.stderr);
    assert!(!sb.join("kubelet.sock").exists(), "a refused sim serves nothing");
}

async fn node_with_scope(sb: &Sandbox, scope: &str) -> (Child, Child) {
    let flags = ["--topology-manager-policy", "single-numa-node", "--topology-manager-scope", scope];
    let (sim, mock, _) = sim_and_mock(sb, &flags, &[]).await;
    (sim, mock)
}

/// Pod scope (docs/topology.md §2.7): one merge for the pod, whose request is
/// max(app + sidecars, init + sidecars before it) = max(2 + 1, 1) = 3 devices:
/// more than one NUMA node holds, so single-numa-node rejects the pod. In
/// container scope each container (1, 1, 2 devices) fits a node and is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_scope_judges_init_containers_and_sidecars_together() {
    let sb = Sandbox::new();
    let manifest = sb.join("pod.yaml");
    let pod = sidecar_pod("{name: scoped}", DEV, ["init", "proxy", "app"], "{example.com/dev: 2}");
    std::fs::write(&manifest, pod).unwrap();
    let m = manifest.to_str().unwrap();
    let _node = node_with_scope(&sb, "pod").await;
    let (code, v) = admit(&sb, &[m]).await;
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["reason"], "TopologyAffinityError");
    let d = &v["topology"]["decisions"];
    assert_eq!(d.as_array().unwrap().len(), 1);
    assert_eq!(d[0]["container"], Value::Null);
    assert_eq!(d[0]["hints"][0]["request"], 3);
    assert_eq!(hints(&d[0], "device"), ["{11 true}"]);

    let sb2 = Sandbox::new();
    let _node2 = node_with_scope(&sb2, "container").await;
    let (code, v) = admit(&sb2, &[m]).await;
    assert_eq!(code, 0, "{v}");
    let d = v["topology"]["decisions"].as_array().unwrap().clone();
    let who: Vec<&str> = d.iter().map(|x| x["container"].as_str().unwrap()).collect();
    assert_eq!(who, ["init", "proxy", "app"]);
    // The sidecar reuses the init container's device, so the app's 2 fit one node.
    assert_eq!(v["containers"][1]["resources"][0]["reused"], v["containers"][0]["resources"][0]["devices"]);
    assert!(d.iter().all(|x| x["admit"] == true));
}

/// `dpctl smoke --topology-manager-policy`: a plugin with 2 devices per node
/// fails admission of 3 devices under single-numa-node (TopologyAffinityError,
/// with the hints in the evidence) and passes under best-effort.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_admits_under_the_chosen_policy() {
    let bin = crate::support::dpctl_bin();
    let plugin = [bin, "mock-plugin", "--dir", "{dir}", "--resource", DEV, "--devices", "4", "--numa-nodes", "2"];
    let run = |policy: &'static str| {
        let mut args =
            vec!["smoke", "--topology-manager-policy", policy, "--request", "3", "--settle", "1s", "-o", "json", "--"];
        args.extend_from_slice(&plugin);
        async move { dpctl(&args).await }
    };
    let admission =
        |v: &Value| v["steps"].as_array().unwrap().iter().find(|s| s["name"] == "admission").unwrap().clone();
    let r = run("single-numa-node").await;
    let step = admission(&r.expect_code(1).json());
    assert_eq!(step["outcome"], "fail");
    let ev = step["evidence"].as_str().unwrap();
    assert!(
        ev.contains("TopologyAffinityError") && ev.contains("hints [{11 true}] → best {nil false} (reject)"),
        "{ev}"
    );
    let r = run("best-effort").await;
    let step = admission(&r.json());
    assert_eq!(step["outcome"], "pass", "{step}");
    assert!(step["evidence"].as_str().unwrap().contains("best {11 true} (admit)"), "{step}");
}
