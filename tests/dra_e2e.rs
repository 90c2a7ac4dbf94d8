//! DRA drivers prepared under kubelet-sim end to end, with the API objects
//! they need: `kubelet-sim --api-objects` serves the claims, the Node and the
//! ResourceSlices in-process (docs/dra.md §6), a driver is pointed at the
//! kubeconfig the sim writes in the kubelet's root, publishes its slices
//! there and GETs each claim before it prepares it. The peers are the Go
//! driver on the upstream `kubeletplugin` helper (conformance/dra-driver;
//! without it the suite's one `SKIPPED` line, a failure under CI=true) and
//! `dpctl dra mock --kubeconfig`. Each test names the releases it plays.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Child, Sandbox, dpctl};

const GO_DRIVER: &str = "gpu.dpctl.example";
const NODE_UID: &str = "node-uid-1";

/// The API objects: the Node and a claim allocated on `driver`'s `pool`/`device`, reserved for pod-uid-1.
fn objects(driver: &str, pool: &str, device: &str) -> String {
    format!(
        "\
apiVersion: v1
kind: Node
metadata: {{name: node-1, uid: {NODE_UID}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: gpu-claim, namespace: team-a, uid: claim-uid-1}}
spec:
  devices:
    requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]
status:
  allocation:
    devices:
      results: [{{request: gpu, driver: {driver}, pool: {pool}, device: {device}}}]
  reservedFor: [{{resource: pods, name: trainer, uid: pod-uid-1}}]
"
    )
}

/// A pod naming the claim only: the sim reads it from its API.
const POD: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: team-a, uid: pod-uid-1}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: gpu-claim}]
  containers:
  - name: main
    resources: {claims: [{name: gpu}]}
";

/// A node root: `device-plugins/`, `plugins_registry/`, the objects file, and a sim serving them.
pub(crate) struct Node {
    pub(crate) sim: Child,
    pub(crate) root: PathBuf,
    pub(crate) dir: String,
    pub(crate) registry: String,
}

impl Node {
    pub(crate) async fn start(sb: &Sandbox, version: &str, objects: &str) -> Node {
        let root = sb.path().to_path_buf();
        let file = sb.join("objects.yaml");
        std::fs::write(&file, objects).unwrap();
        let dir = format!("{}/device-plugins", root.display());
        let registry = format!("{}/plugins_registry", root.display());
        std::fs::create_dir_all(&registry).unwrap();
        let mut sim = Child::dpctl(&[
            "kubelet-sim",
            "--dir",
            &dir,
            "--registry-dir",
            &registry,
            "--api-objects",
            file.to_str().unwrap(),
            "--kubelet-version",
            version,
            "-o",
            "json",
        ]);
        sim.event("started").await;
        Node { sim, root, dir, registry }
    }

    pub(crate) fn kubeconfig(&self) -> String {
        self.root.join("kubeconfig").display().to_string()
    }

    pub(crate) fn file(&self, name: &str, text: &str) -> String {
        let p = self.root.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    /// The slices the sim's API holds, as `dpctl apiserver slices` reads them.
    pub(crate) async fn slices(&self) -> Value {
        let r = dpctl(&["apiserver", "slices", "--dir", self.root.to_str().unwrap(), "-o", "json"]).await;
        r.expect_code(0).json()
    }

    /// Polls the record until `f` holds on the slices (bounded).
    pub(crate) async fn slices_until(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut rx = tokio::time::interval(Duration::from_millis(100));
        loop {
            let s = self.slices().await;
            if f(&s) {
                return s;
            }
            assert!(tokio::time::Instant::now() < deadline, "{what}: the slices are {s}");
            rx.tick().await;
        }
    }

    /// admit, PodResources, checkpoint show/verify, delete: what a user runs. Returns the admit answer.
    pub(crate) async fn admit_and_check(&self, pod: &str, driver: &str, device: &str) -> Value {
        let r = dpctl(&["kubelet-sim", "admit", "--dir", &self.dir, pod, "-o", "json"]).await;
        let v = r.expect_code(0).json();
        assert_eq!(v["dra"]["error"], Value::Null, "{v}");
        assert_eq!(v["containers"][0]["started"], true, "{v}");
        let sock = format!("{}/pod-resources.sock", self.dir);
        let pr = dpctl(&["podresources", "list", "--socket", &sock, "-o", "json"]).await;
        let pv = pr.expect_code(0).json();
        let text = pv.to_string();
        assert!(text.contains("dynamic_resources") && text.contains(driver) && text.contains(device), "{pv}");
        let state = self.root.join("dra_manager_state");
        let state = state.to_str().unwrap();
        let show = dpctl(&["checkpoint", "show", "--dra", state, "-o", "json"]).await;
        let sv = show.expect_code(0).json();
        assert!(sv.to_string().contains(device), "{sv}");
        let ck = dpctl(&["checkpoint", "verify", "--dra", state, "-o", "json"]).await;
        let cv = ck.expect_code(0).json();
        assert_eq!(cv["claims"][0]["ClaimUID"], "claim-uid-1", "{cv}");
        v
    }
}

fn go_driver(bin: &Path, node: &Node) -> Child {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--kubeconfig", &node.kubeconfig(), "--node-name", "node-1", "--driver-name", GO_DRIVER]);
    cmd.args(["--registry-dir", &node.registry]);
    cmd.arg("--plugin-dir").arg(node.root.join("plugins").join(GO_DRIVER));
    cmd.arg("--cdi-dir").arg(node.root.join("cdi"));
    Child::spawn(cmd, crate::support::Stderr::Keep).patience(Duration::from_secs(30))
}

/// 1.37 (and the claim lookup the same 1.34-1.37): the Go driver on the
/// real helper starts against the sim's API, publishes its slice (owned by
/// the Node), registers, and is prepared for a pod whose claim lives only in
/// the API; PodResources and the checkpoint show it, the CRC verifies, and
/// deleting the pod unprepares it (its CDI spec goes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_driver_is_prepared_under_kubelet_sim_from_the_sims_api_1_37() {
    let Some(bin) = crate::support::go_built::dra_driver_or_skip("dra_e2e") else { return };
    let sb = Sandbox::new();
    let mut node = Node::start(&sb, "1.37", &objects(GO_DRIVER, "node-1", "gpu-1")).await;
    let mut driver = go_driver(&bin, &node);
    driver.line_with("started").await;
    let reg = node.sim.event("dra_registered").await;
    assert_eq!(reg["driver"], GO_DRIVER, "{reg}");
    let slices = node.slices_until("the driver's slice", |s| s.as_array().is_some_and(|a| a.len() == 1)).await;
    let s = &slices[0];
    assert_eq!((s["spec"]["driver"].as_str(), s["spec"]["nodeName"].as_str()), (Some(GO_DRIVER), Some("node-1")));
    assert_eq!(s["metadata"]["ownerReferences"][0]["uid"], NODE_UID, "{s}");
    let pod = node.file("pod.yaml", POD);
    let v = node.admit_and_check(&pod, GO_DRIVER, "gpu-1").await;
    let want = format!("{GO_DRIVER}/gpu=claim-uid-1-gpu-1");
    assert_eq!(v["dra"]["cdi_devices"]["main"], json!([want]), "{v}");
    let spec = node.root.join("cdi").join(format!("{GO_DRIVER}-claim-uid-1.json"));
    assert!(spec.is_file(), "the driver wrote its CDI spec");
    let d = dpctl(&["kubelet-sim", "delete", "--dir", &node.dir, "-n", "team-a", "trainer"]).await;
    assert!(d.expect_code(0).stdout.contains("unprepared team-a/gpu-claim"), "{}", d.stdout);
    assert!(!spec.exists(), "unprepare removed the CDI spec");
    driver.stop().await;
    node.sim.terminate();
}

/// 1.36: a claim given in the pod's manifest wins over the objects file and
/// is stored in the sim's API first (the driver GETs what the sim
/// prepares); a claim neither holds fails with the kubelet's `fetch
/// ResourceClaim` text. The mock needs no API for this: the store is read
/// back from the sim's record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_claim_wins_and_is_stored_in_the_sims_api_1_36() {
    let sb = Sandbox::new();
    let node = Node::start(&sb, "1.36", &objects("gpu.example.com", "pool-0", "dev-0")).await;
    let missing = node.file("missing.yaml", &POD.replace("resourceClaimName: gpu-claim", "resourceClaimName: other"));
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &node.dir, &missing]).await;
    let want =
        "prepare dynamic resources: fetch ResourceClaim other: resourceclaims.resource.k8s.io \"other\" not found";
    assert!(r.expect_code(1).stdout.contains(want), "{}", r.stdout);
    dpctl(&["kubelet-sim", "delete", "--dir", &node.dir, "-n", "team-a", "trainer"]).await.expect_code(0);
    let given = format!(
        "{POD}---\n{}",
        objects("gpu.example.com", "pool-0", "dev-3")
            .split("---\n")
            .nth(1)
            .unwrap()
            .replace("claim-uid-1", "claim-uid-2")
            // No namespace in the document: it is the pod's (team-a), in the API too.
            .replace("namespace: team-a, ", "")
    );
    let pod = node.file("pod.yaml", &given);
    // No driver registered: the preparation fails, but the claim is stored first.
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &node.dir, &pod]).await;
    assert!(r.expect_code(1).stdout.contains("DRA driver gpu.example.com is not registered"), "{}", r.stdout);
    let w = dpctl(&["apiserver", "writes", "--dir", node.root.to_str().unwrap(), "-o", "json"]).await;
    let writes = w.expect_code(0).json();
    let last = writes.as_array().and_then(|a| a.last()).cloned().unwrap_or_default();
    assert_eq!(
        (last["verb"].as_str(), last["resource"].as_str()),
        (Some("update"), Some("resourceclaims")),
        "{writes}"
    );
    assert_eq!(last["object"]["metadata"]["uid"], "claim-uid-2", "{last}");
    assert_eq!(last["object"]["metadata"]["namespace"], "team-a", "{last}");
    assert_eq!(last["object"]["status"]["allocation"]["devices"]["results"][0]["device"], "dev-3");
}

/// A pod whose claim comes from a template, with the generated name in
/// `status.resourceClaimStatuses` (as the resource claim controller writes
/// it): the sim reads that claim from its API and checks that the pod
/// controls it, in the words of each release (`pod ... (pod is not owner)`
/// in 1.34-1.35, `Pod ... (Pod is not owner)` from 1.36).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_claim_is_read_by_its_generated_name_and_owner_checked_1_35_and_1_37() {
    let template = POD.replace("resourceClaimName: gpu-claim", "resourceClaimTemplateName: gpu-template")
        + "status:\n  resourceClaimStatuses: [{name: gpu, resourceClaimName: gpu-claim}]\n";
    for (version, word) in [("1.35", "pod"), ("1.37", "Pod")] {
        let sb = Sandbox::new();
        let node = Node::start(&sb, version, &objects("gpu.example.com", "pool-0", "dev-0")).await;
        let pod = node.file("pod.yaml", &template);
        let r = dpctl(&["kubelet-sim", "admit", "--dir", &node.dir, &pod]).await;
        let want =
            format!("ResourceClaim team-a/gpu-claim was not created for {word} team-a/trainer ({word} is not owner)");
        assert!(r.expect_code(1).stdout.contains(&want), "{version}: {}", r.stdout);
        node.sim.terminate();
    }
    // Owned by the pod: the claim passes the checks and waits for its driver.
    let owned = objects("gpu.example.com", "pool-0", "dev-0").replace(
        "uid: claim-uid-1}",
        "uid: claim-uid-1, ownerReferences: [{apiVersion: v1, kind: Pod, name: trainer, uid: pod-uid-1, controller: true}]}",
    );
    let sb = Sandbox::new();
    let node = Node::start(&sb, "1.37", &owned).await;
    let pod = node.file("pod.yaml", &template);
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &node.dir, &pod]).await;
    assert!(r.expect_code(1).stdout.contains("DRA driver gpu.example.com is not registered"), "{}", r.stdout);
    // No status entry: the kubelet's `ResourceClaim not created yet`, refused before the sim (exit 2).
    let bare = node.file(
        "bare.yaml",
        &template.replace("status:\n  resourceClaimStatuses: [{name: gpu, resourceClaimName: gpu-claim}]\n", ""),
    );
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &node.dir, &bare]).await;
    assert!(r.expect_code(2).stderr.contains("pod \"team-a/trainer\": ResourceClaim not created yet"), "{}", r.stderr);
}

const MOCK: &str = "gpu.example.com";

fn mock_driver(node: &Node, extra: &[&str]) -> Child {
    let root = node.root.to_str().unwrap().to_string();
    let kc = node.kubeconfig();
    let mut args =
        vec!["dra", "mock", MOCK, "--dir", &root, "--kubeconfig", &kc, "--node-name", "node-1", "-o", "json"];
    args.extend_from_slice(extra);
    Child::dpctl(&args)
}

/// 1.34: `dra mock --kubeconfig` publishes its pool as a slice owned by the
/// Node (created; current on a restart; updated when its devices change),
/// registers, and is prepared under the sim with the device the claim's
/// allocation names (not one it picks); PodResources and the checkpoint
/// show it, the CRC verifies, deletion unprepares it. Its refusals are the
/// helper's: a missing claim, an unallocated one, a replaced UID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mock_driver_publishes_and_is_prepared_from_the_sims_api_1_34() {
    let sb = Sandbox::new();
    let idle = "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: idle, namespace: team-a, uid: idle-uid}\n";
    let mut node = Node::start(&sb, "1.34", &(objects(MOCK, "pool-0", "dev-2") + idle)).await;
    let mut mock = mock_driver(&node, &[]);
    let published = mock.event("published").await;
    assert_eq!(published["writes"][0][0], "create", "{published}");
    mock.event("serving").await;
    node.sim.event("dra_registered").await;
    let slices = node.slices().await;
    assert_eq!(slices.as_array().map(Vec::len), Some(1), "{slices}");
    let s = &slices[0];
    assert_eq!(s["metadata"]["ownerReferences"][0]["uid"], NODE_UID, "{s}");
    assert!(s["metadata"]["name"].as_str().unwrap().starts_with("00000-gpu.example.com-node-1-"), "{s}");
    assert_eq!(s["spec"]["devices"].as_array().map(Vec::len), Some(4), "{s}");

    let pod = node.file("pod.yaml", POD);
    let v = node.admit_and_check(&pod, MOCK, "dev-2").await;
    assert_eq!(v["dra"]["cdi_devices"]["main"], json!(["gpu.example.com/claim=pool-0-dev-2"]), "{v}");
    let d = dpctl(&["kubelet-sim", "delete", "--dir", &node.dir, "-n", "team-a", "trainer"]).await;
    assert!(d.expect_code(0).stdout.contains("unprepared team-a/gpu-claim"), "{}", d.stdout);
    // A kubelet restart wipes the node's slices; the mock publishes its own again (bounded wait).
    dpctl(&["kubelet-sim", "restart", "--dir", &node.dir, "--wait", "20s"]).await.expect_code(0);
    let wiped = node.sim.event("dra_slices_wiped").await;
    assert_eq!((wiped["reason"].as_str(), wiped["slices"].as_array().map(Vec::len)), (Some("restart"), Some(1)));
    let again = mock.event("published").await;
    assert_eq!(again["writes"][0][0], "create", "{again}");
    node.slices_until("the slice published again", |s| s.as_array().is_some_and(|a| a.len() == 1)).await;

    let reg = node.registry.clone();
    let prepare = |claim: &'static str| {
        let reg = reg.clone();
        async move { dpctl(&["dra", "prepare", "--driver", MOCK, "--registry-dir", &reg, "--claim", claim]).await }
    };
    for (claim, want) in [
        (
            "team-a/none/u-1",
            "get resource claims: retrieve claim team-a/none: the server could not find the requested resource",
        ),
        ("team-a/idle/idle-uid", "get resource claims: claim team-a/idle not allocated"),
        ("team-a/gpu-claim/other-uid", "get resource claims: claim team-a/gpu-claim got replaced"),
    ] {
        let r = prepare(claim).await;
        assert_ne!(r.code, 0, "{claim}");
        assert!(r.stderr.contains(want) || r.stdout.contains(want), "{claim}: {} {}", r.stdout, r.stderr);
    }

    // A restart publishes nothing new; other devices update the slice (pool generation bumped).
    mock.stop().await;
    let mut again = mock_driver(&node, &[]);
    let published = again.event("published").await;
    assert_eq!(published["writes"], json!([]), "{published}");
    again.stop().await;
    let mut fewer = mock_driver(&node, &["--devices", "2"]);
    let published = fewer.event("published").await;
    assert_eq!(published["writes"][0][0], "update", "{published}");
    let slices = node.slices().await;
    assert_eq!(slices[0]["spec"]["pool"]["generation"], 2, "{slices}");
    assert_eq!(slices[0]["spec"]["devices"].as_array().map(Vec::len), Some(2), "{slices}");
    fewer.stop().await;
    node.sim.terminate();
}

/// A KEP-5004 pod: it asks for `example.com/gpu`, and its status names the
/// claim the scheduler made for it, whose request `gpu-req` serves the container.
const EXT_POD: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: ext, namespace: team-a, uid: pod-uid-2}
spec:
  containers:
  - name: main
    resources: {limits: {example.com/gpu: 1}}
status:
  extendedResourceClaimStatus:
    resourceClaimName: ext-claim
    requestMappings: [{containerName: main, resourceName: example.com/gpu, requestName: gpu-req}]
";

/// The claim of [`EXT_POD`], allocated on `driver`'s `pool`/`device`.
fn ext_claim(driver: &str, pool: &str, device: &str) -> String {
    format!(
        "---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: ext-claim, namespace: team-a, uid: claim-uid-1}}
status:
  allocation:
    devices:
      results: [{{request: gpu-req, driver: {driver}, pool: {pool}, device: {device}}}]
  reservedFor: [{{resource: pods, name: ext, uid: pod-uid-2}}]
"
    )
}

/// The Node alone (the KEP-5004 claim reuses claim-uid-1 so that the checks of `admit_and_check` hold).
fn node_only() -> String {
    objects(MOCK, "p", "d").split("---\n").next().unwrap().to_string()
}

/// 1.36 (beta, on) and 1.37 (GA): a KEP-5004 pod is served by the DRA
/// manager: the mock driver is prepared for the claim of
/// `extendedResourceClaimStatus`, the container gets the CDI IDs of its
/// mapped request, and the device plugin serving `example.com/gpu` gets no
/// Allocate (the device manager skips a mapped resource). 1.35 (alpha, off)
/// ignores the status: the device plugin allocates and no driver is called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kep_5004_pod_is_served_by_the_mock_driver_from_1_36_and_by_the_device_plugin_in_1_35() {
    for version in ["1.35", "1.36", "1.37"] {
        let sb = Sandbox::new();
        let mut node = Node::start(&sb, version, &(node_only() + &ext_claim(MOCK, "pool-0", "dev-1"))).await;
        let record = sb.join("calls.jsonl");
        let mut mock = mock_driver(&node, &["--record", record.to_str().unwrap()]);
        mock.event("serving").await;
        node.sim.event("dra_registered").await;
        let mut plugin =
            Child::dpctl(&["mock-plugin", "--dir", &node.dir, "--resource", "example.com/gpu", "-o", "json"]);
        plugin.event("registered").await;
        let pod = node.file("ext.yaml", EXT_POD);
        if version == "1.35" {
            let r = dpctl(&["kubelet-sim", "admit", "--dir", &node.dir, &pod, "-o", "json"]).await;
            let v = r.expect_code(0).json();
            assert_eq!(v["dra"], Value::Null, "{version}: no DRA on 1.35: {v}");
            assert_eq!(v["containers"][0]["resources"][0]["resource"], "example.com/gpu", "{version}: {v}");
            assert!(!std::fs::read_to_string(&record).unwrap_or_default().contains("NodePrepareResources"));
        } else {
            let v = node.admit_and_check(&pod, MOCK, "dev-1").await;
            assert_eq!(v["dra"]["cdi_devices"]["main"], json!(["gpu.example.com/claim=pool-0-dev-1"]), "{v}");
            assert_eq!(
                v["containers"][0]["resources"],
                json!([]),
                "{version}: the device manager allocates nothing: {v}"
            );
            let calls = std::fs::read_to_string(&record).unwrap();
            assert!(calls.contains("\"gpu-req\""), "{version}: the device carries its request: {calls}");
            let d = dpctl(&["kubelet-sim", "delete", "--dir", &node.dir, "-n", "team-a", "ext"]).await;
            assert!(d.expect_code(0).stdout.contains("unprepared team-a/ext-claim"), "{version}: {}", d.stdout);
        }
        plugin.stop().await;
        mock.stop().await;
        node.sim.terminate();
    }
}

/// 1.37: the Go driver on the real helper serves a KEP-5004 pod under the
/// sim: prepared for the claim of `extendedResourceClaimStatus`, the
/// container gets its CDI ID, PodResources and the checkpoint show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_driver_serves_a_kep_5004_pod_1_37() {
    let Some(bin) = crate::support::go_built::dra_driver_or_skip("dra_e2e") else { return };
    let sb = Sandbox::new();
    let mut node = Node::start(&sb, "1.37", &(node_only() + &ext_claim(GO_DRIVER, "node-1", "gpu-0"))).await;
    let mut driver = go_driver(&bin, &node);
    driver.line_with("started").await;
    node.sim.event("dra_registered").await;
    node.slices_until("the driver's slice", |s| s.as_array().is_some_and(|a| a.len() == 1)).await;
    let pod = node.file("ext.yaml", EXT_POD);
    let v = node.admit_and_check(&pod, GO_DRIVER, "gpu-0").await;
    assert_eq!(v["dra"]["cdi_devices"]["main"], json!([format!("{GO_DRIVER}/gpu=claim-uid-1-gpu-0")]), "{v}");
    let d = dpctl(&["kubelet-sim", "delete", "--dir", &node.dir, "-n", "team-a", "ext"]).await;
    assert!(d.expect_code(0).stdout.contains("unprepared team-a/ext-claim"), "{}", d.stdout);
    driver.stop().await;
    node.sim.terminate();
}

/// The DRA manager's health streams (docs/dra.md §2): 1.37 opens the
/// service it prefers among those advertised and shows each device's
/// health in events and `status`; 1.36 opens v1alpha1 even when the driver
/// does not advertise it (the failure reported, retried every 5 s); 1.35
/// (ResourceHealthStatus off by default) opens none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_streams_open_where_the_release_opens_them_1_35_to_1_37() {
    let sb = Sandbox::new();
    let mut node = Node::start(&sb, "1.37", &node_only()).await;
    let args = ["--unhealthy", "dev-1", "--health-interval", "100ms"];
    let mut mock = mock_driver(&node, &args);
    mock.event("serving").await;
    let opened = node.sim.event("dra_health_stream").await;
    assert_eq!((opened["service"].as_str(), &opened["error"]), (Some("v1alpha1.DRAResourceHealth"), &Value::Null));
    let bad = loop {
        let ev = node.sim.event("dra_device_health").await;
        if ev["device"] == "dev-1" {
            break ev;
        }
    };
    assert_eq!(bad["health"], "Unhealthy", "{bad}");
    let st = dpctl(&["kubelet-sim", "status", "--dir", &node.dir]).await;
    assert!(st.expect_code(0).stdout.contains("dra device gpu.example.com pool-0/dev-1: Unhealthy"), "{}", st.stdout);
    mock.stop().await;
    node.sim.terminate();

    // 1.36: a driver advertising no health service still gets a v1alpha1 stream, refused.
    let sb = Sandbox::new();
    let mut node = Node::start(&sb, "1.36", &node_only()).await;
    let mut mock = mock_driver(&node, &["--service", "v1"]);
    mock.event("serving").await;
    let failed = node.sim.event("dra_health_stream").await;
    assert_eq!(failed["service"], "v1alpha1.DRAResourceHealth", "{failed}");
    assert!(failed["error"].as_str().is_some_and(|e| e.contains("Unimplemented")), "{failed}");
    mock.stop().await;
    node.sim.terminate();

    // 1.35: advertised, but no stream.
    let sb = Sandbox::new();
    let mut node = Node::start(&sb, "1.35", &node_only()).await;
    let mut mock = mock_driver(&node, &[]);
    mock.event("serving").await;
    node.sim.event("dra_registered").await;
    let st = dpctl(&["kubelet-sim", "status", "--dir", &node.dir, "-o", "json"]).await;
    let v = st.expect_code(0).json();
    assert_eq!(v["dra"]["drivers"][0]["health"], Value::Null, "{v}");
    mock.stop().await;
    node.sim.terminate();
}

/// ResourceSlice wiping against the sim's API (the same 1.34-1.37,
/// `wipeResourceSlices` in pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go):
/// at start the node's slices go (a stale one from the file); when the
/// driver's last instance deregisters its slices go after the wiping delay
/// (30 s in the kubelet; shortened here with --dra-wiping-delay), unless it
/// registers again first. 1.35 and 1.37 are played.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_are_wiped_at_start_and_after_the_last_instance_goes_1_35_and_1_37() {
    let stale = "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: stale}\n\
                 spec: {driver: gpu.example.com, nodeName: node-1, pool: {name: pool-0, generation: 1, resourceSliceCount: 1}, devices: []}\n";
    for version in ["1.35", "1.37"] {
        let sb = Sandbox::new();
        let root = sb.path().to_str().unwrap().to_string();
        let file = sb.join("objects.yaml");
        std::fs::write(&file, node_only() + stale).unwrap();
        let (dir, registry) = (format!("{root}/device-plugins"), format!("{root}/plugins_registry"));
        std::fs::create_dir_all(&registry).unwrap();
        let args = ["kubelet-sim", "--dir", &dir, "--registry-dir", &registry, "--api-objects"];
        let mut sim = Child::dpctl(
            &[
                &args[..],
                &[file.to_str().unwrap(), "--dra-wiping-delay", "5s", "--kubelet-version", version, "-o", "json"],
            ]
            .concat(),
        );
        let wiped = sim.event("dra_slices_wiped").await;
        assert_eq!(
            (wiped["reason"].as_str(), &wiped["slices"]),
            (Some("start"), &json!(["stale"])),
            "{version}: {wiped}"
        );
        sim.event("started").await;
        let node = Node { sim, root: sb.path().to_path_buf(), dir, registry };
        assert_eq!(node.slices().await, json!([]), "{version}");
        let mut node = node;
        // Published, then the driver goes and comes back within the delay: nothing is wiped.
        let mut mock = mock_driver(&node, &[]);
        mock.event("serving").await;
        node.sim.event("dra_registered").await;
        mock.stop().await;
        node.sim.event("dra_deregistered").await;
        let mut back = mock_driver(&node, &[]);
        back.event("serving").await;
        node.sim.event("dra_registered").await;
        assert_eq!(node.slices().await.as_array().map(Vec::len), Some(1), "{version}: back in time, kept");
        // Gone for good: its slice goes after the delay.
        back.stop().await;
        node.sim.event("dra_deregistered").await;
        let wiped = node.sim.event("dra_slices_wiped").await;
        assert_eq!((wiped["reason"].as_str(), wiped["driver"].as_str()), (Some("deregistered"), Some(MOCK)), "{wiped}");
        assert_eq!(node.slices().await, json!([]), "{version}");
        node.sim.terminate();
    }
}

/// Bad `--api-objects` input is refused at start with exit 2, naming the
/// flag: a missing file, a directory, an objects file that is not one, no
/// --registry-dir, and a kubeconfig in the root that dpctl did not write
/// (never replaced).
#[tokio::test]
async fn bad_api_objects_are_refused_with_exit_2() {
    let sb = Sandbox::new();
    let root = sb.path().to_str().unwrap().to_string();
    let (dir, registry) = (format!("{root}/device-plugins"), format!("{root}/plugins_registry"));
    std::fs::create_dir_all(&registry).unwrap();
    let bad = sb.join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n").unwrap();
    let good = sb.join("good.yaml");
    std::fs::write(&good, node_only()).unwrap();
    let missing = sb.join("missing.yaml");
    for (file, want) in [
        (missing.to_str().unwrap(), "--api-objects"),
        (root.as_str(), "--api-objects"),
        (bad.to_str().unwrap(), "v1 Secret is not served"),
    ] {
        let r = dpctl(&["kubelet-sim", "--dir", &dir, "--registry-dir", &registry, "--api-objects", file]).await;
        assert!(r.expect_code(2).stderr.contains(want), "{file}: {}", r.stderr);
    }
    let r = dpctl(&["kubelet-sim", "--dir", &dir, "--api-objects", good.to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("--registry-dir"), "{}", r.stderr);
    std::fs::write(sb.join("kubeconfig"), "apiVersion: v1\nkind: Config\n").unwrap();
    let r =
        dpctl(&["kubelet-sim", "--dir", &dir, "--registry-dir", &registry, "--api-objects", good.to_str().unwrap()])
            .await;
    assert!(r.expect_code(2).stderr.contains("not written by dpctl apiserver"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(sb.join("kubeconfig")).unwrap(), "apiVersion: v1\nkind: Config\n");
}

/// 1.37: `kubelet-sim --kubeconfig` reads the claims from a separate API
/// server (here `dpctl apiserver`; `kubectl proxy` serves a real cluster the
/// same way) and writes nothing there: the mock driver, pointed at the same
/// server, is prepared for the claim only the server holds; a claim the
/// server lacks fails with the kubelet's `fetch ResourceClaim` text; an
/// https:// server is refused at start (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_reads_claims_from_another_api_server_with_kubeconfig_1_37() {
    let sb = Sandbox::new();
    let root = sb.path().to_str().unwrap().to_string();
    let file = sb.join("objects.yaml");
    std::fs::write(&file, objects(MOCK, "pool-0", "dev-3")).unwrap();
    let api_dir = sb.join("api");
    let mut api = Child::dpctl(&[
        "apiserver",
        "--dir",
        api_dir.to_str().unwrap(),
        "--objects",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let serving = api.event("serving").await;
    let kc = serving["kubeconfig"].as_str().unwrap().to_string();
    let (dir, registry) = (format!("{root}/device-plugins"), format!("{root}/plugins_registry"));
    std::fs::create_dir_all(&registry).unwrap();
    let mut sim = Child::dpctl(&[
        "kubelet-sim",
        "--dir",
        &dir,
        "--registry-dir",
        &registry,
        "--kubeconfig",
        &kc,
        "--kubelet-version",
        "1.37",
        "-o",
        "json",
    ]);
    sim.event("started").await;
    let mut mock = Child::dpctl(&[
        "dra",
        "mock",
        MOCK,
        "--dir",
        &root,
        "--kubeconfig",
        &kc,
        "--node-name",
        "node-1",
        "-o",
        "json",
    ]);
    mock.event("serving").await;
    sim.event("dra_registered").await;
    let pod = sb.join("pod.yaml");
    std::fs::write(&pod, POD).unwrap();
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &dir, pod.to_str().unwrap(), "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["dra"]["cdi_devices"]["main"], json!(["gpu.example.com/claim=pool-0-dev-3"]), "{v}");
    let missing = sb.join("missing.yaml");
    std::fs::write(
        &missing,
        POD.replace("name: trainer", "name: other").replace("resourceClaimName: gpu-claim", "resourceClaimName: nope"),
    )
    .unwrap();
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &dir, missing.to_str().unwrap()]).await;
    assert!(
        r.expect_code(1).stdout.contains("fetch ResourceClaim nope: resourceclaims.resource.k8s.io \"nope\" not found"),
        "{}",
        r.stdout
    );
    // Only the mock's slice was written there: the sim wrote nothing.
    let w = dpctl(&["apiserver", "writes", "--dir", api_dir.to_str().unwrap(), "-o", "json"]).await;
    let writes = w.expect_code(0).json();
    assert!(writes.as_array().unwrap().iter().all(|x| x["resource"] == "resourceslices"), "{writes}");
    mock.stop().await;
    sim.terminate();
    api.terminate();
    let tls = sb.join("tls-kubeconfig");
    std::fs::write(
        &tls,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://10.0.0.1:6443\"}}]\n",
    )
    .unwrap();
    let dir2 = format!("{root}/dp2");
    let r = dpctl(&["kubelet-sim", "--dir", &dir2, "--registry-dir", &registry, "--kubeconfig", tls.to_str().unwrap()])
        .await;
    assert!(r.expect_code(2).stderr.contains("uses TLS"), "{}", r.stderr);
}

/// The outcome of `dra check -o json`'s case `name`, and its evidence.
fn case(v: &Value, name: &str) -> (String, String) {
    let c = v["results"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
    (c["outcome"].as_str().unwrap().to_string(), c["evidence"].as_str().unwrap().to_string())
}

/// 1.37: `dra check` against the Go driver on the real helper, with nothing
/// but its registration socket and the kubeconfig it uses, passes every
/// case (three runs, the same verdict): it creates a claim of its own in the
/// driver's API (allocated a device the driver publishes) and deletes it.
/// Without the kubeconfig the cases that need a claim are skipped, saying
/// what to pass. A claim a running pod holds (`dra_manager_state`) is
/// refused with exit 2 naming the pod, and stays prepared; a wrong UID gets
/// the API's UID from `dra prepare --kubeconfig`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_check_passes_the_helper_built_driver_with_its_socket_and_kubeconfig_and_spares_held_claims_1_37() {
    let Some(bin) = crate::support::go_built::dra_driver_or_skip("dra_e2e") else { return };
    let sb = Sandbox::new();
    let mut node = Node::start(&sb, "1.37", &(objects(GO_DRIVER, "node-1", "gpu-1") + POD_OBJECT)).await;
    let mut driver = go_driver(&bin, &node);
    driver.line_with("started").await;
    node.sim.event("dra_registered").await;
    node.slices_until("the driver's slice", |s| s.as_array().is_some_and(|a| a.len() == 1)).await;
    let pod = node.file("pod.yaml", POD);
    node.admit_and_check(&pod, GO_DRIVER, "gpu-1").await;
    let sock = format!("{}/{GO_DRIVER}-reg.sock", node.registry);
    let kc = node.kubeconfig();
    for run in 0..3 {
        let r = dpctl(&["dra", "check", "--registration", &sock, "--kubeconfig", &kc, "-o", "json"]).await;
        let v = r.expect_code(0).json();
        assert_eq!(
            (v["totals"]["passed"].as_u64(), v["claim_source"].as_str()),
            (Some(10), Some("created")),
            "{run}: {v}"
        );
        let (outcome, evidence) = case(&v, "published");
        assert_eq!(outcome, "pass", "{v}");
        assert!(
            evidence.contains("node-1/gpu-0 prepared, each in a current ResourceSlice of gpu.dpctl.example"),
            "{v}"
        );
        assert!(v["notes"][0].as_str().unwrap().contains("allocated node-1/gpu-0 of driver gpu.dpctl.example"), "{v}");
        assert!(v["notes"][1].as_str().unwrap().starts_with("deleted ResourceClaim default/dpctl-check-"), "{v}");
    }
    let w = dpctl(&["apiserver", "writes", "--dir", node.root.to_str().unwrap(), "-o", "json"]).await;
    let claims: Vec<String> = w
        .expect_code(0)
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["resource"] == "resourceclaims")
        .map(|w| w["verb"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(claims, ["create", "delete", "create", "delete", "create", "delete"], "each claim created is deleted");
    // Without the kubeconfig only the registration is judged: not a pass (exit 1), and said so.
    let r = dpctl(&["dra", "check", "--registration", &sock]).await;
    let out = &r.expect_code(1).stdout;
    assert!(out.contains("prepare                skip"), "{out}");
    assert!(out.contains("3 passed, 0 failed, 7 skipped"), "{out}");
    assert!(
        out.contains("NOT CHECKED: Prepare and Unprepare were never judged, only the registration (exit 1)"),
        "{out}"
    );
    let v = dpctl(&["dra", "check", "--registration", &sock, "-o", "json"]).await.expect_code(1).json();
    assert_eq!((v["checked"].as_bool(), v["ok"].as_bool()), (Some(false), Some(false)), "{v}");
    assert!(out.contains("pass --kubeconfig FILE, the kubeconfig the driver uses"), "{out}");
    assert!(out.contains("retrieve claim dpctl-check/dpctl-check"), "the helper's words: {out}");
    // The claim the pod holds: refused, named, untouched.
    let spec = node.root.join("cdi").join(format!("{GO_DRIVER}-claim-uid-1.json"));
    let held = ["dra", "check", "--registration", &sock, "--claim", "team-a/gpu-claim/claim-uid-1"];
    let r = dpctl(&held).await;
    assert!(r.expect_code(2).stderr.contains("is prepared for pod pod-uid-1 (in "), "{}", r.stderr);
    let r = dpctl(&[&held[..], &["--kubeconfig", &kc]].concat()).await;
    let want = "--claim: claim team-a/gpu-claim (uid claim-uid-1) is prepared for pod team-a/trainer (uid pod-uid-1)";
    assert!(r.expect_code(2).stderr.contains(want), "{}", r.stderr);
    assert!(spec.is_file(), "the pod's claim is still prepared");
    // A wrong UID: the helper's words, the API's UID with --kubeconfig, a hint without.
    let reg = node.registry.clone();
    let wrong = ["dra", "prepare", "--driver", GO_DRIVER, "--registry-dir", &reg, "--claim", "team-a/gpu-claim/wrong"];
    let r = dpctl(&wrong).await;
    assert!(r.expect_code(4).stderr.contains("claim team-a/gpu-claim got replaced"), "{}", r.stderr);
    assert!(r.stderr.contains("hint: the driver's API server holds this claim under another UID"), "{}", r.stderr);
    let r = dpctl(&[&wrong[..], &["--kubeconfig", &kc]].concat()).await;
    let want = "holds ResourceClaim team-a/gpu-claim with UID claim-uid-1, not wrong: pass --claim team-a/gpu-claim/claim-uid-1";
    assert!(r.expect_code(4).stderr.contains(want), "{}", r.stderr);
    driver.stop().await;
    node.sim.terminate();
}

/// The pod of [`POD`] as an API object (so `dra check` can name it).
const POD_OBJECT: &str = "\
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: team-a, uid: pod-uid-1}
spec: {nodeName: node-1, containers: [{name: main, image: busybox}]}
";

/// 1.36: `dra check --kubeconfig` on `dra mock --kubeconfig` (a helper-like
/// driver): the correct mock passes (three times, the same verdict,
/// `published` included); one that leaves the claim out of its answer fails
/// prepare in the kubelet's words; one that prepares a device its slice
/// does not publish (`dev-4` of 4) fails `published`, naming the device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_check_with_kubeconfig_fails_a_helper_like_driver_that_skips_the_claim_1_36() {
    let sb = Sandbox::new();
    let node = Node::start(&sb, "1.36", &objects(MOCK, "pool-0", "dev-2")).await;
    let (reg, kc) = (node.registry.clone(), node.kubeconfig());
    let cdi = node.root.join("plugins").join(MOCK).join("cdi");
    let args = ["dra", "check", "--driver", MOCK, "--registry-dir", &reg, "--kubeconfig", &kc, "--cdi-dir"];
    let runs = [(None, 0), (None, 0), (None, 0), (Some("missing-uid"), 1), (Some("unpublished-device"), 1)];
    for (fault, code) in runs {
        let mut mock = mock_driver(&node, fault.map(|f| vec!["--fault", f]).as_deref().unwrap_or(&[]));
        mock.event("serving").await;
        let r = dpctl(&[&args[..], &[cdi.to_str().unwrap(), "-o", "json"]].concat()).await;
        let v = r.expect_code(code).json();
        let (outcome, evidence) = case(&v, "prepare");
        let published = case(&v, "published");
        match fault {
            Some("missing-uid") => {
                assert_eq!(outcome, "fail", "{v}");
                assert!(evidence.contains("NodePrepareResources skipped 1 ResourceClaims"), "{v}");
            }
            Some(_) => {
                assert_eq!((outcome.as_str(), published.0.as_str()), ("pass", "fail"), "{v}");
                let want = "prepared pool-0/dev-4, which no ResourceSlice of driver gpu.example.com publishes \
                            (pool pool-0 generation 1 has 4 devices)";
                assert!(published.1.contains(want), "{v}");
            }
            None => {
                assert_eq!((outcome.as_str(), v["totals"]["passed"].as_u64()), ("pass", Some(10)), "{v}");
                assert!(evidence.contains("pool-0/dev-0"), "the device the mock publishes: {v}");
                assert_eq!(published.0, "pass", "{v}");
            }
        }
        mock.stop().await;
    }
}

/// The shipped examples (examples/dra/): each file loads as `apiserver
/// --objects` and `kubelet-sim --api-objects` load it, and a pod from them
/// is admitted under the sim with `dra mock --kubeconfig` as the driver: its
/// container gets the claim's device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_dra_examples_load_and_their_pod_is_prepared_1_37() {
    let kinds = |f: &str| -> Vec<&'static str> {
        let objs = dpctl::apiserver::objects::load(Path::new(&format!("examples/dra/{f}")))
            .unwrap_or_else(|e| panic!("examples/dra/{f}: {e}"));
        objs.iter().map(|(k, _)| k.kind).collect()
    };
    assert_eq!(kinds("node.yaml"), ["Node", "DeviceClass"]);
    assert_eq!(kinds("claim.yaml"), ["ResourceClaim"]);
    assert_eq!(kinds("pod.yaml"), ["Pod"]);
    assert_eq!(kinds("objects.yaml").len(), 4);
    let sb = Sandbox::new();
    let mut node = Node::start(&sb, "1.37", &std::fs::read_to_string("examples/dra/objects.yaml").unwrap()).await;
    let mut mock = mock_driver(&node, &[]);
    mock.event("serving").await;
    node.sim.event("dra_registered").await;
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &node.dir, "examples/dra/pod.yaml", "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["dra"]["cdi_devices"]["main"], json!(["gpu.example.com/claim=pool-0-dev-0"]), "{v}");
    mock.stop().await;
    node.sim.terminate();
}
